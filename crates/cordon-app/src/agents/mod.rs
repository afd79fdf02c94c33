//! The coding agents cordon works inside: how each hands a tool call to a pre-tool-use hook,
//! what its tools are called in cordon's policy, and how it reads the hook's answer.
//!
//! - **Claude Code**: a `PreToolUse` hook gets `{hook_event_name, tool_name, tool_input, cwd,
//!   permission_mode, …}` on standard input and answers
//!   `{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision":
//!   "allow"|"deny"|"ask", "permissionDecisionReason": …}}`. A denial's reason goes to the
//!   model, an ask's to the person.
//! - **Gemini CLI**: a `BeforeTool` hook gets `{hook_event_name, tool_name, tool_input, cwd, …}`
//!   (its tools already have the names cordon's policy uses) and answers `{"decision": "deny",
//!   "reason": …}` to stop a call, whose reason goes to the model. It has no way to ask the
//!   person, so a call cordon would ask about is refused, with a reason that says so.
//!
//! - **Codex**: a `PreToolUse` hook gets Claude Code's input (its shell tool is `Bash`; a file
//!   edit is `apply_patch`, or a `Bash` command that pipes a patch into `apply_patch`). It reads
//!   only a denial (`permissionDecision: "deny"` with a reason, which goes to the model); it
//!   cannot ask the person, so an ask is refused as for Gemini CLI. A patch is decided as a write
//!   of each file it names.
//!
//! All three read exit status 2 as "blocked, the reason is on standard error": that is the
//! answer to input cordon cannot read, so that nothing it cannot analyse runs.
//!
//! With `--sandbox-shell`, Claude Code's and Gemini CLI's own shell tool gets its command back
//! rewritten to run in cordon's sandbox ([`sandbox_shell`]), and a question nobody will answer
//! there is contained or denied ([`Headless`]).
//!
//! Calls to cordon's own MCP server (named [`OWN_SERVER`], as `cordon setup` names it) are let
//! through: `cordon mcp` decides each of them itself, and can ask the person where the hook
//! cannot.

pub mod codex_trust;
pub mod profile;
pub mod sandbox_shell;
pub mod setup;

use anyhow::Context;
use cordon_policy::shell::Dialect;
use cordon_policy::{ApprovalMode, Decision, Outcome, ToolCall};
use serde_json::{Map, Value, json};

use crate::exec::Placement;

/// An agent whose hooks cordon answers, and whose whole program cordon can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Agent {
    ClaudeCode,
    GeminiCli,
    Codex,
}

/// The name `cordon setup` gives `cordon mcp` among the agent's MCP servers.
pub const OWN_SERVER: &str = "cordon";

/// The tools `cordon mcp` serves. A call is cordon's own only when its server is
/// [`OWN_SERVER`] and its tool one of these exactly: the agents join server and tool with
/// `__`, so a server named `cordon__x` would otherwise pass for cordon's.
pub const OWN_TOOLS: &[&str] = &[
    "run_shell_command",
    "read_file",
    "write_file",
    "replace",
    "list_directory",
    "glob",
    "search_file_content",
];

/// Whether a hook's command line runs cordon's hook for `agent`: `…/cordon hook AGENT …` or
/// `…/cordon-hook AGENT …`, whichever `cordon setup` wrote.
pub fn is_cordons_hook(command: &str, agent: Agent) -> bool {
    let mut words = command.split_whitespace();
    let program = words
        .next()
        .and_then(|p| std::path::Path::new(p).file_name())
        .and_then(|n| n.to_str());
    match program {
        Some("cordon") => words.next() == Some("hook") && words.next() == Some(agent.name()),
        Some("cordon-hook") => words.next() == Some(agent.name()),
        _ => false,
    }
}

/// A hook matcher for every tool but cordon's own, which the agent names `PREFIX` + the tool
/// (`mcp__cordon__` for Claude Code, `mcp_cordon_` for Gemini CLI), exactly.
pub fn hook_matcher(prefix: &str) -> String {
    format!("^(?!{prefix}({})$)", OWN_TOOLS.join("|"))
}

impl Agent {
    /// The names `cordon hook` takes.
    pub const NAMES: [&'static str; 3] = ["claude-code", "gemini-cli", "codex"];

    /// The agent's name as its makers write it.
    pub fn display(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "Claude Code",
            Agent::GeminiCli => "Gemini CLI",
            Agent::Codex => "Codex",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude-code",
            Agent::GeminiCli => "gemini-cli",
            Agent::Codex => "codex",
        }
    }

    /// The agent's own shell tool.
    fn own_shell(self) -> &'static str {
        match self {
            Agent::ClaudeCode | Agent::Codex => "Bash",
            Agent::GeminiCli => "run_shell_command",
        }
    }

    /// cordon's `run_shell_command` as the agent names it, `cordon mcp` being its MCP server
    /// `cordon`.
    fn cordons_shell(self) -> &'static str {
        match self {
            Agent::ClaudeCode | Agent::Codex => "mcp__cordon__run_shell_command",
            Agent::GeminiCli => "mcp_cordon_run_shell_command",
        }
    }

    /// Whether its hook can change the shell tool's command before it runs (Claude Code's
    /// `updatedInput`, Gemini CLI's `tool_input`). Codex's can too, but it runs the command in
    /// its own sandbox, where cordon's cannot be built; it keeps the MCP route.
    fn can_rewrite(self) -> bool {
        matches!(self, Agent::ClaudeCode | Agent::GeminiCli)
    }

    /// Whether its hook can ask the person: Gemini CLI's and Codex's cannot ([`answer`] says
    /// so in their denial).
    fn hook_asks(self) -> bool {
        self == Agent::ClaudeCode
    }

    /// Whether it runs headless: Claude Code's print mode (`-p`), which it marks in its hooks'
    /// environment, cancels every question.
    fn headless(self, var: &impl Fn(&str) -> Option<String>) -> bool {
        self == Agent::ClaudeCode && var("CLAUDE_CODE_ENTRYPOINT").as_deref() == Some("sdk-cli")
    }

    /// The hook event that comes before a tool runs.
    fn event(self) -> &'static str {
        match self {
            Agent::ClaudeCode | Agent::Codex => "PreToolUse",
            Agent::GeminiCli => "BeforeTool",
        }
    }
}

impl std::str::FromStr for Agent {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "claude-code" | "claude" => Ok(Agent::ClaudeCode),
            "gemini-cli" | "gemini" => Ok(Agent::GeminiCli),
            "codex" => Ok(Agent::Codex),
            _ => Err(format!(
                "`{s}` is not an agent cordon has a hook for; use {}",
                Agent::NAMES.join(", ")
            )),
        }
    }
}

/// A tool call as an agent's hook handed it over, in cordon's terms.
#[derive(Debug)]
pub struct HookCall {
    /// The call under the name cordon's policy uses (Gemini CLI's). A patch is one write per
    /// file it touches; the strictest decision among them is the answer.
    pub calls: Vec<ToolCall>,
    /// The agent's own name for the tool, for messages.
    pub agent_tool: String,
    /// The tool's input as the agent gave it, for an answer that changes it.
    pub tool_input: Map<String, Value>,
    /// The agent's working directory, which is the workspace file paths are held to.
    pub cwd: Option<String>,
    /// The approval mode the agent is in, where it says and cordon has one like it.
    pub mode: Option<ApprovalMode>,
    /// The agent will not ask the person (Claude Code's `dontAsk`, and `bypassPermissions`,
    /// where an ask goes through unasked): an ask is a no.
    pub no_one_to_ask: bool,
}

/// What cordon cannot read in a hook's input.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("the hook input is not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("the hook input has no `{0}` (it must be a JSON object with `{0}`)")]
    Missing(&'static str),
    #[error(
        "the hook input is for the `{found}` event; `cordon hook {agent}` answers `{wanted}` only (register it for that event)"
    )]
    WrongEvent {
        agent: &'static str,
        wanted: &'static str,
        found: String,
    },
    #[error("`tool_input` must be a JSON object, not {0}")]
    NotObject(&'static str),
}

/// Reads one hook input.
pub fn read_hook(agent: Agent, input: &[u8]) -> Result<HookCall, HookError> {
    let value: Value = serde_json::from_slice(input).map_err(HookError::NotJson)?;
    let Value::Object(mut fields) = value else {
        return Err(HookError::Missing("hook_event_name"));
    };
    let event = fields
        .get("hook_event_name")
        .and_then(Value::as_str)
        .ok_or(HookError::Missing("hook_event_name"))?;
    if event != agent.event() {
        return Err(HookError::WrongEvent {
            agent: agent.name(),
            wanted: agent.event(),
            found: event.to_string(),
        });
    }
    let tool = fields
        .get("tool_name")
        .and_then(Value::as_str)
        .ok_or(HookError::Missing("tool_name"))?
        .to_string();
    let input = match fields.remove("tool_input") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(other) => return Err(HookError::NotObject(crate::json_kind(&other))),
    };
    let tool_input = input.clone();
    let cwd = fields.get("cwd").and_then(Value::as_str).map(String::from);
    let permission = fields.get("permission_mode").and_then(Value::as_str);
    let calls = match agent {
        Agent::Codex => match codex_patch(&tool, &input) {
            Some(files) => files
                .into_iter()
                .map(|f| ToolCall::new("write_file", json!({ "file_path": f })))
                .collect(),
            None => vec![claude_tool(&tool, input)],
        },
        Agent::ClaudeCode => vec![claude_tool(&tool, input)],
        Agent::GeminiCli => vec![
            mcp_call(&tool, input)
                .unwrap_or_else(|input| ToolCall::new(tool.clone(), Value::Object(input))),
        ],
    };
    Ok(HookCall {
        calls,
        agent_tool: tool,
        tool_input,
        cwd,
        // Claude Code's modes that have a like in cordon; `bypassPermissions` does not bypass
        // cordon, so it decides as in the default mode.
        mode: match permission {
            Some("plan") => Some(ApprovalMode::Plan),
            Some("acceptEdits") => Some(ApprovalMode::AutoEdit),
            Some(_) => Some(ApprovalMode::Default),
            None => None,
        },
        // `dontAsk` refuses what would be asked; `bypassPermissions` lets it through unasked
        // (an `ask` from the hook is no guard there), so both get cordon's denial instead.
        no_one_to_ask: matches!(permission, Some("dontAsk" | "bypassPermissions")),
    })
}

/// The call of an MCP tool, when `tool` names one; the input back when not.
fn mcp_call(tool: &str, input: Map<String, Value>) -> Result<ToolCall, Map<String, Value>> {
    let Some((server, name)) = mcp_parts(tool) else {
        return Err(input);
    };
    let mut call = ToolCall::new(name, Value::Object(input));
    call.server = Some(server.to_string());
    Ok(call)
}

/// `mcp__SERVER__TOOL`, as the agents name MCP tools.
fn mcp_parts(tool: &str) -> Option<(&str, &str)> {
    let (server, name) = tool.strip_prefix("mcp__")?.split_once("__")?;
    (!server.is_empty() && !name.is_empty()).then_some((server, name))
}

/// Claude Code's tool and arguments under the name and argument names of cordon's policy (Gemini
/// CLI's tools). Tools with no like keep their own name, so a rule can still name them.
fn claude_tool(tool: &str, input: Map<String, Value>) -> ToolCall {
    let mut input = match mcp_call(tool, input) {
        Ok(call) => return call,
        Err(input) => input,
    };
    let mut rename = |from: &str, to: &str| {
        if let Some(v) = input.remove(from) {
            input.insert(to.to_string(), v);
        }
    };
    let name = match tool {
        "Bash" => "run_shell_command",
        "Write" => "write_file",
        "Edit" | "MultiEdit" => "replace",
        "NotebookEdit" => {
            rename("notebook_path", "file_path");
            "write_file"
        }
        "Read" => "read_file",
        "Glob" => {
            rename("path", "dir_path");
            "glob"
        }
        "Grep" => {
            rename("path", "dir_path");
            rename("glob", "include");
            "search_file_content"
        }
        "LS" => {
            rename("path", "dir_path");
            "list_directory"
        }
        "WebFetch" => "web_fetch",
        "WebSearch" => "google_web_search",
        other => other,
    };
    ToolCall::new(name, Value::Object(input))
}

/// The files a Codex patch touches, when the call is one: the `apply_patch` tool, or a `Bash`
/// command that is `apply_patch` fed the patch as a here-document (Codex applies that itself,
/// not a shell). Anything else, a patch that names no file included, is not a patch and is
/// decided as what it is.
fn codex_patch(tool: &str, input: &Map<String, Value>) -> Option<Vec<String>> {
    let text = match tool {
        "apply_patch" => input
            .get("input")
            .or_else(|| input.get("patch"))
            .or_else(|| input.get("command"))?
            .as_str()?,
        "Bash" => {
            let command = input.get("command")?.as_str()?;
            let rest = command.trim_start();
            let rest = rest
                .strip_prefix("apply_patch")
                .or_else(|| rest.strip_prefix("applypatch"))?;
            // `apply_patch <<'EOF'` and nothing but the here-document after it.
            let (start, body) = rest.split_once('\n')?;
            let marker = start.trim().strip_prefix("<<")?.trim();
            let marker = marker
                .strip_prefix('\'')
                .and_then(|m| m.strip_suffix('\''))
                .or_else(|| marker.strip_prefix('"').and_then(|m| m.strip_suffix('"')))
                .unwrap_or(marker);
            // A plain word, as the patches Codex writes use: anything else on that line
            // (`<<EOF;touch x`, `<<EOF&&…`) is shell that would run besides the patch.
            if marker.is_empty()
                || !marker
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                return None;
            }
            let end = body
                .lines()
                .position(|l| l == marker)
                .filter(|&i| body.lines().skip(i + 1).all(|l| l.trim().is_empty()))?;
            let patch: Vec<&str> = body.lines().take(end).collect();
            return patch_files(&patch.join("\n"));
        }
        _ => return None,
    };
    patch_files(text)
}

/// The paths a patch in Codex's format writes: those it adds, updates, deletes or moves to.
fn patch_files(patch: &str) -> Option<Vec<String>> {
    let mut lines = patch.lines().map(str::trim_end);
    if lines.next()?.trim() != "*** Begin Patch" {
        return None;
    }
    let files: Vec<String> = lines
        .filter_map(|l| {
            [
                "*** Add File: ",
                "*** Update File: ",
                "*** Delete File: ",
                "*** Move to: ",
            ]
            .iter()
            .find_map(|p| l.strip_prefix(p))
        })
        .map(|f| f.trim().to_string())
        .collect();
    (!files.is_empty() && files.iter().all(|f| !f.is_empty())).then_some(files)
}

/// The most a hook reads: a call writing a large file carries the file.
pub const MAX_HOOK_INPUT: u64 = 32 << 20;

/// How `cordon hook` treats the agent's own shell tool.
#[derive(Debug, Clone, Default)]
pub struct HookOptions {
    /// Refuse it, pointing the model at cordon's MCP tool instead.
    pub own_shell_off: bool,
    /// Run its commands in cordon's sandbox: the path of the `cordon` that runs them.
    pub sandbox_shell: Option<std::path::PathBuf>,
    /// What becomes of a question nobody will answer.
    pub headless: Headless,
}

/// A question nobody will answer (the agent runs headless, in a bypass mode, or its hooks
/// cannot ask): an ask auto-accepted or cancelled is no guard, so it is one of these instead.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Headless {
    /// Run it contained (the `contained` profile: the working directory writable, nothing
    /// else, no network), where the sandbox holds everything it could do and the agent's shell
    /// tool runs in it; deny it otherwise.
    #[default]
    Contain,
    /// Deny it.
    Deny,
}

impl std::str::FromStr for Headless {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "contain" => Ok(Headless::Contain),
            "deny" => Ok(Headless::Deny),
            _ => Err(format!(
                "`{s}` is not a headless choice; use contain or deny"
            )),
        }
    }
}

impl Headless {
    pub fn name(self) -> &'static str {
        match self {
            Headless::Contain => "contain",
            Headless::Deny => "deny",
        }
    }
}

/// The whole hook: `input` read, decided with `policy`, and the answer the agent reads on
/// standard output. An `Err` is why cordon cannot decide, for standard error with exit status
/// 2, which both agents take as "blocked".
///
/// The agent's mode applies where `policy` leaves the mode at its default. Its own tools run
/// the command outside cordon's sandbox, so `auto_allow_if_sandboxed` does not apply, unless
/// `opts.sandbox_shell` has the agent's shell tool run it under `cordon run`.
pub fn decide(
    agent: Agent,
    input: &[u8],
    mut policy: crate::policy::PolicyConfig,
    opts: &HookOptions,
) -> anyhow::Result<Value> {
    let var = |name: &str| std::env::var(name).ok();
    let hook = read_hook(agent, input)?;
    if let [call] = hook.calls.as_slice()
        && call.server.as_deref() == Some(OWN_SERVER)
        && OWN_TOOLS.contains(&call.name.as_str())
    {
        let outcome = Outcome {
            decision: Decision::Allow,
            rule: None,
            reason: format!("`cordon mcp` decides calls to its own `{}`", call.name),
        };
        return Ok(answer(agent, &hook.agent_tool, &outcome));
    }
    let own_shell = hook.agent_tool == agent.own_shell();
    // `cordon setup` switches the agent's own shell off in favour of cordon's MCP tool; where
    // the agent's settings cannot (Gemini CLI's exclusion would take cordon's tool of the same
    // name with it), the hook refuses it, saying what to use instead.
    if opts.own_shell_off && own_shell {
        let outcome = denied(format!(
            "{}'s own shell tool is switched off (cordon setup); run commands with `{}`, which runs them in cordon's sandbox",
            agent.name(),
            agent.cordons_shell()
        ));
        return Ok(answer(agent, &hook.agent_tool, &outcome));
    }
    if policy.workspaces.is_empty()
        && let Some(cwd) = &hook.cwd
    {
        policy.workspaces.push(cwd.into());
    }
    if policy.mode == ApprovalMode::Default
        && let Some(mode) = hook.mode
    {
        policy.mode = mode;
    }
    let cancelled = hook.no_one_to_ask || agent.headless(&var);
    let no_one_to_ask = cancelled || !agent.hook_asks();
    let mut options = policy.options();
    options.non_interactive |= cancelled;
    options.shell = agent_shell(agent, &var);
    let decider = crate::decide::Decider::new(&policy)?;
    let decide = |call: &ToolCall, options, placement: Option<&Placement>| {
        let outcome = decider.check_placed(call, options, placement);
        with_walls(&decider, call, outcome, options.non_interactive)
    };
    if let (Some(cordon), true, [call]) = (
        opts.sandbox_shell
            .as_deref()
            .filter(|_| agent.can_rewrite()),
        own_shell,
        hook.calls.as_slice(),
    ) {
        let Some(command) = call.args["command"].as_str() else {
            let outcome = denied("the shell tool's `command` is not a string".into());
            return Ok(answer(agent, &hook.agent_tool, &outcome));
        };
        match decider.placer.place(command, false) {
            Err(reason) => return Ok(answer(agent, &hook.agent_tool, &denied(reason))),
            // The settings run it outside the sandbox: the agent's shell runs it, as decided
            // below.
            Ok(Placement::Outside { .. }) => {}
            Ok(Placement::Sandbox) => {
                if let Err(reason) = runs_in_workspace(&hook) {
                    return Ok(answer(agent, &hook.agent_tool, &denied(reason)));
                }
                // `cordon run -c` runs it with bash, the grammar it is decided with; the
                // question, if any, is settled here.
                options.shell = Dialect::Bash;
                options.non_interactive = false;
                let outcome = decide(call, options, Some(&Placement::Sandbox));
                return Ok(sandboxed(
                    agent,
                    &hook,
                    &decider,
                    command,
                    outcome,
                    cordon,
                    no_one_to_ask.then_some(opts.headless),
                ));
            }
        }
    }
    let outside = Placement::Outside {
        why: format!("{}'s own {} tool runs it", agent.name(), hook.agent_tool),
    };
    let mut strictest: Option<Outcome> = None;
    for call in &hook.calls {
        let placement = decider.engine.is_shell_tool(&call.name).then_some(&outside);
        let outcome = decide(call, options, placement);
        if strictest
            .as_ref()
            .is_none_or(|s| outcome.decision > s.decision)
        {
            strictest = Some(outcome);
        }
    }
    let outcome = strictest.context("the hook input holds no tool call")?;
    Ok(answer(agent, &hook.agent_tool, &outcome))
}

/// A denial that no policy rule made.
fn denied(reason: String) -> Outcome {
    Outcome {
        decision: Decision::Deny,
        rule: None,
        reason,
    }
}

/// `cordon run` makes the directory it starts in writable, so a rewritten command must start
/// in the agent's working directory or below it: Gemini CLI's shell tool takes a `dir_path`
/// to run in, which could name the home.
fn runs_in_workspace(hook: &HookCall) -> Result<(), String> {
    let Some(dir) = hook.tool_input.get("dir_path").and_then(Value::as_str) else {
        return Ok(());
    };
    let cwd = match &hook.cwd {
        Some(cwd) => std::path::PathBuf::from(cwd),
        None => std::env::current_dir()
            .map_err(|e| format!("cannot read the working directory: {e}"))?,
    };
    let real =
        |p: &std::path::Path| std::fs::canonicalize(p).map_err(|e| format!("{}: {e}", p.display()));
    let (cwd, target) = (real(&cwd)?, real(&cwd.join(dir))?);
    if target.starts_with(&cwd) {
        Ok(())
    } else {
        Err(format!(
            "`dir_path` {dir} lies outside the workspace {}; cordon's sandbox makes the directory a command starts in writable, so commands run in the workspace or below it",
            cwd.display()
        ))
    }
}

/// `outcome` held to the walls every file tool has: as for cordon's own (`cordon mcp`), the
/// agent's file tools act wherever they are pointed, so their paths stay in the workspace and
/// out of `.git` and `.env` files, whichever rule allowed the call (the default rules allow
/// reading anywhere).
fn with_walls(
    decider: &crate::decide::Decider,
    call: &ToolCall,
    mut outcome: Outcome,
    non_interactive: bool,
) -> Outcome {
    let walls = cordon_policy::checkers::workspace_paths(call, decider.engine.environment());
    // A denial by the walls also says more than an ask refused only because nobody can be
    // asked.
    let asked_and_refused = outcome.decision == Decision::Deny
        && outcome
            .rule
            .as_ref()
            .is_some_and(|r| r.decision == Decision::AskUser);
    if walls.decision > outcome.decision || (walls.decision == Decision::Deny && asked_and_refused)
    {
        outcome.decision = walls.decision;
        outcome.reason = walls.reason;
        outcome.rule = None;
        if outcome.decision == Decision::AskUser && non_interactive {
            outcome.decision = Decision::Deny;
            outcome
                .reason
                .push_str(" (nobody can be asked, so it is denied)");
        }
    }
    outcome
}

/// The answer for the agent's own shell tool whose command runs in cordon's sandbox: what is
/// allowed (or asked, where someone answers) runs rewritten under `cordon run` with the
/// project's settings; a question nobody will answer (`headless`) is contained or denied.
fn sandboxed(
    agent: Agent,
    hook: &HookCall,
    decider: &crate::decide::Decider,
    command: &str,
    mut outcome: Outcome,
    cordon: &std::path::Path,
    headless: Option<Headless>,
) -> Value {
    use sandbox_shell::Containment;
    let call = &hook.calls[0];
    let mut how = Containment::Settings;
    if outcome.decision == Decision::AskUser
        && let Some(headless) = headless
    {
        if headless == Headless::Contain && decider.containable(call, &outcome) {
            outcome.decision = Decision::Allow;
            outcome.reason.push_str(
                "; nobody can be asked, so it runs contained: the working directory writable and nothing else, no network (cordon hook --headless contain)",
            );
            how = Containment::Contained;
        } else {
            outcome.decision = Decision::Deny;
            outcome.reason.push_str(match headless {
                Headless::Contain => {
                    "; nobody can be asked, and the question is one a policy rule asks for a person (only the built-in rules' are contained), so it is denied"
                }
                Headless::Deny => "; nobody can be asked, so it is denied (cordon hook --headless deny)",
            });
        }
    }
    let line = match outcome.decision {
        Decision::Deny => None,
        _ => match sandbox_shell::rewrite(cordon, command, how) {
            Some(line) => Some(line),
            None => {
                outcome.decision = Decision::Deny;
                outcome.reason =
                    "the command holds a NUL byte, which no shell can be handed whole".into();
                None
            }
        },
    };
    if outcome.decision != Decision::Deny {
        outcome.reason.push_str("; it runs in cordon's sandbox");
    }
    let mut reply = answer(agent, &hook.agent_tool, &outcome);
    if let Some(line) = line {
        let mut input = hook.tool_input.clone();
        input.insert("command".into(), Value::String(line));
        match agent {
            Agent::ClaudeCode => {
                reply["hookSpecificOutput"]["updatedInput"] = Value::Object(input);
            }
            _ => {
                reply["hookSpecificOutput"] = json!({
                    "hookEventName": agent.event(),
                    "tool_input": input,
                });
            }
        }
    }
    reply
}

/// The grammar of the shell an agent runs its own shell tool's commands with, from the
/// environment it gives its hook (`var`). Gemini CLI runs `bash -c`; Claude Code and Codex run
/// the user's shell: `CLAUDE_CODE_SHELL` (Claude Code's own choice) or `SHELL` when it is bash
/// or zsh, else one they find. A shell that is not bash makes every form it reads otherwise
/// unanalysable ([`cordon_policy::shell::differs`]); one not known, every form either zsh or a
/// POSIX shell reads otherwise.
fn agent_shell(agent: Agent, var: &impl Fn(&str) -> Option<String>) -> Dialect {
    let named = match agent {
        Agent::GeminiCli => return Dialect::Bash,
        Agent::ClaudeCode => var("CLAUDE_CODE_SHELL").or_else(|| var("SHELL")),
        Agent::Codex => var("SHELL"),
    };
    match named.as_deref().and_then(Dialect::of_shell) {
        Some(d @ (Dialect::Bash | Dialect::Zsh)) => d,
        _ => Dialect::Unknown,
    }
}

/// The answer to print on standard output (exit status 0) for a decision.
pub fn answer(agent: Agent, tool: &str, outcome: &Outcome) -> Value {
    let reason = format!("cordon: {}", outcome.reason);
    match agent {
        Agent::ClaudeCode => {
            let decision = match outcome.decision {
                Decision::Allow => "allow",
                Decision::Deny => "deny",
                Decision::AskUser => "ask",
            };
            json!({
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": decision,
                    "permissionDecisionReason": reason,
                }
            })
        }
        // The agent's own confirmation still applies to what cordon lets through.
        Agent::GeminiCli | Agent::Codex => {
            let reason = match outcome.decision {
                Decision::Allow => return json!({}),
                Decision::Deny => reason,
                Decision::AskUser => format!(
                    "{reason}. cordon's policy wants a person to approve `{tool}`, and {}'s hooks cannot ask one; ask the user to run it, or to allow it in cordon's policy",
                    agent.display()
                ),
            };
            match agent {
                Agent::GeminiCli => json!({ "decision": "deny", "reason": reason }),
                _ => json!({
                    "hookSpecificOutput": {
                        "hookEventName": "PreToolUse",
                        "permissionDecision": "deny",
                        "permissionDecisionReason": reason,
                    }
                }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dialect_is_the_shell_the_agent_runs_commands_with() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |n: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == n)
                    .map(|(_, v)| v.to_string())
            }
        };
        let zsh_user = env(&[("SHELL", "/bin/zsh")]);
        assert_eq!(agent_shell(Agent::GeminiCli, &zsh_user), Dialect::Bash);
        assert_eq!(agent_shell(Agent::ClaudeCode, &zsh_user), Dialect::Zsh);
        assert_eq!(agent_shell(Agent::Codex, &zsh_user), Dialect::Zsh);
        let chosen = env(&[("SHELL", "/bin/zsh"), ("CLAUDE_CODE_SHELL", "/bin/bash")]);
        assert_eq!(agent_shell(Agent::ClaudeCode, &chosen), Dialect::Bash);
        let fish = env(&[("SHELL", "/usr/bin/fish")]);
        assert_eq!(agent_shell(Agent::Codex, &fish), Dialect::Unknown);
        assert_eq!(agent_shell(Agent::ClaudeCode, &env(&[])), Dialect::Unknown);
    }

    fn claude(tool: &str, input: Value) -> HookCall {
        let text = json!({
            "session_id": "s", "transcript_path": "/t", "cwd": "/ws",
            "permission_mode": "default", "hook_event_name": "PreToolUse",
            "tool_name": tool, "tool_input": input, "tool_use_id": "toolu_1",
        });
        read_hook(Agent::ClaudeCode, text.to_string().as_bytes()).expect("reads")
    }

    #[test]
    fn claudes_tools_take_the_names_and_arguments_of_cordons_policy() {
        let bash = claude("Bash", json!({"command": "ls", "timeout": 1000}));
        assert_eq!(bash.calls[0].name, "run_shell_command");
        assert_eq!(bash.calls[0].args["command"], "ls");
        let grep = claude(
            "Grep",
            json!({"pattern": "x", "path": "src", "glob": "*.rs"}),
        );
        assert_eq!(grep.calls[0].name, "search_file_content");
        assert_eq!(
            grep.calls[0].args,
            json!({"pattern": "x", "dir_path": "src", "include": "*.rs"})
        );
        let nb = claude("NotebookEdit", json!({"notebook_path": "a.ipynb"}));
        assert_eq!(
            (nb.calls[0].name.as_str(), &nb.calls[0].args["file_path"]),
            ("write_file", &json!("a.ipynb"))
        );
        let mcp = claude("mcp__git_hub__create_issue", json!({"title": "t"}));
        assert_eq!(mcp.calls[0].name, "create_issue");
        assert_eq!(mcp.calls[0].server.as_deref(), Some("git_hub"));
        let other = claude("TodoWrite", json!({}));
        assert_eq!(other.calls[0].name, "TodoWrite");
        assert_eq!(bash.cwd.as_deref(), Some("/ws"));
    }

    #[test]
    fn claudes_modes_never_loosen_cordon() {
        let mode = |m: &str| {
            let text = json!({"hook_event_name": "PreToolUse", "tool_name": "Bash",
                "tool_input": {"command": "ls"}, "permission_mode": m});
            read_hook(Agent::ClaudeCode, text.to_string().as_bytes()).expect("reads")
        };
        assert_eq!(mode("plan").mode, Some(ApprovalMode::Plan));
        assert_eq!(mode("acceptEdits").mode, Some(ApprovalMode::AutoEdit));
        assert_eq!(mode("bypassPermissions").mode, Some(ApprovalMode::Default));
        assert!(mode("dontAsk").no_one_to_ask);
        assert!(mode("bypassPermissions").no_one_to_ask);
        assert!(!mode("default").no_one_to_ask);
    }

    #[test]
    fn input_cordon_cannot_read_is_an_error_naming_what_is_wrong() {
        let err = |agent, text: &str| read_hook(agent, text.as_bytes()).unwrap_err().to_string();
        assert!(err(Agent::ClaudeCode, "{").contains("not JSON"));
        assert!(err(Agent::ClaudeCode, "[]").contains("hook_event_name"));
        assert!(
            err(Agent::ClaudeCode, r#"{"hook_event_name":"PreToolUse"}"#).contains("tool_name")
        );
        assert!(
            err(
                Agent::ClaudeCode,
                r#"{"hook_event_name":"PostToolUse","tool_name":"Bash"}"#
            )
            .contains("answers `PreToolUse` only")
        );
        assert!(
            err(
                Agent::GeminiCli,
                r#"{"hook_event_name":"PreToolUse","tool_name":"x"}"#
            )
            .contains("answers `BeforeTool` only")
        );
        assert!(
            err(
                Agent::ClaudeCode,
                r#"{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":"ls"}"#
            )
            .contains("must be a JSON object")
        );
    }

    #[test]
    fn each_agent_reads_its_own_answer() {
        let outcome = |decision| Outcome {
            decision,
            rule: None,
            reason: "because".into(),
        };
        let c = answer(Agent::ClaudeCode, "Bash", &outcome(Decision::AskUser));
        assert_eq!(c["hookSpecificOutput"]["permissionDecision"], "ask");
        assert_eq!(c["hookSpecificOutput"]["hookEventName"], "PreToolUse");
        assert_eq!(
            c["hookSpecificOutput"]["permissionDecisionReason"],
            "cordon: because"
        );
        let g = answer(
            Agent::GeminiCli,
            "run_shell_command",
            &outcome(Decision::AskUser),
        );
        assert_eq!(g["decision"], "deny", "Gemini CLI cannot ask: no");
        assert!(
            g["reason"]
                .as_str()
                .unwrap_or_default()
                .contains("cannot ask")
        );
        assert_eq!(
            answer(Agent::GeminiCli, "x", &outcome(Decision::Allow)),
            json!({})
        );
        assert_eq!(
            answer(Agent::GeminiCli, "x", &outcome(Decision::Deny))["decision"],
            "deny"
        );
    }

    /// A Codex patch is a write of each file it names, whether it comes as the `apply_patch`
    /// tool or as `apply_patch` fed a here-document; a command that only looks like one is
    /// decided as the shell command it is.
    #[test]
    fn codex_patches_are_writes_of_the_files_they_name() {
        let codex = |tool: &str, input: Value| {
            let text = json!({"hook_event_name": "PreToolUse", "tool_name": tool,
                "tool_input": input, "cwd": "/ws"});
            read_hook(Agent::Codex, text.to_string().as_bytes()).expect("reads")
        };
        let patch = "*** Begin Patch\n*** Add File: a.txt\n+x\n*** Update File: b.rs\n*** Move to: c.rs\n@@\n-x\n+y\n*** Delete File: d\n*** End Patch";
        let files = |hook: &HookCall| -> Vec<String> {
            hook.calls
                .iter()
                .map(|c| {
                    assert_eq!(c.name, "write_file");
                    c.args["file_path"].as_str().unwrap_or_default().to_string()
                })
                .collect()
        };
        let want = ["a.txt", "b.rs", "c.rs", "d"];
        assert_eq!(files(&codex("apply_patch", json!({"input": patch}))), want);
        let heredoc = format!("apply_patch <<'EOF'\n{patch}\nEOF\n");
        assert_eq!(files(&codex("Bash", json!({"command": heredoc}))), want);
        for not_a_patch in [
            format!("apply_patch <<'EOF'\n{patch}\nEOF\nrm -rf /"),
            format!("echo hi; apply_patch <<'EOF'\n{patch}\nEOF\n"),
            "apply_patch <<'EOF'\n*** Begin Patch\n*** End Patch\nEOF\n".to_string(),
            // More shell on the here-document's line, which bash would run with the patch:
            // the marker line is made to match as well, so only the marker's form tells.
            format!("apply_patch <<EOF;touch${{IFS}}x\n{patch}\nEOF;touch${{IFS}}x\n"),
            format!("apply_patch <<EOF&&curl${{IFS}}x|sh\n{patch}\nEOF&&curl${{IFS}}x|sh\n"),
            format!("apply_patch <<'EOF' >~/.bashrc\n{patch}\nEOF\n"),
        ] {
            let hook = codex("Bash", json!({ "command": not_a_patch }));
            assert_eq!(hook.calls.len(), 1, "{not_a_patch}");
            assert_eq!(hook.calls[0].name, "run_shell_command", "{not_a_patch}");
        }
    }

    /// Codex reads only a denial; an allow is no objection, and an ask is a denial that says
    /// why.
    #[test]
    fn codex_reads_a_denial_or_nothing() {
        let outcome = |decision| Outcome {
            decision,
            rule: None,
            reason: "because".into(),
        };
        assert_eq!(
            answer(Agent::Codex, "Bash", &outcome(Decision::Allow)),
            json!({})
        );
        let deny = answer(Agent::Codex, "Bash", &outcome(Decision::Deny));
        assert_eq!(deny["hookSpecificOutput"]["permissionDecision"], "deny");
        let ask = answer(Agent::Codex, "Bash", &outcome(Decision::AskUser));
        assert_eq!(ask["hookSpecificOutput"]["permissionDecision"], "deny");
        assert!(
            ask["hookSpecificOutput"]["permissionDecisionReason"]
                .as_str()
                .unwrap_or_default()
                .contains("Codex's hooks cannot ask")
        );
    }
}
