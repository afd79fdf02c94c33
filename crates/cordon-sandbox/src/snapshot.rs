//! Copies of read-only paths taken before a run, for where they cannot be made read-only
//! during it (no mount namespace): after the run, whatever changed is put back.
//!
//! Only for the small things cordon protects (start-up files, git's config and hooks, agent
//! settings) and explicit `deny-write` paths; a copy larger than the caps is refused rather
//! than taken half.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirEntryExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

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

/// The saved state of some paths, each under a writable root.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// In pre-order: a directory comes before what is in it.
    entries: Vec<(PathBuf, Saved)>,
    /// Each saved top path, with the directories between its writable root and it (and
    /// their inode numbers, to find them again if they are moved).
    tops: Vec<(PathBuf, Vec<(PathBuf, u64)>)>,
    bytes: u64,
}

impl Snapshot {
    /// Saves `paths` (that exist); `roots` are the writable places they lie in.
    pub fn take(paths: &[PathBuf], roots: &[PathBuf]) -> Result<Self, SnapshotError> {
        let mut snap = Snapshot::default();
        for top in paths {
            if fs::symlink_metadata(top).is_err() {
                continue;
            }
            let between = roots
                .iter()
                .filter(|r| top.starts_with(r))
                .max_by_key(|r| r.as_os_str().len())
                .map(|root| {
                    let mut dirs: Vec<(PathBuf, u64)> = top
                        .ancestors()
                        .skip(1)
                        .take_while(|a| a != root)
                        .filter_map(|a| {
                            Some((a.to_path_buf(), fs::symlink_metadata(a).ok()?.ino()))
                        })
                        .collect();
                    dirs.reverse();
                    dirs
                })
                .unwrap_or_default();
            snap.tops.push((top.clone(), between));
            snap.save(top, top)?;
        }
        Ok(snap)
    }

    fn save(&mut self, path: &Path, top: &Path) -> Result<(), SnapshotError> {
        let read = |source| SnapshotError::Read {
            path: path.to_path_buf(),
            source,
        };
        if self.entries.len() >= MAX_ENTRIES {
            return Err(SnapshotError::TooLarge {
                path: top.to_path_buf(),
            });
        }
        let meta = fs::symlink_metadata(path).map_err(read)?;
        let mode = meta.mode() & 0o7777;
        if meta.file_type().is_symlink() {
            let target = fs::read_link(path).map_err(read)?;
            self.entries
                .push((path.to_path_buf(), Saved::Symlink(target)));
        } else if meta.is_dir() {
            let mut names: Vec<_> = fs::read_dir(path)
                .map_err(read)?
                .map(|e| e.map(|e| e.file_name()))
                .collect::<Result<_, _>>()
                .map_err(read)?;
            names.sort();
            self.entries.push((
                path.to_path_buf(),
                Saved::Dir {
                    mode,
                    names: names.clone(),
                },
            ));
            for name in names {
                self.save(&path.join(name), top)?;
            }
        } else if meta.is_file() {
            self.bytes += meta.len();
            if self.bytes > MAX_BYTES {
                return Err(SnapshotError::TooLarge {
                    path: top.to_path_buf(),
                });
            }
            let bytes = fs::read(path).map_err(read)?;
            self.entries
                .push((path.to_path_buf(), Saved::File { bytes, mode }));
        }
        // Sockets, fifos and devices are left as they are: they hold no content to protect.
        Ok(())
    }

    /// Puts back everything that changed and returns the paths it touched. Call it only when
    /// nothing from the run is left alive: it works path by path.
    pub fn restore(&self) -> Vec<PathBuf> {
        let mut touched = Vec::new();
        // A directory on the way to a protected path may have been moved away (`mv .git
        // .git2`) and something else put in its place, perhaps a symlink that would carry the
        // restore elsewhere. Move the original back when it is still next to where it was;
        // otherwise make a real directory there, so the protected paths can be restored.
        for (_, between) in &self.tops {
            for (dir, ino) in between {
                let now = fs::symlink_metadata(dir).ok();
                if now.as_ref().is_some_and(|m| m.is_dir() && m.ino() == *ino) {
                    continue;
                }
                if let Some(original) = moved_sibling(dir, *ino) {
                    let _ = remove_any(dir);
                    if fs::rename(&original, dir).is_ok() {
                        touched.push(dir.clone());
                        continue;
                    }
                }
                if !now.is_some_and(|m| m.is_dir()) {
                    let _ = remove_any(dir);
                    if fs::create_dir(dir).is_ok() {
                        touched.push(dir.clone());
                    }
                }
            }
        }
        for (path, saved) in &self.entries {
            if restore_one(path, saved) {
                touched.push(path.clone());
            }
        }
        touched
    }
}

/// The entry next to `dir` (in the same parent) that is the directory with inode `ino`.
fn moved_sibling(dir: &Path, ino: u64) -> Option<PathBuf> {
    fs::read_dir(dir.parent()?)
        .ok()?
        .flatten()
        .find(|e| e.ino() == ino && e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
}

/// Makes `path` what `saved` says; true when something had to change.
fn restore_one(path: &Path, saved: &Saved) -> bool {
    let now = fs::symlink_metadata(path).ok();
    match saved {
        Saved::File { bytes, mode } => {
            let same = now.as_ref().is_some_and(|m| {
                m.is_file()
                    && m.mode() & 0o7777 == *mode
                    && m.len() == bytes.len() as u64
                    && fs::read(path).is_ok_and(|b| &b == bytes)
            });
            if same {
                return false;
            }
            let _ = remove_any(path);
            let written = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(libc::O_NOFOLLOW)
                .mode(*mode)
                .open(path)
                .and_then(|mut f| {
                    f.write_all(bytes)?;
                    f.set_permissions(fs::Permissions::from_mode(*mode))
                });
            let _ = written;
            true
        }
        Saved::Symlink(target) => {
            if fs::read_link(path).is_ok_and(|t| &t == target)
                && now.is_some_and(|m| m.file_type().is_symlink())
            {
                return false;
            }
            let _ = remove_any(path);
            let _ = std::os::unix::fs::symlink(target, path);
            true
        }
        Saved::Dir { mode, names } => {
            let mut changed = false;
            if !now.as_ref().is_some_and(|m| m.is_dir()) {
                let _ = remove_any(path);
                let _ = fs::create_dir(path);
                changed = true;
            }
            if now.is_some_and(|m| m.mode() & 0o7777 != *mode) {
                changed = true;
            }
            let _ = fs::set_permissions(path, fs::Permissions::from_mode(*mode));
            if let Ok(entries) = fs::read_dir(path) {
                for e in entries.flatten() {
                    if !names.contains(&e.file_name()) {
                        let _ = remove_any(&e.path());
                        changed = true;
                    }
                }
            }
            changed
        }
    }
}

/// Removes a file, symlink or directory tree without following symlinks.
pub(crate) fn remove_any(p: &Path) -> std::io::Result<()> {
    match fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(p),
        Ok(_) => fs::remove_file(p),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
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
        assert!(snap.restore().is_empty(), "nothing changed yet");

        fs::write(root.join(".git/config"), "[core] fsmonitor=evil\n")?;
        fs::write(root.join(".git/hooks/pre-commit"), "evil")?;
        fs::remove_file(root.join(".bashrc"))?;
        std::os::unix::fs::symlink("/etc/passwd", root.join(".bashrc"))?;
        let touched = snap.restore();
        assert_eq!(touched.len(), 3, "{touched:?}");
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
        snap.restore();
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
        let err = Snapshot::take(std::slice::from_ref(&big), &[]).unwrap_err();
        assert!(err.to_string().contains("too large"), "{err}");
        Ok(())
    }
}
