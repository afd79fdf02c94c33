//! A fast path for the plainest scripts, which are most of what agents run: words, `'…'`
//! strings, the list and pipe operators, and redirections that write no file (`2>&1`,
//! `>/dev/null`). Such a script means the same to every shell, so
//! it can be split without the full parser. Anything else — a `$`, a double quote, a
//! redirection, a keyword, a newline — returns `None` and goes to the full parser, so this
//! can only make the analysis faster, never different (a test compares the two).

/// One simple command of a plain script.
pub(super) struct PlainCommand {
    pub words: Vec<String>,
    /// Its standard input is the previous command's output.
    pub piped: bool,
}

/// Bytes that can appear unquoted in a plain word.
fn word_byte(b: u8) -> bool {
    matches!(b, b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'/' | b'=' | b':' | b',' | b'+' | b'@' | b'%')
}

/// Words the shell treats as syntax when they start a command.
const RESERVED: &[&str] = &[
    "if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until", "for",
    "in", "function", "select", "time", "coproc", "{", "}", "!", "[[", "]]",
];

pub(super) fn split_plain(script: &str) -> Option<Vec<PlainCommand>> {
    let bytes = script.as_bytes();
    let mut commands = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word: Option<String> = None;
    let mut piped = false;
    let mut i = 0;
    // Ends the current command at an operator; an empty command there is a syntax error,
    // which the full parser reports.
    let finish =
        |words: &mut Vec<String>, commands: &mut Vec<PlainCommand>, piped: bool| -> Option<()> {
            let first = words.first()?;
            if first.contains('=') || RESERVED.contains(&first.as_str()) {
                return None;
            }
            commands.push(PlainCommand {
                words: std::mem::take(words),
                piped,
            });
            Some(())
        };
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b' ' | b'\t' => {
                words.extend(word.take());
                i += 1;
            }
            b'\'' => {
                let end = script[i + 1..].find('\'')? + i + 1;
                word.get_or_insert_with(String::new)
                    .push_str(&script[i + 1..end]);
                i = end + 1;
            }
            b'&' | b'|' | b';' => {
                words.extend(word.take());
                let next = bytes.get(i + 1).copied();
                let (len, pipe) = match (b, next) {
                    (b'&', Some(b'&')) | (b'|', Some(b'|')) => (2, false),
                    (b'|', Some(b'&')) | (b';', Some(b';')) | (b'&', Some(b'>')) => return None,
                    (b'|', _) => (1, true),
                    _ => (1, false),
                };
                finish(&mut words, &mut commands, piped)?;
                piped = pipe;
                i += len;
                // After `&&`, `||` or `|` the shell needs another command.
                if (len == 2 || pipe) && script[i..].trim().is_empty() {
                    return None;
                }
            }
            b'>' => {
                // Only redirections that write no file: `>&2`, `2>&1`, `>/dev/null`,
                // `2>/dev/null`. The digit before `>`, if any, is the descriptor.
                match word.take() {
                    None => {}
                    Some(fd)
                        if fd.len() == 1
                            && fd.as_bytes()[0].is_ascii_digit()
                            && bytes[i - 1] == fd.as_bytes()[0] => {}
                    Some(_) => return None,
                }
                let rest = &script[i + 1..];
                let len = if rest.len() >= 2
                    && rest.as_bytes()[0] == b'&'
                    && rest.as_bytes()[1].is_ascii_digit()
                {
                    2
                } else if rest.starts_with("/dev/null") {
                    "/dev/null".len()
                } else {
                    return None;
                };
                i += 1 + len;
                if bytes
                    .get(i)
                    .is_some_and(|&b| !matches!(b, b' ' | b'\t' | b'&' | b'|' | b';'))
                {
                    return None;
                }
            }
            _ if word_byte(b) => {
                let start = i;
                while i < bytes.len() && word_byte(bytes[i]) {
                    i += 1;
                }
                word.get_or_insert_with(String::new)
                    .push_str(&script[start..i]);
            }
            _ => return None,
        }
    }
    words.extend(word.take());
    if !words.is_empty() {
        finish(&mut words, &mut commands, piped)?;
    }
    (!commands.is_empty()).then_some(commands)
}
