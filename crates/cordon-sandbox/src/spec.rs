//! The backend-neutral description of one sandboxed run.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What the command's network looks like.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum NetworkMode {
    /// Its own network namespace with only loopback.
    #[default]
    None,
    /// Only cordon's proxy, which decides host by host: loopback ports the command connects
    /// to lead there, and nowhere else.
    Proxy(ProxyEndpoint),
    /// The host's network.
    Host,
}

/// Where a sandboxed command reaches cordon's proxy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProxyEndpoint {
    /// The proxy's Unix socket on the host. On Linux the sandbox's own loopback ports are
    /// bridged to it from inside the network namespace; where there is no such namespace
    /// (macOS) it is `None` and the ports are the proxy's own on the host's loopback.
    pub socket: Option<PathBuf>,
    /// Loopback port of the HTTP proxy (`HTTP_PROXY`, `HTTPS_PROXY`).
    pub http_port: u16,
    /// Loopback port of the SOCKS5 proxy (`ALL_PROXY=socks5h://…`).
    pub socks_port: u16,
}

/// How the run is walled off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// Namespaces where the machine allows them, else Landlock and seccomp alone, with a
    /// warning saying what is weaker.
    #[default]
    Auto,
    /// Namespaces or nothing: refuse to run where they are unavailable.
    Namespaces,
    /// Landlock and seccomp alone, as where user namespaces are unavailable.
    LandlockOnly,
}

/// One run: the command and everything it may touch. The default touches nothing: no
/// command, nothing writable, no network.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SandboxSpec {
    /// Program and arguments; the program is looked up on the sandbox's `PATH`.
    pub argv: Vec<String>,
    /// Working directory; writable.
    pub cwd: PathBuf,
    /// The command's whole environment.
    pub env: Vec<(String, String)>,
    /// Absolute paths the command may write besides `cwd` and its private `/tmp`.
    pub writable: Vec<PathBuf>,
    /// Absolute paths inside writable ones that stay read-only.
    pub read_only: Vec<PathBuf>,
    pub network: NetworkMode,
    /// Absolute paths the command may not read: a directory appears empty and read-only, a
    /// file unreadable.
    #[serde(default)]
    pub hidden: Vec<PathBuf>,
    /// Absolute paths inside hidden directories that stay readable.
    #[serde(default)]
    pub reopened: Vec<PathBuf>,
    /// Resource limits; `None` means no limit of that kind.
    #[serde(default)]
    pub limits: Limits,
    /// Control groups (v1 `cgroup.procs` files) the sandbox joins before anything else runs,
    /// set up by the caller when it may (as root). They make limits hold for the whole
    /// sandbox rather than per process.
    #[serde(default)]
    pub cgroups: Vec<PathBuf>,
    /// Unix-domain socket paths the command may connect to. Without any, the command cannot
    /// create Unix sockets at all; with some, it may also reach the sockets it binds itself,
    /// and no others.
    #[serde(default)]
    pub unix_sockets: Vec<PathBuf>,
    #[serde(default)]
    pub isolation: Isolation,
    /// The command may listen on loopback (its own, inside the sandbox): test servers, dev
    /// servers.
    #[serde(default)]
    pub allow_local_binding: bool,
    /// Where host connections come in (`--publish`): a Unix socket on the host that the
    /// sandbox connects to at start, then answers each byte read there with a fresh, unconnected
    /// TCP socket of its own network namespace. Whoever listens on the host connects that socket
    /// to the published port, so the connection lands on the sandbox's loopback without the
    /// host's loopback ever being shared. Needs a network namespace.
    #[serde(default)]
    pub inbound: Option<PathBuf>,
    /// The command's standard input is a terminal made for this run alone (a pseudo-terminal
    /// `cordon exec` opened for it), which becomes the command's controlling terminal: `/dev/tty`,
    /// Ctrl-C and job control then work as on any terminal. Never for a person's own terminal,
    /// which the command must not reach past its own input and output.
    #[serde(default)]
    pub own_terminal: bool,
    /// The directory `cwd` must be, as (device, inode), when a front end opened it and checked
    /// it: a command running beside the sandbox can swap a directory on `cwd`'s path for a
    /// link between that check and the bind that makes `cwd` writable, and the set-up then
    /// fails rather than make another directory writable.
    #[serde(default)]
    pub cwd_identity: Option<(u64, u64)>,
}

/// Limits on what a run may consume.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Processes (and threads) at once. Stops fork bombs.
    pub max_processes: Option<u64>,
    /// The highest process id the sandbox's PID namespace may hand out (Linux 6.14+ keeps one
    /// per namespace), which bounds its processes without a control group. At least 301.
    #[serde(default)]
    pub pid_max: Option<u64>,
    /// Bytes of memory.
    pub memory_bytes: Option<u64>,
    /// Bytes the sandbox's own in-memory file systems may hold, `/tmp` and `/dev/shm`
    /// together: their pages are memory no process limit counts. `None`: a quarter of the
    /// machine's memory.
    #[serde(default)]
    pub scratch_bytes: Option<u64>,
    /// Seconds of CPU time each process may use.
    #[serde(default)]
    pub cpu_seconds: Option<u64>,
    /// Share of the CPUs the whole sandbox may use, in thousandths of one CPU (only with
    /// control groups).
    #[serde(default)]
    pub cpu_millis: Option<u64>,
    /// Wall-clock time the whole run may take.
    #[serde(default)]
    pub timeout: Option<Duration>,
}
