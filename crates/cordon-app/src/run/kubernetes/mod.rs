//! `--backend kubernetes`: the run's spec rendered as the manifests that run it on a cluster
//! (`cordon_sandbox::kubernetes`), with the same `[network]` rules for the proxy pod as the
//! local proxy would enforce. `--dry-run` prints them as YAML; otherwise [`client`] runs them.

mod client;
mod explain;
pub mod sync;

use std::io::Write;

use anyhow::Context;
use cordon_sandbox::NetworkMode;
use cordon_sandbox::kubernetes::{self, Kind, Loosen, Options, Workspace};
use serde::{Deserialize, Serialize};

use super::backend::{Elsewhere, run_tag};
use crate::config::NetConfig;
use crate::settings::file::{NetworkTable, SettingsFile};
use crate::workspace::Walls;

/// The flags of the kubernetes backend.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct KubeOptions {
    /// `sandbox` (agent-sandbox's `Sandbox`) or `pod` [default: sandbox].
    pub kind: Option<Kind>,
    pub namespace: Option<String>,
    /// `runtimeClassName`: gVisor, Kata.
    pub runtime_class: Option<String>,
    /// An image with `cordon` in it, for the proxy pod.
    pub proxy_image: Option<String>,
    /// A warm pool of this many, from the template.
    pub pool: Option<u32>,
    /// The secure defaults let go of.
    pub loosen: Vec<Loosen>,
    /// `copy`, `volume` or `empty` [default: copy, but for templates].
    pub workspace: Option<Workspace>,
    /// The storage a `volume` workspace claims.
    pub volume_size: Option<String>,
}

impl KubeOptions {
    pub fn is_set(&self) -> bool {
        self.kind.is_some()
            || self.namespace.is_some()
            || self.runtime_class.is_some()
            || self.proxy_image.is_some()
            || self.pool.is_some()
            || !self.loosen.is_empty()
            || self.workspace.is_some()
            || self.volume_size.is_some()
    }

    fn workspace(&self) -> Workspace {
        match (self.workspace, self.kind.unwrap_or_default()) {
            (Some(w), _) => w,
            (None, Kind::Template) => Workspace::Empty,
            (None, _) => Workspace::Copied,
        }
    }
}

/// The manifests for `run`, with the options they were rendered with; what the cluster
/// enforces less strictly than asked is said on standard error. A run cordon drives always
/// gets the gated pod, whose command waits for cordon to attach (and copy the directory in).
fn render(
    kube: &KubeOptions,
    image: Option<&str>,
    run: &Elsewhere<'_>,
    driven: bool,
) -> anyhow::Result<(kubernetes::Manifests, Options)> {
    let mut spec = run.spec.clone();
    if run.publishes {
        // The local runner makes the way in; on a cluster it would lead to this machine.
        return Err(kubernetes::KubeError::Inbound.into());
    }
    if run.config.net.any_allowed() {
        // The ports are the proxy pod's; the spec only says "through the proxy".
        spec.network = NetworkMode::Proxy(cordon_sandbox::ProxyEndpoint {
            socket: None,
            http_port: kubernetes::PROXY_PORT,
            socks_port: kubernetes::PROXY_PORT,
        });
    }
    let name = format!("cordon-{}", &run_tag()[..10]);
    let mut files = Vec::new();
    if let Some(worker) = run.worker {
        // `cordon mcp`'s server, which must find its launcher's policy files where the
        // launcher read them, and knows the pod it runs in by name.
        spec.env.extend(worker.env.iter().cloned());
        spec.env.push(("CORDON_SANDBOX".into(), name.clone()));
        for mount in &worker.mounts {
            files.extend(read_files(&mount.from, &mount.to)?);
        }
    }
    let shutdown_time = spec.limits.timeout.map(|limit| {
        humantime::format_rfc3339_seconds(std::time::SystemTime::now() + limit).to_string()
    });
    let options = Options {
        kind: kube.kind.unwrap_or_default(),
        name,
        namespace: kube.namespace.clone(),
        image: image.unwrap_or_default().to_string(),
        runtime_class: kube.runtime_class.clone(),
        loosen: kube.loosen.clone(),
        shutdown_time,
        proxy_image: kube.proxy_image.clone(),
        proxy_settings: Some(network_settings(&run.config.net)?),
        pool: kube.pool,
        // A run cordon drives always has the gated pod; "empty" then means only that
        // nothing is copied.
        workspace: match kube.workspace() {
            Workspace::Empty if driven => Workspace::Copied,
            other => other,
        },
        volume_size: kube.volume_size.clone(),
        files,
    };
    if options.volume_size.is_some() && options.workspace != Workspace::Volume {
        anyhow::bail!(
            "--k8s-volume-size is the size of a claimed workspace: add --k8s-workspace volume"
        );
    }
    let manifests = kubernetes::render(&spec, &options)?;
    for why in run.weaker.iter().chain(&manifests.weaker) {
        eprintln!("cordon: warning: on the cluster, weaker than asked: {why}");
    }
    Ok((manifests, options))
}

/// Prints the manifests for `run` as YAML documents.
pub fn print(kube: &KubeOptions, image: Option<&str>, run: &Elsewhere<'_>) -> anyhow::Result<()> {
    let (manifests, options) = render(kube, image, run, false)?;
    if options.workspace.is_copied() {
        eprintln!(
            "cordon: note: this pod's command waits for cordon to copy the working directory in; to apply it yourself (kubectl apply), add --k8s-workspace empty"
        );
    }
    let mut out = std::io::stdout().lock();
    for object in &manifests.objects {
        let yaml = kubernetes::yaml::to_string(object);
        match write!(out, "---\n{yaml}") {
            // Whoever reads the manifests stopped reading (`| head`): nothing is lost.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            other => other.context("cannot print the manifests")?,
        }
    }
    Ok(())
}

/// Whether this process is the command of one of cordon's pods: the gate
/// ([`kubernetes::copy::gated`]) running `program` is the pod's first process and this one's
/// parent. `cordon mcp`'s worker runs commands without a sandbox of its own only there.
pub fn started_by_the_gate(program: &[&str]) -> Result<(), String> {
    if std::os::unix::process::parent_id() != 1 {
        return Err("its parent is not the pod's first process".into());
    }
    let cmdline = std::fs::read("/proc/1/cmdline").map_err(|e| format!("/proc/1/cmdline: {e}"))?;
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    if kubernetes::copy::is_gate(&args, program) {
        Ok(())
    } else {
        Err("the first process is not cordon's gate".into())
    }
}

/// Runs `run` on the cluster and returns the command's exit status.
pub fn run(kube: &KubeOptions, image: Option<&str>, run: &Elsewhere<'_>) -> anyhow::Result<u8> {
    if kube.kind == Some(Kind::Template) {
        anyhow::bail!(
            "--k8s-kind template makes objects for claims and warm pools, which outlive a run: add --dry-run and apply them with kubectl"
        );
    }
    let (manifests, options) = render(kube, image, run, true)?;
    let walls = Walls {
        hidden: run.spec.hidden.clone(),
        reopened: run.spec.reopened.clone(),
        read_only: run.spec.read_only.clone(),
        live: crate::plan::live_patterns(run.config, &run.spec.cwd)?,
    };
    let copied = kube.workspace().is_copied();
    let input = run.worker.map(|w| w.input.clone()).unwrap_or_default();
    client::run(&client::Job {
        input: &input,
        input_ends_session: run.worker.is_some(),
        manifests: &manifests,
        name: &options.name,
        namespace: options.namespace.as_deref(),
        runtime_class: options.runtime_class.as_deref(),
        cwd: &run.spec.cwd,
        copy: copied.then_some(&walls),
        claim: (options.workspace == Workspace::Volume).then(|| {
            // The name agent-sandbox's controller gives the claim it makes for the sandbox.
            let volume = kubernetes::workspace_volume(&options.name);
            format!("{volume}-{}", options.name)
        }),
        timeout: run.spec.limits.timeout,
    })
}

/// The files under `from` (a file or a directory), each with the path it has at `to` and its
/// text.
fn read_files(
    from: &std::path::Path,
    to: &std::path::Path,
) -> anyhow::Result<Vec<(std::path::PathBuf, String)>> {
    let meta =
        std::fs::metadata(from).with_context(|| format!("cannot read {}", from.display()))?;
    if meta.is_file() {
        let text = std::fs::read_to_string(from)
            .with_context(|| format!("cannot read {} for the pod", from.display()))?;
        return Ok(vec![(to.to_path_buf(), text)]);
    }
    let mut out = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(from)
        .with_context(|| format!("cannot list {}", from.display()))?
        .collect::<Result<_, _>>()?;
    names.sort_by_key(|e| e.file_name());
    for entry in names {
        out.extend(read_files(&entry.path(), &to.join(entry.file_name()))?);
    }
    Ok(out)
}

/// The run's hosts as the `[network]` of a cordon.toml, for the proxy pod: the same rules the
/// local proxy would follow, written with the settings file's own types so that the proxy
/// reads back exactly these keys.
fn network_settings(net: &NetConfig) -> anyhow::Result<String> {
    let file = SettingsFile {
        network: Some(NetworkTable {
            allow_domains: Some(net.allow_domains.clone()),
            deny_domains: Some(net.deny_domains.clone()),
            allow_private_ips: Some(net.allow_private_ips),
            upstream_proxy: net.upstream_proxy.clone(),
            ..NetworkTable::default()
        }),
        ..SettingsFile::default()
    };
    toml::to_string(&file).context("cannot write the proxy's settings")
}
