//! The system calls the sandbox setup needs, each behind a small safe function. All of the
//! crate's `unsafe` is here.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn cstr(p: &OsStr) -> io::Result<CString> {
    CString::new(p.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// `fork()`: `Ok(None)` in the child, `Ok(Some(pid))` in the parent.
///
/// Only called from the sandbox helper, which is single-threaded (a fresh exec of cordon that
/// starts no threads), so the child does not inherit locks held by other threads.
pub fn fork() -> io::Result<Option<libc::pid_t>> {
    // SAFETY: the helper process has a single thread (see above), so the child may go on
    // running ordinary Rust code after fork.
    let pid = check(unsafe { libc::fork() })?;
    Ok((pid != 0).then_some(pid))
}

/// `clone()` into new namespaces, like `fork()`: `Ok(None)` in the child, `Ok(Some(pid))` in
/// the parent. The child is the first process of any new PID namespace.
///
/// Only called from a single-threaded process. The raw system call skips libc's fork
/// bookkeeping, so the child must not rely on libc's idea of its thread id (it uses none of
/// the calls that do: no `raise`, no `pthread` locks with owners).
pub fn clone_into_namespaces(flags: libc::c_int) -> io::Result<Option<libc::pid_t>> {
    let flags = (flags | libc::SIGCHLD) as libc::c_ulong;
    // SAFETY: with a null stack the child runs on a copy of the caller's stack, as after
    // fork; the caller is single-threaded (see above), and the remaining pointer arguments
    // are null, which clone accepts.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone,
            flags,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<libc::c_int>(),
            std::ptr::null_mut::<libc::c_int>(),
            0 as libc::c_ulong,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((ret != 0).then_some(ret as libc::pid_t))
}

pub fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let source = source.map(|s| cstr(s.as_os_str())).transpose()?;
    let target = cstr(target.as_os_str())?;
    let fstype = fstype.map(|f| cstr(OsStr::new(f))).transpose()?;
    let data = data.map(|d| cstr(OsStr::new(d))).transpose()?;
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is either null or a NUL-terminated string that outlives the call.
    check(unsafe {
        libc::mount(
            ptr(&source),
            target.as_ptr(),
            ptr(&fstype),
            flags,
            ptr(&data).cast(),
        )
    })
    .map(drop)
}

/// What [`reopen_read_only`] found a descriptor to be.
pub enum Reopened {
    /// The same file, open the same way, through a detached read-only copy of its mount.
    Done(std::os::fd::OwnedFd),
    /// A regular file open for writing: through a read-only mount it could not be written.
    WritableFile,
    /// A file with no name left (a shell's here-document, a memfd): what is done to it
    /// reaches no host file.
    Nameless,
}

/// Opens the file `fd` refers to again, through a read-only clone of the mount that `path`
/// (where `fd`'s file lies in this mount namespace) is on, so that its mode, owner, times and
/// extended attributes can no longer be changed through it (`EROFS`), while devices and FIFOs
/// still read and write. `path` must lead to the very file `fd` has open.
pub fn reopen_read_only(fd: libc::c_int, path: &Path) -> io::Result<Reopened> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    fn stat(fd: libc::c_int) -> io::Result<libc::stat> {
        // SAFETY: a zeroed stat is a valid out-value, and fstat writes at most that struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `st` is a valid out-pointer for the call.
        check(unsafe { libc::fstat(fd, &mut st) })?;
        Ok(st)
    }
    // SAFETY: F_GETFL takes no pointer.
    let flags = check(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    let held = stat(fd)?;
    let kind = held.st_mode & libc::S_IFMT;
    let file_like = kind == libc::S_IFREG || kind == libc::S_IFDIR;
    if kind == libc::S_IFREG && held.st_nlink == 0 {
        return Ok(Reopened::Nameless);
    }
    if file_like && flags & libc::O_ACCMODE != libc::O_RDONLY {
        return Ok(Reopened::WritableFile);
    }
    let c = cstr(path.as_os_str())?;
    // SAFETY: the path is NUL-terminated and outlives the call; the result is checked.
    let at = check(unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: `at` was just opened and is owned by nothing else.
    let at = unsafe { OwnedFd::from_raw_fd(at) };
    let found = stat(at.as_raw_fd())?;
    if (found.st_dev, found.st_ino) != (held.st_dev, held.st_ino) {
        return Err(io::Error::other(format!(
            "{} is no longer the file it had open",
            path.display()
        )));
    }
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    let empty = c"";
    // SAFETY: `at` is an open descriptor and the path an empty NUL-terminated string.
    let tree = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            at.as_raw_fd(),
            empty.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | libc::AT_EMPTY_PATH as libc::c_uint,
        )
    };
    if tree < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor, owned by nothing else.
    let tree = unsafe { OwnedFd::from_raw_fd(tree as libc::c_int) };
    set_mount_read_only(tree.as_raw_fd(), empty, libc::AT_EMPTY_PATH as libc::c_uint)?;
    // A FIFO opened without O_NONBLOCK would wait for its other end.
    let keep = libc::O_ACCMODE | libc::O_APPEND;
    let link = cstr(std::ffi::OsStr::new(&format!(
        "/proc/self/fd/{}",
        tree.as_raw_fd()
    )))?;
    // SAFETY: the path is NUL-terminated and outlives the call; the result is checked.
    let new = check(unsafe {
        libc::open(
            link.as_ptr(),
            (flags & keep) | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: just opened, owned by nothing else.
    let new = unsafe { OwnedFd::from_raw_fd(new) };
    // SAFETY: F_SETFL takes an integer.
    check(unsafe { libc::fcntl(new.as_raw_fd(), libc::F_SETFL, flags & !libc::O_CLOEXEC) })?;
    Ok(Reopened::Done(new))
}

/// Makes the mount at `target` and every mount below it read-only, in one call.
pub fn make_read_only_recursive(target: &Path) -> io::Result<()> {
    const AT_RECURSIVE: libc::c_uint = 0x8000;
    let target = cstr(target.as_os_str())?;
    set_mount_read_only(libc::AT_FDCWD, &target, AT_RECURSIVE)
}

/// `mount_setattr(at, path, flags, MOUNT_ATTR_RDONLY)`.
fn set_mount_read_only(
    at: libc::c_int,
    path: &std::ffi::CStr,
    flags: libc::c_uint,
) -> io::Result<()> {
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    const MOUNT_ATTR_RDONLY: u64 = 0x1;
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: the path is NUL-terminated and the attribute struct has the kernel's layout
    // (`struct mount_attr`, MOUNT_ATTR_SIZE_VER0 = 32 bytes); both outlive the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            at,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

pub fn pivot_root(new_root: &Path, put_old: &Path) -> io::Result<()> {
    let new_root = cstr(new_root.as_os_str())?;
    let put_old = cstr(put_old.as_os_str())?;
    // SAFETY: both pointers are NUL-terminated strings that outlive the call.
    let ret = unsafe { libc::syscall(libc::SYS_pivot_root, new_root.as_ptr(), put_old.as_ptr()) };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

pub fn umount_detach(target: &Path) -> io::Result<()> {
    let target = cstr(target.as_os_str())?;
    // SAFETY: the pointer is a NUL-terminated string that outlives the call.
    check(unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) }).map(drop)
}

/// Asks the kernel to send `signal` to this process when its parent dies.
pub fn die_with_parent(signal: libc::c_int) -> io::Result<()> {
    // SAFETY: PR_SET_PDEATHSIG takes an integer argument only.
    check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong, 0, 0, 0) })
        .map(drop)
}

/// Restores the default action of SIGPIPE (Rust's runtime ignores it), so that a process
/// writing to a closed pipe ends quietly, as `cat` does under `| head`.
pub fn default_sigpipe() {
    // SAFETY: signal() with SIG_DFL installs no handler; it only changes the disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Whether SIGCHLD is ignored, so that the kernel reaps children as they end (a warm
/// sandbox's first process, which never asks how its children ended), or back to the default
/// (their own processes, which do).
pub fn reap_children_automatically(yes: bool) {
    let action = if yes { libc::SIG_IGN } else { libc::SIG_DFL };
    // SAFETY: signal() with SIG_IGN or SIG_DFL installs no handler; it only changes the
    // disposition.
    unsafe {
        libc::signal(libc::SIGCHLD, action);
    }
}

/// Closes `fd`, owned elsewhere by a value this process (a child after `fork`) will never
/// drop.
pub fn close(fd: libc::c_int) {
    // SAFETY: close takes an integer; the caller guarantees no owner of `fd` runs again here.
    unsafe { libc::close(fd) };
}

/// Closes standard input, output and error, so that whoever reads the other ends of those
/// pipes sees their end.
pub fn close_stdio() {
    for fd in 0..=2 {
        close(fd);
    }
}

/// Whether `fd` is a pipe or a socket: nothing on a file system, so nothing whose mode or
/// owner could be changed through it.
pub fn is_pipe_or_socket(fd: libc::c_int) -> bool {
    // SAFETY: a zeroed stat is a valid out-value, and fstat fills at most that struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid out-pointer for the call.
    let ok = unsafe { libc::fstat(fd, &mut st) } == 0;
    let kind = st.st_mode & libc::S_IFMT;
    ok && (kind == libc::S_IFIFO || kind == libc::S_IFSOCK)
}

/// Leaves the caller's process group for one of its own, so that a terminal's signals (Ctrl-C,
/// window changes), which go to its foreground group, reach cordon alone and arrive here once,
/// passed on, instead of twice.
pub fn own_process_group() -> io::Result<()> {
    // SAFETY: setpgid takes integers only.
    check(unsafe { libc::setpgid(0, 0) }).map(drop)
}

pub fn set_no_new_privs() -> io::Result<()> {
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integer arguments only.
    check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }).map(drop)
}

/// Drops every capability: bounding set, ambient set, and the effective, permitted and
/// inheritable sets. Inside the user namespace the process holds all capabilities until
/// now; the command must hold none, even when cordon runs as root.
pub fn drop_all_capabilities() -> io::Result<()> {
    for cap in 0..64 {
        // SAFETY: PR_CAPBSET_DROP takes integer arguments only.
        let ret = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
        if ret < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                // Past the last capability this kernel knows.
                Some(libc::EINVAL) => break,
                // Without user namespaces an unprivileged process may not shrink its
                // bounding set. It then has no capabilities to lose, and `no_new_privs`,
                // set next, stops exec from granting any.
                Some(libc::EPERM) => break,
                _ => return Err(e),
            }
        }
    }
    // SAFETY: PR_CAP_AMBIENT takes integer arguments only.
    check(unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    })?;
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: header and data have the kernel's layout for version 3 (two data structs) and
    // outlive the call.
    let ret = unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr()) };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

pub fn sethostname(name: &str) -> io::Result<()> {
    // SAFETY: the pointer and length describe `name`, which outlives the call.
    check(unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) }).map(drop)
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Exited(i32),
    Signaled(i32),
}

impl Ended {
    /// The status a shell would report: the exit code, or 128 + the signal.
    pub fn code(self) -> i32 {
        match self {
            Ended::Exited(c) => c,
            Ended::Signaled(s) => 128 + s,
        }
    }
}

/// Waits for any child (`pid` = -1) or one child; `Ok(None)` when there are no children left.
pub fn wait(pid: libc::pid_t) -> io::Result<Option<(libc::pid_t, Ended)>> {
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid out-pointer for the duration of the call.
        let ret = unsafe { libc::waitpid(pid, &mut status, 0) };
        if ret < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::ECHILD) => return Ok(None),
                _ => return Err(e),
            }
        }
        let ended = if libc::WIFEXITED(status) {
            Ended::Exited(libc::WEXITSTATUS(status))
        } else if libc::WIFSIGNALED(status) {
            Ended::Signaled(libc::WTERMSIG(status))
        } else {
            continue;
        };
        return Ok(Some((ret, ended)));
    }
}

pub fn kill(pid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: kill takes integers only; a failure (the process is gone) is of no consequence.
    unsafe { libc::kill(pid, signal) };
}

pub fn getppid() -> libc::pid_t {
    // SAFETY: getppid cannot fail and takes no arguments.
    unsafe { libc::getppid() }
}

pub fn ids() -> (libc::uid_t, libc::gid_t) {
    // SAFETY: getuid and getgid cannot fail and take no arguments.
    unsafe { (libc::getuid(), libc::getgid()) }
}

/// Leaves the process with exactly this status, without running Rust's exit handlers (which
/// could flush buffers inherited across fork twice).
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit ends the process immediately; nothing after it runs.
    unsafe { libc::_exit(code) }
}

/// For `Command::pre_exec`: puts each `(fd, target)` pair's `fd` at `target` in the child,
/// without close-on-exec. Every source is first copied above all targets, so a source that
/// happens to sit at another pair's target is not overwritten before it is placed.
pub fn install_fds(cmd: &mut std::process::Command, pairs: &[(libc::c_int, libc::c_int)]) {
    use std::os::unix::process::CommandExt;
    let pairs = pairs.to_vec();
    let above = pairs.iter().map(|&(_, t)| t).max().unwrap_or(2) + 1;
    // SAFETY: the closure runs in the forked child before exec and only calls fcntl, dup2 and
    // close, which are async-signal-safe; it allocates nothing (the pairs were copied before).
    unsafe {
        cmd.pre_exec(move || {
            let mut copies = [0 as libc::c_int; 16];
            assert!(pairs.len() <= copies.len());
            for (copy, &(fd, _)) in copies.iter_mut().zip(&pairs) {
                *copy = check(libc::fcntl(fd, libc::F_DUPFD, above))?;
            }
            for (&copy, &(_, target)) in copies.iter().zip(&pairs) {
                check(libc::dup2(copy, target))?;
                libc::close(copy);
            }
            Ok(())
        });
    }
}

/// Marks every descriptor from 3 up close-on-exec, so the command starts with standard input,
/// output and error only. Whoever started cordon may have left descriptors open (a file the
/// rules would hide, a socket to a daemon); inherited, they would reach through every wall.
pub fn close_inherited_on_exec() -> io::Result<()> {
    // SAFETY: close_range takes integer arguments only; with CLOSE_RANGE_CLOEXEC it changes
    // descriptor flags and closes nothing.
    let done = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if done == 0 {
        return Ok(());
    }
    // Before Linux 5.11: one at a time. The directory's own descriptor is close-on-exec.
    let fds: Vec<libc::c_int> = std::fs::read_dir("/proc/self/fd")?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: F_GETFD/F_SETFD take integer arguments only; a descriptor closed meanwhile
        // (the directory's) just fails.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
    Ok(())
}

/// Takes ownership of an inherited file descriptor.
pub fn adopt_fd(fd: libc::c_int) -> io::Result<std::fs::File> {
    use std::os::fd::FromRawFd;
    // SAFETY: F_GETFD only inspects the descriptor; it fails if `fd` is not open.
    let flags = check(unsafe { libc::fcntl(fd, libc::F_GETFD) })?;
    // The channel is cordon's own: the command must not inherit it, or it could forge what
    // the helper reports.
    // SAFETY: F_SETFD takes integer arguments only.
    check(unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) })?;
    // SAFETY: the descriptor is open (checked above) and nothing else in this process owns
    // it: it was placed here by our parent for this purpose.
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

/// Brings up `lo` in a fresh network namespace (it starts down).
pub fn loopback_up() -> io::Result<()> {
    // SAFETY: socket takes integers only.
    let sock =
        check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: ifreq is plain data; zeroed is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq naming an interface and outlives both calls; the
    // union field written is the one SIOCSIFFLAGS reads.
    let result = unsafe {
        check(libc::ioctl(sock, libc::SIOCGIFFLAGS as _, &mut req)).and_then(|_| {
            req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            check(libc::ioctl(sock, libc::SIOCSIFFLAGS as _, &mut req))
        })
    };
    // SAFETY: `sock` is a descriptor this function opened and no longer uses.
    unsafe { libc::close(sock) };
    result.map(drop)
}

/// The process signals are passed on to (0: none yet).
static FORWARD_TO: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Whether signals go to the process group `FORWARD_TO` leads rather than to it alone.
static FORWARD_GROUP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn forward(signal: libc::c_int) {
    let pid = FORWARD_TO.load(std::sync::atomic::Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe and takes integers only; a negative pid names a
        // process group.
        unsafe {
            // Until the command has made its own session there is no such group yet.
            if FORWARD_GROUP.load(std::sync::atomic::Ordering::Relaxed)
                && libc::kill(-pid, signal) == 0
            {
                return;
            }
            libc::kill(pid, signal);
        }
    }
}

/// Signals a user or an agent sends to end or poke a command. They are passed down the chain
/// cordon → helper → PID 1 → command instead of killing the middle of it. SIGWINCH, which
/// ends nothing, tells a program on a terminal cordon made for it (`cordon exec`) that the
/// window was resized: the command has no controlling terminal, so only cordon hears it.
pub const FORWARDED: [libc::c_int; 7] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGWINCH,
];

/// Ctrl-Z on the terminal cordon runs in the foreground of. Stopping cordon would not stop the
/// command, which runs in a session of its own, and a `cordon shell` waiting for cordon would
/// wait for ever: cordon says so instead, and the command goes on.
extern "C" fn no_suspend(_: libc::c_int) {
    const SAID: &[u8] =
        b"\r\ncordon: a command in the sandbox cannot be suspended; Ctrl-C stops it\r\n";
    // SAFETY: write is async-signal-safe; the buffer is a static byte string.
    unsafe {
        libc::write(2, SAID.as_ptr().cast(), SAID.len());
    }
}

/// Sets `handler` for `signal`, restarting interrupted calls.
fn handle(signal: libc::c_int, handler: extern "C" fn(libc::c_int)) -> io::Result<()> {
    // SAFETY: a zeroed sigaction is a valid value; we set the handler (an extern "C" fn that
    // only does async-signal-safe work) and SA_RESTART, and pass valid pointers.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler as *const () as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        check(libc::sigaction(signal, &action, std::ptr::null_mut())).map(drop)
    }
}

/// From now on, passes the signals in [`FORWARDED`] on to `pid`, and answers Ctrl-Z itself.
pub fn forward_signals_to(pid: libc::pid_t) -> io::Result<()> {
    FORWARD_TO.store(pid, std::sync::atomic::Ordering::Relaxed);
    for signal in FORWARDED {
        handle(signal, forward)?;
    }
    handle(libc::SIGTSTP, no_suspend)
}

/// From now on, passes the signals in [`FORWARDED`] on to the process group `pid` leads (the
/// command, in the session it makes), as a terminal would: `sh -c 'prog'` that does not exec
/// `prog` still lets `prog` hear Ctrl-C and window changes.
pub fn forward_signals_to_group(pid: libc::pid_t) -> io::Result<()> {
    FORWARD_GROUP.store(true, std::sync::atomic::Ordering::Relaxed);
    forward_signals_to(pid)
}

/// Starts a new session: the command has no controlling terminal, so it cannot push input
/// into the user's terminal, and signals reach it only through cordon.
pub fn new_session() -> io::Result<()> {
    // SAFETY: setsid takes no arguments.
    check(unsafe { libc::setsid() }).map(drop)
}

/// Makes standard input, a terminal no session holds, this session's controlling terminal.
/// Never steals one another session holds.
pub fn take_terminal() -> io::Result<()> {
    // SAFETY: isatty and TIOCSCTTY take a descriptor and an integer only; an argument of 0
    // asks for no stealing.
    unsafe {
        if libc::isatty(0) != 1 {
            return Err(io::Error::other("standard input is not a terminal"));
        }
        check(libc::ioctl(0, libc::TIOCSCTTY as _, 0)).map(drop)
    }
}

/// The Landlock ABI version the kernel offers, or the reason there is none.
pub fn landlock_abi() -> io::Result<i64> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the call only returns
    // a number.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Whether a child process can create a user namespace (tried in a throw-away child).
pub fn can_create_user_namespace() -> io::Result<bool> {
    // SAFETY: the child only calls unshare and _exit, both async-signal-safe, so forking here
    // is sound even if the caller has other threads.
    let pid = check(unsafe { libc::fork() })?;
    if pid == 0 {
        // SAFETY: see above.
        let ok = unsafe { libc::unshare(libc::CLONE_NEWUSER) } == 0;
        exit_now(if ok { 0 } else { 1 });
    }
    Ok(matches!(wait(pid)?, Some((_, Ended::Exited(0)))))
}

/// Whether seccomp filters are available (`PR_GET_SECCOMP` answers).
pub fn seccomp_available() -> bool {
    // SAFETY: PR_GET_SECCOMP takes no further arguments.
    unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 }
}

/// What `setrlimit` takes to name a limit: glibc gives it a type of its own, musl an int. (The
/// agents' hook, `cordon-hook`, is built against musl.)
#[cfg(target_env = "gnu")]
pub type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
pub type Resource = libc::c_int;

/// Sets a hard and soft resource limit.
pub fn set_rlimit(resource: Resource, value: u64) -> io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: `limit` is a valid rlimit that outlives the call.
    check(unsafe { libc::setrlimit(resource, &limit) }).map(drop)
}

/// Makes this process the reaper of every orphan below it, so that a command's background
/// processes come back to it instead of escaping to the system's init.
pub fn become_subreaper() -> io::Result<()> {
    // SAFETY: PR_SET_CHILD_SUBREAPER takes integer arguments only.
    check(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }).map(drop)
}

/// The process the alarm kills, and whether it went off.
static ALARM_TARGET: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
static ALARM_FIRED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_alarm(_signal: libc::c_int) {
    ALARM_FIRED.store(true, std::sync::atomic::Ordering::Relaxed);
    let pid = ALARM_TARGET.load(std::sync::atomic::Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe and takes integers only.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// Kills `pid` with SIGKILL when SIGALRM arrives: after `after`, if given, or whenever
/// something else raises SIGALRM (the parent's death, see [`die_with_parent`]).
pub fn kill_on_alarm(pid: libc::pid_t, after: Option<std::time::Duration>) -> io::Result<()> {
    ALARM_FIRED.store(false, std::sync::atomic::Ordering::Relaxed);
    ALARM_TARGET.store(pid, std::sync::atomic::Ordering::Relaxed);
    // SAFETY: a zeroed sigaction is a valid value; the handler only does async-signal-safe
    // work, and the pointers are valid for the call.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_alarm as *const () as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        check(libc::sigaction(
            libc::SIGALRM,
            &action,
            std::ptr::null_mut(),
        ))?;
    }
    let Some(after) = after else { return Ok(()) };
    // A zero timer would mean "off"; the shortest real one is a microsecond.
    let usec = after.subsec_micros().max(u32::from(after.as_secs() == 0));
    let timer = libc::itimerval {
        it_interval: libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
        it_value: libc::timeval {
            // Not named by type: musl's are changing width. 68 years is as good as forever,
            // and fits either.
            tv_sec: after.as_secs().min(i32::MAX as u64) as _,
            tv_usec: usec as _,
        },
    };
    // SAFETY: `timer` is a valid itimerval that outlives the call; the old value is not
    // asked for.
    check(unsafe { libc::setitimer(libc::ITIMER_REAL, &timer, std::ptr::null_mut()) }).map(drop)
}

/// Stops a pending alarm (the run ended before it).
pub fn disarm_alarm() {
    let off = libc::itimerval {
        it_interval: libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
        it_value: libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
    };
    // SAFETY: `off` is a valid itimerval that outlives the call.
    unsafe { libc::setitimer(libc::ITIMER_REAL, &off, std::ptr::null_mut()) };
    ALARM_TARGET.store(0, std::sync::atomic::Ordering::Relaxed);
}

/// Whether the alarm of [`kill_on_alarm`] went off.
pub fn alarm_fired() -> bool {
    ALARM_FIRED.load(std::sync::atomic::Ordering::Relaxed)
}

/// This process's children (read from `/proc`, so it sees orphans that were re-parented to
/// a subreaper too).
pub fn children() -> Vec<libc::pid_t> {
    // SAFETY: getpid cannot fail and takes no arguments.
    let me = unsafe { libc::getpid() };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter(|pid| {
            // The parent is the second field after the command name, which may itself hold
            // spaces and parentheses; it ends at the last ')'.
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    let rest = &s[s.rfind(')')? + 1..];
                    rest.split_whitespace().nth(1)?.parse::<libc::pid_t>().ok()
                })
                == Some(me)
        })
        .collect()
}

/// `dup()`: a second descriptor for the same open file, close-on-exec.
pub fn dup(fd: libc::c_int) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: F_DUPFD_CLOEXEC takes integer arguments only.
    let new = check(unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) })?;
    // SAFETY: `new` was just opened by this call and is owned by nothing else.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(new) })
}

/// A second descriptor for the same open file that an `execve` passes on (not close-on-exec),
/// numbered 3 or higher.
pub fn dup_inheritable(fd: libc::c_int) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: F_DUPFD takes integer arguments only.
    let new = check(unsafe { libc::fcntl(fd, libc::F_DUPFD, 3) })?;
    // SAFETY: `new` was just opened by this call and is owned by nothing else.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(new) })
}

/// `dup2()`: makes `target` refer to what `fd` refers to (without close-on-exec).
pub fn dup2(fd: libc::c_int, target: libc::c_int) -> io::Result<()> {
    // SAFETY: dup2 takes integer arguments only; replacing `target` is the point.
    check(unsafe { libc::dup2(fd, target) }).map(drop)
}

/// Whether two descriptors lead to the same file (stdout and stderr into one pipe, say).
pub fn same_file(a: libc::c_int, b: libc::c_int) -> bool {
    let stat = |fd| {
        // SAFETY: a zeroed stat is a valid out-value, and fstat writes at most that struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `st` is a valid out-pointer for the call.
        (unsafe { libc::fstat(fd, &mut st) } == 0).then_some((st.st_dev, st.st_ino))
    };
    matches!((stat(a), stat(b)), (Some(x), Some(y)) if x == y)
}

/// Whether `fd` is a regular file (output redirected to one, say).
pub fn is_regular_file(fd: libc::c_int) -> bool {
    // SAFETY: a zeroed stat is a valid out-value, and fstat writes at most that struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid out-pointer for the call.
    let ok = unsafe { libc::fstat(fd, &mut st) } == 0;
    ok && (st.st_mode & libc::S_IFMT) == libc::S_IFREG
}

/// Whether `fd` is a terminal or `/dev/null`: output nobody reads through a pipe.
pub fn is_terminal_or_null(fd: libc::c_int) -> bool {
    // SAFETY: isatty takes an integer only.
    if unsafe { libc::isatty(fd) } == 1 {
        return true;
    }
    // SAFETY: as in `same_file`.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid out-pointer for the call.
    let ok = unsafe { libc::fstat(fd, &mut st) } == 0;
    ok && (st.st_mode & libc::S_IFMT) == libc::S_IFCHR && st.st_rdev == libc::makedev(1, 3)
}

/// Waits until one of `fds` can be read (or has hung up); returns which can.
pub fn poll_readable(fds: &[libc::c_int]) -> io::Result<Vec<bool>> {
    let mut polled: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        // SAFETY: `polled` is a valid array of that many pollfd structs for the call.
        let ret = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, -1) };
        if ret >= 0 {
            return Ok(polled.iter().map(|p| p.revents != 0).collect());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// Whether the running kernel is at least `major.minor`.
pub fn kernel_at_least(major: u32, minor: u32) -> bool {
    // SAFETY: a zeroed utsname is a valid out-value, and uname fills at most that struct.
    let mut name: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `name` is a valid out-pointer for the call.
    if unsafe { libc::uname(&mut name) } != 0 {
        return false;
    }
    let release: String = name
        .release
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8 as char)
        .collect();
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    found >= (major, minor)
}

/// Whether this kernel can hand a process's system calls to a supervisor: the
/// user-notification action, and `pidfd_open` and `pidfd_getfd` to take the caller's socket.
pub fn user_notification_available() -> bool {
    let action: u32 = libc::SECCOMP_RET_USER_NOTIF;
    // SAFETY: SECCOMP_GET_ACTION_AVAIL reads one u32 through a valid pointer.
    let notify = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_ACTION_AVAIL,
            0,
            &action as *const u32,
        )
    } == 0;
    // An invalid descriptor tells a missing call (ENOSYS) from a present one (EBADF).
    // SAFETY: integer arguments only; -1 is never a valid descriptor.
    let getfd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, -1, -1, 0) } == 0
        || io::Error::last_os_error().raw_os_error() != Some(libc::ENOSYS);
    notify && getfd
}

/// Installs `program` as a seccomp filter of this thread with a new listener, and returns the
/// listener. A killable wait (Linux 5.19+) keeps a notified call from being interrupted and
/// restarted by ordinary signals once the supervisor has read it; older kernels get the
/// plain wait. Needs `no_new_privs`.
pub fn install_notifying_filter(
    program: &[seccompiler::sock_filter],
) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let fprog = libc::sock_fprog {
        len: u16::try_from(program.len())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?,
        // seccompiler's sock_filter has the kernel's layout, as libc's does.
        filter: program.as_ptr() as *mut libc::sock_filter,
    };
    let install = |flags: libc::c_ulong| {
        // SAFETY: `fprog` points at `program`, which outlives the call; the kernel copies it.
        unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                flags,
                &fprog as *const libc::sock_fprog,
            )
        }
    };
    let mut ret = install(
        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV,
    );
    if ret < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
        ret = install(libc::SECCOMP_FILTER_FLAG_NEW_LISTENER);
    }
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the call returned a new descriptor, owned by nothing else.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(ret as libc::c_int) })
}

/// Asks the kernel (6.6+) to switch straight between a notified caller and its supervisor
/// on one CPU, rather than wake one on another CPU each way; what else could be done meanwhile
/// is nothing, as the caller waits for the answer.
pub fn wake_synchronously(listener: libc::c_int) -> io::Result<()> {
    const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: u64 = 1;
    // SAFETY: SET_FLAGS takes its flags by value.
    check(unsafe {
        libc::ioctl(
            listener,
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
            SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
        )
    })
    .map(drop)
}

/// One system call a supervised process is waiting in.
#[derive(Debug, Clone, Copy)]
pub struct Notification {
    pub id: u64,
    /// The calling thread, in the supervisor's PID namespace.
    pub pid: libc::pid_t,
    pub nr: libc::c_int,
    pub args: [u64; 6],
}

/// Waits for the next notified call on `listener`. `Ok(None)`: the call was gone before it
/// could be read (its process was killed).
pub fn receive_notification(listener: libc::c_int) -> io::Result<Option<Notification>> {
    // SAFETY: a zeroed seccomp_notif is what the kernel requires as input.
    let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: `n` is a valid, zeroed seccomp_notif for the kernel to fill.
    let ret = unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut n) };
    if ret < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::EINTR) => Ok(None),
            _ => Err(e),
        };
    }
    Ok(Some(Notification {
        id: n.id,
        pid: n.pid as libc::pid_t,
        nr: n.data.nr,
        args: n.data.args,
    }))
}

/// Whether the call `id` still waits: its thread has not died and its number not been reused.
pub fn notification_valid(listener: libc::c_int, id: u64) -> bool {
    // SAFETY: ID_VALID reads one u64 through a valid pointer.
    unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0 }
}

/// Ends the call `id` with `result`: a return value, or an errno.
pub fn answer_notification(listener: libc::c_int, id: u64, result: Result<i64, i32>) {
    let (val, error) = match result {
        Ok(v) => (v, 0),
        Err(errno) => (0, -errno),
    };
    let mut resp = libc::seccomp_notif_resp {
        id,
        val,
        error,
        flags: 0,
    };
    // SAFETY: `resp` is a valid seccomp_notif_resp for the kernel to read. A failure means
    // the caller is gone, which leaves nothing to answer.
    unsafe {
        libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND, &mut resp);
    }
}

/// Reads `len` bytes at `addr` in the process (thread) `pid`.
pub fn read_process_memory(pid: libc::pid_t, addr: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    if len == 0 {
        return Ok(buf);
    }
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: `local` covers `buf`, which is `len` bytes long and outlives the call; the
    // remote address is only read by the kernel, in the other process.
    let got = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    if got as usize != len {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    Ok(buf)
}

/// `connect()` with a socket address given as the raw bytes a caller passed.
pub fn connect_raw(fd: libc::c_int, address: &[u8]) -> io::Result<()> {
    // SAFETY: a zeroed sockaddr_storage is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    if address.len() > std::mem::size_of_val(&storage) {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: `address` fits in `storage` (checked above); the two do not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(
            address.as_ptr(),
            (&mut storage as *mut libc::sockaddr_storage).cast::<u8>(),
            address.len(),
        );
    }
    // SAFETY: `storage` holds `address.len()` valid bytes and outlives the call.
    let ret = unsafe {
        libc::connect(
            fd,
            (&storage as *const libc::sockaddr_storage).cast(),
            address.len() as libc::socklen_t,
        )
    };
    check(ret).map(drop)
}

/// Every listening Unix socket in this network namespace, with its name and bound file, from
/// the kernel's socket diagnostics (`NETLINK_SOCK_DIAG`).
pub fn listening_unix_sockets_here() -> io::Result<Vec<super::supervise::Listening>> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: integer arguments only.
    let raw = check(unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    })?;
    // SAFETY: `raw` was just opened and is owned by nothing else.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    let request = super::supervise::unix_diag_request();
    // SAFETY: `request` is a valid buffer of that length; with no address the kernel is the
    // peer of a netlink socket.
    let sent = unsafe { libc::send(sock.as_raw_fd(), request.as_ptr().cast(), request.len(), 0) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut found = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        // SAFETY: `buf` is a valid buffer of that length for the kernel to fill.
        let got = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if got < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(e);
        }
        match super::supervise::parse_unix_diag(&buf[..got as usize], &mut found)? {
            true => return Ok(found),
            false => continue,
        }
    }
}
