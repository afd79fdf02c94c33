//! `cordon policy …`: lint, explain, remember, defaults.

use std::path::PathBuf;

use anyhow::bail;
use clap::{Args, Subcommand};
use cordon_policy::load::{BUILTIN_POLICIES, remember_always_allow};
use cordon_policy::{Explanation, PolicySources, ProcessRunner, RuleSummary, load};

use super::{CallFlags, PolicyFlags};
use crate::exit;
use cordon_app::user_policy_dir;

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Print every problem in the policy files; exits 1 if any is an error.
    Lint(LintArgs),
    /// Show, for one call, every rule that matched and why the winner won.
    Explain(ExplainArgs),
    /// Keep an "always allow" answer for calls like this one (in auto-saved.toml).
    Remember(RememberArgs),
    /// Print cordon's built-in policy files.
    Defaults,
}

#[derive(Debug, Args)]
pub struct LintArgs {
    /// Directories or files to lint (as user-tier policies). Without any, lints everything
    /// `cordon check` would load with the same flags.
    dirs: Vec<PathBuf>,
    /// Print the problems as JSON: {"rules","errors","warnings","issues":[…]}.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    policy: PolicyFlags,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    #[command(flatten)]
    call: CallFlags,
    #[command(flatten)]
    policy: PolicyFlags,
    /// Print the explanation as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct RememberArgs {
    #[command(flatten)]
    call: CallFlags,
    #[command(flatten)]
    policy: PolicyFlags,
}

pub fn run(cmd: PolicyCommand) -> anyhow::Result<u8> {
    match cmd {
        PolicyCommand::Lint(a) => lint(a),
        PolicyCommand::Explain(a) => explain(a),
        PolicyCommand::Remember(a) => remember(a),
        PolicyCommand::Defaults => {
            for (name, text) in BUILTIN_POLICIES {
                println!("# ==> builtin:{name} <==\n{text}");
            }
            Ok(exit::OK)
        }
    }
}

fn lint(args: LintArgs) -> anyhow::Result<u8> {
    let sources = if args.dirs.is_empty() {
        let env = args.policy.config().environment()?;
        args.policy.config().sources(&env)?
    } else {
        PolicySources {
            user_dirs: args.dirs.clone(),
            required_dirs: args.dirs.clone(),
            ..Default::default()
        }
    };
    let set = load(&sources);
    let errors = set.issues.iter().filter(|i| i.is_error()).count();
    let warnings = set.issues.len() - errors;
    if args.json {
        let report = serde_json::json!({
            "rules": set.rules.len(),
            "errors": errors,
            "warnings": warnings,
            "issues": set.issues,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for issue in &set.issues {
            println!("{issue}");
        }
        println!(
            "{} rule(s) loaded; {errors} error(s), {warnings} warning(s)",
            set.rules.len()
        );
    }
    Ok(if errors > 0 {
        exit::LINT_ERRORS
    } else {
        exit::OK
    })
}

fn explain(args: ExplainArgs) -> anyhow::Result<u8> {
    let call = args.call.call()?;
    let engine = args.policy.config().engine()?;
    let explanation = engine.explain(&call, args.policy.config().options(), &ProcessRunner);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&explanation)?);
    } else {
        print!("{}", render(&explanation));
    }
    Ok(exit::OK)
}

fn rule_line(r: &RuleSummary) -> String {
    let name = r
        .name
        .as_deref()
        .map(|n| format!(" \"{n}\""))
        .unwrap_or_default();
    format!(
        "{:<9} {:.3}  {}{name}",
        r.decision.as_str(),
        r.effective_priority,
        r.source
    )
}

fn render(e: &Explanation) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "decision: {}\nreason:   {}\n",
        e.outcome.decision, e.outcome.reason
    ));
    if let Some(r) = &e.outcome.rule {
        s.push_str(&format!("rule:     {}\n", rule_line(r)));
    }
    for part in &e.parts {
        let what = part
            .command
            .as_deref()
            .map(|c| format!("`{c}`"))
            .unwrap_or_else(|| "the call".into());
        let via = if part.via.is_empty() {
            String::new()
        } else {
            format!("  (inside {})", part.via.join(" → "))
        };
        s.push_str(&format!(
            "\n{} {what}{via}\n  → {}: {}\n",
            part.role, part.decision, part.reason
        ));
        if part.matched.is_empty() {
            s.push_str("    no rule matched\n");
        }
        for (i, r) in part.matched.iter().enumerate() {
            let mark = if i == 0 { "*" } else { " " };
            s.push_str(&format!("  {mark} {}\n", rule_line(r)));
        }
    }
    for p in &e.problems {
        s.push_str(&format!("\ncannot analyse: {p}\n"));
    }
    for c in &e.checkers {
        s.push_str(&format!(
            "\nchecker {} ({}): {}: {}\n",
            c.checker, c.source, c.decision, c.reason
        ));
    }
    s.push_str(
        "\n* marks the highest-ranked rule; a `dangerous` guard can still make it stricter.\n",
    );
    s
}

fn remember(args: RememberArgs) -> anyhow::Result<u8> {
    let call = args.call.call()?;
    let dir = match args.policy.policy_dirs.first() {
        Some(d) => d.clone(),
        None => match user_policy_dir() {
            Some(d) => d,
            None => {
                bail!("cannot find the user policy directory (HOME is not set); pass --policy-dir")
            }
        },
    };
    match remember_always_allow(&dir, &call, args.policy.mode) {
        Ok((path, rule)) => {
            println!("# saved in {}\n{rule}", path.display());
            Ok(exit::OK)
        }
        Err(e) => bail!("cannot remember this approval: {e}"),
    }
}
