//! How a batch of pooled buffers goes out in one send: the runtime's
//! `SendBatch` choice, decided here and nowhere else. One `SENDMSG` with an
//! iovec per buffer (vectored, and always on epoll); a chain of linked
//! `SEND`s with skipped success CQEs (`send_chain.rs`); or one `SEND` with
//! `IORING_RECVSEND_BUNDLE` from a send ring (`send_bundle.rs`). Each posts
//! one CQE per batch. A single buffer, a batch that does not fit a bundle,
//! or no free send ring falls back to vectored.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use ringkit_uring::SendRing;

use super::send_bundle::SendBundle;
use super::send_chain::SendChain;
use super::sendmsg::SendMsg;
use crate::buf::RecvBuf;
use crate::driver::current;
use crate::driver::{op_within, SendPlan};

/// At most this many iovecs per `sendmsg` (the kernel's `UIO_MAXIOV` is
/// 1024; more fails with `EMSGSIZE`).
const MAX_IOVS: usize = 512;

/// The send plan of the current runtime, read once per batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Batcher {
    plan: SendPlan,
}

impl Batcher {
    /// The plan of this thread's runtime (vectored outside one).
    pub(crate) fn current() -> Batcher {
        let plan =
            current::try_with(|rt| rt.driver.borrow().send_plan()).unwrap_or(SendPlan::Vectored);
        Batcher { plan }
    }

    /// The most buffers one send takes; the rest waits for the next.
    pub(crate) fn cap(&self) -> usize {
        match self.plan {
            SendPlan::Vectored => MAX_IOVS,
            SendPlan::Linked(n) => n,
            SendPlan::Bundle => SendRing::MAX_BATCH,
        }
    }

    /// One send of `bufs` (at most [`cap`](Self::cap)) on `fd`, within
    /// `limit` without progress: the bytes sent, and the buffers back.
    pub(crate) async fn send(
        &self,
        fd: RawFd,
        bufs: Vec<RecvBuf>,
        limit: Option<Duration>,
    ) -> (io::Result<usize>, Vec<RecvBuf>) {
        let bufs = match self.plan {
            SendPlan::Linked(_) if bufs.len() >= 2 => {
                return op_within(SendChain::new(fd, bufs), limit).await;
            }
            SendPlan::Bundle if bufs.len() >= 2 => {
                let ring =
                    current::try_with(|rt| rt.driver.borrow_mut().send_ring(rt.metrics)).flatten();
                match ring {
                    Some(r) => match SendBundle::new(fd, bufs, r) {
                        Ok(op) => {
                            current::try_with(|rt| {
                                crate::metrics::Metrics::add(&rt.metrics.send_bundles, 1)
                            });
                            return op_within(op, limit).await;
                        }
                        Err(bufs) => bufs,
                    },
                    None => bufs,
                }
            }
            _ => bufs,
        };
        op_within(SendMsg::new(fd, bufs, None), limit).await
    }
}
