//! `cordon check`: one decision, or a stream of them.

use std::io::{BufRead, Write};

use anyhow::Context;
use clap::Args;
use cordon_policy::{ApprovalMode, ProcessRunner, ToolCall};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{CallFlags, PolicyFlags};
use crate::exit;

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
        let engine = args.policy.engine()?;
        let outcome = engine.check(&call, args.policy.options(), &ProcessRunner);
        println!("{}", serde_json::to_string(&outcome)?);
        return Ok(exit::OK);
    }
    let engine = args.policy.engine()?;
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for (n, line) in stdin.lock().lines().enumerate() {
        let line = line.context("cannot read standard input")?;
        if line.trim().is_empty() {
            continue;
        }
        let reply = match parse_request(&line, args.policy.options().mode) {
            Ok((call, mode)) => {
                let mut opts = args.policy.options();
                opts.mode = mode;
                serde_json::to_value(engine.check(&call, opts, &ProcessRunner))?
            }
            // A bad line gets an error in its place, so answers stay in step with requests.
            Err(e) => json!({ "error": format!("line {}: {e}", n + 1) }),
        };
        writeln!(out, "{reply}")?;
        out.flush()?;
    }
    Ok(exit::OK)
}

fn parse_request(
    line: &str,
    default_mode: ApprovalMode,
) -> Result<(ToolCall, ApprovalMode), String> {
    let req: Request =
        serde_json::from_str(line).map_err(|e| format!("not a valid request: {e}"))?;
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
