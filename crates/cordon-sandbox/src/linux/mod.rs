//! The Linux backend: namespaces, a read-only mount view with writable binds, no capabilities,
//! `no_new_privs`, and Landlock as a second wall.
//!
//! The process that asks for a run may be multi-threaded (an agent host, a proxy), and forking
//! such a process is unsafe. So it starts a fresh copy of itself (`/proc/self/exe` with
//! [`HELPER_ARG`]) and hands it the spec on fd 3; that copy is single-threaded and does the
//! setup (see `helper.rs`). Setup failures come back on fd 4 as one line: the exit code, the
//! step, and what went wrong.

pub mod cgroups;
pub mod doctor;
mod helper;
mod seccomp;
mod sys;

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub use helper::helper_main;

use crate::SandboxSpec;
use crate::exit;

/// The hidden first argument that turns the `cordon` binary into the sandbox helper.
pub const HELPER_ARG: &str = "__cordon-sandbox-helper";

/// File descriptors the helper finds its input and error channel on.
const SPEC_FD: i32 = 3;
const ERROR_FD: i32 = 4;

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot start the sandbox helper: {0}")]
    Spawn(std::io::Error),
    #[error("sandbox setup failed at {step}: {detail}")]
    Setup {
        code: u8,
        step: String,
        detail: String,
    },
}

impl RunError {
    /// The exit status `cordon run` should end with.
    pub fn exit_code(&self) -> u8 {
        match self {
            RunError::Spawn(_) => exit::SETUP_FAILED,
            RunError::Setup { code, .. } => *code,
        }
    }
}

/// How a sandboxed run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOutcome {
    /// The command's exit code, or 128 + N when a signal N killed it.
    pub code: i32,
    pub timed_out: bool,
}

/// Whether cordon runs as root (limits then need control groups).
pub fn is_root() -> bool {
    sys::ids().0 == 0
}

/// True when this process has one thread, so forking it is safe.
fn single_threaded() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["Threads:", "1"])
        })
        .unwrap_or(false)
}

/// Runs `spec` in the sandbox and waits for it.
///
/// A single-threaded caller (the `cordon run` command) forks the helper directly; any other
/// starts a fresh copy of the binary, because forking a multi-threaded process is unsafe.
/// Both paths run the same setup.
pub fn run(spec: &SandboxSpec, timeout: Option<Duration>) -> Result<RunOutcome, RunError> {
    let (mut error_reader, error_writer) = std::io::pipe().map_err(RunError::Spawn)?;
    // CORDON_SANDBOX_REEXEC forces the re-exec path, so that tests can cover it from a
    // single-threaded process.
    let pid = if single_threaded() && std::env::var_os("CORDON_SANDBOX_REEXEC").is_none() {
        // Unflushed output would be written twice, once by each process.
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        let parent = std::process::id() as i32;
        match sys::fork().map_err(RunError::Spawn)? {
            None => {
                drop(error_reader);
                helper::forked(
                    spec.clone(),
                    parent,
                    std::fs::File::from(std::os::fd::OwnedFd::from(error_writer)),
                )
            }
            Some(pid) => pid,
        }
    } else {
        spawn_helper(spec, &error_writer)?
    };
    drop(error_writer);
    let _ = sys::forward_signals_to(pid);

    // Killing the helper takes the whole sandbox with it: everything inside dies with its
    // parent, and the PID namespace ends with its first process.
    let timed_out = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    if let Some(limit) = timeout {
        let (timed_out, done) = (timed_out.clone(), done.clone());
        std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + limit;
            while std::time::Instant::now() < deadline {
                if done.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10).min(limit));
            }
            if !done.load(Ordering::Relaxed) {
                timed_out.store(true, Ordering::Relaxed);
                sys::kill(pid, libc::SIGKILL);
            }
        });
    }
    let ended = sys::wait(pid).map_err(RunError::Spawn)?;
    done.store(true, Ordering::Relaxed);

    let mut report = String::new();
    let _ = error_reader.read_to_string(&mut report);
    if let Some(line) = report.lines().next() {
        let mut parts = line.splitn(3, '\t');
        let code = parts
            .next()
            .and_then(|c| c.parse().ok())
            .unwrap_or(exit::SETUP_FAILED);
        let step = parts.next().unwrap_or("setup").to_string();
        let detail = parts.next().unwrap_or(line).to_string();
        return Err(RunError::Setup { code, step, detail });
    }
    if timed_out.load(Ordering::Relaxed) {
        return Ok(RunOutcome {
            code: i32::from(exit::TIMEOUT),
            timed_out: true,
        });
    }
    let code = ended.map_or(i32::from(exit::SETUP_FAILED), |(_, e)| e.code());
    Ok(RunOutcome {
        code,
        timed_out: false,
    })
}

/// Starts `/proc/self/exe` as the helper with the spec on fd 3 and `error_writer` on fd 4.
fn spawn_helper(spec: &SandboxSpec, error_writer: &std::io::PipeWriter) -> Result<i32, RunError> {
    let payload =
        serde_json::to_vec(spec).map_err(|e| RunError::Spawn(std::io::Error::other(e)))?;
    let (spec_reader, mut spec_writer) = std::io::pipe().map_err(RunError::Spawn)?;
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg(HELPER_ARG).arg(std::process::id().to_string());
    sys::install_fd(&mut cmd, spec_reader.as_raw_fd(), SPEC_FD);
    sys::install_fd(&mut cmd, error_writer.as_raw_fd(), ERROR_FD);
    let child = cmd.spawn().map_err(RunError::Spawn)?;
    drop(spec_reader);
    // A helper that died before reading its spec reports itself through its exit status.
    let _ = spec_writer.write_all(&payload);
    drop(spec_writer);
    // The child is reaped with waitpid, not through `Child`.
    Ok(child.id() as i32)
}
