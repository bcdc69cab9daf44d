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
use std::future::{poll_fn, Future};
use std::io;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

use ringkit_uring::BufRing;

use crate::buf::{IoBuf, IoBufMut};
use crate::driver::op::recv::{ReadStash, Recv};
use crate::driver::op::send::Send;
use crate::driver::op::sendmsg::SendMsg;
use crate::driver::op::shutdown::Shutdown;
use crate::driver::uring::{MultiKind, BGID};
use crate::driver::{Driver, Op};
use crate::runtime::{try_with_ctx, with_ctx};

#[derive(Debug)]
pub(crate) struct StreamCore {
    pub(crate) fd: RawFd,
    /// Bytes owed by dropped receives. Only io_uring can orphan a receive in
    /// flight (an epoll attempt is synchronous), so epoll streams have none
    /// and their reads clone nothing.
    stash: Option<Rc<ReadStash>>,
    /// Key of the armed multishot RECV (io_uring).
    multi: Cell<Option<usize>>,
    /// Leftover of a pooled buffer that a `read` could not take whole.
    leftover: RefCell<Option<(RecvBuf, usize)>>,
    /// io_uring: the registered-file slot of `fd`, once promoted.
    fixed: Cell<Option<u32>>,
    /// Operations before promotion is tried; 0 once tried (or never: epoll).
    until_fixed: Cell<u8>,
}

/// A stream asks for a registered-file slot at its 16th operation: a
/// short connection never pays the `io_uring_register` call.
const OPS_BEFORE_FIXED: u8 = 16;

impl StreamCore {
    pub(crate) fn new(fd: RawFd) -> StreamCore {
        // A stream lives on the runtime that made it; without one (built
        // outside a runtime), keep a stash to be safe.
        let uring = try_with_ctx(|cx| matches!(&*cx.driver.borrow(), Driver::Uring(_)));
        StreamCore {
            fd,
            stash: uring.unwrap_or(true).then(Rc::default),
            multi: Cell::new(None),
            leftover: RefCell::new(None),
            fixed: Cell::new(None),
            until_fixed: Cell::new(if uring == Some(true) {
                OPS_BEFORE_FIXED
            } else {
                0
            }),
        }
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
            let slot =
                try_with_ctx(|rt| rt.driver.borrow_mut().register_fixed(self.fd, &rt.metrics))
                    .flatten();
            self.fixed.set(slot);
        }
        self.fixed.get()
    }

    pub(crate) async fn read<B: IoBufMut>(&self, buf: B) -> (io::Result<usize>, B) {
        if self.multi.get().is_some() || self.leftover.borrow().is_some() {
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
        let timed_out = || io::Error::new(io::ErrorKind::TimedOut, "read timed out");
        if self.multi.get().is_some() || self.leftover.borrow().is_some() {
            // Pooled mode: wait for a chunk (a pooled read is cancel-safe:
            // a dropped one loses nothing) and only then touch `buf`, so a
            // timeout can hand `buf` back untouched.
            return match crate::time::timeout(dur, self.read_pooled()).await {
                Ok(rb) => self.copy_pooled(rb, buf),
                Err(_) => (Err(timed_out()), buf),
            };
        }
        let uring = crate::runtime::is_uring();
        let recv = Recv::new(self.fd, true, buf, self.stash.clone()).fixed(self.slot());
        if uring {
            // The timeout is linked to the RECV: one completion says whether
            // data or the timeout came first, and data is never dropped.
            return Op::new(recv.with_timeout(dur)).await;
        }
        let mut op = Op::new(recv);
        // epoll: race the receive against a timer. Between polls an epoll op
        // holds nothing in the kernel, so on timeout we take the buffer back.
        // (Dropping the read here used to drop the caller's buffer with it.)
        let mut sleep = std::pin::pin!(crate::time::sleep(dur));
        let done = poll_fn(|cx| {
            if let Poll::Ready(r) = std::pin::Pin::new(&mut op).poll(cx) {
                return Poll::Ready(Some(r));
            }
            if sleep.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            Poll::Pending
        })
        .await;
        match done {
            Some(r) => r,
            None => {
                let recv = op
                    .take_unsubmitted()
                    .expect("an epoll op is never in flight between polls");
                (Err(timed_out()), recv.into_buf())
            }
        }
    }

    pub(crate) async fn write<B: IoBuf>(&self, buf: B) -> (io::Result<usize>, B) {
        Op::new(Send::new(self.fd, true, buf, 0).fixed(self.slot())).await
    }

    pub(crate) async fn write_all<B: IoBuf>(&self, mut buf: B) -> (io::Result<()>, B) {
        let mut done = 0;
        while done < buf.bytes_init() {
            let (res, b) = Op::new(Send::new(self.fd, true, buf, done).fixed(self.slot())).await;
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

    pub(crate) async fn writev<B: IoBuf>(&self, bufs: Vec<B>) -> (io::Result<usize>, Vec<B>) {
        Op::new(SendMsg::new(self.fd, bufs, None)).await
    }

    pub(crate) async fn shutdown(&self, how: std::net::Shutdown) -> io::Result<()> {
        let how = match how {
            std::net::Shutdown::Read => libc::SHUT_RD,
            std::net::Shutdown::Write => libc::SHUT_WR,
            std::net::Shutdown::Both => libc::SHUT_RDWR,
        };
        Op::new(Shutdown { fd: self.fd, how }).await
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
        if let Some((rb, off)) = self.leftover.borrow_mut().take() {
            return Ok(rb.advance(off));
        }
        if let Some(stash) = &self.stash {
            if let Some(stashed) = poll_fn(|cx| stash.poll_take_all(cx)).await {
                return Ok(RecvBuf::heap(stashed));
            }
        }
        enum Step {
            Got(RecvBuf),
            Single,
            Err(io::Error),
        }
        let uring = crate::runtime::is_uring();
        if !uring {
            return self.read_pooled_single().await;
        }
        let step = poll_fn(|cx| {
            // Where a new multishot receive would point, decided before the
            // driver is borrowed (promotion borrows it too).
            let target = match self.multi.get() {
                Some(_) => None,
                None => Some(crate::driver::op::target(self.fd, self.slot())),
            };
            with_ctx(|rt| {
                let mut drv = rt.driver.borrow_mut();
                let Driver::Uring(u) = &mut *drv else {
                    unreachable!("checked above")
                };
                let ring = match u.buf_ring() {
                    Ok(r) => r,
                    Err(e) => return Poll::Ready(Step::Err(e)),
                };
                let key = match (self.multi.get(), target) {
                    (Some(k), _) => k,
                    (None, target) => {
                        let target = target.unwrap_or(ringkit_uring::opcode::Target::Fd(self.fd));
                        let e = ringkit_uring::opcode::RecvMulti::new(target, BGID).build();
                        match u.submit_multi(e, &rt.metrics) {
                            Ok(k) => {
                                self.multi.set(Some(k));
                                k
                            }
                            Err(e) => return Poll::Ready(Step::Err(e)),
                        }
                    }
                };
                match u.poll_multi(key, cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(None) => {
                        self.multi.set(None);
                        Poll::Ready(Step::Single)
                    }
                    Poll::Ready(Some((res, flags))) => {
                        let cqe = ringkit_uring::Cqe {
                            user_data: 0,
                            res,
                            flags,
                        };
                        if !cqe.more() {
                            self.multi.set(None);
                        }
                        if res == -libc::ENOBUFS {
                            // The ring ran dry: make progress with one plain recv.
                            return Poll::Ready(Step::Single);
                        }
                        if res < 0 {
                            return Poll::Ready(Step::Err(io::Error::from_raw_os_error(-res)));
                        }
                        match cqe.buffer_id() {
                            Some(bid) => {
                                let ptr = ring.borrow().buffer(bid, 0).as_ptr();
                                Poll::Ready(Step::Got(RecvBuf::ring(ring, bid, ptr, res as usize)))
                            }
                            None => Poll::Ready(Step::Got(RecvBuf::heap(Vec::new()))),
                        }
                    }
                }
            })
        })
        .await;
        match step {
            Step::Got(b) => Ok(b),
            Step::Err(e) => Err(e),
            Step::Single => self.read_pooled_single().await,
        }
    }

    async fn read_pooled_single(&self) -> io::Result<RecvBuf> {
        let size = 4096;
        let (res, buf) = Op::new(
            Recv::new(self.fd, true, Vec::with_capacity(size), self.stash.clone())
                .fixed(self.slot()),
        )
        .await;
        res.map(|_| RecvBuf::heap(buf))
    }
}

impl Drop for StreamCore {
    fn drop(&mut self) {
        let fd = self.fd;
        let multi = self.multi.take();
        let fixed = self.fixed.take();
        let closed = try_with_ctx(|rt| {
            let mut drv = rt.driver.borrow_mut();
            if let (Some(k), Driver::Uring(u)) = (multi, &mut *drv) {
                u.drop_multi(k, MultiKind::Recv, &rt.metrics);
            }
            if let Some(slot) = fixed {
                drv.release_fixed(slot, &rt.metrics);
            }
            drv.close_fd(fd, &rt.metrics);
        });
        if closed.is_none() {
            // SAFETY: we own fd; no runtime is left to close it for us.
            unsafe { libc::close(fd) };
        }
    }
}

/// Received bytes in a pooled buffer: a slot of the runtime's provided-buffer
/// ring (io_uring multishot) or a heap buffer. Dropping it gives a ring slot
/// back to the kernel. It can be written back out as it is (it is an [`IoBuf`]).
pub struct RecvBuf {
    // INVARIANT: for `Ring`, `ptr..ptr+len` is buffer `bid` of `ring`, which
    // the kernel does not touch until we recycle it on drop.
    inner: RecvInner,
}

enum RecvInner {
    Ring {
        ring: Rc<RefCell<BufRing>>,
        bid: u16,
        ptr: *const u8,
        len: usize,
    },
    Heap(Vec<u8>),
}

impl std::fmt::Debug for RecvBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBuf").field("len", &self.len()).finish()
    }
}

impl RecvBuf {
    fn ring(ring: Rc<RefCell<BufRing>>, bid: u16, ptr: *const u8, len: usize) -> RecvBuf {
        RecvBuf {
            inner: RecvInner::Ring {
                ring,
                bid,
                ptr,
                len,
            },
        }
    }

    fn heap(v: Vec<u8>) -> RecvBuf {
        RecvBuf {
            inner: RecvInner::Heap(v),
        }
    }

    /// Drop the first `off` bytes (at most `len`).
    fn advance(mut self, off: usize) -> RecvBuf {
        match &mut self.inner {
            RecvInner::Ring { ptr, len, .. } => {
                let off = off.min(*len);
                // SAFETY: `off <= len`: the result stays inside slot `bid`,
                // so the INVARIANT holds; `bid` is still what gets recycled.
                *ptr = unsafe { ptr.add(off) };
                *len -= off;
            }
            RecvInner::Heap(v) => {
                v.drain(..off.min(v.len()));
            }
        }
        self
    }

    /// Whether the data sits in a provided-buffer ring slot.
    pub fn is_ring_buffer(&self) -> bool {
        matches!(self.inner, RecvInner::Ring { .. })
    }
}

impl std::ops::Deref for RecvBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.inner {
            // SAFETY: INVARIANT: the kernel is done with this slot until recycled.
            RecvInner::Ring { ptr, len, .. } => unsafe { std::slice::from_raw_parts(*ptr, *len) },
            RecvInner::Heap(v) => v,
        }
    }
}

impl Drop for RecvBuf {
    fn drop(&mut self) {
        if let RecvInner::Ring { ring, bid, .. } = &self.inner {
            if let Ok(mut r) = ring.try_borrow_mut() {
                r.recycle(*bid);
            }
        }
    }
}

// SAFETY: ring slots and Vec heap blocks do not move with the RecvBuf, and
// a ring slot is not recycled before the RecvBuf (and any op owning it) drops.
unsafe impl IoBuf for RecvBuf {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
    fn bytes_total(&self) -> usize {
        self.len()
    }
}
