//! Moving a tunnel's bytes between two TCP sockets without bringing them into user space:
//! `splice(2)` from one socket into a pipe, and from the pipe into the other.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use rustix::pipe::{PipeFlags, SpliceFlags, pipe_with, splice};
use tokio::io::Interest;
use tokio::net::TcpStream;

/// Most bytes one `splice` moves (and what the pipe is sized to).
const STEP: usize = 64 * 1024;

/// Both directions at once, until both have ended.
pub async fn relay(a: &TcpStream, b: &TcpStream) -> io::Result<()> {
    let (ab, ba) = tokio::join!(one_way(a, b), one_way(b, a));
    ab.and(ba)
}

/// Bytes from `from` to `to` until `from` ends; then `to` is told no more is coming.
async fn one_way(from: &TcpStream, to: &TcpStream) -> io::Result<()> {
    let (pipe_out, pipe_in): (OwnedFd, OwnedFd) =
        pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
    let _ = rustix::pipe::fcntl_setpipe_size(&pipe_in, STEP);
    let flags = SpliceFlags::NONBLOCK | SpliceFlags::MOVE;
    loop {
        from.readable().await?;
        let moved = match from.try_io(Interest::READABLE, || {
            splice(from.as_fd(), None, &pipe_in, None, STEP, flags).map_err(io::Error::from)
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
