//! Planning a run: from its configuration (flags and settings merged) to the paths the sandbox
//! is given, before anything is set up. `cordon run` goes on to run the plan, `cordon explain`
//! shows it, and `cordon mcp`'s file tools keep to the same walls.

pub mod paths;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use cordon_sandbox::{existing_protected, gitmeta, gitmeta::GitMeta, linked_worktree_writable};

use crate::config::RunConfig;
use paths::{Flag, LivePattern, resolve_all};

/// What a run will be given.
#[derive(Debug)]
pub struct Plan {
    pub timeout: Option<Duration>,
    pub cwd: PathBuf,
    pub writable: Vec<PathBuf>,
    pub read_only: Vec<PathBuf>,
    /// cordon's own settings directories, and with `--agent` the agent's directories of
    /// commands, hooks and the like: made for the run where missing, read-only during it,
    /// guarded after it.
    pub own_settings: Vec<PathBuf>,
    pub hidden: Vec<PathBuf>,
    pub reopened: Vec<PathBuf>,
    pub unix_sockets: Vec<PathBuf>,
    /// The git metadata in the writable places before the run, and the search's bound.
    pub git: GitMeta,
    pub git_limit: usize,
    /// The project's package caches, with `private_caches`: writable (among `writable`), and
    /// their variables set in the run.
    pub caches: Option<crate::caches::Caches>,
    /// Patterns that matched nothing or too much: for the user, once per command they typed
    /// (the worker of `mcp --backend` plans again what its launcher has planned and said).
    pub warnings: Vec<String>,
}

impl Plan {
    /// The plan as `backend` runs it: an image keeps package caches of its own, where the
    /// host's paths mean nothing.
    pub fn for_backend(mut self, backend: &crate::run::backend::BackendChoice) -> Plan {
        if backend.in_image()
            && let Some(c) = self.caches.take()
        {
            self.writable.retain(|w| *w != c.root);
        }
        self
    }

    pub fn warn(&self) {
        for w in &self.warnings {
            eprintln!("cordon: warning: {w}");
        }
    }
}

/// The `--deny-read`, `--allow-read` and `--deny-write` patterns, unexpanded.
#[derive(Debug, Clone, Default)]
pub struct LivePatterns {
    pub hidden: Vec<LivePattern>,
    pub reopened: Vec<LivePattern>,
    pub read_only: Vec<LivePattern>,
}

/// The plan of a run with `config` in this process's working directory.
pub fn plan(config: &RunConfig) -> anyhow::Result<Plan> {
    let timeout = config
        .timeout
        .map(crate::bounds::timeout)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--timeout (or limits.timeout) {e}"))?;
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let cwd = std::fs::canonicalize(&cwd).context("cannot resolve the current directory")?;
    let mut warnings = Vec::new();
    let mut resolve = |paths: &[PathBuf], flag| resolve_all(paths, &cwd, flag, &mut warnings);
    let mut writable = resolve(&config.allow_write, Flag::AllowWrite)?;
    let mut read_only = resolve(&config.deny_write, Flag::DenyWrite)?;
    let mut hidden = resolve(&config.deny_read, Flag::DenyRead)?;
    let mut reopened = resolve(&config.allow_read, Flag::AllowRead)?;
    // Credential stores, as they exist now: a store that is not there has nothing to hide
    // and is not worth a warning on every run.
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let (secret, not_secret) =
        crate::credentials::Hidden::new(home.as_deref(), &config.expose_credentials).paths();
    hidden.extend(
        secret
            .into_iter()
            .filter(|p| !hidden.contains(p))
            .collect::<Vec<_>>(),
    );
    reopened.extend(not_secret);
    let unix_sockets = resolve(&config.allow_unix_sockets, Flag::AllowUnixSocket)?;
    // In a linked git worktree, `git commit` writes into the main repository's objects and
    // refs; allow those, not its config or hooks.
    writable.extend(linked_worktree_writable(&cwd));
    let caches = config
        .private_caches
        .then(|| crate::caches::Caches::of(&cwd))
        .flatten();
    if config.private_caches && caches.is_none() {
        warnings.push(
            "private_caches: no home directory to keep the caches in; package managers use their own defaults"
                .into(),
        );
    }
    // Start-up files, git's config and hooks, editor and agent settings stay read-only in
    // every writable place the host's tools use (not the project's package caches).
    let roots: Vec<PathBuf> = std::iter::once(&cwd)
        .chain(&writable)
        .filter(|r| !crate::caches::is_caches(r))
        .cloned()
        .collect();
    for root in &roots {
        read_only.extend(existing_protected(root));
    }
    // git metadata at any depth (nested and vendored repositories, submodules, worktrees,
    // a hooksPath in the tree): what makes git run a program stays read-only.
    let git_limit = gitmeta::scan_limit().map_err(anyhow::Error::msg)?;
    let git = search_git(&roots, git_limit);
    read_only.extend(
        git.runs_code
            .iter()
            .filter(|p| roots.iter().any(|r| p.starts_with(r)) && !read_only.contains(p))
            .cloned()
            .collect::<Vec<_>>(),
    );
    if let Some(c) = &caches {
        writable.push(c.root.clone());
    }
    // cordon's own settings and policies, wherever a writable place holds them.
    let own_settings: Vec<PathBuf> = crate::policy::own_settings_dirs()
        .into_iter()
        .chain(config.agent_controls.iter().cloned())
        .map(|d| std::fs::canonicalize(&d).unwrap_or(d))
        .collect();
    read_only.extend(
        own_settings
            .iter()
            .filter(|d| {
                d.exists()
                    && std::iter::once(&cwd)
                        .chain(&writable)
                        .any(|r| d.starts_with(r))
            })
            .cloned(),
    );
    Ok(Plan {
        timeout,
        cwd,
        writable,
        read_only,
        own_settings,
        hidden,
        reopened,
        unix_sockets,
        git,
        git_limit,
        caches,
        warnings,
    })
}

/// This process's last search for git metadata, and the places and limit it searched.
type LastSearch = (Vec<PathBuf>, usize, GitMeta);
static LAST_SEARCH: std::sync::Mutex<Option<LastSearch>> = std::sync::Mutex::new(None);

/// The git metadata in `roots` now. A whole walk reads every directory of the tree (some 40 ms
/// in a repository of 3 000 directories here), on every run. So a run searches from the last
/// search in the same places (this process's, in a `cordon exec` or `cordon mcp` session;
/// else the one kept in cordon's state directory by the last process to search there), and
/// only the directories that changed since are read again ([`gitmeta::rescan`], which the
/// check after each run already trusts); the others are each looked at once. A search cut
/// short by its limit is not built on: what lay beyond it was never seen. A kept search that
/// cannot be read is walked past, never trusted in part.
fn search_git(roots: &[PathBuf], limit: usize) -> GitMeta {
    let in_process = LAST_SEARCH.lock().ok().and_then(|last| {
        last.as_ref()
            .filter(|(places, l, _)| places == roots && *l == limit)
            .map(|(_, _, found)| found.clone())
    });
    let kept = kept_search_file(roots, limit);
    let from_disk = in_process.is_none();
    let before = in_process.or_else(|| {
        let file = kept.as_deref()?;
        read_kept_search(file)?.search_of(roots, limit)
    });
    let found = match &before {
        Some(before) if !before.truncated => gitmeta::rescan(before, roots, limit),
        _ => gitmeta::scan(roots, limit),
    };
    // A session keeps its searches in memory. On disk the search is written again only when
    // it had more than a few directories to list: a search from an older one is as complete,
    // and each run changes the working directory itself (its `.cordon` placeholder), where
    // writing the tree's search again costs a run more than listing that one directory.
    const LISTED_BEFORE_KEEPING: usize = 8;
    let worth_keeping = before.is_none() || found.listed > LISTED_BEFORE_KEEPING;
    if let (true, true, false, Some(file)) = (from_disk, worth_keeping, found.truncated, &kept) {
        keep_search(file, &gitmeta::Kept::new(roots, limit, &found));
    }
    if let Ok(mut last) = LAST_SEARCH.lock() {
        *last = Some((roots.to_vec(), limit, found.clone()));
    }
    found
}

/// Where the search of `roots` with `limit` is kept between processes: cordon's state
/// directory, which every sandbox keeps read-only (a command could otherwise hide a repository
/// from the next run's search). The name is a hash; the file says what it searched.
fn kept_search_file(roots: &[PathBuf], limit: usize) -> Option<PathBuf> {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    (roots, limit).hash(&mut h);
    Some(crate::user_state_dir()?.join(format!("git-searches/{:016x}.json", h.finish())))
}

/// The kept search in `file`, if it is one (the largest tree's is a few megabytes).
fn read_kept_search(file: &Path) -> Option<gitmeta::Kept> {
    use std::io::Read;
    const MOST: u64 = 256 << 20;
    let mut raw = Vec::new();
    std::fs::File::open(file)
        .ok()?
        .take(MOST)
        .read_to_end(&mut raw)
        .ok()?;
    serde_json::from_slice(&raw).ok()
}

/// Writes `kept` to `file` whole or not at all (another run may be reading it); a failure only
/// means the next run walks the tree.
fn keep_search(file: &Path, kept: &gitmeta::Kept) {
    use std::os::unix::fs::DirBuilderExt;
    let Some(dir) = file.parent() else { return };
    if std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .is_err()
    {
        return;
    }
    let Ok(mut new) = tempfile::NamedTempFile::new_in(dir) else {
        return;
    };
    if serde_json::to_writer(std::io::BufWriter::new(new.as_file_mut()), kept).is_err()
        || new.persist(file).is_err()
    {
        return;
    }
    // One file per set of places ever searched: the least recently written go.
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if files.len() > KEPT_SEARCHES {
        files.sort();
        for (_, old) in &files[..files.len() - KEPT_SEARCHES] {
            let _ = std::fs::remove_file(old);
        }
    }
}

/// The most searches kept between processes, one for each set of places.
const KEPT_SEARCHES: usize = 64;

/// The plan a run with `config` would get here, and the patterns among its deny and allow
/// paths, unexpanded: for tools that touch files outside the sandbox (`cordon mcp`'s), which
/// must keep to the same walls, also for paths made later.
pub fn walls(config: &RunConfig) -> anyhow::Result<(Plan, LivePatterns)> {
    let plan = plan(config)?;
    let live = live_patterns(config, &plan.cwd)?;
    Ok((plan, live))
}

/// The patterns among `config`'s deny and allow paths, relative ones anchored at `cwd`.
pub fn live_patterns(config: &RunConfig, cwd: &Path) -> anyhow::Result<LivePatterns> {
    let live = |list: &[PathBuf], flag| -> anyhow::Result<Vec<LivePattern>> {
        let mut out = Vec::new();
        for p in list {
            out.extend(LivePattern::new(p, cwd, flag)?);
        }
        Ok(out)
    };
    Ok(LivePatterns {
        hidden: live(&config.deny_read, Flag::DenyRead)?,
        reopened: live(&config.allow_read, Flag::AllowRead)?,
        read_only: live(&config.deny_write, Flag::DenyWrite)?,
    })
}
