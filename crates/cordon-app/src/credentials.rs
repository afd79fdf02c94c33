//! Credential stores: files whose content signs, logs in or decrypts as the user. They are
//! hidden from every sandbox and refused to every tool call that names one, whatever the
//! policy says, because whatever a command prints goes to the model's provider: a key read
//! is a key sent, with or without a network.
//!
//! The user's own settings (`filesystem.expose_credentials`, by store name) may expose a store;
//! a project's may not unless trusted. `cordon explain` lists them.

use std::path::{Path, PathBuf};

use cordon_sandbox::pattern::{PathPattern, is_wild};

/// One kind of credential store.
#[derive(Debug)]
pub struct Store {
    /// What settings name it by.
    pub name: &'static str,
    pub what: &'static str,
    /// Home-relative paths and patterns (the `--deny-read` language) hidden.
    pub hidden: &'static [&'static str],
    /// Home-relative paths and patterns inside `hidden` that are shown again: what the tool
    /// needs that is not secret.
    pub shown: &'static [&'static str],
}

/// Every store cordon hides by default.
pub const STORES: &[Store] = &[
    Store {
        name: "ssh",
        what: "SSH private keys (public keys, config and known_hosts stay readable; ssh can sign through the agent socket with --keep-env SSH_AUTH_SOCK and --allow-unix-socket)",
        hidden: &["~/.ssh"],
        shown: &[
            "~/.ssh/config",
            "~/.ssh/known_hosts",
            "~/.ssh/known_hosts2",
            "~/.ssh/authorized_keys",
            "~/.ssh/*.pub",
        ],
    },
    Store {
        name: "aws",
        what: "AWS CLI credentials and SSO token caches",
        hidden: &["~/.aws/credentials", "~/.aws/sso/cache", "~/.aws/cli/cache"],
        shown: &[],
    },
    Store {
        name: "gcloud",
        what: "Google Cloud CLI credentials and tokens",
        hidden: &[
            "~/.config/gcloud/credentials.db",
            "~/.config/gcloud/access_tokens.db",
            "~/.config/gcloud/legacy_credentials",
            "~/.config/gcloud/application_default_credentials.json",
        ],
        shown: &[],
    },
    Store {
        name: "azure",
        what: "Azure CLI token caches",
        hidden: &[
            "~/.azure/accessTokens.json",
            "~/.azure/msal_token_cache.json",
            "~/.azure/msal_token_cache.bin",
            "~/.azure/service_principal_entries.json",
        ],
        shown: &[],
    },
    Store {
        name: "netrc",
        what: "logins in .netrc",
        hidden: &["~/.netrc", "~/_netrc"],
        shown: &[],
    },
    Store {
        name: "git",
        what: "git's stored credentials (credential-store)",
        hidden: &["~/.git-credentials", "~/.config/git/credentials"],
        shown: &[],
    },
    Store {
        name: "gh",
        what: "GitHub CLI and hub tokens",
        hidden: &["~/.config/gh/hosts.yml", "~/.config/hub"],
        shown: &[],
    },
    Store {
        name: "kube",
        what: "Kubernetes configs (cluster certificates and tokens)",
        hidden: &["~/.kube/config"],
        shown: &[],
    },
    Store {
        name: "docker",
        what: "Docker and Podman registry logins",
        hidden: &["~/.docker/config.json", "~/.config/containers/auth.json"],
        shown: &[],
    },
    Store {
        name: "npm",
        what: "npm and Yarn registry tokens",
        hidden: &["~/.npmrc", "~/.yarnrc.yml"],
        shown: &[],
    },
    Store {
        name: "pypi",
        what: "PyPI upload tokens",
        hidden: &["~/.pypirc"],
        shown: &[],
    },
    Store {
        name: "cargo",
        what: "cargo registry tokens",
        hidden: &["~/.cargo/credentials", "~/.cargo/credentials.toml"],
        shown: &[],
    },
    Store {
        name: "gem",
        what: "RubyGems tokens",
        hidden: &["~/.gem/credentials"],
        shown: &[],
    },
    Store {
        name: "gnupg",
        what: "GnuPG secret keys",
        hidden: &["~/.gnupg/private-keys-v1.d", "~/.gnupg/secring.gpg"],
        shown: &[],
    },
    Store {
        name: "pass",
        what: "password stores and keyrings",
        hidden: &[
            "~/.password-store",
            "~/.local/share/keyrings",
            "~/.pki/nssdb",
            "~/Library/Keychains",
        ],
        shown: &[],
    },
    Store {
        name: "vault",
        what: "HashiCorp Vault and Terraform tokens",
        hidden: &["~/.vault-token", "~/.terraform.d/credentials.tfrc.json"],
        shown: &[],
    },
    Store {
        name: "claude",
        what: "Claude Code's login",
        hidden: &["~/.claude/.credentials.json"],
        shown: &[],
    },
    Store {
        name: "gemini",
        what: "Gemini CLI's login and API key file",
        hidden: &["~/.gemini/oauth_creds.json", "~/.gemini/.env"],
        shown: &[],
    },
    Store {
        name: "codex",
        what: "Codex's login",
        hidden: &["~/.codex/auth.json"],
        shown: &[],
    },
];

/// The names settings may give, for messages.
pub fn names() -> String {
    STORES.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
}

/// Whether `name` is a store's.
pub fn is_known(name: &str) -> bool {
    STORES.iter().any(|s| s.name == name)
}

/// Every store, for `cordon explain`: its name, what it holds, its paths, and whether it is
/// hidden with `exposed` (names) shown.
pub fn summary(exposed: &[String]) -> Vec<serde_json::Value> {
    STORES
        .iter()
        .map(|s| {
            serde_json::json!({
                "name": s.name,
                "what": s.what,
                "paths": s.hidden,
                "readable_inside": s.shown,
                "hidden": !exposed.iter().any(|e| e == s.name),
            })
        })
        .collect()
}

/// The stores hidden with `exposed` (names) left out, their patterns anchored at `home`.
#[derive(Debug, Clone, Default)]
pub struct Hidden {
    stores: Vec<Anchored>,
}

#[derive(Debug, Clone)]
struct Anchored {
    name: &'static str,
    hidden: Vec<PathPattern>,
    shown: Vec<PathPattern>,
}

/// A path one of the stores hides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub store: &'static str,
    pub path: PathBuf,
}

impl Found {
    /// Why a call that names it is refused, and how to allow it.
    pub fn reason(&self) -> String {
        format!(
            "{} is a credential store ({}); cordon hides it from every command and tool, because what a command prints reaches the model. To let commands read it, add \"{}\" to filesystem.expose_credentials in your user settings (~/.config/cordon/cordon.toml)",
            self.path.display(),
            self.store,
            self.store
        )
    }
}

impl Hidden {
    /// Every store but those named in `exposed`, under `home` (none without a home).
    pub fn new(home: Option<&Path>, exposed: &[String]) -> Hidden {
        let Some(home) = home else {
            return Hidden::default();
        };
        // Matched against resolved paths, so the home is too (a home behind a link).
        let home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_path_buf());
        let anchor = |list: &[&str]| -> Vec<PathPattern> {
            list.iter()
                .filter_map(|p| {
                    let rest = p.strip_prefix("~/").unwrap_or(p);
                    // The list is ours and every entry is a valid pattern (a test says so).
                    PathPattern::new(&home, Path::new(rest)).ok()
                })
                .collect()
        };
        Hidden {
            stores: STORES
                .iter()
                .filter(|s| !exposed.iter().any(|e| e == s.name))
                .map(|s| Anchored {
                    name: s.name,
                    hidden: anchor(s.hidden),
                    shown: anchor(s.shown),
                })
                .collect(),
        }
    }

    /// Looks paths up for one decision: the directories its words share are resolved once.
    pub fn lookup(&self) -> Lookup<'_> {
        Lookup {
            hidden: self,
            resolved: Default::default(),
        }
    }

    /// The paths to hide in a sandbox and to show again inside them, those that exist now.
    pub fn paths(&self) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let existing = |list: &[PathPattern]| -> Vec<PathBuf> {
            list.iter().flat_map(expand_pattern).collect::<Vec<_>>()
        };
        let mut hidden = Vec::new();
        let mut shown = Vec::new();
        for s in &self.stores {
            hidden.extend(existing(&s.hidden));
            shown.extend(existing(&s.shown));
        }
        (hidden, shown)
    }
}

/// [`Hidden`]'s look-ups for one decision ([`Hidden::lookup`]). Every word of a command is a
/// path from the same working directory, which is resolved once here rather than once a word.
/// Never kept from one decision to the next: a link may change between them.
#[derive(Debug)]
pub struct Lookup<'a> {
    hidden: &'a Hidden,
    resolved: Resolved,
}

impl Lookup<'_> {
    /// The store that hides `path` (absolute; links in it are resolved as far as it exists).
    pub fn find(&self, path: &Path) -> Option<Found> {
        let real = self.resolved.existing(path);
        for p in [path, real.as_path()] {
            for s in &self.hidden.stores {
                if s.hidden.iter().any(|h| h.covers(p)) && !s.shown.iter().any(|h| h.covers(p)) {
                    return Some(Found {
                        store: s.name,
                        path: p.to_path_buf(),
                    });
                }
            }
        }
        None
    }

    /// A store that exists inside the directory `dir` (absolute), for a command that reads
    /// what a directory holds.
    pub fn find_below(&self, dir: &Path) -> Option<Found> {
        let real = self.resolved.existing(dir);
        self.hidden.stores.iter().find_map(|s| {
            s.hidden
                .iter()
                .map(PathPattern::base)
                .find(|b| b.starts_with(&real) && b.symlink_metadata().is_ok())
                .map(|b| Found {
                    store: s.name,
                    path: b.to_path_buf(),
                })
        })
    }

    /// Whether a pattern (a shell glob as a command wrote it, absolute) could name a path a
    /// store hides: its expansion now, as the shell would make it, each looked up.
    pub fn find_glob(&self, pattern: &Path) -> Option<Found> {
        let matches = expand(pattern);
        matches.iter().find_map(|p| self.find(p))
    }
}

/// Paths with their links resolved, as far as this decision has needed them.
#[derive(Debug, Default)]
struct Resolved(std::cell::RefCell<std::collections::HashMap<PathBuf, Option<PathBuf>>>);

/// `path` with links resolved (by `real`) for as much of it as exists, the rest joined on as
/// written.
fn resolve_existing(path: &Path, real: impl Fn(&Path) -> Option<PathBuf>) -> PathBuf {
    let mut rest = Vec::new();
    let mut head = path.to_path_buf();
    loop {
        if let Some(real) = real(&head) {
            return rest.iter().rev().fold(real, |acc: PathBuf, c| acc.join(c));
        }
        match (head.file_name().map(|n| n.to_os_string()), head.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                head = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

impl Resolved {
    /// `path` with links resolved for as much of it as exists, the rest joined on as written.
    fn existing(&self, path: &Path) -> PathBuf {
        resolve_existing(path, |p| self.real(p))
    }

    /// What `std::fs::canonicalize` makes of `path`, `None` where it fails; without asking the
    /// kernel about every directory on the way each time.
    fn real(&self, path: &Path) -> Option<PathBuf> {
        if let Some(known) = self.0.borrow().get(path) {
            return known.clone();
        }
        let plain_name = matches!(
            path.components().next_back(),
            Some(std::path::Component::Normal(_))
        );
        let real = match (path.symlink_metadata(), path.parent()) {
            // Where `path` cannot be looked at, neither can it be resolved.
            (Err(_), _) => None,
            // A name that is no link is itself in its resolved directory.
            (Ok(m), Some(parent))
                if plain_name && !m.file_type().is_symlink() && !parent.as_os_str().is_empty() =>
            {
                self.real(parent)
                    .zip(path.file_name())
                    .map(|(dir, name)| dir.join(name))
            }
            _ => std::fs::canonicalize(path).ok(),
        };
        self.0.borrow_mut().insert(path.to_path_buf(), real.clone());
        real
    }
}

/// The most paths a glob is expanded to for a look-up, and the most directory entries read.
const GLOB_MATCHES: usize = 10_000;
const GLOB_VISITS: usize = 100_000;

/// What an absolute shell glob matches now.
fn expand(pattern: &Path) -> Vec<PathBuf> {
    let rest = pattern.strip_prefix("/").unwrap_or(pattern);
    match PathPattern::new(Path::new("/"), rest) {
        Ok(p) if is_wild(rest.as_os_str()) => expand_pattern(&p),
        _ => vec![pattern.to_path_buf()],
    }
}

/// The paths that exist now and match `pattern` (its base alone, if it has no wildcards).
fn expand_pattern(pattern: &PathPattern) -> Vec<PathBuf> {
    let base = pattern.base();
    if pattern.parts().is_empty() {
        return if base.symlink_metadata().is_ok() {
            vec![base.to_path_buf()]
        } else {
            Vec::new()
        };
    }
    let mut out = Vec::new();
    let mut visits = 0;
    let mut stack = vec![(base.to_path_buf(), pattern.start())];
    while let Some((dir, states)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            visits += 1;
            if visits > GLOB_VISITS || out.len() >= GLOB_MATCHES {
                return out;
            }
            let next = pattern.step(&states, &e.file_name());
            if next.is_empty() {
                continue;
            }
            let path = e.path();
            if next.contains(&pattern.done()) {
                out.push(path.clone());
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push((path, next));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home() -> tempfile::TempDir {
        let h = tempfile::tempdir().expect("temp dir");
        for f in [
            ".ssh/id_rsa",
            ".ssh/id_rsa.pub",
            ".ssh/work_key",
            ".ssh/known_hosts",
            ".aws/credentials",
            ".aws/config",
            ".docker/config.json",
            "notes.txt",
        ] {
            let p = h.path().join(f);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, "x").expect("write");
        }
        h
    }

    #[test]
    fn every_entry_is_a_valid_pattern_under_home() {
        for s in STORES {
            for p in s.hidden.iter().chain(s.shown) {
                let rest = p
                    .strip_prefix("~/")
                    .unwrap_or_else(|| panic!("{p} is not under ~/"));
                PathPattern::new(Path::new("/h"), Path::new(rest))
                    .unwrap_or_else(|e| panic!("{}: {p}: {e}", s.name));
            }
        }
    }

    #[test]
    fn keys_are_found_and_what_is_not_secret_is_not() {
        let h = home();
        let hidden = Hidden::new(Some(h.path()), &[]);
        let real = std::fs::canonicalize(h.path()).expect("real");
        for (f, store) in [
            (".ssh/id_rsa", Some("ssh")),
            (".ssh/work_key", Some("ssh")),
            (".ssh/not_made_yet", Some("ssh")),
            (".ssh", Some("ssh")),
            (".ssh/id_rsa.pub", None),
            (".ssh/known_hosts", None),
            (".aws/credentials", Some("aws")),
            (".aws/config", None),
            (".docker/config.json", Some("docker")),
            ("notes.txt", None),
        ] {
            let found = hidden.lookup().find(&real.join(f)).map(|f| f.store);
            assert_eq!(found, store, "{f}");
        }
    }

    #[test]
    fn a_link_to_a_key_is_found() {
        let h = home();
        let hidden = Hidden::new(Some(h.path()), &[]);
        let link = h.path().join("innocent");
        std::os::unix::fs::symlink(h.path().join(".ssh/id_rsa"), &link).expect("link");
        assert_eq!(hidden.lookup().find(&link).map(|f| f.store), Some("ssh"));
    }

    #[test]
    fn globs_are_looked_up_by_what_they_match() {
        let h = home();
        let hidden = Hidden::new(Some(h.path()), &[]);
        let glob = |g: &str| {
            hidden
                .lookup()
                .find_glob(&h.path().join(g))
                .map(|f| f.store)
        };
        assert_eq!(glob(".ss?/id_*"), Some("ssh"));
        assert_eq!(glob(".*/credentials"), Some("aws"));
        assert_eq!(glob("*.txt"), None);
        assert_eq!(glob(".ssh/*.pub"), None);
    }

    #[test]
    fn an_exposed_store_is_not_hidden() {
        let h = home();
        let hidden = Hidden::new(Some(h.path()), &["aws".to_string()]);
        assert!(
            hidden
                .lookup()
                .find(&h.path().join(".aws/credentials"))
                .is_none()
        );
        assert!(
            hidden
                .lookup()
                .find(&h.path().join(".ssh/id_rsa"))
                .is_some()
        );
        let (paths, _) = hidden.paths();
        assert!(
            !paths.iter().any(|p| p.ends_with(".aws/credentials")),
            "{paths:?}"
        );
    }

    #[test]
    fn the_sandbox_hides_what_exists_and_shows_what_is_not_secret() {
        let h = home();
        let real = std::fs::canonicalize(h.path()).expect("real");
        let (hidden, shown) = Hidden::new(Some(h.path()), &[]).paths();
        assert!(hidden.contains(&real.join(".ssh")), "{hidden:?}");
        assert!(
            hidden.contains(&real.join(".aws/credentials")),
            "{hidden:?}"
        );
        assert!(!hidden.iter().any(|p| p.ends_with(".netrc")), "{hidden:?}");
        assert!(shown.contains(&real.join(".ssh/id_rsa.pub")), "{shown:?}");
        assert!(shown.contains(&real.join(".ssh/known_hosts")), "{shown:?}");
        assert!(!shown.contains(&real.join(".ssh/id_rsa")), "{shown:?}");
    }

    /// What one decision's look-ups make of a path is what resolving it afresh makes of it:
    /// links on the way, a link at the end, `..` after a link, a tail not made yet.
    #[test]
    fn resolving_once_a_decision_resolves_as_canonicalize_does() {
        let h = home();
        let root = h.path();
        std::fs::create_dir_all(root.join("real/deep")).expect("mkdir");
        std::fs::write(root.join("real/deep/file"), "x").expect("write");
        let link = |to: &str, at: &str| {
            std::os::unix::fs::symlink(root.join(to), root.join(at)).expect("link")
        };
        link("real", "dirlink");
        link("real/deep/file", "filelink");
        link(".ssh", "keys");
        link("nowhere", "dangling");
        // The answer before: canonicalize the longest part that resolves, join the rest on.
        let afresh = |path: &Path| resolve_existing(path, |p| std::fs::canonicalize(p).ok());
        let hidden = Hidden::new(Some(root), &[]);
        let lookup = hidden.lookup();
        for rel in [
            "real/deep/file",
            "dirlink/deep/file",
            "dirlink/deep/../deep/file",
            "dirlink/../.ssh/id_rsa",
            "filelink",
            "keys/id_rsa",
            "keys/not_made_yet",
            "dangling",
            "dangling/below",
            "real/./deep",
            "nothing/here",
            ".",
        ] {
            // Twice: the second answer comes from what the first resolved.
            for _ in 0..2 {
                let path = root.join(rel);
                assert_eq!(lookup.resolved.existing(&path), afresh(&path), "{rel}");
            }
        }
        assert_eq!(
            lookup
                .find(&root.join("dirlink/../keys/id_rsa"))
                .map(|f| f.store),
            Some("ssh")
        );
    }
}
