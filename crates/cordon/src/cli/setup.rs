//! `cordon setup AGENT`: the agent's own settings edited so that cordon decides its tool calls
//! and runs its commands (`cordon_app::agents::setup`); `--dry-run` shows the change as a
//! diff, `--remove` undoes it.

use anyhow::Context;
use clap::Args;
use cordon_app::agents::setup::{self, Places, Scope};
use cordon_app::agents::{Agent, Headless, codex_trust};

use crate::exit;

#[derive(Debug, Args)]
pub struct SetupArgs {
    /// The agent: claude-code, gemini-cli or codex.
    #[arg(value_parser = |s: &str| s.parse::<Agent>())]
    agent: Agent,
    /// This project's settings (`.claude/`, `.mcp.json`, `.gemini/`, `.codex/` here) [default].
    #[arg(long, conflicts_with = "user")]
    project: bool,
    /// The user's settings (`~/.claude/`, `~/.claude.json`, `~/.gemini/`, `$CODEX_HOME` or
    /// `~/.codex/`).
    #[arg(long)]
    user: bool,
    /// Show what would change, as a diff, and change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Take out what setup put in: the hook, the MCP server, and the built-in shell switched
    /// off (only where setup switched it off).
    #[arg(long)]
    remove: bool,
    /// What the hook does with a question nobody will answer (the agent runs headless, in a
    /// bypass mode, or cannot ask): `contain` runs the command in the sandbox with the
    /// working directory writable and nothing else, no network, where that holds everything it
    /// could do, and denies it otherwise; `deny` denies it.
    #[arg(long, value_name = "contain|deny", default_value = "contain",
          value_parser = |s: &str| s.parse::<Headless>())]
    headless: Headless,
}

pub fn run(args: SetupArgs) -> anyhow::Result<u8> {
    let scope = if args.user {
        Scope::User
    } else {
        Scope::Project
    };
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(std::path::PathBuf::from)
        .context("HOME is not set; cordon cannot find the agent's settings")?;
    let cordon = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .context("cannot find cordon's own binary")?;
    let places = Places {
        project: std::env::current_dir().context("cannot read the current directory")?,
        cordon: cordon.clone(),
        hook: Some(cordon.with_file_name("cordon-hook")).filter(|h| h.is_file()),
        state: cordon_app::user_settings_dir()
            .context("neither XDG_CONFIG_HOME nor HOME says where cordon's settings are")?
            .join("setup"),
        codex_home: std::env::var_os("CODEX_HOME")
            .filter(|h| !h.is_empty())
            .map_or_else(|| home.join(".codex"), std::path::PathBuf::from),
        home,
        headless: args.headless,
    };
    let edits = setup::plan(args.agent, scope, &places, args.remove)?;
    if args.dry_run {
        for e in edits.iter().filter(|e| e.changes()) {
            print!("{}", e.diff());
        }
        if edits.iter().all(|e| !e.changes()) {
            println!("nothing to change");
        }
        return Ok(exit::OK);
    }
    let backups = setup::apply(&edits, &places, args.remove)?;
    for e in &edits {
        let what = if e.changes() { "changed" } else { "unchanged" };
        println!("{what}: {}", e.path.display());
    }
    for b in backups {
        println!("kept the previous file as {}", b.display());
    }
    if !args.remove {
        match args.agent {
            Agent::Codex => {
                println!(
                    "codex: cordon decides its tool calls (hook) and runs commands in its sandbox (MCP server `cordon`); its own shell tool is off"
                );
                let trust = match codex_trust::find_codex() {
                    Some(codex) => codex_trust::cordons_hook(&codex, &places.project),
                    None => codex_trust::HookTrust::Unknown("codex is not on PATH".into()),
                };
                match trust {
                    codex_trust::HookTrust::Trusted => println!("note: {}", trust.said()),
                    _ => println!("note: {}; {}", trust.said(), codex_trust::HookTrust::FIX),
                }
            }
            agent => println!(
                "{}: cordon decides its tool calls (hook), and its own shell tool's commands run in cordon's sandbox; a question nobody will answer (headless, bypass modes) is {} (--headless)",
                agent.name(),
                match args.headless {
                    Headless::Contain =>
                        "run contained: the working directory writable, nothing else, no network",
                    Headless::Deny => "denied",
                }
            ),
        }
        for note in setup::notes(args.agent, scope) {
            println!("note: {note}");
        }
    }
    Ok(exit::OK)
}
