//! `cordon run --backend kubernetes` against a real cluster, when `CORDON_TEST_KUBECONFIG`
//! names one (its current context, in `CORDON_TEST_K8S_NAMESPACE` or the context's namespace,
//! with images from `CORDON_TEST_K8S_IMAGE`, default `busybox:1.36`, run as
//! `CORDON_TEST_K8S_KIND`, default `sandbox`: `pod` where agent-sandbox's controller is not
//! installed). Without one these tests are reported as ignored, with that reason; what has run
//! against which cluster is in docs/PLATFORMS.md. Nothing here fakes an API server.
//!
//! - `CORDON_TEST_K8S_PODS_RUN=0`: the cluster's pods never start (an API server without a
//!   kubelet), so only what needs no running pod is tried.
//! - `CORDON_TEST_K8S_LIMITED_KUBECONFIG`: a user of the same cluster with no rights at all,
//!   for the permission errors.
//!
//! `kubectl` on the PATH checks that no object of the run is left behind, and applies the
//! `--dry-run` manifests.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{cordon_bin, stderr, stdout};

struct Cluster {
    kubeconfig: PathBuf,
    namespace: Option<String>,
    image: String,
    kind: String,
    /// Held for the whole test: [`Cluster::no_leftovers`] looks at every object cordon labels
    /// as its own, so a test running beside it would count as its leftovers (and kept one CI
    /// run's check from ever seeing an empty namespace).
    _turn: std::sync::MutexGuard<'static, ()>,
}

/// One test at a time talks to the cluster.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn cluster() -> Cluster {
    let Some(kubeconfig) = std::env::var_os("CORDON_TEST_KUBECONFIG") else {
        common::harness::not_given("CORDON_TEST_KUBECONFIG names no cluster");
    };
    Cluster {
        kubeconfig: kubeconfig.into(),
        namespace: std::env::var("CORDON_TEST_K8S_NAMESPACE").ok(),
        image: std::env::var("CORDON_TEST_K8S_IMAGE").unwrap_or_else(|_| "busybox:1.36".into()),
        kind: std::env::var("CORDON_TEST_K8S_KIND").unwrap_or_else(|_| "sandbox".into()),
        // A test that failed holding it leaves nothing the next one depends on.
        _turn: TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner()),
    }
}

/// The cluster, where its pods really run.
fn running_cluster() -> Cluster {
    if std::env::var("CORDON_TEST_K8S_PODS_RUN").as_deref() == Ok("0") {
        common::harness::not_given("CORDON_TEST_K8S_PODS_RUN=0: this cluster's pods never start");
    }
    cluster()
}

impl Cluster {
    fn cordon(&self, dir: &std::path::Path, args: &[&str]) -> Command {
        self.cordon_with(&self.kubeconfig, &self.image, dir, args)
    }

    /// `cordon run` as the user of `kubeconfig`, with `image`.
    fn cordon_with(
        &self,
        kubeconfig: &std::path::Path,
        image: &str,
        dir: &std::path::Path,
        args: &[&str],
    ) -> Command {
        let mut cmd = Command::new(cordon_bin());
        cmd.args(["run", "--backend", "kubernetes", "--image", image]);
        cmd.args(["--k8s-kind", &self.kind]);
        if let Some(ns) = &self.namespace {
            cmd.args(["--namespace", ns]);
        }
        cmd.args(args)
            .current_dir(dir)
            .env("KUBECONFIG", kubeconfig)
            .stdin(Stdio::null());
        cmd
    }

    fn kubectl(&self) -> Command {
        let mut cmd = Command::new("kubectl");
        cmd.env("KUBECONFIG", &self.kubeconfig);
        if let Some(ns) = &self.namespace {
            cmd.args(["-n", ns]);
        }
        cmd
    }

    /// The objects cordon labelled as its own that are still there, when kubectl is at hand:
    /// a line each, saying whether its deletion was asked for and what the pod is doing.
    fn leftovers(&self) -> Option<String> {
        let mut cmd = self.kubectl();
        cmd.args([
            "get",
            "pods,services,configmaps,networkpolicies",
            "-l",
            "app.kubernetes.io/managed-by=cordon",
            "--no-headers",
            "-o",
            "custom-columns=KIND:.kind,NAME:.metadata.name,DELETED:.metadata.deletionTimestamp,\
             PHASE:.status.phase",
        ]);
        let o: Output = cmd.output().ok()?;
        o.status.success().then(|| stdout(&o))
    }

    /// Waits for every object of cordon's to be gone; `said` is what the run printed, for the
    /// failure's message.
    fn no_leftovers(&self, said: &str) {
        let end = Instant::now() + Duration::from_secs(120);
        loop {
            match self.leftovers() {
                None => {
                    eprintln!("kubectl is not at hand: leftovers not checked");
                    return;
                }
                Some(left) if left.trim().is_empty() => return,
                Some(left) => assert!(
                    Instant::now() < end,
                    "left on the cluster:\n{left}\nthe run said:\n{said}"
                ),
            }
            std::thread::sleep(Duration::from_secs(2));
        }
    }
}

/// The command runs in the pod with the working directory copied in, its output and status
/// come back, what it changed comes back except a protected path, a write outside the working
/// directory fails, and nothing of the run is left on the cluster.
fn a_command_runs_on_the_cluster_with_its_directory() {
    let c = running_cluster();
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
    c.no_leftovers(&said);
}

/// SIGTERM to cordon mid-run deletes what it made.
fn sigterm_deletes_the_runs_objects() {
    let c = running_cluster();
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
    let o = child.wait_with_output().expect("wait");
    let said = stderr(&o);
    assert_eq!(o.status.code(), Some(143), "{said}");
    c.no_leftovers(&said);
}

/// `cordon mcp --backend kubernetes`: the whole server runs in a pod whose image holds cordon
/// (`CORDON_TEST_K8S_CORDON_IMAGE`), a command it runs there writes the pod's working
/// directory, and that comes back when the session ends.
fn the_mcp_server_runs_in_a_pod_and_its_writes_come_back() {
    use std::io::{BufRead, BufReader, Write};
    let c = running_cluster();
    let Ok(image) = std::env::var("CORDON_TEST_K8S_CORDON_IMAGE") else {
        common::harness::not_given("CORDON_TEST_K8S_CORDON_IMAGE names no image with cordon in it");
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
        "--k8s-kind",
        &c.kind,
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
    c.no_leftovers("(the MCP server's stderr is this test's)");
}

/// A pod that never starts is waited for no longer than the run's `--timeout`, which the
/// error names, and nothing is left. An image nobody can pull stands for it where pods run;
/// where they never start, any image does.
fn a_pod_that_never_starts_ends_the_run_at_its_timeout() {
    let c = cluster();
    let dir = tempfile::tempdir().expect("tempdir");
    let pods_run = std::env::var("CORDON_TEST_K8S_PODS_RUN").as_deref() != Ok("0");
    // Where pods run, an image nobody can pull: refused fast, and said so.
    let image = if pods_run {
        "cordon.invalid/never-pulled:0"
    } else {
        &c.image
    };
    let began = Instant::now();
    let o = c
        .cordon_with(
            &c.kubeconfig,
            image,
            dir.path(),
            &["--timeout", "8", "--", "true"],
        )
        .output()
        .expect("run cordon");
    let took = began.elapsed();
    let said = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{said}");
    assert!(took < Duration::from_secs(60), "took {took:?}: {said}");
    assert!(
        said.contains("within 8 s (the run's --timeout)") || said.contains("cannot start"),
        "{said}"
    );
    c.no_leftovers(&said);
}

/// A user without rights is told which permission is missing, and cordon makes nothing.
fn a_user_without_rights_is_told_what_is_missing() {
    let c = cluster();
    let Some(limited) = std::env::var_os("CORDON_TEST_K8S_LIMITED_KUBECONFIG") else {
        common::harness::not_given(
            "CORDON_TEST_K8S_LIMITED_KUBECONFIG names no user without rights",
        );
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let o = c
        .cordon_with(
            std::path::Path::new(&limited),
            &c.image,
            dir.path(),
            &["--", "true"],
        )
        .output()
        .expect("run cordon");
    let said = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{said}");
    assert!(said.contains("create"), "{said}");
    assert!(
        said.contains("forbidden") || said.contains("not allowed"),
        "{said}"
    );
    c.no_leftovers(&said);
}

/// What `--dry-run` prints is taken by the cluster's own YAML reader and admission, for every
/// kind the cluster knows: applied with kubectl, then deleted. Environment values a YAML 1.1
/// reader would take for booleans, numbers or times go in too.
fn dry_run_manifests_apply_on_the_cluster() {
    let c = cluster();
    let dir = tempfile::tempdir().expect("tempdir");
    let known = |resource: &str| {
        c.kubectl()
            .args(["get", resource, "-o", "name"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    // Each variant's extra flags: every object cordon renders is in one of them (the proxy's
    // ConfigMap, Service and pod; a claimed volume; a template's warm pool).
    let proxied: &[&str] = &[
        "--k8s-proxy-image",
        "cordon:1",
        "--allow-domain",
        "example.org",
    ];
    let mut variants: Vec<(&str, &[&str])> = vec![("pod", &[]), ("pod", proxied)];
    if known("sandboxes.agents.x-k8s.io") {
        variants.push(("sandbox", proxied));
        variants.push(("sandbox", &["--k8s-workspace", "volume"]));
    }
    if known("sandboxtemplates.extensions.agents.x-k8s.io") {
        variants.push(("template", &["--k8s-pool", "2"]));
    }
    for (i, (kind, extra)) in variants.into_iter().enumerate() {
        let mut cmd = Command::new(cordon_bin());
        cmd.args(["run", "--backend", "kubernetes", "--dry-run"])
            .args(["--image", &c.image, "--k8s-kind", kind])
            .args(extra)
            .args([
                "--keep-env",
                "CORDON_TEST_YES",
                "--keep-env",
                "CORDON_TEST_DATE",
            ])
            .args(["--keep-env", "CORDON_TEST_OCTAL"])
            .args(["--", "sh", "-c", "echo on; exit 0"])
            .env("CORDON_TEST_YES", "yes")
            .env("CORDON_TEST_DATE", "2001-12-14")
            .env("CORDON_TEST_OCTAL", "0123")
            .env("KUBECONFIG", &c.kubeconfig)
            .current_dir(dir.path());
        if let Some(ns) = &c.namespace {
            cmd.args(["--namespace", ns]);
        }
        let o = cmd.output().expect("cordon");
        let shown = format!("{kind} {extra:?}");
        assert!(o.status.success(), "{shown}: {}", stderr(&o));
        let manifests = dir.path().join(format!("{i}.yaml"));
        std::fs::write(&manifests, &o.stdout).expect("write");
        let applied = c
            .kubectl()
            .args(["apply", "-f"])
            .arg(&manifests)
            .output()
            .expect("kubectl");
        let deleted = c
            .kubectl()
            .args(["delete", "--wait=false", "-f"])
            .arg(&manifests)
            .output()
            .expect("kubectl");
        assert!(
            applied.status.success(),
            "{shown}: kubectl apply refused the manifests: {}\n{}",
            stderr(&applied),
            stdout(&o)
        );
        assert!(deleted.status.success(), "{shown}: {}", stderr(&deleted));
    }
    c.no_leftovers("(applied and deleted with kubectl)");
}

common::tests!(
    "cluster.rs":
    a_command_runs_on_the_cluster_with_its_directory,
    sigterm_deletes_the_runs_objects,
    the_mcp_server_runs_in_a_pod_and_its_writes_come_back,
    a_pod_that_never_starts_ends_the_run_at_its_timeout,
    a_user_without_rights_is_told_what_is_missing,
    dry_run_manifests_apply_on_the_cluster,
);
