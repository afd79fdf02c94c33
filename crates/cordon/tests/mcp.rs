//! `cordon mcp` driven by a client cordon did not write: the official MCP Python SDK (the `mcp`
//! package from PyPI) runs tests/mcp/drive.py against the real binary. It lists the tools,
//! calls each, sees output stream as progress, cancels a long run and checks nothing is left,
//! and answers elicitations yes, no, and not at all.
//!
//! The Python with `mcp` installed comes from `CORDON_MCP_PYTHON` (.ci/run makes a venv and
//! sets it); without it the test skips, saying so, unless `CORDON_TEST_NO_SKIP` is set.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::engines::{Eng, IMAGE};
use common::skip;
use common::{Mode, Sandbox, cordon_bin, stderr, stdout};

fn python() -> PathBuf {
    std::env::var_os("CORDON_MCP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            skip(
                "CORDON_MCP_PYTHON is not set (a python with the `mcp` package, e.g. \
                 `python3 -m venv /var/tmp/cordon-mcp-venv && \
                 /var/tmp/cordon-mcp-venv/bin/pip install mcp`; .ci/run does this)",
            )
        })
}

fn a_real_mcp_client_lists_calls_streams_cancels_and_is_asked() {
    let python = python();
    let sb = Sandbox::new();
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
fn the_end_of_input_stops_what_runs_and_cordon_exits() {
    let sb = Sandbox::new();
    let mut cmd = Command::new(cordon_bin());
    cmd.args(["mcp", "--mode", "yolo"])
        .current_dir(&sb.ws)
        .env("XDG_CONFIG_HOME", sb.outside.join("config"));
    let (mut child, stdin) = serving_a_long_command(cmd, "987656");
    let pgrep = || pgrep("sleep 987656");
    assert!(!pgrep().is_empty(), "the command should be running");
    // The client goes: its end of cordon's standard input closes.
    drop(stdin);
    let status = exited_within(&mut child, "cordon mcp did not exit after its input ended");
    assert!(status.success(), "{status}");
    assert_eq!(pgrep(), "", "processes survived the end of input");
}

/// SIGTERM ends `cordon mcp` as the end of its input does, in a warm sandbox: the running
/// command is stopped, what it planted undone, and nothing of the server's is left in TMPDIR
/// (the directory its run reports go to).
fn sigterm_stops_what_runs_and_leaves_nothing_behind() {
    let sb = Sandbox::with_mode(Mode::Warm);
    let tmp = sb.outside.join("tmp");
    std::fs::create_dir(&tmp).expect("mkdir TMPDIR");
    let mut cmd = Command::new(cordon_bin());
    cmd.args(["mcp", "--mode", "yolo"])
        .current_dir(&sb.ws)
        .env("XDG_CONFIG_HOME", sb.outside.join("config"))
        .env("TMPDIR", &tmp);
    let (mut child, _stdin) = serving_a_long_command(cmd, "987657 & echo evil > .bashrc; wait");
    let planted = sb.ws.join(".bashrc");
    assert!(
        within_a_minute(|| planted.exists()),
        "the command did not plant .bashrc"
    );
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(killed.expect("kill").success());
    let status = exited_within(&mut child, "cordon mcp did not exit on SIGTERM");
    assert_eq!(status.code(), Some(128 + 15), "{status}");
    assert_eq!(pgrep("sleep 987657"), "", "the command survived SIGTERM");
    assert!(!planted.exists(), "what the command planted stayed");
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .expect("read TMPDIR")
        .map(|e| e.expect("entry").path())
        .collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
}

/// Whether `done` holds within a minute, looked at every 20 ms.
fn within_a_minute(done: impl Fn() -> bool) -> bool {
    let give_up = Instant::now() + Duration::from_secs(60);
    while !done() && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
}

/// `child`'s status once it has exited, within a minute; past that it is killed and the test
/// fails saying `what`, rather than hang the whole run.
fn exited_within(child: &mut std::process::Child, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(s) = child.try_wait().expect("wait") {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A raw client's first two messages, declaring that it can answer questions.
const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// Runs `cmd` as an MCP server that gets `lines` and then the end of its input.
fn serve_lines(cmd: Command, lines: &[&str]) -> std::process::Output {
    serve_until_answered(cmd, lines, &[])
}

/// Serves `lines` to `cmd` as a client does that waits for its answers: its input stays open
/// until every id in `ids` has an answer (a result or an error), or two minutes have passed,
/// and only then closes. (rmcp gives calls still going at the end of input 5 seconds, then
/// drops them unanswered: 150 commands at once on a slow machine took longer.)
fn serve_until_answered(mut cmd: Command, lines: &[&str], ids: &[u64]) -> std::process::Output {
    use std::io::{BufRead, Read, Write};
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start cordon mcp");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all((lines.join("\n") + "\n").as_bytes())
        .expect("write");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in stdout.lines().map_while(Result::ok) {
            all.push_str(&line);
            all.push('\n');
            let _ = tx.send(line);
        }
        all
    });
    let mut errors = child.stderr.take().expect("stderr");
    let error_reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        let _ = errors.read_to_end(&mut all);
        all
    });
    let mut waiting: std::collections::HashSet<u64> = ids.iter().copied().collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !waiting.is_empty() {
        let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) else {
            break;
        };
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line)
            && (v.get("result").is_some() || v.get("error").is_some())
            && let Some(id) = v["id"].as_u64()
        {
            waiting.remove(&id);
        }
    }
    drop(stdin);
    let status = child.wait().expect("wait for cordon mcp");
    std::process::Output {
        status,
        stdout: reader.join().expect("stdout reader").into_bytes(),
        stderr: error_reader.join().expect("stderr reader"),
    }
}

/// A question pending when the client closes its input is answered no at once: no answer can
/// come any more. (rmcp would otherwise let the handler wait 5 s, then drop its result.)
fn a_question_pending_at_the_end_of_input_is_answered_no() {
    let sb = Sandbox::new();
    let lines = [
        INITIALIZE,
        INITIALIZED,
        // The built-in policy asks before `touch`.
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_shell_command","arguments":{"command":"touch asked-about"}}}"#,
    ];
    let mut cmd = Command::new(cordon_bin());
    cmd.arg("mcp")
        .current_dir(&sb.ws)
        .env("XDG_CONFIG_HOME", sb.outside.join("config"));
    let out = serve_lines(cmd, &lines);
    let out = String::from_utf8_lossy(&out.stdout);
    let answer = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["id"] == 2 && v.get("result").is_some())
        .unwrap_or_else(|| panic!("no answer to the call: {out}"));
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(
        answer
            .to_string()
            .contains("closed its input before the user answered"),
        "{answer}"
    );
    assert!(!sb.ws.join("asked-about").exists(), "the command ran");
}

/// A workspace for the container tests with a name of its own, so that each test's containers
/// can be told apart (cordon names them `cordon-<directory>-<random>`), and beside it a
/// directory outside the workspace and the user's config directory.
struct Project {
    ws: tempfile::TempDir,
    around: tempfile::TempDir,
    engine: Eng,
}

impl Project {
    fn new(engine: Eng) -> Self {
        if let Err(why) = engine.ready() {
            skip(why);
        }
        let ws = tempfile::Builder::new()
            .prefix("cordonmcp")
            .tempdir()
            .expect("temp dir");
        let around = tempfile::tempdir().expect("temp dir");
        for d in ["outside", "config/cordon/policies", "extension"] {
            std::fs::create_dir_all(around.path().join(d)).expect("mkdir");
        }
        // A rule of the user's, which the server inside must see to keep.
        std::fs::write(
            around.path().join("config/cordon/policies/deny.toml"),
            "[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = \"touch denied-by-policy\"\ndecision = \"deny\"\npriority = 100\ndenyMessage = \"not in a container either\"\n",
        )
        .expect("write the policy");
        // And one of an extension's, given by a flag, outside every directory the container
        // shows anyway: only the worker's own mounts bring it in.
        std::fs::write(
            around.path().join("extension/deny.toml"),
            "[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = \"touch denied-by-extension\"\ndecision = \"deny\"\npriority = 100\n",
        )
        .expect("write the policy");
        Project { ws, around, engine }
    }

    fn ws(&self) -> &Path {
        self.ws.path()
    }

    fn outside(&self) -> PathBuf {
        self.around.path().join("outside")
    }

    fn config(&self) -> PathBuf {
        self.around.path().join("config")
    }

    /// `cordon mcp --backend ENGINE --image IMAGE …` in the workspace, with the project's
    /// user settings.
    fn mcp(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(cordon_bin());
        cmd.args(["mcp", "--backend", self.engine.name(), "--image", IMAGE])
            .args(args)
            .current_dir(self.ws())
            .env("XDG_CONFIG_HOME", self.config())
            .env_remove("CORDON_SANDBOX")
            .env_remove("CORDON_DEBUG");
        if let Some(conf) = self.engine.conf() {
            cmd.env("CONTAINERS_CONF", conf);
        }
        cmd
    }

    /// This workspace's containers, running or not.
    fn containers(&self) -> Vec<String> {
        let base = self
            .ws()
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        let out = self.engine.run(&[
            "ps",
            "-a",
            "--format",
            "{{.Names}}",
            "--filter",
            &format!("name=cordon-{base}-"),
        ]);
        stdout(&out).lines().map(str::to_string).collect()
    }

    /// Polls until this workspace has no container left, or 30 seconds have passed.
    fn containers_after_a_while(&self) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = self.containers();
            if left.is_empty() || Instant::now() > deadline {
                return left;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// The official client drives `cordon mcp --backend ENGINE` (tests/mcp/drive.py, its
/// `in_a_container` part): the tools act in the container, on the host's workspace, under
/// the host's policy, and no container is left when the client goes.
fn a_real_mcp_client_drives_the_server_in_a_container(engine: Eng) {
    let python = python();
    let p = Project::new(engine);
    std::fs::write(p.outside().join("secret"), "not for the agent").expect("write");
    // A command the user's settings place outside the sandbox: it must still stay inside.
    std::fs::write(
        p.config().join("cordon/cordon.toml"),
        "[sandbox]\nexcluded_commands = [\"hostname\"]\n",
    )
    .expect("write the user's settings");
    // Each command's limit, from the project's settings: it must not end the session.
    std::fs::create_dir(p.ws().join(".cordon")).expect("mkdir");
    std::fs::write(
        p.ws().join(".cordon/cordon.toml"),
        "[limits]\ntimeout = 3\n",
    )
    .expect("write the settings");
    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/drive.py");
    let mut cmd = Command::new(&python);
    cmd.arg(&driver)
        .arg(cordon_bin())
        .arg(p.ws())
        .arg(p.outside())
        .arg(if engine == Eng::Docker {
            "987641"
        } else {
            "987642"
        })
        .args([engine.name(), IMAGE])
        .arg(p.around.path().join("extension"))
        .current_dir(p.ws())
        .env("XDG_CONFIG_HOME", p.config())
        .env_remove("CORDON_SANDBOX");
    if let Some(conf) = engine.conf() {
        cmd.env("CONTAINERS_CONF", conf);
    }
    let out = cmd.output().expect("start the MCP client driver");
    println!("{}", stdout(&out));
    assert!(
        out.status.success(),
        "the MCP client's exchange with cordon mcp --backend {} failed ({}):\n{}\n{}",
        engine.name(),
        out.status,
        stdout(&out),
        stderr(&out)
    );
    assert!(stdout(&out).contains("all checks passed"));
    assert_eq!(p.containers(), Vec::<String>::new());
}

fn a_real_mcp_client_drives_the_server_in_docker() {
    a_real_mcp_client_drives_the_server_in_a_container(Eng::Docker);
}

fn a_real_mcp_client_drives_the_server_in_podman() {
    a_real_mcp_client_drives_the_server_in_a_container(Eng::Podman);
}

/// Starts `cordon mcp` as `cmd` says, initializes it as a raw client, and starts a long
/// command (`sleep MARKER`), whose progress says it runs; returns the server and its input.
fn serving_a_long_command(
    mut cmd: Command,
    marker: &str,
) -> (std::process::Child, std::process::ChildStdin) {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;

    let mut child = cmd
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
        "arguments": {"command": format!("echo ready; sleep {marker}")},
        "_meta": {"progressToken": "p"}}}),
    );
    line.clear();
    stdout.read_line(&mut line).expect("progress");
    assert!(
        line.contains("notifications/progress") && line.contains("ready"),
        "{line}"
    );
    // Whatever else the server says is read, so that it never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    (child, stdin)
}

/// A `run_shell_command` while the server already runs `--max-commands` of them is an error
/// result that names the limit and how to raise it; nothing of it runs.
fn a_call_beyond_max_commands_is_an_error_naming_the_limit() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let sb = Sandbox::new();
    let mut child = Command::new(cordon_bin())
        .args(["mcp", "--mode", "yolo", "--max-commands", "1"])
        .current_dir(&sb.ws)
        .env("XDG_CONFIG_HOME", sb.outside.join("config"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start cordon mcp");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    for m in [
        INITIALIZE.to_string(),
        INITIALIZED.to_string(),
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "run_shell_command",
            "arguments": {"command": "echo ready; sleep 987658"},
            "_meta": {"progressToken": "p"}}})
        .to_string(),
    ] {
        writeln!(stdin, "{m}").expect("write to cordon mcp");
    }
    // The first runs once its output has come.
    for line in lines.by_ref() {
        if line.expect("a line").contains("ready") {
            break;
        }
    }
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "run_shell_command", "arguments": {"command": "touch ran-second"}}});
    writeln!(stdin, "{call}").expect("write to cordon mcp");
    let answer = lines
        .map(|l| l.expect("a line"))
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(&l).ok())
        .find(|v| v["id"] == 3)
        .expect("an answer to the second call");
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    for part in ["(1: ", "limits.max_commands", "--max-commands"] {
        assert!(text.contains(part), "{part}: {answer}");
    }
    assert!(!sb.ws.join("ran-second").exists(), "the refused call ran");
    drop(stdin);
    let status = exited_within(&mut child, "cordon mcp did not exit after its input ended");
    assert!(status.success(), "{status}");
    assert_eq!(pgrep("sleep 987658"), "", "the first command survived");
}

/// `cordon mcp` killed outright while a command it runs in a warm sandbox has planted a
/// start-up file: the sandbox's helper, which outlives it, removes the file once the command
/// is gone (the same pool as `exec`'s; tests/exec.rs tries more).
fn a_killed_server_leaves_nothing_a_warm_command_planted() {
    let sb = Sandbox::with_mode(Mode::Warm);
    let mut cmd = Command::new(cordon_bin());
    cmd.args(["mcp", "--mode", "yolo"])
        .current_dir(&sb.ws)
        .env("XDG_CONFIG_HOME", sb.outside.join("config"));
    let (mut child, _stdin) = serving_a_long_command(cmd, "876543 & echo evil > .bashrc; wait");
    let planted = sb.ws.join(".bashrc");
    assert!(
        within_a_minute(|| planted.exists()),
        "the command did not plant .bashrc"
    );
    let helper = format!("__cordon-sandbox-helper {} warm", child.id());
    assert!(!pgrep(&helper).is_empty(), "the command did not run warm");
    child.kill().expect("kill cordon mcp");
    child.wait().expect("wait for cordon mcp");
    assert!(
        within_a_minute(|| !planted.exists()),
        ".bashrc is still there after cordon mcp was killed"
    );
    assert!(
        pgrep("sleep 876543").is_empty(),
        "the command outlived cordon mcp"
    );
}

fn pgrep(pattern: &str) -> String {
    let out = Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .expect("pgrep");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The end of the client's input ends the container; so do SIGTERM, SIGINT and SIGKILL of
/// the host's cordon (the last through the watcher `cordon run --backend` starts), while the
/// client still holds its end of the pipe.
fn no_container_outlives_the_host_cordon(engine: Eng) {
    let p = Project::new(engine);
    let marker = if engine == Eng::Docker {
        "987631"
    } else {
        "987632"
    };
    let (mut child, stdin) = serving_a_long_command(p.mcp(&["--mode", "yolo"]), marker);
    assert_eq!(p.containers().len(), 1, "one container serves the session");
    assert!(!pgrep(&format!("sleep {marker}")).is_empty());
    drop(stdin);
    let status = exited_within(
        &mut child,
        "cordon mcp --backend did not exit after its input ended",
    );
    assert!(status.success(), "{status}");
    assert_eq!(
        p.containers_after_a_while(),
        Vec::<String>::new(),
        "after the end of input"
    );
    assert_eq!(pgrep(&format!("sleep {marker}")), "");

    for signal in ["TERM", "INT", "KILL"] {
        let (mut child, stdin) = serving_a_long_command(p.mcp(&["--mode", "yolo"]), marker);
        let sent = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(child.id().to_string())
            .status()
            .expect("kill");
        assert!(sent.success());
        // A SIGINT ignored since cordon started (a shell's background job) stays ignored.
        exited_within(
            &mut child,
            &format!("cordon mcp --backend did not exit on SIG{signal}"),
        );
        assert_eq!(
            p.containers_after_a_while(),
            Vec::<String>::new(),
            "after SIG{signal}"
        );
        assert_eq!(pgrep(&format!("sleep {marker}")), "", "after SIG{signal}");
        drop(stdin);
    }
}

fn no_container_outlives_the_host_cordon_in_docker() {
    no_container_outlives_the_host_cordon(Eng::Docker);
}

fn no_container_outlives_the_host_cordon_in_podman() {
    no_container_outlives_the_host_cordon(Eng::Podman);
}

/// What `--backend` cannot do for `cordon mcp` is refused before anything starts, saying why;
/// `--dry-run` shows the engine's command: cordon's own binary and shared objects mounted
/// read-only, started by its loader as the worker, with the policy's flags.
fn the_backend_flags_are_checked_and_the_dry_run_shows_the_worker() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(dir.path().join("secret")).expect("mkdir");
    let run_with_input = |args: &[&str], env: &[(&str, &str)], input: &str| {
        use std::io::Write;
        let mut child = Command::new(cordon_bin())
            .arg("mcp")
            .args(args)
            .current_dir(dir.path())
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .env_remove("CORDON_SANDBOX")
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run cordon mcp");
        let mut stdin = child.stdin.take().expect("stdin");
        let _ = stdin.write_all(input.as_bytes());
        drop(stdin);
        child.wait_with_output().expect("cordon mcp ends")
    };
    let run = |args: &[&str], env: &[(&str, &str)]| run_with_input(args, env, "");
    let refused_with = |args: &[&str], env: &[(&str, &str)], input: &str, says: &str| {
        let out = run_with_input(args, env, input);
        assert!(!out.status.success(), "{args:?} should be refused");
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
        assert_eq!(stdout(&out), "", "nothing on the MCP stream");
    };
    let refused = |args: &[&str], env: &[(&str, &str)], says: &str| {
        let out = run(args, env);
        assert!(!out.status.success(), "{args:?} should be refused");
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
        assert_eq!(stdout(&out), "", "nothing on the MCP stream");
    };
    refused(
        &["--backend", "seatbelt"],
        &[],
        "Seatbelt exists only on macOS",
    );
    refused(
        &["--image", "x"],
        &[],
        "are for the container backends; add --backend docker",
    );
    refused(
        &["--backend", "docker", "--image", "x"],
        &[("CORDON_SANDBOX", "cordon-elsewhere-1234")],
        "already inside the container cordon-elsewhere-1234",
    );
    refused(
        &["--worker"],
        &[],
        "--worker is for the server cordon starts",
    );
    refused(
        &["--worker"],
        &[("CORDON_SANDBOX", "cordon-elsewhere-1234")],
        "standard input ended before the launcher's request",
    );
    refused_with(
        &["--worker"],
        &[("CORDON_SANDBOX", "cordon-elsewhere-1234")],
        "--mode plan\n",
        "the first line of standard input is not the request cordon's launcher sends",
    );
    refused(&["--dry-run"], &[], "--dry-run shows the engine's command");

    let out = run(
        &[
            "--backend",
            "docker",
            "--image",
            "some-image:1",
            "--dry-run",
            "--mode",
            "plan",
            "--deny-read",
            "secret",
        ],
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let line = stdout(&out);
    let exe = std::fs::canonicalize(cordon_bin()).expect("cordon's path");
    assert!(
        line.contains(&format!("-v {}:/.cordon/cordon:ro", exe.display())),
        "{line}"
    );
    assert!(line.contains(" some-image:1 "), "{line}");
    let worker = line
        .split(" some-image:1 ")
        .nth(1)
        .and_then(|w| w.lines().next())
        .unwrap_or_default();
    // The worker's command line names nothing but the binary: its flags come typed.
    let starts = worker == "/.cordon/cordon mcp --worker"
        || (worker.starts_with("/.cordon/lib/ld-")
            && worker.ends_with(" --library-path /.cordon/lib /.cordon/cordon mcp --worker"));
    assert!(starts, "{worker}");
    assert!(!line.contains(" -t "), "no terminal: {line}");
    // The policy and the sandbox flags reach the worker as its typed request, first on its
    // standard input; the dry run shows it.
    let request = line
        .split("the worker's request:\n")
        .nth(1)
        .map(str::trim)
        .unwrap_or_default();
    let parsed: serde_json::Value = serde_json::from_str(request).expect("the request is JSON");
    assert_eq!(parsed["policy"]["mode"], "plan", "{request}");
    assert_eq!(
        parsed["sources"]["flags"]["deny_read"],
        serde_json::json!(["secret"]),
        "{request}"
    );

    // Another policy than the launcher's is refused inside.
    let mut other = parsed.clone();
    other["policy_fingerprint"] = serde_json::json!(1);
    refused_with(
        &["--worker"],
        &[("CORDON_SANDBOX", "cordon-elsewhere-1234")],
        &format!("{other}\n"),
        "the policy files seen inside the container cordon-elsewhere-1234 differ",
    );
    // The right request and the variable are not enough outside a container.
    refused_with(
        &["--worker"],
        &[("CORDON_SANDBOX", "cordon-elsewhere-1234")],
        &format!("{request}\n"),
        "but this is not the program of one of cordon's containers",
    );
}

/// As an unprivileged user who may use Docker's socket, what the tools write in the
/// container lands in the host's workspace owned by that user, file tools and commands alike.
fn an_unprivileged_users_files_are_theirs_on_the_host() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::process::Stdio;

    let p = Project::new(Eng::Docker);
    let Ok(socket) = std::fs::metadata("/var/run/docker.sock") else {
        skip("no /var/run/docker.sock to hand an unprivileged user");
    };
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| stdout(&o).trim() == "0");
    if Command::new("setpriv").arg("--version").output().is_err() || !root {
        skip("the unprivileged-user test needs root and setpriv (util-linux)");
    }
    let (uid, gid) = (4322u32, 4322u32);
    // A copy the user can run, and directories of theirs.
    let bin = p.around.path().join("cordon");
    std::fs::copy(cordon_bin(), &bin).expect("copy cordon");
    let home = p.around.path().join("home");
    std::fs::create_dir_all(&home).expect("mkdir");
    for d in [p.around.path(), &home, p.ws()] {
        std::os::unix::fs::chown(d, Some(uid), Some(gid)).expect("chown");
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let mut child = Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .arg(format!("--groups={}", socket.gid()))
        .arg(&bin)
        .args([
            "mcp",
            "--mode",
            "yolo",
            "--backend",
            "docker",
            "--image",
            IMAGE,
        ])
        .current_dir(p.ws())
        .env("HOME", &home)
        .env("USER", "tester")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("CORDON_SANDBOX")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start cordon mcp as the user");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut ask = |id: u64, method: &str, params: serde_json::Value| -> serde_json::Value {
        let m = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{m}").expect("write to cordon mcp");
        loop {
            let mut line = String::new();
            let n = out.read_line(&mut line).expect("read from cordon mcp");
            assert!(n > 0, "cordon mcp ended before answering {method}");
            let v: serde_json::Value = serde_json::from_str(&line).expect("JSON");
            if v["id"] == id {
                return v;
            }
        }
    };
    let init = ask(
        1,
        "initialize",
        serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}),
    );
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    let call =
        |name: &str, args: serde_json::Value| serde_json::json!({"name": name, "arguments": args});
    let wrote = ask(
        2,
        "tools/call",
        call(
            "write_file",
            serde_json::json!({"file_path": "by-tool.txt", "content": "x\n"}),
        ),
    );
    assert_eq!(wrote["result"]["isError"], false, "{wrote}");
    let ran = ask(
        3,
        "tools/call",
        call(
            "run_shell_command",
            serde_json::json!({"command": "id -u; echo y > by-shell.txt"}),
        ),
    );
    let text = ran["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.starts_with(&format!("{uid}\n")), "{ran}");
    drop(stdin);
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status}");
    for f in ["by-tool.txt", "by-shell.txt"] {
        let m = std::fs::metadata(p.ws().join(f)).expect("the file is on the host");
        assert_eq!((m.uid(), m.gid()), (uid, gid), "{f}");
    }
    assert_eq!(p.containers_after_a_while(), Vec::<String>::new());
}

/// A missing engine, an unreachable one and a bad image name each stop `cordon mcp --backend`
/// before it serves, with what to do on standard error and nothing on the MCP stream.
/// The launcher and the server it starts in the container both work out the sandbox's paths;
/// a pattern that matches nothing is still said once.
fn warnings_are_said_once_with_the_server_in_a_container(engine: Eng) {
    let p = Project::new(engine);
    let pattern = format!("{}/**/*.cordon-matches-none", p.ws().display());
    let out = serve_lines(
        p.mcp(&["--deny-read", &pattern]),
        &[INITIALIZE, INITIALIZED],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stderr(&out)
        .matches("cordon-matches-none: matches nothing")
        .count();
    assert_eq!(said, 1, "said {said} times:\n{}", stderr(&out));
}

fn warnings_are_said_once_with_the_server_in_docker() {
    warnings_are_said_once_with_the_server_in_a_container(Eng::Docker);
}

fn warnings_are_said_once_with_the_server_in_podman() {
    warnings_are_said_once_with_the_server_in_a_container(Eng::Podman);
}

fn engine_and_image_problems_are_said_before_serving() {
    let said = |mut cmd: Command, says: &str| {
        let out = cmd
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run cordon mcp");
        assert!(!out.status.success(), "should fail: {says}");
        assert!(stderr(&out).contains(says), "{}", stderr(&out));
        assert_eq!(stdout(&out), "", "nothing on the MCP stream");
    };
    let empty = tempfile::tempdir().expect("temp dir");
    let mut missing = Command::new(cordon_bin());
    missing
        .args(["mcp", "--backend", "podman", "--image", "x"])
        .current_dir(empty.path())
        .env("PATH", empty.path())
        .env("XDG_CONFIG_HOME", empty.path().join("config"))
        .env_remove("CORDON_SANDBOX");
    said(
        missing,
        "podman is not installed (not found on PATH): install Podman",
    );

    let p = Project::new(Eng::Docker);
    let mut unreachable = p.mcp(&[]);
    unreachable.env("DOCKER_HOST", "unix:///nonexistent/cordon-test.sock");
    said(unreachable, "cannot reach the docker engine: start it");
    let mut bad = Command::new(cordon_bin());
    bad.args(["mcp", "--backend", "docker", "--image", "Not/A-Valid:Name!"])
        .current_dir(p.ws())
        .env("XDG_CONFIG_HOME", p.config())
        .env_remove("CORDON_SANDBOX");
    said(bad, "check the image name");
}

/// Calls `tool` once per value of `field` in `bad` (over `base` arguments), then once with
/// `base` alone: each bad call is an error naming the field and its range, and the server
/// answers the good call after them.
fn tool_numbers_out_of_range_are_named(
    tool: &str,
    base: serde_json::Value,
    field: &str,
    bad: &[&str],
) {
    let sb = Sandbox::new();
    std::fs::write(sb.ws.join("f.txt"), "one\ntwo\n").expect("write");
    let mut calls = Vec::new();
    for (i, b) in bad.iter().enumerate() {
        let mut args = base.clone();
        args[field] = serde_json::from_str(b).expect("json");
        calls.push(
            serde_json::json!({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
                "params": {"name": tool, "arguments": args}})
            .to_string(),
        );
    }
    let good_id = 10 + bad.len();
    calls.push(
        serde_json::json!({"jsonrpc": "2.0", "id": good_id, "method": "tools/call",
            "params": {"name": tool, "arguments": base}})
        .to_string(),
    );
    let mut lines = vec![INITIALIZE, INITIALIZED];
    lines.extend(calls.iter().map(String::as_str));
    let mut cmd = Command::new(cordon_bin());
    cmd.args(["mcp", "--mode", "yolo"])
        .current_dir(&sb.ws)
        .env("XDG_CONFIG_HOME", sb.outside.join("config"));
    let out = serve_lines(cmd, &lines);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    let answers: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let answer = |id: usize| {
        answers
            .iter()
            .find(|v| v["id"] == id && v.get("result").is_some())
            .unwrap_or_else(|| panic!("no answer to call {id}: {text}"))
    };
    for (i, b) in bad.iter().enumerate() {
        let a = answer(10 + i);
        assert_eq!(a["result"]["isError"], true, "{field} = {b}: {a}");
        let said = a["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(
            said.contains(&format!("`{field}`")) && said.contains("from 0 to 1000000000"),
            "{field} = {b}: {a}"
        );
    }
    assert_eq!(answer(good_id)["result"]["isError"], false, "{text}");
}

const BAD_LINE_NUMBERS: &[&str] = &[
    "1e300",
    "18446744073709551615",
    "1000000001",
    "-1",
    "1.5",
    "\"3\"",
];

fn read_file_refuses_an_offset_out_of_range() {
    tool_numbers_out_of_range_are_named(
        "read_file",
        serde_json::json!({"file_path": "f.txt"}),
        "offset",
        BAD_LINE_NUMBERS,
    );
}

fn read_file_refuses_a_limit_out_of_range() {
    tool_numbers_out_of_range_are_named(
        "read_file",
        serde_json::json!({"file_path": "f.txt"}),
        "limit",
        BAD_LINE_NUMBERS,
    );
}

fn replace_refuses_expected_replacements_out_of_range() {
    tool_numbers_out_of_range_are_named(
        "replace",
        serde_json::json!({"file_path": "f.txt", "old_string": "one", "new_string": "1"}),
        "expected_replacements",
        BAD_LINE_NUMBERS,
    );
}

/// Calls each tool in `calls` (name, arguments) in yolo mode from the workspace of `sb`, and
/// gives back each call's answer, in order.
fn call_tools(sb: &Sandbox, calls: &[(&str, serde_json::Value)]) -> Vec<serde_json::Value> {
    call_tools_env(sb, calls, &[])
}

/// As [`call_tools`], with `env` set for the server (and so for its runs).
fn call_tools_env(
    sb: &Sandbox,
    calls: &[(&str, serde_json::Value)],
    env: &[(&str, &str)],
) -> Vec<serde_json::Value> {
    let requests: Vec<String> = calls
        .iter()
        .enumerate()
        .map(|(i, (tool, args))| {
            serde_json::json!({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
                "params": {"name": tool, "arguments": args}})
            .to_string()
        })
        .collect();
    let mut lines = vec![INITIALIZE, INITIALIZED];
    lines.extend(requests.iter().map(String::as_str));
    let mut cmd = Command::new(cordon_bin());
    cmd.args(["mcp", "--mode", "yolo"])
        .current_dir(&sb.ws)
        .env("XDG_CONFIG_HOME", sb.outside.join("config"))
        .envs(env.iter().copied());
    let ids: Vec<u64> = (0..calls.len() as u64).map(|i| 10 + i).collect();
    let out = serve_until_answered(cmd, &lines, &ids);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let answers: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (0..calls.len())
        .map(|i| {
            answers
                .iter()
                .find(|v| v["id"] == 10 + i && v.get("result").is_some())
                .cloned()
                .unwrap_or_else(|| panic!("no answer to call {i}: {text}"))
        })
        .collect()
}

/// The file tools write on a command's behalf outside the sandbox, so they keep to the same
/// protected paths, in every mode (yolo here), for files that do not exist yet as well:
/// start-up files, editor tasks, agent settings and git metadata at any depth.
fn the_file_tools_refuse_to_create_protected_files_in_yolo_mode() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.ws.join("vendor/lib/.git")).expect("mkdir");
    let protected = [
        ".bashrc",
        ".vscode/tasks.json",
        ".mcp.json",
        ".claude/settings.json",
        ".git",
        "vendor/lib/.git/config",
        "vendor/lib/.git/hooks/pre-commit",
        "sub/.git/config",
    ];
    let mut calls: Vec<(&str, serde_json::Value)> = protected
        .iter()
        .map(|p| {
            (
                "write_file",
                serde_json::json!({"file_path": p, "content": "evil\n"}),
            )
        })
        .collect();
    calls.push((
        "write_file",
        serde_json::json!({"file_path": "src/ok.txt", "content": "fine\n"}),
    ));
    let answers = call_tools(&sb, &calls);
    for (p, a) in protected.iter().zip(&answers) {
        assert_eq!(a["result"]["isError"], true, "{p}: {a}");
        // Agents' and editors' control files are refused as such before any wall is looked at.
        assert!(
            a.to_string().contains("protected") || a.to_string().contains("control files"),
            "{p}: not refused as protected: {a}"
        );
        let host = sb.ws.join(p);
        assert!(
            !host.is_file(),
            "{p} was created on the host by the file tool"
        );
    }
    assert_eq!(answers[protected.len()]["result"]["isError"], false);
    assert_eq!(
        std::fs::read_to_string(sb.ws.join("src/ok.txt")).expect("ok.txt"),
        "fine\n"
    );
}

/// `dir_path` becomes the run's writable directory: one outside the workspace, or through a
/// link out of it, is refused before anything runs.
fn run_shell_command_refuses_a_dir_path_outside_the_workspace() {
    let sb = Sandbox::new();
    std::os::unix::fs::symlink(&sb.outside, sb.ws.join("out")).expect("symlink");
    let outside = sb.outside.display().to_string();
    let bad = ["/", outside.as_str(), "..", "out"];
    let calls: Vec<(&str, serde_json::Value)> = bad
        .iter()
        .map(|d| {
            (
                "run_shell_command",
                serde_json::json!({"command": "touch planted", "dir_path": d}),
            )
        })
        .collect();
    let answers = call_tools(&sb, &calls);
    for (d, a) in bad.iter().zip(&answers) {
        assert_eq!(a["result"]["isError"], true, "{d}: {a}");
    }
    assert!(!sb.outside.join("planted").exists());
    assert!(
        !sb.outside
            .parent()
            .expect("parent")
            .join("planted")
            .exists()
    );
}

/// Swaps `ws/d` (a directory) and `ws/l` (a link to `outside`) with `renameat2(EXCHANGE)` as
/// fast as it can, as a sandboxed command running beside the file tools could, until dropped.
/// It also dies with the thread that started it (`PR_SET_PDEATHSIG`), so that a test that
/// fails, or is killed, does not leave it spinning.
fn swapper(ws: &Path, outside: &Path) -> Swapper {
    std::fs::create_dir_all(ws.join("d")).expect("mkdir");
    std::os::unix::fs::symlink(outside, ws.join("l")).expect("symlink");
    let script = "import ctypes, os, signal, sys\n\
        libc = ctypes.CDLL(None, use_errno=True)\n\
        libc.prctl(1, int(signal.SIGKILL))\n\
        a, b = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2])\n\
        print('swapping', flush=True)\n\
        while True:\n    libc.renameat2(-100, a, -100, b, 2)\n";
    let mut child = Swapper(
        Command::new("python3")
            .args(["-c", script])
            .arg(ws.join("d"))
            .arg(ws.join("l"))
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start the swapper"),
    );
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.0.stdout.as_mut().expect("stdout")),
        &mut line,
    )
    .expect("the swapper started");
    child
}

/// The swapper's process, killed and reaped when dropped (also when a test panics).
struct Swapper(std::process::Child);

impl Drop for Swapper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn nothing_outside(outside: &Path) {
    let found: Vec<_> = std::fs::read_dir(outside)
        .expect("read outside")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(
        found.is_empty(),
        "something was written outside the workspace: {found:?}"
    );
}

/// While a directory on the way is swapped for a link out of the workspace, `write_file` and
/// `replace` never create or change anything outside it: each name is opened from the one
/// before without following links.
fn the_file_tools_never_write_outside_while_a_directory_is_swapped_for_a_link() {
    let sb = Sandbox::new();
    let racer = swapper(&sb.ws, &sb.outside);
    let calls: Vec<(&str, serde_json::Value)> = (0..1500)
        .map(|i| {
            (
                "write_file",
                serde_json::json!({"file_path": format!("d/n{i}/f.txt"), "content": "x"}),
            )
        })
        .collect();
    let answers = call_tools(&sb, &calls);
    drop(racer);
    let written = answers
        .iter()
        .filter(|a| a["result"]["isError"] == false)
        .count();
    eprintln!("{written} of {} writes went through", answers.len());
    nothing_outside(&sb.outside);
}

/// While the directory named by `dir_path` is swapped for a link out of the workspace, the
/// run never gets a directory outside it as its (writable) working directory.
fn run_shell_command_never_runs_outside_while_dir_path_is_swapped_for_a_link() {
    dir_path_swapped(&[]);
}

/// The same without user namespaces, where Landlock's rule makes the working directory
/// writable.
fn run_shell_command_never_runs_outside_while_dir_path_is_swapped_without_namespaces() {
    dir_path_swapped(&[("CORDON_SANDBOX_LANDLOCK_ONLY", "1")]);
}

fn dir_path_swapped(env: &[(&str, &str)]) {
    let sb = Sandbox::new();
    // All 150 calls come at once, and each must run (not be refused as one too many) to race
    // the swap; the settings that allow that lie where nothing is looked for.
    let settings = tempfile::tempdir().expect("temp dir");
    let managed = settings.path().join("cordon.toml");
    std::fs::write(&managed, "[limits]\nmax_commands = 150\n").expect("write");
    let managed = managed.to_str().expect("utf-8");
    let env: Vec<(&str, &str)> = env
        .iter()
        .copied()
        .chain([("CORDON_MANAGED_SETTINGS", managed)])
        .collect();
    let env = env.as_slice();
    let racer = swapper(&sb.ws, &sb.outside);
    let calls: Vec<(&str, serde_json::Value)> = (0..150)
        .map(|i| {
            (
                "run_shell_command",
                serde_json::json!({"command": format!("touch planted-{i}"), "dir_path": "d"}),
            )
        })
        .collect();
    let answers = call_tools_env(&sb, &calls, env);
    drop(racer);
    let ran = answers
        .iter()
        .filter(|a| a["result"]["isError"] == false)
        .count();
    eprintln!(
        "{ran} of {} runs ran; last: {}",
        answers.len(),
        answers[answers.len() - 1]
    );
    let too_many = answers
        .iter()
        .filter(|a| a.to_string().contains("limits.max_commands"))
        .count();
    assert_eq!(too_many, 0, "calls refused as too many at once");
    nothing_outside(&sb.outside);
}

/// Calls, while a directory is swapped for a link out of the workspace, `n` tools (`call(i)`
/// gives the i-th) and fails if any answer shows the outside file's name or contents.
fn nothing_outside_is_shown(n: usize, call: impl Fn(usize) -> (&'static str, serde_json::Value)) {
    let sb = Sandbox::new();
    std::fs::write(sb.outside.join("outside-secret"), "the secret\n").expect("write");
    let racer = swapper(&sb.ws, &sb.outside);
    let calls: Vec<(&str, serde_json::Value)> = (0..n).map(call).collect();
    let answers = call_tools(&sb, &calls);
    drop(racer);
    let leaked: Vec<_> = answers
        .iter()
        .filter(|a| a["result"]["isError"] == false)
        .filter(|a| {
            let text = a.to_string();
            text.contains("outside-secret") || text.contains("the secret")
        })
        .collect();
    assert!(
        leaked.is_empty(),
        "shown from outside: {:?}",
        leaked.first()
    );
}

/// While the listed directory is swapped for a link out of the workspace, `list_directory`
/// and `read_file` never show what is outside.
fn the_file_tools_never_read_outside_while_a_directory_is_swapped_for_a_link() {
    nothing_outside_is_shown(1500, |i| {
        if i % 2 == 0 {
            ("list_directory", serde_json::json!({"dir_path": "d"}))
        } else {
            (
                "read_file",
                serde_json::json!({"file_path": "d/outside-secret"}),
            )
        }
    });
}

/// While a directory is swapped for a link out of the workspace, `glob` and
/// `search_file_content` never name what is outside.
fn the_walking_tools_never_name_what_is_outside_while_a_directory_is_swapped() {
    nothing_outside_is_shown(1000, |i| {
        if i % 2 == 0 {
            ("glob", serde_json::json!({"pattern": "**/*secret*"}))
        } else {
            (
                "search_file_content",
                serde_json::json!({"pattern": "secret"}),
            )
        }
    });
}

common::tests!(
    "mcp.rs":
    a_real_mcp_client_lists_calls_streams_cancels_and_is_asked,
    the_end_of_input_stops_what_runs_and_cordon_exits,
    sigterm_stops_what_runs_and_leaves_nothing_behind,
    a_question_pending_at_the_end_of_input_is_answered_no,
    a_real_mcp_client_drives_the_server_in_docker,
    a_real_mcp_client_drives_the_server_in_podman,
    a_call_beyond_max_commands_is_an_error_naming_the_limit,
    a_killed_server_leaves_nothing_a_warm_command_planted,
    no_container_outlives_the_host_cordon_in_docker,
    no_container_outlives_the_host_cordon_in_podman,
    the_backend_flags_are_checked_and_the_dry_run_shows_the_worker,
    an_unprivileged_users_files_are_theirs_on_the_host,
    warnings_are_said_once_with_the_server_in_docker,
    warnings_are_said_once_with_the_server_in_podman,
    engine_and_image_problems_are_said_before_serving,
    read_file_refuses_an_offset_out_of_range,
    read_file_refuses_a_limit_out_of_range,
    replace_refuses_expected_replacements_out_of_range,
    the_file_tools_refuse_to_create_protected_files_in_yolo_mode,
    run_shell_command_refuses_a_dir_path_outside_the_workspace,
    the_file_tools_never_write_outside_while_a_directory_is_swapped_for_a_link,
    run_shell_command_never_runs_outside_while_dir_path_is_swapped_for_a_link,
    run_shell_command_never_runs_outside_while_dir_path_is_swapped_without_namespaces,
    the_file_tools_never_read_outside_while_a_directory_is_swapped_for_a_link,
    the_walking_tools_never_name_what_is_outside_while_a_directory_is_swapped,
);
