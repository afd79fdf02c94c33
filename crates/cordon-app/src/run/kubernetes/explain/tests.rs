//! Each refusal the cluster can give, as the API words it, and the message cordon makes of it.

use serde_json::json;

use super::*;

fn pod(status: serde_json::Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "p"}, "status": status})).expect("a pod")
}

#[test]
fn a_missing_crd_is_named_with_the_fix() {
    let m = status(
        Step::Create("Sandbox cordon-1"),
        "agents",
        404,
        "NotFound",
        "the server could not find the requested resource",
    );
    assert!(m.contains("sandboxes.agents.x-k8s.io"), "{m}");
    assert!(m.contains("Install agent-sandbox"), "{m}");
    assert!(m.contains("--k8s-kind pod"), "{m}");
    let m = status(
        Step::Create("Pod cordon-1"),
        "agents",
        404,
        "NotFound",
        "pods not found",
    );
    assert!(!m.contains("CRD"), "a built-in kind has no CRD: {m}");
}

#[test]
fn a_missing_rbac_permission_names_the_verb_resource_and_namespace() {
    let said = "pods is forbidden: User \"ada\" cannot create resource \"pods\" in API group \"\" in the namespace \"agents\"";
    let m = status(
        Step::Create("Pod cordon-1"),
        "agents",
        403,
        "Forbidden",
        said,
    );
    assert!(m.contains("create pods in namespace agents"), "{m}");
    assert!(
        m.contains("kubectl auth can-i create pods -n agents"),
        "{m}"
    );
    assert!(m.contains(said), "the API's own words are kept: {m}");
    let m = status(
        Step::Exec,
        "agents",
        403,
        "Forbidden",
        "pods \"x\" is forbidden",
    );
    assert!(m.contains("create pods/exec"), "{m}");
    let m = status(
        Step::Create("NetworkPolicy cordon-1-sandbox"),
        "agents",
        403,
        "Forbidden",
        "",
    );
    assert!(m.contains("create networkpolicies"), "{m}");
}

#[test]
fn a_missing_runtime_class_is_named() {
    let m = status(Step::RuntimeClass("gvisor"), "agents", 404, "NotFound", "");
    assert!(m.contains("no RuntimeClass `gvisor`"), "{m}");
    assert!(m.contains("--runtime-class"), "{m}");
    let m = status(
        Step::Create("Pod cordon-1"),
        "agents",
        403,
        "Forbidden",
        "pod rejected: RuntimeClass \"kata\" not found",
    );
    assert!(m.contains("RuntimeClass \"kata\" not found"), "{m}");
    assert!(!m.contains("RBAC"), "not a permission: {m}");
}

#[test]
fn a_missing_namespace_bad_credentials_and_no_config_say_what_to_do() {
    let m = status(
        Step::Create("Pod cordon-1"),
        "nowhere",
        404,
        "NotFound",
        "namespaces \"nowhere\" not found",
    );
    assert!(m.contains("kubectl create namespace nowhere"), "{m}");
    let m = status(Step::Watch, "agents", 401, "Unauthorized", "Unauthorized");
    assert!(m.contains("log in again"), "{m}");
    let m = no_config(None, "failed to read kubeconfig");
    assert!(m.contains("KUBECONFIG") && m.contains("--dry-run"), "{m}");
    let m = no_config(Some("/home/ada/kube.yaml"), "unclosed bracket");
    assert!(
        m.contains("KUBECONFIG=/home/ada/kube.yaml"),
        "the file is named: {m}"
    );
}

#[test]
fn a_pod_that_cannot_pull_its_image_fails_at_once_and_says_so() {
    let p = pod(json!({
        "phase": "Pending",
        "containerStatuses": [
            {"name": "run", "image": "busybx:1", "imageID": "", "ready": false, "restartCount": 0,
             "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}}},
        ],
    }));
    match pod_state(&p, &["run"]) {
        PodState::Failed(why) => {
            assert!(
                why.contains("ImagePullBackOff") && why.contains("--image (busybx:1)"),
                "{why}"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_pod_is_running_only_when_every_wanted_container_is() {
    let running = json!({"running": {}});
    let waiting = json!({"waiting": {"reason": "ContainerCreating"}});
    let status = |a: &serde_json::Value, b: &serde_json::Value| {
        pod(json!({
            "phase": "Pending",
            "containerStatuses": [
                {"name": "run", "image": "i", "imageID": "", "ready": true, "restartCount": 0, "state": a},
                {"name": "workspace", "image": "i", "imageID": "", "ready": true, "restartCount": 0, "state": b},
            ],
        }))
    };
    assert_eq!(
        pod_state(&status(&running, &running), &["run", "workspace"]),
        PodState::Running
    );
    assert!(matches!(
        pod_state(&status(&running, &waiting), &["run", "workspace"]),
        PodState::Waiting(w) if w.contains("ContainerCreating")
    ));
    let unscheduled = pod(json!({
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "message": "0/3 nodes have enough memory"}],
    }));
    assert!(matches!(
        pod_state(&unscheduled, &["run"]),
        PodState::Waiting(w) if w.contains("enough memory")
    ));
}

#[test]
fn the_exit_status_comes_from_the_command_s_container_and_a_deadline_is_named() {
    let ended_with = |code: i64| {
        pod(json!({
            "phase": "Running",
            "containerStatuses": [
                {"name": "run", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": code}}},
            ],
        }))
    };
    assert_eq!(ended(&ended_with(3), "run").expect("ended"), Some(3));
    assert_eq!(ended(&ended_with(300), "run").expect("ended"), Some(255));
    let still = pod(json!({"phase": "Running"}));
    assert_eq!(ended(&still, "run").expect("running"), None);
    let deadline = pod(json!({"phase": "Failed", "reason": "DeadlineExceeded"}));
    let e = ended(&deadline, "run").expect_err("stopped").to_string();
    assert!(e.contains("--timeout"), "{e}");
}
