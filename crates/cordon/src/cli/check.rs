//! `cordon check`: one decision, or a stream of them.

use std::io::{BufRead, Read, Write};

use anyhow::Context;
use clap::Args;
use cordon_policy::{ApprovalMode, ToolCall};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{CallFlags, PolicyFlags};
use crate::exit;
use cordon_app::decide::{Decider, LiveDecider};

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
        let outcome =
            Decider::new(&args.policy.config())?.check(&call, args.policy.config().options());
        println!("{}", serde_json::to_string(&outcome)?);
        return Ok(exit::OK);
    }
    let mut live = LiveDecider::new(args.policy.config(), None)?;
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
                parse_request(text, args.policy.config().options().mode),
                live.current(),
            ) {
                (Ok(_), Err(e)) => json!({ "error": format!("line {n}: {e}") }),
                (Ok((call, mode)), Ok(decider)) => {
                    let mut opts = args.policy.config().options();
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
