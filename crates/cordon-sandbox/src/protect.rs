//! Files that must not change even inside writable places, and what to undo after a run.

use std::path::{Path, PathBuf};

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

/// What a bare git repository has at its top. Planted in the working directory, it makes the
/// next `git` run there use the planted config (and its hooks).
const BARE_REPO: [&str; 4] = ["HEAD", "objects", "refs", "config"];

/// Remembers which bare-repository names existed before a run, to remove a repository a
/// command planted.
#[derive(Debug)]
pub struct PlantedRepoGuard {
    root: PathBuf,
    existed: [bool; 4],
}

impl PlantedRepoGuard {
    pub fn before(root: &Path) -> Self {
        let existed = BARE_REPO.map(|n| std::fs::symlink_metadata(root.join(n)).is_ok());
        PlantedRepoGuard {
            root: root.to_path_buf(),
            existed,
        }
    }

    /// After the run: if the top of `root` now looks like a bare repository and the run made
    /// it so, removes what the run added and returns it.
    pub fn undo_planted(&self) -> Vec<PathBuf> {
        let exists = BARE_REPO.map(|n| std::fs::symlink_metadata(self.root.join(n)).is_ok());
        let looks_like_repo = exists[0] && exists[1] && exists[2];
        let added: Vec<usize> = (0..4).filter(|&i| exists[i] && !self.existed[i]).collect();
        if !looks_like_repo || added.is_empty() {
            return Vec::new();
        }
        let mut removed = Vec::new();
        for i in added {
            let p = self.root.join(BARE_REPO[i]);
            // symlink_metadata: a planted symlink is removed, not followed.
            let gone = match std::fs::symlink_metadata(&p) {
                Ok(m) if m.is_dir() => std::fs::remove_dir_all(&p),
                Ok(_) => std::fs::remove_file(&p),
                Err(e) => Err(e),
            };
            if gone.is_ok() {
                removed.push(p);
            }
        }
        removed
    }
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
