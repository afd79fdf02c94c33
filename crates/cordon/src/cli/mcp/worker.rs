//! `cordon mcp --backend docker|podman|kubernetes`: the server in a container (or a pod, whose
//! image must hold cordon, and which gets the policy files from a ConfigMap). cordon on the
//! host is the launcher: it starts the container the way `cordon run --backend …` does (same image,
//! profile, mounts, network, user mapping and clean-up), with this very binary as the
//! container's program, serving MCP on the container's standard input and output, which the
//! engine (`run -i`, no terminal) connects to the host cordon's. The protocol passes through
//! untouched, so elicitation, progress and cancellation need nothing here.
//!
//! The binary inside is the host's: it and the shared objects it has loaded (read from
//! `/proc/self/maps`, the dynamic loader among them) are mounted read-only, and the loader is
//! started by path with those objects as its library path (`run::container::inside`). That
//! needs no C library in the image, only the same architecture and a Linux kernel.
//!
//! The worker decides with the host's policy: every policy directory and settings file the
//! host would read is mounted read-only at its own path, and the launcher's policy and sandbox
//! settings, with its fingerprint of those files, go in as a typed [`Request`] on the first
//! line of the container's standard input; a worker that sees other files refuses to start. Inside, the container is the sandbox: commands run there directly, not in a second
//! sandbox of cordon's (Docker refuses user namespaces anyway).

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use cordon_app::config::Sources;
use cordon_app::policy::PolicyConfig;
use cordon_app::run::backend::{Backend, BackendChoice};
use cordon_app::run::container::inside::{started_by_an_engine, this_binary};
use cordon_app::run::container::{SandboxVar, Worker, sandbox_var};
use cordon_app::run::{Launch, Program};
use cordon_sandbox::container::Mount;

/// The worker's command line, as a pod's image runs it.
const WORKER: [&str; 3] = ["cordon", "mcp", "--worker"];

/// The variables that make the worker find the policy files where the host finds them.
fn policy_env() -> Vec<(String, String)> {
    let mut env = Vec::new();
    // The user's config directory by its host path: the container's HOME may be another.
    if let Some(dir) =
        cordon_app::user_settings_dir().and_then(|d| d.parent().map(Path::to_path_buf))
        && let Some(text) = dir.to_str()
    {
        env.push(("XDG_CONFIG_HOME".to_string(), text.to_string()));
    }
    for name in ["CORDON_ADMIN_POLICY_DIR", "CORDON_MANAGED_SETTINGS"] {
        if let Ok(v) = std::env::var(name)
            && !v.is_empty()
        {
            env.push((name.to_string(), v));
        }
    }
    env
}

/// What the worker inside the container is asked to serve with: the launcher's policy and
/// sandbox settings, sent as the first line of the container's standard input (an engine
/// passes no other descriptor in), before the MCP stream.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Request {
    pub policy: PolicyConfig,
    /// The sandbox flags' settings, left to those paths the container shows.
    pub sources: Sources,
    /// The launcher's fingerprint of the policy files, which the worker must see too.
    pub policy_fingerprint: u64,
}

/// The host side: starts the container whose program serves MCP, and waits for it.
pub fn launch(
    policy: &PolicyConfig,
    sources: &Sources,
    backend: BackendChoice,
) -> anyhow::Result<u8> {
    if let SandboxVar::Inside(name) = sandbox_var() {
        bail!(
            "already inside the container {name} (CORDON_SANDBOX is set): cordon does not launch a container from inside one; run `cordon mcp` without --backend here"
        );
    }
    // The worker's working directory is the project's real path; the fingerprint of the
    // policy files names them by path, so the host takes the same one.
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let real = std::fs::canonicalize(&cwd)
        .with_context(|| format!("{}: cannot resolve the working directory", cwd.display()))?;
    std::env::set_current_dir(&real)
        .with_context(|| format!("{}: cannot enter the working directory", real.display()))?;

    // A cluster cannot mount this machine's binary: its pod's image has cordon on its PATH.
    let (mut mounts, mut argv) = if backend.backend() == Backend::Kubernetes {
        (Vec::new(), vec![WORKER[0].to_string()])
    } else {
        let binary = this_binary()?;
        (binary.mounts, binary.argv)
    };
    // Refused here, before a container starts, rather than by the worker inside.
    drop(cordon_app::decide::Decider::new(policy)?);
    for p in policy.source_paths()? {
        if p.exists() && !mounts.iter().any(|m| m.to == p) {
            mounts.push(Mount {
                from: p.clone(),
                to: p,
                options: "ro".into(),
            });
        }
    }
    // `--settings FILE` is read inside as well.
    if let Some(file) = &sources.settings_file
        && !mounts.iter().any(|m| &m.to == file)
    {
        mounts.push(Mount {
            from: file.clone(),
            to: file.clone(),
            options: "ro".into(),
        });
    }
    // Where the container shows the host: the project, the other workspaces, and what
    // `--allow-write` opens (mounted at their own paths).
    let mut others = Vec::new();
    for w in policy.workspace_dirs()? {
        let w = std::fs::canonicalize(&w).unwrap_or(w);
        if !w.starts_with(&real) {
            others.push(w);
        }
    }
    // Not warned about here: the run below says what its plan warns of.
    let plan = cordon_app::plan::plan(&sources.resolve()?)?;
    let shown: Vec<PathBuf> = std::iter::once(real.clone())
        .chain(others.iter().cloned())
        .chain(plan.writable)
        .collect();
    let mut request = serde_json::to_vec(&Request {
        policy: policy.clone(),
        sources: sources.for_container(&real, &shown),
        policy_fingerprint: policy.content_fingerprint(),
    })?;
    request.push(b'\n');

    argv.extend(WORKER.iter().skip(1).map(|a| a.to_string()));
    // Workspaces beside the project: writable, with their protected files kept read-only,
    // as `--allow-write` gives them.
    let mut run_sources = sources.clone();
    run_sources
        .flags
        .allow_write
        .get_or_insert_with(Vec::new)
        .extend(others);
    let launch = Launch {
        program: Program::Argv(argv),
        backend,
        worker: Some(Worker {
            mounts,
            env: policy_env(),
            input: request,
        }),
        ..Launch::default()
    };
    cordon_app::run::run(&run_sources, launch)
}

/// The worker side: the request its launcher sent, and the container it runs in, after
/// checking that it decides with the policy its launcher read.
pub fn inside() -> anyhow::Result<(Request, String)> {
    let SandboxVar::Inside(name) = sandbox_var() else {
        bail!(
            "--worker is for the server cordon starts inside its own container (CORDON_SANDBOX names it there); run `cordon mcp` without --worker"
        );
    };
    let request = read_request()?;
    if request.policy.content_fingerprint() != request.policy_fingerprint {
        bail!(
            "the policy files seen inside the container {name} differ from those the launcher read (a policy directory or settings file missing, or changed since); cordon will not decide with another policy; start `cordon mcp --backend …` again"
        );
    }
    // The worker runs commands without a sandbox of its own: only as the program of a
    // container cordon started, not wherever someone set the variable.
    if let Err(why) = started_by_an_engine().or_else(|e| {
        cordon_app::run::kubernetes::started_by_the_gate(&WORKER)
            .map_err(|k| format!("{e}; nor is it a pod's ({k})"))
    }) {
        bail!(
            "--worker: CORDON_SANDBOX names the container {name}, but this is not the program of one of cordon's containers ({why}); cordon runs commands without its sandbox only there; run `cordon mcp` without --worker"
        );
    }
    Ok((request, name))
}

/// The first line of standard input, read a byte at a time: whatever follows it is the MCP
/// stream, which must stay unread for the server.
fn read_request() -> anyhow::Result<Request> {
    use std::io::Read;
    let mut stdin = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map(std::fs::File::from)?;
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        if stdin.read(&mut byte)? == 0 {
            bail!("standard input ended before the launcher's request");
        }
        if byte[0] == b'\n' {
            break;
        }
        if line.len() >= cordon_app::lines::MAX_LINE {
            bail!(
                "the launcher's request is longer than {} bytes",
                cordon_app::lines::MAX_LINE
            );
        }
        line.push(byte[0]);
    }
    serde_json::from_slice(&line)
        .context("the first line of standard input is not the request cordon's launcher sends")
}
