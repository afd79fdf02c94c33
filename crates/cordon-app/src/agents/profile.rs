//! `cordon run --agent NAME`: what a whole agent needs besides what the settings give any
//! run. Its own settings and session directory must be writable (it keeps its login, history
//! and settings there) and its model API's hosts reachable; everything else stays as the
//! settings say, so the agent and every command it starts are confined like any run.
//!
//! A profile only adds: to the paths the settings allow writing, and to the allowed hosts,
//! unless the managed settings lock those to their own list (`only_managed_domains`), in which
//! case the hosts are left out with a warning.

use std::path::{Path, PathBuf};

use super::Agent;

/// What an agent adds to a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// Its own directories, made when missing so that the run can make them writable.
    pub dirs: Vec<PathBuf>,
    /// The hosts it talks to: its model API and its sign-in.
    pub domains: Vec<&'static str>,
    /// Its API key's variables: passed although they look like credentials, as the agent
    /// cannot work without them. The hosts it may send them to are only those above and what
    /// the settings allow.
    pub keep_env: Vec<&'static str>,
    /// Its own settings' variables (names, or patterns with `*`), which the allowlist lacks:
    /// passed as the allowlist's own are, only when they do not look like credentials
    /// (`ANTHROPIC_CUSTOM_HEADERS` carrying a token stays out).
    pub settings_env: Vec<&'static str>,
    /// Its own login's credential store ([`crate::credentials::STORES`]), which it must read
    /// to work; exposed in its runs only.
    pub credentials: &'static str,
    /// Its settings files in its own directories: what the run changed there that would run
    /// or allow something is put back after it ([`cordon_sandbox::kept`]).
    pub settings_files: Vec<PathBuf>,
    /// The top-level settings keys it may change for itself (its model, its look); a change
    /// to any other is undone.
    pub harmless_keys: &'static [&'static str],
    /// Its directories of commands, sub-agents, hooks, plugins, extensions, skills and rules,
    /// which it reads as instructions or runs: read-only in its run (made empty for the run
    /// where missing, and removed after it if still empty).
    pub control_dirs: Vec<PathBuf>,
}

/// The profile of `agent` for the user whose home is `home`; `codex_home` is `CODEX_HOME`
/// where set.
pub fn profile(agent: Agent, home: &Path, codex_home: Option<&Path>) -> Profile {
    let claude = home.join(".claude");
    let gemini = home.join(".gemini");
    let codex = codex_home.map_or_else(|| home.join(".codex"), Path::to_path_buf);
    let under = |dir: &Path, names: &[&str]| -> Vec<PathBuf> {
        names.iter().map(|n| dir.join(n)).collect()
    };
    match agent {
        Agent::ClaudeCode => Profile {
            credentials: "claude",
            settings_files: under(&claude, &["settings.json", "settings.local.json"]),
            harmless_keys: &[
                "$schema",
                "model",
                "outputStyle",
                "theme",
                "language",
                "alwaysThinkingEnabled",
                "cleanupPeriodDays",
                "includeCoAuthoredBy",
                "spinnerTipsEnabled",
                "feedbackSurveyState",
                "verbose",
            ],
            control_dirs: under(
                &claude,
                &[
                    "commands",
                    "agents",
                    "hooks",
                    "plugins",
                    "skills",
                    "output-styles",
                ],
            ),
            dirs: vec![claude.clone()],
            // Claude Code also keeps state in ~/.claude.json, which it replaces by renaming a
            // new file over it: that needs the home directory writable, so it stays read-only
            // and what Claude Code changes there inside cordon is not kept.
            domains: vec![
                "api.anthropic.com",
                "console.anthropic.com",
                "statsig.anthropic.com",
                "claude.ai",
                "platform.claude.com",
            ],
            keep_env: vec!["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"],
            settings_env: vec![
                "ANTHROPIC_*",
                "CLAUDE_*",
                "DISABLE_*",
                "IS_SANDBOX",
                // A number of tokens, not one: its name alone would keep it out.
                "MAX_THINKING_TOKENS",
                "BASH_DEFAULT_TIMEOUT_MS",
                "BASH_MAX_TIMEOUT_MS",
                "MCP_TIMEOUT",
            ],
        },
        Agent::GeminiCli => Profile {
            credentials: "gemini",
            settings_files: under(&gemini, &["settings.json"]),
            // Its look and its model; not `general` (its editor is a program it starts) nor
            // `security` (its sign-in method, chosen again if undone).
            harmless_keys: &["$schema", "ui", "model", "accessibility", "output"],
            control_dirs: under(&gemini, &["commands", "extensions", "policies", "skills"]),
            dirs: vec![gemini.clone()],
            domains: vec![
                "generativelanguage.googleapis.com",
                "cloudcode-pa.googleapis.com",
                "oauth2.googleapis.com",
                "accounts.google.com",
            ],
            keep_env: vec!["GEMINI_API_KEY", "GOOGLE_API_KEY"],
            settings_env: vec![
                "GEMINI_*",
                "GOOGLE_GEMINI_BASE_URL",
                "GOOGLE_CLOUD_PROJECT",
                "GOOGLE_CLOUD_LOCATION",
                "GOOGLE_GENAI_USE_VERTEXAI",
            ],
        },
        Agent::Codex => Profile {
            credentials: "codex",
            // Not `projects`: a project trusted there has its own config.toml read.
            settings_files: under(&codex, &["config.toml", "hooks.json"]),
            harmless_keys: &[
                "model",
                "model_reasoning_effort",
                "model_reasoning_summary",
                "model_verbosity",
                "personality",
                "tui",
                "notice",
                "hide_agent_reasoning",
                "show_raw_agent_reasoning",
                "file_opener",
            ],
            control_dirs: under(&codex, &["rules", "skills", "plugins", "prompts"]),
            dirs: vec![codex.clone()],
            domains: vec!["api.openai.com", "chatgpt.com", "auth.openai.com"],
            keep_env: vec!["OPENAI_API_KEY", "CODEX_API_KEY"],
            settings_env: vec!["CODEX_*", "OPENAI_BASE_URL"],
        },
    }
}
