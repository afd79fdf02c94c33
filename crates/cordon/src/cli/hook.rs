//! `cordon hook AGENT`: cordon as an agent's pre-tool-use hook. The agent hands the tool call
//! over as JSON on standard input; the answer goes out in the agent's own format
//! (`cordon_app::agents`). Whatever cordon cannot read or decide is refused: exit status 2,
//! which both agents take as "blocked", with the reason on standard error.

use std::io::{Read, Write};

use clap::Args;
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

pub fn run(args: HookArgs) -> anyhow::Result<u8> {
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
        Ok(_) => hook_options(&args)
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
            eprintln!("cordon hook {}: refused: {e:#}", args.agent.name());
            Ok(BLOCKED)
        }
    }
}

fn hook_options(args: &HookArgs) -> anyhow::Result<HookOptions> {
    let sandbox_shell = if args.sandbox_shell {
        // The command the agent runs names this very cordon, by a path that does not depend
        // on the agent's PATH.
        let exe = std::env::current_exe().map_err(|e| {
            anyhow::anyhow!("cannot find cordon's own path, which the rewritten command runs: {e}")
        })?;
        Some(exe)
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
