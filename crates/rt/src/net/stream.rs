//! The byte-stream core shared by [`super::TcpStream`] and [`super::UnixStream`].
//!
//! # Ownership
//! `StreamCore` owns the fd. Halves from `into_split` share it through an
//! `Rc`; the fd is closed (through the ring on io_uring) when the last one
//! goes, after the multishot receive, if armed, is cancelled.
//!
//! # Reading styles
//! `read(buf)` reads into the caller's buffer (one RECV per call).
//! `read_pooled()` uses a multishot RECV on io_uring: it stays armed and
//! every arrival lands in a buffer of the runtime's provided-buffer ring, so
//! an idle connection holds no buffer. The two may be mixed: `read` served
//! while a multishot is armed copies from it and keeps any excess for the
//! next read.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::io;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::time::Duration;

use crate::buf::{IoBuf, IoBufMut, RecvBuf};
use crate::driver::current;
use crate::driver::op::recv::{ReadStash, Recv};
use crate::driver::op::recv_multi::RecvMulti;
use crate::driver::op::send::Send;
use crate::driver::op::send_batch::Batcher;
use crate::driver::op::sendfile::{SendFile, Sent};
use crate::driver::op::sendmsg::SendMsg;
use crate::driver::op::shutdown::Shutdown;
use crate::driver::op::splice;
use crate::driver::op::target;
use crate::driver::op::writable::Writable;
use crate::driver::{op_within, Op};

#[derive(Debug)]
pub(crate) struct StreamCore {
    pub(crate) fd: RawFd,
    /// Bytes owed by dropped receives. Only io_uring can orphan a receive in
    /// flight (an epoll attempt is synchronous), so epoll streams have none
    /// and their reads clone nothing.
    stash: Option<Rc<ReadStash>>,
    /// Pooled reads (a multishot RECV on io_uring).
    multi: RecvMulti,
    /// Leftover of a pooled buffer that a `read` could not take whole.
    leftover: RefCell<Option<(RecvBuf, usize)>>,
    /// io_uring: the registered-file slot of `fd`, once promoted.
    fixed: Cell<Option<u32>>,
    /// Operations before promotion is tried; 0 once tried (or never: epoll).
    until_fixed: Cell<u8>,
    /// How long a write may wait without moving a byte (`None`: forever).
    write_timeout: Cell<Option<Duration>>,
}

/// Bytes a zero-copy send moves per pipe-full (asked of the kernel; the
/// pipe may be smaller).
const PIPE_SIZE: usize = 1 << 20;

/// A stream asks for a registered-file slot at its 16th operation: a
/// short connection never pays the `io_uring_register` call.
const OPS_BEFORE_FIXED: u8 = 16;

impl StreamCore {
    pub(crate) fn new(fd: RawFd) -> StreamCore {
        // A stream lives on the runtime that made it; without one (built
        // outside a runtime), keep a stash to be safe.
        let (orphans, fixable) =
            current::try_driver(|d, _| (d.reads_outlive_their_futures(), d.registers_files()))
                .unzip();
        StreamCore {
            fd,
            stash: orphans.unwrap_or(true).then(Rc::default),
            multi: RecvMulti::new(),
            leftover: RefCell::new(None),
            fixed: Cell::new(None),
            until_fixed: Cell::new(if fixable == Some(true) {
                OPS_BEFORE_FIXED
            } else {
                0
            }),
            write_timeout: Cell::new(None),
        }
    }

    pub(crate) fn set_write_timeout(&self, limit: Option<Duration>) {
        self.write_timeout.set(limit.filter(|d| !d.is_zero()));
    }

    pub(crate) fn write_timeout(&self) -> Option<Duration> {
        self.write_timeout.get()
    }

    /// A write operation, bounded by the write timeout.
    async fn send_op<T: crate::driver::Operation>(&self, op: T) -> T::Output {
        op_within(op, self.write_timeout.get()).await
    }

    pub(crate) fn registered_file(&self) -> Option<u32> {
        self.fixed.get()
    }

    /// The registered-file slot to address `fd` by (io_uring), promoting
    /// the stream at its [`OPS_BEFORE_FIXED`]th operation if the runtime
    /// has a table ([`crate::Builder::fixed_files`]).
    fn slot(&self) -> Option<u32> {
        let left = self.until_fixed.get();
        if left == 0 {
            return self.fixed.get();
        }
        self.until_fixed.set(left - 1);
        if left == 1 {
            let slot = current::try_driver(|d, m| d.register_fixed(self.fd, m)).flatten();
            self.fixed.set(slot);
        }
        self.fixed.get()
    }

    /// Fill `buf` from its start to its capacity, reading as often as it
    /// takes (see `TcpStream::read_exact`).
    pub(crate) async fn read_exact<B: IoBufMut>(&self, buf: B) -> (io::Result<()>, B) {
        use crate::buf::IoBufExt;
        let total = buf.bytes_total();
        let (mut buf, mut filled) = (buf, 0);
        while filled < total {
            // The slice starts at the end of what was read: within the data.
            let (r, s) = self.read(buf.slice(filled..)).await;
            buf = s.into_inner();
            match r {
                Ok(0) => {
                    let e = io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("the peer closed after {filled} of {total} bytes"),
                    );
                    return (Err(e), buf);
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return (Err(e), buf),
            }
        }
        (Ok(()), buf)
    }

    pub(crate) async fn read<B: IoBufMut>(&self, buf: B) -> (io::Result<usize>, B) {
        if buf.bytes_total() == 0 {
            return (Err(crate::driver::op::no_room()), buf);
        }
        if self.multi.is_armed() || self.leftover.borrow().is_some() {
            // Boxed: only a stream that mixes `read` with `read_pooled`
            // comes here, and inline this path would more than double the
            // size of every read future (and of every task awaiting one).
            return Box::pin(self.read_via_pool(buf)).await;
        }
        Op::new(Recv::new(self.fd, true, buf, self.stash.clone()).fixed(self.slot())).await
    }

    async fn read_via_pool<B: IoBufMut>(&self, buf: B) -> (io::Result<usize>, B) {
        let rb = self.read_pooled().await;
        self.copy_pooled(rb, buf)
    }

    /// Copy a pooled chunk into `buf`; what does not fit becomes the leftover
    /// that the next read (plain or pooled) returns first.
    fn copy_pooled<B: IoBufMut>(
        &self,
        rb: io::Result<RecvBuf>,
        mut buf: B,
    ) -> (io::Result<usize>, B) {
        let rb = match rb {
            Ok(rb) => rb,
            Err(e) => return (Err(e), buf),
        };
        let n = rb.len().min(buf.bytes_total());
        // SAFETY: `n <= bytes_total` writable bytes; source and target are distinct.
        unsafe {
            std::ptr::copy_nonoverlapping(rb.as_ptr(), buf.stable_mut_ptr(), n);
            buf.set_init(n);
        }
        if n < rb.len() {
            *self.leftover.borrow_mut() = Some((rb, n));
        }
        (Ok(n), buf)
    }

    pub(crate) async fn read_timeout<B: IoBufMut>(
        &self,
        buf: B,
        dur: Duration,
    ) -> (io::Result<usize>, B) {
        if buf.bytes_total() == 0 {
            return (Err(crate::driver::op::no_room()), buf);
        }
        let timed_out = || io::Error::new(io::ErrorKind::TimedOut, "read timed out");
        if self.multi.is_armed() || self.leftover.borrow().is_some() {
            // Pooled mode: wait for a chunk (a pooled read is cancel-safe:
            // a dropped one loses nothing) and only then touch `buf`, so a
            // timeout can hand `buf` back untouched.
            return match crate::time::timeout(dur, self.read_pooled()).await {
                Ok(rb) => self.copy_pooled(rb, buf),
                Err(_) => (Err(timed_out()), buf),
            };
        }
        Recv::new(self.fd, true, buf, self.stash.clone())
            .fixed(self.slot())
            .within(dur)
            .await
    }

    pub(crate) async fn write<B: IoBuf>(&self, buf: B) -> (io::Result<usize>, B) {
        self.send_op(Send::new(self.fd, true, buf, 0).fixed(self.slot()))
            .await
    }

    pub(crate) async fn write_all<B: IoBuf>(&self, buf: B) -> (io::Result<()>, B) {
        self.write_all_flags(buf, 0).await
    }

    /// `write_all` with `send` flags (`MSG_MORE`).
    pub(crate) async fn write_all_flags<B: IoBuf>(
        &self,
        mut buf: B,
        flags: i32,
    ) -> (io::Result<()>, B) {
        let mut done = 0;
        while done < buf.bytes_init() {
            let send = Send::new(self.fd, true, buf, done)
                .fixed(self.slot())
                .flags(flags);
            let (res, b) = self.send_op(send).await;
            buf = b;
            match res {
                Ok(0) => return (Err(io::ErrorKind::WriteZero.into()), buf),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return (Err(e), buf),
            }
        }
        (Ok(()), buf)
    }

    /// `sendfile(2)` up to `len` bytes of `file` from `offset` (see
    /// [`SendFile`]): returns the bytes sent, maybe fewer; 0: `file` ends
    /// before `offset`.
    pub(crate) async fn send_file<F: std::os::fd::AsRawFd>(
        &self,
        file: &F,
        offset: u64,
        len: usize,
    ) -> io::Result<usize> {
        loop {
            let op = SendFile::new(self.fd, file.as_raw_fd(), offset, len);
            match self.send_op(op).await? {
                Sent::Bytes(n) => return Ok(n),
                Sent::Writable => {}
            }
        }
    }

    /// Send up to `len` bytes of `file` from `offset` through a pipe of
    /// this thread's (see [`splice::send_file`]); 0: `file` ends before
    /// `offset`.
    pub(crate) async fn splice_file<F: std::os::fd::AsRawFd + 'static>(
        &self,
        file: &Rc<F>,
        offset: u64,
        len: usize,
    ) -> io::Result<usize> {
        // A pipe of the thread's, for this send only: an idle connection
        // holds none.
        let lease = splice::PipeLease::take(PIPE_SIZE)?;
        let limit = self.write_timeout.get();
        let n = splice::send_file(self.fd, file, offset, len, lease.pipe(), limit).await?;
        lease.done();
        Ok(n)
    }

    pub(crate) async fn writev<B: IoBuf>(&self, bufs: Vec<B>) -> (io::Result<usize>, Vec<B>) {
        self.send_op(SendMsg::new(self.fd, bufs, None)).await
    }

    pub(crate) async fn shutdown(&self, how: std::net::Shutdown) -> io::Result<()> {
        let how = match how {
            std::net::Shutdown::Read => libc::SHUT_RD,
            std::net::Shutdown::Write => libc::SHUT_WR,
            std::net::Shutdown::Both => libc::SHUT_RDWR,
        };
        Op::new(Shutdown { fd: self.fd, how }).await
    }

    /// A pooled chunk that is already here (the rest of a partly read
    /// buffer, or the next buffer of a receive bundle), without waiting;
    /// `None` if the next bytes must be waited for.
    pub(crate) fn take_pooled(&self) -> Option<RecvBuf> {
        if !crate::coop::has_budget() {
            // The caller waits through `read_pooled`, which yields.
            return None;
        }
        if let Some((rb, off)) = self.leftover.borrow_mut().take() {
            crate::coop::spend();
            return Some(rb.advance(off));
        }
        // Bytes of dropped plain reads come first; let `read_pooled` order them.
        if self.stash.as_ref().is_some_and(|s| !s.is_idle()) {
            return None;
        }
        self.multi.try_next()
    }

    /// Send every byte of `bufs`, in order, a batch at a time as the driver
    /// sends batches (`driver/op/send_batch.rs`); a partial send continues
    /// from where it stopped.
    pub(crate) async fn write_all_pooled(&self, mut bufs: Vec<RecvBuf>) -> io::Result<()> {
        let batcher = Batcher::current();
        let cap = batcher.cap();
        let mut later = bufs.split_off(bufs.len().min(cap));
        loop {
            if bufs.is_empty() {
                if later.is_empty() {
                    return Ok(());
                }
                let rest = later.split_off(later.len().min(cap));
                bufs = std::mem::replace(&mut later, rest);
            }
            let (r, back) = batcher.send(self.fd, bufs, self.write_timeout.get()).await;
            let mut n = match r {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // io_uring may hand a full non-blocking socket's EAGAIN
                    // back for SENDMSG: wait until it is writable.
                    self.send_op(Writable { fd: self.fd }).await?;
                    bufs = back;
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    bufs = back;
                    continue;
                }
                Err(e) => return Err(e),
            };
            if n == 0 && back.iter().any(|b| !b.is_empty()) {
                return Err(io::ErrorKind::WriteZero.into());
            }
            // Keep what was not sent: drop whole buffers, trim a partial one.
            bufs = Vec::with_capacity(back.len());
            for b in back {
                if n >= b.len() {
                    n -= b.len();
                } else {
                    bufs.push(b.advance(n));
                    n = 0;
                }
            }
        }
    }

    /// Next chunk of data in a pooled buffer; an empty buffer means EOF.
    ///
    /// Order (so that mixing `read`, `read_pooled` and dropped reads of
    /// either kind never loses or reorders bytes): first the rest of a
    /// pooled buffer that a `read` took only part of, then bytes of dropped
    /// plain reads (waiting for those still being cancelled, so that no
    /// multishot receive is armed while one of them may still get data),
    /// then new data. Cancel-safe: a dropped `read_pooled` loses nothing.
    pub(crate) async fn read_pooled(&self) -> io::Result<RecvBuf> {
        if self.leftover.borrow().is_some() {
            // Bytes already here cost a unit of the task's budget too
            // (`crate::coop`); taken only once it grants one.
            poll_fn(crate::coop::poll_proceed).await;
            if let Some((rb, off)) = self.leftover.borrow_mut().take() {
                crate::coop::spend();
                return Ok(rb.advance(off));
            }
        }
        if let Some(stash) = &self.stash {
            if let Some(stashed) = poll_fn(|cx| stash.poll_take_all(cx)).await {
                return Ok(RecvBuf::heap(stashed));
            }
        }
        self.multi
            .next(
                self.fd,
                || target(self.fd, self.slot()),
                |buf| Recv::new(self.fd, true, buf, self.stash.clone()).fixed(self.slot()),
            )
            .await
    }
}

impl Drop for StreamCore {
    fn drop(&mut self) {
        let fd = self.fd;
        // Before the close: an armed multishot holds the file open.
        self.multi.cancel();
        let fixed = self.fixed.take();
        let closed = current::try_driver(|d, m| {
            if let Some(slot) = fixed {
                d.release_fixed(slot, m);
            }
            d.close_fd(fd, m);
        });
        if closed.is_none() {
            // SAFETY: we own fd; no runtime is left to close it for us.
            unsafe { libc::close(fd) };
        }
    }
}
