//! The few system calls the executor makes that std does not offer: a pseudo-terminal, its
//! window size, handing it to a child as controlling terminal, ending a child with its parent,
//! signals to a process group, waiting for a child without reaping it, and lending the
//! person's terminal to a child's process group. Every `unsafe` block of the `cordon` crate is
//! here.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn winsize(rows: u16, cols: u16) -> libc::winsize {
    libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

/// A new pseudo-terminal of `rows` × `cols`: (master, slave), both close-on-exec.
pub fn open_pty(rows: u16, cols: u16) -> io::Result<(File, File)> {
    let mut master: libc::c_int = -1;
    let mut slave: libc::c_int = -1;
    let size = winsize(rows, cols);
    // SAFETY: the out-pointers are valid for the call; a null name and termios are allowed;
    // `size` is a valid winsize that outlives the call.
    check(unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    })?;
    // SAFETY: openpty succeeded, so both are open descriptors that nothing else owns.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    for fd in [&master, &slave] {
        // SAFETY: fcntl on a descriptor we own, with integer arguments only.
        check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) })?;
    }
    Ok((File::from(master), File::from(slave)))
}

/// Tells the terminal behind `master` its new size; the kernel then sends SIGWINCH to the
/// terminal's foreground process group.
pub fn set_window_size(master: &File, rows: u16, cols: u16) -> io::Result<()> {
    let size = winsize(rows, cols);
    // SAFETY: TIOCSWINSZ reads one winsize through the pointer, which is valid for the call.
    check(unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &size) }).map(drop)
}

/// Makes the child `cmd` starts the leader of a new session whose controlling terminal is its
/// standard input, so that Ctrl-C and window changes on that terminal signal it.
pub fn controlling_terminal(cmd: &mut Command) {
    // SAFETY: the closure runs in the child between fork and exec and calls only setsid and
    // ioctl, which are async-signal-safe, allocating nothing.
    unsafe {
        cmd.pre_exec(|| {
            check(libc::setsid())?;
            check(libc::ioctl(0, libc::TIOCSCTTY as _, 0))?;
            Ok(())
        });
    }
}

/// Makes the child `cmd` starts the leader of a new session without a controlling terminal,
/// so that the terminal on its standard input stays free for the command it starts.
pub fn new_session(cmd: &mut Command) {
    // SAFETY: the closure runs in the child between fork and exec and calls only setsid, which
    // is async-signal-safe, allocating nothing.
    unsafe {
        cmd.pre_exec(|| check(libc::setsid()).map(drop));
    }
}

/// Makes `dir` the working directory of the child `cmd` starts: the directory object that was
/// checked, which no rename or planted link can swap for another between the check and the
/// start (a name could be redirected by a command running at the same time).
pub fn working_dir(cmd: &mut Command, dir: std::sync::Arc<OwnedFd>) {
    // SAFETY: the closure runs in the child between fork and exec and calls only fchdir, which
    // is async-signal-safe, on a descriptor the captured Arc keeps open; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || check(libc::fchdir(dir.as_raw_fd())).map(drop));
    }
}

/// Kills the child `cmd` starts (SIGKILL) when the thread that started it ends, with this
/// whole process if it is killed: a run must not outlive the cordon that answers for it. The
/// starting thread waits for the run, so it lives as long as the run should.
pub fn die_with_parent(cmd: &mut Command) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the child between fork and exec and calls only prctl and
    // getppid, which are async-signal-safe, allocating nothing.
    unsafe {
        cmd.pre_exec(move || {
            check(libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ))?;
            // The parent may have gone before the line above.
            if libc::getppid() != parent {
                return Err(io::Error::other("cordon ended before the run started"));
            }
            Ok(())
        });
    }
}

/// Sends `signal` to every process in process group `pgid`.
pub fn signal_group(pgid: u32, signal: libc::c_int) {
    // SAFETY: kill takes integers only; a negative pid names a process group.
    unsafe { libc::kill(-(pgid as libc::pid_t), signal) };
}

/// Sends `signal` to process `pid`.
pub fn signal_process(pid: u32, signal: libc::c_int) {
    // SAFETY: kill takes integers only.
    unsafe { libc::kill(pid as libc::pid_t, signal) };
}

/// Waits until child `pid` has ended but leaves it unreaped, so its pid cannot be reused
/// while someone may still signal it. With `resume`, a child that stops (Ctrl-Z on a terminal
/// it was lent: nothing here can bring it back to the foreground later) is continued at once.
pub fn wait_unreaped(pid: u32, resume: bool) -> io::Result<()> {
    let stopped = if resume { libc::WSTOPPED } else { 0 };
    loop {
        // SAFETY: a zeroed siginfo_t is a valid out-buffer; waitid writes into it only.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is valid for the call; the other arguments are integers.
        let ret = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT | stopped,
            )
        };
        match check(ret) {
            Ok(_) if info.si_code == libc::CLD_STOPPED => signal_group(pid, libc::SIGCONT),
            Ok(_) => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// The terminal on standard input, lent to a child's process group for as long as it runs:
/// it reads the keyboard, and Ctrl-C, Ctrl-Z and window changes go to it. Dropped, the
/// terminal comes back to this process's group with the modes it had before, so that a
/// program that left it raw does not leave the person's prompt echoing nothing.
///
/// Without this a child in a group of its own is in the background: the first time it sets
/// the terminal's modes (or reads from it) the kernel stops it with SIGTTOU (SIGTTIN), and a
/// caller waiting for it waits for ever.
#[derive(Debug)]
pub struct Foreground {
    own: libc::pid_t,
    modes: libc::termios,
}

impl Foreground {
    /// Lends the terminal on standard input to process group `pgid`; `None` (nothing done)
    /// when standard input is not a terminal or this process's group does not have it.
    pub fn lend(pgid: u32) -> Option<Foreground> {
        // SAFETY: isatty, getpgrp, tcgetpgrp and tcgetattr take a descriptor or nothing, and
        // tcgetattr writes only into the zeroed termios it is given.
        unsafe {
            let own = libc::getpgrp();
            if libc::isatty(0) != 1 || libc::tcgetpgrp(0) != own {
                return None;
            }
            let mut modes: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(0, &mut modes) != 0 {
                return None;
            }
            // From the foreground, no SIGTTOU comes.
            if libc::tcsetpgrp(0, pgid as libc::pid_t) != 0 {
                return None;
            }
            Some(Foreground { own, modes })
        }
    }
}

impl Drop for Foreground {
    fn drop(&mut self) {
        // SAFETY: sigset_t values are plain data initialised by sigemptyset/sigaddset; the
        // masks are valid pointers; tcsetpgrp and tcsetattr take a descriptor, an integer and
        // a termios this process read. SIGTTOU is blocked around the calls on this thread only
        // (from the background, taking the terminal back would otherwise stop this process),
        // and the previous mask is put back.
        unsafe {
            let mut block: libc::sigset_t = std::mem::zeroed();
            let mut before: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut block);
            libc::sigaddset(&mut block, libc::SIGTTOU);
            libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut before);
            libc::tcsetpgrp(0, self.own);
            libc::tcsetattr(0, libc::TCSADRAIN, &self.modes);
            libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
        }
    }
}
