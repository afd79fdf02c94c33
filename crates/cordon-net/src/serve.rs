//! Accept loops: each connection in a task of its own.

use std::sync::Arc;

use tokio::net::{TcpListener, UnixListener};

use crate::Proxy;

/// Raises this process's limit on open descriptors to the most it may have: each tunnel holds
/// two sockets and a pipe each way, and the usual soft limit (1024) would cap a proxy at a
/// few hundred tunnels. Returns the limit now in force.
pub fn raise_descriptor_limit() -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if let Some(max) = limit.maximum {
        limit.current = Some(max);
        let _ = setrlimit(Resource::Nofile, limit);
    }
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// Serves clients of `listener` until it fails.
pub async fn tcp(proxy: Arc<Proxy>, listener: TcpListener) -> std::io::Result<()> {
    loop {
        let (conn, _) = listener.accept().await?;
        let _ = conn.set_nodelay(true);
        let proxy = proxy.clone();
        tokio::spawn(async move { proxy.handle(conn).await });
    }
}

/// Serves clients of a Unix-socket `listener` until it fails.
pub async fn unix(proxy: Arc<Proxy>, listener: UnixListener) -> std::io::Result<()> {
    loop {
        let (conn, _) = listener.accept().await?;
        let proxy = proxy.clone();
        tokio::spawn(async move { proxy.handle(conn).await });
    }
}

#[cfg(target_os = "linux")]
/// Takes listening sockets handed over on `handoff` (see [`cordon_sandbox::handoff`]) and
/// serves each.
pub async fn handed_over(proxy: Arc<Proxy>, handoff: UnixListener) -> std::io::Result<()> {
    loop {
        let (conn, _) = handoff.accept().await?;
        let conn = conn.into_std()?;
        conn.set_nonblocking(false)?;
        // The sender writes at once and the socket is local: this does not wait long.
        let sockets = match cordon_sandbox::handoff::receive(&conn) {
            Ok(s) => s,
            Err(_) => continue,
        };
        for socket in sockets {
            let listener = std::net::TcpListener::from(socket);
            listener.set_nonblocking(true)?;
            let listener = TcpListener::from_std(listener)?;
            tokio::spawn(tcp(proxy.clone(), listener));
        }
    }
}
