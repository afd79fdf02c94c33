//! What the sandbox test binaries share: a scratch host layout and a way to run `cordon run`
//! in it, with namespaces or with Landlock alone.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// How `cordon run` is asked to wall the command off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The full sandbox: namespaces, mount view, Landlock, seccomp.
    Namespaces,
    /// What runs where user namespaces are unavailable: Landlock and seccomp alone.
    LandlockOnly,
}

pub struct Sandbox {
    _tmp: tempfile::TempDir,
    /// The command's working directory (writable).
    pub ws: PathBuf,
    /// A directory outside the workspace, standing in for the rest of the host.
    pub outside: PathBuf,
    pub mode: Mode,
}

impl Sandbox {
    /// `None` (after printing why) when this machine cannot run sandboxes.
    pub fn new() -> Option<Self> {
        Self::with_mode(Mode::Namespaces)
    }

    pub fn with_mode(mode: Mode) -> Option<Self> {
        let tmp = tempfile::tempdir().expect("temp dir");
        let ws = tmp.path().join("ws");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&ws).expect("mkdir");
        std::fs::create_dir_all(&outside).expect("mkdir");
        let sb = Sandbox {
            _tmp: tmp,
            ws,
            outside,
            mode,
        };
        let probe = sb.run(&["--", "true"]);
        if probe.status.success() {
            return Some(sb);
        }
        let why = format!(
            "sandbox tests skipped: `cordon run -- true` ({mode:?}) failed here: {}",
            stderr(&probe)
        );
        assert!(
            std::env::var_os("CORDON_TEST_NO_SKIP").is_none(),
            "{why} (CORDON_TEST_NO_SKIP is set)"
        );
        eprintln!("{why}");
        None
    }

    pub fn command(&self) -> Command {
        let mut cmd = Command::new(cordon_bin());
        cmd.arg("run").current_dir(&self.ws);
        if self.mode == Mode::LandlockOnly {
            cmd.env("CORDON_SANDBOX_LANDLOCK_ONLY", "1");
        }
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.run_env(args, &[])
    }

    pub fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.command()
            .args(args)
            .envs(env.iter().copied())
            .output()
            .expect("run cordon")
    }

    pub fn sh(&self, script: &str) -> Output {
        self.run(&["-c", script])
    }
}

/// The binary under test: `CORDON_BIN` when CI runs this suite as an unprivileged user from a
/// copied location, else the one cargo built.
pub fn cordon_bin() -> PathBuf {
    std::env::var_os("CORDON_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_cordon")),
        PathBuf::from,
    )
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A path quoted for `sh`.
pub fn q(p: &Path) -> String {
    format!("'{}'", p.display())
}
pub mod engines;
pub mod terminal;
