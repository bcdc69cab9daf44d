//! tokio's `AsyncRead`/`AsyncWrite` on [`PollIo`] (feature `tokio`), for
//! code written against tokio's I/O traits: tokio-rustls, tokio-util codecs,
//! `tokio::io::copy`. Only the traits are used, not tokio's runtime: the
//! futures run on ringkit's executor and the I/O is ringkit's (see
//! [`PollIo`] for how reads and writes work on each backend).

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::PollIo;

impl AsyncRead for PollIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // SAFETY: `PollIo::poll_read` only writes initialised bytes into the
        // slice and never de-initialises any; tokio requires exactly that of
        // a `unfilled_mut` caller.
        let dst = unsafe { buf.unfilled_mut() };
        let n = ready!(self.get_mut().poll_read(cx, dst))?;
        // SAFETY: the first `n` bytes of the unfilled part were just written.
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for PollIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_shutdown(cx)
    }
}
