//! Whether any of the files a decider was built from may have changed, without looking at each
//! of them on every request: the kernel says so (inotify).
//!
//! A watch only ever answers "maybe": the caller then compares the files' fingerprint, as it
//! would without one, and builds a new watch (a directory may have appeared). So a lost or
//! spurious event costs a re-check, never a stale decision. The events of an edit are queued
//! in the kernel before the editing call returns, and each question reads the queue then, so
//! an edit that landed before a request is seen by that request.

use std::path::{Path, PathBuf};

/// Watches a set of paths; where watching is impossible, every question answers "maybe", and
/// the caller re-checks the files each time, as it did before watching existed.
#[derive(Debug)]
pub struct Watch {
    #[cfg(target_os = "linux")]
    inotify: Option<std::os::fd::OwnedFd>,
}

impl Watch {
    /// Watches each of `paths` (a file, or a directory and what it holds), whether it exists
    /// or not: a path that does not exist is watched through the nearest directory above it
    /// that does, and every path through its parent too, so that its creation, removal or
    /// replacement by a rename is seen.
    pub fn new(paths: &[PathBuf]) -> Watch {
        #[cfg(target_os = "linux")]
        {
            Watch {
                inotify: linux::watch(paths).ok(),
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = paths;
            Watch {}
        }
    }

    /// Whether watching works here (it does not past the user's inotify limits, or off Linux).
    pub fn is_watching(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            self.inotify.is_some()
        }
        #[cfg(not(target_os = "linux"))]
        {
            false
        }
    }

    /// Whether anything may have changed since the watch began or since the last question
    /// (the events are used up).
    pub fn maybe_changed(&mut self) -> bool {
        #[cfg(target_os = "linux")]
        {
            self.inotify.as_ref().is_none_or(linux::drain)
        }
        #[cfg(not(target_os = "linux"))]
        {
            true
        }
    }
}

/// The directories and files to watch for `path`: itself where it exists (and, for a
/// directory, each link it holds, whose target an edit would change without touching the
/// directory), and its parent, or the nearest existing directory above it.
fn targets(path: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if path.exists() {
        out.push(path.to_path_buf());
        if let Ok(entries) = std::fs::read_dir(path) {
            out.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_symlink()))
                    .map(|e| e.path()),
            );
        }
    }
    if let Some(above) = path.ancestors().skip(1).find(|a| a.is_dir()) {
        out.push(above.to_path_buf());
    }
    out
}

#[cfg(target_os = "linux")]
mod linux {
    use std::mem::MaybeUninit;
    use std::os::fd::OwnedFd;
    use std::path::PathBuf;

    use rustix::fs::inotify::{self, CreateFlags, WatchFlags};

    pub fn watch(paths: &[PathBuf]) -> rustix::io::Result<OwnedFd> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        // Every change to content, metadata or names; opening and reading are not changes.
        let flags = WatchFlags::MODIFY
            | WatchFlags::ATTRIB
            | WatchFlags::CLOSE_WRITE
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::CREATE
            | WatchFlags::DELETE
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF;
        for path in paths {
            for target in super::targets(path) {
                match inotify::add_watch(&fd, &target, flags) {
                    Ok(_) => {}
                    // Gone between the look and the watch: the parent's watch covers it.
                    Err(rustix::io::Errno::NOENT) => {}
                    // Past the limits (ENOSPC) or not allowed: no watch, so every question
                    // re-checks.
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(fd)
    }

    /// Reads every queued event; whether there was any (an overflow is an event too).
    pub fn drain(fd: &OwnedFd) -> bool {
        let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
        let mut any = false;
        loop {
            match rustix::io::read(fd, &mut buf) {
                Ok((read, _)) if !read.is_empty() => any = true,
                Err(rustix::io::Errno::INTR) => {}
                // EAGAIN: nothing more queued. Any other failure: assume a change.
                Err(rustix::io::Errno::AGAIN) => return any,
                _ => return true,
            }
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn edits_creations_and_removals_are_seen_at_once() {
        let dir = tempfile::tempdir().expect("temp dir");
        let policies = dir.path().join("policies");
        let file = dir.path().join("cordon.toml");
        let missing = dir.path().join("not/yet/here");
        let mut watch = Watch::new(&[policies.clone(), file.clone(), missing.clone()]);
        assert!(watch.is_watching());
        assert!(!watch.maybe_changed(), "nothing happened yet");

        std::fs::write(&file, "x").expect("write");
        assert!(watch.maybe_changed(), "a file that did not exist appeared");
        assert!(!watch.maybe_changed(), "the events are used up");

        let mut watch = Watch::new(&[policies.clone(), file.clone(), missing.clone()]);
        std::fs::write(&file, "xy").expect("write");
        assert!(watch.maybe_changed(), "an edit");

        std::fs::create_dir(&policies).expect("mkdir");
        let mut watch = Watch::new(&[policies.clone(), file.clone()]);
        std::fs::write(policies.join("a.toml"), "").expect("write");
        assert!(watch.maybe_changed(), "a file in a watched directory");

        // A policy file that is a link (a dotfiles manager's): its target's edits count.
        let elsewhere = dir.path().join("dotfiles.toml");
        std::fs::write(&elsewhere, "").expect("write");
        std::os::unix::fs::symlink(&elsewhere, policies.join("b.toml")).expect("link");
        let mut watch = Watch::new(std::slice::from_ref(&policies));
        std::fs::write(&elsewhere, "changed").expect("write");
        assert!(watch.maybe_changed(), "a linked file's target");

        let mut watch = Watch::new(std::slice::from_ref(&missing));
        std::fs::create_dir_all(missing.parent().expect("parent")).expect("mkdir");
        assert!(
            watch.maybe_changed(),
            "a directory on the way to a missing path"
        );

        let mut watch = Watch::new(std::slice::from_ref(&file));
        std::fs::rename(&elsewhere, &file).expect("rename over");
        assert!(watch.maybe_changed(), "a file replaced by a rename");
    }
}
