//! Package managers' caches of a project's own (`[filesystem] private_caches`, on in the `dev`
//! profile and with `--agent`).
//!
//! npm, pip, cargo and go keep what they download in the home directory, which a sandbox keeps
//! read-only, so they fail unless the host's caches are made writable; and a cache the command
//! may write is one it can poison for every later build on the host. Instead each project gets
//! caches of its own under cordon's cache directory, kept between runs and pointed to with each
//! tool's own variables, so that the tools work with only their registry's host allowed and
//! the host's caches are never written.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The variables pointing each tool at its cache, and the directory under the project's
/// caches that each names.
const TOOLS: &[(&str, &str)] = &[
    ("npm_config_cache", "npm"),
    ("YARN_CACHE_FOLDER", "yarn"),
    ("PIP_CACHE_DIR", "pip"),
    // cargo keeps its registry and git checkouts in its home; the user's own configuration
    // is linked in (below), never the registry tokens beside it.
    ("CARGO_HOME", "cargo"),
    ("GOPATH", "go"),
    ("GOMODCACHE", "go/pkg/mod"),
    ("GOCACHE", "go-build"),
];

/// One project's caches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caches {
    /// `$XDG_CACHE_HOME/cordon/projects/<name>-<hash>`: writable in the project's runs.
    pub root: PathBuf,
    /// Each tool's variable and the directory it names.
    pub env: Vec<(String, PathBuf)>,
    /// The user's cargo configuration (`$CARGO_HOME/config.toml` or `config`), linked into the
    /// private cargo home so that registries and build settings still apply.
    cargo_config: Option<PathBuf>,
}

/// `$XDG_CACHE_HOME/cordon/projects` (or `~/.cache/…`), where every project's caches are.
fn projects_dir() -> Option<PathBuf> {
    Some(crate::env_dir("XDG_CACHE_HOME", ".cache")?.join("cordon/projects"))
}

/// Whether `path` is a project's caches. Only sandboxed runs of that project use them, never
/// the host's tools, so what a run leaves there (git metadata in cargo's checkouts, a start-up
/// file) is not guarded after it; and walking a large cache on every run would cost time and
/// the git search's budget, which belongs to the project.
pub fn is_caches(path: &Path) -> bool {
    projects_dir().is_some_and(|p| path.starts_with(p))
}

impl Caches {
    /// The caches of the project `cwd` lies in: the nearest directory up from it, below the
    /// home directory, holding `.git` or `.cordon`, else `cwd` itself. `None` without a home
    /// directory.
    pub fn of(cwd: &Path) -> Option<Caches> {
        let projects = projects_dir()?;
        // Not the home directory or above: a home kept in git would make one project of all.
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let project = cwd
            .ancestors()
            .take_while(|d| home.as_deref() != Some(*d) && d.parent().is_some())
            .find(|d| d.join(".git").exists() || d.join(".cordon").is_dir())
            .unwrap_or(cwd);
        let hash = Sha256::digest(project.as_os_str().as_encoded_bytes());
        let hex: String = hash.iter().take(8).map(|b| format!("{b:02x}")).collect();
        let name: String = project
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "root".into())
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(40)
            .collect();
        let root = projects.join(format!("{name}-{hex}"));
        let cargo_home = crate::env_dir("CARGO_HOME", ".cargo");
        let cargo_config = cargo_home.and_then(|h| {
            ["config.toml", "config"]
                .iter()
                .map(|n| h.join(n))
                .find(|p| p.is_file())
        });
        Some(Caches {
            env: TOOLS
                .iter()
                .map(|(var, dir)| (var.to_string(), root.join(dir)))
                .collect(),
            root,
            cargo_config,
        })
    }

    /// Makes the directories, and links the user's cargo configuration in afresh: a run may
    /// have replaced the link, and what it left must not configure the next run's cargo.
    ///
    /// Everything below the project's directory was writable by its earlier runs, so any name
    /// there may have become a link (`ln -s ~/.ssh cargo`): the work is done from the directory
    /// opened once, one name at a time, never through a link ([`cordon_sandbox::beneath`]); a
    /// link or file where a directory belongs is replaced by the directory.
    pub fn make(&self) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.root)?;
        let root = cordon_sandbox::beneath::Root::open(&self.root)?;
        for (_, rel) in TOOLS {
            let mut at = PathBuf::new();
            for name in Path::new(rel).components() {
                at.push(name);
                root.ensure_dir(&at, 0o700)?;
            }
        }
        root.remove(Path::new("cargo/config"))?;
        match &self.cargo_config {
            Some(config) => root.replace_symlink(Path::new("cargo/config.toml"), config)?,
            None => {
                root.remove(Path::new("cargo/config.toml"))?;
            }
        }
        Ok(())
    }

    /// The variables as a run's environment has them.
    pub fn vars(&self) -> Vec<(String, String)> {
        self.env
            .iter()
            .map(|(k, v)| (k.clone(), v.display().to_string()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Caches at `root`, with `config` as the user's cargo configuration.
    fn caches_in(root: &Path, config: &Path) -> Caches {
        Caches {
            env: TOOLS
                .iter()
                .map(|(var, dir)| (var.to_string(), root.join(dir)))
                .collect(),
            root: root.to_path_buf(),
            cargo_config: Some(config.to_path_buf()),
        }
    }

    /// One project, one place, whichever of its directories the run starts in; another
    /// project, another place.
    #[test]
    fn a_project_has_one_place_for_its_caches() {
        let tmp = tempfile::tempdir().expect("tmp");
        let a = tmp.path().join("a");
        std::fs::create_dir_all(a.join(".git")).expect("mkdir");
        std::fs::create_dir_all(a.join("src/deep")).expect("mkdir");
        let b = tmp.path().join("b c");
        std::fs::create_dir_all(b.join(".cordon")).expect("mkdir");
        let top = Caches::of(&a).expect("home");
        assert_eq!(
            Caches::of(&a.join("src/deep")).expect("home").root,
            top.root
        );
        let other = Caches::of(&b).expect("home");
        assert_ne!(other.root, top.root);
        let name = other
            .root
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        assert!(name.starts_with("b_c-"), "{name}");
        assert!(
            top.env.iter().all(|(_, dir)| dir.starts_with(&top.root)),
            "{top:?}"
        );
    }

    /// A run may write its cargo home; the cargo configuration it leaves there (a
    /// `rustc-wrapper`, a registry of its own) must not configure the next run's cargo.
    #[test]
    fn each_run_starts_from_the_users_cargo_configuration() {
        let tmp = tempfile::tempdir().expect("tmp");
        let mine = tmp.path().join("config.toml");
        std::fs::write(&mine, "[build]\njobs = 2\n").expect("write");
        let root = tmp.path().join("caches");
        let mut caches = caches_in(&root, &mine);
        caches.make().expect("make");
        let link = root.join("cargo/config.toml");
        assert_eq!(std::fs::read_link(&link).expect("a link"), mine);
        // What a run planted is replaced by the user's again.
        std::fs::remove_file(&link).expect("rm");
        std::fs::write(&link, "[build]\nrustc-wrapper = \"/planted\"\n").expect("plant");
        std::fs::write(root.join("cargo/config"), "planted").expect("plant");
        caches.make().expect("make");
        assert_eq!(std::fs::read_link(&link).expect("a link"), mine);
        assert!(!root.join("cargo/config").exists());
        // A link planted where a directory belongs is replaced, never followed.
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir_all(&elsewhere).expect("mkdir");
        std::fs::write(elsewhere.join("config.toml"), "the user's own").expect("write");
        std::fs::remove_dir_all(root.join("cargo")).expect("rm");
        std::os::unix::fs::symlink(&elsewhere, root.join("cargo")).expect("plant a link");
        std::fs::remove_dir_all(root.join("go/pkg")).expect("rm");
        std::os::unix::fs::symlink(&elsewhere, root.join("go/pkg")).expect("plant a link");
        caches.make().expect("make");
        assert!(
            root.join("cargo")
                .symlink_metadata()
                .expect("cargo")
                .is_dir()
        );
        assert!(
            root.join("go/pkg/mod")
                .symlink_metadata()
                .expect("mod")
                .is_dir()
        );
        assert_eq!(
            std::fs::read_to_string(elsewhere.join("config.toml")).expect("read"),
            "the user's own",
            "nothing was done through the link"
        );
        assert_eq!(std::fs::read_dir(&elsewhere).expect("list").count(), 1);
        // Without a configuration of the user's, none at all.
        caches.cargo_config = None;
        std::fs::remove_file(&link).expect("rm");
        std::fs::write(&link, "planted").expect("plant");
        caches.make().expect("make");
        assert!(std::fs::symlink_metadata(&link).is_err());
        for (_, dir) in &caches.env {
            assert!(dir.is_dir(), "{}", dir.display());
        }
    }

    /// An `exec` session runs several commands of one project at once, each preparing the
    /// caches as it starts: none may fail for another.
    #[test]
    fn runs_starting_together_each_get_the_caches() {
        let tmp = tempfile::tempdir().expect("tmp");
        let mine = tmp.path().join("config.toml");
        std::fs::write(&mine, "[build]\njobs = 2\n").expect("write");
        let root = tmp.path().join("caches");
        let caches = caches_in(&root, &mine);
        std::thread::scope(|s| {
            let runs: Vec<_> = (0..4)
                .map(|_| s.spawn(|| (0..50).try_for_each(|_| caches.make())))
                .collect();
            for run in runs {
                run.join().expect("no panic").expect("make");
            }
        });
        assert_eq!(
            std::fs::read_link(root.join("cargo/config.toml")).expect("a link"),
            mine
        );
    }
}
