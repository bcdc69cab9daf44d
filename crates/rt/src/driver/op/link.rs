//! `Link<A, B>`: two operations as one, `B` run only once `A` has
//! completed whole.
//!
//! io_uring: `A`'s SQE linked to `B`'s (`IOSQE_IO_LINK`), `A`'s success
//! CQE skipped, so the pair posts one CQE: `B`'s, or `A`'s own when it
//! failed or came up short (the kernel counts a short read or write as a
//! failure of the link and cancels `B` without a CQE). The driver submits
//! the pair as one group (`submit_chain`), never split by a submit. It
//! does so only where skipped links hold (`Driver::links_hold`): the
//! caller checks that first.
//!
//! epoll: `A`'s syscall, then `B`'s only if `A` was whole, both in place
//! (both must be operations that wait for no readiness: files). An
//! interrupted `B` is retried alone.

use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::Entry;

use crate::driver::{Dir, EpollOp, OpCode, Operation, Source, UringOp};

/// What counts as `self` having completed whole, for a link after it.
pub(crate) trait Whole {
    /// The result that means every byte was moved (a write: its length).
    fn whole(&self) -> u32;
}

/// `first`, then `then` if `first` was whole.
pub(crate) struct Link<A, B> {
    first: A,
    then: B,
    /// epoll: `first`'s result, once made.
    first_done: Option<u32>,
}

impl<A, B> Link<A, B> {
    pub(crate) fn new(first: A, then: B) -> Self {
        Link {
            first,
            then,
            first_done: None,
        }
    }
}

/// A link's output.
#[derive(Debug)]
pub(crate) enum Linked<A, B> {
    /// `A` failed, came up short, or never ran: `B` never ran. (`A`'s
    /// output may still say whole if the kernel broke the link for
    /// another reason; the caller must not take `B` as done.)
    Broken(A),
    /// `A` ran whole, then `B` with this output.
    Both(A, B),
}

impl<A: Operation + Whole, B: Operation> OpCode for Link<A, B> {
    type Output = Linked<A::Output, B::Output>;

    fn complete(self, res: io::Result<u32>, from: Source) -> Self::Output {
        let whole = self.first.whole();
        match from {
            // `A`'s own CQE: it broke the link.
            Source::ChainMember { .. } => Linked::Broken(self.first.complete(res, from)),
            // `B`'s CQE: `A`'s success was skipped, so it was whole.
            Source::Ring { .. } => Linked::Both(
                self.first
                    .complete(Ok(whole), Source::Ring { cqe_flags: 0 }),
                self.then.complete(res, from),
            ),
            Source::Epoll => match self.first_done {
                Some(n) if n == whole => Linked::Both(
                    self.first.complete(Ok(n), Source::Epoll),
                    self.then.complete(res, Source::Epoll),
                ),
                // `res` is `A`'s: an error or a short count.
                _ => Linked::Broken(self.first.complete(res, Source::Epoll)),
            },
            // Never reached a backend.
            Source::NotSubmitted | Source::Early | Source::Inline => {
                Linked::Broken(self.first.complete(res, from))
            }
        }
    }
}

impl<A: Operation + Whole, B: Operation> UringOp for Link<A, B> {
    fn uring_chain(&mut self) -> Vec<Entry> {
        debug_assert_eq!(self.first.uring_chain_len(), 0, "a link of links");
        vec![self.first.uring_entry()]
    }

    fn uring_chain_len(&self) -> usize {
        1
    }

    fn uring_entry(&mut self) -> Entry {
        self.then.uring_entry()
    }
}

impl<A: Operation + Whole, B: Operation> EpollOp for Link<A, B> {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        debug_assert!(
            self.first.epoll_ready().is_none() && self.then.epoll_ready().is_none(),
            "a link of operations that wait for readiness"
        );
        None
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        let n = match self.first_done {
            Some(n) => n,
            None => {
                let n = self.first.epoll_attempt()?;
                self.first_done = Some(n);
                n
            }
        };
        if n != self.first.whole() {
            return Ok(n);
        }
        self.then.epoll_attempt()
    }
}
