//! The system-call filter: what could break the walls is refused with `EPERM`.
//!
//! Built with seccompiler (pure-Rust BPF). Calls from another architecture's ABI (32-bit
//! `int 0x80`) kill the process (seccompiler's architecture check); calls through the x32 ABI
//! (the same syscall numbers with bit 30 set) are all refused by a six-instruction guard filter
//! ahead of it, so they cannot go around a rule and the main filter need not list them twice
//! (a filter's length is what the kernel pays to load it, on every run).

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

/// Calls refused outright, and why.
const DENIED: &[(libc::c_long, &str)] = &[
    (libc::SYS_unshare, "new namespaces would undo the sandbox's"),
    (libc::SYS_setns, "joining other namespaces"),
    (libc::SYS_mount, "changing the mount view"),
    (libc::SYS_umount2, "changing the mount view"),
    (libc::SYS_pivot_root, "changing the mount view"),
    (libc::SYS_chroot, "changing the root"),
    (libc::SYS_open_tree, "changing the mount view"),
    (libc::SYS_move_mount, "changing the mount view"),
    (libc::SYS_fsopen, "changing the mount view"),
    (libc::SYS_fsconfig, "changing the mount view"),
    (libc::SYS_fsmount, "changing the mount view"),
    (libc::SYS_fspick, "changing the mount view"),
    (libc::SYS_mount_setattr, "changing the mount view"),
    (libc::SYS_ptrace, "tracing other processes"),
    (
        libc::SYS_process_vm_readv,
        "reading other processes' memory",
    ),
    (
        libc::SYS_process_vm_writev,
        "writing other processes' memory",
    ),
    (libc::SYS_pidfd_getfd, "taking other processes' files"),
    (libc::SYS_kcmp, "probing other processes"),
    (
        libc::SYS_keyctl,
        "the kernel keyring is shared with the host",
    ),
    (
        libc::SYS_add_key,
        "the kernel keyring is shared with the host",
    ),
    (
        libc::SYS_request_key,
        "the kernel keyring is shared with the host",
    ),
    (libc::SYS_bpf, "loading kernel programs"),
    (
        libc::SYS_perf_event_open,
        "kernel performance events leak host state",
    ),
    (libc::SYS_userfaultfd, "a common tool for kernel exploits"),
    (libc::SYS_io_uring_setup, "io_uring bypasses this filter"),
    (libc::SYS_io_uring_enter, "io_uring bypasses this filter"),
    (libc::SYS_io_uring_register, "io_uring bypasses this filter"),
    (libc::SYS_kexec_load, "replacing the kernel"),
    (libc::SYS_kexec_file_load, "replacing the kernel"),
    (libc::SYS_init_module, "loading kernel modules"),
    (libc::SYS_finit_module, "loading kernel modules"),
    (libc::SYS_delete_module, "unloading kernel modules"),
    (libc::SYS_reboot, "stopping the machine"),
    (libc::SYS_swapon, "changing swap"),
    (libc::SYS_swapoff, "changing swap"),
    (libc::SYS_acct, "process accounting"),
    (libc::SYS_quotactl, "disk quotas"),
    (
        libc::SYS_name_to_handle_at,
        "file handles reach past the mount view",
    ),
    (
        libc::SYS_open_by_handle_at,
        "file handles reach past the mount view",
    ),
];

/// Namespace flags `clone` may not be given.
const NAMESPACE_FLAGS: &[u64] = &[
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWCGROUP as u64,
];

/// The bits of `socket`'s type argument that hold the type (the rest are SOCK_NONBLOCK and
/// SOCK_CLOEXEC), but the lowest: a Unix socket of type SOCK_RAW (3) is made a SOCK_DGRAM (2)
/// one, so the two are refused together as the types whose bits under this mask are 2.
const DATAGRAM_TYPES_MASK: u64 = 0xe;

/// The x32 ABI marks its syscall numbers with this bit.
const X32_BIT: u32 = 0x4000_0000;

/// The classic BPF instructions the hand-written filters and the dispatch use.
const LOAD: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JUMP: u16 = (libc::BPF_JMP | libc::BPF_JA) as u16;
const JUMP_IF_EQUAL: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JUMP_IF_SET: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
const JUMP_IF_ABOVE: u16 = (libc::BPF_JMP | libc::BPF_JGT | libc::BPF_K) as u16;
const JUMP_IF_AT_LEAST: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const RETURN: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

/// Offsets in `seccomp_data`: the call's number, and its architecture.
const NR: u32 = 0;
const ARCH: u32 = 4;

fn step(code: u16, jt: u8, jf: u8, k: u32) -> seccompiler::sock_filter {
    seccompiler::sock_filter { code, jt, jf, k }
}

/// A short filter ahead of the main one, for answers the main one cannot give (it has one
/// errno for everything):
/// - every call through the x32 ABI is refused (EPERM). Nothing a command runs needs it, and
///   its numbering (with its own `ioctl`, say) would otherwise have to be mirrored rule by rule;
/// - `clone3` answers "not implemented" (ENOSYS): it passes its flags in memory the filter
///   cannot read, and ENOSYS is what makes libc fall back to `clone`, whose flags it can. With
///   EPERM, libc gives up instead and no program could start a thread.
fn guard() -> BpfProgram {
    vec![
        step(LOAD, 0, 0, NR),
        step(JUMP_IF_SET, 0, 1, X32_BIT),
        step(RETURN, 0, 0, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        step(JUMP_IF_EQUAL, 0, 1, libc::SYS_clone3 as u32),
        step(RETURN, 0, 0, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
        step(RETURN, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}

/// The architecture the filters are built for, as `seccomp_data.arch` names it.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;

/// A filter that hands every `connect` to the supervisor holding its listener, and lets
/// everything else through (to the filters stacked with it). A filter cannot read the address
/// `connect` is given (it is in memory), so the supervisor decides.
/// Other architectures' calls fall through here: the main filter kills them, and a kill takes
/// precedence over a notification.
pub fn connect_notifier() -> BpfProgram {
    vec![
        step(LOAD, 0, 0, ARCH),
        step(JUMP_IF_EQUAL, 0, 3, AUDIT_ARCH),
        step(LOAD, 0, 0, NR),
        step(JUMP_IF_EQUAL, 0, 1, libc::SYS_connect as u32),
        step(RETURN, 0, 0, libc::SECCOMP_RET_USER_NOTIF),
        step(RETURN, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(|e| e.to_string())
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conditions).map_err(|e| e.to_string())
}

/// What the filter must also refuse when there are no namespaces to contain it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Extra {
    /// Every socket family but Unix (when allowed) and netlink: without a network namespace
    /// the host's network, loopback included, is all there is.
    pub only_local_sockets: bool,
    /// System V IPC and POSIX message queues: without an IPC namespace they are the host's.
    pub deny_host_ipc: bool,
}

/// System V IPC and message-queue calls, shared with the host without an IPC namespace.
const HOST_IPC: &[libc::c_long] = &[
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_semctl,
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_mq_open,
    libc::SYS_mq_unlink,
];

/// Builds the filter. `allow_unix` lets the command create Unix-domain sockets (only when the
/// user allowed some socket path).
pub fn build(allow_unix: bool, extra: Extra) -> Result<BpfProgram, String> {
    let rules = rules(allow_unix, extra)?;
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    let ruled = rules
        .keys()
        .map(|&nr| u32::try_from(nr))
        .collect::<Result<Vec<u32>, _>>();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    let program: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    // A number the dispatch cannot compare would be allowed past its rule: none then.
    Ok(match ruled {
        Ok(ruled) => with_dispatch(&ruled, program),
        Err(_) => program,
    })
}

/// The rules, by call number: a call whose rule holds (or with an empty rule list, any call
/// of that number) is refused.
fn rules(allow_unix: bool, extra: Extra) -> Result<BTreeMap<i64, Vec<SeccompRule>>, String> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let mut add = |nr: libc::c_long, r: Vec<SeccompRule>| {
        rules.insert(nr, r);
    };
    for (nr, _why) in DENIED {
        add(*nr, Vec::new());
    }
    let clone_rules = NAMESPACE_FLAGS
        .iter()
        .map(|&flag| rule(vec![cond(0, SeccompCmpOp::MaskedEq(flag), flag)?]))
        .collect::<Result<Vec<_>, _>>()?;
    add(libc::SYS_clone, clone_rules);
    // Pushing characters into the terminal's input (TIOCSTI) or the console (TIOCLINUX)
    // would run them in the user's shell after the sandbox ends.
    // The request constants' type differs between architectures, hence the cast.
    #[allow(clippy::unnecessary_cast)]
    let requests = [libc::TIOCSTI as u64, libc::TIOCLINUX as u64];
    let ioctl_rules = requests
        .iter()
        .map(|&req| rule(vec![cond(1, SeccompCmpOp::Eq, req)?]))
        .collect::<Result<Vec<_>, _>>()?;
    add(libc::SYS_ioctl, ioctl_rules);
    let socket_rules = if extra.only_local_sockets {
        // One rule whose conditions all hold: a family other than each allowed one.
        let mut allowed = vec![libc::AF_NETLINK as u64];
        if allow_unix {
            allowed.push(libc::AF_UNIX as u64);
        }
        let others = allowed
            .iter()
            .map(|&f| cond(0, SeccompCmpOp::Ne, f))
            .collect::<Result<Vec<_>, _>>()?;
        vec![rule(others)?]
    } else {
        let mut families = vec![libc::AF_VSOCK as u64];
        if !allow_unix {
            families.push(libc::AF_UNIX as u64);
        }
        families
            .iter()
            .map(|&f| rule(vec![cond(0, SeccompCmpOp::Eq, f)?]))
            .collect::<Result<Vec<_>, _>>()?
    };
    let mut socket_rules = socket_rules;
    // A datagram Unix socket sends to a path given with each message (`sendto`, `sendmsg`),
    // a lookup `connect`'s supervisor never sees; even a connected pair's does, so a
    // `socketpair` is enough to reach every datagram socket the view shows (journald,
    // syslog) and pass it descriptors. Stream and sequenced-packet sockets ignore or refuse
    // such an address, so those stay: pipes between a program's own processes need them.
    let datagram = || -> Result<SeccompRule, String> {
        rule(vec![
            cond(0, SeccompCmpOp::Eq, libc::AF_UNIX as u64)?,
            cond(
                1,
                SeccompCmpOp::MaskedEq(DATAGRAM_TYPES_MASK),
                libc::SOCK_DGRAM as u64,
            )?,
        ])
    };
    add(libc::SYS_socketpair, vec![datagram()?]);
    if allow_unix {
        socket_rules.push(datagram()?);
        // A filter of the command's own with a listener would be asked about `connect`
        // before the supervisor's (the newest filter's notification wins) and could let it
        // through. The kernel allows one listener per process tree already; this says so.
        add(
            libc::SYS_seccomp,
            vec![rule(vec![
                cond(
                    0,
                    SeccompCmpOp::Eq,
                    u64::from(libc::SECCOMP_SET_MODE_FILTER),
                )?,
                cond(
                    1,
                    SeccompCmpOp::MaskedEq(libc::SECCOMP_FILTER_FLAG_NEW_LISTENER),
                    libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
                )?,
            ])?],
        );
    }
    add(libc::SYS_socket, socket_rules);
    if extra.deny_host_ipc {
        for &nr in HOST_IPC {
            add(nr, Vec::new());
        }
    }
    Ok(rules)
}

/// A stand-in for a jump to the end of the dispatch, set once its length is known.
const TO_RULES: u32 = u32::MAX;

/// Puts a dispatch ahead of seccompiler's `program`, whose rules are for the call numbers
/// `ruled` (ascending) and which allows every other call: a binary search over the stretches
/// of numbers that have rules, which allows a call outside them at once and hands every other
/// call (and every call of another architecture) to `program` unchanged.
///
/// Why: seccompiler compares the call's number with each ruled number in turn, and the kernel,
/// when it loads a filter, runs it for every call number to find those it always allows (its
/// cache, so that those calls skip the filter). With some fifty ruled numbers that was about
/// a hundred steps for each of some four hundred numbers, on every command's start, with
/// interrupts off; the search takes about ten. Numbers less than [`GAP`] apart share a
/// stretch, so the search stays short; a number in a stretch without a rule of its own goes
/// through `program`, which allows it as before. What each call gets is unchanged: the tests
/// run both programs over every number and the arguments the rules look at.
///
/// Should a jump not fit an instruction's 8-bit offset, `program` is returned as it was.
fn with_dispatch(ruled: &[u32], program: BpfProgram) -> BpfProgram {
    let mut stretches: Vec<(u32, u32)> = Vec::new();
    for &nr in ruled {
        match stretches.last_mut() {
            Some((_, last)) if nr.saturating_sub(*last) < GAP => *last = nr,
            _ => stretches.push((nr, nr)),
        }
    }
    let Some(search) = search(&stretches) else {
        return program;
    };
    let mut out = vec![
        step(LOAD, 0, 0, ARCH),
        step(JUMP_IF_EQUAL, 1, 0, AUDIT_ARCH),
        step(JUMP, 0, 0, TO_RULES),
        step(LOAD, 0, 0, NR),
    ];
    out.extend(search);
    let length = out.len();
    for (at, insn) in out.iter_mut().enumerate() {
        if insn.code == JUMP && insn.k == TO_RULES {
            insn.k = (length - at - 1) as u32;
        }
    }
    out.extend(program);
    out
}

/// Ruled numbers closer than this share a stretch of the dispatch.
const GAP: u32 = 16;

/// The search over `stretches` (ascending, apart) with the call's number loaded: a number in
/// one jumps to the rules ([`TO_RULES`]), any other is allowed. `None` where an offset would
/// not fit.
fn search(stretches: &[(u32, u32)]) -> Option<Vec<seccompiler::sock_filter>> {
    match stretches {
        [] => Some(vec![step(RETURN, 0, 0, libc::SECCOMP_RET_ALLOW)]),
        &[(first, last)] => Some(vec![
            step(JUMP_IF_ABOVE, 1, 0, last),
            step(JUMP_IF_AT_LEAST, 1, 0, first),
            step(RETURN, 0, 0, libc::SECCOMP_RET_ALLOW),
            step(JUMP, 0, 0, TO_RULES),
        ]),
        _ => {
            let (below, from) = stretches.split_at(stretches.len() / 2);
            let below = search(below)?;
            let mut out = vec![step(
                JUMP_IF_AT_LEAST,
                u8::try_from(below.len()).ok()?,
                0,
                from[0].0,
            )];
            out.extend(below);
            out.extend(search(from)?);
            Some(out)
        }
    }
}

/// Installs the guard and the filter.
pub fn apply(program: &BpfProgram) -> Result<(), String> {
    seccompiler::apply_filter(&guard()).map_err(|e| e.to_string())?;
    seccompiler::apply_filter(program).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    /// Runs a filter as the kernel would, on a call's number, architecture and arguments
    /// (the instructions seccompiler and the hand-written filters use). Returns the answer and
    /// how many instructions it took.
    fn run_counted(
        program: &[seccompiler::sock_filter],
        nr: u32,
        arch: u32,
        args: [u64; 6],
    ) -> (u32, usize) {
        let mut pc = 0;
        let mut acc: u32 = 0;
        let mut steps = 0;
        loop {
            let i = &program[pc];
            steps += 1;
            let code = u32::from(i.code);
            let jump = |taken: bool| usize::from(if taken { i.jt } else { i.jf });
            pc += match code {
                c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => {
                    acc = match i.k {
                        0 => nr,
                        4 => arch,
                        k @ 16..=63 => {
                            let arg = args[(k as usize - 16) / 8];
                            if k % 8 == 0 {
                                arg as u32
                            } else {
                                (arg >> 32) as u32
                            }
                        }
                        k => panic!("load at {k}"),
                    };
                    0
                }
                c if c == libc::BPF_ALU | libc::BPF_AND | libc::BPF_K => {
                    acc &= i.k;
                    0
                }
                c if c == libc::BPF_JMP | libc::BPF_JA => i.k as usize,
                c if c == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K => jump(acc == i.k),
                c if c == libc::BPF_JMP | libc::BPF_JGT | libc::BPF_K => jump(acc > i.k),
                c if c == libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K => jump(acc >= i.k),
                c if c == libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K => jump(acc & i.k != 0),
                c if c == libc::BPF_RET | libc::BPF_K => return (i.k, steps),
                c => panic!("instruction {c:#x}"),
            };
            pc += 1;
        }
    }

    fn run(program: &[seccompiler::sock_filter], nr: u32, arch: u32) -> u32 {
        run_counted(program, nr, arch, [0; 6]).0
    }

    /// seccompiler's program for the same rules, without the dispatch.
    fn plain(allow_unix: bool, extra: super::Extra) -> Vec<seccompiler::sock_filter> {
        let program = super::build(allow_unix, extra).expect("build");
        let ahead = program
            .iter()
            .position(|i| i.code == super::JUMP && i.k > 0)
            .expect("the dispatch's first jump");
        program[program[ahead].k as usize + ahead + 1..].to_vec()
    }

    /// Every filter's answer is the same with the dispatch as without it, for every call
    /// number (also with the x32 bit, and of other architectures) and the argument values
    /// the rules look at; and a call with no rule is allowed within a dozen instructions,
    /// where seccompiler's program alone compares it with every ruled number.
    #[test]
    // The request constants' type differs between architectures, hence the casts.
    #[allow(clippy::unnecessary_cast)]
    fn the_dispatch_changes_no_answer_and_shortens_the_way_to_allow() {
        let values: Vec<u64> = [0u64, u64::MAX, 1, 2, 3, 5, 0x10, 0x40, 0x80, 0x8_0000]
            .into_iter()
            .chain(super::NAMESPACE_FLAGS.iter().copied())
            .chain([libc::TIOCSTI as u64, libc::TIOCLINUX as u64])
            .chain(
                [
                    libc::AF_UNIX,
                    libc::AF_INET,
                    libc::AF_NETLINK,
                    libc::AF_VSOCK,
                ]
                .map(|f| f as u64),
            )
            .chain(
                [
                    libc::SOCK_DGRAM,
                    libc::SOCK_RAW,
                    libc::SOCK_STREAM,
                    libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                ]
                .map(|t| t as u64),
            )
            .chain([
                u64::from(libc::SECCOMP_SET_MODE_FILTER),
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            ])
            .collect();
        let pairs: Vec<[u64; 6]> = values
            .iter()
            .flat_map(|&a| values.iter().map(move |&b| [a, b, 0, 0, 0, 0]))
            .chain([[u64::MAX; 6]])
            .collect();
        let extras = [
            super::Extra::default(),
            super::Extra {
                only_local_sockets: true,
                deny_host_ipc: true,
            },
        ];
        for allow_unix in [false, true] {
            for extra in extras {
                let ruled: Vec<u32> = super::rules(allow_unix, extra)
                    .expect("rules")
                    .keys()
                    .map(|&nr| nr as u32)
                    .collect();
                let with = super::build(allow_unix, extra).expect("build");
                let without = plain(allow_unix, extra);
                assert!(with.len() > without.len(), "no dispatch was put ahead");
                // What the kernel runs through when it loads the filter: every number's way.
                let (mut with_steps, mut without_steps) = (0, 0);
                let numbers = (0..1024u32).chain((0..1024).map(|n| n | super::X32_BIT));
                for nr in numbers {
                    for arch in [super::AUDIT_ARCH, 0x4000_0003] {
                        let args: &[[u64; 6]] = if ruled.contains(&nr) {
                            &pairs
                        } else {
                            &[[0; 6], [u64::MAX; 6]]
                        };
                        for &a in args {
                            let (got, steps) = run_counted(&with, nr, arch, a);
                            let (want, before) = run_counted(&without, nr, arch, a);
                            assert_eq!(got, want, "call {nr:#x} of {arch:#x} with {a:x?}");
                            if arch == super::AUDIT_ARCH && a == [0; 6] {
                                (with_steps, without_steps) =
                                    (with_steps + steps, without_steps + before);
                                let near = ruled.iter().any(|&r| r.abs_diff(nr) < super::GAP);
                                if !near {
                                    assert_eq!(got, libc::SECCOMP_RET_ALLOW);
                                    assert!(steps <= 12, "call {nr}: {steps} instructions");
                                }
                            }
                        }
                    }
                }
                println!(
                    "instructions run for every call number: {with_steps} with the dispatch, {without_steps} without"
                );
                assert!(
                    with_steps * 4 < without_steps,
                    "{with_steps} {without_steps}"
                );
            }
        }
    }

    #[test]
    fn only_connect_goes_to_the_supervisor() {
        let program = super::connect_notifier();
        let arch = super::AUDIT_ARCH;
        let connect = libc::SYS_connect as u32;
        assert_eq!(run(&program, connect, arch), libc::SECCOMP_RET_USER_NOTIF);
        for other in [
            libc::SYS_sendto,
            libc::SYS_socket,
            libc::SYS_read,
            libc::SYS_bind,
        ] {
            assert_eq!(run(&program, other as u32, arch), libc::SECCOMP_RET_ALLOW);
        }
        // Another ABI's numbering means something else; the main filter kills those calls.
        assert_eq!(run(&program, connect, 0x4000_0003), libc::SECCOMP_RET_ALLOW);
    }

    /// The kernel's cost to load a filter grows with its length (it translates and compiles
    /// each instruction), on every run: keep the main filter within its budget, the dispatch's
    /// forty-odd instructions included (docs/BENCHMARKS.md has the figures). Prints the
    /// lengths.
    #[test]
    fn the_filters_stay_short() -> Result<(), String> {
        let main = super::build(false, super::Extra::default())?.len();
        let fallback = super::build(
            true,
            super::Extra {
                only_local_sockets: true,
                deny_host_ipc: true,
            },
        )?
        .len();
        let guard = super::guard().len();
        println!(
            "seccomp filter lengths: main {main}, without namespaces {fallback}, guard {guard}"
        );
        assert!(
            main < 340 && fallback < 420 && guard < 10,
            "{main} {fallback} {guard}"
        );
        Ok(())
    }
}
