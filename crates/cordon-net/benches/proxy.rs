//! The proxy's cost, measured against a direct loopback connection in the same run:
//! bulk throughput through a CONNECT tunnel, the latency a new connection adds, and the memory
//! 1 000 open tunnels hold. The proxy runs on a thread of its own (it is a process of its own
//! beside a sandbox); client and server share another. Run with `cargo bench -p cordon-net --bench proxy`; figures go in
//! docs/BENCHMARKS.md.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cordon_net::{Proxy, ProxyConfig, Rules};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const BULK: usize = 1 << 30;
const CHUNK: usize = 64 * 1024;

/// A server that reads everything sent to it and, once the client is done, answers with the
/// count; or echoes one byte at a time for the latency runs.
async fn sink() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                // A one-byte probe is echoed and the connection then held without a buffer of
                // its own, so that the memory figure below is the proxy's.
                let mut probe = [0u8; 1];
                match conn.read(&mut probe).await {
                    Ok(1) => {}
                    _ => return,
                }
                if probe[0] == b'p' {
                    let _ = conn.write_all(&probe).await;
                    let _ = conn.read(&mut probe).await;
                    return;
                }
                let mut buf = vec![0u8; CHUNK];
                while let Ok(n) = conn.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// A proxy on a thread of its own, as it runs in a process of its own beside a sandbox.
fn proxy(tunnel_buffer: usize) -> SocketAddr {
    let (tx_addr, rx_addr) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let rules = Rules {
                allow: vec!["sink.test".parse().expect("rule")],
                deny: Vec::new(),
                allow_private_ips: true,
            };
            let mut config = ProxyConfig::new(rules);
            config.tunnel_buffer = tunnel_buffer;
            config
                .resolve
                .insert("sink.test".into(), vec!["127.0.0.1".parse().expect("ip")]);
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            tokio::spawn(async move { while rx.recv().await.is_some() {} });
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            tx_addr
                .send(listener.local_addr().expect("addr"))
                .expect("send");
            let _ = cordon_net::serve::tcp(Arc::new(Proxy::new(config, tx)), listener).await;
        });
    });
    rx_addr.recv().expect("the proxy's address")
}

/// A connection to the sink, directly or through a CONNECT tunnel.
async fn open(sink: SocketAddr, via: Option<SocketAddr>) -> TcpStream {
    match via {
        None => TcpStream::connect(sink).await.expect("connect"),
        Some(p) => {
            let mut s = TcpStream::connect(p).await.expect("connect");
            s.write_all(format!("CONNECT sink.test:{} HTTP/1.1\r\n\r\n", sink.port()).as_bytes())
                .await
                .expect("write");
            let mut reply = [0u8; 39];
            s.read_exact(&mut reply).await.expect("reply");
            assert!(reply.starts_with(b"HTTP/1.1 200"));
            s
        }
    }
}

async fn throughput(sink: SocketAddr, via: Option<SocketAddr>) -> f64 {
    let mut s = open(sink, via).await;
    s.set_nodelay(true).expect("nodelay");
    // A first chunk that is not TLS lets the proxy's server-name check pass at once.
    let chunk = vec![b'x'; CHUNK];
    let start = Instant::now();
    let mut sent = 0;
    while sent < BULK {
        s.write_all(&chunk).await.expect("write");
        sent += CHUNK;
    }
    s.shutdown().await.expect("shutdown");
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest).await;
    BULK as f64 / start.elapsed().as_secs_f64() / (1 << 20) as f64
}

async fn latency(sink: SocketAddr, via: Option<SocketAddr>, n: usize) -> Vec<Duration> {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        let mut s = open(sink, via).await;
        s.write_all(b"p").await.expect("write");
        let mut b = [0u8; 1];
        s.read_exact(&mut b).await.expect("echo");
        times.push(start.elapsed());
    }
    times.sort();
    times
}

/// CPU time this process (all its threads: client, server and proxy) has used, from
/// `/proc/self/stat` (user plus system, in the kernel's USER_HZ of 100 per second).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<u64> = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse().ok())
        .collect();
    fields.iter().sum::<u64>() as f64 / 100.0
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    // `cargo test --benches` runs this with --bench absent; stay quick then.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    cordon_net::serve::raise_descriptor_limit();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let sink = sink().await;
        let best = |v: &[f64]| v.iter().cloned().fold(0.0, f64::max);
        let mut direct = Vec::new();
        let cpu = cpu_seconds();
        for _ in 0..3 {
            direct.push(throughput(sink, None).await);
        }
        let direct_cpu = (cpu_seconds() - cpu) / 3.0;
        println!("throughput, 1 GiB, best of 3: direct {:.0} MiB/s", best(&direct));
        let proxy = proxy(ProxyConfig::new(Rules::default()).tunnel_buffer);
        let mut tunnel = Vec::new();
        let cpu = cpu_seconds();
        for _ in 0..3 {
            tunnel.push(throughput(sink, Some(proxy)).await);
        }
        let tunnel_cpu = (cpu_seconds() - cpu) / 3.0;
        println!(
            "  through a CONNECT tunnel (splice between the sockets): {:.0} MiB/s ({:.0} % of direct)",
            best(&tunnel),
            100.0 * best(&tunnel) / best(&direct)
        );
        // What the tunnel costs in CPU, whatever the cores: the work per GiB moved, for
        // client, server and (through the tunnel) proxy together.
        println!(
            "  CPU time per GiB (all threads): direct {direct_cpu:.2} s, through the tunnel {tunnel_cpu:.2} s ({:.0} % more)",
            100.0 * (tunnel_cpu / direct_cpu - 1.0)
        );

        let d = latency(sink, None, 2000).await;
        let t = latency(sink, Some(proxy), 2000).await;
        let pct = |v: &[Duration], p: usize| v[v.len() * p / 100].as_secs_f64() * 1e6;
        println!(
            "new connection + one round trip, 2000 each: direct median {:.0} µs (p99 {:.0}), through the proxy median {:.0} µs (p99 {:.0}): +{:.0} µs",
            pct(&d, 50),
            pct(&d, 99),
            pct(&t, 50),
            pct(&t, 99),
            pct(&t, 50) - pct(&d, 50)
        );

        let before = rss_kib();
        let mut held = Vec::new();
        for _ in 0..1000 {
            let mut s = open(sink, Some(proxy)).await;
            s.write_all(b"p").await.expect("write");
            let mut b = [0u8; 1];
            s.read_exact(&mut b).await.expect("echo");
            held.push(s);
        }
        let after = rss_kib();
        println!(
            "1000 open tunnels (client, proxy and server in this process; the server holds no buffer): {} KiB more resident memory, {:.1} KiB per tunnel",
            after.saturating_sub(before),
            after.saturating_sub(before) as f64 / 1000.0
        );
        drop(held);
    });
}
