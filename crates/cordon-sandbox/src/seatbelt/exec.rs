//! Running a command under `sandbox-exec`, and collecting what Seatbelt denied.
//!
//! Plain process handling, so it compiles and is tested on Linux with stand-ins for
//! `sandbox-exec` and `log` ([`Programs`]); `cordon run` calls it only on macOS. What Seatbelt
//! cannot bound (memory, processes, CPU time) is left to the caller to report: setting
//! rlimits in the child would need `pre_exec`, and so `unsafe`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::log::{IgnoreViolations, log_show_args, violations};
use super::{LOG_TOOL, Profile, SANDBOX_EXEC};
use crate::{SandboxSpec, Violation, exit};

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("cannot create the run's temporary directory {path}: {1}", path = .0.display())]
    TempDir(PathBuf, std::io::Error),
    #[error("cannot start {path}: {1} (Seatbelt exists only on macOS)", path = .0.display())]
    Spawn(PathBuf, std::io::Error),
    #[error("cannot wait for the command: {0}")]
    Wait(std::io::Error),
}

impl ExecError {
    /// The exit status `cordon run` should end with: nothing ran.
    pub fn exit_code(&self) -> u8 {
        exit::SETUP_FAILED
    }
}

/// The programs a run starts. Only tests change them.
#[derive(Debug, Clone)]
pub struct Programs {
    pub sandbox_exec: PathBuf,
    pub log: PathBuf,
}

impl Default for Programs {
    fn default() -> Self {
        Programs {
            sandbox_exec: PathBuf::from(SANDBOX_EXEC),
            log: PathBuf::from(LOG_TOOL),
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    /// The command's exit code, or 128 + N when a signal N killed it.
    pub code: i32,
    /// The signal that ended the command, if one did (not after a timeout, whose kill is
    /// cordon's own).
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// What Seatbelt denied, from the kernel's log; looked up only when the command failed,
    /// because reading the log takes a noticeable moment.
    pub violations: Vec<Violation>,
}

/// Runs `spec` under `profile` and waits for it. `tmpdir` (which must not exist yet) is made
/// for the run, given to it as `TMPDIR`, and removed afterwards.
pub fn run(
    spec: &SandboxSpec,
    profile: &Profile,
    tmpdir: &Path,
    tag: &str,
    ignore: &IgnoreViolations,
    programs: &Programs,
) -> Result<Ended, ExecError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(tmpdir)
        .map_err(|e| ExecError::TempDir(tmpdir.to_path_buf(), e))?;
    let result = run_in(spec, profile, tmpdir, tag, ignore, programs);
    // The run's scratch files go with it, as a private /tmp does on Linux.
    let _ = std::fs::remove_dir_all(tmpdir);
    result
}

fn run_in(
    spec: &SandboxSpec,
    profile: &Profile,
    tmpdir: &Path,
    tag: &str,
    ignore: &IgnoreViolations,
    programs: &Programs,
) -> Result<Ended, ExecError> {
    use std::os::unix::process::ExitStatusExt;
    let started = Instant::now();
    let line = profile.command_line(&spec.argv);
    let mut child = Command::new(&programs.sandbox_exec)
        .args(&line[1..])
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .env("TMPDIR", tmpdir)
        .current_dir(&spec.cwd)
        .spawn()
        .map_err(|e| ExecError::Spawn(programs.sandbox_exec.clone(), e))?;
    let (status, timed_out) = match spec.limits.timeout {
        None => (child.wait().map_err(ExecError::Wait)?, false),
        Some(limit) => {
            let mut pause = Duration::from_millis(1);
            loop {
                if let Some(status) = child.try_wait().map_err(ExecError::Wait)? {
                    break (status, false);
                }
                if started.elapsed() >= limit {
                    // Only the command itself: what it started in the background may outlive
                    // it (docs/PLATFORMS.md).
                    let _ = child.kill();
                    break (child.wait().map_err(ExecError::Wait)?, true);
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(25));
            }
        }
    };
    let code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    let violations = if code == 0 {
        Vec::new()
    } else {
        let minutes = started.elapsed().as_secs() / 60 + 1;
        Command::new(&programs.log)
            .args(log_show_args(tag, minutes))
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .map(|o| {
                violations(
                    &String::from_utf8_lossy(&o.stdout),
                    tag,
                    &spec.argv.join(" "),
                    ignore,
                )
            })
            .unwrap_or_default()
    };
    Ok(Ended {
        code,
        signal: status.signal().filter(|_| !timed_out),
        timed_out,
        violations,
    })
}
