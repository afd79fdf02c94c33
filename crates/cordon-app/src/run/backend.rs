//! The backends: which sandbox enforces the spec, and `--dry-run`, which shows what
//! would run without running it. The spec is built the same way for every backend; this
//! module takes over where the Linux backend would start.
//!
//! Seatbelt runs only on macOS, but its profile and command line are built and printed on
//! any OS, and the code that runs them is compiled (and, with stand-ins, tested) here too.

use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use cordon_sandbox::container::Engine;
pub use cordon_sandbox::env::Place;
use cordon_sandbox::seatbelt::{self, NamedProfile, Options, ProfileChoice, Programs};
use cordon_sandbox::{Limits, SandboxSpec, Violation};
use serde::{Deserialize, Serialize};

use super::container::{ContainerOptions, SandboxVar, run_container, sandbox_var};
use super::kubernetes::KubeOptions;
use crate::config::RunConfig;
use crate::proxy::AskVia;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Namespaces, Landlock and seccomp (Linux).
    Linux,
    /// Seatbelt, through /usr/bin/sandbox-exec (macOS).
    Seatbelt,
    /// A Docker container (see `ContainerOptions::image`).
    Docker,
    /// A Podman container.
    Podman,
    /// A container, in Docker or else Podman, whichever is installed.
    Container,
    /// A pod on a Kubernetes cluster (agent-sandbox's `Sandbox`, or a plain `Pod`).
    Kubernetes,
}

impl Backend {
    /// Every backend's name, as `--backend` and `sandbox.backend` take it.
    pub const NAMES: [&'static str; 6] = [
        "linux",
        "seatbelt",
        "docker",
        "podman",
        "container",
        "kubernetes",
    ];

    pub fn name(self) -> &'static str {
        match self {
            Backend::Linux => "linux",
            Backend::Seatbelt => "seatbelt",
            Backend::Docker => "docker",
            Backend::Podman => "podman",
            Backend::Container => "container",
            Backend::Kubernetes => "kubernetes",
        }
    }
}

impl std::str::FromStr for Backend {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        [
            Backend::Linux,
            Backend::Seatbelt,
            Backend::Docker,
            Backend::Podman,
            Backend::Container,
            Backend::Kubernetes,
        ]
        .into_iter()
        .find(|b| b.name().eq_ignore_ascii_case(s))
        .ok_or_else(|| {
            format!(
                "`{s}` is not a backend cordon knows ({})",
                Self::NAMES.join(", ")
            )
        })
    }
}

/// Which sandbox enforces a run, and how.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BackendChoice {
    /// `None`: `$CORDON_SANDBOX` when it names an engine, else the settings', else this OS's own.
    pub backend: Option<Backend>,
    /// Print what would run and run nothing.
    pub dry_run: bool,
    /// The Seatbelt profile by name, or a `.sb` file.
    pub seatbelt_profile: Option<String>,
    pub container: ContainerOptions,
    pub kubernetes: KubeOptions,
}

impl BackendChoice {
    /// The backend's name.
    pub fn name(&self) -> &'static str {
        self.backend().name()
    }

    /// The backend chosen: by flag or setting, else by `CORDON_SANDBOX`, else this OS's own.
    pub fn backend(&self) -> Backend {
        if let Some(b) = self.backend {
            return b;
        }
        // A program inside one of cordon's containers sees CORDON_SANDBOX set to the
        // container's name, which is not an engine: it never launches another.
        match sandbox_var() {
            SandboxVar::Engine(Engine::Docker) => Backend::Docker,
            SandboxVar::Engine(Engine::Podman) => Backend::Podman,
            SandboxVar::Auto => Backend::Container,
            SandboxVar::Kubernetes => Backend::Kubernetes,
            SandboxVar::Unset | SandboxVar::Inside(_) if cfg!(target_os = "macos") => {
                Backend::Seatbelt
            }
            SandboxVar::Unset | SandboxVar::Inside(_) => Backend::Linux,
        }
    }

    /// The settings' `sandbox.backend`, `container.image` and `container.profile`, each where
    /// neither a flag nor its `CORDON_SANDBOX*` variable chose already (a program inside one
    /// of cordon's containers, whose `CORDON_SANDBOX` names it, keeps the sandbox there).
    /// The backend is then named, so that `CORDON_SANDBOX` is read once, here.
    pub fn settle(&mut self, config: &RunConfig) -> anyhow::Result<()> {
        if self.backend.is_none()
            && sandbox_var() == SandboxVar::Unset
            && let Some(name) = &config.backend
        {
            self.backend = Some(
                name.parse()
                    .map_err(|e| anyhow::anyhow!("sandbox.backend: {e}"))?,
            );
        }
        self.backend = Some(self.backend());
        if self.container_engine().is_some() || self.backend() == Backend::Kubernetes {
            self.container.settle(
                config.container_image.clone(),
                config.container_profile.clone(),
            );
        }
        Ok(())
    }

    /// `Some` for the container backends: the engine asked for, `None` for either.
    pub fn container_engine(&self) -> Option<Option<Engine>> {
        match self.backend() {
            Backend::Docker => Some(Some(Engine::Docker)),
            Backend::Podman => Some(Some(Engine::Podman)),
            Backend::Container => Some(None),
            Backend::Linux | Backend::Seatbelt | Backend::Kubernetes => None,
        }
    }

    /// Refuses combinations that cannot run here, before anything is set up.
    pub fn validate(&self) -> anyhow::Result<()> {
        let kube = self.backend() == Backend::Kubernetes;
        if self.kubernetes.is_set() && !kube {
            bail!(
                "--k8s-kind, --k8s-pool, --k8s-loosen, --k8s-workspace, --k8s-volume-size, --namespace, --runtime-class and --k8s-proxy-image are for the kubernetes backend; add --backend kubernetes"
            );
        }
        match self.backend() {
            Backend::Kubernetes if self.seatbelt_profile.is_some() => {
                bail!("--seatbelt-profile is for the seatbelt backend; add --backend seatbelt")
            }
            Backend::Kubernetes
                if self.container.container_profile.is_some()
                    || self.container.pass_api_keys
                    || self.container.no_ssh_agent =>
            {
                bail!(
                    "--container-profile, --pass-api-keys and --no-ssh-agent are for the container backends; a pod takes --image only"
                )
            }
            Backend::Docker | Backend::Podman | Backend::Container
                if self.seatbelt_profile.is_some() =>
            {
                bail!("--seatbelt-profile is for the seatbelt backend; add --backend seatbelt")
            }
            Backend::Linux | Backend::Seatbelt if self.container.is_set() => bail!(
                "--image, --container-profile, --pass-api-keys and --no-ssh-agent are for the container backends; add --backend docker, podman or container"
            ),
            Backend::Linux if self.seatbelt_profile.is_some() => {
                bail!("--seatbelt-profile is for the seatbelt backend; add --backend seatbelt")
            }
            Backend::Linux if !cfg!(target_os = "linux") && !self.dry_run => {
                bail!(
                    "--backend linux: that sandbox exists only on Linux; add --dry-run to see the spec"
                )
            }
            Backend::Seatbelt if !cfg!(target_os = "macos") && !self.dry_run => bail!(
                "--backend seatbelt: Seatbelt exists only on macOS; add --dry-run to print the profile and the sandbox-exec command it would run"
            ),
            _ => Ok(()),
        }
    }

    /// Where the command runs: this machine's programs, or an image's (a container's, a
    /// pod's). It decides what of the environment the command may get (`cordon_sandbox::env`)
    /// and which bash runs a command line (`cordon_sandbox::shell`).
    pub fn env_place(&self) -> Place {
        match self.backend() {
            Backend::Linux | Backend::Seatbelt => Place::Host,
            Backend::Docker | Backend::Podman | Backend::Container | Backend::Kubernetes => {
                Place::Image
            }
        }
    }

    /// Whether the command runs from an image's files rather than this machine's.
    pub fn in_image(&self) -> bool {
        self.env_place() == Place::Image
    }

    /// Whether this run is a real one on the Linux backend (which alone uses control groups).
    pub fn runs_linux(&self) -> bool {
        self.backend() == Backend::Linux && !self.dry_run
    }
}

/// Everything `cordon run` knows that a backend other than a real Linux run needs.
#[derive(Debug)]
pub struct Elsewhere<'a> {
    pub spec: &'a SandboxSpec,
    /// How the run is already confined less strictly than asked, found before it.
    pub weaker: &'a [String],
    /// The limits asked for, before the Linux backend decided how to hold them.
    pub wanted: &'a Limits,
    pub own_settings: &'a [PathBuf],
    /// The git metadata found before the run, for the check after it.
    pub git: &'a cordon_sandbox::gitmeta::GitMeta,
    pub git_limit: usize,
    pub report: Option<&'a Path>,
    /// The run's configuration: its hosts (a container gets cordon's proxy when any is
    /// allowed), `max_processes` as set (a container profile's default applies otherwise),
    /// `--deny-read` as typed (its patterns also hide paths made later under Seatbelt), and
    /// `ignore_violations`.
    pub config: &'a RunConfig,
    /// Who decides about hosts no rule names.
    pub ask: Option<AskVia>,
    /// `--publish` was given (containers publish with `CORDON_SANDBOX_PORTS` instead).
    pub publishes: bool,
    /// The program is `cordon mcp`'s worker (containers only).
    pub worker: Option<&'a super::container::Worker>,
    /// The launcher's variables not in `spec.env`, by name.
    pub env_withheld: &'a [String],
    /// cordon's guard journal, for a run guarded after it (Seatbelt).
    pub journal: Option<&'a cordon_sandbox::journal::Journal>,
    /// The run's share of its session's processes, which bounds a container's too.
    pub session_share: Option<u64>,
}

/// Runs (or, with `--dry-run`, shows) the spec on any backend but a real Linux run, and
/// returns the exit status; `None` means: go on with the Linux backend.
pub fn run_elsewhere(args: &BackendChoice, run: Elsewhere<'_>) -> anyhow::Result<Option<u8>> {
    if let Some(engine) = args.container_engine() {
        return run_container(engine, &args.container, args.dry_run, &run).map(Some);
    }
    match (args.backend(), args.dry_run) {
        (Backend::Linux, false) => Ok(None),
        (Backend::Linux, true) => {
            println!("{}", serde_json::to_string_pretty(run.spec)?);
            Ok(Some(0))
        }
        (Backend::Seatbelt, dry_run) => {
            let (profile, options) = seatbelt_profile(args, &run)?;
            if dry_run {
                print_dry_run(run.spec, &profile, &options)?;
                return Ok(Some(0));
            }
            if cfg!(target_os = "macos") {
                run_seatbelt(&run, &profile, &options).map(Some)
            } else {
                args.validate()?;
                bail!("--backend seatbelt: Seatbelt exists only on macOS")
            }
        }
        (Backend::Kubernetes, true) => {
            super::kubernetes::print(&args.kubernetes, args.container.image.as_deref(), &run)?;
            Ok(Some(0))
        }
        (Backend::Kubernetes, false) => {
            super::kubernetes::run(&args.kubernetes, args.container.image.as_deref(), &run)
                .map(Some)
        }
        (Backend::Docker | Backend::Podman | Backend::Container, _) => {
            unreachable!("container backends are handled above")
        }
    }
}

/// A tag no other run shares: the process id, the time, and the standard library's
/// per-process random hash keys.
pub fn run_tag() -> String {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    format!("{:016x}", h.finish())
}

fn seatbelt_profile(
    args: &BackendChoice,
    run: &Elsewhere<'_>,
) -> anyhow::Result<(seatbelt::Profile, Options)> {
    let tag = run_tag();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut hidden_globs = Vec::new();
    for p in &run.config.deny_read {
        let Some(text) = p
            .to_str()
            .filter(|t| cordon_sandbox::pattern::is_wild(t.as_ref()))
        else {
            continue;
        };
        let absolute = match text.strip_prefix("~/") {
            Some(rest) => home
                .as_ref()
                .with_context(|| format!("--deny-read {text}: ~ needs HOME to be set"))?
                .join(rest),
            None => run.spec.cwd.join(text),
        };
        hidden_globs.push(absolute.to_string_lossy().into_owned());
    }
    let (choice, own_file) = match args.seatbelt_profile.as_deref() {
        None => (ProfileChoice::Spec, None),
        Some(name) => match NamedProfile::parse(name) {
            Some(named) => (ProfileChoice::Named(named), None),
            None if name.ends_with(".sb") || name.contains('/') => {
                let text = std::fs::read_to_string(name).with_context(|| {
                    format!("--seatbelt-profile {name}: cannot read the profile")
                })?;
                (ProfileChoice::Spec, Some(text))
            }
            None => return Err(seatbelt::ProfileError::Unknown(name.to_string()).into()),
        },
    };
    let options = Options {
        tmpdir: std::env::temp_dir().join(format!("cordon-{tag}")),
        tag,
        hidden_globs,
        choice,
    };
    let profile = seatbelt::generate(run.spec, &options)?;
    let profile = match own_file {
        Some(text) => profile.with_text(text),
        None => profile,
    };
    Ok((profile, options))
}

fn quote(s: &str) -> anyhow::Result<String> {
    Ok(shlex::try_quote(s)
        .context("a NUL byte cannot be passed to a command")?
        .into_owned())
}

fn print_dry_run(
    spec: &SandboxSpec,
    profile: &seatbelt::Profile,
    options: &Options,
) -> anyhow::Result<()> {
    println!("---- seatbelt profile (cordon run --dry-run: nothing was run) ----");
    print!("{}", profile.text);
    if !profile.text.ends_with('\n') {
        println!();
    }
    println!("---- parameters ----");
    for (k, v) in &profile.params {
        println!("{k}={}", quote(v)?);
    }
    println!("---- environment ----");
    let names: Vec<&str> = spec.env.iter().map(|(k, _)| k.as_str()).collect();
    println!(
        "only these variables ({}), and TMPDIR={}: {}",
        names.len(),
        quote(&options.tmpdir.to_string_lossy())?,
        names.join(" ")
    );
    println!("---- command (in {}) ----", spec.cwd.display());
    let line = profile
        .command_line(&spec.argv)
        .iter()
        .map(|a| quote(a))
        .collect::<anyhow::Result<Vec<_>>>()?;
    println!("{}", line.join(" "));
    Ok(())
}

/// What Seatbelt cannot enforce of the limits asked for.
fn unenforced(wanted: &Limits) -> Vec<String> {
    let mut out = vec![
        "the number of processes is not bounded (macOS has no per-sandbox process limit)"
            .to_string(),
        "processes the command leaves in the background outlive it".to_string(),
    ];
    if wanted.memory_bytes.is_some() {
        out.push("--memory is not enforced by the seatbelt backend".to_string());
    }
    if wanted.cpu_seconds.is_some() {
        out.push("--cpu-time is not enforced by the seatbelt backend".to_string());
    }
    if wanted.cpu_millis.is_some() {
        out.push("--cpus is not enforced by the seatbelt backend".to_string());
    }
    out
}

/// A real run under sandbox-exec (macOS only; compiled everywhere so it is checked).
fn run_seatbelt(
    run: &Elsewhere<'_>,
    profile: &seatbelt::Profile,
    options: &Options,
) -> anyhow::Result<u8> {
    let spec = run.spec;
    let weaker: Vec<String> = unenforced(run.wanted)
        .into_iter()
        .chain(super::git_search_weaker(run.git, run.git_limit))
        .chain(run.weaker.iter().cloned())
        .collect();
    eprintln!("cordon: warning: this run is confined less strictly than asked:");
    for w in &weaker {
        eprintln!("cordon:   - {w}");
    }
    let mut not_entered = Vec::new();
    let held = super::journal::hold(run.journal, &mut not_entered)?;
    super::journal::recover(held.as_ref(), &spec.cwd, &spec.writable);
    let mut guard = super::guard_before(run.config, spec, run.own_settings, run.git, run.git_limit);
    super::journal::enter(held.as_ref(), &mut guard, &mut not_entered);
    drop(held);
    for w in &not_entered {
        eprintln!("cordon:   - {w}");
    }
    let result = seatbelt::run(
        spec,
        profile,
        &options.tmpdir,
        &options.tag,
        &run.config.ignore_violations,
        &Programs::default(),
    );
    let undone = guard.undo();
    let mut blocked: Vec<Violation> = super::undo_failures(&undone, &[])
        .chain(undone.undone.iter().map(Violation::from))
        .collect();
    let end = match &result {
        Ok(ended) => {
            blocked.extend(ended.violations.iter().cloned());
            if ended.timed_out {
                eprintln!("cordon: the command ran longer than --timeout and was killed");
            }
            super::End {
                code: u8::try_from(ended.code).unwrap_or(u8::MAX),
                signal: ended.signal,
                timed_out: ended.timed_out,
                error: None,
            }
        }
        Err(e) => {
            eprintln!("cordon: {e}");
            super::End::failed(e.exit_code(), e.to_string())
        }
    };
    let code = super::undo_failed_code(&blocked).unwrap_or(end.code);
    super::tell_what_happened(&blocked, &weaker, run.env_withheld, end, run.report, false)?;
    Ok(code)
}

/// Host facilities the Linux backend uses; elsewhere there are none.
#[cfg(target_os = "linux")]
pub use cordon_sandbox::linux::{
    RunError, RunOutcome, UndoWatch, cgroups::RunCgroups, is_root, pid_max_per_namespace,
    run as run_linux,
};

#[cfg(not(target_os = "linux"))]
pub use not_linux::{
    RunCgroups, RunError, RunOutcome, UndoWatch, is_root, pid_max_per_namespace, run_linux,
};

/// Stand-ins with the Linux backend's shapes, so `cordon run` builds its spec the same way on
/// every OS. `validate` keeps them from ever being asked to run anything. Compiled on Linux
/// too, so they are checked where the project is built.
#[cfg_attr(target_os = "linux", allow(dead_code))]
mod not_linux {
    use std::path::PathBuf;

    use cordon_sandbox::{Limits, SandboxSpec, Violation};

    #[derive(Debug, Default)]
    pub struct RunCgroups;

    /// No watcher: the Linux backend's only.
    #[derive(Debug)]
    pub struct UndoWatch;

    impl UndoWatch {
        pub fn start(_: impl FnOnce()) -> std::io::Result<Option<UndoWatch>> {
            Ok(None)
        }

        pub fn disarm(self) {}
    }

    impl RunCgroups {
        pub fn create(_: &Limits) -> (Self, Vec<&'static str>) {
            (RunCgroups, Vec::new())
        }

        pub fn procs_files(&self) -> Vec<PathBuf> {
            Vec::new()
        }

        pub fn memory_killed(&self) -> bool {
            false
        }
    }

    pub fn is_root() -> bool {
        false
    }

    pub fn pid_max_per_namespace() -> bool {
        false
    }

    #[derive(Debug)]
    pub struct RunOutcome {
        pub code: i32,
        pub signal: Option<i32>,
        pub timed_out: bool,
        pub weaker: Vec<String>,
        pub restored: Vec<PathBuf>,
        pub unrestored: Vec<(PathBuf, String)>,
        pub inferred: Vec<Violation>,
    }

    #[derive(Debug)]
    pub struct RunError;

    impl std::fmt::Display for RunError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("the linux backend runs only on Linux; use --backend seatbelt")
        }
    }

    impl RunError {
        pub fn exit_code(&self) -> u8 {
            cordon_sandbox::exit::SETUP_FAILED
        }
    }

    pub fn run_linux(_: &SandboxSpec) -> Result<RunOutcome, RunError> {
        Err(RunError)
    }
}
