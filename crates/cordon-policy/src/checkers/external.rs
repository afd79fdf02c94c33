//! Runs an external checker program: the call as JSON on stdin, a verdict as JSON on stdout.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{ExternalChecker, ExternalRunner, Verdict};
use crate::types::Decision;

/// A checker's answer larger than this is not a verdict.
const MAX_OUTPUT: u64 = 64 * 1024;

/// Spawns checker programs. Anything but a well-formed answer in time is a deny.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessRunner;

impl ExternalRunner for ProcessRunner {
    fn run(&self, checker: &ExternalChecker, input: &Value) -> Verdict {
        match run(checker, input) {
            Ok(v) => v,
            Err(why) => Verdict::deny(format!("external checker `{}` {why}", checker.name)),
        }
    }
}

fn run(checker: &ExternalChecker, input: &Value) -> Result<Verdict, String> {
    let Some(argv) = checker.command.as_ref().filter(|a| !a.is_empty()) else {
        return Err("has no `command` to run".into());
    };
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("could not start `{}`: {e}", argv[0]))?;

    let payload = serde_json::to_vec(input).map_err(|e| e.to_string())?;
    let mut stdin = child.stdin.take().ok_or("has no stdin")?;
    // Writing and reading on their own threads: a checker that does not read its input or
    // floods its output must not block us past the deadline.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&payload);
    });
    let mut stdout = child.stdout.take().ok_or("has no stdout")?;
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = (&mut stdout).take(MAX_OUTPUT + 1).read_to_end(&mut buf);
        buf
    });

    let deadline = Instant::now() + checker.timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "timed out after {} ms",
                    checker.timeout.as_millis()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(format!("could not be waited for: {e}")),
        }
    };
    let _ = writer.join();
    let out = reader
        .join()
        .map_err(|_| "output reader failed".to_string())?;
    if !status.success() {
        return Err(format!("exited with {status}"));
    }
    if out.len() as u64 > MAX_OUTPUT {
        return Err(format!("wrote more than {MAX_OUTPUT} bytes"));
    }

    #[derive(serde::Deserialize)]
    struct Answer {
        decision: String,
        #[serde(default)]
        reason: String,
    }
    let answer: Answer = serde_json::from_slice(&out).map_err(|e| {
        format!("answered with something other than {{\"decision\",\"reason\"}}: {e}")
    })?;
    let decision = Decision::parse(&answer.decision)
        .ok_or_else(|| format!("answered with an unknown decision `{}`", answer.decision))?;
    Ok(Verdict {
        decision,
        reason: answer.reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checker(script: &str, timeout_ms: u64) -> ExternalChecker {
        ExternalChecker {
            name: "t".into(),
            command: Some(vec!["sh".into(), "-c".into(), script.into()]),
            timeout: Duration::from_millis(timeout_ms),
        }
    }

    fn decide(script: &str, timeout_ms: u64) -> Decision {
        ProcessRunner
            .run(&checker(script, timeout_ms), &serde_json::json!({"x": 1}))
            .decision
    }

    #[test]
    fn answers_and_failures() {
        assert_eq!(
            decide(
                r#"cat >/dev/null; echo '{"decision":"allow","reason":"ok"}'"#,
                5000
            ),
            Decision::Allow
        );
        assert_eq!(
            decide(r#"echo '{"decision":"ask_user"}'"#, 5000),
            Decision::AskUser
        );
        assert_eq!(
            decide(r#"echo '{"decision":"allow"}'; exit 1"#, 5000),
            Decision::Deny
        );
        assert_eq!(decide("echo not json", 5000), Decision::Deny);
        assert_eq!(
            decide(r#"echo '{"decision":"maybe"}'"#, 5000),
            Decision::Deny
        );
        assert_eq!(decide("sleep 5", 100), Decision::Deny);
        let none = ExternalChecker {
            name: "x".into(),
            command: None,
            timeout: Duration::from_secs(1),
        };
        assert_eq!(
            ProcessRunner.run(&none, &serde_json::json!({})).decision,
            Decision::Deny
        );
    }
}
