//! Warm runs: `exec` and `mcp` commands served by sandboxes built once per spec
//! (`cordon_sandbox::linux::WarmSandbox`), instead of a `cordon run` each.
//!
//! Each command is planned exactly as a cold run plans it (settings read again, protected
//! paths and git metadata found again, the spec built by the same code), and runs warm only
//! when that spec, less its command, environment and limits, is the one a kept sandbox was
//! built with. Any other spec gets a sandbox of its own, and anything a warm sandbox cannot
//! serve (a proxy, control groups, Unix sockets, a terminal, warnings to show) runs cold: the
//! caller is told `None` and starts a `cordon run` as always.

use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

use cordon_sandbox::linux::{WarmCommand, WarmRun, WarmSandbox, WarmSignals, warm_unsupported};
use cordon_sandbox::{ErrorScanner, RunGuard, SandboxSpec};

use super::{Launch, Prepared, conclude, needs_groups, prepare};
use crate::config::{RunConfig, Sources};

/// How many distinct specs keep a sandbox at once; the oldest goes first.
const KEPT: usize = 4;

/// The most of a command's error output kept to find what the sandbox blocked in it.
const SCANNED: usize = 256 * 1024;

/// The warm sandboxes of one session.
#[derive(Debug, Default)]
pub struct WarmPool {
    kept: Mutex<Vec<(String, Arc<Kept>)>>,
}

#[derive(Debug)]
struct Kept {
    /// Or why it could not start: specs like it then run cold without trying again.
    sandbox: Result<WarmSandbox, String>,
    /// What the run that started it made (cordon's state directories, read-only in its view),
    /// removed only after it.
    _made: cordon_sandbox::MadeForRun,
}

/// A command running warm.
pub struct Started {
    run: WarmRun,
    helper_pid: u32,
    config: RunConfig,
    launch: Launch,
    prepared: Prepared,
    guard: RunGuard,
    /// The number the sandbox's helper keeps a copy of `guard` by.
    armed: u64,
    kept: Arc<Kept>,
}

impl WarmPool {
    /// Starts `launch` (a command line of `exec` or `mcp`, in this process's working
    /// directory, reported to a file) warm with `stdio`, if it can run warm; `None` says to
    /// run it cold. The `stdio` descriptors are consumed either way only when it started.
    pub fn start(
        &self,
        sources: &Sources,
        launch: &Launch,
        stdio: impl FnOnce() -> std::io::Result<[OwnedFd; 3]>,
    ) -> Option<Started> {
        // As for a cold run, cordon's guard journal is held from before the plan until the
        // guard is in it; a journal that cannot be used is said by a cold run.
        let journal = super::journal::journal();
        let mut weaker = Vec::new();
        let held = super::journal::hold(journal.as_ref(), &mut weaker).ok()?;
        if !weaker.is_empty() {
            return None;
        }
        let (config, mut prepared) = planned(sources, launch)?;
        if warm_unsupported(&prepared.spec).is_some() {
            return None;
        }
        super::journal::recover(held.as_ref(), &prepared.spec.cwd, &prepared.spec.writable);
        let kept = self.sandbox_for(&prepared.spec, &mut prepared.made)?;
        let sandbox = kept.sandbox.as_ref().ok()?;
        let spec = &prepared.spec;
        let mut guard = super::guard_before(
            &config,
            spec,
            &prepared.own_settings,
            &prepared.git,
            prepared.git_limit,
        );
        super::journal::enter(held.as_ref(), &mut guard, &mut weaker);
        drop(held);
        // Past here a command that does not start takes its guard out of the journal again.
        let not_started = |guard: RunGuard| {
            let _ = guard.undo();
            None
        };
        if !weaker.is_empty() {
            return not_started(guard);
        }
        // Should this process die before it undoes what the command planted, the sandbox's
        // helper does. A guard it cannot be handed runs cold, where a watcher of its own does.
        let armed = match sandbox.arm(&guard) {
            Ok(id) => id,
            Err(e) => {
                tracing::debug!("warm sandbox cannot keep the guard, running cold: {e}");
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
                ) {
                    self.forget(&kept);
                }
                return not_started(guard);
            }
        };
        let mut limits = spec.limits;
        // The sandbox's commands share its user namespace, where RLIMIT_NPROC counts for them
        // all together (an ordinary user's; root's is not applied). Where each command's own
        // pid_max holds its share, the rlimit is the session's whole, so that commands side
        // by side do not take from each other's shares.
        if let (Some(_), Some(session)) = (limits.pid_max, launch.session) {
            limits.max_processes = limits.max_processes.map(|n| n.max(session.max_processes));
        }
        let command = WarmCommand {
            argv: spec.argv.clone(),
            env: spec.env.clone(),
            limits,
        };
        let Ok(stdio) = stdio() else {
            sandbox.disarm(armed);
            return not_started(guard);
        };
        let run = match sandbox.run(&command, stdio) {
            Ok(run) => run,
            Err(e) => {
                sandbox.disarm(armed);
                // Gone (killed from outside?): the next run with this spec starts another.
                tracing::debug!("warm sandbox lost, running cold: {e}");
                self.forget(&kept);
                return not_started(guard);
            }
        };
        Some(Started {
            run,
            helper_pid: sandbox.helper_pid(),
            config,
            launch: launch.clone(),
            prepared,
            guard,
            armed,
            kept,
        })
    }

    /// Lets go of every kept sandbox.
    pub fn clear(&self) {
        self.kept.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Lets go of one kept sandbox.
    fn forget(&self, which: &Arc<Kept>) {
        self.kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(_, k)| !Arc::ptr_eq(k, which));
    }

    /// The kept sandbox for `spec`, started if there is none (then keeping `made`, what the
    /// run planned for it made, for as long as it lives).
    fn sandbox_for(
        &self,
        spec: &SandboxSpec,
        made: &mut cordon_sandbox::MadeForRun,
    ) -> Option<Arc<Kept>> {
        let key = key(spec);
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = kept.iter().position(|(k, _)| *k == key) {
            // The most recently used last, so that the oldest goes first.
            let entry = kept.remove(i);
            // A sandbox whose view the host has changed under it is let go (its running
            // commands keep it until they end) and built again.
            let stale = entry.1.sandbox.as_ref().is_ok_and(|s| !s.is_current(spec));
            if !stale {
                let found = Arc::clone(&entry.1);
                kept.push(entry);
                return Some(found);
            }
            tracing::debug!("the host changed a path the warm sandbox covers; building it again");
        }
        // Started with the lock held: runs with the same spec wait for this one sandbox
        // rather than each starting their own.
        let sandbox = WarmSandbox::start(spec).map_err(|e| e.to_string());
        if let Err(why) = &sandbox {
            tracing::debug!("no warm sandbox, running cold: {why}");
        }
        let entry = Arc::new(Kept {
            sandbox,
            _made: std::mem::take(made),
        });
        kept.push((key, Arc::clone(&entry)));
        if kept.len() > KEPT {
            // Its running commands keep it until they end.
            kept.remove(0);
        }
        Some(entry)
    }
}

/// The settings and plan for `launch`, as a cold run would make them, if nothing in them
/// needs a cold run.
fn planned(sources: &Sources, launch: &Launch) -> Option<(RunConfig, Prepared)> {
    let mut config = sources.resolve().ok()?;
    let mut backend = launch.backend.clone();
    // Whatever a cold run would warn about, it says on the command's error output.
    if !config.left_out.is_empty()
        || backend.settle(&config).is_err()
        || !backend.runs_linux()
        || !launch.publish.is_empty()
        || launch.ask_domains.is_some()
        || config.net.any_allowed()
    {
        return None;
    }
    if let Some(t) = launch.timeout {
        config.timeout = Some(t);
    }
    if needs_groups(&config, launch) {
        return None;
    }
    let plan = crate::plan::plan(&config).ok()?;
    if !plan.warnings.is_empty() {
        return None;
    }
    let prepared = prepare(&config, launch, plan).ok()?;
    if !prepared.warnings.is_empty() {
        return None;
    }
    Some((config, prepared))
}

/// What tells kept sandboxes apart: the spec less what each command brings, its lists in one
/// order.
fn key(spec: &SandboxSpec) -> String {
    let mut spec = spec.clone();
    spec.argv.clear();
    spec.env.clear();
    spec.limits = Default::default();
    for list in [
        &mut spec.writable,
        &mut spec.read_only,
        &mut spec.hidden,
        &mut spec.reopened,
    ] {
        list.sort();
        list.dedup();
    }
    serde_json::to_string(&spec).unwrap_or_default()
}

impl std::fmt::Debug for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Started")
            .field("helper_pid", &self.helper_pid)
            .field("program", &self.launch.program)
            .finish_non_exhaustive()
    }
}

impl Started {
    /// The process to name as the run's (the sandbox's helper, shared with other runs).
    pub fn pid(&self) -> u32 {
        self.helper_pid
    }

    pub fn signals(&self) -> std::io::Result<WarmSignals> {
        self.run.signals()
    }

    /// Waits for the command and what it left, undoes what it planted, and makes its report
    /// as a cold run would. `errors` gives the command's error output once it has all been
    /// read, as far as it was kept. Returns the run's exit status and report.
    pub fn finish(self, errors: impl FnOnce() -> Vec<u8>) -> (u8, serde_json::Value) {
        let mut result = self.run.wait();
        let errors = errors();
        if let Ok(outcome) = result.as_mut() {
            let mut scanner = ErrorScanner::new(&self.prepared.spec);
            scanner.feed(&errors);
            outcome.inferred = scanner.finish();
        }
        let undone = self.guard.undo();
        if let Ok(sandbox) = &self.kept.sandbox {
            sandbox.disarm(self.armed);
        }
        let p = &self.prepared;
        let before = (
            &p.git,
            p.git_limit,
            p.unmade.as_slice(),
            p.env_withheld.as_slice(),
        );
        conclude(
            &self.config,
            &self.launch,
            before,
            result,
            Vec::new(),
            undone,
        )
        .unwrap_or_else(|e| {
            let code = cordon_sandbox::exit::SETUP_FAILED;
            let report = serde_json::json!({ "exit_code": code, "setup_error": e.to_string() });
            (code, report)
        })
    }
}

/// A command's error output, as much as [`Started::finish`] scans.
#[derive(Debug, Default)]
pub struct ErrorsKept(Mutex<Vec<u8>>);

impl ErrorsKept {
    pub fn push(&self, bytes: &[u8]) {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let room = SCANNED.saturating_sub(kept.len());
        kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    pub fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
