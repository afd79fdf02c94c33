//! Handing listening sockets from a sandbox to cordon's proxy.
//!
//! A sandbox's network namespace has only loopback; its proxy runs outside, in the host's. The
//! sandbox's first process makes listening sockets on its own loopback (the ports the command
//! is told to use) and sends them over a Unix socket to the proxy, which then accepts on them
//! directly: connections arrive in the proxy without a relay inside the sandbox.

use std::io::IoSlice;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

/// The most descriptors one message carries.
pub const MAX_SOCKETS: usize = 32;

/// Sends `sockets` over the connected Unix socket `channel`.
pub fn send<F: AsFd>(channel: impl AsFd, sockets: &[F]) -> std::io::Result<()> {
    let fds: Vec<_> = sockets.iter().map(|s| s.as_fd()).collect();
    // One byte of data carries the descriptors; it says how many there are.
    send_with(channel, &[fds.len() as u8], &fds)
}

/// Sends `data` with `fds` (at most [`MAX_SOCKETS`]) over the connected Unix socket
/// `channel`, as one message.
pub fn send_with(channel: impl AsFd, data: &[u8], fds: &[BorrowedFd<'_>]) -> std::io::Result<()> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_SOCKETS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if fds.len() > MAX_SOCKETS || !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(std::io::Error::other(
            "too many descriptors for one message",
        ));
    }
    rustix::net::sendmsg(
        channel,
        &[IoSlice::new(data)],
        &mut control,
        SendFlags::empty(),
    )?;
    Ok(())
}

/// Receives the sockets one [`send`] sent over `channel`.
pub fn receive(channel: impl AsFd) -> std::io::Result<Vec<OwnedFd>> {
    let mut count = [0u8; 1];
    let (bytes, fds) = receive_with(channel, &mut count)?;
    if bytes != 1 {
        return Err(std::io::Error::other("the handoff carried no sockets"));
    }
    Ok(fds)
}

/// Receives one message [`send_with`] sent over `channel`: its data, into `buf` (how many
/// bytes; 0 once the other end has closed), and its descriptors.
pub fn receive_with(channel: impl AsFd, buf: &mut [u8]) -> std::io::Result<(usize, Vec<OwnedFd>)> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_SOCKETS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let received = rustix::net::recvmsg(
        channel,
        &mut [std::io::IoSliceMut::new(buf)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = message {
            fds.extend(rights);
        }
    }
    Ok((received.bytes, fds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_sockets_cross_a_unix_socket() -> std::io::Result<()> {
        let (a, b) = std::os::unix::net::UnixStream::pair()?;
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        send(&a, &[&listener])?;
        drop(listener);
        let mut got = receive(&b)?;
        assert_eq!(got.len(), 1);
        let received = std::net::TcpListener::from(got.remove(0));
        assert_eq!(received.local_addr()?, addr, "the same socket arrived");
        let _client = std::net::TcpStream::connect(addr)?;
        received.accept()?;
        Ok(())
    }
}
