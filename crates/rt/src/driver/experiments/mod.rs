//! Levers kept to be measured, not used: feature `experiments`, off by
//! default. Each was built to test whether it beats the runtime's one
//! path, none did, and each stays so that the claim can be checked again
//! (`ringkit compare echo` runs them as rows; the `ringkit` binary enables
//! the feature).
//!
//! - **Send chains** (`send_chain.rs`, [`SendBatch::Linked`]): a batch of
//!   pooled buffers as linked `SEND`s, every success CQE but the last
//!   skipped. 1.08x the default's CPU per request at 1 000 connections
//!   (`docs/results/echo-2026-11-25-send-levers-p16-b/`).
//! - **Send bundles** (`send_bundle.rs`, `send_rings.rs`,
//!   [`SendBatch::Bundle`]): one `SEND` with `IORING_RECVSEND_BUNDLE` from
//!   a send ring borrowed from a per-thread pool of up to 1 024 registered
//!   rings. Level with the default within noise, at a page of pinned
//!   memory per send in flight (`echo-2026-11-25-send-levers-512/`).
//! - **Batched waits** (`batch_wait.rs`, [`BatchWait`]): a blocking park
//!   waits for up to N completions (`IORING_FEAT_MIN_TIMEOUT`), always or
//!   only while the loop's thread is nearly always on CPU. No client
//!   gained; rust_echo_bench lost 0.77-0.81x of its requests per second
//!   (`echo-2026-11-27-batchwait/`, `latency-2026-11-27/`).
//!
//! Without the feature a batch is one vectored `SENDMSG` and a park wakes
//! for the first completion; nothing here is compiled. With it, the
//! defaults are the same ([`SendBatch::Vectored`], [`BatchWait::Off`]) and
//! `Builder::send_batch` and `Builder::batch_wait_policy` switch.
//!
//! The driver meets these levers at three points only: the uring driver
//! keeps their state ([`UringLevers`]), `op/send_batch.rs` offers a batch
//! to [`send`] first, and the uring park asks [`UringLevers::batch`] how
//! to wait.

mod batch_wait;
mod config;
mod send_bundle;
mod send_chain;
mod send_rings;

pub use config::{BatchWait, SendBatch};

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use ringkit_uring::{sys, IoUring, SendRing};

use crate::buf::RecvBuf;
use crate::driver::{current, op_within};
use crate::metrics::Metrics;
use batch_wait::Governor;
use send_bundle::SendBundle;
use send_chain::SendChain;
pub(crate) use send_rings::PooledSendRing;
use send_rings::SendRings;

/// The most members a send chain holds (the echo server batches at most 64
/// buffers).
const CHAIN_MAX: usize = 64;

/// The builder's choices.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Levers {
    pub(crate) send_batch: SendBatch,
    pub(crate) batch_wait: BatchWait,
}

/// How a runtime sends a batch: [`SendBatch`] after the kernel had its say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendPlan {
    Vectored,
    /// Chains of at most this many sends.
    Linked(usize),
    Bundle,
}

/// A uring driver's state for the levers.
#[derive(Debug)]
pub(crate) struct UringLevers {
    plan: SendPlan,
    rings: SendRings,
    governor: Governor,
}

impl UringLevers {
    /// The levers as this ring can run them; one the kernel lacks is
    /// dropped, with a warning. `chains_hold`: the kernel posts one CQE per
    /// chain of skipped links.
    pub(crate) fn new(levers: Levers, ring: &IoUring, chains_hold: bool) -> UringLevers {
        let plan = match levers.send_batch {
            SendBatch::Vectored => SendPlan::Vectored,
            SendBatch::Linked if chains_hold => {
                match CHAIN_MAX.min(ring.params().sq_entries as usize - 1) {
                    // A 2-entry SQ leaves no room for a chain worth the name.
                    n if n < 2 => SendPlan::Vectored,
                    n => SendPlan::Linked(n),
                }
            }
            SendBatch::Linked => {
                tracing::warn!(
                    "ringkit: send_batch linked ignored: this kernel does not post exactly one \
                     CQE per chain of CQE_SKIP_SUCCESS links; batches are sent vectored"
                );
                SendPlan::Vectored
            }
            SendBatch::Bundle if ring.features() & sys::IORING_FEAT_RECVSEND_BUNDLE != 0 => {
                SendPlan::Bundle
            }
            SendBatch::Bundle => {
                tracing::warn!(
                    "ringkit: send_batch bundle ignored: the kernel lacks \
                     IORING_FEAT_RECVSEND_BUNDLE (Linux 6.10); batches are sent vectored"
                );
                SendPlan::Vectored
            }
        };
        let batch_wait = if ring.features() & sys::IORING_FEAT_MIN_TIMEOUT != 0 {
            levers.batch_wait
        } else {
            if matches!(levers.batch_wait, BatchWait::Fixed { .. }) {
                tracing::warn!(
                    "ringkit: batch_wait ignored: kernel lacks IORING_FEAT_MIN_TIMEOUT (Linux 6.12)"
                );
            }
            BatchWait::Off
        };
        UringLevers {
            plan,
            rings: SendRings::default(),
            governor: Governor::new(batch_wait),
        }
    }

    /// What the next blocking park with `in_flight` operations and
    /// `timeout` waits for: `Some((want, min_wait))` for a batch, `None`
    /// for one completion. Counts a batched wait.
    pub(crate) fn batch(
        &self,
        in_flight: u32,
        timeout: Option<Duration>,
        m: &Metrics,
    ) -> Option<(u32, Duration)> {
        // A batch needs at least two operations that could complete; with
        // fewer, waiting for more only delays the one there is.
        let batch = self
            .governor
            .wait()
            .filter(|_| in_flight >= 2)
            .map(|(want, min)| (want.min(in_flight), min));
        // A deadline sooner than the minimum wait: the kernel would let the
        // minimum run out first and return late.
        let batch = match timeout {
            Some(d) => batch.filter(|&(_, min)| d > min),
            None => batch,
        };
        if batch.is_some() && timeout != Some(Duration::ZERO) {
            Metrics::add(&m.batch_waits, 1);
        }
        batch
    }

    /// This ring's send plan.
    pub(crate) fn plan(&self) -> SendPlan {
        self.plan
    }

    /// An empty send ring of `ring`'s for one send bundle, or `None` (send
    /// it vectored).
    pub(crate) fn send_ring(&mut self, ring: &IoUring, m: &Metrics) -> Option<PooledSendRing> {
        self.rings.take(ring, m)
    }

    /// After every park (the adaptive policy's clock).
    pub(crate) fn parked(&mut self) {
        self.governor.parked();
    }
}

impl SendPlan {
    /// The most buffers one send takes under this plan, or `None` (the
    /// default path's cap).
    pub(crate) fn cap(self) -> Option<usize> {
        match self {
            SendPlan::Vectored => None,
            SendPlan::Linked(n) => Some(n),
            SendPlan::Bundle => Some(SendRing::MAX_BATCH),
        }
    }
}

/// This thread's send plan (vectored outside a runtime and on epoll).
pub(crate) fn plan() -> SendPlan {
    current::try_driver(|d, _| d.send_plan()).unwrap_or(SendPlan::Vectored)
}

/// Send `bufs` as `plan` says, if it says other than vectored and the
/// batch suits it; otherwise the buffers back, for the default path.
pub(crate) async fn send(
    plan: SendPlan,
    fd: RawFd,
    bufs: Vec<RecvBuf>,
    limit: Option<Duration>,
) -> Result<(io::Result<usize>, Vec<RecvBuf>), Vec<RecvBuf>> {
    if bufs.len() < 2 {
        return Err(bufs);
    }
    match plan {
        SendPlan::Vectored => Err(bufs),
        SendPlan::Linked(_) => Ok(op_within(SendChain::new(fd, bufs), limit).await),
        SendPlan::Bundle => {
            let ring = current::try_driver(|d, m| d.send_ring(m)).flatten();
            let Some(ring) = ring else { return Err(bufs) };
            let op = SendBundle::new(fd, bufs, ring)?;
            current::try_metrics(|m| Metrics::add(&m.send_bundles, 1));
            Ok(op_within(op, limit).await)
        }
    }
}

/// epoll: one `sendmsg` of `bufs`, building their iovecs in `iovecs` on the
/// first call (for the batch ops whose io_uring form is not a `SENDMSG`).
fn sendmsg_bufs<B: crate::buf::IoBuf>(
    fd: RawFd,
    bufs: &[B],
    iovecs: &mut Vec<libc::iovec>,
) -> io::Result<u32> {
    if iovecs.is_empty() {
        *iovecs = bufs
            .iter()
            .map(|b| libc::iovec {
                iov_base: b.stable_ptr() as *mut libc::c_void,
                iov_len: b.bytes_init(),
            })
            .collect();
    }
    // SAFETY: plain data; all-zero is a valid msghdr.
    let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
    hdr.msg_iov = iovecs.as_mut_ptr();
    hdr.msg_iovlen = iovecs.len();
    // SAFETY: the msghdr points at `iovecs`, which point into `bufs`; all
    // live across the call.
    crate::driver::op::cvt(unsafe { crate::driver::op::raw::sendmsg(fd, &hdr, libc::MSG_NOSIGNAL) })
}
