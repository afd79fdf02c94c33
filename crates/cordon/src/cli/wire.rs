//! JSON lines as cordon reads them from agents: every line bounded, and the tool call that
//! `check --jsonl` and `exec --jsonl` both take.

use std::io::{BufRead, Read};

use anyhow::Context;
use cordon_policy::{ApprovalMode, ToolCall};
use serde::Deserialize;
use serde_json::Value;

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

/// Longest request line read; a longer one is answered with an error and skipped, so a
/// runaway client cannot make cordon hold unbounded memory.
pub const MAX_LINE: usize = 1 << 20;

/// Reads one line into `buf` (without the newline). `None` at end of input; `Some(false)` if
/// the line was longer than `MAX_LINE` (the rest of it is consumed and dropped).
pub fn read_line(input: &mut impl BufRead, buf: &mut Vec<u8>) -> anyhow::Result<Option<bool>> {
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

pub fn parse_request(
    line: &str,
    default_mode: ApprovalMode,
) -> Result<(ToolCall, ApprovalMode), String> {
    let value: Value =
        serde_json::from_str(line).map_err(|e| format!("not a valid request: {e}"))?;
    parse_call(value, default_mode)
}

/// One call as `check --jsonl` takes it (`cordon exec` takes the same, with `type` and `id`).
pub fn parse_call(
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
