//! The proxy: HTTP (`CONNECT` tunnels and absolute-form `http://` requests) and SOCKS5 on the
//! same listeners, every destination decided by [`Rules`] and every refusal recorded.
//!
//! A connection's first byte tells the protocols apart (SOCKS5 starts with 5). What a client
//! may make the proxy hold is bounded: the request head, the TLS ClientHello it reads for the
//! server name, and the time each may take to arrive.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::rules::{Host, Rules, Verdict};
use crate::wire::{
    self, MAX_HEAD, MAX_HELLO, Parsed, RequestKind, SocksRequest, Target, socks_reply,
};

/// An existing proxy every connection goes through (a corporate network's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upstream {
    /// `http://host:port`: a `CONNECT` for each connection.
    Http(String),
    /// `socks5://host:port` (or `socks5h://`): a SOCKS5 CONNECT, by name.
    Socks5(String),
}

impl std::str::FromStr for Upstream {
    type Err = String;

    fn from_str(url: &str) -> Result<Self, String> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| format!("`{url}`: write http://HOST:PORT or socks5://HOST:PORT"))?;
        let addr = rest.trim_end_matches('/');
        if addr.is_empty() || addr.contains(['/', '@']) || !addr.contains(':') {
            return Err(format!(
                "`{url}`: give HOST:PORT after the scheme, with no path or credentials"
            ));
        }
        match scheme.to_ascii_lowercase().as_str() {
            "http" => Ok(Upstream::Http(addr.to_string())),
            "socks5" | "socks5h" => Ok(Upstream::Socks5(addr.to_string())),
            other => Err(format!(
                "`{url}`: unknown scheme `{other}` (http or socks5)"
            )),
        }
    }
}

/// What a person or an embedding program answered about a destination no rule speaks of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Answer {
    /// Allowed for as long as this proxy runs.
    Once,
    /// Allowed, and the one who asked keeps the answer for later runs.
    Always,
    /// Refused for as long as this proxy runs.
    Deny,
}

/// A question in flight: it may take as long as a person needs, so it must not hold up the
/// proxy's other connections.
pub type Pending = Pin<Box<dyn Future<Output = Answer> + Send>>;

/// Answers whether a destination no rule speaks of may be reached (a person at a terminal, an
/// embedding program). The proxy asks once per host and port and one question at a time;
/// anything that cannot be answered must come back as [`Answer::Deny`].
pub trait Asker: Send + Sync {
    fn ask(&self, host: &Host, port: u16) -> Pending;
}

/// Beyond this many questions a run gets no more: a command must not be able to bury its
/// user in prompts until one is answered carelessly.
pub const MAX_QUESTIONS: usize = 32;

/// How the proxy decides and how long it waits.
pub struct ProxyConfig {
    pub rules: Rules,
    /// Names answered from here instead of the system resolver (like curl's `--resolve`).
    pub resolve: HashMap<String, Vec<IpAddr>>,
    /// How long a client may take to send its request (and a TLS client its hello).
    pub request_timeout: Duration,
    /// How long connecting to a destination may take.
    pub connect_timeout: Duration,
    /// Asked about a name no rule speaks of; without it such names are refused.
    pub ask: Option<Arc<dyn Asker>>,
    /// Bytes buffered per direction of a tunnel: larger moves bulk data with fewer system
    /// calls, smaller holds less per open tunnel (see docs/BENCHMARKS.md).
    pub tunnel_buffer: usize,
    /// A proxy to go through instead of connecting directly.
    pub upstream: Option<Upstream>,
}

impl std::fmt::Debug for ProxyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyConfig")
            .field("rules", &self.rules)
            .field("resolve", &self.resolve)
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("ask", &self.ask.is_some())
            .field("tunnel_buffer", &self.tunnel_buffer)
            .field("upstream", &self.upstream)
            .finish()
    }
}

impl ProxyConfig {
    pub fn new(rules: Rules) -> Self {
        ProxyConfig {
            rules,
            resolve: HashMap::new(),
            request_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            ask: None,
            tunnel_buffer: 32 * 1024,
            upstream: None,
        }
    }
}

/// A connection the proxy refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Blocked {
    pub host: String,
    pub port: u16,
    /// Which rule, or why.
    pub rule: String,
    /// `http` or `socks5`.
    pub via: &'static str,
}

impl From<&Blocked> for cordon_sandbox::Violation {
    /// A refusal as an entry of a run's report: exact, since the proxy itself refused.
    fn from(b: &Blocked) -> Self {
        cordon_sandbox::Violation {
            path: None,
            destination: Some(format!("{}:{}", b.host, b.port)),
            operation: "connect",
            rule: b.rule.clone(),
            exact: true,
            action: None,
            evidence: None,
        }
    }
}

/// The proxy: share it among listeners with an `Arc`.
#[derive(Debug)]
pub struct Proxy {
    config: ProxyConfig,
    blocked: mpsc::UnboundedSender<Blocked>,
    /// The rules in force: those of the config until [`Proxy::set_rules`] replaces them (a
    /// settings file changed). Each connection decides with the rules it read first.
    rules: std::sync::RwLock<Arc<Rules>>,
    /// What was answered, per host and port. Behind an async lock held while a question is
    /// open, so questions come one at a time and a tool opening ten connections to one host
    /// asks once.
    answers: tokio::sync::Mutex<HashMap<(String, u16), bool>>,
}

/// Why a destination cannot be had.
enum Refusal {
    /// The rules say no: 403, or SOCKS "not allowed by ruleset".
    Blocked(String),
    /// It could not be reached: 502, or the SOCKS code.
    Failed(String, u8),
}

impl Proxy {
    /// A proxy that sends each refusal to `blocked`.
    pub fn new(config: ProxyConfig, blocked: mpsc::UnboundedSender<Blocked>) -> Self {
        Proxy {
            rules: std::sync::RwLock::new(Arc::new(config.rules.clone())),
            config,
            blocked,
            answers: tokio::sync::Mutex::default(),
        }
    }

    /// Replaces the rules for connections from now on; open tunnels keep going.
    pub fn set_rules(&self, rules: Rules) {
        if let Ok(mut r) = self.rules.write() {
            *r = Arc::new(rules);
        }
    }

    fn rules(&self) -> Arc<Rules> {
        // A writer never panics while holding the lock, so it cannot be poisoned; were it,
        // nothing is allowed.
        self.rules
            .read()
            .map(|r| r.clone())
            .unwrap_or_else(|_| Arc::new(Rules::default()))
    }

    /// Serves one client connection to its end.
    pub async fn handle<S>(&self, mut client: S)
    where
        S: AsyncRead + AsyncWrite + Unpin + 'static,
    {
        let mut first = [0u8; 1];
        let limit = self.config.request_timeout;
        match tokio::time::timeout(limit, client.read(&mut first)).await {
            Ok(Ok(1)) => {}
            _ => return,
        }
        if first[0] == 5 {
            self.socks(client).await;
        } else {
            self.http(client, first[0]).await;
        }
    }

    fn record(&self, target: &Target, rule: &str, via: &'static str) {
        let _ = self.blocked.send(Blocked {
            host: target.host.to_string(),
            port: target.port,
            rule: rule.to_string(),
            via,
        });
    }

    /// The rules' answer, asking about names no rule covers when someone can be asked.
    async fn decide(&self, target: &Target) -> Result<(), String> {
        let asker = match self.rules().check(&target.host, target.port) {
            Verdict::Allow => return Ok(()),
            Verdict::Deny(why) => return Err(why),
            Verdict::Unknown => match &self.config.ask {
                Some(asker) => asker,
                None => return Err("not among the allowed domains".into()),
            },
        };
        let key = (target.host.to_string(), target.port);
        let mut answers = self.answers.lock().await;
        let allowed = match answers.get(&key) {
            Some(&allowed) => allowed,
            None if answers.len() >= MAX_QUESTIONS => {
                return Err(format!(
                    "not among the allowed domains, and this run already asked {MAX_QUESTIONS} questions"
                ));
            }
            None => {
                let allowed = asker.ask(&target.host, target.port).await != Answer::Deny;
                answers.insert(key, allowed);
                allowed
            }
        };
        if allowed {
            Ok(())
        } else {
            Err("refused when asked".into())
        }
    }

    /// Resolves and connects, only ever to an address the rules accept: the address checked
    /// is the one connected to, so a name cannot be re-pointed in between.
    async fn connect(&self, target: &Target) -> Result<TcpStream, Refusal> {
        if let Some(upstream) = &self.config.upstream {
            return self.connect_upstream(upstream, target).await;
        }
        let addresses: Vec<IpAddr> = match &target.host {
            Host::Ip(ip) => vec![*ip],
            Host::Name(name) => match self.config.resolve.get(name) {
                Some(ips) => ips.clone(),
                None => tokio::net::lookup_host((name.as_str(), target.port))
                    .await
                    .map_err(|e| {
                        Refusal::Failed(
                            format!("cannot resolve {name}: {e}"),
                            socks_reply::HOST_UNREACHABLE,
                        )
                    })?
                    .map(|a| a.ip())
                    .collect(),
            },
        };
        let rules = self.rules();
        let mut refused = None;
        let mut last_error = None;
        for ip in addresses {
            if let Err(why) = rules.check_address(ip, target.port) {
                refused.get_or_insert(why);
                continue;
            }
            let addr = SocketAddr::new(ip, target.port);
            match tokio::time::timeout(self.config.connect_timeout, TcpStream::connect(addr)).await
            {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(stream);
                }
                Ok(Err(e)) => last_error = Some(format!("{addr}: {e}")),
                Err(_) => last_error = Some(format!("{addr}: timed out")),
            }
        }
        match (last_error, refused) {
            (Some(e), _) => Err(Refusal::Failed(
                format!("cannot connect to {}: {e}", target.host),
                socks_reply::CONNECTION_REFUSED,
            )),
            (None, Some(why)) => Err(Refusal::Blocked(why)),
            (None, None) => Err(Refusal::Failed(
                format!("{} has no address", target.host),
                socks_reply::HOST_UNREACHABLE,
            )),
        }
    }

    /// Through an upstream proxy, which resolves the name itself (behind a corporate proxy the
    /// local resolver often cannot). Where the name resolves here too, an answer with only
    /// private or local addresses is still refused.
    async fn connect_upstream(
        &self,
        upstream: &Upstream,
        target: &Target,
    ) -> Result<TcpStream, Refusal> {
        let local: Vec<IpAddr> = match &target.host {
            Host::Ip(ip) => vec![*ip],
            Host::Name(name) => match self.config.resolve.get(name) {
                Some(ips) => ips.clone(),
                None => {
                    let lookup = tokio::net::lookup_host((name.as_str(), target.port));
                    match tokio::time::timeout(Duration::from_secs(2), lookup).await {
                        Ok(Ok(addrs)) => addrs.map(|a| a.ip()).collect(),
                        _ => Vec::new(),
                    }
                }
            },
        };
        let checks: Vec<Result<(), String>> = local
            .iter()
            .map(|ip| self.rules().check_address(*ip, target.port))
            .collect();
        if let Some(Err(why)) = checks.first()
            && checks.iter().all(Result::is_err)
        {
            return Err(Refusal::Blocked(why.clone()));
        }
        let (addr, socks) = match upstream {
            Upstream::Http(a) => (a, false),
            Upstream::Socks5(a) => (a, true),
        };
        let failed = |why: String| {
            Refusal::Failed(
                format!("upstream proxy {addr}: {why}"),
                socks_reply::GENERAL_FAILURE,
            )
        };
        let mut stream = tokio::time::timeout(
            self.config.connect_timeout,
            TcpStream::connect(addr.as_str()),
        )
        .await
        .map_err(|_| failed("timed out".into()))?
        .map_err(|e| failed(e.to_string()))?;
        let _ = stream.set_nodelay(true);
        let handshake = async {
            if socks {
                socks_handshake(&mut stream, target).await
            } else {
                http_handshake(&mut stream, target).await
            }
        };
        tokio::time::timeout(self.config.request_timeout, handshake)
            .await
            .map_err(|_| failed("no answer".into()))?
            .map_err(failed)?;
        Ok(stream)
    }

    /// Reads until `parse` has an answer, within the request timeout and `max` bytes.
    async fn read_until<S, T>(
        &self,
        client: &mut S,
        buf: &mut Vec<u8>,
        max: usize,
        parse: impl Fn(&[u8]) -> Parsed<T>,
    ) -> Parsed<T>
    where
        S: AsyncRead + Unpin,
    {
        let deadline = tokio::time::Instant::now() + self.config.request_timeout;
        loop {
            match parse(buf) {
                Parsed::More => {}
                done => return done,
            }
            if buf.len() >= max {
                return Parsed::Bad(format!("more than {max} bytes"));
            }
            let mut chunk = vec![0u8; (max - buf.len()).min(4096)];
            match tokio::time::timeout_at(deadline, client.read(&mut chunk)).await {
                Ok(Ok(0)) => return Parsed::Bad("the client closed the connection".into()),
                Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
                Ok(Err(e)) => return Parsed::Bad(e.to_string()),
                Err(_) => return Parsed::Bad("the client was too slow".into()),
            }
        }
    }

    /// After a tunnel is granted, a TLS client must ask for the host it was granted: a
    /// different server name would reach another site behind the same address (domain
    /// fronting). What was read is returned, to be sent on.
    async fn check_server_name<S>(
        &self,
        client: &mut S,
        mut buf: Vec<u8>,
        target: &Target,
    ) -> Result<Vec<u8>, String>
    where
        S: AsyncRead + Unpin,
    {
        let Host::Name(granted) = &target.host else {
            return Ok(buf);
        };
        match self
            .read_until(client, &mut buf, MAX_HELLO, wire::client_hello_server_name)
            .await
        {
            Parsed::Done(None) => Ok(buf),
            Parsed::Done(Some(sni)) => match crate::rules::normalise_name(&sni) {
                Ok(n) if &n == granted => Ok(buf),
                _ => Err(format!(
                    "the TLS server name `{sni}` differs from the tunnel's host `{granted}`"
                )),
            },
            Parsed::Bad(why) if buf.is_empty() => Err(why),
            // Not a ClientHello this reader understands: refuse rather than pass it unseen.
            Parsed::Bad(why) => Err(format!("unreadable TLS ClientHello: {why}")),
            Parsed::More => Err("incomplete ClientHello".into()),
        }
    }

    async fn http<S>(&self, mut client: S, first: u8)
    where
        S: AsyncRead + AsyncWrite + Unpin + 'static,
    {
        let mut buf = vec![first];
        let req = match self
            .read_until(&mut client, &mut buf, MAX_HEAD, wire::parse_request)
            .await
        {
            Parsed::Done(r) => r,
            Parsed::Bad(why) => {
                let _ = respond(&mut client, 400, "Bad Request", None, &why).await;
                return;
            }
            Parsed::More => return,
        };
        let target = req.target;
        if let Err(why) = self.decide(&target).await {
            self.record(&target, &why, "http");
            let _ = respond(
                &mut client,
                403,
                "Forbidden",
                Some(&why),
                &blocked_text(&target, &why),
            )
            .await;
            return;
        }
        let rest = buf.split_off(req.head_len);
        let upstream = match self.connect(&target).await {
            Ok(s) => s,
            Err(Refusal::Blocked(why)) => {
                self.record(&target, &why, "http");
                let text = blocked_text(&target, &why);
                let _ = respond(&mut client, 403, "Forbidden", Some(&why), &text).await;
                return;
            }
            Err(Refusal::Failed(why, _)) => {
                let _ = respond(&mut client, 502, "Bad Gateway", None, &why).await;
                return;
            }
        };
        match req.kind {
            RequestKind::Connect => {
                if client
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await
                    .is_err()
                {
                    return;
                }
                self.tunnel(client, upstream, rest, &target, "http").await;
            }
            RequestKind::Forward { head, body } => {
                self.forward_one(client, upstream, &head, rest, body).await;
            }
        }
    }

    /// One plain-HTTP request: its head (which asks the server to close after answering),
    /// `body` bytes of body (from `read`, then the client), then the answer back. Nothing
    /// more the client sends goes on: a second request on the connection could name another
    /// host, so it must come on a new connection, where it is checked.
    async fn forward_one<S>(
        &self,
        mut client: S,
        mut upstream: TcpStream,
        head: &[u8],
        mut read: Vec<u8>,
        body: u64,
    ) where
        S: AsyncRead + AsyncWrite + Unpin + 'static,
    {
        read.truncate(usize::try_from(body).unwrap_or(usize::MAX).min(read.len()));
        if upstream.write_all(head).await.is_err() || upstream.write_all(&read).await.is_err() {
            return;
        }
        let left = body - read.len() as u64;
        if left > 0 {
            let mut rest = (&mut client).take(left);
            // A server that answers before the whole body came (too large, say) still gets
            // its answer through.
            let _ = tokio::io::copy(&mut rest, &mut upstream).await;
        }
        // The answer goes back; whatever else the client sends is read and dropped, and its
        // end passed on, so a server waiting for the client to go is not left waiting. Once
        // the answer has ended, nothing more is read.
        #[cfg(target_os = "linux")]
        if let Some(tcp) = (&mut client as &mut dyn std::any::Any).downcast_mut::<TcpStream>() {
            let back = crate::splice::one_way(&upstream, tcp);
            let drop_rest = crate::splice::discard(tcp, &upstream);
            tokio::pin!(back, drop_rest);
            tokio::select! {
                _ = &mut back => {}
                _ = &mut drop_rest => { let _ = back.await; }
            }
            return;
        }
        let (mut client_in, mut client_out) = tokio::io::split(client);
        let (mut up_in, mut up_out) = upstream.split();
        let back = async {
            let _ = tokio::io::copy(&mut up_in, &mut client_out).await;
            let _ = client_out.shutdown().await;
        };
        let drop_rest = async {
            let _ = tokio::io::copy(&mut client_in, &mut tokio::io::sink()).await;
            let _ = up_out.shutdown().await;
        };
        tokio::pin!(back, drop_rest);
        tokio::select! {
            _ = &mut back => {}
            _ = &mut drop_rest => back.await,
        }
    }

    /// Plain HTTP inside a granted tunnel: its one request must name the tunnel's host, and
    /// is then passed on as [`Self::forward_one`] does.
    async fn tunnel_http<S>(
        &self,
        mut client: S,
        upstream: TcpStream,
        mut read: Vec<u8>,
        target: &Target,
        via: &'static str,
    ) where
        S: AsyncRead + AsyncWrite + Unpin + 'static,
    {
        let parse = |b: &[u8]| wire::parse_tunnel_request(b, target);
        match self
            .read_until(&mut client, &mut read, MAX_HEAD, parse)
            .await
        {
            Parsed::Done(req) => {
                let rest = read.split_off(req.head_len);
                self.forward_one(client, upstream, &req.head, rest, req.body)
                    .await;
            }
            Parsed::Bad(why) => {
                self.record(target, &why, via);
                let text = blocked_text(target, &why);
                let _ = respond(&mut client, 403, "Forbidden", Some(&why), &text).await;
            }
            Parsed::More => {}
        }
    }

    /// Passes bytes both ways until both sides are done: inside the kernel when both are TCP
    /// sockets (on Linux), else through two buffers of `tunnel_buffer` bytes.
    async fn relay<S>(&self, client: &mut S, upstream: &mut TcpStream)
    where
        S: AsyncRead + AsyncWrite + Unpin + 'static,
    {
        #[cfg(target_os = "linux")]
        if let Some(tcp) = (client as &mut dyn std::any::Any).downcast_mut::<TcpStream>() {
            let _ = crate::splice::relay(tcp, upstream).await;
            return;
        }
        let size = self.config.tunnel_buffer;
        let _ = tokio::io::copy_bidirectional_with_sizes(client, upstream, size, size).await;
    }

    async fn socks<S>(&self, mut client: S)
    where
        S: AsyncRead + AsyncWrite + Unpin + 'static,
    {
        let mut buf = vec![5];
        let (no_auth, used) = match self
            .read_until(&mut client, &mut buf, 258, wire::parse_socks_greeting)
            .await
        {
            Parsed::Done(g) => g,
            _ => return,
        };
        if !no_auth {
            let _ = client.write_all(&[5, 0xff]).await;
            return;
        }
        if client.write_all(&[5, 0]).await.is_err() {
            return;
        }
        let mut buf = buf.split_off(used);
        let request = match self
            .read_until(&mut client, &mut buf, 262, wire::parse_socks_request)
            .await
        {
            Parsed::Done(r) => r,
            Parsed::Bad(_) => {
                let _ = socks_answer(&mut client, socks_reply::GENERAL_FAILURE).await;
                return;
            }
            Parsed::More => return,
        };
        let (target, used) = match request {
            SocksRequest::Connect(t, used) => (t, used),
            SocksRequest::Refuse(code, _) => {
                let _ = socks_answer(&mut client, code).await;
                return;
            }
        };
        if let Err(why) = self.decide(&target).await {
            self.record(&target, &why, "socks5");
            let _ = socks_answer(&mut client, socks_reply::NOT_ALLOWED).await;
            return;
        }
        let rest = buf.split_off(used);
        let upstream = match self.connect(&target).await {
            Ok(s) => s,
            Err(Refusal::Blocked(why)) => {
                self.record(&target, &why, "socks5");
                let _ = socks_answer(&mut client, socks_reply::NOT_ALLOWED).await;
                return;
            }
            Err(Refusal::Failed(_, code)) => {
                let _ = socks_answer(&mut client, code).await;
                return;
            }
        };
        if socks_answer(&mut client, socks_reply::SUCCEEDED)
            .await
            .is_err()
        {
            return;
        }
        self.tunnel(client, upstream, rest, &target, "socks5").await;
    }

    /// A granted tunnel: its TLS server name checked, what the client sent so far passed on,
    /// then bytes both ways.
    async fn tunnel<S>(
        &self,
        mut client: S,
        mut upstream: TcpStream,
        read: Vec<u8>,
        target: &Target,
        via: &'static str,
    ) where
        S: AsyncRead + AsyncWrite + Unpin + 'static,
    {
        let mut first = match self.check_server_name(&mut client, read, target).await {
            Ok(b) => b,
            Err(why) => {
                self.record(target, &why, via);
                return;
            }
        };
        // Plain HTTP would choose the site by each request's Host, which the tunnel's grant
        // does not cover: checked request by request.
        match self
            .read_until(&mut client, &mut first, MAX_HEAD, wire::looks_like_http)
            .await
        {
            Parsed::Done(true) => {
                self.tunnel_http(client, upstream, first, target, via).await;
                return;
            }
            Parsed::Done(false) => {}
            Parsed::Bad(why) => {
                self.record(target, &why, via);
                return;
            }
            Parsed::More => return,
        }
        if upstream.write_all(&first).await.is_err() {
            return;
        }
        self.relay(&mut client, &mut upstream).await;
    }
}

/// Asks an HTTP proxy for a tunnel to `target`; reads its answer a byte at a time, so that
/// nothing the server sends first (an SSH banner) is taken with it.
async fn http_handshake(stream: &mut TcpStream, target: &Target) -> Result<(), String> {
    let authority = format!("{}:{}", target.host, target.port);
    stream
        .write_all(format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n").as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() >= MAX_HEAD {
            return Err("an answer over 16 KiB".into());
        }
        let mut byte = [0u8; 1];
        match stream.read(&mut byte).await {
            Ok(1) => head.push(byte[0]),
            _ => return Err("closed the connection".into()),
        }
    }
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(&head) {
        Ok(httparse::Status::Complete(_))
            if response.code.is_some_and(|c| (200..300).contains(&c)) =>
        {
            Ok(())
        }
        Ok(httparse::Status::Complete(_)) => Err(format!(
            "answered {} {}",
            response.code.unwrap_or(0),
            response.reason.unwrap_or("")
        )),
        _ => Err("a malformed answer".into()),
    }
}

/// Asks a SOCKS5 proxy for a connection to `target`, by name.
async fn socks_handshake(stream: &mut TcpStream, target: &Target) -> Result<(), String> {
    let io = |e: std::io::Error| e.to_string();
    stream.write_all(&[5, 1, 0]).await.map_err(io)?;
    let mut choice = [0u8; 2];
    stream.read_exact(&mut choice).await.map_err(io)?;
    if choice != [5, 0] {
        return Err("wants authentication".into());
    }
    let mut request = vec![5, 1, 0];
    match &target.host {
        Host::Name(n) => {
            request.push(3);
            request.push(u8::try_from(n.len()).map_err(|_| "name too long".to_string())?);
            request.extend_from_slice(n.as_bytes());
        }
        Host::Ip(IpAddr::V4(ip)) => {
            request.push(1);
            request.extend_from_slice(&ip.octets());
        }
        Host::Ip(IpAddr::V6(ip)) => {
            request.push(4);
            request.extend_from_slice(&ip.octets());
        }
    }
    request.extend_from_slice(&target.port.to_be_bytes());
    stream.write_all(&request).await.map_err(io)?;
    let mut reply = [0u8; 4];
    stream.read_exact(&mut reply).await.map_err(io)?;
    if reply[1] != socks_reply::SUCCEEDED {
        return Err(format!("refused with SOCKS5 reply {}", reply[1]));
    }
    let rest = match reply[3] {
        1 => 4 + 2,
        4 => 16 + 2,
        3 => {
            let mut n = [0u8; 1];
            stream.read_exact(&mut n).await.map_err(io)?;
            usize::from(n[0]) + 2
        }
        other => return Err(format!("an unknown address type {other}")),
    };
    let mut bound = vec![0u8; rest];
    stream.read_exact(&mut bound).await.map_err(io)?;
    Ok(())
}

fn blocked_text(target: &Target, why: &str) -> String {
    format!("cordon blocked {}:{}: {why}\n", target.host, target.port)
}

/// A short answer that ends the exchange. The reason goes in `X-Cordon-Blocked` too, on one
/// line, so programs can read it without the body.
async fn respond<S>(
    client: &mut S,
    code: u16,
    status: &str,
    blocked: Option<&str>,
    body: &str,
) -> std::io::Result<()>
where
    S: AsyncWrite + Unpin,
{
    let body = if body.ends_with('\n') {
        body.to_string()
    } else {
        format!("{body}\n")
    };
    let mut head =
        format!("HTTP/1.1 {code} {status}\r\nContent-Type: text/plain; charset=utf-8\r\n");
    if let Some(why) = blocked {
        let line: String = why.chars().filter(|c| !c.is_control()).collect();
        head.push_str(&format!("X-Cordon-Blocked: {line}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    client.write_all(head.as_bytes()).await?;
    client.write_all(body.as_bytes()).await?;
    client.shutdown().await
}

/// A SOCKS5 reply with an unspecified bound address.
async fn socks_answer<S>(client: &mut S, code: u8) -> std::io::Result<()>
where
    S: AsyncWrite + Unpin,
{
    client.write_all(&[5, code, 0, 1, 0, 0, 0, 0, 0, 0]).await
}
