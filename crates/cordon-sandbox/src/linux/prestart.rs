//! Bash started ahead of a warm sandbox's next command.
//!
//! Most of a warm command's time was bash starting: its `execve`, the loading of its libraries
//! and the C library's own start-up (on a virtual machine each `cpuid` the C library asks
//! about the caches traps to the hypervisor). None of it depends on the command. So the
//! command's process, made and confined ahead by its keeper ([`super::warm`]), execs bash
//! ahead too, with `preload/bash_preload.rs` loaded. That code runs before bash's `main`: it
//! waits for the command, then sets the command's limits, standard input, output and error,
//! and puts the command's arguments and environment where the C library hands them to `main`.
//! From `main` on, bash runs as it would had it been exec'd with them: the same binary, found
//! the same way, reading the same grammar, with the same `$0`, options and variables.
//!
//! What still differs, and how it is kept out of a command's way:
//! - The loader and the C library read a few variables of their own before `main` (`LD_*`,
//!   `GLIBC_*`, `MALLOC_*`). Bash is started ahead with the sandbox's own (a session's commands
//!   share one environment), so they read what an exec for the command would have given them;
//!   a command whose differ is run by a bash exec'd for it, as is a command that is not this
//!   bash with as many arguments, or any string with a NUL, which an exec refuses
//!   ([`Preload::fits`]). Where the sandbox's environment has its own `LD_PRELOAD`, no bash is
//!   started ahead.
//! - `/proc/PID/cmdline` and `/proc/PID/environ`, which `ps` and `pgrep -f` read, are pointed
//!   at the command's strings (`PR_SET_MM_MAP`); on a kernel without that call they show the
//!   placeholder bash was started with.
//! - The library's descriptor and the keeper's socket are closed before `main`; the
//!   descriptors it is handed are close-on-exec until put in place.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::Command;

use super::helper::command_env;
use super::sys;
use super::warm::WarmCommand;
use crate::SandboxSpec;

/// What bash is started ahead with: its script is `:`; the constructor replaces every argument.
const PLACEHOLDER: &str = ":";
/// Names the descriptors of the keeper's socket and of the library ("socket,library") to the
/// preloaded code, which acts only where it is set.
const FDS_VARIABLE: &str = "CORDON_BASH_PRELOAD";
/// The shared object `build.rs` made of `preload/bash_preload.rs`; none for a static C library.
#[cfg(cordon_bash_preload)]
const LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/bash_preload.so"));
#[cfg(not(cordon_bash_preload))]
const LIBRARY: &[u8] = &[];
/// What the preloaded bash says on the keeper's socket once it waits.
pub(super) const WAITING: u8 = b'P';

/// The library in sealed memory (no process of the sandbox can change it), and the arguments
/// and loader's variables bash is started ahead with.
pub(super) struct Preload {
    library: OwnedFd,
    argv: Vec<String>,
    loader_env: BTreeMap<String, String>,
}

impl Preload {
    /// `None` where there is no bash, no library or no memory file to be had, or where `spec`'s
    /// environment preloads a library of its own: each command then starts its bash when it
    /// comes, as before.
    pub(super) fn new(spec: &SandboxSpec) -> Option<Preload> {
        use rustix::fs::{MemfdFlags, SealFlags};
        let loader_env = loader_env(&spec.env);
        if LIBRARY.is_empty() || loader_env.contains_key("LD_PRELOAD") {
            return None;
        }
        let argv = crate::shell::host_argv(PLACEHOLDER).ok()?;
        let library = rustix::fs::memfd_create(
            "cordon-bash-preload",
            MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
        )
        .ok()?;
        std::fs::File::from(library.try_clone().ok()?)
            .write_all(LIBRARY)
            .ok()?;
        let seals = SealFlags::SEAL | SealFlags::SHRINK | SealFlags::GROW | SealFlags::WRITE;
        rustix::fs::fcntl_add_seals(&library, seals).ok()?;
        Some(Preload {
            library,
            argv,
            loader_env,
        })
    }

    /// In the command's process, once confined: becomes bash, waiting on `keeper` for the
    /// command. Returns only if it could not.
    pub(super) fn exec_ahead(&self, keeper: &UnixStream) -> std::io::Error {
        let (socket, library) = match (
            sys::dup_inheritable(keeper.as_raw_fd()),
            sys::dup_inheritable(self.library.as_raw_fd()),
        ) {
            (Ok(s), Ok(l)) => (s, l),
            (Err(e), _) | (_, Err(e)) => return e,
        };
        let (socket, library) = (socket.as_raw_fd(), library.as_raw_fd());
        Command::new(&self.argv[0])
            .arg0(&self.argv[0])
            .args(&self.argv[1..])
            .env_clear()
            .envs(&self.loader_env)
            .env("LD_PRELOAD", format!("/proc/self/fd/{library}"))
            .env(FDS_VARIABLE, format!("{socket},{library}"))
            .exec()
    }

    /// Whether the bash waiting can run `request` as an exec of it would: the same program with
    /// as many arguments, the same variables for the loader, nothing an exec refuses.
    pub(super) fn fits(&self, request: &WarmCommand) -> bool {
        request.argv.len() == self.argv.len()
            && request.argv[0] == self.argv[0]
            && !request.argv.iter().any(|a| a.contains('\0'))
            && request
                .env
                .iter()
                .all(|(k, v)| !k.is_empty() && !k.contains(['=', '\0']) && !v.contains('\0'))
            && loader_env(&request.env) == self.loader_env
    }
}

/// The variables of `env` that the loader or the C library reads before `main` (the last of
/// a name, as an exec passes it).
pub(super) fn loader_env(env: &[(String, String)]) -> BTreeMap<String, String> {
    env.iter()
        .filter(|(k, _)| {
            ["LD_", "GLIBC_", "MALLOC_"]
                .iter()
                .any(|p| k.starts_with(p))
        })
        .cloned()
        .collect()
}

/// Hands `request` to the bash waiting on `to_command`, with its standard input, output and
/// error and the channel it tells a failure on (`fds`, in that order).
pub(super) fn hand(
    to_command: &UnixStream,
    fds: [OwnedFd; 4],
    request: &WarmCommand,
) -> std::io::Result<()> {
    let rest = frame(request);
    let mut header = *b"CBP1\0\0\0\0";
    header[4..].copy_from_slice(&(rest.len() as u32).to_le_bytes());
    crate::handoff::send_with(to_command, &header, &fds.each_ref().map(|f| f.as_fd()))?;
    let mut to = to_command;
    to.write_all(&rest)
}

/// The rest of the message after its header, as `preload/bash_preload.rs` reads it.
fn frame(request: &WarmCommand) -> Vec<u8> {
    let limits = [
        request.limits.max_processes,
        request.limits.memory_bytes,
        request.limits.cpu_seconds,
    ];
    let which = limits
        .iter()
        .enumerate()
        .fold(0u8, |w, (i, l)| w | (u8::from(l.is_some()) << i));
    let mut out = vec![which];
    for l in limits {
        out.extend(l.unwrap_or(0).to_le_bytes());
    }
    let env = command_env(&request.env, "/tmp");
    out.extend((request.argv.len() as u32).to_le_bytes());
    out.extend((env.len() as u32).to_le_bytes());
    for a in &request.argv {
        out.extend(a.as_bytes());
        out.push(0);
    }
    for (k, v) in env {
        out.extend(k.as_bytes());
        out.push(b'=');
        out.extend(v.as_bytes());
        out.push(0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(argv: &[&str], env: &[(&str, &str)]) -> WarmCommand {
        WarmCommand {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            limits: Default::default(),
        }
    }

    #[test]
    fn only_this_bash_with_as_many_arguments_and_the_same_loader_variables_fits() {
        let spec = SandboxSpec {
            env: vec![("LD_LIBRARY_PATH".into(), "/opt/lib".into())],
            ..Default::default()
        };
        let Some(p) = Preload::new(&spec) else {
            eprintln!("skipped: no bash here");
            return;
        };
        let preloading = SandboxSpec {
            env: vec![("LD_PRELOAD".into(), "/x.so".into())],
            ..Default::default()
        };
        assert!(Preload::new(&preloading).is_none());
        let bash = p.argv[0].clone();
        let same = [("PATH", "/bin"), ("LD_LIBRARY_PATH", "/opt/lib")];
        let ok = request(&[&bash, "--noprofile", "--norc", "-c", "ls"], &same);
        assert!(p.fits(&ok));
        let lib = ("LD_LIBRARY_PATH", "/opt/lib");
        for (argv, env) in [
            (
                vec!["/bin/sh", "--noprofile", "--norc", "-c", "ls"],
                vec![lib],
            ),
            (vec![&bash, "-c", "ls"], vec![lib]),
            (
                vec![&bash, "--noprofile", "--norc", "-c", "ls\0rm"],
                vec![lib],
            ),
            (vec![&bash, "--noprofile", "--norc", "-c", "ls"], vec![]),
            (
                vec![&bash, "--noprofile", "--norc", "-c", "ls"],
                vec![("LD_LIBRARY_PATH", "/o")],
            ),
            (
                vec![&bash, "--noprofile", "--norc", "-c", "ls"],
                vec![lib, ("LD_PRELOAD", "/x.so")],
            ),
            (
                vec![&bash, "--noprofile", "--norc", "-c", "ls"],
                vec![lib, ("GLIBC_TUNABLES", "a")],
            ),
            (
                vec![&bash, "--noprofile", "--norc", "-c", "ls"],
                vec![lib, ("MALLOC_ARENA_MAX", "1")],
            ),
            (
                vec![&bash, "--noprofile", "--norc", "-c", "ls"],
                vec![lib, ("A=B", "1")],
            ),
            (
                vec![&bash, "--noprofile", "--norc", "-c", "ls"],
                vec![lib, ("A", "1\0")],
            ),
        ] {
            assert!(!p.fits(&request(&argv, &env)), "{argv:?} {env:?}");
        }
    }

    #[test]
    fn the_frame_carries_limits_arguments_and_the_environment_in_exec_order() {
        let mut r = request(
            &["/bin/bash", "-c", "x"],
            &[("B", "2"), ("A", "1"), ("TMPDIR", "/h")],
        );
        r.limits.memory_bytes = Some(7);
        let f = frame(&r);
        assert_eq!(f[0], 0b010);
        assert_eq!(u64::from_le_bytes(f[9..17].try_into().unwrap()), 7);
        assert_eq!(u32::from_le_bytes(f[25..29].try_into().unwrap()), 3);
        assert_eq!(u32::from_le_bytes(f[29..33].try_into().unwrap()), 3);
        assert_eq!(&f[33..], b"/bin/bash\0-c\0x\0A=1\0B=2\0TMPDIR=/tmp\0");
    }
}
