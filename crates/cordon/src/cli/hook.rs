//! `cordon hook AGENT`: cordon as an agent's pre-tool-use hook. The agent hands the tool call
//! over as JSON on standard input; the answer goes out in the agent's own format
//! (`cordon_app::agents`). Whatever cordon cannot read or decide is refused: exit status 2,
//! which both agents take as "blocked", with the reason on standard error.

use std::io::{Read, Write};

use clap::Args;
use cordon_app::agents::{self, Agent, MAX_HOOK_INPUT};

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
    #[arg(long)]
    no_own_shell: bool,
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
        Ok(_) => agents::decide(args.agent, &input, args.policy.config(), args.no_own_shell),
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

/// The exit status both agents read as "blocked; the reason is on standard error".
const BLOCKED: u8 = 2;
