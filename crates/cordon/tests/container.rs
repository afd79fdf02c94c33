//! `cordon run --backend docker` against a real engine.
//!
//! No registry is reachable from CI, so the tests make their own image: a root file system
//! holding the host's static busybox, imported with `docker import`. A machine without a
//! running Docker engine (or without busybox-static) skips these tests with the reason,
//! unless `CORDON_TEST_NO_SKIP` is set (CI), where a skip is a failure.

mod common;

use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::engines::{Eng, IMAGE, NO_BASH_IMAGE};
use common::skip;
use common::{cordon_bin, stderr, stdout};

/// A project directory with a name of its own, so its containers can be told apart.
struct Project {
    dir: tempfile::TempDir,
    engine: Eng,
}

impl Project {
    fn new(engine: Eng) -> Project {
        if let Err(why) = engine.ready() {
            skip(why);
        }
        let dir = tempfile::Builder::new()
            .prefix("cordonct")
            .tempdir()
            .expect("temp dir");
        Project { dir, engine }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `cordon-<project>-`: how this project's containers are named.
    fn name_prefix(&self) -> String {
        let base = self.path().file_name().unwrap().to_string_lossy();
        format!("cordon-{}-", base.to_ascii_lowercase())
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(cordon_bin());
        cmd.args(["run", "--backend", self.engine.name()]);
        if let Some(conf) = self.engine.conf() {
            cmd.env("CONTAINERS_CONF", conf);
        }
        if !args.contains(&"--image") {
            cmd.args(["--image", IMAGE]);
        }
        cmd.args(args)
            .current_dir(self.path())
            .env_remove("CORDON_SANDBOX")
            .env_remove("CORDON_DEBUG")
            .stdin(Stdio::null());
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run cordon")
    }

    fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.command(args)
            .envs(env.iter().copied())
            .output()
            .expect("run cordon")
    }

    /// This project's containers, running or not.
    fn containers(&self) -> Vec<String> {
        let out = self.engine.run(&[
            "ps",
            "-a",
            "--format",
            "{{.Names}}",
            "--filter",
            &format!("name={}", self.name_prefix()),
        ]);
        stdout(&out).lines().map(str::to_string).collect()
    }
}

fn exit_codes_pass_through_unchanged(e: Eng) {
    let p = Project::new(e);
    for code in [0, 1, 7, 125, 126, 127, 255] {
        let out = p.run(&["--", "sh", "-c", &format!("exit {code}")]);
        assert_eq!(out.status.code(), Some(code), "{}", stderr(&out));
    }
    assert!(p.containers().is_empty(), "--rm left {:?}", p.containers());
}

/// A command line (`-c`) runs with the image's bash, as the policy reads it; in an image
/// without bash it is refused, never handed to the image's `sh` (busybox's ash here, which
/// would run the `rm` that bash reads as an argument).
fn a_command_line_runs_with_the_images_bash_or_not_at_all(e: Eng) {
    let p = Project::new(e);
    std::fs::write(p.path().join("f"), "keep\n").unwrap();
    let line = "echo \"bash $BASH_VERSION\"; cat README &>/dev/null rm -f f; true";
    let out = p.run(&["-c", line]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("bash 5"), "{}", stdout(&out));
    assert!(
        p.path().join("f").exists(),
        "the line ran with another shell"
    );

    let out = p.run(&["--image", NO_BASH_IMAGE, "-c", line]);
    assert_eq!(out.status.code(), Some(127), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("this image has no bash"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    assert!(p.path().join("f").exists(), "the line ran without bash");
    // A program given directly still runs there.
    let out = p.run(&["--image", NO_BASH_IMAGE, "--", "sh", "-c", "echo direct"]);
    assert_eq!(stdout(&out), "direct\n", "{}", stderr(&out));
}

fn piped_stdin_reaches_the_program(e: Eng) {
    let p = Project::new(e);
    let mut child = p
        .command(&["--", "sh", "-c", "tr a-z A-Z; echo done"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run cordon");
    let text = "hello\n".repeat(10_000);
    let mut input = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || input.write_all(text.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let s = stdout(&out);
    assert_eq!(s.matches("HELLO\n").count(), 10_000);
    assert!(s.ends_with("done\n"));
}

fn the_project_is_mounted_at_its_own_path_and_is_the_working_directory(e: Eng) {
    let p = Project::new(e);
    std::fs::write(p.path().join("in.txt"), "from the host\n").unwrap();
    let out = p.run(&["--", "sh", "-c", "pwd; cat in.txt; echo written > out.txt"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let real = std::fs::canonicalize(p.path()).unwrap();
    assert_eq!(stdout(&out), format!("{}\nfrom the host\n", real.display()));
    assert_eq!(
        std::fs::read_to_string(p.path().join("out.txt")).unwrap(),
        "written\n"
    );
}

fn extra_mounts_are_read_only_by_default_and_must_exist(e: Eng) {
    let p = Project::new(e);
    let extra = tempfile::tempdir().unwrap();
    std::fs::write(extra.path().join("data"), "shared\n").unwrap();
    let mounts = format!(
        "{},{}:/rw:rw",
        extra.path().display(),
        extra.path().display()
    );
    let script = format!(
        "cat {d}/data; touch {d}/new 2>/dev/null && echo wrote-ro; touch /rw/new && echo wrote-rw",
        d = extra.path().display()
    );
    let out = p.run_env(
        &["--", "sh", "-c", &script],
        &[("CORDON_SANDBOX_MOUNTS", &mounts)],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "shared\nwrote-rw\n");
    assert!(extra.path().join("new").exists());

    let out = p.run_env(
        &["--", "true"],
        &[("CORDON_SANDBOX_MOUNTS", "/no/such/dir-for-cordon")],
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("CORDON_SANDBOX_MOUNTS: /no/such/dir-for-cordon"),
        "{}",
        stderr(&out)
    );
}

fn protected_files_in_the_project_stay_read_only(e: Eng) {
    let p = Project::new(e);
    std::fs::create_dir_all(p.path().join(".git/hooks")).unwrap();
    let out = p.run(&[
        "--",
        "sh",
        "-c",
        "echo evil > .git/hooks/pre-commit 2>/dev/null && echo wrote; echo ok > fine.txt && echo fine",
    ]);
    assert_eq!(stdout(&out), "fine\n", "{}", stderr(&out));
    assert!(!p.path().join(".git/hooks/pre-commit").exists());
}

/// cordon reads a project's `.cordon/` live (`exec` per request), so a run must not be able to
/// create it where it is missing: it is made before the run, read-only inside, and removed
/// after it while still empty.
fn cordons_own_state_cannot_be_planted_from_inside(e: Eng) {
    let p = Project::new(e);
    let out = p.run(&[
        "--",
        "sh",
        "-c",
        "mkdir -p .cordon/policies 2>/dev/null; echo '[[rule]]' > .cordon/policies/evil.toml 2>/dev/null && echo planted; echo done",
    ]);
    assert_eq!(stdout(&out), "done\n", "{}", stderr(&out));
    assert!(
        !p.path().join(".cordon").exists(),
        "the run left .cordon behind: {}",
        stderr(&out)
    );
}

fn denied_paths_are_hidden_inside(e: Eng) {
    let p = Project::new(e);
    std::fs::create_dir_all(p.path().join("secrets")).unwrap();
    std::fs::write(p.path().join("secrets/key"), "k").unwrap();
    std::fs::write(p.path().join(".env"), "TOKEN=t").unwrap();
    let out = p.run(&[
        "--deny-read",
        "secrets",
        "--deny-read",
        ".env",
        "--",
        "sh",
        "-c",
        "ls -A secrets; cat .env; echo x > secrets/new 2>/dev/null && echo wrote; echo end",
    ]);
    assert_eq!(stdout(&out), "end\n", "{}", stderr(&out));
    assert!(!p.path().join("secrets/new").exists());
    assert_eq!(
        std::fs::read_to_string(p.path().join(".env")).unwrap(),
        "TOKEN=t"
    );
}

fn a_terminal_is_a_terminal_inside_and_a_pipe_is_not(e: Eng) {
    let p = Project::new(e);
    let script = "[ -t 0 ] && echo stdin-tty; [ -t 1 ] && echo stdout-tty; exit 4";
    let out = p.run(&["--", "sh", "-c", script]);
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(stdout(&out), "", "{}", stderr(&out));
    // script(1) gives cordon a terminal of its own. Docker only: under Podman 4.3 a
    // terminal's output was lost once in six full runs of this suite on a loaded machine
    // (exit status intact; never in 30 runs alone), which is the engine's attach, not cordon.
    if e == Eng::Podman {
        return;
    }
    if Command::new("script").arg("--version").output().is_err() {
        skip("script (util-linux) is not installed");
    }
    let mut line = format!("{} run --backend {}", cordon_bin().display(), e.name());
    line.push_str(&format!(" --image {IMAGE} -- sh -c '{script}'"));
    let mut cmd = Command::new("script");
    cmd.args(["-qec", &line, "/dev/null"])
        .current_dir(p.path())
        .env_remove("CORDON_SANDBOX")
        .stdin(Stdio::null());
    if let Some(conf) = e.conf() {
        cmd.env("CONTAINERS_CONF", conf);
    }
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("stdin-tty") && text.contains("stdout-tty"),
        "{text:?}"
    );
}

fn the_ssh_agent_is_forwarded_unless_turned_off(e: Eng) {
    let p = Project::new(e);
    if Command::new("ssh-agent").arg("-h").output().is_err() {
        skip("ssh-agent is not installed (Debian: openssh-client)");
    }
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("agent.sock");
    // An agent of the test's own, with no keys, in the foreground (-D) so it can be ended.
    let mut agent = Command::new("ssh-agent")
        .arg("-D")
        .arg("-a")
        .arg(&sock)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !sock.exists() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let sock_text = sock.to_str().unwrap();
    let script = "echo $SSH_AUTH_SOCK; [ -S /ssh-agent ] && echo socket";
    let out = p.run_env(&["--", "sh", "-c", script], &[("SSH_AUTH_SOCK", sock_text)]);
    assert_eq!(stdout(&out), "/ssh-agent\nsocket\n", "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the SSH agent holds no keys"),
        "{}",
        stderr(&out)
    );
    let out = p.run_env(
        &["--no-ssh-agent", "--", "sh", "-c", script],
        &[("SSH_AUTH_SOCK", sock_text)],
    );
    assert_eq!(stdout(&out), "\n", "{}", stderr(&out));
    let _ = agent.kill();
    let _ = agent.wait();
}

fn only_allowed_variables_pass_and_secrets_stay_off_the_command_line(e: Eng) {
    let p = Project::new(e);
    let env = [
        ("TERM", "xterm-test"),
        ("MY_SECRET_TOKEN", "tok"),
        ("SOME_VAR", "x"),
        ("ANTHROPIC_API_KEY", "sk-ant-test-value"),
        ("CORDON_SANDBOX_ENV", "FOO=bar,DB_PASSWORD=hunter2"),
    ];
    let script = "echo TERM=$TERM; echo TOKEN=$MY_SECRET_TOKEN; echo SOME=$SOME_VAR; \
                  echo KEY=$ANTHROPIC_API_KEY; echo FOO=$FOO; echo DB=$DB_PASSWORD; \
                  echo SANDBOX=$CORDON_SANDBOX; echo GIT=$GIT_DISCOVERY_ACROSS_FILESYSTEM";
    let out = p.run_env(&["--", "sh", "-c", script], &env);
    assert!(out.status.success(), "{}", stderr(&out));
    let s = stdout(&out);
    assert!(s.contains("TERM=xterm-test\n"), "{s}");
    assert!(
        s.contains("TOKEN=\n") && s.contains("SOME=\n") && s.contains("KEY=\n"),
        "{s}"
    );
    assert!(s.contains("FOO=bar\n") && s.contains("DB=hunter2\n"), "{s}");
    assert!(s.contains(&format!("SANDBOX={}", p.name_prefix())), "{s}");
    assert!(s.contains("GIT=1\n"), "{s}");

    let mut args = vec!["--pass-api-keys", "--", "sh", "-c", script];
    let out = p.run_env(&args, &env);
    assert!(
        stdout(&out).contains("KEY=sk-ant-test-value\n"),
        "{}",
        stdout(&out)
    );
    // The exact command, without the secret values, also under CORDON_DEBUG.
    args.insert(0, "--dry-run");
    let out = p.run_env(&args, &env);
    let line = stdout(&out);
    assert!(
        line.starts_with(&format!("{} run -i --rm --init ", p.engine.name())),
        "{line}"
    );
    assert!(line.contains(" -e ANTHROPIC_API_KEY ") && line.contains(" -e DB_PASSWORD "));
    assert!(
        !line.contains("sk-ant-test-value") && !line.contains("hunter2"),
        "{line}"
    );
    let mut debug = env.to_vec();
    debug.push(("CORDON_DEBUG", "1"));
    let out = p.run_env(&args[1..], &debug);
    assert!(
        stderr(&out).contains(&format!("cordon: {} run -i --rm", p.engine.name())),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("hunter2"));

    let out = p.run_env(&["--", "true"], &[("CORDON_SANDBOX_ENV", "GOOD=1,BROKEN")]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("CORDON_SANDBOX_ENV: `BROKEN`: write NAME=VALUE"),
        "{}",
        stderr(&out)
    );
}

fn no_network_when_nothing_is_allowed(e: Eng) {
    let p = Project::new(e);
    let out = p.run(&["--", "ls", "/sys/class/net"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "lo\n");
}

/// A web server on the host's loopback answering every request with `body`.
fn web_server(body: &'static str) -> u16 {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut seen = Vec::new();
            let mut buf = [0u8; 1024];
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
            }
            let _ = write!(
                conn,
                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

fn allowed_domains_are_reached_through_cordons_proxy_and_nothing_else(e: Eng) {
    let p = Project::new(e);
    if !is_root() {
        skip("handing the proxy's ports into a rootful engine's container needs root");
    }
    let port = web_server("hello-through-proxy");
    let script = format!(
        "ls /sys/class/net; \
         wget -qO- http://allowed.test:{port}/ && echo; echo allowed=$?; \
         wget -qO- http://denied.test:{port}/ 2>/dev/null; echo denied=$?; \
         if echo x | nc -w 2 127.0.0.1 {port} 2>/dev/null; then echo direct=open; \
         else echo direct=refused; fi"
    );
    let report = p.path().join("report.json");
    let out = p.run(&[
        "--report",
        report.to_str().unwrap(),
        "--allow-domain",
        "allowed.test",
        "--resolve",
        "allowed.test=127.0.0.1",
        "--resolve",
        "denied.test=127.0.0.1",
        "--allow-private-ips",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Still no network but loopback; the allowed host answers through the proxy, the other
    // is refused there, and going around the proxy reaches only the container's own loopback.
    assert_eq!(
        stdout(&out),
        "lo\nhello-through-proxy\nallowed=0\ndenied=1\ndirect=refused\n",
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains(&format!("connect denied.test:{port}")),
        "{}",
        stderr(&out)
    );
    let report = std::fs::read_to_string(&report).unwrap();
    assert!(report.contains(&format!("denied.test:{port}")), "{report}");
    assert!(report.contains("\"exit_code\": 0"), "{report}");
    assert!(p.containers().is_empty());
}

fn files_written_inside_belong_to_the_host_user() {
    let p = Project::new(Eng::Docker);
    // An unprivileged user who may use the engine's socket (as members of its group may).
    let socket = Path::new("/var/run/docker.sock");
    let Ok(meta) = std::fs::metadata(socket) else {
        skip("no /var/run/docker.sock to hand an unprivileged user");
    };
    if Command::new("setpriv").arg("--version").output().is_err() || !is_root() {
        skip("the user-mapping test needs root and setpriv (util-linux)");
    }
    let (uid, gid) = (4321u32, 4321u32);
    let bin = p.path().join("cordon");
    std::fs::copy(cordon_bin(), &bin).unwrap();
    let home = p.path().join("home");
    let work = p.path().join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    for d in [p.path(), &home, &work] {
        std::os::unix::fs::chown(d, Some(uid), Some(gid)).unwrap();
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .arg(format!("--groups={}", meta.gid()))
        .arg(&bin)
        .args(["run", "--backend", "docker", "--image", IMAGE, "--"])
        .args([
            "sh",
            "-c",
            "id -u; id -un; echo $HOME; touch $HOME/ok && echo home-writable; echo hi > made.txt",
        ])
        .current_dir(&work)
        .env("HOME", &home)
        .env("USER", "tester")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("CORDON_SANDBOX")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!("{uid}\ntester\n{}\nhome-writable\n", home.display())
    );
    let made = std::fs::metadata(work.join("made.txt")).unwrap();
    assert_eq!((made.uid(), made.gid()), (uid, gid));
    // Turned off: the image's user (root here) writes the file.
    let out = Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .arg(format!("--groups={}", meta.gid()))
        .arg(&bin)
        .args(["run", "--backend", "docker", "--image", IMAGE, "--"])
        .args(["sh", "-c", "id -u"])
        .current_dir(&work)
        .env("HOME", &home)
        .env("CORDON_SANDBOX_SET_UID_GID", "0")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "0\n", "{}", stderr(&out));
    // Allowed domains need root to reach into the container's network namespace: said
    // before anything starts.
    let out = Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .arg(format!("--groups={}", meta.gid()))
        .arg(&bin)
        .args(["run", "--backend", "docker", "--image", IMAGE])
        .args(["--allow-domain", "example.test", "--", "true"])
        .current_dir(&work)
        .env("HOME", &home)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("--allow-domain with a container needs cordon to run as root"),
        "{}",
        stderr(&out)
    );
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| stdout(&o).trim() == "0")
}

/// Starts `sleep` in a container, waits until it runs, sends `signal` to the launcher, and
/// checks the container is gone soon after.
fn container_is_removed_after(e: Eng, signal: &str) {
    let p = Project::new(e);
    let mut child = p
        .command(&["--", "sleep", "300"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run cordon");
    let start = Instant::now();
    while p.containers().is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the container never started"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let killed = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let _ = child.wait();
    let start = Instant::now();
    loop {
        let left = p.containers();
        if left.is_empty() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "after SIG{signal} to cordon, the container is still there: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn sigterm_to_the_launcher_removes_the_container(e: Eng) {
    container_is_removed_after(e, "TERM");
}

fn a_killed_launcher_leaves_no_container(e: Eng) {
    container_is_removed_after(e, "KILL");
}

fn sigint_to_the_launcher_removes_the_container(e: Eng) {
    container_is_removed_after(e, "INT");
}

fn concurrent_runs_get_their_own_containers(e: Eng) {
    let p = Project::new(e);
    let children: Vec<_> = (0..3)
        .map(|i| {
            p.command(&["--", "sh", "-c", &format!("sleep 1; exit {i}")])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, c) in children.into_iter().enumerate() {
        let out = c.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(i as i32), "{}", stderr(&out));
    }
}

fn timeout_stops_the_container(e: Eng) {
    let p = Project::new(e);
    let start = Instant::now();
    let out = p.run(&["--timeout", "1", "--", "sleep", "60"]);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(start.elapsed() < Duration::from_secs(30));
    assert!(stderr(&out).contains("--timeout"));
}

fn the_project_recipe_is_built_once_and_its_startup_file_sourced(e: Eng) {
    let p = Project::new(e);
    let dot = p.path().join(".cordon");
    std::fs::create_dir_all(&dot).unwrap();
    // A changed recipe each test run, so the build really happens here.
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    std::fs::write(
        dot.join("sandbox.Dockerfile"),
        format!("FROM {IMAGE}\nRUN echo built-{stamp} > /built\n"),
    )
    .unwrap();
    std::fs::write(dot.join("sandbox.bashrc"), "export FROM_RC=sourced\n").unwrap();
    let run = |p: &Project| {
        let mut cmd = Command::new(cordon_bin());
        if let Some(conf) = p.engine.conf() {
            cmd.env("CONTAINERS_CONF", conf);
        }
        cmd.args(["run", "--backend", p.engine.name()])
            .args(["--", "sh", "-c", "cat /built; echo $FROM_RC"])
            .current_dir(p.path())
            .env_remove("CORDON_SANDBOX_IMAGE")
            .env_remove("CORDON_SANDBOX")
            .env("DOCKER_BUILDKIT", "0")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = run(&p);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), format!("built-{stamp}\nsourced\n"));
    assert!(
        stderr(&out).contains("cordon: building cordon-sandbox-"),
        "{}",
        stderr(&out)
    );
    let again = run(&p);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(!stderr(&again).contains("building"), "{}", stderr(&again));
    let tags = p
        .engine
        .run(&["images", "--format", "{{.Repository}}:{{.Tag}}"]);
    for tag in stdout(&tags).lines().filter(|t| {
        let base = p
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_ascii_lowercase();
        t.trim_start_matches("localhost/")
            .starts_with(&format!("cordon-sandbox-{base}:"))
    }) {
        p.engine.run(&["rmi", "-f", tag]);
    }
}

fn publish_is_refused_with_the_containers_way() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(cordon_bin())
        .args([
            "run",
            "--backend",
            "docker",
            "--image",
            "x",
            "--publish",
            "18123:80",
        ])
        .args(["--", "true"])
        .current_dir(dir.path())
        .env_remove("CORDON_SANDBOX")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("CORDON_SANDBOX_PORTS"),
        "{}",
        stderr(&out)
    );
}

fn the_safe_profile_keeps_the_root_file_system_read_only(e: Eng) {
    let p = Project::new(e);
    let out = p.run(&[
        "--container-profile",
        "safe",
        "--",
        "sh",
        "-c",
        "touch /etc/x 2>/dev/null || echo root-ro; touch $HOME/x && echo home-ok; \
         touch /tmp/x && echo tmp-ok; echo w > w.txt && echo project-ok",
    ]);
    assert_eq!(
        stdout(&out),
        "root-ro\nhome-ok\ntmp-ok\nproject-ok\n",
        "{}",
        stderr(&out)
    );
}

fn a_program_inside_never_launches_another(e: Eng) {
    let p = Project::new(e);
    let out = p.run_env(&["--", "true"], &[("CORDON_SANDBOX", "cordon-x-12345678")]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("already inside the container cordon-x-12345678"));
}

fn an_unreachable_engine_says_to_start_it() {
    let p = Project::new(Eng::Docker);
    let out = p.run_env(
        &["--", "true"],
        &[("DOCKER_HOST", "unix:///nonexistent/cordon-test.sock")],
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("cannot reach the docker engine: start it"),
        "{}",
        stderr(&out)
    );
}

fn a_bad_image_name_is_blamed_on_the_name(e: Eng) {
    let p = Project::new(e);
    let out = p.run(&["--image", "Not/A-Valid:Name!", "--", "true"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("check the image name"),
        "{}",
        stderr(&out)
    );
}

/// These need no engine at all.
fn a_missing_engine_says_what_to_install() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(cordon_bin())
        .args(["run", "--backend", "podman", "--image", "x", "--", "true"])
        .current_dir(dir.path())
        .env("PATH", dir.path())
        .env_remove("CORDON_SANDBOX")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("podman is not installed (not found on PATH): install Podman"),
        "{}",
        stderr(&out)
    );
}

fn without_an_image_the_error_says_how_to_give_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(cordon_bin())
        .args(["run", "--backend", "docker", "--dry-run", "--", "true"])
        .current_dir(dir.path())
        .env_remove("CORDON_SANDBOX_IMAGE")
        .env_remove("CORDON_SANDBOX")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no container image: give --image NAME"));
}

fn dry_run_needs_no_engine_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(cordon_bin())
        .args([
            "run",
            "--dry-run",
            "--container-profile",
            "tight",
            "--",
            "sh",
            "-c",
            "echo 'a b'",
        ])
        .current_dir(dir.path())
        .env("PATH", dir.path())
        .env("CORDON_SANDBOX", "docker")
        .env("CORDON_SANDBOX_IMAGE", "some/image:1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let line = stdout(&out);
    assert!(
        line.starts_with("docker run -i --rm --init --name cordon-"),
        "{line}"
    );
    assert!(
        line.contains(" --read-only ") && line.contains(" --pids-limit=256 "),
        "{line}"
    );
    let words = shlex::split(&line).unwrap();
    assert_eq!(words[words.len() - 3..], ["sh", "-c", "echo 'a b'"]);
    let bad = Command::new(cordon_bin())
        .args([
            "run",
            "--backend",
            "docker",
            "--dry-run",
            "--container-profile",
            "lax",
        ])
        .args(["--image", "x", "--", "true"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(stderr(&bad).contains("no such profile; choose one of dev, safe, tight, offline"));
}

/// The tests above that take an engine, run once per engine.
type EngineTest = (&'static str, fn(Eng));

const FOR_EACH_ENGINE: &[EngineTest] = &[
    (
        "exit_codes_pass_through_unchanged",
        exit_codes_pass_through_unchanged,
    ),
    (
        "a_command_line_runs_with_the_images_bash_or_not_at_all",
        a_command_line_runs_with_the_images_bash_or_not_at_all,
    ),
    (
        "piped_stdin_reaches_the_program",
        piped_stdin_reaches_the_program,
    ),
    (
        "the_project_is_mounted_at_its_own_path_and_is_the_working_directory",
        the_project_is_mounted_at_its_own_path_and_is_the_working_directory,
    ),
    (
        "extra_mounts_are_read_only_by_default_and_must_exist",
        extra_mounts_are_read_only_by_default_and_must_exist,
    ),
    (
        "protected_files_in_the_project_stay_read_only",
        protected_files_in_the_project_stay_read_only,
    ),
    (
        "cordons_own_state_cannot_be_planted_from_inside",
        cordons_own_state_cannot_be_planted_from_inside,
    ),
    (
        "denied_paths_are_hidden_inside",
        denied_paths_are_hidden_inside,
    ),
    (
        "a_terminal_is_a_terminal_inside_and_a_pipe_is_not",
        a_terminal_is_a_terminal_inside_and_a_pipe_is_not,
    ),
    (
        "the_ssh_agent_is_forwarded_unless_turned_off",
        the_ssh_agent_is_forwarded_unless_turned_off,
    ),
    (
        "only_allowed_variables_pass_and_secrets_stay_off_the_command_line",
        only_allowed_variables_pass_and_secrets_stay_off_the_command_line,
    ),
    (
        "no_network_when_nothing_is_allowed",
        no_network_when_nothing_is_allowed,
    ),
    (
        "allowed_domains_are_reached_through_cordons_proxy_and_nothing_else",
        allowed_domains_are_reached_through_cordons_proxy_and_nothing_else,
    ),
    (
        "concurrent_runs_get_their_own_containers",
        concurrent_runs_get_their_own_containers,
    ),
    ("timeout_stops_the_container", timeout_stops_the_container),
    (
        "the_project_recipe_is_built_once_and_its_startup_file_sourced",
        the_project_recipe_is_built_once_and_its_startup_file_sourced,
    ),
    (
        "a_program_inside_never_launches_another",
        a_program_inside_never_launches_another,
    ),
    (
        "the_safe_profile_keeps_the_root_file_system_read_only",
        the_safe_profile_keeps_the_root_file_system_read_only,
    ),
    (
        "a_bad_image_name_is_blamed_on_the_name",
        a_bad_image_name_is_blamed_on_the_name,
    ),
    (
        "sigterm_to_the_launcher_removes_the_container",
        sigterm_to_the_launcher_removes_the_container,
    ),
    (
        "a_killed_launcher_leaves_no_container",
        a_killed_launcher_leaves_no_container,
    ),
    (
        "sigint_to_the_launcher_removes_the_container",
        sigint_to_the_launcher_removes_the_container,
    ),
];

/// A Pod rendered by `cordon run --backend kubernetes --k8s-kind pod --dry-run ARGS` in the
/// project, started by `podman kube play` with no network (no cluster is reachable here).
/// Podman does not implement NetworkPolicy; `--network none` stands in for the policy that
/// lets a pod with no allowed host reach nothing (docs/PLATFORMS.md).
struct PlayedPod {
    name: String,
    file: std::path::PathBuf,
}

impl PlayedPod {
    fn play(p: &Project, args: &[&str]) -> PlayedPod {
        let image = format!("localhost/{IMAGE}");
        let o = Command::new(cordon_bin())
            .args(["run", "--backend", "kubernetes", "--k8s-kind", "pod"])
            .args(["--dry-run", "--image", &image])
            .args(args)
            .current_dir(p.path())
            .output()
            .expect("run cordon");
        assert!(o.status.success(), "{}", stderr(&o));
        let yaml = stdout(&o);
        let pod = yaml
            .split("---\n")
            .find(|doc| doc.lines().any(|l| l == "kind: Pod"))
            .expect("a Pod");
        let name = pod
            .lines()
            .skip_while(|l| *l != "metadata:")
            .find_map(|l| l.strip_prefix("  name: "))
            .expect("the pod's name")
            .to_string();
        // Beside the project, so that the copies do not carry it.
        let file = p.path().with_extension("pod.yaml");
        std::fs::write(&file, pod).expect("write");
        let played = PlayedPod { name, file };
        let out = Eng::Podman.run(&["kube", "play", "--network", "none", played.file()]);
        assert!(out.status.success(), "{}", stderr(&out));
        played
    }

    fn file(&self) -> &str {
        self.file.to_str().expect("utf-8")
    }

    fn container(&self, which: &str) -> String {
        format!("{}-{which}", self.name)
    }

    /// The exit status of the pod's container `which`, once it has exited.
    fn exited(&self, which: &str, within: Duration) -> String {
        let end = Instant::now() + within;
        loop {
            let state = Eng::Podman.run(&[
                "inspect",
                &self.container(which),
                "--format",
                "{{.State.Status}} {{.State.ExitCode}}",
            ]);
            let state = stdout(&state);
            if let Some(code) = state.trim().strip_prefix("exited ") {
                return code.to_string();
            }
            assert!(Instant::now() < end, "{which} is still {state}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn logs(&self, which: &str) -> String {
        let logs = Eng::Podman.run(&["logs", &self.container(which)]);
        format!("{}{}", stdout(&logs), stderr(&logs))
    }

    /// Runs `argv` in the container `which`, as cordon's client does over the cluster's API.
    fn exec(&self, which: &str, argv: &[String], input: &[u8]) -> Output {
        let mut cmd = Eng::Podman.command(Eng::Podman.conf().as_deref());
        let mut child = cmd
            .args(["exec", "-i", &self.container(which)])
            .args(argv)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("podman exec");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(input).expect("write to podman exec");
        drop(stdin);
        child.wait_with_output().expect("podman exec")
    }
}

impl Drop for PlayedPod {
    fn drop(&mut self) {
        Eng::Podman.run(&["kube", "down", self.file()]);
        let _ = std::fs::remove_file(&self.file);
    }
}

/// The Pod with an empty working directory, as a person would apply it by hand: the command
/// runs as the unprivileged user in the working directory, its output and exit status come
/// back, the working directory and /tmp are writable and the rest is read-only, and the pod
/// has no network but loopback.
fn the_rendered_pod_runs_under_podman_kube_play() {
    let p = Project::new(Eng::Podman);
    let script = "echo hi; id -u; pwd; echo x > /etc/planted; echo y > ./in-ws && echo ws-ok; \
                  echo t > /tmp/t && echo tmp-ok; echo nets: $(ls /sys/class/net); exit 3";
    let pod = PlayedPod::play(&p, &["--k8s-workspace", "empty", "--", "sh", "-c", script]);
    let code = pod.exited("run", Duration::from_secs(60));
    let said = pod.logs("run");
    assert_eq!(code, "3", "{said}");
    let cwd = p.path().to_str().expect("utf-8");
    for want in [
        "hi\n",
        "65532\n",
        &format!("{cwd}\n"),
        "Read-only file system",
        "ws-ok\n",
        "tmp-ok\n",
        "nets: lo\n",
    ] {
        assert!(said.contains(want), "{want:?} in:\n{said}");
    }
}

fn walls(p: &Project) -> cordon_app::workspace::Walls {
    cordon_app::workspace::Walls {
        hidden: vec![p.path().join(".env")],
        ..Default::default()
    }
}

/// The working directory copied in and back the way `cordon run --backend kubernetes` does it,
/// with podman's `exec` in place of the cluster's: the command waits for its directory, sees
/// it but not the hidden `.env`, and what it changed comes back, except what the local sandbox
/// would have kept read-only. The copying container then ends by itself.
fn the_working_directory_goes_to_the_pod_and_back_within_the_walls() {
    use cordon_app::run::kubernetes::sync;
    use cordon_sandbox::kubernetes::copy;
    let p = Project::new(Eng::Podman);
    std::fs::write(p.path().join("in.txt"), "from the laptop\n").expect("write");
    std::fs::write(p.path().join("old.txt"), "old\n").expect("write");
    std::fs::write(p.path().join(".env"), "TOKEN=secret\n").expect("write");
    let script = "cat in.txt; ls -a; echo changed > in.txt; echo new > new.txt; rm old.txt; \
                  echo evil > .bashrc; exit 3";
    let pod = PlayedPod::play(&p, &["--", "sh", "-c", script]);
    let root = cordon_sandbox::beneath::Root::open(p.path()).expect("open");
    let mut tar = Vec::new();
    let sent = sync::pack(&root, &walls(&p), &mut tar).expect("pack");
    let cwd = p.path().to_str().expect("utf-8");
    let framed = [copy::length_line(tar.len() as u64).into_bytes(), tar].concat();
    let copied_in = pod.exec(copy::CONTAINER, &copy::copy_in(cwd), &framed);
    assert!(copied_in.status.success(), "{}", stderr(&copied_in));
    let code = pod.exited(copy::RUN_CONTAINER, Duration::from_secs(60));
    let said = pod.logs(copy::RUN_CONTAINER);
    assert_eq!(code, "3", "{said}");
    let recorded = pod.exec(copy::CONTAINER, &copy::read_exit(), b"");
    assert_eq!(stdout(&recorded), "3\n", "the gate's record of the status");
    assert!(said.contains("from the laptop\n"), "{said}");
    assert!(!said.contains(".env"), "the hidden file was sent: {said}");
    let back = pod.exec(copy::CONTAINER, &copy::copy_back(cwd), b"");
    assert!(back.status.success(), "{}", stderr(&back));
    let report = sync::unpack(&root, &walls(&p), &sent, back.stdout.as_slice()).expect("unpack");
    let read = |f: &str| std::fs::read_to_string(p.path().join(f)).unwrap_or_default();
    assert_eq!(read("in.txt"), "changed\n", "{report:?}");
    assert_eq!(read("new.txt"), "new\n");
    assert!(!p.path().join("old.txt").exists());
    assert!(!p.path().join(".bashrc").exists(), "{report:?}");
    assert_eq!(read(".env"), "TOKEN=secret\n");
    assert!(
        report
            .refused
            .iter()
            .any(|(f, _)| f == Path::new(".bashrc"))
    );
    assert_eq!(pod.exited(copy::CONTAINER, Duration::from_secs(10)), "0");
}

/// A pod whose cordon was killed after the command started (SIGKILL: nothing copies back and
/// nothing deletes the pod) ends by itself: the copying container gives up waiting for the copy
/// back. Podman enforces neither `activeDeadlineSeconds` nor `shutdownTime`, so this checks the
/// pod's own bounds only; on a cluster those deadlines bound the command too.
fn the_pod_of_a_killed_run_ends_by_itself() {
    use cordon_sandbox::kubernetes::copy;
    let p = Project::new(Eng::Podman);
    let pod = PlayedPod::play(&p, &["--", "sh", "-c", "exit 0"]);
    let cwd = p.path().to_str().expect("utf-8");
    // An empty archive (two zeroed blocks), after its length.
    let framed = [copy::length_line(1024).into_bytes(), vec![0u8; 1024]].concat();
    let copied_in = pod.exec(copy::CONTAINER, &copy::copy_in(cwd), &framed);
    assert!(copied_in.status.success(), "{}", stderr(&copied_in));
    assert_eq!(
        pod.exited(copy::RUN_CONTAINER, Duration::from_secs(60)),
        "0"
    );
    let within = Duration::from_secs(u64::from(copy::COPY_BACK_WITHIN_SECS) + 15);
    assert_eq!(pod.exited(copy::CONTAINER, within), "0");
}

fn main() -> std::process::ExitCode {
    let mut tests = common::harness::listed(&[
        (
            "files_written_inside_belong_to_the_host_user",
            files_written_inside_belong_to_the_host_user,
        ),
        (
            "publish_is_refused_with_the_containers_way",
            publish_is_refused_with_the_containers_way,
        ),
        (
            "an_unreachable_engine_says_to_start_it",
            an_unreachable_engine_says_to_start_it,
        ),
        (
            "a_missing_engine_says_what_to_install",
            a_missing_engine_says_what_to_install,
        ),
        (
            "without_an_image_the_error_says_how_to_give_one",
            without_an_image_the_error_says_how_to_give_one,
        ),
        (
            "dry_run_needs_no_engine_and_runs_nothing",
            dry_run_needs_no_engine_and_runs_nothing,
        ),
        (
            "the_rendered_pod_runs_under_podman_kube_play",
            the_rendered_pod_runs_under_podman_kube_play,
        ),
        (
            "the_working_directory_goes_to_the_pod_and_back_within_the_walls",
            the_working_directory_goes_to_the_pod_and_back_within_the_walls,
        ),
        (
            "the_pod_of_a_killed_run_ends_by_itself",
            the_pod_of_a_killed_run_ends_by_itself,
        ),
    ]);
    for engine in [Eng::Docker, Eng::Podman] {
        for &(name, test) in FOR_EACH_ENGINE {
            tests.push((
                format!("{}::{name}", engine.name()),
                Box::new(move || test(engine)),
            ));
        }
    }
    common::harness::run(include_str!("container.rs"), tests)
}
