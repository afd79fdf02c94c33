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

/// Where a sandbox's own TCP sockets come from, for `--publish`: the Unix listener the sandbox
/// connects to once, at its start (see `SandboxSpec::inbound`).
#[cfg(target_os = "linux")]
#[derive(Debug)]
pub struct Inbound {
    listener: UnixListener,
    maker: tokio::sync::OnceCell<Arc<std::sync::Mutex<std::os::unix::net::UnixStream>>>,
}

#[cfg(target_os = "linux")]
impl Inbound {
    pub fn new(listener: UnixListener) -> Self {
        Inbound {
            listener,
            maker: tokio::sync::OnceCell::new(),
        }
    }

    /// A fresh TCP socket of the sandbox's network namespace, not yet connected.
    async fn socket(&self) -> std::io::Result<std::net::TcpStream> {
        let maker = self
            .maker
            .get_or_try_init(|| async {
                let (conn, _) = tokio::time::timeout(
                    std::time::Duration::from_secs(10),
                    self.listener.accept(),
                )
                .await
                .map_err(|_| std::io::Error::other("the sandbox never connected"))??;
                let conn = conn.into_std()?;
                conn.set_nonblocking(false)?;
                // The other end is inside the sandbox, where the command could stop it: never
                // wait on it for long.
                conn.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
                std::io::Result::Ok(Arc::new(std::sync::Mutex::new(conn)))
            })
            .await?
            .clone();
        tokio::task::spawn_blocking(move || {
            use std::io::Write;
            let mut conn = maker
                .lock()
                .map_err(|_| std::io::Error::other("poisoned"))?;
            conn.write_all(&[1])?;
            let mut got = cordon_sandbox::handoff::receive(&*conn)?;
            match got.pop() {
                Some(fd) if got.is_empty() => Ok(std::net::TcpStream::from(fd)),
                _ => Err(std::io::Error::other("the sandbox sent no socket")),
            }
        })
        .await
        .map_err(std::io::Error::other)?
    }
}

/// `--publish`: each host connection accepted on `listener` is joined to `port` on the
/// sandbox's own loopback, bytes passed both ways until both ends are done.
#[cfg(target_os = "linux")]
pub async fn published(
    listener: TcpListener,
    inbound: Arc<Inbound>,
    port: u16,
) -> std::io::Result<()> {
    loop {
        let (conn, _) = listener.accept().await?;
        let _ = conn.set_nodelay(true);
        let inbound = inbound.clone();
        tokio::spawn(async move {
            let Ok(socket) = inbound.socket().await else {
                return;
            };
            if socket.set_nonblocking(true).is_err() {
                return;
            }
            let socket = tokio::net::TcpSocket::from_std_stream(socket);
            let to = std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port));
            let connect =
                tokio::time::timeout(std::time::Duration::from_secs(10), socket.connect(to));
            if let Ok(Ok(inside)) = connect.await {
                let _ = inside.set_nodelay(true);
                let _ = crate::splice::relay(&conn, &inside).await;
            }
        });
    }
}
