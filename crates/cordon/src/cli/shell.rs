//! `cordon shell`: a person's interactive shell in which every line is checked by the policy
//! and runs in the sandbox.
//!
//! Each line runs with bash, the grammar that decided it, in a fresh sandbox whose working
//! directory is the shell's, on the person's own terminal. `cordon run` runs in a process
//! group of its own, which the terminal is lent to while it runs (as a shell makes a job the
//! foreground one): the command reads the keyboard, Ctrl-C reaches it, and the terminal, with
//! the modes it had, comes back to this shell when the run ends.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use clap::Args;
use cordon_policy::Decision;
use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use super::PolicyFlags;
use super::flags::SandboxFlags;
use crate::exit;
use cordon_app::exec::{Control, Io, Placement, RunOptions};
use cordon_app::session::Session;

#[derive(Debug, Args)]
pub struct ShellArgs {
    #[command(flatten)]
    policy: PolicyFlags,
    #[command(flatten)]
    sandbox: SandboxFlags,
    /// Where the history is kept [default: $XDG_STATE_HOME/cordon/shell_history, or
    /// ~/.local/state/cordon/shell_history].
    #[arg(long, value_name = "FILE")]
    history: Option<PathBuf>,
}

fn default_history() -> Option<PathBuf> {
    Some(cordon_app::user_state_dir()?.join("shell_history"))
}

pub fn run(args: ShellArgs) -> anyhow::Result<u8> {
    let sources = args.sandbox.sources()?;
    // For the prompt: each line's run reads the settings again as it starts.
    let config = sources.resolve()?;
    let session =
        Arc::new(Session::new(args.policy.config(), sources, Default::default())?.one_at_a_time());
    let options = session.options();
    let decider = session.decider(false).map_err(anyhow::Error::msg)?;
    let (outside, always_sandboxed) = (
        decider.placer.place("", false),
        decider.placer.always_sandboxed(),
    );
    let network = if config.host_network {
        "host network"
    } else if config.net.any_allowed() {
        "allowed domains only"
    } else {
        "no network"
    };
    // The prompt tells whether lines run in the sandbox; when the settings switch it off
    // (checked with an empty line, which no exclusion matches) it says so plainly.
    let sandbox = match outside {
        Ok(Placement::Outside { .. }) => "NO sandbox".to_string(),
        _ if !always_sandboxed => "sandbox, some commands outside".to_string(),
        _ => format!("sandbox, {network}"),
    };
    let prompt = format!("cordon [{} | {sandbox}] $ ", options.mode.as_str());

    let mut editor = DefaultEditor::new().context("cannot set up line editing")?;
    // Ctrl-C while a command runs that could not be lent the terminal (standard input is not
    // one, or this shell is not in its foreground): the shell hears it and cancels the command.
    // Registered after the editor, which takes SIGINT for itself when made, so that this
    // handler comes first and calls the editor's.
    let current: Arc<Mutex<Option<Control>>> = Arc::new(Mutex::new(None));
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGHUP, SIGTERM])
        .context("cannot take over Ctrl-C")?;
    {
        let current = Arc::clone(&current);
        let session = Arc::clone(&session);
        std::thread::spawn(move || {
            for signal in signals.forever() {
                let running = current.lock().unwrap_or_else(|e| e.into_inner()).clone();
                if let Some(c) = &running {
                    c.cancel();
                }
                // The terminal went away or someone ended the shell: the command goes too
                // (its process group hears nothing from the terminal).
                if signal != SIGINT {
                    if let Some(c) = running {
                        c.wait_until_ended();
                    }
                    session.end();
                    std::process::exit(128 + signal);
                }
            }
        });
    }
    let history = args.history.clone().or_else(default_history);
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    eprintln!(
        "cordon shell: each line is checked by the policy ({} mode) and runs in the sandbox{}; `exit` leaves",
        options.mode.as_str(),
        if always_sandboxed {
            ""
        } else {
            " unless the settings place it outside (cordon says so when they do)"
        }
    );
    loop {
        let line = match editor.readline(&prompt) {
            Ok(line) => line,
            // Ctrl-C at the prompt clears the line, as in other shells.
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e).context("cannot read a line"),
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let _ = editor.add_history_entry(line);
        if let Some(h) = &history {
            if let Some(dir) = h.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = editor.save_history(h);
        }
        if line == "exit" {
            break;
        }
        let verdict = match session.decide(line, false, options, false) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("cordon: not run: {e}");
                continue;
            }
        };
        let outcome = &verdict.outcome;
        if let Placement::Outside { why } = &verdict.placement {
            eprintln!("cordon: this runs outside the sandbox: {why}");
        }
        match outcome.decision {
            Decision::Allow => {}
            Decision::Deny => {
                eprintln!("cordon: denied: {}", outcome.reason);
                continue;
            }
            Decision::AskUser => {
                eprintln!("cordon: the policy asks: {}", outcome.reason);
                match editor.readline("run it? [y/N] ") {
                    Ok(a) if matches!(a.trim(), "y" | "Y" | "yes") => {}
                    _ => {
                        eprintln!("cordon: not run");
                        continue;
                    }
                }
            }
        }
        let opts = RunOptions {
            io: Io::Inherit,
            blocked_on_stderr: true,
            ..verdict.options(line)
        };
        let run = match session.start(&opts, Arc::new(|_| {})) {
            Ok(run) => run,
            Err(e) => {
                eprintln!("cordon: cannot start `cordon run`: {e}");
                continue;
            }
        };
        *current.lock().unwrap_or_else(|e| e.into_inner()) = Some(run.control());
        let result = run.wait();
        current.lock().unwrap_or_else(|e| e.into_inner()).take();
        if result.cancelled {
            eprintln!("cordon: cancelled");
        } else if result.timed_out {
            eprintln!("cordon: timed out");
        } else if result.signal == Some(SIGINT) {
            eprintln!("cordon: interrupted");
        } else if result.exit_code != 0 {
            eprintln!("cordon: exit {}", result.exit_code);
        }
    }
    Ok(exit::OK)
}
