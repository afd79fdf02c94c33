//! cordon's sandbox: what a command may touch, and how each OS enforces it.
//!
//! A [`SandboxSpec`] is plain data — the command, its directory and environment, the paths it
//! may write, its network — built by the front end and handed to a backend. The Linux backend
//! (`linux/`) enforces it with namespaces, a read-only mount view with writable binds,
//! `no_new_privs` and Landlock; the Seatbelt backend (`seatbelt/`) writes the same spec as a
//! macOS sandbox profile, built and tested on every OS; the container backend (`container/`)
//! writes it as a Docker or Podman command line, also a pure function tested everywhere.

#[cfg(unix)]
pub mod beneath;
pub mod container;
pub mod env;
pub mod gitmeta;
#[cfg(target_os = "linux")]
pub mod handoff;
#[cfg(unix)]
pub mod journal;
pub mod kept;
pub mod kubernetes;
#[cfg(unix)]
pub mod pattern;
mod protect;
#[cfg(unix)]
pub mod seatbelt;
pub mod shell;
mod snapshot;
mod spec;
mod violations;

#[cfg(target_os = "linux")]
pub mod linux;

pub use protect::{
    GuardRecord, MadeForRun, NotUndone, PROTECTED_NAMES, RunGuard, UndoReport, Undone,
    existing_protected, is_protected, linked_worktree_writable,
};
pub use snapshot::{Restoration, Snapshot, SnapshotError};
pub use spec::{Isolation, Limits, NetworkMode, ProxyEndpoint, SandboxSpec};
pub use violations::{ErrorScanner, Violation};

/// Makes a new directory only this user can enter, `PREFIX-<pid>-<n>` under `base`, and
/// returns it: a run's private TMPDIR, the proxy's socket directory.
pub fn private_dir(base: &std::path::Path, prefix: &str) -> std::io::Result<std::path::PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut builder = std::fs::DirBuilder::new();
    builder.mode(0o700);
    let mut attempt = 0u32;
    loop {
        let dir = base.join(format!(
            "{prefix}-{}-{:x}",
            std::process::id(),
            stamp.wrapping_add(attempt)
        ));
        match builder.create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 16 => {
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Exit statuses `cordon run` uses for its own failures, distinct from the usual command ones.
pub mod exit {
    /// The command ran longer than `--timeout` and was killed.
    pub const TIMEOUT: u8 = 124;
    /// The sandbox could not be set up; nothing ran.
    pub const SETUP_FAILED: u8 = 125;
    /// The command exists but cannot be executed.
    pub const CANNOT_EXECUTE: u8 = 126;
    /// The command was not found.
    pub const NOT_FOUND: u8 = 127;
    /// Something the run planted or changed could not be undone afterwards: the host keeps
    /// it (the report names it).
    pub const UNDO_FAILED: u8 = 123;
}
