//! The vocabulary every other module speaks: decisions, approval modes, tiers and tool calls.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What the engine says about one tool call.
///
/// The order of the variants is the order of strictness, so `max` picks the strictest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allow,
    AskUser,
    Deny,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::AskUser => "ask_user",
            Decision::Deny => "deny",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "allow" => Some(Decision::Allow),
            "ask_user" => Some(Decision::AskUser),
            "deny" => Some(Decision::Deny),
            _ => None,
        }
    }

    /// The stricter of two decisions.
    pub fn strictest(self, other: Decision) -> Decision {
        self.max(other)
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How much the user has delegated to the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum ApprovalMode {
    #[default]
    #[serde(rename = "default")]
    Default,
    #[serde(rename = "autoEdit")]
    AutoEdit,
    #[serde(rename = "plan")]
    Plan,
    #[serde(rename = "yolo")]
    Yolo,
}

impl ApprovalMode {
    pub const ALL: [ApprovalMode; 4] = [
        ApprovalMode::Default,
        ApprovalMode::AutoEdit,
        ApprovalMode::Plan,
        ApprovalMode::Yolo,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalMode::Default => "default",
            ApprovalMode::AutoEdit => "autoEdit",
            ApprovalMode::Plan => "plan",
            ApprovalMode::Yolo => "yolo",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// Modes in which the user has already agreed that commands may write files, so a
    /// redirection does not need a second look.
    pub fn allows_redirection(self) -> bool {
        matches!(self, ApprovalMode::AutoEdit | ApprovalMode::Yolo)
    }
}

impl fmt::Display for ApprovalMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a rule came from. Later tiers outrank earlier ones whatever their priorities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    Default,
    Extension,
    Workspace,
    User,
    Admin,
}

impl Tier {
    /// The integer part of a rule's effective priority.
    pub fn base(self) -> u32 {
        match self {
            Tier::Default => 1,
            Tier::Extension => 2,
            Tier::Workspace => 3,
            Tier::User => 4,
            Tier::Admin => 5,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Default => "default",
            Tier::Extension => "extension",
            Tier::Workspace => "workspace",
            Tier::User => "user",
            Tier::Admin => "admin",
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One call an agent wants to make.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The tool's name as the agent knows it, e.g. `run_shell_command` or `mcp_github_create_issue`.
    pub name: String,
    /// The arguments, as the model wrote them.
    #[serde(default = "empty_args")]
    pub args: serde_json::Value,
    /// For a tool served by an MCP server: the server's name as configured. When it is given,
    /// rules naming a server must agree with it, not only with the tool-name prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The tool's annotations as its server declared them (`readOnlyHint`, …), for rules with
    /// `toolAnnotations`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<serde_json::Map<String, serde_json::Value>>,
    /// The sub-agent making the call, for rules with `subagent`; `None` for the main agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent: Option<String>,
}

fn empty_args() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

impl ToolCall {
    pub fn new(name: impl Into<String>, args: serde_json::Value) -> Self {
        ToolCall {
            name: name.into(),
            args,
            server: None,
            annotations: None,
            subagent: None,
        }
    }

    pub fn with_server(mut self, server: impl Into<String>) -> Self {
        self.server = Some(server.into());
        self
    }
}
