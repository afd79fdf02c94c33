//! Shells other than bash: where they read a script otherwise than bash does.
//!
//! The analysis parses every script with bash's grammar. That reading is what runs only when
//! bash runs the script. Another shell splits some of the same text into other commands:
//! `cat f &>/dev/null rm -f g` is one `cat` to bash and zsh, but a background `cat` and then
//! `rm -f g` to dash; `ls f(e:'rm -f g':)` is a syntax error to bash and runs `rm` in zsh.
//! So a script another shell runs (an inner `sh -c '…'`, or an agent whose own shell is zsh)
//! is analysable only when it has none of the constructs that shell reads differently; one
//! that does is a problem, never allowed.
//!
//! The check is on the text, with quoting followed as both shells follow it up to the first
//! construct where they part; it errs towards finding a construct (a word in a comment, a
//! function definition), which only makes a script ask.

/// The grammar a shell reads a script with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Dialect {
    /// bash: the analysis's own reading.
    #[default]
    Bash,
    /// A POSIX shell: dash (Debian's and Ubuntu's `/bin/sh`), ash, busybox, yash, ksh, mksh.
    /// (ksh and mksh know some of bash's forms with other meanings; treated as POSIX, every
    /// bash-only form is a difference.)
    Posix,
    /// zsh: bash's forms, plus its own (glob qualifiers, parameter flags, precommand words).
    Zsh,
    /// A shell known only at run time (`su -c` runs the target user's): whatever a POSIX
    /// shell or zsh reads differently.
    Unknown,
}

impl Dialect {
    /// The dialect of a shell by its program name (a path's last part); `None` for a shell
    /// whose grammar cordon does not read at all (fish, csh, tcsh, nu, …).
    pub fn of_shell(name: &str) -> Option<Dialect> {
        let base = name.rsplit('/').next().unwrap_or(name);
        match base {
            "bash" => Some(Dialect::Bash),
            "zsh" => Some(Dialect::Zsh),
            "sh" | "dash" | "ash" | "busybox" | "yash" | "ksh" | "ksh93" | "mksh" | "posh"
            | "lksh" | "pdksh" => Some(Dialect::Posix),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Dialect::Bash => "bash",
            Dialect::Posix => "sh",
            Dialect::Zsh => "zsh",
            Dialect::Unknown => "the shell that runs it",
        }
    }
}

/// zsh words that run the rest of the line as a command (`repeat 2 rm -rf ~`), which bash
/// takes for a command of that name.
const ZSH_PRECOMMANDS: &[&str] = &["repeat", "noglob", "nocorrect", "-", "foreach"];

/// Whether a command named `name` means something else in `dialect` than in bash.
pub(crate) fn command_differs(name: &str, dialect: Dialect) -> Option<String> {
    (matches!(dialect, Dialect::Zsh | Dialect::Unknown) && ZSH_PRECOMMANDS.contains(&name)).then(
        || {
            format!(
                "`{name}` runs the command after it in zsh, which bash reads as a program's name"
            )
        },
    )
}

/// The first construct of `script` that `dialect` reads differently from bash, said as a
/// reason; `None` when there is none (always for bash).
pub fn differs(script: &str, dialect: Dialect) -> Option<String> {
    match dialect {
        Dialect::Bash => return None,
        Dialect::Unknown => {
            return differs(script, Dialect::Posix).or_else(|| differs(script, Dialect::Zsh));
        }
        Dialect::Posix | Dialect::Zsh => {}
    }
    let said = |what: &str| {
        Some(format!(
            "{what}, which {} reads differently from bash (the grammar cordon reads)",
            dialect.name()
        ))
    };
    let b = script.as_bytes();
    // The open `$(`s, each with the depth of parentheses inside it, and whether each was
    // opened inside double quotes.
    let mut contexts: Vec<Context> = vec![Context::Plain { parens: 0 }];
    let mut word = String::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = |k: usize| b.get(i + k).copied();
        let here = *contexts.last().unwrap_or(&Context::Plain { parens: 0 });
        match here {
            Context::Double => {
                match c {
                    b'\\' => i += 1,
                    b'"' => {
                        contexts.pop();
                    }
                    b'$' if next(1) == Some(b'(') && next(2) != Some(b'(') => {
                        contexts.push(Context::Plain { parens: 0 });
                        i += 1;
                    }
                    b'$' if dialect == Dialect::Zsh
                        && next(1) == Some(b'{')
                        && next(2) == Some(b'(') =>
                    {
                        return said("a parameter flag `${(…)…}`");
                    }
                    b'`' => contexts.push(Context::Backtick),
                    _ => {}
                }
                i += 1;
                continue;
            }
            Context::Single => {
                if c == b'\'' {
                    contexts.pop();
                }
                i += 1;
                continue;
            }
            Context::AnsiC => {
                match c {
                    b'\\' => i += 1,
                    b'\'' => {
                        contexts.pop();
                    }
                    _ => {}
                }
                i += 1;
                continue;
            }
            Context::Plain { .. } | Context::Backtick => {}
        }
        let at_word_start = word.is_empty();
        match c {
            b'\\' => {
                word.push('\\');
                i += 2;
                continue;
            }
            b'\'' => contexts.push(Context::Single),
            b'"' => contexts.push(Context::Double),
            b'`' if here == Context::Backtick => {
                contexts.pop();
            }
            b'`' => contexts.push(Context::Backtick),
            b'#' if at_word_start => {
                // A comment, to the end of the line.
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'$' if next(1) == Some(b'\'') => {
                if dialect == Dialect::Posix {
                    return said("an ANSI-C quote `$'…'`");
                }
                contexts.push(Context::AnsiC);
                word.push('$');
                i += 2;
                continue;
            }
            b'$' if next(1) == Some(b'{') && next(2) == Some(b'(') && dialect == Dialect::Zsh => {
                return said("a parameter flag `${(…)…}`");
            }
            b'$' if next(1) == Some(b'(') && next(2) != Some(b'(') => {
                contexts.push(Context::Plain { parens: 0 });
                word.clear();
                i += 2;
                continue;
            }
            b'[' if at_word_start && next(1) == Some(b'[') && dialect == Dialect::Posix => {
                return said("a conditional `[[ … ]]`");
            }
            b'&' if next(1) == Some(b'>') && dialect == Dialect::Posix => {
                return said("the redirection `&>`");
            }
            b'>' if next(1) == Some(b'&') && dialect == Dialect::Posix => {
                let target = script[i + 2..].trim_start_matches([' ', '\t']);
                let fd = target
                    .split(|c: char| c.is_whitespace() || ";&|()<>".contains(c))
                    .next()
                    .unwrap_or("");
                if fd.is_empty() || !(fd == "-" || fd.bytes().all(|d| d.is_ascii_digit())) {
                    return said("the redirection `>&` to a file");
                }
            }
            b'|' if next(1) == Some(b'&') && dialect == Dialect::Posix => {
                return said("the pipe `|&`");
            }
            b'<' if next(1) == Some(b'<') && next(2) == Some(b'<') && dialect == Dialect::Posix => {
                return said("a here-string `<<<`");
            }
            b'<' | b'>' if next(1) == Some(b'(') && dialect == Dialect::Posix => {
                return said("a process substitution `<(…)`");
            }
            b'(' => {
                if dialect == Dialect::Posix && at_word_start && next(1) == Some(b'(') {
                    return said("an arithmetic command `((…))`");
                }
                let substitution = word.ends_with(['$', '<', '>']);
                let array = word
                    .strip_suffix('=')
                    .map(|n| n.strip_suffix('+').unwrap_or(n))
                    .is_some_and(is_name);
                if dialect == Dialect::Zsh && !at_word_start && !substitution && !array {
                    return said(&format!(
                        "`{word}(…)`, a pattern with glob qualifiers (which can run commands) in zsh,"
                    ));
                }
                if let Some(Context::Plain { parens }) = contexts.last_mut() {
                    *parens += 1;
                }
                word.clear();
            }
            b')' => {
                let nested = contexts.len() > 1;
                match contexts.last_mut() {
                    Some(Context::Plain { parens }) if *parens > 0 => *parens -= 1,
                    // The end of a `$(…)`: back to what held it.
                    Some(Context::Plain { .. }) if nested => {
                        contexts.pop();
                    }
                    _ => {}
                }
                word.clear();
            }
            c if c.is_ascii_whitespace() || b";&|<>".contains(&c) => word.clear(),
            c => word.push(c as char),
        }
        i += 1;
    }
    None
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    /// Unquoted text, at the top or inside `$(…)`, with the parentheses open in it.
    Plain {
        parens: usize,
    },
    Backtick,
    Single,
    Double,
    AnsiC,
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posix_shells_differ_on_bash_only_forms() {
        for script in [
            "[[ a || rm == f ]]",
            "echo $'\\' ; rm -f f ; echo \\' #'",
            "cat README &>/dev/null rm -f f",
            "cat README &>> log",
            "cat README >& out rm -f f",
            "cat README >&$fd",
            "cat README |& cat",
            "cat <<< x",
            "diff <(ls) <(ls a)",
            "((x = 1))",
            "echo \"$(cat README &>/dev/null rm -f f)\"",
            "echo `[[ a || b ]]`",
            "# it's a comment\ncat README &>/dev/null rm -f f",
        ] {
            assert!(differs(script, Dialect::Posix).is_some(), "{script}");
        }
        for script in [
            "ls -la",
            "cat README >/dev/null 2>&1",
            "cat README >&2",
            "exec 3>&-",
            "echo $((1 + 2)) $(ls) `pwd`",
            "echo '[[ &> <<< |&' \"&> [[\"",
            "echo \"$'x'\"",
            "f() { ls; }",
            "a=(1 2)",
            "# a comment with [[ and &>",
        ] {
            assert_eq!(differs(script, Dialect::Posix), None, "{script}");
        }
    }

    #[test]
    fn zsh_differs_on_its_own_forms() {
        for script in [
            "ls README(e:'rm -f f':)",
            "echo *(e:'rm -f f':)",
            "echo ${(e)x}",
            "echo \"${(e)x}\"",
            "echo =(rm -f f)",
            "echo $(ls f(e:'rm x':))",
        ] {
            assert!(differs(script, Dialect::Zsh).is_some(), "{script}");
        }
        for script in [
            "cat README &>/dev/null rm -f f",
            "[[ a || b ]]",
            "echo $'a\\'b'",
            "diff <(ls) <(ls a)",
            "echo $(ls) $((1+2))",
            "a=(1 2); a+=(3)",
            "echo 'f(e:x:)' \"g(x)\"",
            "( cd x && ls )",
        ] {
            assert_eq!(differs(script, Dialect::Zsh), None, "{script}");
        }
        assert!(command_differs("repeat", Dialect::Zsh).is_some());
        assert!(command_differs("repeat", Dialect::Bash).is_none());
    }

    #[test]
    fn shells_are_known_by_name() {
        assert_eq!(Dialect::of_shell("/bin/sh"), Some(Dialect::Posix));
        assert_eq!(Dialect::of_shell("dash"), Some(Dialect::Posix));
        assert_eq!(Dialect::of_shell("/usr/bin/zsh"), Some(Dialect::Zsh));
        assert_eq!(Dialect::of_shell("bash"), Some(Dialect::Bash));
        assert_eq!(Dialect::of_shell("fish"), None);
    }
}
