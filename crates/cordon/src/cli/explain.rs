//! `cordon explain -- CMD…`: what `cordon run` would do with a command, without running it —
//! the policy's decision and the rule behind it, then the sandbox it would get, and what of
//! this environment it would get (names and reasons, never values).

use clap::Args;
use serde_json::json;

use super::PolicyFlags;
use super::flags::RunArgs;
use cordon_app::config::RunConfig;
use cordon_app::exec::Placement;
use cordon_app::plan::{Plan, plan};

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
    let sources = args.run.sources()?;
    let decider = cordon_app::decide::Decider::for_runs(&args.policy.config(), &sources)?;
    let config = sources.resolve()?;
    for why in &config.left_out {
        eprintln!("cordon: warning: settings left out: {why}");
    }
    let mut backend = args.run.backend.choice();
    backend.settle(&config)?;
    let program = args.run.program();
    if program == cordon_app::run::Program::Argv(Vec::new()) {
        anyhow::bail!(
            "give a command (`cordon run ls -la`; put `--` before one that starts with `-`) or a shell string with -c"
        );
    }
    let plan = plan(&config)?;
    plan.warn();
    let Plan {
        cwd,
        writable,
        read_only,
        hidden,
        reopened,
        unix_sockets,
        timeout,
        caches,
        ..
    } = plan.for_backend(&backend);
    // The policy sees what an agent would hand it: the command as one shell string.
    let command = match &program {
        cordon_app::run::Program::Script(s) => s.clone(),
        cordon_app::run::Program::Argv(argv) => {
            shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_else(|_| argv.join(" "))
        }
    };
    // `cordon run` always sandboxes; the settings may place an agent's run elsewhere.
    let (outcome, placement) =
        decider.decide_command(&command, false, args.policy.config().options());
    let net = net_summary(&config, &args.run.publish);
    let env = env_summary(&config, &backend)?;
    let report = json!({
        "command": command,
        "policy": outcome,
        "when_an_agent_runs_it": placement.fields(),
        "backend": backend.name(),
        "shell": cordon_app::run::shell_said(&backend),
        "cwd": cwd,
        "writable": std::iter::once(&cwd).chain(&writable).collect::<Vec<_>>(),
        "read_only_inside_writable": read_only,
        "hidden": hidden,
        "readable_again": reopened,
        "unix_sockets": unix_sockets,
        "package_caches": caches.as_ref().map(|c| json!({
            "dir": c.root,
            "env": c.vars().into_iter().collect::<std::collections::BTreeMap<_, _>>(),
        })),
        "network": net,
        "env": env,
        "credentials": cordon_app::credentials::summary(&config.expose_credentials),
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
    println!("shell:     {}", report["shell"].as_str().unwrap_or("?"));
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
    if let Some(c) = &caches {
        let names: Vec<String> = c.vars().into_iter().map(|(k, _)| k).collect();
        println!(
            "package caches: the project's own, kept between its runs, never the home directory's: {} ({})",
            c.root.display(),
            names.join(", ")
        );
    }
    println!(
        "credential stores: hidden from the run and refused to every tool call (filesystem.expose_credentials in your user settings shows one by name):"
    );
    for store in report["credentials"].as_array().into_iter().flatten() {
        let paths: Vec<&str> = store["paths"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
            .collect();
        println!(
            "  {:<7} {}{}: {}",
            store["name"].as_str().unwrap_or("?"),
            if store["hidden"] == true {
                ""
            } else {
                "EXPOSED, "
            },
            store["what"].as_str().unwrap_or("?"),
            paths.join(", ")
        );
    }
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
    // Names and reasons only, the names that share a reason on one line: a value is never
    // printed.
    for (title, key) in [
        ("environment: kept", "kept"),
        ("environment: withheld", "withheld"),
    ] {
        let items = env[key].as_array().cloned().unwrap_or_default();
        println!("{title} ({}):", items.len());
        let mut reasons: Vec<(&str, Vec<&str>)> = Vec::new();
        for i in &items {
            let (name, why) = (
                i["name"].as_str().unwrap_or_default(),
                i["why"].as_str().unwrap_or_default(),
            );
            match reasons.iter_mut().find(|(w, _)| *w == why) {
                Some((_, names)) => names.push(name),
                None => reasons.push((why, vec![name])),
            }
        }
        for (why, names) in reasons {
            println!("  {}: {why}", names.join(", "));
        }
    }
    if let Some(set) = env["set_by_cordon"].as_str() {
        println!("environment: set by cordon: {set}");
    }
    Ok(0)
}

/// What of this environment a run would pass, and why, by name: never a value.
fn env_summary(
    config: &RunConfig,
    backend: &cordon_app::run::backend::BackendChoice,
) -> anyhow::Result<serde_json::Value> {
    let sorted = config
        .env_rules()?
        .sort(cordon_app::run::launch_environment(), backend.env_place());
    let mut judged = sorted.judged;
    judged.sort_by(|a, b| a.name.cmp(&b.name));
    let list = |kept: bool| -> Vec<serde_json::Value> {
        judged
            .iter()
            .filter(|j| j.kept == kept)
            .map(|j| json!({"name": j.name, "why": j.why}))
            .collect()
    };
    let mut set = vec![match backend.env_place() {
        cordon_app::run::backend::Place::Host => "TMPDIR (a private directory of the run's)",
        cordon_app::run::backend::Place::Image => {
            "HOME (the container's or pod's own); in a container, CORDON_SANDBOX (its name)"
        }
    }];
    if config.net.any_allowed() {
        set.push("HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY and their kin (cordon's proxy)");
    }
    Ok(json!({
        "kept": list(true),
        "withheld": list(false),
        "set_by_cordon": set.join("; "),
    }))
}

/// The run's network as `cordon explain` tells it.
fn net_summary(config: &RunConfig, publish: &[cordon_app::proxy::Publish]) -> serde_json::Value {
    let summary = if config.host_network {
        "the host's network (--network host)"
    } else if config.net.any_allowed() {
        "only through cordon's proxy, to the allowed hosts"
    } else {
        "none: the command's own loopback only"
    };
    json!({
        "summary": summary,
        "allow_domains": config.net.allow_domains,
        "deny_domains": config.net.deny_domains,
        "allow_private_ips": config.net.allow_private_ips,
        "published": publish.iter().map(|p| format!("127.0.0.1:{} -> {}", p.host_port, p.port)).collect::<Vec<_>>(),
    })
}
