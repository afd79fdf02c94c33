//! cordon's guard journal around a run (`cordon_sandbox::journal`): held from before the run
//! is planned until its guard is entered, so that no other run's clean-up changes what the plan
//! found in between; what dead runs left in the run's places undone first.

use std::path::{Path, PathBuf};

use anyhow::bail;
use cordon_sandbox::RunGuard;
use cordon_sandbox::journal::{Held, Journal};

/// `$XDG_STATE_HOME/cordon/guards` (or `~/.local/state/cordon/guards`); `None` without a home.
pub fn journal() -> Option<Journal> {
    crate::user_state_dir().map(|d| Journal::new(d.join("guards")))
}

/// The journal's lock for a run about to be planned. A journal that cannot be made is weaker
/// (said in `weaker`): runs then undo only while a process of theirs lives, and may undo into
/// one another. One another process holds too long refuses the run.
pub(crate) fn hold<'a>(
    journal: Option<&'a Journal>,
    weaker: &mut Vec<String>,
) -> anyhow::Result<Option<Held<'a>>> {
    let Some(journal) = journal else {
        weaker.push(
            "no guard journal (HOME is not set): what a command plants is undone only while a process of its run lives".into(),
        );
        return Ok(None);
    };
    match journal.hold() {
        Ok(held) => Ok(Some(held)),
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => bail!(
            "cordon's guard journal is locked: {e}; nothing ran (is a cordon process stopped?)"
        ),
        Err(e) => {
            weaker.push(format!(
                "cordon's guard journal {} cannot be used ({e}): what a command plants is undone only while a process of its run lives",
                journal.dir().display()
            ));
            Ok(None)
        }
    }
}

/// Undoes what runs that are gone left in or around a run's places (its working directory
/// and `writable`), saying so.
pub(crate) fn recover(held: Option<&Held<'_>>, cwd: &Path, writable: &[PathBuf]) {
    let places: Vec<PathBuf> = std::iter::once(cwd)
        .chain(writable.iter().map(PathBuf::as_path))
        .map(Path::to_path_buf)
        .collect();
    for found in held.map(|h| h.recover(Some(&places))).unwrap_or_default() {
        found.say();
    }
}

/// Enters `guard` in the journal, or says in `weaker` why it could not be.
pub(crate) fn enter(held: Option<&Held<'_>>, guard: &mut RunGuard, weaker: &mut Vec<String>) {
    if let Some(held) = held
        && let Err(e) = held.enter(guard)
    {
        weaker.push(format!(
            "this run could not be entered in cordon's guard journal ({e}): what it plants is undone only while a process of it lives"
        ));
    }
}

/// Undoes what every run that is gone left, where no run overlapping it is going (as `exec`,
/// `mcp` and `shell` start, and `cordon doctor`), saying so; how many were undone.
pub fn sweep() -> usize {
    let Some(journal) = journal() else {
        return 0;
    };
    if !journal.dir().exists() {
        return 0;
    }
    let Ok(held) = journal.hold() else {
        return 0;
    };
    let found = held.recover(None);
    for f in &found {
        f.say();
    }
    found.len()
}
