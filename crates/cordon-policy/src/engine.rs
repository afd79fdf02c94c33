//! The decision: which rule wins for a call, and what the shell analysis and checkers add.

use std::collections::HashMap;

use serde::Serialize;

use crate::checkers::{CheckerRule, Environment, ExternalRunner, run_checker};
use crate::load::{LoadIssue, PolicySet};
use crate::rule::{CallView, CommandCondition, CommandView, Rule, ToolPattern};
use crate::shell::{self, Role, SimpleCommand};
use crate::tools::DEFAULT_SHELL_TOOLS;
use crate::types::{ApprovalMode, Decision, ToolCall};

/// How the user is working right now.
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckOptions {
    pub mode: ApprovalMode,
    /// Nobody can answer a question: `ask_user` becomes `deny`.
    pub non_interactive: bool,
    /// The shell that will run a shell tool's command: cordon runs its own with bash, an agent
    /// may use another (zsh), whose different readings are then unanalysable.
    pub shell: shell::Dialect,
}

/// A rule, as reported with a decision.
#[derive(Debug, Clone, Serialize)]
pub struct RuleSummary {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `tier:file:line`, or the settings it came from.
    pub source: String,
    /// The policy file, or `null` for built-in rules and rules from settings.
    pub file: Option<std::path::PathBuf>,
    /// 1-based line of the rule in its file; 0 for rules from settings.
    pub line: usize,
    pub tier: crate::types::Tier,
    pub priority: u16,
    pub effective_priority: f64,
    #[serde(rename = "toolName")]
    pub tool_name: Vec<String>,
    pub decision: Decision,
    #[serde(rename = "denyMessage", skip_serializing_if = "Option::is_none")]
    pub deny_message: Option<String>,
}

impl RuleSummary {
    fn of(rule: &Rule) -> Self {
        let source = match &rule.source.file {
            Some(f) => format!("{}:{}:{}", rule.tier, f.display(), rule.source.line),
            None if rule.source.line > 0 => format!("{}:{}", rule.source.label, rule.source.line),
            None => rule.source.label.clone(),
        };
        RuleSummary {
            name: rule.name.clone(),
            source,
            file: rule.source.file.clone(),
            line: rule.source.line,
            tier: rule.tier,
            priority: rule.priority,
            effective_priority: rule.effective_priority(),
            tool_name: rule
                .matcher
                .tools
                .iter()
                .map(ToolPattern::describe)
                .collect(),
            decision: rule.decision,
            deny_message: rule.deny_message.clone(),
        }
    }
}

/// The engine's answer for one call.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub decision: Decision,
    /// The rule responsible for the decision; `null` when the default decided.
    pub rule: Option<RuleSummary>,
    pub reason: String,
}

/// Why one command of a shell call (or the call itself) got its decision.
#[derive(Debug, Clone, Serialize)]
pub struct PartTrace {
    /// The command as rules saw it; `null` for a call that is not a shell command.
    pub command: Option<String>,
    pub role: &'static str,
    pub via: Vec<String>,
    /// Every rule whose conditions held, best first.
    pub matched: Vec<RuleSummary>,
    pub decision: Decision,
    pub reason: String,
}

/// Everything `policy explain` shows.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    pub outcome: Outcome,
    pub parts: Vec<PartTrace>,
    pub problems: Vec<String>,
    pub checkers: Vec<CheckerTrace>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckerTrace {
    pub checker: String,
    pub source: String,
    pub decision: Decision,
    pub reason: String,
}

/// Decides tool calls. Built once from a [`PolicySet`]; `check` takes `&self` and can be
/// shared between threads.
#[derive(Debug)]
pub struct PolicyEngine {
    /// Best first: effective priority descending, then load order.
    rules: Vec<Rule>,
    /// For a command name, the rules (as indices into `rules`, best first) whose commandPrefix
    /// starts with it. Most rules name a command, so a command is only weighed against its own.
    by_command: HashMap<String, Vec<usize>>,
    /// For the first space-separated token of a command's text, the commandRegex rules whose
    /// every match starts with that token.
    by_first_token: HashMap<String, Vec<usize>>,
    /// Rules that may match any command, best first.
    unindexed: Vec<usize>,
    /// For a tool name, the rules limited to exact tool names that include it.
    by_tool: HashMap<String, Vec<usize>>,
    /// Rules with `*`, prefix or MCP tool patterns.
    any_tool: Vec<usize>,
    checkers: Vec<CheckerRule>,
    shell_tools: Vec<String>,
    env: Environment,
}

/// Why a verdict was reached, turned into words only for the verdict that is reported.
enum Why<'a> {
    Rule(&'a str),
    /// A rule matched a command: named with what it writes through redirections, which is
    /// often why a read-only command fell to a rule that asks.
    CommandRule(&'a SimpleCommand),
    NoRule(&'a str),
    NoProgram(&'a SimpleCommand),
    Redirect(&'a SimpleCommand),
    Danger(&'a SimpleCommand),
    Context(&'a str),
    Text(String),
}

/// One candidate decision, and the rule behind it.
struct Verdict<'r, 'a> {
    decision: Decision,
    rule: Option<&'r Rule>,
    why: Why<'a>,
}

impl Verdict<'_, '_> {
    /// `shown` (quoted already) matched this verdict's rule.
    fn rule_reason(&self, shown: &str) -> String {
        match self.rule {
            Some(r) => {
                let name = r
                    .name
                    .as_deref()
                    .map(|n| format!(" \"{n}\""))
                    .unwrap_or_default();
                format!(
                    "{shown} matches rule{name} ({}, priority {:.3}): {}",
                    r.source.label,
                    r.effective_priority(),
                    r.decision
                )
            }
            None => format!("{shown}: {}", self.decision),
        }
    }

    fn reason(&self, mode: ApprovalMode) -> String {
        let shown = |c: &SimpleCommand| {
            if !c.words.is_empty() {
                format!("`{}`", c.text)
            } else if !c.writes.is_empty() {
                format!("a redirection to `{}`", c.writes.join("`, `"))
            } else {
                format!("setting `{}`", c.assignments.join("`, `"))
            }
        };
        match &self.why {
            Why::CommandRule(c) if !c.writes.is_empty() => self.rule_reason(&format!(
                "`{}` writing to `{}`",
                c.text,
                c.writes.join("`, `")
            )),
            Why::CommandRule(c) => self.rule_reason(&format!("`{}`", c.text)),
            Why::Rule(what) => self.rule_reason(&format!("`{what}`")),
            Why::NoRule(what) => {
                format!("no rule matches `{what}`; the default for {mode} mode applies")
            }
            Why::NoProgram(c) => format!("{} runs no program", shown(c)),
            Why::Redirect(c) => format!(
                "{} writes to `{}` through a redirection",
                shown(c),
                c.writes.join("`, `")
            ),
            Why::Danger(c) => {
                let why = shell::danger(c).unwrap_or_else(|| "is dangerous".into());
                format!("{} {why}", shown(c))
            }
            Why::Context(text) => format!("`{text}` matches a rule that says {}", self.decision),
            Why::Text(t) => t.clone(),
        }
    }
}

/// One call being decided: which rules apply to its tool in this mode.
struct Scope<'e, 'c> {
    engine: &'e PolicyEngine,
    view: CallView<'c>,
    applicable: Vec<bool>,
    /// The engine's unindexed rules that apply to this call, best first.
    unindexed: Vec<usize>,
    opts: CheckOptions,
}

impl<'e> Scope<'e, '_> {
    /// Rules that may match this command (or, for `None`, a call or a whole script), best first.
    fn candidates(&self, cmd: Option<&CommandView<'_>>) -> impl Iterator<Item = &'e Rule> + '_ {
        let e = self.engine;
        let list = |index: &'e HashMap<String, Vec<usize>>, key: Option<&str>| -> &'e [usize] {
            key.and_then(|k| index.get(k)).map_or(&[], Vec::as_slice)
        };
        let named = list(
            &e.by_command,
            cmd.and_then(|c| c.command).and_then(SimpleCommand::name),
        );
        let token = list(
            &e.by_first_token,
            cmd.and_then(|c| c.text.split(' ').next()),
        );
        let indexed = merge_sorted(named.iter().copied(), token.iter().copied());
        merge_sorted(indexed, self.unindexed.iter().copied())
            .filter(|&i| self.applicable[i])
            .map(move |i| &e.rules[i])
    }

    /// Rules for which `pick` holds and whose conditions hold, best first. `pick` runs first
    /// so that the costlier conditions are only tested on rules that could be chosen.
    fn matching<'s>(
        &'s self,
        cv: Option<&'s CommandView<'_>>,
        pick: impl Fn(&Rule) -> bool + 's,
    ) -> impl Iterator<Item = &'e Rule> + 's {
        self.candidates(cv)
            .filter(move |r| pick(r))
            .filter(move |r| r.matcher.conditions_hold(&self.view, cv))
    }

    fn default_decision(&self) -> Decision {
        if self.opts.mode == ApprovalMode::Yolo {
            Decision::Allow
        } else {
            Decision::AskUser
        }
    }
}

/// Merges two ascending sequences of rule indices into one, dropping repeats.
fn merge_sorted(
    a: impl Iterator<Item = usize>,
    b: impl Iterator<Item = usize>,
) -> impl Iterator<Item = usize> {
    let (mut a, mut b) = (a.peekable(), b.peekable());
    std::iter::from_fn(move || match (a.peek().copied(), b.peek().copied()) {
        (Some(x), Some(y)) if x == y => {
            b.next();
            a.next()
        }
        (Some(x), Some(y)) if y < x => b.next(),
        (Some(_), _) => a.next(),
        (None, _) => b.next(),
    })
}

impl PolicyEngine {
    /// Whether calls to `tool` carry a shell command (`run_shell_command` and the like).
    pub fn is_shell_tool(&self, tool: &str) -> bool {
        self.shell_tools.iter().any(|t| t == tool)
    }

    /// Builds the engine. A set with loading errors is refused: a rule that failed to load
    /// could be the deny that mattered.
    pub fn new(set: PolicySet, env: Environment) -> Result<Self, Vec<LoadIssue>> {
        if set.has_errors() {
            return Err(set.issues.into_iter().filter(LoadIssue::is_error).collect());
        }
        let mut rules = set.rules;
        // Stable: among equal priorities the rule loaded first wins.
        rules.sort_by_key(|r| std::cmp::Reverse(r.rank()));
        let mut by_command: HashMap<String, Vec<usize>> = HashMap::new();
        let mut by_first_token: HashMap<String, Vec<usize>> = HashMap::new();
        let mut unindexed = Vec::new();
        let file = |index: &mut HashMap<String, Vec<usize>>, key: &str, i: usize| {
            let list = index.entry(key.to_string()).or_default();
            if list.last() != Some(&i) {
                list.push(i);
            }
        };
        for (i, r) in rules.iter().enumerate() {
            match &r.matcher.command {
                Some(CommandCondition::Prefix(prefixes)) => {
                    for first in prefixes.iter().filter_map(|p| p.first()) {
                        file(&mut by_command, first, i);
                    }
                }
                // A pattern whose every match starts with a whole first token can only match
                // commands whose text starts with that token.
                Some(CommandCondition::Regex {
                    prefixes: Some(literals),
                    ..
                }) if literals.iter().all(|l| l.contains(' ')) => {
                    for l in literals {
                        file(&mut by_first_token, l.split(' ').next().unwrap_or(l), i);
                    }
                }
                _ => unindexed.push(i),
            }
        }
        let mut by_tool: HashMap<String, Vec<usize>> = HashMap::new();
        let mut any_tool = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            match r.matcher.exact_tools() {
                Some(names) => {
                    for n in names {
                        file(&mut by_tool, n, i);
                    }
                }
                None => any_tool.push(i),
            }
        }
        let mut checkers = set.checkers;
        checkers.sort_by_key(|c| std::cmp::Reverse(c.rank()));
        Ok(PolicyEngine {
            rules,
            by_command,
            by_first_token,
            unindexed,
            by_tool,
            any_tool,
            checkers,
            shell_tools: DEFAULT_SHELL_TOOLS
                .iter()
                .map(|s| s.to_string())
                .chain(set.shell_tools)
                .collect(),
            env,
        })
    }

    /// Where calls are decided: the directories file arguments must stay inside.
    pub fn environment(&self) -> &Environment {
        &self.env
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn check(
        &self,
        call: &ToolCall,
        opts: CheckOptions,
        runner: &dyn ExternalRunner,
    ) -> Outcome {
        self.evaluate(call, opts, runner, None)
    }

    pub fn explain(
        &self,
        call: &ToolCall,
        opts: CheckOptions,
        runner: &dyn ExternalRunner,
    ) -> Explanation {
        let mut trace = Explanation {
            outcome: Outcome {
                decision: Decision::Deny,
                rule: None,
                reason: String::new(),
            },
            parts: Vec::new(),
            problems: Vec::new(),
            checkers: Vec::new(),
        };
        trace.outcome = self.evaluate(call, opts, runner, Some(&mut trace));
        trace
    }

    /// Which rules are about this call's tool in this mode. Rules naming exact tools are found
    /// through the index, so a call is only compared with the rules about it.
    fn applicable(&self, view: &CallView<'_>) -> Vec<bool> {
        let mut applicable = vec![false; self.rules.len()];
        for name in view.exact_names() {
            for &i in self
                .by_tool
                .get(name.as_ref())
                .map_or(&[][..], Vec::as_slice)
            {
                applicable[i] = self.rules[i].matcher.applies_besides_tool(view);
            }
        }
        for &i in &self.any_tool {
            applicable[i] = self.rules[i].matcher.applies_to(view);
        }
        applicable
    }

    fn evaluate(
        &self,
        call: &ToolCall,
        opts: CheckOptions,
        runner: &dyn ExternalRunner,
        mut trace: Option<&mut Explanation>,
    ) -> Outcome {
        let mut view = CallView::new(call, opts.mode, opts.non_interactive);
        let is_shell = self.shell_tools.contains(&call.name);
        if is_shell && !view.names.contains(&"run_shell_command") {
            // A configured shell tool is an alias: rules about run_shell_command govern it.
            view.names.push("run_shell_command");
        }
        // Rules about this tool in this mode; conditions are looked at per command below.
        let applicable = self.applicable(&view);
        let unindexed = self
            .unindexed
            .iter()
            .copied()
            .filter(|&i| applicable[i])
            .collect();
        let scope = Scope {
            engine: self,
            view,
            applicable,
            unindexed,
            opts,
        };

        let command = is_shell
            .then(|| call.args.get("command").and_then(|c| c.as_str()))
            .flatten();

        let mut winners: Vec<&Rule> = Vec::new();
        let mut verdict = match command {
            Some(script) => self.shell_verdict(script, &scope, &mut winners, trace.as_deref_mut()),
            None => {
                let winner = scope.matching(None, |r| !r.is_guard()).next();
                if let Some(t) = trace.as_deref_mut() {
                    t.parts.push(PartTrace {
                        command: None,
                        role: "call",
                        via: Vec::new(),
                        matched: scope
                            .matching(None, |r| !r.is_guard())
                            .map(RuleSummary::of)
                            .collect(),
                        decision: winner.map_or(scope.default_decision(), |r| r.decision),
                        reason: String::new(),
                    });
                }
                winners.extend(winner);
                match winner {
                    Some(r) => Verdict {
                        decision: r.decision,
                        rule: Some(r),
                        why: Why::Rule(&call.name),
                    },
                    None => Verdict {
                        decision: scope.default_decision(),
                        rule: None,
                        why: Why::NoRule(&call.name),
                    },
                }
            }
        };

        if verdict.decision != Decision::Deny {
            self.apply_checkers(call, &scope.view, &winners, &mut verdict, runner, trace);
        }

        let mut reason = verdict.reason(opts.mode);
        if opts.non_interactive && verdict.decision == Decision::AskUser {
            verdict.decision = Decision::Deny;
            reason.push_str(" (non-interactive: nobody can be asked, so it is denied)");
        }
        if verdict.decision == Decision::Deny
            && let Some(msg) = verdict.rule.and_then(|r| r.deny_message.as_ref())
        {
            reason = format!("{reason}: {msg}");
        }
        Outcome {
            decision: verdict.decision,
            rule: verdict.rule.map(RuleSummary::of),
            reason,
        }
    }

    fn shell_verdict<'r>(
        &'r self,
        script: &str,
        scope: &Scope<'r, '_>,
        winners: &mut Vec<&'r Rule>,
        mut trace: Option<&mut Explanation>,
    ) -> Verdict<'r, 'static> {
        let analysis = shell::analyse_as(script, scope.opts.shell);
        let mut worst: Option<Verdict<'r, '_>> = None;
        fn consider<'r, 'a>(worst: &mut Option<Verdict<'r, 'a>>, v: Verdict<'r, 'a>) {
            if worst.as_ref().is_none_or(|w| v.decision > w.decision) {
                *worst = Some(v);
            }
        }

        // The whole script, as written, can be named by a rule too (to deny a pattern).
        let whole = script.trim();
        let whole_cmd = CommandView::new(None, whole);
        if let Some(v) = self.context_verdict(scope, &whole_cmd, trace.as_deref_mut(), &[]) {
            consider(&mut worst, v);
        }
        for cmd in &analysis.commands {
            let cv = CommandView::new(Some(cmd), &cmd.text);
            let v = match cmd.role {
                Role::Context => self.context_verdict(scope, &cv, trace.as_deref_mut(), &cmd.via),
                Role::Runs => {
                    Some(self.command_verdict(scope, cmd, &cv, winners, trace.as_deref_mut()))
                }
            };
            if let Some(v) = v {
                consider(&mut worst, v);
            }
        }
        if let Some(t) = trace {
            t.problems = analysis.problems.clone();
        }
        let mode = scope.opts.mode;
        let (mut decision, mut rule, mut reason) = match worst {
            Some(v) => (v.decision, v.rule, v.reason(mode)),
            None => (
                scope.default_decision(),
                None,
                "no command in the script".to_string(),
            ),
        };
        let unanalysable = analysis.problems.first().cloned().or_else(|| {
            analysis
                .commands
                .is_empty()
                .then(|| "the script contains no command to check".to_string())
        });
        // What cannot be analysed is also the better reason for a question that a rule for
        // all commands asked anyway (`curl … | sh` asks for `sh`, not for `curl`), and it
        // leaves no rule to remember as an answer for always.
        if let Some(problem) = unanalysable
            && (decision == Decision::Allow
                || analysis.commands.is_empty()
                || (decision == Decision::AskUser && rule.is_none_or(|r| !r.is_guard())))
        {
            decision = decision.strictest(Decision::AskUser);
            rule = None;
            reason = format!("the command cannot be fully analysed: {problem}");
        }
        Verdict {
            decision,
            rule,
            why: Why::Text(reason),
        }
    }

    /// A form of the script that does not itself run: only an explicit rule about its text can
    /// make it count, and only to deny or ask.
    fn context_verdict<'r, 'a>(
        &self,
        scope: &Scope<'r, '_>,
        cv: &CommandView<'a>,
        trace: Option<&mut Explanation>,
        via: &[String],
    ) -> Option<Verdict<'r, 'a>> {
        let mut matched = scope.matching(Some(cv), |r| !r.is_guard() && r.matcher.has_condition());
        let winner = matched.next();
        let verdict = winner
            .filter(|r| r.decision != Decision::Allow)
            .map(|r| Verdict {
                decision: r.decision,
                rule: Some(r),
                why: Why::Context(cv.text),
            });
        if let Some(t) = trace
            && winner.is_some()
        {
            t.parts.push(PartTrace {
                command: Some(cv.text.to_string()),
                role: "context",
                via: via.to_vec(),
                matched: winner
                    .into_iter()
                    .chain(matched)
                    .map(RuleSummary::of)
                    .collect(),
                decision: verdict.as_ref().map_or(Decision::Allow, |v| v.decision),
                reason: "a wrapper or the whole script: rules naming it can only deny or ask"
                    .into(),
            });
        }
        verdict
    }

    fn command_verdict<'r, 'a>(
        &self,
        scope: &Scope<'r, '_>,
        cmd: &'a SimpleCommand,
        cv: &CommandView<'_>,
        winners: &mut Vec<&'r Rule>,
        trace: Option<&mut Explanation>,
    ) -> Verdict<'r, 'a> {
        let mut v = if cmd.words.is_empty() {
            // Only assignments or redirections: nothing runs, so no rule is needed; what they
            // write and set is judged below.
            Verdict {
                decision: Decision::Allow,
                rule: None,
                why: Why::NoProgram(cmd),
            }
        } else {
            match scope.matching(Some(cv), |r| !r.is_guard()).next() {
                Some(r) => {
                    winners.push(r);
                    Verdict {
                        decision: r.decision,
                        rule: Some(r),
                        why: Why::CommandRule(cmd),
                    }
                }
                None => Verdict {
                    decision: scope.default_decision(),
                    rule: None,
                    why: Why::NoRule(&cmd.text),
                },
            }
        };
        if v.decision == Decision::Allow
            && !cmd.writes.is_empty()
            && !scope.opts.mode.allows_redirection()
            && !v.rule.is_some_and(|r| r.allow_redirection)
        {
            v.decision = Decision::AskUser;
            v.why = Why::Redirect(cmd);
        }
        // A guard at least as strict as the decision explains it better than a tool-wide rule.
        let guard = scope.matching(Some(cv), Rule::is_guard).next();
        if let Some(g) = guard.filter(|g| {
            g.decision > v.decision || (g.decision == v.decision && v.decision == Decision::AskUser)
        }) {
            v = Verdict {
                decision: g.decision,
                rule: Some(g),
                why: Why::Danger(cmd),
            };
        }
        if let Some(t) = trace {
            let matched = scope
                .matching(Some(cv), |r| !cmd.words.is_empty() || r.is_guard())
                .map(RuleSummary::of)
                .collect();
            t.parts.push(PartTrace {
                command: Some(cmd.text.clone()),
                role: "runs",
                via: cmd.via.clone(),
                matched,
                decision: v.decision,
                reason: v.reason(scope.opts.mode),
            });
        }
        v
    }

    fn apply_checkers<'r>(
        &'r self,
        call: &ToolCall,
        view: &CallView<'_>,
        winners: &[&'r Rule],
        verdict: &mut Verdict<'r, '_>,
        runner: &dyn ExternalRunner,
        mut trace: Option<&mut Explanation>,
    ) {
        let script = call
            .args
            .get("command")
            .and_then(|c| c.as_str())
            .unwrap_or("");
        let whole = CommandView::new(None, script);
        let attached = winners
            .iter()
            .filter_map(|r| r.checker.as_ref().map(|c| (c, r.source.label.as_str())));
        let listed = self
            .checkers
            .iter()
            .filter(|c| c.matcher.applies_to(view) && c.matcher.conditions_hold(view, Some(&whole)))
            .map(|c| (&c.checker, c.source.label.as_str()));
        let mut seen: Vec<*const crate::checkers::Checker> = Vec::new();
        for (checker, source) in attached.chain(listed) {
            if seen.contains(&(checker as *const _)) {
                continue;
            }
            seen.push(checker);
            let result = run_checker(checker, call, &self.env, runner);
            if let Some(t) = trace.as_deref_mut() {
                t.checkers.push(CheckerTrace {
                    checker: checker.name().to_string(),
                    source: source.to_string(),
                    decision: result.decision,
                    reason: result.reason.clone(),
                });
            }
            if result.decision > verdict.decision {
                verdict.decision = result.decision;
                verdict.why = Why::Text(format!(
                    "safety checker `{}`: {}",
                    checker.name(),
                    result.reason
                ));
            }
            if verdict.decision == Decision::Deny {
                return;
            }
        }
    }
}
