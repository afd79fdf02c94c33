//! Guards kept on disk, where any cordon finds them: what runs must not leave behind.
//!
//! A run's [`RunGuard`] lives in the cordon that runs it, and in the process that takes over
//! should that cordon die (a cold run's watcher, a warm sandbox's helper). Two things escape
//! that:
//! - **all of them killed together** (a terminal closing, an agent's supervisor killing the
//!   session or the whole process tree): nothing is left to undo what the command planted;
//! - **runs side by side in one directory**: one run's clean-up unlinks a file it planted, on
//!   which a run that started later has bound a read-only mount; the kernel detaches that
//!   mount, and the later run plants the file again, which its own guard (taken when the file
//!   already existed) keeps.
//!
//! So each run's guard is also a record in the journal, a directory of cordon's state that
//! sandboxes keep read-only, written before the command starts. A run holds a lock of its own
//! (`flock` on `ID.lock`) for as long as it or a process undoing for it lives; the journal's
//! own lock (`lock`) is held around looking at records and changing them. Runs overlap when a
//! writable place of one holds or is held by a writable place of the other; overlap is
//! followed from run to run.
//! - A run that ends undoes what it planted only when no run overlapping it is still going;
//!   otherwise its record is marked ended and left for the last of them, which undoes it with
//!   its own, once nothing can hold a mount over what it removes.
//! - A record whose run is gone without ending (its lock free) was left by a killed cordon:
//!   the next cordon that runs in a place overlapping it (any front end), or that sweeps
//!   (`exec`, `mcp` and `shell` as they start, and `cordon doctor`), undoes it when no run
//!   overlapping it is going, and says so.
//!
//! A record is read back by path: each writable place is opened again and must be the same
//! directory (device and inode) as when the run began, or nothing is undone under it and that
//! is said. Lock files are write-only for their owner, so a command that can read the journal
//! (where a sandbox shows the host read-only) cannot open one to lock it and stall every run.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::protect::{GuardRecord, RunGuard, UndoReport};

/// How long to wait for the journal's lock. Its holders hold it for a run's planning and for
/// an undo: seconds at most on a large tree; past this something is wrong, and the run is
/// refused rather than go on unguarded.
const LOCK_WAIT: Duration = Duration::from_secs(30);

/// The name of the journal's own lock.
const LOCK: &str = "lock";

/// The journal: a directory of records, one per run that has not been undone.
#[derive(Debug, Clone)]
pub struct Journal {
    dir: PathBuf,
}

/// What a record holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    guard: GuardRecord,
    /// Each writable place of the guard as (device, inode), to know it again by its path.
    roots: Vec<(u64, u64)>,
    /// The run has ended and left its undo to the last of the runs overlapping it.
    ended: bool,
    /// The process that ran it, for the messages.
    pid: u32,
    /// When the run began (nanoseconds since the epoch): records are undone latest first, so
    /// that where two runs kept the same settings file, it ends as the earlier found it.
    #[serde(default)]
    started: u128,
}

impl Record {
    /// Whether undoing `other` would undo exactly what undoing this does: the same places
    /// (by path and by identity) found in the same state. Compared as JSON values, whose
    /// objects compare as maps, so that the order a hash map was written in does not matter.
    fn says_the_same(&self, other: &Record) -> bool {
        let value = |r: &Record| serde_json::to_value(&r.guard).ok();
        self.roots == other.roots && value(self).is_some() && value(self) == value(other)
    }
}

/// A run's place in the journal, for as long as it or a process undoing for it lives.
#[derive(Debug)]
pub struct Entry {
    dir: PathBuf,
    id: String,
    /// `ID.lock`, locked: while any copy of it is open, the run counts as going.
    lock: OwnedFd,
}

/// What names an entry to a process that takes it over (with a copy of its lock).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EntryName {
    pub dir: PathBuf,
    pub id: String,
}

/// The journal's lock, held.
#[derive(Debug)]
pub struct Held<'a> {
    journal: &'a Journal,
    // Let go before the turn, so that the next thread finds the file's lock free.
    _lock: File,
    _turn: Turn,
}

/// This process's turn at a journal's lock: the threads of one process take the lock one
/// after another here before they take the file's. A thread that finds the file's lock taken
/// polls it, sleeping in between; with commands side by side in one `exec` (every start and
/// end takes the lock), most of a thread's wait was sleep after the lock was free again. Here
/// the next thread is woken as the lock is let go. Other processes' turns still poll.
#[derive(Debug)]
struct Turn(PathBuf);

/// The journals whose lock a thread of this process holds or is taking, and the signal that
/// one was let go.
type Turns = (
    Mutex<std::collections::HashSet<PathBuf>>,
    std::sync::Condvar,
);

fn turns() -> &'static Turns {
    static TURNS: std::sync::LazyLock<Turns> = std::sync::LazyLock::new(Default::default);
    &TURNS
}

impl Turn {
    /// Waits for this process's turn at `dir`'s lock until `deadline`.
    fn take(dir: &Path, deadline: Instant) -> io::Result<Turn> {
        let (taken, freed) = turns();
        let mut taken = taken.lock().unwrap_or_else(|e| e.into_inner());
        while taken.contains(dir) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "another thread of this process has held {} for {} seconds",
                        dir.join(LOCK).display(),
                        LOCK_WAIT.as_secs()
                    ),
                ));
            }
            taken = freed
                .wait_timeout(taken, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        taken.insert(dir.to_path_buf());
        Ok(Turn(dir.to_path_buf()))
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let (taken, freed) = turns();
        taken
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.0);
        freed.notify_all();
    }
}

/// What a killed run had left, undone by another cordon.
#[derive(Debug)]
pub struct Recovered {
    /// The writable places of the run.
    pub places: Vec<PathBuf>,
    pub pid: u32,
    pub report: UndoReport,
}

impl Recovered {
    /// Says on standard error what was undone (nothing when there was nothing to undo).
    pub fn say(&self) {
        let places: Vec<String> = self
            .places
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        self.report.say_left_after(&format!(
            "a cordon run in {} (process {})",
            places.join(", "),
            self.pid
        ));
    }
}

impl Journal {
    pub fn new(dir: PathBuf) -> Journal {
        Journal { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Takes the journal's lock (making the journal first), waiting for it at most
    /// [`LOCK_WAIT`].
    pub fn hold(&self) -> io::Result<Held<'_>> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        let file = open_lock(&self.dir.join(LOCK), true)?;
        let deadline = Instant::now() + LOCK_WAIT;
        let turn = Turn::take(&self.dir, deadline)?;
        // Polled, so that a lock held too long times out; the wait starts short and grows,
        // because every start and end of a run takes this lock, and with commands side by side
        // the time a waiter sleeps past its release was most of what the lock cost.
        let mut pause = Duration::from_micros(50);
        loop {
            match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => break,
                Err(rustix::io::Errno::WOULDBLOCK | rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
            if Instant::now() > deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "another process has held {} for {} seconds",
                        self.dir.join(LOCK).display(),
                        LOCK_WAIT.as_secs()
                    ),
                ));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(1));
        }
        Ok(Held {
            journal: self,
            _lock: file,
            _turn: turn,
        })
    }
}

impl Held<'_> {
    /// Undoes what runs that are gone left, for the records overlapping `places` (every
    /// record with `None`), where no run overlapping them is still going; their records go.
    pub fn recover(&self, places: Option<&[PathBuf]>) -> Vec<Recovered> {
        let records = self.records(None);
        let start: Vec<PathBuf> = match places {
            Some(p) => p.to_vec(),
            None => records
                .iter()
                .flat_map(|(_, r)| r.guard.roots().iter().cloned())
                .collect(),
        };
        let mut out = Vec::new();
        for group in groups(&records, &start) {
            if group.iter().any(|&i| self.is_going(&records[i])) {
                continue;
            }
            for i in latest_first(&records, group) {
                let (id, record) = &records[i];
                let report = undo_record(record);
                self.forget(id);
                out.push(Recovered {
                    places: record.guard.roots().to_vec(),
                    pid: record.pid,
                    report,
                });
            }
        }
        out
    }

    /// Keeps `guard` in the journal while its run lives: from now on it is undone by the last
    /// of the runs overlapping it to end, or by another cordon should all of them be killed.
    pub fn enter(&self, guard: &mut RunGuard) -> io::Result<()> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let id = format!(
            "{}-{stamp:x}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let lock = open_lock(&self.journal.dir.join(format!("{id}.lock")), true)?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive)?;
        let (record, fds) = guard.to_record();
        let roots = fds
            .iter()
            .map(|fd| rustix::fs::fstat(fd).map(|s| identity(&s)))
            .collect::<Result<Vec<_>, _>>()?;
        let record = Record {
            guard: record,
            roots,
            ended: false,
            pid: std::process::id(),
            started: stamp,
        };
        write_record(&self.journal.dir, &id, &record)?;
        guard.set_entry(Entry {
            dir: self.journal.dir.clone(),
            id,
            lock: lock.into(),
        });
        Ok(())
    }

    /// Every record but `except`'s, with its id; one that cannot be read is set aside as
    /// `ID.unreadable` (never undone blindly, never read again).
    fn records(&self, except: Option<&str>) -> Vec<Listed> {
        use std::os::unix::fs::DirEntryExt;
        let Ok(dir) = std::fs::read_dir(&self.journal.dir) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut listed = std::collections::HashSet::new();
        for e in dir.flatten() {
            let name = e.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
                continue;
            };
            listed.insert(e.path());
            if Some(id) == except {
                continue;
            }
            match read_record(&e.path(), e.ino()) {
                Some(r) => out.push((id.to_string(), r)),
                None => {
                    let _ = std::fs::rename(e.path(), e.path().with_extension("unreadable"));
                }
            }
        }
        already_read()
            .retain(|path, _| path.parent() != Some(&self.journal.dir) || listed.contains(path));
        out
    }

    /// Whether the run of `record` is still going: not ended, and its lock held.
    fn is_going(&self, (id, record): &Listed) -> bool {
        if record.ended {
            return false;
        }
        let Ok(lock) = open_lock(&self.journal.dir.join(format!("{id}.lock")), false) else {
            return false;
        };
        matches!(
            rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive),
            Err(rustix::io::Errno::WOULDBLOCK)
        )
    }

    fn forget(&self, id: &str) {
        let _ = std::fs::remove_file(self.journal.dir.join(format!("{id}.json")));
        let _ = std::fs::remove_file(self.journal.dir.join(format!("{id}.lock")));
    }
}

impl Entry {
    /// The name and lock to hand to a process that may have to leave for this run.
    pub fn handed(&self) -> (EntryName, BorrowedFd<'_>) {
        (
            EntryName {
                dir: self.dir.clone(),
                id: self.id.clone(),
            },
            self.lock.as_fd(),
        )
    }

    /// The entry another process handed over.
    pub fn taken(name: EntryName, lock: OwnedFd) -> Entry {
        Entry {
            dir: name.dir,
            id: name.id,
            lock,
        }
    }

    /// The run of `guard` (this entry's) has ended and nothing of it is left running: undoes
    /// what it planted, with what ended runs overlapping it left for the last, when no run
    /// overlapping it is going; else marks it ended for the last of those to undo.
    pub(crate) fn leave(&self, guard: &RunGuard) -> UndoReport {
        let journal = Journal::new(self.dir.clone());
        let held = match journal.hold() {
            Ok(h) => h,
            Err(e) => {
                let mut report = guard.undo_now();
                report.weaker.push(format!(
                    "cordon's guard journal {} could not be locked ({e}): what this run planted was undone at once, whatever other runs in the same places hold",
                    self.dir.display()
                ));
                return report;
            }
        };
        let records = held.records(Some(&self.id));
        let start: Vec<PathBuf> = guard.root_paths();
        let group: Vec<usize> = groups(&records, &start)
            .into_iter()
            .flatten()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let own_path = self.dir.join(format!("{}.json", self.id));
        let own = std::fs::symlink_metadata(&own_path)
            .ok()
            .and_then(|m| read_record(&own_path, std::os::unix::fs::MetadataExt::ino(&m)));
        let going = group.iter().any(|&i| held.is_going(&records[i]));
        if going {
            let mut report = UndoReport {
                deferred: true,
                ..UndoReport::default()
            };
            // A record that says no more than one already in the group (the same places,
            // found in the same state) goes: undoing twice what was found once undoes no more,
            // and the other is undone by the last run or after a kill as surely as this one
            // would be. With commands always going side by side this is what keeps the records
            // from piling up. (A record whose undo would merely change nothing must stay: see
            // `a_plant_deleted_and_planted_again_is_undone_by_the_last`.)
            if let Some(own) = &own
                && group.iter().any(|&i| records[i].1.says_the_same(own))
            {
                held.forget(&self.id);
                return report;
            }
            let ended = own.map(|r| {
                let mut r = Record::clone(&r);
                r.ended = true;
                write_record(&self.dir, &self.id, &r)
            });
            if !matches!(ended, Some(Ok(()))) {
                // Not marked: it would count as going until its lock is let go, and be undone
                // then by whoever finds it, as a killed run's.
                report.weaker.push(format!(
                    "cordon could not mark this run ended in its guard journal {}",
                    self.dir.display()
                ));
            }
            return report;
        }
        let own_started = own.as_ref().map_or(u128::MAX, |r| r.started);
        let mut report = UndoReport::default();
        let mut own_done = false;
        for i in latest_first(&records, group) {
            let (id, record) = &records[i];
            if !own_done && record.started < own_started {
                report.merge(guard.undo_now());
                own_done = true;
            }
            report.merge(undo_record(record));
            held.forget(id);
        }
        if !own_done {
            report.merge(guard.undo_now());
        }
        held.forget(&self.id);
        report.undone.dedup();
        report
    }
}

/// The records overlapping `start`, in groups: each group the records that overlap one
/// another (followed from record to record) and one of `start`'s places.
fn groups(records: &[Listed], start: &[PathBuf]) -> Vec<Vec<usize>> {
    let overlaps = |a: &Path, b: &Path| a.starts_with(b) || b.starts_with(a);
    let mut taken = vec![false; records.len()];
    let mut out = Vec::new();
    for place in start {
        let mut group = Vec::new();
        let mut frontier: Vec<PathBuf> = vec![place.clone()];
        while let Some(p) = frontier.pop() {
            for (i, (_, r)) in records.iter().enumerate() {
                if !taken[i] && r.guard.roots().iter().any(|q| overlaps(&p, q)) {
                    taken[i] = true;
                    group.push(i);
                    frontier.extend(r.guard.roots().iter().cloned());
                }
            }
        }
        if !group.is_empty() {
            out.push(group);
        }
    }
    out
}

/// `group`'s records, the latest-started first.
fn latest_first(records: &[Listed], mut group: Vec<usize>) -> Vec<usize> {
    group.sort_by_key(|&i| std::cmp::Reverse(records[i].1.started));
    group
}

/// Undoes what `record`'s run left, its places opened again by path.
fn undo_record(record: &Record) -> UndoReport {
    let guard = RunGuard::reopen(&record.guard, &record.roots);
    guard.undo_now()
}

/// A file's (device, inode), the same width on every Unix (macOS's device is 32 bits).
#[allow(clippy::unnecessary_cast)]
pub(crate) fn identity(st: &rustix::fs::Stat) -> (u64, u64) {
    (st.st_dev as u64, st.st_ino as u64)
}

/// Opens a lock file, write-only (made write-only for its owner if `make`).
fn open_lock(path: &Path, make: bool) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create(make)
        .mode(0o200)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(path)
}

/// A record listed, with its id.
type Listed = (String, Arc<Record>);

/// Records read, by path, with the inode each was read from.
type ReadRecords = HashMap<PathBuf, (u64, Arc<Record>)>;

/// The records this process has read, by path, with the inode each was read from. A record's
/// file is never changed in place: it is written once, and a change is a new file renamed over
/// it, made while the old one still holds its inode; so a path whose inode is the one read is
/// the record read. With commands side by side, each start and end read every other one's
/// record, and parsing them again was most of the journal's cost.
fn already_read() -> std::sync::MutexGuard<'static, ReadRecords> {
    static READ: std::sync::LazyLock<Mutex<ReadRecords>> =
        std::sync::LazyLock::new(Default::default);
    READ.lock().unwrap_or_else(|e| e.into_inner())
}

/// The record at `path`, whose inode is `ino`: read and parsed only if not read before.
fn read_record(path: &Path, ino: u64) -> Option<Arc<Record>> {
    if let Some((read, record)) = already_read().get(path)
        && *read == ino
    {
        return Some(Arc::clone(record));
    }
    let record: Arc<Record> = Arc::new(serde_json::from_slice(&std::fs::read(path).ok()?).ok()?);
    already_read().insert(path.to_path_buf(), (ino, Arc::clone(&record)));
    Some(record)
}

/// Writes a record whole or not at all: a new file renamed over the old.
fn write_record(dir: &Path, id: &str, record: &Record) -> io::Result<()> {
    let bytes = serde_json::to_vec(record).map_err(io::Error::other)?;
    let new = dir.join(format!("{id}.json.new"));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(&new)?;
    f.write_all(&bytes)?;
    std::fs::rename(&new, dir.join(format!("{id}.json")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gitmeta::GitMeta;

    /// A journal and a writable place, each in a directory of its own.
    struct Setup {
        _dirs: [tempfile::TempDir; 2],
        journal: Journal,
        place: PathBuf,
    }

    fn setup() -> Setup {
        let j = tempfile::tempdir().expect("temp dir");
        let p = tempfile::tempdir().expect("temp dir");
        let journal = Journal::new(j.path().join("guards"));
        let place = p.path().to_path_buf();
        Setup {
            _dirs: [j, p],
            journal,
            place,
        }
    }

    /// A run in `place`, entered in the journal (as before its command starts).
    fn entered(journal: &Journal, place: &Path) -> RunGuard {
        entered_keeping(journal, place, &[])
    }

    fn records(journal: &Journal) -> usize {
        std::fs::read_dir(journal.dir())
            .expect("list")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
            .count()
    }

    /// Records are parsed once per file: a record rewritten (a run marked ended) is a new file,
    /// and is read again.
    #[test]
    fn a_record_rewritten_after_it_was_read_is_read_again() {
        let s = setup();
        let _guard = entered(&s.journal, &s.place);
        let held = s.journal.hold().expect("hold");
        let first = held.records(None);
        assert_eq!(first.len(), 1);
        assert!(!first[0].1.ended);
        let mut ended = Record::clone(&first[0].1);
        ended.ended = true;
        write_record(s.journal.dir(), &first[0].0, &ended).expect("rewrite");
        let again = held.records(None);
        assert!(
            again[0].1.ended,
            "the record as it was first read came back"
        );
        assert!(!Arc::ptr_eq(&first[0].1, &again[0].1));
        // Unchanged, it is not parsed again.
        assert!(Arc::ptr_eq(&again[0].1, &held.records(None)[0].1));
    }

    /// Every process of a run killed: its record stays, and the next cordon to hold the
    /// journal over that place undoes what it planted.
    #[test]
    fn a_killed_runs_record_is_undone_by_the_next() {
        let s = setup();
        let guard = entered(&s.journal, &s.place);
        std::fs::write(s.place.join(".bashrc"), "evil").expect("plant");
        drop(guard); // its cordon is gone: the lock is let go, the record stays
        assert_eq!(records(&s.journal), 1);
        let held = s.journal.hold().expect("hold");
        // A place elsewhere finds nothing of it.
        let elsewhere = tempfile::tempdir().expect("temp dir");
        assert!(
            held.recover(Some(&[elsewhere.path().to_path_buf()]))
                .is_empty()
        );
        let found = held.recover(Some(std::slice::from_ref(&s.place)));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].report.undone.len(), 1, "{:?}", found[0].report);
        assert!(!s.place.join(".bashrc").exists());
        drop(held);
        assert_eq!(records(&s.journal), 0);
    }

    /// A run still going is not a killed one: its record is left alone.
    #[test]
    fn a_going_runs_record_is_left_alone() {
        let s = setup();
        let guard = entered(&s.journal, &s.place);
        std::fs::write(s.place.join(".bashrc"), "evil").expect("plant");
        let held = s.journal.hold().expect("hold");
        assert!(held.recover(None).is_empty());
        drop(held);
        assert!(s.place.join(".bashrc").exists());
        let report = guard.undo();
        assert!(!report.deferred);
        assert!(!s.place.join(".bashrc").exists());
        assert_eq!(records(&s.journal), 0);
    }

    /// A run in `place` that keeps `settings` (as `run --agent` keeps the agent's).
    fn entered_keeping(journal: &Journal, place: &Path, settings: &[&Path]) -> RunGuard {
        let held = journal.hold().expect("hold");
        let mut guard = RunGuard::before(
            Path::new("/nonexistent-cwd"),
            &[place.to_path_buf()],
            &[],
            &GitMeta::default(),
            1000,
        );
        guard.keep_settings(&crate::kept::SettingsFiles {
            paths: settings.iter().map(|p| p.to_path_buf()).collect(),
            harmless: vec!["model".into()],
        });
        held.enter(&mut guard).expect("enter");
        guard
    }

    /// Two runs of one agent side by side: the first plants a hook in its settings, the
    /// second starts after that (and so finds the hook there), plants one of its own. Whichever
    /// ends last, and also when both are killed and the next cordon finds them, the file ends
    /// as the first run found it, not as the second did.
    #[test]
    fn overlapping_runs_put_the_settings_back_as_the_first_found_them() {
        let hooked = |n: u32| format!("{{\"model\": \"m\", \"hooks\": {n}}}");
        for how in ["first ends first", "first ends last", "both killed"] {
            let s = setup();
            let settings = s.place.join("settings.json");
            std::fs::write(&settings, "{\"model\": \"m\"}").expect("write");
            let a = entered_keeping(&s.journal, &s.place, &[&settings]);
            std::fs::write(&settings, hooked(1)).expect("plant");
            std::thread::sleep(std::time::Duration::from_millis(2));
            let b = entered_keeping(&s.journal, &s.place, &[&settings]);
            std::fs::write(&settings, hooked(2)).expect("plant");
            match how {
                "first ends first" => {
                    assert!(a.undo().deferred, "{how}");
                    assert!(!b.undo().deferred, "{how}");
                }
                "first ends last" => {
                    assert!(b.undo().deferred, "{how}");
                    assert!(!a.undo().deferred, "{how}");
                }
                _ => {
                    drop((a, b));
                    let held = s.journal.hold().expect("hold");
                    assert_eq!(held.recover(None).len(), 2, "{how}");
                }
            }
            assert_eq!(
                std::fs::read_to_string(&settings).expect("read"),
                "{\"model\": \"m\"}",
                "{how}"
            );
            assert_eq!(records(&s.journal), 0, "{how}");
        }
    }

    /// Two runs in one place, the first to plant ending first or last: what it planted is
    /// removed only when the last of them ends, never from under the other's read-only view.
    #[test]
    fn overlapping_runs_leave_the_undo_to_the_last() {
        for first_ends_first in [true, false] {
            let s = setup();
            let a = entered(&s.journal, &s.place);
            std::fs::write(s.place.join(".bashrc"), "evil").expect("plant");
            // Started after the plant, `b` found `.bashrc` existing (its view keeps it read-only).
            let sub = s.place.join("sub");
            std::fs::create_dir(&sub).expect("mkdir");
            let b = entered(&s.journal, &sub);
            let (early, late) = if first_ends_first { (a, b) } else { (b, a) };
            let report = early.undo();
            assert!(report.deferred, "{report:?}");
            assert!(
                s.place.join(".bashrc").exists(),
                "removed under a run still going"
            );
            let report = late.undo();
            assert!(!report.deferred, "{report:?}");
            assert!(
                !s.place.join(".bashrc").exists(),
                "the last run left what the first planted"
            );
            assert_eq!(records(&s.journal), 0);
        }
    }

    /// Why a run that left nothing to undo still waits for the runs going beside it: `e`
    /// plants `.bashrc`; `r` starts and finds it existing (its view keeps it read-only); `c`,
    /// whose view is older, deletes it, which detaches `r`'s mount; `e` and `c` end with
    /// nothing of theirs left; `r` plants again where its own guard expects a file. Only
    /// `e`'s record, kept until `r` ends, knows the file was never the user's. (Dropping such
    /// records at once, to stop them piling up, was tried and let this through.)
    #[test]
    fn a_plant_deleted_and_planted_again_is_undone_by_the_last() {
        let s = setup();
        let c = entered(&s.journal, &s.place);
        let e = entered(&s.journal, &s.place);
        std::fs::write(s.place.join(".bashrc"), "evil").expect("plant");
        let r = entered(&s.journal, &s.place);
        std::fs::remove_file(s.place.join(".bashrc")).expect("delete");
        e.undo();
        c.undo();
        std::fs::write(s.place.join(".bashrc"), "evil again").expect("plant again");
        let report = r.undo();
        assert!(!report.deferred, "{report:?}");
        assert!(
            !s.place.join(".bashrc").exists(),
            "the plant outlived every run"
        );
        assert_eq!(records(&s.journal), 0);
    }

    /// Runs that start and end beside one that keeps going, each finding the place as the
    /// others did, leave no record behind them (with commands always going side by side they
    /// used to pile up, and every start and end read them all); what one of them planted is
    /// still undone by the last.
    #[test]
    fn runs_that_found_the_same_leave_one_record() {
        let s = setup();
        let long = entered(&s.journal, &s.place);
        for i in 0..10 {
            let run = entered(&s.journal, &s.place);
            if i == 3 {
                std::fs::write(s.place.join(".bashrc"), "evil").expect("plant");
            }
            let report = run.undo();
            assert!(report.deferred, "{report:?}");
            // Those started after the plant found `.bashrc` there: their records differ from
            // the long run's, and the first of them stays for the others.
            assert_eq!(records(&s.journal), 1 + usize::from(i > 3), "after run {i}");
        }
        let report = long.undo();
        assert!(!report.deferred, "{report:?}");
        assert!(
            !s.place.join(".bashrc").exists(),
            "the plant outlived every run"
        );
        assert_eq!(records(&s.journal), 0);
    }

    /// Runs in places that do not overlap do not wait for each other.
    #[test]
    fn runs_elsewhere_do_not_defer() {
        let s = setup();
        let other = tempfile::tempdir().expect("temp dir");
        let a = entered(&s.journal, &s.place);
        let _b = entered(&s.journal, other.path());
        std::fs::write(s.place.join(".bashrc"), "evil").expect("plant");
        let report = a.undo();
        assert!(!report.deferred);
        assert!(!s.place.join(".bashrc").exists());
    }

    /// A place replaced after its run was killed is not the place the record names: nothing
    /// under the new one is touched, and that is said.
    #[test]
    fn a_replaced_place_is_not_undone_blindly() {
        let s = setup();
        let guard = entered(&s.journal, &s.place);
        drop(guard);
        // Moved away first, so that the new directory cannot take the old one's inode.
        std::fs::rename(&s.place, s.place.with_extension("old")).expect("mv");
        std::fs::create_dir(&s.place).expect("mkdir");
        std::fs::write(s.place.join(".bashrc"), "the user's").expect("write");
        let held = s.journal.hold().expect("hold");
        let found = held.recover(None);
        assert_eq!(found.len(), 1);
        assert!(found[0].report.undone.is_empty(), "{:?}", found[0].report);
        assert_eq!(found[0].report.failed.len(), 1, "{:?}", found[0].report);
        assert!(s.place.join(".bashrc").exists());
    }

    /// Threads of one process hold the journal one at a time, and each is let in once the
    /// one before lets go: with a turn never handed on, the waiting threads time out.
    #[test]
    fn threads_of_one_process_hold_the_journal_in_turn() {
        use std::sync::atomic::AtomicBool;
        let s = setup();
        let journal = Arc::new(s.journal);
        let inside = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (journal, inside) = (Arc::clone(&journal), Arc::clone(&inside));
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let held = journal.hold().expect("hold");
                        assert!(!inside.swap(true, Ordering::SeqCst), "two threads inside");
                        std::thread::yield_now();
                        inside.store(false, Ordering::SeqCst);
                        drop(held);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("a thread failed");
        }
        assert!(!turns().0.lock().expect("turns").contains(journal.dir()));
    }

    /// The lock files cannot be opened for reading, so a command that sees the journal
    /// read-only cannot lock one.
    #[test]
    fn lock_files_are_write_only() {
        use std::os::unix::fs::PermissionsExt;
        let s = setup();
        let _guard = entered(&s.journal, &s.place);
        for e in std::fs::read_dir(s.journal.dir()).expect("list").flatten() {
            if e.file_name().to_string_lossy().ends_with("lock") {
                let mode = e.metadata().expect("stat").permissions().mode() & 0o777;
                assert_eq!(mode, 0o200, "{:?}", e.file_name());
            }
        }
    }
}
