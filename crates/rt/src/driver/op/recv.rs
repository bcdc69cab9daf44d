//! `recv(2)` / `read(2)` on a stream: io_uring `IORING_OP_RECV` (sockets) or
//! `IORING_OP_READ` at the current position (pipes, ttys); epoll: wait
//! readable, then the non-blocking syscall.
//!
//! A read whose future was dropped while in flight keeps what it receives in
//! the stream's [`ReadStash`]; the next read returns those bytes first and a
//! new read waits until the dropped one has resolved (so order is kept).
//! An optional timeout is linked to the SQE (`IORING_OP_LINK_TIMEOUT`): if
//! it fires first the read completes with `TimedOut`, and if data won the
//! race the data is returned.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use ringkit_uring::opcode::{self, Entry, Target};
use ringkit_uring::sys::KernelTimespec;

use super::{cvt, raw, target};
use crate::buf::IoBufMut;
use crate::driver::{Dir, EpollOp, OpCode, Source, UringOp};

/// Bytes of dropped reads, kept for the next read on the same stream.
#[derive(Debug, Default)]
pub(crate) struct ReadStash {
    /// Dropped reads still in flight.
    pending: Cell<u32>,
    data: RefCell<VecDeque<u8>>,
    waiter: RefCell<Option<Waker>>,
}

impl ReadStash {
    fn wake(&self) {
        if let Some(w) = self.waiter.borrow_mut().take() {
            w.wake();
        }
    }

    /// No dropped read is in flight and nothing is stashed.
    pub(crate) fn is_idle(&self) -> bool {
        self.pending.get() == 0 && self.data.borrow().is_empty()
    }

    /// For pooled reads, which do not go through [`Recv::before`]: wait
    /// until no dropped read is in flight, then take every stashed byte
    /// (`None`: nothing stashed). These bytes precede anything a receive
    /// armed afterwards can get, so they must be returned first.
    pub(crate) fn poll_take_all(&self, cx: &mut Context<'_>) -> Poll<Option<Vec<u8>>> {
        if self.pending.get() > 0 {
            *self.waiter.borrow_mut() = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let mut data = self.data.borrow_mut();
        if data.is_empty() {
            Poll::Ready(None)
        } else {
            Poll::Ready(Some(data.drain(..).collect()))
        }
    }
}

pub(crate) struct Recv<B> {
    fd: RawFd,
    /// io_uring: the registered-file slot of `fd`, if it has one.
    fixed: Option<u32>,
    socket: bool,
    buf: B,
    stash: Option<Rc<ReadStash>>,
    orphaned: bool,
    timeout: Option<Box<KernelTimespec>>,
}

impl<B: IoBufMut> Recv<B> {
    pub(crate) fn new(fd: RawFd, socket: bool, buf: B, stash: Option<Rc<ReadStash>>) -> Self {
        Recv {
            fd,
            fixed: None,
            socket,
            buf,
            stash,
            orphaned: false,
            timeout: None,
        }
    }

    /// io_uring: address the fd by its registered-file slot.
    pub(crate) fn fixed(mut self, slot: Option<u32>) -> Self {
        self.fixed = slot;
        self
    }

    pub(crate) fn with_timeout(mut self, dur: std::time::Duration) -> Self {
        self.timeout = Some(Box::new(dur.into()));
        self
    }

    fn total(&self) -> usize {
        self.buf.bytes_total()
    }
}

impl<B: IoBufMut> Recv<B> {
    /// This receive, or `TimedOut` (with the buffer back, untouched) if no
    /// data came within `dur`. io_uring: a `LINK_TIMEOUT` linked to the
    /// RECV, so one completion says which came first and data is never
    /// dropped. epoll: the receive races a timer; between polls an epoll
    /// op holds nothing in the kernel, so on timeout the buffer is taken
    /// back (dropping the read used to drop the caller's buffer with it).
    pub(crate) async fn within(self, dur: std::time::Duration) -> (io::Result<usize>, B) {
        if std::time::Instant::now().checked_add(dur).is_none() {
            // Past the clock's range: no time limit at all (on io_uring the
            // kernel's timespec would have wrapped to "now").
            return crate::driver::Op::new(self).await;
        }
        // The driver picks the bound (see `op_within`): the linked timeout
        // on io_uring, the runtime's timer on epoll.
        crate::driver::op_within(self.with_timeout(dur), Some(dur)).await
    }
}

impl<B: IoBufMut> OpCode for Recv<B> {
    type Output = (io::Result<usize>, B);

    fn before(&mut self, cx: &mut Context<'_>) -> Poll<Option<io::Result<u32>>> {
        if self.total() == 0 {
            return Poll::Ready(Some(Err(super::no_room())));
        }
        let Some(stash) = &self.stash else {
            return Poll::Ready(None);
        };
        if stash.pending.get() > 0 {
            *stash.waiter.borrow_mut() = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let mut data = stash.data.borrow_mut();
        if data.is_empty() {
            return Poll::Ready(None);
        }
        let n = data.len().min(self.total());
        let ptr = self.buf.stable_mut_ptr();
        for (i, b) in data.drain(..n).enumerate() {
            // SAFETY: `i < n <= bytes_total`, the buffer's writable capacity.
            unsafe { ptr.add(i).write(b) };
        }
        Poll::Ready(Some(Ok(n as u32)))
    }

    fn complete(mut self, res: io::Result<u32>, _from: Source) -> Self::Output {
        let res = match res {
            Ok(n) => {
                // SAFETY: the kernel (or the stash copy) initialised `n` bytes.
                unsafe { self.buf.set_init(n as usize) };
                Ok(n as usize)
            }
            Err(e) if self.timeout.is_some() && e.raw_os_error() == Some(libc::ECANCELED) => {
                Err(io::Error::new(io::ErrorKind::TimedOut, "read timed out"))
            }
            Err(e) => Err(e),
        };
        (res, self.buf)
    }
}

impl<B: IoBufMut> UringOp for Recv<B> {
    fn uring_entry(&mut self) -> Entry {
        let len = self.total().min(super::write_at::MAX_WRITE) as u32;
        let ptr = self.buf.stable_mut_ptr();
        if self.socket {
            opcode::Recv::new(target(self.fd, self.fixed), ptr, len).build()
        } else {
            opcode::Read::new(Target::Fd(self.fd), ptr, len)
                .offset(u64::MAX)
                .build()
        }
    }

    fn uring_link_timeout(&self) -> Option<*const KernelTimespec> {
        self.timeout.as_deref().map(|t| t as *const KernelTimespec)
    }

    fn on_orphan(&mut self) {
        self.orphaned = true;
        if let Some(s) = &self.stash {
            s.pending.set(s.pending.get() + 1);
        }
    }

    fn orphan_result(self, res: i32, _from: Source) {
        let Some(s) = &self.stash else { return };
        if self.orphaned {
            s.pending.set(s.pending.get() - 1);
        }
        if res > 0 {
            // SAFETY: the kernel wrote `res` bytes at the buffer's start.
            let got = unsafe { std::slice::from_raw_parts(self.buf.stable_ptr(), res as usize) };
            s.data.borrow_mut().extend(got);
        }
        s.wake();
    }
}

impl<B: IoBufMut> EpollOp for Recv<B> {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        Some((self.fd, Dir::Read))
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        let (ptr, len) = (self.buf.stable_mut_ptr(), self.total());
        // SAFETY: `ptr` is writable for `len` bytes (IoBufMut contract).
        let r = unsafe {
            if self.socket {
                raw::recv(self.fd, ptr.cast(), len, 0)
            } else {
                raw::read(self.fd, ptr.cast(), len)
            }
        };
        cvt(r)
    }

    fn epoll_drained(&self, n: u32) -> bool {
        (n as usize) < self.total() && n > 0
    }
}
