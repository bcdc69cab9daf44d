//! The backend contract: `OpCode`, `UringOp` and `EpollOp`, what every
//! operation says about itself to each backend (docs/ARCHITECTURE.md section 2), and [`Source`], where
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

/// What an operation is on either backend: its output, made from its
/// result, and what it does before it goes to a backend. Each op file
/// implements this, [`UringOp`] and [`EpollOp`], one impl per backend,
/// so an op reads backend by backend; [`Operation`] is all three.
pub(crate) trait OpCode: Sized + 'static {
    type Output;

    /// Turn the result into the output (both backends); `from` says which
    /// backend made it and how.
    fn complete(self, res: io::Result<u32>, from: Source) -> Self::Output;

    /// Before submitting: `Ready(Some(r))` completes at once with `r`,
    /// `Pending` waits (the op keeps the waker), `Ready(None)` proceeds.
    fn before(&mut self, _cx: &mut Context<'_>) -> Poll<Option<io::Result<u32>>> {
        Poll::Ready(None)
    }
}

/// The operation on io_uring: the SQE, and what happens if its future is
/// dropped while the kernel holds it.
pub(crate) trait UringOp: OpCode {
    /// The SQE. Pointers in it must target memory owned by `self` (heap
    /// memory, which does not move with `self`).
    fn uring_entry(&mut self) -> Entry;

    /// A timeout to link after the SQE (`IORING_OP_LINK_TIMEOUT`). The
    /// timespec must be owned (boxed) by `self`.
    fn uring_link_timeout(&self) -> Option<*const ringkit_uring::sys::KernelTimespec> {
        None
    }

    /// Before the SQE is built: `None` goes to the ring untried;
    /// `Some(Some(r))` completes the op at once with `r`, made in place;
    /// `Some(None)`: tried in place (it would block), now to the ring. A
    /// try is one syscall, counted by the driver. For operations the ring
    /// would hand to an io-wq thread although they rarely block (`splice`,
    /// `sendfile`, `statx` of a descriptor, `shutdown`).
    fn uring_try_inline(&mut self) -> Option<Option<io::Result<u32>>> {
        None
    }

    /// SQEs that run before [`uring_entry`](Self::uring_entry)'s, in
    /// order, linked to the next, their success CQEs skipped, so the chain
    /// posts one CQE (the driver's rule, docs/ARCHITECTURE.md §4). A member
    /// that fails posts that one CQE itself, and the op's
    /// [`complete`](OpCode::complete) sees [`Source::ChainMember`] with its
    /// index. Only where the driver says chains hold (`links_hold`).
    fn uring_chain(&mut self) -> Vec<Entry> {
        Vec::new()
    }

    /// How many members [`uring_chain`](Self::uring_chain) gave (for
    /// cancelling them when the future is dropped).
    fn uring_chain_len(&self) -> usize {
        0
    }

    /// The future was dropped while the operation is in flight.
    fn on_orphan(&mut self) {}

    /// The result nobody will see (the future was dropped). The default
    /// drops `self`, releasing its buffers.
    fn orphan_result(self, _res: i32, _from: Source) {}
}

/// The operation on epoll: the readiness it waits for and the
/// non-blocking syscall it makes inside `poll`.
pub(crate) trait EpollOp: OpCode {
    /// The fd and direction to wait for when
    /// [`epoll_attempt`](Self::epoll_attempt) would block; `None` for
    /// operations that never block (files run inline).
    fn epoll_ready(&self) -> Option<(RawFd, Dir)>;

    /// The non-blocking syscall. `WouldBlock` waits for readiness.
    fn epoll_attempt(&mut self) -> io::Result<u32>;

    /// After a successful attempt, whether the fd is now drained (a short
    /// read), so the next attempt should wait for an edge first.
    fn epoll_drained(&self, _n: u32) -> bool {
        false
    }
}

/// An operation both backends can run: what [`super::Op`] drives.
pub(crate) trait Operation: UringOp + EpollOp {}

impl<T: UringOp + EpollOp> Operation for T {}

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
    /// ([`UringOp::uring_chain`]), which failed or came up short: the links
    /// after it, the op's own SQE included, were cancelled without a CQE.
    ChainMember {
        /// The member's place in the chain, from 0.
        index: u16,
    },
    /// io_uring: made in place ([`UringOp::uring_try_inline`]).
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

impl<T: UringOp> Orphan for T {
    fn late(self: Box<Self>, res: i32, from: Source) {
        (*self).orphan_result(res, from)
    }
}
