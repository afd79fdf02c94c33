//! A session: the pipeline every front end runs a command through, and the API for programs
//! that embed cordon.
//!
//! ```text
//!   command ──▶ decide ──▶ place ──▶ ask? ──▶ run ──▶ report
//!              (policy,   (settings:          (a child cordon: the sandbox
//!               live)      sandbox or          on the settled backend, its
//!                          outside)            limits, output streamed)
//! ```
//!
//! [`Session::decide`] gives the policy's [`Verdict`] on a command and where it would run;
//! the front end asks whoever it asks (an agent over JSON lines, an MCP client, a person at a
//! terminal) when the verdict says so; [`Session::start`] runs it. [`Session::run`] does all
//! of it for a caller whose questions are a function.
//!
//! The policy and settings files are followed while the session lives: a file edited between
//! two commands applies to the second, and while the files do not load nothing is decided.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cordon_policy::{CheckOptions, Decision, Outcome, ToolCall};

use crate::config::{SessionLimits, Sources};
use crate::decide::{Decider, LiveDecider};
use crate::exec::{Placement, Run, RunOptions, RunResult, Runner, Sink};
use crate::policy::PolicyConfig;
use crate::run::backend::BackendChoice;

/// Deciding and running commands with one policy and one set of sandbox settings.
#[derive(Debug)]
pub struct Session {
    live: Mutex<LiveDecider>,
    runner: Runner,
    options: CheckOptions,
}

/// The decision on one command.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// Allow, deny or ask, with the rule and the reason.
    pub outcome: Outcome,
    /// In the sandbox, or outside it because the settings say so.
    pub placement: Placement,
    /// The settings' time limit for the run, as they were when it was decided.
    pub timeout: Option<Duration>,
}

impl Verdict {
    /// How `command` runs under this verdict: where it was placed, with its time limit;
    /// output on pipes, input empty (change the fields for more).
    pub fn options(&self, command: &str) -> RunOptions {
        RunOptions {
            timeout: self.timeout,
            placement: self.placement.clone(),
            ..RunOptions::new(command)
        }
    }
}

/// How [`Session::run`] went.
#[derive(Debug)]
pub enum Ran {
    /// The policy denied it, or asked and was told no: nothing ran.
    Refused { verdict: Verdict, reason: String },
    /// It ran; how it ended.
    Ended { verdict: Verdict, result: RunResult },
}

impl Session {
    /// A session deciding with `policy`, running with the settings `sources` find on
    /// `backend`. Fails when the policy or settings do not load.
    pub fn new(
        policy: PolicyConfig,
        sources: Sources,
        backend: BackendChoice,
    ) -> anyhow::Result<Session> {
        let options = policy.options();
        // Every command is planned and checked with a search of its writable places for git
        // metadata; for many commands in one tree, let the kernel tell what changed between.
        cordon_sandbox::gitmeta::watch_changes();
        // Read once: every run's share of the session's processes follows from them, so they
        // cannot change while runs hold their shares.
        let limits = SessionLimits::from_config(&sources.resolve()?);
        let runner = Runner::new(sources.clone(), backend, limits)
            .map_err(|e| anyhow::anyhow!("cannot make a directory for run reports: {e}"))?;
        Ok(Session {
            live: Mutex::new(LiveDecider::new(policy, Some(sources))?),
            runner,
            options,
        })
    }

    /// Runs one command at a time (`cordon shell`): that one may have all of the session's
    /// processes.
    pub fn one_at_a_time(mut self) -> Session {
        self.runner.one_at_a_time();
        self
    }

    /// How many commands run at once, and the processes they may have together, as read
    /// when the session started.
    pub fn limits(&self) -> SessionLimits {
        self.runner.limits()
    }

    /// The policy options the session was made with (mode, interactivity).
    pub fn options(&self) -> CheckOptions {
        self.options
    }

    /// The decider as the files are now, or why there is none (they do not load). While
    /// commands run (`running`), an edit where they may write waits until they have ended
    /// (see [`LiveDecider::current_unless_running`]).
    pub fn decider(&self, running: bool) -> Result<Arc<Decider>, String> {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.current_unless_running(running).cloned()
    }

    /// The decision on any tool call (a shell command is placed as it would run).
    pub fn check(&self, call: &ToolCall, options: CheckOptions) -> Result<Outcome, String> {
        Ok(self.decider(false)?.check(call, options))
    }

    /// The decision on a shell command, and where it runs (`asked_outside`: the caller asks to
    /// leave the sandbox, which only the settings can allow).
    pub fn decide(
        &self,
        command: &str,
        asked_outside: bool,
        options: CheckOptions,
        running: bool,
    ) -> Result<Verdict, String> {
        let d = self.decider(running)?;
        let (outcome, placement) = d.decide_command(command, asked_outside, options);
        Ok(Verdict {
            outcome,
            placement,
            timeout: d.timeout,
        })
    }

    /// Starts a command the caller has decided on (asking where the verdict said so).
    pub fn start(&self, opts: &RunOptions, sink: Sink) -> std::io::Result<Run> {
        self.runner.start(opts, sink)
    }

    /// Lets go of the sandboxes kept for runs and what was made for them, once no run is left
    /// (see [`Runner::end`]).
    pub fn end(&self) {
        self.runner.end();
    }

    /// Decides `command`, asks `ask` when the policy says to ask, and runs it if allowed,
    /// with output to `sink`; waits for it to end.
    pub fn run(
        &self,
        command: &str,
        ask: impl FnOnce(&Verdict) -> bool,
        sink: Sink,
    ) -> anyhow::Result<Ran> {
        let verdict = self
            .decide(command, false, self.options, false)
            .map_err(anyhow::Error::msg)?;
        match verdict.outcome.decision {
            Decision::Deny => {
                let reason = verdict.outcome.reason.clone();
                return Ok(Ran::Refused { verdict, reason });
            }
            Decision::AskUser if !ask(&verdict) => {
                return Ok(Ran::Refused {
                    verdict,
                    reason: "the user said no".into(),
                });
            }
            Decision::AskUser | Decision::Allow => {}
        }
        let run = self.start(&verdict.options(command), sink)?;
        Ok(Ran::Ended {
            result: run.wait(),
            verdict,
        })
    }
}
