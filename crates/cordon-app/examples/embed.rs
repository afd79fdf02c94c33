//! Embedding cordon in a Rust program, without the `cordon` command: decide an agent's tool
//! calls with the policy, and run commands in the sandbox with their output streamed, a
//! cancel, and a report of how each ended.
//!
//! ```sh
//! cargo run -p cordon-app --example embed
//! ```
//!
//! It works in a fresh directory under the system's temporary directory, and exits non-zero if
//! anything does not go as cordon promises (CI runs it).

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cordon_app::config::Sources;
use cordon_app::exec::{Event, Sink};
use cordon_app::policy::PolicyConfig;
use cordon_app::run::backend::BackendChoice;
use cordon_app::session::{Ran, Session};
use cordon_policy::{Decision, ToolCall};

fn main() -> anyhow::Result<()> {
    // First of all: cordon's sandbox helper and the child that runs each command are this
    // program started again; they take over here.
    cordon_app::child::run_if_child(|| {});

    // A workspace of its own, which is where commands may write.
    let workspace = tempfile::Builder::new()
        .prefix("cordon-embed-")
        .tempdir_in("/var/tmp")?;
    std::env::set_current_dir(workspace.path())?;
    let outside = tempfile::Builder::new()
        .prefix("cordon-embed-outside-")
        .tempdir_in("/var/tmp")?;
    let target = outside.path().join("written-from-the-sandbox");

    // The user's policy and settings as cordon finds them, on this OS's own sandbox.
    let session = Session::new(
        PolicyConfig::default(),
        Sources::default(),
        BackendChoice::default(),
    )?;

    // 1. Deciding a tool call, as an agent's harness would before running it.
    let push = ToolCall::new(
        "run_shell_command",
        serde_json::json!({ "command": "git push --force origin main" }),
    );
    let outcome = session
        .check(&push, session.options())
        .map_err(anyhow::Error::msg)?;
    println!(
        "git push --force: {:?} ({})",
        outcome.decision, outcome.reason
    );
    ensure(
        outcome.decision != Decision::Allow,
        "a force push must not be allowed",
    )?;

    // 2. Running commands, output streamed as it comes.
    let streamed = Arc::new(Mutex::new(Vec::<u8>::new()));
    let sink: Sink = {
        let streamed = Arc::clone(&streamed);
        Arc::new(move |event: Event<'_>| {
            if let Event::Output { data, .. } = event {
                let _ = std::io::stdout().write_all(data);
                streamed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend_from_slice(data);
            }
        })
    };
    let script = format!(
        "echo hello from the sandbox > inside.txt && cat inside.txt && echo escaped > {}",
        target.display()
    );
    // The default policy asks before a command writes; here the program's user says yes,
    // and the sandbox still holds the write outside the workspace.
    let approve = |verdict: &cordon_app::session::Verdict| {
        println!("asked: {}; answering yes", verdict.outcome.reason);
        true
    };
    let ran = session.run(&script, approve, Arc::clone(&sink))?;
    let Ran::Ended { verdict, result } = ran else {
        anyhow::bail!("the policy refused a plain echo: {ran:?}")
    };
    println!(
        "ran {} the sandbox: exit {}, blocked {}",
        if result.sandboxed { "in" } else { "outside" },
        result.exit_code,
        serde_json::to_string(&result.violations)?
    );
    ensure(
        verdict.outcome.decision != Decision::Deny,
        "echo is not denied",
    )?;
    ensure(
        String::from_utf8_lossy(&streamed.lock().unwrap_or_else(|e| e.into_inner()))
            .contains("hello from the sandbox"),
        "the output streamed",
    )?;
    ensure(
        workspace.path().join("inside.txt").is_file(),
        "the workspace is writable",
    )?;
    ensure(
        result.exit_code != 0 && !target.exists(),
        "a write outside the workspace fails and leaves the host untouched",
    )?;

    // 3. Cancelling a command that would run for a minute: decided, then started by the
    // program itself (had the verdict said ask, it would ask its user first).
    let verdict = session
        .decide("sleep 60", false, session.options(), false)
        .map_err(anyhow::Error::msg)?;
    ensure(
        verdict.outcome.decision != Decision::Deny,
        "sleep is not denied",
    )?;
    let run = session.start(&verdict.options("sleep 60"), sink)?;
    let control = run.control();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        control.cancel();
    });
    let result = run.wait();
    println!(
        "sleep 60: cancelled {} after {:.1} s",
        result.cancelled,
        result.duration.as_secs_f64()
    );
    ensure(
        result.cancelled && result.duration < Duration::from_secs(30),
        "a cancel ends the run",
    )?;
    println!("embedding works: decided, ran, streamed, confined and cancelled");
    Ok(())
}

fn ensure(holds: bool, what: &str) -> anyhow::Result<()> {
    if holds {
        Ok(())
    } else {
        anyhow::bail!("not as promised: {what}")
    }
}
