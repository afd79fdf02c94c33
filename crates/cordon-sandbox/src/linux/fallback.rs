//! Runs without namespaces, where user namespaces are unavailable (inside Docker, Ubuntu
//! 24.04's AppArmor rule): Landlock and seccomp alone, from outside the command.
//!
//! What changes, and is reported as weaker: the host's file system stays as it is, so
//! protected files are copied before the run and put back after it rather than made
//! read-only; there is no private `/tmp` (a per-run directory is the command's `TMPDIR`, and
//! `/tmp` itself is read-only); host processes are visible (Landlock keeps signals and
//! tracing inside, ABI 6+); the network is cut by refusing every socket family but Unix and
//! netlink, rather than by an empty namespace. The helper stays as the command's parent and
//! subreaper, so whatever the command leaves running is killed when it ends.

use std::path::{Path, PathBuf};

use super::helper::{
    Channel, Failure, Never, become_command, code_of, report, same_directory, tell,
};
use super::landlock_rules::{Reads, Walls, readable_except};
use super::seccomp::Extra;
use super::sys;
use crate::{NetworkMode, SandboxSpec, Snapshot, exit};

pub(super) fn run(spec: SandboxSpec, channel: &mut Channel, why: &str) -> Result<Never, Failure> {
    let abi = match sys::landlock_abi() {
        Ok(abi) => abi,
        Err(e) => {
            return Err(Failure(
                exit::SETUP_FAILED,
                "landlock",
                format!(
                    "neither user namespaces ({why}) nor Landlock ({e}) are available, so nothing \
                 would confine the command; run `cordon doctor` for the fixes"
                ),
            ));
        }
    };
    if spec.allow_local_binding || spec.inbound.is_some() {
        return Err(Failure(
            exit::SETUP_FAILED,
            "local binding",
            format!(
                "--allow-local-binding and --publish need a network namespace of the command's \
                 own, and user namespaces are unavailable ({why}); without one the command would \
                 listen on the host's network, where Landlock cannot confine it to loopback"
            ),
        ));
    }
    let roots: Vec<PathBuf> = std::iter::once(spec.cwd.clone())
        .chain(spec.writable.iter().cloned())
        .collect();
    if let Some(h) = spec
        .hidden
        .iter()
        .find(|h| roots.iter().any(|r| h.starts_with(r)))
    {
        return Err(Failure(
            exit::SETUP_FAILED,
            "deny-read",
            format!(
                "{} lies inside a writable directory; without user namespaces it cannot be \
                 hidden there (Landlock cannot take away what a parent grants)",
                h.display()
            ),
        ));
    }
    let snapshot = Snapshot::take(&spec.read_only, &roots).map_err(|e| {
        Failure(
            exit::SETUP_FAILED,
            "protect",
            format!("{e}; without user namespaces read-only paths are guarded by a copy"),
        )
    })?;
    sys::become_subreaper().map_err(|e| Failure::io("subreaper", e, ""))?;
    let tmp = crate::private_dir(Path::new("/tmp"), "cordon-run")
        .map_err(|e| Failure::io("private tmp", e, "/tmp"))?;

    tell(
        channel,
        "weaker",
        &[&format!(
            "no user namespaces ({why}): Landlock and seccomp alone confine the command"
        )],
    );
    tell(
        channel,
        "weaker",
        &[
            "protected and --deny-write paths are put back after the run instead of being read-only during it",
        ],
    );
    tell(
        channel,
        "weaker",
        &[&format!(
            "no private /tmp: the command's TMPDIR is {}, and /tmp is read-only",
            tmp.display()
        )],
    );
    if spec.limits.scratch_bytes.is_some() && spec.limits.memory_bytes.is_some() {
        // No memory cgroup counts the pages of a file in a tmpfs, and there is no private
        // /tmp to size.
        tell(
            channel,
            "weaker",
            &[&format!(
                "--memory does not bound what the command stores in files: its TMPDIR {} is on the host's /tmp",
                tmp.display()
            )],
        );
    }
    super::helper::guard_stdio_without_namespaces(channel)?;
    if abi >= 6 {
        tell(
            channel,
            "weaker",
            &["host processes are visible (but cannot be signalled or traced)"],
        );
    } else {
        tell(
            channel,
            "weaker",
            &[
                "host processes are visible, and this kernel's Landlock (before ABI 6) does not stop the command signalling them",
            ],
        );
    }
    let pids_group = spec
        .cgroups
        .iter()
        .any(|p| p.starts_with("/sys/fs/cgroup/pids"));
    if sys::ids().0 == 0 && spec.limits.max_processes.is_some() && !pids_group {
        tell(
            channel,
            "weaker",
            &["the process limit does not bind root without a PID namespace or a pids cgroup"],
        );
    }
    if let NetworkMode::Proxy(_) = spec.network {
        return Err(Failure(
            exit::SETUP_FAILED,
            "network",
            "cordon's proxy cannot be reached without a network namespace yet".into(),
        ));
    }
    if spec.network == NetworkMode::None {
        tell(
            channel,
            "weaker",
            &["no loopback: without a network namespace only Unix and netlink sockets are allowed"],
        );
    }
    if !spec.hidden.is_empty() {
        tell(
            channel,
            "weaker",
            &[
                "names inside --deny-read directories can be listed (their contents stay unreadable)",
            ],
        );
    }
    // With Unix sockets allowed, this process settles the command's `connect`s
    // (`supervise.rs`), as PID 1 does with namespaces.
    let supervised = !spec.unix_sockets.is_empty() && super::supervise::available(false);
    if !spec.unix_sockets.is_empty() && !supervised {
        tell(
            channel,
            "weaker",
            &["with a Unix socket allowed, every Unix socket the command can reach is open to it"],
        );
    }
    let pair = if supervised {
        let pair = std::os::unix::net::UnixStream::pair()
            .map_err(|e| Failure::io("socketpair", e, "for the connect supervisor"))?;
        // Its TMPDIR is on the host's /tmp: sockets there are known by who holds them.
        let reachable = super::supervise::Reachable::before_start(
            &spec.unix_sockets,
            None,
            super::supervise::BoundInside::HeldUnder(std::process::id() as libc::pid_t),
        );
        Some((pair, reachable))
    } else {
        None
    };

    // This process is in the working directory the front end checked; the rule that makes it
    // writable is given that very directory ("."), not a path a concurrent command could
    // have redirected meanwhile.
    same_directory(&spec)?;
    let cwd = if spec.cwd_identity.is_some() {
        Path::new(".")
    } else {
        spec.cwd.as_path()
    };
    let command = match sys::fork().map_err(|e| Failure::io("fork", e, ""))? {
        Some(pid) => pid,
        None => {
            let reads = if spec.hidden.is_empty() {
                Reads::Everything
            } else {
                readable_except(&spec.hidden, &spec.reopened)
            };
            let walls = Walls {
                reads,
                writable: std::iter::once(cwd)
                    .chain(spec.writable.iter().map(PathBuf::as_path))
                    .chain([tmp.as_path()])
                    .collect(),
                deny_tcp: spec.network != NetworkMode::Host,
            };
            let extra = Extra {
                only_local_sockets: spec.network != NetworkMode::Host,
                deny_host_ipc: true,
            };
            let tmpdir = tmp.to_string_lossy().into_owned();
            let supervisor = pair.map(|((_, theirs), _)| theirs);
            match become_command(&spec, &walls, extra, None, &tmpdir, supervisor, channel) {
                Ok(never) => match never {},
                Err(f) => report(channel, &f),
            }
        }
    };
    // From here on this process is the supervisor. cordon's death raises the alarm too, so
    // that the cleanup below still runs.
    let _ = sys::forward_signals_to_group(command);
    if let Some(((ours, theirs), reachable)) = pair {
        drop(theirs);
        // This process forks nothing from here on, so threads in it are safe.
        super::supervise::start(&ours, reachable);
    }
    sys::kill_on_alarm(command, spec.limits.timeout).map_err(|e| Failure::io("timeout", e, ""))?;
    sys::die_with_parent(libc::SIGALRM).map_err(|e| Failure::io("die-with-parent", e, ""))?;
    let code = match sys::wait(command) {
        Ok(Some((_, ended))) => code_of(channel, ended),
        _ => i32::from(exit::SETUP_FAILED),
    };
    end_every_descendant();
    let _ = std::fs::remove_dir_all(&tmp);
    let restoration = snapshot.restore();
    for path in &restoration.restored {
        tell(channel, "restored", &[&path.to_string_lossy()]);
    }
    for (path, error) in &restoration.failed {
        tell(channel, "unrestored", &[&path.to_string_lossy(), error]);
    }
    if sys::alarm_fired() {
        tell(channel, "timed-out", &[]);
        sys::exit_now(i32::from(exit::TIMEOUT));
    }
    sys::exit_now(code)
}

/// Kills whatever the command left running. Orphans come back to this process (it is their
/// subreaper), so killing its children and reaping them, until none are left, ends them all;
/// a killed process cannot fork any more, so this terminates.
fn end_every_descendant() {
    loop {
        let children = sys::children();
        if children.is_empty() {
            return;
        }
        for &pid in &children {
            sys::kill(pid, libc::SIGKILL);
        }
        for _ in &children {
            if matches!(sys::wait(-1), Ok(None) | Err(_)) {
                break;
            }
        }
    }
}
