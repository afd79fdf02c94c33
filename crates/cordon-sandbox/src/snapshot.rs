//! Copies of read-only paths taken before a run, for where they cannot be made read-only
//! during it (no mount namespace): after the run, whatever changed is put back.
//!
//! Only for the small things cordon protects (start-up files, git's config and hooks, agent
//! settings) and explicit `deny-write` paths; a copy larger than the caps is refused rather
//! than taken half.

use std::path::{Path, PathBuf};

use crate::beneath::{Kind, Root};

/// Most entries one snapshot holds.
pub const MAX_ENTRIES: usize = 20_000;
/// Most bytes of file content one snapshot holds.
pub const MAX_BYTES: u64 = 64 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Saved {
    File {
        bytes: Vec<u8>,
        mode: u32,
    },
    Dir {
        mode: u32,
        names: Vec<std::ffi::OsString>,
    },
    Symlink(PathBuf),
}

/// Why a snapshot could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error(
        "{path} is too large to guard by copying (more than {MAX_ENTRIES} entries or {} MiB)",
        MAX_BYTES >> 20
    )]
    TooLarge { path: PathBuf },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Directories on the way to a saved path, relative to its root, with their inode numbers.
type Between = Vec<(PathBuf, u64)>;

/// The saved state of some paths, each under a writable root.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The writable places, opened when the copy is taken: the restore works through them
    /// and never follows a link the command left ([`crate::beneath`]).
    roots: Vec<Root>,
    /// In pre-order: a directory comes before what is in it. Each is the root it lies in
    /// and its path relative to it.
    entries: Vec<(usize, PathBuf, Saved)>,
    /// Each saved top path (root, relative), with the directories between its writable root
    /// and it (and their inode numbers, to find them again if they are moved).
    tops: Vec<(usize, PathBuf, Between)>,
    bytes: u64,
}

/// What a restore did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Restoration {
    /// Paths that had changed and are now as they were.
    pub restored: Vec<PathBuf>,
    /// Paths that had changed and could not be put back, with the error: the host keeps
    /// what the command did there.
    pub failed: Vec<(PathBuf, String)>,
}

impl Snapshot {
    /// Saves `paths` (that exist); `roots` are the writable places they lie in.
    pub fn take(paths: &[PathBuf], roots: &[PathBuf]) -> Result<Self, SnapshotError> {
        let mut snap = Snapshot::default();
        for root in roots {
            let opened = Root::open(root).map_err(|source| SnapshotError::Read {
                path: root.clone(),
                source,
            })?;
            snap.roots.push(opened);
        }
        for top in paths {
            let inside = snap
                .roots
                .iter()
                .enumerate()
                .filter_map(|(i, r)| Some((i, r.relative(top)?)))
                .filter(|(_, rel)| !rel.as_os_str().is_empty())
                .min_by_key(|(_, rel)| rel.as_os_str().len())
                .map(|(i, rel)| (i, rel.to_path_buf()));
            // A writable place made read-only whole (`--deny-write .`), or a path outside
            // them: worked on from its parent, which the command cannot change.
            let (i, rel) = match inside {
                Some(found) => found,
                None => {
                    let (Some(parent), Some(name)) = (top.parent(), top.file_name()) else {
                        continue;
                    };
                    let opened = Root::open(parent).map_err(|source| SnapshotError::Read {
                        path: parent.to_path_buf(),
                        source,
                    })?;
                    snap.roots.push(opened);
                    (snap.roots.len() - 1, PathBuf::from(name))
                }
            };
            let root = &snap.roots[i];
            if !matches!(root.meta(&rel), Ok(Some(_))) {
                continue;
            }
            let mut between = Vec::new();
            let mut dirs: Vec<&Path> = rel
                .ancestors()
                .skip(1)
                .filter(|a| !a.as_os_str().is_empty())
                .collect();
            dirs.reverse();
            for d in dirs {
                if let Ok(Some(m)) = root.meta(d) {
                    between.push((d.to_path_buf(), m.ino));
                }
            }
            snap.tops.push((i, rel.clone(), between));
            snap.save(i, &rel, top)?;
        }
        Ok(snap)
    }

    fn save(&mut self, i: usize, rel: &Path, top: &Path) -> Result<(), SnapshotError> {
        let root = &self.roots[i];
        let read = |source| SnapshotError::Read {
            path: root.path().join(rel),
            source,
        };
        if self.entries.len() >= MAX_ENTRIES {
            return Err(SnapshotError::TooLarge {
                path: top.to_path_buf(),
            });
        }
        let Some(meta) = root.meta(rel).map_err(read)? else {
            return Ok(());
        };
        match meta.kind {
            Kind::Symlink => {
                let target = root.read_link(rel).map_err(read)?;
                self.entries
                    .push((i, rel.to_path_buf(), Saved::Symlink(target)));
            }
            Kind::Dir => {
                let mut names: Vec<_> = root
                    .list(rel)
                    .map_err(read)?
                    .into_iter()
                    .map(|e| e.name)
                    .collect();
                names.sort();
                self.entries.push((
                    i,
                    rel.to_path_buf(),
                    Saved::Dir {
                        mode: meta.mode,
                        names: names.clone(),
                    },
                ));
                for name in names {
                    self.save(i, &rel.join(name), top)?;
                }
            }
            Kind::File => {
                self.bytes += meta.len;
                if self.bytes > MAX_BYTES {
                    return Err(SnapshotError::TooLarge {
                        path: top.to_path_buf(),
                    });
                }
                let bytes = root.read(rel).map_err(read)?;
                self.entries.push((
                    i,
                    rel.to_path_buf(),
                    Saved::File {
                        bytes,
                        mode: meta.mode,
                    },
                ));
            }
            // Sockets, fifos and devices are left as they are: they hold no content to
            // protect.
            Kind::Other => {}
        }
        Ok(())
    }

    /// Puts back everything that changed. Call it only when nothing from the run is left
    /// alive.
    pub fn restore(&self) -> Restoration {
        let mut out = Restoration::default();
        let mut note = |root: &Root, rel: &Path, r: std::io::Result<bool>| match r {
            Ok(true) => out.restored.push(root.path().join(rel)),
            Ok(false) => {}
            Err(e) => out.failed.push((root.path().join(rel), e.to_string())),
        };
        // A directory on the way to a protected path may have been moved away (`mv .git
        // .git2`) and something else put in its place, perhaps a symlink. Move the original
        // back when it is still next to where it was; otherwise make a real directory there,
        // so the protected paths can be restored.
        for (i, _, between) in &self.tops {
            let root = &self.roots[*i];
            for (dir, ino) in between {
                note(root, dir, put_back_dir(root, dir, *ino));
            }
        }
        for (i, rel, saved) in &self.entries {
            let root = &self.roots[*i];
            note(root, rel, restore_one(root, rel, saved));
        }
        out
    }
}

/// Makes `dir` the directory with inode `ino` again, or at least a directory; true when
/// something had to change.
fn put_back_dir(root: &Root, dir: &Path, ino: u64) -> std::io::Result<bool> {
    let now = root.meta(dir)?;
    if now.is_some_and(|m| m.kind == Kind::Dir && m.ino == ino) {
        return Ok(false);
    }
    let parent = dir.parent().unwrap_or(Path::new(""));
    let name = dir.file_name().unwrap_or_default();
    let moved = root
        .list(parent)?
        .into_iter()
        .find(|e| e.ino == ino && e.kind == Kind::Dir);
    if let Some(moved) = moved {
        root.rename_within(parent, &moved.name, name)?;
        return Ok(true);
    }
    if now.is_some_and(|m| m.kind == Kind::Dir) {
        return Ok(false);
    }
    root.ensure_dir(dir, 0o755)?;
    Ok(true)
}

/// Makes `rel` what `saved` says; true when something had to change.
fn restore_one(root: &Root, rel: &Path, saved: &Saved) -> std::io::Result<bool> {
    let now = root.meta(rel)?;
    match saved {
        Saved::File { bytes, mode } => {
            let same = now.is_some_and(|m| {
                m.kind == Kind::File
                    && m.mode == *mode
                    && m.len == bytes.len() as u64
                    && root.read(rel).is_ok_and(|b| &b == bytes)
            });
            if same {
                return Ok(false);
            }
            root.replace_file(rel, bytes, *mode)?;
            Ok(true)
        }
        Saved::Symlink(target) => {
            if now.is_some_and(|m| m.kind == Kind::Symlink)
                && root.read_link(rel).is_ok_and(|t| &t == target)
            {
                return Ok(false);
            }
            root.replace_symlink(rel, target)?;
            Ok(true)
        }
        Saved::Dir { mode, names } => {
            let mut changed = !now.is_some_and(|m| m.kind == Kind::Dir && m.mode == *mode);
            if changed {
                root.ensure_dir(rel, *mode)?;
            }
            for e in root.list(rel)? {
                if !names.contains(&e.name) {
                    root.remove(&rel.join(&e.name))?;
                    changed = true;
                }
            }
            Ok(changed)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn tree(root: &Path) -> std::io::Result<()> {
        fs::create_dir_all(root.join(".git/hooks"))?;
        fs::write(root.join(".git/config"), "[core]\n")?;
        fs::write(root.join(".git/hooks/pre-commit.sample"), "sample")?;
        fs::write(root.join(".bashrc"), "# mine\n")?;
        Ok(())
    }

    #[test]
    fn changes_to_saved_paths_are_put_back() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let root = dir.path().to_path_buf();
        tree(&root)?;
        let paths = [".git/config", ".git/hooks", ".bashrc"].map(|p| root.join(p));
        let snap = Snapshot::take(&paths, std::slice::from_ref(&root))?;
        assert_eq!(
            snap.restore(),
            Restoration::default(),
            "nothing changed yet"
        );

        fs::write(root.join(".git/config"), "[core] fsmonitor=evil\n")?;
        fs::write(root.join(".git/hooks/pre-commit"), "evil")?;
        fs::remove_file(root.join(".bashrc"))?;
        std::os::unix::fs::symlink("/etc/passwd", root.join(".bashrc"))?;
        let touched = snap.restore();
        assert!(touched.failed.is_empty(), "{touched:?}");
        assert_eq!(touched.restored.len(), 3, "{touched:?}");
        assert_eq!(fs::read_to_string(root.join(".git/config"))?, "[core]\n");
        assert!(!root.join(".git/hooks/pre-commit").exists());
        assert!(root.join(".git/hooks/pre-commit.sample").exists());
        assert!(fs::symlink_metadata(root.join(".bashrc"))?.is_file());
        assert_eq!(fs::read_to_string(root.join(".bashrc"))?, "# mine\n");
        Ok(())
    }

    #[test]
    fn a_parent_swapped_for_a_symlink_is_not_followed() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let root = dir.path().join("ws");
        let elsewhere = dir.path().join("elsewhere");
        fs::create_dir_all(&elsewhere)?;
        fs::create_dir_all(&root)?;
        tree(&root)?;
        let snap = Snapshot::take(&[root.join(".git/config")], std::slice::from_ref(&root))?;
        fs::rename(root.join(".git"), root.join(".git2"))?;
        std::os::unix::fs::symlink(&elsewhere, root.join(".git"))?;
        let r = snap.restore();
        assert!(r.failed.is_empty(), "{r:?}");
        assert!(fs::symlink_metadata(root.join(".git"))?.is_dir());
        assert_eq!(fs::read_to_string(root.join(".git/config"))?, "[core]\n");
        assert!(
            root.join(".git/hooks/pre-commit.sample").exists(),
            "the moved original is put back"
        );
        assert!(!root.join(".git2").exists());
        assert!(
            fs::read_dir(&elsewhere)?.next().is_none(),
            "the restore went through the symlink"
        );
        Ok(())
    }

    #[test]
    fn too_large_is_refused() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let big = dir.path().join("big");
        fs::create_dir(&big)?;
        let f = fs::File::create(big.join("blob"))?;
        f.set_len(MAX_BYTES + 1)?;
        let err =
            Snapshot::take(std::slice::from_ref(&big), &[dir.path().to_path_buf()]).unwrap_err();
        assert!(err.to_string().contains("too large"), "{err}");
        Ok(())
    }
}
