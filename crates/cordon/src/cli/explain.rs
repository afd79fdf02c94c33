//! `cordon explain -- CMD…`: what `cordon run` would do with a command, without running it —
//! the policy's decision and the rule behind it, then the sandbox it would get.

use clap::Args;
use serde_json::json;

use super::PolicyFlags;
use super::run::{Plan, RunArgs, plan, with_settings};
use cordon_app::exec::Placement;

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// Print it as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    policy: PolicyFlags,
    #[command(flatten)]
    run: RunArgs,
}

pub fn run(args: ExplainArgs) -> anyhow::Result<u8> {
    let decider = cordon_app::decide::Decider::for_runs(&args.policy.config(), &args.run.sandbox)?;
    let run = with_settings(args.run)?;
    let plan = plan(&run)?;
    plan.warn();
    let Plan {
        argv,
        cwd,
        writable,
        read_only,
        hidden,
        reopened,
        unix_sockets,
        timeout,
        ..
    } = plan;
    // The policy sees what an agent would hand it: the command as one shell string.
    let command = match run.shell() {
        Some(s) => s.to_string(),
        None => shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_else(|_| argv.join(" ")),
    };
    // `cordon run` always sandboxes; the settings may place an agent's run elsewhere.
    let (outcome, placement) =
        decider.decide_command(&command, false, args.policy.config().options());
    let net = run.net_summary();
    let report = json!({
        "command": command,
        "policy": outcome,
        "when_an_agent_runs_it": placement.fields(),
        "backend": run.backend_name(),
        "cwd": cwd,
        "writable": std::iter::once(&cwd).chain(&writable).collect::<Vec<_>>(),
        "read_only_inside_writable": read_only,
        "hidden": hidden,
        "readable_again": reopened,
        "unix_sockets": unix_sockets,
        "network": net,
        "timeout_seconds": timeout.map(|t| t.as_secs_f64()),
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(0);
    }
    let decision = report["policy"]["decision"].as_str().unwrap_or("?");
    println!("command:   {command}");
    println!(
        "policy:    {decision} — {}",
        report["policy"]["reason"].as_str().unwrap_or("")
    );
    if let Some(source) = report["policy"]["rule"]["source"].as_str() {
        println!("           rule at {source}");
    }
    if let Placement::Outside { why } = &placement {
        println!("agents:    exec, shell and mcp run it OUTSIDE the sandbox: {why}");
    }
    println!("backend:   {}", report["backend"].as_str().unwrap_or("?"));
    let list = |title: &str, key: &str| {
        let items = report[key].as_array().cloned().unwrap_or_default();
        if !items.is_empty() {
            println!("{title}");
            for i in items {
                println!("  {}", i.as_str().unwrap_or_default());
            }
        }
    };
    println!("reads:     everything but what is hidden below");
    list("writes:", "writable");
    list("read-only inside those:", "read_only_inside_writable");
    list("hidden (unreadable):", "hidden");
    list("readable again inside hidden:", "readable_again");
    list("unix sockets:", "unix_sockets");
    println!("network:   {}", net["summary"].as_str().unwrap_or("?"));
    for (title, key) in [
        ("  allowed:", "allow_domains"),
        ("  denied:", "deny_domains"),
    ] {
        let items: Vec<&str> = net[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
            .collect();
        if !items.is_empty() {
            println!("{title} {}", items.join(", "));
        }
    }
    Ok(0)
}
