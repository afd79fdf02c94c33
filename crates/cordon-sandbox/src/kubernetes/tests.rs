//! The manifests, default by default, and every spec feature a pod cannot express refused by
//! name. `tests/kubernetes_schema.rs` validates the rendered objects against agent-sandbox's
//! published schemas.

use std::time::Duration;

use super::*;
use crate::{Limits, ProxyEndpoint};

fn spec() -> SandboxSpec {
    SandboxSpec {
        argv: vec!["make".into(), "test".into()],
        cwd: "/home/ada/proj".into(),
        env: vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("HTTP_PROXY".into(), "http://127.0.0.1:3128".into()),
            ("GREETING".into(), "$(HOSTNAME) says hi".into()),
        ],
        writable: vec!["/home/ada/proj".into()],
        ..SandboxSpec::default()
    }
}

fn options() -> Options {
    Options {
        name: "cordon-proj-0123".into(),
        image: "debian:12".into(),
        ..Options::default()
    }
}

fn proxied(mut spec: SandboxSpec) -> SandboxSpec {
    spec.network = NetworkMode::Proxy(ProxyEndpoint {
        socket: None,
        http_port: 3128,
        socks_port: 1080,
    });
    spec
}

fn kinds(m: &Manifests) -> Vec<&str> {
    m.objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap_or_default())
        .collect()
}

/// The one object of `kind` for the pods of `role` (`sandbox` or `proxy`).
fn one<'a>(m: &'a Manifests, kind: &str, role: &str) -> &'a Value {
    let mut found = m
        .objects
        .iter()
        .filter(|o| o["kind"] == kind && o["metadata"]["labels"]["cordon.dev/role"] == role);
    let first = found
        .next()
        .unwrap_or_else(|| panic!("no {kind} for {role}"));
    assert!(found.next().is_none(), "more than one {kind} for {role}");
    first
}

/// The secure defaults, each in place: non-root, no escalation, no capabilities, the
/// runtime's seccomp profile, a read-only root with the working directory and /tmp writable,
/// no service account token, and a network policy that lets the pod reach nothing.
#[test]
fn a_sandbox_is_locked_down_by_default() {
    let mut opts = options();
    opts.shutdown_time = Some("2026-11-25T10:00:00Z".into());
    let m = render(&spec(), &opts).expect("renders");
    assert_eq!(kinds(&m), ["NetworkPolicy", "Sandbox"]);
    let sandbox = one(&m, "Sandbox", "sandbox");
    assert_eq!(sandbox["apiVersion"], "agents.x-k8s.io/v1beta1");
    assert_eq!(sandbox["spec"]["shutdownTime"], "2026-11-25T10:00:00Z");
    assert_eq!(sandbox["spec"]["shutdownPolicy"], "Delete");
    let pod = &sandbox["spec"]["podTemplate"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(pod["enableServiceLinks"], false);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let c = &pod["containers"][0];
    assert_eq!(c["command"], json!(["make", "test"]));
    assert_eq!(c["workingDir"], "/home/ada/proj");
    let sc = &c["securityContext"];
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["runAsUser"], DEFAULT_USER);
    assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");
    let mounts: Vec<&str> = c["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .map(|m| m["mountPath"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(mounts, ["/home/ada/proj", "/tmp"]);
    // This machine's proxy variable is gone; a value that looks like a Kubernetes reference
    // stays literal.
    let env = &c["env"];
    assert!(!env.to_string().contains("127.0.0.1"), "{env}");
    assert!(env.to_string().contains("$$(HOSTNAME) says hi"), "{env}");
    let policy = one(&m, "NetworkPolicy", "sandbox");
    assert_eq!(policy["spec"]["egress"], json!([]));
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    assert_eq!(
        policy["spec"]["podSelector"]["matchLabels"],
        sandbox["spec"]["podTemplate"]["metadata"]["labels"]["cordon.dev/run"]
            .as_str()
            .map(|run| json!({"cordon.dev/run": run, "cordon.dev/role": "sandbox"}))
            .expect("labels")
    );
}

/// With allowed hosts: the proxy's settings, Service and pod come first, the sandbox reaches
/// the proxy by the address its Service variable gives (no DNS), and the policies let the
/// sandbox reach only the proxy and only the sandbox reach the proxy.
#[test]
fn allowed_hosts_go_through_a_proxy_pod_only() {
    let mut opts = options();
    opts.proxy_image = Some("cordon:1".into());
    opts.proxy_settings = Some("[network]\nallow_domains = [\"github.com\"]\n".into());
    opts.namespace = Some("agents".into());
    let m = render(&proxied(spec()), &opts).expect("renders");
    assert_eq!(
        kinds(&m),
        [
            "NetworkPolicy",
            "NetworkPolicy",
            "ConfigMap",
            "Service",
            "Pod",
            "Sandbox",
        ]
    );
    assert!(
        m.objects
            .iter()
            .all(|o| o["metadata"]["namespace"] == "agents")
    );
    assert_eq!(
        one(&m, "ConfigMap", "proxy")["data"]["cordon.toml"],
        "[network]\nallow_domains = [\"github.com\"]\n"
    );
    let sandbox = one(&m, "Sandbox", "sandbox");
    let env = sandbox["spec"]["podTemplate"]["spec"]["containers"][0]["env"].to_string();
    assert!(
        env.contains("http://$(CORDON_PROJ_0123_PROXY_SERVICE_HOST):3128"),
        "{env}"
    );
    assert_eq!(
        sandbox["spec"]["podTemplate"]["spec"]["enableServiceLinks"],
        true
    );
    let egress = &one(&m, "NetworkPolicy", "sandbox")["spec"]["egress"];
    assert_eq!(
        egress[0]["to"][0]["podSelector"]["matchLabels"]["cordon.dev/role"],
        "proxy"
    );
    assert_eq!(
        egress.as_array().map(Vec::len),
        Some(1),
        "no DNS, nothing else"
    );
    let ingress =
        &one(&m, "NetworkPolicy", "proxy")["spec"]["ingress"][0]["from"][0]["podSelector"];
    assert_eq!(ingress["matchLabels"]["cordon.dev/role"], "sandbox");
}

/// A plain Pod for clusters without the controller: the time limit is its deadline.
#[test]
fn a_plain_pod_has_the_time_limit_as_its_deadline() {
    let mut spec = spec();
    spec.limits = Limits {
        timeout: Some(Duration::from_millis(90_500)),
        memory_bytes: Some(512 << 20),
        cpu_millis: Some(1500),
        max_processes: Some(4096),
        ..Limits::default()
    };
    let mut opts = options();
    opts.kind = Kind::Pod;
    opts.runtime_class = Some("gvisor".into());
    let m = render(&spec, &opts).expect("renders");
    assert_eq!(kinds(&m), ["NetworkPolicy", "Pod"]);
    let pod = &one(&m, "Pod", "sandbox")["spec"];
    assert_eq!(pod["activeDeadlineSeconds"], 90);
    assert_eq!(pod["runtimeClassName"], "gvisor");
    assert_eq!(
        pod["containers"][0]["resources"]["limits"],
        json!({"memory": "536870912", "cpu": "1500m"})
    );
    assert_eq!(m.weaker.len(), 1, "{:?}", m.weaker);
    assert!(m.weaker[0].contains("process limit"));
}

/// With a copied working directory the command waits for it, attached to cordon, and a second
/// container with the same restrictions holds the directory for the copies.
#[test]
fn a_copied_workspace_gates_the_command_and_holds_the_directory() {
    let mut opts = options();
    opts.workspace = Workspace::Copied;
    let m = render(&spec(), &opts).expect("renders");
    let pod = &one(&m, "Sandbox", "sandbox")["spec"]["podTemplate"]["spec"];
    let run = &pod["containers"][0];
    assert_eq!(run["name"], copy::RUN_CONTAINER);
    assert_eq!(run["stdin"], true);
    assert_eq!(run["stdinOnce"], true);
    let command: Vec<&str> = run["command"]
        .as_array()
        .expect("command")
        .iter()
        .map(|a| a.as_str().unwrap_or_default())
        .collect();
    assert_eq!(command[..2], ["/bin/sh", "-c"]);
    assert!(command[2].contains(copy::GO), "{}", command[2]);
    assert_eq!(command[3..], ["cordon-run", "make", "test"]);
    let holder = &pod["containers"][1];
    assert_eq!(holder["name"], copy::CONTAINER);
    assert_eq!(holder["securityContext"], run["securityContext"]);
    assert!(holder.get("stdin").is_none());
    let mounts = |c: &Value| -> Vec<String> {
        c["volumeMounts"]
            .as_array()
            .expect("mounts")
            .iter()
            .map(|m| m["mountPath"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(mounts(run), ["/home/ada/proj", "/tmp", copy::DIR]);
    assert_eq!(mounts(holder), ["/home/ada/proj", copy::DIR]);
    // Volume names carry the run's, so that podman's kube play, which shares a named volume
    // between pods, keeps two runs apart.
    for v in pod["volumes"].as_array().expect("volumes") {
        let name = v["name"].as_str().unwrap_or_default();
        assert!(name.starts_with("cordon-proj-0123-"), "{name}");
    }
    let mut template = options();
    template.kind = Kind::Template;
    template.workspace = Workspace::Copied;
    assert_eq!(render(&spec(), &template), Err(KubeError::CopiedTemplate));
}

/// A claimed workspace is a volume claim template of the Sandbox, which the controller binds
/// to the pod's volume of that name; a plain Pod cannot claim one.
#[test]
fn a_workspace_volume_is_claimed_by_the_sandbox() {
    let mut opts = options();
    opts.workspace = Workspace::Volume;
    opts.volume_size = Some("50Gi".into());
    let m = render(&spec(), &opts).expect("renders");
    let body = &one(&m, "Sandbox", "sandbox")["spec"];
    let claim = &body["volumeClaimTemplates"][0];
    assert_eq!(claim["metadata"]["name"], "cordon-proj-0123-ws");
    assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "50Gi");
    let pod = &body["podTemplate"]["spec"];
    let volumes: Vec<&str> = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .map(|v| v["name"].as_str().unwrap_or_default())
        .collect();
    assert!(!volumes.contains(&"cordon-proj-0123-ws"), "{volumes:?}");
    assert_eq!(
        pod["containers"][0]["volumeMounts"][0]["name"],
        "cordon-proj-0123-ws"
    );
    assert_eq!(pod["containers"].as_array().map(Vec::len), Some(2));
    opts.volume_size = Some("lots".into());
    assert_eq!(
        render(&spec(), &opts),
        Err(KubeError::BadSize("lots".into()))
    );
    opts.volume_size = None;
    opts.kind = Kind::Pod;
    assert_eq!(render(&spec(), &opts), Err(KubeError::VolumeNeedsSandbox));
}

/// Files the command needs at their own paths come from a ConfigMap made before the pod,
/// mounted read-only one by one.
#[test]
fn files_reach_the_pod_read_only_at_their_paths() {
    let mut opts = options();
    opts.files = vec![
        (
            "/home/ada/.config/cordon/policy.toml".into(),
            "[rules]\n".into(),
        ),
        ("/etc/cordon/cordon.toml".into(), "".into()),
    ];
    let m = render(&spec(), &opts).expect("renders");
    assert_eq!(kinds(&m), ["NetworkPolicy", "ConfigMap", "Sandbox"]);
    assert_eq!(one(&m, "ConfigMap", "sandbox")["data"]["f0"], "[rules]\n");
    let pod = &one(&m, "Sandbox", "sandbox")["spec"]["podTemplate"]["spec"];
    let mount = pod["containers"][0]["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .find(|m| m["mountPath"] == "/home/ada/.config/cordon/policy.toml")
        .expect("the policy file is mounted");
    assert_eq!(mount["readOnly"], true);
    assert_eq!(mount["subPath"], "f0");
    opts.files = vec![("/big".into(), "x".repeat(1 << 20))];
    assert!(matches!(
        render(&spec(), &opts),
        Err(KubeError::FilesTooBig(_))
    ));
}

/// What a pod cannot express is refused, saying what to change.
#[test]
fn what_a_pod_cannot_express_is_refused_by_name() {
    let opts = options();
    let refused = |spec: SandboxSpec, opts: &Options| render(&spec, opts).expect_err("refused");
    let mut s = spec();
    s.writable.push("/home/ada/.cache".into());
    assert_eq!(
        refused(s, &opts),
        KubeError::WritableElsewhere("/home/ada/.cache".into())
    );
    let mut s = spec();
    s.unix_sockets.push("/run/docker.sock".into());
    assert!(matches!(refused(s, &opts), KubeError::UnixSocket(_)));
    let mut s = spec();
    s.inbound = Some("/run/cordon/in.sock".into());
    assert_eq!(refused(s, &opts), KubeError::Inbound);
    let mut s = spec();
    s.network = NetworkMode::Host;
    assert_eq!(refused(s, &opts), KubeError::HostNetwork);
    assert_eq!(refused(proxied(spec()), &opts), KubeError::NoProxyImage);
    let mut s = spec();
    s.argv.clear();
    assert_eq!(refused(s, &opts), KubeError::NoCommand);
    for bad in ["Upper", "-lead", "trail-", "dots.in", &"x".repeat(41)] {
        let mut o = options();
        o.name = bad.to_string();
        assert!(
            matches!(refused(spec(), &o), KubeError::BadName(_)),
            "{bad}"
        );
    }
    let mut o = options();
    o.image.clear();
    assert_eq!(refused(spec(), &o), KubeError::NoImage);
    // The message names the flag to change.
    assert!(
        KubeError::WritableElsewhere("/x".into())
            .to_string()
            .contains("--allow-write /x")
    );
}

/// Each secure default goes only when named, and is then reported as weaker; the proxy pod
/// keeps every one.
#[test]
fn each_default_goes_only_when_named() {
    let all: Vec<Loosen> = Loosen::NAMES
        .iter()
        .map(|n| Loosen::parse(n).expect("a name"))
        .collect();
    let mut opts = options();
    opts.loosen = all.clone();
    opts.proxy_image = Some("cordon:1".into());
    let m = render(&proxied(spec()), &opts).expect("renders");
    assert_eq!(m.weaker.len(), all.len(), "{:?}", m.weaker);
    let sandbox = &one(&m, "Sandbox", "sandbox")["spec"]["podTemplate"]["spec"];
    assert_eq!(sandbox["automountServiceAccountToken"], true);
    assert_eq!(sandbox["securityContext"]["runAsNonRoot"], false);
    let sc = &sandbox["containers"][0]["securityContext"];
    assert_eq!(sc["runAsUser"], 0);
    assert_eq!(sc["allowPrivilegeEscalation"], true);
    assert_eq!(sc["readOnlyRootFilesystem"], false);
    assert_eq!(sc["seccompProfile"]["type"], "Unconfined");
    assert!(sc.get("capabilities").is_none(), "{sc}");
    assert_eq!(sc["privileged"], false, "never privileged");
    let proxy = &one(&m, "Pod", "proxy")["spec"];
    assert_eq!(proxy["automountServiceAccountToken"], false);
    assert_eq!(
        proxy["containers"][0]["securityContext"],
        container_security(&[])
    );
    assert_eq!(Loosen::parse("everything"), None);
}

/// A template and its warm pool: the pool names the template, the template leaves the network
/// policy to cordon's own, and a claim may not add variables; a pool needs a template.
#[test]
fn a_warm_pool_is_made_from_a_template() {
    let mut opts = options();
    opts.kind = Kind::Template;
    opts.pool = Some(3);
    let m = render(&spec(), &opts).expect("renders");
    assert_eq!(
        kinds(&m),
        ["NetworkPolicy", "SandboxTemplate", "SandboxWarmPool"]
    );
    let template = one(&m, "SandboxTemplate", "sandbox");
    assert_eq!(template["spec"]["networkPolicyManagement"], "Unmanaged");
    assert_eq!(template["spec"]["envVarsInjectionPolicy"], "Disallowed");
    let pool = one(&m, "SandboxWarmPool", "sandbox");
    assert_eq!(pool["spec"]["replicas"], 3);
    assert_eq!(
        pool["spec"]["sandboxTemplateRef"]["name"],
        template["metadata"]["name"]
    );
    let mut opts = options();
    opts.pool = Some(1);
    assert_eq!(
        render(&spec(), &opts).expect_err("no template"),
        KubeError::PoolWithoutTemplate
    );
}

/// Objects are made in the order they come, by cordon or by `kubectl apply`: every network
/// policy comes before anything that makes a pod it selects, so that no pod is ever without
/// its policy.
#[test]
fn network_policies_come_before_the_pods_they_select() {
    for (kind, proxy, pool) in [
        (Kind::Sandbox, false, None),
        (Kind::Sandbox, true, None),
        (Kind::Pod, true, None),
        (Kind::Template, true, Some(2)),
    ] {
        let mut opts = options();
        opts.kind = kind;
        opts.pool = pool;
        let spec = if proxy {
            opts.proxy_image = Some("cordon:1".into());
            proxied(spec())
        } else {
            spec()
        };
        let m = render(&spec, &opts).expect("renders");
        let kinds = kinds(&m);
        let last_policy = kinds.iter().rposition(|k| *k == "NetworkPolicy");
        let first_pods = kinds
            .iter()
            .position(|k| ["Pod", "Sandbox", "SandboxTemplate", "SandboxWarmPool"].contains(k));
        assert!(last_policy < first_pods, "{kinds:?}");
        assert_eq!(
            kinds.iter().filter(|k| **k == "NetworkPolicy").count(),
            1 + usize::from(proxy),
            "{kinds:?}"
        );
    }
}
