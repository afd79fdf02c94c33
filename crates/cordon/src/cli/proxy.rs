//! `cordon proxy`: cordon's egress proxy on its own; and `cordon connect`, a TCP connection
//! through a run's proxy for ssh.

use std::io::Read;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;
use cordon_app::config::Sources;
use cordon_app::proxy::ProxyRequest;
use cordon_app::settings;

use super::flags::NetFlags;

#[derive(Debug, Args)]
pub struct ProxyArgs {
    #[command(flatten)]
    net: NetFlags,
    /// Also apply this settings file, as `cordon run --settings` does.
    #[arg(long, value_name = "FILE")]
    settings: Option<PathBuf>,
    /// Also apply this profile, as `cordon run --profile` does.
    #[arg(long, value_name = "NAME", value_parser = settings::parse_profile)]
    profile: Option<String>,
    /// Let this project's `.cordon/cordon.toml` widen what is allowed.
    #[arg(long)]
    trust_project: bool,
    /// Where to listen: `HOST:PORT` or `unix:PATH` (repeatable).
    #[arg(long, value_name = "ADDR")]
    listen: Vec<String>,
}

/// `cordon proxy`: serves until killed.
#[cfg(target_os = "linux")]
pub fn proxy(args: ProxyArgs) -> anyhow::Result<u8> {
    let sources = Sources {
        profile: args.profile,
        flags: args.net.layer(),
        trust_project: args.trust_project,
        resolve: args.net.resolve.clone(),
        ..Sources::default()
    }
    .with_settings_file(args.settings)?;
    cordon_app::proxy::serve(ProxyRequest {
        sources,
        listen: args.listen,
        ask: args.net.ask,
        ..ProxyRequest::default()
    })
}

#[derive(Debug, Args)]
pub struct ConnectArgs {
    /// The host to reach.
    host: String,
    /// Its port.
    port: u16,
    /// The SOCKS5 proxy to go through [default: $ALL_PROXY, which `cordon run` sets].
    #[arg(long, value_name = "HOST:PORT")]
    proxy: Option<String>,
}

/// `cordon connect HOST PORT`: a TCP connection through the run's SOCKS5 proxy, on standard
/// input and output, for ssh's `ProxyCommand` (git over SSH) where no `nc` is installed.
pub fn connect(args: ConnectArgs) -> anyhow::Result<u8> {
    let proxy = match args.proxy {
        Some(p) => p,
        None => {
            let all = std::env::var("ALL_PROXY")
                .or_else(|_| std::env::var("all_proxy"))
                .context("no --proxy given and ALL_PROXY is not set (cordon run sets it when a host is allowed)")?;
            all.strip_prefix("socks5h://")
                .or_else(|| all.strip_prefix("socks5://"))
                .with_context(|| format!("ALL_PROXY={all} is not a socks5:// address"))?
                .trim_end_matches('/')
                .to_string()
        }
    };
    let name = args.host.as_bytes();
    if name.is_empty() || name.len() > 255 {
        bail!("`{}` is not a host name", args.host);
    }
    let mut stream = std::net::TcpStream::connect(&proxy)
        .with_context(|| format!("cannot reach the SOCKS5 proxy at {proxy}"))?;
    use std::io::Write;
    stream.write_all(&[5, 1, 0])?;
    let mut reply = [0u8; 2];
    stream.read_exact(&mut reply)?;
    if reply != [5, 0] {
        bail!("the proxy at {proxy} does not speak SOCKS5 without authentication");
    }
    let mut request = vec![5, 1, 0, 3, name.len() as u8];
    request.extend_from_slice(name);
    request.extend_from_slice(&args.port.to_be_bytes());
    stream.write_all(&request)?;
    let mut answer = [0u8; 10];
    stream.read_exact(&mut answer)?;
    if answer[1] != 0 {
        let why = match answer[1] {
            2 => "not allowed by cordon's rules",
            4 => "host unreachable",
            5 => "connection refused",
            _ => "the proxy refused",
        };
        bail!("{}:{}: {why}", args.host, args.port);
    }
    // Both directions at once: standard input to the connection on a thread, the connection
    // to standard output here.
    let mut upstream = stream.try_clone()?;
    let sender = std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut upstream);
        let _ = upstream.shutdown(std::net::Shutdown::Write);
    });
    let _ = std::io::copy(&mut stream, &mut std::io::stdout().lock());
    drop(sender);
    Ok(0)
}
