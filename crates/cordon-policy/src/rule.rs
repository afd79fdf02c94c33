//! A loaded rule, and whether it matches a call.

use std::cell::OnceCell;
use std::path::PathBuf;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::checkers::Checker;
use crate::shell::{Heuristic, SimpleCommand};
use crate::types::{ApprovalMode, Decision, Tier};

/// Which tools a rule is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToolPattern {
    /// `*`: every tool.
    Any,
    /// One tool by name.
    Exact(String),
    /// `name_*`: every tool whose name starts with `name_` (not for MCP names; see `Mcp`).
    Prefix(String),
    /// MCP tools: `mcp_*` (any server), `mcp_SERVER_*`, or `mcpName = "SERVER"` with a tool name.
    /// The server must be the one the call comes from, not only a prefix of the tool's name, so
    /// a server named `safe_server_malicious` cannot pass as `safe_server`.
    Mcp {
        server: Option<String>,
        tool: Option<String>,
    },
}

impl ToolPattern {
    /// Reads a `toolName` value, together with the rule's `mcpName` if it has one.
    pub fn parse(tool: &str, mcp_name: Option<&str>) -> Result<Self, String> {
        if let Some(server) = mcp_name {
            let server = (server != "*").then(|| server.to_string());
            let own_wildcard = server.as_ref().map(|s| format!("mcp_{s}_*"));
            let tool = if tool == "*" || own_wildcard.as_deref() == Some(tool) {
                None
            } else if tool.contains('*') {
                return Err(format!(
                    "toolName `{tool}` with mcpName may be `*` or a plain name"
                ));
            } else {
                // `mcp_SERVER_tool` with `mcpName = "SERVER"` names the same tool as `tool`.
                let full = server.as_ref().map(|s| format!("mcp_{s}_"));
                Some(
                    match full.and_then(|p| tool.strip_prefix(&p).map(str::to_string)) {
                        Some(short) => short,
                        None => tool.to_string(),
                    },
                )
            };
            return Ok(ToolPattern::Mcp { server, tool });
        }
        if tool == "*" {
            return Ok(ToolPattern::Any);
        }
        if tool == "mcp_*" {
            return Ok(ToolPattern::Mcp {
                server: None,
                tool: None,
            });
        }
        if let Some(server) = tool.strip_prefix("mcp_").and_then(|t| t.strip_suffix("_*")) {
            if server.is_empty() || server.contains('*') {
                return Err(format!(
                    "`{tool}`: the server name in mcp_SERVER_* must be a plain name"
                ));
            }
            return Ok(ToolPattern::Mcp {
                server: Some(server.to_string()),
                tool: None,
            });
        }
        match tool.find('*') {
            None => Ok(ToolPattern::Exact(tool.to_string())),
            Some(i) if i == tool.len() - 1 && !tool.starts_with("mcp_") => {
                Ok(ToolPattern::Prefix(tool[..i].to_string()))
            }
            Some(_) => Err(format!(
                "`{tool}`: `*` may stand alone, end a name (`prefix_*`), or follow an MCP server (`mcp_SERVER_*`)"
            )),
        }
    }

    fn matches(&self, call: &CallView<'_>) -> bool {
        match self {
            ToolPattern::Any => true,
            ToolPattern::Exact(name) => {
                call.names.iter().any(|n| n == name)
                    || call.mcp.is_some_and(|(server, tool)| {
                        // `mcp_SERVER_tool` names the call `tool` from SERVER.
                        name.strip_prefix("mcp_")
                            .and_then(|r| r.strip_prefix(server))
                            .and_then(|r| r.strip_prefix('_'))
                            == Some(tool)
                    })
            }
            ToolPattern::Prefix(p) => call.names.iter().any(|n| n.starts_with(p.as_str())),
            ToolPattern::Mcp { server, tool } => match call.mcp {
                None => false,
                Some((s, t)) => {
                    server.as_deref().is_none_or(|want| want == s)
                        && tool.as_deref().is_none_or(|want| want == t)
                }
            },
        }
    }

    pub fn describe(&self) -> String {
        match self {
            ToolPattern::Any => "*".into(),
            ToolPattern::Exact(n) => n.clone(),
            ToolPattern::Prefix(p) => format!("{p}*"),
            ToolPattern::Mcp { server, tool } => format!(
                "mcp_{}_{}",
                server.as_deref().unwrap_or("*"),
                tool.as_deref().unwrap_or("*")
            ),
        }
    }
}

/// A compiled pattern (`argsPattern`, `commandRegex`). A built-in policy's is compiled the
/// first time a call meets its rule: compiling is most of what loading the policy costs a
/// one-shot process (a hook, `check`), and most calls never meet those rules. Every built-in
/// pattern is compiled by a test; one someone wrote is compiled, and refused, at load.
///
/// Written out (the built-in policies' compiled form, `defaults/compiled.json`) as its source
/// text, and read back as one compiled on first use.
#[derive(Debug, Clone)]
pub enum Pattern {
    Ready(Regex),
    Later {
        /// The pattern as compiled (anchored where the condition anchors it).
        source: String,
        re: std::sync::OnceLock<Option<Regex>>,
    },
}

impl Pattern {
    pub fn later(source: String) -> Self {
        Pattern::Later {
            source,
            re: std::sync::OnceLock::new(),
        }
    }

    /// The compiled pattern; `None` only for a built-in one that does not compile, which its
    /// test rules out (its rule then matches nothing: the built-in patterns are on allow
    /// rules, so that is the stricter reading).
    pub fn regex(&self) -> Option<&Regex> {
        match self {
            Pattern::Ready(re) => Some(re),
            Pattern::Later { source, re } => re.get_or_init(|| Regex::new(source).ok()).as_ref(),
        }
    }

    pub fn is_match(&self, text: &str) -> bool {
        self.regex().is_some_and(|re| re.is_match(text))
    }

    fn source(&self) -> &str {
        match self {
            Pattern::Ready(re) => re.as_str(),
            Pattern::Later { source, .. } => source,
        }
    }
}

impl Serialize for Pattern {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.source())
    }
}

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Pattern::later)
    }
}

/// A condition on the shell command itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum CommandCondition {
    /// `commandPrefix`: the command's words start with one of these word lists.
    Prefix(Vec<Vec<String>>),
    /// `commandRegex`: matches from the start of the command's canonical text.
    Regex {
        re: Pattern,
        /// Literal texts one of which every match starts with, when the pattern has them: a
        /// cheap test that spares running most patterns against most commands.
        prefixes: Option<Vec<String>>,
    },
}

impl CommandCondition {
    /// Builds a `commandRegex` condition; `user_pattern` is the pattern as written, `re` the
    /// compiled, anchored form.
    pub fn regex(user_pattern: &str, re: Pattern) -> Self {
        CommandCondition::Regex {
            re,
            prefixes: literal_prefixes(user_pattern),
        }
    }
}

fn literal_prefixes(pattern: &str) -> Option<Vec<String>> {
    use regex_syntax::hir::literal::{ExtractKind, Extractor};
    let hir = regex_syntax::parse(pattern).ok()?;
    let seq = Extractor::new().kind(ExtractKind::Prefix).extract(&hir);
    let literals = seq.literals()?;
    if literals.is_empty() || literals.iter().any(|l| l.as_bytes().is_empty()) {
        return None;
    }
    literals
        .iter()
        .map(|l| String::from_utf8(l.as_bytes().to_vec()).ok())
        .collect()
}

/// Where a rule came from, for messages and `policy explain`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RuleSource {
    /// The file, or `None` for rules made from flags and settings.
    pub file: Option<PathBuf>,
    /// 1-based line of the rule's table in that file.
    pub line: usize,
    /// A short human label: `builtin:write.toml`, `settings (excluded tools)`, …
    pub label: String,
}

/// The part of a rule (or a checker entry) that decides whether it is about a call.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Matcher {
    pub tools: Vec<ToolPattern>,
    pub args_pattern: Option<Pattern>,
    pub command: Option<CommandCondition>,
    /// Restricts the rule to commands a built-in classifier recognises.
    pub heuristic: Option<Heuristic>,
    pub modes: Option<Vec<ApprovalMode>>,
    pub interactive: Option<bool>,
    pub subagent: Option<String>,
    pub annotations: Option<Map<String, Value>>,
}

impl Matcher {
    pub fn for_tools(tools: Vec<ToolPattern>) -> Self {
        Matcher {
            tools,
            ..Default::default()
        }
    }

    pub fn has_condition(&self) -> bool {
        self.args_pattern.is_some() || self.command.is_some() || self.heuristic.is_some()
    }

    /// Everything but the arguments: mode, interactivity, tool, server, annotations, subagent.
    pub(crate) fn applies_to(&self, call: &CallView<'_>) -> bool {
        self.applies_besides_tool(call) && self.tools.iter().any(|t| t.matches(call))
    }

    /// The tool names this matcher is limited to, when every pattern is an exact name.
    pub(crate) fn exact_tools(&self) -> Option<Vec<&str>> {
        self.tools
            .iter()
            .map(|t| match t {
                ToolPattern::Exact(n) => Some(n.as_str()),
                _ => None,
            })
            .collect()
    }

    /// `applies_to` for a call already known to have one of this matcher's tool names.
    pub(crate) fn applies_besides_tool(&self, call: &CallView<'_>) -> bool {
        if let Some(modes) = &self.modes
            && !modes.is_empty()
            && !modes.contains(&call.mode)
        {
            return false;
        }
        if let Some(i) = self.interactive
            && i == call.non_interactive
        {
            return false;
        }
        if let Some(s) = &self.subagent
            && call.subagent != Some(s.as_str())
        {
            return false;
        }
        if let Some(want) = &self.annotations {
            let Some(have) = call.annotations else {
                return false;
            };
            if !want.iter().all(|(k, v)| have.get(k) == Some(v)) {
                return false;
            }
        }
        true
    }

    /// The argument and command conditions, for one command of a shell call (or none).
    pub(crate) fn conditions_hold(
        &self,
        call: &CallView<'_>,
        cmd: Option<&CommandView<'_>>,
    ) -> bool {
        if let Some(cond) = &self.command {
            let Some(cmd) = cmd else { return false };
            let ok = match cond {
                CommandCondition::Prefix(prefixes) => match cmd.command {
                    Some(c) => prefixes
                        .iter()
                        .any(|p| c.words.len() >= p.len() && c.words[..p.len()] == p[..]),
                    None => false,
                },
                CommandCondition::Regex { re, prefixes } => {
                    prefixes
                        .as_ref()
                        .is_none_or(|p| p.iter().any(|l| cmd.text.starts_with(l.as_str())))
                        && re.is_match(cmd.text)
                }
            };
            if !ok {
                return false;
            }
        }
        if let Some(h) = self.heuristic {
            match cmd.and_then(|c| c.command) {
                Some(c) if h.matches(c) => {}
                _ => return false,
            }
        }
        if let Some(re) = &self.args_pattern {
            let json = match cmd {
                Some(c) => c.args_json(call.args),
                None => call.args_json(),
            };
            if !re.is_match(json) {
                return false;
            }
        }
        true
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rule {
    pub name: Option<String>,
    pub matcher: Matcher,
    pub decision: Decision,
    /// 0–999 within the tier.
    pub priority: u16,
    pub tier: Tier,
    pub allow_redirection: bool,
    pub deny_message: Option<String>,
    /// A checker that runs when this rule decides the call (`[rule.safety_checker]`).
    pub checker: Option<Checker>,
    pub source: RuleSource,
}

impl Rule {
    /// `tier + priority/1000`, kept as an integer in thousandths so ties compare exactly.
    pub fn rank(&self) -> u32 {
        self.tier.base() * 1000 + u32::from(self.priority)
    }

    pub fn effective_priority(&self) -> f64 {
        f64::from(self.rank()) / 1000.0
    }

    /// A `dangerous` rule is a guard: it is weighed after the ordinary winner and can only make
    /// a decision stricter.
    pub fn is_guard(&self) -> bool {
        self.matcher.heuristic == Some(Heuristic::Dangerous)
    }
}

/// A call as rules see it.
pub(crate) struct CallView<'a> {
    pub names: Vec<&'a str>,
    /// `(server, tool)` for an MCP call whose server and name agree.
    pub mcp: Option<(&'a str, &'a str)>,
    pub args: &'a Value,
    pub annotations: Option<&'a Map<String, Value>>,
    pub subagent: Option<&'a str>,
    pub mode: ApprovalMode,
    pub non_interactive: bool,
    json: OnceCell<String>,
}

impl<'a> CallView<'a> {
    pub fn new(
        call: &'a crate::types::ToolCall,
        mode: ApprovalMode,
        non_interactive: bool,
    ) -> Self {
        CallView {
            names: crate::tools::names_for_call(&call.name, &call.args),
            mcp: mcp_identity(&call.name, call.server.as_deref()),
            args: &call.args,
            annotations: call.annotations.as_ref(),
            subagent: call.subagent.as_deref(),
            mode,
            non_interactive,
            json: OnceCell::new(),
        }
    }

    pub fn args_json(&self) -> &str {
        self.json
            .get_or_init(|| crate::args::stable_stringify(self.args))
    }

    /// Every name an exact `toolName` could give this call: its names and aliases, and for an
    /// MCP call `mcp_SERVER_tool`.
    pub fn exact_names(&self) -> Vec<std::borrow::Cow<'a, str>> {
        let mut out: Vec<std::borrow::Cow<'a, str>> =
            self.names.iter().map(|n| (*n).into()).collect();
        if let Some((server, tool)) = self.mcp {
            out.push(format!("mcp_{server}_{tool}").into());
        }
        out
    }
}

/// Works out which MCP server and tool a call is. With an explicit server the name must be
/// either the bare tool name or `mcp_SERVER_tool`; a name that claims another server is not
/// treated as MCP at all, so no MCP rule can match it. Without a server, the name is split at
/// the first `_` after `mcp_`, as Gemini CLI does.
fn mcp_identity<'a>(name: &'a str, server: Option<&'a str>) -> Option<(&'a str, &'a str)> {
    match server {
        Some(s) => match name.strip_prefix("mcp_") {
            Some(rest) => rest
                .strip_prefix(s)
                .and_then(|r| r.strip_prefix('_'))
                .map(|t| (s, t)),
            None => Some((s, name)),
        },
        None => {
            let rest = name.strip_prefix("mcp_")?;
            let (s, t) = rest.split_once('_')?;
            (!s.is_empty() && !t.is_empty()).then_some((s, t))
        }
    }
}

/// One command of a shell call, as rules see it.
pub(crate) struct CommandView<'a> {
    /// `None` for the whole script, which has text but no words of its own.
    pub command: Option<&'a SimpleCommand>,
    pub text: &'a str,
    json: OnceCell<String>,
}

impl<'a> CommandView<'a> {
    pub fn new(command: Option<&'a SimpleCommand>, text: &'a str) -> Self {
        CommandView {
            command,
            text,
            json: OnceCell::new(),
        }
    }

    /// The call's arguments with `command` replaced by this command's text.
    fn args_json(&self, args: &Value) -> &str {
        self.json.get_or_init(|| {
            let mut args = args.clone();
            if let Some(map) = args.as_object_mut() {
                map.insert("command".into(), Value::String(self.text.to_string()));
            }
            crate::args::stable_stringify(&args)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ToolCall;
    use serde_json::json;

    fn view(call: &ToolCall) -> CallView<'_> {
        CallView::new(call, ApprovalMode::Default, false)
    }

    #[test]
    fn mcp_server_must_match_not_only_the_prefix() {
        let p = ToolPattern::parse("mcp_safe_server_*", Some("safe_server"))
            .unwrap_or(ToolPattern::Any);
        let ok = ToolCall::new("mcp_safe_server_tool", json!({})).with_server("safe_server");
        let spoof = ToolCall::new("mcp_safe_server_malicious_tool", json!({}))
            .with_server("safe_server_malicious");
        let lying = ToolCall::new("mcp_other_server_tool", json!({})).with_server("safe_server");
        assert!(p.matches(&view(&ok)));
        assert!(!p.matches(&view(&spoof)));
        assert!(!p.matches(&view(&lying)));
    }

    #[test]
    fn regex_literal_prefixes_never_exclude_a_match() {
        let pre = |p: &str| literal_prefixes(p);
        assert_eq!(
            pre("npm (test|run lint)"),
            Some(vec!["npm test".into(), "npm run lint".into()])
        );
        assert_eq!(pre("a|bc"), Some(vec!["a".into(), "bc".into()]));
        assert_eq!(pre(".*foo"), None);
        assert_eq!(pre("x?y"), Some(vec!["xy".into(), "y".into()]));
        let p = pre("(?i)git").unwrap_or_default();
        assert!(
            p.iter().any(|l| "GIT status".starts_with(l.as_str())),
            "{p:?}"
        );
    }

    #[test]
    fn tool_patterns() {
        assert_eq!(
            ToolPattern::parse("mcp_*", None),
            Ok(ToolPattern::Mcp {
                server: None,
                tool: None
            })
        );
        assert_eq!(
            ToolPattern::parse("discovered_tool_*", None),
            Ok(ToolPattern::Prefix("discovered_tool_".into()))
        );
        assert!(ToolPattern::parse("a*b", None).is_err());
        let p = ToolPattern::parse("mcp_my-server_tool", None).unwrap_or(ToolPattern::Any);
        let short = ToolCall::new("tool", json!({})).with_server("my-server");
        assert!(p.matches(&view(&short)));
    }
}
