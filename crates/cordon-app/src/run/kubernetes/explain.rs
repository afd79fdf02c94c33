//! The cluster's answers put in words a person can act on: a missing CRD, RBAC permission,
//! RuntimeClass or namespace, credentials that do not work, an image that cannot be pulled.
//! Pure functions of what the API said, so that each message is tested without a cluster.

use k8s_openapi::api::core::v1::Pod;

/// What cordon was doing when the cluster answered.
#[derive(Debug, Clone, Copy)]
pub enum Step<'a> {
    /// Making an object, shown as `Kind name`.
    Create(&'a str),
    /// Looking up `--runtime-class`.
    RuntimeClass(&'a str),
    /// Reading pods to see whether they run.
    Watch,
    /// Attaching to the command's input and output.
    Attach,
    /// Running the copies in the pod.
    Exec,
    Delete,
}

impl Step<'_> {
    /// The permission this step needs, as RBAC names it: (verb, resource).
    fn permission(self) -> (&'static str, String) {
        match self {
            Step::Create(shown) => {
                let kind = shown.split(' ').next().unwrap_or_default();
                ("create", plural(kind).unwrap_or("objects").to_string())
            }
            Step::RuntimeClass(_) => ("get", "runtimeclasses (node.k8s.io)".into()),
            Step::Watch => ("list", "pods".into()),
            Step::Attach => ("create", "pods/attach".into()),
            Step::Exec => ("create", "pods/exec".into()),
            Step::Delete => ("delete", "the run's objects".into()),
        }
    }
}

/// The resource name of a kind cordon makes.
pub fn plural(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "Sandbox" => "sandboxes",
        "SandboxTemplate" => "sandboxtemplates",
        "SandboxWarmPool" => "sandboxwarmpools",
        "Pod" => "pods",
        "Service" => "services",
        "ConfigMap" => "configmaps",
        "NetworkPolicy" => "networkpolicies",
        "PersistentVolumeClaim" => "persistentvolumeclaims",
        _ => return None,
    })
}

/// The CRD a kind needs, for those that are not built in.
fn crd(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "Sandbox" => "sandboxes.agents.x-k8s.io",
        "SandboxTemplate" => "sandboxtemplates.extensions.agents.x-k8s.io",
        "SandboxWarmPool" => "sandboxwarmpools.extensions.agents.x-k8s.io",
        _ => return None,
    })
}

/// Why cordon found no cluster to talk to; `kubeconfig` is `$KUBECONFIG` when set.
pub fn no_config(kubeconfig: Option<&str>, why: &str) -> String {
    let from = match kubeconfig {
        Some(path) => format!(" in KUBECONFIG={path}"),
        None => String::new(),
    };
    format!(
        "--backend kubernetes: no cluster to talk to{from} ({why}). cordon reads $KUBECONFIG or ~/.kube/config, or the service account of the pod it runs in; point KUBECONFIG at a cluster's config, or add --dry-run to print the manifests"
    )
}

/// A refusal from the API, in words.
pub fn api(step: Step<'_>, namespace: &str, e: &kube::Error) -> anyhow::Error {
    match e {
        kube::Error::Api(s) => {
            anyhow::anyhow!(status(step, namespace, s.code, &s.reason, &s.message))
        }
        other => {
            let mut why = other.to_string();
            let mut source = std::error::Error::source(other);
            while let Some(s) = source {
                let said = s.to_string();
                if !why.contains(&said) {
                    why = format!("{why}: {said}");
                }
                source = s.source();
            }
            anyhow::anyhow!(
                "--backend kubernetes: the cluster could not be reached while {} ({why}); is it up, and is your kubeconfig's current context (kubectl config current-context) the one you mean?",
                doing(step)
            )
        }
    }
}

pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

fn doing(step: Step<'_>) -> String {
    match step {
        Step::Create(shown) => format!("making {shown}"),
        Step::RuntimeClass(class) => format!("looking up RuntimeClass {class}"),
        Step::Watch => "waiting for the pod".into(),
        Step::Attach => "attaching to the command".into(),
        Step::Exec => "copying the working directory".into(),
        Step::Delete => "deleting the run's objects".into(),
    }
}

/// The message for an API status `code`/`reason`/`message` met at `step`.
pub fn status(step: Step<'_>, namespace: &str, code: u16, reason: &str, message: &str) -> String {
    let (verb, resource) = step.permission();
    match (step, code) {
        (Step::RuntimeClass(class), 404) => format!(
            "the cluster has no RuntimeClass `{class}` (kubectl get runtimeclass lists those it has): install it (gVisor, Kata) or drop --runtime-class"
        ),
        (_, 404) if message.contains("namespaces") => format!(
            "the cluster has no namespace `{namespace}`: create it (kubectl create namespace {namespace}) or choose another with --namespace"
        ),
        (Step::Create(shown), 404) => {
            let kind = shown.split(' ').next().unwrap_or_default();
            match crd(kind) {
                Some(crd) => format!(
                    "the cluster does not know {kind}: agent-sandbox's CRD {crd} is not installed. Install agent-sandbox (its CRDs and controller), or use --k8s-kind pod"
                ),
                None => format!("the cluster does not serve {kind}: {message}"),
            }
        }
        // The RuntimeClass admission check refuses a pod whose class is gone.
        (_, 403) if message.contains("RuntimeClass") => format!(
            "the cluster refused the pod's RuntimeClass: {message}; kubectl get runtimeclass lists those it has"
        ),
        (_, 403) => format!(
            "the cluster's RBAC does not let your account {verb} {resource} in namespace {namespace} ({message}). Ask for a Role that allows it (kubectl auth can-i {verb} {} -n {namespace} checks), or choose another --namespace",
            resource.split(' ').next().unwrap_or_default()
        ),
        (_, 401) => format!(
            "the cluster did not accept your credentials ({message}): log in again, or check the user of your kubeconfig's current context"
        ),
        (_, 409) => format!(
            "while {}: an object of that name already exists in namespace {namespace} ({message}); run again, which picks a new name",
            doing(step)
        ),
        (_, 422) => format!(
            "the cluster refused the manifest while {}: {message}. `cordon run --dry-run` shows what was sent",
            doing(step)
        ),
        _ => format!(
            "the cluster answered {code} {reason} while {}: {message}",
            doing(step)
        ),
    }
}

/// Where a pod is on its way to running its containers.
#[derive(Debug, PartialEq, Eq)]
pub enum PodState {
    Running,
    /// Not yet, and why.
    Waiting(String),
    /// Never will, and why.
    Failed(String),
}

/// Container waiting reasons that do not pass by themselves.
const STUCK: [&str; 6] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

/// Whether the containers `wanted` of `pod` all run.
pub fn pod_state(pod: &Pod, wanted: &[&str]) -> PodState {
    let Some(status) = &pod.status else {
        return PodState::Waiting("the pod has no status yet".into());
    };
    if status.phase.as_deref() == Some("Failed") {
        return PodState::Failed(format!(
            "{} {}",
            status.reason.clone().unwrap_or_default(),
            status.message.clone().unwrap_or_default()
        ));
    }
    for c in status.conditions.iter().flatten() {
        if c.type_ == "PodScheduled" && c.status == "False" {
            return PodState::Waiting(format!(
                "not scheduled: {}",
                c.message.clone().unwrap_or_default()
            ));
        }
    }
    let statuses = status.container_statuses.as_deref().unwrap_or_default();
    for name in wanted {
        let Some(c) = statuses.iter().find(|c| c.name == *name) else {
            return PodState::Waiting(format!("container {name} is not there yet"));
        };
        let Some(state) = &c.state else {
            return PodState::Waiting(format!("{name} has not started"));
        };
        if state.running.is_some() {
            continue;
        }
        if let Some(w) = &state.waiting {
            let reason = w.reason.as_deref().unwrap_or_default();
            let message = w.message.as_deref().unwrap_or_default();
            if STUCK.contains(&reason) {
                let hint = if reason.contains("Image") {
                    format!(
                        "; check --image ({}) and that the cluster can pull it",
                        c.image
                    )
                } else {
                    String::new()
                };
                return PodState::Failed(format!("{name}: {reason}: {message}{hint}"));
            }
            return PodState::Waiting(format!("{name}: {reason} {message}"));
        }
        if let Some(t) = &state.terminated {
            return PodState::Failed(format!(
                "{name} ended before cordon could attach (status {}): {}",
                t.exit_code,
                t.message.as_deref().unwrap_or_default()
            ));
        }
        return PodState::Waiting(format!("{name} has not started"));
    }
    PodState::Running
}

/// The exit status of `pod`'s container `name` once it has ended; a pod the cluster stopped
/// (its deadline, an eviction) is an error that says so.
pub fn ended(pod: &Pod, name: &str) -> anyhow::Result<Option<u8>> {
    let Some(status) = &pod.status else {
        return Ok(None);
    };
    let container = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == name);
    if let Some(t) = container.and_then(|c| c.state.as_ref()?.terminated.as_ref()) {
        if t.reason.as_deref() == Some("OOMKilled") {
            eprintln!("cordon: the command ran out of memory (--memory) and was killed");
        }
        return Ok(Some(u8::try_from(t.exit_code).unwrap_or(255)));
    }
    if status.phase.as_deref() == Some("Failed") {
        let reason = status.reason.clone().unwrap_or_default();
        if reason == "DeadlineExceeded" {
            anyhow::bail!(
                "the run's time limit (--timeout) passed, and the cluster stopped the pod"
            );
        }
        anyhow::bail!(
            "the cluster stopped the pod: {reason} {}",
            status.message.clone().unwrap_or_default()
        );
    }
    Ok(None)
}

#[cfg(test)]
mod tests;
