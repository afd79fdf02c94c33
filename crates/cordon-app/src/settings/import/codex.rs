//! Codex's `config.toml`: the older sandbox settings (`sandbox_mode`,
//! `[sandbox_workspace_write]`) and the permission profiles that replace them
//! (`default_permissions` naming a built-in or a `[permissions.<name>]` table, which may
//! `extends` another).
//!
//! A profile says what commands may read, write or never touch, path by path, and which hosts
//! they reach. cordon's sandbox starts from reading everything but the credential stores and
//! writing the working directory, so a profile carries over as the places it opens beyond
//! that (`allow_write`, domains) and the places it closes within it (`deny_write`,
//! `deny_read`). What a profile says that cordon cannot say (reading only a minimal set of
//! system paths, a writable `/`) is named, never dropped silently.

use std::collections::BTreeMap;

use anyhow::{Context, bail};
use toml::{Table, Value};

use super::{Importer, push};

/// Top-level keys that only a Codex `config.toml` has; a `cordon.toml` has none of them.
const CODEX_KEYS: &[&str] = &[
    "sandbox_mode",
    "sandbox_workspace_write",
    "default_permissions",
    "permissions",
    "approval_policy",
    "model",
    "model_provider",
    "model_providers",
    "model_reasoning_effort",
    "mcp_servers",
    "profile",
    "profiles",
    "shell_environment_policy",
    "features",
];

/// Whether a TOML file is Codex's configuration rather than cordon's.
pub(super) fn is_codex(table: &Table) -> bool {
    table.keys().any(|k| CODEX_KEYS.contains(&k.as_str()))
}

/// The sandbox settings of a config layer: the top level, or the `[profiles.<name>]` that
/// `profile` selects, whose keys replace the top level's as they do in Codex.
const SANDBOX_KEYS: &[&str] = &[
    "sandbox_mode",
    "sandbox_workspace_write",
    "default_permissions",
];

/// How a path may be used, as a profile writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    Write,
    /// `none`, or its other spelling `deny`.
    None,
}

impl Access {
    fn parse(v: &Value, key: &str) -> anyhow::Result<Self> {
        match v.as_str() {
            Some("read") => Ok(Access::Read),
            Some("write") => Ok(Access::Write),
            Some("none" | "deny") => Ok(Access::None),
            _ => bail!("{key} = {v}: an access is \"read\", \"write\" or \"none\""),
        }
    }
}

/// One `filesystem` entry: an access for the path itself, or for paths below a special one
/// (`":workspace_roots" = { "." = "write", "docs" = "read" }`).
#[derive(Debug, Clone)]
enum FsEntry {
    Access(Access),
    Scoped(BTreeMap<String, Access>),
}

/// A profile with what it extends folded in: a child's entry replaces its parent's for the
/// same path, a child's scoped entry for the same sub-path.
#[derive(Debug, Default)]
struct Profile {
    /// The built-in the chain ends at, if any.
    builtin: Option<&'static str>,
    workspace_roots: BTreeMap<String, bool>,
    filesystem: BTreeMap<String, FsEntry>,
    network: Table,
    /// What the chain says that is not carried over.
    notes: Vec<String>,
}

/// Codex's built-in profiles, as the filesystem entries they stand for.
fn builtin(name: &str) -> Option<Profile> {
    let (name, entries): (&'static str, &[(&str, Access)]) = match name {
        ":read-only" => (":read-only", &[(":root", Access::Read)]),
        ":workspace" => (
            ":workspace",
            &[
                (":root", Access::Read),
                (":tmpdir", Access::Write),
                (":slash_tmp", Access::Write),
            ],
        ),
        ":danger-full-access" => (":danger-full-access", &[(":root", Access::Write)]),
        _ => return None,
    };
    let mut p = Profile {
        builtin: Some(name),
        ..Profile::default()
    };
    for (path, access) in entries {
        p.filesystem
            .insert(path.to_string(), FsEntry::Access(*access));
    }
    if name == ":workspace" {
        p.filesystem.insert(
            ":workspace_roots".into(),
            FsEntry::Scoped(BTreeMap::from([(".".into(), Access::Write)])),
        );
    }
    Some(p)
}

impl Importer {
    pub(super) fn codex(&mut self, top: &Table) -> anyhow::Result<()> {
        let file = self.file.display().to_string();
        let layer = selected_layer(top).with_context(|| file.clone())?;
        let legacy =
            layer.contains_key("sandbox_mode") || layer.contains_key("sandbox_workspace_write");
        match layer.get("default_permissions") {
            // Codex itself takes the older settings over a profile wherever both are written.
            Some(_) if legacy => self.skip(
                "default_permissions: ignored, as Codex ignores it, because sandbox_mode or [sandbox_workspace_write] is also set",
            ),
            Some(v) => {
                let name = v.as_str().with_context(|| {
                    format!("{file}: default_permissions = {v}: a profile's name, as a string")
                })?;
                let permissions = match top.get("permissions") {
                    None => Table::new(),
                    Some(Value::Table(t)) => t.clone(),
                    Some(v) => bail!("{file}: permissions = {v}: a table of named profiles"),
                };
                let profile = resolve(name, &permissions, &mut Vec::new())
                    .with_context(|| format!("{file}: default_permissions = {name:?}"))?;
                self.codex_profile(name, &profile)
                    .with_context(|| format!("{file}: [permissions.{name}]"))?;
            }
            None => {}
        }
        if legacy {
            self.codex_legacy(&layer);
        }
        Ok(())
    }

    /// `sandbox_mode` and `[sandbox_workspace_write]`, the settings before profiles.
    fn codex_legacy(&mut self, table: &Table) {
        match table.get("sandbox_mode").and_then(|v| v.as_str()) {
            Some("workspace-write") | None => {}
            Some("read-only") => {
                push(&mut self.fs().deny_write, ".".into());
                self.skip("sandbox_mode = \"read-only\": carried as filesystem.deny_write = [\".\"] (the working directory read-only); the run's private /tmp stays writable");
            }
            Some("danger-full-access") => self.full_access("sandbox_mode = \"danger-full-access\""),
            Some(other) => self.skip(format!(
                "sandbox_mode = {other:?}: not a Codex mode cordon knows"
            )),
        }
        let Some(ww) = table
            .get("sandbox_workspace_write")
            .and_then(|v| v.as_table())
        else {
            return;
        };
        for root in ww
            .get("writable_roots")
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
        {
            push(&mut self.fs().allow_write, root.to_string());
        }
        if ww.get("network_access").and_then(|v| v.as_bool()) == Some(true) {
            self.skip("sandbox_workspace_write.network_access = true: cordon reaches only listed hosts; name them in network.allow_domains (or run with --network host)");
        }
        for key in ["exclude_tmpdir_env_var", "exclude_slash_tmp"] {
            if ww.get(key).and_then(|v| v.as_bool()) == Some(true) {
                self.skip(format!(
                    "sandbox_workspace_write.{key}: cordon gives each run a private /tmp and TMPDIR"
                ));
            }
        }
    }

    fn full_access(&mut self, what: &str) {
        self.sandbox().enabled = Some(false);
        self.skip(format!("{what}: carried as sandbox.enabled = false, so exec, shell and mcp run commands outside the sandbox; `cordon run` itself still sandboxes"));
    }

    fn codex_profile(&mut self, name: &str, p: &Profile) -> anyhow::Result<()> {
        if p.builtin == Some(":danger-full-access") && p.filesystem.len() == 1 {
            self.full_access(&format!("default_permissions = {name:?}"));
            return Ok(());
        }
        for note in &p.notes {
            self.skip(note.clone());
        }
        let fs = &p.filesystem;
        let reads_all = matches!(
            fs.get(":root"),
            Some(FsEntry::Access(Access::Read | Access::Write))
        );
        if !reads_all {
            self.skip(format!(
                "[permissions.{name}]: reads only the paths it names{}; cordon's sandbox reads the whole file system except the credential stores and filesystem.deny_read, so add what must stay unread there",
                if fs.contains_key(":minimal") { " and a minimal set of system paths" } else { "" }
            ));
        }
        let extra_roots: Vec<String> = p
            .workspace_roots
            .iter()
            .filter(|(_, on)| **on)
            .map(|(r, _)| r.trim_end_matches('/').to_string())
            .collect();
        // Paths written writable, so that a `read` below one becomes read-only in cordon.
        let writable: Vec<String> = fs
            .iter()
            .filter(|(k, e)| !k.starts_with(':') && matches!(e, FsEntry::Access(Access::Write)))
            .map(|(k, _)| subtree(k).to_string())
            .collect();
        for (key, entry) in fs {
            let at = format!("filesystem.{key:?}");
            match (key.as_str(), entry) {
                (":root", FsEntry::Access(Access::Read)) | (":minimal", FsEntry::Access(Access::Read)) => {}
                (":root", FsEntry::Access(Access::Write)) => self.skip(format!(
                    "{at} = \"write\": cordon never makes the whole file system writable; name the places in filesystem.allow_write"
                )),
                (":root" | ":minimal", FsEntry::Access(Access::None)) => {}
                (":tmpdir" | ":slash_tmp", FsEntry::Access(Access::Write)) => {}
                (":tmpdir" | ":slash_tmp", FsEntry::Access(_)) => self.skip(format!(
                    "{at}: cordon gives each run a private, writable /tmp and TMPDIR, gone when it ends"
                )),
                (":workspace_roots" | ":project_roots" | ":cwd", entry) => {
                    let scoped = match entry {
                        FsEntry::Access(a) => BTreeMap::from([(".".to_string(), *a)]),
                        FsEntry::Scoped(s) => s.clone(),
                    };
                    self.codex_workspace(&at, &scoped, &extra_roots);
                }
                (special, FsEntry::Scoped(_)) if special.starts_with(':') => bail!(
                    "{at}: only \":workspace_roots\" takes a table of sub-paths; {special} takes \"read\", \"write\" or \"none\""
                ),
                (special, _) if special.starts_with(':') => self.skip(format!(
                    "{at}: not a special path cordon knows (it knows :root, :minimal, :tmpdir, :slash_tmp, :workspace_roots)"
                )),
                (path, FsEntry::Access(Access::Write)) => {
                    if path.contains(['*', '?', '[']) && !path.ends_with("/**") {
                        bail!("{at} = \"write\": a pattern may only deny; write an exact path or one ending in /**");
                    }
                    push(&mut self.fs().allow_write, subtree(path).to_string());
                }
                (path, FsEntry::Access(Access::Read)) => {
                    // Reading is the sandbox's default; only a path below a writable one needs
                    // saying, as read-only.
                    if writable.iter().any(|w| w != subtree(path) && below(subtree(path), w)) {
                        push(&mut self.fs().deny_write, subtree(path).to_string());
                    }
                }
                (path, FsEntry::Access(Access::None)) => {
                    push(&mut self.fs().deny_read, path.to_string());
                }
                (path, FsEntry::Scoped(_)) => bail!(
                    "{at}: only a special path such as \":workspace_roots\" takes a table of sub-paths; {path} takes \"read\", \"write\" or \"none\""
                ),
            }
        }
        self.codex_network(name, &p.network)
    }

    /// The rules for every workspace root: the working directory (cordon's workspace), and
    /// the profile's `workspace_roots`, each writable where "." is.
    fn codex_workspace(
        &mut self,
        at: &str,
        scoped: &BTreeMap<String, Access>,
        extra_roots: &[String],
    ) {
        let top = scoped.get(".").copied();
        match top {
            Some(Access::Write) => {
                for root in extra_roots {
                    push(&mut self.fs().allow_write, root.clone());
                }
            }
            Some(Access::Read) | None => {
                push(&mut self.fs().deny_write, ".".into());
                for root in extra_roots {
                    push(&mut self.fs().deny_write, root.clone());
                }
            }
            Some(Access::None) => {
                self.skip(format!("{at}.\".\" = \"none\": cordon's sandbox always reads the working directory; it is carried as read-only"));
                push(&mut self.fs().deny_write, ".".into());
            }
        }
        for (sub, access) in scoped.iter().filter(|(s, _)| s.as_str() != ".") {
            let sub = sub.trim_start_matches("./");
            let in_roots = std::iter::once(sub.to_string())
                .chain(extra_roots.iter().map(|r| format!("{r}/{sub}")))
                .collect::<Vec<_>>();
            for path in in_roots {
                match access {
                    Access::None => push(&mut self.fs().deny_read, path),
                    Access::Read if top == Some(Access::Write) => {
                        push(&mut self.fs().deny_write, subtree(&path).to_string())
                    }
                    Access::Write if top != Some(Access::Write) => {
                        push(&mut self.fs().allow_write, subtree(&path).to_string())
                    }
                    _ => {}
                }
            }
        }
    }

    fn codex_network(&mut self, name: &str, net: &Table) -> anyhow::Result<()> {
        let enabled = match net.get("enabled") {
            None => false,
            Some(v) => v
                .as_bool()
                .with_context(|| format!("network.enabled = {v}: true or false"))?,
        };
        let domains = match net.get("domains") {
            None => Table::new(),
            Some(Value::Table(t)) => t.clone(),
            Some(v) => bail!("network.domains = {v}: a table of domain = \"allow\" or \"deny\""),
        };
        for (domain, v) in &domains {
            let allow = match v.as_str() {
                Some("allow") => true,
                Some("deny") => false,
                _ => bail!("network.domains.{domain:?} = {v}: \"allow\" or \"deny\""),
            };
            if !allow {
                push(&mut self.net().deny_domains, domain.clone());
            } else if enabled {
                push(&mut self.net().allow_domains, domain.clone());
            }
        }
        let allowed = domains.values().any(|v| v.as_str() == Some("allow"));
        if enabled && !allowed {
            self.skip(format!("[permissions.{name}.network] enabled = true with no domain allowed: cordon reaches only listed hosts; name them in network.allow_domains (or run with --network host)"));
        }
        if !enabled && allowed {
            self.skip(format!("[permissions.{name}.network.domains]: allowed domains while network.enabled is not true; no network, as in Codex"));
        }
        if let Some(sockets) = net.get("unix_sockets") {
            let sockets = sockets.as_table().with_context(|| {
                format!("network.unix_sockets = {sockets}: a table of path = \"allow\" or \"none\"")
            })?;
            for (path, v) in sockets {
                match v.as_str() {
                    Some("allow") => push(&mut self.net().allow_unix_sockets, path.clone()),
                    Some("none") => {}
                    _ => bail!("network.unix_sockets.{path:?} = {v}: \"allow\" or \"none\""),
                }
            }
        }
        if let Some(v) = net.get("allow_local_binding") {
            self.net().allow_local_binding =
                Some(v.as_bool().with_context(|| {
                    format!("network.allow_local_binding = {v}: true or false")
                })?);
        }
        for key in net.keys() {
            if !["enabled", "domains", "unix_sockets", "allow_local_binding"]
                .contains(&key.as_str())
            {
                self.skip(format!("[permissions.{name}.network] {key}: cordon runs its own proxy and allows only the hosts and sockets listed"));
            }
        }
        Ok(())
    }
}

/// The top level with the selected `[profiles.<name>]`'s sandbox keys laid over it.
fn selected_layer(top: &Table) -> anyhow::Result<Table> {
    let mut layer = top.clone();
    let Some(v) = top.get("profile") else {
        return Ok(layer);
    };
    let name = v
        .as_str()
        .with_context(|| format!("profile = {v}: the name of a [profiles.<name>] table"))?;
    let chosen = top
        .get("profiles")
        .and_then(|p| p.get(name))
        .and_then(Value::as_table)
        .with_context(|| format!("profile = {name:?}: no [profiles.{name}] in this file"))?;
    // Codex takes a profile's sandbox settings whole, of either kind, over the top level's.
    if SANDBOX_KEYS.iter().any(|k| chosen.contains_key(*k)) {
        for key in SANDBOX_KEYS {
            layer.remove(*key);
            if let Some(v) = chosen.get(*key) {
                layer.insert(key.to_string(), v.clone());
            }
        }
    }
    Ok(layer)
}

/// The profile `name` with the chain it extends folded in.
fn resolve(name: &str, permissions: &Table, seen: &mut Vec<String>) -> anyhow::Result<Profile> {
    if let Some(p) = builtin(name) {
        return Ok(p);
    }
    if seen.iter().any(|s| s == name) {
        bail!(
            "the profiles extend each other in a circle: {} -> {name}",
            seen.join(" -> ")
        );
    }
    seen.push(name.to_string());
    let table = match permissions.get(name) {
        Some(Value::Table(t)) => t,
        Some(v) => bail!("[permissions.{name}] = {v}: a profile is a table"),
        None if name.starts_with(':') => bail!(
            "{name:?} is not one of Codex's built-in profiles (:read-only, :workspace, :danger-full-access)"
        ),
        None => bail!("no [permissions.{name}] in this file"),
    };
    let mut p = match table.get("extends") {
        None => Profile::default(),
        Some(Value::String(parent)) => resolve(parent, permissions, seen)
            .with_context(|| format!("[permissions.{name}] extends = {parent:?}"))?,
        Some(v) => bail!("[permissions.{name}] extends = {v}: a profile's name, as a string"),
    };
    for (key, v) in table {
        match key.as_str() {
            "extends" => {}
            "workspace_roots" => {
                let roots = v.as_table().with_context(|| {
                    format!("[permissions.{name}] workspace_roots = {v}: a table of path = true or false")
                })?;
                for (root, on) in roots {
                    let on = on.as_bool().with_context(|| {
                        format!("[permissions.{name}.workspace_roots] {root:?} = {on}: true or false")
                    })?;
                    p.workspace_roots.insert(root.clone(), on);
                }
            }
            "filesystem" => {
                let fs = v.as_table().with_context(|| {
                    format!("[permissions.{name}] filesystem = {v}: a table of path = access")
                })?;
                for (path, e) in fs {
                    if path == "glob_scan_max_depth" {
                        continue;
                    }
                    let at = format!("[permissions.{name}.filesystem] {path:?}");
                    let entry = match e {
                        Value::Table(subs) => {
                            let mut scoped = match p.filesystem.remove(path) {
                                Some(FsEntry::Scoped(s)) => s,
                                Some(FsEntry::Access(a)) => BTreeMap::from([(".".to_string(), a)]),
                                None => BTreeMap::new(),
                            };
                            for (sub, a) in subs {
                                scoped.insert(sub.clone(), Access::parse(a, &format!("{at}.{sub:?}"))?);
                            }
                            FsEntry::Scoped(scoped)
                        }
                        a => FsEntry::Access(Access::parse(a, &at)?),
                    };
                    if !path.starts_with([':', '/', '~']) {
                        bail!("{at}: a path is absolute, starts with ~/ or is a special path such as \":workspace_roots\"");
                    }
                    p.filesystem.insert(path.clone(), entry);
                }
            }
            "network" => {
                let net = v.as_table().with_context(|| {
                    format!("[permissions.{name}] network = {v}: a table")
                })?;
                for (k, v) in net {
                    match (p.network.get_mut(k), v) {
                        (Some(Value::Table(old)), Value::Table(new)) => {
                            old.extend(new.clone());
                        }
                        _ => {
                            p.network.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
            other => p.notes.push(format!(
                "[permissions.{name}] {other}: not a profile key cordon knows (extends, workspace_roots, filesystem, network)"
            )),
        }
    }
    Ok(p)
}

/// A path with a trailing `/**` (Codex's "the whole subtree") taken off.
fn subtree(path: &str) -> &str {
    path.strip_suffix("/**")
        .unwrap_or(path)
        .trim_end_matches('/')
}

/// Whether `path` lies in `dir`, by components.
fn below(path: &str, dir: &str) -> bool {
    std::path::Path::new(path).starts_with(dir)
}
