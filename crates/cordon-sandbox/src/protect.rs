//! Files that must not change even inside writable places, and what to undo after a run.

use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::beneath::{Kind, Root};
use crate::gitmeta::{self, GitMeta};
use crate::journal::{Entry, EntryName};
use crate::kept::{KeptFile, SettingsFiles};

/// Names that run code or change an agent's permissions the next time something starts:
/// shell start-up files, git's config and hooks, editor task folders, agent settings.
pub const PROTECTED_NAMES: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".zshrc",
    ".zprofile",
    ".profile",
    ".gitconfig",
    ".gitmodules",
    ".git/hooks",
    ".git/config",
    ".vscode",
    ".idea",
    ".cordon",
    ".claude",
    ".gemini",
    ".codex",
    ".mcp.json",
    ".envrc",
    ".devcontainer",
    ".devcontainer.json",
];

/// Whether `rel`, a path relative to a writable place, is protected or lies under a protected
/// path, whether it exists or not: the [`PROTECTED_NAMES`] at the top of the place, and git
/// metadata that makes git run a program at any depth ([`gitmeta::runs_code`]). The one list
/// for everything that writes on a command's behalf outside the sandbox (`cordon mcp`'s file
/// tools), so that they refuse what the sandbox keeps read-only.
pub fn is_protected(rel: &Path) -> bool {
    PROTECTED_NAMES.iter().any(|n| rel.starts_with(n)) || gitmeta::runs_code(rel)
}

/// The protected paths that exist directly under `root`, to be made read-only there.
pub fn existing_protected(root: &Path) -> Vec<PathBuf> {
    PROTECTED_NAMES
        .iter()
        .map(|n| root.join(n))
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .collect()
}

/// Whether `path` names this process's working directory (the same device and inode).
fn is_current_dir(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata("."), std::fs::metadata(path)) {
        (Ok(here), Ok(there)) => (here.dev(), here.ino()) == (there.dev(), there.ino()),
        _ => false,
    }
}

/// cordon's own settings and state directories (its user settings, a project's `.cordon`)
/// that lie in a writable place but do not exist yet. A sandbox keeps only existing paths
/// read-only, and cordon reads these live (exec per request, the proxy every few seconds), so
/// a run could plant rules that apply at once. They are made before the run, empty and the
/// user's, to be kept read-only like the others, and removed after it if still empty.
///
/// Runs go on side by side in one directory (`exec` runs many at once), and one that ends
/// must not remove a directory another has just been set up to keep read-only (its mount would
/// fail). So every run holds a shared lock (`flock`) on each of these directories for its
/// length, made or found, and removes one it made only when it can take the lock over
/// exclusively: when no other run holds it. The last of overlapping runs may then leave an
/// empty directory behind.
#[derive(Debug, Default)]
pub struct MadeForRun {
    made: Vec<Made>,
    /// The locks on the state directories this run found already there.
    held: Vec<OwnedFd>,
}

/// Directories one run made in one writable place.
#[derive(Debug)]
struct Made {
    /// The writable place, opened before the run.
    root: Root,
    /// The directories made, from the top down; the last is the state directory.
    dirs: Vec<PathBuf>,
    /// The run's shared lock on the state directory.
    lock: OwnedFd,
}

/// How often a directory that vanished between being found and being locked is looked for
/// again (another run removed it; the next try makes it).
const HOLD_TRIES: usize = 4;

/// How long a run waits for the shared lock. A run removing the directory holds it
/// exclusively for one `rmdir`; anything longer is not that, and may be a command of another
/// run that opened the directory (which it may read) and locked it to stall every run set up
/// after it. Past this the run goes on without the lock: the directory cannot be removed
/// while the other holds it, and if it is removed later the mount fails, closed.
const HOLD_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

impl MadeForRun {
    /// Makes each of `dirs` that lies in `cwd` (this process's working directory) or one of
    /// `writable` and is missing, and locks each of them that is a directory for the run.
    /// Also returns the directories made or found, to be kept read-only, and, for each that
    /// could not be made, why.
    pub fn make(
        dirs: &[PathBuf],
        cwd: &Path,
        writable: &[PathBuf],
    ) -> (Self, Vec<PathBuf>, Vec<String>) {
        let mut out = MadeForRun::default();
        let mut keep = Vec::new();
        let mut failed = Vec::new();
        for dir in dirs {
            let Some(root) = std::iter::once(cwd)
                .chain(writable.iter().map(PathBuf::as_path))
                .find(|r| dir.starts_with(r) && *r != dir)
            else {
                continue;
            };
            // A link or a file there is kept read-only as it is, by the protected paths.
            if std::fs::symlink_metadata(dir).is_ok_and(|m| !m.is_dir()) {
                continue;
            }
            let opened = if root == cwd {
                Root::open_current(cwd)
            } else {
                Root::open(root)
            };
            let rel = dir.strip_prefix(root).unwrap_or(dir);
            match opened.and_then(|r| hold(&r, rel).map(|(lock, made)| (r, lock, made))) {
                // Found there, it is read-only by the protected names too, unless it appeared
                // after the run looked for them (another run made it meanwhile): kept either way.
                Ok((_, lock, made)) if made.is_empty() => {
                    keep.push(dir.clone());
                    out.held.push(lock);
                }
                Ok((root, lock, dirs)) => {
                    keep.push(dir.clone());
                    out.made.push(Made { root, dirs, lock });
                }
                Err(e) => failed.push(format!(
                    "{} could not be made and held before the run to keep it read-only ({e}); the command may write cordon's settings there",
                    dir.display()
                )),
            }
        }
        (out, keep, failed)
    }
}

/// The directory `rel` under `root`, made if missing (and which of its directories were made),
/// with a shared lock on it once it is certain that the lock is on what the name still
/// names.
fn hold(root: &Root, rel: &Path) -> std::io::Result<(OwnedFd, Vec<PathBuf>)> {
    use rustix::fs::fstat;
    let same = |a: &OwnedFd, b: &OwnedFd| match (fstat(a), fstat(b)) {
        (Ok(a), Ok(b)) => (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino),
        _ => false,
    };
    let mut made = Vec::new();
    for _ in 0..HOLD_TRIES {
        let fd = match root.open_dir(rel) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                made.extend(root.make_dirs(rel)?);
                continue;
            }
            Err(e) => return Err(e),
        };
        // A run removing the directory holds it exclusively until it is gone.
        let locked = lock_shared_within(&fd, HOLD_WAIT)?;
        if !locked || root.open_dir(rel).is_ok_and(|again| same(&fd, &again)) {
            return Ok((fd, made));
        }
    }
    Err(std::io::Error::other(
        "another run kept removing it; try again",
    ))
}

/// Takes a shared lock on `fd`, waiting at most `wait`; whether it was taken.
fn lock_shared_within(fd: &OwnedFd, wait: std::time::Duration) -> std::io::Result<bool> {
    use rustix::fs::{FlockOperation, flock};
    let until = std::time::Instant::now() + wait;
    loop {
        match flock(fd, FlockOperation::NonBlockingLockShared) {
            Ok(()) => return Ok(true),
            Err(rustix::io::Errno::WOULDBLOCK) if std::time::Instant::now() < until => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(rustix::io::Errno::WOULDBLOCK) => return Ok(false),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Dropped (after the run, or when `cordon run` gives up before it), what
/// [`MadeForRun::make`] made is removed where still empty, deepest first, unless another run
/// holds it.
impl Drop for MadeForRun {
    fn drop(&mut self) {
        use rustix::fs::{FlockOperation, flock};
        for m in self.made.iter().rev() {
            if flock(&m.lock, FlockOperation::NonBlockingLockExclusive).is_err() {
                continue;
            }
            for rel in m.dirs.iter().rev() {
                let _ = m.root.remove_empty_dir(rel);
            }
        }
    }
}

/// What a run must not leave behind, found by comparing before and after: protected paths it
/// created in writable places (existing ones are read-only during the run; new ones cannot be
/// mounted over without touching the host first), and a bare repository planted in the
/// working directory.
///
/// Each writable place is opened before the run and everything after it is done through
/// those descriptors without following a link ([`crate::beneath`]): what the command left
/// there may be a symlink to anywhere on the host.
#[derive(Debug)]
pub struct RunGuard {
    roots: Vec<Root>,
    /// Writable places that could not be opened before the run, and why: nothing under them
    /// can be undone, which is said after it.
    unopened: Vec<(PathBuf, String)>,
    /// Protected paths that did not exist before the run: the root they lie in and the path
    /// relative to it.
    absent: Vec<(usize, PathBuf)>,
    repo: PlantedRepoGuard,
    /// The git metadata found before the run (what it held), and how far to search after it.
    git: GitMeta,
    git_limit: usize,
    /// Its record in cordon's guard journal, once entered ([`crate::journal`]): then the undo
    /// follows the journal's rules for runs that overlap.
    entry: Option<Entry>,
    /// Settings files put back after the run where it changed what matters in them.
    kept: Vec<KeptFile>,
}

/// A [`RunGuard`] less its open directories (which go alongside, as descriptors, then the
/// lock of its journal entry if it has one).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GuardRecord {
    roots: Vec<PathBuf>,
    unopened: Vec<(PathBuf, String)>,
    absent: Vec<(usize, PathBuf)>,
    repo_existed: [bool; 4],
    git: GitMeta,
    git_limit: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    entry: Option<EntryName>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    kept: Vec<KeptFile>,
}

impl GuardRecord {
    /// The writable places guarded.
    pub(crate) fn roots(&self) -> &[PathBuf] {
        &self.roots
    }
}

/// Something the guard removed after a run, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undone {
    pub path: PathBuf,
    pub why: &'static str,
    /// What exactly was taken out of `path`, when not all of it (a config key).
    pub detail: Option<String>,
    /// `removed` (something the run made) or `restored` (something it changed).
    pub action: &'static str,
}

/// Something the guard had to undo and could not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotUndone {
    pub path: PathBuf,
    pub why: &'static str,
    pub error: String,
    /// `not removed` or `not restored`.
    pub action: &'static str,
}

/// What the guard did after a run.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct UndoReport {
    pub undone: Vec<Undone>,
    /// Not empty means the host keeps something the run planted: cordon must say so loudly
    /// and fail.
    pub failed: Vec<NotUndone>,
    /// How the check after the run fell short of what was asked.
    pub weaker: Vec<String>,
    /// Nothing was undone yet: runs overlapping this one are still going, and the last of
    /// them to end undoes what this one planted ([`crate::journal`]).
    pub deferred: bool,
}

impl UndoReport {
    /// Says on standard error what a run left, for a process that undid it because `who`
    /// (the cordon that ran it) died first: what could not be undone, what was, then the
    /// former again as errors.
    pub fn say_left_after(&self, who: &str) {
        use std::io::Write;
        let failed: Vec<crate::Violation> = self.failed.iter().map(Into::into).collect();
        let undone = self.undone.iter().map(crate::Violation::from);
        let blocked: Vec<crate::Violation> = failed.iter().cloned().chain(undone).collect();
        if blocked.is_empty() {
            return;
        }
        let mut err = std::io::stderr().lock();
        let _ = writeln!(
            err,
            "cordon: {who} ended before its clean-up; what the run left:"
        );
        for v in &blocked {
            let _ = writeln!(err, "cordon: {}", v.describe());
        }
        for v in &failed {
            let _ = writeln!(
                err,
                "cordon: error: could not undo what the command did; the host keeps it: {}",
                v.describe()
            );
        }
    }

    /// Adds what `other` undid, could not undo, and found weaker.
    pub(crate) fn merge(&mut self, other: UndoReport) {
        self.undone.extend(other.undone);
        self.failed.extend(other.failed);
        self.weaker.extend(other.weaker);
    }

    fn removed(&mut self, root: &Root, rel: &Path, why: &'static str, r: std::io::Result<bool>) {
        let path = root.path().join(rel);
        match r {
            Ok(true) => self.undone.push(Undone {
                path,
                why,
                detail: None,
                action: "removed",
            }),
            Ok(false) => {}
            Err(e) => self.failed.push(NotUndone {
                path,
                why,
                error: e.to_string(),
                action: "not removed",
            }),
        }
    }
}

const CREATED: &str = "a protected file the command created";
const LINK_ON_THE_WAY: &str =
    "a symlink the command put on the way to a protected path (removed, not followed)";

impl RunGuard {
    /// Notes, before a run, which protected paths do not exist in `cwd` and `writable`: the
    /// protected names in each, and those of `extra` (absolute) that lie inside one; `git`
    /// is what [`gitmeta::scan`] found there (with `git_limit`), to compare with after it.
    pub fn before(
        cwd: &Path,
        writable: &[PathBuf],
        extra: &[PathBuf],
        git: &GitMeta,
        git_limit: usize,
    ) -> Self {
        let mut roots = Vec::new();
        let mut unopened = Vec::new();
        for path in std::iter::once(cwd).chain(writable.iter().map(PathBuf::as_path)) {
            // The process's own working directory is opened as itself, not by a path a link
            // may have taken over since it was entered.
            let opened = if is_current_dir(path) {
                Root::open_current(path)
            } else {
                Root::open(path)
            };
            match opened {
                Ok(r) => roots.push(r),
                // A writable place that does not exist holds nothing to guard, and nor does a
                // writable file: nothing can be made inside it.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(_) if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) => {}
                Err(e) => unopened.push((path.to_path_buf(), e.to_string())),
            }
        }
        let mut absent = Vec::new();
        for (i, root) in roots.iter().enumerate() {
            // git's own files are checked by what they hold after the run: `git init` makes
            // a config that must stay.
            let names = PROTECTED_NAMES
                .iter()
                .filter(|n| !n.starts_with(".git/"))
                .map(PathBuf::from);
            let inside = extra
                .iter()
                .filter_map(|p| root.relative(p))
                .filter(|rel| !rel.as_os_str().is_empty())
                .map(Path::to_path_buf);
            for rel in names.chain(inside) {
                // A name behind a link that was already there is not this root's to guard:
                // the link leads out of the writable place, where the command cannot write.
                if !through_a_link(root, &rel) && matches!(root.meta(&rel), Ok(None)) {
                    absent.push((i, rel));
                }
            }
        }
        let repo = PlantedRepoGuard::before(roots.first());
        RunGuard {
            roots,
            unopened,
            absent,
            repo,
            git: git.clone(),
            git_limit,
            entry: None,
            kept: Vec::new(),
        }
    }

    /// Has the guard put `files` back after the run, as they are now, where the run changed
    /// what matters in them ([`crate::kept`]). Before the guard enters the journal, so that
    /// its record carries them.
    pub fn keep_settings(&mut self, files: &SettingsFiles) {
        self.kept = files.read();
    }

    /// Keeps this guard's journal entry: its undo then follows the journal's rules.
    pub(crate) fn set_entry(&mut self, entry: Entry) {
        self.entry = Some(entry);
    }

    /// The writable places guarded, as their paths.
    pub(crate) fn root_paths(&self) -> Vec<PathBuf> {
        self.roots.iter().map(|r| r.path().to_path_buf()).collect()
    }

    /// The guard `record` describes, its places opened again by path, each of which must be
    /// the directory `ids` (device, inode) names: one that is not (replaced, or gone) has
    /// nothing undone under it, and a replaced one is said.
    pub(crate) fn reopen(record: &GuardRecord, ids: &[(u64, u64)]) -> RunGuard {
        let mut roots = Vec::new();
        let mut unopened = record.unopened.clone();
        let mut index = Vec::new();
        for (i, path) in record.roots.iter().enumerate() {
            let opened = Root::open(path).and_then(|r| {
                let st = rustix::fs::fstat(r.fd())?;
                if Some(&crate::journal::identity(&st)) == ids.get(i) {
                    Ok(r)
                } else {
                    Err(std::io::Error::other(
                        "it is no longer the directory the run had: nothing it left there was undone",
                    ))
                }
            });
            match opened {
                Ok(r) => {
                    index.push(Some(roots.len()));
                    roots.push(r);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => index.push(None),
                Err(e) => {
                    index.push(None);
                    unopened.push((path.clone(), e.to_string()));
                }
            }
        }
        let absent = record
            .absent
            .iter()
            .filter_map(|(i, rel)| Some((index.get(*i).copied().flatten()?, rel.clone())))
            .collect();
        // The bare-repository check is of the first place, the working directory.
        let existed = if index.first().copied().flatten() == Some(0) {
            record.repo_existed
        } else {
            [true; 4]
        };
        RunGuard {
            roots,
            unopened,
            absent,
            repo: PlantedRepoGuard { existed },
            git: record.git.clone(),
            git_limit: record.git_limit,
            entry: None,
            kept: record.kept.clone(),
        }
    }

    /// What this guard knows, and the directories it opened, in the order of
    /// [`GuardRecord`]'s roots: for a process that undoes the run should this one die first
    /// ([`RunGuard::from_record`]).
    pub fn to_record(&self) -> (GuardRecord, Vec<BorrowedFd<'_>>) {
        let entry = self.entry.as_ref().map(Entry::handed);
        let record = GuardRecord {
            roots: self.roots.iter().map(|r| r.path().to_path_buf()).collect(),
            unopened: self.unopened.clone(),
            absent: self.absent.clone(),
            repo_existed: self.repo.existed,
            git: self.git.clone(),
            git_limit: self.git_limit,
            entry: entry.as_ref().map(|(name, _)| name.clone()),
            kept: self.kept.clone(),
        };
        let fds = self
            .roots
            .iter()
            .map(Root::fd)
            .chain(entry.map(|(_, lock)| lock))
            .collect();
        (record, fds)
    }

    /// The guard [`RunGuard::to_record`] described, with its directories as received.
    pub fn from_record(record: GuardRecord, mut fds: Vec<OwnedFd>) -> std::io::Result<RunGuard> {
        let want = record.roots.len() + usize::from(record.entry.is_some());
        if fds.len() != want {
            return Err(std::io::Error::other(format!(
                "{} descriptors came for a guard of {} directories{}",
                fds.len(),
                record.roots.len(),
                if record.entry.is_some() {
                    " and its journal entry"
                } else {
                    ""
                }
            )));
        }
        let entry = match record.entry {
            Some(name) => fds.pop().map(|lock| Entry::taken(name, lock)),
            None => None,
        };
        let roots = record
            .roots
            .into_iter()
            .zip(fds)
            .map(|(p, fd)| Root::from_fd(p, fd));
        Ok(RunGuard {
            roots: roots.collect(),
            unopened: record.unopened,
            absent: record.absent,
            repo: PlantedRepoGuard {
                existed: record.repo_existed,
            },
            git: record.git,
            git_limit: record.git_limit,
            entry,
            kept: record.kept,
        })
    }

    /// After the run, once nothing of it is left running: removes what it planted and says
    /// what it removed and what it could not; or, where the guard is in cordon's journal and
    /// runs overlapping it are still going, leaves that to the last of them (`deferred`).
    pub fn undo(&self) -> UndoReport {
        match &self.entry {
            Some(entry) => entry.leave(self),
            None => self.undo_now(),
        }
    }

    /// Removes what the run planted, now.
    pub(crate) fn undo_now(&self) -> UndoReport {
        let mut report = UndoReport::default();
        for (path, error) in &self.unopened {
            report.failed.push(NotUndone {
                path: path.clone(),
                why: "a writable place that could not be opened before the run to guard it",
                error: error.clone(),
                action: "not removed",
            });
        }
        if let Some(root) = self.roots.first() {
            self.repo.undo_planted(root, &mut report);
        }
        for (i, rel) in &self.absent {
            let root = &self.roots[*i];
            // A directory on the way that is now a link was put there by the command: take
            // the link away rather than reach through it.
            let link = rel
                .ancestors()
                .skip(1)
                .filter(|a| !a.as_os_str().is_empty())
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .find(|a| matches!(root.meta(a), Ok(Some(m)) if m.kind == Kind::Symlink));
            match link {
                Some(link) => report.removed(root, link, LINK_ON_THE_WAY, root.remove(link)),
                None => report.removed(root, rel, CREATED, root.remove(rel)),
            }
        }
        self.take_out_git(&mut report);
        crate::kept::put_back(&self.kept, &mut report);
        report.undone.dedup();
        report
    }

    /// Searches the writable places for git metadata again, and takes out of what the run
    /// wrote (a config or hook that is new or no longer holds what it did) the hooks and
    /// config keys that would run a program.
    fn take_out_git(&self, report: &mut UndoReport) {
        let paths: Vec<PathBuf> = self.roots.iter().map(|r| r.path().to_path_buf()).collect();
        let after = gitmeta::rescan(&self.git, &paths, self.git_limit);
        if after.truncated {
            report.weaker.push(format!(
                "the search for git metadata the run left stopped after {} directory entries \
                 ({}): repositories beyond it were not checked",
                self.git_limit,
                gitmeta::SCAN_LIMIT_VAR
            ));
        }
        for dir in after
            .unlisted
            .iter()
            .filter(|d| !self.git.unlisted.contains(d))
        {
            report.weaker.push(format!(
                "{} cannot be listed, even by its owner: git repositories the run may have \
                 left in it were not checked",
                dir.display()
            ));
        }
        let unchanged =
            |abs: &Path, now: &[u8]| self.git.contents.get(abs).is_some_and(|b| b == now);
        for link in &after.links {
            let Some((root, rel)) = self.inside(link) else {
                continue;
            };
            let same = root
                .read_link(rel)
                .is_ok_and(|t| unchanged(link, &t.into_os_string().into_encoded_bytes()));
            if !same {
                report.removed(root, rel, LINK_ON_THE_WAY, root.remove(rel));
            }
        }
        for g in &after.gitdirs {
            let Some((root, rel)) = self.inside(&g.path) else {
                continue;
            };
            for name in ["config", "config.worktree"] {
                let rel = rel.join(name);
                let abs = root.path().join(&rel);
                let Ok(Some(meta)) = root.meta(&rel) else {
                    continue;
                };
                let now = match root.read(&rel) {
                    Ok(b) => b,
                    // Not a regular file: git cannot read it as config either, but a
                    // symlink could lead git to one elsewhere.
                    Err(_) => {
                        report.removed(root, &rel, GIT_CONFIG_ODD, root.remove(&rel));
                        continue;
                    }
                };
                if unchanged(&abs, &now) {
                    continue;
                }
                let (kept, removed) = gitmeta::sanitize_config(&String::from_utf8_lossy(&now));
                if removed.is_empty() {
                    continue;
                }
                match root.replace_file(&rel, kept.as_bytes(), meta.mode) {
                    Ok(()) => report.undone.extend(removed.into_iter().map(|r| Undone {
                        path: abs.clone(),
                        why: GIT_KEY,
                        detail: Some(r),
                        action: "removed",
                    })),
                    Err(e) => report.failed.push(NotUndone {
                        path: abs.clone(),
                        why: GIT_KEY,
                        error: format!("{e} (keys: {})", removed.join(", ")),
                        action: "not removed",
                    }),
                }
            }
            let hooks = rel.join("hooks");
            let Ok(entries) = root.list(&hooks) else {
                continue;
            };
            for e in entries {
                // git never runs a `.sample`; `git init` leaves them.
                if e.name.to_string_lossy().ends_with(".sample") {
                    continue;
                }
                let rel = hooks.join(&e.name);
                let abs = root.path().join(&rel);
                if root.read(&rel).is_ok_and(|b| unchanged(&abs, &b)) {
                    continue;
                }
                report.removed(root, &rel, GIT_HOOK, root.remove(&rel));
            }
        }
    }

    /// The root `abs` lies in (the innermost), and `abs` relative to it.
    fn inside<'a>(&'a self, abs: &'a Path) -> Option<(&'a Root, &'a Path)> {
        self.roots
            .iter()
            .filter_map(|r| Some((r, r.relative(abs)?)))
            .min_by_key(|(_, rel)| rel.as_os_str().len())
    }
}

const GIT_KEY: &str = "a git setting that runs a program, in git config the command wrote";
const GIT_HOOK: &str = "a git hook the command planted";
const GIT_CONFIG_ODD: &str = "a git config file the command made into something other than a file";

/// Whether a directory on the way from `root` to `rel` is a symlink now.
fn through_a_link(root: &Root, rel: &Path) -> bool {
    rel.ancestors()
        .skip(1)
        .filter(|a| !a.as_os_str().is_empty())
        .any(|a| matches!(root.meta(a), Ok(Some(m)) if m.kind == Kind::Symlink))
}

/// What a bare git repository has at its top. Planted in the working directory, it makes the
/// next `git` run there use the planted config (and its hooks).
const BARE_REPO: [&str; 4] = ["HEAD", "objects", "refs", "config"];

/// Remembers which bare-repository names existed before a run, to remove a repository a
/// command planted.
#[derive(Debug)]
struct PlantedRepoGuard {
    existed: [bool; 4],
}

impl PlantedRepoGuard {
    fn before(root: Option<&Root>) -> Self {
        let existed =
            BARE_REPO.map(|n| root.is_none_or(|r| !matches!(r.meta(Path::new(n)), Ok(None))));
        PlantedRepoGuard { existed }
    }

    /// After the run: if the top of `root` now looks like a bare repository and the run made
    /// it so, removes what the run added.
    fn undo_planted(&self, root: &Root, report: &mut UndoReport) {
        let exists = BARE_REPO.map(|n| matches!(root.meta(Path::new(n)), Ok(Some(_))));
        let looks_like_repo = exists[0] && exists[1] && exists[2];
        if !looks_like_repo {
            return;
        }
        for i in (0..4).filter(|&i| exists[i] && !self.existed[i]) {
            let rel = Path::new(BARE_REPO[i]);
            report.removed(root, rel, PLANTED_REPO, root.remove(rel));
        }
    }
}

const PLANTED_REPO: &str = "part of a bare git repository planted in the working directory";

/// For a linked git worktree at `root` (its `.git` is a file saying `gitdir: …`), the parts
/// of the main repository `git commit` there must write: the worktree's own directory and the
/// shared objects, refs and logs. The main repository's config and hooks are not among them.
pub fn linked_worktree_writable(root: &Path) -> Vec<PathBuf> {
    let Some(gitdir) = gitmeta::gitfile_target(&root.join(".git")) else {
        return Vec::new();
    };
    let Ok(gitdir) = std::fs::canonicalize(&gitdir) else {
        return Vec::new();
    };
    let common = crate::beneath::read_regular(&gitdir.join("commondir"))
        .and_then(|c| std::fs::canonicalize(gitdir.join(String::from_utf8_lossy(&c).trim())).ok());
    let mut out = vec![gitdir];
    if let Some(common) = common {
        out.extend(
            ["objects", "refs", "logs"]
                .iter()
                .map(|d| common.join(d))
                .filter(|p| p.is_dir()),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planted_bare_repository_is_removed_but_a_real_one_is_kept() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let root = dir.path();
        std::fs::write(root.join("config"), "mine")?;
        let r = Root::open(root)?;
        let guard = PlantedRepoGuard::before(Some(&r));
        std::fs::write(root.join("HEAD"), "ref: refs/heads/main")?;
        std::fs::create_dir_all(root.join("objects"))?;
        std::fs::create_dir_all(root.join("refs/heads"))?;
        let mut report = UndoReport::default();
        guard.undo_planted(&r, &mut report);
        assert_eq!(report.undone.len(), 3);
        assert!(!root.join("HEAD").exists() && !root.join("objects").exists());
        assert!(root.join("config").exists(), "what existed before stays");

        // A directory that already was a bare repository is left alone.
        std::fs::write(root.join("HEAD"), "x")?;
        std::fs::create_dir_all(root.join("objects"))?;
        std::fs::create_dir_all(root.join("refs"))?;
        let guard = PlantedRepoGuard::before(Some(&r));
        let mut report = UndoReport::default();
        guard.undo_planted(&r, &mut report);
        assert!(report.undone.is_empty());
        Ok(())
    }

    /// Runs overlap in one directory: one that ends leaves the state directory another run
    /// keeps read-only, and the last to end without others leaves it removed or kept, never
    /// gone from under a run.
    #[test]
    fn a_state_directory_another_run_holds_is_not_removed() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let root = dir.path().to_path_buf();
        let state = root.join("sub/.cordon");
        let writable = [root.clone()];
        // The working directory is given as a place that does not hold the state directory:
        // the writable one is opened by its path (this process's own is elsewhere).
        let cwd = root.join("elsewhere");
        let make = || MadeForRun::make(std::slice::from_ref(&state), &cwd, &writable);

        // Alone: made, then removed with what was made for it.
        let (alone, keep, failed) = make();
        assert_eq!((keep.as_slice(), failed.len()), (&[state.clone()][..], 0));
        assert!(state.is_dir());
        drop(alone);
        assert!(!root.join("sub").exists(), "made and emptied: removed");

        // Overlapping: the first to end leaves it to the other.
        let (first, _, _) = make();
        let (second, keep, failed) = make();
        assert!(failed.is_empty(), "{failed:?}");
        assert_eq!(
            keep.as_slice(),
            std::slice::from_ref(&state),
            "the second run found it, and keeps it too"
        );
        drop(first);
        assert!(state.is_dir(), "removed from under a run that holds it");
        drop(second);
        assert!(state.is_dir(), "a run that did not make it leaves it");

        // Locked exclusively by someone else for longer than a removal takes (a command of
        // another run can): the run goes on without waiting for it, and the directory stays.
        let outsider = std::fs::File::open(&state)?;
        rustix::fs::flock(&outsider, rustix::fs::FlockOperation::LockExclusive)?;
        let (stalled, keep, failed) = make();
        assert!(
            keep == [state.clone()] && failed.is_empty(),
            "{keep:?} {failed:?}"
        );
        drop(stalled);
        drop(outsider);
        assert!(state.is_dir());

        // Removed while a run was being set up: the run makes it again.
        std::fs::remove_dir_all(root.join("sub"))?;
        let (again, keep, failed) = make();
        assert_eq!((keep.len(), failed.len()), (1, 0));
        assert!(state.is_dir());
        drop(again);
        Ok(())
    }

    /// A guard rebuilt from its record and descriptors in another process (a warm sandbox's
    /// helper) undoes what the original would, in the directory opened before the run, even
    /// once that directory's path leads somewhere else.
    #[test]
    fn a_guard_rebuilt_from_its_record_undoes_the_same() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws)?;
        let guard = RunGuard::before(&ws, &[], &[], &GitMeta::default(), 1000);
        let (record, fds) = guard.to_record();
        let json = serde_json::to_vec(&record)?;
        let owned = || -> std::io::Result<Vec<OwnedFd>> {
            fds.iter().map(|f| f.try_clone_to_owned()).collect()
        };
        assert!(
            RunGuard::from_record(serde_json::from_slice(&json)?, Vec::new()).is_err(),
            "a record without its directories was taken"
        );
        let copy = RunGuard::from_record(serde_json::from_slice(&json)?, owned()?)?;
        drop(guard);
        std::fs::write(ws.join(".bashrc"), "evil")?;
        let moved = dir.path().join("moved");
        std::fs::rename(&ws, &moved)?;
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere)?;
        std::fs::write(elsewhere.join(".bashrc"), "the user's own")?;
        std::os::unix::fs::symlink(&elsewhere, &ws)?;
        let report = copy.undo();
        assert_eq!(report.undone.len(), 1, "{report:?}");
        assert!(!moved.join(".bashrc").exists(), "the planted file stayed");
        assert!(
            elsewhere.join(".bashrc").exists(),
            "the guard followed the path to another directory"
        );
        Ok(())
    }

    #[test]
    fn protected_paths_a_run_created_are_removed() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git"))?;
        std::fs::write(root.join(".gitmodules"), "kept")?;
        let guard = RunGuard::before(
            root,
            &[],
            &[root.join("cfg/cordon")],
            &GitMeta::default(),
            1000,
        );
        std::fs::create_dir_all(root.join(".git/hooks"))?;
        std::fs::write(root.join(".git/hooks/pre-commit"), "evil")?;
        std::fs::write(root.join(".bashrc"), "evil")?;
        std::os::unix::fs::symlink("/etc", root.join(".vscode"))?;
        std::fs::create_dir_all(root.join("cfg/cordon/policies"))?;
        let undone: Vec<PathBuf> = guard.undo().undone.into_iter().map(|u| u.path).collect();
        assert_eq!(undone.len(), 4, "{undone:?}");
        assert!(
            !root.join("cfg/cordon").exists(),
            "cordon's own settings were planted"
        );
        assert!(!root.join(".git/hooks/pre-commit").exists() && !root.join(".bashrc").exists());
        assert!(std::fs::symlink_metadata(root.join(".vscode")).is_err());
        assert!(
            std::path::Path::new("/etc").exists(),
            "a planted symlink is removed, not followed"
        );
        assert!(
            root.join(".gitmodules").exists(),
            "what existed before stays"
        );
        Ok(())
    }

    #[test]
    fn a_planted_link_is_removed_and_not_followed() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let ws = dir.path().join("ws");
        let ssh = dir.path().join("ssh");
        std::fs::create_dir_all(&ws)?;
        std::fs::create_dir_all(&ssh)?;
        std::fs::write(ssh.join("config"), "Host *")?;
        std::fs::create_dir_all(ssh.join("hooks"))?;
        let guard = RunGuard::before(&ws, &[], &[], &GitMeta::default(), 1000);
        std::os::unix::fs::symlink(&ssh, ws.join(".git"))?;
        let report = guard.undo();
        assert!(report.failed.is_empty(), "{report:?}");
        assert!(ssh.join("config").exists() && ssh.join("hooks").exists());
        assert!(std::fs::symlink_metadata(ws.join(".git")).is_err());
        assert_eq!(report.undone[0].why, LINK_ON_THE_WAY);
        Ok(())
    }

    #[test]
    fn only_a_complete_repository_shape_counts() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let r = Root::open(dir.path())?;
        let guard = PlantedRepoGuard::before(Some(&r));
        std::fs::create_dir_all(dir.path().join("objects"))?;
        let mut report = UndoReport::default();
        guard.undo_planted(&r, &mut report);
        assert!(
            report.undone.is_empty(),
            "an objects/ folder alone is a project's business"
        );
        assert!(dir.path().join("objects").exists());
        Ok(())
    }
}
