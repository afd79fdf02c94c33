//! `cordon run --backend kubernetes` against a real cluster, when `CORDON_TEST_KUBECONFIG`
//! names one (its current context, in `CORDON_TEST_K8S_NAMESPACE` or the context's namespace,
//! with images from `CORDON_TEST_K8S_IMAGE`, default `busybox:1.36`). No cluster is reachable
//! where CI runs, so there these tests say so and pass without checking anything: what has
//! and has not run against a cluster is in docs/PLATFORMS.md. Nothing here fakes an API server.
//!
//! `kubectl` on the PATH, when present, checks that no object of the run is left behind.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{cordon_bin, stderr, stdout};

struct Cluster {
    kubeconfig: PathBuf,
    namespace: Option<String>,
    image: String,
}

fn cluster() -> Cluster {
    let Some(kubeconfig) = std::env::var_os("CORDON_TEST_KUBECONFIG") else {
        common::harness::not_given("CORDON_TEST_KUBECONFIG names no cluster");
    };
    Cluster {
        kubeconfig: kubeconfig.into(),
        namespace: std::env::var("CORDON_TEST_K8S_NAMESPACE").ok(),
        image: std::env::var("CORDON_TEST_K8S_IMAGE").unwrap_or_else(|_| "busybox:1.36".into()),
    }
}

impl Cluster {
    fn cordon(&self, dir: &std::path::Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(cordon_bin());
        cmd.args(["run", "--backend", "kubernetes", "--image", &self.image]);
        if let Some(ns) = &self.namespace {
            cmd.args(["--namespace", ns]);
        }
        cmd.args(args)
            .current_dir(dir)
            .env("KUBECONFIG", &self.kubeconfig)
            .stdin(Stdio::null());
        cmd
    }

    /// The objects cordon labelled as its own that are still there, when kubectl is at hand.
    fn leftovers(&self) -> Option<String> {
        let mut cmd = Command::new("kubectl");
        cmd.env("KUBECONFIG", &self.kubeconfig).args([
            "get",
            "pods,services,configmaps,networkpolicies",
            "-l",
            "app.kubernetes.io/managed-by=cordon",
            "-o",
            "name",
        ]);
        if let Some(ns) = &self.namespace {
            cmd.args(["-n", ns]);
        }
        let o: Output = cmd.output().ok()?;
        o.status.success().then(|| stdout(&o))
    }

    fn no_leftovers(&self) {
        let end = Instant::now() + Duration::from_secs(120);
        loop {
            match self.leftovers() {
                None => {
                    eprintln!("kubectl is not at hand: leftovers not checked");
                    return;
                }
                Some(left) if left.trim().is_empty() => return,
                Some(left) => assert!(Instant::now() < end, "left on the cluster: {left}"),
            }
            std::thread::sleep(Duration::from_secs(2));
        }
    }
}

/// The command runs in the pod with the working directory copied in, its output and status
/// come back, what it changed comes back except a protected path, a write outside the working
/// directory fails, and nothing of the run is left on the cluster.
fn a_command_runs_on_the_cluster_with_its_directory() {
    let c = cluster();
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("in.txt"), "from here\n").expect("write");
    let script = "cat in.txt; echo changed > in.txt; echo evil > .bashrc; \
                  echo x > /etc/planted || echo outside-refused; exit 3";
    let o = c
        .cordon(dir.path(), &["--", "sh", "-c", script])
        .output()
        .expect("run cordon");
    let said = format!("{}{}", stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(3), "{said}");
    assert!(said.contains("from here\n"), "{said}");
    assert!(said.contains("outside-refused"), "{said}");
    let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).unwrap_or_default();
    assert_eq!(read("in.txt"), "changed\n", "{said}");
    assert!(!dir.path().join(".bashrc").exists(), "{said}");
    c.no_leftovers();
}

/// SIGTERM to cordon mid-run deletes what it made.
fn sigterm_deletes_the_runs_objects() {
    let c = cluster();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = c
        .cordon(dir.path(), &["--", "sh", "-c", "echo started; sleep 600"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run cordon");
    let mut out = child.stdout.take().expect("stdout");
    let mut seen = Vec::new();
    let end = Instant::now() + Duration::from_secs(300);
    while !String::from_utf8_lossy(&seen).contains("started") {
        let mut buf = [0u8; 256];
        let n = std::io::Read::read(&mut out, &mut buf).expect("read");
        assert!(n > 0 && Instant::now() < end, "the command never started");
        seen.extend_from_slice(&buf[..n]);
    }
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(143));
    c.no_leftovers();
}

/// `cordon mcp --backend kubernetes`: the whole server runs in a pod whose image holds cordon
/// (`CORDON_TEST_K8S_CORDON_IMAGE`), a command it runs there writes the pod's working
/// directory, and that comes back when the session ends.
fn the_mcp_server_runs_in_a_pod_and_its_writes_come_back() {
    use std::io::{BufRead, BufReader, Write};
    let c = cluster();
    let Ok(image) = std::env::var("CORDON_TEST_K8S_CORDON_IMAGE") else {
        eprintln!("not run: CORDON_TEST_K8S_CORDON_IMAGE names no image with cordon in it");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(cordon_bin());
    cmd.args([
        "mcp",
        "--mode",
        "yolo",
        "--backend",
        "kubernetes",
        "--image",
        &image,
    ]);
    if let Some(ns) = &c.namespace {
        cmd.args(["--namespace", ns]);
    }
    let mut child = cmd
        .current_dir(dir.path())
        .env("KUBECONFIG", &c.kubeconfig)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("cordon mcp");
    let mut input = child.stdin.take().expect("stdin");
    let mut output = BufReader::new(child.stdout.take().expect("stdout"));
    let mut send = |v: serde_json::Value| writeln!(input, "{v}").expect("send");
    let mut answer = |id: u64| loop {
        let mut line = String::new();
        assert!(
            output.read_line(&mut line).expect("read") > 0,
            "the server ended"
        );
        let v: serde_json::Value = serde_json::from_str(&line).expect("JSON");
        if v["id"] == id {
            return v;
        }
    };
    send(
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "cluster-test", "version": "1"}}}),
    );
    answer(1);
    send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "run_shell_command", "arguments": {"command": "echo from-the-pod > made.txt"}}}),
    );
    let called = answer(2);
    assert_eq!(called["result"]["isError"], false, "{called}");
    drop(input);
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status:?}");
    let made = std::fs::read_to_string(dir.path().join("made.txt")).unwrap_or_default();
    assert_eq!(made, "from-the-pod\n");
    c.no_leftovers();
}

common::tests!(
    "cluster.rs":
    a_command_runs_on_the_cluster_with_its_directory,
    sigterm_deletes_the_runs_objects,
    the_mcp_server_runs_in_a_pod_and_its_writes_come_back,
);
