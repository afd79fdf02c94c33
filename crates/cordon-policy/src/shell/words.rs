//! One shell word: what it says after quote removal, and what it would run or leave unknown.

use brush_parser::ParserOptions;
use brush_parser::word::{ParameterExpr, ParameterTransformOp, WordPiece, WordPieceWithSource};

/// Brace expansion can multiply words; past this many we stop and call the command unanalysable
/// rather than spend time or memory on a hostile input.
const MAX_BRACE_WORDS: usize = 64;

/// How much of a word the analysis knows before it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Known {
    /// All of it: this is the word the program gets.
    #[default]
    Literal,
    /// It is one word, but its text is only known at run time (a quoted expansion).
    OneWord,
    /// It may become any number of words, known only at run time (an unquoted expansion, a
    /// file-name pattern, `"$@"`).
    Words,
}

/// What analysing one word found.
#[derive(Debug, Default)]
pub(crate) struct WordInfo {
    /// The word's value after quote removal. Parts only known at run time (`$HOME`, `$(…)`)
    /// are kept as they were written.
    pub values: Vec<String>,
    /// Some part of the value is only known at run time.
    pub dynamic: bool,
    /// Unquoted glob characters: the shell may replace the word by file names.
    pub glob: bool,
    /// How much of the word is known; a file-name pattern counts as words.
    pub known: Known,
    /// Scripts this word runs: the bodies of `$(…)` and backticks.
    pub substitutions: Vec<String>,
    /// Why the word defeats analysis, if it does.
    pub problem: Option<String>,
}

impl WordInfo {
    /// The single value of a word that did not brace-expand.
    pub fn value(&self) -> &str {
        self.values.first().map(String::as_str).unwrap_or("")
    }
}

/// Characters after which a word is not plain text and needs the full word parser.
fn needs_parser(word: &str) -> bool {
    word.bytes()
        .any(|b| matches!(b, b'$' | b'`' | b'\\' | b'\'' | b'"' | b'~' | b'{'))
}

fn has_glob(text: &str) -> bool {
    text.bytes().any(|b| matches!(b, b'*' | b'?' | b'['))
}

/// Quote removal for the common words that need no parser: plain text, `'…'`, and `"…"`
/// without `$`, backquotes or backslashes. Anything else returns `None` and goes to the full
/// word parser, so this can only be faster, never different.
fn plain_unquote(raw: &str) -> Option<(String, bool)> {
    let mut out = String::with_capacity(raw.len());
    let mut glob = false;
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => loop {
                match chars.next()? {
                    '\'' => break,
                    c => out.push(c),
                }
            },
            '"' => loop {
                match chars.next()? {
                    '"' => break,
                    '$' | '`' | '\\' => return None,
                    c => out.push(c),
                }
            },
            '$' | '`' | '\\' | '{' | '~' => return None,
            '*' | '?' | '[' => {
                glob = true;
                out.push(c);
            }
            c => out.push(c),
        }
    }
    Some((out, glob))
}

pub(crate) fn analyse_word(raw: &str, options: &ParserOptions) -> WordInfo {
    let mut info = WordInfo::default();
    if !needs_parser(raw) {
        // `[` alone is the test command: a bracket that never closes matches only itself.
        info.glob = has_glob(raw) && raw != "[";
        info.values.push(raw.to_owned());
        return info.with_glob_known();
    }
    if let Some((value, glob)) = plain_unquote(raw) {
        info.glob = glob;
        info.values.push(value);
        return info.with_glob_known();
    }
    let pieces = match super::guarded(|| brush_parser::word::parse(raw, options)) {
        Some(Ok(p)) => p,
        None => {
            info.problem = Some(format!("the word parser failed on `{raw}`"));
            info.values.push(raw.to_owned());
            return info;
        }
        Some(Err(e)) => {
            info.problem = Some(format!("cannot parse the word `{raw}`: {e}"));
            info.values.push(raw.to_owned());
            return info;
        }
    };
    let mut value = String::new();
    let mut brace_candidate = false;
    collect(
        raw,
        &pieces,
        false,
        &mut value,
        &mut info,
        &mut brace_candidate,
    );
    if brace_candidate && !info.dynamic {
        match expand_braces(raw, options) {
            Ok(Some(words)) => {
                info.values = words;
                return info.with_glob_known();
            }
            Ok(None) => {}
            Err(why) => info.problem = Some(why),
        }
    }
    info.values.push(value);
    info.with_glob_known()
}

impl WordInfo {
    fn with_glob_known(mut self) -> Self {
        if self.glob {
            self.known = Known::Words;
        }
        self
    }

    fn runs_to(&mut self, known: Known) {
        self.known = self.known.max(known);
    }
}

fn collect(
    raw: &str,
    pieces: &[WordPieceWithSource],
    quoted: bool,
    out: &mut String,
    info: &mut WordInfo,
    brace_candidate: &mut bool,
) {
    for p in pieces {
        let source = raw.get(p.start_index..p.end_index).unwrap_or("");
        match &p.piece {
            WordPiece::Text(t) => {
                if !quoted {
                    info.glob |= has_glob(t);
                    *brace_candidate |= t.contains('{');
                }
                out.push_str(t);
            }
            WordPiece::SingleQuotedText(t) => out.push_str(t),
            WordPiece::AnsiCQuotedText(t) => match decode_ansi_c(t) {
                Some(s) => out.push_str(&s),
                None => {
                    info.problem = Some(format!("cannot decode the $'…' string in `{raw}`"));
                    out.push_str(source);
                }
            },
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => {
                collect(raw, inner, true, out, info, brace_candidate);
            }
            WordPiece::TildeExpansion(_) => {
                // `~` stays as written: rules and checkers expand it themselves.
                out.push_str(source);
            }
            WordPiece::EscapeSequence(s) => {
                let c = s.strip_prefix('\\').unwrap_or(s);
                // Inside double quotes a backslash before an ordinary character is kept.
                if quoted && !matches!(c, "$" | "`" | "\"" | "\\" | "\n") {
                    out.push('\\');
                }
                if c != "\n" {
                    out.push_str(c);
                }
            }
            WordPiece::ParameterExpansion(expr) => {
                info.dynamic = true;
                // `"$@"` and `"${a[@]}"` are as many words as there are elements.
                info.runs_to(if quoted && !source.contains('@') {
                    Known::OneWord
                } else {
                    Known::Words
                });
                if let Some(why) = evaluated_index(expr, source) {
                    info.problem = Some(why);
                } else if matches!(
                    expr,
                    ParameterExpr::Transform {
                        op: ParameterTransformOp::PromptExpand,
                        ..
                    }
                ) {
                    info.problem = Some(format!(
                        "`{source}` expands a value as a prompt, which can run commands"
                    ));
                } else if indirect_dereference(source) {
                    info.problem = Some(format!(
                        "`{source}` takes a variable's value as a name, whose array index can run commands"
                    ));
                } else if source.contains("$(") || source.contains('`') {
                    info.problem = Some(format!(
                        "`{source}` hides a command substitution inside a parameter expansion"
                    ));
                }
                out.push_str(source);
            }
            WordPiece::CommandSubstitution(script)
            | WordPiece::BackquotedCommandSubstitution(script) => {
                info.dynamic = true;
                info.runs_to(if quoted { Known::OneWord } else { Known::Words });
                info.substitutions.push(script.clone());
                out.push_str(source);
            }
            WordPiece::ArithmeticExpression(expr) => {
                info.dynamic = true;
                // Unquoted, even a number is split on the characters in `IFS`.
                info.runs_to(if quoted { Known::OneWord } else { Known::Words });
                if let Some(why) = arithmetic_problem(&expr.value) {
                    info.problem = Some(why);
                }
                out.push_str(source);
            }
        }
    }
}

/// An array index or a substring offset in a parameter expansion is arithmetic, and bash
/// evaluates the variables named there recursively: `${a[i]}` or `${s:i}` runs `cmd` when `i`
/// holds `a[$(cmd)]`, no `$` in sight. Only literal numbers there are analysable. (An
/// associative array's key is not arithmetic, but which arrays are associative is only known at
/// run time.)
fn evaluated_index(expr: &ParameterExpr, source: &str) -> Option<String> {
    use ParameterExpr as E;
    use brush_parser::word::Parameter;
    let (parameter, offsets) = match expr {
        E::Parameter { parameter, .. }
        | E::UseDefaultValues { parameter, .. }
        | E::AssignDefaultValues { parameter, .. }
        | E::IndicateErrorIfNullOrUnset { parameter, .. }
        | E::UseAlternativeValue { parameter, .. }
        | E::ParameterLength { parameter, .. }
        | E::RemoveSmallestSuffixPattern { parameter, .. }
        | E::RemoveLargestSuffixPattern { parameter, .. }
        | E::RemoveSmallestPrefixPattern { parameter, .. }
        | E::RemoveLargestPrefixPattern { parameter, .. }
        | E::Transform { parameter, .. }
        | E::UppercaseFirstChar { parameter, .. }
        | E::UppercasePattern { parameter, .. }
        | E::LowercaseFirstChar { parameter, .. }
        | E::LowercasePattern { parameter, .. }
        | E::ReplaceSubstring { parameter, .. } => (parameter, Vec::new()),
        E::Substring {
            parameter,
            offset,
            length,
            ..
        } => (
            parameter,
            std::iter::once(offset)
                .chain(length)
                .map(|e| e.value.as_str())
                .collect(),
        ),
        E::VariableNames { .. } | E::MemberKeys { .. } => return None,
    };
    let index = match parameter {
        Parameter::NamedWithIndex { index, .. } => Some(index.as_str()),
        _ => None,
    };
    index
        .into_iter()
        .chain(offsets)
        .find(|e| arithmetic_problem(e).is_some())
        .map(|e| {
            format!("`{source}` evaluates `{e}` as arithmetic, whose variables can run commands")
        })
}

/// `${!name}`, `${!name:-…}` and the like: bash reads `name`'s value as another parameter,
/// array index and all. The lists `${!prefix*}`, `${!prefix@}` and `${!array[@]}` only name
/// variables or indexes, and are let through.
fn indirect_dereference(source: &str) -> bool {
    let Some(inner) = source.strip_prefix("${!").and_then(|s| s.strip_suffix('}')) else {
        return false;
    };
    let name_end = inner
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(inner.len());
    !matches!(&inner[name_end..], "*" | "@" | "[@]" | "[*]")
}

/// Why a word that a builtin takes as a variable's name (`test -v`, `read`, `unset`,
/// `printf -v`, `declare`) defeats analysis: bash evaluates an array index there as
/// arithmetic, and a name known only at run time could hold any index.
pub(crate) fn name_problem(name: &str, dynamic: bool) -> Option<String> {
    if dynamic {
        return Some(format!(
            "`{name}` names a variable only known at run time, whose array index can run commands"
        ));
    }
    let index = name.split_once('[')?.1;
    let index = index.strip_suffix(']').unwrap_or(index);
    arithmetic_problem(index).map(|_| {
        format!("the array index in `{name}` is evaluated as arithmetic, whose variables can run commands")
    })
}

/// Bash evaluates variable references inside arithmetic recursively, and a value such as
/// `a[$(cmd)]` runs `cmd` there. We cannot see those values, so only arithmetic on literal
/// numbers is considered analysable.
pub(crate) fn arithmetic_problem(expr: &str) -> Option<String> {
    let suspicious = expr
        .chars()
        .any(|c| c.is_ascii_alphabetic() || c == '_' || c == '$' || c == '`');
    suspicious.then(|| {
        format!(
            "arithmetic `{}` evaluates variables, which can run commands",
            expr.trim()
        )
    })
}

/// Expands `{a,b}` the way the shell would, so that `mkdir src/{a,b}` is checked as two
/// paths and `{rm,-rf,/}` is seen for what it is.
fn expand_braces(raw: &str, options: &ParserOptions) -> Result<Option<Vec<String>>, String> {
    use brush_parser::word::{BraceExpressionMember as M, BraceExpressionOrText as T};
    let parts = brush_parser::word::parse_brace_expansions(raw, options)
        .map_err(|e| format!("cannot parse the braces in `{raw}`: {e}"))?;
    let Some(parts) = parts else { return Ok(None) };
    if !parts.iter().any(|p| matches!(p, T::Expr(_))) {
        return Ok(None);
    }

    fn expand(parts: &[T], raw: &str) -> Result<Vec<String>, String> {
        let mut acc = vec![String::new()];
        for part in parts {
            let alternatives: Vec<String> = match part {
                T::Text(t) => vec![t.clone()],
                T::Expr(members) => {
                    let mut alts = Vec::new();
                    for m in members {
                        match m {
                            M::Child(inner) => alts.extend(expand(inner, raw)?),
                            M::NumberSequence { .. } | M::CharSequence { .. } => {
                                // Sequences expand to many words we could enumerate, but
                                // nothing an agent needs; keep the limit simple.
                                return Err(format!("`{raw}` uses a brace sequence"));
                            }
                        }
                    }
                    alts
                }
            };
            let mut next = Vec::with_capacity(acc.len() * alternatives.len());
            for prefix in &acc {
                for alt in &alternatives {
                    next.push(format!("{prefix}{alt}"));
                }
            }
            if next.len() > MAX_BRACE_WORDS {
                return Err(format!(
                    "`{raw}` expands to more than {MAX_BRACE_WORDS} words"
                ));
            }
            acc = next;
        }
        Ok(acc)
    }

    // The text pieces still carry their quotes; unquote each resulting word.
    let expanded = expand(&parts, raw)?;
    let mut words = Vec::with_capacity(expanded.len());
    for w in expanded {
        let info = analyse_word_no_braces(&w, options);
        if let Some(p) = info.1 {
            return Err(p);
        }
        words.push(info.0);
    }
    Ok(Some(words))
}

fn analyse_word_no_braces(raw: &str, options: &ParserOptions) -> (String, Option<String>) {
    match brush_parser::word::parse(raw, options) {
        Ok(pieces) => {
            let mut info = WordInfo::default();
            let mut out = String::new();
            let mut brace = false;
            collect(raw, &pieces, false, &mut out, &mut info, &mut brace);
            (out, info.problem)
        }
        Err(e) => (
            raw.to_owned(),
            Some(format!("cannot parse the word `{raw}`: {e}")),
        ),
    }
}

/// Decodes the body of `$'…'`. Returns `None` for escapes we do not know, so the caller can
/// refuse rather than guess.
pub(crate) fn decode_ansi_c(body: &str) -> Option<String> {
    let body = body
        .strip_prefix("$'")
        .and_then(|b| b.strip_suffix('\''))
        .unwrap_or(body);
    let mut out = String::new();
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let e = chars.next()?;
        match e {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'a' => out.push('\x07'),
            'b' => out.push('\x08'),
            'e' | 'E' => out.push('\x1b'),
            'f' => out.push('\x0c'),
            'v' => out.push('\x0b'),
            '\\' | '\'' | '"' | '?' => out.push(e),
            'x' | 'u' | 'U' => {
                let max = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let mut digits = String::new();
                while digits.len() < max {
                    match chars.peek() {
                        Some(d) if d.is_ascii_hexdigit() => {
                            digits.push(*d);
                            chars.next();
                        }
                        _ => break,
                    }
                }
                let n = u32::from_str_radix(&digits, 16).ok()?;
                out.push(char::from_u32(n)?);
            }
            '0'..='7' => {
                let mut digits = String::from(e);
                while digits.len() < 3 {
                    match chars.peek() {
                        Some(d) if ('0'..='7').contains(d) => {
                            digits.push(*d);
                            chars.next();
                        }
                        _ => break,
                    }
                }
                let n = u32::from_str_radix(&digits, 8).ok()?;
                out.push(char::from_u32(n)?);
            }
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(raw: &str) -> WordInfo {
        analyse_word(raw, &ParserOptions::default())
    }

    #[test]
    fn quotes_are_removed() {
        assert_eq!(word("'rm'").value(), "rm");
        assert_eq!(word("\"r\"m").value(), "rm");
        assert_eq!(word("r\\m").value(), "rm");
        assert_eq!(word("$'\\x72m'").value(), "rm");
        assert_eq!(word("$'\\162m'").value(), "rm");
        assert!(!word("'rm'").dynamic);
    }

    #[test]
    fn expansions_are_dynamic_and_substitutions_found() {
        let w = word("\"$(date)\"");
        assert!(w.dynamic);
        assert_eq!(w.substitutions, vec!["date".to_string()]);
        let w = word("`id`");
        assert_eq!(w.substitutions, vec!["id".to_string()]);
        assert!(word("$HOME").dynamic);
    }

    #[test]
    fn prompt_expansion_and_hidden_substitution_are_problems() {
        assert!(word("${x@P}").problem.is_some());
        assert!(word("${!x}").problem.is_some());
        assert!(word("${!x:-y}").problem.is_some());
        assert!(word("${!pre*}").problem.is_none());
        assert!(word("${!arr[@]}").problem.is_none());
        assert!(word("${x:-$(id)}").problem.is_some());
        assert!(word("$((a[0]))").problem.is_some());
        assert!(word("$((1+2))").problem.is_none());
    }

    #[test]
    fn braces_expand() {
        assert_eq!(word("{rm,-rf}").values, vec!["rm", "-rf"]);
        assert_eq!(word("src/{a,b}.rs").values, vec!["src/a.rs", "src/b.rs"]);
        assert!(word("{1..3}").problem.is_some());
        assert_eq!(word("'{a,b}'").values, vec!["{a,b}"]);
    }

    #[test]
    fn the_fast_path_agrees_with_the_parser() {
        let opts = ParserOptions::default();
        for raw in [
            "'a b'",
            "\"a b\"",
            "x'y'\"z\"",
            "'*'",
            "\"*\"x*",
            "''",
            "'it'\"'\"'s'",
            "'$x'",
            "\"a;b\"",
        ] {
            let fast = plain_unquote(raw);
            let pieces = brush_parser::word::parse(raw, &opts).expect("parses");
            let mut info = WordInfo::default();
            let mut value = String::new();
            let mut brace = false;
            collect(raw, &pieces, false, &mut value, &mut info, &mut brace);
            assert_eq!(fast, Some((value, info.glob)), "{raw}");
        }
        assert_eq!(plain_unquote("\"$x\""), None);
        assert_eq!(plain_unquote("'open"), None);
    }

    #[test]
    fn globs_are_seen_only_unquoted() {
        assert!(word("*.rs").glob);
        assert!(!word("'*.rs'").glob);
    }
}
