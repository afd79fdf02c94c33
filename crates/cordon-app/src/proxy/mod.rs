//! cordon's egress proxy: `cordon proxy` on its own, and the proxy process a run starts for
//! its command (sent a [`ProxyRequest`] on a descriptor, see [`crate::child`]).

pub mod ask;

use std::io::{IsTerminal, Read};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use cordon_net::{Blocked, Proxy, Rules};
use serde::{Deserialize, Serialize};

pub use ask::AskVia;
use ask::{JsonAsker, Lines, TerminalAsker, write_line};

use crate::config::{RunConfig, Sources};
use crate::settings;

/// What a proxy process is asked to serve.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ProxyRequest {
    /// Where its network settings come from: merged at start, and again when a file changes.
    pub sources: Sources,
    /// Also allow the hosts answered "always" in earlier runs (a run's proxy).
    pub remembered: bool,
    /// `HOST:PORT` or `unix:PATH` to listen on.
    pub listen: Vec<String>,
    /// A listening Unix socket on this descriptor takes handed-over listeners (a run's
    /// sandbox hands its proxy ports over through it).
    pub handoff_fd: Option<i32>,
    /// Refusals go to this descriptor as JSON lines instead of standard output.
    pub events_fd: Option<i32>,
    /// The `cordon run` this proxy serves: it ends when that process does.
    pub parent: Option<u32>,
    /// A listening Unix socket on this descriptor, which the sandbox connects to for
    /// `--publish` (see `SandboxSpec::inbound`).
    pub inbound_fd: Option<i32>,
    /// Host connections on the listener at the descriptor go to the port inside the sandbox.
    pub published: Vec<(i32, u16)>,
    /// Who decides about a host no rule names [default: nobody].
    pub ask: Option<AskVia>,
}

/// `--publish [HOST_PORT:]PORT`: a port on the host's loopback that leads to one on the
/// sandbox's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Publish {
    pub host_port: u16,
    pub port: u16,
}

impl std::str::FromStr for Publish {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let port = |p: &str| p.parse::<u16>().ok().filter(|&p| p > 0);
        let (host, inside) = s.split_once(':').unwrap_or((s, s));
        match (port(host), port(inside)) {
            (Some(host_port), Some(port)) => Ok(Publish { host_port, port }),
            _ => Err(format!(
                "`{s}`: write PORT or HOST_PORT:PORT (1-65535), e.g. 8080:3000"
            )),
        }
    }
}

/// The most ports one run may publish.
pub const MAX_PUBLISHED: usize = 8;

/// The most refusals a proxy started for a run writes out; a command retrying in a loop must
/// not fill its report (nor the pipe it goes through).
const MAX_EVENTS: usize = 100;

/// Serves until killed (or, for a run's proxy, until the run ends).
#[cfg(target_os = "linux")]
pub fn serve(args: ProxyRequest) -> anyhow::Result<u8> {
    if args.listen.is_empty() && args.handoff_fd.is_none() {
        bail!("give at least one --listen HOST:PORT or --listen unix:PATH");
    }
    // The proxy takes the network settings of cordon.toml under its flags, and follows them
    // as they change; a run's proxy is given the run's flags as typed and where its settings
    // are, and adds the hosts answered "always" in earlier runs.
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let places = args.sources.places(&cwd);
    let remembered = args.remembered.then(ask::remembered_path).flatten();
    let mut watched: Vec<PathBuf> = places.files().into_iter().map(PathBuf::from).collect();
    watched.extend(remembered.clone());
    let sources = args.sources.clone();
    let settled = move || -> anyhow::Result<crate::config::NetConfig> {
        let mut net = sources.resolve()?.net;
        if let Some(path) = &remembered {
            net.allow_domains.extend(ask::remembered(path)?);
        }
        Ok(net)
    };
    let net = settled()?;
    let mut config = net.proxy_config()?;
    // Check every address before serving any: a typo should stop it, not half-start it.
    let mut tcp = Vec::new();
    let mut unix = Vec::new();
    for l in &args.listen {
        match l.strip_prefix("unix:") {
            Some(path) => {
                let _ = std::fs::remove_file(path);
                let listener = std::os::unix::net::UnixListener::bind(path)
                    .with_context(|| format!("--listen {l}: cannot listen"))?;
                listener.set_nonblocking(true)?;
                unix.push(listener);
            }
            None => {
                let listener = std::net::TcpListener::bind(l.as_str()).with_context(|| {
                    format!("--listen {l}: cannot listen (HOST:PORT or unix:PATH)")
                })?;
                listener.set_nonblocking(true)?;
                eprintln!("cordon: proxy listening on {}", listener.local_addr()?);
                tcp.push(listener);
            }
        }
    }
    if let Some(parent) = args.parent {
        // Started by `cordon run`: its connections end when the run does, also when the run
        // ended before this could ask to die with it.
        cordon_sandbox::linux::die_with_parent()?;
        if std::os::unix::process::parent_id() != parent {
            return Ok(0);
        }
    }
    let handoff = match args.handoff_fd {
        Some(fd) => Some(adopt_unix_listener(fd)?),
        None => None,
    };
    let events: Lines = Arc::new(std::sync::Mutex::new(match args.events_fd {
        Some(fd) => Box::new(adopt_file(fd)?),
        None => Box::new(std::io::stdout()),
    }));
    let limited = args.events_fd.is_some();
    // A run's proxy keeps "always" answers for the runs after it; a proxy on its own serves
    // whoever configured it, and keeps nothing.
    let remember_in = args.remembered.then(ask::remembered_path).flatten();
    config.ask = match args.ask.unwrap_or(AskVia::Deny) {
        AskVia::Deny => None,
        AskVia::Terminal => {
            std::fs::File::open("/dev/tty")
                .context("--ask-domains terminal: there is no terminal (/dev/tty) to ask on")?;
            Some(Arc::new(TerminalAsker { remember_in }))
        }
        AskVia::Fd(fd) => {
            let channel = adopt_file(fd).context("--ask-domains")?;
            let input = channel.try_clone()?;
            let out: Lines = Arc::new(std::sync::Mutex::new(Box::new(channel)));
            Some(Arc::new(JsonAsker::new(input, out, remember_in)))
        }
        AskVia::Stdio if args.events_fd.is_some() => {
            bail!("--ask-domains stdio: standard output is not this proxy's to write")
        }
        AskVia::Stdio => Some(Arc::new(JsonAsker::new(
            std::io::stdin(),
            events.clone(),
            None,
        ))),
    };
    cordon_net::serve::raise_descriptor_limit();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the proxy's runtime")?;
    runtime.block_on(async move {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Blocked>();
        let proxy = Arc::new(Proxy::new(config, tx));
        for l in tcp {
            tokio::spawn(cordon_net::serve::tcp(
                proxy.clone(),
                tokio::net::TcpListener::from_std(l)?,
            ));
        }
        for l in unix {
            tokio::spawn(cordon_net::serve::unix(
                proxy.clone(),
                tokio::net::UnixListener::from_std(l)?,
            ));
        }
        if let Some(fd) = args.inbound_fd {
            let inbound = Arc::new(cordon_net::serve::Inbound::new(
                tokio::net::UnixListener::from_std(adopt_unix_listener(fd)?)?,
            ));
            for &(fd, port) in &args.published {
                let listener =
                    std::net::TcpListener::from(std::os::fd::OwnedFd::from(adopt_file(fd)?));
                listener.set_nonblocking(true)?;
                tokio::spawn(cordon_net::serve::published(
                    tokio::net::TcpListener::from_std(listener)?,
                    inbound.clone(),
                    port,
                ));
            }
        }
        if let Some(h) = handoff {
            tokio::spawn(cordon_net::serve::handed_over(
                proxy.clone(),
                tokio::net::UnixListener::from_std(h)?,
            ));
        }
        tokio::spawn(follow_settings(proxy.clone(), watched, move || {
            settled()?.rules()
        }));
        let mut written = 0;
        while let Some(b) = rx.recv().await {
            if limited && written >= MAX_EVENTS {
                continue;
            }
            written += 1;
            write_line(&events, &BlockedLine::from(b));
        }
        anyhow::Ok(())
    })?;
    Ok(0)
}

/// A line on standard error that cannot bring the proxy down: whoever started it may have
/// stopped reading (eprintln! panics when stderr is closed).
pub fn say(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Every two seconds, whether the settings files changed; if so, the proxy takes the new
/// rules, or, while they do not load, refuses everything (never the stale rules).
#[cfg(target_os = "linux")]
async fn follow_settings(
    proxy: Arc<Proxy>,
    watched: Vec<PathBuf>,
    settled: impl Fn() -> anyhow::Result<Rules>,
) {
    let files = || settings::fingerprint(watched.iter().map(PathBuf::as_path));
    let mut stamp = files();
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        let now = files();
        if now == stamp {
            continue;
        }
        stamp = now;
        match settled() {
            Ok(rules) => {
                say("cordon: proxy: settings changed; new rules in force");
                proxy.set_rules(rules);
            }
            Err(e) => {
                say(&format!(
                    "cordon: proxy: settings changed and do not load; refusing every connection until they do: {e:#}"
                ));
                proxy.set_rules(Rules::default());
            }
        }
    }
}

#[cfg(target_os = "linux")]
fn adopt_file(fd: i32) -> anyhow::Result<std::fs::File> {
    cordon_sandbox::linux::adopt_fd(fd).with_context(|| format!("descriptor {fd}"))
}

#[cfg(target_os = "linux")]
fn adopt_unix_listener(fd: i32) -> anyhow::Result<std::os::unix::net::UnixListener> {
    let file = adopt_file(fd)?;
    let listener = std::os::unix::net::UnixListener::from(std::os::fd::OwnedFd::from(file));
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// The ports a sandboxed command finds the proxy on, on its own loopback.
pub const HTTP_PORT: u16 = 3128;
pub const SOCKS_PORT: u16 = 1080;

/// The proxy process a `cordon run` starts for its command, and what it needs to end it.
#[cfg(target_os = "linux")]
#[derive(Debug)]
pub struct RunProxy {
    child: std::process::Child,
    dir: PathBuf,
    events: std::io::PipeReader,
    /// Where the command finds the proxy, when it has one (a run may only publish ports).
    pub endpoint: Option<cordon_sandbox::ProxyEndpoint>,
    /// For the spec's `inbound`, when the run publishes ports.
    pub inbound: Option<PathBuf>,
}

#[cfg(target_os = "linux")]
impl RunProxy {
    /// Starts the proxy process for a run when any host is allowed (or asked about) or a port
    /// is published.
    pub fn start(
        config: &RunConfig,
        asked: Option<AskVia>,
        publish: &[Publish],
    ) -> anyhow::Result<Option<RunProxy>> {
        // Every value is checked even when no proxy is needed: a typo is an error, not silence.
        let rules = config.net.rules()?;
        config.net.proxy_config()?;
        let ask = match asked {
            Some(AskVia::Stdio) => bail!(
                "--ask-domains stdio is for `cordon proxy`; a run's standard streams are its command's (use fd:N)"
            ),
            Some(AskVia::Terminal) if std::fs::File::open("/dev/tty").is_err() => {
                bail!("--ask-domains terminal: there is no terminal (/dev/tty) to ask on")
            }
            Some(AskVia::Fd(fd)) if std::fs::metadata(format!("/proc/self/fd/{fd}")).is_err() => {
                bail!("--ask-domains fd:{fd}: descriptor {fd} is not open")
            }
            Some(via) => via,
            None if std::io::stdin().is_terminal() => AskVia::Terminal,
            None => AskVia::Deny,
        };
        // Nothing allowed means no network at all, unless the user asked to be asked.
        let asked_to_ask = asked.is_some() && ask != AskVia::Deny;
        let egress = rules.allows_anything() || asked_to_ask;
        if !egress && publish.is_empty() {
            return Ok(None);
        }
        if publish.len() > MAX_PUBLISHED {
            bail!("--publish: at most {MAX_PUBLISHED} ports per run");
        }
        // Bound here, before anything starts, so a port already in use is a plain error.
        let published = publish
            .iter()
            .map(|p| {
                std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, p.host_port))
                    .with_context(|| {
                        format!(
                            "--publish {}:{}: cannot listen on 127.0.0.1:{}",
                            p.host_port, p.port, p.host_port
                        )
                    })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        // Checked here, so that a broken file stops the run rather than its proxy.
        if let Some(path) = ask::remembered_path() {
            ask::remembered(&path)?;
        }
        let dir = cordon_sandbox::private_dir(&std::env::temp_dir(), "cordon-proxy")
            .context("cannot make a directory for the proxy's socket")?;
        let socket = dir.join("handoff.sock");
        // Listening before the proxy starts, so the sandbox can hand over at once.
        let handoff = std::os::unix::net::UnixListener::bind(&socket)
            .with_context(|| format!("cannot listen on {}", socket.display()))?;
        let (events, events_writer) = std::io::pipe()?;
        // The proxy merges the settings itself, from the run's sources, to follow them
        // through the run.
        let mut request = ProxyRequest {
            sources: config.sources.clone(),
            remembered: true,
            handoff_fd: Some(4),
            events_fd: Some(5),
            parent: Some(std::process::id()),
            ask: Some(ask),
            ..ProxyRequest::default()
        };
        let mut fds = vec![(handoff.as_raw_fd(), 4), (events_writer.as_raw_fd(), 5)];
        if let AskVia::Fd(fd) = ask {
            fds.push((fd, 6));
            request.ask = Some(AskVia::Fd(6));
        }
        let inbound = if published.is_empty() {
            None
        } else {
            let path = dir.join("inbound.sock");
            let listener = std::os::unix::net::UnixListener::bind(&path)
                .with_context(|| format!("cannot listen on {}", path.display()))?;
            Some((path, listener))
        };
        if let Some((_, listener)) = &inbound {
            fds.push((listener.as_raw_fd(), 7));
            request.inbound_fd = Some(7);
        }
        for (n, (listener, p)) in published.iter().zip(publish).enumerate() {
            let fd = 8 + n as i32;
            fds.push((listener.as_raw_fd(), fd));
            request.published.push((fd, p.port));
        }
        let mut child = crate::child::Child::new(&crate::child::Request::Proxy(request))?;
        fds.push((child.request_fd(), crate::child::REQUEST_FD));
        child
            .command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null());
        cordon_sandbox::linux::pass_fds(&mut child.command, &fds);
        let child = child.spawn().context("cannot start the proxy")?;
        tracing::info!(
            "proxy: started (pid {}), asking {ask}, {} published port(s)",
            child.id(),
            publish.len()
        );
        let endpoint = egress.then_some(cordon_sandbox::ProxyEndpoint {
            socket: Some(socket),
            http_port: HTTP_PORT,
            socks_port: SOCKS_PORT,
        });
        Ok(Some(RunProxy {
            child,
            dir,
            events,
            endpoint,
            inbound: inbound.map(|(path, _)| path),
        }))
    }

    /// Ends the proxy, and with it every connection the command's processes still hold;
    /// returns what it refused.
    pub fn finish(mut self) -> Vec<Blocked> {
        self.end();
        let mut text = String::new();
        let _ = self.events.read_to_string(&mut text);
        text.lines()
            .filter_map(|l| serde_json::from_str::<BlockedLine>(l).ok())
            .map(|b| Blocked {
                host: b.host,
                port: b.port,
                rule: b.rule,
                via: if b.via == "socks5" { "socks5" } else { "http" },
            })
            .collect()
    }
}

#[cfg(target_os = "linux")]
impl RunProxy {
    fn end(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(target_os = "linux")]
impl Drop for RunProxy {
    /// A run that stops early (a bad flag, a setup failure) takes its proxy with it.
    fn drop(&mut self) {
        self.end();
    }
}

/// A refusal as the proxy process writes it: a line among others (questions, errors) when
/// they share a stream, hence the `type`.
#[cfg(target_os = "linux")]
#[derive(serde::Deserialize, serde::Serialize)]
struct BlockedLine {
    #[serde(rename = "type")]
    kind: String,
    host: String,
    port: u16,
    rule: String,
    via: String,
}

#[cfg(target_os = "linux")]
impl From<Blocked> for BlockedLine {
    fn from(b: Blocked) -> Self {
        BlockedLine {
            kind: "blocked".into(),
            host: b.host,
            port: b.port,
            rule: b.rule,
            via: b.via.into(),
        }
    }
}

/// Where the proxy a run needs is not built yet (it needs a network namespace to hand its
/// ports over from): a run with an allowed host is refused rather than run without it.
#[cfg(not(target_os = "linux"))]
#[derive(Debug)]
pub struct RunProxy {
    pub endpoint: Option<cordon_sandbox::ProxyEndpoint>,
    pub inbound: Option<PathBuf>,
}

#[cfg(not(target_os = "linux"))]
impl RunProxy {
    pub fn start(
        config: &RunConfig,
        asked: Option<AskVia>,
        publish: &[Publish],
    ) -> anyhow::Result<Option<RunProxy>> {
        if config.net.rules()?.allows_anything() || asked.is_some() {
            bail!("--allow-domain needs cordon's proxy, which runs only on Linux so far");
        }
        if !publish.is_empty() {
            bail!("--publish needs a network namespace, which only Linux has");
        }
        Ok(None)
    }

    pub fn finish(self) -> Vec<Blocked> {
        Vec::new()
    }
}

/// What a command is told about its proxy: the usual variables, in both cases, and those a
/// few tools read instead.
pub fn environment(endpoint: &cordon_sandbox::ProxyEndpoint) -> Vec<(String, String)> {
    // git over SSH goes through the SOCKS proxy with cordon itself as ssh's ProxyCommand.
    let ssh = std::env::current_exe()
        .ok()
        .map(|cordon| cordon.display().to_string())
        .filter(|cordon| !cordon.contains('\''))
        .map(|cordon| format!("ssh -o ProxyCommand='{cordon} connect %h %p'"));
    let http = format!("http://127.0.0.1:{}", endpoint.http_port);
    let socks = format!("socks5h://127.0.0.1:{}", endpoint.socks_port);
    let no_proxy = "localhost,127.0.0.1,::1".to_string();
    let mut vars = Vec::new();
    for (name, value) in [
        ("HTTP_PROXY", &http),
        ("HTTPS_PROXY", &http),
        ("ALL_PROXY", &socks),
        ("NO_PROXY", &no_proxy),
    ] {
        vars.push((name.to_string(), value.clone()));
        vars.push((name.to_ascii_lowercase(), value.clone()));
    }
    for (name, value) in [
        // npm and yarn read their own settings before the standard variables.
        ("npm_config_proxy", &http),
        ("npm_config_https_proxy", &http),
        ("YARN_HTTP_PROXY", &http),
        ("YARN_HTTPS_PROXY", &http),
        // Node's built-in fetch honours the standard variables only when told to.
        ("NODE_USE_ENV_PROXY", &"1".to_string()),
        ("CARGO_HTTP_PROXY", &http),
        ("PIP_PROXY", &http),
    ] {
        vars.push((name.to_string(), value.clone()));
    }
    if let Some(ssh) = ssh {
        vars.push(("GIT_SSH_COMMAND".to_string(), ssh));
    }
    vars
}
