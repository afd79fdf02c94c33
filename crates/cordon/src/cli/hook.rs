//! `cordon hook AGENT`: cordon as an agent's pre-tool-use hook. The agent hands the tool call
//! over as JSON on standard input; the answer goes out in the agent's own format
//! (`cordon_app::agents`). Whatever cordon cannot read or decide is refused: exit status 2,
//! which both agents take as "blocked", with the reason on standard error.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser};
use cordon_app::agents::{self, Agent, Headless, HookOptions, MAX_HOOK_INPUT};

use super::PolicyFlags;
use crate::exit;

#[derive(Debug, Args)]
pub struct HookArgs {
    /// The agent whose hook this is: claude-code or codex (a PreToolUse hook), or gemini-cli
    /// (a BeforeTool hook).
    #[arg(value_parser = |s: &str| s.parse::<Agent>())]
    agent: Agent,
    /// The policy flags; the agent's own mode (plan, acceptEdits) applies unless --mode says
    /// otherwise, and its working directory is the workspace unless --workspace is given.
    #[command(flatten)]
    policy: PolicyFlags,
    /// Refuse the agent's own shell tool, pointing the model at cordon's
    /// `run_shell_command` (`cordon setup` passes it where the agent's settings cannot switch
    /// its shell off alone).
    #[arg(long, conflicts_with = "sandbox_shell")]
    no_own_shell: bool,
    /// Run the agent's own shell tool's commands in cordon's sandbox: an allowed command is
    /// handed back rewritten to run under `cordon run` with this project's settings (Claude
    /// Code and Gemini CLI; Codex keeps cordon's MCP tool).
    #[arg(long)]
    sandbox_shell: bool,
    /// A question nobody will answer (Claude Code's -p, bypassPermissions or dontAsk; every
    /// question from Gemini CLI, whose hooks cannot ask): `contain` runs the command contained
    /// (the working directory writable and nothing else, no network) where the sandbox holds
    /// all it could do, and denies it otherwise; `deny` denies it. Contain needs
    /// --sandbox-shell; without it every such question is denied.
    #[arg(long, value_name = "contain|deny", default_value = "contain",
          value_parser = |s: &str| s.parse::<Headless>())]
    headless: Headless,
}

/// `cordon-hook AGENT …`: the same arguments as `cordon hook`.
#[derive(Debug, Parser)]
#[command(
    name = "cordon-hook",
    version,
    about = "cordon hook as a program of its own: an agent's pre-tool-use hook that starts faster"
)]
struct HookProgram {
    #[command(flatten)]
    args: HookArgs,
}

/// `cordon-hook`. A bad argument ends it as clap ends any program, with status 2, which the
/// agents take as "blocked" too.
pub fn main() -> ExitCode {
    let args = HookProgram::parse().args;
    match answer(args, "cordon-hook", cordon_beside) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("cordon-hook: error: {e:#}");
            ExitCode::from(BLOCKED)
        }
    }
}

/// `cordon hook`.
pub fn run(args: HookArgs) -> anyhow::Result<u8> {
    answer(args, "cordon hook", || {
        std::env::current_exe().map_err(|e| {
            anyhow::anyhow!("cannot find cordon's own path, which the rewritten command runs: {e}")
        })
    })
}

/// The `cordon` beside this `cordon-hook`, which a rewritten command runs: the hook program
/// carries no sandbox. Without it, `--sandbox-shell` refuses every command rather than hand
/// back one that runs unconfined.
fn cordon_beside() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()
        .map_err(|e| anyhow::anyhow!("cannot find cordon-hook's own path: {e}"))?;
    let cordon = exe.with_file_name(format!("cordon{}", std::env::consts::EXE_SUFFIX));
    if !cordon.is_file() {
        anyhow::bail!(
            "--sandbox-shell runs each command under {}, which is not there: install cordon beside cordon-hook (cordon setup names cordon-hook only when it is)",
            cordon.display()
        );
    }
    Ok(cordon)
}

/// Reads, decides and answers as `program`; `cordon` finds the `cordon` that a rewritten
/// command runs.
fn answer(
    args: HookArgs,
    program: &str,
    cordon: fn() -> anyhow::Result<PathBuf>,
) -> anyhow::Result<u8> {
    let mut input = Vec::new();
    let read = std::io::stdin()
        .lock()
        .take(MAX_HOOK_INPUT + 1)
        .read_to_end(&mut input);
    let answer = match read {
        Err(e) => Err(anyhow::anyhow!("cannot read the hook input: {e}")),
        Ok(_) if input.len() as u64 > MAX_HOOK_INPUT => Err(anyhow::anyhow!(
            "the hook input is longer than {MAX_HOOK_INPUT} bytes; cordon does not let through what it has not read"
        )),
        Ok(_) => hook_options(&args, cordon)
            .and_then(|opts| agents::decide(args.agent, &input, args.policy.config(), &opts)),
    };
    match answer {
        Ok(answer) => {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{answer}")?;
            out.flush()?;
            Ok(exit::OK)
        }
        Err(e) => {
            eprintln!("{program} {}: refused: {e:#}", args.agent.name());
            Ok(BLOCKED)
        }
    }
}

fn hook_options(
    args: &HookArgs,
    cordon: fn() -> anyhow::Result<PathBuf>,
) -> anyhow::Result<HookOptions> {
    // The command the agent runs names cordon by a path that does not depend on the agent's
    // PATH.
    let sandbox_shell = if args.sandbox_shell {
        Some(cordon()?)
    } else {
        None
    };
    Ok(HookOptions {
        own_shell_off: args.no_own_shell,
        sandbox_shell,
        headless: args.headless,
    })
}

/// The exit status both agents read as "blocked; the reason is on standard error".
const BLOCKED: u8 = 2;
