//! The container backends (`--backend docker|podman|container`): the program in a container.
//!
//! The engine's command line comes from `cordon_sandbox::container::build`, a pure function;
//! this module gathers what it needs (the engine, the image, facts about the host), starts the
//! engine with the terminal's standard streams, and makes sure no container outlives the run:
//! a small watcher process, in its own process group so a Ctrl-C does not reach it, removes
//! the container when cordon ends in any way but a normal one (SIGTERM, SIGKILL, a crash).

pub mod inside;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use cordon_sandbox::container::{
    self, DOCKERFILE, Engine, Host, HostOs, Invocation, Options, PathKind, Profile, ProxyGate,
    classify_pull_failure,
};
use cordon_sandbox::{NetworkMode, ProxyEndpoint, SandboxSpec, Violation};
use serde::{Deserialize, Serialize};

use super::backend::Elsewhere;
use crate::proxy::RunProxy;

/// How a run uses a container backend.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ContainerOptions {
    /// The container image [default: $CORDON_SANDBOX_IMAGE, else the project's
    /// .cordon/sandbox.Dockerfile, built and tagged by cordon].
    pub image: Option<String>,
    /// Hardening and limits: dev, safe, tight or offline [default: dev].
    pub container_profile: Option<String>,
    /// Pass the model providers' API keys into the container.
    pub pass_api_keys: bool,
    /// Do not forward the SSH agent into the container.
    pub no_ssh_agent: bool,
}

impl ContainerOptions {
    /// Whether any container flag was given.
    pub fn is_set(&self) -> bool {
        self.image.is_some()
            || self.container_profile.is_some()
            || self.pass_api_keys
            || self.no_ssh_agent
    }

    /// The settings' image and profile, where neither the flag nor its variable gave one.
    pub fn settle(&mut self, image: Option<String>, profile: Option<String>) {
        if self.image.is_none() && env_var("CORDON_SANDBOX_IMAGE").is_none() {
            self.image = image;
        }
        if self.container_profile.is_none() && env_var("CORDON_SANDBOX_PROFILE").is_none() {
            self.container_profile = profile;
        }
    }
}

/// What `cordon mcp --backend docker|podman` adds to a container run, whose program is a
/// cordon serving MCP on the container's standard input and output: cordon's binary and the
/// policy files mounted read-only, the variables that find them, and a plain byte stream.
#[derive(Debug, Clone, Default)]
pub struct Worker {
    /// Mounted where nothing the run mounts already shows them (a path inside the project is
    /// there anyway, and an engine refuses two mounts at one place).
    pub mounts: Vec<container::Mount>,
    pub env: Vec<(String, String)>,
    /// Written to the container's standard input before this process's own: the worker's
    /// request, which no engine can pass on a descriptor of its own.
    pub input: Vec<u8>,
}

/// `CORDON_SANDBOX` as the launcher reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxVar {
    /// Unset, empty, `0` or `false`: the OS's own sandbox.
    Unset,
    /// `docker` or `podman`.
    Engine(Engine),
    /// `1`, `true` or `container`: whichever engine is installed.
    Auto,
    /// `kubernetes`: a cluster (`--backend kubernetes`).
    Kubernetes,
    /// Anything else is the name of the container this process already runs in.
    Inside(String),
}

pub fn sandbox_var() -> SandboxVar {
    let value = std::env::var("CORDON_SANDBOX").unwrap_or_default();
    match value.as_str() {
        "" | "0" | "false" => SandboxVar::Unset,
        "1" | "true" | "container" => SandboxVar::Auto,
        "kubernetes" => SandboxVar::Kubernetes,
        v => match Engine::parse(v) {
            Some(e) => SandboxVar::Engine(e),
            None => SandboxVar::Inside(value),
        },
    }
}

/// The engine asked for, or the first one installed.
fn choose_engine(asked: Option<Engine>) -> anyhow::Result<(Engine, PathBuf)> {
    let candidates: &[Engine] = match asked {
        Some(Engine::Docker) => &[Engine::Docker],
        Some(Engine::Podman) => &[Engine::Podman],
        None => &[Engine::Docker, Engine::Podman],
    };
    for e in candidates {
        if let Some(path) = crate::find_program(e.program()) {
            return Ok((*e, path));
        }
    }
    match asked {
        Some(Engine::Docker) => bail!(
            "docker is not installed (not found on PATH): install Docker (Debian and Ubuntu: `apt-get install docker.io`; macOS: Docker Desktop), or use --backend podman"
        ),
        Some(Engine::Podman) => bail!(
            "podman is not installed (not found on PATH): install Podman (Debian and Ubuntu: `apt-get install podman`; macOS: `brew install podman`), or use --backend docker"
        ),
        None => bail!(
            "neither docker nor podman is installed (not found on PATH): install one (Debian and Ubuntu: `apt-get install docker.io` or `apt-get install podman`; macOS: Docker Desktop or `brew install podman`)"
        ),
    }
}

/// Turns an engine's failure to answer into what to do about it.
fn engine_failure(engine: Engine, stderr: &str) -> Option<anyhow::Error> {
    let s = stderr.to_ascii_lowercase();
    let name = engine.program();
    if s.contains("permission denied") && (s.contains(".sock") || s.contains("socket")) {
        return Some(anyhow::anyhow!(
            "{name}: no permission to use the engine's socket: add your user to the `{name}` group (then log in again), or use rootless Podman; {name} said: {}",
            stderr.trim()
        ));
    }
    let unreachable = [
        "cannot connect",
        "is the docker daemon running",
        "unable to connect",
        "connection refused",
        "no such file or directory",
        "error during connect",
    ];
    if unreachable.iter().any(|p| s.contains(p)) {
        let how = match engine {
            Engine::Docker => {
                "start it (`sudo systemctl start docker`, or run `dockerd`; on macOS open Docker Desktop)"
            }
            Engine::Podman => {
                "start it (on macOS and Windows `podman machine start`; on Linux check `podman info`)"
            }
        };
        return Some(anyhow::anyhow!(
            "cannot reach the {name} engine: {how}; {name} said: {}",
            stderr.trim()
        ));
    }
    None
}

/// Output of a quick engine command.
fn engine_output(program: &Path, args: &[&str]) -> anyhow::Result<std::process::Output> {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot start {}", program.display()))
}

/// Asks the Docker daemon on its default socket for the image's id, without starting the
/// `docker` program (about 18 ms here, 6 % of a container's start-up). Only a plain answer
/// counts: anything else (another daemon chosen by `DOCKER_HOST` or a context, no socket, an
/// unexpected reply) leaves the question to the `docker` program.
fn docker_image_id_fast(image: &str) -> Option<String> {
    use std::io::Read;
    const SOCKET: &str = "/var/run/docker.sock";
    if std::env::var_os("DOCKER_HOST").is_some() || std::env::var_os("DOCKER_CONTEXT").is_some() {
        return None;
    }
    let config = std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker")))
        .map(|d| d.join("config.json"));
    if let Some(config) = config
        && std::fs::read_to_string(config).is_ok_and(|t| t.contains("currentContext"))
    {
        return None;
    }
    // Names are letters, digits and `/:._-@`; anything else is not asked about here.
    if image.is_empty()
        || !image
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/:._-@".contains(c))
    {
        return None;
    }
    let mut conn = std::os::unix::net::UnixStream::connect(SOCKET).ok()?;
    conn.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .ok()?;
    // HTTP/1.0: the daemon answers in one piece and closes.
    let request = format!("GET /images/{image}/json HTTP/1.0\r\nHost: docker\r\n\r\n");
    conn.write_all(request.as_bytes()).ok()?;
    let mut reply = Vec::new();
    conn.take(16 << 20).read_to_end(&mut reply).ok()?;
    let text = String::from_utf8_lossy(&reply);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.lines().next()?;
    if !(status.starts_with("HTTP/1.") && status.get(8..12) == Some(" 200")) {
        return None;
    }
    let json: serde_json::Value = serde_json::from_str(body).ok()?;
    json.get("Id")?.as_str().map(str::to_string)
}

/// The image's id, from the daemon's socket or the engine program.
fn image_id(engine: Engine, program: &Path, image: &str) -> Option<String> {
    if engine == Engine::Docker
        && let Some(id) = docker_image_id_fast(image)
    {
        return Some(id);
    }
    let out = engine_output(program, &["image", "inspect", "--format", "{{.Id}}", image]).ok()?;
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !id.is_empty()).then_some(id)
}

/// Makes sure the image is there: found locally, else pulled; a failure says whose fault.
fn ensure_image(engine: Engine, program: &Path, image: &str) -> anyhow::Result<()> {
    if engine == Engine::Docker && docker_image_id_fast(image).is_some() {
        return Ok(());
    }
    let out = engine_output(program, &["image", "inspect", "--format", "{{.Id}}", image])?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    if let Some(e) = engine_failure(engine, &stderr) {
        return Err(e);
    }
    eprintln!("cordon: image {image} is not here; pulling it");
    let pull = Command::new(program)
        .args(["pull", image])
        .stdin(Stdio::null())
        .stdout(stderr_stdio()?)
        .stderr(Stdio::piped())
        .output()
        .context("cannot start the engine to pull the image")?;
    if pull.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&pull.stderr);
    let fault = classify_pull_failure(&said);
    bail!(
        "cannot pull image {image}: {}; {} said: {}",
        fault.hint(),
        engine.program(),
        said.trim()
    )
}

/// cordon's standard error, for a child's standard output: build and pull progress must not
/// mix with the program's output, which may be piped.
fn stderr_stdio() -> anyhow::Result<Stdio> {
    use std::os::fd::AsFd;
    Ok(Stdio::from(std::io::stderr().as_fd().try_clone_to_owned()?))
}

/// The project's image from `.cordon/sandbox.Dockerfile`: built when its tag (one per recipe)
/// is missing, with the build's progress on standard error.
fn project_image(
    engine: Engine,
    program: &Path,
    cwd: &Path,
    recipe: &Path,
    dry_run: bool,
) -> anyhow::Result<String> {
    let text = std::fs::read(recipe)
        .with_context(|| format!("{}: cannot read the image recipe", recipe.display()))?;
    let tag = container::dockerfile_tag(cwd, &text);
    if dry_run {
        return Ok(tag);
    }
    let out = engine_output(program, &["image", "inspect", "--format", "{{.Id}}", &tag])?;
    if out.status.success() {
        return Ok(tag);
    }
    if let Some(e) = engine_failure(engine, &String::from_utf8_lossy(&out.stderr)) {
        return Err(e);
    }
    eprintln!("cordon: building {tag} from {}", recipe.display());
    let context_dir = recipe.parent().unwrap_or(cwd);
    let status = Command::new(program)
        .arg("build")
        .arg("-f")
        .arg(recipe)
        .args(["-t", &tag])
        .arg(context_dir)
        .stdin(Stdio::null())
        .stdout(stderr_stdio()?)
        .status()
        .context("cannot start the engine to build the image")?;
    if !status.success() {
        bail!(
            "{}: the image build failed (its output is above); fix the recipe and run again",
            recipe.display()
        );
    }
    Ok(tag)
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn env_flag(name: &str) -> anyhow::Result<Option<bool>> {
    match env_var(name).as_deref() {
        None => Ok(None),
        Some("1" | "true") => Ok(Some(true)),
        Some("0" | "false") => Ok(Some(false)),
        Some(v) => bail!("{name}={v}: write 1 or 0"),
    }
}

#[cfg(target_os = "linux")]
fn user_ids() -> (u32, u32) {
    cordon_sandbox::linux::user_ids()
}

#[cfg(not(target_os = "linux"))]
fn user_ids() -> (u32, u32) {
    let id = |flag: &str| {
        Command::new("id")
            .arg(flag)
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    };
    (id("-u"), id("-g"))
}

/// Whether Podman runs without root (then it maps users with `--userns=keep-id`).
fn podman_rootless(program: &Path) -> bool {
    engine_output(
        program,
        &["info", "--format", "{{.Host.Security.Rootless}}"],
    )
    .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "true")
    .unwrap_or(false)
}

/// Runs (or with `--dry-run` shows) the run's spec in a container.
pub fn run_container(
    asked: Option<Engine>,
    flags: &ContainerOptions,
    dry_run: bool,
    run: &Elsewhere<'_>,
) -> anyhow::Result<u8> {
    if let SandboxVar::Inside(name) = sandbox_var() {
        bail!(
            "already inside the container {name} (CORDON_SANDBOX is set): cordon does not launch a container from inside one; run without --backend to use the sandbox here"
        );
    }
    if run.publishes {
        bail!(
            "--publish is for the native sandbox; a container publishes ports with CORDON_SANDBOX_PORTS=HOST_PORT:PORT and --network host"
        );
    }
    let profile = match flags
        .container_profile
        .clone()
        .or_else(|| env_var("CORDON_SANDBOX_PROFILE"))
    {
        None => Profile::default(),
        Some(name) => Profile::parse(&name).with_context(|| {
            format!(
                "--container-profile {name}: no such profile; choose one of {}",
                Profile::NAMES
            )
        })?,
    };
    let mut spec: SandboxSpec = run.spec.clone();
    // The limits as asked: the engine enforces them for the whole container. The profile's
    // process limit applies where none is set; a session's share caps either.
    let max_processes = match (run.config.max_processes, run.session_share) {
        (asked, None) => asked,
        (asked, Some(share)) => Some(
            asked
                .or(profile.default_limits().0)
                .map_or(share, |n| n.min(share)),
        ),
    };
    spec.limits = cordon_sandbox::Limits {
        max_processes,
        ..*run.wanted
    };
    // The variables' languages are checked before anything is started or pulled.
    let options_env = |name: &str| env_var(name).unwrap_or_default();
    let mounts = container::parse_mounts(&options_env("CORDON_SANDBOX_MOUNTS"))?;
    let extra_env = container::parse_env(&options_env("CORDON_SANDBOX_ENV"))?;
    let extra_flags = container::parse_flags(&options_env("CORDON_SANDBOX_FLAGS"))?;
    let ports = container::parse_ports(&options_env("CORDON_SANDBOX_PORTS"))?;
    let set_uid_gid = env_flag("CORDON_SANDBOX_SET_UID_GID")?;
    // Only root may join a rootful engine's container's network namespace: said before
    // anything starts.
    if run.config.net.any_allowed() && !dry_run && !super::backend::is_root() {
        bail!(
            "--allow-domain with a container needs cordon to run as root (it hands its proxy's ports into the container's network namespace, which only root may enter for a rootful engine); rootless engines are not supported with --allow-domain yet; drop --allow-domain for no network at all"
        );
    }
    let (engine, program) = match choose_engine(asked) {
        Ok(found) => found,
        // A dry run shows the command even where the engine is not installed.
        Err(_) if dry_run => (
            asked.unwrap_or(Engine::Docker),
            PathBuf::from(asked.unwrap_or(Engine::Docker).program()),
        ),
        Err(e) => return Err(e),
    };
    let recipe = spec.cwd.join(DOCKERFILE);
    let image = match flags
        .image
        .clone()
        .or_else(|| env_var("CORDON_SANDBOX_IMAGE"))
    {
        Some(image) => {
            if !dry_run {
                ensure_image(engine, &program, &image)?;
            }
            image
        }
        None if recipe.is_file() => project_image(engine, &program, &spec.cwd, &recipe, dry_run)?,
        None => bail!(
            "no container image: give --image NAME, set CORDON_SANDBOX_IMAGE, or keep a recipe in {DOCKERFILE}"
        ),
    };
    // Allowed hosts: cordon's proxy, as for the native sandbox, with its ports handed into
    // the container once it runs (see `launch`). A dry run starts nothing.
    let proxy = if dry_run {
        run.config.net.rules()?;
        run.config.net.any_allowed().then(|| {
            let endpoint = ProxyEndpoint {
                socket: None,
                http_port: crate::proxy::HTTP_PORT,
                socks_port: crate::proxy::SOCKS_PORT,
            };
            (None, endpoint, std::env::temp_dir().join("cordon-gate"))
        })
    } else {
        // Ports are published the container's way (CORDON_SANDBOX_PORTS), not by the proxy.
        let started = RunProxy::start(run.config, run.ask, &[])?;
        match started.and_then(|p| p.endpoint.clone().map(|e| (p, e))) {
            Some((proxy, endpoint)) => {
                let gate = cordon_sandbox::private_dir(&std::env::temp_dir(), "cordon-gate")
                    .context("cannot make the directory that tells the container to start")?;
                // Whoever the container runs as must see `ready` appear.
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&gate, std::fs::Permissions::from_mode(0o755))?;
                Some((Some(proxy), endpoint, gate))
            }
            None => None,
        }
    };
    let _gate_cleanup = proxy
        .as_ref()
        .filter(|_| !dry_run)
        .map(|(_, _, g)| RemoveDir(g.clone()));
    if let Some((_, endpoint, _)) = &proxy {
        spec.network = NetworkMode::Proxy(endpoint.clone());
    }
    let empty_dir = if engine == Engine::Podman && !spec.hidden.is_empty() && !dry_run {
        let dir = cordon_sandbox::private_dir(&std::env::temp_dir(), "cordon-empty")
            .context("cannot make the empty directory shown in place of hidden ones")?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555))?;
        Some(dir)
    } else {
        None
    };
    let _empty_cleanup = empty_dir.clone().map(RemoveDir);
    let ssh_agent = !flags.no_ssh_agent && env_flag("CORDON_SANDBOX_SSH_AGENT")? != Some(false);
    let options = Options {
        engine,
        image,
        name: container::container_name(&spec.cwd, &super::backend::run_tag()[..8]),
        profile,
        set_uid_gid,
        container_home: None,
        mounts,
        env: extra_env,
        flags: extra_flags,
        ports,
        pass_api_keys: flags.pass_api_keys,
        env_rules: run.config.env_rules()?,
        ssh_agent,
        empty_dir,
        user_files: None,
        proxy: proxy.as_ref().map(|(_, endpoint, gate)| ProxyGate {
            // ssh's ProxyCommand would name cordon's path on the host, absent inside.
            env: crate::proxy::environment(endpoint)
                .into_iter()
                .filter(|(k, _)| k != "GIT_SSH_COMMAND")
                .collect(),
            gate_dir: gate.clone(),
        }),
    };
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let (uid, gid) = user_ids();
    let mut host = Host {
        os: if cfg!(target_os = "macos") {
            HostOs::MacOs
        } else {
            HostOs::Linux
        },
        uid,
        gid,
        home: home.clone(),
        settings_dir: crate::user_policy_dir()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .filter(|d| d.is_dir()),
        env: super::launch_environment().collect(),
        tty: std::io::stdin().is_terminal(),
        rootless: engine == Engine::Podman && !dry_run && podman_rootless(&program),
        kinds: Vec::new(),
    };
    for p in Host::paths_to_check(&spec, &options, home.as_deref()) {
        let kind = match std::fs::metadata(&p) {
            Ok(m) if m.is_dir() => Some(PathKind::Dir),
            Ok(_) => Some(PathKind::File),
            Err(_) => None,
        };
        if let Some(kind) = kind {
            host.kinds.push((p, kind));
        }
    }
    let mut options = options;
    if let Some(worker) = run.worker {
        // A terminal would turn the MCP stream's line ends into CRLF and echo the input.
        host.tty = false;
        let shown = |to: &Path| {
            to.starts_with(&spec.cwd)
                || spec.writable.iter().any(|w| to.starts_with(w))
                || spec.read_only.iter().any(|r| to == r)
                || host
                    .settings_dir
                    .as_ref()
                    .is_some_and(|d| to.starts_with(d))
        };
        options
            .mounts
            .extend(worker.mounts.iter().filter(|m| !shown(&m.to)).cloned());
        for m in &worker.mounts {
            if !host.kinds.iter().any(|(p, _)| p == &m.from) {
                let kind = match std::fs::metadata(&m.from) {
                    Ok(md) if md.is_dir() => PathKind::Dir,
                    Ok(_) => PathKind::File,
                    Err(e) => bail!(
                        "{}: cannot mount it into the container: {e}",
                        m.from.display()
                    ),
                };
                host.kinds.push((m.from.clone(), kind));
            }
        }
        options.env.extend(worker.env.iter().cloned());
    }
    if !dry_run && container::maps_user_with_uid(&options, &host) {
        options.user_files = user_files(engine, &program, &options.image, &host);
    }
    let invocation = container::build(&spec, &options, &host)?;
    for w in &invocation.warnings {
        eprintln!("cordon: warning: {w}");
    }
    if dry_run {
        println!("{}", invocation.command_line());
        if let Some(worker) = run.worker {
            println!(
                "# then, on the container's standard input before the MCP stream, the worker's request:\n{}",
                String::from_utf8_lossy(&worker.input).trim_end()
            );
        }
        return Ok(0);
    }
    if env_var("CORDON_DEBUG").is_some_and(|v| v != "0") {
        eprintln!("cordon: {}", invocation.command_line());
    }
    if ssh_agent
        && invocation
            .args
            .iter()
            .any(|a| a.starts_with("SSH_AUTH_SOCK="))
    {
        warn_if_agent_empty();
    }
    let (proxy, bridge) = match proxy {
        Some((proxy, endpoint, gate)) => (proxy, Some((endpoint, gate))),
        None => (None, None),
    };
    let ended = launch(
        &program,
        &invocation,
        &options.name,
        spec.limits.timeout,
        bridge.as_ref(),
        run.worker.map(|w| w.input.as_slice()),
    );
    let refused = proxy.map(|p| p.finish()).unwrap_or_default();
    let (code, timed_out) = ended?;
    let blocked: Vec<Violation> = refused.iter().map(Violation::from).collect();
    // The engine reports a signal as 128 + N, which an exit code of its own looks like too.
    let end = super::End {
        code,
        signal: None,
        timed_out,
        error: None,
    };
    for w in run.weaker {
        eprintln!("cordon: warning: {w}");
    }
    super::tell_what_happened(
        &blocked,
        run.weaker,
        &invocation.env_withheld,
        end,
        run.report,
        false,
    )?;
    Ok(code)
}

/// Removes a directory when dropped.
struct RemoveDir(PathBuf);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The container's first process, once the engine has started it.
fn container_pid(
    program: &Path,
    name: &str,
    engine: &mut std::process::Child,
) -> anyhow::Result<u32> {
    let start = std::time::Instant::now();
    loop {
        let out = engine_output(program, &["inspect", "--format", "{{.State.Pid}}", name])?;
        if let Ok(pid) = String::from_utf8_lossy(&out.stdout).trim().parse::<u32>()
            && pid != 0
        {
            return Ok(pid);
        }
        if engine.try_wait()?.is_some() {
            bail!("the container ended before cordon could connect it to its proxy");
        }
        if start.elapsed() > std::time::Duration::from_secs(120) {
            bail!("the container did not start within two minutes");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Hands the proxy's ports into the running container, then opens its gate.
#[cfg(target_os = "linux")]
fn connect_proxy(
    program: &Path,
    name: &str,
    engine: &mut std::process::Child,
    endpoint: &ProxyEndpoint,
    gate: &Path,
) -> anyhow::Result<()> {
    let pid = container_pid(program, name, engine)?;
    cordon_sandbox::linux::hand_ports_from(pid, endpoint).with_context(|| {
        format!(
            "cannot hand cordon's proxy ports into the container's network namespace (process {pid}); this needs root (a rootful engine run by root); rootless engines are not supported with --allow-domain yet"
        )
    })?;
    std::fs::write(gate.join("ready"), b"")
        .context("cannot tell the container that its proxy is ready")?;
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn connect_proxy(
    _: &Path,
    _: &str,
    _: &mut std::process::Child,
    _: &ProxyEndpoint,
    _: &Path,
) -> anyhow::Result<()> {
    bail!("--allow-domain with a container needs cordon's proxy, which runs only on Linux so far")
}

/// The image's users with the host user added, cached per image and user under
/// `~/.cache/cordon/users/`: reading them costs one container start, the first time only.
/// `None` when the image knows the user already, or when they cannot be had (then the
/// program runs as a uid without a name, as before).
fn user_files(
    engine: Engine,
    program: &Path,
    image: &str,
    host: &Host,
) -> Option<(PathBuf, PathBuf)> {
    let id = image_id(engine, program, image)?;
    let key: String = id
        .trim_start_matches("sha256:")
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(24)
        .collect();
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| host.home.as_ref().map(|h| h.join(".cache")))?
        .join("cordon/users")
        .join(format!("{key}-{}-{}", host.uid, host.gid));
    let (passwd, group, known) = (
        cache.join("passwd"),
        cache.join("group"),
        cache.join("known"),
    );
    if known.exists() {
        return None;
    }
    if passwd.is_file() && group.is_file() {
        return Some((passwd, group));
    }
    // The image's own files, read by its shell (an image without one gets root and the user).
    const MARK: &str = "@@cordon-group@@";
    let out = Command::new(program)
        .args([
            "run",
            "--rm",
            "--network",
            "none",
            "--entrypoint",
            "/bin/sh",
        ])
        .arg(image)
        .args([
            "-c",
            &format!("cat /etc/passwd; echo {MARK}; cat /etc/group"),
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let (image_passwd, image_group) = text.split_once(&format!("{MARK}\n")).unwrap_or(("", ""));
    let name = std::env::var("USER").unwrap_or_default();
    let home = host
        .home
        .clone()
        .unwrap_or_else(|| PathBuf::from("/home/cordon"));
    std::fs::create_dir_all(&cache).ok()?;
    match container::user_entries(image_passwd, image_group, host.uid, host.gid, &name, &home) {
        None => {
            let _ = std::fs::write(&known, b"");
            None
        }
        Some((p, g)) => {
            std::fs::write(&passwd, p).ok()?;
            std::fs::write(&group, g).ok()?;
            Some((passwd, group))
        }
    }
}

/// `ssh-add -l` exits 1 when the agent holds no keys: forwarding it then helps nobody.
fn warn_if_agent_empty() {
    let status = Command::new("ssh-add")
        .arg("-l")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if matches!(status.map(|s| s.code()), Ok(Some(1))) {
        eprintln!(
            "cordon: warning: the SSH agent holds no keys; git over SSH inside will fail (add one with `ssh-add`)"
        );
    }
}

/// Removes the container when cordon ends without saying it is done: it reads the engine's
/// process id, then waits for `done`; at end of input without it (cordon was killed), it kills
/// that process and removes the container, twice, the second time for a container whose
/// creation was still under way.
const WATCHER: &str = r#"read -r pid; read -r state
[ "$state" = done ] && exit 0
[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
"$0" rm -f "$1" >/dev/null 2>&1
sleep 2
exec "$0" rm -f "$1" >/dev/null 2>&1"#;

/// Runs the engine and returns the exit status and whether `--timeout` ended it.
fn launch(
    program: &Path,
    invocation: &Invocation,
    name: &str,
    timeout: Option<std::time::Duration>,
    bridge: Option<&(ProxyEndpoint, PathBuf)>,
    input_first: Option<&[u8]>,
) -> anyhow::Result<(u8, bool)> {
    use std::os::unix::process::{CommandExt, ExitStatusExt};

    let (watch_read, mut watch_write) = std::io::pipe()?;
    // Its own process group: a Ctrl-C at the terminal reaches cordon and the engine, not the
    // one process that must clean up after them.
    let mut watcher = Command::new("/bin/sh")
        .args(["-c", WATCHER])
        .arg(program)
        .arg(name)
        .stdin(watch_read)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .context("cannot start the process that cleans up after the container")?;
    let mut engine = Command::new(program);
    engine.args(&invocation.args);
    for (k, v) in &invocation.secret_env {
        engine.env(k, v);
    }
    if input_first.is_some() {
        engine.stdin(Stdio::piped());
    }
    let mut child = engine
        .spawn()
        .with_context(|| format!("cannot start {}", program.display()))?;
    if let (Some(first), Some(mut to)) = (input_first, child.stdin.take()) {
        let first = first.to_vec();
        // Ends when this process's input does (the container then sees the end of its own),
        // or when the container has gone.
        std::thread::spawn(move || {
            if to.write_all(&first).is_ok() {
                let _ = std::io::copy(&mut std::io::stdin().lock(), &mut to);
            }
        });
    }
    let _ = writeln!(watch_write, "{}", child.id());
    if let Some((endpoint, gate)) = bridge
        && let Err(e) = connect_proxy(program, name, &mut child, endpoint, gate)
    {
        // The program never started (it waits at the gate): remove it and say why.
        let _ = Command::new(program)
            .args(["rm", "-f", name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = child.wait();
        let _ = writeln!(watch_write, "done");
        return Err(e);
    }
    let timer = timeout.map(|t| {
        let program = program.to_path_buf();
        let name = name.to_string();
        let (cancel, cancelled) = std::sync::mpsc::channel::<()>();
        let handle = std::thread::spawn(move || {
            if cancelled.recv_timeout(t) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                let _ = Command::new(&program)
                    .args(["kill", &name])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
                return true;
            }
            false
        });
        (cancel, handle)
    });
    let status = child.wait().context("lost the engine process")?;
    let timed_out = match timer {
        Some((cancel, handle)) => {
            let _ = cancel.send(());
            handle.join().unwrap_or(false)
        }
        None => false,
    };
    let _ = writeln!(watch_write, "done");
    drop(watch_write);
    let _ = watcher.wait();
    if timed_out {
        eprintln!("cordon: the command ran longer than --timeout and was killed");
        return Ok((cordon_sandbox::exit::TIMEOUT, true));
    }
    let code = match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(u8::MAX),
        (None, Some(sig)) => 128u8.saturating_add(u8::try_from(sig).unwrap_or(0)),
        _ => u8::MAX,
    };
    Ok((code, false))
}
