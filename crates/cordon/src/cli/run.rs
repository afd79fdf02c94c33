//! `cordon run`: a command in the sandbox.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::backend::{BackendArgs, Elsewhere, RunCgroups, UndoWatch, run_linux as run_sandboxed};
use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use cordon_sandbox::{
    Isolation, Limits, MadeForRun, NetworkMode, RunGuard, SandboxSpec, Violation,
    existing_protected, filter_environment, gitmeta, gitmeta::GitMeta, linked_worktree_writable,
};

use super::proxy::RunProxy;
use super::push_each;
use cordon_app::bounds;
use cordon_app::decide::RunSettings;
use cordon_app::plan::paths::{Flag, LivePattern, resolve_all};
use cordon_app::settings::{self, Layer, LayerValues, Places, Sourced, all, some, value};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Network {
    /// Only loopback inside the sandbox.
    None,
    /// The host's network.
    Host,
}

/// The settings of a sandbox, shared by `run`, `exec` and `shell`; `exec` and `shell` hand them
/// on to the `cordon run` each command runs in (see [`SandboxFlags::to_args`]).
#[derive(Debug, Args, Clone)]
pub struct SandboxFlags {
    /// A path the command may write besides the working directory (repeatable).
    #[arg(long = "allow-write", value_name = "PATH")]
    allow_write: Vec<PathBuf>,
    /// A path inside a writable one that stays read-only (repeatable).
    #[arg(long = "deny-write", value_name = "PATH")]
    deny_write: Vec<PathBuf>,
    /// A path the command may not read: a directory appears empty, a file unreadable
    /// (repeatable).
    #[arg(long = "deny-read", value_name = "PATH")]
    deny_read: Vec<PathBuf>,
    /// A path inside a --deny-read directory that stays readable (repeatable).
    #[arg(long = "allow-read", value_name = "PATH")]
    allow_read: Vec<PathBuf>,
    /// Network: none (loopback only) or host.
    #[arg(long, value_enum, default_value = "none")]
    network: Network,
    /// Kill the command after this many seconds (exit status 124), 0.001 to 31536000.
    #[arg(long, value_name = "SECONDS", value_parser = |s: &str| bounds::TIMEOUT.parse(s))]
    timeout: Option<f64>,
    /// A Unix socket the command may connect to (repeatable); without one, the command cannot
    /// create Unix sockets. With one, it may also reach sockets it binds itself, and no
    /// others; datagram Unix sockets stay refused.
    #[arg(long = "allow-unix-socket", value_name = "PATH")]
    allow_unix_socket: Vec<PathBuf>,
    /// Pass this variable even though its name or value looks like a credential (repeatable).
    #[arg(long = "keep-env", value_name = "NAME")]
    keep_env: Vec<String>,
    /// Also withhold variables whose name matches this pattern (`*` for any characters, case
    /// ignored), e.g. `MYCORP_*` (repeatable).
    #[arg(long = "deny-env", value_name = "PATTERN")]
    deny_env: Vec<String>,
    /// Most processes (and threads) the command may have at once; stops fork bombs
    /// [default: 4096; at most 4194304].
    #[arg(long, value_name = "N", value_parser = |s: &str| whole(&bounds::MAX_PROCESSES, s))]
    max_processes: Option<u64>,
    /// Most memory the command may use, e.g. 512M or 4G (1M to 1048576G).
    #[arg(long, value_name = "SIZE", value_parser = bounds::memory)]
    memory: Option<u64>,
    /// Seconds of CPU time each process may use before the kernel stops it (1 to 31536000).
    #[arg(long, value_name = "SECONDS", value_parser = |s: &str| whole(&bounds::CPU_TIME, s))]
    cpu_time: Option<u64>,
    /// Share of the CPUs the whole sandbox may use, e.g. 0.5 or 2 (needs a cpu cgroup).
    #[arg(long, value_name = "N", value_parser = parse_cpus)]
    cpus: Option<u64>,
    /// Refuse to run, rather than fall back to Landlock and seccomp alone, where user
    /// namespaces are unavailable.
    #[arg(long)]
    fail_if_unavailable: bool,
    /// Let the command listen on loopback: its own, inside the sandbox, which nothing on the
    /// host reaches unless published (matters where that loopback would be the host's).
    #[arg(long)]
    allow_local_binding: bool,
    /// A profile shipped with cordon, applied over the settings files: read-only,
    /// workspace-write, offline or dev (`cordon config show --profile NAME` shows it).
    #[arg(long, value_name = "NAME", value_parser = settings::parse_profile)]
    profile: Option<String>,
    /// Settings to apply on top of cordon.toml's layers: a cordon.toml, or Claude Code's,
    /// sandbox-runtime's, Codex's or Gemini CLI's settings, read as one (see `cordon import`).
    #[arg(long, value_name = "FILE")]
    settings: Option<PathBuf>,
    /// Let this project's `.cordon/cordon.toml` widen what the sandbox allows; without this it
    /// may only tighten.
    #[arg(long)]
    trust_project: bool,
    #[command(flatten)]
    pub(super) net: super::proxy::NetFlags,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub(super) sandbox: SandboxFlags,
    /// Forward 127.0.0.1:HOST_PORT on the host to PORT on the sandbox's own loopback, e.g. a
    /// dev server's (repeatable; implies --allow-local-binding).
    #[arg(long, value_name = "[HOST_PORT:]PORT")]
    publish: Vec<super::proxy::Publish>,
    /// `ignore_violations` from the settings: denials not worth reporting.
    #[arg(skip)]
    ignore_violations: cordon_sandbox::seatbelt::IgnoreViolations,
    /// Write what happened (exit code, timeout, what the sandbox blocked) as JSON to this file,
    /// or with `-` to standard output once the command has ended.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// What the sandbox blocked and what is weaker than asked go only to --report, not to
    /// standard error (for `cordon exec`, which reports them as events).
    #[arg(long, hide = true, requires = "report")]
    report_only: bool,
    /// Standard input is a terminal made for this run alone (by `cordon exec`), which the
    /// command may take as its controlling terminal.
    #[arg(long, hide = true)]
    own_terminal: bool,
    /// Set by `cordon mcp --backend docker|podman`, whose server runs as this run's program.
    #[arg(skip)]
    pub(super) worker: Option<super::container::Worker>,
    /// Run this string with /bin/sh -c.
    #[arg(short = 'c', value_name = "SHELL STRING", conflicts_with = "command")]
    shell: Option<String>,
    #[command(flatten)]
    backend: BackendArgs,
    /// The command and its arguments, after `--`.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

impl SandboxFlags {
    /// The time limit given on the command line, if any.
    pub fn timeout(&self) -> Option<f64> {
        self.timeout
    }

    /// The flags that say which settings apply, for a process that reads them itself.
    fn settings_args(&self) -> Vec<OsString> {
        let mut out: Vec<OsString> = Vec::new();
        if let Some(p) = &self.profile {
            out.extend(["--profile".into(), p.into()]);
        }
        if let Some(f) = &self.settings {
            out.extend(["--settings".into(), f.into()]);
        }
        if self.trust_project {
            out.push("--trust-project".into());
        }
        out
    }

    /// Whether the command sees the host's network.
    pub fn host_network(&self) -> bool {
        matches!(self.network, Network::Host)
    }

    /// These settings as `cordon run` flags, for the child process each command of `exec` and
    /// `shell` runs in, less `--timeout`, which each run sets for itself.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut out: Vec<OsString> = Vec::new();
        push_each(&mut out, "--allow-write", &self.allow_write);
        push_each(&mut out, "--deny-write", &self.deny_write);
        push_each(&mut out, "--deny-read", &self.deny_read);
        push_each(&mut out, "--allow-read", &self.allow_read);
        push_each(&mut out, "--allow-unix-socket", &self.allow_unix_socket);
        if let Network::Host = self.network {
            push_each(&mut out, "--network", &["host"]);
        }
        push_each(&mut out, "--keep-env", &self.keep_env);
        push_each(&mut out, "--deny-env", &self.deny_env);
        let mut pair = |flag: &str, value: String| push_each(&mut out, flag, &[value]);
        if let Some(n) = self.max_processes {
            pair("--max-processes", n.to_string());
        }
        if let Some(n) = self.memory {
            pair("--memory", n.to_string());
        }
        if let Some(n) = self.cpu_time {
            pair("--cpu-time", n.to_string());
        }
        if let Some(n) = self.cpus {
            pair("--cpus", format!("{}.{:03}", n / 1000, n % 1000));
        }
        if self.fail_if_unavailable {
            out.push("--fail-if-unavailable".into());
        }
        if self.allow_local_binding {
            out.push("--allow-local-binding".into());
        }
        out.extend(self.settings_args());
        out.extend(self.net.to_args().into_iter().map(OsString::from));
        out
    }
}

/// The `--deny-env` patterns as one matcher over variable names.
fn env_patterns(patterns: &[String]) -> anyhow::Result<globset::GlobSet> {
    let mut set = globset::GlobSetBuilder::new();
    for p in patterns {
        if p.is_empty()
            || !p
                .chars()
                .all(|c| c == '*' || c == '_' || c.is_ascii_alphanumeric())
        {
            bail!(
                "--deny-env {p:?}: a pattern is a variable name with `*` for any characters, e.g. MYCORP_*"
            );
        }
        let glob = globset::GlobBuilder::new(p)
            .case_insensitive(true)
            .build()
            .with_context(|| format!("--deny-env {p:?}"))?;
        set.add(glob);
    }
    set.build().context("--deny-env")
}

/// Processes (and threads) a run may have at once unless told otherwise.
const DEFAULT_MAX_PROCESSES: u64 = 4096;

/// `0.5`, `2`: a number of CPUs, kept as thousandths of one.
fn parse_cpus(s: &str) -> Result<u64, String> {
    bounds::CPUS.parse(s).map(|n| (n * 1000.0).round() as u64)
}

/// A flag's whole number in `range`.
fn whole(range: &bounds::Range, s: &str) -> Result<u64, String> {
    range.parse(s).map(|n| n as u64)
}

impl RunArgs {
    /// The `-c` shell string, if the command was given that way.
    pub fn shell(&self) -> Option<&str> {
        self.shell.as_deref()
    }

    pub fn backend_name(&self) -> String {
        self.backend.name()
    }

    /// The run's network as `cordon explain` tells it.
    pub fn net_summary(&self) -> serde_json::Value {
        let summary = match self.sandbox.network {
            Network::Host => "the host's network (--network host)".to_string(),
            _ if !self.sandbox.net.allow_domain.is_empty() => {
                "only through cordon's proxy, to the allowed hosts".to_string()
            }
            _ => "none: the command's own loopback only".to_string(),
        };
        serde_json::json!({
            "summary": summary,
            "allow_domains": self.sandbox.net.allow_domain,
            "deny_domains": self.sandbox.net.deny_domain,
            "allow_private_ips": self.sandbox.net.allow_private_ips,
            "published": self.publish.iter().map(|p| format!("127.0.0.1:{} -> {}", p.host_port, p.port)).collect::<Vec<_>>(),
        })
    }
}

impl SandboxFlags {
    /// These flags for a `cordon mcp` worker in a container that shows the host only at
    /// `shown` (absolute): path flags elsewhere name what the container does not have at all,
    /// so they are left out rather than fail to resolve there; Unix sockets are not passed in.
    pub fn for_container(&self, cwd: &Path, shown: &[PathBuf]) -> SandboxFlags {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let inside = |p: &PathBuf| {
            let abs = match (p.strip_prefix("~"), &home) {
                (Ok(rest), Some(home)) => home.join(rest),
                _ => cwd.join(p),
            };
            shown.iter().any(|s| abs.starts_with(s))
        };
        let mut out = self.clone();
        out.deny_read.retain(inside);
        out.deny_write.retain(inside);
        out.allow_read.retain(inside);
        out.allow_unix_socket.clear();
        out
    }

    /// The command line as the last layer of settings: what it says, and nothing it leaves
    /// out.
    fn layer(&self) -> LayerValues {
        LayerValues {
            fail_if_unavailable: self.fail_if_unavailable.then_some(true),
            allow_write: some(&self.allow_write),
            deny_write: self.deny_write.clone(),
            deny_read: self.deny_read.clone(),
            allow_read: some(&self.allow_read),
            allow_local_binding: self.allow_local_binding.then_some(true),
            allow_unix_sockets: some(&self.allow_unix_socket),
            keep_env: some(&self.keep_env),
            deny_env: self.deny_env.clone(),
            max_processes: self.max_processes,
            memory: self.memory.map(|b| b.to_string()),
            cpu_time: self.cpu_time,
            cpus: self.cpus.map(|m| m as f64 / 1000.0),
            timeout: self.timeout,
            ..self.net.layer()
        }
    }
}

impl RunSettings for SandboxFlags {
    /// Every settings layer merged under these flags; the project's file may widen with
    /// `--trust-project`, or when `also_trusted` (the policy's `--trust-workspace`, which
    /// `exec`, `shell` and `mcp` take as well).
    fn settings(&self, also_trusted: bool) -> anyhow::Result<settings::Settings> {
        let cwd = std::env::current_dir().context("cannot read the current directory")?;
        let places = Places {
            profile: self.profile.clone(),
            given: self.settings.clone(),
            ..Places::from(&cwd)
        };
        settings::load(&places, self.layer(), self.trust_project || also_trusted)
    }

    /// The file `--settings` names, if any.
    fn settings_file(&self) -> Option<&Path> {
        self.settings.as_deref()
    }

    /// The `--allow-write` places given as flags.
    fn allow_write(&self) -> &[PathBuf] {
        &self.allow_write
    }
}

/// The run's flags with every settings layer merged under them.
pub fn with_settings(mut args: RunArgs) -> anyhow::Result<RunArgs> {
    let s = args.sandbox.settings(false)?;
    for why in &s.left_out {
        eprintln!("cordon: warning: settings left out: {why}");
    }
    let given = Box::new(args.sandbox.net.clone());
    args.sandbox.net.settle(&s);
    args.sandbox.net.as_given = Some((given, args.sandbox.settings_args()));
    args.backend.settle(
        value(s.backend.clone()),
        value(s.container_image.clone()),
        value(s.container_profile.clone()),
    )?;
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let expand = |p: &String| match (p.strip_prefix("~/"), &home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => PathBuf::from(p),
    };
    args.ignore_violations.rules = s
        .ignore_violations
        .iter()
        .map(|r| {
            (
                r.value.command.clone(),
                r.value.paths.iter().map(expand).collect(),
            )
        })
        .collect();
    args.sandbox.fail_if_unavailable = value(s.fail_if_unavailable).unwrap_or(false);
    args.sandbox.allow_write = value(s.allow_write).unwrap_or_default();
    // A shared settings file may name paths this machine lacks (~/.aws); nothing to protect
    // there. The command line's own paths must exist, as before.
    let present = |list: Vec<Sourced<PathBuf>>| -> Vec<PathBuf> {
        list.into_iter()
            .filter(|p| {
                p.from.layer == Layer::Flags
                    || cordon_sandbox::pattern::is_wild(p.value.as_os_str())
                    || std::fs::symlink_metadata(&p.value).is_ok()
            })
            .map(|p| p.value)
            .collect()
    };
    args.sandbox.deny_write = present(s.deny_write);
    args.sandbox.deny_read = present(s.deny_read);
    args.sandbox.allow_read = value(s.allow_read).unwrap_or_default();
    args.sandbox.allow_local_binding = value(s.allow_local_binding).unwrap_or(false);
    args.sandbox.allow_unix_socket = value(s.allow_unix_sockets).unwrap_or_default();
    args.sandbox.keep_env = value(s.keep_env).unwrap_or_default();
    args.sandbox.deny_env = all(s.deny_env);
    args.sandbox.max_processes = value(s.max_processes);
    args.sandbox.memory = value(s.memory)
        .map(|m| bounds::memory(&m).map_err(anyhow::Error::msg))
        .transpose()?;
    args.sandbox.cpu_time = value(s.cpu_time);
    args.sandbox.cpus = value(s.cpus).map(|c| (c * 1000.0).round() as u64);
    args.sandbox.timeout = value(s.timeout);
    Ok(args)
}

/// What a run will be given, worked out from its (merged) flags before anything is set up:
/// `cordon run` goes on to run it, `cordon explain` shows it.
#[derive(Debug)]
pub struct Plan {
    pub argv: Vec<String>,
    pub timeout: Option<Duration>,
    pub cwd: PathBuf,
    pub writable: Vec<PathBuf>,
    pub read_only: Vec<PathBuf>,
    /// cordon's own settings directories.
    pub own_settings: Vec<PathBuf>,
    pub hidden: Vec<PathBuf>,
    pub reopened: Vec<PathBuf>,
    pub unix_sockets: Vec<PathBuf>,
    /// The git metadata in the writable places before the run, and the search's bound.
    pub git: GitMeta,
    pub git_limit: usize,
    /// Patterns that matched nothing or too much: for the user, once per command they typed
    /// (the worker of `mcp --backend` plans again what its launcher has planned and said).
    pub warnings: Vec<String>,
}

impl Plan {
    pub fn warn(&self) {
        for w in &self.warnings {
            eprintln!("cordon: warning: {w}");
        }
    }
}

/// The `--deny-read`, `--allow-read` and `--deny-write` patterns, unexpanded.
#[derive(Debug, Clone, Default)]
pub struct LivePatterns {
    pub hidden: Vec<LivePattern>,
    pub reopened: Vec<LivePattern>,
    pub read_only: Vec<LivePattern>,
}

pub fn plan(args: &RunArgs) -> anyhow::Result<Plan> {
    let argv = match (&args.shell, args.command.is_empty()) {
        (Some(s), _) => vec!["/bin/sh".to_string(), "-c".to_string(), s.clone()],
        (None, false) => args.command.clone(),
        (None, true) => bail!("give a command after `--` or a shell string with -c"),
    };
    let timeout = args
        .sandbox
        .timeout
        .map(bounds::timeout)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--timeout (or limits.timeout) {e}"))?;
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let cwd = std::fs::canonicalize(&cwd).context("cannot resolve the current directory")?;
    let mut warnings = Vec::new();
    let mut resolve = |paths: &[PathBuf], flag| resolve_all(paths, &cwd, flag, &mut warnings);
    let mut writable = resolve(&args.sandbox.allow_write, Flag::AllowWrite)?;
    let mut read_only = resolve(&args.sandbox.deny_write, Flag::DenyWrite)?;
    let hidden = resolve(&args.sandbox.deny_read, Flag::DenyRead)?;
    let reopened = resolve(&args.sandbox.allow_read, Flag::AllowRead)?;
    let unix_sockets = resolve(&args.sandbox.allow_unix_socket, Flag::AllowUnixSocket)?;
    // In a linked git worktree, `git commit` writes into the main repository's objects and
    // refs; allow those, not its config or hooks.
    writable.extend(linked_worktree_writable(&cwd));
    // Start-up files, git's config and hooks, editor and agent settings stay read-only in
    // every writable place.
    for root in std::iter::once(&cwd).chain(&writable) {
        read_only.extend(existing_protected(root));
    }
    // git metadata at any depth (nested and vendored repositories, submodules, worktrees,
    // a hooksPath in the tree): what makes git run a program stays read-only.
    let git_limit = gitmeta::scan_limit().map_err(anyhow::Error::msg)?;
    let roots: Vec<PathBuf> = std::iter::once(&cwd).chain(&writable).cloned().collect();
    let git = gitmeta::scan(&roots, git_limit);
    read_only.extend(
        git.runs_code
            .iter()
            .filter(|p| roots.iter().any(|r| p.starts_with(r)) && !read_only.contains(p))
            .cloned()
            .collect::<Vec<_>>(),
    );
    // cordon's own settings and policies, wherever a writable place holds them.
    let own_settings: Vec<PathBuf> = super::setup::own_settings_dirs()
        .into_iter()
        .map(|d| std::fs::canonicalize(&d).unwrap_or(d))
        .collect();
    read_only.extend(
        own_settings
            .iter()
            .filter(|d| {
                d.exists()
                    && std::iter::once(&cwd)
                        .chain(&writable)
                        .any(|r| d.starts_with(r))
            })
            .cloned(),
    );
    Ok(Plan {
        argv,
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
        warnings,
    })
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

/// The plan a command run with these flags would get here, as the child `cordon run` of `exec`
/// and `mcp` works it out from the same flags, and the patterns among its deny and allow
/// paths, unexpanded: for tools that touch files outside the sandbox (`cordon mcp`'s), which
/// must keep to the same walls, also for paths made later.
pub fn plan_for(sandbox: &SandboxFlags) -> anyhow::Result<(Plan, LivePatterns)> {
    let mut argv: Vec<OsString> = sandbox.to_args();
    argv.extend(["-c".into(), "true".into()]);
    let args = with_settings(parse_run_args(argv)?)?;
    let plan = plan(&args)?;
    let live = |list: &[PathBuf], flag| -> anyhow::Result<Vec<LivePattern>> {
        let mut out = Vec::new();
        for p in list {
            out.extend(LivePattern::new(p, &plan.cwd, flag)?);
        }
        Ok(out)
    };
    let live = LivePatterns {
        hidden: live(&args.sandbox.deny_read, Flag::DenyRead)?,
        reopened: live(&args.sandbox.allow_read, Flag::AllowRead)?,
        read_only: live(&args.sandbox.deny_write, Flag::DenyWrite)?,
    };
    Ok((plan, live))
}

/// `cordon run`'s arguments read from a command line (without the program's name), for
/// commands that hand part of their work to it.
pub fn parse_run_args(argv: Vec<OsString>) -> anyhow::Result<RunArgs> {
    #[derive(clap::Parser)]
    struct Just {
        #[command(flatten)]
        run: RunArgs,
    }
    let argv = std::iter::once(OsString::from("cordon run")).chain(argv);
    let just = <Just as clap::Parser>::try_parse_from(argv)
        .context("cannot read the sandbox flags back (a bug in cordon)")?;
    Ok(just.run)
}

pub fn run(args: RunArgs) -> anyhow::Result<u8> {
    let mut args = with_settings(args)?;
    args.backend.validate()?;
    if args.worker.is_some() {
        // The settings' time limit is for each command, which the worker keeps; the session
        // lasts as long as its client.
        args.sandbox.timeout = None;
    }
    let plan = plan(&args)?;
    plan.warn();
    let Plan {
        argv,
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
        warnings: _,
    } = plan;
    let vars = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
    let (mut env, _removed) = filter_environment(vars, &args.sandbox.keep_env);
    if !args.sandbox.deny_env.is_empty() {
        let denied = env_patterns(&args.sandbox.deny_env)?;
        env.retain(|(k, _)| args.sandbox.keep_env.contains(k) || !denied.is_match(k));
    }
    let isolation = if args.sandbox.fail_if_unavailable {
        Isolation::Namespaces
    } else if std::env::var_os("CORDON_SANDBOX_LANDLOCK_ONLY").is_some() {
        // What runs where user namespaces are missing, on demand: for tests, and for people
        // who want to see what that mode does.
        Isolation::LandlockOnly
    } else {
        Isolation::Auto
    };
    // Limits: control groups where cordon may make them (root), else rlimits, which hold per
    // user namespace for processes (not at all for root) and per process for memory. Where
    // each PID namespace has its own pid_max, that bounds processes too, for root as well:
    // root's default limit then needs no pids group, whose set-up (a cgroup v1 attach) can
    // stall a run for milliseconds. An explicit --max-processes stays exact.
    let max_processes = args.sandbox.max_processes.unwrap_or(DEFAULT_MAX_PROCESSES);
    let pid_max = (isolation != Isolation::LandlockOnly && super::backend::pid_max_per_namespace())
        .then_some(max_processes + 1);
    let wanted = Limits {
        max_processes: Some(max_processes),
        pid_max,
        memory_bytes: args.sandbox.memory,
        // Whether or not a memory cgroup would also count them.
        scratch_bytes: args.sandbox.memory,
        cpu_seconds: args.sandbox.cpu_time,
        cpu_millis: args.sandbox.cpus,
        timeout,
    };
    let grouped = Limits {
        max_processes: wanted
            .max_processes
            .filter(|_| args.sandbox.max_processes.is_some() || pid_max.is_none()),
        ..wanted
    };
    let (groups, missed) = if args.backend.runs_linux() {
        RunCgroups::create(&grouped)
    } else {
        Default::default()
    };
    let root = super::backend::is_root();
    if missed.contains(&"max-processes") && root {
        eprintln!(
            "cordon: warning: no pids cgroup could be made, and process limits do not bind root; --max-processes is not enforced"
        );
    }
    if missed.contains(&"memory") {
        eprintln!(
            "cordon: warning: no memory cgroup could be made; --memory limits each process's address space instead of the whole sandbox"
        );
    }
    if missed.contains(&"cpus") {
        eprintln!(
            "cordon: warning: no cpu cgroup could be made (cordon makes them only as root, on cgroup v1); --cpus is not enforced, --cpu-time limits each process instead"
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
        network: match args.sandbox.network {
            Network::None => NetworkMode::None,
            Network::Host => NetworkMode::Host,
        },
        isolation,
        allow_local_binding: args.sandbox.allow_local_binding || !args.publish.is_empty(),
        inbound: None,
        own_terminal: args.own_terminal && std::io::IsTerminal::is_terminal(&std::io::stdin()),
        cwd_identity: Some(identity),
    };
    if args.sandbox.net.any_allowed() && matches!(args.sandbox.network, Network::Host) {
        bail!("--allow-domain needs the sandbox's own network (--network none, the default)");
    }
    if !args.publish.is_empty() && matches!(args.sandbox.network, Network::Host) {
        bail!(
            "--publish needs the sandbox's own network (--network none, the default); with --network host the command listens on the host's directly"
        );
    }
    // cordon reads its settings live (exec per request, the proxy every few seconds), so
    // those that do not exist yet are made now, to be read-only during the run like the rest,
    // on every backend (a container's mounts show only what exists).
    let (made, unmade) = if args.backend.dry_run() {
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
    let elsewhere = Elsewhere {
        spec: &spec,
        weaker: &unmade,
        wanted: &wanted,
        deny_read: &args.sandbox.deny_read,
        own_settings: &own_settings,
        git: &git,
        git_limit,
        report: args.report.as_deref(),
        net: &args.sandbox.net,
        max_processes_given: args.sandbox.max_processes,
        publishes: !args.publish.is_empty(),
        keep_env: &args.sandbox.keep_env,
        ignore_violations: &args.ignore_violations,
        worker: args.worker.as_ref(),
    };
    tracing::debug!("sandbox spec: {spec:?}");
    if let Some(code) = super::backend::run_elsewhere(&args.backend, elsewhere)? {
        return Ok(code);
    }
    let guard = RunGuard::before(&spec.cwd, &spec.writable, &own_settings, &git, git_limit);
    // Should this process be killed before it undoes what the run left, a process of its
    // own does it (started before the proxy, so it holds none of the proxy's descriptors).
    let watch = UndoWatch::start(|| {
        let undone = guard.undo();
        let blocked: Vec<Violation> = undo_failures(&undone, &[])
            .chain(undone.undone.iter().map(Violation::from))
            .collect();
        if blocked.is_empty() {
            return;
        }
        eprintln!("cordon: `cordon run` ended before its clean-up; what the run left:");
        for v in &blocked {
            eprintln!("cordon: {}", v.describe());
        }
        let _ = undo_failed_code(&blocked);
    })
    .context("cannot start the process that undoes what a run leaves")?;
    // Allowed hosts: cordon's proxy becomes the command's only way out.
    let proxy = RunProxy::start(&args.sandbox.net, &args.publish)?;
    spec.inbound = proxy.as_ref().and_then(|p| p.inbound.clone());
    if let Some(endpoint) = proxy.as_ref().and_then(|p| p.endpoint.as_ref()) {
        let vars = super::proxy::environment(endpoint);
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
    let refused = proxy.map(RunProxy::finish).unwrap_or_default();
    let undone = guard.undo();
    drop(made);
    if let Some(watch) = watch {
        watch.disarm();
    }
    let (weaker, restored, unrestored, inferred) = match &result {
        Ok(o) => (
            o.weaker.as_slice(),
            o.restored.as_slice(),
            o.unrestored.as_slice(),
            o.inferred.as_slice(),
        ),
        Err(_) => (&[][..], &[][..], &[][..], &[][..]),
    };
    let weaker: Vec<String> = git_search_weaker(&git, git_limit)
        .into_iter()
        .chain(weaker.iter().cloned())
        .chain(undone.weaker.iter().cloned())
        .chain(unmade.iter().cloned())
        .collect();
    let weaker = weaker.as_slice();
    if !weaker.is_empty() && !args.report_only {
        eprintln!("cordon: warning: this run is confined less strictly than asked:");
        for w in weaker {
            eprintln!("cordon:   - {w}");
        }
    }
    // What the sandbox blocked, for an agent to tell its model why a command failed: what
    // cordon saw itself first, then what the command's errors point to.
    // `ignore_violations` from the settings: what this command is known to touch.
    let command = args.shell.clone().unwrap_or_else(|| args.command.join(" "));
    let blocked: Vec<Violation> = undo_failures(&undone, unrestored)
        .chain(undone.undone.iter().map(Violation::from))
        .chain(restored.iter().map(|p| Violation::restored(p)))
        .chain(refused.iter().map(Violation::from))
        .chain(inferred.iter().cloned())
        .filter(|v| {
            v.undo_failed()
                || !v.path.as_ref().is_some_and(|p| {
                    args.ignore_violations
                        .ignores(&command, &p.display().to_string())
                })
        })
        .collect();
    let end = match &result {
        Ok(outcome) => {
            if outcome.timed_out && !args.report_only {
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
    tell_what_happened(
        &blocked,
        weaker,
        end,
        args.report.as_deref(),
        args.report_only,
    )?;
    Ok(code)
}

/// What the search for git metadata before a run could not cover.
pub(super) fn git_search_weaker(git: &GitMeta, limit: usize) -> Option<String> {
    git.truncated.then(|| {
        format!(
            "the search for git metadata stopped after {limit} directory entries \
             ({}): config and hooks of repositories beyond it are not read-only during the run",
            gitmeta::SCAN_LIMIT_VAR
        )
    })
}

/// What cordon had to undo after a run and could not, as violations.
pub(super) fn undo_failures<'a>(
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
pub(super) fn undo_failed_code(blocked: &[Violation]) -> Option<u8> {
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

/// How a run ended, on any backend, as `--report` gives it.
pub(super) struct End {
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
/// with `--report`, the same with the outcome as JSON.
pub(super) fn tell_what_happened(
    blocked: &[Violation],
    weaker: &[String],
    end: End,
    report: Option<&Path>,
    report_only: bool,
) -> anyhow::Result<()> {
    if !blocked.is_empty() && !report_only {
        eprintln!("cordon: ---- blocked by the sandbox ----");
        for v in blocked {
            eprintln!("cordon: {}", v.describe());
        }
        eprintln!("cordon: ----");
    }
    if let Some(path) = report {
        let report = serde_json::json!({
            "exit_code": end.code,
            "signal": end.signal,
            "timed_out": end.timed_out,
            "setup_error": end.error,
            "weaker": weaker,
            "blocked": blocked,
        });
        let mut text = serde_json::to_vec_pretty(&report)?;
        let written = if path == Path::new("-") {
            text.push(b'\n');
            std::io::Write::write_all(&mut std::io::stdout().lock(), &text)
        } else {
            std::fs::write(path, text)
        };
        written.with_context(|| format!("--report {}: cannot write the report", path.display()))?;
    }
    Ok(())
}

/// `cordon doctor`.
#[cfg(target_os = "linux")]
/// What the settings ask of this machine, as doctor findings: settings that do not load stop
/// every run, and settings that require namespaces stop runs where there are none.
fn configured(found: &[cordon_sandbox::linux::doctor::Mechanism]) -> Vec<Mechanism> {
    let userns = found.first().is_some_and(|m| m.available);
    let userns_fix = found.first().and_then(|m| m.fix.clone());
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let mut out = Vec::new();
    let merged = settings::load(&Places::from(&cwd), LayerValues::default(), false);
    let required = match &merged {
        Ok(s) => {
            let files: Vec<String> = s.files.iter().map(ToString::to_string).collect();
            out.push(Mechanism {
                name: "settings",
                available: true,
                detail: if files.is_empty() {
                    "no cordon.toml; built-in defaults (cordon config show)".into()
                } else {
                    format!("{} (cordon config show)", files.join(", "))
                },
                fix: None,
                required: true,
            });
            s.fail_if_unavailable.clone().filter(|f| f.value)
        }
        Err(e) => {
            out.push(Mechanism {
                name: "settings",
                available: false,
                detail: format!("{e:#}"),
                fix: Some("fix the file named above; every run refuses until then".into()),
                required: true,
            });
            None
        }
    };
    let (available, detail, fix) = match (&required, userns) {
        (_, true) => (
            true,
            "cordon run: namespaces, a read-only view of the host, Landlock and seccomp".into(),
            None,
        ),
        (Some(f), false) => (
            false,
            format!(
                "sandbox.fail_if_unavailable ({}) requires user namespaces, which are unavailable: every run refuses",
                f.from
            ),
            userns_fix,
        ),
        (None, false) => (
            true,
            "cordon run: Landlock and seccomp alone, weaker (no private /tmp or loopback, protected files put back after the run); it says so on every run".into(),
            userns_fix,
        ),
    };
    out.push(Mechanism {
        name: "configured",
        available,
        detail,
        fix,
        required: true,
    });
    out
}

type Mechanism = cordon_sandbox::linux::doctor::Mechanism;

pub fn doctor(json: bool) -> anyhow::Result<u8> {
    let mut found = cordon_sandbox::linux::doctor::probe();
    let extra = configured(&found);
    found.extend(extra);
    let missing_required = found.iter().any(|m| m.required && !m.available);
    if json {
        println!("{}", serde_json::to_string_pretty(&found)?);
    } else {
        let paint = super::colour(&std::io::stdout());
        for m in &found {
            let (mark, colour) = if m.available {
                ("ok  ", "32")
            } else if m.required {
                ("FAIL", "31")
            } else {
                ("weak", "33")
            };
            let mark = if paint {
                format!("\x1b[{colour}m{mark}\x1b[0m")
            } else {
                mark.to_string()
            };
            println!("{mark} {:<16} {}", m.name, m.detail);
            if let Some(fix) = &m.fix {
                println!("     {:<16} fix: {fix}", "");
            }
        }
        if missing_required {
            println!(
                "\ncordon run cannot sandbox commands on this machine until the FAIL lines are fixed."
            );
        }
    }
    Ok(if missing_required { 1 } else { 0 })
}

#[cfg(test)]
mod sandbox_flags_tests {
    use clap::Parser;

    use super::SandboxFlags;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        sandbox: SandboxFlags,
    }

    fn parse(args: &[std::ffi::OsString]) -> SandboxFlags {
        let argv = std::iter::once("cordon".into()).chain(args.iter().cloned());
        Wrapper::try_parse_from(argv).expect("parses").sandbox
    }

    /// A `cordon mcp` worker gets the path flags for what its container shows, and no others:
    /// elsewhere there is nothing inside to resolve them against.
    #[test]
    fn a_container_worker_keeps_the_path_flags_for_what_it_shows() {
        let given: Vec<std::ffi::OsString> = [
            "--deny-read",
            "secret",
            "--deny-read",
            "/elsewhere/keys",
            "--deny-write",
            "/ws/.env",
            "--deny-write",
            "/other/x",
            "--allow-read",
            "/extra/pub",
            "--allow-unix-socket",
            "/run/some.sock",
            "--allow-write",
            "/extra",
        ]
        .iter()
        .map(Into::into)
        .collect();
        let flags = parse(&given);
        let shown = [
            std::path::PathBuf::from("/ws"),
            std::path::PathBuf::from("/extra"),
        ];
        let kept = flags
            .for_container(std::path::Path::new("/ws"), &shown)
            .to_args();
        let expected: Vec<std::ffi::OsString> = [
            "--allow-write",
            "/extra",
            "--deny-write",
            "/ws/.env",
            "--deny-read",
            "secret",
            "--allow-read",
            "/extra/pub",
        ]
        .iter()
        .map(Into::into)
        .collect();
        assert_eq!(kept, expected);
    }

    /// `exec` and `shell` hand their flags to each `cordon run`: every one must arrive as given.
    #[test]
    fn every_flag_survives_the_trip_to_a_child_cordon_run() {
        let given: Vec<std::ffi::OsString> = [
            "--allow-write",
            "a",
            "--allow-write",
            "b c",
            "--deny-write",
            "d",
            "--deny-read",
            "e",
            "--allow-read",
            "f",
            "--network",
            "host",
            "--allow-unix-socket",
            "/s",
            "--keep-env",
            "K",
            "--deny-env",
            "MY_*",
            "--max-processes",
            "7",
            "--memory",
            "5M",
            "--cpu-time",
            "3",
            "--cpus",
            "0.25",
            "--fail-if-unavailable",
            "--allow-domain",
            "x.example",
            "--deny-domain",
            "y.example",
            "--resolve",
            "x.example=127.0.0.1",
            "--upstream-proxy",
            "http://127.0.0.1:1",
            "--allow-private-ips",
            "--allow-local-binding",
            "--trust-project",
            "--profile",
            "dev",
            "--settings",
            "/x/settings.json",
        ]
        .iter()
        .map(Into::into)
        .collect();
        let flags = parse(&given);
        let again = parse(&flags.to_args());
        assert_eq!(format!("{flags:?}"), format!("{again:?}"));
        // Nothing given, nothing passed; the timeout is each run's own.
        let mut with_timeout = given.clone();
        with_timeout.extend(["--timeout".into(), "9".into()]);
        assert!(!parse(&with_timeout).to_args().contains(&"--timeout".into()));
        assert!(parse(&[]).to_args().is_empty());
    }
}
