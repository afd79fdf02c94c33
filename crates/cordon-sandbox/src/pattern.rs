//! The path-pattern language of cordon's path flags (`--deny-read '~/.ssh/id_*'`), once for
//! every backend: the Linux sandbox and containers expand a pattern to the paths that exist
//! (the front end's walk), `cordon mcp` asks it about paths as they come, and Seatbelt is given
//! it as a regex (`seatbelt::glob_to_regex`).
//!
//! A pattern is a path: `*` and `?` stay within one component, `[abc]`, `[a-z]`, `[!abc]` (or
//! `[^abc]`) match one character, a whole component `**` matches any number of components
//! (none included), `\` makes the next character literal, and braces are ordinary characters,
//! as they are in a path without wildcards. A component is matched by globset; the structure
//! around it (the literal base, `**`, `..`) is read here.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use globset::{Glob, GlobBuilder, GlobMatcher};

/// Why a pattern cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("`..` cannot follow a wildcard; move it before the first wildcard")]
    ParentAfterWildcard,
    #[error("a component with wildcards must be valid UTF-8")]
    NotUtf8,
    #[error(
        "`{text}` is not a valid pattern: {why}; write `\\*`, `\\?` or `\\[` for the character itself"
    )]
    Invalid { text: String, why: String },
}

/// Whether `s` holds a wildcard, and so is a pattern rather than a path.
pub fn is_wild(s: &OsStr) -> bool {
    s.as_bytes().iter().any(|b| matches!(b, b'*' | b'?' | b'['))
}

/// One path component of a pattern, after its literal base.
#[derive(Debug, Clone)]
pub enum Part {
    /// `**`: any number of components, none included.
    Recursive,
    Literal(OsString),
    /// A component with wildcards, as written.
    Glob {
        text: String,
        glob: Glob,
        /// Compiled when a name is first matched against it: every run and every one-shot
        /// decision builds the credential stores' patterns, and most never walk into them.
        matcher: std::sync::OnceLock<GlobMatcher>,
    },
}

impl Part {
    /// Whether `name` matches a glob component.
    fn glob_matches(glob: &Glob, matcher: &std::sync::OnceLock<GlobMatcher>, name: &OsStr) -> bool {
        matcher
            .get_or_init(|| glob.compile_matcher())
            .is_match(Path::new(name))
    }

    fn parse(name: &OsStr) -> Result<Part, PatternError> {
        if name == "**" {
            return Ok(Part::Recursive);
        }
        if !is_wild(name) {
            return Ok(Part::Literal(name.to_os_string()));
        }
        let text = name.to_str().ok_or(PatternError::NotUtf8)?;
        let glob = GlobBuilder::new(&literal_braces(text))
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| PatternError::Invalid {
                text: text.to_string(),
                why: e.kind().to_string(),
            })?;
        Ok(Part::Glob {
            text: text.to_string(),
            glob,
            matcher: std::sync::OnceLock::new(),
        })
    }
}

/// globset reads `{a,b}` as alternatives; here braces are ordinary characters.
fn literal_braces(glob: &str) -> String {
    let mut out = String::with_capacity(glob.len());
    let mut chars = glob.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                out.push(c);
                out.extend(chars.next());
            }
            '{' | '}' => {
                out.push('\\');
                out.push(c);
            }
            // Inside a class braces are already literal and a backslash is no escape. A `]`
            // right after the opening `[`, `[!` or `[^` belongs to the class.
            '[' => {
                out.push(c);
                if let Some(&n @ ('!' | '^')) = chars.peek() {
                    out.push(n);
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    out.push(']');
                    chars.next();
                }
                for n in chars.by_ref() {
                    out.push(n);
                    if n == ']' {
                        break;
                    }
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// A pattern: the directory its wildcards start in, and the parts matched below it one
/// component at a time. A state of the match is the index of the next part; `parts.len()`
/// means the whole pattern matched. Several states are live at once only through `**`.
#[derive(Debug, Clone)]
pub struct PathPattern {
    base: PathBuf,
    parts: Vec<Part>,
}

impl PathPattern {
    /// Reads `rest` (what was written, less a leading `~`) below `anchor` (the home or working
    /// directory). The components before the first wildcard form the base, walked to directly
    /// and never searched; only what was written can hold wildcards, so an anchor named `a[1]`
    /// is a literal place.
    pub fn new(anchor: &Path, rest: &Path) -> Result<PathPattern, PatternError> {
        let mut base = anchor.to_path_buf();
        let mut parts = Vec::new();
        for component in rest.components() {
            match component {
                Component::Normal(name) if !parts.is_empty() || is_wild(name) => {
                    parts.push(Part::parse(name)?);
                }
                Component::ParentDir if !parts.is_empty() => {
                    return Err(PatternError::ParentAfterWildcard);
                }
                // `components()` leaves `.` out after the first component.
                Component::CurDir if !parts.is_empty() => {}
                other => base.push(other),
            }
        }
        Ok(PathPattern { base, parts })
    }

    pub fn base(&self) -> &Path {
        &self.base
    }

    /// The same pattern from another spelling of its base (the base resolved, say).
    pub fn with_base(self, base: PathBuf) -> PathPattern {
        PathPattern { base, ..self }
    }

    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// The state in which the whole pattern has matched.
    pub fn done(&self) -> usize {
        self.parts.len()
    }

    /// The states before any component below the base.
    pub fn start(&self) -> Vec<usize> {
        self.close(vec![0])
    }

    /// `**` may match no component at all, so being before it is also being after it.
    fn close(&self, mut states: Vec<usize>) -> Vec<usize> {
        let mut i = 0;
        while let Some(&s) = states.get(i) {
            if matches!(self.parts.get(s), Some(Part::Recursive)) && !states.contains(&(s + 1)) {
                states.push(s + 1);
            }
            i += 1;
        }
        states.sort_unstable();
        states.dedup();
        states
    }

    /// The states after one more component, `name`.
    pub fn step(&self, states: &[usize], name: &OsStr) -> Vec<usize> {
        let mut next = Vec::new();
        for &s in states {
            match self.parts.get(s) {
                Some(Part::Recursive) => next.push(s),
                Some(Part::Literal(l)) if l == name => next.push(s + 1),
                Some(Part::Glob { glob, matcher, .. })
                    if Part::glob_matches(glob, matcher, name) =>
                {
                    next.push(s + 1)
                }
                _ => {}
            }
        }
        self.close(next)
    }

    /// When every live state wants one exact name, those names can be looked up rather than
    /// the directory listed: `src/*/Cargo.toml` costs one lookup per crate, however big each is.
    pub fn only_names(&self, states: &[usize]) -> Option<Vec<&OsStr>> {
        let mut names: Vec<&OsStr> = states
            .iter()
            .map(|&s| match self.parts.get(s) {
                Some(Part::Literal(l)) => Some(l.as_os_str()),
                _ => None,
            })
            .collect::<Option<_>>()?;
        names.sort_unstable();
        names.dedup();
        Some(names)
    }

    /// Whether `path` (spelled from the same base) matches, or lies inside something that
    /// matches: a hidden directory hides what it holds.
    pub fn covers(&self, path: &Path) -> bool {
        let Ok(rest) = path.strip_prefix(&self.base) else {
            return false;
        };
        let done = self.done();
        let mut states = self.start();
        for component in rest.components() {
            if states.contains(&done) {
                return true;
            }
            if states.is_empty() {
                return false;
            }
            states = self.step(&states, component.as_os_str());
        }
        states.contains(&done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(p: &str) -> PathPattern {
        PathPattern::new(Path::new("/w"), Path::new(p)).expect("a pattern")
    }

    #[test]
    fn the_base_is_everything_before_the_first_wildcard() {
        let p = pattern("a/../b/c*/d");
        assert_eq!(p.base(), Path::new("/w/a/../b"));
        assert_eq!(p.parts().len(), 2);
        assert_eq!(
            PathPattern::new(Path::new("/w[1]"), Path::new("x"))
                .expect("literal")
                .parts()
                .len(),
            0
        );
        assert_eq!(
            PathPattern::new(Path::new("/w"), Path::new("*/..")).err(),
            Some(PatternError::ParentAfterWildcard)
        );
        assert!(matches!(
            PathPattern::new(Path::new("/w"), Path::new("a/[z-a]")),
            Err(PatternError::Invalid { .. })
        ));
    }

    #[test]
    fn what_a_pattern_covers() {
        let cases = [
            ("*.pem", "/w/a.pem", true),
            ("*.pem", "/w/a.pem/inside", true),
            ("*.pem", "/w/sub/a.pem", false),
            ("*", "/w/.ssh", true),
            ("**/secret", "/w/secret", true),
            ("**/secret", "/w/a/b/secret/x", true),
            ("a/**", "/w/a", true),
            ("id_?sa", "/w/id_rsa", true),
            ("[!a]*", "/w/abc", false),
            ("[^a]*", "/w/bc", true),
            ("{x,y}*", "/w/{x,y}1", true),
            ("{x,y}*", "/w/x1", false),
            ("lit\\*", "/w/lit*", true),
            ("lit\\*", "/w/litx", false),
            ("[]x]", "/w/]", true),
        ];
        for (p, path, want) in cases {
            assert_eq!(pattern(p).covers(Path::new(path)), want, "{p} on {path}");
        }
    }
}
