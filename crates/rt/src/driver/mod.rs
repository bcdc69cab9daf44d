//! The backend contract, written once, and the choice of backend.
//!
//! Every operation is one file in `op` implementing `OpCode` (its output),
//! `UringOp` (the SQE it becomes) and `EpollOp` (the readiness it waits
//! for and the non-blocking syscall it makes). `Op` is the future that
//! drives such an `Operation` on whichever backend this runtime chose;
//! `Driver` dispatches.
//! Multishot operations (`op/accept_multi.rs`, `op/recv_multi.rs`) keep
//! their key in a `multishot::Multishot` (see its slot rule) and carry
//! their epoll fallback inside the op file. Nothing outside `driver/`
//! reaches into a backend; strategy (how a batch is sent, how a read times
//! out, how a write is made durable) lives in the op files.
//!
//! Files: `config.rs` (the public settings and report), `contract.rs`
//! (the traits and `Source`), `future.rs` (`Op`, `op_within`), this file (`Driver`, the
//! dispatch), `storage.rs` (registered buffers, linked syncs), `uring/`
//! and `epoll.rs` (the backends), `op/` (one file per operation), and
//! `experiments/` (levers kept to be measured, feature `experiments`).
//!
//! # Choosing the backend
//! Once per runtime. `Backend::Auto` tries io_uring with the best flags
//! (`SINGLE_ISSUER|DEFER_TASKRUN|TASKRUN_FLAG`, then
//! `COOP_TASKRUN|TASKRUN_FLAG`, then none; each with `CLAMP`, a CQ of 4x
//! the SQ, strict setup and a registered ring fd), checks the opcodes the runtime needs, and falls back to epoll when
//! io_uring is refused (seccomp `EPERM`, `kernel.io_uring_disabled`, `ENOSYS`,
//! memlock `ENOMEM`, `EINVAL`) or lacks an opcode. The reason is kept in
//! [`BackendReport`] and logged once.
//!
//! # Cancellation guarantees (io_uring)
//! Dropping an `Op` whose operation is in flight never frees memory the
//! kernel may still touch and never loses data:
//! - the op's buffers (and any boxed address/iovec/statx storage) move into
//!   the driver and are freed only when the kernel's final CQE arrives;
//! - an `IORING_OP_ASYNC_CANCEL` is queued for it;
//! - a file descriptor created by a late completion (accept, open) is closed;
//! - a stream read that completes with data after its future was dropped
//!   stashes the bytes on the stream: the next read returns them first, and a
//!   new read waits until the dropped one has resolved, so order is kept;
//! - a write dropped in flight may or may not have written (as with any
//!   cancelled `write(2)`); use the result of a write you did not drop.
//!
//! On epoll the syscall happens inside `poll`, so a dropped future has done
//! nothing (or everything, if it returned `Ready`).

mod config;
mod contract;
pub(crate) mod current;
pub(crate) mod epoll;
#[cfg(feature = "experiments")]
pub(crate) mod experiments;
mod future;
pub(crate) mod multishot;
pub(crate) mod op;
mod storage;
pub(crate) mod uring;
pub(crate) mod waiters;

pub(crate) use config::DriverConfig;
pub use config::{Backend, BackendReport};
pub(crate) use contract::{Dir, EpollOp, OpCode, Operation, Orphan, Source, UringOp};
#[cfg(feature = "experiments")]
pub use experiments::{BatchWait, SendBatch};
pub(crate) use future::{op_within, Op};

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::metrics::Metrics;

/// The backend of one runtime. (One per thread, so the size difference
/// between the variants does not matter.)
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Driver {
    Uring(uring::UringDriver),
    Epoll(epoll::EpollDriver),
}

impl Driver {
    pub(crate) fn new(
        backend: Backend,
        cfg: &DriverConfig,
        wake_fd: RawFd,
    ) -> io::Result<(Driver, BackendReport)> {
        match backend {
            Backend::Epoll => Ok((
                Driver::Epoll(epoll::EpollDriver::new(wake_fd)?),
                BackendReport::epoll(backend, None, Vec::new()),
            )),
            Backend::Uring | Backend::Auto => match uring::UringDriver::new(cfg, wake_fd) {
                Ok((d, attempts)) => {
                    let report = BackendReport {
                        requested: backend,
                        chosen: Backend::Uring,
                        uring_flags: d.setup_flags(),
                        entries: d.entries(),
                        registered_ring: d.ring_registered(),
                        fallback_reason: None,
                        attempts,
                    };
                    Ok((Driver::Uring(d), report))
                }
                Err(e) if backend == Backend::Auto => {
                    let (reason, attempts) = e;
                    Ok((
                        Driver::Epoll(epoll::EpollDriver::new(wake_fd)?),
                        BackendReport::epoll(backend, Some(reason), attempts),
                    ))
                }
                Err((reason, _)) => Err(io::Error::other(format!(
                    "io_uring backend unavailable: {reason}"
                ))),
            },
        }
    }

    /// Whether a read whose future was dropped may still complete with
    /// data (it was in the kernel's hands): then a stream keeps a stash
    /// for those bytes. True on io_uring; on epoll a read happens inside
    /// `poll` or not at all.
    pub(crate) fn reads_outlive_their_futures(&self) -> bool {
        matches!(self, Driver::Uring(_))
    }

    /// Whether streams may be promoted into a registered file table
    /// (io_uring; the table itself may be off or full).
    pub(crate) fn registers_files(&self) -> bool {
        matches!(self, Driver::Uring(_))
    }

    /// Whether received bytes land in a buffer ring the reader is handed
    /// (no copy): io_uring's provided buffers. On epoll a pooled read
    /// copies out of the thread's scratch buffer.
    pub(crate) fn pooled_reads_are_copy_free(&self) -> bool {
        matches!(self, Driver::Uring(_))
    }

    /// io_uring: the runtime's provided-buffer ring (created on first use),
    /// and whether multishot receives may take bundles of its buffers.
    /// `None` on a backend without one (epoll): pooled receives then read
    /// into the thread's scratch buffer.
    pub(crate) fn buf_ring(
        &mut self,
    ) -> io::Result<
        Option<(
            std::rc::Rc<std::cell::RefCell<ringkit_uring::BufRing>>,
            bool,
        )>,
    > {
        match self {
            Driver::Uring(d) => Ok(Some((d.buf_ring()?, d.recv_bundle()))),
            Driver::Epoll(_) => Ok(None),
        }
    }

    /// io_uring: the byte limit of a new multishot receive (0: none).
    pub(crate) fn recv_limit(&self) -> u32 {
        match self {
            Driver::Uring(d) => d.recv_limit(),
            Driver::Epoll(_) => 0,
        }
    }

    /// io_uring: the kernel refused a multishot receive's byte limit.
    pub(crate) fn no_recv_limit(&mut self) {
        if let Driver::Uring(d) = self {
            d.no_recv_limit();
        }
    }

    /// How batches of pooled buffers are sent (always vectored on epoll).
    #[cfg(feature = "experiments")]
    pub(crate) fn send_plan(&self) -> experiments::SendPlan {
        match self {
            Driver::Uring(d) => d.levers.plan(),
            Driver::Epoll(_) => experiments::SendPlan::Vectored,
        }
    }

    /// io_uring, `SendPlan::Bundle`: an empty send ring for one batch, or
    /// `None` (send it vectored).
    #[cfg(feature = "experiments")]
    pub(crate) fn send_ring(&mut self, m: &Metrics) -> Option<experiments::PooledSendRing> {
        match self {
            Driver::Uring(d) => d.send_ring(m),
            Driver::Epoll(_) => None,
        }
    }

    pub(crate) fn park(&mut self, timeout: Option<Duration>, m: &Metrics) -> io::Result<()> {
        Metrics::add(&m.parks, 1);
        match self {
            Driver::Uring(d) => d.park(timeout, m),
            Driver::Epoll(d) => d.park(timeout, m),
        }
    }

    /// An fd that is readable whenever a zero-timeout [`park`](Self::park)
    /// would find work, for a host event loop to wait on (hosted mode).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn readiness_fd(&mut self) -> io::Result<RawFd> {
        match self {
            Driver::Uring(d) => d.readiness_fd(),
            Driver::Epoll(d) => Ok(d.readiness_fd()),
        }
    }

    /// Whether the last park may have left work behind: io_uring SQEs
    /// queued after its submit, epoll events beyond its buffer (so a host
    /// loop must park again rather than wait on
    /// [`readiness_fd`](Self::readiness_fd)).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn may_have_more(&mut self) -> bool {
        match self {
            Driver::Uring(d) => d.sq_pending(),
            Driver::Epoll(d) => d.may_have_more(),
        }
    }

    pub(crate) fn ops_in_flight(&self) -> usize {
        match self {
            Driver::Uring(d) => d.ops_in_flight(),
            Driver::Epoll(_) => 0,
        }
    }

    pub(crate) fn enter_count(&self) -> u64 {
        match self {
            Driver::Uring(d) => d.enter_count(),
            Driver::Epoll(_) => 0,
        }
    }

    pub(crate) fn shutdown(&mut self) {
        if let Driver::Uring(d) = self {
            d.shutdown();
        }
    }

    /// Close `fd` now, synchronously: after this returns its port can be
    /// bound again. On io_uring queued SQEs (such as the cancel of a
    /// multishot accept, which holds a reference to the file) are submitted
    /// first.
    pub(crate) fn close_now(&mut self, fd: RawFd, m: &Metrics) {
        match self {
            Driver::Uring(d) => d.close_now(fd, m),
            Driver::Epoll(d) => d.close_fd(fd, m),
        }
    }

    /// io_uring: put `fd` in a slot of the registered file table (so its
    /// operations skip the kernel's per-operation file lookup and reference
    /// count); `None` on epoll, when off, or when the table is full.
    pub(crate) fn register_fixed(&mut self, fd: RawFd, m: &Metrics) -> Option<u32> {
        match self {
            Driver::Uring(d) => d.register_fixed(fd, m),
            Driver::Epoll(_) => None,
        }
    }

    /// io_uring: give up a slot from [`Driver::register_fixed`].
    pub(crate) fn release_fixed(&mut self, slot: u32, m: &Metrics) {
        if let Driver::Uring(d) = self {
            d.release_fixed(slot, m);
        }
    }

    /// Close `fd` (batched through the ring on io_uring) and forget its state.
    pub(crate) fn close_fd(&mut self, fd: RawFd, m: &Metrics) {
        match self {
            Driver::Uring(d) => d.close_fd(fd, m),
            Driver::Epoll(d) => d.close_fd(fd, m),
        }
    }
}
