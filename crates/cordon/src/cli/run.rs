//! `cordon run`: a command in the sandbox.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use cordon_sandbox::linux::run as run_sandboxed;
use cordon_sandbox::{
    NetworkMode, RunGuard, SandboxSpec, existing_protected, filter_environment,
    linked_worktree_writable,
};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Network {
    /// Only loopback inside the sandbox.
    None,
    /// The host's network.
    Host,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// A path the command may write besides the working directory (repeatable).
    #[arg(long = "allow-write", value_name = "PATH")]
    allow_write: Vec<PathBuf>,
    /// A path inside a writable one that stays read-only (repeatable).
    #[arg(long = "deny-write", value_name = "PATH")]
    deny_write: Vec<PathBuf>,
    /// A path the command may not read: a directory appears empty, a file unreadable
    /// (repeatable).
    #[arg(long = "deny-read", value_name = "PATH")]
    deny_read: Vec<PathBuf>,
    /// A path inside a --deny-read directory that stays readable (repeatable).
    #[arg(long = "allow-read", value_name = "PATH")]
    allow_read: Vec<PathBuf>,
    /// Network: none (loopback only) or host.
    #[arg(long, value_enum, default_value = "none")]
    network: Network,
    /// Kill the command after this many seconds (exit status 124).
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<f64>,
    /// A Unix socket the command may connect to (repeatable); without one, the command cannot
    /// create Unix sockets.
    #[arg(long = "allow-unix-socket", value_name = "PATH")]
    allow_unix_socket: Vec<PathBuf>,
    /// Pass this variable even though it looks like a secret (repeatable).
    #[arg(long = "keep-env", value_name = "NAME")]
    keep_env: Vec<String>,
    /// Write what happened (exit code, timeout, what the sandbox blocked) as JSON to this file.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Run this string with /bin/sh -c.
    #[arg(short = 'c', value_name = "SHELL STRING", conflicts_with = "command")]
    shell: Option<String>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

/// `~/` is home, relative paths are against the working directory; the result must exist.
fn resolve(path: &Path, cwd: &Path, flag: &str) -> anyhow::Result<PathBuf> {
    let expanded = match path.strip_prefix("~") {
        Ok(rest) => {
            let home = std::env::var_os("HOME").context("~ needs HOME to be set")?;
            PathBuf::from(home).join(rest)
        }
        Err(_) => cwd.join(path),
    };
    std::fs::canonicalize(&expanded).with_context(|| {
        format!(
            "{flag} {}: cannot resolve {}",
            path.display(),
            expanded.display()
        )
    })
}

pub fn run(args: RunArgs) -> anyhow::Result<u8> {
    let argv = match (&args.shell, args.command.is_empty()) {
        (Some(s), _) => vec!["/bin/sh".to_string(), "-c".to_string(), s.clone()],
        (None, false) => args.command.clone(),
        (None, true) => bail!("give a command after `--` or a shell string with -c"),
    };
    let timeout = match args.timeout {
        Some(t) if !(t > 0.0 && t.is_finite()) => {
            bail!("--timeout must be a positive number of seconds")
        }
        Some(t) => Some(Duration::from_secs_f64(t)),
        None => None,
    };
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let cwd = std::fs::canonicalize(&cwd).context("cannot resolve the current directory")?;
    let mut writable = args
        .allow_write
        .iter()
        .map(|p| resolve(p, &cwd, "--allow-write"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut read_only = args
        .deny_write
        .iter()
        .map(|p| resolve(p, &cwd, "--deny-write"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    // In a linked git worktree, `git commit` writes into the main repository's objects and
    // refs; allow those, not its config or hooks.
    writable.extend(linked_worktree_writable(&cwd));
    // Start-up files, git's config and hooks, editor and agent settings stay read-only in
    // every writable place.
    for root in std::iter::once(&cwd).chain(&writable) {
        read_only.extend(existing_protected(root));
    }
    let hidden = args
        .deny_read
        .iter()
        .map(|p| resolve(p, &cwd, "--deny-read"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let reopened = args
        .allow_read
        .iter()
        .map(|p| resolve(p, &cwd, "--allow-read"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let unix_sockets = args
        .allow_unix_socket
        .iter()
        .map(|p| resolve(p, &cwd, "--allow-unix-socket"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let vars = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
    let (env, _removed) = filter_environment(vars, &args.keep_env);
    let spec = SandboxSpec {
        argv,
        cwd,
        env,
        writable,
        read_only,
        hidden,
        reopened,
        unix_sockets,
        network: match args.network {
            Network::None => NetworkMode::None,
            Network::Host => NetworkMode::Host,
        },
    };
    let guard = RunGuard::before(&spec.cwd, &spec.writable);
    let result = run_sandboxed(&spec, timeout);
    let undone = guard.undo();
    if !undone.is_empty() {
        eprintln!("cordon: ---- blocked by the sandbox (exact) ----");
        for u in &undone {
            eprintln!("cordon: removed {}: {}", u.path.display(), u.why);
        }
        eprintln!("cordon: ----");
    }
    let (code, timed_out, error) = match &result {
        Ok(outcome) => {
            if outcome.timed_out {
                eprintln!("cordon: the command ran longer than --timeout and was killed");
            }
            (
                u8::try_from(outcome.code).unwrap_or(u8::MAX),
                outcome.timed_out,
                None,
            )
        }
        Err(e) => {
            eprintln!("cordon: {e}");
            (e.exit_code(), false, Some(e.to_string()))
        }
    };
    if let Some(path) = &args.report {
        // What the sandbox blocked, for an agent to tell its model why a command failed. Only
        // what cordon saw itself is listed, so every entry is exact.
        let blocked: Vec<serde_json::Value> = undone
            .iter()
            .map(|u| serde_json::json!({ "path": u.path, "operation": "create", "rule": u.why, "exact": true }))
            .collect();
        let report = serde_json::json!({
            "exit_code": code,
            "timed_out": timed_out,
            "setup_error": error,
            "blocked": blocked,
        });
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("--report {}: cannot write the report", path.display()))?;
    }
    Ok(code)
}

/// `cordon doctor`.
pub fn doctor(json: bool) -> anyhow::Result<u8> {
    let found = cordon_sandbox::linux::doctor::probe();
    let missing_required = found.iter().any(|m| m.required && !m.available);
    if json {
        println!("{}", serde_json::to_string_pretty(&found)?);
    } else {
        for m in &found {
            let mark = if m.available {
                "ok  "
            } else if m.required {
                "FAIL"
            } else {
                "weak"
            };
            println!("{mark} {:<16} {}", m.name, m.detail);
            if let Some(fix) = &m.fix {
                println!("     {:<16} fix: {fix}", "");
            }
        }
        if missing_required {
            println!(
                "\ncordon run cannot sandbox commands on this machine until the FAIL lines are fixed."
            );
        }
    }
    Ok(if missing_required { 1 } else { 0 })
}
