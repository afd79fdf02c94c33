//! `cordon mcp` driven by a client cordon did not write: the official MCP Python SDK (the `mcp`
//! package from PyPI) runs tests/mcp/drive.py against the real binary. It lists the tools,
//! calls each, sees output stream as progress, cancels a long run and checks nothing is left,
//! and answers elicitations yes, no, and not at all.
//!
//! The Python with `mcp` installed comes from `CORDON_MCP_PYTHON` (.ci/run makes a venv and
//! sets it); without it the test skips, saying so, unless `CORDON_TEST_NO_SKIP` is set.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{Sandbox, cordon_bin, stderr, stdout};

fn python() -> Option<PathBuf> {
    let found = std::env::var_os("CORDON_MCP_PYTHON").map(PathBuf::from);
    if found.is_none() {
        let why = "mcp client test skipped: CORDON_MCP_PYTHON is not set (a python with the `mcp` \
                   package, e.g. `python3 -m venv /var/tmp/cordon-mcp-venv && \
                   /var/tmp/cordon-mcp-venv/bin/pip install mcp`; .ci/run does this)";
        assert!(
            std::env::var_os("CORDON_TEST_NO_SKIP").is_none(),
            "{why} (CORDON_TEST_NO_SKIP is set)"
        );
        eprintln!("{why}");
    }
    found
}

#[test]
fn a_real_mcp_client_lists_calls_streams_cancels_and_is_asked() {
    let Some(python) = python() else { return };
    let Some(sb) = Sandbox::new() else { return };
    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/drive.py");
    std::fs::write(sb.outside.join("secret"), "not for the agent").expect("write");
    let out = Command::new(&python)
        .arg(&driver)
        .arg(cordon_bin())
        .arg(&sb.ws)
        .arg(&sb.outside)
        // What the cancelled command sleeps, so the driver can look for what survived.
        .arg("987654")
        .current_dir(&sb.ws)
        // No user or workspace settings of the machine running the tests.
        .env("XDG_CONFIG_HOME", sb.outside.join("config"))
        .output()
        .expect("start the MCP client driver");
    println!("{}", stdout(&out));
    assert!(
        out.status.success(),
        "the MCP client's exchange with cordon mcp failed ({}):\n{}\n{}",
        out.status,
        stdout(&out),
        stderr(&out)
    );
    assert!(stdout(&out).contains("all checks passed"));
}

/// A client that goes away mid-run (its end of the pipe closes, no cancel sent) leaves no
/// sandbox behind: cordon cancels what runs, waits for it, and exits.
#[test]
fn the_end_of_input_stops_what_runs_and_cordon_exits() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    let Some(sb) = Sandbox::new() else { return };
    let mut child = Command::new(cordon_bin())
        .args(["mcp", "--mode", "yolo"])
        .current_dir(&sb.ws)
        .env("XDG_CONFIG_HOME", sb.outside.join("config"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start cordon mcp");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut send = |m: serde_json::Value| {
        writeln!(stdin, "{m}").expect("write to cordon mcp");
    };
    send(
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}}),
    );
    let mut line = String::new();
    stdout.read_line(&mut line).expect("initialize answered");
    assert!(line.contains("\"serverInfo\""), "{line}");
    send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "run_shell_command",
        "arguments": {"command": "echo ready; sleep 987656"},
        "_meta": {"progressToken": "p"}}}),
    );
    // The progress notification carrying `ready` says the command runs.
    line.clear();
    stdout.read_line(&mut line).expect("progress");
    assert!(
        line.contains("notifications/progress") && line.contains("ready"),
        "{line}"
    );
    let pgrep = || {
        let out = Command::new("pgrep")
            .args(["-f", "sleep 987656"])
            .output()
            .expect("pgrep");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(!pgrep().is_empty(), "the command should be running");
    // The client goes: its end of cordon's standard input closes.
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "cordon mcp did not exit after its input ended"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "{status}");
    assert_eq!(pgrep(), "", "processes survived the end of input");
}
