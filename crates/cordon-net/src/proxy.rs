//! The proxy: HTTP (`CONNECT` tunnels and absolute-form `http://` requests) and SOCKS5 on the
//! same listeners, every destination decided by [`Rules`] and every refusal recorded.
//!
//! A connection's first byte tells the protocols apart (SOCKS5 starts with 5). What a client
//! may make the proxy hold is bounded: the request head, the TLS ClientHello it reads for the
//! server name, and the time each may take to arrive.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::rules::{Host, Rules, Verdict};
use crate::wire::{
    self, MAX_HEAD, MAX_HELLO, Parsed, RequestKind, SocksRequest, Target, socks_reply,
};

/// Answers whether a destination no rule speaks of may be reached (a person at a terminal, an
/// embedding program).
pub type Ask = Box<dyn Fn(&Host, u16) -> bool + Send + Sync>;

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
    pub ask: Option<Ask>,
    /// Bytes buffered per direction of a tunnel: larger moves bulk data with fewer system
    /// calls, smaller holds less per open tunnel (see docs/BENCHMARKS.md).
    pub tunnel_buffer: usize,
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

/// The proxy: share it among listeners with an `Arc`.
#[derive(Debug)]
pub struct Proxy {
    config: ProxyConfig,
    blocked: mpsc::UnboundedSender<Blocked>,
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
        Proxy { config, blocked }
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
    fn decide(&self, target: &Target) -> Result<(), String> {
        match self.config.rules.check(&target.host, target.port) {
            Verdict::Allow => Ok(()),
            Verdict::Deny(why) => Err(why),
            Verdict::Unknown => match &self.config.ask {
                Some(ask) if ask(&target.host, target.port) => Ok(()),
                Some(_) => Err("refused when asked".into()),
                None => Err("not among the allowed domains".into()),
            },
        }
    }

    /// Resolves and connects, only ever to an address the rules accept: the address checked
    /// is the one connected to, so a name cannot be re-pointed in between.
    async fn connect(&self, target: &Target) -> Result<TcpStream, Refusal> {
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
        let mut refused = None;
        let mut last_error = None;
        for ip in addresses {
            if let Err(why) = self.config.rules.check_address(ip, target.port) {
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
        if let Err(why) = self.decide(&target) {
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
        let mut upstream = match self.connect(&target).await {
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
                let first = match self.check_server_name(&mut client, rest, &target).await {
                    Ok(b) => b,
                    Err(why) => {
                        self.record(&target, &why, "http");
                        return;
                    }
                };
                if upstream.write_all(&first).await.is_err() {
                    return;
                }
            }
            RequestKind::Forward { head } => {
                if upstream.write_all(&head).await.is_err()
                    || upstream.write_all(&rest).await.is_err()
                {
                    return;
                }
            }
        }
        self.relay(&mut client, &mut upstream).await;
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
        if let Err(why) = self.decide(&target) {
            self.record(&target, &why, "socks5");
            let _ = socks_answer(&mut client, socks_reply::NOT_ALLOWED).await;
            return;
        }
        let rest = buf.split_off(used);
        let mut upstream = match self.connect(&target).await {
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
        let first = match self.check_server_name(&mut client, rest, &target).await {
            Ok(b) => b,
            Err(why) => {
                self.record(&target, &why, "socks5");
                return;
            }
        };
        if upstream.write_all(&first).await.is_err() {
            return;
        }
        self.relay(&mut client, &mut upstream).await;
    }
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
