//! The macOS backend: the same [`SandboxSpec`] enforced by Seatbelt.
//!
//! A run's profile is written in SBPL (the Scheme-like language `sandbox-exec` reads) by a
//! pure function, so it is built and tested on every OS; only starting
//! `/usr/bin/sandbox-exec` needs a Mac. Paths never appear in the profile text: each is a
//! parameter (`-D NAME=VALUE`) the profile reads with `(param "NAME")`, so no file name can
//! change the profile's meaning. The few regexes (from `--deny-read` patterns) are written as
//! escaped string literals.
//!
//! - `paths.rs`: paths the way macOS resolves them (`/tmp` → `/private/tmp`).
//! - `glob.rs`: patterns as regexes, and SBPL string literals.
//! - `profile.rs`: the profile, cordon's own and the named ones.
//! - `log.rs`: what the kernel logged as denied, turned into [`crate::Violation`]s.
//! - `exec.rs`: starting the command under `sandbox-exec` and collecting its denials.
//!
//! docs/PLATFORMS.md says what of this has been run on a real Mac (the profile and the parser
//! are tested here against documented formats; nothing has yet been run on macOS).

mod exec;
mod glob;
mod log;
mod paths;
mod profile;

use std::path::PathBuf;

pub use exec::{Ended, ExecError, Programs, run};
pub use glob::{escape_regex, glob_to_regex, sbpl_string};
pub use log::{IgnoreViolations, LogDenial, denials_in, log_show_args, parse_line, violations};
pub use paths::canonical;
pub use profile::{NamedProfile, Options, ProfileChoice, generate};

/// The only `sandbox-exec` cordon runs: by absolute path, never looked up on `PATH`, which the
/// command's environment (and so whoever wrote it) controls.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// macOS's log tool, which holds the kernel's record of what Seatbelt denied.
pub const LOG_TOOL: &str = "/usr/bin/log";

/// A generated profile: its text and the parameters it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    pub text: String,
    /// `(NAME, VALUE)` pairs, given to sandbox-exec as `-DNAME=VALUE`.
    pub params: Vec<(String, String)>,
}

impl Profile {
    /// A user's own profile text with the parameters cordon would have given its own, so a
    /// `.sb` file can use `(param "CWD")`, `(param "WRITABLE_0")` and the rest.
    pub fn with_text(self, text: String) -> Profile {
        Profile { text, ..self }
    }

    /// The whole command line: `sandbox-exec -p PROFILE -DNAME=VALUE… -- ARGV…`. The profile is
    /// passed inline so the line is complete by itself (nothing to clean up, nothing another
    /// process could swap between writing and reading).
    pub fn command_line(&self, argv: &[String]) -> Vec<String> {
        let mut out = vec![
            SANDBOX_EXEC.to_string(),
            "-p".to_string(),
            self.text.clone(),
        ];
        out.extend(self.params.iter().map(|(k, v)| format!("-D{k}={v}")));
        // sandbox-exec reads its options with getopt; `--` keeps a command starting with `-`
        // from being taken for one.
        out.push("--".to_string());
        out.extend(argv.iter().cloned());
        out
    }
}

/// Why a profile could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error("{}: a sandbox path must be absolute", .0.display())]
    Relative(PathBuf),
    #[error("{}: a sandbox path must not contain `..`; give it resolved", .0.display())]
    ParentDir(PathBuf),
    #[error("{}: the path is not valid UTF-8, which Seatbelt parameters need", .0.display())]
    NotUtf8(PathBuf),
    #[error("--deny-read {pattern}: {why}")]
    Glob { pattern: String, why: String },
    #[error("the run tag {0:?} must be 1 to 64 of a-z, 0-9 and -")]
    BadTag(String),
    #[error(
        "the seatbelt profile {0} sends the network through cordon's proxy, but this run has none; run with the proxy or choose {1}"
    )]
    NeedsProxy(&'static str, &'static str),
    #[error(
        "unknown seatbelt profile {0:?}; use permissive-open, permissive-proxied, restrictive-open, restrictive-proxied, strict-open, strict-proxied, or a path to a .sb file"
    )]
    Unknown(String),
}
