//! Command-line parsing and dispatch.

mod check;
mod config;
#[cfg(target_os = "linux")]
mod doctor;
#[cfg(unix)]
mod exec;
#[cfg(unix)]
mod explain;
mod flags;
#[cfg(unix)]
mod hook;
#[cfg(unix)]
mod mcp;
mod policy;
#[cfg(unix)]
mod proxy;
#[cfg(unix)]
mod run;
#[cfg(unix)]
mod setup;
#[cfg(unix)]
mod shell;
mod wire;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

pub use flags::{CallFlags, PolicyFlags};

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

// Deferred: a subcommand's arguments are built only when it is the one parsed, rather than
// every subcommand's on every start (0.4-0.9 ms of a `cordon run`, docs/BENCHMARKS.md). A
// deferred subcommand's `Args` structs must have no doc comment: clap would take it as the
// subcommand's `about`.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
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
    /// and rule, what it may read and write, which hosts it may reach, which variables of this
    /// environment it would get and which not (by name, with why), and the backend. Takes the
    /// flags of `check` and `run`.
    #[cfg(unix)]
    Explain(Box<explain::ExplainArgs>),
    #[cfg(unix)]
    /// cordon as an agent's pre-tool-use hook: reads the tool call the agent hands over
    /// (Claude Code's PreToolUse, Gemini CLI's BeforeTool) on standard input and answers in
    /// the agent's format: allow, deny with a reason the model sees, or ask. What cordon
    /// cannot read or decide is refused (exit status 2).
    Hook(hook::HookArgs),
    /// Set an agent up to use cordon: its hook, `cordon mcp` as its MCP server, and its own
    /// shell tool off in favour of cordon's, written into the agent's own settings (kept as
    /// they were otherwise, with a copy of each file). --dry-run shows the diff, --remove
    /// undoes it.
    #[cfg(unix)]
    Setup(setup::SetupArgs),
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
    Run(Box<flags::RunArgs>),
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
    /// says ask_user) and runs in the sandbox; Ctrl-C reaches the command, `exit` leaves.
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

/// Logging for a child of cordon's, which has no flags: RUST_LOG alone says how much.
pub fn start_child_logging() {
    logging("warn");
}

fn logging(level: &str) {
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
        logging(level);
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

/// `cordon-hook`'s whole program.
#[cfg(unix)]
pub fn hook_main() -> std::process::ExitCode {
    hook::main()
}

pub fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Check(args) => check::run(args),
        #[cfg(unix)]
        Command::Hook(args) => hook::run(args),
        #[cfg(unix)]
        Command::Setup(args) => setup::run(args),
        Command::Policy(cmd) => policy::run(cmd),
        Command::Config(cmd) => config::run(cmd),
        Command::Import { file } => config::import(&file),
        #[cfg(unix)]
        Command::Explain(args) => explain::run(*args),
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            cmd.build();
            clap_complete::generate(shell, &mut cmd, "cordon", &mut std::io::stdout());
            Ok(0)
        }
        Command::Man => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            cmd.build();
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
        Command::Doctor { json } => doctor::doctor(json),
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// A deferred subcommand's arguments are added when it is built; a doc comment on one of
    /// their structs would then replace the subcommand's own description.
    #[test]
    fn building_a_subcommand_keeps_its_description() {
        let eager = Cli::command();
        let mut built = Cli::command();
        built.build();
        for sub in eager.get_subcommands() {
            let name = sub.get_name();
            let after = built.find_subcommand(name).expect("subcommand");
            let text = |c: &clap::Command| c.get_about().map(ToString::to_string);
            assert_eq!(text(sub), text(after), "`cordon {name}`");
            assert!(text(sub).is_some(), "`cordon {name}` has a description");
        }
    }
}
