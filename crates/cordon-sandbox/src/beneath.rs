//! Changes under a writable place that never follow a symlink and never leave it.
//!
//! What cordon removes or puts back after a run lies where the command could write, so any
//! directory on the way may have become a symlink (`ln -s ~/.ssh .git`). Each [`Root`] is a
//! directory opened before the run; every later change walks from it one name at a time with
//! `O_NOFOLLOW | O_DIRECTORY` and acts with the `*at` calls on the last directory, so a
//! planted link is met as a link (removed, or refused), never gone through.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};

/// A directory opened before a run, to change what is under it afterwards.
#[derive(Debug)]
pub struct Root {
    path: PathBuf,
    fd: OwnedFd,
}

/// What a name is, without following it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

impl Kind {
    fn of(t: FileType) -> Kind {
        match t {
            FileType::RegularFile => Kind::File,
            FileType::Directory => Kind::Dir,
            FileType::Symlink => Kind::Symlink,
            _ => Kind::Other,
        }
    }
}

/// One name in a directory.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: OsString,
    pub kind: Kind,
    pub ino: u64,
}

/// Metadata of a name, not followed.
#[derive(Debug, Clone, Copy)]
pub struct Meta {
    pub kind: Kind,
    pub mode: u32,
    pub ino: u64,
    pub len: u64,
    /// Seconds since the epoch of the last change to the content.
    pub mtime: i64,
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Mode bits as a `Mode` (16 bits wide on macOS, 32 on Linux).
#[allow(clippy::unnecessary_cast)]
fn mode_of(bits: u32) -> Mode {
    Mode::from_raw_mode((bits & 0o7777) as rustix::fs::RawMode)
}

/// A `st_mode` (16 bits wide on macOS, 32 on Linux) as mode bits.
#[allow(clippy::useless_conversion)]
fn bits_of(raw: rustix::fs::RawMode) -> u32 {
    u32::from(raw)
}

fn err(e: rustix::io::Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

/// The names of `rel`, each an ordinary name: `..`, `.` and absolute paths would leave the
/// root or say nothing.
fn names(rel: &Path) -> io::Result<Vec<&OsStr>> {
    rel.components()
        .map(|c| match c {
            Component::Normal(n) => Ok(n),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a plain relative path", rel.display()),
            )),
        })
        .collect()
}

/// The directory [`Root::parent`] found: the root's own descriptor for a name right in it
/// (most of what a run's guard looks at, each time: duplicating it cost two calls a name),
/// else the last directory opened on the way.
enum Parent<'a> {
    Root(BorrowedFd<'a>),
    Opened(OwnedFd),
}

impl AsFd for Parent<'_> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Parent::Root(fd) => *fd,
            Parent::Opened(fd) => fd.as_fd(),
        }
    }
}

fn open_dir_in(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OwnedFd> {
    match rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty()) {
        Ok(fd) => Ok(fd),
        // A directory the command made unreadable (`chmod 000`) is still ours to open:
        // give its owner the rights back, reached without following a link.
        Err(rustix::io::Errno::ACCESS) => {
            chmod_dir_nofollow(dir, name, 0o700)?;
            rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty()).map_err(err)
        }
        Err(e) => Err(err(e)),
    }
}

/// The directory `dirs` lead to from `start`, each name opened without following a link: the
/// last as [`open_dir_in`] opens it, the ones before only to go through, so that one that may
/// be gone through but not listed (`chmod 111`) keeps its mode.
fn open_dirs_in(start: BorrowedFd<'_>, dirs: &[&OsStr]) -> io::Result<OwnedFd> {
    let Some((last, on_the_way)) = dirs.split_last() else {
        return rustix::io::fcntl_dupfd_cloexec(start, 0).map_err(err);
    };
    let mut cur: Option<OwnedFd> = None;
    for n in on_the_way {
        let here = cur.as_ref().map_or(start, AsFd::as_fd);
        cur = Some(
            match rustix::fs::openat(here, *n, WALK_FLAGS, Mode::empty()) {
                Err(rustix::io::Errno::ACCESS) => open_dir_in(here, n)?,
                opened => opened.map_err(err)?,
            },
        );
    }
    open_dir_in(cur.as_ref().map_or(start, AsFd::as_fd), last)
}

/// How a directory on the way is opened: only to be walked from (Linux's `O_PATH` needs no
/// read permission), never through a link.
#[cfg(target_os = "linux")]
const WALK_FLAGS: OFlags = OFlags::PATH
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);
#[cfg(not(target_os = "linux"))]
const WALK_FLAGS: OFlags = DIR_FLAGS;

/// `chmod` of the directory `name` in `dir`, refusing a symlink there.
#[cfg(target_os = "linux")]
fn chmod_dir_nofollow(dir: BorrowedFd<'_>, name: &OsStr, mode: u32) -> io::Result<()> {
    let path_only = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, name, path_only, Mode::empty()).map_err(err)?;
    // An `O_PATH` descriptor cannot be `fchmod`ed; its /proc entry names exactly the
    // directory it holds, not whatever the name points at now.
    let via = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd));
    rustix::fs::chmod(via.as_str(), mode_of(mode)).map_err(err)
}

#[cfg(not(target_os = "linux"))]
fn chmod_dir_nofollow(dir: BorrowedFd<'_>, name: &OsStr, mode: u32) -> io::Result<()> {
    let flags = AtFlags::SYMLINK_NOFOLLOW;
    rustix::fs::chmodat(dir, name, mode_of(mode), flags).map_err(err)
}

fn meta_in(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Option<Meta>> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(Meta {
            kind: Kind::of(FileType::from_raw_mode(st.st_mode)),
            mode: bits_of(st.st_mode) & 0o7777,
            ino: st.st_ino,
            len: u64::try_from(st.st_size).unwrap_or(0),
            #[allow(clippy::useless_conversion)]
            mtime: i64::from(st.st_mtime),
        })),
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(e) => Err(err(e)),
    }
}

/// Runs `f`; when it is refused for want of write access to `dir`, gives the directory's
/// owner write access for one more try and then puts its mode back. A command may
/// `chmod 555` the directory holding what it planted; cordon runs as that same user.
fn with_write_access<T>(
    dir: BorrowedFd<'_>,
    mut f: impl FnMut() -> rustix::io::Result<T>,
) -> io::Result<T> {
    match f() {
        Err(rustix::io::Errno::ACCESS | rustix::io::Errno::PERM) => {
            let mode = bits_of(rustix::fs::fstat(dir).map_err(err)?.st_mode) & 0o7777;
            rustix::fs::fchmod(dir, mode_of(mode | 0o700)).map_err(err)?;
            let out = f();
            let _ = rustix::fs::fchmod(dir, mode_of(mode));
            out.map_err(err)
        }
        other => other.map_err(err),
    }
}

/// Makes something new beside `name` in `dir` with `make`, under a name no other process or
/// thread is using at the moment (its process id and a counter), to be renamed over `name`:
/// a fixed name would have two runs preparing one directory remove each other's. A name left
/// by a process that died is skipped; so are a few planted ones, and then it is an error.
fn beside<T>(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    mut make: impl FnMut(&OsStr) -> rustix::io::Result<T>,
) -> io::Result<(OsString, T)> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut tries = 0;
    loop {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut tmp = OsString::from(format!(".cordon-new-{}-{n}-", std::process::id()));
        tmp.push(name);
        match with_write_access(dir, || make(&tmp)) {
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) && tries < 16 => tries += 1,
            made => return Ok((tmp, made?)),
        }
    }
}

/// Renames what [`beside`] made over `name`, or removes it when that fails.
fn rename_over(dir: BorrowedFd<'_>, tmp: &OsStr, name: &OsStr) -> io::Result<()> {
    with_write_access(dir, || rustix::fs::renameat(dir, tmp, dir, name)).inspect_err(|_| {
        let _ = rustix::fs::unlinkat(dir, tmp, AtFlags::empty());
    })
}

/// Removes `name` in `dir`: a file or link as itself, a directory with all it holds.
fn remove_in(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<bool> {
    let Some(meta) = meta_in(dir, name)? else {
        return Ok(false);
    };
    if meta.kind == Kind::Dir {
        let sub = open_dir_in(dir, name)?;
        for e in list_fd(sub.as_fd())? {
            remove_in(sub.as_fd(), &e.name)?;
        }
        with_write_access(dir, || rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR))?;
    } else {
        with_write_access(dir, || rustix::fs::unlinkat(dir, name, AtFlags::empty()))?;
    }
    Ok(true)
}

fn list_fd(dir: BorrowedFd<'_>) -> io::Result<Vec<Entry>> {
    entries(Dir::read_from(dir).map_err(err)?)
}

fn entries(mut listing: Dir) -> io::Result<Vec<Entry>> {
    let mut out = Vec::new();
    while let Some(e) = listing.read() {
        let e = e.map_err(err)?;
        let name = e.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let name = OsStr::from_bytes(name).to_os_string();
        let kind = match e.file_type() {
            FileType::Unknown => {
                meta_in(listing.fd().map_err(err)?, &name)?.map_or(Kind::Other, |m| m.kind)
            }
            t => Kind::of(t),
        };
        out.push(Entry {
            name,
            kind,
            ino: e.ino(),
        });
    }
    Ok(out)
}

impl Root {
    /// Opens `path` (a directory) to work under later.
    pub fn open(path: &Path) -> io::Result<Root> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(err)?;
        Ok(Root {
            path: path.to_path_buf(),
            fd,
        })
    }

    /// Opens this process's working directory, known as `shown`: the directory itself, even
    /// if a link has taken its place on the path `shown` since it was entered.
    pub fn open_current(shown: &Path) -> io::Result<Root> {
        let fd = rustix::fs::open(
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(err)?;
        Ok(Root {
            path: shown.to_path_buf(),
            fd,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open directory, to hand to another process.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// A root another process opened (and handed over as `fd`), known as `path`.
    pub(crate) fn from_fd(path: PathBuf, fd: OwnedFd) -> Root {
        Root { path, fd }
    }

    /// `abs` relative to this root, when it lies under it.
    pub fn relative<'a>(&self, abs: &'a Path) -> Option<&'a Path> {
        abs.strip_prefix(&self.path).ok()
    }

    /// The directory `rel` names, opened without following any link on the way.
    pub fn open_dir(&self, rel: &Path) -> io::Result<OwnedFd> {
        open_dirs_in(self.fd.as_fd(), &names(rel)?)
    }

    /// The directory holding `rel` (opened as [`Root::open_dir`]) and its last name.
    fn parent<'a>(&self, rel: &'a Path) -> io::Result<(Parent<'_>, &'a OsStr)> {
        let all = names(rel)?;
        let Some((last, dirs)) = all.split_last() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the root itself cannot be changed",
            ));
        };
        let cur = if dirs.is_empty() {
            Parent::Root(self.fd.as_fd())
        } else {
            Parent::Opened(open_dirs_in(self.fd.as_fd(), dirs)?)
        };
        Ok((cur, last))
    }

    /// What `rel` is, not followed; `None` when it (or a directory on the way) is absent or
    /// a directory on the way is not one.
    pub fn meta(&self, rel: &Path) -> io::Result<Option<Meta>> {
        match self.parent(rel) {
            Ok((dir, name)) => meta_in(dir.as_fd(), name),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Removes `rel` (a file, link, or a directory with all it holds); false when it was not
    /// there. A symlink on the way is an error: what is behind it is not this root's.
    pub fn remove(&self, rel: &Path) -> io::Result<bool> {
        let (dir, name) = match self.parent(rel) {
            Ok(p) => p,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(false),
            Err(e) => return Err(e),
        };
        remove_in(dir.as_fd(), name)
    }

    /// Makes the directory `rel` and the missing ones on the way, each inside the one before
    /// and never through a link (a link on the way is an error); returns those it made, from
    /// the top down.
    pub fn make_dirs(&self, rel: &Path) -> io::Result<Vec<PathBuf>> {
        let all = names(rel)?;
        let (_, made) = walk_dirs(self.fd.as_fd(), &all, true, rel)?;
        let mut at = PathBuf::new();
        Ok(all
            .iter()
            .zip(made)
            .filter_map(|(n, made)| {
                at.push(n);
                made.then(|| at.clone())
            })
            .collect())
    }

    /// Removes the directory `rel` if it is empty (and is a directory, reached without
    /// following a link); false when it was not there or is not empty.
    pub fn remove_empty_dir(&self, rel: &Path) -> io::Result<bool> {
        let (dir, name) = match self.parent(rel) {
            Ok(p) => p,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(false),
            Err(e) => return Err(e),
        };
        match rustix::fs::unlinkat(dir.as_fd(), name, AtFlags::REMOVEDIR) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::NOTEMPTY | rustix::io::Errno::NOENT) => Ok(false),
            Err(e) => Err(err(e)),
        }
    }

    /// The names in directory `rel`.
    pub fn list(&self, rel: &Path) -> io::Result<Vec<Entry>> {
        list_fd(self.open_dir(rel)?.as_fd())
    }

    /// The content of the regular file `rel`; a link or anything else there is an error.
    pub fn read(&self, rel: &Path) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        io::Read::read_to_end(&mut self.open_file(rel)?, &mut out)?;
        Ok(out)
    }

    /// The regular file `rel`, opened for reading; a link or anything else there is an error.
    pub fn open_file(&self, rel: &Path) -> io::Result<std::fs::File> {
        let (dir, name) = self.parent(rel)?;
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(dir.as_fd(), name, flags, Mode::empty()).map_err(err)?;
        let st = rustix::fs::fstat(&fd).map_err(err)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a regular file", rel.display()),
            ));
        }
        Ok(std::fs::File::from(fd))
    }

    /// The target of the link `rel`.
    pub fn read_link(&self, rel: &Path) -> io::Result<PathBuf> {
        let (dir, name) = self.parent(rel)?;
        let target = rustix::fs::readlinkat(dir.as_fd(), name, Vec::new()).map_err(err)?;
        Ok(PathBuf::from(OsString::from_vec(target.into_bytes())))
    }

    /// Makes `rel` a regular file holding `bytes` with `mode`, in one step: a new file beside
    /// it renamed over whatever is there (a directory there is removed first).
    pub fn replace_file(&self, rel: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
        self.replace_file_from(rel, &mut &bytes[..], mode)
    }

    /// [`Root::replace_file`] with the content read from `content` to its end, never held
    /// whole in memory.
    pub fn replace_file_from(
        &self,
        rel: &Path,
        content: &mut dyn io::Read,
        mode: u32,
    ) -> io::Result<()> {
        let (dir, name) = self.parent(rel)?;
        let dir = dir.as_fd();
        if meta_in(dir, name)?.is_some_and(|m| m.kind == Kind::Dir) {
            remove_in(dir, name)?;
        }
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let (tmp, fd) = beside(dir, name, |tmp| {
            rustix::fs::openat(dir, tmp, flags, mode_of(mode & 0o777))
        })?;
        let mut file = std::fs::File::from(fd);
        let written = io::copy(content, &mut file)
            .and_then(|_| rustix::fs::fchmod(&file, mode_of(mode)).map_err(err));
        if let Err(e) = written {
            let _ = rustix::fs::unlinkat(dir, &tmp, AtFlags::empty());
            return Err(e);
        }
        rename_over(dir, &tmp, name)
    }

    /// Makes `rel` a symlink to `target` in one step, as [`Root::replace_file`] does: a
    /// directory there is removed first.
    pub fn replace_symlink(&self, rel: &Path, target: &Path) -> io::Result<()> {
        let (dir, name) = self.parent(rel)?;
        let dir = dir.as_fd();
        if meta_in(dir, name)?.is_some_and(|m| m.kind == Kind::Dir) {
            remove_in(dir, name)?;
        }
        let (tmp, ()) = beside(dir, name, |tmp| rustix::fs::symlinkat(target, dir, tmp))?;
        rename_over(dir, &tmp, name)
    }

    /// Makes `rel` a directory with `mode`, replacing anything else there; a directory
    /// already there only gets the mode. Another process doing the same at the same moment is
    /// no error: the directory either made is the one wanted.
    pub fn ensure_dir(&self, rel: &Path, mode: u32) -> io::Result<()> {
        let (dir, name) = self.parent(rel)?;
        let dir = dir.as_fd();
        match meta_in(dir, name)? {
            Some(m) if m.kind == Kind::Dir => {}
            other => {
                if other.is_some() {
                    remove_in(dir, name)?;
                }
                match with_write_access(dir, || rustix::fs::mkdirat(dir, name, mode_of(0o700))) {
                    Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                        if !meta_in(dir, name)?.is_some_and(|m| m.kind == Kind::Dir) {
                            return Err(e);
                        }
                    }
                    made => made?,
                }
            }
        }
        chmod_dir_nofollow(dir, name, mode)
    }

    /// Renames `from` to `to`, both names in the directory `parent`, replacing `to`.
    pub fn rename_within(&self, parent: &Path, from: &OsStr, to: &OsStr) -> io::Result<()> {
        let dir = self.open_dir(parent)?;
        let dir = dir.as_fd();
        remove_in(dir, to)?;
        with_write_access(dir, || rustix::fs::renameat(dir, from, dir, to))
    }
}

/// Opens the directory `rel` under `root` for a front end that was asked to work there: links
/// that stay under `root` are followed, any way out (`..`, an absolute link, a mount point
/// crossed through a link) is refused. The descriptor is the directory that was checked, to be
/// used instead of its name, which a command running at the same time could redirect.
///
/// `openat2(RESOLVE_BENEATH)` does this in the kernel, atomically; where it is missing the
/// walk goes one name at a time and refuses every link (stricter, never looser).
pub fn open_dir_beneath(root: BorrowedFd<'_>, rel: &Path) -> io::Result<OwnedFd> {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::ResolveFlags;
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        let rel_or_here = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        match rustix::fs::openat2(root, rel_or_here, flags, Mode::empty(), resolve) {
            Err(rustix::io::Errno::NOSYS) => {}
            Err(rustix::io::Errno::XDEV) => {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("{} leads out of the directory", rel.display()),
                ));
            }
            other => return other.map_err(err),
        }
    }
    let mut cur = rustix::io::fcntl_dupfd_cloexec(root, 0).map_err(err)?;
    for n in names(rel)? {
        let next = rustix::fs::openat(cur.as_fd(), n, DIR_FLAGS, Mode::empty());
        cur = match next {
            Ok(fd) => fd,
            Err(_) if matches!(meta_in(cur.as_fd(), n), Ok(Some(m)) if m.kind == Kind::Symlink) => {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "{} goes through a symbolic link, which this kernel cannot follow safely",
                        rel.display()
                    ),
                ));
            }
            Err(e) => return Err(err(e)),
        };
    }
    Ok(cur)
}

/// The names in the directory `rel` under `root`, reached as [`open_dir_beneath`] does: a
/// directory swapped for a link to elsewhere meanwhile is refused, never listed.
pub fn list_beneath(root: BorrowedFd<'_>, rel: &Path) -> io::Result<Vec<Entry>> {
    let dir = open_dir_beneath(root, rel)?;
    let readable = rustix::fs::openat(
        dir.as_fd(),
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(err)?;
    list_fd(readable.as_fd())
}

/// The inode of `rel` under `root`, not followed, its directory reached as
/// [`open_dir_beneath`] does: to tell whether a name a path-based walk met is really there.
pub fn ino_beneath(root: BorrowedFd<'_>, rel: &Path) -> io::Result<u64> {
    let name = rel
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no name"))?;
    let dir = open_dir_beneath(root, rel.parent().unwrap_or(Path::new("")))?;
    let st = rustix::fs::statat(dir.as_fd(), name, AtFlags::SYMLINK_NOFOLLOW).map_err(err)?;
    Ok(st.st_ino as u64)
}

/// Walks `dirs` from `start` one name at a time without following a link (`shown` names the
/// whole path in errors), making each missing one when `make`: the last directory, and for
/// each name whether it was made.
fn walk_dirs(
    start: BorrowedFd<'_>,
    dirs: &[&OsStr],
    make: bool,
    shown: &Path,
) -> io::Result<(OwnedFd, Vec<bool>)> {
    let through_link = |e: rustix::io::Errno| {
        if matches!(e, rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} goes through a symbolic link or a file, which is not followed",
                    shown.display()
                ),
            )
        } else {
            err(e)
        }
    };
    let mut made = Vec::with_capacity(dirs.len());
    let mut cur = rustix::io::fcntl_dupfd_cloexec(start, 0).map_err(err)?;
    for n in dirs {
        let new = make
            && match rustix::fs::mkdirat(cur.as_fd(), *n, Mode::from_raw_mode(0o777)) {
                Ok(()) => true,
                Err(rustix::io::Errno::EXIST) => false,
                Err(e) => return Err(err(e)),
            };
        made.push(new);
        cur =
            rustix::fs::openat(cur.as_fd(), *n, WALK_FLAGS, Mode::empty()).map_err(through_link)?;
    }
    Ok((cur, made))
}

/// How [`open_file_beneath`] opens a file.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileOpen {
    pub read: bool,
    /// For writing; created if missing unless also `read` (an edit of an existing file).
    pub write: bool,
    /// Make the missing directories on the way (when writing).
    pub make_dirs: bool,
}

/// Opens the file `rel` under `root` as `how` says, for a front end that reads or writes on a
/// command's behalf while that command may be swapping directories for links: every name is
/// opened from the directory before it with `O_NOFOLLOW`, so no link is ever followed and
/// nothing outside `root` is reached (`..` is refused). With `make_dirs` the missing
/// directories on the way are made, each inside the one just opened. New files get mode 0666
/// less the umask. The file is opened non-blocking, so a FIFO cannot hang the caller.
pub fn open_file_beneath(root: BorrowedFd<'_>, rel: &Path, how: FileOpen) -> io::Result<OwnedFd> {
    let flags = match (how.read, how.write) {
        (_, false) => OFlags::RDONLY,
        (false, true) => OFlags::WRONLY | OFlags::CREATE,
        (true, true) => OFlags::RDWR,
    } | OFlags::NONBLOCK;
    let make_dirs = how.write && how.make_dirs;
    let all = names(rel)?;
    let Some((last, dirs)) = all.split_last() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a directory, not a file",
        ));
    };
    let (cur, _) = walk_dirs(root, dirs, make_dirs, rel)?;
    rustix::fs::openat(
        cur.as_fd(),
        *last,
        flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o666),
    )
    .map_err(|e| {
        if e == rustix::io::Errno::LOOP {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} is a symbolic link, which is not followed",
                    rel.display()
                ),
            )
        } else {
            err(e)
        }
    })
}

/// The directory `dir` (not followed if it is a link), opened to be listed. One that can be
/// gone through but not listed (`chmod 111`) still lets git find a repository in it by name,
/// so a command can hide one there from a search that only lists what it may: where cordon
/// runs as its owner (as it does the command's), it gives itself the right to read for the
/// moment it opens it, and puts the mode back as it was.
pub(crate) fn open_dir_to_list(dir: &Path) -> io::Result<OwnedFd> {
    match rustix::fs::open(dir, DIR_FLAGS, Mode::empty()) {
        Err(rustix::io::Errno::ACCESS) => {}
        opened => return opened.map_err(err),
    }
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        return Err(err(rustix::io::Errno::ACCESS));
    };
    let parent = rustix::fs::open(parent, WALK_FLAGS, Mode::empty()).map_err(err)?;
    let st = rustix::fs::statat(&parent, name, AtFlags::SYMLINK_NOFOLLOW).map_err(err)?;
    let mode = bits_of(st.st_mode) & 0o7777;
    chmod_dir_nofollow(parent.as_fd(), name, mode | 0o500)?;
    let opened = rustix::fs::openat(&parent, name, DIR_FLAGS, Mode::empty());
    let back = chmod_dir_nofollow(parent.as_fd(), name, mode);
    let opened = opened.map_err(err)?;
    back?;
    Ok(opened)
}

/// The names in `dir`, opened by [`open_dir_to_list`] (read from this descriptor itself: one
/// opened again would need the read access given back).
pub(crate) fn list_opened(dir: OwnedFd) -> io::Result<Vec<Entry>> {
    entries(Dir::new(dir).map_err(err)?)
}

/// The bytes of `file` if it is a regular file (or a link to one), for reading a path a run
/// could have replaced, outside a [`Root`]. Anything else is not read: a run may leave a FIFO
/// where git keeps a config or a hook, or an agent its settings, and reading that would wait
/// for a writer for ever, with the run's undo unfinished.
pub(crate) fn read_regular(file: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(file)
        .ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Makes a FIFO at `path`, for the tests of what reads files a run could have made (with the
/// `mkfifo` command: `rustix` has no `mknodat` on macOS, where these tests also build).
#[cfg(test)]
pub(crate) fn mkfifo(path: &Path) -> io::Result<()> {
    let status = std::process::Command::new("mkfifo").arg(path).status()?;
    if status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "mkfifo {}: {status}",
            path.display()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_regular_file_is_read_and_a_fifo_does_not_wait() -> io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let file = tmp.path().join("config");
        std::fs::write(&file, "[core]\n")?;
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&file, &link)?;
        let fifo = tmp.path().join("fifo");
        mkfifo(&fifo)?;
        assert_eq!(read_regular(&file).as_deref(), Some(&b"[core]\n"[..]));
        assert_eq!(read_regular(&link).as_deref(), Some(&b"[core]\n"[..]));
        // No writer ever comes: a blocking read would not return.
        assert_eq!(read_regular(&fifo), None);
        assert_eq!(read_regular(tmp.path()), None);
        assert_eq!(read_regular(&tmp.path().join("missing")), None);
        Ok(())
    }

    #[test]
    fn a_directory_beneath_is_opened_and_every_way_out_refused() -> io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(ws.join("sub/deeper"))?;
        std::fs::create_dir_all(tmp.path().join("outside"))?;
        std::os::unix::fs::symlink(tmp.path().join("outside"), ws.join("out"))?;
        std::os::unix::fs::symlink("/", ws.join("root"))?;
        let root = Root::open(&ws)?;
        let opened = |rel: &str| open_dir_beneath(root.fd.as_fd(), Path::new(rel));
        let ino = |fd: OwnedFd| rustix::fs::fstat(fd).map(|s| s.st_ino).map_err(err);
        let sub = std::fs::metadata(ws.join("sub/deeper"))?;
        assert_eq!(
            ino(opened("sub/deeper")?)?,
            std::os::unix::fs::MetadataExt::ino(&sub)
        );
        assert_eq!(
            ino(opened("")?)?,
            std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&ws)?)
        );
        for bad in ["..", "../outside", "out", "out/.", "root", "/", "sub/../.."] {
            let e = opened(bad).expect_err(bad);
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{bad}: {e}");
        }
        Ok(())
    }

    #[test]
    fn removal_does_not_go_through_a_planted_link() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let ws = dir.path().join("ws");
        let secret = dir.path().join("ssh");
        std::fs::create_dir_all(&ws)?;
        std::fs::create_dir_all(&secret)?;
        std::fs::write(secret.join("config"), "host")?;
        let root = Root::open(&ws)?;
        std::os::unix::fs::symlink(&secret, ws.join(".git"))?;
        let e = root.remove(Path::new(".git/config")).unwrap_err();
        assert!(
            matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)),
            "{e}"
        );
        assert!(secret.join("config").exists());
        assert!(root.remove(Path::new(".git"))?, "the link itself goes");
        assert!(secret.join("config").exists());
        assert!(root.remove(Path::new("../ws")).is_err());
        Ok(())
    }

    #[test]
    fn a_read_only_parent_does_not_stop_removal() -> io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir()?;
        let root = Root::open(dir.path())?;
        std::fs::create_dir_all(dir.path().join("a/b"))?;
        std::fs::write(dir.path().join("a/b/f"), "x")?;
        std::fs::set_permissions(
            dir.path().join("a/b"),
            std::fs::Permissions::from_mode(0o000),
        )?;
        std::fs::set_permissions(dir.path().join("a"), std::fs::Permissions::from_mode(0o555))?;
        assert!(root.remove(Path::new("a/b"))?);
        assert!(!dir.path().join("a/b").exists());
        let mode = std::fs::metadata(dir.path().join("a"))?
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o555, "the mode is put back");
        Ok(())
    }

    /// Two runs of one project prepare the same directory at the same moment: neither may
    /// fail for the other, and nothing half-made is left behind.
    #[test]
    fn the_same_replacement_from_many_threads_at_once() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let target = dir.path().join("target");
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..6)
                .map(|_| {
                    s.spawn(|| -> io::Result<()> {
                        let root = Root::open(dir.path())?;
                        for _ in 0..200 {
                            root.ensure_dir(Path::new("d"), 0o700)?;
                            root.ensure_dir(Path::new("d/e"), 0o700)?;
                            root.replace_symlink(Path::new("d/link"), &target)?;
                            root.replace_file(Path::new("d/file"), b"x", 0o600)?;
                        }
                        Ok(())
                    })
                })
                .collect();
            workers
                .into_iter()
                .try_for_each(|w| w.join().expect("a worker panicked"))
        })?;
        let d = dir.path().join("d");
        assert_eq!(std::fs::read_link(d.join("link"))?, target);
        assert_eq!(std::fs::read(d.join("file"))?, b"x");
        let mut left: Vec<_> = std::fs::read_dir(&d)?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<io::Result<_>>()?;
        left.sort();
        assert_eq!(left, ["e", "file", "link"]);
        Ok(())
    }
}
