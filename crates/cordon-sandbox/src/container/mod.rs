//! The container backend: the whole program in a Docker or Podman container.
//!
//! Everything here is pure: [`build`] turns a [`SandboxSpec`], the launch options and what
//! the caller found out about the host ([`Host`]) into the engine's exact command line. It
//! compiles and is tested on every OS, for Linux and macOS hosts alike; starting the engine,
//! pulling or building the image and cleaning up lives with the caller (the `cordon` binary).
//!
//! Secret values never appear on the command line: a variable that looks like a credential
//! is passed as `-e NAME` and its value given to the engine process's own environment, where
//! the engine reads it. So `--dry-run` can print the exact command with nothing to hide, and
//! `ps` shows no keys.

mod parse;

use std::path::{Path, PathBuf};

pub use parse::{
    Mount, PullFault, classify_pull_failure, parse_env, parse_flags, parse_mounts, parse_ports,
};

use crate::env::{EnvRules, Place};
use crate::{NetworkMode, SandboxSpec};

/// The engine that runs the container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Docker,
    Podman,
}

impl Engine {
    /// The program's name, looked up on `PATH`.
    pub fn program(self) -> &'static str {
        match self {
            Engine::Docker => "docker",
            Engine::Podman => "podman",
        }
    }

    pub fn parse(name: &str) -> Option<Engine> {
        match name {
            "docker" => Some(Engine::Docker),
            "podman" => Some(Engine::Podman),
            _ => None,
        }
    }
}

/// The OS the launcher runs on: it decides user mapping and how the SSH agent is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostOs {
    Linux,
    MacOs,
}

/// Named sets of hardening and limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// No capabilities, no privilege gain; 4096 processes (as the native sandbox), other
    /// limits only as asked.
    #[default]
    Dev,
    /// `dev`, and a read-only root file system (with a private `/tmp`), at most 1024
    /// processes and 8 GiB of memory unless asked otherwise.
    Safe,
    /// `safe` with tighter defaults: 256 processes, 2 GiB, 2 CPUs.
    Tight,
    /// `dev` with no network at all, whatever else was asked.
    Offline,
}

impl Profile {
    pub const NAMES: &'static str = "dev, safe, tight, offline";

    pub fn parse(name: &str) -> Option<Profile> {
        match name {
            "dev" => Some(Profile::Dev),
            "safe" => Some(Profile::Safe),
            "tight" => Some(Profile::Tight),
            "offline" => Some(Profile::Offline),
            _ => None,
        }
    }

    /// Default (processes, memory bytes, thousandths of a CPU) where nothing was asked.
    pub fn default_limits(self) -> (Option<u64>, Option<u64>, Option<u64>) {
        match self {
            Profile::Dev | Profile::Offline => (Some(4096), None, None),
            Profile::Safe => (Some(1024), Some(8 << 30), None),
            Profile::Tight => (Some(256), Some(2 << 30), Some(2000)),
        }
    }

    fn read_only_root(self) -> bool {
        matches!(self, Profile::Safe | Profile::Tight)
    }
}

/// How a launch is made; settings files will feed these too.
#[derive(Debug, Clone)]
pub struct Options {
    pub engine: Engine,
    pub image: String,
    /// The container's name, unique per run (see [`container_name`]).
    pub name: String,
    pub profile: Profile,
    /// Run as the host user: `None` means yes on Linux, no on macOS (Docker Desktop maps file
    /// ownership itself).
    pub set_uid_gid: Option<bool>,
    /// The container user's home when cordon does not map the user [default: `/root`].
    pub container_home: Option<PathBuf>,
    /// `CORDON_SANDBOX_MOUNTS`.
    pub mounts: Vec<Mount>,
    /// `CORDON_SANDBOX_ENV`.
    pub env: Vec<(String, String)>,
    /// `CORDON_SANDBOX_FLAGS`, given to the engine before the image.
    pub flags: Vec<String>,
    /// `CORDON_SANDBOX_PORTS`, each given as `-p`.
    pub ports: Vec<String>,
    /// Pass the model providers' API keys in (see [`API_KEYS`]).
    pub pass_api_keys: bool,
    /// What the user keeps besides the shared allowlist (`--keep-env`) and withholds from it
    /// (`--deny-env`); see [`crate::env`].
    pub env_rules: EnvRules,
    /// Forward the SSH agent when `SSH_AUTH_SOCK` is set.
    pub ssh_agent: bool,
    /// With allowed domains (`NetworkMode::Proxy`): what the program is told about cordon's
    /// proxy (`HTTP_PROXY` and the rest), and a host directory, mounted at [`GATE_INSIDE`],
    /// where the launcher makes `ready` once the proxy's ports are there; the program starts
    /// only then.
    pub proxy: Option<ProxyGate>,
    /// An empty host directory to mount over hidden directories. Podman mounts tmpfs before
    /// bind mounts whatever their paths, so a tmpfs would land under the project's bind and
    /// hide nothing; Docker orders all mounts by path, and without this gets a tmpfs.
    pub empty_dir: Option<PathBuf>,
    /// The image's `/etc/passwd` and `/etc/group` with the host user added (see
    /// [`user_entries`]), mounted read-only over the image's, so programs that look the user
    /// up (ssh, git, whoami) find it.
    pub user_files: Option<(PathBuf, PathBuf)>,
}

/// Whether the run maps the host user with `--user` (not root, not rootless Podman's keep-id,
/// which adds the user itself).
pub fn maps_user_with_uid(options: &Options, host: &Host) -> bool {
    options.set_uid_gid.unwrap_or(host.os == HostOs::Linux)
        && host.uid != 0
        && !(options.engine == Engine::Podman && host.rootless)
}

/// An image's `passwd` and `group` with the host user added: `None` when the image already
/// knows the uid. The user is named `name` unless the image uses that name, then `cordon`.
pub fn user_entries(
    passwd: &str,
    group: &str,
    uid: u32,
    gid: u32,
    name: &str,
    home: &Path,
) -> Option<(String, String)> {
    let field = |line: &str, n: usize| line.split(':').nth(n).map(str::to_string);
    let known = passwd
        .lines()
        .any(|l| field(l, 2).as_deref() == Some(uid.to_string().as_str()));
    if known {
        return None;
    }
    let valid = !name.is_empty()
        && name.len() <= 32
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    let taken = |n: &str| passwd.lines().any(|l| field(l, 0).as_deref() == Some(n));
    let user = if valid && !taken(name) {
        name
    } else {
        "cordon"
    };
    let mut passwd = passwd.to_string();
    if !passwd.is_empty() && !passwd.ends_with('\n') {
        passwd.push('\n');
    }
    if passwd.is_empty() {
        passwd.push_str("root:x:0:0:root:/root:/bin/sh\n");
    }
    passwd.push_str(&format!(
        "{user}:x:{uid}:{gid}:{user}:{}:/bin/sh\n",
        home.display()
    ));
    let mut group = group.to_string();
    if !group.is_empty() && !group.ends_with('\n') {
        group.push('\n');
    }
    if group.is_empty() {
        group.push_str("root:x:0:\n");
    }
    let gid_known = group
        .lines()
        .any(|l| field(l, 2).as_deref() == Some(gid.to_string().as_str()));
    if !gid_known {
        let taken = group.lines().any(|l| field(l, 0).as_deref() == Some(user));
        let name = if taken { "cordon" } else { user };
        group.push_str(&format!("{name}:x:{gid}:\n"));
    }
    Some((passwd, group))
}

/// How a container reaches cordon's proxy (see [`Options::proxy`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyGate {
    pub env: Vec<(String, String)>,
    pub gate_dir: PathBuf,
}

/// Where the gate directory appears inside.
pub const GATE_INSIDE: &str = "/run/cordon";

/// What the caller found out about the host. Paths are absolute.
#[derive(Debug, Clone)]
pub struct Host {
    pub os: HostOs,
    pub uid: u32,
    pub gid: u32,
    /// The host user's home.
    pub home: Option<PathBuf>,
    /// cordon's settings directory, when it exists.
    pub settings_dir: Option<PathBuf>,
    /// The launcher's environment.
    pub env: Vec<(String, String)>,
    /// Standard input is a terminal.
    pub tty: bool,
    /// The engine is Podman without root (then `--userns=keep-id` maps the user).
    pub rootless: bool,
    /// Which paths exist, and whether each is a directory: `None` when missing.
    pub kinds: Vec<(PathBuf, PathKind)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    File,
    Dir,
}

impl Host {
    fn kind(&self, p: &Path) -> Option<PathKind> {
        self.kinds.iter().find(|(q, _)| q == p).map(|(_, k)| *k)
    }

    fn var(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every path [`build`] may ask about for this spec and these options, so the caller can
    /// look them up on the real file system.
    pub fn paths_to_check(
        spec: &SandboxSpec,
        options: &Options,
        home: Option<&Path>,
    ) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = std::iter::once(spec.cwd.clone())
            .chain(spec.writable.iter().cloned())
            .chain(spec.read_only.iter().cloned())
            .chain(spec.hidden.iter().cloned())
            .chain(spec.reopened.iter().cloned())
            .chain(options.mounts.iter().map(|m| m.from.clone()))
            .chain(std::iter::once(spec.cwd.join(BASHRC)))
            .collect();
        if let Some(home) = home {
            out.extend(HOME_FILES.iter().map(|f| home.join(f)));
        }
        out
    }
}

/// The project's start-up file, sourced inside before the command when present.
pub const BASHRC: &str = ".cordon/sandbox.bashrc";

/// The project's own image recipe, built and tagged by cordon.
pub const DOCKERFILE: &str = ".cordon/sandbox.Dockerfile";

/// Files from the host user's home the program inside needs to use git and SSH as the user
/// does, read-only. Never `~/.git-credentials`.
pub const HOME_FILES: &[&str] = &[
    ".gitconfig",
    ".config/git/config",
    ".gitignore_global",
    ".ssh/known_hosts",
];

/// The model providers' API keys, passed only when the user opts in.
pub const API_KEYS: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "DEEPSEEK_API_KEY",
    "OPENROUTER_API_KEY",
    "XAI_API_KEY",
    "AZURE_OPENAI_API_KEY",
];

/// Where the SSH agent's socket appears inside on Linux.
pub const SSH_AGENT_INSIDE: &str = "/ssh-agent";

/// Docker Desktop's socket that leads to the Mac's SSH agent.
pub const MAC_DOCKER_SSH_SOCKET: &str = "/run/host-services/ssh-auth.sock";

/// The engine command for one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// `docker` or `podman`.
    pub program: String,
    /// Everything after the program: `run …`.
    pub args: Vec<String>,
    /// Secret values, given to the engine's own environment; the arguments name them only.
    pub secret_env: Vec<(String, String)>,
    /// Things the user should know (a forwarding that could not be set up).
    pub warnings: Vec<String>,
    /// The launcher's variables not passed in, by name.
    pub env_withheld: Vec<String>,
}

impl Invocation {
    /// The command as a shell would take it; holds no secret values.
    pub fn command_line(&self) -> String {
        std::iter::once(self.program.as_str())
            .chain(self.args.iter().map(String::as_str))
            .map(quote)
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn quote(s: &str) -> String {
    // Words a shell takes as they are stay bare, so the line reads as one would type it.
    let plain = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        return s.to_string();
    }
    // A NUL cannot be in an argument at all; shown escaped rather than failing a printout.
    shlex::try_quote(s).map_or_else(|_| format!("{s:?}"), |q| q.into_owned())
}

/// Why a launch cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContainerError {
    #[error("allowed domains need cordon's proxy, and no proxy gate was given")]
    ProxyWithoutGate,
    #[error(
        "the offline profile has no network; drop --network host and --allow-domain, or choose another profile"
    )]
    OfflineWithNetwork,
    #[error("CORDON_SANDBOX_MOUNTS: {}: no such file or directory on the host", .0.display())]
    MountMissing(PathBuf),
    #[error("{}: the path is not valid UTF-8, which the engine's command line needs", .0.display())]
    NotUtf8(PathBuf),
    #[error(
        "CORDON_SANDBOX_PORTS: ports cannot be published from a container without a network (the engine would drop them silently); add --network host, which gives the container the engine's default network"
    )]
    PortsWithoutNetwork,
    #[error("{0}")]
    Parse(String),
    #[error("the command is empty")]
    NoCommand,
}

/// `cordon-<project>-<random>`: the project is the working directory's name, kept to the
/// characters engines accept in names.
pub fn container_name(cwd: &Path, random: &str) -> String {
    let base = cwd
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut project: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    project = project.trim_matches(|c| c == '-' || c == '.').to_string();
    project.truncate(40);
    if project.is_empty() {
        project = "run".to_string();
    }
    format!("cordon-{project}-{random}")
}

/// The tag of a project's image built from `.cordon/sandbox.Dockerfile`: one per recipe, so
/// a changed recipe means a new tag, and an unchanged one finds its image already there.
pub fn dockerfile_tag(cwd: &Path, recipe: &[u8]) -> String {
    let name = container_name(cwd, "x");
    let project = name
        .strip_prefix("cordon-")
        .and_then(|n| n.strip_suffix("-x"))
        .unwrap_or("run");
    format!("cordon-sandbox-{project}:{:016x}", fnv1a(recipe))
}

/// FNV-1a, 64 bits: stable across Rust releases (unlike `DefaultHasher`), so a tag stays the
/// same from one cordon build to the next; collisions only cost a missed rebuild of an
/// edited recipe, and a recipe is not chosen by an adversary.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn text(p: &Path) -> Result<&str, ContainerError> {
    p.to_str()
        .ok_or_else(|| ContainerError::NotUtf8(p.to_path_buf()))
}

/// The engine command that runs `spec` in a container.
pub fn build(
    spec: &SandboxSpec,
    options: &Options,
    host: &Host,
) -> Result<Invocation, ContainerError> {
    if spec.argv.is_empty() {
        return Err(ContainerError::NoCommand);
    }
    let mut args: Vec<String> = ["run", "-i", "--rm", "--init"].map(String::from).to_vec();
    let mut secret_env = Vec::new();
    let mut warnings = Vec::new();
    if host.tty {
        args.push("-t".into());
    }
    args.extend(["--name".to_string(), options.name.clone()]);

    // Hardening: nothing a root inside could use against the host.
    args.push("--cap-drop=ALL".into());
    args.extend(["--security-opt".into(), "no-new-privileges".into()]);
    if options.profile.read_only_root() {
        args.push("--read-only".into());
        args.extend(["--tmpfs".into(), "/tmp:rw,exec,mode=1777".into()]);
    }
    let (procs, memory, cpus) = options.profile.default_limits();
    if let Some(n) = spec.limits.max_processes.or(procs) {
        args.push(format!("--pids-limit={n}"));
    }
    if let Some(bytes) = spec.limits.memory_bytes.or(memory) {
        args.push(format!("--memory={bytes}b"));
    }
    if let Some(millis) = spec.limits.cpu_millis.or(cpus) {
        args.push(format!("--cpus={}.{:03}", millis / 1000, millis % 1000));
    }
    if let Some(secs) = spec.limits.cpu_seconds {
        args.push(format!("--ulimit=cpu={secs}:{secs}"));
    }

    match (&spec.network, options.profile) {
        (NetworkMode::Host | NetworkMode::Proxy(_), Profile::Offline) => {
            return Err(ContainerError::OfflineWithNetwork);
        }
        // Allowed domains: no network but loopback, whose proxy ports the launcher hands to
        // cordon's proxy from outside (so the same rules hold as in the native sandbox).
        (NetworkMode::None | NetworkMode::Proxy(_), _) => {
            args.extend(["--network".into(), "none".into()]);
        }
        // The engine's default network: the whole internet, as `--network host` is for the
        // native sandbox, without the host's own loopback services.
        (NetworkMode::Host, _) => {}
    }

    // Who the program runs as, and where its home is.
    let map_user = options.set_uid_gid.unwrap_or(host.os == HostOs::Linux);
    let container_home: PathBuf = if map_user && host.uid != 0 {
        host.home
            .clone()
            .unwrap_or_else(|| PathBuf::from("/home/cordon"))
    } else {
        options
            .container_home
            .clone()
            .unwrap_or_else(|| PathBuf::from("/root"))
    };
    if map_user && host.uid != 0 {
        if options.engine == Engine::Podman && host.rootless {
            // Rootless Podman's own user namespace: keep-id maps the host user to itself.
            args.push("--userns=keep-id".into());
        } else {
            args.extend(["--user".into(), format!("{}:{}", host.uid, host.gid)]);
        }
        // The image has no home for an arbitrary uid: a private one it owns, which the
        // read-only files below are mounted into.
        args.extend([
            "--tmpfs".into(),
            format!(
                "{}:rw,exec,uid={},gid={},mode=0700",
                text(&container_home)?,
                host.uid,
                host.gid
            ),
        ]);
    } else {
        if map_user {
            args.extend(["--user".into(), "0:0".into()]);
        }
        if options.profile.read_only_root() {
            // A read-only root file system would leave the program no home to write its
            // caches and history in.
            args.extend([
                "--tmpfs".into(),
                format!("{}:rw,exec,mode=0700", text(&container_home)?),
            ]);
        }
    }

    // The project, at the same path, and what the spec lets the command write.
    let mut mounts: Vec<(PathBuf, PathBuf, &str)> = Vec::new();
    mounts.push((spec.cwd.clone(), spec.cwd.clone(), "rw"));
    for w in &spec.writable {
        if host.kind(w).is_some() && !mounts.iter().any(|(_, to, _)| to == w) {
            mounts.push((w.clone(), w.clone(), "rw"));
        }
    }
    let visible = |p: &Path, mounts: &[(PathBuf, PathBuf, &str)]| {
        mounts.iter().any(|(_, to, _)| p.starts_with(to))
    };
    // Protected files inside writable places stay read-only, as in the native sandbox.
    for r in &spec.read_only {
        if host.kind(r).is_some() && visible(r, &mounts) {
            mounts.push((r.clone(), r.clone(), "ro"));
        }
    }
    // cordon's settings, read-only where the program inside looks for them.
    if let Some(dir) = &host.settings_dir {
        let inside = host
            .home
            .as_ref()
            .and_then(|h| dir.strip_prefix(h).ok())
            .map(|rel| container_home.join(rel));
        mounts.push((dir.clone(), dir.clone(), "ro"));
        if let Some(inside) = inside.filter(|i| i != dir) {
            mounts.push((dir.clone(), inside, "ro"));
        }
    }
    if let Some(home) = &host.home {
        for f in HOME_FILES {
            let path = home.join(f);
            if host.kind(&path) != Some(PathKind::File) {
                continue;
            }
            mounts.push((path.clone(), path.clone(), "ro"));
            let inside = container_home.join(f);
            if inside != path {
                mounts.push((path.clone(), inside, "ro"));
            }
        }
    }
    let gate = match (&spec.network, &options.proxy) {
        (NetworkMode::Proxy(_), Some(gate)) => Some(gate),
        (NetworkMode::Proxy(_), None) => return Err(ContainerError::ProxyWithoutGate),
        _ => None,
    };
    if let Some(gate) = gate {
        mounts.push((gate.gate_dir.clone(), PathBuf::from(GATE_INSIDE), "ro"));
    }
    if let Some((passwd, group)) = &options.user_files {
        mounts.push((passwd.clone(), PathBuf::from("/etc/passwd"), "ro"));
        mounts.push((group.clone(), PathBuf::from("/etc/group"), "ro"));
    }
    for m in &options.mounts {
        if host.kind(&m.from).is_none() {
            return Err(ContainerError::MountMissing(m.from.clone()));
        }
    }
    for (from, to, mode) in &mounts {
        let mut opts = (*mode).to_string();
        if options.engine == Engine::Podman && host.os == HostOs::Linux && to == &spec.cwd {
            // SELinux hosts label the project for the container; elsewhere `z` does nothing.
            opts.push_str(",z");
        }
        args.extend(["-v".into(), format!("{}:{}:{opts}", text(from)?, text(to)?)]);
    }
    for m in &options.mounts {
        args.extend([
            "-v".into(),
            format!("{}:{}:{}", text(&m.from)?, text(&m.to)?, m.options),
        ]);
    }
    // Hidden paths the mounts above would show: an empty directory or an empty file instead.
    let all_mounts: Vec<(PathBuf, PathBuf, &str)> = mounts
        .iter()
        .cloned()
        .chain(
            options
                .mounts
                .iter()
                .map(|m| (m.from.clone(), m.to.clone(), "")),
        )
        .collect();
    for h in &spec.hidden {
        if !visible(h, &all_mounts) {
            continue;
        }
        match host.kind(h) {
            Some(PathKind::Dir) => match &options.empty_dir {
                Some(empty) => {
                    args.extend(["-v".into(), format!("{}:{}:ro", text(empty)?, text(h)?)]);
                }
                None => args.extend([
                    "--tmpfs".into(),
                    format!("{}:ro,size=4k,mode=0555", text(h)?),
                ]),
            },
            Some(PathKind::File) => {
                args.extend(["-v".into(), format!("/dev/null:{}:ro", text(h)?)]);
            }
            None => {}
        }
    }
    for r in &spec.reopened {
        if host.kind(r).is_some() && spec.hidden.iter().any(|h| r.starts_with(h)) {
            args.extend(["-v".into(), format!("{}:{}:ro", text(r)?, text(r)?)]);
        }
    }
    args.extend(["--workdir".into(), text(&spec.cwd)?.to_string()]);

    // The SSH agent, so git over SSH works with the user's keys without the keys.
    if options.ssh_agent
        && let Some(sock) = host.var("SSH_AUTH_SOCK").filter(|s| !s.is_empty())
    {
        match (host.os, options.engine) {
            (HostOs::Linux, engine) => {
                let z = if engine == Engine::Podman { ",z" } else { "" };
                args.extend(["-v".into(), format!("{sock}:{SSH_AGENT_INSIDE}:rw{z}")]);
                args.extend(["-e".into(), format!("SSH_AUTH_SOCK={SSH_AGENT_INSIDE}")]);
            }
            (HostOs::MacOs, Engine::Docker) => {
                args.extend([
                    "-v".into(),
                    format!("{MAC_DOCKER_SSH_SOCKET}:{MAC_DOCKER_SSH_SOCKET}:rw"),
                ]);
                args.extend(["-e".into(), format!("SSH_AUTH_SOCK={MAC_DOCKER_SSH_SOCKET}")]);
            }
            (HostOs::MacOs, Engine::Podman) => warnings.push(
                "the SSH agent is not forwarded: cordon cannot yet tunnel it into the Podman machine on macOS (set CORDON_SANDBOX_SSH_AGENT=0 to silence this)".into(),
            ),
        }
    }

    // The environment: the shared allowlist's entries that mean the same in an image (see
    // `crate::env`), never the launcher's whole environment.
    let sorted = options.env_rules.sort(
        host.env
            .iter()
            .filter(|(k, _)| {
                // Asked for by name with --pass-api-keys: passed whatever the list says.
                !(options.pass_api_keys && API_KEYS.contains(&k.as_str()))
            })
            .cloned(),
        Place::Image,
    );
    let env_withheld = sorted.withheld();
    let mut env = sorted.env;
    if options.pass_api_keys {
        env.extend(
            host.env
                .iter()
                .filter(|(k, _)| API_KEYS.contains(&k.as_str()))
                .cloned(),
        );
    }
    env.push(("HOME".into(), text(&container_home)?.to_string()));
    env.push(("GIT_DISCOVERY_ACROSS_FILESYSTEM".into(), "1".into()));
    if let Some(gate) = gate {
        env.retain(|(k, _)| !gate.env.iter().any(|(g, _)| g == k));
        env.extend(gate.env.iter().cloned());
    }
    env.extend(options.env.iter().cloned());
    env.push(("CORDON_SANDBOX".into(), options.name.clone()));
    for (k, v) in env {
        if crate::env::is_secret(&k, &v) || API_KEYS.contains(&k.as_str()) {
            args.extend(["-e".into(), k.clone()]);
            secret_env.push((k, v));
        } else {
            args.extend(["-e".into(), format!("{k}={v}")]);
        }
    }

    if !options.ports.is_empty() && spec.network != NetworkMode::Host {
        return Err(ContainerError::PortsWithoutNetwork);
    }
    for p in &options.ports {
        args.extend(["-p".into(), p.clone()]);
    }
    args.extend(options.flags.iter().cloned());
    args.push(options.image.clone());

    // The command: after the proxy's ports are there, and after the project's start-up file
    // when it has one (both need the image's /bin/sh).
    let mut prelude = Vec::new();
    if gate.is_some() {
        // A fractional sleep where the image's sleep takes one, else whole seconds.
        prelude.push(format!(
            "until [ -e {GATE_INSIDE}/ready ]; do sleep 0.01 2>/dev/null || sleep 1; done"
        ));
    }
    let bashrc = spec.cwd.join(BASHRC);
    if host.kind(&bashrc) == Some(PathKind::File) {
        prelude.push(format!(". {}", quote(text(&bashrc)?)));
    }
    if !prelude.is_empty() {
        prelude.push("exec \"$@\"".into());
        args.extend([
            "/bin/sh".into(),
            "-c".into(),
            prelude.join(" && "),
            "cordon-sandbox".into(),
        ]);
    }
    args.extend(spec.argv.iter().cloned());
    Ok(Invocation {
        program: options.engine.program().to_string(),
        args,
        secret_env,
        warnings,
        env_withheld,
    })
}

#[cfg(test)]
mod tests;
