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
//! `Builder::recv_bundle(false)` or `RINGKIT_RECV_BUNDLE=0`): when a peer
//! has sent more than one buffer holds, one CQE covers several buffers.
//! They are handed out one per call, in order, each a ring slot (no copy):
//! the first at once, the rest from a per-stream queue that every later
//! call empties before it looks at the ring. A bundle that finds the ring
//! dry part-way takes what there is; an empty ring is `ENOBUFS` as above.
//!
//! epoll: each call waits for readiness holding no buffer, then receives
//! into the thread's scratch buffer and returns an exact-size copy
//! ([`super::recv_scratch`]), so an idle connection holds no read buffer.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::poll_fn;
use std::io;
use std::task::Poll;

use ringkit_uring::opcode::{self, Target};

use super::recv::Recv;
use super::recv_scratch::RecvScratch;
use crate::buf::RecvBuf;
use crate::driver::multishot::Multishot;
use crate::driver::uring::{buffers_taken, MultiKind, BGID};
use crate::driver::Op;
use crate::metrics::Metrics;
use crate::runtime::with_ctx;

/// Bytes a stand-in plain receive asks for.
const SINGLE_RECV: usize = 4096;

/// The pooled-receive side of one stream (which owns the fd).
#[derive(Debug)]
pub(crate) struct RecvMulti {
    shot: Multishot,
    /// The buffers of a bundle after the one already handed out.
    bundled: RefCell<VecDeque<RecvBuf>>,
}

impl RecvMulti {
    pub(crate) fn new() -> RecvMulti {
        RecvMulti {
            shot: Multishot::new(MultiKind::Recv),
            bundled: RefCell::new(VecDeque::new()),
        }
    }

    /// Whether a multishot receive is armed or holds bundled bytes (either
    /// way data must be read through [`RecvMulti::next`] to keep order).
    pub(crate) fn is_armed(&self) -> bool {
        self.shot.is_armed() || !self.bundled.borrow().is_empty()
    }

    /// A buffer of a bundle already received, if one is queued.
    pub(crate) fn take_bundled(&self) -> Option<RecvBuf> {
        self.bundled.borrow_mut().pop_front()
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
        if let Some(rb) = self.bundled.borrow_mut().pop_front() {
            return Ok(rb);
        }
        if crate::runtime::is_uring() {
            if let Some(got) = self.next_multi(&mut target).await? {
                return Ok(got);
            }
        } else {
            return Op::new(RecvScratch::new(fd)).await.map(RecvBuf::heap);
        }
        let (res, buf) = Op::new(single(Vec::with_capacity(SINGLE_RECV))).await;
        res.map(|_| RecvBuf::heap(buf))
    }

    /// `None`: make progress with one plain receive instead.
    async fn next_multi(&self, target: &mut impl FnMut() -> Target) -> io::Result<Option<RecvBuf>> {
        let (ring, bundle) = with_ctx(|rt| rt.driver.borrow_mut().buf_ring())?;
        poll_fn(|cx| {
            // Decided before the driver is borrowed (promotion to a
            // registered file borrows it too).
            let t = (!self.shot.is_armed()).then(&mut *target);
            let cqe = match self.shot.poll_next(cx, || {
                let t = t.expect("target computed when not armed");
                opcode::RecvMulti::new(t, BGID).bundle(bundle).build()
            }) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(r) => r?,
            };
            let Some((res, flags)) = cqe else {
                return Poll::Ready(Ok(None));
            };
            if res == -libc::ENOBUFS {
                // The ring ran dry: make progress with one plain receive.
                return Poll::Ready(Ok(None));
            }
            if res < 0 {
                return Poll::Ready(Err(io::Error::from_raw_os_error(-res)));
            }
            let cqe = ringkit_uring::Cqe {
                user_data: 0,
                res,
                flags,
            };
            let Some(first) = cqe.buffer_id() else {
                return Poll::Ready(Ok(Some(RecvBuf::heap(Vec::new()))));
            };
            let r = ring.borrow();
            let buf_len = r.buf_len() as usize;
            let count = buffers_taken(res, r.buf_len());
            let got = {
                let mut left = res as usize;
                let mut bids = r.bundle(first, count);
                let mut next = |bid: u16| {
                    let len = left.min(buf_len);
                    left -= len;
                    RecvBuf::ring(ring.clone(), bid, r.buffer(bid, 0).as_ptr(), len)
                };
                let got = next(bids.next().unwrap_or(first));
                if count > 1 {
                    // A bundle: the later buffers wait in order for the next reads.
                    self.bundled.borrow_mut().extend(bids.map(&mut next));
                }
                got
            };
            drop(r);
            with_ctx(|rt| {
                Metrics::add(&rt.metrics.recv_buffers, count as u64);
                Metrics::add(&rt.metrics.recv_bundled, count as u64 - 1);
            });
            Poll::Ready(Ok(Some(got)))
        })
        .await
    }

    /// Cancel the armed multishot, before the stream's fd is closed
    /// (bundled buffers not yet handed out go back to the ring).
    pub(crate) fn cancel(&self) {
        self.shot.cancel();
        self.bundled.borrow_mut().clear();
    }
}
