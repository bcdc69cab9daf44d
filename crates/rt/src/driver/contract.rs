//! The backend contract: `OpCode`, what every operation says about itself
//! to both backends (docs/ARCHITECTURE.md section 2), and the flags the
//! driver passes to `complete`.

use std::io;
use std::os::fd::RawFd;
use std::task::{Context, Poll};

use ringkit_uring::opcode::Entry;

/// Which way an epoll operation waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    Read = 0,
    Write = 1,
}

/// One operation, described for both backends. See the module docs.
pub(crate) trait OpCode: Sized + 'static {
    type Output;

    /// io_uring: the SQE. Pointers in it must target memory owned by `self`
    /// (heap memory, which does not move with `self`).
    fn uring_entry(&mut self) -> Entry;

    /// io_uring: a timeout to link after the SQE (`IORING_OP_LINK_TIMEOUT`).
    /// The timespec must be owned (boxed) by `self`.
    fn uring_link_timeout(&self) -> Option<*const ringkit_uring::sys::KernelTimespec> {
        None
    }

    /// epoll: the fd and direction to wait for when [`epoll_attempt`](Self::epoll_attempt)
    /// would block; `None` for operations that never block (files run inline).
    fn epoll_ready(&self) -> Option<(RawFd, Dir)>;

    /// epoll: the non-blocking syscall. `WouldBlock` waits for readiness.
    fn epoll_attempt(&mut self) -> io::Result<u32>;

    /// epoll: after a successful attempt, whether the fd is now drained
    /// (a short read), so the next attempt should wait for an edge first.
    fn epoll_drained(&self, _n: u32) -> bool {
        false
    }

    /// Turn the result into the output (both backends).
    fn complete(self, res: io::Result<u32>, flags: u32) -> Self::Output;

    /// Before submitting: `Ready(Some(r))` completes at once with `r`,
    /// `Pending` waits (the op keeps the waker), `Ready(None)` proceeds.
    fn before(&mut self, _cx: &mut Context<'_>) -> Poll<Option<io::Result<u32>>> {
        Poll::Ready(None)
    }

    /// io_uring only, before the SQE is built: `None` goes to the ring
    /// untried; `Some(Some(r))` completes the op at once with `r`, made in
    /// place; `Some(None)`: tried in place (it would block), now to the
    /// ring. A try is one syscall, counted by the driver. For operations
    /// the ring would hand to an io-wq thread although they rarely block
    /// (`splice`, `sendfile`, `statx` of a descriptor, `shutdown`). epoll
    /// never calls it: its `epoll_attempt` is in place already.
    fn uring_try_inline(&mut self) -> Option<Option<io::Result<u32>>> {
        None
    }

    /// io_uring: SQEs that run before [`uring_entry`](Self::uring_entry)'s,
    /// in order, linked to the next, their success CQEs skipped, so the
    /// chain posts one CQE (the driver's rule, docs/ARCHITECTURE.md §4). A
    /// member that fails posts that one CQE itself, and the op's
    /// [`complete`](Self::complete) sees `flags` = [`CHAIN_MEMBER`] | its
    /// index. Only for ops built under `SendPlan::Linked`.
    fn uring_chain(&mut self) -> Vec<Entry> {
        Vec::new()
    }

    /// io_uring: how many members [`uring_chain`](Self::uring_chain) gave
    /// (for cancelling them when the future is dropped).
    fn uring_chain_len(&self) -> usize {
        0
    }

    /// io_uring: the future was dropped while the operation is in flight.
    fn on_orphan(&mut self) {}

    /// io_uring: the result nobody will see (the future was dropped). The
    /// default drops `self`, releasing its buffers.
    fn orphan_result(self, _res: i32, _flags: u32) {}
}

/// In the `flags` given to [`OpCode::complete`]: the CQE came from the chain
/// member whose index is in the low 16 bits (see [`OpCode::uring_chain`]).
pub(crate) const CHAIN_MEMBER: u32 = 1 << 31;

/// In the `flags` given to [`OpCode::complete`]: the SQE never reached the
/// ring (queueing it failed), so the kernel did nothing; the error is the
/// queueing's.
pub(crate) const NOT_SUBMITTED: u32 = 1 << 30;

/// In the `flags` given to [`OpCode::complete`]: the result was made in
/// place ([`OpCode::uring_try_inline`]), not by the ring.
pub(crate) const INLINE: u32 = 1 << 29;

/// Type-erased orphan, kept by the uring driver until its CQE.
pub(crate) trait Orphan {
    fn late(self: Box<Self>, res: i32, flags: u32);
}

impl<T: OpCode> Orphan for T {
    fn late(self: Box<Self>, res: i32, flags: u32) {
        (*self).orphan_result(res, flags)
    }
}
