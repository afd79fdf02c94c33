//! The paths given to `cordon run`'s path flags: `~/` is home and relative paths are against
//! the working directory.

use std::path::{Path, PathBuf};

use anyhow::Context;

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
}

/// Every path of `paths`, resolved for `flag`.
pub fn resolve_all(paths: &[PathBuf], cwd: &Path, flag: Flag) -> anyhow::Result<Vec<PathBuf>> {
    paths.iter().map(|p| resolve(p, cwd, flag)).collect()
}

/// The result must exist.
fn resolve(path: &Path, cwd: &Path, flag: Flag) -> anyhow::Result<PathBuf> {
    let expanded = match path.strip_prefix("~") {
        Ok(rest) => {
            let home = std::env::var_os("HOME").with_context(|| {
                format!("{} {}: ~ needs HOME to be set", flag.name(), path.display())
            })?;
            PathBuf::from(home).join(rest)
        }
        Err(_) => cwd.join(path),
    };
    std::fs::canonicalize(&expanded).with_context(|| {
        format!(
            "{} {}: cannot resolve {}",
            flag.name(),
            path.display(),
            expanded.display()
        )
    })
}
