//! cordon's application core, under every front end (`cordon check`, `run`, `exec`, `mcp`,
//! `shell`) and for programs that embed cordon: the settings, the policy they name, deciding a
//! call (and following edited files), planning a run's paths, and the executor that runs a
//! command in the sandbox and streams what it does.
//!
//! The narrow libraries below it know nothing of the user's settings or of each other:
//! `cordon-policy` decides, `cordon-sandbox` confines, `cordon-net` filters the network. This
//! crate is where they meet the user's settings and the processes they run.

pub mod bounds;
#[cfg(unix)]
pub mod decide;
#[cfg(unix)]
pub mod exec;
#[cfg(unix)]
pub mod plan;
pub mod policy;
pub mod settings;

use std::path::{Path, PathBuf};

/// `$XDG_CONFIG_HOME/cordon` or `~/.config/cordon`: the user's settings and policies.
pub fn user_settings_dir() -> Option<PathBuf> {
    user_policy_dir()?.parent().map(Path::to_path_buf)
}

/// `$XDG_CONFIG_HOME/cordon/policies` or `~/.config/cordon/policies`.
pub fn user_policy_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("cordon").join("policies"))
}
