//! cordon's policy engine: may this tool call run — allow, deny, or ask the user?
//!
//! Rules are read from TOML policy files in Gemini CLI's format (which cordon reads unchanged)
//! plus a few keys of cordon's own, ranked by tier (built-in < extension < workspace < user <
//! admin) and priority. Shell commands are parsed with a real bash parser and every command in
//! them is checked on its own; what cannot be analysed is never allowed.
//!
//! ```
//! use cordon_policy::{load, CheckOptions, Environment, NoExternalRunner, PolicyEngine, PolicySources, ToolCall};
//! let set = load(&PolicySources { builtin: true, ..Default::default() });
//! let engine = PolicyEngine::new(set, Environment::default()).expect("built-in policies load");
//! let call = ToolCall::new("run_shell_command", serde_json::json!({"command": "git status"}));
//! let outcome = engine.check(&call, CheckOptions::default(), &NoExternalRunner);
//! assert_eq!(outcome.decision.as_str(), "allow");
//! ```

pub mod args;
pub mod checkers;
mod engine;
pub mod load;
pub mod rule;
pub mod shell;
pub mod tools;
mod types;

pub use checkers::{Environment, ExternalRunner, NoExternalRunner, ProcessRunner};
pub use engine::{
    CheckOptions, CheckerTrace, Explanation, Outcome, PartTrace, PolicyEngine, RuleSummary,
};
pub use load::{LoadIssue, PolicySet, PolicySources, SettingsRules, load};
pub use types::{ApprovalMode, Decision, Tier, ToolCall};
