//! Building the sandbox: its first process and the command's last steps.
//!
//! Order: one `clone` into new user, mount, PID, IPC, UTS (and network) namespaces makes PID 1
//! (from `cordon run` itself, or from a fresh single-threaded copy of cordon, the helper, when
//! the caller has threads) → PID 1 maps its own uid/gid, builds the mount view (read-only root,
//! private /tmp and /dev, fresh /proc, writable binds, read-only paths inside them), pivots
//! into it and forks the command → the command drops every capability, sets `no_new_privs`,
//! restricts itself with Landlock and seccomp, and execs. PID 1 stays to reap and to pass the
//! command's status back. Without namespaces the helper runs `fallback.rs` instead.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use super::landlock_rules::{self, Reads, Walls};
use super::seccomp::Extra;
use super::sys;
use super::{ERROR_FD, GUARD_FD, SPEC_FD, WARM_FD};
use crate::{Isolation, NetworkMode, SandboxSpec, exit};

/// A failed step: the exit code to use, the step, and the detail.
pub(super) struct Failure(pub u8, pub &'static str, pub String);

impl Failure {
    pub(super) fn io(step: &'static str, e: std::io::Error, hint: &str) -> Self {
        let hint = if hint.is_empty() {
            String::new()
        } else {
            format!(" ({hint})")
        };
        Failure(exit::SETUP_FAILED, step, format!("{e}{hint}"))
    }
}

/// The channel back to cordon: one line per message, tab-separated, see [`super::Message`].
pub(super) type Channel = Option<std::fs::File>;

/// Sends one message line (`kind`, then fields) to cordon.
pub(super) fn tell(channel: &mut Channel, kind: &str, fields: &[&str]) {
    if let Some(c) = channel.as_mut() {
        let mut line = kind.to_string();
        for f in fields {
            line.push('\t');
            line.push_str(&f.replace(['\n', '\t'], " "));
        }
        line.push('\n');
        let _ = c.write_all(line.as_bytes());
    }
}

/// The status to exit with after the process waited for ended as `ended`. A signal is also
/// told over the channel: the exit code alone cannot tell `kill -INT` from `exit 130`.
pub(super) fn code_of(errors: &mut Channel, ended: sys::Ended) -> i32 {
    if let sys::Ended::Signaled(s) = ended {
        tell(errors, "signaled", &[&s.to_string()]);
    }
    ended.code()
}

pub(super) fn report(errors: &mut Channel, f: &Failure) -> ! {
    tell(errors, "error", &[&f.0.to_string(), f.1, &f.2]);
    sys::exit_now(i32::from(f.0))
}

/// Entry point, called by `cordon` when its first argument is [`super::HELPER_ARG`].
pub fn helper_main(args: &[OsString]) -> ! {
    let mut errors = sys::adopt_fd(ERROR_FD).ok();
    // `warm`: the sandbox serves commands sent over the socket on WARM_FD, and keeps their
    // guards from the one on GUARD_FD (`warm.rs`).
    let (warm, guards) = match args.get(1).and_then(|a| a.to_str()) {
        Some(super::warm::ARG) => match (sys::adopt_fd(WARM_FD), sys::adopt_fd(GUARD_FD)) {
            (Ok(w), Ok(g)) => (Some(w.into()), Some(g.into())),
            (Err(e), _) | (_, Err(e)) => report(
                &mut errors,
                &Failure::io("warm", e, "no socket to serve on or for the guards"),
            ),
        },
        _ => (None, None),
    };
    let entered = read_spec(args)
        .and_then(|(spec, parent)| enter(spec, parent, &mut errors, None, warm, guards));
    match entered {
        Ok(never) => match never {},
        Err(f) => report(&mut errors, &f),
    }
}

/// In a process forked from a single-threaded cordon (no exec): the same setup, with the spec
/// already in memory. With `without_namespaces`, the reason they are unavailable, it goes
/// straight to Landlock alone.
pub(super) fn forked(
    spec: SandboxSpec,
    parent: i32,
    errors: std::fs::File,
    without_namespaces: Option<String>,
) -> ! {
    let mut errors = Some(errors);
    match enter(spec, parent, &mut errors, without_namespaces, None, None) {
        Ok(never) => match never {},
        Err(f) => report(&mut errors, &f),
    }
}

pub(super) enum Never {}

fn read_spec(args: &[OsString]) -> Result<(SandboxSpec, i32), Failure> {
    let parent: i32 = args
        .first()
        .and_then(|a| a.to_str())
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| {
            Failure(
                exit::SETUP_FAILED,
                "arguments",
                "the helper is run by cordon only".into(),
            )
        })?;
    let mut input = sys::adopt_fd(SPEC_FD).map_err(|e| Failure::io("read spec", e, ""))?;
    let mut raw = Vec::new();
    input
        .read_to_end(&mut raw)
        .map_err(|e| Failure::io("read spec", e, ""))?;
    drop(input);
    let spec = serde_json::from_slice(&raw)
        .map_err(|e| Failure(exit::SETUP_FAILED, "read spec", e.to_string()))?;
    Ok((spec, parent))
}

fn enter(
    spec: SandboxSpec,
    parent: i32,
    errors: &mut Option<std::fs::File>,
    without_namespaces: Option<String>,
    warm: Option<std::os::fd::OwnedFd>,
    mut guards: Option<std::os::fd::OwnedFd>,
) -> Result<Never, Failure> {
    // A warm sandbox's helper outlives cordon on purpose: it ends the sandbox itself when
    // cordon's end of the guards' socket closes, then undoes what its commands planted
    // (`warm::keep`).
    if guards.is_none() {
        sys::die_with_parent(libc::SIGKILL).map_err(|e| Failure::io("die-with-parent", e, ""))?;
    }
    sys::own_process_group().map_err(|e| Failure::io("setpgid", e, ""))?;
    if sys::getppid() != parent {
        return Err(Failure(
            exit::SETUP_FAILED,
            "die-with-parent",
            "cordon exited before the sandbox started".into(),
        ));
    }

    // Limits that hold for the whole sandbox: join its control groups before anything in it
    // exists.
    for procs in &spec.cgroups {
        std::fs::write(procs, "0")
            .map_err(|e| Failure::io("cgroup", e, &procs.display().to_string()))?;
    }

    let warm_refused = |why: &str| {
        Failure(
            exit::SETUP_FAILED,
            "warm sandbox",
            format!("{why}; a warm sandbox needs namespaces, run each command on its own instead"),
        )
    };
    if let Some(why) = without_namespaces {
        if warm.is_some() {
            return Err(warm_refused(&why));
        }
        return super::fallback::run(spec, errors, &why);
    }
    if spec.isolation == Isolation::LandlockOnly {
        if warm.is_some() {
            return Err(warm_refused("asked for Landlock alone"));
        }
        return super::fallback::run(spec, errors, "asked for Landlock alone");
    }
    let warm_asked = warm.is_some();
    match start_namespaced(&spec, errors, |_| Ok(()), warm, &mut guards)? {
        Started::Unavailable(e) => {
            if warm_asked {
                return Err(warm_refused(&format!("clone: {e}")));
            }
            if spec.isolation == Isolation::Namespaces {
                return Err(namespaces_unavailable(e));
            }
            super::fallback::run(spec, errors, &format!("clone: {e}"))
        }
        Started::Init(init) => {
            if let Some(guards) = guards {
                super::warm::keep(init, guards)
            }
            let _ = sys::forward_signals_to(init);
            sys::kill_on_alarm(init, spec.limits.timeout)
                .map_err(|e| Failure::io("timeout", e, ""))?;
            let code = match sys::wait(init) {
                Ok(Some((_, ended))) => code_of(errors, ended),
                _ => i32::from(exit::SETUP_FAILED),
            };
            if sys::alarm_fired() {
                tell(errors, "timed-out", &[]);
                sys::exit_now(i32::from(exit::TIMEOUT));
            }
            sys::exit_now(code)
        }
    }
}

/// The failure to report when namespaces were required and cannot be made.
pub(super) fn namespaces_unavailable(e: std::io::Error) -> Failure {
    Failure::io(
        "unshare",
        e,
        "user namespaces are unavailable here; on Ubuntu 24.04 AppArmor restricts them \
         (sysctl kernel.apparmor_restrict_unprivileged_userns=0), inside Docker they need \
         --security-opt seccomp=unconfined",
    )
}

/// How starting the namespaced sandbox went.
pub(super) enum Started {
    /// Its first process (PID 1 inside), a child of the caller.
    Init(libc::pid_t),
    /// The kernel refused the namespaces.
    Unavailable(std::io::Error),
}

/// Creates the sandbox's first process, PID 1 of its own user, mount, PID, IPC, UTS (and
/// network) namespaces, in one `clone`, so no process sits between the caller and it.
/// `before_go` runs in the caller once that process exists and before it does anything (to
/// put it in control groups); the process waits for it, which also tells it that the caller
/// is still alive after it has asked to die with it. `outside_only` is closed in that process:
/// it stays the caller's alone.
///
/// Only for a single-threaded caller: the child goes on running the caller's code.
pub(super) fn start_namespaced(
    spec: &SandboxSpec,
    channel: &mut Channel,
    before_go: impl FnOnce(libc::pid_t) -> Result<(), Failure>,
    warm: Option<std::os::fd::OwnedFd>,
    outside_only: &mut Option<std::os::fd::OwnedFd>,
) -> Result<Started, Failure> {
    // Inside the new user namespace these read as the overflow ids until the maps exist.
    let (uid, gid) = sys::ids();
    let mut flags = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS;
    if spec.network != NetworkMode::Host {
        flags |= libc::CLONE_NEWNET;
    }
    // With Unix sockets allowed, PID 1 settles every `connect` (`supervise.rs`). A kernel
    // without user notification gets the older cover instead: which Unix sockets exist is
    // known only in the host's network namespace, so it is read before leaving, to hide all
    // but the allowed ones.
    let supervised = !spec.unix_sockets.is_empty() && super::supervise::available(true);
    let host_sockets = if spec.unix_sockets.is_empty() || supervised {
        Vec::new()
    } else {
        bound_unix_sockets()
    };
    let (mut go_reader, mut go_writer) = std::io::pipe().map_err(|e| Failure::io("pipe", e, ""))?;
    match sys::clone_into_namespaces(flags) {
        Err(e) => Ok(Started::Unavailable(e)),
        Ok(None) => {
            drop((go_writer, outside_only.take()));
            let result = sys::die_with_parent(libc::SIGKILL)
                .map_err(|e| Failure::io("die-with-parent", e, ""))
                .and_then(|()| sys::own_process_group().map_err(|e| Failure::io("setpgid", e, "")))
                .and_then(|()| {
                    let mut go = [0u8; 1];
                    match go_reader.read(&mut go) {
                        Ok(1) => Ok(()),
                        // The caller is gone, or gave up on us: nothing to run for.
                        _ => sys::exit_now(i32::from(exit::SETUP_FAILED)),
                    }
                })
                .and_then(|()| {
                    drop(go_reader);
                    write_id_maps(uid, gid)
                })
                .and_then(|()| init(spec, supervised, &host_sockets, channel, warm));
            match result {
                Ok(never) => match never {},
                Err(f) => report(channel, &f),
            }
        }
        Ok(Some(pid)) => {
            drop(go_reader);
            if let Err(f) = before_go(pid) {
                sys::kill(pid, libc::SIGKILL);
                let _ = sys::wait(pid);
                return Err(f);
            }
            go_writer
                .write_all(b"g")
                .map_err(|e| Failure::io("start", e, ""))?;
            Ok(Started::Init(pid))
        }
    }
}

/// Listens on the proxy ports of this network namespace's loopback and hands the listening
/// sockets to cordon's proxy, which accepts on them from the host's namespace. Nothing else
/// in here can take those ports afterwards, and the command is never given the sockets.
fn hand_ports_to_proxy(endpoint: &crate::ProxyEndpoint) -> Result<(), Failure> {
    let Some(socket) = &endpoint.socket else {
        return Err(Failure(
            exit::SETUP_FAILED,
            "proxy",
            "no socket to reach cordon's proxy through".into(),
        ));
    };
    let listen = |port: u16| {
        std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port))
            .map_err(|e| Failure::io("proxy", e, &format!("listen on 127.0.0.1:{port}")))
    };
    let listeners = [listen(endpoint.http_port)?, listen(endpoint.socks_port)?];
    let channel = std::os::unix::net::UnixStream::connect(socket)
        .map_err(|e| Failure::io("proxy", e, &socket.display().to_string()))?;
    crate::handoff::send(&channel, &listeners)
        .map_err(|e| Failure::io("proxy", e, "handing the ports over"))
}

/// Serves `--publish`: a process of its own in this network namespace that, for each byte the
/// host side sends over `socket`, sends back a fresh TCP socket made here. It runs only this
/// loop, holds nothing else of cordon's, and ends with the sandbox (its PID namespace).
fn make_inbound_sockets(socket: &Path, errors: &mut Option<std::fs::File>) -> Result<(), Failure> {
    use std::io::Read;
    let mut channel = std::os::unix::net::UnixStream::connect(socket)
        .map_err(|e| Failure::io("publish", e, &socket.display().to_string()))?;
    if sys::fork()
        .map_err(|e| Failure::io("fork", e, ""))?
        .is_some()
    {
        return Ok(());
    }
    // The setup's error channel must close when the command starts, not when this ends.
    drop(errors.take());
    let _ = sys::die_with_parent(libc::SIGKILL);
    let mut asked = [0u8; 1];
    while let Ok(1) = channel.read(&mut asked) {
        let made = rustix::net::socket_with(
            rustix::net::AddressFamily::INET,
            rustix::net::SocketType::STREAM,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        );
        let sent = match made {
            Ok(fd) => crate::handoff::send(&channel, &[fd]),
            // None to give: the host side sees an empty handoff and drops its connection.
            Err(_) => crate::handoff::send::<std::os::fd::OwnedFd>(&channel, &[]),
        };
        if sent.is_err() {
            break;
        }
    }
    sys::exit_now(0)
}

/// The paths of the Unix sockets bound in this network namespace (from `/proc/net/unix`;
/// its last column is the path, or `@name` for an abstract socket).
fn bound_unix_sockets() -> Vec<PathBuf> {
    let Ok(table) = std::fs::read_to_string("/proc/net/unix") else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = table
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(7))
        .filter(|p| p.starts_with('/'))
        .map(PathBuf::from)
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

fn write_id_maps(uid: u32, gid: u32) -> Result<(), Failure> {
    let write = |file: &str, text: String| {
        std::fs::write(file, text).map_err(|e| Failure::io("uid/gid map", e, file))
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1"))
}

fn init(
    spec: &SandboxSpec,
    supervised: bool,
    host_sockets: &[PathBuf],
    errors: &mut Option<std::fs::File>,
    warm: Option<std::os::fd::OwnedFd>,
) -> Result<Never, Failure> {
    if spec.network != NetworkMode::Host {
        sys::loopback_up().map_err(|e| Failure::io("loopback", e, ""))?;
    }
    if let NetworkMode::Proxy(endpoint) = &spec.network {
        // Before the mount view: the proxy's socket is a host path the view does not show.
        hand_ports_to_proxy(endpoint)?;
    }
    if let Some(socket) = &spec.inbound {
        // Also before the mount view, for the same reason.
        make_inbound_sockets(socket, errors)?;
    }
    let writable_stdio = reopen_stdio_read_only()?;
    build_mount_view(spec, host_sockets)?;
    for (fd, path) in writable_stdio {
        tell(
            errors,
            "weaker",
            &[&format!(
                "descriptor {fd} is the host file {} open for writing; its mode, owner and times can be changed through it",
                path.display()
            )],
        );
    }
    if !spec.unix_sockets.is_empty() && !supervised {
        tell(
            errors,
            "weaker",
            &[
                "Unix sockets other than the allowed ones are hidden as the host listed them at the start; ones bound later, or in other network namespaces, stay reachable",
            ],
        );
    }
    let _ = sys::sethostname("cordon");
    if let Some(control) = warm {
        super::warm::serve(spec, control, errors);
    }
    // The command's process sends its filter's listener back over this pair.
    let pair = if supervised {
        let pair = std::os::unix::net::UnixStream::pair()
            .map_err(|e| Failure::io("socketpair", e, "for the connect supervisor"))?;
        Some((pair, reachable(spec)))
    } else {
        None
    };
    let command = match sys::fork().map_err(|e| Failure::io("fork", e, ""))? {
        Some(pid) => pid,
        None => match exec_command(spec, errors, pair.map(|((_, theirs), _)| theirs), None) {
            Ok(never) => match never {},
            Err(f) => report(errors, &f),
        },
    };
    let _ = sys::forward_signals_to_group(command);
    if let Some(((ours, theirs), reachable)) = pair {
        drop(theirs);
        super::supervise::start(&ours, reachable);
    }
    // This process keeps its end of the channel to say how the command ended; the parent
    // reads the channel to its end, which comes when this process exits with the command.
    loop {
        match sys::wait(-1) {
            Ok(Some((pid, ended))) if pid == command => sys::exit_now(code_of(errors, ended)),
            Ok(Some(_)) => continue,
            Ok(None) | Err(_) => sys::exit_now(i32::from(exit::SETUP_FAILED)),
        }
    }
}

/// What PID 1's supervisor lets the command reach by path.
fn reachable(spec: &SandboxSpec) -> super::supervise::Reachable {
    use std::os::unix::fs::MetadataExt;
    let bound_inside = if spec.network == NetworkMode::Host {
        // This PID namespace's processes are all the command's (and this one's).
        super::supervise::BoundInside::HeldUnder(1)
    } else {
        super::supervise::BoundInside::OwnNetwork
    };
    super::supervise::Reachable::before_start(
        &spec.unix_sockets,
        std::fs::metadata("/tmp").ok().map(|m| m.dev()),
        bound_inside,
    )
}

const RO_FLAGS: libc::c_ulong = libc::MS_NOSUID | libc::MS_NODEV;

fn mount_step(step: &'static str, r: std::io::Result<()>, what: &Path) -> Result<(), Failure> {
    r.map_err(|e| Failure(exit::SETUP_FAILED, step, format!("{}: {e}", what.display())))
}

/// `/newroot` + an absolute host path.
fn inside(path: &Path) -> PathBuf {
    Path::new("/newroot").join(path.strip_prefix("/").unwrap_or(path))
}

/// A descriptor the command inherits that leads to a host file (a terminal, `/dev/null`, a
/// file given as standard input) is on the host's own writable mount: `fchmod(0, …)` or a
/// `chmod /proc/self/fd/0` would change the host's file, which neither Landlock nor the
/// read-only view sees. So each is opened again, before the view is built (this namespace's
/// copy of the host's mounts still shows it by path), through a detached read-only clone of
/// its mount: reads and writes go on, metadata changes fail with EROFS. Pipes and sockets are
/// no host file and stay. A regular file open for writing cannot be written through a
/// read-only mount; cordon passes standard output and error files through a pipe of its own,
/// so only a file given some other way is returned, to be reported as weaker.
fn reopen_stdio_read_only() -> Result<Vec<(libc::c_int, PathBuf)>, Failure> {
    let mut writable = Vec::new();
    for fd in 0..=2 {
        let Ok(path) = std::fs::read_link(format!("/proc/self/fd/{fd}")) else {
            continue;
        };
        // `pipe:[…]`, `socket:[…]`, `anon_inode:…`: nothing on a host mount. (A deleted
        // file's link ends in " (deleted)"; it is known by its link count.)
        if !path.is_absolute() {
            continue;
        }
        let step = "reopen inherited descriptor";
        match sys::reopen_read_only(fd, &path) {
            Ok(sys::Reopened::Done(new)) => {
                use std::os::fd::AsRawFd;
                sys::dup2(new.as_raw_fd(), fd)
                    .map_err(|e| Failure::io(step, e, &path.display().to_string()))?;
            }
            Ok(sys::Reopened::WritableFile) => writable.push((fd, path)),
            Ok(sys::Reopened::Nameless) => {}
            Err(e) => {
                return Err(Failure(
                    exit::SETUP_FAILED,
                    step,
                    format!(
                        "descriptor {fd} ({}): {e}; pass its contents through a pipe instead",
                        path.display()
                    ),
                ));
            }
        }
    }
    Ok(writable)
}

/// Without a mount namespace there is no read-only clone to reopen an inherited host file
/// through (see [`reopen_stdio_read_only`]). `/dev/null` as standard input (what `cordon exec`
/// gives every run) becomes an empty pipe, which reads the same; any other host file left on
/// descriptors 0 to 2 is reported.
pub(super) fn guard_stdio_without_namespaces(channel: &mut Channel) -> Result<(), Failure> {
    use std::os::fd::AsRawFd;
    let mut exposed = Vec::new();
    for fd in 0..=2 {
        let Ok(path) = std::fs::read_link(format!("/proc/self/fd/{fd}")) else {
            continue;
        };
        if !path.is_absolute() {
            continue;
        }
        if fd == 0 && path == Path::new("/dev/null") && sys::is_terminal_or_null(0) {
            let (reader, writer) =
                std::io::pipe().map_err(|e| Failure::io("empty standard input", e, ""))?;
            drop(writer);
            sys::dup2(reader.as_raw_fd(), 0)
                .map_err(|e| Failure::io("empty standard input", e, ""))?;
            continue;
        }
        exposed.push(format!("{fd} ({})", path.display()));
    }
    if !exposed.is_empty() {
        tell(
            channel,
            "weaker",
            &[&format!(
                "without a mount namespace, the mode, owner and times of the host files on descriptors {} can be changed through them",
                exposed.join(", ")
            )],
        );
    }
    Ok(())
}

fn build_mount_view(spec: &SandboxSpec, host_sockets: &[PathBuf]) -> Result<(), Failure> {
    let root = Path::new("/");
    mount_step(
        "make mounts private",
        sys::mount(None, root, None, libc::MS_REC | libc::MS_PRIVATE, None),
        root,
    )?;
    // A scratch tmpfs becomes the root for a moment, with the host's root under /oldroot.
    let base = Path::new("/tmp");
    mount_step(
        "scratch tmpfs",
        sys::mount(
            Some(Path::new("tmpfs")),
            base,
            Some("tmpfs"),
            RO_FLAGS,
            Some("mode=0755"),
        ),
        base,
    )?;
    std::env::set_current_dir(base).map_err(|e| Failure::io("chdir", e, "/tmp"))?;
    for d in ["newroot", "oldroot"] {
        std::fs::create_dir(d).map_err(|e| Failure::io("mkdir", e, d))?;
    }
    mount_step(
        "pivot_root",
        sys::pivot_root(base, &base.join("oldroot")),
        base,
    )?;
    std::env::set_current_dir("/").map_err(|e| Failure::io("chdir", e, "/"))?;

    // The host's file system, read-only.
    let newroot = Path::new("/newroot");
    mount_step(
        "bind root",
        sys::mount(
            Some(Path::new("/oldroot")),
            newroot,
            None,
            libc::MS_BIND | libc::MS_REC,
            None,
        ),
        newroot,
    )?;
    mount_step(
        "read-only root",
        sys::make_read_only_recursive(newroot),
        newroot,
    )?;

    // Our own /proc (this PID namespace's processes only), /dev and /tmp.
    let knob = mount_proc(&inside(Path::new("/proc")))?;
    if let Some(n) = spec.limits.pid_max {
        set_pid_max(knob, n)?;
    }
    let scratch = scratch_tmpfs(spec)?;
    build_dev(&scratch.join("shm"))?;
    let tmp = inside(Path::new("/tmp"));
    mount_step(
        "private /tmp",
        sys::mount(Some(&scratch.join("tmp")), &tmp, None, libc::MS_BIND, None),
        &tmp,
    )?;

    // Writable places: the working directory and what the user allowed.
    for path in std::iter::once(&spec.cwd).chain(&spec.writable) {
        let host = Path::new("/oldroot").join(path.strip_prefix("/").unwrap_or(path));
        if !host.exists() {
            return Err(Failure(
                exit::SETUP_FAILED,
                "writable path",
                format!("{} does not exist", path.display()),
            ));
        }
        let target = inside(path);
        // Under the private /tmp the mount point has to be made first.
        bind_host_path(&host, &target, "writable bind", path)?;
    }
    hide_and_reopen(spec)?;
    hide_sockets(spec, host_sockets)?;
    // The directories between a writable root and a read-only spot become mount points of
    // their own: a mount point cannot be renamed or removed, so `mv .git .git2` cannot carry
    // a protected `.git/hooks` away and put a fresh one in its place.
    let roots: Vec<&PathBuf> = std::iter::once(&spec.cwd).chain(&spec.writable).collect();
    let mut pinned: Vec<PathBuf> = Vec::new();
    for path in &spec.read_only {
        // A writable root made read-only whole is a mount point already; nothing between.
        let Some(root) = roots
            .iter()
            .filter(|r| path.starts_with(r) && path != **r)
            .max_by_key(|r| r.as_os_str().len())
        else {
            continue;
        };
        let mut between: Vec<&Path> = path.ancestors().skip(1).take_while(|a| a != root).collect();
        between.reverse();
        for dir in between {
            let target = inside(dir);
            if pinned.iter().any(|p| p == dir) || !target.is_dir() {
                continue;
            }
            mount_step(
                "pin directory",
                sys::mount(Some(&target), &target, None, libc::MS_BIND, None),
                dir,
            )?;
            pinned.push(dir.to_path_buf());
        }
    }
    // Read-only spots inside writable places.
    for path in &spec.read_only {
        let target = inside(path);
        if target.exists() {
            freeze(&target, "read-only bind", path)?;
        }
    }

    // Into the new root; the scratch root and the host's view under it go away.
    std::env::set_current_dir(newroot).map_err(|e| Failure::io("chdir", e, "/newroot"))?;
    let here = Path::new(".");
    mount_step("pivot_root", sys::pivot_root(here, here), here)?;
    mount_step("detach old root", sys::umount_detach(here), here)?;
    std::env::set_current_dir(&spec.cwd)
        .map_err(|e| Failure::io("chdir", e, &spec.cwd.display().to_string()))?;
    same_directory(spec)
}

/// The working directory reached is the one the front end checked ([`SandboxSpec::cwd_identity`]).
pub(super) fn same_directory(spec: &SandboxSpec) -> Result<(), Failure> {
    use std::os::unix::fs::MetadataExt;
    let Some(want) = spec.cwd_identity else {
        return Ok(());
    };
    let here = std::fs::metadata(".").map_err(|e| Failure::io("stat", e, "."))?;
    if (here.dev(), here.ino()) == want {
        return Ok(());
    }
    Err(Failure::io(
        "working directory",
        std::io::Error::other(
            "it was swapped for another directory while the sandbox was set up (a command running meanwhile?); nothing ran",
        ),
        &spec.cwd.display().to_string(),
    ))
}

/// Makes `target` (and everything mounted below it) a read-only mount of its own.
fn freeze(target: &Path, step: &'static str, shown: &Path) -> Result<(), Failure> {
    let flags = libc::MS_BIND | libc::MS_REC;
    mount_step(
        step,
        sys::mount(Some(target), target, None, flags, None),
        shown,
    )?;
    mount_step(step, sys::make_read_only_recursive(target), shown)
}

/// `deny-read`: a directory shows up empty and read-only, a file unreadable. `allow-read`
/// paths inside a hidden one are bound back (read-only unless they are also writable).
fn hide_and_reopen(spec: &SandboxSpec) -> Result<(), Failure> {
    let mut hidden_dirs = Vec::new();
    for path in &spec.hidden {
        let target = inside(path);
        let Ok(meta) = std::fs::metadata(&target) else {
            continue;
        };
        let step = "deny-read";
        if meta.is_dir() {
            // Writable for a moment, so mount points for allow-read paths can be made in it.
            mount_step(
                step,
                sys::mount(
                    Some(Path::new("tmpfs")),
                    &target,
                    Some("tmpfs"),
                    RO_FLAGS,
                    Some("mode=0555"),
                ),
                path,
            )?;
            hidden_dirs.push(target);
        } else {
            mount_step(
                step,
                sys::mount(Some(blank_file()?), &target, None, libc::MS_BIND, None),
                path,
            )?;
            mount_step(step, sys::make_read_only_recursive(&target), path)?;
        }
    }
    for path in &spec.reopened {
        let host = Path::new("/oldroot").join(path.strip_prefix("/").unwrap_or(path));
        let target = inside(path);
        if !host.exists() {
            continue;
        }
        // Inside a hidden directory the mount point has to be made first (its tmpfs is
        // still writable at this point).
        bind_host_path(&host, &target, "allow-read", path)?;
        if !spec
            .writable
            .iter()
            .chain(std::iter::once(&spec.cwd))
            .any(|w| path.starts_with(w))
        {
            mount_step("allow-read", sys::make_read_only_recursive(&target), path)?;
        }
    }
    for dir in hidden_dirs {
        let flags = libc::MS_REMOUNT | libc::MS_RDONLY | RO_FLAGS;
        mount_step("deny-read", sys::mount(None, &dir, None, flags, None), &dir)?;
    }
    Ok(())
}

/// One unreadable empty file in the scratch root, to bind over what must not be opened.
fn blank_file() -> Result<&'static Path, Failure> {
    let blank = Path::new("/hidden-file");
    if !blank.exists() {
        std::fs::write(blank, b"").map_err(|e| Failure::io("blank file", e, ""))?;
        std::fs::set_permissions(blank, std::os::unix::fs::PermissionsExt::from_mode(0o000))
            .map_err(|e| Failure::io("blank file", e, ""))?;
    }
    Ok(blank)
}

/// With some Unix sockets allowed the command may create Unix sockets. The allowed ones are
/// bound in where the view would not show them. Only where no supervisor settles `connect`
/// (a kernel without user notification) is every other socket the host lists as bound (a
/// Docker daemon's, an SSH agent's) covered with the blank file, which misses sockets bound
/// later, renamed, or named relative to a directory.
fn hide_sockets(spec: &SandboxSpec, host_sockets: &[PathBuf]) -> Result<(), Failure> {
    use std::os::unix::fs::FileTypeExt;
    // The allowed ones are made visible where the view would not show them (under the
    // private /tmp, say).
    for path in &spec.unix_sockets {
        let host = Path::new("/oldroot").join(path.strip_prefix("/").unwrap_or(path));
        let target = inside(path);
        if std::fs::symlink_metadata(&target).is_err() && host.exists() {
            bind_host_path(&host, &target, "allowed socket", path)?;
        }
    }
    for path in host_sockets {
        if spec.unix_sockets.contains(path) {
            continue;
        }
        let target = inside(path);
        let is_socket = std::fs::symlink_metadata(&target).is_ok_and(|m| m.file_type().is_socket());
        if !is_socket {
            continue;
        }
        let blank = blank_file()?;
        mount_step(
            "hide socket",
            sys::mount(Some(blank), &target, None, libc::MS_BIND, None),
            path,
        )?;
    }
    Ok(())
}

/// Binds the host's `host` at `target` (recursively), making the mount point first when it is
/// missing: a directory for a directory, an empty file for anything else.
fn bind_host_path(
    host: &Path,
    target: &Path,
    step: &'static str,
    shown: &Path,
) -> Result<(), Failure> {
    if !target.exists() {
        let made = if host.is_dir() {
            std::fs::create_dir_all(target)
        } else {
            target
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::write(target, b""))
        };
        made.map_err(|e| Failure::io(step, e, &shown.display().to_string()))?;
    }
    mount_step(
        step,
        sys::mount(Some(host), target, None, libc::MS_BIND | libc::MS_REC, None),
        shown,
    )
}

/// The one in-memory file system behind the command's `/tmp` and `/dev/shm`, on the scratch
/// root (which goes away with the pivot; the binds of its directories stay). Its pages are
/// memory that neither `RLIMIT_AS` nor a process's own accounting sees, so it is sized by the
/// memory limit, both places sharing it, and by a quarter of the machine's memory without one
/// (the kernel's default is half, for each mount). Files cost an inode each whatever their
/// size, so their number is bounded too.
/// A fresh `/proc` at `target` for the caller's PID namespace, its kernel knobs read-only.
/// Returns the namespace's `pid_max`, opened for writing before it became read-only, for
/// [`set_pid_max`].
pub(super) fn mount_proc(target: &Path) -> Result<std::fs::File, Failure> {
    mount_step(
        "mount /proc",
        sys::mount(
            Some(Path::new("proc")),
            target,
            Some("proc"),
            RO_FLAGS | libc::MS_NOEXEC,
            None,
        ),
        target,
    )?;
    let pid_max = std::fs::OpenOptions::new()
        .write(true)
        .open(target.join("sys/kernel/pid_max"))
        .map_err(|e| Failure::io("limit processes", e, "pid_max of the PID namespace"))?;
    // Kernel settings and triggers under /proc answer to uid 0 rather than to a capability,
    // and uid 0 inside maps to the host's root when cordon runs as root: make them read-only.
    for knob in ["sys", "sysrq-trigger", "irq", "bus"] {
        let knob = target.join(knob);
        if knob.exists() {
            freeze(&knob, "read-only /proc", &knob)?;
        }
    }
    Ok(pid_max)
}

/// The PID namespace's own limit on processes; the kernel refuses less than 301.
pub(super) fn set_pid_max(mut knob: std::fs::File, n: u64) -> Result<(), Failure> {
    knob.write_all(n.max(301).to_string().as_bytes())
        .map_err(|e| Failure::io("limit processes", e, "pid_max of the PID namespace"))
}

/// The mount options of the tmpfs behind `/tmp` and `/dev/shm`: bounded by the memory limit
/// where there is one.
pub(super) fn scratch_options(spec: &SandboxSpec) -> String {
    match spec.limits.scratch_bytes {
        Some(bytes) => format!(
            "mode=0755,size={bytes},nr_inodes={}",
            (bytes / 4096).max(1024)
        ),
        None => "mode=0755,size=25%".to_string(),
    }
}

fn scratch_tmpfs(spec: &SandboxSpec) -> Result<PathBuf, Failure> {
    let scratch = PathBuf::from("/scratch");
    std::fs::create_dir(&scratch).map_err(|e| Failure::io("mkdir", e, "/scratch"))?;
    let options = scratch_options(spec);
    mount_step(
        "mount /tmp and /dev/shm",
        sys::mount(
            Some(Path::new("tmpfs")),
            &scratch,
            Some("tmpfs"),
            RO_FLAGS,
            Some(&options),
        ),
        &scratch,
    )?;
    for d in ["tmp", "shm"] {
        let dir = scratch.join(d);
        std::fs::create_dir(&dir)
            .and_then(|()| {
                std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o1777))
            })
            .map_err(|e| Failure::io("mkdir", e, d))?;
    }
    Ok(scratch)
}

/// A minimal /dev: the harmless devices, a private devpts and shared memory (`shm`, a
/// directory of the scratch file system), nothing else. It holds device nodes and links only,
/// so it is kept tiny: the command cannot park memory in it.
fn build_dev(shm_source: &Path) -> Result<(), Failure> {
    let dev = inside(Path::new("/dev"));
    mount_step(
        "mount /dev",
        sys::mount(
            Some(Path::new("tmpfs")),
            &dev,
            Some("tmpfs"),
            libc::MS_NOSUID | libc::MS_NOEXEC,
            Some("mode=0755,size=64k,nr_inodes=64"),
        ),
        &dev,
    )?;
    for name in ["null", "zero", "full", "random", "urandom", "tty"] {
        let target = dev.join(name);
        std::fs::write(&target, b"").map_err(|e| Failure::io("mkdev", e, name))?;
        let host = Path::new("/oldroot/dev").join(name);
        mount_step(
            "bind device",
            sys::mount(Some(&host), &target, None, libc::MS_BIND, None),
            &target,
        )?;
        // A device on a read-only mount is still read and written, but `chmod /dev/null`
        // would change the host's node.
        mount_step(
            "bind device",
            sys::make_read_only_recursive(&target),
            &target,
        )?;
    }
    for d in ["pts", "shm"] {
        std::fs::create_dir(dev.join(d)).map_err(|e| Failure::io("mkdir", e, d))?;
    }
    let shm = dev.join("shm");
    mount_step(
        "mount /dev/shm",
        sys::mount(Some(shm_source), &shm, None, libc::MS_BIND, None),
        &shm,
    )?;
    // A private pseudo-terminal instance; without one, programs that open a pty fail, which is
    // weaker only for them.
    if private_devpts(&dev.join("pts")) {
        let _ = std::os::unix::fs::symlink("pts/ptmx", dev.join("ptmx"));
    }
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        let _ = std::os::unix::fs::symlink(target, dev.join(link));
    }
    Ok(())
}

/// Mounts a pseudo-terminal instance of its own at `pts`; whether that worked.
pub(super) fn private_devpts(pts: &Path) -> bool {
    sys::mount(
        Some(Path::new("devpts")),
        pts,
        Some("devpts"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=620"),
    )
    .is_ok()
}

/// Landlock's walls inside the mount view: reads everywhere (the view hides what is hidden),
/// writes in the writable places.
pub(super) fn namespaced_walls(spec: &SandboxSpec) -> Walls<'_> {
    Walls {
        reads: Reads::Everything,
        writable: [Path::new("/tmp"), Path::new("/dev/shm"), spec.cwd.as_path()]
            .into_iter()
            .chain(spec.writable.iter().map(PathBuf::as_path))
            .collect(),
        deny_tcp: false,
    }
}

/// In the command's process: give up every power, then become the command.
pub(super) fn exec_command(
    spec: &SandboxSpec,
    channel: &mut Channel,
    supervisor: Option<std::os::unix::net::UnixStream>,
    filter: Option<&seccompiler::BpfProgram>,
) -> Result<Never, Failure> {
    become_command(
        spec,
        &namespaced_walls(spec),
        Extra::default(),
        filter,
        "/tmp",
        supervisor,
        channel,
    )
}

/// The last steps of every run, in the command's own process: [`confine`], then [`launch`].
pub(super) fn become_command(
    spec: &SandboxSpec,
    walls: &Walls,
    extra: Extra,
    filter: Option<&seccompiler::BpfProgram>,
    tmpdir: &str,
    supervisor: Option<std::os::unix::net::UnixStream>,
    channel: &mut Channel,
) -> Result<Never, Failure> {
    confine(spec, walls, extra, filter, supervisor, channel)?;
    Err(launch(spec, tmpdir))
}

/// A new session, no capabilities, `no_new_privs`, Landlock and the system-call filter: all
/// that confines the command but its limits, which [`launch`] sets. A warm sandbox's keeper
/// has this done ahead of the command it will become (`warm.rs`).
pub(super) fn confine(
    spec: &SandboxSpec,
    walls: &Walls,
    extra: Extra,
    filter: Option<&seccompiler::BpfProgram>,
    supervisor: Option<std::os::unix::net::UnixStream>,
    channel: &mut Channel,
) -> Result<(), Failure> {
    sys::die_with_parent(libc::SIGKILL).map_err(|e| Failure::io("die-with-parent", e, ""))?;
    sys::close_inherited_on_exec()
        .map_err(|e| Failure::io("close inherited descriptors", e, ""))?;
    sys::new_session().map_err(|e| Failure::io("setsid", e, ""))?;
    if spec.own_terminal {
        // Without it the command still runs, only without `/dev/tty`.
        let _ = sys::take_terminal();
    }
    sys::drop_all_capabilities().map_err(|e| Failure::io("drop capabilities", e, ""))?;
    sys::set_no_new_privs().map_err(|e| Failure::io("no_new_privs", e, ""))?;
    let enforced =
        landlock_rules::restrict(walls).map_err(|e| Failure(exit::SETUP_FAILED, "landlock", e))?;
    if enforced.none {
        if walls.deny_tcp || !matches!(walls.reads, Reads::Everything) {
            // Without namespaces Landlock is the only wall; running unconfined is not an
            // option.
            return Err(Failure(
                exit::SETUP_FAILED,
                "landlock",
                "Landlock is not enforced on this kernel and there are no namespaces to fall \
                 back on; nothing would confine the command"
                    .into(),
            ));
        }
        tell(
            channel,
            "weaker",
            &["Landlock is not available on this kernel; file rules rest on the mount view alone"],
        );
    } else if enforced.partly {
        tell(
            channel,
            "weaker",
            &[
                "this kernel's Landlock lacks some rights cordon asks for (older ABI); the rest is enforced",
            ],
        );
    }
    // Built here, or once by a warm sandbox for all its commands (the same spec, the same
    // filter).
    let built;
    let filter = match filter {
        Some(f) => f,
        None => {
            built = super::seccomp::build(!spec.unix_sockets.is_empty(), extra)
                .map_err(|e| Failure(exit::SETUP_FAILED, "seccomp", e))?;
            &built
        }
    };
    if let Some(supervisor) = supervisor {
        // Ahead of the main filter, which refuses any further listener.
        let listener = sys::install_notifying_filter(&super::seccomp::connect_notifier())
            .map_err(|e| Failure::io("seccomp listener", e, "for the connect supervisor"))?;
        crate::handoff::send(&supervisor, &[listener])
            .map_err(|e| Failure::io("seccomp listener", e, "handing it to PID 1"))?;
    }
    super::seccomp::apply(filter).map_err(|e| Failure(exit::SETUP_FAILED, "seccomp", e))?;
    Ok(())
}

/// The command's limits, then the command itself, found as a shell would find it. Returns only
/// if it could not be started.
pub(super) fn launch(spec: &SandboxSpec, tmpdir: &str) -> Failure {
    let limits = [
        (
            libc::RLIMIT_NPROC,
            spec.limits.max_processes,
            "limit processes",
        ),
        (libc::RLIMIT_AS, spec.limits.memory_bytes, "limit memory"),
        (libc::RLIMIT_CPU, spec.limits.cpu_seconds, "limit CPU time"),
    ];
    for (resource, value, step) in limits {
        if let Some(v) = value
            && let Err(e) = sys::set_rlimit(resource, v)
        {
            return Failure::io(step, e, "");
        }
    }
    let Some((program, args)) = spec.argv.split_first() else {
        return Failure(exit::SETUP_FAILED, "command", "no command given".into());
    };
    let Some(path) = lookup(program, spec) else {
        return Failure(
            exit::NOT_FOUND,
            "exec",
            format!("{program}: command not found"),
        );
    };
    let mut cmd = std::process::Command::new(&path);
    cmd.arg0(program)
        .args(args)
        .env_clear()
        .envs(command_env(&spec.env, tmpdir));
    let e = cmd.exec();
    let code = match e.kind() {
        std::io::ErrorKind::NotFound => exit::NOT_FOUND,
        _ => exit::CANNOT_EXECUTE,
    };
    Failure(code, "exec", format!("{program}: {e}"))
}

/// The environment a command starts with: `env` with `TMPDIR` set to the sandbox's own, one
/// entry per name (the last given), in the order of their names, as an exec by
/// [`std::process::Command`] lays it out. A command started ahead ([`super::prestart`]) gets
/// the same.
pub(super) fn command_env(env: &[(String, String)], tmpdir: &str) -> BTreeMap<String, String> {
    let mut all: BTreeMap<String, String> = env.iter().cloned().collect();
    all.insert("TMPDIR".into(), tmpdir.into());
    all
}

/// Finds `program` as a shell would: a name with a slash is used as it is; otherwise the first
/// regular file of that name in the command's `PATH`. Searching ourselves keeps "not found"
/// (127) apart from "found but not executable" (126), which `execvp` blurs when a `PATH`
/// directory cannot be searched.
pub(super) fn lookup(program: &str, spec: &SandboxSpec) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    let path = spec
        .env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map_or("/usr/local/bin:/usr/bin:/bin", |(_, v)| v.as_str());
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|candidate| std::fs::metadata(candidate).is_ok_and(|m| m.is_file()))
}
