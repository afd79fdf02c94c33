//! The proxy's cost, measured against a direct loopback connection in the same run:
//! bulk throughput through a CONNECT tunnel, the latency a new connection adds, and the memory
//! 1 000 open tunnels hold. The proxy runs on a thread of its own (it is a process of its own
//! beside a sandbox). Throughput is measured twice: with client and server sharing a thread,
//! and with each on a thread of its own, as two programs would be. Run with
//! `cargo bench -p cordon-net --bench proxy`; figures go in docs/BENCHMARKS.md.

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

/// Runs `serve` on a thread of its own with a single-threaded runtime, as a program of its own
/// would run, and returns the address it reports once listening.
fn own_thread<F>(
    serve: impl FnOnce(std::sync::mpsc::Sender<SocketAddr>) -> F + Send + 'static,
) -> SocketAddr
where
    F: std::future::Future<Output = ()>,
{
    let (tx_addr, rx_addr) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(serve(tx_addr));
    });
    rx_addr.recv().expect("the address")
}

/// A proxy on a thread of its own, as it runs in a process of its own beside a sandbox.
fn proxy(tunnel_buffer: usize) -> SocketAddr {
    own_thread(move |tx_addr| async move {
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
    })
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

/// Runs of each kind, interleaved so that a change in the machine's load falls on both.
const RUNS: usize = 10;

/// Bulk throughput directly and through the tunnel, `RUNS` times each, alternating; prints the
/// median and range of each, their ratio, and the CPU time per GiB.
async fn bulk(sink: SocketAddr, proxy: SocketAddr) {
    let (mut direct, mut tunnel) = (Vec::new(), Vec::new());
    let (mut direct_cpu, mut tunnel_cpu) = (0.0, 0.0);
    for _ in 0..RUNS {
        for (via, rates, cpu) in [
            (None, &mut direct, &mut direct_cpu),
            (Some(proxy), &mut tunnel, &mut tunnel_cpu),
        ] {
            let before = cpu_seconds();
            rates.push(throughput(sink, via).await);
            *cpu += (cpu_seconds() - before) / RUNS as f64;
        }
    }
    for v in [&mut direct, &mut tunnel] {
        v.sort_by(f64::total_cmp);
    }
    let median = |v: &[f64]| (v[RUNS / 2 - 1] + v[RUNS / 2]) / 2.0;
    println!(
        "    direct: median {:.0} MiB/s ({:.0}-{:.0}), {direct_cpu:.2} s CPU per GiB",
        median(&direct),
        direct[0],
        direct[RUNS - 1]
    );
    println!(
        "    through a CONNECT tunnel (splice between the sockets): median {:.0} MiB/s ({:.0}-{:.0}), {:.0} % of direct; {tunnel_cpu:.2} s CPU per GiB ({:.0} % more)",
        median(&tunnel),
        tunnel[0],
        tunnel[RUNS - 1],
        100.0 * median(&tunnel) / median(&direct),
        100.0 * (tunnel_cpu / direct_cpu - 1.0)
    );
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
    // The same sink twice: on this thread with the client, and on a thread of its own.
    let apart = own_thread(|tx| async move {
        tx.send(sink().await).expect("send");
        std::future::pending::<()>().await
    });
    rt.block_on(async {
        let sink = sink().await;
        let proxy = proxy(ProxyConfig::new(Rules::default()).tunnel_buffer);
        println!(
            "throughput, 1 GiB per run, {RUNS} runs each; CPU time per GiB for all threads together:"
        );
        println!("  client and server on one thread:");
        bulk(sink, proxy).await;
        // Two programs talking over loopback usually run on two cores, and then pay for the
        // socket locks both cores take; this is that direct connection.
        println!("  client and server on threads of their own, as separate programs run:");
        bulk(apart, proxy).await;

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
