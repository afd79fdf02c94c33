//! Reads one policy file: `[[rule]]` and `[[safety_checker]]` tables, as Gemini CLI writes them
//! plus cordon's own keys. Every key is checked; nothing unknown is dropped in silence.

use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use regex::{Regex, RegexBuilder};
use serde_json::Value;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::diagnostic::{IssueKind, LineIndex, LoadIssue, Severity};
use crate::checkers::{AllowedPathConfig, Checker, CheckerKind, CheckerRule, ExternalChecker};
use crate::rule::{CommandCondition, Matcher, Pattern, Rule, RuleSource, ToolPattern};
use crate::shell::Heuristic;
use crate::tools::{DEFAULT_SHELL_TOOLS, likely_typo};
use crate::types::{ApprovalMode, Decision, Tier};

const RULE_KEYS: &[&str] = &[
    "name",
    "toolName",
    "mcpName",
    "subagent",
    "argsPattern",
    "commandPrefix",
    "commandRegex",
    "decision",
    "priority",
    "modes",
    "interactive",
    "toolAnnotations",
    "allowRedirection",
    "allow_redirection",
    "denyMessage",
    "deny_message",
    "safety_checker",
    "heuristic",
];
const CHECKER_RULE_KEYS: &[&str] = &[
    "name",
    "toolName",
    "mcpName",
    "argsPattern",
    "commandPrefix",
    "commandRegex",
    "priority",
    "modes",
    "toolAnnotations",
    "checker",
];
const CHECKER_KEYS: &[&str] = &[
    "type",
    "name",
    "required_context",
    "config",
    "command",
    "timeout_ms",
];
const TOP_KEYS: &[&str] = &["rule", "safety_checker"];

/// Longest pattern accepted, as in Gemini CLI.
const MAX_PATTERN_LEN: usize = 2048;
/// Compiled patterns larger than this are refused (the regex engine is linear in time, but a
/// pattern like `a{1000}{1000}` could still take a lot of memory).
const MAX_COMPILED_REGEX: usize = 1 << 20;
const DEFAULT_CHECKER_TIMEOUT: Duration = Duration::from_secs(5);

/// What one file yielded.
#[derive(Debug, Default)]
pub struct ParsedFile {
    pub rules: Vec<Rule>,
    pub checkers: Vec<CheckerRule>,
    pub issues: Vec<LoadIssue>,
}

struct Ctx<'a> {
    text: &'a str,
    /// Tool names besides the default ones whose `command` is a shell script.
    shell_tools: &'a [String],
    index: LineIndex,
    file: Option<&'a Path>,
    label: &'a str,
    tier: Tier,
    issues: Vec<LoadIssue>,
}

impl Ctx<'_> {
    fn issue(
        &mut self,
        severity: Severity,
        kind: IssueKind,
        span: Range<usize>,
        message: String,
        hint: Option<String>,
    ) {
        let (line, column) = self.index.position(self.text, span.start);
        self.issues.push(LoadIssue {
            severity,
            kind,
            file: self.file.map(Path::to_path_buf),
            line,
            column,
            message,
            hint,
        });
    }

    fn error(
        &mut self,
        kind: IssueKind,
        span: Range<usize>,
        message: String,
        hint: Option<String>,
    ) {
        self.issue(Severity::Error, kind, span, message, hint);
    }

    fn source(&self, span: &Range<usize>) -> RuleSource {
        RuleSource {
            file: self.file.map(Path::to_path_buf),
            line: self.index.position(self.text, span.start).0,
            label: self.label.to_string(),
        }
    }

    /// Reports keys not in `known`, with the closest known key as a suggestion.
    fn unknown_keys(&mut self, table: &DeTable<'_>, known: &[&str], what: &str) {
        for (key, _) in table.iter() {
            let k = key.get_ref().as_ref();
            if known.contains(&k) {
                continue;
            }
            let suggestion = known
                .iter()
                .map(|c| {
                    (
                        strsim::osa_distance(&k.to_ascii_lowercase(), &c.to_ascii_lowercase()),
                        *c,
                    )
                })
                .filter(|(d, _)| *d <= 3)
                .min_by_key(|(d, _)| *d)
                .map(|(_, c)| format!("did you mean `{c}`?"));
            self.error(
                IssueKind::Schema,
                key.span(),
                format!("unknown key `{k}` in {what}"),
                suggestion.or_else(|| Some(format!("known keys: {}", known.join(", ")))),
            );
        }
    }
}

/// Parses one policy file's text. `label` names it in decisions (`user:my.toml`).
pub fn parse_policy_text(text: &str, file: Option<&Path>, label: &str, tier: Tier) -> ParsedFile {
    parse_policy_text_with(text, file, label, tier, &[])
}

/// [`parse_policy_text`] for a setup where more tools than `run_shell_command` take shell
/// scripts, so shell-only keys are accepted on them too.
pub fn parse_policy_text_with(
    text: &str,
    file: Option<&Path>,
    label: &str,
    tier: Tier,
    shell_tools: &[String],
) -> ParsedFile {
    let mut ctx = Ctx {
        text,
        shell_tools,
        index: LineIndex::new(text),
        file,
        label,
        tier,
        issues: Vec::new(),
    };
    let doc = match DeTable::parse(text) {
        Ok(d) => d,
        Err(e) => {
            let span = e.span().unwrap_or(0..0);
            let message = e.message().trim().to_string();
            ctx.error(
                IssueKind::TomlParse,
                span,
                format!("not valid TOML: {message}"),
                Some("check for a missing quote, bracket or comma; in \"…\" strings a backslash must be doubled (\\\\.) or use '…'".into()),
            );
            return ParsedFile {
                issues: ctx.issues,
                ..Default::default()
            };
        }
    };
    let doc = doc.get_ref();
    ctx.unknown_keys(doc, TOP_KEYS, "a policy file");

    let mut out = ParsedFile::default();
    for (key, value) in doc.iter() {
        let which = key.get_ref().as_ref();
        if !TOP_KEYS.contains(&which) {
            continue;
        }
        let Some(items) = value.get_ref().as_array() else {
            ctx.error(
                IssueKind::Schema,
                value.span(),
                format!("`{which}` must be an array of tables"),
                Some(format!("write each entry as [[{which}]]")),
            );
            continue;
        };
        for item in items.iter() {
            let Some(table) = item.get_ref().as_table() else {
                ctx.error(
                    IssueKind::Schema,
                    item.span(),
                    format!("each `{which}` entry must be a table"),
                    None,
                );
                continue;
            };
            if which == "rule" {
                if let Some(r) = parse_rule(&mut ctx, table, item.span()) {
                    out.rules.push(r);
                }
            } else if let Some(c) = parse_checker_rule(&mut ctx, table, item.span()) {
                out.checkers.push(c);
            }
        }
    }
    // Tables are visited in key order; put rules back in file order for tie-breaking.
    out.rules.sort_by_key(|r| r.source.line);
    out.checkers.sort_by_key(|r| r.source.line);
    out.issues = ctx.issues;
    out
}

type Field<'a, 'i> = Option<&'a Spanned<DeValue<'i>>>;

fn get<'a, 'i>(table: &'a DeTable<'i>, key: &str) -> Field<'a, 'i> {
    table
        .iter()
        .find(|(k, _)| k.get_ref().as_ref() == key)
        .map(|(_, v)| v)
}

fn type_error(ctx: &mut Ctx<'_>, v: &Spanned<DeValue<'_>>, key: &str, want: &str) {
    ctx.error(
        IssueKind::Schema,
        v.span(),
        format!("`{key}` must be {want}, not {}", v.get_ref().type_str()),
        None,
    );
}

fn string(ctx: &mut Ctx<'_>, table: &DeTable<'_>, key: &str) -> Option<(String, Range<usize>)> {
    let v = get(table, key)?;
    match v.get_ref().as_str() {
        Some(s) => Some((s.to_string(), v.span())),
        None => {
            type_error(ctx, v, key, "a string");
            None
        }
    }
}

fn boolean(ctx: &mut Ctx<'_>, table: &DeTable<'_>, key: &str) -> Option<bool> {
    let v = get(table, key)?;
    match v.get_ref().as_bool() {
        Some(b) => Some(b),
        None => {
            type_error(ctx, v, key, "true or false");
            None
        }
    }
}

/// A string or an array of strings.
fn strings(
    ctx: &mut Ctx<'_>,
    table: &DeTable<'_>,
    key: &str,
) -> Option<(Vec<String>, Range<usize>)> {
    let v = get(table, key)?;
    match v.get_ref() {
        DeValue::String(s) => Some((vec![s.to_string()], v.span())),
        DeValue::Array(items) => {
            let mut out = Vec::new();
            for item in items.iter() {
                match item.get_ref().as_str() {
                    Some(s) => out.push(s.to_string()),
                    None => {
                        type_error(ctx, item, key, "a string");
                        return None;
                    }
                }
            }
            Some((out, v.span()))
        }
        _ => {
            type_error(ctx, v, key, "a string or an array of strings");
            None
        }
    }
}

fn priority(
    ctx: &mut Ctx<'_>,
    table: &DeTable<'_>,
    span: &Range<usize>,
    required: bool,
) -> Option<u16> {
    let Some(v) = get(table, "priority") else {
        if required {
            ctx.error(
                IssueKind::Schema,
                span.clone(),
                "missing `priority`".into(),
                Some("add `priority = N` with N from 0 to 999; higher wins within a tier".into()),
            );
            return None;
        }
        return Some(0);
    };
    let n: Option<f64> = match v.get_ref() {
        DeValue::Integer(i) => i64::from_str_radix(&i.as_str().replace('_', ""), i.radix())
            .ok()
            .map(|n| n as f64),
        DeValue::Float(f) => f.as_str().replace('_', "").parse::<f64>().ok(),
        _ => None,
    };
    match n {
        Some(n) if n.fract() == 0.0 && (0.0..=999.0).contains(&n) => Some(n as u16),
        Some(n) if n.fract() != 0.0 => {
            ctx.error(
                IssueKind::Schema,
                v.span(),
                format!("`priority` must be an integer, not {n}"),
                None,
            );
            None
        }
        Some(n) => {
            ctx.error(
                IssueKind::Schema,
                v.span(),
                format!("`priority` must be from 0 to 999, not {n}"),
                Some("priorities of 1000 or more would jump into the next tier; a higher tier already outranks this one".into()),
            );
            None
        }
        None => {
            type_error(ctx, v, "priority", "an integer from 0 to 999");
            None
        }
    }
}

fn modes(ctx: &mut Ctx<'_>, table: &DeTable<'_>) -> Result<Option<Vec<ApprovalMode>>, ()> {
    let Some((names, span)) = strings(ctx, table, "modes") else {
        return if get(table, "modes").is_some() {
            Err(())
        } else {
            Ok(None)
        };
    };
    let mut out = Vec::new();
    for n in names {
        match ApprovalMode::parse(&n) {
            Some(m) => out.push(m),
            None => {
                ctx.error(
                    IssueKind::Schema,
                    span.clone(),
                    format!("unknown mode `{n}`"),
                    Some("modes are default, autoEdit, plan and yolo (case matters)".into()),
                );
                return Err(());
            }
        }
    }
    Ok(Some(out))
}

fn annotations(
    ctx: &mut Ctx<'_>,
    table: &DeTable<'_>,
) -> Result<Option<serde_json::Map<String, Value>>, ()> {
    let Some(v) = get(table, "toolAnnotations") else {
        return Ok(None);
    };
    match to_json(v.get_ref()) {
        Some(Value::Object(m)) => Ok(Some(m)),
        _ => {
            type_error(ctx, v, "toolAnnotations", "a table");
            Err(())
        }
    }
}

fn to_json(v: &DeValue<'_>) -> Option<Value> {
    Some(match v {
        DeValue::String(s) => Value::String(s.to_string()),
        DeValue::Integer(i) => {
            Value::from(i64::from_str_radix(&i.as_str().replace('_', ""), i.radix()).ok()?)
        }
        DeValue::Float(f) => {
            serde_json::Number::from_f64(f.as_str().replace('_', "").parse().ok()?)?.into()
        }
        DeValue::Boolean(b) => Value::Bool(*b),
        DeValue::Datetime(d) => Value::String(d.to_string()),
        DeValue::Array(items) => Value::Array(
            items
                .iter()
                .map(|i| to_json(i.get_ref()))
                .collect::<Option<_>>()?,
        ),
        DeValue::Table(t) => Value::Object(
            t.iter()
                .map(|(k, v)| Some((k.get_ref().to_string(), to_json(v.get_ref())?)))
                .collect::<Option<_>>()?,
        ),
    })
}

/// Compiles a user pattern. Patterns that need a backtracking engine (look-around,
/// backreferences) or that are shaped like the classic exponential ones are refused, so a
/// policy that works here cannot hang another engine, and no pattern can hang this one.
pub(crate) fn compile_pattern(pattern: &str) -> Result<Regex, (String, Option<String>)> {
    compile_wrapped(pattern, pattern)
}

/// Compiles `compiled`, a pattern built around the user's `pattern`; the checks look at what
/// the user wrote, not at our wrapping.
fn compile_wrapped(pattern: &str, compiled: &str) -> Result<Regex, (String, Option<String>)> {
    if pattern.len() > MAX_PATTERN_LEN {
        return Err((
            format!("pattern is longer than {MAX_PATTERN_LEN} characters"),
            None,
        ));
    }
    if nested_quantifier(pattern) {
        return Err((
            format!(
                "pattern `{pattern}` repeats a group that itself repeats, which can take exponential time"
            ),
            Some(
                "rewrite without a quantifier on a group that contains one, e.g. `(a+)+` → `a+`"
                    .into(),
            ),
        ));
    }
    RegexBuilder::new(compiled)
        .size_limit(MAX_COMPILED_REGEX)
        .build()
        .map_err(|e| {
            let detail = e.to_string();
            let last = detail.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or(&detail).trim().to_string();
            let hint = if detail.contains("look-around") || detail.contains("backreference") {
                Some("cordon's patterns run in linear time and have no look-around or backreferences; match the text positively instead".into())
            } else {
                None
            };
            (format!("pattern `{pattern}` does not compile: {last}"), hint)
        })
}

/// The same textual test Gemini CLI uses: a parenthesised group containing a quantifier,
/// itself quantified.
fn nested_quantifier(p: &str) -> bool {
    // On bytes, without Unicode classes: the delimiters are ASCII, and Unicode's `.` and
    // `[^)]` would make every process that loads a pattern compile a far larger automaton.
    static RE: std::sync::OnceLock<Option<regex::bytes::Regex>> = std::sync::OnceLock::new();
    RE.get_or_init(|| regex::bytes::Regex::new(r"(?-u)\([^)]*[*+?{].*\)[*+?{]").ok())
        .as_ref()
        .is_none_or(|re| re.is_match(p.as_bytes()))
}

fn parse_tools(
    ctx: &mut Ctx<'_>,
    table: &DeTable<'_>,
    span: &Range<usize>,
    mcp: Option<&str>,
    warn_typos: bool,
) -> Option<(Vec<ToolPattern>, Vec<String>)> {
    let Some((names, tspan)) = strings(ctx, table, "toolName") else {
        if get(table, "toolName").is_none() {
            ctx.error(
                IssueKind::Schema,
                span.clone(),
                "missing `toolName`".into(),
                Some("name the tool (`toolName = \"read_file\"`), a list of tools, or `\"*\"` for every tool".into()),
            );
        }
        return None;
    };
    let mut out = Vec::new();
    for n in &names {
        if n.is_empty() {
            ctx.error(
                IssueKind::Rule,
                tspan.clone(),
                "`toolName` cannot be an empty string".into(),
                Some("use \"*\" to match every tool".into()),
            );
            return None;
        }
        match ToolPattern::parse(n, mcp) {
            Ok(p) => out.push(p),
            Err(why) => {
                ctx.error(IssueKind::Rule, tspan.clone(), why, None);
                return None;
            }
        }
        if n.contains("__") {
            ctx.issue(
                Severity::Warning,
                IssueKind::ToolName,
                tspan.clone(),
                format!("`{n}` uses the old `server__tool` form for MCP tools"),
                Some(
                    "use `mcpName = \"server\"` with the tool's name, or `mcp_server_tool`".into(),
                ),
            );
        } else if warn_typos
            && mcp.is_none()
            && let Some(k) = likely_typo(n)
        {
            ctx.issue(
                Severity::Warning,
                IssueKind::ToolName,
                tspan.clone(),
                format!("unrecognised tool name `{n}`"),
                Some(format!("did you mean `{k}`?")),
            );
        }
    }
    Some((out, names))
}

/// `argsPattern`, `commandPrefix`, `commandRegex`, `heuristic`: the conditions on what a call
/// says rather than which tool it is.
struct Conditions {
    args: Option<Pattern>,
    command: Option<CommandCondition>,
    heuristic: Option<Heuristic>,
}

fn parse_conditions(
    ctx: &mut Ctx<'_>,
    table: &DeTable<'_>,
    tool_names: &[String],
    allow_heuristic: bool,
) -> Option<Conditions> {
    let args_pat = string(ctx, table, "argsPattern");
    let prefix = strings(ctx, table, "commandPrefix");
    let cregex = string(ctx, table, "commandRegex");
    let heuristic = if allow_heuristic {
        string(ctx, table, "heuristic")
    } else {
        None
    };
    if (get(table, "argsPattern").is_some() && args_pat.is_none())
        || (get(table, "commandPrefix").is_some() && prefix.is_none())
        || (get(table, "commandRegex").is_some() && cregex.is_none())
        || (allow_heuristic && get(table, "heuristic").is_some() && heuristic.is_none())
    {
        return None;
    }

    let shell_only = prefix
        .as_ref()
        .map(|p| p.1.clone())
        .or_else(|| cregex.as_ref().map(|c| c.1.clone()))
        .or_else(|| heuristic.as_ref().map(|h| h.1.clone()));
    if let Some(span) = shell_only
        && !tool_names
            .iter()
            .all(|t| DEFAULT_SHELL_TOOLS.contains(&t.as_str()) || ctx.shell_tools.contains(t))
    {
        ctx.error(
                IssueKind::Rule,
                span,
                "commandPrefix, commandRegex and heuristic can only be used with toolName = \"run_shell_command\"".into(),
                Some("use argsPattern to match other tools' arguments".into()),
            );
        return None;
    }
    if prefix.is_some() && cregex.is_some() {
        let span = cregex.as_ref().map(|c| c.1.clone()).unwrap_or_default();
        ctx.error(
            IssueKind::Rule,
            span,
            "a rule cannot have both commandPrefix and commandRegex".into(),
            Some("split it into two rules".into()),
        );
        return None;
    }
    if args_pat.is_some() && (prefix.is_some() || cregex.is_some()) {
        let span = args_pat.as_ref().map(|a| a.1.clone()).unwrap_or_default();
        ctx.error(
            IssueKind::Rule,
            span,
            "a rule cannot have both argsPattern and commandPrefix/commandRegex".into(),
            Some("these fields are mutually exclusive; split it into two rules".into()),
        );
        return None;
    }

    // A built-in policy's patterns are compiled when first used (`Pattern`).
    let builtin = ctx.tier == Tier::Default;
    let args = match args_pat {
        Some((p, _)) if builtin => Some(Pattern::later(p)),
        Some((p, span)) => match compile_pattern(&p) {
            Ok(re) => Some(Pattern::Ready(re)),
            Err((msg, hint)) => {
                ctx.error(IssueKind::Regex, span, msg, hint);
                return None;
            }
        },
        None => None,
    };
    let command = if let Some((prefixes, span)) = prefix {
        let mut lists = Vec::new();
        for p in prefixes {
            match shlex::split(&p) {
                Some(words) if !words.is_empty() => lists.push(words),
                _ => {
                    ctx.error(
                        IssueKind::Rule,
                        span.clone(),
                        format!("commandPrefix `{p}` is empty or has an unclosed quote"),
                        None,
                    );
                    return None;
                }
            }
        }
        Some(CommandCondition::Prefix(lists))
    } else if let Some((re, span)) = cregex {
        // Anchored at the start, like Gemini CLI's `"command":"<regex>` construction.
        let anchored = format!("^(?:{re})");
        if builtin {
            Some(CommandCondition::regex(&re, Pattern::later(anchored)))
        } else {
            match compile_wrapped(&re, &anchored) {
                Ok(r) => Some(CommandCondition::regex(&re, Pattern::Ready(r))),
                Err((msg, hint)) => {
                    ctx.error(IssueKind::Regex, span, msg, hint);
                    return None;
                }
            }
        }
    } else {
        None
    };
    let heuristic = match heuristic {
        Some((h, span)) => match Heuristic::parse(&h) {
            Some(h) => Some(h),
            None => {
                ctx.error(
                    IssueKind::Schema,
                    span,
                    format!("unknown heuristic `{h}`"),
                    Some("heuristics are `dangerous` and `read-only`".into()),
                );
                return None;
            }
        },
        None => None,
    };
    Some(Conditions {
        args,
        command,
        heuristic,
    })
}

fn parse_rule(ctx: &mut Ctx<'_>, table: &DeTable<'_>, span: Range<usize>) -> Option<Rule> {
    let before = ctx.issues.iter().filter(|i| i.is_error()).count();
    ctx.unknown_keys(table, RULE_KEYS, "a [[rule]]");
    let name = string(ctx, table, "name").map(|n| n.0);
    let mcp = string(ctx, table, "mcpName");
    if let Some((m, s)) = &mcp
        && m.is_empty()
    {
        ctx.error(
            IssueKind::Rule,
            s.clone(),
            "`mcpName` cannot be empty".into(),
            Some("use \"*\" for every MCP server".into()),
        );
    }
    let tools = parse_tools(ctx, table, &span, mcp.as_ref().map(|m| m.0.as_str()), true);
    let decision = match string(ctx, table, "decision") {
        Some((d, s)) => match Decision::parse(&d) {
            Some(d) => Some(d),
            None => {
                ctx.error(
                    IssueKind::Schema,
                    s,
                    format!("unknown decision `{d}`"),
                    Some("use allow, deny or ask_user".into()),
                );
                None
            }
        },
        None => {
            if get(table, "decision").is_none() {
                ctx.error(
                    IssueKind::Schema,
                    span.clone(),
                    "missing `decision`".into(),
                    Some("add `decision = \"allow\"`, \"deny\" or \"ask_user\"".into()),
                );
            }
            None
        }
    };
    let priority = priority(ctx, table, &span, true);
    let modes = modes(ctx, table);
    let interactive = boolean(ctx, table, "interactive");
    let allow_redirection = boolean(ctx, table, "allowRedirection")
        .or_else(|| boolean(ctx, table, "allow_redirection"));
    let deny_message = string(ctx, table, "denyMessage")
        .or_else(|| string(ctx, table, "deny_message"))
        .map(|d| d.0);
    let subagent = string(ctx, table, "subagent").map(|s| s.0);
    let annotations = annotations(ctx, table);
    let conditions = match &tools {
        Some((_, names)) => parse_conditions(ctx, table, names, true),
        None => None,
    };
    let checker = match get(table, "safety_checker") {
        Some(v) => match v.get_ref().as_table() {
            Some(t) => Some(parse_checker(ctx, t, v.span())?),
            None => {
                type_error(ctx, v, "safety_checker", "a table ([rule.safety_checker])");
                return None;
            }
        },
        None => None,
    };
    if ctx.issues.iter().filter(|i| i.is_error()).count() > before {
        return None;
    }
    let (tools, _) = tools?;
    let conditions = conditions?;
    Some(Rule {
        name,
        matcher: Matcher {
            tools,
            args_pattern: conditions.args,
            command: conditions.command,
            heuristic: conditions.heuristic,
            modes: modes.ok()?,
            interactive,
            subagent,
            annotations: annotations.ok()?,
        },
        decision: decision?,
        priority: priority?,
        tier: ctx.tier,
        allow_redirection: allow_redirection.unwrap_or(false),
        deny_message,
        checker: checker.flatten(),
        source: ctx.source(&span),
    })
}

fn parse_checker_rule(
    ctx: &mut Ctx<'_>,
    table: &DeTable<'_>,
    span: Range<usize>,
) -> Option<CheckerRule> {
    let before = ctx.issues.iter().filter(|i| i.is_error()).count();
    ctx.unknown_keys(table, CHECKER_RULE_KEYS, "a [[safety_checker]]");
    let mcp = string(ctx, table, "mcpName");
    let tools = parse_tools(
        ctx,
        table,
        &span,
        mcp.as_ref().map(|m| m.0.as_str()),
        mcp.is_none(),
    );
    let priority = priority(ctx, table, &span, false);
    let modes = modes(ctx, table);
    let annotations = annotations(ctx, table);
    let conditions = match &tools {
        Some((_, names)) => parse_conditions(ctx, table, names, false),
        None => None,
    };
    let checker = match get(table, "checker") {
        Some(v) => match v.get_ref().as_table() {
            Some(t) => parse_checker(ctx, t, v.span()),
            None => {
                type_error(ctx, v, "checker", "a table ([safety_checker.checker])");
                None
            }
        },
        None => {
            ctx.error(
                IssueKind::Schema,
                span.clone(),
                "missing `checker`".into(),
                Some("add a [safety_checker.checker] table with `type` and `name`".into()),
            );
            None
        }
    };
    if ctx.issues.iter().filter(|i| i.is_error()).count() > before {
        return None;
    }
    let conditions = conditions?;
    Some(CheckerRule {
        matcher: Matcher {
            tools: tools?.0,
            args_pattern: conditions.args,
            command: conditions.command,
            modes: modes.ok()?,
            annotations: annotations.ok()?,
            ..Default::default()
        },
        priority: priority?,
        tier: ctx.tier,
        // A checker we do not have (reported as a warning) simply never matches.
        checker: checker??,
        source: ctx.source(&span),
    })
}

/// `Some(None)`: valid but unavailable here (reported as a warning).
fn parse_checker(
    ctx: &mut Ctx<'_>,
    table: &DeTable<'_>,
    span: Range<usize>,
) -> Option<Option<Checker>> {
    ctx.unknown_keys(table, CHECKER_KEYS, "a checker");
    let kind = string(ctx, table, "type");
    let name = string(ctx, table, "name");
    let required_context = strings(ctx, table, "required_context").map(|r| r.0);
    let config = match get(table, "config") {
        Some(v) => match to_json(v.get_ref()) {
            Some(Value::Object(m)) => m,
            _ => {
                type_error(ctx, v, "config", "a table");
                return None;
            }
        },
        None => serde_json::Map::new(),
    };
    let (Some((kind, kspan)), Some((name, nspan))) = (kind, name) else {
        ctx.error(
            IssueKind::Schema,
            span,
            "a checker needs `type` and `name`".into(),
            Some("e.g. type = \"in-process\", name = \"allowed-path\"".into()),
        );
        return None;
    };
    let kind = match kind.as_str() {
        "in-process" => match name.as_str() {
            "allowed-path" => {
                let list = |key: &str| -> Vec<String> {
                    config
                        .get(key)
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(|v| v.as_str().map(String::from))
                                .collect()
                        })
                        .unwrap_or_default()
                };
                CheckerKind::AllowedPath(AllowedPathConfig {
                    included_args: list("included_args"),
                    excluded_args: list("excluded_args"),
                })
            }
            "conseca" => {
                ctx.issue(
                    Severity::Warning,
                    IssueKind::Ignored,
                    nspan,
                    "the `conseca` checker (a language-model reviewer in Gemini CLI) is not available in cordon; this checker is not applied".into(),
                    Some("use an external checker if you need a second opinion on calls".into()),
                );
                return Some(None);
            }
            other => {
                ctx.error(IssueKind::Schema, nspan, format!("unknown in-process checker `{other}`"), Some("the built-in checker is `allowed-path`; use type = \"external\" for your own".into()));
                return None;
            }
        },
        "external" => {
            let command = strings(ctx, table, "command").map(|c| c.0);
            let timeout = match get(table, "timeout_ms") {
                Some(v) => match v
                    .get_ref()
                    .as_integer()
                    .and_then(|i| i64::from_str_radix(i.as_str(), i.radix()).ok())
                {
                    Some(ms) if (1..=600_000).contains(&ms) => Duration::from_millis(ms as u64),
                    _ => {
                        type_error(ctx, v, "timeout_ms", "an integer from 1 to 600000");
                        return None;
                    }
                },
                None => DEFAULT_CHECKER_TIMEOUT,
            };
            if command.is_none() {
                ctx.issue(
                    Severity::Warning,
                    IssueKind::Rule,
                    nspan,
                    format!(
                        "external checker `{name}` has no `command`; every call it sees is denied"
                    ),
                    Some("add command = [\"/path/to/checker\", \"arg\"]".into()),
                );
            }
            CheckerKind::External(ExternalChecker {
                name,
                command,
                timeout,
            })
        }
        other => {
            ctx.error(
                IssueKind::Schema,
                kspan,
                format!("unknown checker type `{other}`"),
                Some("use \"in-process\" or \"external\"".into()),
            );
            return None;
        }
    };
    Some(Some(Checker {
        kind,
        required_context,
        config,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> ParsedFile {
        parse_policy_text(text, Some(Path::new("p.toml")), "user:p.toml", Tier::User)
    }

    fn first_error(text: &str) -> String {
        parse(text)
            .issues
            .iter()
            .find(|i| i.is_error())
            .map(|i| i.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn a_good_rule_loads() {
        let p = parse(
            "[[rule]]\ntoolName = [\"read_file\", \"glob\"]\ndecision = \"allow\"\npriority = 50\n",
        );
        assert!(p.issues.is_empty(), "{:?}", p.issues);
        assert_eq!(p.rules.len(), 1);
        assert_eq!(p.rules[0].rank(), 4050);
    }

    #[test]
    fn errors_name_line_column_and_kind() {
        let e = first_error("[[rule]]\ntoolName = \"x\"\ndecison = \"allow\"\npriority = 1\n");
        assert!(
            e.starts_with("p.toml:3:1: error [schema]: unknown key `decison`"),
            "{e}"
        );
        assert!(e.contains("did you mean `decision`"), "{e}");
        let e = first_error("[[rule]]\ntoolName = \"x\"\ndecision = \"allow\"\npriority = 1000\n");
        assert!(
            e.contains("p.toml:4:12") && e.contains("from 0 to 999"),
            "{e}"
        );
        let e = first_error("[[rule]]\ntoolName = \"x\"\ndecision = \"allow\"\n");
        assert!(e.contains("missing `priority`"), "{e}");
        let e = first_error("[[rule]\n");
        assert!(e.contains("[toml]"), "{e}");
        let e = first_error("[[rule]]\ntoolName = \"x\"\ndecision = \"maybe\"\npriority = 1\n");
        assert!(e.contains("unknown decision `maybe`"), "{e}");
    }

    #[test]
    fn dangerous_and_unsupported_patterns_are_rejected() {
        for pat in ["(a+)+$", "(.*)*x", "(?=x)y", "(a)\\1", "[unclosed"] {
            let e = first_error(&format!(
                "[[rule]]\ntoolName = \"x\"\nargsPattern = '{pat}'\ndecision = \"deny\"\npriority = 1\n"
            ));
            assert!(e.contains("[regex]"), "{pat}: {e}");
        }
    }

    #[test]
    fn shell_keys_need_the_shell_tool() {
        let e = first_error(
            "[[rule]]\ntoolName = \"glob\"\ncommandPrefix = \"ls\"\ndecision = \"allow\"\npriority = 1\n",
        );
        assert!(
            e.contains("[rule]") && e.contains("run_shell_command"),
            "{e}"
        );
        let e = first_error(
            "[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = \"ls\"\ncommandRegex = \"ls\"\ndecision = \"allow\"\npriority = 1\n",
        );
        assert!(e.contains("both commandPrefix and commandRegex"), "{e}");
    }

    #[test]
    fn typos_warn() {
        let p = parse(
            "[[rule]]\ntoolName = [\"grob\", \"glob\", \"replce\"]\ndecision = \"allow\"\npriority = 1\n",
        );
        let warnings: Vec<_> = p.issues.iter().filter(|i| !i.is_error()).collect();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert_eq!(p.rules.len(), 1);
    }
}
