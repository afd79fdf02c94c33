//! cordon's application core, under every front end (`cordon check`, `run`, `exec`, `mcp`,
//! `shell`) and for programs that embed cordon.
//!
//! - [`settings`] reads and merges the settings files; [`config`] turns where a run's settings
//!   come from ([`config::Sources`]) into its merged [`config::RunConfig`];
//! - [`policy`] names the policy, [`decide`] decides a call and places a command (in the
//!   sandbox or outside), following edited files;
//! - [`plan`] works out a run's paths, [`run`] runs it on a backend with its proxy
//!   ([`proxy`]) and reports;
//! - [`exec`] runs commands in child processes ([`child`]) with streamed output and cancel;
//! - [`session::Session`] is decide → place → run, the API to embed: see
//!   `examples/embed.rs`;
//! - [`workspace`] holds the file tools that `cordon mcp` serves.
//!
//! The narrow libraries below it know nothing of the user's settings or of each other:
//! `cordon-policy` decides, `cordon-sandbox` confines, `cordon-net` filters the network. This
//! crate is where they meet the user's settings and the processes they run.

#[cfg(unix)]
pub mod agents;
pub mod bounds;
#[cfg(unix)]
pub mod caches;
#[cfg(unix)]
pub mod child;
pub mod config;
pub mod credentials;
#[cfg(unix)]
pub mod decide;
#[cfg(unix)]
pub mod exec;
pub mod lines;
#[cfg(unix)]
pub mod plan;
pub mod policy;
#[cfg(unix)]
pub mod proxy;
#[cfg(unix)]
pub mod run;
#[cfg(unix)]
pub mod session;
pub mod settings;
#[cfg(target_os = "linux")]
pub mod terminal;
pub mod threads;
#[cfg(unix)]
pub mod workspace;

use std::path::{Path, PathBuf};

/// `$XDG_CONFIG_HOME/cordon` or `~/.config/cordon`: the user's settings and policies.
pub fn user_settings_dir() -> Option<PathBuf> {
    user_policy_dir()?.parent().map(Path::to_path_buf)
}

/// `$XDG_CONFIG_HOME/cordon/policies` or `~/.config/cordon/policies`.
pub fn user_policy_dir() -> Option<PathBuf> {
    Some(env_dir("XDG_CONFIG_HOME", ".config")?.join("cordon/policies"))
}

/// `$XDG_STATE_HOME/cordon` or `~/.local/state/cordon`: cordon's own state (its guard
/// journal, the shell's history), kept read-only in every sandbox as its settings are.
pub fn user_state_dir() -> Option<PathBuf> {
    Some(env_dir("XDG_STATE_HOME", ".local/state")?.join("cordon"))
}

/// The directory the variable `var` names (`XDG_STATE_HOME`, `CARGO_HOME`), or
/// `~/home_default` where it is unset or empty; `None` without either.
pub fn env_dir(var: &str, home_default: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(home_default)))
}

/// A program's path on `PATH`: the first file of that name in its directories.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// What kind of JSON value `v` is, as a message says it ("an array", "a string").
pub fn json_kind(v: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The strings in the JSON array `v`; anything else in it, or `v` not an array, gives none.
pub fn json_strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}
