//! The proxy against servers on this machine: what it lets through, what it refuses and how
//! it says so, and what bad clients get.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use cordon_net::{Answer, Asker, Blocked, Host, Pending, Proxy, ProxyConfig, Rules};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// An origin server on loopback that answers every connection with what it read first,
/// prefixed, so a test sees that its bytes arrived.
async fn origin() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let n = conn.read(&mut buf).await.unwrap_or(0);
                let mut reply = b"origin got: ".to_vec();
                reply.extend_from_slice(&buf[..n]);
                let _ = conn.write_all(&reply).await;
            });
        }
    });
    addr
}

struct Setup {
    proxy: SocketAddr,
    origin: SocketAddr,
    blocked: mpsc::UnboundedReceiver<Blocked>,
}

async fn setup(allow: &[&str], deny: &[&str], private: bool, timeout: Duration) -> Setup {
    let origin = origin().await;
    let rules = Rules {
        allow: allow.iter().map(|r| r.parse().expect("rule")).collect(),
        deny: deny.iter().map(|r| r.parse().expect("rule")).collect(),
        allow_private_ips: private,
    };
    let mut config = ProxyConfig::new(rules);
    config.request_timeout = timeout;
    let loopback: IpAddr = origin.ip();
    for name in ["allowed.test", "other.test", "denied.test", "sub.wild.test"] {
        config.resolve.insert(name.to_string(), vec![loopback]);
    }
    let (tx, blocked) = mpsc::unbounded_channel();
    let proxy = Arc::new(Proxy::new(config, tx));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(cordon_net::serve::tcp(proxy, listener));
    Setup {
        proxy: addr,
        origin,
        blocked,
    }
}

async fn exchange(proxy: SocketAddr, request: &[u8]) -> String {
    let mut conn = TcpStream::connect(proxy).await.expect("connect");
    conn.write_all(request).await.expect("write");
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn connect_request(host: &str, port: u16) -> Vec<u8> {
    format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\nping\n").into_bytes()
}

#[tokio::test]
async fn an_allowed_name_gets_a_tunnel_and_others_a_403_saying_why() {
    let mut s = setup(
        &["allowed.test", "*.wild.test"],
        &["denied.test"],
        true,
        Duration::from_secs(5),
    )
    .await;
    let port = s.origin.port();
    let out = exchange(s.proxy, &connect_request("allowed.test", port)).await;
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.ends_with("origin got: ping\n"), "{out}");
    let out = exchange(s.proxy, &connect_request("sub.wild.test", port)).await;
    assert!(out.ends_with("origin got: ping\n"), "{out}");

    for (host, why) in [
        ("denied.test", "denied by `denied.test`"),
        ("other.test", "not among the allowed domains"),
        ("127.0.0.1", "raw IP address"),
    ] {
        let out = exchange(s.proxy, &connect_request(host, port)).await;
        assert!(out.starts_with("HTTP/1.1 403"), "{host}: {out}");
        assert!(
            out.contains("X-Cordon-Blocked: ") && out.contains(why),
            "{host}: {out}"
        );
        assert!(!out.contains("origin got"), "{host} reached the origin");
        let b = s.blocked.recv().await.expect("a blocked event");
        assert_eq!(b.port, port);
        assert!(b.rule.contains(why), "{b:?}");
    }
}

#[tokio::test]
async fn a_name_pointing_at_a_private_address_is_refused() {
    // allowed.test resolves to 127.0.0.1 here: DNS rebinding onto the host's own services.
    let mut s = setup(&["allowed.test"], &[], false, Duration::from_secs(5)).await;
    let out = exchange(s.proxy, &connect_request("allowed.test", s.origin.port())).await;
    assert!(
        out.starts_with("HTTP/1.1 403") && out.contains("private"),
        "{out}"
    );
    assert!(
        s.blocked
            .recv()
            .await
            .expect("event")
            .rule
            .contains("127.0.0.1")
    );
}

#[tokio::test]
async fn a_tls_tunnel_must_ask_for_the_host_it_was_granted() {
    let mut s = setup(&["allowed.test"], &[], true, Duration::from_secs(5)).await;
    let port = s.origin.port();
    let hello = |name: &str| -> Vec<u8> {
        let mut req = format!("CONNECT allowed.test:{port} HTTP/1.1\r\n\r\n").into_bytes();
        req.extend_from_slice(&cordon_net::wire::sample_client_hello(name));
        req
    };
    let out = exchange(s.proxy, &hello("allowed.test")).await;
    assert!(
        out.contains("origin got: \u{16}"),
        "the hello went through: {out:?}"
    );
    let out = exchange(s.proxy, &hello("other.test")).await;
    assert!(
        out.starts_with("HTTP/1.1 200") && !out.contains("origin got"),
        "{out:?}"
    );
    let b = s.blocked.recv().await.expect("event");
    assert!(b.rule.contains("other.test"), "{b:?}");
}

#[tokio::test]
async fn plain_http_is_forwarded_in_origin_form() {
    let s = setup(&["allowed.test"], &[], true, Duration::from_secs(5)).await;
    let port = s.origin.port();
    let req = format!(
        "GET http://allowed.test:{port}/x HTTP/1.1\r\nHost: allowed.test:{port}\r\nProxy-Connection: keep-alive\r\n\r\n"
    );
    let out = exchange(s.proxy, req.as_bytes()).await;
    assert!(out.starts_with("origin got: GET /x HTTP/1.1\r\n"), "{out}");
    assert!(
        !out.contains("Proxy-Connection") && out.contains("Connection: close"),
        "{out}"
    );
    let req = format!("GET http://allowed.test:{port}/ HTTP/1.1\r\nHost: other.test\r\n\r\n");
    let out = exchange(s.proxy, req.as_bytes()).await;
    assert!(
        out.starts_with("HTTP/1.1 400") && out.contains("does not match"),
        "{out}"
    );
}

#[tokio::test]
async fn socks5_by_name_and_its_refusals() {
    let s = setup(&["allowed.test"], &[], true, Duration::from_secs(5)).await;
    let port = s.origin.port();
    let socks = |name: &str, cmd: u8| {
        let mut req = vec![5, 1, 0, 5, cmd, 0, 3, name.len() as u8];
        req.extend_from_slice(name.as_bytes());
        req.extend_from_slice(&port.to_be_bytes());
        req.extend_from_slice(b"ping\n");
        req
    };
    let out = exchange(s.proxy, &socks("allowed.test", 1)).await;
    assert!(out.as_bytes().starts_with(&[5, 0, 5, 0]), "{out:?}");
    assert!(out.ends_with("origin got: ping\n"), "{out:?}");
    let out = exchange(s.proxy, &socks("other.test", 1)).await;
    assert_eq!(
        &out.as_bytes()[..4],
        &[5, 0, 5, 2],
        "not allowed by ruleset"
    );
    let out = exchange(s.proxy, &socks("allowed.test", 3)).await;
    assert_eq!(
        &out.as_bytes()[..4],
        &[5, 0, 5, 7],
        "UDP associate: command not supported"
    );
}

#[tokio::test]
async fn bad_and_slow_clients_get_an_answer_or_the_door() {
    let s = setup(&["allowed.test"], &[], true, Duration::from_millis(300)).await;
    let out = exchange(s.proxy, b"NONSENSE\r\n\r\n").await;
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
    let mut big = b"GET http://allowed.test/ HTTP/1.1\r\nX: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 20_000));
    let out = exchange(s.proxy, &big).await;
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
    // A client that sends half a request and waits is cut off after the request timeout.
    let start = std::time::Instant::now();
    let out = exchange(s.proxy, b"GET http://allowed.test/ HTTP/1.1\r\nHo").await;
    assert!(
        out.starts_with("HTTP/1.1 400") && out.contains("too slow"),
        "{out}"
    );
    assert!(start.elapsed() < Duration::from_secs(3));
}

/// A proxy allowing `allow`, with every test name pointing at 127.0.0.1, going through
/// `upstream` when given, asking `asker` about the rest.
async fn proxy_with(
    allow: &[&str],
    upstream: Option<cordon_net::Upstream>,
    asker: Option<Arc<dyn Asker>>,
) -> SocketAddr {
    let rules = Rules {
        allow: allow.iter().map(|r| r.parse().expect("rule")).collect(),
        deny: Vec::new(),
        allow_private_ips: true,
    };
    let mut config = ProxyConfig::new(rules);
    for name in ["allowed.test", "other.test", "asked.test", "refused.test"] {
        config
            .resolve
            .insert(name.to_string(), vec!["127.0.0.1".parse().expect("ip")]);
    }
    config.upstream = upstream;
    config.ask = asker;
    let (tx, mut rx) = mpsc::unbounded_channel();
    tokio::spawn(async move { while rx.recv().await.is_some() {} });
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(cordon_net::serve::tcp(
        Arc::new(Proxy::new(config, tx)),
        listener,
    ));
    addr
}

#[tokio::test]
async fn connections_go_through_an_upstream_proxy_and_its_refusals_count() {
    let origin = origin().await;
    let port = origin.port();
    // The upstream allows only allowed.test; the front would allow other.test too.
    let upstream = proxy_with(&["allowed.test"], None, None).await;
    for kind in ["http", "socks5"] {
        let up: cordon_net::Upstream = format!("{kind}://{upstream}").parse().expect("upstream");
        let front = proxy_with(&["allowed.test", "other.test"], Some(up), None).await;
        let out = exchange(front, &connect_request("allowed.test", port)).await;
        assert!(
            out.starts_with("HTTP/1.1 200") && out.ends_with("origin got: ping\n"),
            "{kind}: {out}"
        );
        let out = exchange(front, &connect_request("other.test", port)).await;
        assert!(
            out.starts_with("HTTP/1.1 502"),
            "{kind}: the upstream's refusal must hold: {out}"
        );
        assert!(!out.contains("origin got"), "{kind}: {out}");
    }
    for bad in ["ftp://a:1", "http://a", "http://u:p@a:1", "a:1"] {
        assert!(bad.parse::<cordon_net::Upstream>().is_err(), "{bad}");
    }
}

/// Answers from a table after a pause, and writes down every question.
#[derive(Default)]
struct Table {
    asked: std::sync::Mutex<Vec<String>>,
    open: Arc<std::sync::atomic::AtomicUsize>,
}

impl Asker for Table {
    fn ask(&self, host: &Host, port: u16) -> Pending {
        use std::sync::atomic::Ordering::SeqCst;
        self.asked
            .lock()
            .expect("lock")
            .push(format!("{host}:{port}"));
        // Two questions open at once would mean two prompts on one terminal.
        assert_eq!(self.open.fetch_add(1, SeqCst), 0, "a second open question");
        let answer = match host.to_string().as_str() {
            "asked.test" => Answer::Once,
            _ => Answer::Deny,
        };
        let open = self.open.clone();
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            open.fetch_sub(1, SeqCst);
            answer
        })
    }
}

#[tokio::test]
async fn unlisted_hosts_are_asked_about_once_each_and_one_at_a_time() {
    let origin = origin().await;
    let port = origin.port();
    let table = Arc::new(Table::default());
    let proxy = proxy_with(&["allowed.test"], None, Some(table.clone())).await;
    // Three connections to each host at once: each host is asked about once.
    let mut runs = Vec::new();
    for host in ["asked.test", "refused.test", "allowed.test"] {
        for _ in 0..3 {
            runs.push(tokio::spawn(async move {
                (host, exchange(proxy, &connect_request(host, port)).await)
            }));
        }
    }
    for run in runs {
        let (host, out) = run.await.expect("join");
        if host == "refused.test" {
            assert!(out.starts_with("HTTP/1.1 403"), "{host}: {out}");
            assert!(out.contains("refused when asked"), "{host}: {out}");
        } else {
            assert!(out.ends_with("origin got: ping\n"), "{host}: {out}");
        }
    }
    let mut asked = table.asked.lock().expect("lock").clone();
    asked.sort();
    assert_eq!(
        asked,
        [format!("asked.test:{port}"), format!("refused.test:{port}")],
        "only unlisted hosts are asked about, each once"
    );
    // A raw address is refused by the rules, never put to the user.
    let out = exchange(proxy, &connect_request("127.0.0.1", port)).await;
    assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    assert_eq!(table.asked.lock().expect("lock").len(), 2);
}

#[tokio::test]
async fn a_run_stops_asking_after_so_many_questions() {
    let origin = origin().await;
    let port = origin.port();
    let table = Arc::new(Table::default());
    let proxy = proxy_with(&["allowed.test"], None, Some(table.clone())).await;
    for i in 0..cordon_net::proxy::MAX_QUESTIONS + 3 {
        let host = format!("h{i}.test");
        let out = exchange(proxy, &connect_request(&host, port)).await;
        assert!(out.starts_with("HTTP/1.1 403"), "{host}: {out}");
    }
    assert_eq!(
        table.asked.lock().expect("lock").len(),
        cordon_net::proxy::MAX_QUESTIONS
    );
}
