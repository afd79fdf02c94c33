//! The shell that runs a command is the shell whose grammar decided it.
//!
//! cordon's policy reads a command line with bash's grammar. A differential corpus of command
//! lines, each run by bash, dash (Debian's `/bin/sh`) and zsh in a scratch directory, shows
//! where those shells part; for every line the policy lets run in plan mode (where only what
//! changes nothing is allowed), the shell that will run it must change nothing:
//! - `cordon exec` runs it with bash, so bash must leave the directory as it was, and so must
//!   `cordon exec` itself (which would not, were it to run another shell);
//! - wrapped as `sh -c 'LINE'`, dash runs it, so dash must leave it as it was;
//! - for an agent whose shell is zsh (`cordon hook claude-code` with `SHELL` naming zsh), zsh
//!   must.
//!
//! Named attempts then play the cases the review found, through the real binary.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{cordon_bin, stderr};
use serde_json::{Value, json};

/// Command lines where bash, dash and zsh read the same text in different ways, and some
/// where they agree. Each runs in a directory holding `f`, `g`, `README` and `d/`.
const CORPUS: &[&str] = &[
    // bash: a conditional expression; dash: `[[ a` fails, then `rm == f ]]` runs.
    "[[ a || rm == f ]]",
    // bash and zsh: one `cat` with both outputs to /dev/null; dash: `cat &`, then `rm -f f`.
    "cat README &>/dev/null rm -f f",
    "cat README &>>/dev/null rm -f f",
    // bash and zsh: one ANSI-C quoted word; dash: the quote ends early and `rm` runs.
    "echo $'\\' ; rm -f f ; echo \\' #'",
    // bash: `>&` to a file; dash: a file descriptor it rejects.
    "cat README >& /dev/null rm -f f",
    // bash without extglob: a negated subshell that runs `rm`.
    "!(rm -f f)",
    // zsh: glob qualifiers, which run code for each match.
    "ls README(e:'rm -f f':)",
    "echo *(e:'rm -f f':)",
    // zsh: a parameter flag that evaluates the value.
    "x='$(rm -f f)'; echo ${(e)x}",
    "x='$(rm -f f)'; echo \"${(e)x}\"",
    // zsh: precommand words, program names to bash.
    "repeat 1 rm -f f",
    "noglob rm -f f",
    // zsh: process substitution into a file; bash: a syntax error.
    "cat =(rm -f f)",
    // bash: arithmetic; dash: nested subshells.
    "((rm -f f))",
    "cat README |& cat",
    "cat <<< x; ls",
    "diff <(ls) <(ls d)",
    "echo {a,b}",
    "{rm,-f,f}",
    "echo $\"hi\"; ls",
    "function x { rm -f f; }",
    "function x {\nrm -f f\n}",
    "case a in a) cat README;; esac",
    "cat README 2>&1 >/dev/null",
    "ls &>/dev/null || echo no",
    "echo \"$(cat README &>/dev/null rm -f f)\"",
    "echo `cat README &>/dev/null rm -f f`",
    "sh -c 'cat README &>/dev/null rm -f f'",
    "bash -c 'cat README &>/dev/null rm -f f'",
    "zsh -c \"ls README(e:'rm -f f':)\"",
    "echo a#b; ls",
    "# it's a comment\ncat README &>/dev/null rm -f f",
    "echo ${x:-$(rm -f f)}",
    "echo $[1+1]",
    "cat README >| /dev/null",
    "[ -f f ] && cat f",
    "test -f f && rm -f f",
    "cat README 1>&2",
    "ls; cat f g",
    "time ls",
];

/// What a scratch directory holds: each path under it, with a file's content.
type State = BTreeMap<String, Option<Vec<u8>>>;

fn state(dir: &Path) -> State {
    let mut out = State::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("list").flatten() {
            let path = e.path();
            let rel = path.strip_prefix(dir).expect("under").display().to_string();
            let meta = std::fs::symlink_metadata(&path).expect("stat");
            if meta.is_dir() {
                todo.push(path);
                out.insert(rel + "/", None);
            } else {
                out.insert(rel, std::fs::read(&path).ok());
            }
        }
    }
    out
}

/// A directory for one case: `f`, `g`, `README`, `d/`. Not under /tmp: `cordon exec` runs warm
/// only elsewhere, and sandboxed runs get a private /tmp.
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir_in("/var/tmp").expect("temp dir");
    for (name, text) in [("f", "f\n"), ("g", "g\n"), ("README", "read me\n")] {
        std::fs::write(dir.path().join(name), text).expect("write");
    }
    std::fs::create_dir(dir.path().join("d")).expect("mkdir");
    dir
}

/// Runs `argv` in `dir` with a bare environment, for at most ten seconds.
fn run_in(dir: &Path, argv: &[&str]) {
    let mut child = Command::new(argv[0])
        .args(&argv[1..])
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", argv[0]));
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether `shell -c LINE` changed anything in a fresh scratch directory.
fn changes(shell: &str, line: &str) -> bool {
    let dir = scratch();
    let before = state(dir.path());
    run_in(dir.path(), &[shell, "-c", line]);
    state(dir.path()) != before
}

fn installed(shell: &str) -> Option<String> {
    ["/bin", "/usr/bin", "/usr/local/bin"]
        .iter()
        .map(|d| format!("{d}/{shell}"))
        .find(|p| Path::new(p).is_file())
}

/// Says what part of a test was left out; under `CORDON_TEST_NO_SKIP` that is a failure.
fn left_out(why: &str) {
    assert!(
        std::env::var_os("CORDON_TEST_NO_SKIP").is_none(),
        "{why} (CORDON_TEST_NO_SKIP is set)"
    );
    eprintln!("left out: {why}");
}

/// The policy's decisions in plan mode, one per line, from one `cordon check --jsonl`.
fn plan_decisions(lines: &[String]) -> Vec<String> {
    let dir = scratch();
    let mut child = Command::new(cordon_bin())
        .args(["check", "--jsonl", "--mode", "plan"])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start cordon check");
    let mut stdin = child.stdin.take().expect("stdin");
    for line in lines {
        let call = json!({"tool": "run_shell_command", "args": {"command": line}});
        writeln!(stdin, "{call}").expect("send");
    }
    drop(stdin);
    let out = child.wait_with_output().expect("cordon check");
    let answers: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("json");
            v["decision"].as_str().unwrap_or("?").to_string()
        })
        .collect();
    assert_eq!(answers.len(), lines.len(), "one answer per line");
    answers
}

/// Claude Code's hook in plan mode, for an agent whose shell is `shell`.
fn hook_decision(line: &str, shell: &str) -> String {
    let dir = scratch();
    let input = json!({
        "session_id": "s", "transcript_path": dir.path().join("t.jsonl"),
        "cwd": dir.path(), "permission_mode": "plan", "hook_event_name": "PreToolUse",
        "tool_name": "Bash", "tool_input": {"command": line}, "tool_use_id": "t1",
    });
    let mut child = Command::new(cordon_bin())
        .args(["hook", "claude-code"])
        .current_dir(dir.path())
        .env("SHELL", shell)
        .env_remove("CLAUDE_CODE_SHELL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start cordon hook");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.to_string().as_bytes())
        .expect("send");
    let out = child.wait_with_output().expect("cordon hook");
    let v: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
    v["hookSpecificOutput"]["permissionDecision"]
        .as_str()
        .unwrap_or("?")
        .to_string()
}

/// For each line the plan-mode policy allows, the shell that will run it changes nothing;
/// the table of where the shells part is printed for the record.
fn what_the_policy_allows_changes_nothing_in_the_shell_that_runs_it() {
    let Some(bash) = installed("bash") else {
        common::skip("bash is not installed");
    };
    let Some(dash) = installed("dash") else {
        common::skip("dash is not installed (Debian: apt-get install dash)");
    };
    let zsh = installed("zsh");
    if zsh.is_none() {
        left_out("zsh is not installed (Debian: apt-get install zsh); its column is left out");
    }
    let lines: Vec<String> = CORPUS.iter().map(|s| s.to_string()).collect();
    let wrapped: Vec<String> = CORPUS
        .iter()
        .map(|s| format!("sh -c '{}'", s.replace('\'', "'\\''")))
        .collect();
    let as_bash = plan_decisions(&lines);
    let as_sh = plan_decisions(&wrapped);
    let mut wrong = Vec::new();
    let mut parted = 0;
    eprintln!("{:<46} bash  dash  zsh   plan  sh -c  zsh hook", "line");
    for (i, line) in CORPUS.iter().enumerate() {
        let by_bash = changes(&bash, line);
        let by_dash = changes(&dash, line);
        let by_zsh = zsh.as_deref().map(|z| changes(z, line));
        let zsh_hook = zsh.as_deref().map(|z| hook_decision(line, z));
        parted += usize::from(by_bash != by_dash || by_zsh.is_some_and(|z| z != by_bash));
        let mark = |c: bool| if c { "rm" } else { "-" };
        eprintln!(
            "{:<46} {:<5} {:<5} {:<5} {:<5} {:<6} {}",
            format!("{line:?}"),
            mark(by_bash),
            mark(by_dash),
            by_zsh.map_or("?", mark),
            as_bash[i],
            as_sh[i],
            zsh_hook.as_deref().unwrap_or("?"),
        );
        if as_bash[i] == "allow" && by_bash {
            wrong.push(format!(
                "{line:?}: allowed in plan mode, and bash changes the directory"
            ));
        }
        if as_sh[i] == "allow" && by_dash {
            wrong.push(format!(
                "sh -c {line:?}: allowed in plan mode, and dash changes the directory"
            ));
        }
        if zsh_hook.as_deref() == Some("allow") && by_zsh == Some(true) {
            wrong.push(format!(
                "{line:?}: allowed for an agent whose shell is zsh, and zsh changes the directory"
            ));
        }
    }
    // The corpus is worth its name only where the shells really part.
    assert!(parted >= 10, "only {parted} lines part the shells");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `cordon exec` in plan mode, one session: each line it allows runs, and the directory it
/// runs in is left as bash leaves it (unchanged), not as dash would.
fn exec_runs_what_it_allowed_with_bash() {
    let Some(dash) = installed("dash") else {
        common::skip("dash is not installed (Debian: apt-get install dash)");
    };
    let lines = [
        "cat README &>/dev/null rm -f f",
        "echo $'\\' ; rm -f f ; echo \\' #'",
        "# it's a comment\ncat README &>/dev/null rm -f f",
    ];
    for line in lines {
        assert!(
            changes(&dash, line),
            "dash should part from bash on {line:?}"
        );
    }
    // Warm (a sandbox kept for the session) and cold (a `cordon run` each).
    for env in [&[][..], &[("CORDON_NO_WARM", "1")][..]] {
        let dir = scratch();
        let before = state(dir.path());
        let events = exec_session(dir.path(), &["--mode", "plan"], &lines, env);
        for (id, line) in lines.iter().enumerate() {
            let exited = events
                .iter()
                .find(|e| e["type"] == "exited" && e["id"].as_str() == Some(&id.to_string()))
                .unwrap_or_else(|| panic!("{line:?} did not run: {events:?}"));
            assert_eq!(
                exited["refused"], false,
                "{line:?} should be allowed: {exited}"
            );
            assert_eq!(exited["sandboxed"], true, "{exited}");
            assert_eq!(exited["warm"], env.is_empty(), "{exited}");
        }
        assert_eq!(
            state(dir.path()),
            before,
            "a line changed the directory ({env:?})"
        );
    }
}

/// With `sandbox.excluded_commands = ["git"]`, a `git …` line runs outside the sandbox without
/// a question; the rest of the line must be the `git` the policy read, so nothing else runs on
/// the host (dash would run `touch` there).
fn a_line_run_outside_the_sandbox_is_the_line_that_was_read() {
    let dir = scratch();
    let outside = tempfile::tempdir_in("/var/tmp").expect("temp dir");
    let planted = outside.path().join("planted");
    std::fs::create_dir_all(dir.path().join(".cordon")).expect("mkdir");
    std::fs::write(
        dir.path().join(".cordon/cordon.toml"),
        "[sandbox]\nexcluded_commands = [\"git\"]\n",
    )
    .expect("write settings");
    let line = format!("git status &>/dev/null touch {}", planted.display());
    let events = exec_session(dir.path(), &["--trust-project"], &[line.as_str()], &[]);
    let exited = events
        .iter()
        .find(|e| e["type"] == "exited")
        .unwrap_or_else(|| panic!("the line did not run: {events:?}"));
    assert_eq!(exited["refused"], false, "it should be allowed: {exited}");
    assert_eq!(
        exited["sandboxed"], false,
        "it should run outside: {exited}"
    );
    assert!(!planted.exists(), "`touch` ran on the host");
}

/// `cordon run -c LINE` runs the line with bash too, whatever `sh` is, and with no start-up
/// code from the environment (`BASH_ENV` would run a file before the line).
fn a_run_c_line_runs_with_bash_alone() {
    let dir = scratch();
    let start_up = dir.path().join("start-up");
    std::fs::write(&start_up, "rm -f g\n").expect("write");
    let out = Command::new(cordon_bin())
        .args([
            "run",
            "-c",
            "echo \"$BASH_VERSION\"; cat README &>/dev/null rm -f f; true",
        ])
        .current_dir(dir.path())
        .env("BASH_ENV", &start_up)
        .env("ENV", &start_up)
        .env("BASH_FUNC_cat%%", "() { rm -f g; }")
        .output()
        .expect("cordon run");
    if !out.status.success() && stderr(&out).contains("user namespaces") {
        common::skip("no sandbox here");
    }
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "not bash"
    );
    assert!(dir.path().join("f").exists(), "dash's reading ran");
    assert!(
        dir.path().join("g").exists(),
        "start-up code from the environment ran"
    );
}

/// One `cordon exec --jsonl` session running `lines` (ids "0", "1", …) one after another,
/// with `flags`, every question answered no; every event it wrote. A session that has not
/// ended after a minute is killed, and the test fails for want of its events.
fn exec_session(dir: &Path, flags: &[&str], lines: &[&str], env: &[(&str, &str)]) -> Vec<Value> {
    let mut child = Command::new(cordon_bin())
        .args(["exec", "--jsonl"])
        .args(flags)
        .current_dir(dir)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start cordon exec");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut reader = BufReader::new(child.stdout.take().expect("stdout"));
    let pid = child.id().to_string();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watch = std::sync::Arc::clone(&done);
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(60));
        if !watch.load(std::sync::atomic::Ordering::SeqCst) {
            let _ = Command::new("kill").args(["-9", &pid]).status();
        }
    });
    let mut events = Vec::new();
    for (id, line) in lines.iter().enumerate() {
        let request = json!({"type": "run", "id": id.to_string(), "command": line});
        writeln!(stdin, "{request}").expect("send");
        // One at a time, so that each runs in the directory as the last left it.
        loop {
            let mut text = String::new();
            if reader.read_line(&mut text).expect("read") == 0 {
                panic!("cordon exec ended early: {events:?}");
            }
            let event: Value = serde_json::from_str(&text).expect("an event");
            if event["type"] == "ask" {
                let no = json!({"type": "answer", "id": event["id"], "allow": false});
                writeln!(stdin, "{no}").expect("answer");
            }
            let ended = event["id"].as_str() == Some(&id.to_string())
                && matches!(event["type"].as_str(), Some("exited" | "error"));
            events.push(event);
            if ended {
                break;
            }
        }
    }
    drop(stdin);
    let _ = child.wait();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    events
}

common::tests!(
    "shells.rs":
    what_the_policy_allows_changes_nothing_in_the_shell_that_runs_it,
    exec_runs_what_it_allowed_with_bash,
    a_line_run_outside_the_sandbox_is_the_line_that_was_read,
    a_run_c_line_runs_with_bash_alone,
);
