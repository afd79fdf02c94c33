//! The Linux backend: namespaces, a read-only mount view with writable binds, no capabilities,
//! `no_new_privs`, Landlock as a second wall and seccomp; Landlock and seccomp alone where
//! user namespaces are unavailable.
//!
//! The process that asks for a run may be multi-threaded (an agent host, a proxy), and forking
//! such a process is unsafe. So it starts a fresh copy of itself (`/proc/self/exe` with
//! [`HELPER_ARG`]) and hands it the spec on fd 3; that copy is single-threaded and does the
//! setup (see `helper.rs`). A single-threaded caller (`cordon run`) skips that copy and makes
//! the sandbox's first process itself. What the helper has to say comes back on fd 4, one message per
//! line (see [`Message`]): a setup failure, what is weaker than asked, what was put back, a
//! timeout.

pub mod cgroups;
pub mod doctor;
mod fallback;
mod helper;
mod landlock_rules;
mod prestart;
mod seccomp;
mod supervise;
mod sys;
mod warm;

pub use warm::{WarmCommand, WarmRun, WarmSandbox, WarmSignals, unsupported as warm_unsupported};

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::Command;

pub use helper::helper_main;

use crate::exit;
use crate::{ErrorScanner, Isolation, SandboxSpec, Violation};

/// The hidden first argument that turns the `cordon` binary into the sandbox helper.
pub const HELPER_ARG: &str = "__cordon-sandbox-helper";

/// File descriptors the helper finds its input and error channel on.
const SPEC_FD: i32 = 3;
const ERROR_FD: i32 = 4;
/// Where a warm sandbox's helper finds the socket it serves commands on.
const WARM_FD: i32 = 5;
/// Where a warm sandbox's helper finds the socket the guards of its commands come on.
const GUARD_FD: i32 = 6;

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot start the sandbox helper: {0}")]
    Spawn(std::io::Error),
    #[error("{}", setup_failed(step, detail))]
    Setup {
        code: u8,
        step: String,
        detail: String,
    },
}

/// What a failed set-up says: the command that could not be started is the person's, not the
/// sandbox's, so that failure names it alone (`ls-la: command not found`).
fn setup_failed(step: &str, detail: &str) -> String {
    if step == "exec" {
        format!("cannot run the command: {detail}")
    } else {
        format!("sandbox setup failed at {step}: {detail}")
    }
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
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunOutcome {
    /// The command's exit code, or 128 + N when a signal N killed it.
    pub code: i32,
    /// The signal that ended the command, if one did (not after a timeout, whose kill is
    /// cordon's own): a command may also exit with 128 + N itself.
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// What was enforced less strictly than asked, and how.
    pub weaker: Vec<String>,
    /// Read-only paths the command changed that were put back after the run (only where they
    /// could not be made read-only during it).
    pub restored: Vec<PathBuf>,
    /// Read-only paths the command changed that could not be put back, with the error.
    pub unrestored: Vec<(PathBuf, String)>,
    /// What the command's error output says the sandbox blocked (empty where that output
    /// went to a terminal).
    pub inferred: Vec<Violation>,
}

/// One line from the helper.
#[derive(Debug, PartialEq, Eq)]
enum Message {
    /// `error`, exit code, step, detail: nothing ran.
    Error {
        code: u8,
        step: String,
        detail: String,
    },
    /// `weaker`, what.
    Weaker(String),
    /// `restored`, path.
    Restored(PathBuf),
    /// `unrestored`, path, error: a changed read-only path that could not be put back.
    Unrestored(PathBuf, String),
    /// `timed-out`.
    TimedOut,
    /// `signaled`, signal number: a signal ended the process the sender waited for.
    Signaled(i32),
    /// `exit`, status: how a warm sandbox's command ended (`warm.rs`); a cold run's is the
    /// helper's own exit status.
    Exited(i32),
}

impl Message {
    fn parse(line: &str) -> Option<Message> {
        let mut parts = line.splitn(4, '\t');
        match parts.next()? {
            "error" => {
                let code = parts.next()?.parse().unwrap_or(exit::SETUP_FAILED);
                let step = parts.next()?.to_string();
                let detail = parts.next().unwrap_or_default().to_string();
                Some(Message::Error { code, step, detail })
            }
            "weaker" => Some(Message::Weaker(parts.next()?.to_string())),
            "restored" => Some(Message::Restored(PathBuf::from(parts.next()?))),
            "unrestored" => Some(Message::Unrestored(
                PathBuf::from(parts.next()?),
                parts.next().unwrap_or_default().to_string(),
            )),
            "timed-out" => Some(Message::TimedOut),
            "signaled" => parts.next()?.parse().ok().map(Message::Signaled),
            "exit" => parts.next()?.parse().ok().map(Message::Exited),
            _ => None,
        }
    }
}

/// Takes ownership of a descriptor this process was started with (made close-on-exec).
pub fn adopt_fd(fd: i32) -> std::io::Result<std::fs::File> {
    sys::adopt_fd(fd)
}

/// Makes each `(fd, target)`: descriptor `fd` of this process becomes descriptor `target` of
/// the process `cmd` starts (at most 16, in one call: the order of placing them matters).
pub fn pass_fds(cmd: &mut Command, pairs: &[(i32, i32)]) {
    sys::install_fds(cmd, pairs);
}

/// For commands that only print: end quietly when the reader goes away (`cordon … | head`)
/// instead of failing on every write. Not for the proxy or a run, whose sockets and pipes
/// must be able to close under them.
pub fn end_quietly_on_closed_output() {
    sys::default_sigpipe();
}

/// Asks the kernel to kill this process when the one that started it ends.
pub fn die_with_parent() -> std::io::Result<()> {
    sys::die_with_parent(libc::SIGKILL)
}

/// Whether each PID namespace has its own `pid_max` (Linux 6.14+), so that
/// [`crate::Limits::pid_max`] can bound a sandbox's processes.
pub fn pid_max_per_namespace() -> bool {
    sys::kernel_at_least(6, 14)
}

/// Whether cordon runs as root (limits then need control groups).
pub fn is_root() -> bool {
    sys::ids().0 == 0
}

/// Listens on the proxy ports of the loopback in the network namespace of process `pid` (a
/// container's first process) and hands the listening sockets to cordon's proxy, as the
/// native sandbox's init does from inside: the container, with no network but loopback,
/// reaches the proxy and nothing else, through no program of its own. Joining another
/// network namespace needs privilege over it (root, for a rootful engine's containers).
pub fn hand_ports_from(pid: u32, endpoint: &crate::ProxyEndpoint) -> std::io::Result<()> {
    use std::os::fd::AsFd;
    let socket = endpoint
        .socket
        .clone()
        .ok_or_else(|| std::io::Error::other("no socket to reach cordon's proxy through"))?;
    let ns = std::fs::File::open(format!("/proc/{pid}/ns/net"))?;
    let ports = [endpoint.http_port, endpoint.socks_port];
    // A thread of its own: setns moves only the calling thread, which ends right after.
    std::thread::spawn(move || {
        rustix::thread::move_into_link_name_space(
            ns.as_fd(),
            Some(rustix::thread::LinkNameSpaceType::Network),
        )?;
        let listeners = ports
            .iter()
            .map(|p| std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, *p)))
            .collect::<std::io::Result<Vec<_>>>()?;
        let channel = std::os::unix::net::UnixStream::connect(&socket)?;
        crate::handoff::send(&channel, &listeners)
    })
    .join()
    .map_err(|_| std::io::Error::other("the thread joining the network namespace failed"))?
}

/// This process's real user and group ids (a container runs as them, so what it writes
/// belongs to the user).
pub fn user_ids() -> (u32, u32) {
    sys::ids()
}

/// A process, started before a run, that undoes what the run left if `cordon run` dies
/// before it can (`exec` kills a run it cancelled that does not end; a panic in `exec`
/// kills its runs through the parent-death signal).
///
/// It lives in a session of its own, out of reach of the signals sent to `cordon run`'s
/// process group, and waits on a pipe whose writing end `cordon run` holds, and, through
/// them, the sandbox's first process (cloned, never exec'd) or the fallback's supervisor:
/// the end of the pipe comes only once none of them is left, so the command is gone too.
/// Dropped without [`UndoWatch::disarm`] it still waits for `cordon run`.
#[derive(Debug)]
pub struct UndoWatch {
    alive: Option<std::io::PipeWriter>,
}

impl UndoWatch {
    /// Starts the watcher, which runs `undo` if the pipe ends without a word. `None` where
    /// forking is unsafe (more than one thread): the sandbox is then started by a re-exec'd
    /// helper, which would not hold the pipe.
    pub fn start(undo: impl FnOnce()) -> std::io::Result<Option<UndoWatch>> {
        if !single_threaded() {
            return Ok(None);
        }
        let (mut reader, alive) = std::io::pipe()?;
        match sys::fork()? {
            Some(_) => Ok(Some(UndoWatch { alive: Some(alive) })),
            None => {
                drop(alive);
                let _ = sys::new_session();
                // Holding cordon's output open would keep its reader waiting; the watcher
                // speaks on standard error only, and only when it has work to do.
                if let Ok(null) = std::fs::File::options()
                    .read(true)
                    .write(true)
                    .open("/dev/null")
                {
                    let fd = std::os::fd::AsRawFd::as_raw_fd(&null);
                    let _ = sys::dup2(fd, 0);
                    let _ = sys::dup2(fd, 1);
                }
                let mut word = [0u8; 1];
                let said = loop {
                    match std::io::Read::read(&mut reader, &mut word) {
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        r => break r.is_ok_and(|n| n == 1),
                    }
                };
                if !said {
                    undo();
                }
                sys::exit_now(0)
            }
        }
    }

    /// `cordon run` has undone what the run left itself: the watcher ends without acting.
    ///
    /// It is not waited for: it ends by itself once it reads the word, and waiting would add
    /// its exit (unmapping its copy of this process) to every run. It stays a zombie until
    /// this process, which ends right after a run, has gone.
    pub fn disarm(mut self) {
        if let Some(mut alive) = self.alive.take() {
            let _ = std::io::Write::write_all(&mut alive, b"d");
        }
    }
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
/// Both paths run the same setup. The helper enforces the timeout itself, so the caller needs
/// no thread of its own.
pub fn run(spec: &SandboxSpec) -> Result<RunOutcome, RunError> {
    let tap = ErrorTap::new();
    if single_threaded() && std::env::var_os("CORDON_SANDBOX_REEXEC").is_none() {
        run_from_here(spec, tap)
    } else {
        let (error_reader, error_writer) = std::io::pipe().map_err(RunError::Spawn)?;
        let pid = spawn_helper(spec, &error_writer, tap.as_ref())?;
        drop(error_writer);
        let _ = sys::forward_signals_to(pid);
        finish(spec, pid, error_reader, tap, false)
    }
}

/// The command's error output passing through cordon on its way out, so that what the sandbox
/// blocked can be inferred from it (see [`ErrorScanner`]). Only where someone reads it later:
/// a terminal's reader sees the errors as they come, and `/dev/null` has no reader.
///
/// Standard output goes through a pipe of its own when it is a host file: a command holding
/// the file itself could change its mode, owner or times (`fchmod(1, 0o4755)`), which no
/// read-only mount or Landlock rule stops on a descriptor opened outside.
struct ErrorTap {
    errors: Option<(std::io::PipeReader, std::io::PipeWriter)>,
    /// Standard output goes to the same place as the errors; it is passed through their tap,
    /// so the two keep their order.
    merged: bool,
    output: Option<(std::io::PipeReader, std::io::PipeWriter)>,
}

impl ErrorTap {
    fn new() -> Option<Self> {
        let errors = if sys::is_terminal_or_null(2) {
            None
        } else {
            Some(std::io::pipe().ok()?)
        };
        let merged = errors.is_some() && sys::same_file(1, 2);
        let output = if !merged && sys::is_regular_file(1) {
            Some(std::io::pipe().ok()?)
        } else {
            None
        };
        (errors.is_some() || output.is_some()).then_some(ErrorTap {
            errors,
            merged,
            output,
        })
    }

    /// Where the command's descriptors 1 and 2 go instead of this process's, if anywhere.
    fn targets(&self) -> [Option<&std::io::PipeWriter>; 2] {
        let errors = self.errors.as_ref().map(|(_, w)| w);
        let output = match &self.output {
            Some((_, w)) => Some(w),
            None if self.merged => errors,
            None => None,
        };
        [output, errors]
    }

    /// Runs `start` with this process's standard output and error pointed at the taps, so
    /// that the processes it starts inherit them, then puts them back.
    fn around<T>(&self, start: impl FnOnce() -> T) -> std::io::Result<T> {
        let mut saved = Vec::new();
        for (fd, target) in (1..).zip(self.targets()) {
            if let Some(w) = target {
                saved.push((fd, sys::dup(fd)?));
                sys::dup2(w.as_raw_fd(), fd)?;
            }
        }
        let result = start();
        for (fd, old) in saved {
            sys::dup2(old.as_raw_fd(), fd)?;
        }
        Ok(result)
    }
}

/// The path for a single-threaded caller: the sandbox's first process is its own child, made
/// with one `clone` (CORDON_SANDBOX_REEXEC forces the other path, so tests cover both).
/// Where namespaces are unavailable a forked helper supervises the command instead.
fn run_from_here(spec: &SandboxSpec, tap: Option<ErrorTap>) -> Result<RunOutcome, RunError> {
    let (error_reader, error_writer) = std::io::pipe().map_err(RunError::Spawn)?;
    // Unflushed output would be written twice, once by each process.
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    let mut channel = Some(std::fs::File::from(std::os::fd::OwnedFd::from(
        error_writer,
    )));
    let mut without_namespaces = None;
    if spec.isolation != Isolation::LandlockOnly {
        // Control groups are joined by the sandbox's first process before it does anything.
        let join = |pid: libc::pid_t| {
            for procs in &spec.cgroups {
                std::fs::write(procs, pid.to_string())
                    .map_err(|e| helper::Failure::io("cgroup", e, &procs.display().to_string()))?;
            }
            Ok(())
        };
        let started = tapped(&tap, || {
            match helper::start_namespaced(spec, &mut channel, join, None, &mut None) {
                Ok(helper::Started::Init(init)) => Ok(Some(init)),
                Ok(helper::Started::Unavailable(e)) if spec.isolation == Isolation::Namespaces => {
                    Err(setup_error(helper::namespaces_unavailable(e)))
                }
                Ok(helper::Started::Unavailable(e)) => {
                    without_namespaces = Some(format!("clone: {e}"));
                    Ok(None)
                }
                Err(f) => Err(setup_error(f)),
            }
        })?;
        if let Some(init) = started {
            drop(channel);
            let _ = sys::forward_signals_to(init);
            sys::kill_on_alarm(init, spec.limits.timeout).map_err(RunError::Spawn)?;
            let outcome = finish(spec, init, error_reader, tap, true);
            sys::disarm_alarm();
            return outcome;
        }
    }
    let Some(channel) = channel else {
        return Err(RunError::Spawn(std::io::Error::other("no channel")));
    };
    let parent = std::process::id() as i32;
    let pid = tapped(&tap, || match sys::fork().map_err(RunError::Spawn)? {
        None => helper::forked(spec.clone(), parent, channel, without_namespaces),
        Some(pid) => Ok(pid),
    })?;
    let _ = sys::forward_signals_to(pid);
    finish(spec, pid, error_reader, tap, false)
}

/// Runs `start` with the tap in place, if there is one.
fn tapped<T>(
    tap: &Option<ErrorTap>,
    start: impl FnOnce() -> Result<T, RunError>,
) -> Result<T, RunError> {
    match tap {
        Some(t) => t.around(start).map_err(RunError::Spawn)?,
        None => start(),
    }
}

fn setup_error(f: helper::Failure) -> RunError {
    RunError::Setup {
        code: f.0,
        step: f.1.to_string(),
        detail: f.2,
    }
}

/// Passes on the command's error output (when tapped) and reads what the sandbox has to say,
/// until both end, then waits for `pid`, the sandbox's outermost process. With `own_alarm`,
/// this process enforces the timeout (see [`sys::kill_on_alarm`]); otherwise the helper does
/// and says so.
fn finish(
    spec: &SandboxSpec,
    pid: libc::pid_t,
    mut error_reader: std::io::PipeReader,
    tap: Option<ErrorTap>,
    own_alarm: bool,
) -> Result<RunOutcome, RunError> {
    // Only the sandbox holds the write ends now (the command's copy of the channel closes
    // when it execs), so both reach their end when it is over.
    let mut text = String::new();
    let mut scanner = ErrorScanner::new(spec);
    match tap {
        None => {
            let _ = error_reader.read_to_string(&mut text);
        }
        Some(ErrorTap { errors, output, .. }) => {
            let mut errors = errors.map(|(r, _)| r);
            let mut output = output.map(|(r, _)| r);
            let mut raw = Vec::new();
            let mut channel_open = true;
            let mut buf = vec![0u8; 64 * 1024];
            while channel_open || errors.is_some() || output.is_some() {
                let fds = [
                    channel_open.then(|| error_reader.as_raw_fd()),
                    errors.as_ref().map(|r| r.as_raw_fd()),
                    output.as_ref().map(|r| r.as_raw_fd()),
                ]
                .map(|fd| fd.unwrap_or(-1));
                let ready = sys::poll_readable(&fds).map_err(RunError::Spawn)?;
                if ready[0] && channel_open {
                    match error_reader.read(&mut buf) {
                        Ok(0) | Err(_) => channel_open = false,
                        Ok(n) => raw.extend_from_slice(&buf[..n]),
                    }
                }
                // A reader that went away must not stop the command: keep draining.
                if ready[1]
                    && let Some(r) = errors.as_mut()
                {
                    match r.read(&mut buf) {
                        Ok(0) | Err(_) => errors = None,
                        Ok(n) => {
                            let _ = std::io::stderr().write_all(&buf[..n]);
                            scanner.feed(&buf[..n]);
                        }
                    }
                }
                if ready[2]
                    && let Some(r) = output.as_mut()
                {
                    match r.read(&mut buf) {
                        Ok(0) | Err(_) => output = None,
                        Ok(n) => {
                            let mut out = std::io::stdout().lock();
                            let _ = out.write_all(&buf[..n]).and_then(|()| out.flush());
                        }
                    }
                }
            }
            text = String::from_utf8_lossy(&raw).into_owned();
        }
    }
    let ended = sys::wait(pid).map_err(RunError::Spawn)?;
    let timed_out = own_alarm && sys::alarm_fired();

    let mut outcome = RunOutcome {
        code: ended.map_or(i32::from(exit::SETUP_FAILED), |(_, e)| e.code()),
        signal: None,
        timed_out: false,
        weaker: Vec::new(),
        restored: Vec::new(),
        unrestored: Vec::new(),
        inferred: scanner.finish(),
    };
    if timed_out {
        outcome.timed_out = true;
        outcome.code = i32::from(exit::TIMEOUT);
    }
    fold_messages(&mut outcome, &text)?;
    if let Some((_, sys::Ended::Signaled(s))) = ended {
        outcome.signal.get_or_insert(s);
    }
    if outcome.timed_out {
        outcome.signal = None;
    }
    Ok(outcome)
}

/// Adds what the sandbox said (`text`, its channel's lines) to `outcome`; returns the status
/// an `exit` line gave. A setup error is the run's error.
fn fold_messages(outcome: &mut RunOutcome, text: &str) -> Result<Option<i32>, RunError> {
    let mut status = None;
    for message in text.lines().filter_map(Message::parse) {
        match message {
            Message::Error { code, step, detail } => {
                return Err(RunError::Setup { code, step, detail });
            }
            Message::Weaker(w) => outcome.weaker.push(w),
            Message::Restored(p) => outcome.restored.push(p),
            Message::Unrestored(p, e) => outcome.unrestored.push((p, e)),
            Message::TimedOut => {
                outcome.timed_out = true;
                outcome.code = i32::from(exit::TIMEOUT);
                outcome.signal = None;
            }
            // The innermost process that saw a signal tells first: the command's.
            Message::Signaled(s) => {
                outcome.signal.get_or_insert(s);
            }
            Message::Exited(code) => status = Some(code),
        }
    }
    Ok(status)
}

/// Starts `/proc/self/exe` as the helper with the spec on fd 3 and `error_writer` on fd 4.
fn spawn_helper(
    spec: &SandboxSpec,
    error_writer: &std::io::PipeWriter,
    tap: Option<&ErrorTap>,
) -> Result<i32, RunError> {
    let payload =
        serde_json::to_vec(spec).map_err(|e| RunError::Spawn(std::io::Error::other(e)))?;
    let (spec_reader, mut spec_writer) = std::io::pipe().map_err(RunError::Spawn)?;
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg(HELPER_ARG).arg(std::process::id().to_string());
    sys::install_fds(
        &mut cmd,
        &[
            (spec_reader.as_raw_fd(), SPEC_FD),
            (error_writer.as_raw_fd(), ERROR_FD),
        ],
    );
    if let Some(tap) = tap {
        let [output, errors] = tap.targets();
        let to = |w: &std::io::PipeWriter| w.try_clone().map(std::process::Stdio::from);
        if let Some(w) = output {
            cmd.stdout(to(w).map_err(RunError::Spawn)?);
        }
        if let Some(w) = errors {
            cmd.stderr(to(w).map_err(RunError::Spawn)?);
        }
    }
    let child = cmd.spawn().map_err(RunError::Spawn)?;
    drop(spec_reader);
    // A helper that died before reading its spec reports itself through its exit status.
    let _ = spec_writer.write_all(&payload);
    drop(spec_writer);
    // The child is reaped with waitpid, not through `Child`.
    Ok(child.id() as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helper_messages_are_parsed_and_junk_is_ignored() {
        assert_eq!(
            Message::parse("error\t125\tmount /proc\tEPERM: x\ty"),
            Some(Message::Error {
                code: 125,
                step: "mount /proc".into(),
                detail: "EPERM: x\ty".into()
            })
        );
        assert_eq!(
            Message::parse("restored\t/w/.bashrc"),
            Some(Message::Restored(PathBuf::from("/w/.bashrc")))
        );
        assert_eq!(Message::parse("timed-out"), Some(Message::TimedOut));
        assert_eq!(Message::parse("weaker"), None);
        assert_eq!(Message::parse("something else"), None);
    }
}
