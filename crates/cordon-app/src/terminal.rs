//! The person's terminal: whether this process may change it, and its modes as found, put
//! back afterwards.

use std::os::fd::{AsFd, OwnedFd};

use rustix::termios::{OptionalActions, Termios, tcgetattr, tcsetattr};

/// Whether this process's group has the terminal `fd` in the foreground: only then may it set
/// the terminal's modes without the kernel stopping it with SIGTTOU.
pub fn in_foreground(fd: impl AsFd) -> bool {
    rustix::termios::tcgetpgrp(fd).ok() == Some(rustix::process::getpgrp())
}

/// A terminal's modes as found, put back when dropped: a program that dies in raw mode (a
/// full-screen agent past its time limit, or killed), or cordon's own one-key question, would
/// otherwise leave the person's terminal echoing nothing and ignoring Enter. Put back from the
/// foreground only: from the background (`cordon run … &`) setting them would stop this
/// process, and the job in the foreground owns them then.
#[derive(Debug)]
pub struct SavedModes {
    tty: OwnedFd,
    modes: Termios,
}

impl SavedModes {
    /// The modes of `fd`; `None` when it is not a terminal.
    pub fn keep(fd: impl AsFd) -> Option<SavedModes> {
        let modes = tcgetattr(&fd).ok()?;
        let tty = fd.as_fd().try_clone_to_owned().ok()?;
        Some(SavedModes { tty, modes })
    }

    /// The modes as they were found.
    pub fn found(&self) -> &Termios {
        &self.modes
    }
}

impl Drop for SavedModes {
    fn drop(&mut self) {
        if in_foreground(&self.tty) {
            let _ = tcsetattr(&self.tty, OptionalActions::Now, &self.modes);
        }
    }
}
