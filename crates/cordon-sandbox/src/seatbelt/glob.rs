//! `--deny-read` patterns as Seatbelt regexes, and strings written into a profile.
//!
//! Seatbelt matches a path pattern with `(regex "…")`, compiled by macOS's own matcher (a
//! POSIX-style extended regex dialect, not PCRE). So only the constructs both it and ordinary
//! regex engines read alike are produced: literal characters (the ERE metacharacters escaped
//! with a backslash), `[…]` classes, `[^…]`, `.*`, `(…)?` and the anchors. `regex_syntax::escape`
//! is not used because it also escapes `-`, `#`, `&` and `~`, and a backslash before an
//! ordinary character is undefined in POSIX regexes: `/Users/me/my-project` must stay as it is.

use std::path::{Component, Path};

use super::ProfileError;
use crate::pattern::{Part, PathPattern};

/// Characters that mean something in an extended regex outside a bracket expression.
const ERE_SPECIAL: &[char] = &[
    '.', '[', ']', '(', ')', '*', '+', '?', '{', '}', '|', '^', '$', '\\',
];

/// `text` as a regex that matches exactly it.
pub fn escape_regex(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if ERE_SPECIAL.contains(&c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `text` as an SBPL (Scheme) string literal: backslash and double quote escaped, everything
/// else, newlines included, written as it is (Scheme strings may span lines).
pub fn sbpl_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if c == '\\' || c == '"' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// An absolute pattern (the language of [`crate::pattern`]) as an anchored regex matching
/// every path the pattern matches and everything below those (a hidden directory hides what it
/// holds). `/tmp`, `/var` and `/etc` at the start are written as `/private/…` (see
/// [`super::paths::canonical`]).
pub fn glob_to_regex(pattern: &str) -> Result<String, ProfileError> {
    let bad = |why: &str| ProfileError::Glob {
        pattern: pattern.to_string(),
        why: why.to_string(),
    };
    let Some(rest) = pattern.strip_prefix('/') else {
        return Err(bad("a pattern must be an absolute path"));
    };
    let parsed =
        PathPattern::new(Path::new("/"), Path::new(rest)).map_err(|e| bad(&e.to_string()))?;
    let mut out = String::from("^");
    let mut first = true;
    // Starts a component: its separator, and `/private` before a first one macOS moved there.
    let component = |c: &str, first: &mut bool, out: &mut String| {
        out.push('/');
        if std::mem::take(first) && ["tmp", "var", "etc"].contains(&c) {
            out.push_str("private/");
        }
    };
    let literal = |name: &std::ffi::OsStr, first: &mut bool, out: &mut String| {
        let name = name
            .to_str()
            .ok_or_else(|| bad("a pattern must be UTF-8"))?;
        component(name, first, out);
        out.push_str(&escape_regex(name));
        Ok(())
    };
    for c in parsed.base().components() {
        match c {
            Component::RootDir => {}
            Component::Normal(name) => literal(name, &mut first, &mut out)?,
            _ => return Err(bad("`..` cannot be part of a pattern")),
        }
    }
    let parts = parsed.parts();
    for (i, part) in parts.iter().enumerate() {
        match part {
            // Zero or more whole components; when last, the tail below covers it.
            Part::Recursive if i + 1 < parts.len() => out.push_str("(/.*)?"),
            Part::Recursive => {}
            Part::Literal(name) => literal(name, &mut first, &mut out)?,
            Part::Glob { text, .. } => {
                component(text, &mut first, &mut out);
                component_regex(text, &mut out).map_err(&bad)?;
            }
        }
    }
    out.push_str("(/.*)?$");
    Ok(out)
}

/// One component of a glob, appended to `out`.
fn component_regex(component: &str, out: &mut String) -> Result<(), &'static str> {
    let mut chars = component.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(next) = chars.next() else {
                    return Err("a pattern cannot end with `\\`; write `\\\\` for a backslash");
                };
                out.push_str(&escape_regex(&next.to_string()));
            }
            '*' => out.push_str("[^/]*"),
            '?' => out.push_str("[^/]"),
            '[' => class_regex(&mut chars, out)?,
            c => out.push_str(&escape_regex(&c.to_string())),
        }
    }
    Ok(())
}

/// A `[…]` class after its opening bracket. Members that read differently in POSIX and other
/// regex dialects (`\`, `[`, `]`, `^` inside the class) are refused rather than guessed at.
fn class_regex(chars: &mut std::str::Chars<'_>, out: &mut String) -> Result<(), &'static str> {
    const REFUSED: &str =
        "a `[…]` class holding `\\`, `[`, `]` or `^` cannot be written for Seatbelt; use `?` there";
    let mut members = String::new();
    let mut negated = false;
    let mut first = true;
    loop {
        let Some(c) = chars.next() else {
            return Err("a `[` has no closing `]`; write `\\[` for the character itself");
        };
        match c {
            '!' | '^' if first && !negated => {
                negated = true;
                continue;
            }
            ']' if !members.is_empty() => break,
            '\\' | '[' | ']' | '^' => return Err(REFUSED),
            c => members.push(c),
        }
        first = false;
    }
    out.push('[');
    if negated {
        // A class never matches the separator, as `*` and `?` never do.
        out.push_str("^/");
    }
    out.push_str(&members);
    out.push(']');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_parts_are_escaped_and_wildcards_translated() {
        let cases = [
            ("/a/b", r"^/a/b(/.*)?$"),
            ("/home/u/*.pem", r"^/home/u/[^/]*\.pem(/.*)?$"),
            ("/home/u/id_?sa", r"^/home/u/id_[^/]sa(/.*)?$"),
            ("/a/**/secret", r"^/a(/.*)?/secret(/.*)?$"),
            ("/a/**", r"^/a(/.*)?$"),
            ("/tmp/*.key", r"^/private/tmp/[^/]*\.key(/.*)?$"),
            ("/*/tmp", r"^/[^/]*/tmp(/.*)?$"),
            ("/etc/ssl/[a-c]*", r"^/private/etc/ssl/[a-c][^/]*(/.*)?$"),
            ("/x/[!ab].txt", r"^/x/[^/ab]\.txt(/.*)?$"),
            ("/x/[^ab]", r"^/x/[^/ab](/.*)?$"),
            (
                "/my-project/a+b (1)/{x,y}",
                r"^/my-project/a\+b \(1\)/\{x,y\}(/.*)?$",
            ),
            ("/$HOME/^x|y", r"^/\$HOME/\^x\|y(/.*)?$"),
            (r"/lit\*star", r"^/lit\*star(/.*)?$"),
            // A backslash escapes only in a component with wildcards, as everywhere in the
            // language: elsewhere it is part of the name.
            (r"/back\\slash/*", r"^/back\\\\slash/[^/]*(/.*)?$"),
            (r"/x/back\\slash*", r"^/x/back\\slash[^/]*(/.*)?$"),
            ("//a/./b/", r"^/a/b(/.*)?$"),
        ];
        for (glob, want) in cases {
            assert_eq!(glob_to_regex(glob).as_deref(), Ok(want), "{glob}");
        }
    }

    #[test]
    fn patterns_seatbelt_cannot_express_are_refused_with_a_reason() {
        for (glob, says) in [
            ("relative/*", "absolute"),
            ("/a/../b/*", "`..`"),
            ("/a/[bc", "unclosed"),
            ("/a/[]x]", "class"),
            (r"/a/[\x]", "class"),
            ("/a/[b^c]", "class"),
            ("/a/b*\\", "dangling"),
        ] {
            match glob_to_regex(glob) {
                Err(ProfileError::Glob { why, .. }) => assert!(why.contains(says), "{glob}: {why}"),
                other => panic!("{glob}: {other:?}"),
            }
        }
    }

    /// Reads a Scheme string literal back, as the profile compiler would.
    fn read_sbpl_string(literal: &str) -> Option<String> {
        let inner = literal.strip_prefix('"')?.strip_suffix('"')?;
        let mut out = String::new();
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => out.push(chars.next()?),
                '"' => return None,
                c => out.push(c),
            }
        }
        Some(out)
    }

    #[test]
    fn sbpl_strings_read_back_as_written() {
        for s in [
            "plain",
            r#"quote " inside"#,
            r"back\slash",
            "new\nline",
            r#"ends with \"#,
            r#"") (allow default) ("#,
            "",
        ] {
            let lit = sbpl_string(s);
            assert_eq!(read_sbpl_string(&lit).as_deref(), Some(s), "{lit}");
        }
    }

    #[test]
    fn escaped_text_matches_only_itself() {
        for s in [r"a.b", r"(x)[y]{z}", r"^$|+*?\", "plain-name_1 ~#&"] {
            let re = regex::Regex::new(&format!("^{}$", escape_regex(s))).expect("valid regex");
            assert!(re.is_match(s), "{s}");
            assert!(!re.is_match(&format!("{s}x")), "{s}");
        }
        // Ordinary characters stay unescaped (a backslash before them is undefined in POSIX).
        assert_eq!(escape_regex("my-project ~#&"), "my-project ~#&");
    }

    /// The regex matches a path exactly when the pattern, as every other backend reads it
    /// (`PathPattern::covers`), matches that path or one of its ancestors.
    #[test]
    fn regexes_agree_with_the_pattern_language() {
        let globs = [
            "/h/*.pem",
            "/h/.ssh/id_*",
            "/h/**/secret*",
            "/h/**",
            "/h/a?c/[x-z]",
            "/h/[!a]*/k",
            "/h/**/x/**/y",
            "/h/a.b",
            "/h/{a,b}*",
            r"/h/lit\*",
        ];
        let paths = [
            "/h/a.pem",
            "/h/a.pem/inner",
            "/h/sub/a.pem",
            "/h/.ssh/id_rsa",
            "/h/.ssh/id_rsa.pub",
            "/h/.ssh/known_hosts",
            "/h/secret",
            "/h/a/b/secrets.txt",
            "/h",
            "/hx",
            "/h/abc/x",
            "/h/abc/w",
            "/h/a/c/x",
            "/h/b1/k",
            "/h/a1/k",
            "/h/x/y",
            "/h/1/x/2/3/y/z",
            "/h/aXb",
            "/h/a.b",
            "/h/{a,b}1",
            "/h/a1",
            "/h/lit*",
            "/h/litx",
        ];
        for glob in globs {
            let pattern = crate::pattern::PathPattern::new(
                std::path::Path::new("/"),
                std::path::Path::new(&glob[1..]),
            )
            .expect("pattern");
            let re = regex::Regex::new(&glob_to_regex(glob).expect("translates")).expect("regex");
            for path in paths {
                let want = pattern.covers(std::path::Path::new(path));
                assert_eq!(re.is_match(path), want, "{glob} on {path} (regex {re})");
            }
        }
    }
}
