//! Reading what clients send the proxy: an HTTP request head, a SOCKS5 greeting and request,
//! and the server name in a TLS ClientHello. Each reader works on bytes already received and
//! says whether it needs more, so the caller decides how much to wait for and how much to hold.

use crate::rules::Host;

/// The most an HTTP request head may take; a longer one is refused.
pub const MAX_HEAD: usize = 16 * 1024;
/// The most bytes of TLS handshake read to find the server name.
pub const MAX_HELLO: usize = 16 * 1024 + 5;

/// What a reader made of the bytes so far.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed<T> {
    Done(T),
    /// Not enough bytes yet.
    More,
    /// Malformed; the text says how.
    Bad(String),
}

/// Where a proxied request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub host: Host,
    pub port: u16,
}

/// The parts of an HTTP request to the proxy that matter to it.
#[derive(Debug, PartialEq, Eq)]
pub struct ProxyRequest {
    /// A `CONNECT host:port` tunnel, or a plain request in absolute form.
    pub kind: RequestKind,
    pub target: Target,
    /// The length of the head, up to and including the blank line.
    pub head_len: usize,
}

#[derive(Debug, PartialEq, Eq)]
pub enum RequestKind {
    Connect,
    /// A plain `http://` request: the head to send on, rewritten to origin form, without the
    /// headers meant for the proxy, and asking the server to close after answering.
    Forward {
        head: Vec<u8>,
        body: u64,
    },
}

/// A plain-HTTP request inside a tunnel, checked against the tunnel's target.
#[derive(Debug, PartialEq, Eq)]
pub struct TunnelRequest {
    /// The head to send on, asking the server to close after answering.
    pub head: Vec<u8>,
    /// The length of the head as received.
    pub head_len: usize,
    /// The length of the request's body.
    pub body: u64,
}

/// Whether the bytes a tunnel's client sent first are (the start of) an HTTP/1 request: a
/// server on the other end would take each request's Host to choose a site, so such a tunnel
/// is checked request by request. Blank lines before the request line are skipped, as servers
/// do.
///
/// Servers differ in what they take for a method (nginx takes `_GET`, others lower case or
/// digits), so the line is not judged by its first word: any first line of printable text
/// that names an HTTP version, or whose second word is a path (`/…`, `*`, `http://…`, as in
/// HTTP/0.9), is a request. Anything else that starts with text waits for its line to end.
pub fn looks_like_http(buf: &[u8]) -> Parsed<bool> {
    let start = buf
        .iter()
        .position(|&b| !matches!(b, b'\r' | b'\n' | b' ' | b'\t'))
        .unwrap_or(buf.len());
    let rest = &buf[start..];
    // TLS, SSH's binary packets and most other protocols start with bytes that are not text,
    // and are passed on at once.
    let text = |b: &u8| b.is_ascii_graphic() || matches!(b, b' ' | b'\t' | b'\r');
    match rest.first() {
        None => return Parsed::More,
        Some(b) if !b.is_ascii_graphic() => return Parsed::Done(false),
        Some(_) => {}
    }
    let line = rest.split(|&b| b == b'\n').next().unwrap_or(rest);
    if !line.iter().all(text) {
        return Parsed::Done(false);
    }
    if line.len() == rest.len() {
        // The line has not ended yet: it might still become a request.
        return if rest.len() < MAX_HEAD {
            Parsed::More
        } else {
            Parsed::Done(false)
        };
    }
    let names_a_version = line
        .windows(6)
        .any(|w| matches!(w[0], b' ' | b'\t') && w[1..].eq_ignore_ascii_case(b"HTTP/"));
    let target = line
        .split(|&b| matches!(b, b' ' | b'\t'))
        .filter(|w| !w.is_empty())
        .nth(1)
        .unwrap_or_default();
    let names_a_path = target.starts_with(b"/")
        || target.starts_with(b"*")
        || target
            .get(..7)
            .is_some_and(|s| s.eq_ignore_ascii_case(b"http://"));
    Parsed::Done(names_a_version || names_a_path)
}

/// Reads a plain-HTTP request sent inside a tunnel to `target`: its Host (or its absolute URL)
/// must name the tunnel's host, or the server would be asked for a site the rules never saw.
pub fn parse_tunnel_request(buf: &[u8], target: &Target) -> Parsed<TunnelRequest> {
    let start = buf
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(buf.len());
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(&buf[start..]) {
        Ok(httparse::Status::Complete(n)) => start + n,
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => {
            return Parsed::Bad(format!("request head over {MAX_HEAD} bytes"));
        }
        Ok(httparse::Status::Partial) => return Parsed::More,
        Err(e) => return Parsed::Bad(format!("malformed request: {e}")),
    };
    let (Some(method), Some(path)) = (req.method, req.path) else {
        return Parsed::Bad("malformed request line".into());
    };
    let (named, origin) = match strip_prefix_ignore_case(path, "http://") {
        Some(rest) => match rest.find(['/', '?']) {
            Some(i) => (Some(&rest[..i]), &rest[i..]),
            None => (Some(rest), "/"),
        },
        None if path.starts_with('/') || path == "*" => (None, path),
        None => return Parsed::Bad(format!("{method} {path}: not a request for this host")),
    };
    let host = match host_header(req.headers) {
        Ok(h) => h,
        Err(e) => return Parsed::Bad(e),
    };
    // Without a Host (HTTP/1.0) a server would pick its default site: it is told the
    // tunnel's.
    let add_host = host
        .is_none()
        .then(|| format!("{}:{}", target.host, target.port));
    for name in named.into_iter().chain(host.as_deref()) {
        match authority(name, Some(target.port)) {
            Ok(t) if t == *target => {}
            _ => {
                return Parsed::Bad(format!(
                    "a request for `{name}` inside the tunnel to {}:{}",
                    target.host, target.port
                ));
            }
        }
    }
    let body = match body_length(req.headers) {
        Ok(b) => b,
        Err(e) => return Parsed::Bad(e),
    };
    Parsed::Done(TunnelRequest {
        head: rewrite_head(method, origin, add_host.as_deref(), req.headers),
        head_len,
        body,
    })
}

/// The request's Host header, trimmed; more than one is refused (a server and cordon could
/// each read a different one).
fn host_header(headers: &[httparse::Header]) -> Result<Option<String>, String> {
    let mut hosts = headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("host"));
    let first = hosts.next();
    if hosts.next().is_some() {
        return Err("more than one Host header".into());
    }
    Ok(first.map(|h| String::from_utf8_lossy(h.value).trim().to_string()))
}

/// How long a request's body is. A chunked body is refused: its end can only be found by
/// reading its framing, and what follows it would be another request, unchecked.
fn body_length(headers: &[httparse::Header]) -> Result<u64, String> {
    if headers
        .iter()
        .any(|h| h.name.eq_ignore_ascii_case("transfer-encoding"))
    {
        return Err(
            "a request body with Transfer-Encoding is not passed on; send Content-Length".into(),
        );
    }
    let lengths: Vec<&httparse::Header> = headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("content-length"))
        .collect();
    match lengths.as_slice() {
        [] => Ok(0),
        [one] => std::str::from_utf8(one.value)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or_else(|| "a Content-Length that is not a number".into()),
        _ => Err("more than one Content-Length".into()),
    }
}

/// The head to send on: the request line in origin form, the Host line when the client gave
/// none, its headers but those meant for the proxy, and `Connection: close`, so that the server
/// answers one request and ends the connection: any other request comes on a new connection,
/// and is checked there.
fn rewrite_head(
    method: &str,
    origin: &str,
    add_host: Option<&str>,
    headers: &[httparse::Header],
) -> Vec<u8> {
    let origin = if origin.starts_with('?') {
        format!("/{origin}")
    } else {
        origin.to_string()
    };
    let mut head = format!("{method} {origin} HTTP/1.1\r\n").into_bytes();
    if let Some(host) = add_host {
        head.extend_from_slice(format!("Host: {host}\r\n").as_bytes());
    }
    for h in headers {
        if HOP_BY_HOP.iter().any(|n| h.name.eq_ignore_ascii_case(n)) {
            continue;
        }
        head.extend_from_slice(h.name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(h.value);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    head
}

/// Splits `host:port` (`[v6]:port`), with `default` when there is no port.
fn authority(text: &str, default: Option<u16>) -> Result<Target, String> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (h, after) = rest.split_once(']').ok_or("unclosed `[`")?;
        (h, after.strip_prefix(':'))
    } else {
        match text.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (text, None),
        }
    };
    let port = match (port, default) {
        (Some(p), _) => p
            .parse::<u16>()
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| format!("bad port `{p}`"))?,
        (None, Some(d)) => d,
        (None, None) => return Err("a port is required".into()),
    };
    let host = Host::parse(host).map_err(|e| format!("bad host `{host}`: {e}"))?;
    Ok(Target { host, port })
}

/// Headers a client addresses to the proxy itself, never passed on.
const HOP_BY_HOP: &[&str] = &[
    "proxy-authorization",
    "proxy-connection",
    "connection",
    "keep-alive",
];

/// Reads an HTTP request head addressed to the proxy.
pub fn parse_request(buf: &[u8]) -> Parsed<ProxyRequest> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => {
            return Parsed::Bad(format!("request head over {MAX_HEAD} bytes"));
        }
        Ok(httparse::Status::Partial) => return Parsed::More,
        Err(e) => return Parsed::Bad(format!("malformed request: {e}")),
    };
    if head_len > MAX_HEAD {
        return Parsed::Bad(format!("request head over {MAX_HEAD} bytes"));
    }
    let (Some(method), Some(path)) = (req.method, req.path) else {
        return Parsed::Bad("malformed request line".into());
    };
    if method.eq_ignore_ascii_case("CONNECT") {
        return match authority(path, None) {
            Ok(target) => Parsed::Done(ProxyRequest {
                kind: RequestKind::Connect,
                target,
                head_len,
            }),
            Err(e) => Parsed::Bad(format!("CONNECT {path}: {e}")),
        };
    }
    let Some(rest) = strip_prefix_ignore_case(path, "http://") else {
        return Parsed::Bad(format!(
            "{method} {path}: a proxy takes `CONNECT host:port` or an absolute `http://` URL"
        ));
    };
    let (auth, origin) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if auth.contains('@') {
        return Parsed::Bad("credentials in the URL are not passed on".into());
    }
    let target = match authority(auth, Some(80)) {
        Ok(t) => t,
        Err(e) => return Parsed::Bad(format!("{method} {path}: {e}")),
    };
    // The Host header must name the same host as the URL, or a server could be asked for a
    // host the rules never saw.
    let host = match host_header(req.headers) {
        Ok(h) => h,
        Err(e) => return Parsed::Bad(e),
    };
    if let Some(value) = &host {
        match authority(value, Some(80)) {
            Ok(t) if t == target => {}
            _ => {
                return Parsed::Bad(format!(
                    "the Host header `{value}` does not match the request's `{auth}`"
                ));
            }
        }
    }
    let body = match body_length(req.headers) {
        Ok(b) => b,
        Err(e) => return Parsed::Bad(e),
    };
    let head = rewrite_head(method, origin, host.is_none().then_some(auth), req.headers);
    Parsed::Done(ProxyRequest {
        kind: RequestKind::Forward { head, body },
        target,
        head_len,
    })
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    (s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix))
        .then(|| &s[prefix.len()..])
}

/// SOCKS5 reply codes (RFC 1928).
pub mod socks_reply {
    pub const SUCCEEDED: u8 = 0x00;
    pub const GENERAL_FAILURE: u8 = 0x01;
    pub const NOT_ALLOWED: u8 = 0x02;
    pub const HOST_UNREACHABLE: u8 = 0x04;
    pub const CONNECTION_REFUSED: u8 = 0x05;
    pub const COMMAND_NOT_SUPPORTED: u8 = 0x07;
    pub const ADDRESS_NOT_SUPPORTED: u8 = 0x08;
}

/// A SOCKS5 greeting: whether the client offers "no authentication", and its length.
pub fn parse_socks_greeting(buf: &[u8]) -> Parsed<(bool, usize)> {
    match buf {
        [] | [_] => Parsed::More,
        [5, n, rest @ ..] => {
            let n = usize::from(*n);
            if rest.len() < n {
                return Parsed::More;
            }
            Parsed::Done((rest[..n].contains(&0), 2 + n))
        }
        [v, ..] => Parsed::Bad(format!("SOCKS version {v}, not 5")),
    }
}

/// A SOCKS5 request after the greeting.
#[derive(Debug, PartialEq, Eq)]
pub enum SocksRequest {
    Connect(Target, usize),
    /// BIND or UDP ASSOCIATE, which the proxy does not do; the code to answer with.
    Refuse(u8, usize),
}

pub fn parse_socks_request(buf: &[u8]) -> Parsed<SocksRequest> {
    if buf.len() < 5 {
        return Parsed::More;
    }
    if buf[0] != 5 || buf[2] != 0 {
        return Parsed::Bad("malformed SOCKS5 request".into());
    }
    let (host, addr_end) = match buf[3] {
        1 => {
            if buf.len() < 4 + 4 + 2 {
                return Parsed::More;
            }
            let ip = std::net::Ipv4Addr::new(buf[4], buf[5], buf[6], buf[7]);
            (Ok(Host::Ip(ip.into())), 8)
        }
        4 => {
            if buf.len() < 4 + 16 + 2 {
                return Parsed::More;
            }
            let mut octets = [0u8; 16];
            octets.copy_from_slice(&buf[4..20]);
            (Ok(Host::Ip(std::net::Ipv6Addr::from(octets).into())), 20)
        }
        3 => {
            let n = usize::from(buf[4]);
            if buf.len() < 5 + n + 2 {
                return Parsed::More;
            }
            let name = String::from_utf8_lossy(&buf[5..5 + n]);
            (Host::parse(&name), 5 + n)
        }
        other => {
            return Parsed::Done(SocksRequest::Refuse(
                socks_reply::ADDRESS_NOT_SUPPORTED,
                buf.len().min(4 + usize::from(other)),
            ));
        }
    };
    let len = addr_end + 2;
    let port = u16::from_be_bytes([buf[addr_end], buf[addr_end + 1]]);
    match buf[1] {
        1 => match host {
            Ok(host) if port > 0 => Parsed::Done(SocksRequest::Connect(Target { host, port }, len)),
            Ok(_) => Parsed::Bad("port 0".into()),
            Err(e) => Parsed::Bad(format!("bad host name: {e}")),
        },
        _ => Parsed::Done(SocksRequest::Refuse(
            socks_reply::COMMAND_NOT_SUPPORTED,
            len,
        )),
    }
}

/// The first bytes of a TLS connection: the server name its ClientHello asks for, if any.
/// `Done(None)` means the bytes are not TLS, or the hello names no server.
pub fn client_hello_server_name(buf: &[u8]) -> Parsed<Option<String>> {
    // Handshake records: the hello may be split over several.
    if buf.first().is_some_and(|&b| b != 0x16) {
        return Parsed::Done(None);
    }
    let mut hello = Vec::new();
    let mut at = 0;
    loop {
        if buf.len() < at + 5 {
            return more_or_bad(buf);
        }
        if buf[at] != 0x16 {
            return Parsed::Bad(
                "a TLS record other than a handshake before the hello ended".into(),
            );
        }
        let len = usize::from(u16::from_be_bytes([buf[at + 3], buf[at + 4]]));
        if buf.len() < at + 5 + len {
            return more_or_bad(buf);
        }
        hello.extend_from_slice(&buf[at + 5..at + 5 + len]);
        at += 5 + len;
        if hello.len() >= 4 {
            let body =
                usize::from(hello[1]) << 16 | usize::from(hello[2]) << 8 | usize::from(hello[3]);
            if hello[0] != 1 {
                return Parsed::Bad("the first handshake message is not a ClientHello".into());
            }
            if hello.len() >= 4 + body {
                return match server_name(&hello[4..4 + body]) {
                    Some(r) => Parsed::Done(r),
                    None => Parsed::Bad("malformed ClientHello".into()),
                };
            }
        }
    }
}

fn more_or_bad<T>(buf: &[u8]) -> Parsed<T> {
    if buf.len() >= MAX_HELLO {
        Parsed::Bad(format!("ClientHello over {MAX_HELLO} bytes"))
    } else {
        Parsed::More
    }
}

/// The server name in a ClientHello body; `None` when it is malformed.
fn server_name(body: &[u8]) -> Option<Option<String>> {
    let mut r = Reader(body);
    r.take(2 + 32)?; // version, random
    let sid = usize::from(r.u8()?);
    r.take(sid)?;
    let suites = usize::from(r.u16()?);
    r.take(suites)?;
    let comp = usize::from(r.u8()?);
    r.take(comp)?;
    if r.0.is_empty() {
        return Some(None);
    }
    let ext_len = usize::from(r.u16()?);
    let mut exts = Reader(r.take(ext_len)?);
    while !exts.0.is_empty() {
        let kind = exts.u16()?;
        let len = usize::from(exts.u16()?);
        let data = exts.take(len)?;
        if kind != 0 {
            continue;
        }
        let mut list = Reader(data);
        let list_len = usize::from(list.u16()?);
        let mut names = Reader(list.take(list_len)?);
        while !names.0.is_empty() {
            let name_type = names.u8()?;
            let n = usize::from(names.u16()?);
            let name = names.take(n)?;
            if name_type == 0 {
                return Some(Some(String::from_utf8_lossy(name).into_owned()));
            }
        }
        return Some(None);
    }
    Some(None)
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
}

/// A minimal ClientHello naming `name`, as a TLS client sends it first: for tests and
/// benchmarks of the server-name check.
#[doc(hidden)]
pub fn sample_client_hello(name: &str) -> Vec<u8> {
    let n = name.len() as u16;
    let mut sni = (n + 3).to_be_bytes().to_vec();
    sni.push(0);
    sni.extend_from_slice(&n.to_be_bytes());
    sni.extend_from_slice(name.as_bytes());
    // An unrelated empty extension first, so the reader has to skip one.
    let mut exts = vec![0x00, 0x17, 0, 0, 0, 0];
    exts.extend_from_slice(&(sni.len() as u16).to_be_bytes());
    exts.extend_from_slice(&sni);
    let mut body = vec![3, 3];
    body.extend_from_slice(&[7; 32]);
    body.extend_from_slice(&[0, 0, 2, 0x13, 0x01, 1, 0]);
    body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    body.extend_from_slice(&exts);
    let mut hs = vec![1, 0];
    hs.extend_from_slice(&(body.len() as u16).to_be_bytes());
    hs.extend_from_slice(&body);
    let mut rec = vec![0x16, 3, 1];
    rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    rec.extend_from_slice(&hs);
    rec
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_in_a_tunnel_is_told_from_other_protocols() {
        assert_eq!(looks_like_http(b"GET / HTTP/1.1\r\n"), Parsed::Done(true));
        assert_eq!(
            looks_like_http(b"\r\n\r\nget / http/1.0\n"),
            Parsed::Done(true)
        );
        assert_eq!(looks_like_http(b"GET / HT"), Parsed::More);
        assert_eq!(
            looks_like_http(b"SSH-2.0-OpenSSH_9.2\r\n"),
            Parsed::Done(false)
        );
        assert_eq!(
            looks_like_http(b"\x16\x03\x01\x02\x00"),
            Parsed::Done(false)
        );
        assert_eq!(looks_like_http(b""), Parsed::More);
        assert_eq!(looks_like_http(b"A\x00\x00\x00binary"), Parsed::Done(false));
        // What lenient servers still take for a request line.
        for line in [
            &b"_GET / HTTP/1.1\r\n"[..],
            b"-GET / HTTP/1.1\r\n",
            b"1GET / HTTP/1.1\r\n",
            b"  GET / HTTP/1.1\r\n",
            b"\tGET\t/\tHTTP/1.1\r\n",
            b"GET /\r\n",
            b"GET http://evil.test/\n",
            b"OPTIONS * HTTP/1.1\r\n",
        ] {
            assert_eq!(
                looks_like_http(line),
                Parsed::Done(true),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        assert_eq!(looks_like_http(b"PING\r\n"), Parsed::Done(false));
        assert_eq!(looks_like_http(b"_GET / HT"), Parsed::More);
    }

    #[test]
    fn a_request_in_a_tunnel_must_name_the_tunnels_host() {
        let target = authority("a.test:8080", None).expect("target");
        let ok = parse_tunnel_request(
            b"POST /x HTTP/1.1\r\nHost: a.test:8080\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\nabcGET",
            &target,
        );
        let Parsed::Done(r) = ok else {
            panic!("{ok:?}")
        };
        assert_eq!(r.body, 3);
        let bare = parse_tunnel_request(b"GET / HTTP/1.0\r\n\r\n", &target);
        let Parsed::Done(bare) = bare else {
            panic!("{bare:?}")
        };
        let bare = String::from_utf8(bare.head).expect("utf-8");
        assert!(bare.contains("Host: a.test:8080\r\n"), "{bare}");
        let head = String::from_utf8(r.head).expect("utf-8");
        assert!(
            head.ends_with("Connection: close\r\n\r\n") && !head.contains("keep-alive"),
            "{head}"
        );
        for bad in [
            &b"GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nHost: a.test:8081\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a.test:8080\r\nHost: evil.test\r\n\r\n",
            b"GET http://evil.test/ HTTP/1.1\r\nHost: a.test:8080\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a.test:8080\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a.test:8080\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        ] {
            let r = parse_tunnel_request(bad, &target);
            assert!(matches!(r, Parsed::Bad(_)), "{:?}: {r:?}", String::from_utf8_lossy(bad));
        }
    }
    use proptest::prelude::*;

    fn client_hello(name: &str) -> Vec<u8> {
        sample_client_hello(name)
    }

    fn host(n: &str) -> Host {
        Host::parse(n).expect("host")
    }

    #[test]
    fn connect_and_absolute_form() {
        let raw = b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\nrest";
        let r = parse_request(raw);
        let Parsed::Done(r) = r else { panic!("{r:?}") };
        assert_eq!(r.kind, RequestKind::Connect);
        assert_eq!(
            r.target,
            Target {
                host: host("example.com"),
                port: 443
            }
        );
        assert_eq!(
            r.head_len,
            raw.len() - b"rest".len(),
            "what follows the head is not eaten"
        );

        let r = parse_request(
            b"GET http://Example.com/a?b HTTP/1.1\r\nHost: example.com\r\nProxy-Authorization: x\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n",
        );
        let Parsed::Done(ProxyRequest {
            kind: RequestKind::Forward { head, body: 0 },
            target,
            ..
        }) = r
        else {
            panic!("{r:?}")
        };
        assert_eq!(target.port, 80);
        let head = String::from_utf8(head).expect("utf-8");
        assert!(head.starts_with("GET /a?b HTTP/1.1\r\n"), "{head}");
        assert!(
            !head.contains("Proxy-Authorization") && !head.contains("keep-alive"),
            "{head}"
        );
        assert!(
            head.ends_with("Accept: */*\r\nConnection: close\r\n\r\n"),
            "{head}"
        );
    }

    #[test]
    fn bad_requests_are_named() {
        for (req, want) in [
            (&b"GET /local HTTP/1.1\r\n\r\n"[..], "absolute"),
            (b"GET https://a.com/ HTTP/1.1\r\n\r\n", "absolute"),
            (
                b"GET http://a.com/ HTTP/1.1\r\nHost: b.com\r\n\r\n",
                "does not match",
            ),
            (
                b"GET http://a.com/ HTTP/1.1\r\nHost: a.com\r\nHost: a.com\r\n\r\n",
                "more than one",
            ),
            (b"CONNECT a.com HTTP/1.1\r\n\r\n", "port is required"),
            (b"CONNECT a.com:99999 HTTP/1.1\r\n\r\n", "bad port"),
            (b"GET http://u:p@a.com/ HTTP/1.1\r\n\r\n", "credentials"),
            (b"\x00\x01\x02 garbage\r\n\r\n", "malformed"),
        ] {
            match parse_request(req) {
                Parsed::Bad(why) => assert!(why.contains(want), "{why}"),
                other => panic!("{}: {other:?}", String::from_utf8_lossy(req)),
            }
        }
        assert_eq!(
            parse_request(b"GET http://a.com/ HTTP/1.1\r\nHost: a"),
            Parsed::More
        );
        let big = [
            b"GET http://a.com/ HTTP/1.1\r\nX: ".as_slice(),
            &[b'a'; MAX_HEAD],
        ]
        .concat();
        assert!(matches!(parse_request(&big), Parsed::Bad(why) if why.contains("over")));
    }

    #[test]
    fn socks5_requests() {
        assert_eq!(parse_socks_greeting(&[5, 1, 0]), Parsed::Done((true, 3)));
        assert_eq!(parse_socks_greeting(&[5, 1, 2]), Parsed::Done((false, 3)));
        assert_eq!(parse_socks_greeting(&[5, 2, 0]), Parsed::More);
        assert!(matches!(parse_socks_greeting(&[4, 1]), Parsed::Bad(_)));
        let mut req = vec![5, 1, 0, 3, 11];
        req.extend_from_slice(b"example.com");
        req.extend_from_slice(&443u16.to_be_bytes());
        assert_eq!(
            parse_socks_request(&req),
            Parsed::Done(SocksRequest::Connect(
                Target {
                    host: host("example.com"),
                    port: 443
                },
                req.len()
            ))
        );
        assert_eq!(parse_socks_request(&req[..8]), Parsed::More);
        let udp = [5, 3, 0, 1, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            parse_socks_request(&udp),
            Parsed::Done(SocksRequest::Refuse(socks_reply::COMMAND_NOT_SUPPORTED, 10))
        );
    }

    #[test]
    fn the_server_name_of_a_client_hello() {
        let hello = client_hello("example.com");
        assert_eq!(
            client_hello_server_name(&hello),
            Parsed::Done(Some("example.com".into()))
        );
        assert_eq!(client_hello_server_name(&hello[..20]), Parsed::More);
        assert_eq!(
            client_hello_server_name(b"SSH-2.0-OpenSSH"),
            Parsed::Done(None)
        );
        // The same hello split over two records.
        let hs = &hello[5..];
        let (a, b) = hs.split_at(10);
        let mut split = vec![0x16, 3, 1];
        split.extend_from_slice(&(a.len() as u16).to_be_bytes());
        split.extend_from_slice(a);
        split.extend_from_slice(&[0x16, 3, 1]);
        split.extend_from_slice(&(b.len() as u16).to_be_bytes());
        split.extend_from_slice(b);
        assert_eq!(
            client_hello_server_name(&split),
            Parsed::Done(Some("example.com".into()))
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn no_input_makes_the_readers_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let _ = parse_request(&bytes);
            let _ = parse_socks_greeting(&bytes);
            let _ = parse_socks_request(&bytes);
            let _ = client_hello_server_name(&bytes);
        }

        #[test]
        fn a_mangled_hello_never_panics(cut in 0usize..200, flip in 0usize..200, byte in any::<u8>()) {
            let mut hello = client_hello("example.com");
            if flip < hello.len() {
                hello[flip] = byte;
            }
            hello.truncate(cut.max(1));
            let _ = client_hello_server_name(&hello);
        }

        #[test]
        fn header_lines_round_trip(name in "[a-z]{1,12}(\\.[a-z]{1,12}){1,3}", port in 1u16..) {
            let req = format!("CONNECT {name}:{port} HTTP/1.1\r\n\r\n");
            let Parsed::Done(r) = parse_request(req.as_bytes()) else { panic!("{req}") };
            prop_assert_eq!(r.target, Target { host: Host::Name(name), port });
        }
    }
}
