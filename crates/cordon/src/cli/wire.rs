//! JSON lines as cordon reads them from agents: every line bounded, and the tool call that
//! `check --jsonl` and `exec --jsonl` both take.

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

pub use cordon_app::lines::{MAX_LINE, read_line};

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
