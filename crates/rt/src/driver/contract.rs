//! The backend contract: `OpCode`, what every operation says about itself
//! to both backends (docs/ARCHITECTURE.md section 2), and [`Source`], where
//! the result `complete` is given came from.

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

    /// Turn the result into the output (both backends); `from` says which
    /// backend made it and how.
    fn complete(self, res: io::Result<u32>, from: Source) -> Self::Output;

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
    /// [`complete`](Self::complete) sees [`Source::ChainMember`] with its
    /// index. Only where the driver says chains hold (`links_hold`).
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
    fn orphan_result(self, _res: i32, _from: Source) {}
}

/// Where the result given to [`OpCode::complete`] came from. The driver
/// says it here, never in bits mixed into the kernel's CQE flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// io_uring: the CQE of the op's own SQE, with the kernel's flags.
    Ring {
        /// The CQE's `flags` as the kernel posted them.
        cqe_flags: u32,
    },
    /// io_uring: the CQE of member `index` of the op's chain
    /// ([`OpCode::uring_chain`]), which failed or came up short: the links
    /// after it, the op's own SQE included, were cancelled without a CQE.
    ChainMember {
        /// The member's place in the chain, from 0.
        index: u16,
    },
    /// io_uring: made in place ([`OpCode::uring_try_inline`]).
    Inline,
    /// io_uring: the SQE never reached the ring (queueing it failed): the
    /// kernel did nothing, and the error is the queueing's.
    NotSubmitted,
    /// epoll: the syscall made inside `poll` (`epoll_attempt`), or the
    /// error of waiting for readiness.
    Epoll,
    /// Neither backend ran it: [`OpCode::before`] answered, or its time
    /// limit passed before it started.
    Early,
}

/// Type-erased orphan, kept by the uring driver until its CQE.
pub(crate) trait Orphan {
    fn late(self: Box<Self>, res: i32, from: Source);
}

impl<T: OpCode> Orphan for T {
    fn late(self: Box<Self>, res: i32, from: Source) {
        (*self).orphan_result(res, from)
    }
}
