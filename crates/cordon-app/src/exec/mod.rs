//! The executor: runs one command in the sandbox, streams its output as it comes, cancels it,
//! and says what happened. `cordon exec --jsonl`, `cordon shell` and `cordon mcp` are built on
//! it.
//!
//! Each run is a child cordon (this same binary, through `/proc/self/exe`) sent a
//! [`crate::child::Request::Run`] of the command line with a report file, in a process
//! group of its own. The calling process may have many
//! threads, and forking one to set up a sandbox is unsafe; a fresh `cordon run` is
//! single-threaded and builds the sandbox itself. Cancelling signals that process group:
//! SIGTERM, which `cordon run` passes down to the command, then SIGKILL to `cordon run` after a
//! grace period, whose sandbox dies with it (a PID namespace ends with its first process;
//! without namespaces the supervisor kills what the command started when cordon goes).
//!
//! Every command line runs with bash, as the policy read it ([`cordon_sandbox::shell`]). A run
//! the settings place outside the sandbox ([`Placement::Outside`]) is `bash -c COMMAND` itself
//! in that process group; the run then keeps the time limit, and when the
//! command ends it kills what the command left in its group, as a sandbox's end would.
//!
//! Threads, not async: each run has a reader thread per output stream, and the caller blocks
//! in [`Run::wait`] (an async caller wraps it in `spawn_blocking`). A slow consumer of
//! [`Event::Output`] slows the reader, which fills the pipe, which stops the command: output
//! is never queued without bound.

pub mod output;
mod sys;

use crate::threads;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::config::{SessionLimits, Sources};
use crate::run::backend::BackendChoice;
use crate::run::{Launch, Program};

use output::BoundedOutput;
pub use output::{KeptOutput, OutputLimit, Utf8Chunks};

/// Which of the command's outputs a chunk came from. On a terminal both arrive as `Stdout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    Stdout,
    Stderr,
}

/// What a run tells its caller while it goes on.
#[derive(Debug)]
pub enum Event<'a> {
    /// The child `cordon run` started (before any output); `control` is the run's, for
    /// whoever must cancel or feed it before [`Runner::start`] has returned.
    Started { pid: u32, control: &'a Control },
    /// Bytes the command wrote, as they came.
    Output { stream: Stream, data: &'a [u8] },
}

/// Receives a run's events, from the run's own threads.
pub type Sink = Arc<dyn Fn(Event<'_>) + Send + Sync>;

/// Where the command's standard input comes from on pipes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// `/dev/null`: a command that reads gets end of file at once.
    Null,
    /// These bytes, then end of file.
    Bytes(Vec<u8>),
    /// A pipe kept open for [`Control::send_input`] until [`Control::close_input`].
    Open,
}

/// How the command is connected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Io {
    /// Standard output and error on pipes of their own.
    Pipes(Input),
    /// A pseudo-terminal of this many rows and columns: the command sees a terminal, and its
    /// output arrives as one stream.
    Terminal { rows: u16, cols: u16 },
    /// This process's own standard input, output and error (for `cordon shell`); no output
    /// events and nothing kept.
    Inherit,
}

/// One run, as asked.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// A shell command line, run with bash (`bash --noprofile --norc -c`).
    pub command: String,
    /// Its working directory (the sandbox's writable one); this process's by default.
    pub cwd: Option<WorkDir>,
    pub io: Io,
    pub timeout: Option<Duration>,
    /// How much output the result keeps.
    pub keep: OutputLimit,
    /// Whether `cordon run` also prints what the sandbox blocked on the command's standard
    /// error (a person reading a terminal wants that; a program gets [`RunResult::violations`]).
    pub blocked_on_stderr: bool,
    /// In cordon's sandbox, or outside it because the settings say so.
    pub placement: Placement,
}

/// A run's working directory, checked by a front end and held open: the run starts in this
/// very directory, not in whatever its name leads to by then.
#[derive(Debug, Clone)]
pub struct WorkDir {
    dir: Arc<std::os::fd::OwnedFd>,
    /// Its path as it was checked, for messages.
    pub shown: PathBuf,
}

impl WorkDir {
    /// This process's working directory, opened now.
    pub fn current() -> std::io::Result<WorkDir> {
        Self::open(&std::env::current_dir()?)
    }

    /// The directory `path`, opened now.
    pub fn open(path: &std::path::Path) -> std::io::Result<WorkDir> {
        Ok(WorkDir {
            dir: Arc::new(std::fs::File::open(path)?.into()),
            shown: path.to_path_buf(),
        })
    }

    /// Whether it is this process's own working directory (the same directory, not just the
    /// same name).
    pub fn is_current(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        let open = rustix::fs::fstat(&*self.dir);
        let here = std::fs::metadata(".");
        matches!((open, here), (Ok(a), Ok(b)) if (a.st_dev, a.st_ino) == (b.dev(), b.ino()))
    }

    /// Where the open directory is now, links resolved.
    pub fn real_path(&self) -> std::io::Result<PathBuf> {
        use std::os::fd::AsRawFd;
        std::fs::read_link(format!("/proc/self/fd/{}", self.dir.as_raw_fd()))
    }

    /// The directory `rel` (relative, or absolute inside this one), opened without leaving this
    /// one: links that stay inside are followed, `..`, absolute links and links out refused.
    pub fn beneath(&self, rel: &std::path::Path) -> Result<WorkDir, String> {
        let inner = if rel.is_absolute() {
            rel.strip_prefix(&self.shown).map_err(|_| {
                format!(
                    "{} is outside the workspace {}; give a directory inside it (or a path relative to it)",
                    rel.display(),
                    self.shown.display()
                )
            })?
        } else {
            rel
        };
        use std::os::fd::AsFd;
        let fd =
            cordon_sandbox::beneath::open_dir_beneath(self.dir.as_fd(), inner).map_err(|e| {
                if e.kind() == std::io::ErrorKind::PermissionDenied {
                    format!(
                        "{} leads outside the workspace {}; give a directory inside it",
                        rel.display(),
                        self.shown.display()
                    )
                } else {
                    format!("cannot open the directory {}: {e}", rel.display())
                }
            })?;
        Ok(WorkDir {
            dir: Arc::new(fd),
            shown: self.shown.join(inner),
        })
    }
}

/// Where a command runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Placement {
    /// In cordon's sandbox, through a child `cordon run`.
    #[default]
    Sandbox,
    /// Straight on the host (`bash -c`), still decided by the policy: the settings exclude
    /// it from the sandbox, and `why` says which setting (from which file).
    Outside { why: String },
}

impl Placement {
    /// As the protocols tell it: `"sandboxed": true`, or `false` with `"outside_because"`.
    pub fn fields(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("sandboxed".into(), (*self == Placement::Sandbox).into());
        if let Placement::Outside { why } = self {
            m.insert("outside_because".into(), why.clone().into());
        }
        m
    }
}

impl RunOptions {
    pub fn new(command: impl Into<String>) -> Self {
        RunOptions {
            command: command.into(),
            cwd: None,
            io: Io::Pipes(Input::Null),
            timeout: None,
            keep: OutputLimit::default(),
            blocked_on_stderr: false,
            placement: Placement::Sandbox,
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    /// `cordon run`'s exit status: the command's exit code, 128+N when signal N ended it,
    /// or cordon's own (124 timeout, 125 sandbox set-up failed, 126 cannot execute, 127 not
    /// found).
    pub exit_code: i32,
    /// The signal that ended the command (or `cordon run` itself, when a cancel had to kill
    /// it), where the sandbox can tell (a container engine reports 128 + N either way).
    pub signal: Option<i32>,
    pub cancelled: bool,
    pub timed_out: bool,
    pub output: KeptOutput,
    #[serde(serialize_with = "as_seconds")]
    #[serde(rename = "duration_secs")]
    pub duration: Duration,
    /// What the sandbox blocked, as `cordon run --report` gives it.
    pub violations: Vec<serde_json::Value>,
    /// Where the sandbox is weaker than asked on this machine.
    pub weaker: Vec<String>,
    /// The variables of `cordon exec`'s environment the command did not get, by name (the
    /// allowlist of docs/ARCHITECTURE.md, "Secrets in the environment").
    pub env_withheld: Vec<String>,
    /// Why the sandbox could not be set up, if it could not.
    pub setup_error: Option<String>,
    /// Whether the command ran in cordon's sandbox ([`Placement::Sandbox`]).
    pub sandboxed: bool,
    /// Whether that sandbox was a warm one, kept for runs with the same spec
    /// ([`crate::run::warm`]), rather than a `cordon run` of its own.
    pub warm: bool,
}

fn as_seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((d.as_secs_f64() * 1000.0).round() / 1000.0)
}

/// How long a cancelled command has to end after SIGTERM before `cordon run` is killed.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(2);

/// How long a run outside the sandbox waits, once its command has ended, for the last of its
/// output from processes that left its process group.
const OUTSIDE_OUTPUT_WAIT: Duration = Duration::from_secs(1);

/// Starts runs with one set of sandbox settings.
#[derive(Debug)]
pub struct Runner {
    sources: Sources,
    backend: BackendChoice,
    reports: tempfile::TempDir,
    next: AtomicU64,
    grace: Duration,
    /// How many runs may be in flight at once, and the processes they may have together.
    limits: SessionLimits,
    /// Runs started and not yet waited for.
    in_flight: Arc<AtomicUsize>,
    /// Sandboxes kept for runs with the same spec; `None` when `CORDON_NO_WARM` is set.
    #[cfg(target_os = "linux")]
    warm: Option<crate::run::warm::WarmPool>,
}

/// Set (to anything), every run in the sandbox is a `cordon run` of its own, as before warm
/// sandboxes: for comparing the two, and as a way out should a warm sandbox misbehave.
pub const NO_WARM_VAR: &str = "CORDON_NO_WARM";

/// A run refused because the session already runs as many commands as it may.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "this session is running as many commands as it may at once ({limit}: `limits.max_commands` in cordon.toml, or --max-commands); this one did not start: send it again once one has ended"
)]
pub struct TooManyCommands {
    pub limit: u64,
}

impl TooManyCommands {
    /// The refusal inside an error from [`Runner::start`], if that is what it is.
    pub fn within(e: &std::io::Error) -> Option<&TooManyCommands> {
        e.get_ref().and_then(|inner| inner.downcast_ref())
    }
}

/// One run counted as in flight until dropped.
#[derive(Debug)]
struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Runner {
    /// Every run reads its settings from `sources` as it starts, so that edited settings
    /// apply to the next run, and is enforced by `backend`; at most `limits.max_commands` run
    /// at once, each with its share of the session's processes.
    pub fn new(
        sources: Sources,
        backend: BackendChoice,
        limits: SessionLimits,
    ) -> std::io::Result<Runner> {
        // What runs killed with their cordon left (a session killed whole), undone before
        // this session runs anything.
        crate::run::journal::sweep();
        Ok(Runner {
            sources,
            backend,
            reports: tempfile::Builder::new().prefix("cordon-exec-").tempdir()?,
            next: AtomicU64::new(0),
            grace: DEFAULT_GRACE,
            limits,
            in_flight: Arc::default(),
            #[cfg(target_os = "linux")]
            warm: std::env::var_os(NO_WARM_VAR)
                .is_none()
                .then(crate::run::warm::WarmPool::default),
        })
    }

    /// The session's limits the runner holds to.
    pub fn limits(&self) -> SessionLimits {
        self.limits
    }

    /// Holds the session to one command at a time (`cordon shell`), which gives that one the
    /// whole of the session's processes.
    pub fn one_at_a_time(&mut self) {
        self.limits.max_commands = 1;
    }

    /// Counts a run as in flight, unless as many as the session allows already are.
    fn admit(&self) -> std::io::Result<InFlight> {
        let limit = self.limits.max_commands;
        self.in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                ((n as u64) < limit).then_some(n + 1)
            })
            .map_err(|_| std::io::Error::other(TooManyCommands { limit }))?;
        Ok(InFlight(Arc::clone(&self.in_flight)))
    }

    /// Starts `opts`; events go to `sink` from the run's threads until [`Run::wait`] returns.
    /// Refused with [`TooManyCommands`] while the session runs as many as it may.
    pub fn start(&self, opts: &RunOptions, sink: Sink) -> std::io::Result<Run> {
        let in_flight = self.admit()?;
        let mut run = self.start_admitted(opts, sink)?;
        run.in_flight = Some(in_flight);
        Ok(run)
    }

    fn start_admitted(&self, opts: &RunOptions, sink: Sink) -> std::io::Result<Run> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let report = self.reports.path().join(format!("run-{n}.json"));
        let outside = matches!(opts.placement, Placement::Outside { .. });
        let launch = Launch {
            program: Program::Script(opts.command.clone()),
            backend: self.backend.clone(),
            report: Some(report.clone()),
            report_only: !opts.blocked_on_stderr,
            own_terminal: matches!(opts.io, Io::Terminal { .. }),
            timeout: opts.timeout.map(|t| t.as_secs_f64()),
            session: Some(self.limits),
            ..Launch::default()
        };
        #[cfg(target_os = "linux")]
        // A warm run is planned in this process, for its own working directory.
        let here = opts.cwd.as_ref().is_none_or(WorkDir::is_current);
        if let (false, true, false, Io::Pipes(input), Some(pool)) =
            (outside, here, opts.blocked_on_stderr, &opts.io, &self.warm)
            && let Some(run) = self.start_warm(pool, &launch, input, &opts.keep, &sink, &report)
        {
            return Ok(run);
        }
        let (mut cmd, request) = if outside {
            let argv =
                cordon_sandbox::shell::host_argv(&opts.command).map_err(std::io::Error::other)?;
            let mut cmd = Command::new(&argv[0]);
            cmd.args(&argv[1..]);
            for (name, _) in std::env::vars_os() {
                if name
                    .to_str()
                    .is_some_and(cordon_sandbox::shell::changes_the_shell)
                {
                    cmd.env_remove(name);
                }
            }
            (cmd, None)
        } else {
            let mut child = crate::child::Child::new(&crate::child::Request::Run {
                sources: self.sources.clone(),
                launch: Box::new(launch.clone()),
            })?;
            child.install_request();
            let (cmd, sender) = child.into_parts();
            (cmd, Some(sender))
        };
        if let Some(cwd) = &opts.cwd {
            sys::working_dir(&mut cmd, cwd.dir.clone());
        }
        sys::die_with_parent(&mut cmd);
        let mut master = None;
        match &opts.io {
            Io::Pipes(input) => {
                cmd.process_group(0)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .stdin(match input {
                        Input::Null => Stdio::null(),
                        _ => Stdio::piped(),
                    });
            }
            Io::Terminal { rows, cols } => {
                let (m, slave) = sys::open_pty(*rows, *cols)?;
                cmd.stdin(slave.try_clone()?)
                    .stdout(slave.try_clone()?)
                    .stderr(slave);
                // The terminal is the command's: in the sandbox `cordon run` leaves it free
                // for the command to take (`--own-terminal`); outside, the shell takes it.
                if outside {
                    sys::controlling_terminal(&mut cmd);
                } else {
                    sys::new_session(&mut cmd);
                }
                master = Some(m);
            }
            Io::Inherit => {
                cmd.process_group(0);
            }
        }
        let started = Instant::now();
        let mut child = cmd.spawn()?;
        // On the person's terminal the run is the foreground job until it ends. Its group
        // exists by now: spawn returns once the child has set it and started its program.
        let foreground = matches!(opts.io, Io::Inherit)
            .then(|| sys::Foreground::lend(child.id()))
            .flatten();
        // Our copies of the terminal's slave side close here, so that reading the master
        // ends when the sandbox's last process has gone.
        drop(cmd);
        if let Some(request) = request
            && let Err(e) = request.send()
        {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        let pid = child.id();
        let terminal_ends = master.as_ref().map(|m| (m.try_clone(), m.try_clone()));
        let mut input_to: Option<Box<dyn Write + Send>> = None;
        let mut terminal_out = None;
        if let Some(stdin) = child.stdin.take() {
            input_to = Some(Box::new(stdin));
        }
        if let Some((reader, writer)) = terminal_ends {
            match (reader, writer) {
                (Ok(r), Ok(w)) => {
                    terminal_out = Some(r);
                    input_to = Some(Box::new(w));
                }
                (Err(e), _) | (_, Err(e)) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(e);
                }
            }
        }
        let input = start_input(
            input_to,
            master.is_some(),
            match &opts.io {
                Io::Pipes(Input::Bytes(bytes)) => Some(bytes),
                _ => None,
            },
            matches!(opts.io, Io::Pipes(Input::Open) | Io::Terminal { .. }),
        );
        let shared = Arc::new(Shared {
            pid,
            state: Mutex::new(State::default()),
            ended: Condvar::new(),
            input: Mutex::new(input),
            master,
            grace: self.grace,
            outside,
            #[cfg(target_os = "linux")]
            warm: None,
        });
        // Outside the sandbox no `cordon run` keeps the time limit: the run keeps it itself.
        if let (true, Some(limit)) = (outside, opts.timeout) {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                let st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
                let (mut st, _) = shared
                    .ended
                    .wait_timeout_while(st, limit, |s| !s.exited && !s.cancelled)
                    .unwrap_or_else(|e| e.into_inner());
                if !st.exited && !st.cancelled {
                    st.timed_out = true;
                    sys::signal_group(shared.pid, libc::SIGTERM);
                    drop(st);
                    kill_after_grace(shared);
                }
            });
        }
        // Before any output, and with the control, so the caller can take requests for this
        // run as soon as it says it started.
        sink(Event::Started {
            pid,
            control: &Control(Arc::clone(&shared)),
        });
        let output = Arc::new(Mutex::new(BoundedOutput::new(opts.keep)));
        let mut readers = Vec::new();
        if let Some(stdout) = child.stdout.take() {
            readers.push(read_into(stdout, Stream::Stdout, &output, &sink));
        }
        if let Some(stderr) = child.stderr.take() {
            readers.push(read_into(stderr, Stream::Stderr, &output, &sink));
        }
        if let Some(t) = terminal_out {
            readers.push(read_into(t, Stream::Stdout, &output, &sink));
        }
        Ok(Run {
            process: Process::Cold(child),
            shared,
            readers,
            output,
            report,
            started,
            in_flight: None,
            foreground,
        })
    }

    /// Lets go of the warm sandboxes (each ends once its running commands have) and removes
    /// what was made for them and the runs' report directory. For the end of a session, once
    /// no run is left: a process that exits without it leaves cordon's empty state directories
    /// and its report directory behind, though no sandbox (they die with it). The runner is
    /// usually shared with threads that outlive `main`, so dropping it is not enough.
    pub fn end(&self) {
        #[cfg(target_os = "linux")]
        if let Some(pool) = &self.warm {
            pool.clear();
        }
        let _ = std::fs::remove_dir_all(self.reports.path());
    }

    /// Starts a run in a warm sandbox ([`crate::run::warm`]), if it can run in one; `None`
    /// to run it cold. Only with pipes: the warm sandbox takes no host file as input or output.
    #[cfg(target_os = "linux")]
    fn start_warm(
        &self,
        pool: &crate::run::warm::WarmPool,
        launch: &Launch,
        input: &Input,
        keep: &OutputLimit,
        sink: &Sink,
        report: &std::path::Path,
    ) -> Option<Run> {
        use std::os::fd::OwnedFd;
        let pipe = || std::io::pipe().ok();
        let ((stdout, stdout_w), (stderr, stderr_w), (stdin_r, stdin_w)) =
            (pipe()?, pipe()?, pipe()?);
        let begun = Instant::now();
        // Its report is handed back in memory.
        let launch = Launch {
            report: None,
            ..launch.clone()
        };
        let warm = pool.start(&self.sources, &launch, move || {
            Ok([
                OwnedFd::from(stdin_r),
                OwnedFd::from(stdout_w),
                OwnedFd::from(stderr_w),
            ])
        })?;
        let signals = warm.signals().ok()?;
        let input_to: Option<Box<dyn Write + Send>> = match input {
            // The command reads the end of an empty pipe, not a host file.
            Input::Null => None,
            _ => Some(Box::new(stdin_w)),
        };
        let to_command = start_input(
            input_to,
            false,
            match input {
                Input::Bytes(bytes) => Some(bytes),
                _ => None,
            },
            matches!(input, Input::Open),
        );
        let shared = Arc::new(Shared {
            pid: warm.pid(),
            state: Mutex::new(State::default()),
            ended: Condvar::new(),
            input: Mutex::new(to_command),
            master: None,
            grace: self.grace,
            outside: false,
            warm: Some(signals),
        });
        sink(Event::Started {
            pid: shared.pid,
            control: &Control(Arc::clone(&shared)),
        });
        let output = Arc::new(Mutex::new(BoundedOutput::new(*keep)));
        let errors = Arc::new(crate::run::warm::ErrorsKept::default());
        let errors_sink: Sink = {
            let sink = Arc::clone(sink);
            let errors = Arc::clone(&errors);
            Arc::new(move |event: Event<'_>| {
                if let Event::Output {
                    stream: Stream::Stderr,
                    data,
                } = &event
                {
                    errors.push(data);
                }
                sink(event)
            })
        };
        let readers = vec![
            read_into(stdout, Stream::Stdout, &output, sink),
            read_into(stderr, Stream::Stderr, &output, &errors_sink),
        ];
        Some(Run {
            process: Process::Warm(Box::new(warm), errors),
            shared,
            readers,
            output,
            report: report.to_path_buf(),
            started: begun,
            in_flight: None,
            foreground: None,
        })
    }
}

/// What a run waits for.
#[derive(Debug)]
enum Process {
    /// Its own `cordon run` (or, outside the sandbox, its shell).
    Cold(Child),
    /// A command in a warm sandbox, and its error output as far as it is scanned.
    #[cfg(target_os = "linux")]
    Warm(
        Box<crate::run::warm::Started>,
        Arc<crate::run::warm::ErrorsKept>,
    ),
    /// Waited for.
    Ended,
}

/// A run in progress.
#[derive(Debug)]
pub struct Run {
    process: Process,
    shared: Arc<Shared>,
    readers: Vec<threads::Handle>,
    output: Arc<Mutex<BoundedOutput>>,
    report: PathBuf,
    started: Instant,
    /// Counts it against the session's commands at once until it has been waited for.
    in_flight: Option<InFlight>,
    /// The person's terminal, lent to the run ([`Io::Inherit`]) until it has ended.
    foreground: Option<sys::Foreground>,
}

/// Cancels, resizes and feeds a run from any thread, while someone else waits for it.
#[derive(Debug, Clone)]
pub struct Control(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    pid: u32,
    state: Mutex<State>,
    ended: Condvar,
    input: Mutex<Option<Sender<InputMessage>>>,
    master: Option<File>,
    grace: Duration,
    /// Run outside the sandbox: the child is the command's shell, not `cordon run`.
    outside: bool,
    /// Run in a warm sandbox: signals go through its keeper.
    #[cfg(target_os = "linux")]
    warm: Option<cordon_sandbox::linux::WarmSignals>,
}

impl Shared {
    /// Asks the run's command to stop (SIGTERM to its process group).
    fn terminate(&self) {
        #[cfg(target_os = "linux")]
        if let Some(w) = &self.warm {
            return w.signal(libc::SIGTERM);
        }
        sys::signal_group(self.pid, libc::SIGTERM);
    }

    /// Ends the run with all it started, past its grace period.
    fn kill(&self) {
        #[cfg(target_os = "linux")]
        if let Some(w) = &self.warm {
            return w.kill();
        }
        if self.outside {
            sys::signal_group(self.pid, libc::SIGKILL);
        } else {
            sys::signal_process(self.pid, libc::SIGKILL);
        }
    }
}

#[derive(Debug, Default)]
struct State {
    /// The child has ended (not yet reaped while `wait` holds it, so its pid stays ours).
    exited: bool,
    cancelled: bool,
    /// Stopped for running past its time limit (outside the sandbox; inside, `cordon run`
    /// says so in its report).
    timed_out: bool,
}

/// After the SIGTERM (sent with the state locked, so that the pid cannot have been reaped and
/// reused): SIGKILL once the grace period is over if the run has not ended, to `cordon run`,
/// whose sandbox dies with it, or outside the sandbox to the whole group.
fn kill_after_grace(shared: Arc<Shared>) {
    std::thread::spawn(move || {
        let st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
        let (st, _) = shared
            .ended
            .wait_timeout_while(st, shared.grace, |s| !s.exited)
            .unwrap_or_else(|e| e.into_inner());
        if !st.exited {
            shared.kill();
        }
    });
}

#[derive(Debug)]
enum InputMessage {
    Data(Vec<u8>),
    Close,
}

/// Why input could not be given.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("this run's standard input is not open for input (ask for it when starting the run)")]
    NotOpen,
    #[error("this run's standard input was closed")]
    Closed,
}

impl Control {
    /// Ends the run: SIGTERM to its process group now, SIGKILL to `cordon run` if it has not
    /// ended after the grace period. The result says `cancelled`. A second call does nothing.
    pub fn cancel(&self) {
        let shared = &self.0;
        {
            let mut st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            if st.exited || st.cancelled || st.timed_out {
                return;
            }
            st.cancelled = true;
            shared.terminate();
            // The time limit's watcher need wait no longer.
            shared.ended.notify_all();
        }
        kill_after_grace(Arc::clone(&self.0));
    }

    /// Blocks until the run's `cordon run` has ended (whoever waits for the run).
    pub fn wait_until_ended(&self) {
        let st = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
        drop(
            self.0
                .ended
                .wait_while(st, |s| !s.exited)
                .unwrap_or_else(|e| e.into_inner()),
        );
    }

    /// Tells a run on a terminal its new window size (the command gets SIGWINCH).
    pub fn resize(&self, rows: u16, cols: u16) -> std::io::Result<()> {
        match &self.0.master {
            Some(m) => sys::set_window_size(m, rows, cols),
            None => Err(std::io::Error::other(
                "this run is not on a terminal; ask for one with `pty` when starting it",
            )),
        }
    }

    /// Queues bytes for the command's standard input (a terminal's input: `\u{3}` is Ctrl-C).
    pub fn send_input(&self, data: Vec<u8>) -> Result<(), InputError> {
        let input = self.0.input.lock().unwrap_or_else(|e| e.into_inner());
        let tx = input.as_ref().ok_or(InputError::NotOpen)?;
        tx.send(InputMessage::Data(data))
            .map_err(|_| InputError::Closed)
    }

    /// Ends the command's input: end of file on a pipe, Ctrl-D on a terminal.
    pub fn close_input(&self) -> Result<(), InputError> {
        let mut input = self.0.input.lock().unwrap_or_else(|e| e.into_inner());
        let tx = input.as_ref().ok_or(InputError::NotOpen)?;
        let sent = tx.send(InputMessage::Close);
        if self.0.master.is_none() {
            *input = None;
        }
        sent.map_err(|_| InputError::Closed)
    }
}

impl Run {
    pub fn control(&self) -> Control {
        Control(Arc::clone(&self.shared))
    }

    /// Waits for the run to end and its output to be read.
    pub fn wait(mut self) -> RunResult {
        let outside = self.shared.outside;
        let process = std::mem::replace(&mut self.process, Process::Ended);
        let mut warm_report = None;
        #[cfg(target_os = "linux")]
        let warm = matches!(process, Process::Warm(..));
        #[cfg(not(target_os = "linux"))]
        let warm = false;
        let (ended, cancelled, timed_out_here) = match process {
            Process::Cold(child) => self.wait_cold(child),
            #[cfg(target_os = "linux")]
            Process::Warm(started, errors) => {
                let readers: Vec<threads::Handle> = self.readers.drain(..).collect();
                // The keeper's end is the command's: every output reaches its end with it.
                let (code, report) = started.finish(|| {
                    for r in readers {
                        r.join();
                    }
                    errors.take()
                });
                warm_report = Some(report);
                let (cancelled, timed_out) = self.mark_exited();
                (Some((i32::from(code), None)), cancelled, timed_out)
            }
            Process::Ended => (None, false, false),
        };
        let duration = self.started.elapsed();
        // Dropping the sender ends the input thread.
        self.shared
            .input
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let (mut exit_code, mut signal) =
            ended.unwrap_or((i32::from(cordon_sandbox::exit::SETUP_FAILED), None));
        let report: serde_json::Value = warm_report.unwrap_or_else(|| {
            std::fs::read(&self.report)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or_default()
        });
        let _ = std::fs::remove_file(&self.report);
        let timed_out = report["timed_out"].as_bool().unwrap_or(false) || timed_out_here;
        if timed_out_here {
            // As `cordon run` reports its own time limit.
            exit_code = i32::from(cordon_sandbox::exit::TIMEOUT);
            signal = None;
        }
        if let Some(c) = report["exit_code"].as_i64()
            && signal.is_none()
        {
            exit_code = c as i32;
            // Only the sandbox knows whether 128 + N was signal N or the command's own exit.
            signal = report["signal"].as_i64().map(|s| s as i32);
        }
        if ended.is_none() {
            signal = None;
        }
        let output = self
            .output
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .finish();
        RunResult {
            exit_code,
            signal,
            cancelled,
            timed_out,
            output,
            duration,
            violations: report["blocked"].as_array().cloned().unwrap_or_default(),
            weaker: crate::json_strings(&report["weaker"]),
            env_withheld: crate::json_strings(&report["env_withheld"]),
            setup_error: report["setup_error"].as_str().map(String::from),
            sandboxed: !outside,
            warm,
        }
    }
}

impl Run {
    /// Says the run has ended to whoever waits on its control; returns whether it was
    /// cancelled, and whether it was stopped here for its time limit.
    fn mark_exited(&self) -> (bool, bool) {
        let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        st.exited = true;
        self.shared.ended.notify_all();
        (st.cancelled, st.timed_out)
    }

    /// Waits for the run's own process and its output: its exit code and signal (`None` if it
    /// could not be waited for), cancelled, timed out here.
    fn wait_cold(&mut self, mut child: Child) -> (Option<(i32, Option<i32>)>, bool, bool) {
        let _ = sys::wait_unreaped(self.shared.pid, self.foreground.is_some());
        // The terminal comes back before anything else is said on it.
        self.foreground.take();
        let outside = self.shared.outside;
        if outside {
            // What the command left running in its group goes with it, as a sandbox's
            // processes go with `cordon run`; its pid is still unreaped, so the group is ours.
            sys::signal_group(self.shared.pid, libc::SIGKILL);
        }
        let (cancelled, timed_out_here) = self.mark_exited();
        let status = child.wait();
        // The sandbox's processes are gone with `cordon run`, so every output reaches its end.
        // Outside the sandbox a process that left the group (setsid) may hold an output open
        // for ever: the run does not wait for it past a moment.
        let deadline = Instant::now() + OUTSIDE_OUTPUT_WAIT;
        for r in self.readers.drain(..) {
            while outside && !r.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if !outside || r.is_finished() {
                r.join();
            }
        }
        let ended = status.ok().map(|s| match (s.code(), s.signal()) {
            (Some(c), _) => (c, None),
            (None, Some(sig)) => (128 + sig, Some(sig)),
            (None, None) => (i32::from(cordon_sandbox::exit::SETUP_FAILED), None),
        });
        (ended, cancelled, timed_out_here)
    }
}

/// Reads one output to its end on a thread of its own (a kept one: see [`threads`]).
fn read_into(
    mut from: impl Read + Send + 'static,
    stream: Stream,
    output: &Arc<Mutex<BoundedOutput>>,
    sink: &Sink,
) -> threads::Handle {
    let output = Arc::clone(output);
    let sink = Arc::clone(sink);
    threads::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    output
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(&buf[..n]);
                    sink(Event::Output {
                        stream,
                        data: &buf[..n],
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                // A terminal whose last user is gone reads as EIO: that is its end too.
                Err(_) => break,
            }
        }
    })
}

/// Starts the thread that writes the command's input to `to`: `bytes` at once, then the end;
/// or, when `open`, what [`Control::send_input`] queues, through the sender returned.
fn start_input(
    to: Option<Box<dyn Write + Send>>,
    terminal: bool,
    bytes: Option<&Vec<u8>>,
    open: bool,
) -> Option<Sender<InputMessage>> {
    let tx = to.map(|to| {
        let (tx, rx) = channel::<InputMessage>();
        std::thread::spawn(move || feed_input(to, rx, terminal));
        tx
    })?;
    if let Some(bytes) = bytes {
        let _ = tx.send(InputMessage::Data(bytes.clone()));
        let _ = tx.send(InputMessage::Close);
    }
    open.then_some(tx)
}

/// Writes queued input to the command until told to close or the command goes.
fn feed_input(
    mut to: Box<dyn Write + Send>,
    from: std::sync::mpsc::Receiver<InputMessage>,
    terminal: bool,
) {
    while let Ok(message) = from.recv() {
        match message {
            InputMessage::Data(d) => {
                if to.write_all(&d).and_then(|_| to.flush()).is_err() {
                    return;
                }
            }
            InputMessage::Close if terminal => {
                // End of file on a terminal in canonical mode is Ctrl-D at a line start.
                if to.write_all(b"\x04").is_err() {
                    return;
                }
            }
            InputMessage::Close => return,
        }
    }
}
