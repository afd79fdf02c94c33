//! cordon's own child processes: the run each command of `exec`, `shell` and `mcp` gets, and
//! the proxy a run starts. Each is this same binary, started with [`CHILD_ARG`] as its only
//! argument and handed a typed [`Request`] as JSON on descriptor [`REQUEST_FD`]. Command-line
//! arguments are built only for other programs (docker, podman, sandbox-exec): a request
//! cannot be misread by a parser meant for people, nor lose a value that has no flag.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::config::Sources;
use crate::proxy::ProxyRequest;
use crate::run::Launch;

/// The first argument that makes `cordon` a child of cordon's: see [`main`].
pub const CHILD_ARG: &str = "__cordon-child";

/// Where a child finds its request.
pub const REQUEST_FD: RawFd = 3;

/// The longest request a child reads; a request is a few kilobytes.
const MAX_REQUEST: u64 = 16 << 20;

/// What a child of cordon's is asked to do.
#[derive(Debug, Serialize, Deserialize)]
pub enum Request {
    /// Run a command in the sandbox, with the settings `sources` find as the run starts.
    Run {
        sources: Sources,
        launch: Box<Launch>,
    },
    /// Serve as a run's proxy.
    Proxy(ProxyRequest),
}

/// A child about to start: its command, and the request it will be sent.
#[derive(Debug)]
pub struct Child {
    pub command: Command,
    read: std::io::PipeReader,
    write: std::io::PipeWriter,
    request: Vec<u8>,
}

impl Child {
    /// A child for `request`. Its request pipe must reach it as [`REQUEST_FD`]: by
    /// [`Child::install_request`], or among the caller's own descriptors (see
    /// [`Child::request_fd`]).
    pub fn new(request: &Request) -> std::io::Result<Child> {
        let request = serde_json::to_vec(request)?;
        let (read, write) = std::io::pipe()?;
        // This very binary, even if the file was replaced since it started.
        let mut command = Command::new("/proc/self/exe");
        command.arg(CHILD_ARG);
        Ok(Child {
            command,
            read,
            write,
            request,
        })
    }

    /// The read end of the request pipe, in this process.
    pub fn request_fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }

    /// Puts the request pipe at [`REQUEST_FD`] in the child, for callers that pass it no other
    /// descriptors (one that does would have to order the moves; see `pass_fds`).
    pub fn install_request(&mut self) {
        use std::os::unix::process::CommandExt;
        let fd = self.read.as_raw_fd();
        // SAFETY: the closure runs in the forked child before exec and calls only fcntl, dup2
        // and close, which are async-signal-safe, and allocates nothing. The copy above 10
        // first keeps dup2 from being a no-op (which would leave close-on-exec set) when the
        // pipe already is descriptor 3.
        unsafe {
            self.command.pre_exec(move || {
                let copy = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10);
                if copy < 0 || libc::dup2(copy, REQUEST_FD) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(copy);
                Ok(())
            });
        }
    }

    /// Starts the child and sends its request.
    pub fn spawn(self) -> std::io::Result<std::process::Child> {
        let (mut command, sender) = self.into_parts();
        let child = command.spawn()?;
        sender.send()?;
        Ok(child)
    }

    /// For a caller that spawns [`Child::command`] itself: the command, and what sends the
    /// request once it has started.
    pub fn into_parts(self) -> (Command, Sender) {
        (
            self.command,
            Sender {
                read: self.read,
                write: self.write,
                request: self.request,
            },
        )
    }
}

/// Sends a started child its request.
#[derive(Debug)]
pub struct Sender {
    read: std::io::PipeReader,
    write: std::io::PipeWriter,
    request: Vec<u8>,
}

impl Sender {
    /// Writes the request and closes the pipe: after the child has started, since a request
    /// larger than the pipe's buffer is read only by the child.
    pub fn send(self) -> std::io::Result<()> {
        drop(self.read);
        let mut write = self.write;
        write.write_all(&self.request)
    }
}

/// The request this process was started with, read from [`REQUEST_FD`], which is closed
/// before anything else happens: nothing a child runs inherits it.
fn read_request() -> anyhow::Result<Request> {
    // SAFETY: F_GETFD only reads the descriptor's flags; a closed one gives EBADF.
    if unsafe { libc::fcntl(REQUEST_FD, libc::F_GETFD) } < 0 {
        anyhow::bail!(
            "{CHILD_ARG} is how cordon starts its own child processes, with a request on descriptor {REQUEST_FD}, which is not open; run `cordon --help` for the commands"
        );
    }
    // SAFETY: the descriptor is open (checked above) and was installed for this process alone
    // by its parent cordon; nothing else in this process owns it.
    let file = unsafe { std::fs::File::from_raw_fd(REQUEST_FD) };
    let mut text = Vec::new();
    file.take(MAX_REQUEST + 1).read_to_end(&mut text)?;
    if text.len() as u64 > MAX_REQUEST {
        anyhow::bail!("the request on descriptor {REQUEST_FD} is longer than {MAX_REQUEST} bytes");
    }
    serde_json::from_slice(&text).map_err(|e| {
        anyhow::anyhow!("the request on descriptor {REQUEST_FD} is not one cordon sends: {e}")
    })
}

/// What every program that runs commands through cordon (the `cordon` binary, or one that
/// embeds this crate) calls first in `main`, while it is still one thread: cordon's sandbox
/// helper and its children are that same program started again, and they take over here,
/// never returning. `before` runs first in a child of cordon's (to set up logging, say); the
/// helper gets nothing before it.
pub fn run_if_child(before: impl FnOnce()) {
    let first = std::env::args_os().nth(1);
    #[cfg(target_os = "linux")]
    if first
        .as_ref()
        .is_some_and(|a| a == cordon_sandbox::linux::HELPER_ARG)
    {
        let args: Vec<std::ffi::OsString> = std::env::args_os().skip(2).collect();
        cordon_sandbox::linux::helper_main(&args);
    }
    if first.is_some_and(|a| a == CHILD_ARG) {
        before();
        std::process::exit(i32::from(main()));
    }
}

/// A child's whole life: its request read and done. Returns the exit status; errors are said
/// on standard error, as `cordon` says its own.
fn main() -> u8 {
    let done = read_request().and_then(|request| match request {
        Request::Run { sources, launch } => crate::run::run(&sources, *launch),
        #[cfg(target_os = "linux")]
        Request::Proxy(request) => crate::proxy::serve(request),
        #[cfg(not(target_os = "linux"))]
        Request::Proxy(_) => anyhow::bail!("cordon's proxy runs only on Linux so far"),
    });
    match done {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cordon: error: {e:#}");
            2
        }
    }
}
