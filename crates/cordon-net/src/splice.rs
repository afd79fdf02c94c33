//! Moving a tunnel's bytes between two TCP sockets without bringing them into user space:
//! `splice(2)` from one socket into a pipe, and from the pipe into the other.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use rustix::pipe::{PipeFlags, SpliceFlags, pipe_with, splice};
use tokio::io::Interest;
use tokio::net::TcpStream;

/// Most bytes one `splice` moves, and what the pipe is sized to where the kernel allows
/// (`/proc/sys/fs/pipe-max-size`, 1 MiB by default): fewer, larger steps cost fewer system
/// calls and wake-ups per byte than the pipe's default 64 KiB.
const STEP: usize = 1024 * 1024;

/// A pipe's size when it cannot be made larger.
const PIPE_DEFAULT: usize = 64 * 1024;

/// Both directions at once, until both have ended.
pub async fn relay(a: &TcpStream, b: &TcpStream) -> io::Result<()> {
    let (ab, ba) = tokio::join!(one_way(a, b), one_way(b, a));
    ab.and(ba)
}

/// Bytes from `from` to `to` until `from` ends; then `to` is told no more is coming.
pub(crate) async fn one_way(from: &TcpStream, to: &TcpStream) -> io::Result<()> {
    let (pipe_out, pipe_in): (OwnedFd, OwnedFd) =
        pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
    let step = rustix::pipe::fcntl_setpipe_size(&pipe_in, STEP).unwrap_or(PIPE_DEFAULT);
    let flags = SpliceFlags::NONBLOCK | SpliceFlags::MOVE;
    loop {
        from.readable().await?;
        let moved = match from.try_io(Interest::READABLE, || {
            splice(from.as_fd(), None, &pipe_in, None, step, flags).map_err(io::Error::from)
        }) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        };
        if moved == 0 {
            let _ = rustix::net::shutdown(to, rustix::net::Shutdown::Write);
            return Ok(());
        }
        let mut left = moved;
        while left > 0 {
            to.writable().await?;
            match to.try_io(Interest::WRITABLE, || {
                splice(&pipe_out, None, to.as_fd(), None, left, flags).map_err(io::Error::from)
            }) {
                Ok(n) => left -= n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Reads `from` to its end, keeping nothing; then `to` is told no more is coming.
pub(crate) async fn discard(from: &TcpStream, to: &TcpStream) -> io::Result<()> {
    let mut buf = vec![0u8; PIPE_DEFAULT];
    loop {
        from.readable().await?;
        match from.try_read(&mut buf) {
            Ok(0) => {
                let _ = rustix::net::shutdown(to, rustix::net::Shutdown::Write);
                return Ok(());
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// Two connected loopback sockets.
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let near = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (far, _) = listener.accept().await.unwrap();
        (near, far)
    }

    /// Bytes that show where they belong, so that a chunk lost, doubled or reordered between
    /// the pipe's steps does not compare equal.
    fn pattern(len: usize, seed: u64) -> Vec<u8> {
        (0..len as u64)
            .map(|i| ((i / 7) ^ (i * 31) ^ seed) as u8)
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bulk_both_ways_arrives_whole_and_in_order() {
        let (client, proxy_a) = pair().await;
        let (proxy_b, server) = pair().await;
        let relay = tokio::spawn(async move { relay(&proxy_a, &proxy_b).await });
        let up = pattern(24 << 20, 1);
        let down = pattern(9 << 20, 2);

        let (mut client_r, mut client_w) = client.into_split();
        let (mut server_r, mut server_w) = server.into_split();
        let sent_up = up.clone();
        let client = async move {
            client_w.write_all(&sent_up).await.unwrap();
            client_w.shutdown().await.unwrap();
        };
        // The server ends its side only once it has seen the client's end, which reaches it
        // only if the relay passes the half-close on while the other way is still open.
        let sent_down = down.clone();
        let server = async move {
            let mut got_up = Vec::new();
            let (read, ()) = tokio::join!(server_r.read_to_end(&mut got_up), async {
                server_w.write_all(&sent_down).await.unwrap()
            });
            read.unwrap();
            server_w.shutdown().await.unwrap();
            got_up
        };
        let mut got_down = Vec::new();
        let ((), got_up, read) = tokio::time::timeout(std::time::Duration::from_secs(60), async {
            tokio::join!(client, server, client_r.read_to_end(&mut got_down))
        })
        .await
        .expect("both ends see the other's end within a minute");
        read.unwrap();
        relay.await.unwrap().unwrap();
        assert!(
            got_up == up,
            "client to server: {} of {} bytes, or altered",
            got_up.len(),
            up.len()
        );
        assert!(
            got_down == down,
            "server to client: {} of {} bytes, or altered",
            got_down.len(),
            down.len()
        );
    }
}
