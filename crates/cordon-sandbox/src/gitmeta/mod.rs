//! Git metadata in writable places: what of it makes git run a program, found before a run
//! (to keep it read-only) and checked after it (to take out what the run planted).
//!
//! git runs programs named by its repository files: hooks, and config keys such as
//! `core.fsmonitor` or a filter driver. A repository may sit at any depth (vendored code,
//! `node_modules`), be reached through a `.git` file, a `commondir`, a submodule under
//! `modules/` or a linked worktree under `worktrees/`, and keep its hooks in the tree
//! (`core.hooksPath`). Before a run all of these are found and the parts that run code kept
//! read-only; objects, refs, the index and logs stay writable so commits work. After it the
//! search is made again: a repository the run created or redirected keeps its objects, but
//! loses the hooks and config keys that would run a program, each one reported.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use crate::beneath::Kind;

use serde::{Deserialize, Serialize};

#[cfg(target_os = "linux")]
mod watch;
/// Elsewhere no directory is watched: every search looks at each one.
#[cfg(not(target_os = "linux"))]
mod watch {
    use std::path::Path;
    pub type Mark = u64;
    pub fn start() {}
    pub(super) fn mark() -> Option<Mark> {
        None
    }
    pub(super) fn add(_: &Path, _: Mark) -> bool {
        false
    }
    pub(super) fn add_all<'a>(_: impl Iterator<Item = &'a Path>, _: Mark) -> bool {
        false
    }
    pub(super) fn still_since(_: Mark) -> bool {
        false
    }
    pub(super) fn quiet<'a>(dirs: impl Iterator<Item = &'a Path>, _: Mark) -> Vec<bool> {
        dirs.map(|_| false).collect()
    }
}

/// From now on this process's searches are told by the kernel which directories changed
/// (`watch.rs`), for a session that searches the same tree before and after every command.
pub use watch::start as watch_changes;

/// Names in a git directory that make git run a program, or say where the rest is.
pub const RUNS_CODE: &[&str] = &["config", "config.worktree", "hooks", "commondir", "info"];

/// Most directory entries one search looks at before it stops (a tree of 100 000 files
/// takes about 0.1 s to search; docs/BENCHMARKS.md).
pub const DEFAULT_SCAN_LIMIT: usize = 400_000;

/// The variable that changes [`DEFAULT_SCAN_LIMIT`].
pub const SCAN_LIMIT_VAR: &str = "CORDON_GIT_SCAN_LIMIT";

/// The search limit: [`SCAN_LIMIT_VAR`] when it is a number, else the default.
pub fn scan_limit() -> Result<usize, String> {
    match std::env::var(SCAN_LIMIT_VAR) {
        Err(_) => Ok(DEFAULT_SCAN_LIMIT),
        Ok(v) => v.trim().parse().map_err(|_| {
            format!("{SCAN_LIMIT_VAR}={v:?} is not a number of directory entries; unset it or give e.g. {DEFAULT_SCAN_LIMIT}")
        }),
    }
}

/// Whether `rel`, a path relative to a writable place, is git metadata that makes git run a
/// program (or redirects git to metadata elsewhere): a `.git` itself, and under a `.git`
/// directory its config, hooks, `info/`, `commondir`, also those of submodules
/// (`modules/…`) and linked worktrees (`worktrees/…`).
pub fn runs_code(rel: &Path) -> bool {
    let names: Vec<&OsStr> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect();
    names.iter().enumerate().any(|(i, n)| {
        if *n != ".git" {
            return false;
        }
        let rest = &names[i + 1..];
        match rest.first().and_then(|f| f.to_str()) {
            None => true,
            Some(first) if RUNS_CODE.contains(&first) => true,
            Some("modules" | "worktrees") => rest[1..]
                .iter()
                .any(|r| r.to_str().is_some_and(|r| RUNS_CODE.contains(&r))),
            _ => false,
        }
    })
}

/// A git directory found, with the work tree it serves when known (for a relative
/// `core.hooksPath`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GitDir {
    pub path: PathBuf,
    pub worktree: Option<PathBuf>,
}

/// What a search found. Serialized (for a process that undoes a run should cordon die first,
/// `protect::GuardRecord`) without `dirs`: a search after the run then walks every directory
/// again rather than only those that changed, slower but as complete.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct GitMeta {
    pub gitdirs: Vec<GitDir>,
    /// Existing paths that make git run a program (or redirect it): to keep read-only.
    pub runs_code: Vec<PathBuf>,
    /// The content of each config file and hook found, to tell afterwards what changed.
    pub contents: HashMap<PathBuf, Vec<u8>>,
    /// `.git` names that are symlinks (their targets are in `contents`).
    pub links: Vec<PathBuf>,
    /// `.git` files (`gitdir: …`), with the directory they are in.
    pub gitfiles: Vec<(PathBuf, PathBuf)>,
    /// Every directory the search read, with what tells whether its entries changed since:
    /// the inode and the change time (which a command cannot set back).
    #[serde(skip)]
    pub dirs: Arc<Vec<(PathBuf, Stamp)>>,
    /// The search stopped at its limit: what lies beyond was not looked at.
    pub truncated: bool,
    /// Directories that could not be listed (not even by their owner's right to make them
    /// readable): what is in them was not looked at.
    #[serde(default)]
    pub unlisted: Vec<PathBuf>,
    /// How many directories this search listed (a search from a kept one: those that changed
    /// since, and the new ones under them).
    #[serde(skip)]
    pub listed: usize,
    /// How many it looked at with a `stat`.
    #[serde(skip)]
    pub stamped: usize,
    /// Where this search started among this process's watched events, when it has them:
    /// meaningless in another process, so never written.
    #[serde(skip)]
    mark: Option<watch::Mark>,
    /// Every directory in `dirs` was watched in time for `mark`.
    #[serde(skip)]
    all_watched: bool,
}

/// A directory's inode and change time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    ino: u64,
    ctime: i64,
    ctime_nsec: i64,
}

/// `path` as the searches look directories up: its bytes, less a separator at the end (which
/// only a writable place as given can have), so that a directory is found by its parent's
/// path plus a name. Cheaper than `Path`'s own hash and comparison, which take it apart
/// into components, on every directory of the tree.
fn key(path: &Path) -> &OsStr {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let mut end = bytes.len();
    while end > 1 && bytes[end - 1] == b'/' {
        end -= 1;
    }
    OsStr::from_bytes(&bytes[..end])
}

/// The entries of `dir` (see [`crate::beneath::open_dir_to_list`]), and its stamp taken once
/// it is open and before the names are read: a change after it shows afterwards.
fn listing(dir: &Path) -> Option<(Stamp, Vec<crate::beneath::Entry>)> {
    let fd = crate::beneath::open_dir_to_list(dir).ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    let stamp = Stamp {
        ino: st.st_ino as u64,
        ctime: st.st_ctime as i64,
        ctime_nsec: st.st_ctime_nsec as i64,
    };
    Some((stamp, crate::beneath::list_opened(fd).ok()?))
}

/// The stamp of each of `dirs` now. Most of a search from a kept one is these `stat`s, one a
/// directory of the tree, and they wait on nothing but the processor: so they are shared
/// between two threads where there are that many directories and processors.
fn stamps(dirs: &[(PathBuf, Stamp)], quiet: &[bool]) -> Vec<Option<Option<Stamp>>> {
    const WORTH_A_THREAD: usize = 512;
    let of = |part: &[(PathBuf, Stamp)], quiet: &[bool]| {
        part.iter()
            .zip(quiet)
            .map(|((d, _), q)| (!q).then(|| stamp(d)))
            .collect::<Vec<_>>()
    };
    let two = std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
    if !two || quiet.iter().filter(|q| !**q).count() < WORTH_A_THREAD {
        return of(dirs, quiet);
    }
    let half = dirs.len() / 2;
    let ((first, second), (q1, q2)) = (dirs.split_at(half), quiet.split_at(half));
    std::thread::scope(|scope| {
        let later = std::thread::Builder::new()
            .name("cordon-stat".into())
            .spawn_scoped(scope, || of(second, q2));
        let mut out = of(first, q1);
        match later.ok().and_then(|t| t.join().ok()) {
            Some(rest) => out.extend(rest),
            None => out.extend(of(second, q2)),
        }
        out
    })
}

fn stamp(dir: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(dir).ok()?;
    m.is_dir().then(|| Stamp {
        ino: m.ino(),
        ctime: m.ctime(),
        ctime_nsec: m.ctime_nsec(),
    })
}

/// A search as kept between processes, for the next one in the same places to search from
/// ([`rescan`]): with the directories and their stamps, which [`GitMeta`]'s own form (a
/// guard's record) leaves out.
#[derive(Debug, Serialize, Deserialize)]
pub struct Kept {
    roots: Vec<PathBuf>,
    limit: usize,
    found: GitMeta,
    dirs: Vec<(PathBuf, Stamp)>,
}

impl Kept {
    /// `found`, a search of `roots` with `limit`, to keep.
    pub fn new(roots: &[PathBuf], limit: usize, found: &GitMeta) -> Kept {
        Kept {
            roots: roots.to_vec(),
            limit,
            found: found.clone(),
            dirs: found.dirs.to_vec(),
        }
    }

    /// The search kept, if it searched `roots` with `limit` and was not cut short (what lay
    /// beyond its limit was never seen, so nothing can be searched from it).
    pub fn search_of(self, roots: &[PathBuf], limit: usize) -> Option<GitMeta> {
        let Kept {
            roots: searched,
            limit: with,
            mut found,
            dirs,
        } = self;
        if searched != roots || with != limit || found.truncated {
            return None;
        }
        found.dirs = Arc::new(dirs);
        Some(found)
    }
}

struct Search<'a> {
    roots: &'a [PathBuf],
    left: usize,
    seen: HashSet<PathBuf>,
    /// After a run: the directories read before it, which are looked at one by one rather
    /// than reached by the walk.
    known: HashSet<&'a OsStr>,
    /// What this search has read, by path: a repository's config is looked at for several
    /// keys, and once read it says the same for the rest of the search.
    read: HashMap<PathBuf, Option<Rc<[u8]>>>,
    /// A directory this search read or stamped could not be watched in time.
    missed_watch: bool,
    /// The directories found, as [`GitMeta::dirs`]: those of the search before when nothing
    /// changed since, shared.
    dirs: Vec<(PathBuf, Stamp)>,
    shared: Option<Arc<Vec<(PathBuf, Stamp)>>>,
    out: GitMeta,
}

/// Finds the git metadata in and reachable from `roots` (the writable places), looking at
/// no more than `limit` directory entries.
pub fn scan(roots: &[PathBuf], limit: usize) -> GitMeta {
    let mut s = Search::new(roots, limit);
    for root in roots {
        s.walk(root);
    }
    s.finish()
}

/// The search again after a run, reading only what may have changed: a directory read
/// before whose inode and change time are the same holds the same names (a new `.git` or
/// repository in it would have changed them), so only changed directories and the new ones
/// under them are read; every git directory and `.git` file known before is looked at again.
/// The result's directories are those unchanged, with the stamps they had, and those read
/// again: a search from it is as good as one from a whole walk.
pub fn rescan(before: &GitMeta, roots: &[PathBuf], limit: usize) -> GitMeta {
    let mut s = Search::new(roots, limit);
    // Nothing changed since the search before, by the kernel's word, and every directory of it
    // was watched by then: its directories are the tree's as they are, if the places searched
    // are still where they were.
    let unchanged = match (before.mark, s.out.mark) {
        (Some(m), Some(_)) if before.all_watched && !before.truncated => {
            watch::still_since(m)
                && roots.iter().all(|r| {
                    let at = before.dirs.iter().find(|(d, _)| key(d) == key(r));
                    at.is_some_and(|(_, was)| stamp(r) == Some(*was))
                })
                && s.take(before.dirs.len())
        }
        _ => false,
    };
    if unchanged {
        s.shared = Some(before.dirs.clone());
        s.out.unlisted = before.unlisted.clone();
        s.out.stamped = roots.len();
    } else {
        s.from(before);
    }
    for g in &before.gitdirs {
        // Not where its path now leads elsewhere (a directory on its way became a link): a
        // walk does not follow links, and finds what is there now by itself.
        if std::fs::canonicalize(&g.path).is_ok_and(|p| p == g.path) {
            s.gitdir(&g.path, g.worktree.as_deref());
        }
    }
    // A `.git` file or link known before is looked at again where its directory still is.
    if !before.gitfiles.is_empty() || !before.links.is_empty() {
        let found = s.shared.as_deref().unwrap_or(&s.dirs);
        let still: HashSet<std::ffi::OsString> =
            found.iter().map(|(d, _)| key(d).to_owned()).collect();
        for (file, dir) in &before.gitfiles {
            if still.contains(key(dir)) {
                s.dot_git(file, dir);
            }
        }
        for link in &before.links {
            let dir = link.parent().unwrap_or(Path::new("/"));
            if still.contains(key(dir)) {
                s.dot_git(link, dir);
            }
        }
    }
    s.finish()
}

fn is_file(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file())
}

fn exists(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

/// What a `.git` file (`gitdir: …`) points at, resolved against its directory.
pub(crate) fn gitfile_target(file: &Path) -> Option<PathBuf> {
    let text = crate::beneath::read_regular(file)?;
    let text = String::from_utf8_lossy(&text);
    let target = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    Some(file.parent()?.join(target))
}

impl<'a> Search<'a> {
    /// A search of `roots` starting now, with its mark when directories are watched.
    fn new(roots: &'a [PathBuf], limit: usize) -> Search<'a> {
        Search {
            roots,
            left: limit,
            seen: HashSet::new(),
            known: HashSet::new(),
            read: HashMap::new(),
            missed_watch: false,
            dirs: Vec::new(),
            shared: None,
            out: GitMeta {
                mark: watch::mark(),
                ..GitMeta::default()
            },
        }
    }

    /// The directories of `before` still there, as a walk would reach them: one whose parent
    /// went, or became a link, is not looked at by its path (which would go through the link,
    /// where a walk never goes). `before.dirs` lists parents first, as a walk reads them; each
    /// is looked up by its bytes ([`key`]: a directory's path is its parent's and a name).
    fn from(&mut self, before: &'a GitMeta) {
        self.known = before.dirs.iter().map(|(d, _)| key(d)).collect();
        let roots = self.roots;
        for root in roots {
            if !self.known.contains(key(root)) {
                self.walk(root);
            }
        }
        let mut reached: HashSet<&OsStr> = HashSet::new();
        let mut walked: HashSet<std::ffi::OsString> =
            self.dirs.iter().map(|(d, _)| key(d).to_owned()).collect();
        let unlisted: HashSet<&OsStr> = before.unlisted.iter().map(|d| key(d)).collect();
        // What the watch vouches for (see `watch.rs`): a directory quiet since the search
        // before is taken as it was where its parent was too, with no `stat`. The rest are
        // watched from now on, before their `stat`s, which are made together.
        let quiet = match (before.mark, self.out.mark) {
            (Some(m), Some(_)) => watch::quiet(before.dirs.iter().map(|(d, _)| d.as_path()), m),
            _ => vec![false; before.dirs.len()],
        };
        if let Some(m) = self.out.mark {
            let rest = before.dirs.iter().zip(&quiet).filter(|(_, q)| !**q);
            if !watch::add_all(rest.map(|((d, _), _)| d.as_path()), m) {
                self.missed_watch = true;
            }
        }
        let mut stamps = stamps(&before.dirs, &quiet);
        self.out.stamped += stamps.iter().filter(|t| t.is_some()).count();
        for (((dir, was), now), quiet) in before.dirs.iter().zip(stamps.iter_mut()).zip(&quiet) {
            if !self.take(1) {
                break;
            }
            let parent = dir.parent().map(key);
            let parent_unchanged = parent.is_some_and(|p| reached.contains(p));
            if !parent_unchanged
                && !parent.is_some_and(|p| walked.contains(p))
                && !roots.iter().any(|r| r == dir)
            {
                continue;
            }
            let now = match now.take() {
                Some(now) => now,
                // Quiet, and its path leads where it did: as it was.
                None if *quiet && parent_unchanged => Some(*was),
                None => {
                    self.watch(dir);
                    self.out.stamped += 1;
                    stamp(dir)
                }
            };
            match now {
                Some(now) if now == *was => {
                    if unlisted.contains(key(dir)) {
                        self.out.unlisted.push(dir.clone());
                    }
                    self.dirs.push((dir.clone(), now));
                    reached.insert(key(dir));
                }
                Some(_) => {
                    let from = self.dirs.len();
                    self.walk(dir);
                    walked.extend(self.dirs[from..].iter().map(|(d, _)| key(d).to_owned()));
                }
                // Gone: what it held went with it.
                None => {}
            }
        }
    }

    /// Watches `dir` for this search, before it is stamped or listed.
    fn watch(&mut self, dir: &Path) {
        if let Some(m) = self.out.mark
            && !watch::add(dir, m)
        {
            self.missed_watch = true;
        }
    }

    fn finish(mut self) -> GitMeta {
        self.out.dirs = self.shared.unwrap_or_else(|| Arc::new(self.dirs));
        self.out.all_watched = self.out.mark.is_some() && !self.missed_watch;
        self.out.runs_code.sort();
        self.out.runs_code.dedup();
        self.out.links.sort();
        self.out.links.dedup();
        self.out
    }

    /// Looks at one directory's entries; false when the limit is reached.
    fn take(&mut self, n: usize) -> bool {
        if self.left < n {
            self.left = 0;
            self.out.truncated = true;
            return false;
        }
        self.left -= n;
        true
    }

    fn walk(&mut self, root: &Path) {
        // Breadth first: where the limit stops it, the repositories nearest the top (the
        // ones a user's git meets first) have been found.
        let mut queue = std::collections::VecDeque::from([root.to_path_buf()]);
        while let Some(dir) = queue.pop_front() {
            self.out.listed += 1;
            self.watch(&dir);
            let Some((stamp, entries)) = listing(&dir) else {
                // Kept with its stamp, so that the change that makes it listable (or another
                // directory) shows to the next search; the check after a run reports it.
                if let Some(stamp) = stamp(&dir) {
                    self.dirs.push((dir.clone(), stamp));
                    self.out.unlisted.push(dir);
                }
                continue;
            };
            if !self.take(entries.len()) {
                return;
            }
            self.dirs.push((dir.clone(), stamp));
            let has = |n: &str| entries.iter().any(|e| e.name == n);
            if has("HEAD") && has("objects") && has("refs") {
                // A bare repository: git finds it from a directory inside it.
                self.gitdir(&dir, None);
                continue;
            }
            for e in &entries {
                let path = dir.join(&e.name);
                if e.name == ".git" {
                    self.dot_git(&path, &dir);
                } else if e.kind == Kind::Dir && !self.known.contains(key(&path)) {
                    queue.push_back(path);
                }
            }
        }
    }

    /// A `.git` in `dir`: a git directory, a file pointing at one, or a link.
    fn dot_git(&mut self, path: &Path, dir: &Path) {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return;
        };
        let t = meta.file_type();
        if t.is_dir() {
            self.gitdir(path, Some(dir));
        } else if t.is_symlink() {
            // Where it leads is not followed: a link the run made is taken away after it,
            // one that was there is kept as it is.
            self.out.runs_code.push(path.to_path_buf());
            self.out.links.push(path.to_path_buf());
            if let Ok(target) = std::fs::read_link(path) {
                let bytes = target.into_os_string().into_encoded_bytes();
                self.out.contents.insert(path.to_path_buf(), bytes);
            }
        } else if t.is_file() {
            self.out.runs_code.push(path.to_path_buf());
            self.out
                .gitfiles
                .push((path.to_path_buf(), dir.to_path_buf()));
            self.remember(path);
            if let Some(target) = gitfile_target(path) {
                self.gitdir(&target, Some(dir));
            }
        }
    }

    /// The hooks in `dir`; git never runs a `.sample`, so those are not read.
    fn remember_hooks(&mut self, dir: &Path) {
        if let Some((_, hooks)) = listing(dir) {
            for h in hooks {
                if !h.name.to_string_lossy().ends_with(".sample") {
                    self.remember(&dir.join(&h.name));
                }
            }
        }
    }

    fn remember(&mut self, file: &Path) {
        if let Some(bytes) = self.read(file) {
            self.out.contents.insert(file.to_path_buf(), bytes.to_vec());
        }
    }

    /// `file`'s bytes, read once in this search.
    fn read(&mut self, file: &Path) -> Option<Rc<[u8]>> {
        self.read
            .entry(file.to_path_buf())
            .or_insert_with(|| crate::beneath::read_regular(file).map(Rc::from))
            .clone()
    }

    /// The values of the keys `want` picks in the config file `file`.
    fn config_values(
        &mut self,
        file: &Path,
        want: impl Fn(&str, Option<&str>, &str) -> bool,
    ) -> Vec<String> {
        self.read(file)
            .map(|text| config_values(&String::from_utf8_lossy(&text), want))
            .unwrap_or_default()
    }

    fn gitdir(&mut self, path: &Path, worktree: Option<&Path>) {
        let Ok(path) = std::fs::canonicalize(path) else {
            return;
        };
        if !std::fs::metadata(&path).is_ok_and(|m| m.is_dir()) {
            return;
        }
        let first = self.seen.insert(path.clone());
        if let Some(wt) = worktree {
            // Also where the directory was met before: a submodule's is met first under
            // `modules/`, without its work tree; its `.git` file brings the work tree for a
            // relative hooksPath.
            self.hooks_path(&path, wt);
        }
        if !first {
            return;
        }
        self.out.gitdirs.push(GitDir {
            path: path.clone(),
            worktree: worktree.map(Path::to_path_buf),
        });
        for name in RUNS_CODE {
            let p = path.join(name);
            if exists(&p) {
                self.out.runs_code.push(p);
            }
        }
        for name in ["config", "config.worktree"] {
            let cfg = path.join(name);
            if !is_file(&cfg) {
                continue;
            }
            self.remember(&cfg);
            for inc in self.config_values(&cfg, is_include) {
                let inc = expand(&inc, cfg.parent().unwrap_or(&path));
                if is_file(&inc) {
                    self.out.runs_code.push(inc.clone());
                    self.remember(&inc);
                }
            }
        }
        self.remember_hooks(&path.join("hooks"));
        if let Some(c) = self.read(&path.join("commondir")) {
            let common = path.join(String::from_utf8_lossy(&c).trim());
            self.gitdir(&common, None);
        }
        for nested in ["modules", "worktrees"] {
            self.nested(&path.join(nested));
        }
    }

    /// Git directories under `modules/` (names may hold slashes, submodules nest) and
    /// `worktrees/`.
    fn nested(&mut self, dir: &Path) {
        let Some((_, entries)) = listing(dir) else {
            return;
        };
        if !self.take(entries.len()) {
            return;
        }
        for e in entries {
            if e.kind != Kind::Dir {
                continue;
            }
            let p = dir.join(&e.name);
            if exists(&p.join("HEAD")) || exists(&p.join("commondir")) {
                self.gitdir(&p, None);
            } else {
                self.nested(&p);
            }
        }
    }

    /// The directory a repository's `core.hooksPath` names, relative to its work tree.
    fn hooks_path(&mut self, gitdir: &Path, worktree: &Path) {
        for name in ["config", "config.worktree"] {
            for v in self.config_values(&gitdir.join(name), |s, _, k| {
                s == "core" && k == "hookspath"
            }) {
                let dir = expand(&v, worktree);
                if exists(&dir) && self.roots.iter().any(|r| dir.starts_with(r)) {
                    self.out.runs_code.push(dir.clone());
                    self.remember_hooks(&dir);
                }
            }
        }
    }
}

fn is_include(section: &str, _sub: Option<&str>, key: &str) -> bool {
    (section == "include" || section == "includeif") && key == "path"
}

/// A path from a config value: `~/` is the home directory, a relative one is taken from
/// `base`.
fn expand(value: &str, base: &Path) -> PathBuf {
    match value.strip_prefix("~/") {
        Some(rest) => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(rest),
        None => base.join(value),
    }
}

/// The values of the keys `want` picks in a config file's `text`.
fn config_values(text: &str, want: impl Fn(&str, Option<&str>, &str) -> bool) -> Vec<String> {
    parse(text)
        .into_iter()
        .filter_map(|l| match l {
            Line::Key {
                section,
                sub,
                key,
                value,
                ..
            } if want(&section, sub.as_deref(), &key) => Some(value),
            _ => None,
        })
        .collect()
}

/// One logical line of a git config file.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// A section header, a comment or a blank line: kept as written.
    Other(String),
    /// `key = value` (continuations joined in `raw`), with the section it is in.
    Key {
        raw: String,
        section: String,
        sub: Option<String>,
        key: String,
        value: String,
    },
    /// Something git would not read either: kept out of a config cordon writes.
    Unreadable(String),
}

/// Reads a config file into logical lines, the way git-config(1) describes the syntax:
/// `[section]`, `[section "sub"]`, `[section.sub]`, a key after a header on the same line,
/// quotes, escapes, `#`/`;` comments and `\` continuations.
fn parse(text: &str) -> Vec<Line> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut sub: Option<String> = None;
    let mut lines = text.split_inclusive('\n').peekable();
    while let Some(first) = lines.next() {
        let mut raw = first.to_string();
        let trimmed = first.trim_start();
        let mut rest: &str = trimmed;
        let mut header = String::new();
        if trimmed.starts_with('[') {
            let Some((name, tail, len)) = read_header(trimmed) else {
                out.push(Line::Unreadable(raw));
                continue;
            };
            (section, sub) = name;
            header = first[..first.len() - trimmed.len() + len].to_string();
            rest = tail;
        }
        let body = rest.trim();
        if body.is_empty() || body.starts_with('#') || body.starts_with(';') {
            out.push(Line::Other(raw));
            continue;
        }
        // Continuations: an odd number of trailing backslashes outside quotes.
        let mut logical = rest.to_string();
        while continues(&logical) {
            let Some(next) = lines.next() else { break };
            raw.push_str(next);
            logical.push_str(next);
        }
        let key: String = body
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        let after = body[key.len()..].trim_start();
        let value = if after.is_empty() || after.starts_with('#') || after.starts_with(';') {
            Some(String::new())
        } else {
            after
                .strip_prefix('=')
                .map(|v| unquote(logical.split_once('=').map_or(v, |(_, v)| v)))
        };
        match value {
            Some(value)
                if !key.is_empty() && key.starts_with(|c: char| c.is_ascii_alphabetic()) =>
            {
                if !header.is_empty() {
                    out.push(Line::Other(format!("{}\n", header.trim_end())));
                    raw = raw[header.len()..].to_string();
                }
                out.push(Line::Key {
                    raw,
                    section: section.clone(),
                    sub: sub.clone(),
                    key: key.to_ascii_lowercase(),
                    value,
                });
            }
            _ => out.push(Line::Unreadable(raw)),
        }
    }
    out
}

/// A section's name (lower case) and subsection.
type Section = (String, Option<String>);

/// `[name]`, `[name "sub"]` or `[name.sub]` at the start of `line`: the section (lower
/// case) and subsection, what follows on the line, and the header's length.
fn read_header(line: &str) -> Option<(Section, &str, usize)> {
    let inner = &line[1..];
    let name_len = inner
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.'))
        .unwrap_or(inner.len());
    let name = &inner[..name_len];
    let after = &inner[name_len..];
    if let Some(close) = after.strip_prefix(']') {
        let (section, sub) = match name.split_once('.') {
            Some((s, sub)) => (s.to_ascii_lowercase(), Some(sub.to_ascii_lowercase())),
            None => (name.to_ascii_lowercase(), None),
        };
        return Some(((section, sub), close, 1 + name_len + 1));
    }
    let quoted = after.trim_start().strip_prefix('"')?;
    let mut sub = String::new();
    let mut chars = quoted.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => sub.push(chars.next()?.1),
            '"' => {
                let tail = quoted[i + 1..].strip_prefix(']')?;
                let len = line.len() - tail.len();
                return Some(((name.to_ascii_lowercase(), Some(sub)), tail, len));
            }
            '\n' => return None,
            c => sub.push(c),
        }
    }
    None
}

fn continues(logical: &str) -> bool {
    let mut quoted = false;
    let mut escaped = false;
    let body = logical.trim_end_matches(['\n', '\r']);
    for c in body.chars() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '"' => quoted = !quoted,
            '#' | ';' if !quoted => return false,
            _ => {}
        }
    }
    escaped
}

/// A value as git reads it: quotes removed, escapes decoded, comments cut, continuations
/// joined.
fn unquote(v: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('\n') | None => {}
                Some(c) => out.push(c),
            },
            '#' | ';' if !quoted => break,
            '\n' | '\r' => {}
            c => out.push(c),
        }
    }
    out.trim().to_string()
}

/// Whether a config key makes git run a program (or load more config that may), taken from
/// git-config(1): `section` and `key` in lower case, `sub` as written.
pub fn key_runs_program(section: &str, sub: Option<&str>, key: &str, value: &str) -> bool {
    let v = value.trim_start();
    match (section, sub, key) {
        // Programs git runs by name or as a shell command.
        ("core", None, "fsmonitor" | "hookspath" | "sshcommand" | "pager" | "editor")
        | ("core", None, "askpass" | "gitproxy" | "alternaterefscommand") => true,
        ("sequence", None, "editor") => true,
        ("diff", None, "external") => true,
        ("diff", Some(_), "command" | "textconv") => true,
        ("merge", Some(_), "driver") => true,
        ("filter", Some(_), "clean" | "smudge" | "process") => true,
        ("difftool" | "mergetool", Some(_), "cmd" | "path") => true,
        ("alias", _, _) => v.starts_with('!'),
        ("credential", _, "helper") => true,
        ("gpg", _, "program") | ("gpg", Some(_), "defaultkeycommand") => true,
        ("uploadpack", None, "packobjectshook") => true,
        ("pager", _, _) => true,
        ("web", None, "browser") => true,
        ("browser" | "man" | "guitool", Some(_), "cmd" | "path") => true,
        ("sendemail", _, "sendmailcmd" | "tocmd" | "cccmd" | "headercmd" | "smtpserver") => true,
        ("trailer", Some(_), "command" | "cmd") => true,
        ("submodule", Some(_), "update") => v.starts_with('!'),
        ("remote", Some(_), "uploadpack" | "receivepack" | "vcs") => true,
        ("remote", Some(_), "url" | "pushurl") => v.starts_with("ext::"),
        ("url", Some(base), "insteadof" | "pushinsteadof") => base.starts_with("ext::"),
        ("protocol", _, "allow") => true,
        ("init", None, "templatedir") => true,
        // More config, from a file the command may have written.
        ("include" | "includeif", _, "path") => true,
        _ => false,
    }
}

/// A config file's text with the keys that run a program taken out, and what was taken.
/// Lines git could not read either are taken out too (git refuses such a file; cordon
/// will not guess what it means).
pub fn sanitize_config(text: &str) -> (String, Vec<String>) {
    let mut kept = String::new();
    let mut removed = Vec::new();
    for line in parse(text) {
        match line {
            Line::Other(raw) => kept.push_str(&raw),
            Line::Key {
                raw,
                section,
                sub,
                key,
                value,
            } => {
                if key_runs_program(&section, sub.as_deref(), &key, &value) {
                    let name = match &sub {
                        Some(s) => format!("{section}.{s}.{key}"),
                        None => format!("{section}.{key}"),
                    };
                    removed.push(format!("{name} = {value}"));
                } else {
                    kept.push_str(&raw);
                }
            }
            Line::Unreadable(raw) => removed.push(format!("unreadable line {:?}", raw.trim())),
        }
    }
    (kept, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_runs_code_is_named() {
        for p in [
            ".git",
            ".git/config",
            ".git/hooks/pre-commit",
            "vendor/lib/.git/config",
            "node_modules/x/.git/hooks",
            ".git/modules/sub/config",
            ".git/modules/a/modules/b/hooks/post-checkout",
            ".git/worktrees/wt/commondir",
            ".git/info/attributes",
        ] {
            assert!(runs_code(Path::new(p)), "{p}");
        }
        for p in [
            ".git/objects/ab/cdef",
            ".git/refs/heads/config",
            ".git/index",
            ".git/logs/HEAD",
            "src/config",
            ".gitignore",
        ] {
            assert!(!runs_code(Path::new(p)), "{p}");
        }
    }

    #[test]
    fn keys_that_run_programs_are_taken_out() {
        let text = "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = evil\n\
                    [core] hooksPath = .husky\n\
                    [alias]\n\tst = status\n\tx = \"!sh -c evil\"\n\
                    [filter \"lfs\"]\n\tsmudge = evil \\\n  more\n\
                    [diff.foo]\n\ttextconv = evil\n\
                    [includeIf \"gitdir:/\"]\n\tpath = evil.cfg\n\
                    [remote \"o\"]\n\turl = ext::sh -c evil\n\tfetch = +refs/heads/*:refs/remotes/o/*\n\
                    [user]\n\tname = Me # core.editor = not a key\n";
        let (kept, removed) = sanitize_config(text);
        let names: Vec<&str> = removed
            .iter()
            .map(|r| r.split(" = ").next().unwrap_or(""))
            .collect();
        assert_eq!(
            names,
            [
                "core.fsmonitor",
                "core.hookspath",
                "alias.x",
                "filter.lfs.smudge",
                "diff.foo.textconv",
                "includeif.gitdir:/.path",
                "remote.o.url"
            ],
            "{kept}"
        );
        assert!(kept.contains("repositoryformatversion") && kept.contains("st = status"));
        assert!(kept.contains("fetch = +refs") && kept.contains("name = Me"));
        assert!(!kept.contains("evil"), "{kept}");
        assert!(
            kept.contains("[core]\n"),
            "the header of a same-line key stays"
        );
    }

    #[test]
    fn a_nested_repository_and_its_hooks_path_are_found() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let root = std::fs::canonicalize(dir.path())?;
        let lib = root.join("node_modules/lib");
        std::fs::create_dir_all(lib.join(".git/hooks"))?;
        std::fs::create_dir_all(lib.join(".git/objects"))?;
        std::fs::create_dir_all(lib.join(".husky"))?;
        std::fs::write(lib.join(".git/config"), "[core]\n\thooksPath = .husky\n")?;
        std::fs::create_dir_all(root.join(".git/modules/sub/hooks"))?;
        std::fs::write(root.join(".git/modules/sub/HEAD"), "ref: refs/heads/main\n")?;
        std::fs::write(root.join(".git/modules/sub/config"), "[core]\n")?;
        std::fs::create_dir_all(root.join("sub"))?;
        std::fs::write(root.join("sub/.git"), "gitdir: ../.git/modules/sub\n")?;
        let found = scan(std::slice::from_ref(&root), 1000);
        for p in [
            "node_modules/lib/.git/config",
            "node_modules/lib/.git/hooks",
            "node_modules/lib/.husky",
            ".git/modules/sub/config",
            ".git/modules/sub/hooks",
            "sub/.git",
        ] {
            assert!(found.runs_code.contains(&root.join(p)), "{p}: {found:?}");
        }
        assert!(!found.truncated);
        assert!(scan(std::slice::from_ref(&root), 3).truncated);

        // After a run: a repository made deep in an unchanged-looking tree is found, also
        // when the command set the directory's times back.
        let deep = root.join("node_modules/lib/src/deep");
        std::fs::create_dir_all(&deep)?;
        let found = scan(std::slice::from_ref(&root), 1000);
        let mtime = std::fs::metadata(&deep)?.modified()?;
        std::fs::create_dir_all(deep.join(".git/hooks"))?;
        std::fs::File::open(&deep)?.set_modified(mtime)?;
        let after = rescan(&found, std::slice::from_ref(&root), 1000);
        assert!(
            after.gitdirs.iter().any(|g| g.path == deep.join(".git")),
            "{after:?}"
        );
        assert!(after.gitdirs.len() > found.gitdirs.len());
        Ok(())
    }

    /// A search kept between processes reads back as the search it was, directories and
    /// stamps included; one of other places, with another limit, or cut short gives nothing
    /// to search from.
    #[test]
    fn a_kept_search_is_the_search_for_its_places_only() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let root = std::fs::canonicalize(dir.path())?;
        let roots = std::slice::from_ref(&root);
        std::fs::create_dir_all(root.join("a/.git/hooks"))?;
        let found = scan(roots, 1000);
        let text = serde_json::to_string(&Kept::new(roots, 1000, &found))?;
        let back = |roots: &[PathBuf], limit| {
            serde_json::from_str::<Kept>(&text)
                .expect("reads back")
                .search_of(roots, limit)
        };
        let again = back(roots, 1000).expect("the same places");
        assert_eq!(again.dirs, found.dirs);
        assert_eq!(again.runs_code, found.runs_code);
        assert!(back(roots, 999).is_none());
        assert!(back(&[root.join("a")], 1000).is_none());
        let cut = scan(roots, 1);
        assert!(cut.truncated);
        let text = serde_json::to_string(&Kept::new(roots, 1, &cut))?;
        assert!(
            serde_json::from_str::<Kept>(&text)
                .expect("reads back")
                .search_of(roots, 1)
                .is_none()
        );
        Ok(())
    }

    /// A search from a kept one lists only the directories that changed and the new ones
    /// under them, also where the writable place was given with a separator at its end
    /// (directories are looked up by their bytes, a parent's path and a name).
    #[test]
    fn a_search_from_a_kept_one_lists_only_what_changed() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let root = std::fs::canonicalize(dir.path())?;
        std::fs::create_dir_all(root.join("src/a/b"))?;
        std::fs::create_dir_all(root.join("vendor/x/.git/hooks"))?;
        let mut slashed = root.clone().into_os_string();
        slashed.push("/");
        for roots in [vec![root.clone()], vec![PathBuf::from(slashed)]] {
            let first = scan(&roots, 1000);
            let again = rescan(&first, &roots, 1000);
            assert_eq!(again.listed, 0, "{roots:?}");
            assert_eq!(again.dirs, first.dirs);
            let new = root.join("src/a/b/new/.git");
            std::fs::create_dir_all(new.join("hooks"))?;
            let after = rescan(&again, &roots, 1000);
            // `b`, which changed, and `new`; the git directory is read as one, not listed.
            assert_eq!(after.listed, 2, "{roots:?}");
            assert!(after.gitdirs.iter().any(|g| g.path == new), "{roots:?}");
            std::fs::remove_dir_all(root.join("src/a/b/new"))?;
        }
        Ok(())
    }

    /// A search from a search from a search finds what a whole walk finds, whatever changed
    /// between them: each keeps the directories it did not need to read.
    #[test]
    fn searches_made_each_from_the_last_find_what_a_walk_finds() -> std::io::Result<()> {
        searches_find_what_a_walk_finds()
    }

    /// The same with the kernel telling which directories changed: also when a directory two
    /// up was replaced (its children's own watches stay quiet), and when so many events came
    /// that the queue overflowed and the one that mattered was lost.
    #[cfg(target_os = "linux")]
    #[test]
    fn searches_told_what_changed_by_the_kernel_find_what_a_walk_finds() -> std::io::Result<()> {
        watch_changes();
        searches_find_what_a_walk_finds()
    }

    /// With the kernel watching, a search from the last one looks at no directory but the
    /// place searched where nothing changed, and at few where one did.
    #[cfg(target_os = "linux")]
    #[test]
    fn with_the_kernel_watching_unchanged_directories_are_not_looked_at() -> std::io::Result<()> {
        watch_changes();
        let dir = tempfile::tempdir()?;
        let root = std::fs::canonicalize(dir.path())?;
        let roots = std::slice::from_ref(&root);
        for i in 0..50 {
            std::fs::create_dir_all(root.join(format!("src/m{}/p{i}", i % 5)))?;
        }
        let first = scan(roots, 10_000);
        let again = rescan(&first, roots, 10_000);
        assert_eq!((again.stamped, again.listed), (1, 0));
        std::fs::create_dir_all(root.join("src/m3/p8/.git/hooks"))?;
        let after = rescan(&again, roots, 10_000);
        assert!(after.stamped < 5, "{} looked at", after.stamped);
        assert!(
            after
                .gitdirs
                .iter()
                .any(|g| g.path == root.join("src/m3/p8/.git"))
        );
        Ok(())
    }

    /// A mount over a directory changes where its path leads with no event on any directory
    /// watched: the changed mount table makes the next search look at every directory.
    #[cfg(target_os = "linux")]
    #[test]
    fn with_the_kernel_watching_a_mount_over_a_directory_is_looked_at() -> std::io::Result<()> {
        if !rustix::process::geteuid().is_root() {
            let why = "skipped: mounting a tmpfs over a directory needs root";
            assert!(std::env::var_os("CORDON_TEST_NO_SKIP").is_none(), "{why}");
            eprintln!("{why}");
            return Ok(());
        }
        watch_changes();
        let dir = tempfile::tempdir()?;
        let root = std::fs::canonicalize(dir.path())?;
        let roots = std::slice::from_ref(&root);
        let over = root.join("src/a");
        std::fs::create_dir_all(over.join("b"))?;
        let again = rescan(&scan(roots, 1000), roots, 1000);
        struct Mounted(PathBuf);
        impl Drop for Mounted {
            fn drop(&mut self) {
                let _ = std::process::Command::new("umount").arg(&self.0).status();
            }
        }
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "tmpfs"])
            .arg(&over)
            .status()?;
        assert!(mounted.success(), "mount -t tmpfs over {}", over.display());
        let _mounted = Mounted(over.clone());
        std::fs::create_dir_all(over.join("lib/.git/hooks"))?;
        let after = rescan(&again, roots, 1000);
        assert!(
            after
                .gitdirs
                .iter()
                .any(|g| g.path == over.join("lib/.git")),
            "the repository under the mount was not found"
        );
        Ok(())
    }

    fn searches_find_what_a_walk_finds() -> std::io::Result<()> {
        // Above the files the overflow makes.
        const LIMIT: usize = 1_000_000;
        let dir = tempfile::tempdir()?;
        let root = std::fs::canonicalize(dir.path())?;
        let roots = std::slice::from_ref(&root);
        std::fs::create_dir_all(root.join("src/a/b"))?;
        std::fs::create_dir_all(root.join("vendor/x/.git/hooks"))?;
        std::fs::create_dir_all(root.join("noise"))?;
        let queue: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(16_384);
        let same = |a: &GitMeta, b: &GitMeta| {
            let set = |m: &GitMeta| {
                let mut dirs: Vec<_> = m.dirs.iter().map(|(d, _)| d.clone()).collect();
                dirs.sort();
                let mut gitdirs: Vec<_> = m.gitdirs.iter().map(|g| g.path.clone()).collect();
                gitdirs.sort();
                (dirs, gitdirs, m.runs_code.clone())
            };
            assert_eq!(set(a), set(b));
        };
        let outside = tempfile::tempdir()?;
        let mut last = scan(roots, LIMIT);
        let changes: [&dyn Fn() -> std::io::Result<()>; 7] = [
            // Nothing.
            &|| Ok(()),
            // A repository deep in a directory read before.
            &|| std::fs::create_dir_all(root.join("src/a/b/.git/hooks")),
            // A directory on the way replaced by a new one holding a repository.
            &|| {
                std::fs::rename(root.join("src/a"), root.join("src/old"))?;
                std::fs::create_dir_all(root.join("src/a/c/.git"))
            },
            // A repository taken away.
            &|| std::fs::remove_dir_all(root.join("vendor/x")),
            // A directory on the way made a link to a tree outside: a walk does not follow it.
            &|| {
                std::fs::create_dir_all(outside.path().join("old/b/.git/hooks"))?;
                std::fs::rename(root.join("src/old"), root.join("src/gone"))?;
                std::os::unix::fs::symlink(outside.path().join("old"), root.join("src/old"))
            },
            // A directory two up replaced, with a repository where one was before.
            &|| {
                std::fs::rename(root.join("src"), root.join("moved"))?;
                std::fs::create_dir_all(root.join("src/a/c/d/.git/hooks"))
            },
            // More events than the kernel queues, then one that matters.
            &|| {
                for i in 0..queue + 100 {
                    std::fs::write(root.join(format!("noise/{i}")), "")?;
                }
                std::fs::create_dir_all(root.join("moved/a/c/e/.git/hooks"))
            },
        ];
        for change in changes {
            change()?;
            let again = rescan(&last, roots, LIMIT);
            same(&again, &scan(roots, LIMIT));
            assert!(!again.truncated);
            last = again;
        }
        for repo in [
            "moved/a/c/.git",
            "moved/gone/b/.git",
            "src/a/c/d/.git",
            "moved/a/c/e/.git",
        ] {
            assert!(
                last.gitdirs.iter().any(|g| g.path == root.join(repo)),
                "{repo} not found"
            );
        }
        assert!(
            !last
                .dirs
                .iter()
                .any(|(d, _)| d.starts_with(root.join("moved/old")))
        );
        assert!(
            !last
                .gitdirs
                .iter()
                .any(|g| g.path.starts_with(root.join("vendor")))
        );
        Ok(())
    }
}
