//! The sandbox flags (the command line's layer of the settings), the backend flags (a
//! [`BackendChoice`]) and `cordon run`'s own, which `explain` takes too.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use cordon_app::agents::Agent;
use cordon_app::bounds;
use cordon_app::config::Sources;
use cordon_app::proxy::{AskVia, Publish};
use cordon_app::run::backend::{Backend, BackendChoice};
use cordon_app::run::container::ContainerOptions;
use cordon_app::run::kubernetes::KubeOptions;
use cordon_app::run::{Launch, Program};
use cordon_app::settings::{self, LayerValues, some};
use cordon_sandbox::kubernetes::{Kind, Loosen, Workspace};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Network {
    /// Only loopback inside the sandbox.
    None,
    /// The host's network.
    Host,
}

// The settings of a sandbox, shared by `run`, `explain`, `exec`, `shell` and `mcp`: the
// command line's layer of the settings (see [`SandboxFlags::sources`]).
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
    pub timeout: Option<f64>,
    /// A Unix socket the command may connect to (repeatable); without one, the command cannot
    /// create Unix sockets. With one, it may also reach sockets it binds itself, and no
    /// others; datagram Unix sockets stay refused.
    #[arg(long = "allow-unix-socket", value_name = "PATH")]
    allow_unix_socket: Vec<PathBuf>,
    /// Pass this variable besides the built-in allowlist (`cordon explain` lists what passes
    /// and why): a name passes whatever it holds, even a credential; a pattern with `*`
    /// (`MYCORP_*`, `*` for everything) passes only what does not look like one (repeatable).
    #[arg(long = "keep-env", value_name = "NAME")]
    keep_env: Vec<String>,
    /// Withhold variables whose name matches this pattern (`*` for any characters, case
    /// ignored), e.g. `MYCORP_*`, even those the allowlist or a `--keep-env` pattern passes
    /// (repeatable).
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
    /// workspace-write, offline, dev or contained (`cordon config show --profile NAME` shows it).
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
    pub net: NetFlags,
}

impl SandboxFlags {
    /// Where a run with these flags finds its settings, these flags the last layer.
    pub fn sources(&self) -> anyhow::Result<Sources> {
        Sources {
            profile: self.profile.clone(),
            flags: self.layer(),
            trust_project: self.trust_project,
            host_network: matches!(self.network, Network::Host),
            resolve: self.net.resolve.clone(),
            settings_file: None,
            agent: None,
        }
        .with_settings_file(self.settings.clone())
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

// What holds for a whole session of `exec` or `mcp` rather than for one run: their
// settings' layer from the command line, added to the sandbox flags'.
#[derive(Debug, Args, Clone, Default)]
pub struct SessionFlags {
    /// Most commands this session runs at once; one more is refused (an error naming this
    /// limit) until one has ended [default: 16; 1 to 256].
    #[arg(long, value_name = "N", value_parser = |s: &str| whole(&bounds::MAX_COMMANDS, s))]
    max_commands: Option<u64>,
    /// Most processes (and threads) all commands of this session may have together; each
    /// command may have at most this divided by --max-commands, whatever --max-processes says
    /// [default: half the host's pid_max; 1 to 4194304].
    #[arg(long, value_name = "N", value_parser = |s: &str| whole(&bounds::MAX_PROCESSES, s))]
    max_session_processes: Option<u64>,
}

impl SessionFlags {
    /// `sources` with these flags in their command line's layer.
    pub fn apply(&self, mut sources: Sources) -> Sources {
        sources.flags.max_commands = self.max_commands;
        sources.flags.max_session_processes = self.max_session_processes;
        sources
    }
}

// Which hosts may be reached: shared by `cordon run` and `cordon proxy`.
#[derive(Debug, Clone, Args, Default)]
pub struct NetFlags {
    /// A host the command may reach: `example.com`, `*.example.com` (subdomains only),
    /// `host:port`, an IP address or a CIDR block (repeatable).
    #[arg(long = "allow-domain", value_name = "RULE")]
    pub allow_domain: Vec<String>,
    /// A host it may not reach, even if allowed (repeatable).
    #[arg(long = "deny-domain", value_name = "RULE")]
    pub deny_domain: Vec<String>,
    /// Let allowed names resolve to loopback, private or link-local addresses.
    #[arg(long)]
    pub allow_private_ips: bool,
    /// Answer NAME with ADDRESS instead of asking DNS, like curl's --resolve (repeatable).
    #[arg(long, value_name = "NAME=ADDRESS")]
    pub resolve: Vec<String>,
    /// Go through this existing proxy (http://HOST:PORT or socks5://HOST:PORT), as on a
    /// corporate network; it resolves names itself.
    #[arg(long, value_name = "URL")]
    pub upstream_proxy: Option<String>,
    /// Who decides about a host no rule allows or denies: `terminal` (you, once per host and
    /// port: once / always / deny), `fd:N` (a program, in JSON lines on descriptor N; see
    /// docs/PROTOCOL.md), `stdio` (`cordon proxy` only: questions on standard output, answers
    /// on standard input) or `deny` [default: `cordon run` asks on the terminal when standard
    /// input is one, else denies; `cordon proxy` denies].
    #[arg(long = "ask-domains", value_name = "WHO")]
    pub ask: Option<AskVia>,
}

impl NetFlags {
    /// These flags as the command line's layer of settings.
    pub fn layer(&self) -> LayerValues {
        LayerValues {
            allow_domains: some(&self.allow_domain),
            deny_domains: self.deny_domain.clone(),
            allow_private_ips: self.allow_private_ips.then_some(true),
            upstream_proxy: self.upstream_proxy.clone(),
            ..LayerValues::default()
        }
    }
}

/// `0.5`, `2`: a number of CPUs, kept as thousandths of one.
fn parse_cpus(s: &str) -> Result<u64, String> {
    bounds::CPUS.parse(s).map(|n| (n * 1000.0).round() as u64)
}

/// A flag's whole number in `range`.
fn whole(range: &bounds::Range, s: &str) -> Result<u64, String> {
    range.parse(s).map(|n| n as u64)
}

// Which sandbox enforces a run: the flags of `run` and `mcp`.
#[derive(Debug, Args, Default)]
pub struct BackendFlags {
    /// Which sandbox enforces the run: linux, seatbelt, docker, podman, container (either
    /// engine) or kubernetes (--dry-run prints the manifests) [default: $CORDON_SANDBOX when it names an engine, else this OS's own].
    #[arg(long, value_parser = clap::builder::TypedValueParser::map(
        clap::builder::PossibleValuesParser::new(Backend::NAMES),
        |s: String| s.parse::<Backend>().expect("one of Backend::NAMES"),
    ))]
    backend: Option<Backend>,
    /// Print what would run and run nothing: for seatbelt the profile and the sandbox-exec
    /// command, for containers the engine's command, for linux the sandbox spec as JSON.
    #[arg(long)]
    dry_run: bool,
    /// The Seatbelt profile: permissive-open, permissive-proxied, restrictive-open,
    /// restrictive-proxied, strict-open, strict-proxied, or your own .sb file (given the same
    /// -D parameters) [default: built from this run's flags].
    #[arg(long, value_name = "NAME|PATH.sb")]
    seatbelt_profile: Option<String>,
    /// The container image [default: $CORDON_SANDBOX_IMAGE, else the project's
    /// .cordon/sandbox.Dockerfile, built and tagged by cordon].
    #[arg(long, value_name = "NAME")]
    image: Option<String>,
    /// Hardening and limits for the container: dev, safe (read-only root file system),
    /// tight (safe with small limits) or offline (no network) [default: dev].
    #[arg(long, value_name = "NAME")]
    container_profile: Option<String>,
    /// Pass the model providers' API keys (ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY,
    /// …) into the container.
    #[arg(long)]
    pass_api_keys: bool,
    /// Do not forward the SSH agent into the container (also CORDON_SANDBOX_SSH_AGENT=0).
    #[arg(long)]
    no_ssh_agent: bool,
    /// What runs the sandbox on a cluster: sandbox (agent-sandbox's Sandbox), pod (a plain Pod,
    /// for clusters without its controller) or template (a SandboxTemplate that claims and
    /// pools make sandboxes from) [default: sandbox].
    #[arg(long, value_name = "KIND", value_parser = |s: &str| Kind::parse(s).ok_or_else(|| format!("`{s}` is not a kind cordon renders; use {}", Kind::NAMES.join(", "))))]
    k8s_kind: Option<Kind>,
    /// The cluster namespace the run's objects go in [default: the context's].
    #[arg(long, value_name = "NAME")]
    namespace: Option<String>,
    /// The pod's runtimeClassName, e.g. gvisor or kata.
    #[arg(long, value_name = "NAME")]
    runtime_class: Option<String>,
    /// An image with `cordon` in it, for the proxy pod that allowed hosts go through.
    #[arg(long, value_name = "NAME")]
    k8s_proxy_image: Option<String>,
    /// With --k8s-kind template: a SandboxWarmPool keeping this many sandboxes ready.
    #[arg(long, value_name = "N")]
    k8s_pool: Option<u32>,
    /// Let go of one of the pod's secure defaults (repeatable): root, writable-root,
    /// service-account-token, privilege-escalation, capabilities or seccomp. Each is reported
    /// as weaker.
    #[arg(long, value_name = "DEFAULT", value_parser = |s: &str| Loosen::parse(s).ok_or_else(|| format!("`{s}` is not a default cordon lets go of; use {}", Loosen::NAMES.join(", "))))]
    k8s_loosen: Vec<Loosen>,
    /// How the working directory reaches the pod: copy (copied in before the command starts,
    /// and what changed copied back after, within the same walls as a local run, on the node's
    /// disk), volume (copied the same way, onto a volume claimed for the sandbox) or empty (an
    /// empty directory; nothing is copied) [default: copy, empty for templates].
    #[arg(long, value_name = "HOW", value_parser = |s: &str| Workspace::parse(s).ok_or_else(|| format!("`{s}` is not a way to give the pod its working directory; use {}", Workspace::NAMES.join(", "))))]
    k8s_workspace: Option<Workspace>,
    /// With --k8s-workspace volume: the storage the claim asks for, e.g. 50Gi [default: 10Gi].
    #[arg(long, value_name = "SIZE")]
    k8s_volume_size: Option<String>,
}

impl BackendFlags {
    pub fn choice(&self) -> BackendChoice {
        BackendChoice {
            backend: self.backend,
            dry_run: self.dry_run,
            seatbelt_profile: self.seatbelt_profile.clone(),
            container: ContainerOptions {
                image: self.image.clone(),
                container_profile: self.container_profile.clone(),
                pass_api_keys: self.pass_api_keys,
                no_ssh_agent: self.no_ssh_agent,
            },
            kubernetes: KubeOptions {
                kind: self.k8s_kind,
                namespace: self.namespace.clone(),
                runtime_class: self.runtime_class.clone(),
                proxy_image: self.k8s_proxy_image.clone(),
                pool: self.k8s_pool,
                loosen: self.k8s_loosen.clone(),
                workspace: self.k8s_workspace,
                volume_size: self.k8s_volume_size.clone(),
            },
        }
    }
}

// `cordon run`'s own flags and command, which `cordon explain` takes too.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub sandbox: SandboxFlags,
    /// Forward 127.0.0.1:HOST_PORT on the host to PORT on the sandbox's own loopback, e.g. a
    /// dev server's (repeatable; implies --allow-local-binding).
    #[arg(long, value_name = "[HOST_PORT:]PORT")]
    pub publish: Vec<Publish>,
    /// Write what happened (exit code, timeout, what the sandbox blocked) as JSON to this file,
    /// or with `-` to standard output once the command has ended.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Run this shell command line, with bash (`bash --noprofile --norc -c`).
    #[arg(short = 'c', value_name = "SHELL STRING", conflicts_with = "command")]
    pub shell: Option<String>,
    #[command(flatten)]
    pub backend: BackendFlags,
    /// Run a whole coding agent (claude-code, gemini-cli or codex): its own settings directory
    /// is writable and its API hosts reachable, besides what the settings allow; the rest stays
    /// confined.
    #[arg(long, value_name = "AGENT", value_parser = |s: &str| s.parse::<Agent>())]
    pub agent: Option<Agent>,
    /// The command and its arguments (after `--` where one of them starts with `-`); every
    /// word after the command's name is the command's, not cordon's.
    #[arg(value_name = "CMD", trailing_var_arg = true)]
    pub command: Vec<String>,
}

impl RunArgs {
    /// Where the run's settings come from: the sandbox flags, and the agent's profile.
    pub fn sources(&self) -> anyhow::Result<Sources> {
        let mut sources = self.sandbox.sources()?;
        sources.agent = self.agent;
        Ok(sources)
    }

    /// What runs: a `-c` command line (run with bash), or the program and its arguments.
    pub fn program(&self) -> Program {
        match &self.shell {
            Some(s) => Program::Script(s.clone()),
            None => Program::Argv(self.command.clone()),
        }
    }

    /// What the run is asked to do, for the application core.
    pub fn launch(&self) -> Launch {
        Launch {
            program: self.program(),
            backend: self.backend.choice(),
            publish: self.publish.clone(),
            // An agent's own interface holds the terminal: a question there would break into
            // it, so a host its profile and the settings leave out is refused (and reported).
            ask_domains: self.sandbox.net.ask.or(self.agent.map(|_| AskVia::Deny)),
            report: self.report.clone(),
            ..Launch::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::SandboxFlags;
    use cordon_app::config::Sources;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        sandbox: SandboxFlags,
    }

    fn parse(args: &[&str]) -> SandboxFlags {
        let argv = std::iter::once("cordon").chain(args.iter().copied());
        Wrapper::try_parse_from(argv).expect("parses").sandbox
    }

    /// `exec`, `shell` and `mcp` send each run the sources their flags make, typed: every
    /// flag must arrive as given.
    #[test]
    fn every_flag_survives_the_trip_to_a_child_run() {
        let given = [
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
            "--timeout",
            "9",
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
        ];
        let sources = parse(&given).sources().expect("sources");
        let sent = serde_json::to_string(&sources).expect("serialises");
        let got: Sources = serde_json::from_str(&sent).expect("reads back");
        assert_eq!(format!("{sources:?}"), format!("{got:?}"));
        // Each value given is in what is sent.
        let shown = format!("{got:?}");
        for value in [
            "\"a\"",
            "b c",
            "\"d\"",
            "\"e\"",
            "\"f\"",
            "/s",
            "\"K\"",
            "MY_*",
            "5242880",
            "x.example",
            "y.example",
            "127.0.0.1:1",
            "\"dev\"",
            "/x/settings.json",
        ] {
            assert!(shown.contains(value), "{value} in {shown}");
        }
        assert!(got.host_network && got.trust_project, "{shown}");
        assert_eq!(got.flags.max_processes, Some(7));
        assert_eq!(got.flags.cpu_time, Some(3));
        assert_eq!(got.flags.cpus, Some(0.25));
        assert_eq!(got.flags.timeout, Some(9.0));
        assert_eq!(got.flags.fail_if_unavailable, Some(true));
        assert_eq!(got.flags.allow_private_ips, Some(true));
        assert_eq!(got.flags.allow_local_binding, Some(true));
        // Nothing given, nothing said: every layer below decides.
        let none = parse(&[]).sources().expect("sources");
        assert_eq!(
            format!("{:?}", none.flags),
            format!("{:?}", cordon_app::settings::LayerValues::default())
        );
    }
}
