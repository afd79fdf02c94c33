//! Files that must not change even inside writable places, and what to undo after a run.

use std::path::{Path, PathBuf};

use crate::snapshot::remove_any;

/// Names that run code or change an agent's permissions the next time something starts:
/// shell start-up files, git's config and hooks, editor task folders, agent settings.
pub const PROTECTED_NAMES: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".zshrc",
    ".zprofile",
    ".profile",
    ".gitconfig",
    ".gitmodules",
    ".git/hooks",
    ".git/config",
    ".vscode",
    ".idea",
    ".cordon",
    ".claude",
    ".gemini",
    ".codex",
    ".mcp.json",
];

/// The protected paths that exist directly under `root`, to be made read-only there.
pub fn existing_protected(root: &Path) -> Vec<PathBuf> {
    PROTECTED_NAMES
        .iter()
        .map(|n| root.join(n))
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .collect()
}

/// What a run must not leave behind, found by comparing before and after: protected paths it
/// created in writable places (existing ones are read-only during the run; new ones cannot be
/// mounted over without touching the host first), and a bare repository planted in the
/// working directory.
#[derive(Debug)]
pub struct RunGuard {
    /// Protected paths that did not exist before the run.
    absent: Vec<PathBuf>,
    repo: PlantedRepoGuard,
}

/// Something the guard removed after a run, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undone {
    pub path: PathBuf,
    pub why: &'static str,
}

impl RunGuard {
    /// Notes, before a run, which protected paths do not exist in `cwd` and `writable`: the
    /// protected names in each, and those of `extra` (absolute) that lie inside one.
    pub fn before(cwd: &Path, writable: &[PathBuf], extra: &[PathBuf]) -> Self {
        let roots: Vec<&Path> = std::iter::once(cwd)
            .chain(writable.iter().map(PathBuf::as_path))
            .collect();
        let absent = roots
            .iter()
            .flat_map(|root| PROTECTED_NAMES.iter().map(move |n| root.join(n)))
            .chain(
                extra
                    .iter()
                    .filter(|p| roots.iter().any(|r| p.starts_with(r)))
                    .cloned(),
            )
            .filter(|p| std::fs::symlink_metadata(p).is_err())
            .collect();
        RunGuard {
            absent,
            repo: PlantedRepoGuard::before(cwd),
        }
    }

    /// Removes what the run planted; returns what was removed.
    pub fn undo(&self) -> Vec<Undone> {
        let mut undone: Vec<Undone> = self
            .repo
            .undo_planted()
            .into_iter()
            .map(|path| Undone {
                path,
                why: "part of a bare git repository planted in the working directory",
            })
            .collect();
        for p in &self.absent {
            if std::fs::symlink_metadata(p).is_ok() && remove_any(p).is_ok() {
                undone.push(Undone {
                    path: p.clone(),
                    why: "a protected file the command created",
                });
            }
        }
        undone
    }
}

/// What a bare git repository has at its top. Planted in the working directory, it makes the
/// next `git` run there use the planted config (and its hooks).
const BARE_REPO: [&str; 4] = ["HEAD", "objects", "refs", "config"];

/// Remembers which bare-repository names existed before a run, to remove a repository a
/// command planted.
#[derive(Debug)]
struct PlantedRepoGuard {
    root: PathBuf,
    existed: [bool; 4],
}

impl PlantedRepoGuard {
    fn before(root: &Path) -> Self {
        let existed = BARE_REPO.map(|n| std::fs::symlink_metadata(root.join(n)).is_ok());
        PlantedRepoGuard {
            root: root.to_path_buf(),
            existed,
        }
    }

    /// After the run: if the top of `root` now looks like a bare repository and the run made
    /// it so, removes what the run added and returns it.
    fn undo_planted(&self) -> Vec<PathBuf> {
        let exists = BARE_REPO.map(|n| std::fs::symlink_metadata(self.root.join(n)).is_ok());
        let looks_like_repo = exists[0] && exists[1] && exists[2];
        let added: Vec<usize> = (0..4).filter(|&i| exists[i] && !self.existed[i]).collect();
        if !looks_like_repo || added.is_empty() {
            return Vec::new();
        }
        let mut removed = Vec::new();
        for i in added {
            let p = self.root.join(BARE_REPO[i]);
            if remove_any(&p).is_ok() {
                removed.push(p);
            }
        }
        removed
    }
}

/// For a linked git worktree at `root` (its `.git` is a file saying `gitdir: …`), the parts
/// of the main repository `git commit` there must write: the worktree's own directory and the
/// shared objects, refs and logs. The main repository's config and hooks are not among them.
pub fn linked_worktree_writable(root: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string(root.join(".git")) else {
        return Vec::new();
    };
    let Some(gitdir) = text
        .lines()
        .find_map(|l| l.strip_prefix("gitdir:"))
        .map(str::trim)
    else {
        return Vec::new();
    };
    let gitdir = root.join(gitdir);
    let Ok(gitdir) = std::fs::canonicalize(&gitdir) else {
        return Vec::new();
    };
    let common = std::fs::read_to_string(gitdir.join("commondir"))
        .ok()
        .and_then(|c| std::fs::canonicalize(gitdir.join(c.trim())).ok());
    let mut out = vec![gitdir];
    if let Some(common) = common {
        out.extend(
            ["objects", "refs", "logs"]
                .iter()
                .map(|d| common.join(d))
                .filter(|p| p.is_dir()),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planted_bare_repository_is_removed_but_a_real_one_is_kept() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let root = dir.path();
        std::fs::write(root.join("config"), "mine")?;
        let guard = PlantedRepoGuard::before(root);
        std::fs::write(root.join("HEAD"), "ref: refs/heads/main")?;
        std::fs::create_dir_all(root.join("objects"))?;
        std::fs::create_dir_all(root.join("refs/heads"))?;
        let removed = guard.undo_planted();
        assert_eq!(removed.len(), 3);
        assert!(!root.join("HEAD").exists() && !root.join("objects").exists());
        assert!(root.join("config").exists(), "what existed before stays");

        // A directory that already was a bare repository is left alone.
        std::fs::write(root.join("HEAD"), "x")?;
        std::fs::create_dir_all(root.join("objects"))?;
        std::fs::create_dir_all(root.join("refs"))?;
        let guard = PlantedRepoGuard::before(root);
        assert!(guard.undo_planted().is_empty());
        Ok(())
    }

    #[test]
    fn protected_paths_a_run_created_are_removed() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git"))?;
        std::fs::write(root.join(".gitmodules"), "kept")?;
        let guard = RunGuard::before(root, &[], &[root.join("cfg/cordon")]);
        std::fs::create_dir_all(root.join(".git/hooks"))?;
        std::fs::write(root.join(".git/hooks/pre-commit"), "evil")?;
        std::fs::write(root.join(".bashrc"), "evil")?;
        std::os::unix::fs::symlink("/etc", root.join(".vscode"))?;
        std::fs::create_dir_all(root.join("cfg/cordon/policies"))?;
        let undone: Vec<PathBuf> = guard.undo().into_iter().map(|u| u.path).collect();
        assert_eq!(undone.len(), 4, "{undone:?}");
        assert!(
            !root.join("cfg/cordon").exists(),
            "cordon's own settings were planted"
        );
        assert!(!root.join(".git/hooks").exists() && !root.join(".bashrc").exists());
        assert!(std::fs::symlink_metadata(root.join(".vscode")).is_err());
        assert!(
            std::path::Path::new("/etc").exists(),
            "a planted symlink is removed, not followed"
        );
        assert!(
            root.join(".gitmodules").exists(),
            "what existed before stays"
        );
        Ok(())
    }

    #[test]
    fn only_a_complete_repository_shape_counts() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let guard = PlantedRepoGuard::before(dir.path());
        std::fs::create_dir_all(dir.path().join("objects"))?;
        assert!(
            guard.undo_planted().is_empty(),
            "an objects/ folder alone is a project's business"
        );
        assert!(dir.path().join("objects").exists());
        Ok(())
    }
}
