//! Warm sandboxes: the namespaces and mount view built once, for many commands.
//!
//! Building a sandbox (a user namespace, a mount namespace with a few dozen mounts, a network
//! namespace) costs milliseconds of kernel time, most of a short command's run. An agent runs
//! many short commands with one spec, so [`WarmSandbox::start`] builds it once: its first
//! process (the "zygote") keeps the view and waits on a socket. Each command sent there gets,
//! in a process cloned from the zygote (the command's "keeper"):
//!
//! - PID and IPC namespaces of its own: the keeper is PID 1, so everything the command leaves
//!   running is killed when it ends, and no command sees or signals another's processes;
//! - a mount namespace of its own, with a fresh `/proc` (its own PID namespace and process
//!   limit), a fresh `/tmp`, `/dev/shm` and pseudo-terminal instance: nothing one command puts
//!   there is seen by the next;
//! - its own limits, time limit and report, and its own Landlock domain and seccomp filter,
//!   applied in its own process exactly as a cold run applies them ([`super::helper`]).
//!
//! What commands of one warm sandbox share: the user namespace, the network namespace (its
//! loopback: one command's listening port is reachable by another running at the same time),
//! the host name, and the mount view as the spec made it (the working directory and allowed
//! paths, which are the host's own anyway).
//!
//! Only pipes and sockets are taken as a command's standard input and output: a host file
//! (a terminal, `/dev/null`) would need the cold run's reopening through a read-only mount,
//! which needs the host's mounts, which the view no longer shows.

use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::helper::{self, Channel, Failure, code_of, report, tell};
use super::prestart::{self, Preload};
use super::{ERROR_FD, GUARD_FD, HELPER_ARG, RunError, RunOutcome, SPEC_FD, WARM_FD, sys};
use crate::{Isolation, Limits, NetworkMode, RunGuard, SandboxSpec, exit};

/// The helper's second argument that asks for a warm sandbox.
pub(super) const ARG: &str = "warm";

/// The longest request line a keeper reads (the environment is most of it).
const MAX_REQUEST: usize = 4 << 20;

/// One command for a warm sandbox: what differs from the spec it was started with.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WarmCommand {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Processes (`pid_max` and `RLIMIT_NPROC`), memory and CPU time per process, and the
    /// time limit, each for this command. Control groups are never used here.
    pub limits: Limits,
}

/// Why `spec` cannot be served warm, if it cannot; such a run is built cold, as always.
pub fn unsupported(spec: &SandboxSpec) -> Option<&'static str> {
    let under = |p: &Path| ["/tmp", "/dev", "/proc"].iter().any(|d| p.starts_with(d));
    let paths = std::iter::once(&spec.cwd)
        .chain(&spec.writable)
        .chain(&spec.read_only)
        .chain(&spec.hidden)
        .chain(&spec.reopened);
    if spec.isolation == Isolation::LandlockOnly {
        Some("it runs on Landlock alone")
    } else if !spec.cgroups.is_empty() {
        Some("its limits need control groups")
    } else if spec.limits.scratch_bytes.is_some() {
        Some("its memory limit bounds /tmp, which each command gets afresh")
    } else if matches!(spec.network, NetworkMode::Proxy(_)) || spec.inbound.is_some() {
        Some("its network goes through cordon's proxy")
    } else if !spec.unix_sockets.is_empty() {
        Some("it allows Unix sockets, whose connects its first process settles")
    } else if spec.own_terminal {
        Some("it runs on a terminal")
    } else if paths.into_iter().any(|p| under(p)) {
        Some("a path of its spec is under /tmp, /dev or /proc, which each command gets afresh")
    } else {
        None
    }
}

/// A sandbox built once and kept for commands, until dropped.
///
/// Its helper (outside the sandbox, the parent of its first process) ends it when this is
/// dropped or this process dies: it waits on the socket [`WarmSandbox::arm`] hands it the
/// guards of running commands over, and when that closes it kills the sandbox and, once
/// nothing of it is left, undoes what commands still guarded planted.
#[derive(Debug)]
pub struct WarmSandbox {
    control: OwnedFd,
    guards: OwnedFd,
    next_guard: AtomicU64,
    helper: Option<std::process::Child>,
    /// What the view was built over; `None` when the host changed it while it was built.
    view: Option<ViewIdentity>,
}

/// What each path a spec's mount view is built over was when it was built: its device and
/// inode, or nothing there. The mounts that keep a path read-only or hide it cover the file
/// that was there; when the host replaces that file (an editor's save, `sed -i`, a rename
/// over it, `rm -r` and `mkdir`), the kernel detaches them in every mount namespace, so a kept
/// sandbox would show the new file writable or readable. A path that did not exist is
/// neither protected nor hidden in the view, so one that appears changes the identity too.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ViewIdentity(std::collections::BTreeMap<std::path::PathBuf, Option<(u64, u64)>>);

impl ViewIdentity {
    fn of(spec: &SandboxSpec) -> ViewIdentity {
        use std::os::unix::fs::MetadataExt;
        let roots: Vec<&Path> = std::iter::once(spec.cwd.as_path())
            .chain(spec.writable.iter().map(|p| p.as_path()))
            .collect();
        // The directories the view pins between a writable root and a read-only spot inside
        // it (`helper`'s "pin directory"): swapped, they would carry the spot away.
        let between = spec.read_only.iter().flat_map(|p| {
            let root = roots
                .iter()
                .filter(|r| p.starts_with(r) && p != *r)
                .max_by_key(|r| r.as_os_str().len());
            p.ancestors()
                .skip(1)
                .take_while(move |a| root.is_some_and(|r| a != r))
        });
        let paths = roots
            .iter()
            .copied()
            .chain(spec.read_only.iter().map(|p| p.as_path()))
            .chain(between)
            .chain(spec.hidden.iter().map(|p| p.as_path()))
            .chain(spec.reopened.iter().map(|p| p.as_path()));
        // By path, once each: a spec may list a path twice (found protected, and made for
        // the run), and kept sandboxes are told apart by their lists as sets.
        ViewIdentity(
            paths
                .map(|p| {
                    let id = std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
                    (p.to_path_buf(), id)
                })
                .collect(),
        )
    }
}

/// The first byte of a message on the guards' socket (then the guard's number, 8 bytes).
const ARM: u8 = b'a';
const DISARM: u8 = b'd';

impl WarmSandbox {
    /// Builds the sandbox for `spec` (its command, environment and time limit are not used;
    /// each [`WarmCommand`] brings its own) and waits until it is ready. From any thread.
    pub fn start(spec: &SandboxSpec) -> Result<WarmSandbox, RunError> {
        if let Some(why) = unsupported(spec) {
            return Err(RunError::Setup {
                code: exit::SETUP_FAILED,
                step: "warm sandbox".into(),
                detail: format!("this spec cannot be served warm: {why}"),
            });
        }
        let view = ViewIdentity::of(spec);
        let mut spec = spec.clone();
        spec.argv.clear();
        // Each command brings its own environment; only what the loader reads is kept, so
        // that bash started ahead of a command is loaded as one exec'd for it ([`prestart`]).
        spec.env = prestart::loader_env(&spec.env).into_iter().collect();
        // The zygote's PID namespace holds every command's: only each command's own is bounded.
        spec.limits = Limits::default();
        let payload =
            serde_json::to_vec(&spec).map_err(|e| RunError::Spawn(std::io::Error::other(e)))?;
        let pair = || {
            rustix::net::socketpair(
                rustix::net::AddressFamily::UNIX,
                rustix::net::SocketType::SEQPACKET,
                rustix::net::SocketFlags::CLOEXEC,
                None,
            )
            .map_err(|e| RunError::Spawn(e.into()))
        };
        let (ours, theirs) = pair()?;
        let (guards, guards_theirs) = pair()?;
        // A helper that does not read (stopped?) must not stall a command: its guard then
        // cannot be handed over, and the command runs cold.
        rustix::io::ioctl_fionbio(&guards, true).map_err(|e| RunError::Spawn(e.into()))?;
        let (mut error_reader, error_writer) = std::io::pipe().map_err(RunError::Spawn)?;
        let (spec_reader, mut spec_writer) = std::io::pipe().map_err(RunError::Spawn)?;
        let mut cmd = Command::new("/proc/self/exe");
        cmd.arg(HELPER_ARG)
            .arg(std::process::id().to_string())
            .arg(ARG)
            .stdin(std::process::Stdio::null())
            // Where the helper says what it undid, should this process be gone by then.
            .stdout(std::process::Stdio::null());
        sys::install_fds(
            &mut cmd,
            &[
                (spec_reader.as_raw_fd(), SPEC_FD),
                (error_writer.as_raw_fd(), ERROR_FD),
                (theirs.as_raw_fd(), WARM_FD),
                (guards_theirs.as_raw_fd(), GUARD_FD),
            ],
        );
        let mut child = cmd.spawn().map_err(RunError::Spawn)?;
        drop((spec_reader, error_writer, theirs, guards_theirs));
        let _ = spec_writer.write_all(&payload);
        drop(spec_writer);
        let mut ready = [0u8; 1];
        match rustix::net::recv(&ours, &mut ready, rustix::net::RecvFlags::empty()) {
            Ok((1, _)) => Ok(WarmSandbox {
                control: ours,
                guards,
                next_guard: AtomicU64::new(0),
                helper: Some(child),
                // A change while it was built may lie under a mount or over it: taken as
                // stale, so that the next command with this spec builds it again.
                view: (ViewIdentity::of(&spec) == view).then_some(view),
            }),
            // The helper or the sandbox ended before it was ready; the reason is on the
            // error channel, which ends with them.
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                let mut text = String::new();
                let _ = error_reader.read_to_string(&mut text);
                let mut outcome = RunOutcome::default();
                super::fold_messages(&mut outcome, &text)?;
                Err(RunError::Setup {
                    code: exit::SETUP_FAILED,
                    step: "warm sandbox".into(),
                    detail: "the sandbox ended before it was ready".into(),
                })
            }
        }
    }

    /// Whether every path the view was built over is still the file it was (`spec` is one with
    /// the same paths as the sandbox's): if not, the host replaced a protected or hidden file,
    /// which this sandbox's mounts no longer cover, and a new one must be built. A stat a
    /// path, per command.
    pub fn is_current(&self, spec: &SandboxSpec) -> bool {
        self.view.as_ref() == Some(&ViewIdentity::of(spec))
    }

    /// The helper process that keeps the sandbox (outside it, the parent of its first process).
    pub fn helper_pid(&self) -> u32 {
        self.helper.as_ref().map_or(0, std::process::Child::id)
    }

    /// Hands the helper `guard`, what a command about to start must not leave behind, and
    /// the directories it opened: should this process die before it has undone what the
    /// command planted, the helper does, once the sandbox is gone. Returns the number to
    /// [`WarmSandbox::disarm`] it by once this process has undone it itself.
    pub fn arm(&self, guard: &RunGuard) -> std::io::Result<u64> {
        let id = self.next_guard.fetch_add(1, Ordering::Relaxed);
        let (record, roots) = guard.to_record();
        // Sized by the git metadata found, which may exceed what one message can hold.
        let record = serde_json::to_vec(&record).map_err(std::io::Error::other)?;
        let memfd = rustix::fs::memfd_create("cordon-guard", rustix::fs::MemfdFlags::CLOEXEC)?;
        std::fs::File::from(memfd.try_clone()?).write_all(&record)?;
        let fds: Vec<_> = std::iter::once(memfd.as_fd()).chain(roots).collect();
        crate::handoff::send_with(&self.guards, &message(ARM, id), &fds)?;
        Ok(id)
    }

    /// The command guarded by `id` is gone and this process has undone what it planted.
    pub fn disarm(&self, id: u64) {
        let _ = crate::handoff::send_with(&self.guards, &message(DISARM, id), &[]);
    }

    /// Starts `command` in the sandbox with `stdio` (pipes or sockets only) as its standard
    /// input, output and error. From any thread; commands run side by side.
    pub fn run(&self, command: &WarmCommand, stdio: [OwnedFd; 3]) -> Result<WarmRun, RunError> {
        let (ours, theirs) = UnixStream::pair().map_err(RunError::Spawn)?;
        let [i, o, e] = stdio;
        crate::handoff::send(&self.control, &[i, o, e, OwnedFd::from(theirs)]).map_err(|e| {
            RunError::Spawn(std::io::Error::new(
                e.kind(),
                format!("the warm sandbox has ended: {e}"),
            ))
        })?;
        // After the handoff: a request larger than the socket's buffer is read only once the
        // keeper exists.
        let mut line =
            serde_json::to_vec(command).map_err(|e| RunError::Spawn(std::io::Error::other(e)))?;
        line.push(b'\n');
        (&ours).write_all(&line).map_err(RunError::Spawn)?;
        Ok(WarmRun { socket: ours })
    }
}

fn message(kind: u8, id: u64) -> [u8; 9] {
    let mut m = [kind; 9];
    m[1..].copy_from_slice(&id.to_le_bytes());
    m
}

impl Drop for WarmSandbox {
    /// Closing the guards' socket tells the helper to end the sandbox (no command runs in it:
    /// each holds it until it ends); the helper is reaped on a thread of its own, so that
    /// dropping never waits for it.
    fn drop(&mut self) {
        let _ = rustix::net::shutdown(&self.guards, rustix::net::Shutdown::Both);
        let _ = rustix::net::shutdown(&self.control, rustix::net::Shutdown::Both);
        if let Some(mut helper) = self.helper.take() {
            std::thread::spawn(move || helper.wait());
        }
    }
}

/// A command running in a warm sandbox.
#[derive(Debug)]
pub struct WarmRun {
    socket: UnixStream,
}

/// Sends signals to a command running in a warm sandbox, from any thread.
#[derive(Debug)]
pub struct WarmSignals(UnixStream);

impl WarmSignals {
    /// Sends `signal` to the command's process group.
    pub fn signal(&self, signal: i32) {
        let _ = (&self.0).write_all(format!("signal\t{signal}\n").as_bytes());
    }

    /// Ends the command and everything it started, at once.
    pub fn kill(&self) {
        let _ = (&self.0).write_all(b"kill\n");
    }
}

impl WarmRun {
    pub fn signals(&self) -> std::io::Result<WarmSignals> {
        self.socket.try_clone().map(WarmSignals)
    }

    /// Waits until the command and everything it left have ended.
    pub fn wait(self) -> Result<RunOutcome, RunError> {
        // Up to the `exit` line, which the keeper sends last, once all is gone; or the end,
        // if the keeper died without it.
        let mut text = String::new();
        let mut reader = std::io::BufReader::new(&self.socket);
        loop {
            let mut line = String::new();
            match std::io::BufRead::read_line(&mut reader, &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let last = line.starts_with("exit\t");
                    text.push_str(&line);
                    if last {
                        break;
                    }
                }
            }
        }
        let mut outcome = RunOutcome::default();
        match super::fold_messages(&mut outcome, &text)? {
            _ if outcome.timed_out => Ok(outcome),
            Some(code) => {
                outcome.code = code;
                Ok(outcome)
            }
            None => Err(RunError::Setup {
                code: exit::SETUP_FAILED,
                step: "warm sandbox".into(),
                detail: "the command's keeper ended without saying how the command did (the warm sandbox was killed?)".into(),
            }),
        }
    }
}

/// The zygote: tells the starter it is ready, then keeps one keeper ready ahead of the next
/// command (cloned, its per-command mounts made, waiting on the socket), and clones the next
/// as soon as one is taken. Once the socket closes it ends, after the last keeper has.
pub(super) fn serve(spec: &SandboxSpec, control: OwnedFd, errors: &mut Channel) -> ! {
    // Nothing more to say on the setup's channel; keepers have a channel each.
    drop(errors.take());
    sys::reap_children_automatically(true);
    // Every command of the sandbox gets the same filter: built once.
    let filter = super::seccomp::build(!spec.unix_sockets.is_empty(), Default::default());
    let preload = Preload::new(spec);
    if rustix::net::send(&control, b"r", rustix::net::SendFlags::empty()).is_err() {
        sys::exit_now(i32::from(exit::SETUP_FAILED));
    }
    loop {
        let Ok((mut taken, said)) = std::io::pipe() else {
            break;
        };
        let flags = libc::CLONE_NEWPID | libc::CLONE_NEWNS | libc::CLONE_NEWIPC;
        match sys::clone_into_namespaces(flags) {
            Ok(None) => {
                drop(taken);
                ready_keeper(spec, control, said, &filter, preload.as_ref())
            }
            Ok(Some(_)) => {
                drop(said);
                let mut word = [0u8; 1];
                // `t`: taken, make the next; anything else (the socket closed, or the keeper
                // died before it was taken): no more.
                match taken.read(&mut word) {
                    Ok(1) if word[0] == b't' => continue,
                    _ => break,
                }
            }
            Err(err) => {
                // No keeper to be had: the next command is told why, here.
                let Ok(Some(fds)) = receive(&control) else {
                    break;
                };
                if let Ok([_, _, _, socket]) = <[OwnedFd; 4]>::try_from(fds) {
                    let mut channel: Channel = Some(std::fs::File::from(socket));
                    let f = Failure::io("clone", err, "a command's namespaces");
                    tell(&mut channel, "error", &[&f.0.to_string(), f.1, &f.2]);
                }
            }
        }
    }
    drop(control);
    // With SIGCHLD ignored, this returns once every keeper has ended.
    let _ = sys::wait(-1);
    sys::exit_now(0)
}

/// The helper, once the zygote runs: keeps the guards [`WarmSandbox::arm`] sends until they
/// are let go. When cordon's end of `guards` closes (it let go of the sandbox, or died), it
/// kills the zygote and waits for it, which returns only once every process of the sandbox,
/// in every command's PID namespace, is gone (the kernel reaps a PID namespace before its
/// first process); then it undoes what each guard still held covers, as a killed `cordon
/// run`'s watcher does, and says what it removed on its error output (cordon's).
pub(super) fn keep(zygote: libc::pid_t, guards: OwnedFd) -> ! {
    let mut armed: std::collections::HashMap<u64, RunGuard> = Default::default();
    loop {
        let mut head = [0u8; 9];
        let (kind, id, fds) = match crate::handoff::receive_with(&guards, &mut head) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Ok((9, fds)) => (
                head[0],
                u64::from_le_bytes(head[1..].try_into().unwrap_or_default()),
                fds,
            ),
            // Closed, or not cordon's: either way no one is left to let guards go.
            _ => break,
        };
        match kind {
            ARM => match guard_from(fds) {
                Ok(guard) => {
                    armed.insert(id, guard);
                }
                Err(e) => {
                    let _ = writeln!(
                        std::io::stderr(),
                        "cordon: error: a warm sandbox could not keep a command's guard ({e}); should cordon die mid-command, what it plants stays"
                    );
                }
            },
            DISARM => {
                armed.remove(&id);
            }
            _ => break,
        }
    }
    sys::kill(zygote, libc::SIGKILL);
    let _ = sys::wait(zygote);
    for guard in armed.values() {
        guard
            .undo()
            .say_left_after("the `cordon exec` or `cordon mcp` that ran it");
    }
    sys::exit_now(0)
}

/// A guard as [`WarmSandbox::arm`] sent it: its record in the first descriptor, then its
/// directories.
fn guard_from(mut fds: Vec<OwnedFd>) -> std::io::Result<RunGuard> {
    use std::io::Seek;
    if fds.is_empty() {
        return Err(std::io::Error::other("no record came"));
    }
    let mut record = std::fs::File::from(fds.remove(0));
    let mut raw = Vec::new();
    record.seek(std::io::SeekFrom::Start(0))?;
    record.read_to_end(&mut raw)?;
    let record = serde_json::from_slice(&raw).map_err(std::io::Error::other)?;
    RunGuard::from_record(record, fds)
}

/// Receives one command's descriptors; `None` once the socket has closed.
fn receive(control: &OwnedFd) -> std::io::Result<Option<Vec<OwnedFd>>> {
    loop {
        match crate::handoff::receive(control) {
            Ok(fds) => return Ok(Some(fds)),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Other => return Ok(None),
            Err(e) => return Err(e),
        }
    }
}

/// A keeper, PID 1 of the next command's own namespaces, made ahead of it: makes the
/// per-command parts of the view and the command's process, confined and waiting for its
/// request; then waits for a command, tells the zygote (over `said`) that it was taken, and
/// hands the command its descriptors and request.
fn ready_keeper(
    spec: &SandboxSpec,
    control: OwnedFd,
    mut said: std::io::PipeWriter,
    filter: &Result<seccompiler::BpfProgram, String>,
    preload: Option<&Preload>,
) -> ! {
    let _ = sys::die_with_parent(libc::SIGKILL);
    sys::reap_children_automatically(false);
    let filter = || {
        filter
            .as_ref()
            .map_err(|e| Failure(exit::SETUP_FAILED, "seccomp", e.clone()))
    };
    // A failure here is the command's to hear, once it comes.
    let ahead = fresh_view(spec).and_then(|pid_max| {
        // The zygote's socket and word pipe are the keeper's alone, as is `pid_max`.
        let keepers = [control.as_raw_fd(), said.as_raw_fd(), pid_max.as_raw_fd()];
        let process = CommandProcess::make(spec, filter()?, preload, &keepers)?;
        Ok((process, pid_max))
    });
    let fds = match receive(&control) {
        Ok(Some(fds)) => fds,
        _ => {
            let _ = said.write_all(b"e");
            sys::exit_now(0)
        }
    };
    let _ = said.write_all(b"t");
    drop((said, control));
    let Ok([i, o, e, socket]) = <[OwnedFd; 4]>::try_from(fds) else {
        sys::exit_now(i32::from(exit::SETUP_FAILED))
    };
    let socket = UnixStream::from(socket);
    let mut channel: Channel = socket
        .try_clone()
        .ok()
        .map(|s| std::fs::File::from(OwnedFd::from(s)));
    let remake = || CommandProcess::make(spec, filter()?, None, &[]);
    let handed =
        ahead.and_then(|ahead| hand_over(ahead, [i, o, e], &socket, &mut channel, preload, remake));
    match handed {
        Ok((command, request, lines)) => supervise(command, &request, &socket, lines, channel),
        Err(f) => report(&mut channel, &f),
    }
}

/// What each command gets afresh: `/proc` for its PID namespace, `/tmp`, `/dev/shm` and a
/// pseudo-terminal instance. Returns `/proc`'s `pid_max`, still writable.
fn fresh_view(spec: &SandboxSpec) -> Result<std::fs::File, Failure> {
    let pid_max = helper::mount_proc(Path::new("/proc"))?;
    let options = helper::scratch_options(spec).replace("mode=0755", "mode=1777");
    for dir in ["/tmp", "/dev/shm"] {
        sys::mount(
            Some(Path::new("tmpfs")),
            Path::new(dir),
            Some("tmpfs"),
            libc::MS_NOSUID | libc::MS_NODEV,
            Some(&options),
        )
        .map_err(|e| Failure::io("fresh /tmp", e, dir))?;
    }
    // Without it, opening a pseudo-terminal fails, which is weaker only for the command.
    let _ = helper::private_devpts(Path::new("/dev/pts"));
    Ok(pid_max)
}

/// The command's process as its keeper holds it.
struct CommandProcess {
    pid: libc::pid_t,
    to_command: UnixStream,
    /// What confining it said, or why it failed.
    early: std::io::PipeReader,
}

impl CommandProcess {
    /// Forks the command's process ([`await_command`]); `keepers`: descriptors of the keeper's
    /// that the process closes at once (it never returns to where they are owned).
    fn make(
        spec: &SandboxSpec,
        filter: &seccompiler::BpfProgram,
        preload: Option<&Preload>,
        keepers: &[std::os::fd::RawFd],
    ) -> Result<CommandProcess, Failure> {
        let (to_command, theirs) =
            UnixStream::pair().map_err(|e| Failure::io("socketpair", e, "to the command"))?;
        let (early, early_writer) =
            std::io::pipe().map_err(|e| Failure::io("pipe", e, "from the command"))?;
        match sys::fork().map_err(|e| Failure::io("fork", e, ""))? {
            None => {
                for &fd in keepers {
                    sys::close(fd);
                }
                drop((to_command, early));
                await_command(spec, filter, theirs, early_writer, preload)
            }
            Some(pid) => Ok(CommandProcess {
                pid,
                to_command,
                early,
            }),
        }
    }

    /// What confining it said, or why it failed: once it is confined, or has ended.
    fn said(&mut self) -> Vec<u8> {
        let mut said = Vec::new();
        let _ = self.early.read_to_end(&mut said);
        said
    }

    /// How it waits for the command, once it does: as bash started ahead ([`prestart`]), or
    /// as itself. `None`: it ended first (it failed to confine, or bash could not be started
    /// with the library).
    fn waits(&self) -> Option<Waits> {
        let mut word = [0u8; 1];
        match (&self.to_command).read(&mut word) {
            Ok(1) if word[0] == prestart::WAITING => Some(Waits::AsBash),
            Ok(1) if word[0] == WAITING => Some(Waits::AsItself),
            _ => None,
        }
    }
}

/// What the command's process says on the keeper's socket once it waits as itself.
const WAITING: u8 = b'R';

#[derive(PartialEq)]
enum Waits {
    AsBash,
    AsItself,
}

/// The command's process, made ahead: confined as a cold run confines its command (the
/// walls do not depend on the command), then, with `preload`, bash waiting for the command
/// ([`prestart`]); otherwise (or where bash cannot be started so) waiting on `keeper` for its
/// standard input, output and error, the command's socket, and the request, after which it
/// sets the request's limits and becomes the command. Either way it says which on `keeper`
/// once it waits. What confining said (or why it failed) goes to `early`, which it closes
/// before it waits.
fn await_command(
    spec: &SandboxSpec,
    filter: &seccompiler::BpfProgram,
    keeper: UnixStream,
    early: std::io::PipeWriter,
    preload: Option<&Preload>,
) -> ! {
    let mut early: Channel = Some(std::fs::File::from(OwnedFd::from(early)));
    let walls = helper::namespaced_walls(spec);
    if let Err(f) = helper::confine(
        spec,
        &walls,
        Default::default(),
        Some(filter),
        None,
        &mut early,
    ) {
        report(&mut early, &f)
    }
    drop(early);
    if let Some(preload) = preload {
        // Could not: this process takes the command instead, as it would without.
        let _ = preload.exec_ahead(&keeper);
    }
    if (&keeper).write_all(&[WAITING]).is_err() {
        sys::exit_now(i32::from(exit::SETUP_FAILED))
    }
    let Ok(Ok([i, o, e, socket])) = crate::handoff::receive(&keeper).map(<[OwnedFd; 4]>::try_from)
    else {
        sys::exit_now(i32::from(exit::SETUP_FAILED))
    };
    let mut channel: Channel = Some(std::fs::File::from(socket));
    for (n, fd) in [i, o, e].iter().enumerate() {
        if let Err(err) = sys::dup2(fd.as_raw_fd(), n as i32) {
            report(
                &mut channel,
                &Failure::io("standard input and output", err, ""),
            )
        }
    }
    let request = Lines::default()
        .next(&keeper)
        .and_then(|l| serde_json::from_slice::<WarmCommand>(&l).ok());
    let Some(request) = request else {
        report(
            &mut channel,
            &Failure(exit::SETUP_FAILED, "request", "none came".into()),
        )
    };
    let mut own = spec.clone();
    own.argv = request.argv;
    own.env = request.env;
    own.limits = request.limits;
    let f = helper::launch(&own, "/tmp");
    report(&mut channel, &f)
}

/// Once a command came: what its process said while confined goes first on the command's
/// socket; the request is read and its process limit set. A bash waiting ahead that cannot
/// run the command as an exec would ([`Preload::fits`]), or a process started with the library
/// that ended before it waited, is let go, and a process made by `remake` (one that execs the
/// command) takes its place. The process is given its descriptors and request. Returns that
/// process, the request, and the socket's reader.
fn hand_over(
    (mut process, pid_max): (CommandProcess, std::fs::File),
    stdio: [OwnedFd; 3],
    socket: &UnixStream,
    channel: &mut Channel,
    preload: Option<&Preload>,
    remake: impl FnOnce() -> Result<CommandProcess, Failure>,
) -> Result<(libc::pid_t, WarmCommand, Lines), Failure> {
    for (n, fd) in stdio.iter().enumerate() {
        if !sys::is_pipe_or_socket(fd.as_raw_fd()) {
            return Err(Failure(
                exit::SETUP_FAILED,
                "standard input and output",
                format!("descriptor {n} is not a pipe or socket; a warm sandbox takes only those"),
            ));
        }
    }
    let mut said = process.said();
    let mut lines = Lines::default();
    let line = lines
        .next(socket)
        .ok_or_else(|| Failure(exit::SETUP_FAILED, "request", "no request".into()))?;
    let request = serde_json::from_slice::<WarmCommand>(&line)
        .map_err(|e| Failure(exit::SETUP_FAILED, "request", e.to_string()))?;
    // Set before anything more is forked, which then does not hold it.
    match request.limits.pid_max {
        Some(n) => helper::set_pid_max(pid_max, n)?,
        None => drop(pid_max),
    }
    let mut waits = process.waits();
    let takes_it = match waits {
        Some(Waits::AsItself) => true,
        Some(Waits::AsBash) => preload.is_some_and(|p| p.fits(&request)),
        // Without the library, it failed to confine: what it said tells why.
        None => preload.is_none(),
    };
    if !takes_it {
        // A bash waiting ends, having said nothing, at the end of its socket.
        let pid = process.pid;
        drop(process);
        let _ = sys::wait(pid);
        process = remake()?;
        said = process.said();
        waits = process.waits();
    }
    if let Some(c) = channel.as_mut() {
        let _ = c.write_all(&said);
    }
    let theirs = socket
        .try_clone()
        .map_err(|e| Failure::io("socket", e, "for the command"))?;
    let [i, o, e] = stdio;
    let fds = [i, o, e, OwnedFd::from(theirs)];
    // A command process that died confining cannot take them; how it ended is told below.
    if waits == Some(Waits::AsBash) {
        let _ = prestart::hand(&process.to_command, fds, &request);
    } else if crate::handoff::send(&process.to_command, &fds).is_ok() {
        let mut request_line = line;
        request_line.push(b'\n');
        let _ = (&process.to_command).write_all(&request_line);
    }
    Ok((process.pid, request, lines))
}

/// Until the command ends: signals from the starter go to its process group; the time limit,
/// a `kill` or the starter's going away end it and everything it started.
fn supervise(
    command: libc::pid_t,
    request: &WarmCommand,
    socket: &UnixStream,
    mut lines: Lines,
    mut channel: Channel,
) -> ! {
    use rustix::event::{PollFd, PollFlags, Timespec};
    let Some(pid) = rustix::process::Pid::from_raw(command) else {
        end(&mut channel, i32::from(exit::SETUP_FAILED))
    };
    let Ok(ended) = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) else {
        end(&mut channel, i32::from(exit::SETUP_FAILED))
    };
    let deadline = request.limits.timeout.map(|t| Instant::now() + t);
    loop {
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if left == Some(Duration::ZERO) {
            tell(&mut channel, "timed-out", &[]);
            end(&mut channel, i32::from(exit::TIMEOUT));
        }
        let timeout = left.map(|d| Timespec {
            tv_sec: d.as_secs() as i64,
            tv_nsec: i64::from(d.subsec_nanos()),
        });
        let mut fds = [
            PollFd::new(socket, PollFlags::IN),
            PollFd::new(&ended, PollFlags::IN),
        ];
        if rustix::event::poll(&mut fds, timeout.as_ref()).is_err() {
            continue;
        }
        if !fds[1].revents().is_empty() {
            let code = match sys::wait(command) {
                Ok(Some((_, how))) => code_of(&mut channel, how),
                _ => i32::from(exit::SETUP_FAILED),
            };
            end(&mut channel, code);
        }
        if !fds[0].revents().is_empty() {
            while let Some(line) = lines.next(socket) {
                match std::str::from_utf8(&line).unwrap_or("").split_once('\t') {
                    Some(("signal", n)) => {
                        if let Ok(n) = n.parse() {
                            sys::kill(-command, n);
                        }
                    }
                    _ if line == b"kill" => killed(&mut channel),
                    _ => {}
                }
                if lines.buffered_line().is_none() {
                    break;
                }
            }
            // The starter has gone (or closed its end): no one is left to run this for.
            if lines.ended {
                killed(&mut channel);
            }
        }
    }
}

/// Ends the keeper, and with it the command and all it started, as killed by SIGKILL.
fn killed(channel: &mut Channel) -> ! {
    let code = code_of(channel, sys::Ended::Signaled(libc::SIGKILL));
    end(channel, code)
}

/// Ends the keeper with `code`, once everything left in its PID namespace is killed and
/// reaped: when the starter hears how the command ended, nothing of it is left to change a
/// file (the kernel's own clean-up of a PID namespace comes only after the keeper's
/// descriptors have closed), and the command's output has reached its end.
fn end(channel: &mut Channel, code: i32) -> ! {
    sys::kill(-1, libc::SIGKILL);
    while let Ok(Some(_)) = sys::wait(-1) {}
    sys::close_stdio();
    tell(channel, "exit", &[&code.to_string()]);
    sys::exit_now(code)
}

/// Lines read from the command's socket, a read at a time.
#[derive(Default)]
struct Lines {
    buffer: Vec<u8>,
    ended: bool,
}

impl Lines {
    /// A whole line already read, if there is one.
    fn buffered_line(&self) -> Option<usize> {
        self.buffer.iter().position(|&b| b == b'\n')
    }

    /// The next line: from the buffer, else after one read (so a caller that polled is never
    /// blocked for more than that read), else `None`.
    fn next(&mut self, mut from: &UnixStream) -> Option<Vec<u8>> {
        loop {
            if let Some(end) = self.buffered_line() {
                let mut line: Vec<u8> = self.buffer.drain(..=end).collect();
                line.pop();
                return Some(line);
            }
            if self.ended || self.buffer.len() > MAX_REQUEST {
                self.ended = true;
                return None;
            }
            // One page: a keeper and a command's process are fresh forks, where every page
            // of stack first written is a fault (a copy, or a new zero page) costing
            // microseconds; a larger buffer would be one per 4 KiB on every command. A request
            // longer than this takes more reads.
            let mut chunk = [0u8; 4096];
            match from.read(&mut chunk) {
                Ok(0) | Err(_) => {
                    self.ended = true;
                    return None;
                }
                Ok(n) => self.buffer.extend_from_slice(&chunk[..n]),
            }
        }
    }
}
