//! The Kubernetes builder: a [`SandboxSpec`] rendered as the manifests that run it on a
//! cluster, beside the Seatbelt and container builders. Pure: the same spec and options give the
//! same manifests, and nothing here talks to a cluster.
//!
//! What it renders, for a run named `NAME`:
//! - the sandbox itself: an agent-sandbox `Sandbox` (`agents.x-k8s.io/v1beta1`), or a plain
//!   `Pod` for clusters without the controller, with secure defaults: a non-root user, no
//!   privilege escalation, every capability dropped, the runtime's default seccomp profile, a
//!   read-only root file system with writable volumes for the working directory and `/tmp`, and
//!   no service account token;
//! - a `NetworkPolicy` that lets the sandbox reach nothing (no DNS either), or, with allowed
//!   hosts, only cordon's proxy;
//! - with allowed hosts, the proxy as a `Pod` of its own with a `Service`, its rules in a
//!   `ConfigMap`, and a `NetworkPolicy` that lets only the sandbox reach it. A proxy inside the
//!   sandbox's pod would share its network, and no NetworkPolicy could then tell the proxy's
//!   traffic from the command's.
//!
//! The sandbox finds the proxy without DNS, which would be a way out of its own: the Service is
//! made first, so Kubernetes hands the pod its address as `NAME_PROXY_SERVICE_HOST`, which the
//! proxy variables refer to (`$(…)`, expanded by the kubelet).
//!
//! What a pod cannot express is an error ([`KubeError`]), never dropped in silence; what it
//! enforces less strictly than the Linux sandbox is listed in [`Manifests::weaker`].

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::{NetworkMode, SandboxSpec};

pub mod copy;
#[cfg(test)]
mod tests;
pub mod yaml;

/// How long a deleted pod of cordon's is given to end before it is killed.
const GRACE_SECS: u32 = 2;

/// Which object runs the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// agent-sandbox's `Sandbox`: a pod with a lifecycle (`shutdownTime`).
    #[default]
    Sandbox,
    /// A plain `Pod`, for clusters without the agent-sandbox controller; its time limit is
    /// `activeDeadlineSeconds`.
    Pod,
    /// A `SandboxTemplate` that `SandboxClaim`s (and a `SandboxWarmPool`) make sandboxes from;
    /// their lifetime is the claim's to set.
    Template,
}

impl Kind {
    pub const NAMES: [&'static str; 3] = ["sandbox", "pod", "template"];

    pub fn parse(name: &str) -> Option<Kind> {
        match name {
            "sandbox" => Some(Kind::Sandbox),
            "pod" => Some(Kind::Pod),
            "template" => Some(Kind::Template),
            _ => None,
        }
    }
}

/// The user a sandbox runs as unless told otherwise: not root, and no user an image is likely
/// to own files as.
pub const DEFAULT_USER: u32 = 65532;

/// A secure default the person lets go of, by name (`--k8s-loosen NAME`); each one is then
/// reported as weaker than cordon's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Loosen {
    /// Run as root (user 0) instead of user 65532.
    Root,
    /// A writable root file system instead of a read-only one.
    WritableRoot,
    /// Mount the service account's token (the pod can then call the cluster's API as it).
    ServiceAccountToken,
    /// Allow privilege escalation (set-user-ID programs such as sudo).
    PrivilegeEscalation,
    /// Keep the runtime's default capabilities instead of dropping them all.
    Capabilities,
    /// No seccomp profile instead of the runtime's default.
    Seccomp,
}

impl Loosen {
    pub const NAMES: [&'static str; 6] = [
        "root",
        "writable-root",
        "service-account-token",
        "privilege-escalation",
        "capabilities",
        "seccomp",
    ];

    pub fn parse(name: &str) -> Option<Loosen> {
        let all = [
            Loosen::Root,
            Loosen::WritableRoot,
            Loosen::ServiceAccountToken,
            Loosen::PrivilegeEscalation,
            Loosen::Capabilities,
            Loosen::Seccomp,
        ];
        Loosen::NAMES
            .iter()
            .position(|n| *n == name)
            .map(|i| all[i])
    }

    fn weaker(self) -> &'static str {
        match self {
            Loosen::Root => "the command runs as root in the pod (--k8s-loosen root)",
            Loosen::WritableRoot => {
                "the pod's root file system is writable (--k8s-loosen writable-root)"
            }
            Loosen::ServiceAccountToken => {
                "the pod holds its service account's token (--k8s-loosen service-account-token)"
            }
            Loosen::PrivilegeEscalation => {
                "the command may gain privileges (--k8s-loosen privilege-escalation)"
            }
            Loosen::Capabilities => {
                "the command keeps the runtime's default capabilities (--k8s-loosen capabilities)"
            }
            Loosen::Seccomp => "the pod has no seccomp profile (--k8s-loosen seccomp)",
        }
    }
}

/// The proxy's port, for HTTP and SOCKS5 alike.
pub const PROXY_PORT: u16 = 3128;

/// How the working directory reaches the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Workspace {
    /// An empty directory, and the command starts at once: for manifests a person applies
    /// (`kubectl apply`) and for templates, whose pods nobody copies into.
    #[default]
    Empty,
    /// cordon copies the working directory in before the command starts and what changed back
    /// after it ends ([`copy`]). The pod then holds a second container, [`copy::CONTAINER`],
    /// that lives on after the command for the copy back. The directory is an `emptyDir` on
    /// the node's disk.
    Copied,
    /// Copied the same way, onto a volume claimed for the sandbox (`volumeClaimTemplates`):
    /// storage of its own size instead of the node's, for big directories and long sessions.
    Volume,
}

impl Workspace {
    pub const NAMES: [&'static str; 3] = ["copy", "empty", "volume"];

    pub fn parse(name: &str) -> Option<Workspace> {
        match name {
            "copy" => Some(Workspace::Copied),
            "empty" => Some(Workspace::Empty),
            "volume" => Some(Workspace::Volume),
            _ => None,
        }
    }

    /// Whether cordon copies the working directory in and back.
    pub fn is_copied(self) -> bool {
        self != Workspace::Empty
    }
}

/// The size a claimed workspace volume asks for unless told otherwise.
pub const DEFAULT_VOLUME_SIZE: &str = "10Gi";

/// What the cluster needs besides the spec.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub kind: Kind,
    /// The run's name, a DNS label: every object's name starts with it.
    pub name: String,
    pub namespace: Option<String>,
    /// The image the command runs in.
    pub image: String,
    /// `runtimeClassName`: gVisor, Kata, where the cluster has them.
    pub runtime_class: Option<String>,
    /// The secure defaults let go of, each by name.
    pub loosen: Vec<Loosen>,
    /// When the `Sandbox` ends whatever happens to cordon, RFC 3339: the run's time limit from
    /// when it starts.
    pub shutdown_time: Option<String>,
    /// The proxy's image (one with `cordon` in it), needed when hosts are allowed.
    pub proxy_image: Option<String>,
    /// The proxy's rules, as the `[network]` of a cordon.toml: the same rules, SNI check and
    /// refusal report as the local proxy.
    pub proxy_settings: Option<String>,
    /// With [`Kind::Template`]: a `SandboxWarmPool` keeping this many sandboxes ready. They
    /// share the template's proxy and policies.
    pub pool: Option<u32>,
    pub workspace: Workspace,
    /// With [`Workspace::Volume`]: the storage the claim asks for, as a Kubernetes quantity
    /// [default: [`DEFAULT_VOLUME_SIZE`]].
    pub volume_size: Option<String>,
    /// Files the command reads at these absolute paths, read-only, from a `ConfigMap` (`cordon
    /// mcp`'s worker reads the policy files where its launcher found them).
    pub files: Vec<(PathBuf, String)>,
}

/// What a `ConfigMap` may hold, less room for its own fields.
const FILES_MAX_BYTES: usize = 900 * 1024;

/// The rendered objects, in the order they must be created.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifests {
    pub objects: Vec<Value>,
    /// What the cluster enforces less strictly than cordon's Linux sandbox would, for a
    /// warning.
    pub weaker: Vec<String>,
}

/// What a pod cannot express.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KubeError {
    #[error("no command to run")]
    NoCommand,
    #[error(
        "`{0}` is not a name Kubernetes takes: use at most 40 lower-case letters, digits and `-`, starting with a letter"
    )]
    BadName(String),
    #[error(
        "no image: give --image (the command runs in it, with the working directory copied in)"
    )]
    NoImage,
    #[error(
        "--network host has no meaning on a cluster: allow the hosts the command needs (--allow-domain)"
    )]
    HostNetwork,
    #[error(
        "allowed hosts need cordon's proxy on the cluster: give --k8s-proxy-image, an image with `cordon` in it"
    )]
    NoProxyImage,
    #[error(
        "{0} is writable in this run, but only the working directory is copied to the pod and back; drop --allow-write {0}, or run elsewhere"
    )]
    WritableElsewhere(PathBuf),
    #[error(
        "Unix sockets ({0}) are on this machine, not in the pod; drop --allow-unix-socket, or run locally"
    )]
    UnixSocket(PathBuf),
    #[error("--publish leads to this machine's ports, which a pod does not have; run locally")]
    Inbound,
    #[error("a warm pool is made from a template: add --k8s-kind template")]
    PoolWithoutTemplate,
    #[error(
        "a template's pods are claimed later, by whoever claims them, so nothing copies a working directory into them: add --k8s-workspace empty"
    )]
    CopiedTemplate,
    #[error(
        "a workspace volume is claimed through agent-sandbox's Sandbox (volumeClaimTemplates), which a plain Pod does not have: use --k8s-kind sandbox, or --k8s-workspace copy"
    )]
    VolumeNeedsSandbox,
    #[error(
        "`{0}` is not a size Kubernetes takes: give a number with an optional unit, such as 500Mi, 10Gi or 1Ti"
    )]
    BadSize(String),
    #[error(
        "the files the pod needs ({0}) take more than a ConfigMap holds (900 KiB): keep the policy files smaller"
    )]
    FilesTooBig(String),
}

/// The manifests that run `spec` on a cluster.
pub fn render(spec: &SandboxSpec, opts: &Options) -> Result<Manifests, KubeError> {
    if spec.argv.is_empty() {
        return Err(KubeError::NoCommand);
    }
    if !valid_name(&opts.name) {
        return Err(KubeError::BadName(opts.name.clone()));
    }
    if opts.image.is_empty() {
        return Err(KubeError::NoImage);
    }
    if let Some(socket) = spec.unix_sockets.first() {
        return Err(KubeError::UnixSocket(socket.clone()));
    }
    if spec.inbound.is_some() {
        return Err(KubeError::Inbound);
    }
    if opts.pool.is_some() && opts.kind != Kind::Template {
        return Err(KubeError::PoolWithoutTemplate);
    }
    if opts.kind == Kind::Template && opts.workspace.is_copied() {
        return Err(KubeError::CopiedTemplate);
    }
    if opts.workspace == Workspace::Volume && opts.kind != Kind::Sandbox {
        return Err(KubeError::VolumeNeedsSandbox);
    }
    let files_size: usize = opts.files.iter().map(|(_, text)| text.len()).sum();
    if files_size > FILES_MAX_BYTES {
        let names: Vec<String> = opts
            .files
            .iter()
            .map(|(p, _)| p.display().to_string())
            .collect();
        return Err(KubeError::FilesTooBig(names.join(", ")));
    }
    let volume_size = opts.volume_size.as_deref().unwrap_or(DEFAULT_VOLUME_SIZE);
    if !valid_quantity(volume_size) {
        return Err(KubeError::BadSize(volume_size.to_string()));
    }
    let tmp = Path::new("/tmp");
    // The working directory and the run's own temporary directory are the pod's volumes;
    // anything else writable would be a host path the pod does not have.
    let tmpdir = spec
        .env
        .iter()
        .find(|(k, _)| k == "TMPDIR")
        .map(|(_, v)| PathBuf::from(v));
    if let Some(other) = spec.writable.iter().find(|w| {
        !w.starts_with(&spec.cwd) && !w.starts_with(tmp) && Some(w.as_path()) != tmpdir.as_deref()
    }) {
        return Err(KubeError::WritableElsewhere(other.clone()));
    }
    let proxied = match &spec.network {
        NetworkMode::Host => return Err(KubeError::HostNetwork),
        NetworkMode::None => false,
        NetworkMode::Proxy(_) => true,
    };
    let proxy_image = match (proxied, &opts.proxy_image) {
        (true, None) => return Err(KubeError::NoProxyImage),
        (true, Some(image)) => Some(image.as_str()),
        (false, _) => None,
    };
    let mut weaker = Vec::new();
    if spec.limits.max_processes.is_some() {
        weaker.push(
            "the process limit: a pod's is the cluster's (the kubelet's podPidsLimit), not the run's"
                .to_string(),
        );
    }
    if spec.limits.cpu_seconds.is_some() {
        weaker.push("the CPU time limit: a pod has a CPU rate limit, not a total".to_string());
    }
    weaker.extend(opts.loosen.iter().map(|l| l.weaker().to_string()));
    let name = &opts.name;
    let proxy_name = format!("{name}-proxy");
    let mut objects = Vec::new();
    if let Some(image) = proxy_image {
        objects.extend(proxy(opts, &proxy_name, image));
    }
    if !opts.files.is_empty() {
        let data: serde_json::Map<String, Value> = opts
            .files
            .iter()
            .enumerate()
            .map(|(i, (_, text))| (format!("f{i}"), json!(text)))
            .collect();
        objects.push(json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": metadata(&files_name(name), opts, "sandbox"),
            "data": data,
        }));
    }
    let pod = pod_spec(spec, opts, proxied.then_some(proxy_name.as_str()));
    let labels = labels(name, "sandbox");
    let pool = opts.pool.map(|replicas| {
        json!({
            "apiVersion": "extensions.agents.x-k8s.io/v1beta1",
            "kind": "SandboxWarmPool",
            "metadata": metadata(name, opts, "sandbox"),
            "spec": {"replicas": replicas, "sandboxTemplateRef": {"name": name}},
        })
    });
    objects.push(match opts.kind {
        // cordon's own NetworkPolicy (below) selects the template's pods by their labels; the
        // controller's is left out, so that there is one policy and it is this one.
        Kind::Template => json!({
            "apiVersion": "extensions.agents.x-k8s.io/v1beta1",
            "kind": "SandboxTemplate",
            "metadata": metadata(name, opts, "sandbox"),
            "spec": {
                "podTemplate": {"metadata": {"labels": labels}, "spec": pod},
                "networkPolicyManagement": "Unmanaged",
                "envVarsInjectionPolicy": "Disallowed",
            },
        }),
        Kind::Sandbox => {
            let mut body = json!({
                "podTemplate": {"metadata": {"labels": labels}, "spec": pod},
                "shutdownPolicy": "Delete",
            });
            if let Some(t) = &opts.shutdown_time {
                body["shutdownTime"] = json!(t);
            }
            if opts.workspace == Workspace::Volume {
                // The controller adds the pod's volume of this name, bound to the claim.
                body["volumeClaimTemplates"] = json!([{
                    "metadata": {"name": workspace_volume(name)},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": volume_size}},
                    },
                }]);
            }
            json!({
                "apiVersion": "agents.x-k8s.io/v1beta1",
                "kind": "Sandbox",
                "metadata": metadata(name, opts, "sandbox"),
                "spec": body,
            })
        }
        Kind::Pod => {
            let mut pod = pod;
            if let Some(limit) = spec.limits.timeout {
                pod["activeDeadlineSeconds"] = json!(limit.as_secs().max(1));
            }
            json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": metadata(name, opts, "sandbox"),
                "spec": pod,
            })
        }
    });
    // The sandbox may reach nothing, or only its proxy; nothing may reach it.
    let egress = if proxied {
        json!([{
            "to": [{"podSelector": {"matchLabels": selector(name, "proxy")}}],
            "ports": [{"protocol": "TCP", "port": PROXY_PORT}],
        }])
    } else {
        json!([])
    };
    objects.push(json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(&format!("{name}-sandbox"), opts, "sandbox"),
        "spec": {
            "podSelector": {"matchLabels": selector(name, "sandbox")},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": egress,
        },
    }));
    objects.extend(pool);
    // Applied in this order (by cordon, or by kubectl from --dry-run): a pod made before the
    // policy that selects it could reach the network for the moments between.
    objects.sort_by_key(|o| o["kind"] != "NetworkPolicy");
    Ok(Manifests { objects, weaker })
}

/// The name of the `ConfigMap` (and its volume) that holds [`Options::files`].
fn files_name(run: &str) -> String {
    format!("{run}-files")
}

/// The name of the volume that holds the working directory in a run's pod.
pub fn workspace_volume(run: &str) -> String {
    format!("{run}-ws")
}

/// A Kubernetes quantity, as far as a size goes: digits, an optional fraction, an optional
/// binary or decimal unit.
fn valid_quantity(text: &str) -> bool {
    let units = [
        "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E",
    ];
    let number = units
        .iter()
        .find_map(|u| text.strip_suffix(u))
        .unwrap_or(text);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, "0"));
    !whole.is_empty()
        && whole.chars().all(|c| c.is_ascii_digit())
        && !fraction.is_empty()
        && fraction.chars().all(|c| c.is_ascii_digit())
}

/// A DNS label short enough for every name derived from it (`NAME-proxy-settings`).
fn valid_name(name: &str) -> bool {
    name.len() <= 40
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

fn labels(name: &str, role: &str) -> Value {
    let mut l = selector(name, role);
    l["app.kubernetes.io/managed-by"] = json!("cordon");
    l
}

fn selector(name: &str, role: &str) -> Value {
    json!({"cordon.dev/run": name, "cordon.dev/role": role})
}

fn metadata(name: &str, opts: &Options, role: &str) -> Value {
    let mut m = json!({"name": name, "labels": labels(&opts.name, role)});
    if let Some(ns) = &opts.namespace {
        m["namespace"] = json!(ns);
    }
    m
}

/// The user a container with `loosen` runs as.
fn user(loosen: &[Loosen]) -> u32 {
    if loosen.contains(&Loosen::Root) {
        0
    } else {
        DEFAULT_USER
    }
}

fn seccomp(loosen: &[Loosen]) -> Value {
    let kind = if loosen.contains(&Loosen::Seccomp) {
        "Unconfined"
    } else {
        "RuntimeDefault"
    };
    json!({ "type": kind })
}

/// The restrictions a container gets, but for those `loosen` lets go of.
fn container_security(loosen: &[Loosen]) -> Value {
    let user = user(loosen);
    let mut sc = json!({
        "allowPrivilegeEscalation": loosen.contains(&Loosen::PrivilegeEscalation),
        "privileged": false,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": !loosen.contains(&Loosen::WritableRoot),
        "runAsNonRoot": user != 0,
        "runAsUser": user,
        "runAsGroup": user,
        "seccompProfile": seccomp(loosen),
    });
    if loosen.contains(&Loosen::Capabilities) {
        sc.as_object_mut().map(|m| m.remove("capabilities"));
    }
    sc
}

fn pod_spec(spec: &SandboxSpec, opts: &Options, proxy: Option<&str>) -> Value {
    let cwd = spec.cwd.to_string_lossy();
    // Variables that name this machine's proxy ports or temporary directory mean nothing in
    // the pod: the pod's own take their place.
    let local = |k: &str| {
        let k = k.to_ascii_uppercase();
        matches!(
            k.as_str(),
            "HTTP_PROXY" | "HTTPS_PROXY" | "ALL_PROXY" | "NO_PROXY" | "TMPDIR" | "HOME"
        )
    };
    let mut env: Vec<Value> = spec
        .env
        .iter()
        .filter(|(k, _)| !local(k))
        .map(|(k, v)| json!({"name": k, "value": v.replace("$(", "$$(")}))
        .collect();
    env.push(json!({"name": "TMPDIR", "value": "/tmp"}));
    env.push(json!({"name": "HOME", "value": "/tmp"}));
    if let Some(proxy) = proxy {
        let host = format!(
            "$({}_SERVICE_HOST)",
            proxy.to_ascii_uppercase().replace('-', "_")
        );
        let http = format!("http://{host}:{PROXY_PORT}");
        let socks = format!("socks5h://{host}:{PROXY_PORT}");
        for (k, v) in [
            ("HTTP_PROXY", &http),
            ("HTTPS_PROXY", &http),
            ("http_proxy", &http),
            ("https_proxy", &http),
            ("ALL_PROXY", &socks),
            ("all_proxy", &socks),
        ] {
            env.push(json!({"name": k, "value": v}));
        }
    }
    let mut resources = serde_json::Map::new();
    if let Some(bytes) = spec.limits.memory_bytes {
        resources.insert("memory".into(), json!(bytes.to_string()));
    }
    if let Some(millis) = spec.limits.cpu_millis {
        resources.insert("cpu".into(), json!(format!("{millis}m")));
    }
    let mut tmp = json!({});
    if let Some(bytes) = spec.limits.scratch_bytes {
        tmp["sizeLimit"] = json!(bytes.to_string());
    }
    // Each volume's name carries the run's: podman's `kube play` makes an `emptyDir` a named
    // volume that every pod with a volume of that name shares.
    let ws = workspace_volume(&opts.name);
    let [tmp_volume, signals] = ["tmp", copy::VOLUME].map(|v| format!("{}-{v}", opts.name));
    let mut mounts = vec![
        json!({"name": ws, "mountPath": cwd}),
        json!({"name": tmp_volume, "mountPath": "/tmp"}),
    ];
    let copied = opts.workspace.is_copied();
    if copied {
        mounts.push(json!({"name": signals, "mountPath": copy::DIR}));
    }
    for (i, (path, _)) in opts.files.iter().enumerate() {
        mounts.push(json!({
            "name": files_name(&opts.name),
            "mountPath": path.to_string_lossy(),
            "subPath": format!("f{i}"),
            "readOnly": true,
        }));
    }
    let mut container = json!({
        "name": copy::RUN_CONTAINER,
        "image": opts.image,
        "command": if copied { copy::gated(&spec.argv) } else { spec.argv.clone() },
        "workingDir": cwd,
        "env": env,
        "securityContext": container_security(&opts.loosen),
        "volumeMounts": mounts,
    });
    if copied {
        // cordon attaches to the command's input and output before letting it start.
        container["stdin"] = json!(true);
        container["stdinOnce"] = json!(true);
    }
    if !resources.is_empty() {
        container["resources"] = json!({"limits": resources});
    }
    let mut containers = vec![container];
    let mut volumes = vec![json!({"name": tmp_volume, "emptyDir": tmp})];
    if opts.workspace != Workspace::Volume {
        volumes.insert(0, json!({"name": ws, "emptyDir": {}}));
    }
    if !opts.files.is_empty() {
        let name = files_name(&opts.name);
        volumes.push(json!({"name": name, "configMap": {"name": name}}));
    }
    if copied {
        containers.push(json!({
            "name": copy::CONTAINER,
            "image": opts.image,
            "command": copy::holder(),
            "workingDir": cwd,
            "env": [{"name": "PATH", "value": copy::PATH}],
            "securityContext": container_security(&opts.loosen),
            "volumeMounts": [
                {"name": ws, "mountPath": cwd},
                {"name": signals, "mountPath": copy::DIR},
            ],
        }));
        volumes.push(json!({"name": signals, "emptyDir": {"sizeLimit": "1Mi"}}));
    }
    let user = user(&opts.loosen);
    let mut pod = json!({
        "automountServiceAccountToken": opts.loosen.contains(&Loosen::ServiceAccountToken),
        // The proxy's address reaches the command as a service variable.
        "enableServiceLinks": proxy.is_some(),
        "restartPolicy": "Never",
        // cordon deletes the pod when the run has ended or was stopped; the gate, the pod's
        // first process, takes no SIGTERM, so a grace period would only keep it for its length.
        "terminationGracePeriodSeconds": GRACE_SECS,
        "securityContext": {
            "runAsNonRoot": user != 0,
            "runAsUser": user,
            "runAsGroup": user,
            "fsGroup": user,
            "seccompProfile": seccomp(&opts.loosen),
        },
        "containers": containers,
        "volumes": volumes,
    });
    if let Some(class) = &opts.runtime_class {
        pod["runtimeClassName"] = json!(class);
    }
    pod
}

/// cordon's proxy on the cluster: its settings, the pod, the Service the sandbox reaches it
/// by, and a NetworkPolicy that lets only the sandbox in. It may reach out anywhere: which
/// host it connects to is what its rules decide.
fn proxy(opts: &Options, proxy_name: &str, image: &str) -> Vec<Value> {
    let settings_name = format!("{proxy_name}-settings");
    let settings = opts.proxy_settings.clone().unwrap_or_default();
    let listen = format!("0.0.0.0:{PROXY_PORT}");
    vec![
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": metadata(&settings_name, opts, "proxy"),
            "data": {"cordon.toml": settings},
        }),
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": metadata(proxy_name, opts, "proxy"),
            "spec": {
                "selector": selector(&opts.name, "proxy"),
                "ports": [{"name": "proxy", "protocol": "TCP", "port": PROXY_PORT,
                           "targetPort": PROXY_PORT}],
            },
        }),
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata(proxy_name, opts, "proxy"),
            "spec": {
                "automountServiceAccountToken": false,
                "enableServiceLinks": false,
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": GRACE_SECS,
                "securityContext": {
                    "runAsNonRoot": true,
                    "runAsUser": DEFAULT_USER,
                    "runAsGroup": DEFAULT_USER,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "containers": [{
                    "name": "proxy",
                    "image": image,
                    "command": ["cordon", "proxy", "--listen", listen,
                                "--settings", "/etc/cordon/cordon.toml", "--ask-domains", "deny"],
                    "ports": [{"containerPort": PROXY_PORT, "protocol": "TCP"}],
                    "securityContext": container_security(&[]),
                    "volumeMounts": [{"name": "settings", "mountPath": "/etc/cordon",
                                      "readOnly": true}],
                }],
                "volumes": [{"name": "settings", "configMap": {"name": settings_name}}],
            },
        }),
        json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": metadata(proxy_name, opts, "proxy"),
            "spec": {
                "podSelector": {"matchLabels": selector(&opts.name, "proxy")},
                "policyTypes": ["Ingress"],
                "ingress": [{
                    "from": [{"podSelector": {"matchLabels": selector(&opts.name, "sandbox")}}],
                    "ports": [{"protocol": "TCP", "port": PROXY_PORT}],
                }],
            },
        }),
    ]
}
