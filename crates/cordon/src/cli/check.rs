//! `cordon check`: one decision, or a stream of them.

use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use cordon_policy::{ApprovalMode, Decision, Outcome, PolicyEngine, ProcessRunner, Tier, ToolCall};
use serde::Deserialize;
use serde_json::{Value, json};

use super::placement::Placer;
use super::{CallFlags, PolicyFlags};
use crate::exit;
use cordon_app::exec::Placement;

#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    call: CallFlags,
    #[command(flatten)]
    policy: PolicyFlags,
    /// Read one call per line from stdin ({"tool","args","mode"?}) and write one decision per
    /// line, in order.
    #[arg(long, conflicts_with_all = ["tool", "args", "server", "annotations"])]
    jsonl: bool,
}

/// One request line of `check --jsonl`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    tool: String,
    #[serde(default)]
    args: Option<Value>,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    server: Option<String>,
    #[serde(default)]
    annotations: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    subagent: Option<String>,
}

pub fn run(args: CheckArgs) -> anyhow::Result<u8> {
    if !args.jsonl {
        let call = args.call.call()?;
        let outcome = Decider::new(&args.policy)?.check(&call, args.policy.options());
        println!("{}", serde_json::to_string(&outcome)?);
        return Ok(exit::OK);
    }
    let mut live = LiveDecider::new(&args.policy, None)?;
    let mut input = std::io::stdin().lock();
    let mut out = std::io::stdout().lock();
    let mut line = Vec::new();
    let mut n = 0;
    loop {
        n += 1;
        let Some(complete) = read_line(&mut input, &mut line)? else {
            break;
        };
        let reply = if !complete {
            json!({ "error": format!("line {n}: longer than {MAX_LINE} bytes; not read") })
        } else {
            let text = match std::str::from_utf8(&line) {
                Ok(t) => t.trim(),
                Err(e) => {
                    writeln!(
                        out,
                        "{}",
                        json!({ "error": format!("line {n}: not UTF-8: {e}") })
                    )?;
                    out.flush()?;
                    continue;
                }
            };
            if text.is_empty() {
                continue;
            }
            match (
                parse_request(text, args.policy.options().mode),
                live.current(),
            ) {
                (Ok(_), Err(e)) => json!({ "error": format!("line {n}: {e}") }),
                (Ok((call, mode)), Ok(decider)) => {
                    let mut opts = args.policy.options();
                    opts.mode = mode;
                    serde_json::to_value(decider.check(&call, opts))?
                }
                // A bad line gets an error in its place, so answers stay in step with requests.
                (Err(e), _) => json!({ "error": format!("line {n}: {e}") }),
            }
        };
        writeln!(out, "{reply}")?;
        out.flush()?;
    }
    Ok(exit::OK)
}

/// Longest request line read; a longer one is answered with an error and skipped, so a
/// runaway client cannot make cordon hold unbounded memory.
pub(super) const MAX_LINE: usize = 1 << 20;

/// Reads one line into `buf` (without the newline). `None` at end of input; `Some(false)` if
/// the line was longer than `MAX_LINE` (the rest of it is consumed and dropped).
pub(super) fn read_line(
    input: &mut impl BufRead,
    buf: &mut Vec<u8>,
) -> anyhow::Result<Option<bool>> {
    buf.clear();
    let read = input
        .by_ref()
        .take(MAX_LINE as u64 + 1)
        .read_until(b'\n', buf)
        .context("cannot read standard input")?;
    if read == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        return Ok(Some(true));
    }
    if buf.len() <= MAX_LINE {
        return Ok(Some(true)); // the last line, without a newline
    }
    // Too long: skip to the end of the line.
    loop {
        let chunk = input.fill_buf().context("cannot read standard input")?;
        if chunk.is_empty() {
            break;
        }
        match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => {
                input.consume(i + 1);
                break;
            }
            None => {
                let len = chunk.len();
                input.consume(len);
            }
        }
    }
    buf.clear();
    Ok(Some(false))
}

fn parse_request(
    line: &str,
    default_mode: ApprovalMode,
) -> Result<(ToolCall, ApprovalMode), String> {
    let value: Value =
        serde_json::from_str(line).map_err(|e| format!("not a valid request: {e}"))?;
    parse_call(value, default_mode)
}

/// One call as `check --jsonl` takes it (`cordon exec` takes the same, with `type` and `id`).
pub(super) fn parse_call(
    value: Value,
    default_mode: ApprovalMode,
) -> Result<(ToolCall, ApprovalMode), String> {
    let req: Request =
        serde_json::from_value(value).map_err(|e| format!("not a valid request: {e}"))?;
    if req.tool.is_empty() {
        return Err("`tool` cannot be empty".into());
    }
    let args = match req.args {
        None => Value::Object(Default::default()),
        Some(Value::Object(m)) => Value::Object(m),
        Some(_) => return Err("`args` must be a JSON object".into()),
    };
    let mode = match req.mode.as_deref() {
        None => default_mode,
        Some(m) => ApprovalMode::parse(m)
            .ok_or_else(|| format!("unknown mode `{m}`; use default, autoEdit, plan or yolo"))?,
    };
    let mut call = ToolCall::new(req.tool, args);
    call.server = req.server;
    call.annotations = req.annotations;
    call.subagent = req.subagent;
    Ok((call, mode))
}

/// A decider for a long-running cordon (`check --jsonl`, `exec`) that follows its files:
/// policy or settings edited since the last request are decided with, and while they do not
/// load nothing is decided at all (never with the stale ones).
pub struct LiveDecider<'a> {
    policy: &'a PolicyFlags,
    /// For the deciders of runs (see [`Decider::for_runs`]).
    sandbox: Option<&'a super::run::SandboxFlags>,
    stamp: u64,
    /// The fingerprint of the files among those that lie where runs may write.
    written_stamp: u64,
    decider: anyhow::Result<Decider>,
}

impl<'a> LiveDecider<'a> {
    /// The first decider must load: a broken file at start is the caller's error.
    pub fn new(
        policy: &'a PolicyFlags,
        sandbox: Option<&'a super::run::SandboxFlags>,
    ) -> anyhow::Result<Self> {
        let mut live = LiveDecider {
            policy,
            sandbox,
            stamp: 0,
            written_stamp: 0,
            decider: Err(anyhow::anyhow!("not loaded yet")),
        };
        live.stamp = live.fingerprint();
        live.written_stamp = live.writable_fingerprint();
        live.decider = Ok(live.load()?);
        Ok(live)
    }

    fn load(&self) -> anyhow::Result<Decider> {
        match self.sandbox {
            Some(sandbox) => Decider::for_runs(self.policy, sandbox),
            None => Decider::new(self.policy),
        }
    }

    fn fingerprint(&self) -> u64 {
        let given = self.sandbox.and_then(|s| s.settings_file());
        self.policy.fingerprint() ^ cordon_app::settings::fingerprint(given)
    }

    /// The policy and settings files that lie where the runs may write (the working
    /// directory and `--allow-write` places), fingerprinted.
    fn writable_fingerprint(&self) -> u64 {
        let Some(sandbox) = self.sandbox else {
            return 0;
        };
        let Ok(cwd) = std::env::current_dir() else {
            return 0;
        };
        let places: Vec<PathBuf> = std::iter::once(cwd.clone())
            .chain(sandbox.allow_write().iter().map(|p| cwd.join(p)))
            .collect();
        let files: Vec<PathBuf> = self
            .policy
            .source_paths()
            .unwrap_or_default()
            .into_iter()
            .chain(sandbox.settings_file().map(Path::to_path_buf))
            .filter(|f| places.iter().any(|p| f.starts_with(p)))
            .collect();
        cordon_app::settings::fingerprint(files.iter().map(PathBuf::as_path))
    }

    /// The decider for the next request, reloaded if a file changed since the last one.
    pub fn current(&mut self) -> Result<&Decider, String> {
        self.current_unless_running(false)
    }

    /// As [`Self::current`]; but while runs are going (`running`), a change to a file where
    /// they may write waits until they have ended. A sandbox keeps cordon's own files
    /// read-only, but where it cannot (the Landlock-only fallback puts them back only after
    /// the run), a run could otherwise plant the rules the next run is decided by.
    pub fn current_unless_running(&mut self, running: bool) -> Result<&Decider, String> {
        let now = self.fingerprint();
        if now != self.stamp {
            let written = self.writable_fingerprint();
            if running && written != self.written_stamp {
                tracing::info!(
                    "policy or settings changed where runs may write: applied once they end"
                );
                return self.decider.as_ref().map_err(|e| {
                    format!("the policy or settings changed and no longer load; fix them: {e:#}")
                });
            }
            self.stamp = now;
            self.written_stamp = written;
            self.decider = self.load();
            match &self.decider {
                Ok(_) => tracing::info!("policy or settings changed: reloaded"),
                Err(e) => tracing::warn!("policy or settings changed and do not load: {e:#}"),
            }
        }
        self.decider.as_ref().map_err(|e| {
            format!("the policy or settings changed and no longer load; fix them: {e:#}")
        })
    }
}

/// The policy engine with what the settings add to its answers: what `check`, `exec`,
/// `shell` and `mcp` decide with, and where the commands they allow run.
#[derive(Debug)]
pub struct Decider {
    pub engine: PolicyEngine,
    /// Where `sandbox.auto_allow_if_sandboxed = true` came from, if it is on.
    auto_allow: Option<String>,
    pub placer: Placer,
    /// `limits.timeout` (or `--timeout`), for runs that do not give their own.
    pub timeout: Option<std::time::Duration>,
}

impl Decider {
    /// With the settings the policy flags find (`cordon check`).
    pub fn new(policy: &super::PolicyFlags) -> anyhow::Result<Self> {
        let (engine, settings) = policy.engine_and_settings()?;
        Ok(Decider::with_settings(engine, &settings))
    }

    /// For the commands `exec`, `shell` and `mcp` run: placed by the settings their sandbox
    /// flags find (`--settings`, `--profile` and `--trust-project` included).
    pub fn for_runs(
        policy: &super::PolicyFlags,
        sandbox: &super::run::SandboxFlags,
    ) -> anyhow::Result<Self> {
        Decider::for_runs_with(policy, &sandbox.settings(policy.trust_workspace)?)
    }

    /// As [`Decider::for_runs`], with those settings read already.
    pub fn for_runs_with(
        policy: &super::PolicyFlags,
        settings: &cordon_app::settings::Settings,
    ) -> anyhow::Result<Self> {
        Ok(Decider::with_settings(policy.engine()?, settings))
    }

    fn with_settings(engine: PolicyEngine, s: &cordon_app::settings::Settings) -> Self {
        Decider {
            engine,
            auto_allow: s
                .auto_allow_if_sandboxed
                .as_ref()
                .filter(|v| v.value)
                .map(|v| v.from.to_string()),
            placer: Placer::from_settings(s),
            timeout: super::run::each_run_timeout(s),
        }
    }

    /// The decision for a call whose command, if it runs one, runs in the sandbox unless the
    /// settings place it outside.
    pub fn check(&self, call: &ToolCall, opts: cordon_policy::CheckOptions) -> Outcome {
        let placement = self.engine.is_shell_tool(&call.name).then(|| {
            let command = call.args["command"].as_str().unwrap_or_default();
            self.placer
                .place(command, false)
                .unwrap_or(Placement::Sandbox)
        });
        self.check_placed(call, opts, placement.as_ref())
    }

    /// The decision for a call whose command runs as `placement` says.
    ///
    /// `sandbox.auto_allow_if_sandboxed`: a shell command that will run in the sandbox need
    /// not ask. Only the defaults' asks give way: an ask someone wrote into a policy holds,
    /// and so does every deny.
    pub fn check_placed(
        &self,
        call: &ToolCall,
        opts: cordon_policy::CheckOptions,
        placement: Option<&Placement>,
    ) -> Outcome {
        let mut o = self.engine.check(call, opts, &ProcessRunner);
        let Some(from) = &self.auto_allow else {
            return o;
        };
        if o.decision != Decision::AskUser
            || placement != Some(&Placement::Sandbox)
            || !self.engine.is_shell_tool(&call.name)
            || o.rule.as_ref().is_some_and(|r| r.tier != Tier::Default)
        {
            return o;
        }
        o.decision = Decision::Allow;
        o.reason = format!(
            "{}; allowed without asking: it runs sandboxed (sandbox.auto_allow_if_sandboxed, {from})",
            o.reason
        );
        o
    }
}
