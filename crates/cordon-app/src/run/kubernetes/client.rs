//! `cordon run --backend kubernetes` without `--dry-run`: the rendered manifests made on the
//! cluster, the command run there with this terminal's input and output, the working
//! directory copied in and back ([`super::sync`]), and every object deleted when the run ends,
//! fails or is interrupted. A cordon killed outright leaves the cluster's own deadlines
//! (`shutdownTime`, `activeDeadlineSeconds`) and the pod's bounded waits
//! ([`cordon_sandbox::kubernetes::copy`]) to end what it made.
//!
//! Credentials are kube-rs's: `$KUBECONFIG` or `~/.kube/config`, else the service account of
//! the pod cordon runs in. The cluster's refusals are put in words by [`super::explain`].

use std::io::{Seek, SeekFrom};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use cordon_sandbox::kubernetes::{Manifests, copy};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::api::{
    Api, ApiResource, AttachParams, DeleteParams, DynamicObject, GroupVersionKind, ListParams,
    PostParams,
};
use kube::{Client, Config};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::explain::{self, Step};
use super::sync;
use crate::workspace::Walls;

/// How long a pod may take to start (scheduling, pulling the image) when the run has no
/// `--timeout` of its own, or a longer one.
const START_WITHIN: Duration = Duration::from_secs(300);
/// How long after `--timeout` cordon waits for the cluster to have stopped the command.
const STOP_GRACE: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(250);
/// The first release whose API server offers the exec and attach protocol that can say "the
/// input has ended" (`v5.channel.k8s.io`, on by default since 1.30). Before it, closing the
/// input closes the whole stream, and what the command still had to say is lost.
const CLOSES_INPUT_SINCE: (u32, u32) = (1, 30);

/// One object cordon made, to delete afterwards.
struct Made {
    api: Api<DynamicObject>,
    name: String,
    shown: String,
}

/// What the run needs besides the manifests.
pub struct Job<'a> {
    pub manifests: &'a Manifests,
    /// The run's name: the label that finds its pods.
    pub name: &'a str,
    pub namespace: Option<&'a str>,
    pub runtime_class: Option<&'a str>,
    /// The working directory, where the pod has it too.
    pub cwd: &'a std::path::Path,
    /// The walls the copies keep to, when the working directory is copied; without, the pod's
    /// starts empty and nothing comes back.
    pub copy: Option<&'a Walls>,
    /// The workspace's volume claim, which the controller makes and cordon deletes.
    pub claim: Option<String>,
    /// Sent to the command before this process's own input (`cordon mcp`'s worker request).
    pub input: &'a [u8],
    /// Whether the end of the input ends the session, so that nothing the command says after
    /// it is wanted (`cordon mcp`'s worker, whose client has closed its side).
    pub input_ends_session: bool,
    /// The run's `--timeout`: it bounds every wait too.
    pub timeout: Option<Duration>,
}

/// How long cordon waits for a step, and why that long: every wait ends by the run's
/// `--timeout`, or by cordon's own bound where that comes first.
#[derive(Clone, Copy)]
struct Deadline {
    at: Instant,
    bound: Duration,
    said: &'static str,
}

impl Deadline {
    /// For the pods to start: `--timeout` from now, or [`START_WITHIN`].
    fn to_start(timeout: Option<Duration>) -> Deadline {
        let (bound, said) = match timeout {
            Some(t) if t < START_WITHIN => (t, "the run's --timeout"),
            _ => (START_WITHIN, "cordon's bound on a pod's start"),
        };
        Deadline {
            at: Instant::now() + bound,
            bound,
            said,
        }
    }

    fn passed(&self) -> bool {
        Instant::now() > self.at
    }

    /// "within N s (why)".
    fn within(&self) -> String {
        format!(
            "within {} s ({})",
            self.bound.as_secs_f64().round(),
            self.said
        )
    }
}

/// Runs the job and returns the command's exit status.
pub fn run(job: &Job<'_>) -> anyhow::Result<u8> {
    // Packed before anything is made on the cluster: a directory that cannot be read is a
    // local error, found before there is anything to clean up.
    let packed = match job.copy {
        Some(walls) => Some(pack(job.cwd, walls)?),
        None => None,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the cluster client")?;
    let outcome = runtime.block_on(async {
        let kubeconfig = std::env::var("KUBECONFIG").ok();
        let no_config = |e: &dyn std::fmt::Display| {
            anyhow!(explain::no_config(kubeconfig.as_deref(), &e.to_string()))
        };
        let config = Config::infer().await.map_err(|e| no_config(&e))?;
        let namespace = job
            .namespace
            .map(str::to_string)
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = Client::try_from(config).map_err(|e| no_config(&e))?;
        if let Some(class) = job.runtime_class {
            let classes: Api<RuntimeClass> = Api::all(client.clone());
            classes
                .get(class)
                .await
                .map_err(|e| explain::api(Step::RuntimeClass(class), &namespace, &e))?;
        }
        let closes_input = closes_input(&client).await;
        let mut made = Vec::new();
        let outcome = tokio::select! {
            outcome = drive(&client, &namespace, job, packed, closes_input, &mut made) => outcome,
            (name, number) = interrupted() => {
                eprintln!("cordon: {name}: the run was stopped; deleting its objects on the cluster");
                Ok(128 + number)
            }
        };
        // The objects go whatever happened, in the reverse of the order they were made.
        let mut left = Vec::new();
        for m in made.iter().rev() {
            if let Err(e) = m.api.delete(&m.name, &DeleteParams::background()).await
                && !explain::is_not_found(&e)
            {
                left.push(format!("{} ({})", m.shown, explain::api(Step::Delete, &namespace, &e)));
            }
        }
        if !left.is_empty() {
            eprintln!(
                "cordon: could not delete from namespace {namespace}: {}; delete them with kubectl delete",
                left.join(", ")
            );
        }
        outcome
    });
    // The read of this terminal's input may still be waiting, and would hold the runtime's
    // shutdown until a key is pressed.
    runtime.shutdown_background();
    outcome
}

/// The working directory as a tar file, and what was sent.
fn pack(cwd: &std::path::Path, walls: &Walls) -> anyhow::Result<(std::fs::File, sync::Sent)> {
    let root = cordon_sandbox::beneath::Root::open(cwd)
        .with_context(|| format!("cannot open {}", cwd.display()))?;
    let mut file = tempfile::tempfile().context("cannot make a file for the copy")?;
    let sent = sync::pack(&root, walls, std::io::BufWriter::new(&mut file))
        .with_context(|| format!("cannot pack {} for the pod", cwd.display()))?;
    file.seek(SeekFrom::Start(0))?;
    Ok((file, sent))
}

/// Whether the cluster's exec and attach streams can say that the input has ended
/// ([`CLOSES_INPUT_SINCE`]); a version that cannot be read counts as an old one, which costs
/// only the end of the command's input, never its output.
async fn closes_input(client: &Client) -> bool {
    let Ok(info) = client.apiserver_version().await else {
        return false;
    };
    // Hosted clusters write the minor version as "29+".
    let number = |s: &str| -> Option<u32> {
        let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    match (number(&info.major), number(&info.minor)) {
        (Some(major), Some(minor)) => (major, minor) >= CLOSES_INPUT_SINCE,
        _ => false,
    }
}

/// Resolves on SIGINT, SIGTERM or SIGHUP, with its name and number.
async fn interrupted() -> (&'static str, u8) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => ("SIGINT", 2),
        _ = term.recv() => ("SIGTERM", 15),
        _ = hup.recv() => ("SIGHUP", 1),
    }
}

/// The API of `object`'s kind in `namespace`, and its name.
fn api_for(
    client: &Client,
    namespace: &str,
    object: &Value,
) -> anyhow::Result<(Api<DynamicObject>, String)> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let plural = explain::plural(kind).ok_or_else(|| anyhow!("cordon does not make a {kind}"))?;
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    Ok((
        Api::namespaced_with(client.clone(), namespace, &resource),
        name,
    ))
}

async fn drive(
    client: &Client,
    namespace: &str,
    job: &Job<'_>,
    packed: Option<(std::fs::File, sync::Sent)>,
    closes_input: bool,
    made: &mut Vec<Made>,
) -> anyhow::Result<u8> {
    let started = Instant::now();
    let to_start = Deadline::to_start(job.timeout);
    for object in &job.manifests.objects {
        let (api, name) = api_for(client, namespace, object)?;
        let shown = format!("{} {name}", object["kind"].as_str().unwrap_or_default());
        let mut object: DynamicObject =
            serde_json::from_value(object.clone()).context("a rendered object")?;
        object.metadata.namespace = Some(namespace.to_string());
        api.create(&PostParams::default(), &object)
            .await
            .map_err(|e| explain::api(Step::Create(&shown), namespace, &e))?;
        made.push(Made { api, name, shown });
    }
    if let Some(claim) = &job.claim {
        // Made by the controller for the Sandbox; deleted with the rest (a claim still in
        // use goes once its pod has).
        let object = serde_json::json!({
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim},
        });
        let (api, name) = api_for(client, namespace, &object)?;
        let shown = format!("PersistentVolumeClaim {name}");
        made.push(Made { api, name, shown });
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let proxied = job
        .manifests
        .objects
        .iter()
        .any(|o| o["metadata"]["labels"]["cordon.dev/role"] == "proxy");
    if proxied {
        // The command's first connection would otherwise find nobody listening.
        running(&pods, namespace, job.name, "proxy", &["proxy"], to_start).await?;
    }
    let pod = running(
        &pods,
        namespace,
        job.name,
        "sandbox",
        &[copy::RUN_CONTAINER, copy::CONTAINER],
        to_start,
    )
    .await?;
    let attach = AttachParams::default()
        .container(copy::RUN_CONTAINER)
        .stdin(true)
        .stdout(true)
        .stderr(true);
    let mut process = pods
        .attach(&pod, &attach)
        .await
        .map_err(|e| explain::api(Step::Attach, namespace, &e))?;
    // Read from now on, so that nothing the command says waits behind the copy in.
    let hold_input = !closes_input && !job.input_ends_session;
    let output = tokio::spawn(relay(&mut process, job.input.to_vec(), hold_input));
    // Attached: the command may start once its directory is there (an empty archive, when
    // nothing is copied).
    let cwd = job.cwd.to_string_lossy();
    let mut exec = pods
        .exec(&pod, copy::copy_in(&cwd), &exec_params(true))
        .await
        .map_err(|e| explain::api(Step::Exec, namespace, &e))?;
    let mut input = exec.stdin().context("the copy's input")?;
    // The archive's length first: the pod's side reads exactly that much and ends by itself,
    // on clusters whose streams cannot say "the input has ended" too.
    let (archive, sent) = match packed {
        Some((file, sent)) => (file, Some(sent)),
        // Nothing to copy: an empty archive (its two end blocks) lets the command start.
        None => {
            let mut file = tempfile::tempfile().context("cannot make a file for the copy")?;
            std::io::Write::write_all(&mut file, &[0; 1024])?;
            file.seek(SeekFrom::Start(0))?;
            (file, None)
        }
    };
    let length = archive.metadata()?.len();
    input
        .write_all(copy::length_line(length).as_bytes())
        .await
        .and(tokio::io::copy(&mut tokio::fs::File::from_std(archive), &mut input).await)
        .context("cannot send the working directory to the pod")?;
    input.flush().await.ok();
    // Held open until the copy has said how it ended: closing it first would, before
    // Kubernetes 1.30, close the whole stream and lose that.
    let copied = finished(exec, "copying the working directory in").await;
    drop(input);
    copied?;
    match job.timeout {
        Some(limit) => {
            // The cluster stops the command at --timeout (activeDeadlineSeconds,
            // shutdownTime); a cluster that does not is not waited for without end.
            let stop_by = started + limit + STOP_GRACE;
            if tokio::time::timeout_at(stop_by.into(), output)
                .await
                .is_err()
            {
                eprintln!(
                    "cordon: the command ran past --timeout ({} s) and the cluster had not stopped it {} s later; stopping it",
                    limit.as_secs(),
                    STOP_GRACE.as_secs()
                );
                return Ok(cordon_sandbox::exit::TIMEOUT);
            }
        }
        None => {
            let _ = output.await;
        }
    }
    let code = exit_status(&pods, namespace, &pod).await?;
    if let (Some(sent), Some(walls)) = (sent, job.copy) {
        copy_back(&pods, &pod, job.cwd, walls, &sent, namespace).await?;
    }
    Ok(code)
}

fn exec_params(stdin: bool) -> AttachParams {
    AttachParams::default()
        .container(copy::CONTAINER)
        .stdin(stdin)
        .stdout(!stdin)
        .stderr(true)
}

/// Passes this terminal's input to the command and its output here, until the output ends.
/// Where the cluster's stream cannot say that the input has ended, `hold_input` keeps it open
/// after its end, which the command then never sees: closing it would close the whole stream,
/// and what the command said after that would be lost. Without `hold_input` the stream is
/// closed there, and the pod's runtime ends the command's input (`stdinOnce`).
fn relay(
    process: &mut kube::api::AttachedProcess,
    first: Vec<u8>,
    hold_input: bool,
) -> impl std::future::Future<Output = ()> + use<> {
    let stdin = process.stdin();
    let stdout = process.stdout();
    let stderr = process.stderr();
    if let Some(mut remote) = stdin {
        tokio::spawn(async move {
            let mut local = tokio::io::stdin();
            if remote.write_all(&first).await.is_err() {
                return;
            }
            let _ = tokio::io::copy(&mut local, &mut remote).await;
            if hold_input {
                eprintln!(
                    "cordon: note: this cluster is older than Kubernetes 1.30, whose streams cannot pass on the end of the command's input; a command that reads its input to the end will wait (--timeout ends it)"
                );
                // Ended with the runtime, once the run is over.
                std::future::pending::<()>().await;
            }
            let _ = remote.shutdown().await;
        });
    }
    async move {
        let out = async {
            if let Some(mut r) = stdout {
                let _ = tokio::io::copy(&mut r, &mut tokio::io::stdout()).await;
            }
        };
        let err = async {
            if let Some(mut r) = stderr {
                let _ = tokio::io::copy(&mut r, &mut tokio::io::stderr()).await;
            }
        };
        tokio::join!(out, err);
    }
}

/// Waits for an exec to end, and fails unless it ended well.
async fn finished(mut exec: kube::api::AttachedProcess, what: &str) -> anyhow::Result<()> {
    let mut said = String::new();
    if let Some(mut err) = exec.stderr() {
        let _ = err.read_to_string(&mut said).await;
    }
    let status = match exec.take_status() {
        Some(status) => status.await,
        None => None,
    };
    match status {
        Some(s) if s.status.as_deref() == Some("Success") => Ok(()),
        Some(s) => bail!(
            "{what} failed in the pod: {} {}",
            s.message.unwrap_or_default(),
            said.trim()
        ),
        None => bail!("{what}: the pod did not say how it ended {}", said.trim()),
    }
}

/// The name of the run's pod of `role` once the containers `wanted` are all running.
async fn running(
    pods: &Api<Pod>,
    namespace: &str,
    run: &str,
    role: &str,
    wanted: &[&str],
    deadline: Deadline,
) -> anyhow::Result<String> {
    let selector = format!("cordon.dev/run={run},cordon.dev/role={role}");
    let mut last = String::from("no pod yet");
    loop {
        let list = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| explain::api(Step::Watch, namespace, &e))?;
        if let Some(pod) = list.items.first() {
            let name = pod.metadata.name.clone().unwrap_or_default();
            match explain::pod_state(pod, wanted) {
                explain::PodState::Running => return Ok(name),
                explain::PodState::Waiting(why) => last = why,
                explain::PodState::Failed(why) => {
                    bail!("the {role} pod {name} cannot start: {why}")
                }
            }
        }
        if deadline.passed() {
            bail!(
                "the {role} pod did not start {}: {last}{}",
                deadline.within(),
                if role == "sandbox" && last == "no pod yet" {
                    "; is agent-sandbox's controller running on the cluster? Without it, use --k8s-kind pod"
                } else {
                    ""
                }
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The command's exit status, once its output has ended: from the pod's status, or where the
/// kubelet has not reported it yet, from the gate's own record in the pod ([`copy::EXIT`]). A
/// pod that says neither is an error, not a wait without end.
async fn exit_status(pods: &Api<Pod>, namespace: &str, pod: &str) -> anyhow::Result<u8> {
    let end = Instant::now() + STOP_GRACE;
    loop {
        let p = pods
            .get(pod)
            .await
            .map_err(|e| explain::api(Step::Watch, namespace, &e))?;
        if let Some(code) = explain::ended(&p, copy::RUN_CONTAINER)? {
            return Ok(code);
        }
        if let Some(code) = recorded_exit(pods, pod).await {
            return Ok(code);
        }
        if Instant::now() > end {
            bail!(
                "the pod {pod}'s output ended, but in {} s neither its status nor cordon's record in it said how the command ended",
                STOP_GRACE.as_secs()
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The status the gate wrote in the pod, if it has and the copying container still runs.
async fn recorded_exit(pods: &Api<Pod>, pod: &str) -> Option<u8> {
    let read = async {
        let mut exec = pods
            .exec(pod, copy::read_exit(), &exec_params(false))
            .await
            .ok()?;
        let mut text = String::new();
        exec.stdout()?.read_to_string(&mut text).await.ok()?;
        text.trim().parse().ok()
    };
    // The command may have made the file something that never ends (a FIFO).
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .ok()
        .flatten()
}

async fn copy_back(
    pods: &Api<Pod>,
    pod: &str,
    cwd: &std::path::Path,
    walls: &Walls,
    sent: &sync::Sent,
    namespace: &str,
) -> anyhow::Result<()> {
    let mut exec = pods
        .exec(
            pod,
            copy::copy_back(&cwd.to_string_lossy()),
            &exec_params(false),
        )
        .await
        .map_err(|e| explain::api(Step::Exec, namespace, &e))?;
    let mut file =
        tokio::fs::File::from_std(tempfile::tempfile().context("a file for the copy back")?);
    if let Some(mut out) = exec.stdout() {
        tokio::io::copy(&mut out, &mut file)
            .await
            .context("cannot receive the working directory from the pod")?;
    }
    finished(exec, "copying the working directory back").await?;
    let mut file = file.into_std().await;
    file.seek(SeekFrom::Start(0))?;
    let root = cordon_sandbox::beneath::Root::open(cwd)
        .with_context(|| format!("cannot open {}", cwd.display()))?;
    let report = sync::unpack(&root, walls, sent, std::io::BufReader::new(file))
        .context("cannot apply what came back from the pod")?;
    for line in report.lines() {
        eprintln!("cordon: {line}");
    }
    Ok(())
}
