//! Deciding a tool call: the policy engine with what the settings add to its answers (where a
//! command runs, `auto_allow_if_sandboxed`, each run's time limit), and a decider that follows
//! its files while a long-running cordon (`check --jsonl`, `exec`, `mcp`) lives.

mod control_files;
mod credential_reads;
mod placement;
mod watch;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cordon_policy::{Decision, Outcome, PolicyEngine, ProcessRunner, Tier, ToolCall};

use crate::config::Sources;
use crate::exec::Placement;
use crate::policy::PolicyConfig;
use crate::settings::{Settings, value};
pub use placement::Placer;
pub use watch::Watch;

/// The time limit of each command `exec`, `shell` and `mcp` run, from `--timeout` or
/// `limits.timeout`: given to each run, so that one with no child `cordon run` to read the
/// settings (one placed outside the sandbox, or in cordon's container) keeps it too.
pub fn each_run_timeout(s: &Settings) -> Option<Duration> {
    // Reading the settings held it to its range.
    value(s.timeout.clone()).and_then(|t| crate::bounds::timeout(t).ok())
}

/// A decider for a long-running cordon (`check --jsonl`, `exec`) that follows its files:
/// policy or settings edited since the last request are decided with, and while they do not
/// load nothing is decided at all (never with the stale ones).
///
/// The files are fingerprinted only when the kernel says one of them may have changed
/// ([`Watch`]); where it cannot say, before every request, as they always were.
#[derive(Debug)]
pub struct LiveDecider {
    policy: PolicyConfig,
    /// For the deciders of runs (see [`Decider::for_runs`]).
    sandbox: Option<Sources>,
    stamp: u64,
    /// The fingerprint of the files among those that lie where runs may write.
    written_stamp: u64,
    /// Shared, so that a long check (an external checker) holds no lock on the next.
    decider: anyhow::Result<Arc<Decider>>,
    watch: Watch,
    /// A change seen while runs were going, not yet applied: checked again on every request,
    /// with or without a new event, until it is.
    pending: bool,
}

impl LiveDecider {
    /// The first decider must load: a broken file at start is the caller's error.
    pub fn new(policy: PolicyConfig, sandbox: Option<Sources>) -> anyhow::Result<Self> {
        let files = files_of(&policy, sandbox.as_ref());
        // Watching starts before the first look, so that no edit falls between the two.
        let watch = Watch::new(&files);
        let mut live = LiveDecider {
            policy,
            sandbox,
            stamp: crate::settings::fingerprint(files.iter().map(PathBuf::as_path)),
            written_stamp: 0,
            decider: Err(anyhow::anyhow!("not loaded yet")),
            watch,
            pending: false,
        };
        live.written_stamp = live.written_fingerprint(&files);
        live.decider = Ok(Arc::new(live.load()?));
        Ok(live)
    }

    fn load(&self) -> anyhow::Result<Decider> {
        match &self.sandbox {
            Some(sandbox) => Decider::for_runs(&self.policy, sandbox),
            None => Decider::new(&self.policy),
        }
    }

    /// Those of `files` that lie where the runs may write (the working directory and
    /// `--allow-write` places), fingerprinted.
    fn written_fingerprint(&self, files: &[PathBuf]) -> u64 {
        let Some(sandbox) = &self.sandbox else {
            return 0;
        };
        let Ok(cwd) = std::env::current_dir() else {
            return 0;
        };
        let places: Vec<PathBuf> = std::iter::once(cwd.clone())
            .chain(sandbox.allow_write().iter().map(|p| cwd.join(p)))
            .collect();
        crate::settings::fingerprint(
            files
                .iter()
                .filter(|f| places.iter().any(|p| f.starts_with(p)))
                .map(PathBuf::as_path),
        )
    }

    /// The decider for the next request, reloaded if a file changed since the last one.
    pub fn current(&mut self) -> Result<&Arc<Decider>, String> {
        self.current_unless_running(false)
    }

    /// As [`Self::current`]; but while runs are going (`running`), a change to a file where
    /// they may write waits until they have ended. A sandbox keeps cordon's own files
    /// read-only, but where it cannot (the Landlock-only fallback puts them back only after
    /// the run), a run could otherwise plant the rules the next run is decided by.
    pub fn current_unless_running(&mut self, running: bool) -> Result<&Arc<Decider>, String> {
        if !self.pending && !self.watch.maybe_changed() {
            return self.decider.as_ref().map_err(|e| {
                format!("the policy or settings changed and no longer load; fix them: {e:#}")
            });
        }
        // A new watch before the look: directories may have appeared, and an edit after the
        // look is then queued for the next request.
        let files = files_of(&self.policy, self.sandbox.as_ref());
        self.watch = Watch::new(&files);
        let now = crate::settings::fingerprint(files.iter().map(PathBuf::as_path));
        self.pending = false;
        if now != self.stamp {
            let written = self.written_fingerprint(&files);
            if running && written != self.written_stamp {
                tracing::info!(
                    "policy or settings changed where runs may write: applied once they end"
                );
                self.pending = true;
                return self.decider.as_ref().map_err(|e| {
                    format!("the policy or settings changed and no longer load; fix them: {e:#}")
                });
            }
            self.stamp = now;
            self.written_stamp = written;
            self.decider = self.load().map(Arc::new);
            match &self.decider {
                Ok(_) => tracing::info!("policy or settings changed: reloaded"),
                Err(e) => tracing::warn!("policy or settings changed and do not load: {e:#}"),
            }
        }
        self.decider.as_ref().map_err(|e| {
            format!("the policy or settings changed and no longer load; fix them: {e:#}")
        })
    }
}

/// Every file and directory a decider is built from: the policy's and the settings' (whether
/// or not they exist), and a settings file given by name.
fn files_of(policy: &PolicyConfig, sandbox: Option<&Sources>) -> Vec<PathBuf> {
    policy
        .source_paths()
        .unwrap_or_default()
        .into_iter()
        .chain(
            sandbox
                .and_then(|s| s.settings_file.as_deref())
                .map(Path::to_path_buf),
        )
        .collect()
}

/// The policy engine with what the settings add to its answers: what `check`, `exec`,
/// `shell` and `mcp` decide with, and where the commands they allow run.
#[derive(Debug)]
pub struct Decider {
    pub engine: PolicyEngine,
    /// Where `sandbox.auto_allow_if_sandboxed = true` came from, if it is on.
    auto_allow: Option<String>,
    pub placer: Placer,
    /// `limits.timeout` (or `--timeout`), for runs that do not give their own.
    pub timeout: Option<std::time::Duration>,
    /// The credential stores a call may not name, and the home they are in.
    credentials: crate::credentials::Hidden,
    home: Option<PathBuf>,
}

impl Decider {
    /// With the settings the policy flags find (`cordon check`).
    pub fn new(policy: &PolicyConfig) -> anyhow::Result<Self> {
        let (engine, settings) = policy.engine_and_settings()?;
        Ok(Decider::with_settings(engine, &settings))
    }

    /// For the commands `exec`, `shell` and `mcp` run: placed by the settings their sandbox
    /// flags find (`--settings`, `--profile` and `--trust-project` included).
    pub fn for_runs(policy: &PolicyConfig, sandbox: &Sources) -> anyhow::Result<Self> {
        Decider::for_runs_with(policy, &sandbox.settings(policy.trust_workspace)?)
    }

    /// As [`Decider::for_runs`], with those settings read already.
    pub fn for_runs_with(
        policy: &PolicyConfig,
        settings: &crate::settings::Settings,
    ) -> anyhow::Result<Self> {
        Ok(Decider::with_settings(policy.engine()?, settings))
    }

    fn with_settings(engine: PolicyEngine, s: &crate::settings::Settings) -> Self {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let exposed = value(s.expose_credentials.clone()).unwrap_or_default();
        Decider {
            credentials: crate::credentials::Hidden::new(home.as_deref(), &exposed),
            home,
            engine,
            auto_allow: s
                .auto_allow_if_sandboxed
                .as_ref()
                .filter(|v| v.value)
                .map(|v| v.from.to_string()),
            placer: Placer::from_settings(s),
            timeout: each_run_timeout(s),
        }
    }

    /// The decision for a call whose command, if it runs one, runs in the sandbox unless the
    /// settings place it outside.
    pub fn check(&self, call: &ToolCall, opts: cordon_policy::CheckOptions) -> Outcome {
        let placement = self.engine.is_shell_tool(&call.name).then(|| {
            let command = call.args["command"].as_str().unwrap_or_default();
            self.placer
                .place(command, false)
                .unwrap_or(Placement::Sandbox)
        });
        self.check_placed(call, opts, placement.as_ref())
    }

    /// The decision on a shell command an agent or a person asks to run, and where it runs:
    /// placed by the settings (`asked_outside`: the run's own request to leave the sandbox),
    /// then decided as a `run_shell_command` call placed there. A request to leave that the
    /// settings do not allow is refused, whatever the policy would say.
    pub fn decide_command(
        &self,
        command: &str,
        asked_outside: bool,
        opts: cordon_policy::CheckOptions,
    ) -> (Outcome, Placement) {
        match self.placer.place(command, asked_outside) {
            Ok(placement) => {
                let call = ToolCall::new(
                    "run_shell_command",
                    serde_json::json!({ "command": command }),
                );
                (self.check_placed(&call, opts, Some(&placement)), placement)
            }
            Err(reason) => (
                Outcome {
                    decision: Decision::Deny,
                    rule: None,
                    reason,
                },
                Placement::default(),
            ),
        }
    }

    /// The decision for a call whose command runs as `placement` says.
    ///
    /// `sandbox.auto_allow_if_sandboxed`: a shell command that will run in the sandbox need
    /// not ask. Only the defaults' asks give way: an ask someone wrote into a policy holds,
    /// and so does every deny.
    pub fn check_placed(
        &self,
        call: &ToolCall,
        opts: cordon_policy::CheckOptions,
        placement: Option<&Placement>,
    ) -> Outcome {
        let o = self.engine.check(call, opts, &ProcessRunner);
        // Whatever rule allowed it (reading is allowed everywhere by default), and in every
        // mode: a credential read is a credential sent to the model. Said even where the
        // policy denies too, since this reason says how to allow it.
        let shell = self.engine.is_shell_tool(&call.name);
        let cwd = &self.engine.environment().cwd;
        if let Some(found) =
            credential_reads::named(&self.credentials, call, shell, cwd, self.home.as_deref())
        {
            return Outcome {
                decision: Decision::Deny,
                rule: None,
                reason: found.reason(),
            };
        }
        if let Some(reason) = control_files::refusal(call, shell) {
            return Outcome {
                decision: Decision::Deny,
                rule: None,
                reason,
            };
        }
        self.auto_allowed(call, placement, o)
    }

    /// `sandbox.auto_allow_if_sandboxed` applied to `o`.
    fn auto_allowed(
        &self,
        call: &ToolCall,
        placement: Option<&Placement>,
        mut o: Outcome,
    ) -> Outcome {
        let Some(from) = &self.auto_allow else {
            return o;
        };
        if placement != Some(&Placement::Sandbox) || !self.containable(call, &o) {
            return o;
        }
        o.decision = Decision::Allow;
        o.reason = format!(
            "{}; allowed without asking: it runs sandboxed (sandbox.auto_allow_if_sandboxed, {from})",
            o.reason
        );
        o
    }

    /// Whether the question `o` asks about `call` is one the sandbox answers, when the
    /// command runs in it: a shell command asked about by the defaults only. An ask someone
    /// wrote into a policy wants a person, and every deny holds.
    pub fn containable(&self, call: &ToolCall, o: &Outcome) -> bool {
        o.decision == Decision::AskUser
            && self.engine.is_shell_tool(&call.name)
            && o.rule.as_ref().is_none_or(|r| r.tier == Tier::Default)
    }
}
