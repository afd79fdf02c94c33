//! Loaded into the bash that a warm sandbox starts ahead of its next command
//! (`src/linux/prestart.rs`). It runs once the dynamic loader and the C library have started
//! and before bash's `main`: it waits for the command, then gives bash the command's
//! arguments, environment, standard input, output and error, and limits. So `main` starts
//! exactly as it would had bash been exec'd for this command, and the command's wait no longer
//! includes bash's `execve`, its libraries' loading and the C library's start-up (about a
//! millisecond on a virtual machine, where each `cpuid` the C library asks traps).
//!
//! `build.rs` builds this file alone, `no_std`, as a shared object: nothing of Rust's runtime
//! comes into bash. Everything here is `unsafe`: it works on raw descriptors and on the
//! argument vector the C library will hand to `main`.
//!
//! The message it reads, which `prestart::frame` writes: a header of 8 bytes (`CBP1`, then the
//! length of the rest, little-endian `u32`) carrying four descriptors (standard input, output,
//! error, and the channel its failures are told on); then the rest: one byte saying which
//! limits follow, three `u64` (processes, memory, CPU seconds), the number of arguments and of
//! environment entries (`u32` each), and those strings, each ending in NUL.
#![no_std]
#![allow(clippy::missing_safety_doc)]

use core::ffi::{c_char, c_int, c_void};
use core::mem::size_of;

#[repr(C)]
struct IoVec {
    base: *mut c_void,
    len: usize,
}

#[repr(C)]
struct MsgHdr {
    name: *mut c_void,
    namelen: u32,
    iov: *mut IoVec,
    iovlen: usize,
    control: *mut c_void,
    controllen: usize,
    flags: c_int,
}

#[repr(C)]
struct CmsgHdr {
    len: usize,
    level: c_int,
    kind: c_int,
}

#[repr(C)]
struct RLimit {
    cur: u64,
    max: u64,
}

// The C library bash has already loaded.
unsafe extern "C" {
    static mut environ: *const *const c_char;
    fn getenv(name: *const c_char) -> *const c_char;
    fn recvmsg(fd: c_int, msg: *mut MsgHdr, flags: c_int) -> isize;
    fn read(fd: c_int, buf: *mut c_void, n: usize) -> isize;
    fn write(fd: c_int, buf: *const c_void, n: usize) -> isize;
    fn close(fd: c_int) -> c_int;
    fn dup2(old: c_int, new: c_int) -> c_int;
    fn setrlimit(resource: c_int, limit: *const RLimit) -> c_int;
    fn malloc(n: usize) -> *mut c_void;
    fn open(path: *const c_char, flags: c_int, ...) -> c_int;
    fn sbrk(increment: isize) -> *mut c_void;
    fn prctl(option: c_int, ...) -> c_int;
    fn strerror(errnum: c_int) -> *const c_char;
    fn __errno_location() -> *mut c_int;
    fn _exit(code: c_int) -> !;
}

const SOL_SOCKET: c_int = 1;
const SCM_RIGHTS: c_int = 1;
const MSG_CMSG_CLOEXEC: c_int = 0x4000_0000;
const RLIMIT_CPU: c_int = 0;
const RLIMIT_NPROC: c_int = 6;
const RLIMIT_AS: c_int = 9;
/// `exit::SETUP_FAILED`.
const SETUP_FAILED: c_int = 125;
const MAGIC: &[u8; 4] = b"CBP1";
/// A request's size is bounded by the keeper's own limit on the line it read.
const MOST: usize = 64 << 20;
/// Standard input, output, error, and the failure channel.
const FDS: usize = 4;

#[used]
#[unsafe(link_section = ".init_array")]
static TAKE_COMMAND: unsafe extern "C" fn(c_int, *mut *const c_char, *const *const c_char) =
    take_command;

unsafe extern "C" fn take_command(argc: c_int, argv: *mut *const c_char, _: *const *const c_char) {
    unsafe {
        // Only the bash cordon started says where its socket is; anywhere else, do nothing.
        let fds = getenv(c"CORDON_BASH_PRELOAD".as_ptr());
        if fds.is_null() {
            return;
        }
        let (socket, library) = parse_pair(fds);
        if socket < 0 {
            _exit(SETUP_FAILED);
        }
        // The library is loaded; its descriptor must not reach the command.
        close(library);
        // Read while nothing waits on it.
        let layout = layout();
        // Ready: the keeper reads this before it hands the command over.
        if write(socket, b"P".as_ptr().cast(), 1) != 1 {
            _exit(SETUP_FAILED);
        }
        let mut header = [0u8; 8];
        let mut given = [-1 as c_int; FDS];
        let got = receive(socket, &mut header, &mut given);
        if got == 0 {
            // The keeper closed without a command: it is being run another way, or not at all.
            _exit(0);
        }
        let channel = given[FDS - 1];
        if got < header.len() as isize || &header[..4] != MAGIC || given.iter().any(|&fd| fd < 3) {
            fail(channel, "request", b"not a command from cordon's keeper");
        }
        let len = u32::from_le_bytes([header[4], header[5], header[6], header[7]]) as usize;
        if len > MOST {
            fail(channel, "request", b"too long");
        }
        let rest = malloc(len + 1).cast::<u8>();
        if rest.is_null() || !read_all(socket, rest, len) {
            fail(channel, "request", b"cut short");
        }
        *rest.add(len) = 0;
        for (n, &fd) in given[..3].iter().enumerate() {
            if dup2(fd, n as c_int) < 0 {
                fail_errno(channel, "standard input and output");
            }
            close(fd);
        }
        let request = core::slice::from_raw_parts(rest, len);
        let Some((limits, after_limits)) = take_limits(request) else {
            fail(channel, "request", b"no limits");
        };
        for (resource, value, step) in limits {
            if let Some(v) = value
                && setrlimit(resource, &RLimit { cur: v, max: v }) < 0
            {
                fail_errno(channel, step);
            }
        }
        let Some((count, envc, strings)) = take_counts(after_limits) else {
            fail(channel, "request", b"no counts");
        };
        if count != argc as usize {
            fail(
                channel,
                "request",
                b"not as many arguments as bash was started with",
            );
        }
        let table = malloc((envc + 1) * size_of::<*const c_char>()).cast::<*const c_char>();
        if table.is_null() {
            fail(channel, "request", b"no memory");
        }
        let base = strings.as_ptr();
        let mut at = 0usize;
        // `count` is bash's own argument count, so at least 1: this is always set.
        let mut env_start = 0usize;
        for i in 0..count + envc {
            let Some(end) = strings[at..].iter().position(|&b| b == 0) else {
                fail(channel, "request", b"a string without its end");
            };
            let s = base.add(at).cast::<c_char>();
            if i < count {
                *argv.add(i) = s;
            } else {
                *table.add(i - count) = s;
            }
            at += end + 1;
            if i + 1 == count {
                env_start = at;
            }
        }
        *table.add(envc) = core::ptr::null();
        // `main` is handed `environ` as it is when the constructors are done.
        environ = table;
        // What `ps` and `pgrep -f` read of this bash and of the subshells it forks: the
        // strings are laid out as the kernel lays out an exec's, arguments then environment.
        show_as_exec(
            layout,
            base as u64,
            (base as u64) + env_start as u64,
            (base as u64) + at as u64,
        );
        close(channel);
        close(socket);
    }
}

/// Where this process's code, data, heap and stack start and end, from `/proc/self/stat`
/// (fields 26, 27, 45, 46, 47 and 28); these stay as the exec made them.
struct Layout([u64; 6]);

unsafe fn layout() -> Option<Layout> {
    unsafe {
        let mut stat = [0u8; 2048];
        let fd = open(c"/proc/self/stat".as_ptr(), 0);
        if fd < 0 {
            return None;
        }
        let got = read(fd, stat.as_mut_ptr().cast(), stat.len() - 1);
        close(fd);
        let got = usize::try_from(got).ok()?;
        // The fields after the command's name, which may hold anything but ends at the last
        // `)`; the first of them is the third field.
        let end = stat[..got].iter().rposition(|&b| b == b')')?;
        let mut fields = [0u64; 48];
        let after = stat[end + 1..got]
            .split(|&b| b == b' ')
            .filter(|f| !f.is_empty());
        for (i, field) in after.enumerate() {
            if let Some(slot) = fields.get_mut(i + 3) {
                *slot = field
                    .iter()
                    .take_while(|b| b.is_ascii_digit())
                    .fold(0u64, |n, &b| {
                        n.wrapping_mul(10).wrapping_add(u64::from(b - b'0'))
                    });
            }
        }
        Some(Layout([26, 27, 45, 46, 47, 28].map(|i| fields[i])))
    }
}

/// Points `/proc/self/cmdline` and `/proc/self/environ` at the strings from `arg_start` to
/// `env_start` and on to `env_end`, with `PR_SET_MM_MAP` (no privilege needed when the
/// executable and the auxiliary vector stay as they are); every other address it sets is
/// given as it is. Where the kernel has no such call they keep showing the placeholder bash
/// was started with, which changes nothing bash does.
unsafe fn show_as_exec(layout: Option<Layout>, arg_start: u64, env_start: u64, env_end: u64) {
    const PR_SET_MM: c_int = 35;
    const PR_SET_MM_MAP: u64 = 14;
    #[repr(C)]
    struct MmMap {
        start_code: u64,
        end_code: u64,
        start_data: u64,
        end_data: u64,
        start_brk: u64,
        brk: u64,
        start_stack: u64,
        arg_start: u64,
        arg_end: u64,
        env_start: u64,
        env_end: u64,
        auxv: *const u64,
        auxv_size: u32,
        exe_fd: u32,
    }
    let Some(Layout(
        [
            start_code,
            end_code,
            start_data,
            end_data,
            start_brk,
            start_stack,
        ],
    )) = layout
    else {
        return;
    };
    unsafe {
        let map = MmMap {
            start_code,
            end_code,
            start_data,
            end_data,
            start_brk,
            brk: sbrk(0) as u64,
            start_stack,
            arg_start,
            arg_end: env_start,
            env_start,
            env_end,
            auxv: core::ptr::null(),
            auxv_size: 0,
            exe_fd: u32::MAX,
        };
        prctl(
            PR_SET_MM,
            PR_SET_MM_MAP,
            &map as *const MmMap,
            size_of::<MmMap>() as u64,
            0u64,
        );
    }
}

/// Two decimal descriptors, "socket,library"; `(-1, -1)` if malformed.
unsafe fn parse_pair(mut s: *const c_char) -> (c_int, c_int) {
    let mut out = [0 as c_int; 2];
    let mut which = 0;
    let mut digits = 0;
    unsafe {
        loop {
            let c = *s as u8;
            match c {
                b'0'..=b'9' if digits < 9 => {
                    out[which] = out[which] * 10 + c_int::from(c - b'0');
                    digits += 1;
                }
                b',' if which == 0 && digits > 0 => {
                    which = 1;
                    digits = 0;
                }
                0 if which == 1 && digits > 0 => return (out[0], out[1]),
                _ => return (-1, -1),
            }
            s = s.add(1);
        }
    }
}

/// One `recvmsg` into `header`, with up to [`FDS`] descriptors into `fds` (close-on-exec:
/// should bash exec before they are placed, they do not pass on).
unsafe fn receive(socket: c_int, header: &mut [u8; 8], fds: &mut [c_int; FDS]) -> isize {
    const SPACE: usize = 16 + FDS * size_of::<c_int>();
    #[repr(C, align(8))]
    struct Control([u8; SPACE]);
    let mut control = Control([0; SPACE]);
    let mut iov = IoVec {
        base: header.as_mut_ptr().cast(),
        len: header.len(),
    };
    let mut msg = MsgHdr {
        name: core::ptr::null_mut(),
        namelen: 0,
        iov: &mut iov,
        iovlen: 1,
        control: control.0.as_mut_ptr().cast(),
        controllen: SPACE,
        flags: 0,
    };
    unsafe {
        let got = loop {
            let got = recvmsg(socket, &mut msg, MSG_CMSG_CLOEXEC);
            if got >= 0 || *__errno_location() != 4 {
                break got;
            }
        };
        if got <= 0 || msg.controllen < size_of::<CmsgHdr>() {
            return got.min(0);
        }
        let cmsg = control.0.as_ptr().cast::<CmsgHdr>();
        let data_at = size_of::<CmsgHdr>().next_multiple_of(size_of::<usize>());
        if (*cmsg).level == SOL_SOCKET && (*cmsg).kind == SCM_RIGHTS {
            let n = ((*cmsg).len.saturating_sub(data_at) / size_of::<c_int>()).min(FDS);
            let data = control.0.as_ptr().add(data_at).cast::<c_int>();
            for (i, fd) in fds.iter_mut().enumerate().take(n) {
                *fd = data.add(i).read_unaligned();
            }
        }
        got
    }
}

unsafe fn read_all(fd: c_int, mut to: *mut u8, mut len: usize) -> bool {
    unsafe {
        while len > 0 {
            let got = read(fd, to.cast(), len);
            if got < 0 && *__errno_location() == 4 {
                continue;
            }
            if got <= 0 {
                return false;
            }
            to = to.add(got as usize);
            len -= got as usize;
        }
    }
    true
}

type Limit = (c_int, Option<u64>, &'static str);

fn take_limits(b: &[u8]) -> Option<([Limit; 3], &[u8])> {
    let (&which, mut rest) = b.split_first()?;
    let mut next = |bit: u8| {
        let (v, r) = rest.split_first_chunk::<8>()?;
        rest = r;
        Some((which & bit != 0).then_some(u64::from_le_bytes(*v)))
    };
    let limits = [
        (RLIMIT_NPROC, next(1)?, "limit processes"),
        (RLIMIT_AS, next(2)?, "limit memory"),
        (RLIMIT_CPU, next(4)?, "limit CPU time"),
    ];
    Some((limits, rest))
}

fn take_counts(b: &[u8]) -> Option<(usize, usize, &[u8])> {
    let (argc, rest) = b.split_first_chunk::<4>()?;
    let (envc, rest) = rest.split_first_chunk::<4>()?;
    Some((
        u32::from_le_bytes(*argc) as usize,
        u32::from_le_bytes(*envc) as usize,
        rest,
    ))
}

/// Says what failed on the channel, as the keeper's other processes say it (`error`, the exit
/// code, the step, why), and ends.
unsafe fn fail(channel: c_int, step: &str, why: &[u8]) -> ! {
    unsafe {
        let mut line = [0u8; 512];
        let mut at = 0;
        for part in [
            b"error\t125\t".as_slice(),
            step.as_bytes(),
            b"\t",
            why,
            b"\n",
        ] {
            let n = part.len().min(line.len() - at - 1);
            line[at..at + n].copy_from_slice(&part[..n]);
            at += n;
        }
        if channel >= 0 {
            write(channel, line.as_ptr().cast(), at);
        }
        _exit(SETUP_FAILED)
    }
}

unsafe fn fail_errno(channel: c_int, step: &str) -> ! {
    unsafe {
        let text = strerror(*__errno_location()).cast::<u8>();
        let mut len = 0;
        while !text.is_null() && *text.add(len) != 0 && len < 200 {
            len += 1;
        }
        fail(channel, step, core::slice::from_raw_parts(text, len))
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: ending the process is always sound.
    unsafe { _exit(SETUP_FAILED) }
}

/// Named by the unwinding tables of the precompiled `core` this links; with `panic=abort`
/// nothing unwinds, so it is never called, but the loader must find it.
#[unsafe(no_mangle)]
extern "C" fn rust_eh_personality() {}
