//! Which directories of a search have not changed since, told by the kernel (inotify) instead of
//! a `stat` of each: for a session (`cordon exec`, `cordon mcp`, `cordon shell`), which searches
//! the same tree before and after every command, two `stat`s of every directory a command.
//!
//! A directory is watched before it is listed or stamped, so whatever changes its entries after
//! that (in any mount namespace: inotify is on the inode) queues an event. Each search takes a
//! mark when it starts, after reading the events queued so far; an event read later is at that
//! mark or after it. A search from an earlier one at mark `m` may take a directory as it was,
//! with no `stat`, when that directory was watched by `m` and has had no event since, and its
//! parent was taken the same way or found unchanged (so its path still leads to the same
//! inode). Anything the watch cannot vouch for is looked at as without it: a directory beyond
//! the watches it may add, one whose watch went (`IN_IGNORED`), one on a file system whose
//! changes may come from elsewhere (a network's, FUSE, overlayfs: only local file systems are
//! watched), and every directory up to a mark taken after the queue overflowed or the mount
//! table changed (a mount over a directory changes where its path leads, with no event). A
//! watch that cannot be read vouches for nothing from then on.

use std::collections::HashMap;
use std::ffi::OsString;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use rustix::event::{PollFd, PollFlags};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

/// Where a search started in the watch's sequence of events.
pub type Mark = u64;

/// What changes a directory's entries or its stamp, on the directory itself or in it.
const EVENTS: WatchFlags = WatchFlags::CREATE
    .union(WatchFlags::DELETE)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF)
    .union(WatchFlags::ONLYDIR)
    .union(WatchFlags::DONT_FOLLOW);

/// File systems whose every change is made through this kernel, so that inotify hears of it
/// (`statfs`'s `f_type`): ext2/3/4, XFS, Btrfs, tmpfs, F2FS, bcachefs.
const LOCAL: &[i64] = &[
    0xEF53,
    0x5846_5342,
    0x9123_683E,
    0x0102_1994,
    0xF2F5_2010,
    0xCA45_1A4E,
];

/// The share of the user's inotify watches (`fs.inotify.max_user_watches`, shared with editors
/// and build tools) a session may take, and the most it takes.
const SHARE_OF_USER_WATCHES: usize = 4;
const MOST_WATCHES: usize = 65_536;

struct Watched {
    /// The directories' paths ([`super::key`]) it was added by.
    paths: Vec<OsString>,
    /// The sequence number when it was added.
    since: u64,
    /// The sequence number of its last event.
    last: Option<u64>,
}

struct Watch {
    fd: OwnedFd,
    /// This process's mount table, which polls as changed after a mount or unmount.
    mounts: std::fs::File,
    by_path: HashMap<OsString, i32>,
    watched: HashMap<i32, Watched>,
    /// Each event read is numbered with it; a mark moves it on.
    seq: u64,
    /// No mark before it is vouched for: events were lost.
    valid_from: u64,
    /// The sequence number of the last event on any directory, or of a watch that went.
    latest: Option<u64>,
    /// Watches still to be added.
    room: usize,
}

static WATCH: Mutex<Option<Watch>> = Mutex::new(None);

fn watch() -> MutexGuard<'static, Option<Watch>> {
    WATCH.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts watching the directories this process searches from now on (once: later calls do
/// nothing). Where inotify is not to be had, searches go on as without it.
pub fn start() {
    let mut w = watch();
    if w.is_some() {
        return;
    }
    let Ok(fd) = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK) else {
        return;
    };
    let Ok(mounts) = std::fs::File::open("/proc/self/mountinfo") else {
        return;
    };
    let user_watches = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .unwrap_or(8192);
    *w = Some(Watch {
        fd,
        mounts,
        by_path: HashMap::new(),
        watched: HashMap::new(),
        seq: 0,
        valid_from: 0,
        latest: None,
        room: (user_watches / SHARE_OF_USER_WATCHES).min(MOST_WATCHES),
    });
}

/// A mark for a search starting now, or none when nothing is watched.
pub(super) fn mark() -> Option<Mark> {
    let mut guard = watch();
    let w = guard.as_mut()?;
    w.drain();
    w.seq += 1;
    Some(w.seq)
}

/// Watches `dir` from now on, if there is room: call it before the directory is stamped or
/// listed by the search at `mark`. Whether it is watched in time for that search.
pub(super) fn add(dir: &Path, mark: Mark) -> bool {
    watch().as_mut().is_some_and(|w| w.add(dir, mark))
}

/// Watches each of `dirs` (as [`add`]); whether all are.
pub(super) fn add_all<'a>(dirs: impl Iterator<Item = &'a Path>, mark: Mark) -> bool {
    let mut guard = watch();
    let Some(w) = guard.as_mut() else {
        return false;
    };
    let mut all = true;
    for d in dirs {
        all &= w.add(d, mark);
    }
    all
}

/// Whether no watched directory has had an event since the search at `mark`, none lost.
pub(super) fn still_since(mark: Mark) -> bool {
    let mut guard = watch();
    let Some(w) = guard.as_mut() else {
        return false;
    };
    w.drain();
    w.valid_from <= mark && w.latest.is_none_or(|l| l < mark)
}

/// For each of `dirs`, whether its entries are known unchanged since the search at `mark`:
/// watched by then, and no event since. (That its path still leads to it is for the caller,
/// from its parent.)
pub(super) fn quiet<'a>(dirs: impl Iterator<Item = &'a Path>, mark: Mark) -> Vec<bool> {
    let mut guard = watch();
    let Some(w) = guard.as_mut() else {
        return dirs.map(|_| false).collect();
    };
    w.drain();
    let vouched = w.valid_from <= mark;
    dirs.map(|d| {
        vouched
            && w.by_path
                .get(super::key(d))
                .and_then(|wd| w.watched.get(wd))
                .is_some_and(|x| x.since <= mark && x.last.is_none_or(|l| l < mark))
    })
    .collect()
}

impl Watch {
    fn add(&mut self, dir: &Path, mark: Mark) -> bool {
        if self.room == 0 {
            return false;
        }
        #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
        let local = rustix::fs::statfs(dir).is_ok_and(|fs| LOCAL.contains(&(fs.f_type as i64)));
        if !local {
            return false;
        }
        let wd = match inotify::add_watch(&self.fd, dir, EVENTS) {
            Ok(wd) => wd,
            Err(rustix::io::Errno::NOSPC) => {
                self.room = 0;
                return false;
            }
            Err(_) => return false,
        };
        let key = super::key(dir).to_owned();
        if let Some(old) = self.by_path.insert(key.clone(), wd)
            && old != wd
            && let Some(x) = self.watched.get_mut(&old)
        {
            x.paths.retain(|p| *p != key);
        }
        let seq = self.seq;
        let room = &mut self.room;
        let x = self.watched.entry(wd).or_insert_with(|| {
            *room = room.saturating_sub(1);
            Watched {
                paths: Vec::new(),
                since: seq,
                last: None,
            }
        });
        let in_time = x.since <= mark;
        if !x.paths.contains(&key) {
            x.paths.push(key);
        }
        in_time
    }

    /// Reads the events queued so far. One that cannot be read (nor the mount table polled)
    /// vouches for nothing from then on: the marks it gave stay in searches, so it is never
    /// replaced by a new one counting from the start.
    fn drain(&mut self) {
        if !self.read_events() {
            self.valid_from = u64::MAX;
            self.room = 0;
        }
    }

    fn read_events(&mut self) -> bool {
        // The poll itself takes note of the change it reports: the next one reports only a
        // later change.
        let mut table = [PollFd::new(&self.mounts, PollFlags::PRI)];
        match rustix::event::poll(&mut table, Some(&Default::default())) {
            Ok(0) => {}
            Ok(_) => self.valid_from = self.seq + 1,
            Err(_) => return false,
        }
        let mut buf = [MaybeUninit::<u8>::uninit(); 16 * 1024];
        let mut events = inotify::Reader::new(&self.fd, &mut buf);
        loop {
            let e = match events.next() {
                Ok(e) => e,
                Err(rustix::io::Errno::AGAIN) => return true,
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => return false,
            };
            let flags = e.events();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                self.valid_from = self.seq + 1;
                continue;
            }
            let wd = e.wd();
            if flags.contains(ReadFlags::IGNORED) {
                if let Some(x) = self.watched.remove(&wd) {
                    for p in x.paths {
                        if self.by_path.get(&p) == Some(&wd) {
                            self.by_path.remove(&p);
                        }
                    }
                    self.room += 1;
                }
                self.latest = Some(self.seq);
                continue;
            }
            // A name's own attributes (a build touching files) leave the directory's entries
            // and stamp as they were.
            let of_a_name = e.file_name().is_some_and(|n| !n.is_empty());
            if of_a_name && (flags & !ReadFlags::ISDIR) == ReadFlags::ATTRIB {
                continue;
            }
            if let Some(x) = self.watched.get_mut(&wd) {
                x.last = Some(self.seq);
                self.latest = Some(self.seq);
            }
        }
    }
}
