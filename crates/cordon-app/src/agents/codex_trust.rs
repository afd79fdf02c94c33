//! Whether Codex runs cordon's hook yet. Codex runs a hook only once the person has trusted
//! it (in `/hooks`), and keeps that trust as a hash of the hook in its own config; until then
//! its `apply_patch` and shell calls go unchecked. What counts as trusted is Codex's to say, so
//! cordon asks Codex: `codex app-server`'s `hooks/list` gives each hook's trust status.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

/// What Codex says of cordon's hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookTrust {
    /// Codex runs it.
    Trusted,
    /// Configured, and not run until trusted: Codex's status (`untrusted`, or `modified`
    /// where it changed since it was trusted).
    NotTrusted(String),
    /// No hook of cordon's in the settings Codex reads here.
    Absent,
    /// Codex could not be asked.
    Unknown(String),
}

impl HookTrust {
    /// What the person does about anything but [`HookTrust::Trusted`].
    pub const FIX: &str = "start codex, open /hooks, and trust cordon's hook (`cordon-hook codex` or `cordon hook codex`)";

    /// One line for people.
    pub fn said(&self) -> String {
        match self {
            HookTrust::Trusted => "Codex runs cordon's hook (trusted in /hooks)".into(),
            HookTrust::NotTrusted(status) => format!(
                "Codex does not run cordon's hook yet ({status}): until it is trusted, Codex's shell and apply_patch calls are not checked by cordon"
            ),
            HookTrust::Absent => {
                "Codex's settings here hold no hook of cordon's (cordon setup codex adds it)".into()
            }
            HookTrust::Unknown(why) => {
                format!("cannot ask Codex whether it runs cordon's hook ({why})")
            }
        }
    }
}

/// How long Codex may take to answer.
const WAIT: Duration = Duration::from_secs(20);

/// `codex` on `PATH`.
pub fn find_codex() -> Option<PathBuf> {
    crate::find_program("codex")
}

/// Asks `codex` (its program) what it says of cordon's hook in `cwd`, with this process's
/// `HOME` and `CODEX_HOME`.
pub fn cordons_hook(codex: &Path, cwd: &Path) -> HookTrust {
    match list_hooks(codex, cwd) {
        Ok(hooks) => of_cordon(&hooks),
        Err(why) => HookTrust::Unknown(why),
    }
}

/// cordon's hook among `hooks` (`hooks/list`'s entries), and its status.
fn of_cordon(hooks: &[Value]) -> HookTrust {
    let ours = hooks.iter().find(|h| {
        h["command"]
            .as_str()
            .is_some_and(|c| super::is_cordons_hook(c, super::Agent::Codex))
    });
    match ours {
        None => HookTrust::Absent,
        Some(h) => match h["trustStatus"].as_str() {
            Some("trusted") => HookTrust::Trusted,
            Some(other) => HookTrust::NotTrusted(other.to_string()),
            None => HookTrust::Unknown("Codex gave no trust status".into()),
        },
    }
}

/// Every hook Codex finds for `cwd`, asked over `codex app-server`'s JSON-RPC on its standard
/// input and output.
fn list_hooks(codex: &Path, cwd: &Path) -> Result<Vec<Value>, String> {
    let mut child = Command::new(codex)
        .arg("app-server")
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{}: {e}", codex.display()))?;
    let mut input = child.stdin.take().ok_or("no standard input")?;
    let output = child.stdout.take().ok_or("no standard output")?;
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"clientInfo": {"name": "cordon", "version": env!("CARGO_PKG_VERSION")}}}),
        json!({"jsonrpc": "2.0", "method": "initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {}}),
    ];
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(output).lines() {
            let Ok(line) = line else { break };
            let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if msg["id"] == json!(2) {
                let _ = tx.send(msg);
                break;
            }
        }
    });
    let written = requests
        .iter()
        .try_for_each(|r| writeln!(input, "{r}").and_then(|()| input.flush()));
    let answer = match written {
        Err(e) => Err(format!("cannot talk to codex app-server: {e}")),
        Ok(()) => rx
            .recv_timeout(WAIT)
            .map_err(|_| format!("codex app-server did not answer within {WAIT:?}")),
    };
    drop(input);
    let _ = child.kill();
    let _ = child.wait();
    let answer = answer?;
    if let Some(e) = answer.get("error") {
        return Err(format!("codex app-server: {e}"));
    }
    Ok(answer["result"]["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["hooks"].as_array())
        .flatten()
        .cloned()
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cordons_hook_is_known_by_its_program_and_arguments() {
        let hook = |command: &str, status: &str| json!({"command": command, "trustStatus": status});
        assert_eq!(
            of_cordon(&[hook("/x/cordon hook codex", "trusted")]),
            HookTrust::Trusted
        );
        assert_eq!(
            of_cordon(&[
                hook("/x/notcordon hook codex", "trusted"),
                hook("/x/cordon hook codex", "modified")
            ]),
            HookTrust::NotTrusted("modified".into())
        );
        assert_eq!(
            of_cordon(&[hook("/x/cordon-hook codex", "trusted")]),
            HookTrust::Trusted
        );
        assert_eq!(
            of_cordon(&[hook("/x/cordon mcp", "trusted")]),
            HookTrust::Absent
        );
        assert_eq!(
            of_cordon(&[
                hook("/x/cordon-hook claude-code", "trusted"),
                hook("/x/cordon hook codexx", "trusted"),
                hook("/x/cordon codex", "trusted"),
            ]),
            HookTrust::Absent
        );
    }
}
