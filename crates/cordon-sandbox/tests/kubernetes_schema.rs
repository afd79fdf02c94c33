//! Every manifest variant the Kubernetes builder renders, validated against agent-sandbox's own
//! CRD schemas (`../shared/k8s/` beside the project, or `CORDON_K8S_CRDS`), which carry the
//! full `PodSpec`. A plain `Pod`'s spec is checked against the same `PodSpec` schema. Without
//! the schemas the tests skip, saying so (a failure where `CORDON_TEST_NO_SKIP` is set).

// The harness of cordon's own test binaries: a test that skips shows as ignored, with why.
#[path = "../../cordon/tests/common/harness.rs"]
mod harness;

use std::path::PathBuf;
use std::time::Duration;

use cordon_sandbox::kubernetes::{Kind, Loosen, Manifests, Options, Workspace, render};
use cordon_sandbox::{Limits, NetworkMode, ProxyEndpoint, SandboxSpec};
use serde_json::{Value, json};

fn crds() -> PathBuf {
    let dir = std::env::var_os("CORDON_K8S_CRDS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/k8s"));
    if !dir.join("agents.x-k8s.io_sandboxes.yaml").is_file() {
        harness::skip(format!(
            "agent-sandbox's CRDs are not at {} (set CORDON_K8S_CRDS)",
            dir.display()
        ));
    }
    dir
}

/// The `openAPIV3Schema` of `version` in the CRD file `name`.
fn schema(dir: &std::path::Path, name: &str, version: &str) -> Value {
    let text = std::fs::read_to_string(dir.join(name)).expect("read the CRD");
    let crd: Value = serde_yaml_ng::from_str(&text).expect("the CRD is YAML");
    crd["spec"]["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .find(|v| v["name"] == version)
        .map(|v| v["schema"]["openAPIV3Schema"].clone())
        .expect("the version")
}

/// The reasons `instance` does not fit `schema`.
fn problems(schema: &Value, instance: &Value) -> Vec<String> {
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft4)
        .build(schema)
        .expect("a schema the validator takes");
    validator
        .iter_errors(instance)
        .map(|e| format!("{}: {e}", e.instance_path))
        .collect()
}

fn spec() -> SandboxSpec {
    SandboxSpec {
        argv: vec!["sh".into(), "-c".into(), "make test".into()],
        cwd: "/home/ada/proj".into(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        writable: vec!["/home/ada/proj".into()],
        limits: Limits {
            memory_bytes: Some(1 << 30),
            cpu_millis: Some(500),
            scratch_bytes: Some(1 << 30),
            timeout: Some(Duration::from_secs(600)),
            ..Limits::default()
        },
        ..SandboxSpec::default()
    }
}

/// Each option and network mode the builder takes, as (what, manifests).
fn variants() -> Vec<(String, Manifests)> {
    let base = Options {
        name: "cordon-proj-0123".into(),
        image: "debian:12".into(),
        ..Options::default()
    };
    let proxied = {
        let mut s = spec();
        s.network = NetworkMode::Proxy(ProxyEndpoint {
            socket: None,
            http_port: 3128,
            socks_port: 1080,
        });
        s
    };
    let with = |f: &dyn Fn(&mut Options)| {
        let mut o = base.clone();
        f(&mut o);
        o
    };
    let cases: Vec<(&str, SandboxSpec, Options)> = vec![
        ("defaults", spec(), base.clone()),
        (
            "shutdown time",
            spec(),
            with(&|o| o.shutdown_time = Some("2026-11-25T10:00:00Z".into())),
        ),
        (
            "namespace and runtime class",
            spec(),
            with(&|o| {
                o.namespace = Some("agents".into());
                o.runtime_class = Some("gvisor".into());
            }),
        ),
        (
            "every default let go of",
            spec(),
            with(&|o| {
                o.loosen = Loosen::NAMES
                    .iter()
                    .filter_map(|n| Loosen::parse(n))
                    .collect()
            }),
        ),
        (
            "allowed hosts",
            proxied.clone(),
            with(&|o| {
                o.proxy_image = Some("cordon:1".into());
                o.proxy_settings = Some("[network]\nallow_domains = [\"github.com\"]\n".into());
            }),
        ),
        ("a plain pod", spec(), with(&|o| o.kind = Kind::Pod)),
        (
            "a copied working directory",
            spec(),
            with(&|o| o.workspace = Workspace::Copied),
        ),
        (
            "files from a ConfigMap",
            spec(),
            with(&|o| {
                o.workspace = Workspace::Copied;
                o.files = vec![("/etc/cordon/policy.toml".into(), "[rules]\n".into())];
            }),
        ),
        (
            "a claimed workspace volume",
            spec(),
            with(&|o| {
                o.workspace = Workspace::Volume;
                o.volume_size = Some("20Gi".into());
            }),
        ),
        (
            "a plain pod with a copied working directory",
            spec(),
            with(&|o| {
                o.kind = Kind::Pod;
                o.workspace = Workspace::Copied;
            }),
        ),
        (
            "a template and its warm pool",
            spec(),
            with(&|o| {
                o.kind = Kind::Template;
                o.pool = Some(2);
            }),
        ),
        (
            "a plain pod with allowed hosts",
            proxied,
            with(&|o| {
                o.kind = Kind::Pod;
                o.proxy_image = Some("cordon:1".into());
            }),
        ),
    ];
    cases
        .into_iter()
        .map(|(what, s, o)| (what.to_string(), render(&s, &o).expect(what)))
        .collect()
}

fn every_rendered_object_fits_agent_sandboxs_schema() {
    let dir = crds();
    let sandbox = schema(&dir, "agents.x-k8s.io_sandboxes.yaml", "v1beta1");
    let template = schema(
        &dir,
        "extensions.agents.x-k8s.io_sandboxtemplates.yaml",
        "v1beta1",
    );
    let pool = schema(
        &dir,
        "extensions.agents.x-k8s.io_sandboxwarmpools.yaml",
        "v1beta1",
    );
    let pod_spec =
        &sandbox["properties"]["spec"]["properties"]["podTemplate"]["properties"]["spec"];
    let mut checked = 0;
    for (what, m) in variants() {
        for object in &m.objects {
            let found = match object["kind"].as_str() {
                Some("Sandbox") => problems(&sandbox, object),
                Some("SandboxTemplate") => problems(&template, object),
                Some("SandboxWarmPool") => problems(&pool, object),
                Some("Pod") => problems(pod_spec, &object["spec"]),
                _ => continue,
            };
            assert!(found.is_empty(), "{what}: {}\n{object:#}", found.join("\n"));
            checked += 1;
        }
    }
    assert!(
        checked >= 15,
        "every variant's objects were checked: {checked}"
    );
}

/// The validator does refuse what does not fit: a Sandbox with a shutdown policy the schema
/// does not list, and a pod whose container lacks its name.
fn the_schema_check_refuses_what_does_not_fit() {
    let dir = crds();
    let sandbox = schema(&dir, "agents.x-k8s.io_sandboxes.yaml", "v1beta1");
    let (_, m) = variants().remove(0);
    let good = m
        .objects
        .iter()
        .find(|o| o["kind"] == "Sandbox")
        .expect("a Sandbox");
    assert!(problems(&sandbox, good).is_empty());
    let mut bad = good.clone();
    bad["spec"]["shutdownPolicy"] = json!("Sometimes");
    assert!(!problems(&sandbox, &bad).is_empty());
    let mut bad = good.clone();
    bad["spec"]["podTemplate"]["spec"]["containers"][0]
        .as_object_mut()
        .expect("a container")
        .remove("name");
    assert!(!problems(&sandbox, &bad).is_empty());
}

fn main() -> std::process::ExitCode {
    harness::run(
        include_str!("kubernetes_schema.rs"),
        harness::listed(&[
            (
                "every_rendered_object_fits_agent_sandboxs_schema",
                every_rendered_object_fits_agent_sandboxs_schema,
            ),
            (
                "the_schema_check_refuses_what_does_not_fit",
                the_schema_check_refuses_what_does_not_fit,
            ),
        ]),
    )
}
