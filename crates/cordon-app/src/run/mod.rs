//! Running a command in the sandbox: the plan made real on the chosen backend, the proxy
//! for allowed hosts, and the report of what happened. `cordon run` is this, and so is each
//! command `exec`, `shell` and `mcp` run (in a child process of its own, sent a
//! [`crate::child::Request`]).

pub mod backend;
pub mod container;
pub mod journal;
pub mod kubernetes;
#[cfg(target_os = "linux")]
pub mod warm;

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use cordon_sandbox::{
    Isolation, Limits, MadeForRun, NetworkMode, RunGuard, SandboxSpec, Violation, gitmeta,
    gitmeta::GitMeta, kept, kept::SettingsFiles,
};
use serde::{Deserialize, Serialize};

use crate::config::{RunConfig, Sources};
use crate::plan::{Plan, plan};
use crate::proxy::{AskVia, Publish, RunProxy};
use backend::{BackendChoice, Elsewhere, RunCgroups, UndoWatch, run_linux as run_sandboxed};

/// Processes (and threads) a run may have at once unless told otherwise.
const DEFAULT_MAX_PROCESSES: u64 = 4096;

/// What a run is asked to do besides its configuration: the command, and how it is told.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Launch {
    /// What runs.
    pub program: Program,
    /// Which sandbox enforces the run.
    pub backend: BackendChoice,
    /// `--publish`: host ports that lead to ports on the sandbox's loopback.
    pub publish: Vec<Publish>,
    /// `--ask-domains`: who decides about a host no rule allows or denies.
    pub ask_domains: Option<AskVia>,
    /// Write what happened as JSON to this file (`-`: standard output once it has ended).
    pub report: Option<PathBuf>,
    /// What the sandbox blocked and what is weaker than asked go only to the report.
    pub report_only: bool,
    /// Standard input is a terminal made for this run alone, which the command may take as
    /// its controlling terminal.
    pub own_terminal: bool,
    /// The time limit, over the settings' (each run of `exec` has its own).
    pub timeout: Option<f64>,
    /// The limits of the session the run belongs to (`exec`, `mcp`): its process limit is at
    /// most its share of the session's ([`crate::config::SessionLimits::share`]).
    #[serde(default)]
    pub session: Option<crate::config::SessionLimits>,
    /// Set by `cordon mcp --backend docker|podman`, whose server runs as this run's program.
    #[serde(skip)]
    pub worker: Option<container::Worker>,
}

/// What a run executes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Program {
    /// A program and its arguments, run as given.
    Argv(Vec<String>),
    /// A shell command line, as the policy reads it: run by bash and no other shell
    /// ([`cordon_sandbox::shell`]), on the host or in the image.
    Script(String),
}

impl Default for Program {
    fn default() -> Self {
        Program::Argv(Vec::new())
    }
}

impl Program {
    fn is_empty(&self) -> bool {
        matches!(self, Program::Argv(argv) if argv.is_empty())
    }

    /// The words to execute: a command line goes to the bash of the machine the command runs
    /// on, this one's or, `in_image`, the container's or pod's (found there as it starts).
    pub fn argv(&self, in_image: bool) -> Result<Vec<String>, cordon_sandbox::shell::NoBash> {
        match self {
            Program::Argv(argv) => Ok(argv.clone()),
            Program::Script(s) if in_image => Ok(cordon_sandbox::shell::image_argv(s)),
            Program::Script(s) => cordon_sandbox::shell::host_argv(s),
        }
    }

    /// The command as `ignore_violations` matches it: the command line itself (also of an
    /// explicit `/bin/sh -c LINE`), else the words joined.
    pub fn shown(&self) -> String {
        match self {
            Program::Script(s) => s.clone(),
            Program::Argv(argv) => match argv.as_slice() {
                [sh, c, script] if sh == "/bin/sh" && c == "-c" => script.clone(),
                _ => argv.join(" "),
            },
        }
    }
}

/// Which shell runs the command lines cordon decides, where `backend` runs them, as `explain`
/// and `doctor` say it.
pub fn shell_said(backend: &BackendChoice) -> String {
    use cordon_sandbox::shell;
    if backend.in_image() {
        return format!(
            "the image's bash (looked for at {} as each command starts; without it the command is refused, never run by another shell)",
            shell::BASH_PATHS[..3].join(", ")
        );
    }
    match shell::host_bash() {
        Some(bash) => format!(
            "{} --noprofile --norc -c: bash, the grammar the policy reads",
            bash.display()
        ),
        None => format!("none: {}", shell::NoBash),
    }
}

impl Launch {
    /// The most processes the run may have as its part of its session's, if it is in one.
    pub fn session_share(&self) -> Option<u64> {
        self.session.map(|s| s.share())
    }
}

/// A run with the settings `sources` find: merged, planned, and run as `launch` says. Returns
/// `cordon run`'s exit status.
pub fn run(sources: &Sources, mut launch: Launch) -> anyhow::Result<u8> {
    let mut config = sources.resolve()?;
    for why in &config.left_out {
        eprintln!("cordon: warning: settings left out: {why}");
    }
    launch.backend.settle(&config)?;
    launch.backend.validate()?;
    if let Some(t) = launch.timeout {
        config.timeout = Some(t);
    }
    if launch.worker.is_some() {
        // The settings' time limit is for each command, which the worker keeps; the session
        // lasts as long as its client.
        config.timeout = None;
    }
    if launch.program.is_empty() {
        bail!(
            "give a command (`cordon run ls -la`; put `--` before one that starts with `-`) or a shell string with -c"
        );
    }
    // A run on this machine is guarded after it (`RunGuard`), through cordon's journal, whose
    // lock is held from before the plan until the guard is in it.
    let journal = (!launch.backend.dry_run && !launch.backend.in_image())
        .then(journal::journal)
        .flatten();
    let mut weaker = Vec::new();
    // Held here for the Linux backend; Seatbelt takes it once the plan is made (its command
    // runs inside `run_elsewhere`, and the lock must not be held while it runs).
    let held = if launch.backend.runs_linux() {
        journal::hold(journal.as_ref(), &mut weaker)?
    } else {
        None
    };
    let plan = plan(&config)?;
    plan.warn();
    // Put back when the run ends, whatever the command left them as.
    #[cfg(target_os = "linux")]
    let _modes = crate::terminal::SavedModes::keep(std::io::stdin());
    // Containers and clusters keep no guard of cordon's: the agent's settings files a
    // container mounts are put back here.
    let unguarded = config
        .agent_settings
        .as_ref()
        .filter(|_| launch.backend.container_engine().is_some() && !launch.backend.dry_run)
        .map(SettingsFiles::read);
    let code = run_planned(&config, &launch, plan, (journal.as_ref(), held), weaker)?;
    let Some(kept) = unguarded else {
        return Ok(code);
    };
    let undone = kept::put_back_now(&kept);
    for v in undone.undone.iter().map(Violation::from) {
        eprintln!("cordon: {}", v.describe());
    }
    let failed: Vec<Violation> = undo_failures(&undone, &[]).collect();
    Ok(undo_failed_code(&failed).unwrap_or(code))
}

/// The guard of a run, taken before it: the protected paths not there yet, and the agent's
/// settings files as they are now.
pub(crate) fn guard_before(
    config: &RunConfig,
    spec: &SandboxSpec,
    own_settings: &[PathBuf],
    git: &GitMeta,
    git_limit: usize,
) -> RunGuard {
    let guarded: Vec<PathBuf> = spec
        .writable
        .iter()
        .filter(|w| !crate::caches::is_caches(w))
        .cloned()
        .collect();
    let mut guard = RunGuard::before(&spec.cwd, &guarded, own_settings, git, git_limit);
    if let Some(files) = &config.agent_settings {
        guard.keep_settings(files);
    }
    guard
}

/// How the sandbox may isolate a run with `config`.
fn isolation(config: &RunConfig) -> Isolation {
    if config.fail_if_unavailable {
        Isolation::Namespaces
    } else if std::env::var_os("CORDON_SANDBOX_LANDLOCK_ONLY").is_some() {
        // What runs where user namespaces are missing, on demand: for tests, and for people
        // who want to see what that mode does.
        Isolation::LandlockOnly
    } else {
        Isolation::Auto
    }
}

/// The lowest `pid_max` the kernel takes: a PID namespace's own bounds a run exactly only
/// above it.
const PID_MAX_FLOOR: u64 = 301;

/// The limits a run with `config` asks for (its process limit at most `share`, its part of a
/// session's), and those of them that control groups are to enforce (where cordon can make
/// them).
fn limits(
    config: &RunConfig,
    share: Option<u64>,
    isolation: Isolation,
    timeout: Option<std::time::Duration>,
) -> (Limits, Limits) {
    // Limits: control groups where cordon may make them (root), else rlimits, which hold per
    // user namespace for processes (not at all for root) and per process for memory. Where
    // each PID namespace has its own pid_max, that bounds processes too, for root as well:
    // root's default limit then needs no pids group, whose set-up (a cgroup v1 attach) can
    // stall a run for milliseconds. An explicit --max-processes stays exact, and so does a
    // session's share too small for pid_max to hold exactly.
    let max_processes = config
        .max_processes
        .unwrap_or(DEFAULT_MAX_PROCESSES)
        .min(share.unwrap_or(u64::MAX));
    let pid_max = (isolation != Isolation::LandlockOnly && backend::pid_max_per_namespace())
        .then_some(max_processes + 1);
    let wanted = Limits {
        max_processes: Some(max_processes),
        pid_max,
        memory_bytes: config.memory,
        // Whether or not a memory cgroup would also count them.
        scratch_bytes: config.memory,
        cpu_seconds: config.cpu_time,
        cpu_millis: config.cpus,
        timeout,
    };
    let grouped = Limits {
        max_processes: wanted.max_processes.filter(|_| {
            config.max_processes.is_some() || pid_max.is_none_or(|n| n < PID_MAX_FLOOR)
        }),
        ..wanted
    };
    (wanted, grouped)
}

/// Whether a run with `config`, as `launch` asks, needs control groups for its limits.
pub(crate) fn needs_groups(config: &RunConfig, launch: &Launch) -> bool {
    let (_, grouped) = limits(config, launch.session_share(), isolation(config), None);
    grouped.max_processes.is_some()
        || grouped.memory_bytes.is_some()
        || grouped.cpu_millis.is_some()
}

/// A run's sandbox as the settings and plan make it, with what was made for it, before
/// anything runs.
pub(crate) struct Prepared {
    pub spec: SandboxSpec,
    /// The limits asked for, before control groups took some of them over.
    pub wanted: Limits,
    pub groups: RunCgroups,
    /// What the run made to keep read-only (cordon's state directories), removed when dropped.
    pub made: MadeForRun,
    /// What could not be made, as weaker.
    pub unmade: Vec<String>,
    pub own_settings: Vec<PathBuf>,
    pub git: GitMeta,
    pub git_limit: usize,
    /// What to tell the person before the run: limits that could not be enforced as asked.
    pub warnings: Vec<&'static str>,
    /// The launcher's variables the command does not get, by name.
    pub env_withheld: Vec<String>,
}

/// The spec for `plan`, with control groups made for its limits.
pub(crate) fn prepare(config: &RunConfig, launch: &Launch, plan: Plan) -> anyhow::Result<Prepared> {
    let argv = launch.program.argv(launch.backend.in_image())?;
    let Plan {
        timeout,
        cwd,
        writable,
        read_only,
        own_settings,
        hidden,
        reopened,
        unix_sockets,
        git,
        git_limit,
        caches,
        warnings: _,
    } = plan.for_backend(&launch.backend);
    let sorted = config
        .env_rules()?
        .sort(launch_environment(), launch.backend.env_place());
    let env_withheld = sorted.withheld();
    let mut env = sorted.env;
    if matches!(launch.program, Program::Script(_)) {
        // Whatever the lists pass, bash would read code or options from these.
        env.retain(|(k, _)| !cordon_sandbox::shell::changes_the_shell(k));
    }
    if let Some(caches) = &caches {
        if !launch.backend.dry_run {
            caches.make().with_context(|| {
                format!(
                    "cannot make the project's package caches in {}",
                    caches.root.display()
                )
            })?;
        }
        let vars = caches.vars();
        env.retain(|(k, _)| !vars.iter().any(|(v, _)| v == k));
        env.extend(vars);
    }
    let isolation = isolation(config);
    let (wanted, grouped) = limits(config, launch.session_share(), isolation, timeout);
    let (groups, missed) = if launch.backend.runs_linux() {
        RunCgroups::create(&grouped)
    } else {
        Default::default()
    };
    let mut warnings = Vec::new();
    let mut unbounded = None;
    if missed.contains(&"max-processes") && backend::is_root() {
        if let Some(pid_max) = wanted.pid_max {
            // At or above the floor, pid_max holds the limit as asked.
            if pid_max < PID_MAX_FLOOR {
                warnings.push(
                    "no pids cgroup could be made; the sandbox's own pid_max holds it to 300 processes, more than the limit asked",
                );
            }
        } else {
            warnings.push(
                "no pids cgroup could be made, and process limits do not bind root; --max-processes is not enforced",
            );
            // Nor, then, the processes of the session the run belongs to.
            unbounded = Some(
                "nothing bounds the number of processes: as root that takes a pids cgroup (cgroup v1) or Linux 6.14's pid_max per PID namespace, and neither is here"
                    .to_string(),
            );
        }
    }
    if missed.contains(&"memory") {
        warnings.push(
            "no memory cgroup could be made; --memory limits each process's address space instead of the whole sandbox",
        );
    }
    if missed.contains(&"cpus") {
        warnings.push(
            "no cpu cgroup could be made (cordon makes them only as root, on cgroup v1); --cpus is not enforced, --cpu-time limits each process instead",
        );
    }
    let limits = Limits {
        memory_bytes: wanted.memory_bytes.filter(|_| missed.contains(&"memory")),
        cpu_millis: None,
        ..wanted
    };
    let identity = cwd_identity(&cwd)?;
    let mut spec = SandboxSpec {
        argv,
        cwd,
        env,
        writable,
        read_only,
        hidden,
        reopened,
        unix_sockets,
        limits,
        cgroups: groups.procs_files(),
        network: if config.host_network {
            NetworkMode::Host
        } else {
            NetworkMode::None
        },
        isolation,
        allow_local_binding: config.allow_local_binding || !launch.publish.is_empty(),
        inbound: None,
        own_terminal: launch.own_terminal && std::io::IsTerminal::is_terminal(&std::io::stdin()),
        cwd_identity: Some(identity),
    };
    if config.net.any_allowed() && config.host_network {
        bail!("--allow-domain needs the sandbox's own network (--network none, the default)");
    }
    if !launch.publish.is_empty() && config.host_network {
        bail!(
            "--publish needs the sandbox's own network (--network none, the default); with --network host the command listens on the host's directly"
        );
    }
    // cordon reads its settings live (exec per request, the proxy every few seconds), so
    // those that do not exist yet are made now, to be read-only during the run like the rest,
    // on every backend (a container's mounts show only what exists).
    let (made, unmade) = if launch.backend.dry_run {
        (MadeForRun::default(), Vec::new())
    } else {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let state_dirs: Vec<PathBuf> = own_settings
            .iter()
            .cloned()
            .chain(
                // Where `Places::from` looks for a project's settings.
                spec.cwd
                    .ancestors()
                    .take_while(|d| home.as_deref() != Some(*d))
                    .map(|d| d.join(".cordon")),
            )
            .collect();
        let (made, keep, unmade) = MadeForRun::make(&state_dirs, &spec.cwd, &spec.writable);
        spec.read_only.extend(keep);
        (made, unmade)
    };
    let unmade: Vec<String> = unmade.into_iter().chain(unbounded).collect();
    Ok(Prepared {
        spec,
        wanted,
        groups,
        made,
        unmade,
        own_settings,
        git,
        git_limit,
        warnings,
        env_withheld,
    })
}

/// This process's environment, as a run sorts it: a variable whose name or value is not
/// UTF-8 is never passed (and is not reported either: its name may not print).
pub fn launch_environment() -> impl Iterator<Item = (String, String)> {
    std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
}

fn run_planned(
    config: &RunConfig,
    launch: &Launch,
    plan: Plan,
    (journal, held): (
        Option<&cordon_sandbox::journal::Journal>,
        Option<cordon_sandbox::journal::Held<'_>>,
    ),
    mut weaker: Vec<String>,
) -> anyhow::Result<u8> {
    journal::recover(held.as_ref(), &plan.cwd, &plan.writable);
    let Prepared {
        mut spec,
        wanted,
        groups,
        made,
        mut unmade,
        own_settings,
        git,
        git_limit,
        warnings,
        env_withheld,
    } = prepare(config, launch, plan)?;
    for w in warnings {
        eprintln!("cordon: warning: {w}");
    }
    unmade.append(&mut weaker);
    let elsewhere = Elsewhere {
        spec: &spec,
        weaker: &unmade,
        wanted: &wanted,
        own_settings: &own_settings,
        git: &git,
        git_limit,
        report: launch.report.as_deref(),
        config,
        ask: launch.ask_domains,
        publishes: !launch.publish.is_empty(),
        worker: launch.worker.as_ref(),
        env_withheld: &env_withheld,
        journal,
        session_share: launch.session_share(),
    };
    tracing::debug!("sandbox spec: {spec:?}");
    if let Some(code) = backend::run_elsewhere(&launch.backend, elsewhere)? {
        return Ok(code);
    }
    let mut guard = guard_before(config, &spec, &own_settings, &git, git_limit);
    journal::enter(held.as_ref(), &mut guard, &mut unmade);
    drop(held);
    // Should this process be killed before it undoes what the run left, a process of its
    // own does it (started before the proxy, so it holds none of the proxy's descriptors).
    let watch = UndoWatch::start(|| guard.undo().say_left_after("`cordon run`"))
        .context("cannot start the process that undoes what a run leaves")?;
    // Allowed hosts: cordon's proxy becomes the command's only way out.
    let proxy = RunProxy::start(config, launch.ask_domains, &launch.publish)?;
    spec.inbound = proxy.as_ref().and_then(|p| p.inbound.clone());
    if let Some(endpoint) = proxy.as_ref().and_then(|p| p.endpoint.as_ref()) {
        let vars = crate::proxy::environment(endpoint);
        spec.env.retain(|(k, _)| !vars.iter().any(|(v, _)| v == k));
        spec.env.extend(vars);
        spec.network = NetworkMode::Proxy(endpoint.clone());
        // `cordon connect` (ssh's ProxyCommand) is this binary; under /tmp, which the sandbox
        // replaces with its own, it is shown read-only.
        if let Ok(exe) = std::env::current_exe().and_then(std::fs::canonicalize)
            && exe.starts_with("/tmp")
        {
            spec.reopened.push(exe);
        }
    }
    let result = run_sandboxed(&spec);
    // A kill by the memory limit looks like any SIGKILL (137) from inside.
    if groups.memory_killed() && !launch.report_only {
        eprintln!(
            "cordon: the command went over its memory limit ({} bytes) and the kernel killed it; raise it with --memory SIZE or [limits] memory",
            config.memory.unwrap_or_default()
        );
    }
    drop(groups);
    let refused: Vec<Violation> = proxy
        .map(RunProxy::finish)
        .unwrap_or_default()
        .iter()
        .map(Violation::from)
        .collect();
    let undone = guard.undo();
    drop(made);
    if let Some(watch) = watch {
        watch.disarm();
    }
    conclude(
        config,
        launch,
        (&git, git_limit, &unmade, &env_withheld),
        result,
        refused,
        undone,
    )
    .map(|(code, _)| code)
}

/// What was settled before the run: (the git search, its limit, what of the state
/// directories could not be made, the variables withheld).
pub(crate) type Before<'a> = (&'a GitMeta, usize, &'a [String], &'a [String]);

/// After a Linux run, cold or warm: what was weaker, what the sandbox blocked and what cordon
/// undid, told as `launch` asks. Returns the run's exit status and its report (as `--report`
/// writes it).
pub(crate) fn conclude(
    config: &RunConfig,
    launch: &Launch,
    (git, git_limit, unmade, env_withheld): Before<'_>,
    result: Result<backend::RunOutcome, backend::RunError>,
    refused: Vec<Violation>,
    undone: cordon_sandbox::UndoReport,
) -> anyhow::Result<(u8, serde_json::Value)> {
    let (weaker, restored, unrestored, inferred) = match &result {
        Ok(o) => (
            o.weaker.as_slice(),
            o.restored.as_slice(),
            o.unrestored.as_slice(),
            o.inferred.as_slice(),
        ),
        Err(_) => (&[][..], &[][..], &[][..], &[][..]),
    };
    let weaker: Vec<String> = git_search_weaker(git, git_limit)
        .into_iter()
        .chain(weaker.iter().cloned())
        .chain(undone.weaker.iter().cloned())
        .chain(unmade.iter().cloned())
        .collect();
    let weaker = weaker.as_slice();
    if undone.deferred && !launch.report_only {
        eprintln!(
            "cordon: other runs in the same places are still going; what this run planted is undone when the last of them ends"
        );
    }
    if !weaker.is_empty() && !launch.report_only {
        eprintln!("cordon: warning: this run is confined less strictly than asked:");
        for w in weaker {
            eprintln!("cordon:   - {w}");
        }
    }
    // What the sandbox blocked, for an agent to tell its model why a command failed: what
    // cordon saw itself first, then what the command's errors point to.
    // `ignore_violations` from the settings: what this command is known to touch.
    let command = launch.program.shown();
    let blocked: Vec<Violation> = undo_failures(&undone, unrestored)
        .chain(undone.undone.iter().map(Violation::from))
        .chain(restored.iter().map(|p| Violation::restored(p)))
        .chain(refused)
        .chain(inferred.iter().cloned())
        .filter(|v| {
            v.undo_failed()
                || !v.path.as_ref().is_some_and(|p| {
                    config
                        .ignore_violations
                        .ignores(&command, &p.display().to_string())
                })
        })
        .collect();
    let end = match &result {
        Ok(outcome) => {
            if outcome.timed_out && !launch.report_only {
                eprintln!("cordon: the command ran longer than --timeout and was killed");
            }
            End {
                code: u8::try_from(outcome.code).unwrap_or(u8::MAX),
                signal: outcome.signal,
                timed_out: outcome.timed_out,
                error: None,
            }
        }
        Err(e) => {
            eprintln!("cordon: {e}");
            End::failed(e.exit_code(), e.to_string())
        }
    };
    let code = undo_failed_code(&blocked).unwrap_or(end.code);
    let report = tell_what_happened(
        &blocked,
        weaker,
        env_withheld,
        end,
        launch.report.as_deref(),
        launch.report_only,
    )?;
    Ok((code, report))
}

/// The working directory as (device, inode): this process's own, which `exec` and `mcp` chose
/// by descriptor, checked to be what the path `cwd` (worked out from it) names. Between the
/// two a command running beside this one could have swapped a directory on the way for a
/// link; the sandbox checks the same identity again once it has made `cwd` writable.
fn cwd_identity(cwd: &Path) -> anyhow::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let here = std::fs::metadata(".").context("cannot read the current directory")?;
    let named = std::fs::metadata(cwd).ok();
    if named.is_none_or(|m| (m.dev(), m.ino()) != (here.dev(), here.ino())) {
        bail!(
            "the working directory {} was swapped for another while cordon started (a command running meanwhile?); nothing ran",
            cwd.display()
        );
    }
    Ok((here.dev(), here.ino()))
}

/// What the search for git metadata before a run could not cover.
pub fn git_search_weaker(git: &GitMeta, limit: usize) -> Option<String> {
    git.truncated.then(|| {
        format!(
            "the search for git metadata stopped after {limit} directory entries \
             ({}): config and hooks of repositories beyond it are not read-only during the run",
            gitmeta::SCAN_LIMIT_VAR
        )
    })
}

/// What cordon had to undo after a run and could not, as violations.
pub fn undo_failures<'a>(
    undo: &'a cordon_sandbox::UndoReport,
    unrestored: &'a [(PathBuf, String)],
) -> impl Iterator<Item = Violation> + 'a {
    undo.failed.iter().map(Violation::from).chain(
        unrestored
            .iter()
            .map(|(p, e)| Violation::not_restored(p, e)),
    )
}

/// When cordon could not undo something the run did, the run fails, whatever the command's
/// status, with a line that says what the host keeps.
pub fn undo_failed_code(blocked: &[Violation]) -> Option<u8> {
    let failed: Vec<&Violation> = blocked.iter().filter(|v| v.undo_failed()).collect();
    if failed.is_empty() {
        return None;
    }
    for v in failed {
        eprintln!(
            "cordon: error: could not undo what the command did; the host keeps it: {}",
            v.describe()
        );
    }
    Some(cordon_sandbox::exit::UNDO_FAILED)
}

/// Names shown at most in the line about withheld variables.
const WITHHELD_SHOWN: usize = 8;

/// How the names of tools' settings end, named first among what was withheld.
const SETTING_ENDS: &[&str] = &[
    "_HOME", "_ROOT", "_DIR", "_PATH", "_PREFIX", "_CONFIG", "_FILE", "_OPTS", "_OPTIONS", "_FLAGS",
];

/// The line that names the variables a failed command did not get, if it did not get any:
/// those named as a tool's setting (`FOO_HOME`, `BAR_OPTS`) first, those that look like
/// credentials last; never a value.
fn withheld_note(withheld: &[String]) -> Option<String> {
    // `_`: the last program the shell ran, which it sets for every command.
    let withheld: Vec<&String> = withheld.iter().filter(|n| *n != "_").collect();
    if withheld.is_empty() {
        return None;
    }
    let mut names = withheld.clone();
    names.sort_by_key(|n| {
        if cordon_sandbox::env::credential_sign(n, "").is_some() {
            2
        } else if SETTING_ENDS.iter().any(|end| n.ends_with(end)) {
            0
        } else {
            1
        }
    });
    let mut shown: Vec<&str> = names
        .iter()
        .take(WITHHELD_SHOWN)
        .map(|n| n.as_str())
        .collect();
    if names.len() > WITHHELD_SHOWN {
        shown.push("…");
    }
    Some(format!(
        "the command failed; {} variable{} of this environment {} withheld from it: {} (--keep-env NAME passes one; `cordon explain` says why each)",
        withheld.len(),
        if withheld.len() == 1 { "" } else { "s" },
        if withheld.len() == 1 { "was" } else { "were" },
        shown.join(", ")
    ))
}

/// How a run ended, on any backend, as `--report` gives it.
#[derive(Debug)]
pub struct End {
    /// `cordon run`'s own exit status.
    pub code: u8,
    /// The signal that ended the command, where the backend can tell one from an exit code
    /// of 128 + N (container engines cannot).
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// Why the sandbox could not be set up.
    pub error: Option<String>,
}

impl End {
    pub fn failed(code: u8, error: String) -> End {
        End {
            code,
            signal: None,
            timed_out: false,
            error: Some(error),
        }
    }
}

/// After a run, on any backend: what the sandbox blocked, in a marked block on stderr, and
/// with `--report`, the same with the outcome as JSON. Returns that JSON.
///
/// The variables withheld from the command are all in the JSON, by name. On stderr they are
/// named only when the command failed, where one of them may be why: a line on every run
/// would name the same twenty variables each time.
pub fn tell_what_happened(
    blocked: &[Violation],
    weaker: &[String],
    env_withheld: &[String],
    end: End,
    report: Option<&Path>,
    report_only: bool,
) -> anyhow::Result<serde_json::Value> {
    if !blocked.is_empty() && !report_only {
        eprintln!("cordon: ---- blocked by the sandbox ----");
        for v in blocked {
            eprintln!("cordon: {}", v.describe());
        }
        eprintln!("cordon: ----");
    }
    if end.code != 0
        && end.error.is_none()
        && !end.timed_out
        && !report_only
        && let Some(line) = withheld_note(env_withheld)
    {
        eprintln!("cordon: {line}");
    }
    let json = serde_json::json!({
        "exit_code": end.code,
        "signal": end.signal,
        "timed_out": end.timed_out,
        "setup_error": end.error,
        "weaker": weaker,
        "blocked": blocked,
        "env_withheld": env_withheld,
    });
    if let Some(path) = report {
        let mut text = serde_json::to_vec_pretty(&json)?;
        let written = if path == Path::new("-") {
            text.push(b'\n');
            std::io::Write::write_all(&mut std::io::stdout().lock(), &text)
        } else {
            std::fs::write(path, text)
        };
        written.with_context(|| format!("--report {}: cannot write the report", path.display()))?;
    }
    Ok(json)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tool's setting is named before what looks like a credential, the list stops after a
    /// few names, and the shell's `_` is left out.
    #[test]
    fn the_withheld_line_names_likely_settings_first() {
        let names = |l: &[&str]| l.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert_eq!(withheld_note(&names(&["_"])), None);
        assert_eq!(withheld_note(&[]), None);
        let line = withheld_note(&names(&["AWS_PROFILE", "CARGO_PKG_NAME", "FOO_ROOT", "_"]))
            .expect("a line");
        assert!(
            line.contains(
                "3 variables of this environment were withheld from it: FOO_ROOT, CARGO_PKG_NAME, AWS_PROFILE ("
            ),
            "{line}"
        );
        let many: Vec<String> = (0..20).map(|i| format!("V{i:02}")).collect();
        let line = withheld_note(&many).expect("a line");
        assert!(line.contains("V07, …"), "{line}");
        assert!(!line.contains("V08"), "{line}");
    }

    /// A session's share caps a run's process limit, an explicit one too; where a PID
    /// namespace's own pid_max bounds the run, a share it cannot hold exactly (the kernel takes
    /// no pid_max below 301) needs a pids group, as an explicit limit does.
    #[test]
    fn a_session_share_caps_the_process_limit_and_stays_exact() {
        let ns = Isolation::Namespaces;
        let config = RunConfig::default();
        let (wanted, grouped) = limits(&config, Some(2048), ns, None);
        assert_eq!(wanted.max_processes, Some(2048));
        if backend::pid_max_per_namespace() {
            assert_eq!(wanted.pid_max, Some(2049));
            assert_eq!(grouped.max_processes, None, "pid_max holds it");
            let (wanted, grouped) = limits(&config, Some(300), ns, None);
            assert_eq!((wanted.pid_max, grouped.max_processes), (Some(301), None));
            let (_, grouped) = limits(&config, Some(299), ns, None);
            assert_eq!(grouped.max_processes, Some(299), "below what pid_max holds");
        }
        let (wanted, _) = limits(&config, Some(1 << 20), ns, None);
        assert_eq!(wanted.max_processes, Some(DEFAULT_MAX_PROCESSES));
        let explicit = RunConfig {
            max_processes: Some(4096),
            ..RunConfig::default()
        };
        let (wanted, grouped) = limits(&explicit, Some(1000), ns, None);
        assert_eq!(wanted.max_processes, Some(1000));
        assert_eq!(grouped.max_processes, Some(1000));
        let (wanted, _) = limits(&explicit, None, ns, None);
        assert_eq!(wanted.max_processes, Some(4096), "no session, no share");
    }

    #[test]
    fn each_run_gets_an_equal_share_of_the_session() {
        let s = crate::config::SessionLimits {
            max_commands: 8,
            max_processes: 16384,
        };
        assert_eq!(s.share(), 2048);
        let s = crate::config::SessionLimits {
            max_commands: 4,
            max_processes: 2,
        };
        assert_eq!(s.share(), 1, "one each at least");
    }
}
