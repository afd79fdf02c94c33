//! Command-line parsing and dispatch.

#[cfg(unix)]
mod ask;
#[cfg(unix)]
mod backend;
mod check;
mod config;
#[cfg(unix)]
mod container;
#[cfg(unix)]
mod exec;
#[cfg(unix)]
mod explain;
#[cfg(unix)]
mod mcp;
mod policy;
#[cfg(unix)]
mod proxy;
#[cfg(unix)]
mod run;
mod setup;
#[cfg(unix)]
mod shell;
mod wire;

pub use setup::user_settings_dir;

/// `FLAG VALUE` once per value: a list flag as handed to a child cordon (`exec`'s runs,
/// `mcp`'s worker).
fn push_each<T: AsRef<std::ffi::OsStr>>(
    out: &mut Vec<std::ffi::OsString>,
    flag: &str,
    values: &[T],
) {
    for v in values {
        out.push(flag.into());
        out.push(v.as_ref().to_os_string());
    }
}

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use cordon_policy::ApprovalMode;

#[derive(Debug, Parser)]
#[command(
    name = "cordon",
    version,
    about = "The safe-execution layer for AI coding agents"
)]
pub struct Cli {
    /// Say more on stderr about what cordon does: -v what it reads and starts, -vv how it
    /// decides, -vvv everything. RUST_LOG (e.g. `cordon=debug`) overrides it.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Decide whether a tool call may run; prints {"decision","rule","reason"} as JSON.
    Check(check::CheckArgs),
    /// Inspect and maintain policy files.
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// cordon's settings (cordon.toml), merged from every layer.
    #[command(subcommand)]
    Config(config::ConfigCommand),
    /// Print the cordon.toml equivalent of Claude Code's settings.json, sandbox-runtime's
    /// settings, Codex's config.toml or Gemini CLI's settings.json, naming what has no
    /// equivalent.
    Import {
        /// The settings file to read.
        file: PathBuf,
    },
    /// What `cordon run` would do with a command, without running it: the policy's decision
    /// and rule, what it may read and write, which hosts it may reach, and the backend. Takes
    /// the flags of `check` and `run`.
    #[cfg(unix)]
    Explain(Box<explain::ExplainArgs>),
    /// Print a completion script for a shell: bash, zsh, fish, elvish or powershell
    /// (e.g. `cordon completions bash > /etc/bash_completion.d/cordon`).
    Completions { shell: clap_complete::Shell },
    /// Print cordon's man page (roff), generated from these same definitions
    /// (e.g. `cordon man > /usr/local/share/man/man1/cordon.1`).
    Man,
    /// Run a command in the sandbox: it reads what it needs, writes only the working
    /// directory, its private /tmp and allowed paths, sees no other processes, has no network
    /// but loopback, and holds no privileges.
    #[cfg(unix)]
    Run(Box<run::RunArgs>),
    /// For agents: check and run commands in the sandbox over JSON lines, several at once,
    /// with their output streamed, cancel and ask/answer (docs/PROTOCOL.md).
    #[cfg(unix)]
    Exec(Box<exec::ExecArgs>),
    /// An MCP server on standard input and output: shell commands in the sandbox and file
    /// tools in the workspace, every call decided by the policy (ask_user becomes an
    /// elicitation where the client supports one, and no where it does not).
    #[cfg(unix)]
    Mcp(Box<mcp::McpArgs>),
    /// An interactive shell for a person: each line is checked by the policy (asking when it
    /// says ask_user) and runs in the sandbox; Ctrl-C cancels the command, `exit` leaves.
    #[cfg(unix)]
    Shell(Box<shell::ShellArgs>),
    /// cordon's egress proxy on its own (HTTP and SOCKS5 on each address), for containers
    /// and other tools: only the allowed hosts are reachable; refusals print as JSON lines.
    #[cfg(target_os = "linux")]
    Proxy(proxy::ProxyArgs),
    /// A TCP connection through the run's SOCKS5 proxy on standard input and output: ssh's
    /// ProxyCommand inside `cordon run` (git over SSH) without nc.
    #[cfg(unix)]
    Connect(proxy::ConnectArgs),
    /// What this machine supports, what cordon will enforce here, and how to fix what is
    /// missing; exits 1 when the sandbox cannot be had.
    #[cfg(target_os = "linux")]
    Doctor {
        /// Print the findings as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Whether to colour what goes to `stream`: only a terminal, and never with `NO_COLOR` set
/// (https://no-color.org).
pub fn colour(stream: &impl std::io::IsTerminal) -> bool {
    stream.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

fn parse_mode(s: &str) -> Result<ApprovalMode, String> {
    ApprovalMode::parse(s)
        .ok_or_else(|| format!("unknown mode `{s}`; use default, autoEdit, plan or yolo"))
}

/// The flags that choose which rules apply, shared by `check` and `policy …`.
#[derive(Debug, Args, Clone)]
pub struct PolicyFlags {
    /// Approval mode: default, autoEdit, plan or yolo.
    #[arg(long, default_value = "default", value_parser = parse_mode)]
    mode: ApprovalMode,
    /// Nobody can answer questions: ask_user becomes deny.
    #[arg(long)]
    non_interactive: bool,
    /// Policy directory or file for the user tier (repeatable); replaces ~/.config/cordon/policies.
    #[arg(long = "policy-dir", value_name = "DIR")]
    policy_dirs: Vec<PathBuf>,
    /// Extension policy directory (repeatable); extensions may only deny or ask.
    #[arg(long = "extension-policy-dir", value_name = "DIR")]
    extension_dirs: Vec<PathBuf>,
    /// Workspace directory (repeatable; default: the current directory). File arguments must stay
    /// inside these, and their .cordon/policies form the workspace tier.
    #[arg(long = "workspace", value_name = "DIR")]
    workspaces: Vec<PathBuf>,
    /// Let the workspace's own policy files allow things (by default they may only deny or ask).
    #[arg(long)]
    trust_workspace: bool,
    /// Leave out cordon's built-in default policies.
    #[arg(long)]
    no_defaults: bool,
    /// Policy directory or file for the default tier (repeatable); replaces cordon's built-in
    /// defaults, e.g. with the defaults another agent ships.
    #[arg(
        long = "default-policy-dir",
        value_name = "DIR",
        conflicts_with = "no_defaults"
    )]
    default_dirs: Vec<PathBuf>,
    /// A tool to allow without asking, as in Gemini CLI's tools.allowed (repeatable);
    /// `run_shell_command(git status)` allows only that command prefix.
    #[arg(long = "allowed-tool", value_name = "TOOL")]
    allowed_tools: Vec<String>,
    /// A tool never to run, as in Gemini CLI's tools.exclude (repeatable).
    #[arg(long = "exclude-tool", value_name = "TOOL")]
    excluded_tools: Vec<String>,
    /// Another tool name whose `command` argument is a shell script (repeatable).
    #[arg(long = "shell-tool", value_name = "TOOL")]
    shell_tools: Vec<String>,
}

/// One call given on the command line.
#[derive(Debug, Args, Clone)]
pub struct CallFlags {
    /// The tool's name, e.g. run_shell_command, read_file, mcp_github_create_issue.
    #[arg(long, value_name = "NAME")]
    tool: Option<String>,
    /// The call's arguments as a JSON object.
    #[arg(long, value_name = "JSON")]
    args: Option<String>,
    /// The MCP server the tool comes from.
    #[arg(long, value_name = "NAME")]
    server: Option<String>,
    /// The tool's annotations as a JSON object (e.g. {"readOnlyHint":true}).
    #[arg(long, value_name = "JSON")]
    annotations: Option<String>,
}

impl Cli {
    /// Logging on stderr, at the level -v asks for unless RUST_LOG says otherwise; coloured
    /// only on a terminal and never with NO_COLOR set.
    pub fn start_logging(&self) {
        let level = match self.verbose {
            0 => "warn",
            1 => "info",
            2 => "debug",
            _ => "trace",
        };
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("cordon={level}")));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(colour(&std::io::stderr()))
            .with_target(false)
            .without_time()
            .try_init();
    }

    /// Whether this command only prints what it was asked for, so may simply end when its
    /// reader goes away. Commands that hold sockets or run others may not.
    pub fn only_prints(&self) -> bool {
        matches!(
            self.command,
            Command::Check(_)
                | Command::Policy(_)
                | Command::Config(_)
                | Command::Import { .. }
                | Command::Explain(_)
                | Command::Completions { .. }
                | Command::Man
        )
    }
}

pub fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Check(args) => check::run(args),
        Command::Policy(cmd) => policy::run(cmd),
        Command::Config(cmd) => config::run(cmd),
        Command::Import { file } => config::import(&file),
        #[cfg(unix)]
        Command::Explain(args) => explain::run(*args),
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "cordon", &mut std::io::stdout());
            Ok(0)
        }
        Command::Man => {
            let cmd = <Cli as clap::CommandFactory>::command();
            clap_mangen::Man::new(cmd).render(&mut std::io::stdout())?;
            Ok(0)
        }
        #[cfg(unix)]
        Command::Run(args) => run::run(*args),
        #[cfg(unix)]
        Command::Exec(args) => exec::run(*args),
        #[cfg(unix)]
        Command::Mcp(args) => mcp::run(*args),
        #[cfg(unix)]
        Command::Shell(args) => shell::run(*args),
        #[cfg(target_os = "linux")]
        Command::Proxy(args) => proxy::proxy(args),
        #[cfg(unix)]
        Command::Connect(args) => proxy::connect(args),
        #[cfg(target_os = "linux")]
        Command::Doctor { json } => run::doctor(json),
    }
}
