//! Command-line parsing and dispatch.

#[cfg(unix)]
mod backend;
mod check;
#[cfg(unix)]
mod exec;
#[cfg(unix)]
mod paths;
mod policy;
#[cfg(unix)]
mod proxy;
#[cfg(unix)]
mod run;
mod setup;
#[cfg(unix)]
mod shell;

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
    /// Run a command in the sandbox: it reads what it needs, writes only the working
    /// directory, its private /tmp and allowed paths, sees no other processes, has no network
    /// but loopback, and holds no privileges.
    #[cfg(unix)]
    Run(run::RunArgs),
    /// For agents: check and run commands in the sandbox over JSON lines, several at once,
    /// with their output streamed, cancel and ask/answer (docs/PROTOCOL.md).
    #[cfg(unix)]
    Exec(exec::ExecArgs),
    /// An interactive shell for a person: each line is checked by the policy (asking when it
    /// says ask_user) and runs in the sandbox; Ctrl-C cancels the command, `exit` leaves.
    #[cfg(unix)]
    Shell(shell::ShellArgs),
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

pub fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Check(args) => check::run(args),
        Command::Policy(cmd) => policy::run(cmd),
        #[cfg(unix)]
        Command::Run(args) => run::run(args),
        #[cfg(unix)]
        Command::Exec(args) => exec::run(args),
        #[cfg(unix)]
        Command::Shell(args) => shell::run(args),
        #[cfg(target_os = "linux")]
        Command::Proxy(args) => proxy::proxy(args),
        #[cfg(unix)]
        Command::Connect(args) => proxy::connect(args),
        #[cfg(target_os = "linux")]
        Command::Doctor { json } => run::doctor(json),
    }
}
