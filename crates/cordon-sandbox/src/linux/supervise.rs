//! The `connect` supervisor: with Unix sockets allowed, the command may create them, and then
//! only the allowed sockets (and ones bound inside the sandbox) may be reachable, including
//! sockets that appear after the start, under names relative to any directory.
//!
//! The command's process installs a filter ([`super::seccomp::connect_notifier`]) that stops
//! each `connect` and hands it to the sandbox's PID 1, which is not under that filter. PID 1
//! never lets the call go on in the kernel (a racing thread could change the address in
//! memory, or put another socket on the descriptor, between the check and the kernel's
//! second read). It takes the caller's socket (`pidfd_getfd`: the same open socket), checks
//! the address it read once, connects that socket itself, and answers with the result. For a
//! path it opens the path first and connects through `/proc/self/fd/N`, so the object checked
//! is the object connected.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

use super::sys;

/// What a `connect` of a Unix socket asks for, from the address bytes the caller passed.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Address {
    /// A path (absolute, or relative to the caller's working directory), without its NUL.
    Path(Vec<u8>),
    /// An abstract name: the whole of `sun_path` as given, its leading NUL included (every
    /// byte counts in an abstract name).
    Abstract(Vec<u8>),
    /// Anything else (another family, or too short): the kernel refuses it without a lookup.
    Other,
}

/// Reads a `sockaddr_un` as the kernel does: the path ends at the first NUL or at the given
/// length, whichever comes first.
pub(super) fn parse_unix(bytes: &[u8]) -> Address {
    const PATH_AT: usize = 2;
    if bytes.len() <= PATH_AT || u16::from_ne_bytes([bytes[0], bytes[1]]) != libc::AF_UNIX as u16 {
        return Address::Other;
    }
    let path = &bytes[PATH_AT..];
    if path[0] == 0 {
        return Address::Abstract(path.to_vec());
    }
    let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
    Address::Path(path[..end].to_vec())
}

/// What may be reached by path.
pub(super) struct Reachable {
    /// The allowed sockets, as (device, inode) when the sandbox started: the object, not the
    /// name, so a socket renamed or linked to an allowed name is still refused. One re-created
    /// after the start is a new object and is refused until the next run.
    pub allowed: Vec<(u64, u64)>,
    /// The device of the sandbox's own in-memory /tmp and /dev/shm: every socket there was
    /// bound inside the sandbox.
    pub scratch_dev: Option<u64>,
    /// How a socket bound inside the sandbox is told from one bound outside.
    pub bound_inside: BoundInside,
}

/// How a socket bound inside the sandbox is told from one bound outside.
pub(super) enum BoundInside {
    /// The sandbox has a network namespace of its own: every listening socket the kernel
    /// lists there was bound by the command, and so is every abstract name there.
    OwnNetwork,
    /// The network namespace is shared with the host (`--network host`, or no namespaces):
    /// a listening socket is the command's when some process under this one (PID 1, or the
    /// fallback's supervisor, the command's subreaper) holds it open. An abstract name is
    /// checked the same way: the supervisor's connect is not scoped by the command's Landlock
    /// domain, which used to keep the host's abstract sockets out of reach.
    HeldUnder(libc::pid_t),
}

impl Reachable {
    fn admits(&self, object: &rustix::fs::Stat) -> bool {
        let (dev, ino) = (object.st_dev, object.st_ino);
        if (object.st_mode & libc::S_IFMT) != libc::S_IFSOCK {
            return false;
        }
        if self.allowed.contains(&(dev, ino)) || self.scratch_dev == Some(dev) {
            return true;
        }
        // The kernel's diagnostics give 32-bit inode numbers; one past them is not matched.
        if ino > u64::from(u32::MAX) {
            return false;
        }
        self.listed(|s| s.file == Some((dev, ino)))
    }

    /// Whether an abstract name may be connected to.
    fn admits_abstract(&self, name: &[u8]) -> bool {
        match self.bound_inside {
            BoundInside::OwnNetwork => true,
            BoundInside::HeldUnder(_) => self.listed(|s| s.name.as_deref() == Some(name)),
        }
    }

    /// Whether a listening socket bound inside the sandbox matches `wanted`.
    fn listed(&self, wanted: impl Fn(&Listening) -> bool) -> bool {
        let Ok(all) = sys::listening_unix_sockets_here() else {
            return false;
        };
        let matching: Vec<u64> = all.iter().filter(|s| wanted(s)).map(|s| s.socket).collect();
        match self.bound_inside {
            BoundInside::OwnNetwork => !matching.is_empty(),
            BoundInside::HeldUnder(root) => !matching.is_empty() && held_under(root, &matching),
        }
    }
}

/// A listening Unix socket, as the kernel's socket diagnostics list it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Listening {
    /// The socket's own inode (`socket:[N]` in `/proc/<pid>/fd`).
    pub socket: u64,
    /// The (device, inode) of the file it is bound to, for a path.
    pub file: Option<(u64, u64)>,
    /// Its address's `sun_path` as bound (an abstract name starts with NUL).
    pub name: Option<Vec<u8>>,
}

/// Whether a process under `root` (its descendants; orphans come back to it, the subreaper)
/// holds one of `sockets` open.
fn held_under(root: libc::pid_t, sockets: &[u64]) -> bool {
    let wanted: Vec<String> = sockets.iter().map(|s| format!("socket:[{s}]")).collect();
    descendants(root).iter().any(|pid| {
        std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
            fds.filter_map(Result::ok).any(|fd| {
                std::fs::read_link(fd.path())
                    .is_ok_and(|l| wanted.iter().any(|w| l.as_os_str() == w.as_str()))
            })
        })
    })
}

/// The processes under `root`, from each thread's `children` list where the kernel keeps
/// one (walking only the sandbox's own processes), else from every process's parent.
fn descendants(root: libc::pid_t) -> Vec<libc::pid_t> {
    let children_of = |pid: libc::pid_t| -> Option<Vec<libc::pid_t>> {
        let mut found = Vec::new();
        for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
            let list = std::fs::read_to_string(task.ok()?.path().join("children")).ok()?;
            found.extend(
                list.split_whitespace()
                    .filter_map(|c| c.parse::<libc::pid_t>().ok()),
            );
        }
        Some(found)
    };
    let mut under = vec![root];
    let mut i = 0;
    while i < under.len() {
        match children_of(under[i]) {
            Some(children) => under.extend(children),
            // A process that ended meanwhile has no children left to list.
            None if i > 0 => {}
            None => return descendants_by_parent(root),
        }
        i += 1;
    }
    under.remove(0);
    under
}

fn descendants_by_parent(root: libc::pid_t) -> Vec<libc::pid_t> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let parents: Vec<(libc::pid_t, libc::pid_t)> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            Some((pid, parent_in_stat(&stat)?))
        })
        .collect();
    let mut under = vec![root];
    let mut i = 0;
    while i < under.len() {
        let p = under[i];
        under.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == p)
                .map(|(pid, _)| *pid),
        );
        i += 1;
    }
    under.remove(0);
    under
}

/// The parent's pid in a `/proc/<pid>/stat` line: the field after the state, after the
/// command name (which may hold spaces and parentheses, so the last `)` ends it).
pub(super) fn parent_in_stat(stat: &str) -> Option<libc::pid_t> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The socket-diagnostics request for every listening Unix socket, with its bound file.
pub(super) fn unix_diag_request() -> Vec<u8> {
    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const TCP_LISTEN: u32 = 10;
    const UDIAG_SHOW_NAME: u32 = 0x1;
    const UDIAG_SHOW_VFS: u32 = 0x2;
    const LEN: u32 = 16 + 24;
    let mut m = Vec::with_capacity(LEN as usize);
    // nlmsghdr: length, type, flags, sequence, port.
    m.extend_from_slice(&LEN.to_ne_bytes());
    m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    m.extend_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16).to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    // unix_diag_req: family, protocol, padding, states, inode, what to show, cookie.
    m.push(libc::AF_UNIX as u8);
    m.push(0);
    m.extend_from_slice(&0u16.to_ne_bytes());
    m.extend_from_slice(&(1u32 << TCP_LISTEN).to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&(UDIAG_SHOW_NAME | UDIAG_SHOW_VFS).to_ne_bytes());
    m.extend_from_slice(&[0u8; 8]);
    m
}

/// Adds the (device, inode) of each socket in one batch of diagnostics replies to `found`;
/// `Ok(true)` once the dump is done.
pub(super) fn parse_unix_diag(
    mut batch: &[u8],
    found: &mut Vec<Listening>,
) -> std::io::Result<bool> {
    const NLMSG_ERROR: u16 = 2;
    const NLMSG_DONE: u16 = 3;
    const UNIX_DIAG_NAME: u16 = 0;
    const UNIX_DIAG_VFS: u16 = 1;
    const HEADER: usize = 16;
    const DIAG_MSG: usize = 16;
    let u16_at = |b: &[u8], i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
    let u32_at = |b: &[u8], i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let bad = || std::io::Error::other("sock_diag: malformed reply");
    while batch.len() >= HEADER {
        let len = u32_at(batch, 0) as usize;
        if len < HEADER || len > batch.len() {
            return Err(bad());
        }
        let message = &batch[..len];
        match u16_at(message, 4) {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => {
                let errno = if len >= HEADER + 4 {
                    -(u32_at(message, HEADER) as i32)
                } else {
                    libc::EIO
                };
                return Err(std::io::Error::from_raw_os_error(errno));
            }
            _ => {}
        }
        if len < HEADER + DIAG_MSG {
            return Err(bad());
        }
        // unix_diag_msg: family, type, state, padding, then the socket's inode.
        let mut socket = Listening {
            socket: u64::from(u32_at(message, HEADER + 4)),
            file: None,
            name: None,
        };
        let mut attrs = &message[HEADER + DIAG_MSG..];
        while attrs.len() >= 4 {
            let attr_len = usize::from(u16_at(attrs, 0));
            if attr_len < 4 || attr_len > attrs.len() {
                return Err(bad());
            }
            match u16_at(attrs, 2) {
                UNIX_DIAG_VFS if attr_len >= 12 => {
                    // unix_diag_vfs: inode, then the device as the kernel keeps it inside
                    // (major << 20 | minor), not as `stat` gives it.
                    let dev = u32_at(attrs, 8);
                    let (major, minor) = (dev >> 20, dev & 0xf_ffff);
                    socket.file = Some((libc::makedev(major, minor), u64::from(u32_at(attrs, 4))));
                }
                UNIX_DIAG_NAME => socket.name = Some(attrs[4..attr_len].to_vec()),
                _ => {}
            }
            attrs = attrs.get(attr_len.next_multiple_of(4)..).unwrap_or(&[]);
        }
        found.push(socket);
        batch = batch.get(len.next_multiple_of(4)..).unwrap_or(&[]);
    }
    Ok(false)
}

/// Threads for blocking connects. Each job goes to a thread that is idle at that moment, or
/// to a new one, never into a queue behind a connect that may wait for ever. A thread that
/// is done waits for the next job, unless enough already do: starting a thread costs more
/// than the connect it runs.
struct Workers {
    idle: std::sync::Mutex<Vec<std::sync::mpsc::SyncSender<Job>>>,
}

type Job = Box<dyn FnOnce() + Send>;

/// How many finished threads wait for more work.
const IDLE_WORKERS: usize = 4;

impl Workers {
    fn run(self: &Arc<Self>, job: Job) -> Result<(), ()> {
        let idle = self.idle.lock().ok().and_then(|mut idle| idle.pop());
        let job = match idle {
            // Its channel is empty (it was put back only once done), so this cannot wait.
            Some(worker) => match worker.try_send(job) {
                Ok(()) => return Ok(()),
                Err(std::sync::mpsc::TrySendError::Full(job))
                | Err(std::sync::mpsc::TrySendError::Disconnected(job)) => job,
            },
            None => job,
        };
        let (worker, jobs) = std::sync::mpsc::sync_channel::<Job>(1);
        worker.try_send(job).map_err(drop)?;
        let all = Arc::clone(self);
        std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || {
                while let Ok(job) = jobs.recv() {
                    job();
                    let Ok(mut idle) = all.idle.lock() else {
                        return;
                    };
                    if idle.len() >= IDLE_WORKERS {
                        return;
                    }
                    idle.push(worker.clone());
                }
            })
            .map(drop)
            .map_err(drop)
    }
}

/// How each notified `connect` is settled.
pub(super) struct Supervisor {
    listener: OwnedFd,
    reachable: Reachable,
    workers: Arc<Workers>,
}

impl Supervisor {
    pub(super) fn new(listener: OwnedFd, reachable: Reachable) -> Self {
        Supervisor {
            listener,
            reachable,
            workers: Arc::new(Workers {
                idle: std::sync::Mutex::new(Vec::new()),
            }),
        }
    }

    /// Answers notified calls until the listener ends (every supervised process is gone).
    pub(super) fn serve(self) {
        let this = Arc::new(self);
        loop {
            match sys::receive_notification(this.listener.as_raw_fd()) {
                Ok(Some(n)) => Supervisor::settle(&this, n),
                Ok(None) => continue,
                Err(_) => return,
            }
        }
    }

    fn still_waiting(&self, n: &sys::Notification) -> bool {
        sys::notification_valid(self.listener.as_raw_fd(), n.id)
    }

    fn answer(&self, n: &sys::Notification, result: Result<i64, i32>) {
        sys::answer_notification(self.listener.as_raw_fd(), n.id, result);
    }

    fn settle(this: &Arc<Self>, n: sys::Notification) {
        if n.nr != libc::SYS_connect as libc::c_int {
            // Nothing else is notified; refuse rather than let anything through unchecked.
            return this.answer(&n, Err(libc::ENOSYS));
        }
        match this.prepare(&n) {
            Ok(Some((socket, target))) => {
                let blocking = rustix::fs::fcntl_getfl(&socket)
                    .is_ok_and(|f| !f.contains(rustix::fs::OFlags::NONBLOCK));
                if blocking {
                    // A blocking connect may wait (a full backlog, a slow TCP peer); PID 1 must
                    // go on answering meanwhile. It never forks after the command starts, so
                    // threads in it are safe.
                    let own = Arc::clone(this);
                    let job = Box::new(move || own.answer(&n, connect(&socket, &target)));
                    if this.workers.run(job).is_err() {
                        this.answer(&n, Err(libc::EAGAIN));
                    }
                } else {
                    this.answer(&n, connect(&socket, &target));
                }
            }
            Ok(None) => {}
            Err(errno) => this.answer(&n, Err(errno)),
        }
    }

    /// Everything up to the connect itself: the caller's socket, and what to connect it to.
    /// `Ok(None)`: the caller is gone.
    fn prepare(&self, n: &sys::Notification) -> Result<Option<(OwnedFd, Target)>, i32> {
        let [fd, addr, len, ..] = n.args;
        // The kernel's own limit for a socket address.
        if len > std::mem::size_of::<libc::sockaddr_storage>() as u64 {
            return Err(libc::EINVAL);
        }
        let bytes =
            sys::read_process_memory(n.pid, addr, len as usize).map_err(|_| libc::EFAULT)?;
        let process = open_process(n.pid);
        // Checked after opening: a thread id is only known to be the caller's while its call
        // waits, and from here on the pidfd holds on to the process whatever happens.
        if !self.still_waiting(n) {
            return Ok(None);
        }
        let process = process?;
        let fd = i32::try_from(fd).map_err(|_| libc::EBADF)?;
        let socket =
            rustix::process::pidfd_getfd(&process, fd, rustix::process::PidfdGetfdFlags::empty())
                .map_err(|e| e.raw_os_error())?;
        let domain = rustix::net::sockopt::socket_domain(&socket).map_err(|e| e.raw_os_error())?;
        if domain != rustix::net::AddressFamily::UNIX {
            // Another family: the kernel reads no path for it. Connecting here still matters:
            // what was checked (this socket, these bytes) is what is connected.
            return Ok(Some((socket, Target::Bytes(bytes))));
        }
        match parse_unix(&bytes) {
            Address::Path(path) => {
                let path = as_seen_by(n.pid, path);
                let cwd = if path.first() == Some(&b'/') {
                    None
                } else {
                    // The calling thread's working directory, as its own lookup would start.
                    let cwd = rustix::fs::open(
                        format!("/proc/{}/cwd", n.pid),
                        rustix::fs::OFlags::PATH
                            | rustix::fs::OFlags::DIRECTORY
                            | rustix::fs::OFlags::CLOEXEC,
                        rustix::fs::Mode::empty(),
                    );
                    if !self.still_waiting(n) {
                        return Ok(None);
                    }
                    Some(cwd.map_err(|e| e.raw_os_error())?)
                };
                let object = self.open_checked(&path, cwd)?;
                Ok(Some((socket, Target::Object(object))))
            }
            Address::Abstract(name) if !self.reachable.admits_abstract(&name) => {
                Err(libc::ECONNREFUSED)
            }
            Address::Abstract(_) | Address::Other => Ok(Some((socket, Target::Bytes(bytes)))),
        }
    }

    /// Opens `path` as the caller's `connect` would find it (following links; relative to its
    /// working directory) and keeps it only if it may be reached.
    fn open_checked(&self, path: &[u8], cwd: Option<OwnedFd>) -> Result<OwnedFd, i32> {
        use std::os::unix::ffi::OsStrExt;
        let path = Path::new(std::ffi::OsStr::from_bytes(path));
        let flags = rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC;
        let opened = match cwd {
            None => rustix::fs::open(path, flags, rustix::fs::Mode::empty()),
            Some(cwd) => rustix::fs::openat(cwd, path, flags, rustix::fs::Mode::empty()),
        }
        .map_err(|e| e.raw_os_error())?;
        let object = rustix::fs::fstat(&opened).map_err(|e| e.raw_os_error())?;
        if self.reachable.admits(&object) {
            Ok(opened)
        } else {
            // What connecting to a covered socket (the blank file) always answered.
            Err(libc::ECONNREFUSED)
        }
    }
}

/// What the caller's socket is connected to.
enum Target {
    /// The address bytes the caller passed, read once.
    Bytes(Vec<u8>),
    /// A checked socket file, reached through its open descriptor.
    Object(OwnedFd),
}

fn connect(socket: &OwnedFd, target: &Target) -> Result<i64, i32> {
    let errno = |e: std::io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    match target {
        Target::Bytes(bytes) => sys::connect_raw(socket.as_raw_fd(), bytes).map_err(errno)?,
        Target::Object(object) => {
            let via = format!("/proc/self/fd/{}", object.as_fd().as_raw_fd());
            let address =
                rustix::net::SocketAddrUnix::new(via.as_str()).map_err(|e| e.raw_os_error())?;
            rustix::net::connect(socket, &address).map_err(|e| e.raw_os_error())?;
        }
    }
    Ok(0)
}

/// `path` with the caller's own `/proc/self/` or `/proc/thread-self/` (which, looked up by
/// the supervisor, would name the supervisor) made the caller's by number.
pub(super) fn as_seen_by(tid: libc::pid_t, path: Vec<u8>) -> Vec<u8> {
    for own in [&b"/proc/self/"[..], b"/proc/thread-self/"] {
        if let Some(rest) = path.strip_prefix(own) {
            let mut theirs = format!("/proc/{tid}/").into_bytes();
            theirs.extend_from_slice(rest);
            return theirs;
        }
    }
    path
}

/// A pidfd for the thread `tid` (Linux 6.9+), else for its process (the thread group's
/// leader, from `Tgid` in its status). Both reach the thread's descriptor table unless it
/// was made without sharing its process's, and then the socket taken is one the caller
/// does not hold: connecting it reaches nothing the caller can use.
fn open_process(tid: libc::pid_t) -> Result<OwnedFd, i32> {
    // PIDFD_THREAD.
    let thread = rustix::process::PidfdFlags::from_bits_retain(libc::O_EXCL as u32);
    let pid = rustix::process::Pid::from_raw(tid).ok_or(libc::ESRCH)?;
    match rustix::process::pidfd_open(pid, thread) {
        Ok(fd) => return Ok(fd),
        Err(rustix::io::Errno::INVAL) => {}
        Err(e) => return Err(e.raw_os_error()),
    }
    let tgid = thread_group(tid).map_err(|e| e.raw_os_error())?;
    let pid = rustix::process::Pid::from_raw(tgid).ok_or(libc::ESRCH)?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
        .map_err(|e| e.raw_os_error())
}

/// The process a thread belongs to (`Tgid` in its status): pidfds name processes.
fn thread_group(tid: libc::pid_t) -> rustix::io::Result<libc::pid_t> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status"))
        .map_err(|_| rustix::io::Errno::SRCH)?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or(rustix::io::Errno::SRCH)
}

/// Whether a supervisor can work here: the kernel hands calls over, and lets the supervisor
/// read the caller's memory and take its socket, which Yama's `ptrace_scope` can forbid: 3
/// forbids it to everyone, 2 to all but holders of `CAP_SYS_PTRACE` (PID 1 of the namespaced
/// sandbox holds it over the command's user namespace; the fallback's supervisor does not).
pub(super) fn available(namespaced: bool) -> bool {
    let scope: u8 = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let allowed = if namespaced { scope < 3 } else { scope < 2 };
    allowed && sys::user_notification_available()
}

impl Reachable {
    /// Before the command starts: the allowed sockets are identified while nothing in the
    /// sandbox can yet rename another socket to an allowed name.
    pub(super) fn before_start(
        allowed_paths: &[std::path::PathBuf],
        scratch_dev: Option<u64>,
        bound_inside: BoundInside,
    ) -> Self {
        Reachable {
            allowed: identify(allowed_paths),
            scratch_dev,
            bound_inside,
        }
    }
}

/// Takes the listener the command's process sends over `channel` (none if it failed before
/// sending; it then exits and reports why) and settles its `connect`s on a thread of this
/// process from now on. The caller must not fork afterwards.
pub(super) fn start(channel: &std::os::unix::net::UnixStream, reachable: Reachable) {
    let Ok(mut received) = crate::handoff::receive(channel) else {
        return;
    };
    let Some(listener) = received.pop() else {
        return;
    };
    // Older kernels switch the slower way; nothing else differs.
    let _ = sys::wake_synchronously(listener.as_raw_fd());
    let supervisor = Supervisor::new(listener, reachable);
    // Without the thread the command's `connect`s wait for ever; it can still be stopped.
    let _ = std::thread::Builder::new()
        .name("connect supervisor".into())
        .spawn(move || supervisor.serve());
}

/// The (device, inode) of each allowed socket that exists now.
pub(super) fn identify(paths: &[std::path::PathBuf]) -> Vec<(u64, u64)> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let mut ids: Vec<(u64, u64)> = paths
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .filter(|m| m.file_type().is_socket())
        .map(|m| (m.dev(), m.ino()))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

#[cfg(test)]
mod tests {
    use super::{Address, parse_unix, parse_unix_diag, unix_diag_request};

    fn unix(path: &[u8]) -> Vec<u8> {
        let mut b = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        b.extend_from_slice(path);
        b
    }

    /// A blocking connect that never ends must not hold up the next one, on a fresh thread
    /// or on one that finished an earlier job.
    #[test]
    fn a_job_never_waits_behind_a_blocked_one() {
        use std::sync::mpsc::channel;
        use std::time::Duration;
        let workers = std::sync::Arc::new(super::Workers {
            idle: std::sync::Mutex::new(Vec::new()),
        });
        let (done, finished) = channel();
        let first = done.clone();
        assert!(
            workers
                .run(Box::new(move || first.send(0).unwrap_or(())))
                .is_ok()
        );
        assert_eq!(finished.recv_timeout(Duration::from_secs(30)), Ok(0));
        let (_release, blocked) = channel::<()>();
        assert!(
            workers
                .run(Box::new(move || {
                    let _ = blocked.recv();
                }))
                .is_ok()
        );
        for i in 1..4 {
            let done = done.clone();
            assert!(
                workers
                    .run(Box::new(move || done.send(i).unwrap_or(())))
                    .is_ok()
            );
            assert_eq!(finished.recv_timeout(Duration::from_secs(30)), Ok(i));
        }
    }

    /// Both ways of finding a process's descendants find a child and a grandchild.
    #[test]
    fn descendants_are_found_either_way() -> std::io::Result<()> {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()?;
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().expect("stdout")),
            &mut line,
        )?;
        let grandchild: libc::pid_t = line.trim().parse().expect("a pid");
        let me = std::process::id() as libc::pid_t;
        let shell = child.id() as libc::pid_t;
        let by_children = super::descendants(me);
        let by_parent = super::descendants_by_parent(me);
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::process::Command::new("kill")
            .arg(grandchild.to_string())
            .status();
        for found in [by_children, by_parent] {
            assert!(
                found.contains(&shell) && found.contains(&grandchild),
                "{found:?}"
            );
            assert!(!found.contains(&me));
        }
        Ok(())
    }

    #[test]
    fn parents_are_read_past_any_command_name() {
        use super::parent_in_stat;
        assert_eq!(parent_in_stat("12 (sh) S 7 12 12 0"), Some(7));
        assert_eq!(parent_in_stat("12 (a) b) (c) R 99 1"), Some(99));
        assert_eq!(parent_in_stat("12 (x"), None);
    }

    #[test]
    fn the_callers_own_proc_entries_are_named_by_number() {
        use super::as_seen_by;
        assert_eq!(
            as_seen_by(42, b"/proc/self/fd/5".to_vec()),
            b"/proc/42/fd/5"
        );
        assert_eq!(
            as_seen_by(42, b"/proc/thread-self/cwd/s".to_vec()),
            b"/proc/42/cwd/s"
        );
        assert_eq!(as_seen_by(42, b"/proc/selfish".to_vec()), b"/proc/selfish");
        assert_eq!(as_seen_by(42, b"self/x".to_vec()), b"self/x");
    }

    #[test]
    fn unix_addresses_read_as_the_kernel_reads_them() {
        assert_eq!(
            parse_unix(&unix(b"/run/x.sock")),
            Address::Path(b"/run/x.sock".to_vec())
        );
        // The path ends at the first NUL, whatever the length says.
        assert_eq!(
            parse_unix(&unix(b"rel.sock\0/etc")),
            Address::Path(b"rel.sock".to_vec())
        );
        assert_eq!(
            parse_unix(&unix(b"\0name\0x")),
            Address::Abstract(b"\0name\0x".to_vec())
        );
        // Family only: an unnamed address, refused by connect without a lookup.
        assert_eq!(parse_unix(&unix(b"")), Address::Other);
        assert_eq!(parse_unix(&[2, 0, 1, 2, 3]), Address::Other);
        assert_eq!(parse_unix(&[]), Address::Other);
    }

    #[test]
    fn diagnostics_request_and_replies() -> std::io::Result<()> {
        let request = unix_diag_request();
        assert_eq!(request.len(), 40);
        assert_eq!(
            u32::from_ne_bytes(request[..4].try_into().unwrap_or_default()),
            40
        );
        // One reply: header, unix_diag_msg, a name attribute, a VFS attribute; then done.
        let mut reply = Vec::new();
        let mut message = vec![0u8; 32];
        message[20..24].copy_from_slice(&5555u32.to_ne_bytes());
        message.extend_from_slice(&[8, 0, 0, 0, b'/', b'a', 0, 0]);
        message.extend_from_slice(&12u16.to_ne_bytes());
        message.extend_from_slice(&1u16.to_ne_bytes());
        message.extend_from_slice(&77u32.to_ne_bytes());
        // Device 8:1 as the kernel keeps it.
        message.extend_from_slice(&((8u32 << 20) | 1).to_ne_bytes());
        let len = message.len() as u32;
        message[..4].copy_from_slice(&len.to_ne_bytes());
        message[4..6].copy_from_slice(&20u16.to_ne_bytes());
        reply.extend_from_slice(&message);
        let mut found = Vec::new();
        assert!(!parse_unix_diag(&reply, &mut found)?);
        assert_eq!(
            found,
            vec![super::Listening {
                socket: 5555,
                file: Some((libc::makedev(8, 1), 77)),
                name: Some(b"/a\0\0".to_vec()),
            }]
        );
        let mut done = vec![0u8; 20];
        done[..4].copy_from_slice(&20u32.to_ne_bytes());
        done[4..6].copy_from_slice(&3u16.to_ne_bytes());
        assert!(parse_unix_diag(&done, &mut found)?);
        // A truncated message is an error, not a silent end.
        assert!(parse_unix_diag(&reply[..30], &mut found).is_err());
        Ok(())
    }

    /// This kernel reads no path from an address given to `sendto` or `sendmsg` on a stream
    /// or sequenced-packet Unix socket, so refusing datagram sockets closes that way round the
    /// supervisor.
    #[test]
    fn only_datagram_sockets_send_to_a_path() -> std::io::Result<()> {
        use std::os::unix::net::UnixDatagram;
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("dgram.sock");
        let receiver = UnixDatagram::bind(&path)?;
        receiver.set_nonblocking(true)?;
        let address = rustix::net::SocketAddrUnix::new(path.as_path())?;
        for kind in [
            rustix::net::SocketType::STREAM,
            rustix::net::SocketType::SEQPACKET,
        ] {
            let s = rustix::net::socket(rustix::net::AddressFamily::UNIX, kind, None)?;
            let sent = rustix::net::sendto(&s, b"x", rustix::net::SendFlags::empty(), &address);
            assert!(sent.is_err(), "{kind:?} sent to a path: {sent:?}");
            let (a, _b) = rustix::net::socketpair(
                rustix::net::AddressFamily::UNIX,
                kind,
                rustix::net::SocketFlags::empty(),
                None,
            )?;
            let _ = rustix::net::sendto(&a, b"y", rustix::net::SendFlags::empty(), &address);
        }
        let mut buf = [0u8; 4];
        assert!(receiver.recv(&mut buf).is_err(), "a datagram arrived");
        // A datagram socket does: the case the filter refuses. So does a "raw" one, which the
        // kernel makes a datagram socket: the filter refuses both types.
        UnixDatagram::unbound()?.send_to(b"z", &path)?;
        assert_eq!(receiver.recv(&mut buf)?, 1);
        let raw = rustix::net::socket(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::RAW,
            None,
        )?;
        rustix::net::sendto(&raw, b"r", rustix::net::SendFlags::empty(), &address)?;
        assert_eq!(receiver.recv(&mut buf)?, 1);
        Ok(())
    }
}
