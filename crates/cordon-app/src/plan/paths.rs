//! The paths given to `cordon run`'s path flags: `~/` is home, relative paths are against the
//! working directory, and `*`, `?`, `[...]` and `**` expand to the paths that exist when the
//! run starts.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::FileType;
use std::io::ErrorKind;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use cordon_sandbox::pattern::is_wild;
use cordon_sandbox::pattern::{Part, PathPattern};

/// The flags whose paths are resolved here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flag {
    AllowWrite,
    DenyWrite,
    DenyRead,
    AllowRead,
    AllowUnixSocket,
}

impl Flag {
    fn name(self) -> &'static str {
        match self {
            Flag::AllowWrite => "--allow-write",
            Flag::DenyWrite => "--deny-write",
            Flag::DenyRead => "--deny-read",
            Flag::AllowRead => "--allow-read",
            Flag::AllowUnixSocket => "--allow-unix-socket",
        }
    }

    /// A deny pattern expanded only in part would leave some of its paths unprotected without
    /// anyone knowing, so it stops the run; an allow pattern expanded in part only allows less.
    fn fails_closed(self) -> bool {
        matches!(self, Flag::DenyWrite | Flag::DenyRead)
    }
}

/// How much one pattern may cost. Expansion runs on every `cordon run`, so a pattern that
/// would search a whole disk has to stop early rather than stall every command.
#[derive(Debug, Clone, Copy)]
struct Caps {
    /// Directory entries looked at.
    visits: usize,
    /// Paths matched; each becomes a mount in the sandbox.
    matches: usize,
}

const CAPS: Caps = Caps {
    visits: 100_000,
    matches: 1_000,
};

/// Every path of `paths`, resolved for `flag`, without duplicates; what deserves a warning is
/// added to `warnings`.
pub fn resolve_all(
    paths: &[PathBuf],
    cwd: &Path,
    flag: Flag,
    warnings: &mut Vec<String>,
) -> anyhow::Result<Vec<PathBuf>> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut seen = HashSet::new();
    let mut all = Vec::new();
    for path in paths {
        let resolved = resolve(path, cwd, home.as_deref(), flag, CAPS)?;
        warnings.extend(resolved.warnings);
        for p in resolved.paths {
            if seen.insert(p.clone()) {
                all.push(p);
            }
        }
    }
    Ok(all)
}

#[derive(Debug, Default)]
struct Resolved {
    paths: Vec<PathBuf>,
    warnings: Vec<String>,
    /// Directory entries looked at, so tests can tell that the search was pruned.
    visited: usize,
}

/// A path without wildcards must exist; a pattern expands to what matches it now.
fn resolve(
    path: &Path,
    cwd: &Path,
    home: Option<&Path>,
    flag: Flag,
    caps: Caps,
) -> anyhow::Result<Resolved> {
    let (anchor, rest) = match path.strip_prefix("~") {
        Ok(rest) => {
            let home = home.with_context(|| {
                format!("{} {}: ~ needs HOME to be set", flag.name(), path.display())
            })?;
            (home, rest)
        }
        Err(_) => (cwd, path),
    };
    // Only what the user typed can hold wildcards: a working or home directory named `a[1]`
    // is a literal place.
    if !is_wild(rest.as_os_str()) {
        let expanded = anchor.join(rest);
        let real = std::fs::canonicalize(&expanded).with_context(|| {
            format!(
                "{} {}: cannot resolve {}",
                flag.name(),
                path.display(),
                expanded.display()
            )
        })?;
        return Ok(Resolved {
            paths: vec![real],
            ..Resolved::default()
        });
    }
    expand(path, anchor, rest, home, flag, caps)
}

/// A pattern asked, at the moment of asking, whether a path is one of its matches or inside
/// one, rather than expanded once: what is created after the start is covered too (for
/// `cordon mcp`'s file tools, which live longer than a run).
#[derive(Debug, Clone)]
pub struct LivePattern {
    shown: String,
    pattern: PathPattern,
}

impl LivePattern {
    /// `None` for a path without wildcards.
    pub fn new(path: &Path, cwd: &Path, flag: Flag) -> anyhow::Result<Option<LivePattern>> {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let shown = format!("{} {}", flag.name(), path.display());
        let (anchor, rest) = match (path.strip_prefix("~"), &home) {
            (Ok(rest), Some(home)) => (home.as_path(), rest),
            (Ok(_), None) => bail!("{shown}: ~ needs HOME to be set"),
            (Err(_), _) => (cwd, path),
        };
        if !is_wild(rest.as_os_str()) {
            return Ok(None);
        }
        let pattern = PathPattern::new(anchor, rest).with_context(|| shown.clone())?;
        // Matched against resolved paths; a base that does not exist yet is kept as written.
        let base = std::fs::canonicalize(pattern.base()).unwrap_or(pattern.base().to_path_buf());
        Ok(Some(LivePattern {
            shown: path.display().to_string(),
            pattern: pattern.with_base(base),
        }))
    }

    /// The pattern as it was given.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Whether `real` (a resolved path) matches, or lies inside something that matches.
    pub fn covers(&self, real: &Path) -> bool {
        self.pattern.covers(real)
    }
}

fn expand(
    path: &Path,
    anchor: &Path,
    rest: &Path,
    home: Option<&Path>,
    flag: Flag,
    caps: Caps,
) -> anyhow::Result<Resolved> {
    let shown = format!("{} {}", flag.name(), path.display());
    let pattern = PathPattern::new(anchor, rest).with_context(|| shown.clone())?;
    let mut out = Resolved::default();
    let base = match std::fs::canonicalize(pattern.base()) {
        Ok(b) => b,
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            out.warnings.push(nothing_matched(&shown, flag));
            return Ok(out);
        }
        Err(e) => {
            return Err(e)
                .with_context(|| format!("{shown}: cannot resolve {}", pattern.base().display()));
        }
    };
    let walk = Walker::new(&pattern, caps).run(&base);
    out.visited = walk.visited;
    match (walk.stop, flag.fails_closed()) {
        (Some(Stop::Visits), true) => bail!(
            "{shown}: too broad: the search stopped after {} entries under {}, so not every matching path would be protected; start the pattern with a deeper directory, leave out `**`, or name the directory itself",
            caps.visits,
            base.display()
        ),
        (Some(Stop::Matches), true) => bail!(
            "{shown}: too broad: it matches more than {} paths; name the directory that holds them instead",
            caps.matches
        ),
        (Some(Stop::Visits), false) => out.warnings.push(format!(
            "{shown}: the search stopped after {} entries under {}; using the {} paths found so far; start the pattern with a deeper directory to get them all",
            caps.visits,
            base.display(),
            walk.found.len()
        )),
        (Some(Stop::Matches), false) => out.warnings.push(format!(
            "{shown}: it matches more than {} paths; using the first {}; name the directory that holds them instead",
            caps.matches, caps.matches
        )),
        (None, _) => {
            let at_top = base == Path::new("/")
                || home
                    .and_then(|h| std::fs::canonicalize(h).ok())
                    .is_some_and(|h| h == base);
            if at_top && pattern.parts().iter().any(|p| matches!(p, Part::Recursive)) {
                out.warnings.push(format!(
                    "{shown}: `**` from {} searches a very large tree on every run; start the pattern with a deeper directory",
                    base.display()
                ));
            }
        }
    }
    if let Some((dir, e)) = walk.unreadable.first() {
        let more = match walk.unreadable.len() {
            1 => String::new(),
            n => format!(" (and {} more directories)", n - 1),
        };
        out.warnings.push(format!(
            "{shown}: cannot list {}: {e}{more}; matching paths in there are not covered",
            dir.display()
        ));
    }
    let mut links = Vec::new();
    for (found, is_link) in walk.found {
        // A link a command planted in the workspace could point an allow pattern anywhere;
        // for a deny pattern, hiding the link's target is the cautious reading.
        if is_link && !flag.fails_closed() {
            links.push(found);
            continue;
        }
        // A dangling link or a path removed meanwhile has nothing left to protect or allow.
        if let Ok(real) = std::fs::canonicalize(&found) {
            out.paths.push(real);
        }
    }
    if let Some(link) = links.first() {
        let more = match links.len() {
            1 => String::new(),
            n => format!(" and {} more", n - 1),
        };
        out.warnings.push(format!(
            "{shown}: left out {}{more}: symbolic links, which patterns do not follow; name a link's target to allow it",
            link.display()
        ));
    }
    out.paths.sort();
    out.paths.dedup();
    if out.paths.is_empty() && walk.stop.is_none() {
        out.warnings.push(nothing_matched(&shown, flag));
    }
    Ok(out)
}

fn nothing_matched(shown: &str, flag: Flag) -> String {
    if flag.fails_closed() {
        format!("{shown}: matches nothing now; paths created later that match it are not covered")
    } else {
        format!("{shown}: matches nothing")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Visits,
    Matches,
}

#[derive(Debug, Default)]
struct Walk {
    /// Matching paths, each with whether it is a symbolic link.
    found: Vec<(PathBuf, bool)>,
    visited: usize,
    stop: Option<Stop>,
    unreadable: Vec<(PathBuf, std::io::Error)>,
}

/// A depth-first search from the literal base that goes only into directories some live state
/// can still match in, never through a symbolic link, and never into a directory that already
/// matched (what is in it is covered with it).
#[derive(Debug)]
struct Walker<'a> {
    pattern: &'a PathPattern,
    caps: Caps,
    stack: Vec<(PathBuf, Vec<usize>)>,
    walk: Walk,
}

impl<'a> Walker<'a> {
    fn new(pattern: &'a PathPattern, caps: Caps) -> Self {
        Walker {
            pattern,
            caps,
            stack: Vec::new(),
            walk: Walk::default(),
        }
    }

    fn run(mut self, base: &Path) -> Walk {
        let start = self.pattern.start();
        if start.contains(&self.pattern.done()) {
            self.walk.found.push((base.to_path_buf(), false));
            return self.walk;
        }
        if !base.is_dir() {
            return self.walk;
        }
        self.stack.push((base.to_path_buf(), start));
        while let Some((dir, states)) = self.stack.pop() {
            if self.search(&dir, &states).is_break() {
                break;
            }
        }
        self.walk
    }

    fn search(&mut self, dir: &Path, states: &[usize]) -> ControlFlow<()> {
        if let Some(names) = self.pattern.only_names(states) {
            for name in names {
                self.count()?;
                let path = dir.join(name);
                match std::fs::symlink_metadata(&path) {
                    Ok(meta) => self.consider(states, name, path, meta.file_type())?,
                    Err(e) if e.kind() == ErrorKind::NotFound => {}
                    Err(e) => self.walk.unreadable.push((dir.to_path_buf(), e)),
                }
            }
            return ControlFlow::Continue(());
        }
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) => {
                self.walk.unreadable.push((dir.to_path_buf(), e));
                return ControlFlow::Continue(());
            }
        };
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    self.walk.unreadable.push((dir.to_path_buf(), e));
                    break;
                }
            };
            self.count()?;
            // The entry's own type: a link to a directory is not a directory here.
            match entry.file_type() {
                Ok(kind) => self.consider(states, &entry.file_name(), entry.path(), kind)?,
                Err(e) => self.walk.unreadable.push((dir.to_path_buf(), e)),
            }
        }
        ControlFlow::Continue(())
    }

    fn count(&mut self) -> ControlFlow<()> {
        if self.walk.visited == self.caps.visits {
            self.walk.stop = Some(Stop::Visits);
            return ControlFlow::Break(());
        }
        self.walk.visited += 1;
        ControlFlow::Continue(())
    }

    fn consider(
        &mut self,
        states: &[usize],
        name: &OsStr,
        path: PathBuf,
        kind: FileType,
    ) -> ControlFlow<()> {
        let next = self.pattern.step(states, name);
        if next.contains(&self.pattern.done()) {
            if self.walk.found.len() == self.caps.matches {
                self.walk.stop = Some(Stop::Matches);
                return ControlFlow::Break(());
            }
            self.walk.found.push((path, kind.is_symlink()));
        } else if kind.is_dir() && !next.is_empty() {
            self.stack.push((path, next));
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch tree: names ending in `/` are directories, the rest files.
    struct Tree {
        _tmp: tempfile::TempDir,
        root: PathBuf,
    }

    impl Tree {
        fn new(entries: &[&str]) -> Self {
            let tmp = tempfile::tempdir().expect("temp dir");
            let root = std::fs::canonicalize(tmp.path()).expect("canonical");
            let tree = Tree { _tmp: tmp, root };
            tree.add(entries);
            tree
        }

        fn add(&self, entries: &[&str]) {
            for e in entries {
                let p = self.root.join(e);
                if e.ends_with('/') {
                    std::fs::create_dir_all(&p).expect("mkdir");
                } else {
                    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
                    std::fs::write(&p, "x").expect("write");
                }
            }
        }

        fn resolve(&self, pattern: &str, flag: Flag) -> anyhow::Result<Resolved> {
            self.resolve_with(pattern, flag, CAPS)
        }

        fn resolve_with(&self, pattern: &str, flag: Flag, caps: Caps) -> anyhow::Result<Resolved> {
            let home = self.root.join("home");
            resolve(Path::new(pattern), &self.root, Some(&home), flag, caps)
        }

        /// The matches of `pattern`, relative to the root, sorted.
        fn matches(&self, pattern: &str) -> Vec<String> {
            let r = self.resolve(pattern, Flag::DenyRead).expect("resolves");
            self.rel(&r.paths)
        }

        fn rel(&self, paths: &[PathBuf]) -> Vec<String> {
            let mut v: Vec<String> = paths
                .iter()
                .map(|p| {
                    p.strip_prefix(&self.root)
                        .expect("under the root")
                        .to_string_lossy()
                        .into_owned()
                })
                .collect();
            v.sort();
            v
        }
    }

    fn err(r: anyhow::Result<Resolved>) -> String {
        format!("{:#}", r.expect_err("an error"))
    }

    /// Asked about each path, a live pattern agrees with the expansion (a match, or inside
    /// one), and also covers what is made after it was read.
    #[test]
    fn a_live_pattern_covers_what_expansion_finds_and_what_comes_later() {
        let t = Tree::new(&[
            "a/x.pem",
            "a/b/y.pem",
            "a/b/z.txt",
            "c/x.pem",
            "keys/k",
            "other",
        ]);
        for pattern in ["a/**/*.pem", "*/x.pem", "k*", "a/*", "**/b"] {
            let live = LivePattern::new(Path::new(pattern), &t.root, Flag::DenyRead)
                .expect("reads")
                .expect("has wildcards");
            let found = t.resolve(pattern, Flag::DenyRead).expect("expands").paths;
            for p in [
                "a/x.pem",
                "a/b/y.pem",
                "a/b/z.txt",
                "c/x.pem",
                "keys/k",
                "other",
                "a",
            ] {
                let real = t.root.join(p);
                let expected = found.iter().any(|f| real.starts_with(f));
                assert_eq!(live.covers(&real), expected, "{pattern} on {p}");
            }
        }
        let live = LivePattern::new(Path::new("a/**/*.pem"), &t.root, Flag::DenyRead)
            .expect("reads")
            .expect("has wildcards");
        assert!(live.covers(&t.root.join("a/new/deeper/made-later.pem")));
        assert!(!live.covers(&t.root.join("a/new/made-later.txt")));
        assert!(
            LivePattern::new(Path::new("a/x.pem"), &t.root, Flag::DenyRead)
                .expect("reads")
                .is_none()
        );
    }

    #[test]
    fn star_matches_within_one_component_including_dot_files() {
        let t = Tree::new(&["a.pem", ".b.pem", "c.txt", "sub/d.pem"]);
        assert_eq!(t.matches("*.pem"), [".b.pem", "a.pem"]);
        assert_eq!(t.matches("sub/*"), ["sub/d.pem"]);
        assert_eq!(t.matches("*/d.pem"), ["sub/d.pem"]);
    }

    #[test]
    fn question_mark_and_classes() {
        let t = Tree::new(&["a.txt", "b.txt", "c.txt", "ab.txt"]);
        assert_eq!(t.matches("?.txt"), ["a.txt", "b.txt", "c.txt"]);
        assert_eq!(t.matches("[ab].txt"), ["a.txt", "b.txt"]);
        assert_eq!(t.matches("[!ab].txt"), ["c.txt"]);
    }

    #[test]
    fn double_star_matches_any_depth_including_none() {
        let t = Tree::new(&[
            "a.pem",
            "sub/b.pem",
            "sub/deep/er/c.pem",
            ".hidden/d.pem",
            "sub/e.txt",
        ]);
        assert_eq!(
            t.matches("**/*.pem"),
            [".hidden/d.pem", "a.pem", "sub/b.pem", "sub/deep/er/c.pem"]
        );
        assert_eq!(t.matches("sub/**/c.pem"), ["sub/deep/er/c.pem"]);
        // `**` at the end matches the directory itself, which covers all that is in it.
        assert_eq!(t.matches("sub/**"), ["sub"]);
    }

    #[test]
    fn a_matching_directory_is_not_searched_further() {
        let t = Tree::new(&["keys.d/inner.d/x", "keys.d/more/y"]);
        let r = t.resolve("**/*.d", Flag::DenyRead).expect("resolves");
        assert_eq!(t.rel(&r.paths), ["keys.d"]);
        assert_eq!(r.visited, 1, "only the root was listed");
    }

    #[test]
    fn the_search_goes_no_deeper_than_the_pattern() {
        let t = Tree::new(&["a/b/x", "a/c/x", "a/c/y"]);
        // An unrelated tree far bigger than the budget below.
        let mut deep = String::from("a/b/deep");
        for i in 0..30 {
            deep.push_str(&format!("/d{i}"));
            t.add(&[&format!("{deep}/f1"), &format!("{deep}/f2")]);
        }
        let small = Caps {
            visits: 10,
            matches: 10,
        };
        for pattern in ["a/*/x", "a/*/[x]"] {
            let r = t
                .resolve_with(pattern, Flag::DenyRead, small)
                .expect(pattern);
            assert_eq!(t.rel(&r.paths), ["a/b/x", "a/c/x"], "{pattern}");
            assert!(r.visited <= 6, "{pattern} visited {}", r.visited);
        }
        // A literal component after a wildcard is looked up, not listed for.
        let r = t.resolve("a/*/x", Flag::DenyRead).expect("resolves");
        assert_eq!(r.visited, 4, "a's two entries and two lookups");
    }

    #[test]
    fn too_many_entries_fails_for_deny_and_warns_for_allow() {
        let t = Tree::new(&[]);
        for i in 0..20 {
            t.add(&[&format!("many/f{i:02}")]);
        }
        t.add(&["many/z/key.pem"]);
        let small = Caps {
            visits: 10,
            matches: 100,
        };
        for flag in [Flag::DenyRead, Flag::DenyWrite] {
            let e = err(t.resolve_with("many/**/*.pem", flag, small));
            assert!(
                e.contains(&format!("{} many/**/*.pem: too broad", flag.name()))
                    && e.contains("deeper directory"),
                "{e}"
            );
        }
        let r = t
            .resolve_with("many/**/*.pem", Flag::AllowRead, small)
            .expect("an allow flag goes on");
        assert_eq!(r.visited, 10);
        assert!(
            r.warnings
                .iter()
                .any(|w| w.contains("--allow-read many/**/*.pem: the search stopped after 10")),
            "{:?}",
            r.warnings
        );
        // The same pattern within the cap finds everything.
        assert_eq!(t.matches("many/**/*.pem"), ["many/z/key.pem"]);
    }

    #[test]
    fn too_many_matches_fails_for_deny_and_warns_for_allow() {
        let t = Tree::new(&[]);
        for i in 0..8 {
            t.add(&[&format!("many/f{i}")]);
        }
        let small = Caps {
            visits: 1000,
            matches: 5,
        };
        let e = err(t.resolve_with("many/*", Flag::DenyRead, small));
        assert!(
            e.contains("--deny-read many/*: too broad: it matches more than 5 paths"),
            "{e}"
        );
        let r = t
            .resolve_with("many/*", Flag::AllowWrite, small)
            .expect("an allow flag goes on");
        assert_eq!(r.paths.len(), 5);
        assert!(
            r.warnings.iter().any(|w| w.contains("using the first 5")),
            "{:?}",
            r.warnings
        );
        let exact = Caps {
            visits: 1000,
            matches: 8,
        };
        let r = t
            .resolve_with("many/*", Flag::DenyRead, exact)
            .expect("fits");
        assert_eq!(r.paths.len(), 8);
    }

    #[test]
    fn a_bad_pattern_names_the_flag_and_the_pattern() {
        let t = Tree::new(&["a"]);
        let e = err(t.resolve("x/[ab", Flag::DenyRead));
        assert!(
            e.contains("--deny-read x/[ab: `[ab` is not a valid pattern: unclosed character class"),
            "{e}"
        );
        let e = err(t.resolve("*/../a", Flag::AllowRead));
        assert!(
            e.contains("--allow-read */../a: `..` cannot follow a wildcard"),
            "{e}"
        );
    }

    #[test]
    fn home_and_relative_patterns() {
        let t = Tree::new(&[
            "home/.ssh/id_rsa",
            "home/.ssh/id_ed25519",
            "home/.ssh/config",
            "ws/a.key",
        ]);
        let r = t.resolve("~/.ssh/id_*", Flag::DenyRead).expect("resolves");
        assert_eq!(
            t.rel(&r.paths),
            ["home/.ssh/id_ed25519", "home/.ssh/id_rsa"]
        );
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        assert_eq!(t.matches("ws/*.key"), ["ws/a.key"]);
        assert_eq!(t.matches("./ws/../ws/*.key"), ["ws/a.key"]);
        let abs = t.root.join("ws/*.key");
        assert_eq!(t.matches(abs.to_str().expect("utf-8")), ["ws/a.key"]);
    }

    #[test]
    fn wildcards_in_the_working_directory_itself_are_literal() {
        let t = Tree::new(&["odd[1]/a.txt", "odd1/b.txt"]);
        let cwd = t.root.join("odd[1]");
        let r = resolve(Path::new("*.txt"), &cwd, None, Flag::DenyRead, CAPS).expect("resolves");
        assert_eq!(t.rel(&r.paths), ["odd[1]/a.txt"]);
    }

    #[test]
    fn broad_bases_warn() {
        let t = Tree::new(&["home/a.pem"]);
        let r = t
            .resolve("~/**/*.pem", Flag::DenyRead)
            .expect("under the cap");
        assert_eq!(t.rel(&r.paths), ["home/a.pem"]);
        assert!(
            r.warnings
                .iter()
                .any(|w| w.contains("`**` from") && w.contains("very large tree")),
            "{:?}",
            r.warnings
        );
    }

    #[test]
    fn matching_nothing_warns() {
        let t = Tree::new(&["a.txt"]);
        let r = t.resolve("*.pem", Flag::DenyRead).expect("resolves");
        assert!(r.paths.is_empty());
        assert_eq!(
            r.warnings,
            [
                "--deny-read *.pem: matches nothing now; paths created later that match it are not covered"
            ]
        );
        let r = t
            .resolve("nowhere/*.pem", Flag::AllowRead)
            .expect("resolves");
        assert_eq!(r.warnings, ["--allow-read nowhere/*.pem: matches nothing"]);
    }

    #[test]
    fn paths_without_wildcards_behave_as_before() {
        let t = Tree::new(&["a.txt", "home/h"]);
        let r = t.resolve("a.txt", Flag::DenyRead).expect("resolves");
        assert_eq!(r.paths, [t.root.join("a.txt")]);
        let r = t.resolve("~/h", Flag::DenyRead).expect("resolves");
        assert_eq!(r.paths, [t.root.join("home/h")]);
        let e = err(t.resolve("nope", Flag::DenyWrite));
        assert!(
            e.starts_with(&format!(
                "--deny-write nope: cannot resolve {}: ",
                t.root.join("nope").display()
            )),
            "{e}"
        );
        // Braces are no wildcard, in plain paths and patterns alike.
        t.add(&["{a,b}.txt"]);
        assert_eq!(t.matches("{a,b}.txt"), ["{a,b}.txt"]);
        assert_eq!(t.matches("{a,b}*"), ["{a,b}.txt"]);
        assert_eq!(t.matches("[{]a,b}.*"), ["{a,b}.txt"]);
    }

    #[test]
    fn symbolic_links_are_not_followed() {
        let t = Tree::new(&["outside/o.pem", "outside/real.key", "base/in.pem"]);
        let link = |target: &str, at: &str| {
            std::os::unix::fs::symlink(t.root.join(target), t.root.join(at)).expect("symlink")
        };
        link("outside", "base/dir");
        link("outside/real.key", "base/k.pem");
        // The search does not enter the linked directory; a matching link itself is hidden
        // through its target for a deny flag, and left out of an allow flag.
        let r = t
            .resolve("base/**/*.pem", Flag::DenyRead)
            .expect("resolves");
        assert_eq!(t.rel(&r.paths), ["base/in.pem", "outside/real.key"]);
        let r = t
            .resolve("base/**/*.pem", Flag::AllowRead)
            .expect("resolves");
        assert_eq!(t.rel(&r.paths), ["base/in.pem"]);
        assert!(
            r.warnings
                .iter()
                .any(|w| w.contains("k.pem: symbolic links")),
            "{:?}",
            r.warnings
        );
        // A link in the literal base is followed, as it is for a plain path.
        assert_eq!(t.matches("base/dir/*.pem"), ["outside/o.pem"]);
    }

    #[test]
    fn names_that_are_not_utf8_still_match() {
        let t = Tree::new(&[]);
        let name = <OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"\xff.pem");
        std::fs::write(t.root.join(name), "x").expect("write");
        let r = t.resolve("*.pem", Flag::DenyRead).expect("resolves");
        assert_eq!(r.paths, [t.root.join(name)]);
    }

    #[test]
    fn every_flag_dedups_across_its_patterns() {
        let t = Tree::new(&["a.pem", "b.pem"]);
        let pats = [PathBuf::from("*.pem"), PathBuf::from("a.pem")];
        let all = resolve_all(&pats, &t.root, Flag::DenyRead, &mut Vec::new()).expect("resolves");
        assert_eq!(all, [t.root.join("a.pem"), t.root.join("b.pem")]);
    }
}
