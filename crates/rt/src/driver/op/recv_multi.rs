//! Pooled receives on a stream.
//!
//! io_uring: one multishot `IORING_OP_RECV` with buffer select stays armed
//! across calls; each arrival lands in a slot of the runtime's
//! provided-buffer ring, so an idle connection holds no buffer. When the
//! ring runs dry (`ENOBUFS`, which also ends the multishot) or the multishot
//! ends without data, one plain receive stands in and the next call arms a
//! new multishot.
//!
//! Bundles (`IORING_RECVSEND_BUNDLE`, kernel 6.10, on unless
//! `Builder::recv_bundle(false)`): when a peer
//! has sent more than one buffer holds, one CQE covers several buffers.
//! The driver splits such a CQE into one entry per buffer as it reaps it
//! (see `uring/lifecycle.rs`), so reads hand them out one per call, in
//! order, each a ring slot (no copy), and [`RecvMulti::try_next`] takes the
//! ones already here without waiting. A bundle that finds the ring dry
//! part-way takes what there is; an empty ring is `ENOBUFS` as above.
//!
//! Each multishot is armed with a byte limit (`optlen`, Linux 6.17; a
//! kernel without it answers `EINVAL` once, and the driver arms without
//! from then on): the kernel ends it after a stream's cap of bytes, and the
//! next read arms a new one only once the queue before it was read. The
//! driver's pause below alone was not enough: within one `io_uring_enter`
//! the kernel can fill thousands of buffers for one socket (32 retries of
//! bundles of up to 256), so a stream whose task did not read held 961 of
//! the 1 024 default buffers before the driver reaped and paused it.
//!
//! A stream that leaves
//! [`RECV_QUEUE_BYTES`](crate::driver::uring::RECV_QUEUE_BYTES) of buffers unread has its
//! multishot paused by the driver (cancelled: the socket's own buffer then
//! fills and TCP holds the peer back, as on epoll), so one connection that
//! reads slower than its peer sends, or not at all, cannot take the ring
//! the others share; the pause ends with `ECANCELED` once the queue before
//! it is read, and the next read arms a new multishot.
//!
//! epoll: each call waits for readiness holding no buffer, then receives
//! into the thread's scratch buffer and returns an exact-size copy
//! ([`super::recv_scratch`]), so an idle connection holds no read buffer.

use std::cell::RefCell;
use std::future::poll_fn;
use std::io;
use std::rc::Rc;
use std::task::Poll;

use ringkit_uring::opcode::{self, Target};
use ringkit_uring::BufRing;

use super::recv::Recv;
use super::recv_scratch::RecvScratch;
use crate::buf::RecvBuf;
use crate::driver::current;
use crate::driver::multishot::{Multishot, Shot};
use crate::driver::uring::{MultiKind, BGID};
use crate::driver::Op;

/// What the multishot side gave a read.
enum Next {
    /// Received bytes (empty: end of stream).
    Got(RecvBuf),
    /// The multishot ended or the ring ran dry: one plain receive stands in
    /// (the next read arms a new multishot).
    StandIn,
    /// No buffer ring on this backend: a receive into the scratch buffer.
    Scratch,
}

/// Bytes a stand-in plain receive asks for.
const SINGLE_RECV: usize = 4096;

/// The pooled-receive side of one stream (which owns the fd).
#[derive(Debug)]
pub(crate) struct RecvMulti {
    shot: Multishot,
    /// The armed multishot was given a byte limit.
    limited: std::cell::Cell<bool>,
}

impl RecvMulti {
    pub(crate) fn new() -> RecvMulti {
        RecvMulti {
            shot: Multishot::new(MultiKind::Recv),
            limited: std::cell::Cell::new(false),
        }
    }

    /// Whether a multishot receive is armed (its data must be read through
    /// [`RecvMulti::next`] to keep order).
    pub(crate) fn is_armed(&self) -> bool {
        self.shot.is_armed()
    }

    /// Received bytes already queued for this stream (the rest of a bundle,
    /// or any CQE reaped but not yet read), without waiting.
    pub(crate) fn try_next(&self) -> Option<RecvBuf> {
        let (res, flags) = self.shot.try_next_buffer()?;
        // A CQE with a buffer means the ring exists (it was made to arm the
        // receive); the buffer goes back to it when the `RecvBuf` drops.
        let ring = current::driver(|d, _| d.buf_ring())
            .ok()
            .flatten()
            .expect("a received buffer implies the runtime's buffer ring")
            .0;
        Some(ring_buf(&ring, res, flags))
    }

    /// The next chunk of `fd`; an empty one is end of stream. `target` says what a
    /// new multishot receive addresses (called only when arming) and
    /// `single` builds the plain receive that stands in (given its buffer).
    /// Neither may borrow the driver while the other runs: both are called
    /// outside it.
    pub(crate) async fn next(
        &self,
        fd: std::os::fd::RawFd,
        mut target: impl FnMut() -> Target,
        single: impl FnOnce(Vec<u8>) -> Recv<Vec<u8>>,
    ) -> io::Result<RecvBuf> {
        match self.next_multi(&mut target).await? {
            Next::Got(b) => Ok(b),
            Next::StandIn => {
                let (res, buf) = Op::new(single(Vec::with_capacity(SINGLE_RECV))).await;
                res.map(|_| RecvBuf::heap(buf))
            }
            Next::Scratch => {
                let got = Op::new(RecvScratch::new(fd)).await?;
                // Up to 64 KiB at once: a unit of the task's budget per
                // 4 KiB, as a ring buffer costs (`crate::coop`).
                crate::coop::spend_bytes(got.len());
                Ok(RecvBuf::heap(got))
            }
        }
    }

    /// The next chunk from the multishot receive, or what to do instead.
    async fn next_multi(&self, target: &mut impl FnMut() -> Target) -> io::Result<Next> {
        // The driver says whether there is a buffer ring to receive into.
        let Some((ring, bundle)) = current::driver(|d, _| d.buf_ring())? else {
            return Ok(Next::Scratch);
        };
        poll_fn(|cx| loop {
            // Decided before the driver is borrowed (promotion to a
            // registered file borrows it too).
            let t = (!self.shot.is_armed()).then(&mut *target);
            let limit = if t.is_some() {
                current::driver(|d, _| d.recv_limit())
            } else {
                0
            };
            if t.is_some() {
                self.limited.set(limit > 0);
            }
            let shot = match self.shot.poll_next(cx, || {
                let t = t.expect("target computed when not armed");
                opcode::RecvMulti::new(t, BGID)
                    .bundle(bundle)
                    .limit(limit)
                    .build()
            }) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(r) => r?,
            };
            return Poll::Ready(match shot {
                Shot::Single => Ok(Next::Scratch),
                Shot::Ended => Ok(Next::StandIn),
                // The ring ran dry: make progress with one plain receive.
                Shot::Cqe(res, _) if res == -libc::ENOBUFS => Ok(Next::StandIn),
                // Paused by the driver (this stream left its cap of
                // buffers unread; only the driver cancels a live owner's
                // receive), and now read up to the pause: arm it again.
                Shot::Cqe(res, _) if res == -libc::ECANCELED => continue,
                // A kernel without the byte limit refuses it: arm without.
                Shot::Cqe(res, _) if res == -libc::EINVAL && self.limited.get() => {
                    current::driver(|d, _| d.no_recv_limit());
                    self.limited.set(false);
                    continue;
                }
                Shot::Cqe(res, _) if res < 0 => Err(io::Error::from_raw_os_error(-res)),
                Shot::Cqe(res, flags) => Ok(Next::Got(ring_buf(&ring, res, flags))),
            });
        })
        .await
    }

    /// Cancel the armed multishot, before the stream's fd is closed.
    pub(crate) fn cancel(&self) {
        self.shot.cancel();
    }
}

/// The received bytes of one (split) receive CQE: its ring buffer, or an
/// empty heap buffer (end of stream) when it carries none.
fn ring_buf(ring: &Rc<RefCell<BufRing>>, res: i32, flags: u32) -> RecvBuf {
    let cqe = ringkit_uring::Cqe {
        user_data: 0,
        res,
        flags,
    };
    match cqe.buffer_id() {
        Some(bid) => {
            let ptr = ring.borrow().buffer(bid, 0).as_ptr();
            RecvBuf::ring(ring.clone(), bid, ptr, res as usize)
        }
        None => RecvBuf::heap(Vec::new()),
    }
}
