//! What Seatbelt denied during a run, read from macOS's log.
//!
//! The kernel logs each denial as a line of free text in the `eventMessage` of a log event,
//! `Sandbox: <process>(<pid>) deny(<n>) <operation> <target>`, followed by the rule's message
//! when the rule has one; cordon's rules all carry `cordon-<tag>`, so this run's denials are
//! the ones with its tag. The kernel folds repeats of one process's denial into
//! `<n> duplicate report(s) for Sandbox: …`. `log show --style ndjson` prints one JSON object
//! per event. The fixtures in `tests/fixtures/` are built from those documented shapes, not
//! recorded on a Mac (docs/PLATFORMS.md).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::paths::canonical;
use crate::Violation;

/// One denial the kernel reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDenial {
    /// The denied process's short name (the kernel's `p_comm`: at most 16 bytes).
    pub process: String,
    pub pid: u32,
    /// Seatbelt's operation: `file-read-data`, `file-write-create`, `network-outbound`, …
    pub operation: String,
    /// A path, a socket address or a service name; absent for operations without one.
    pub target: Option<String>,
    /// How many times it was denied (the kernel folds repeats into one report).
    pub count: u32,
    /// The denial as the kernel wrote it.
    pub text: String,
}

/// Paths not to report for commands matching a pattern (`ignore_violations` in settings):
/// denials a tool is known to cause and survive, which would only distract. Every backend
/// uses it, not only Seatbelt.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IgnoreViolations {
    /// `(command pattern, paths)`. The pattern matches the whole command line (words joined
    /// by spaces); `*` stands for any characters, and `*` alone for every command. A denial
    /// is dropped when its path is one of the paths or lies below one.
    pub rules: Vec<(String, Vec<PathBuf>)>,
}

impl IgnoreViolations {
    pub fn ignores(&self, command: &str, target: &str) -> bool {
        let target = Path::new(target);
        self.rules.iter().any(|(pattern, paths)| {
            wildcard_match(pattern, command)
                && paths.iter().any(|p| {
                    // On macOS `/tmp/x` in settings means what the kernel reports as
                    // `/private/tmp/x`; elsewhere the path is what it says.
                    target.starts_with(p) || canonical(p).is_ok_and(|p| target.starts_with(&p))
                })
        })
    }
}

/// Whether `text` as a whole matches `pattern`, where `*` is any run of characters.
fn wildcard_match(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// `log show` arguments that print this run's denials of the last `minutes` as NDJSON.
pub fn log_show_args(tag: &str, minutes: u64) -> Vec<String> {
    vec![
        "show".to_string(),
        "--style".to_string(),
        "ndjson".to_string(),
        "--last".to_string(),
        format!("{}m", minutes.max(1)),
        "--predicate".to_string(),
        format!("eventMessage CONTAINS \"cordon-{tag}\""),
    ]
}

/// Whether `message` carries `cordon-<tag>` as a whole word (so tag `ab` does not claim
/// `cordon-abc`'s denials).
fn has_tag(message: &str, tag: &str) -> bool {
    let needle = format!("cordon-{tag}");
    message.match_indices(&needle).any(|(i, _)| {
        message[i + needle.len()..]
            .chars()
            .next()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-'))
    })
}

/// The denial in one NDJSON line of `log show`/`log stream`, if it is one of this run's.
pub fn parse_line(line: &str, tag: &str) -> Option<LogDenial> {
    let event: serde_json::Value = serde_json::from_str(line.trim()).ok()?;
    let message = event.get("eventMessage")?.as_str()?;
    if !has_tag(message, tag) {
        return None;
    }
    message.lines().find_map(|l| parse_denial(l, tag))
}

/// `[<n> duplicate report(s) for ]Sandbox: <process>(<pid>) deny(<n>) <operation> [<target>]`.
fn parse_denial(line: &str, tag: &str) -> Option<LogDenial> {
    let line = line.trim();
    let (count, rest) = match line.split_once(" for Sandbox: ") {
        Some((head, rest)) => {
            let n: u32 = head.split_whitespace().next()?.parse().ok()?;
            (n.saturating_add(1), rest)
        }
        None => (1, line.strip_prefix("Sandbox: ")?),
    };
    // The process name may itself hold parentheses or spaces; the first `) deny(` after a
    // `(<digits>` ends it.
    for (at, _) in rest.match_indices(") deny(") {
        let head = &rest[..at];
        let Some(open) = head.rfind('(') else {
            continue;
        };
        let Ok(pid) = head[open + 1..].parse::<u32>() else {
            continue;
        };
        let after = &rest[at + ") deny(".len()..];
        let (_, after) = after.split_once(") ")?;
        let (operation, target) = match after.split_once(' ') {
            Some((op, target)) => (op, Some(target)),
            None => (after, None),
        };
        // Where the message follows on the same line, it is not part of the target.
        let target = target
            .map(|t| {
                let suffix = format!(" cordon-{tag}");
                t.strip_suffix(&suffix).unwrap_or(t).trim().to_string()
            })
            .filter(|t| !t.is_empty() && *t != format!("cordon-{tag}"));
        return Some(LogDenial {
            process: head[..open].to_string(),
            pid,
            operation: operation.to_string(),
            target,
            count,
            text: line.to_string(),
        });
    }
    None
}

/// Every denial of this run in `log` output, in order.
pub fn denials_in(output: &str, tag: &str) -> Vec<LogDenial> {
    output.lines().filter_map(|l| parse_line(l, tag)).collect()
}

/// Denials that say nothing about why a command failed, and why each is dropped.
fn is_noise(d: &LogDenial) -> bool {
    let target = d.target.as_deref().unwrap_or_default();
    // Apple's frameworks look up many system services as they start (analytics, diagnostics,
    // UI and power services) and carry on without them; the ones a command-line tool needs
    // are allowed by the profile.
    (d.operation == "mach-lookup" && target.starts_with("com.apple."))
        // Name lookups go to mDNSResponder. Without the host's network they are refused by
        // design, and the program that needed the name says so itself.
        || target.contains("mDNSResponder")
        // Runtimes probe kernel and CPU sysctls beyond the ones allowed, and fall back.
        || d.operation == "sysctl-read"
}

/// Most denials reported per run; a command that retries in a loop should not flood the
/// report.
const MAX_REPORTED: usize = 50;

/// This run's denials in `log` output as violations: noise dropped, `ignore` applied for the
/// command line `command`, repeats of the same operation on the same target reported once.
pub fn violations(
    output: &str,
    tag: &str,
    command: &str,
    ignore: &IgnoreViolations,
) -> Vec<Violation> {
    let mut out: Vec<Violation> = Vec::new();
    let mut seen: Vec<(String, Option<String>)> = Vec::new();
    for d in denials_in(output, tag) {
        if is_noise(&d)
            || d.target
                .as_deref()
                .is_some_and(|t| ignore.ignores(command, t))
        {
            continue;
        }
        let key = (d.operation.clone(), d.target.clone());
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        if out.len() == MAX_REPORTED {
            break;
        }
        let (operation, why) = describe(&d.operation);
        out.push(Violation {
            path: d
                .target
                .as_deref()
                .filter(|t| t.starts_with('/'))
                .map(PathBuf::from),
            // A network denial names an address, not a path.
            destination: d
                .target
                .as_deref()
                .filter(|t| !t.starts_with('/'))
                .map(str::to_string),
            operation,
            rule: format!("Seatbelt refused {}: {why}", d.operation),
            exact: true,
            action: None,
            evidence: Some(d.text),
        });
    }
    out
}

/// What a Seatbelt operation is in [`Violation`]'s words, and the rule that usually refuses it.
fn describe(operation: &str) -> (&'static str, &'static str) {
    if operation.starts_with("file-read") {
        (
            "read",
            "hidden by --deny-read, or outside what a strict profile reads",
        )
    } else if operation == "file-write-create" {
        (
            "create",
            "outside the writable places (the working directory, TMPDIR, --allow-write), or a protected or --deny-write path",
        )
    } else if operation == "file-write-unlink" {
        (
            "write",
            "removing or renaming a protected path or a directory holding one",
        )
    } else if operation.starts_with("file-write") {
        (
            "write",
            "outside the writable places (the working directory, TMPDIR, --allow-write), or a protected or --deny-write path",
        )
    } else if operation.starts_with("network") {
        (
            "network",
            "the run's network does not reach there (--network, --allow-unix-socket)",
        )
    } else if operation == "process-exec" {
        ("execute", "the profile does not allow running it")
    } else {
        ("system call", "not among what the profile allows")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(message: &str) -> String {
        serde_json::json!({
            "eventMessage": message,
            "processImagePath": "/kernel",
            "messageType": "Error",
        })
        .to_string()
    }

    #[test]
    fn denials_are_split_into_their_parts() {
        let cases = [
            (
                "Sandbox: touch(1234) deny(1) file-write-create /private/etc/x\ncordon-t1",
                (
                    "touch",
                    1234,
                    "file-write-create",
                    Some("/private/etc/x"),
                    1,
                ),
            ),
            (
                "Sandbox: cat(7) deny(1) file-read-data /Users/me/my dir/a (1).txt\ncordon-t1",
                (
                    "cat",
                    7,
                    "file-read-data",
                    Some("/Users/me/my dir/a (1).txt"),
                    1,
                ),
            ),
            (
                "3 duplicate reports for Sandbox: node(55) deny(1) network-outbound 1.2.3.4:443\ncordon-t1",
                ("node", 55, "network-outbound", Some("1.2.3.4:443"), 4),
            ),
            (
                "Sandbox: Code Helper (Plugin)(812) deny(1) mach-lookup com.example.x cordon-t1",
                (
                    "Code Helper (Plugin)",
                    812,
                    "mach-lookup",
                    Some("com.example.x"),
                    1,
                ),
            ),
            (
                "Sandbox: sh(9) deny(1) process-fork\ncordon-t1",
                ("sh", 9, "process-fork", None, 1),
            ),
        ];
        for (message, (process, pid, op, target, count)) in cases {
            let d = parse_line(&event(message), "t1").expect(message);
            assert_eq!(
                (
                    d.process.as_str(),
                    d.pid,
                    d.operation.as_str(),
                    d.target.as_deref(),
                    d.count
                ),
                (process, pid, op, target, count),
                "{message}"
            );
        }
    }

    #[test]
    fn only_this_runs_well_formed_denials_count() {
        for line in [
            event("Sandbox: touch(1) deny(1) file-write-create /x\ncordon-other"),
            event("Sandbox: touch(1) deny(1) file-write-create /x\ncordon-t1x"),
            event("Sandbox: touch(1) deny(1) file-write-create /x"),
            event("cordon-t1 mentioned, but no denial"),
            event("Sandbox: touch(x) deny(1) file-write-create /x\ncordon-t1"),
            "not json cordon-t1".to_string(),
            r#"{"eventMessage": 5}"#.to_string(),
            String::new(),
        ] {
            assert_eq!(parse_line(&line, "t1"), None, "{line}");
        }
    }

    #[test]
    fn wildcards_match_whole_command_lines() {
        for (pattern, text, want) in [
            ("*", "anything at all", true),
            ("npm *", "npm install", true),
            ("npm *", "pnpm install", false),
            ("git", "git", true),
            ("git", "git status", false),
            ("*test*", "cargo test -p x", true),
            ("a*b*c", "abc", true),
            ("a*b*c", "acb", false),
            ("ab*ba", "aba", false),
        ] {
            assert_eq!(wildcard_match(pattern, text), want, "{pattern} on {text}");
        }
    }

    #[test]
    fn ignored_paths_hold_below_themselves_and_are_canonical() {
        let ignore = IgnoreViolations {
            rules: vec![
                ("npm *".to_string(), vec![PathBuf::from("/tmp/npm-cache")]),
                ("*".to_string(), vec![PathBuf::from("/Users/me/.cache")]),
            ],
        };
        assert!(ignore.ignores("npm install", "/private/tmp/npm-cache/x"));
        assert!(!ignore.ignores("yarn install", "/private/tmp/npm-cache/x"));
        assert!(ignore.ignores("anything", "/Users/me/.cache"));
        assert!(!ignore.ignores("anything", "/Users/me/.cachex"));
    }
}
