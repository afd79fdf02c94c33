//! A program on a pseudo-terminal of the test's own, as a person runs it at a terminal: the
//! terminal is its controlling terminal (`setsid --ctty`), so Ctrl-C typed there and a change
//! of window size reach it as they would from a terminal emulator.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use rustix::termios::{LocalModes, Winsize, tcgetattr, tcsetwinsize};

pub struct Terminal {
    master: File,
    /// The terminal's other end, kept to read its modes once the program has gone.
    slave: File,
    child: Child,
    screen: Arc<Mutex<Vec<u8>>>,
}

impl Terminal {
    /// `program` with `args` (and `cmd`'s environment and directory) on a new terminal of
    /// `rows` × `cols`.
    pub fn spawn(cmd: &Command, rows: u16, cols: u16) -> Terminal {
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).expect("openpt");
        grantpt(&master).expect("grantpt");
        unlockpt(&master).expect("unlockpt");
        let name = ptsname(&master, Vec::new()).expect("ptsname");
        let name = name
            .to_str()
            .expect("a terminal's name is text")
            .to_string();
        let slave = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(rustix::fs::OFlags::NOCTTY.bits() as i32)
            .open(&name)
            .expect("open the terminal");
        let master = File::from(master);
        tcsetwinsize(&master, winsize(rows, cols)).expect("window size");
        let mut run = Command::new("setsid");
        run.args(["--ctty", "--wait"])
            .arg(cmd.get_program())
            .args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => run.env(k, v),
                None => run.env_remove(k),
            };
        }
        if let Some(dir) = cmd.get_current_dir() {
            run.current_dir(dir);
        }
        let io = || Stdio::from(slave.try_clone().expect("dup"));
        let child = run
            .stdin(io())
            .stdout(io())
            .stderr(io())
            .spawn()
            .expect("spawn on the terminal");
        let screen: Arc<Mutex<Vec<u8>>> = Arc::default();
        let (mut from, into) = (master.try_clone().expect("dup"), Arc::clone(&screen));
        std::thread::spawn(move || {
            let mut buf = [0; 4096];
            // Reading ends with an error (EIO) once no one holds the terminal's other end.
            while let Ok(n @ 1..) = from.read(&mut buf) {
                into.lock().expect("screen").extend_from_slice(&buf[..n]);
            }
        });
        Terminal {
            master,
            slave,
            child,
            screen,
        }
    }

    /// Everything the program has written, as text.
    pub fn screen(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().expect("screen")).into_owned()
    }

    /// Waits until the program has written `text` since the `from`th byte; the byte after it.
    pub fn wait_for(&self, text: &str, from: usize, secs: u64) -> usize {
        let end = Instant::now() + Duration::from_secs(secs);
        loop {
            let seen = self.screen.lock().expect("screen").clone();
            let tail = String::from_utf8_lossy(seen.get(from..).unwrap_or_default()).into_owned();
            if let Some(i) = tail.find(text) {
                return from + i + text.len();
            }
            assert!(
                Instant::now() < end,
                "no {text:?} within {secs} s; the terminal shows:\n{}",
                String::from_utf8_lossy(&seen)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Typed at the keyboard.
    pub fn type_in(&mut self, keys: &[u8]) {
        self.master.write_all(keys).expect("type");
    }

    /// The window becomes `rows` × `cols`; the kernel tells the terminal's foreground group.
    pub fn resize(&self, rows: u16, cols: u16) {
        tcsetwinsize(&self.master, winsize(rows, cols)).expect("resize");
    }

    /// Whether the terminal echoes typed keys and hands over whole lines: what a shell needs.
    pub fn cooked(&self) -> bool {
        let modes = tcgetattr(&self.slave).expect("modes");
        modes
            .local_modes
            .contains(LocalModes::ECHO | LocalModes::ICANON)
    }

    /// The program's exit status, waiting at most `secs`.
    pub fn wait(&mut self, secs: u64) -> ExitStatus {
        let end = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            if Instant::now() > end {
                let _ = self.child.kill();
                panic!("still running after {secs} s:\n{}", self.screen());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn winsize(rows: u16, cols: u16) -> Winsize {
    Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}
