//! The decision: which rule wins for a call, and what the shell analysis and checkers add.

use serde::Serialize;

use crate::checkers::{CheckerRule, Environment, ExternalRunner, run_checker};
use crate::load::{LoadIssue, PolicySet};
use crate::rule::{CallView, CommandView, Rule, ToolPattern};
use crate::shell::{self, Role, SimpleCommand};
use crate::tools::DEFAULT_SHELL_TOOLS;
use crate::types::{ApprovalMode, Decision, ToolCall};

/// How the user is working right now.
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckOptions {
    pub mode: ApprovalMode,
    /// Nobody can answer a question: `ask_user` becomes `deny`.
    pub non_interactive: bool,
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
    checkers: Vec<CheckerRule>,
    shell_tools: Vec<String>,
    env: Environment,
}

/// One candidate decision, and the rule behind it.
struct Verdict<'r> {
    decision: Decision,
    rule: Option<&'r Rule>,
    reason: String,
}

impl PolicyEngine {
    /// Builds the engine. A set with loading errors is refused: a rule that failed to load
    /// could be the deny that mattered.
    pub fn new(set: PolicySet, env: Environment) -> Result<Self, Vec<LoadIssue>> {
        if set.has_errors() {
            return Err(set.issues.into_iter().filter(LoadIssue::is_error).collect());
        }
        let mut rules = set.rules;
        // Stable: among equal priorities the rule loaded first wins.
        rules.sort_by_key(|r| std::cmp::Reverse(r.rank()));
        let mut checkers = set.checkers;
        checkers.sort_by_key(|c| std::cmp::Reverse(c.rank()));
        Ok(PolicyEngine {
            rules,
            checkers,
            shell_tools: DEFAULT_SHELL_TOOLS.iter().map(|s| s.to_string()).collect(),
            env,
        })
    }

    /// Treats calls to these tools as shell commands too (`bash`, `exec_command`, …).
    pub fn add_shell_tools(&mut self, names: impl IntoIterator<Item = String>) {
        self.shell_tools.extend(names);
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

    fn default_decision(opts: CheckOptions) -> Decision {
        if opts.mode == ApprovalMode::Yolo {
            Decision::Allow
        } else {
            Decision::AskUser
        }
    }

    fn evaluate(
        &self,
        call: &ToolCall,
        opts: CheckOptions,
        runner: &dyn ExternalRunner,
        mut trace: Option<&mut Explanation>,
    ) -> Outcome {
        let view = CallView::new(call, opts.mode, opts.non_interactive);
        // Rules about this tool in this mode; conditions are looked at per command below.
        let applicable: Vec<&Rule> = self
            .rules
            .iter()
            .filter(|r| r.matcher.applies_to(&view))
            .collect();

        let command = self
            .shell_tools
            .contains(&call.name)
            .then(|| call.args.get("command").and_then(|c| c.as_str()))
            .flatten();

        let mut winners: Vec<&Rule> = Vec::new();
        let mut verdict = match command {
            Some(script) => self.shell_verdict(
                script,
                &view,
                &applicable,
                opts,
                &mut winners,
                trace.as_deref_mut(),
            ),
            None => {
                let winner = applicable
                    .iter()
                    .copied()
                    .filter(|r| !r.is_guard())
                    .find(|r| r.matcher.conditions_hold(&view, None));
                if let Some(t) = trace.as_deref_mut() {
                    t.parts.push(PartTrace {
                        command: None,
                        role: "call",
                        via: Vec::new(),
                        matched: applicable
                            .iter()
                            .filter(|r| !r.is_guard() && r.matcher.conditions_hold(&view, None))
                            .map(|r| RuleSummary::of(r))
                            .collect(),
                        decision: winner.map_or(Self::default_decision(opts), |r| r.decision),
                        reason: String::new(),
                    });
                }
                winners.extend(winner);
                match winner {
                    Some(r) => Verdict {
                        decision: r.decision,
                        rule: Some(r),
                        reason: rule_reason(r, &call.name),
                    },
                    None => Verdict {
                        decision: Self::default_decision(opts),
                        rule: None,
                        reason: format!(
                            "no rule matches `{}`; the default for {} mode applies",
                            call.name, opts.mode
                        ),
                    },
                }
            }
        };

        if verdict.decision != Decision::Deny {
            self.apply_checkers(call, &view, &winners, &mut verdict, runner, trace);
        }

        if opts.non_interactive && verdict.decision == Decision::AskUser {
            verdict.decision = Decision::Deny;
            verdict.reason = format!(
                "{} (non-interactive: nobody can be asked, so it is denied)",
                verdict.reason
            );
        }
        if verdict.decision == Decision::Deny
            && let Some(msg) = verdict.rule.and_then(|r| r.deny_message.as_ref())
        {
            verdict.reason = format!("{}: {msg}", verdict.reason);
        }
        Outcome {
            decision: verdict.decision,
            rule: verdict.rule.map(RuleSummary::of),
            reason: verdict.reason,
        }
    }

    fn shell_verdict<'r>(
        &'r self,
        script: &str,
        view: &CallView<'_>,
        applicable: &[&'r Rule],
        opts: CheckOptions,
        winners: &mut Vec<&'r Rule>,
        mut trace: Option<&mut Explanation>,
    ) -> Verdict<'r> {
        let analysis = shell::analyse(script);
        let mut worst: Option<Verdict<'r>> = None;
        let mut consider = |v: Verdict<'r>| {
            if worst.as_ref().is_none_or(|w| v.decision > w.decision) {
                worst = Some(v);
            }
        };

        // The whole script, as written, can be named by a rule too (to deny a pattern).
        let whole = script.trim();
        let whole_cmd = CommandView::new(None, whole);
        if let Some(v) =
            self.context_verdict(view, applicable, &whole_cmd, trace.as_deref_mut(), &[])
        {
            consider(v);
        }
        for cmd in &analysis.commands {
            let cv = CommandView::new(Some(cmd), &cmd.text);
            let v = match cmd.role {
                Role::Context => {
                    self.context_verdict(view, applicable, &cv, trace.as_deref_mut(), &cmd.via)
                }
                Role::Runs => Some(self.command_verdict(
                    view,
                    applicable,
                    cmd,
                    &cv,
                    opts,
                    winners,
                    trace.as_deref_mut(),
                )),
            };
            if let Some(v) = v {
                consider(v);
            }
        }
        if let Some(t) = trace {
            t.problems = analysis.problems.clone();
        }
        let mut verdict = worst.unwrap_or(Verdict {
            decision: Self::default_decision(opts),
            rule: None,
            reason: "no command in the script".into(),
        });
        let unanalysable = analysis.problems.first().cloned().or_else(|| {
            analysis
                .commands
                .is_empty()
                .then(|| "the script contains no command to check".to_string())
        });
        if let Some(problem) = unanalysable
            && (verdict.decision == Decision::Allow || analysis.commands.is_empty())
        {
            verdict = Verdict {
                decision: verdict.decision.strictest(Decision::AskUser),
                rule: None,
                reason: format!("the command cannot be fully analysed: {problem}"),
            };
        }
        verdict
    }

    /// A form of the script that does not itself run: only an explicit rule about its text can
    /// make it count, and only to deny or ask.
    fn context_verdict<'r>(
        &self,
        view: &CallView<'_>,
        applicable: &[&'r Rule],
        cv: &CommandView<'_>,
        trace: Option<&mut Explanation>,
        via: &[String],
    ) -> Option<Verdict<'r>> {
        let mut matched = applicable.iter().copied().filter(|r| {
            !r.is_guard() && r.matcher.has_condition() && r.matcher.conditions_hold(view, Some(cv))
        });
        let winner = matched.next();
        let verdict = winner
            .filter(|r| r.decision != Decision::Allow)
            .map(|r| Verdict {
                decision: r.decision,
                rule: Some(r),
                reason: format!("`{}` matches a rule that says {}", cv.text, r.decision),
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

    #[allow(clippy::too_many_arguments)]
    fn command_verdict<'r>(
        &self,
        view: &CallView<'_>,
        applicable: &[&'r Rule],
        cmd: &SimpleCommand,
        cv: &CommandView<'_>,
        opts: CheckOptions,
        winners: &mut Vec<&'r Rule>,
        trace: Option<&mut Explanation>,
    ) -> Verdict<'r> {
        let shown = if cmd.words.is_empty() {
            describe_bare(cmd)
        } else {
            format!("`{}`", cmd.text)
        };
        let mut v = if cmd.words.is_empty() {
            // Only assignments or redirections: nothing runs, so no rule is needed; what they
            // write and set is judged below.
            Verdict {
                decision: Decision::Allow,
                rule: None,
                reason: format!("{shown} runs no program"),
            }
        } else {
            match applicable
                .iter()
                .copied()
                .filter(|r| !r.is_guard())
                .find(|r| r.matcher.conditions_hold(view, Some(cv)))
            {
                Some(r) => {
                    winners.push(r);
                    Verdict {
                        decision: r.decision,
                        rule: Some(r),
                        reason: rule_reason(r, &cmd.text),
                    }
                }
                None => Verdict {
                    decision: Self::default_decision(opts),
                    rule: None,
                    reason: format!(
                        "no rule matches {shown}; the default for {} mode applies",
                        opts.mode
                    ),
                },
            }
        };
        if v.decision == Decision::Allow
            && !cmd.writes.is_empty()
            && !opts.mode.allows_redirection()
            && !v.rule.is_some_and(|r| r.allow_redirection)
        {
            v.decision = Decision::AskUser;
            v.reason = format!(
                "{shown} writes to `{}` through a redirection",
                cmd.writes.join("`, `")
            );
        }
        let guard = applicable
            .iter()
            .copied()
            .filter(|r| r.is_guard())
            .find(|r| r.matcher.conditions_hold(view, Some(cv)));
        // A guard at least as strict as the decision explains it better than a tool-wide rule.
        if let Some(g) = guard.filter(|g| {
            g.decision > v.decision || (g.decision == v.decision && v.decision == Decision::AskUser)
        }) {
            let why = shell::danger(cmd).unwrap_or_else(|| "is dangerous".into());
            v = Verdict {
                decision: g.decision,
                rule: Some(g),
                reason: format!("{shown} {why}"),
            };
        }
        if let Some(t) = trace {
            let mut matched: Vec<RuleSummary> = applicable
                .iter()
                .filter(|r| !cmd.words.is_empty() || r.is_guard())
                .filter(|r| r.matcher.conditions_hold(view, Some(cv)))
                .map(|r| RuleSummary::of(r))
                .collect();
            matched.sort_by(|a, b| b.effective_priority.total_cmp(&a.effective_priority));
            t.parts.push(PartTrace {
                command: Some(cmd.text.clone()),
                role: "runs",
                via: cmd.via.clone(),
                matched,
                decision: v.decision,
                reason: v.reason.clone(),
            });
        }
        v
    }

    fn apply_checkers<'r>(
        &'r self,
        call: &ToolCall,
        view: &CallView<'_>,
        winners: &[&'r Rule],
        verdict: &mut Verdict<'r>,
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
            .filter(|c| checker_applies(c, view, &whole))
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
                verdict.reason = format!("safety checker `{}`: {}", checker.name(), result.reason);
            }
            if verdict.decision == Decision::Deny {
                return;
            }
        }
    }
}

fn checker_applies(c: &CheckerRule, view: &CallView<'_>, whole: &CommandView<'_>) -> bool {
    c.matcher.applies_to(view) && c.matcher.conditions_hold(view, Some(whole))
}

fn rule_reason(r: &Rule, what: &str) -> String {
    let name = r
        .name
        .as_deref()
        .map(|n| format!(" \"{n}\""))
        .unwrap_or_default();
    format!(
        "`{what}` matches rule{name} ({}, priority {:.3}): {}",
        r.source.label,
        r.effective_priority(),
        r.decision
    )
}

fn describe_bare(cmd: &SimpleCommand) -> String {
    if !cmd.writes.is_empty() {
        format!("a redirection to `{}`", cmd.writes.join("`, `"))
    } else {
        format!("setting `{}`", cmd.assignments.join("`, `"))
    }
}
