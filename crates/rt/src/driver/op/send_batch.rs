//! How a batch of pooled buffers goes out in one send: one `SENDMSG` with
//! an iovec per buffer, on both backends (one SQE and one CQE on
//! io_uring). With feature `experiments`, the batch is offered to the
//! runtime's `SendBatch` lever first (`driver/experiments/`).

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use super::sendmsg::SendMsg;
use crate::buf::RecvBuf;
use crate::driver::op_within;

/// At most this many iovecs per `sendmsg` (the kernel's `UIO_MAXIOV` is
/// 1024; more fails with `EMSGSIZE`).
const MAX_IOVS: usize = 512;

/// How this thread's runtime sends a batch, read once per batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Batcher {
    cap: usize,
    #[cfg(feature = "experiments")]
    plan: crate::driver::experiments::SendPlan,
}

impl Batcher {
    /// The current runtime's (vectored outside one).
    pub(crate) fn current() -> Batcher {
        #[cfg(feature = "experiments")]
        {
            let plan = crate::driver::experiments::plan();
            let cap = plan.cap().unwrap_or(MAX_IOVS);
            Batcher { cap, plan }
        }
        #[cfg(not(feature = "experiments"))]
        Batcher { cap: MAX_IOVS }
    }

    /// The most buffers one send takes; the rest waits for the next.
    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    /// One send of `bufs` (at most [`cap`](Self::cap)) on `fd`, within
    /// `limit` without progress: the bytes sent, and the buffers back.
    pub(crate) async fn send(
        &self,
        fd: RawFd,
        bufs: Vec<RecvBuf>,
        limit: Option<Duration>,
    ) -> (io::Result<usize>, Vec<RecvBuf>) {
        #[cfg(feature = "experiments")]
        let bufs = match crate::driver::experiments::send(self.plan, fd, bufs, limit).await {
            Ok(sent) => return sent,
            Err(bufs) => bufs,
        };
        op_within(SendMsg::new(fd, bufs, None), limit).await
    }
}
