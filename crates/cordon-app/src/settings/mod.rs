//! cordon's own settings: `cordon.toml` in layers, merged key by key, every value remembering
//! where it came from.
//!
//! The layers, each overriding the one before: managed (`/etc/cordon/cordon.toml`, the
//! organisation's), user (`~/.config/cordon/cordon.toml`), project (`.cordon/cordon.toml` in
//! the working directory or the nearest parent that has one), then the command line.
//!
//! - A deny list (`deny_write`, `deny_read`, `deny_domains`, `env.deny`) adds up over every layer:
//!   anyone may forbid more.
//! - Anything else, allow lists included, is replaced by the last layer that sets it, so the
//!   layer that speaks last says exactly what is allowed.
//! - A project's file comes with the repository, and whoever wrote it is not necessarily
//!   trusted: unless the project is trusted (`--trust-project`) it may only tighten. What it
//!   would widen is left out, and said so.
//! - Managed settings may lock values (`[lock]`); what another layer says against a lock is
//!   left out, and said so.

pub mod file;
pub mod import;

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Serialize;

pub use file::{IgnoreRule, SettingsFile};

/// `512M`, `4G`, `1048576`: a size in bytes with an optional K, M or G (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => s.split_at(i),
        None => (s, ""),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{s}` is not a size; use e.g. 512M or 4G"))?;
    let mult: u64 = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        _ => return Err(format!("`{s}`: unknown unit `{unit}`; use K, M or G")),
    };
    n.checked_mul(mult)
        .filter(|&b| b > 0)
        .ok_or_else(|| format!("`{s}` is out of range"))
}

/// Where a value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    Managed,
    User,
    Project,
    /// A profile named with `--profile`.
    Profile,
    /// A file named with `--settings`.
    Given,
    Flags,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Source {
    pub layer: Layer,
    /// The file, for every layer but the command line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let layer = match self.layer {
            Layer::Managed => "managed",
            Layer::User => "user",
            Layer::Project => "project",
            Layer::Profile => "profile",
            Layer::Given => "--settings",
            Layer::Flags => "command line",
        };
        match &self.file {
            Some(file) => write!(f, "{layer} {}", file.display()),
            None => f.write_str(layer),
        }
    }
}

/// A value and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sourced<T> {
    pub value: T,
    pub from: Source,
}

/// A settled value without where it came from.
pub fn value<T>(v: Option<Sourced<T>>) -> Option<T> {
    v.map(|v| v.value)
}

/// Settled list entries without where each came from.
pub fn all<T>(v: Vec<Sourced<T>>) -> Vec<T> {
    v.into_iter().map(|v| v.value).collect()
}

/// A list given on the command line, as a layer's value: an empty one says nothing.
pub fn some<T: Clone>(list: &[T]) -> Option<Vec<T>> {
    (!list.is_empty()).then(|| list.to_vec())
}

/// The settings of every layer, merged.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Settings {
    pub enabled: Option<Sourced<bool>>,
    pub fail_if_unavailable: Option<Sourced<bool>>,
    pub enabled_platforms: Option<Sourced<Vec<String>>>,
    pub excluded_commands: Option<Sourced<Vec<String>>>,
    pub auto_allow_if_sandboxed: Option<Sourced<bool>>,
    pub allow_unsandboxed_commands: Option<Sourced<bool>>,
    pub backend: Option<Sourced<String>>,
    pub container_image: Option<Sourced<String>>,
    pub container_profile: Option<Sourced<String>>,
    pub allow_write: Option<Sourced<Vec<PathBuf>>>,
    pub deny_write: Vec<Sourced<PathBuf>>,
    pub deny_read: Vec<Sourced<PathBuf>>,
    pub allow_read: Option<Sourced<Vec<PathBuf>>>,
    pub expose_credentials: Option<Sourced<Vec<String>>>,
    pub allow_domains: Option<Sourced<Vec<String>>>,
    pub deny_domains: Vec<Sourced<String>>,
    pub allow_private_ips: Option<Sourced<bool>>,
    pub allow_local_binding: Option<Sourced<bool>>,
    pub private_caches: Option<Sourced<bool>>,
    pub allow_unix_sockets: Option<Sourced<Vec<PathBuf>>>,
    pub upstream_proxy: Option<Sourced<String>>,
    pub keep_env: Option<Sourced<Vec<String>>>,
    pub deny_env: Vec<Sourced<String>>,
    pub max_processes: Option<Sourced<u64>>,
    pub memory: Option<Sourced<String>>,
    pub cpu_time: Option<Sourced<u64>>,
    pub cpus: Option<Sourced<f64>>,
    pub timeout: Option<Sourced<f64>>,
    pub max_commands: Option<Sourced<u64>>,
    pub max_session_processes: Option<Sourced<u64>>,
    pub ignore_violations: Vec<Sourced<IgnoreRule>>,
    pub allowed_tools: Option<Sourced<Vec<String>>>,
    pub excluded_tools: Vec<Sourced<String>>,
    pub locks: Locks,
    /// What was left out, and why: a lock, or an untrusted project widening something.
    pub left_out: Vec<String>,
    /// The files read, in order.
    pub files: Vec<Source>,
}

/// What managed settings locked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Locks {
    pub only_managed_domains: bool,
    pub only_managed_read_paths: bool,
    pub sandbox_required: bool,
    pub no_unsandboxed_commands: bool,
}

/// Where each layer's file is looked for.
#[derive(Debug, Clone)]
pub struct Places {
    pub managed: PathBuf,
    pub user: Option<PathBuf>,
    pub project: Option<PathBuf>,
    /// `--profile NAME`: one of [`PROFILES`].
    pub profile: Option<String>,
    /// `--settings FILE`: a cordon.toml or another tool's settings, read as one.
    pub given: Option<PathBuf>,
}

/// The profiles shipped with cordon: name, and the settings it applies.
pub const PROFILES: &[(&str, &str)] = &[
    ("read-only", include_str!("profiles/read-only.toml")),
    (
        "workspace-write",
        include_str!("profiles/workspace-write.toml"),
    ),
    ("offline", include_str!("profiles/offline.toml")),
    ("dev", include_str!("profiles/dev.toml")),
    ("contained", include_str!("profiles/contained.toml")),
];

/// `--profile NAME`, checked.
pub fn parse_profile(name: &str) -> Result<String, String> {
    match PROFILES.iter().find(|(n, _)| *n == name) {
        Some((n, _)) => Ok(n.to_string()),
        None => {
            let names: Vec<&str> = PROFILES.iter().map(|(n, _)| *n).collect();
            Err(format!(
                "no profile `{name}`; cordon has {}",
                names.join(", ")
            ))
        }
    }
}

impl Places {
    /// The usual places, seen from `cwd`. `CORDON_MANAGED_SETTINGS` points the managed layer
    /// elsewhere (packagers, tests).
    pub fn from(cwd: &Path) -> Self {
        let managed = std::env::var_os("CORDON_MANAGED_SETTINGS")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/etc/cordon/cordon.toml"));
        let user = crate::user_settings_dir().map(|d| d.join("cordon.toml"));
        let home = std::env::var_os("HOME").map(PathBuf::from);
        // The nearest `.cordon/cordon.toml` above the working directory, short of the home
        // directory, whose `.cordon` is no project's.
        let project = cwd
            .ancestors()
            .take_while(|d| home.as_deref() != Some(*d))
            .map(|d| d.join(".cordon").join("cordon.toml"))
            .find(|f| f.is_file());
        Places {
            managed,
            user,
            project,
            profile: None,
            given: None,
        }
    }
}

impl Places {
    /// The settings files these places name (whether or not they exist).
    pub fn files(&self) -> Vec<&Path> {
        std::iter::once(self.managed.as_path())
            .chain(self.user.as_deref())
            .chain(self.project.as_deref())
            .chain(self.given.as_deref())
            .collect()
    }
}

/// A fingerprint of `paths` and, for directories, what they hold: their size and time of last
/// change. Long-running commands compare it to notice an edited settings or policy file.
pub fn fingerprint<'a>(paths: impl IntoIterator<Item = &'a Path>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let mut stamp = |p: &Path| {
        p.hash(&mut h);
        if let Ok(m) = std::fs::metadata(p) {
            m.len().hash(&mut h);
            m.modified().ok().hash(&mut h);
        }
    };
    for p in paths {
        stamp(p);
        let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for e in entries {
            stamp(&e);
        }
    }
    h.finish()
}

/// What the files at `paths` (each a file or a directory, searched all the way down) hold,
/// as one number: their paths and contents only, so that copies with other times and other
/// directory entries (a pod's files from a ConfigMap) match. Dearer than [`fingerprint`], so
/// for comparing two places once, not for watching.
pub fn content_fingerprint<'a>(paths: impl IntoIterator<Item = &'a Path>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let mut pending: Vec<PathBuf> = paths.into_iter().map(Path::to_path_buf).collect();
    pending.reverse();
    while let Some(p) = pending.pop() {
        match std::fs::metadata(&p) {
            Ok(m) if m.is_dir() => {
                let mut entries: Vec<PathBuf> = std::fs::read_dir(&p)
                    .into_iter()
                    .flatten()
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .collect();
                entries.sort();
                entries.reverse();
                pending.extend(entries);
            }
            Ok(_) => {
                p.hash(&mut h);
                cordon_policy::load::read_settings_text(&p)
                    .map_err(|e| e.to_string())
                    .hash(&mut h);
            }
            Err(_) => {}
        }
    }
    h.finish()
}

/// Reads every layer's file that exists; a file that cannot be read or understood is an
/// error naming it.
pub fn read(places: &Places) -> anyhow::Result<Vec<(Layer, PathBuf, SettingsFile)>> {
    let mut files = Vec::new();
    let layers = [
        (Layer::Managed, Some(&places.managed)),
        (Layer::User, places.user.as_ref()),
        (Layer::Project, places.project.as_ref()),
    ];
    for (layer, path) in layers {
        let Some(path) = path else { continue };
        let text = match cordon_policy::load::read_settings_text(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let parsed = file::parse(path, &text)?;
        tracing::info!("settings: read {} ({layer:?})", path.display());
        if parsed.lock.is_some() && layer != Layer::Managed {
            bail!(
                "{}: [lock] belongs in managed settings ({}); a {} file cannot lock anything",
                path.display(),
                places.managed.display(),
                if layer == Layer::User {
                    "user"
                } else {
                    "project"
                }
            );
        }
        files.push((layer, path.clone(), parsed));
    }
    if let Some(name) = &places.profile {
        let text = PROFILES
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| *t)
            .with_context(|| parse_profile(name).err().unwrap_or_default())?;
        let path = PathBuf::from(name);
        files.push((Layer::Profile, path.clone(), file::parse(&path, text)?));
    }
    if let Some(path) = &places.given {
        let imported = import::import(path)?;
        for n in &imported.not_carried {
            eprintln!(
                "cordon: warning: --settings {}: not carried over: {n}",
                path.display()
            );
        }
        if imported.settings.lock.is_some() {
            bail!(
                "{}: [lock] belongs in managed settings ({})",
                path.display(),
                places.managed.display()
            );
        }
        files.push((Layer::Given, path.clone(), imported.settings));
    }
    Ok(files)
}

/// Turns a path as written in a settings file into an absolute one: `~/` is the home
/// directory; a relative path is relative to the project (the directory holding `.cordon`),
/// relative to the working directory in a `--settings` file, and refused elsewhere.
fn resolve_path(text: &str, layer: Layer, file: &Path, key: &str) -> anyhow::Result<PathBuf> {
    if let Some(rest) = text.strip_prefix("~/") {
        let home = std::env::var_os("HOME").context("HOME is not set, so `~/` means nothing")?;
        return Ok(PathBuf::from(home).join(rest));
    }
    let path = Path::new(text);
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    match (layer, file.parent().and_then(Path::parent)) {
        (Layer::Project, Some(project)) => Ok(project.join(path).components().collect()),
        // A file or profile named on the command line speaks of where it is used.
        (Layer::Given | Layer::Profile, _) => Ok(std::env::current_dir()
            .context("cannot read the current directory")?
            .join(path)
            .components()
            .collect()),
        _ => bail!(
            "{}: {key}: `{text}` is relative; write an absolute path or one starting with ~/",
            file.display()
        ),
    }
}

/// The names `sandbox.backend` takes, as `cordon run --backend` does.
const BACKENDS: &[&str] = &["linux", "seatbelt", "docker", "podman", "container"];

/// One layer's values, with paths resolved; what the merge takes in.
#[derive(Debug, Default, Clone, Serialize, serde::Deserialize)]
pub struct LayerValues {
    pub enabled: Option<bool>,
    pub fail_if_unavailable: Option<bool>,
    pub enabled_platforms: Option<Vec<String>>,
    pub excluded_commands: Option<Vec<String>>,
    pub auto_allow_if_sandboxed: Option<bool>,
    pub allow_unsandboxed_commands: Option<bool>,
    pub backend: Option<String>,
    pub container_image: Option<String>,
    pub container_profile: Option<String>,
    pub allow_write: Option<Vec<PathBuf>>,
    pub deny_write: Vec<PathBuf>,
    pub deny_read: Vec<PathBuf>,
    pub allow_read: Option<Vec<PathBuf>>,
    #[serde(default)]
    pub expose_credentials: Option<Vec<String>>,
    pub allow_domains: Option<Vec<String>>,
    pub deny_domains: Vec<String>,
    pub allow_private_ips: Option<bool>,
    pub allow_local_binding: Option<bool>,
    #[serde(default)]
    pub private_caches: Option<bool>,
    pub allow_unix_sockets: Option<Vec<PathBuf>>,
    pub upstream_proxy: Option<String>,
    pub keep_env: Option<Vec<String>>,
    pub deny_env: Vec<String>,
    pub max_processes: Option<u64>,
    pub memory: Option<String>,
    pub cpu_time: Option<u64>,
    pub cpus: Option<f64>,
    pub timeout: Option<f64>,
    #[serde(default)]
    pub max_commands: Option<u64>,
    #[serde(default)]
    pub max_session_processes: Option<u64>,
    pub ignore_violations: Vec<IgnoreRule>,
    pub allowed_tools: Option<Vec<String>>,
    pub excluded_tools: Vec<String>,
}

impl LayerValues {
    pub fn from_file(layer: Layer, path: &Path, f: &SettingsFile) -> anyhow::Result<Self> {
        let paths =
            |key: &str, list: &Option<Vec<String>>| -> anyhow::Result<Option<Vec<PathBuf>>> {
                list.as_ref()
                    .map(|l| {
                        l.iter()
                            .map(|p| resolve_path(p, layer, path, key))
                            .collect()
                    })
                    .transpose()
            };
        let sandbox = f.sandbox.clone().unwrap_or_default();
        let fs = f.filesystem.clone().unwrap_or_default();
        let net = f.network.clone().unwrap_or_default();
        let env = f.env.clone().unwrap_or_default();
        let limits = f.limits.clone().unwrap_or_default();
        // Reading the file checks these with its line; a table built otherwise (an import)
        // is held to the same ranges here.
        let out_of_range = |key: &str, e: String| anyhow::anyhow!("{}: {key}: {e}", path.display());
        if let Some(m) = &limits.memory {
            crate::bounds::memory(m).map_err(|e| out_of_range("limits.memory", e))?;
        }
        for (key, n, range) in [
            ("limits.cpus", limits.cpus, crate::bounds::CPUS),
            ("limits.timeout", limits.timeout, crate::bounds::TIMEOUT),
            (
                "limits.max_processes",
                limits.max_processes.map(|n| n as f64),
                crate::bounds::MAX_PROCESSES,
            ),
            (
                "limits.cpu_time",
                limits.cpu_time.map(|n| n as f64),
                crate::bounds::CPU_TIME,
            ),
            (
                "limits.max_commands",
                limits.max_commands.map(|n| n as f64),
                crate::bounds::MAX_COMMANDS,
            ),
            (
                "limits.max_session_processes",
                limits.max_session_processes.map(|n| n as f64),
                crate::bounds::MAX_PROCESSES,
            ),
        ] {
            if let Some(n) = n {
                range.check(n).map_err(|e| out_of_range(key, e))?;
            }
        }
        for (key, list) in [
            ("network.allow_domains", &net.allow_domains),
            ("network.deny_domains", &net.deny_domains),
        ] {
            for rule in list.iter().flatten() {
                rule.parse::<cordon_net::DomainRule>()
                    .map_err(|e| anyhow::anyhow!("{}: {key}: {e}", path.display()))?;
            }
        }
        for p in sandbox.enabled_platforms.iter().flatten() {
            if !["linux", "macos"].contains(&p.as_str()) {
                bail!(
                    "{}: sandbox.enabled_platforms: `{p}` is not a platform cordon knows (linux, macos)",
                    path.display()
                );
            }
        }
        if let Some(b) = &sandbox.backend
            && !BACKENDS.contains(&b.as_str())
        {
            bail!(
                "{}: sandbox.backend: `{b}` is not a backend; use one of {}",
                path.display(),
                BACKENDS.join(", ")
            );
        }
        let container = f.container.clone().unwrap_or_default();
        if let Some(p) = &container.profile
            && cordon_sandbox::container::Profile::parse(p).is_none()
        {
            bail!(
                "{}: container.profile: `{p}` is not a profile; use one of {}",
                path.display(),
                cordon_sandbox::container::Profile::NAMES
            );
        }
        if let Some(unknown) = fs
            .expose_credentials
            .iter()
            .flatten()
            .find(|n| !crate::credentials::is_known(n))
        {
            bail!(
                "{}: filesystem.expose_credentials: no credential store `{unknown}`; cordon knows {}",
                path.display(),
                crate::credentials::names()
            );
        }
        if container
            .image
            .as_deref()
            .is_some_and(|i| i.trim().is_empty())
        {
            bail!("{}: container.image: give an image name", path.display());
        }
        Ok(LayerValues {
            backend: sandbox.backend,
            container_image: container.image,
            container_profile: container.profile,
            enabled: sandbox.enabled,
            fail_if_unavailable: sandbox.fail_if_unavailable,
            enabled_platforms: sandbox.enabled_platforms,
            excluded_commands: sandbox.excluded_commands,
            auto_allow_if_sandboxed: sandbox.auto_allow_if_sandboxed,
            allow_unsandboxed_commands: sandbox.allow_unsandboxed_commands,
            allow_write: paths("filesystem.allow_write", &fs.allow_write)?,
            deny_write: paths("filesystem.deny_write", &fs.deny_write)?.unwrap_or_default(),
            deny_read: paths("filesystem.deny_read", &fs.deny_read)?.unwrap_or_default(),
            allow_read: paths("filesystem.allow_read", &fs.allow_read)?,
            expose_credentials: fs.expose_credentials,
            private_caches: fs.private_caches,
            allow_domains: net.allow_domains,
            deny_domains: net.deny_domains.unwrap_or_default(),
            allow_private_ips: net.allow_private_ips,
            allow_local_binding: net.allow_local_binding,
            allow_unix_sockets: paths("network.allow_unix_sockets", &net.allow_unix_sockets)?,
            upstream_proxy: net.upstream_proxy,
            keep_env: env.keep,
            deny_env: env.deny.unwrap_or_default(),
            max_processes: limits.max_processes,
            memory: limits.memory,
            cpu_time: limits.cpu_time,
            cpus: limits.cpus,
            timeout: limits.timeout,
            max_commands: limits.max_commands,
            max_session_processes: limits.max_session_processes,
            ignore_violations: f.ignore_violations.clone().unwrap_or_default(),
            allowed_tools: f.policy.as_ref().and_then(|p| p.allowed_tools.clone()),
            excluded_tools: f
                .policy
                .as_ref()
                .and_then(|p| p.excluded_tools.clone())
                .unwrap_or_default(),
        })
    }
}

/// Merges the layers in order (managed first, the command line last).
pub fn merge(layers: &[(Source, LayerValues)], locks: Locks, trust_project: bool) -> Settings {
    let mut s = Settings {
        locks,
        files: layers
            .iter()
            .filter(|(src, _)| src.file.is_some())
            .map(|(src, _)| src.clone())
            .collect(),
        ..Settings::default()
    };
    for (from, v) in layers {
        let untrusted = from.layer == Layer::Project && !trust_project;
        let managed = from.layer == Layer::Managed;
        let mut m = Merger {
            from,
            untrusted,
            left_out: &mut s.left_out,
        };
        // Switching the sandbox off, entirely or on this platform, runs every command outside
        // it: both locks forbid that.
        let keeps_sandbox = match (locks.sandbox_required, locks.no_unsandboxed_commands) {
            _ if managed => "",
            (true, _) => "sandbox_required",
            (false, true) => "no_unsandboxed_commands",
            (false, false) => "",
        };
        m.set(
            &mut s.enabled,
            v.enabled,
            |on| !on,
            !keeps_sandbox.is_empty() && v.enabled == Some(false),
            "sandbox.enabled",
            keeps_sandbox,
        );
        m.set(
            &mut s.fail_if_unavailable,
            v.fail_if_unavailable,
            |on| !on,
            locks.sandbox_required && !managed && v.fail_if_unavailable == Some(false),
            "sandbox.fail_if_unavailable",
            "sandbox_required",
        );
        m.set(
            &mut s.enabled_platforms,
            v.enabled_platforms.clone(),
            |_| true,
            !keeps_sandbox.is_empty(),
            "sandbox.enabled_platforms",
            keeps_sandbox,
        );
        let no_unsandboxed = locks.no_unsandboxed_commands && !managed;
        m.set(
            &mut s.excluded_commands,
            v.excluded_commands.clone(),
            |l| !l.is_empty(),
            no_unsandboxed,
            "sandbox.excluded_commands",
            "no_unsandboxed_commands",
        );
        m.set(
            &mut s.auto_allow_if_sandboxed,
            v.auto_allow_if_sandboxed,
            |on| *on,
            false,
            "sandbox.auto_allow_if_sandboxed",
            "",
        );
        m.set(
            &mut s.allow_unsandboxed_commands,
            v.allow_unsandboxed_commands,
            |on| *on,
            no_unsandboxed,
            "sandbox.allow_unsandboxed_commands",
            "no_unsandboxed_commands",
        );
        // Another enforcer, or another image or hardening in it, is not for a project to pick
        // unless trusted.
        m.set(
            &mut s.backend,
            v.backend.clone(),
            |_| true,
            false,
            "sandbox.backend",
            "",
        );
        m.set(
            &mut s.container_image,
            v.container_image.clone(),
            |_| true,
            false,
            "container.image",
            "",
        );
        m.set(
            &mut s.container_profile,
            v.container_profile.clone(),
            |p| !matches!(p.as_str(), "tight" | "offline"),
            false,
            "container.profile",
            "",
        );
        m.set(
            &mut s.allow_write,
            v.allow_write.clone(),
            |l| !l.is_empty(),
            false,
            "filesystem.allow_write",
            "",
        );
        m.set(
            &mut s.allow_read,
            v.allow_read.clone(),
            |l| !l.is_empty(),
            locks.only_managed_read_paths && !managed,
            "filesystem.allow_read",
            "only_managed_read_paths",
        );
        m.set(
            &mut s.expose_credentials,
            v.expose_credentials.clone(),
            |l| !l.is_empty(),
            false,
            "filesystem.expose_credentials",
            "",
        );
        m.set(
            &mut s.allow_domains,
            v.allow_domains.clone(),
            |l| !l.is_empty(),
            locks.only_managed_domains && !managed,
            "network.allow_domains",
            "only_managed_domains",
        );
        m.set(
            &mut s.allow_private_ips,
            v.allow_private_ips,
            |on| *on,
            false,
            "network.allow_private_ips",
            "",
        );
        m.set(
            &mut s.allow_local_binding,
            v.allow_local_binding,
            |on| *on,
            false,
            "network.allow_local_binding",
            "",
        );
        // Either way only narrows what a run writes of the host's: a project may set it.
        m.set(
            &mut s.private_caches,
            v.private_caches,
            |_| false,
            false,
            "filesystem.private_caches",
            "",
        );
        m.set(
            &mut s.allow_unix_sockets,
            v.allow_unix_sockets.clone(),
            |l| !l.is_empty(),
            false,
            "network.allow_unix_sockets",
            "",
        );
        m.set(
            &mut s.upstream_proxy,
            v.upstream_proxy.clone(),
            |_| true,
            false,
            "network.upstream_proxy",
            "",
        );
        m.set(
            &mut s.keep_env,
            v.keep_env.clone(),
            |l| !l.is_empty(),
            false,
            "env.keep",
            "",
        );
        m.set(
            &mut s.allowed_tools,
            v.allowed_tools.clone(),
            |l| !l.is_empty(),
            false,
            "policy.allowed_tools",
            "",
        );
        // Limits: a project may lower one, or set one where none was.
        let lower = |now: Option<f64>| move |new: &f64| now.is_some_and(|n| *new > n);
        let max_processes = s.max_processes.as_ref().map(|v| v.value as f64);
        m.set(
            &mut s.max_processes,
            v.max_processes,
            |n| lower(max_processes)(&(*n as f64)),
            false,
            "limits.max_processes",
            "",
        );
        let memory = s
            .memory
            .as_ref()
            .and_then(|v| parse_size(&v.value).ok())
            .map(|b| b as f64);
        m.set(
            &mut s.memory,
            v.memory.clone(),
            |m| parse_size(m).is_ok_and(|b| lower(memory)(&(b as f64))),
            false,
            "limits.memory",
            "",
        );
        let cpu_time = s.cpu_time.as_ref().map(|v| v.value as f64);
        m.set(
            &mut s.cpu_time,
            v.cpu_time,
            |n| lower(cpu_time)(&(*n as f64)),
            false,
            "limits.cpu_time",
            "",
        );
        let cpus = s.cpus.as_ref().map(|v| v.value);
        m.set(&mut s.cpus, v.cpus, lower(cpus), false, "limits.cpus", "");
        let timeout = s.timeout.as_ref().map(|v| v.value);
        m.set(
            &mut s.timeout,
            v.timeout,
            lower(timeout),
            false,
            "limits.timeout",
            "",
        );
        // The session's bounds protect the host, so where no layer set one a project may
        // still only go below the default.
        let max_commands = s
            .max_commands
            .as_ref()
            .map_or(crate::config::DEFAULT_MAX_COMMANDS, |v| v.value);
        m.set(
            &mut s.max_commands,
            v.max_commands,
            |n| *n > max_commands,
            false,
            "limits.max_commands",
            "",
        );
        // The default is read from /proc only where a project sets one: settings are merged
        // for every run.
        let session = s.max_session_processes.as_ref().map(|v| v.value);
        m.set(
            &mut s.max_session_processes,
            v.max_session_processes,
            |n| *n > session.unwrap_or_else(crate::config::default_session_processes),
            false,
            "limits.max_session_processes",
            "",
        );
        // Deny lists add up, whoever writes them.
        s.deny_write.extend(tagged(&v.deny_write, from));
        s.deny_read.extend(tagged(&v.deny_read, from));
        s.deny_domains.extend(tagged(&v.deny_domains, from));
        s.deny_env.extend(tagged(&v.deny_env, from));
        s.excluded_tools.extend(tagged(&v.excluded_tools, from));
        // Ignoring violations hides what the sandbox saw: not for an untrusted project.
        if untrusted && !v.ignore_violations.is_empty() {
            s.left_out.push(format!(
                "ignore_violations from {from}: a project may only tighten unless trusted (--trust-project)"
            ));
        } else {
            s.ignore_violations
                .extend(tagged(&v.ignore_violations, from));
        }
    }
    if locks.sandbox_required {
        s.enabled = s.enabled.filter(|e| e.value).or(Some(Sourced {
            value: true,
            from: layers
                .iter()
                .find(|(src, _)| src.layer == Layer::Managed)
                .map_or(
                    Source {
                        layer: Layer::Managed,
                        file: None,
                    },
                    |(src, _)| src.clone(),
                ),
        }));
    }
    s
}

fn tagged<'a, T: Clone>(list: &'a [T], from: &'a Source) -> impl Iterator<Item = Sourced<T>> + 'a {
    list.iter().map(move |value| Sourced {
        value: value.clone(),
        from: from.clone(),
    })
}

struct Merger<'a> {
    from: &'a Source,
    untrusted: bool,
    left_out: &'a mut Vec<String>,
}

impl Merger<'_> {
    /// Sets `slot` to `value` from this layer, unless a lock forbids it (`locked`, naming the
    /// `lock`) or an untrusted project would widen something with it (`widens`).
    fn set<T>(
        &mut self,
        slot: &mut Option<Sourced<T>>,
        value: Option<T>,
        widens: impl Fn(&T) -> bool,
        locked: bool,
        key: &str,
        lock: &str,
    ) {
        let Some(value) = value else { return };
        if locked {
            self.left_out.push(format!(
                "{key} from {}: locked by managed settings ({lock})",
                self.from
            ));
            return;
        }
        if self.untrusted && widens(&value) {
            self.left_out.push(format!(
                "{key} from {}: a project may only tighten unless trusted (--trust-project)",
                self.from
            ));
            return;
        }
        *slot = Some(Sourced {
            value,
            from: self.from.clone(),
        });
    }
}

/// The locks the managed file sets.
pub fn locks(files: &[(Layer, PathBuf, SettingsFile)]) -> Locks {
    let lock = files
        .iter()
        .find(|(l, _, _)| *l == Layer::Managed)
        .and_then(|(_, _, f)| f.lock.clone())
        .unwrap_or_default();
    Locks {
        only_managed_domains: lock.only_managed_domains.unwrap_or(false),
        only_managed_read_paths: lock.only_managed_read_paths.unwrap_or(false),
        sandbox_required: lock.sandbox_required.unwrap_or(false),
        no_unsandboxed_commands: lock.no_unsandboxed_commands.unwrap_or(false),
    }
}

/// Every layer's file, then the command line's values, merged.
pub fn load(places: &Places, flags: LayerValues, trust_project: bool) -> anyhow::Result<Settings> {
    let files = read(places)?;
    let locks = locks(&files);
    let mut layers = Vec::new();
    for (layer, path, f) in &files {
        layers.push((
            Source {
                layer: *layer,
                file: Some(path.clone()),
            },
            LayerValues::from_file(*layer, path, f)?,
        ));
    }
    layers.push((
        Source {
            layer: Layer::Flags,
            file: None,
        },
        flags,
    ));
    let merged = merge(&layers, locks, trust_project);
    tracing::debug!("settings merged: {merged:?}");
    Ok(merged)
}

#[cfg(test)]
mod tests;
