//! The working directory's trip to a pod and back, as tar streams.
//!
//! Out: everything under the working directory but what the run may not read (`deny_read`),
//! walked without following a link. Back: only what changed in the pod, and only where the
//! local sandbox would have let the command write. Everything that comes back is untrusted: a
//! path that leaves the directory, a protected path (shell start-up files, git hooks and
//! config, agent settings, `deny_write`), a hidden path, a hard link or a device is not
//! written but reported. Writes never follow a link ([`Root`]), so a link the pod sent cannot
//! lead a later entry out of the directory.
//!
//! A person may edit the directory while the command runs. What they changed since it was
//! sent is theirs: a pod's change to the same file is not written but reported as a conflict,
//! and a file the pod removed is removed here only when it is still as it was sent.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, Hasher, RandomState};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Component, Path, PathBuf};

use cordon_sandbox::beneath::{Kind, Root};
use cordon_sandbox::is_protected;

use crate::workspace::Walls;

/// What was sent, to tell the pod's changes and the person's apart afterwards.
#[derive(Debug)]
pub struct Sent {
    hasher: RandomState,
    entries: BTreeMap<PathBuf, Stamp>,
    pub files: usize,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Stamp {
    /// The content's hash, and whether it may be run.
    File(u64, bool),
    Link(PathBuf),
    Dir,
}

/// What the copy back did and did not do.
#[derive(Debug, Default)]
pub struct Report {
    pub written: Vec<PathBuf>,
    pub removed: Vec<PathBuf>,
    /// Not written, and why.
    pub refused: Vec<(PathBuf, String)>,
    /// Changed both here and in the pod: this side's version was kept.
    pub conflicts: Vec<PathBuf>,
}

impl Report {
    /// Lines for the person, on standard error.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.written.is_empty() || !self.removed.is_empty() {
            out.push(format!(
                "copied back from the pod: {} written, {} removed",
                self.written.len(),
                self.removed.len()
            ));
        }
        for (p, why) in &self.refused {
            out.push(format!("not copied back: {}: {why}", p.display()));
        }
        for p in &self.conflicts {
            out.push(format!(
                "not copied back: {}: changed here during the run as well; this machine's version was kept",
                p.display()
            ));
        }
        out
    }
}

/// Why `rel` is kept out of the pod (unreadable) or out of the copy back.
fn unreadable(walls: &Walls, root: &Path, rel: &Path) -> Option<String> {
    walls
        .unreadable(&root.join(rel))
        .map(|h| format!("in {h}, which the run may not read"))
}

fn unwritable(walls: &Walls, root: &Path, rel: &Path) -> Option<String> {
    if let Some(why) = unreadable(walls, root, rel) {
        return Some(why);
    }
    if is_protected(rel) {
        return Some("a protected path, read-only in every sandbox".into());
    }
    walls
        .unwritable(&root.join(rel))
        .map(|h| format!("in {h}, which the run may not write"))
}

/// A reader that hashes what passes through it: files are streamed, never held whole.
struct Hashing<R> {
    inner: R,
    hash: std::hash::DefaultHasher,
}

impl<R> Hashing<R> {
    fn new(inner: R, hasher: &RandomState) -> Self {
        Hashing {
            inner,
            hash: hasher.build_hasher(),
        }
    }

    fn finish(&self) -> u64 {
        self.hash.finish()
    }
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.write(&buf[..n]);
        Ok(n)
    }
}

/// The hash of everything `content` holds.
fn hash_all(hasher: &RandomState, content: impl Read) -> io::Result<u64> {
    let mut reading = Hashing::new(content, hasher);
    io::copy(&mut reading, &mut io::sink())?;
    Ok(reading.finish())
}

/// Writes the directory `root` as a tar stream to `out`.
pub fn pack(root: &Root, walls: &Walls, out: impl Write) -> io::Result<Sent> {
    let mut sent = Sent {
        hasher: RandomState::new(),
        entries: BTreeMap::new(),
        files: 0,
        bytes: 0,
    };
    let mut tar = tar::Builder::new(out);
    let mut pending = vec![PathBuf::new()];
    while let Some(dir) = pending.pop() {
        let mut list = root.list(&dir)?;
        list.sort_by(|a, b| a.name.cmp(&b.name));
        for e in list {
            let rel = dir.join(&e.name);
            if unreadable(walls, root.path(), &rel).is_some() {
                continue;
            }
            let Some(meta) = root.meta(&rel)? else {
                continue;
            };
            let mut header = tar::Header::new_gnu();
            header.set_mode(meta.mode & 0o777);
            // Build tools in the pod compare times: they arrive as they are here.
            header.set_mtime(u64::try_from(meta.mtime).unwrap_or(0));
            match meta.kind {
                Kind::Dir => {
                    header.set_entry_type(tar::EntryType::Directory);
                    header.set_size(0);
                    tar.append_data(&mut header, &rel, io::empty())?;
                    sent.entries.insert(rel.clone(), Stamp::Dir);
                    pending.push(rel);
                }
                Kind::File => {
                    header.set_entry_type(tar::EntryType::Regular);
                    header.set_size(meta.len);
                    // Exactly the size the header says, whatever the file does meanwhile; the
                    // hash is of what was sent, so a file changed here since reads as the
                    // person's change later.
                    let exact = root
                        .open_file(&rel)?
                        .take(meta.len)
                        .chain(io::repeat(0))
                        .take(meta.len);
                    let mut reading = Hashing::new(exact, &sent.hasher);
                    tar.append_data(&mut header, &rel, &mut reading)?;
                    sent.files += 1;
                    sent.bytes += meta.len;
                    let stamp = Stamp::File(reading.finish(), meta.mode & 0o100 != 0);
                    sent.entries.insert(rel, stamp);
                }
                Kind::Symlink => {
                    let target = root.read_link(&rel)?;
                    header.set_entry_type(tar::EntryType::Symlink);
                    header.set_size(0);
                    tar.append_link(&mut header, &rel, &target)?;
                    sent.entries.insert(rel, Stamp::Link(target));
                }
                // Sockets, FIFOs and devices mean nothing in a pod.
                Kind::Other => {}
            }
        }
    }
    tar.into_inner()?.flush()?;
    Ok(sent)
}

/// `name` from a tar stream as a plain relative path, or `None` when it leaves the directory.
fn plain(name: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in name.components() {
        match c {
            Component::CurDir => {}
            Component::Normal(n) => out.push(n),
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// What stands at `rel` here now, stamped as [`pack`] would.
fn stamp_here(root: &Root, hasher: &RandomState, rel: &Path) -> io::Result<Option<Stamp>> {
    Ok(match root.meta(rel)? {
        None => None,
        Some(m) => Some(match m.kind {
            Kind::Dir => Stamp::Dir,
            Kind::File => Stamp::File(hash_all(hasher, root.open_file(rel)?)?, m.mode & 0o100 != 0),
            Kind::Symlink => Stamp::Link(root.read_link(rel)?),
            Kind::Other => Stamp::Link(PathBuf::from("\0other")),
        }),
    })
}

/// Applies the pod's working directory, a tar stream in `input`, to `root`: what the pod
/// changed since [`pack`] sent `sent`, within the walls.
pub fn unpack(root: &Root, walls: &Walls, sent: &Sent, input: impl Read) -> io::Result<Report> {
    let mut report = Report::default();
    let mut archive = tar::Archive::new(input);
    let mut seen = BTreeSet::new();
    // Entries are applied after the removals, which may clear the way for them (a directory
    // the pod replaced with a file), so they are read in first.
    // What files hold goes to a spool on disk, as (offset, length), never whole into memory.
    let mut spool = tempfile::tempfile()?;
    let mut entries: Vec<(PathBuf, Stamp, (u64, u64), u32)> = Vec::new();
    for entry in archive.entries()? {
        let mut entry = entry?;
        let raw = entry.path()?.into_owned();
        let Some(rel) = plain(&raw) else {
            report
                .refused
                .push((raw, "leaves the working directory".into()));
            continue;
        };
        if rel.as_os_str().is_empty() {
            continue;
        }
        seen.insert(rel.clone());
        let mode = entry.header().mode().unwrap_or(0o644) & 0o777;
        let (stamp, spooled) = match entry.header().entry_type() {
            tar::EntryType::Directory => (Stamp::Dir, (0, 0)),
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let start = spool.stream_position()?;
                let mut reading = Hashing::new(&mut entry, &sent.hasher);
                let len = io::copy(&mut reading, &mut spool)?;
                let stamp = Stamp::File(reading.finish(), mode & 0o100 != 0);
                (stamp, (start, len))
            }
            tar::EntryType::Symlink => match entry.link_name()? {
                Some(target) => (Stamp::Link(target.into_owned()), (0, 0)),
                None => continue,
            },
            other => {
                report.refused.push((
                    rel,
                    format!("a {other:?} entry, not a file, directory or link"),
                ));
                continue;
            }
        };
        if sent.entries.get(&rel) == Some(&stamp) {
            continue;
        }
        entries.push((rel, stamp, spooled, mode));
    }
    // What the pod no longer has, deepest first so that directories are empty by their turn.
    for (rel, was) in sent.entries.iter().rev() {
        if seen.contains(rel) {
            continue;
        }
        if unwritable(walls, root.path(), rel).is_some() {
            continue;
        }
        let now = stamp_here(root, &sent.hasher, rel)?;
        match (was, now) {
            (_, None) => {}
            (Stamp::Dir, Some(Stamp::Dir)) => {
                if root.remove_empty_dir(rel)? {
                    report.removed.push(rel.clone());
                }
            }
            (was, Some(now)) if *was == now => {
                root.remove(rel)?;
                report.removed.push(rel.clone());
            }
            (_, Some(_)) => report.conflicts.push(rel.clone()),
        }
    }
    for (rel, stamp, (start, len), mode) in entries {
        if let Some(why) = unwritable(walls, root.path(), &rel) {
            report.refused.push((rel, why));
            continue;
        }
        let now = stamp_here(root, &sent.hasher, &rel)?;
        if now.as_ref() == Some(&stamp) {
            continue;
        }
        let untouched = match (sent.entries.get(&rel), &now) {
            // A directory gives way only when nothing is left in it: what the pod removed
            // from it is gone by now, and anything else is this side's.
            (_, Some(Stamp::Dir)) => root.remove_empty_dir(&rel)?,
            (Some(was), Some(now)) => was == now,
            (None, None) => true,
            _ => false,
        };
        if !untouched {
            report.conflicts.push(rel);
            continue;
        }
        let parent = rel.parent().unwrap_or(Path::new(""));
        let done = root.make_dirs(parent).and_then(|_| match &stamp {
            Stamp::Dir => root.ensure_dir(&rel, mode | 0o700),
            Stamp::File(..) => spool
                .seek(SeekFrom::Start(start))
                .and_then(|_| root.replace_file_from(&rel, &mut (&mut spool).take(len), mode)),
            Stamp::Link(target) => root.replace_symlink(&rel, target),
        });
        match done {
            Ok(()) => report.written.push(rel),
            Err(e) => report.refused.push((rel, e.to_string())),
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests;
