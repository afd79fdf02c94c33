//! The server's standard input, watched for its end. rmcp lets handlers that are still going
//! at end of input run on for up to 5 seconds before it cancels them; a handler waiting for
//! the user's answer would wait all of that, though no answer can come any more.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::watch;

/// Reads `R`, and says through a watch when it has ended (or failed).
pub struct Watched<R> {
    inner: R,
    ended: watch::Sender<bool>,
}

impl<R> Watched<R> {
    pub fn new(inner: R) -> (Watched<R>, Ended) {
        let (ended, watch) = watch::channel(false);
        (Watched { inner, ended }, Ended(watch))
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Watched<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let asked = buf.remaining() > 0;
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let at_end = match &polled {
            Poll::Ready(Ok(())) => asked && buf.filled().len() == before,
            Poll::Ready(Err(_)) => true,
            Poll::Pending => false,
        };
        if at_end {
            self.ended.send_replace(true);
        }
        polled
    }
}

/// Whether the input has ended; clones watch the same input.
#[derive(Clone, Debug)]
pub struct Ended(watch::Receiver<bool>);

impl Ended {
    /// Returns once the input has ended (at once if it has already).
    pub async fn wait(&self) {
        let mut watch = self.0.clone();
        // An error means the reader is gone, which is an end too.
        let _ = watch.wait_for(|ended| *ended).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn the_end_is_told_only_at_the_end() {
        let (mut writer, reader) = tokio::io::duplex(64);
        let (mut input, ended) = Watched::new(reader);
        writer.write_all(b"one line\n").await.unwrap();
        let mut buf = [0u8; 64];
        let n = input.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"one line\n");
        let waiting = tokio::spawn({
            let ended = ended.clone();
            async move { ended.wait().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "told before the input ended");
        drop(writer);
        assert_eq!(input.read(&mut buf).await.unwrap(), 0);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("told once the input ended")
            .unwrap();
        // Later askers learn it at once.
        tokio::time::timeout(std::time::Duration::from_secs(5), ended.wait())
            .await
            .expect("told at once after the end");
    }
}
