//! Safety checkers: second opinions that can make a decision stricter, never looser.
//!
//! A checker runs after the rules have decided, on calls the rules did not deny. The built-in
//! `allowed-path` checker keeps file arguments inside the workspace; an external checker is any
//! program that reads the call as JSON and answers `{"decision", "reason"}`.

mod allowed_path;
mod external;

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use allowed_path::AllowedPathConfig;
pub use external::ProcessRunner;

use crate::rule::{Matcher, RuleSource};
use crate::types::{Decision, Tier, ToolCall};

/// What a checker does.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum CheckerKind {
    AllowedPath(AllowedPathConfig),
    External(ExternalChecker),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExternalChecker {
    pub name: String,
    /// Program and arguments. A checker without one denies every call it sees, as Gemini CLI
    /// does for an external checker it cannot find.
    pub command: Option<Vec<String>>,
    pub timeout: Duration,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Checker {
    pub kind: CheckerKind,
    /// Which parts of the context the checker is given (`environment`); all when absent.
    pub required_context: Option<Vec<String>>,
    pub config: serde_json::Map<String, Value>,
}

impl Checker {
    pub fn name(&self) -> &str {
        match &self.kind {
            CheckerKind::AllowedPath(_) => "allowed-path",
            CheckerKind::External(e) => &e.name,
        }
    }
}

/// A `[[safety_checker]]` entry: which calls a checker looks at.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckerRule {
    pub matcher: Matcher,
    pub priority: u16,
    pub tier: Tier,
    pub checker: Checker,
    pub source: RuleSource,
}

impl CheckerRule {
    pub fn rank(&self) -> u32 {
        self.tier.base() * 1000 + u32::from(self.priority)
    }
}

/// What a checker said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub decision: Decision,
    pub reason: String,
}

impl Verdict {
    pub fn deny(reason: impl Into<String>) -> Self {
        Verdict {
            decision: Decision::Deny,
            reason: reason.into(),
        }
    }
}

/// Where the call is being made: the directories file arguments must stay inside.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Environment {
    pub cwd: PathBuf,
    pub workspaces: Vec<PathBuf>,
}

/// Runs external checkers. The engine itself spawns nothing; the binary passes a
/// [`ProcessRunner`], tests and embedders may pass their own.
pub trait ExternalRunner {
    fn run(&self, checker: &ExternalChecker, input: &Value) -> Verdict;
}

/// Refuses every external checker: for callers that have not configured a runner, so an
/// external checker can never be skipped by accident.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoExternalRunner;

impl ExternalRunner for NoExternalRunner {
    fn run(&self, checker: &ExternalChecker, _input: &Value) -> Verdict {
        Verdict::deny(format!(
            "external checker `{}` cannot run here",
            checker.name
        ))
    }
}

/// The `allowed-path` check on its own, as the rules' checker makes it: every path argument of
/// `call` resolves inside the workspace, and outside `.git` and `.env` files. For a front that
/// acts on files itself (cordon's MCP server), which must keep them inside the workspace
/// whichever rule allowed the call, as Gemini CLI's own file tools do.
pub fn workspace_paths(call: &ToolCall, env: &Environment) -> Verdict {
    allowed_path::check(&AllowedPathConfig::default(), call, env)
}

pub(crate) fn run_checker(
    checker: &Checker,
    call: &ToolCall,
    env: &Environment,
    runner: &dyn ExternalRunner,
) -> Verdict {
    match &checker.kind {
        CheckerKind::AllowedPath(config) => allowed_path::check(config, call, env),
        CheckerKind::External(ext) => {
            let wants = |part: &str| {
                checker
                    .required_context
                    .as_ref()
                    .is_none_or(|r| r.iter().any(|p| p == part))
            };
            let mut context = serde_json::Map::new();
            if wants("environment") {
                context.insert(
                    "environment".into(),
                    serde_json::json!({ "cwd": env.cwd, "workspaces": env.workspaces }),
                );
            }
            let input = serde_json::json!({
                "protocolVersion": "1.0.0",
                "toolCall": { "name": call.name, "args": call.args },
                "context": context,
                "config": checker.config,
            });
            runner.run(ext, &input)
        }
    }
}
