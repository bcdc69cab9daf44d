//! The backend contract, written once, and the choice of backend.
//!
//! Every operation is one file in `op` implementing `OpCode`: the SQE it
//! becomes on io_uring, and on epoll the readiness it waits for and the
//! non-blocking syscall it makes. `Op` is the future that drives an
//! `OpCode` on whichever backend this runtime chose; `Driver` dispatches.
//! Multishot operations (`op/accept_multi.rs`, `op/recv_multi.rs`) keep
//! their key in a `multishot::Multishot` (see its slot rule) and carry
//! their epoll fallback inside the op file. Nothing outside `driver/`
//! reaches into a backend: `net/` only asks `runtime::is_uring()` where the
//! two differ in meaning (whether reads need a stash for dropped receives,
//! and whether a read's timeout can be linked to it).
//!
//! # Choosing the backend
//! Once per runtime. `Backend::Auto` tries io_uring with the best flags
//! (`SINGLE_ISSUER|DEFER_TASKRUN`, then `COOP_TASKRUN|TASKRUN_FLAG`, then
//! none), checks the opcodes the runtime needs, and falls back to epoll when
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

pub(crate) mod epoll;
pub(crate) mod multishot;
pub(crate) mod op;
mod storage;
pub(crate) mod uring;
pub(crate) mod waiters;

use std::future::Future;
use std::io;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use ringkit_uring::opcode::Entry;

use crate::metrics::Metrics;
use crate::runtime::{try_with_ctx, with_ctx};

/// Which I/O backend a runtime uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// io_uring when usable here, else epoll (the reason is reported).
    #[default]
    Auto,
    /// io_uring or an error.
    Uring,
    /// epoll.
    Epoll,
}

impl std::str::FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Backend, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Backend::Auto),
            "uring" | "io_uring" | "iouring" => Ok(Backend::Uring),
            "epoll" => Ok(Backend::Epoll),
            other => Err(format!(
                "unknown backend {other:?} (expected auto, uring or epoll)"
            )),
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Auto => "auto",
            Backend::Uring => "uring",
            Backend::Epoll => "epoll",
        })
    }
}

/// How `TcpStream::write_all_pooled` sends a batch of buffers on io_uring
/// (epoll always makes one `sendmsg`). The levers are kept as a switch so
/// that each can be measured against the others (`ringkit compare echo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SendBatch {
    /// One `IORING_OP_SENDMSG` with an iovec per buffer: one SQE and one
    /// CQE for the batch. The default.
    #[default]
    Vectored,
    /// One `IORING_OP_SEND` per buffer, linked in order (`IOSQE_IO_LINK`),
    /// every one but the last with `IOSQE_CQE_SKIP_SUCCESS`: one CQE for the
    /// batch. Needs the kernel to post exactly one CQE per such chain
    /// (probed once, [`ringkit_uring::skipped_chain_posts_one_cqe`]);
    /// otherwise `Vectored`, with a warning.
    Linked,
    /// One `IORING_OP_SEND` with `IORING_RECVSEND_BUNDLE` from a send ring
    /// of the batch's buffers (`ringkit_uring::SendRing`, a ring per send
    /// in flight, pooled per thread): one SQE and one CQE for the batch.
    /// Needs `IORING_FEAT_RECVSEND_BUNDLE` (Linux 6.10); otherwise
    /// `Vectored`, with a warning.
    Bundle,
}

/// How a runtime sends a batch: [`SendBatch`] after the kernel had its say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendPlan {
    Vectored,
    /// Chains of at most this many sends.
    Linked(usize),
    Bundle,
}

impl std::str::FromStr for SendBatch {
    type Err = String;
    fn from_str(s: &str) -> Result<SendBatch, String> {
        match s.to_ascii_lowercase().as_str() {
            "vectored" => Ok(SendBatch::Vectored),
            "linked" => Ok(SendBatch::Linked),
            "bundle" => Ok(SendBatch::Bundle),
            other => Err(format!(
                "unknown send batch {other:?} (expected vectored, linked or bundle)"
            )),
        }
    }
}

impl std::fmt::Display for SendBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SendBatch::Vectored => "vectored",
            SendBatch::Linked => "linked",
            SendBatch::Bundle => "bundle",
        })
    }
}

/// What a runtime chose and why.
#[derive(Debug, Clone)]
pub struct BackendReport {
    /// What was asked for.
    pub requested: Backend,
    /// What runs: `Uring` or `Epoll`.
    pub chosen: Backend,
    /// `IORING_SETUP_*` flags in effect (io_uring only).
    pub uring_flags: u32,
    /// SQ / CQ entries (io_uring only).
    pub entries: (u32, u32),
    /// Whether the ring fd is registered.
    pub registered_ring: bool,
    /// Why `Auto` fell back to epoll, in plain words.
    pub fallback_reason: Option<String>,
    /// Flag sets tried before the one that worked, with the error each gave.
    pub attempts: Vec<String>,
}

impl BackendReport {
    fn epoll(requested: Backend, fallback_reason: Option<String>, attempts: Vec<String>) -> Self {
        BackendReport {
            requested,
            chosen: Backend::Epoll,
            uring_flags: 0,
            entries: (0, 0),
            registered_ring: false,
            fallback_reason,
            attempts,
        }
    }

    /// Setup flags as names (`SINGLE_ISSUER|DEFER_TASKRUN`).
    pub fn flag_names(&self) -> String {
        ringkit_uring::flag_names(self.uring_flags, ringkit_uring::sys::SETUP_FLAG_NAMES)
    }
}

impl std::fmt::Display for BackendReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.chosen {
            Backend::Uring => write!(
                f,
                "io_uring (flags {}, sq {} cq {}, registered ring fd: {})",
                self.flag_names(),
                self.entries.0,
                self.entries.1,
                self.registered_ring
            ),
            _ => match &self.fallback_reason {
                Some(r) => write!(f, "epoll (fallback: {r})"),
                None => write!(f, "epoll (requested)"),
            },
        }
    }
}

/// Driver settings from the runtime builder.
#[derive(Debug, Clone)]
pub(crate) struct DriverConfig {
    pub(crate) entries: u32,
    pub(crate) flags: Option<u32>,
    pub(crate) buf_count: u16,
    pub(crate) buf_size: u32,
    /// io_uring only: wait for this many CQEs with a minimum wait window
    /// (`IORING_FEAT_MIN_TIMEOUT`); `None` = wait for one.
    pub(crate) batch_wait: Option<(u32, std::time::Duration)>,
    /// io_uring only: slots of the registered (fixed) file table that busy
    /// sockets are promoted into; 0 = off.
    pub(crate) fixed_files: u32,
    /// io_uring only: multishot receives take several buffers per CQE
    /// (`IORING_RECVSEND_BUNDLE`) where the kernel can.
    pub(crate) recv_bundle: bool,
    /// io_uring only: how a batch of pooled buffers is sent.
    pub(crate) send_batch: SendBatch,
    /// io_uring only: the ring is waited on through a host loop's reactor
    /// (hosted mode), so `DEFER_TASKRUN` is not used (see
    /// `UringDriver::new`).
    pub(crate) hosted: bool,
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            entries: 256,
            flags: None,
            buf_count: 1024,
            buf_size: 4096,
            batch_wait: None,
            fixed_files: 0,
            recv_bundle: true,
            send_batch: SendBatch::Vectored,
            hosted: false,
        }
    }
}

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

    pub(crate) fn is_uring(&self) -> bool {
        matches!(self, Driver::Uring(_))
    }

    /// io_uring: the runtime's provided-buffer ring (created on first use),
    /// and whether multishot receives may take bundles of its buffers.
    pub(crate) fn buf_ring(
        &mut self,
    ) -> io::Result<(
        std::rc::Rc<std::cell::RefCell<ringkit_uring::BufRing>>,
        bool,
    )> {
        match self {
            Driver::Uring(d) => Ok((d.buf_ring()?, d.recv_bundle())),
            Driver::Epoll(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "provided-buffer rings need the io_uring backend",
            )),
        }
    }

    /// How batches of pooled buffers are sent (always vectored on epoll).
    pub(crate) fn send_plan(&self) -> SendPlan {
        match self {
            Driver::Uring(d) => d.send_plan(),
            Driver::Epoll(_) => SendPlan::Vectored,
        }
    }

    /// io_uring, `SendPlan::Bundle`: an empty send ring for one batch, or
    /// `None` (send it vectored).
    pub(crate) fn send_ring(&mut self, m: &Metrics) -> Option<uring::PooledSendRing> {
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

    /// io_uring only, before the SQE is built: `Some(r)` completes the op
    /// at once with `r`, made in place (one syscall, counted by the
    /// driver); `None` goes to the ring. For operations the ring would
    /// hand to an io-wq thread although they rarely block (`splice`,
    /// `sendfile`). epoll never calls it: its `epoll_attempt` is in place
    /// already.
    fn uring_try_inline(&mut self) -> Option<io::Result<u32>> {
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

#[derive(Debug, Clone, Copy)]
enum State {
    Init,
    Uring(usize),
    Epoll,
    Done,
}

/// The future of one operation.
pub(crate) struct Op<T: OpCode> {
    data: Option<T>,
    state: State,
    /// Its deadline passed and a cancel was queued ([`Op::expire`]).
    expired: bool,
}

// `Op` never relies on being pinned: the kernel only sees heap memory owned
// by `data` (the `OpCode` contract), which does not move with the `Op`.
impl<T: OpCode> Unpin for Op<T> {}

impl<T: OpCode> Op<T> {
    pub(crate) fn new(data: T) -> Op<T> {
        Op {
            data: Some(data),
            state: State::Init,
            expired: false,
        }
    }

    /// The operation's deadline passed. Not started, or on epoll (nothing
    /// in flight between polls): it completes now, with `TimedOut`, and
    /// must not be polled again. In flight on io_uring: a cancel is queued
    /// and `None` returned; keep polling: the CQE completes it, `TimedOut`
    /// if the cancel won, its own result if the operation finished first.
    pub(crate) fn expire(&mut self) -> Option<T::Output> {
        match self.state {
            State::Init | State::Epoll => {
                self.state = State::Done;
                let data = self.data.take()?;
                Some(data.complete(Err(timed_out()), 0))
            }
            State::Uring(key) => {
                self.expired = true;
                let members = self.data.as_ref().map_or(0, T::uring_chain_len);
                try_with_ctx(|rt| {
                    if let Driver::Uring(u) = &mut *rt.driver.borrow_mut() {
                        u.cancel_live(key, members, &rt.metrics);
                    }
                });
                None
            }
            State::Done => None,
        }
    }

    /// Give up an operation that the kernel does not hold (not started, or
    /// on epoll, where nothing is in flight between polls) and get its data
    /// (and so its buffers) back. `None` if it is in flight on io_uring or
    /// has completed: then only dropping it (which orphans it) is safe.
    pub(crate) fn take_unsubmitted(mut self) -> Option<T> {
        match self.state {
            State::Init | State::Epoll => self.data.take(),
            State::Uring(_) | State::Done => None,
        }
    }
}

fn timed_out() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "no progress within the operation's time limit",
    )
}

/// Limits from this long up count from the loop turn's clock.
const COARSE_FROM: Duration = Duration::from_secs(5);

/// Run `op`, bounded by `limit` (`None`: unbounded): an operation that has
/// not completed when `limit` passes fails with `TimedOut` and its buffers
/// come back (see [`Op::expire`]). A write that moves any byte completes,
/// so a loop of such writes, each bounded, is bounded by the time without
/// progress (nginx's `send_timeout`), not by the total.
pub(crate) async fn op_within<T: OpCode>(op: T, limit: Option<Duration>) -> T::Output {
    let Some(limit) = limit else {
        return Op::new(op).await;
    };
    let mut op = Op::new(op);
    // Made only once the operation has to wait (an epoll write to a socket
    // with room completes in its first poll), from the loop turn's clock:
    // a send timeout is set on every write, and needs no precision.
    let mut sleep: Option<crate::time::Sleep> = None;
    std::future::poll_fn(|cx| {
        if let Poll::Ready(out) = Pin::new(&mut op).poll(cx) {
            return Poll::Ready(out);
        }
        if op.expired {
            return Poll::Pending;
        }
        let s = sleep.get_or_insert_with(|| {
            // A long limit counts from the turn's clock (early by at most
            // the current turn's length, nothing next to seconds); a short
            // one from the real clock.
            let from = if limit >= COARSE_FROM {
                crate::time::coarse_now()
            } else {
                std::time::Instant::now()
            };
            match from.checked_add(limit) {
                Some(at) => crate::time::sleep_until(at),
                None => crate::time::sleep(limit), // never
            }
        });
        if Pin::new(s).poll(cx).is_ready() {
            if let Some(out) = op.expire() {
                return Poll::Ready(out);
            }
        }
        Poll::Pending
    })
    .await
}

fn to_result(res: i32) -> io::Result<u32> {
    if res < 0 {
        Err(io::Error::from_raw_os_error(-res))
    } else {
        Ok(res as u32)
    }
}

impl<T: OpCode> Future for Op<T> {
    type Output = T::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T::Output> {
        let this = &mut *self;
        let data = this.data.as_mut().expect("Op polled after completion");
        if let State::Init = this.state {
            match data.before(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(r)) => {
                    this.state = State::Done;
                    let data = this.data.take().expect("data present");
                    return Poll::Ready(data.complete(r, 0));
                }
                Poll::Ready(None) => {}
            }
        }
        let res = with_ctx(|rt| {
            let mut drv = rt.driver.borrow_mut();
            match &mut *drv {
                Driver::Uring(u) => match this.state {
                    State::Init => {
                        if let Some(r) = data.uring_try_inline() {
                            Metrics::add(&rt.metrics.syscalls, 1);
                            return Poll::Ready((r, INLINE));
                        }
                        let chain = data.uring_chain();
                        let key = if chain.is_empty() {
                            u.submit(data.uring_entry(), data.uring_link_timeout(), &rt.metrics)
                        } else {
                            u.submit_chain(chain, data.uring_entry(), &rt.metrics)
                        };
                        match key {
                            Ok(key) => {
                                this.state = State::Uring(key);
                                u.set_waker(key, cx.waker());
                                Poll::Pending
                            }
                            Err(e) => Poll::Ready((Err(e), NOT_SUBMITTED)),
                        }
                    }
                    State::Uring(key) => match u.poll_op(key, cx) {
                        Poll::Ready((res, flags)) => Poll::Ready((to_result(res), flags)),
                        Poll::Pending => Poll::Pending,
                    },
                    _ => unreachable!("uring op in epoll state"),
                },
                Driver::Epoll(e) => {
                    this.state = State::Epoll;
                    let ready = data.epoll_ready();
                    if let Some((fd, dir)) = ready {
                        if !e.is_ready(fd, dir) {
                            return match e.wait_ready(fd, dir, cx.waker(), &rt.metrics) {
                                Ok(()) => Poll::Pending,
                                Err(err) => Poll::Ready((Err(err), 0)),
                            };
                        }
                    }
                    loop {
                        Metrics::add(&rt.metrics.syscalls, 1);
                        match data.epoll_attempt() {
                            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                                let Some((fd, dir)) = ready else {
                                    return Poll::Ready((Err(err), 0));
                                };
                                e.clear_ready(fd, dir);
                                return match e.wait_ready(fd, dir, cx.waker(), &rt.metrics) {
                                    Ok(()) => Poll::Pending,
                                    Err(err) => Poll::Ready((Err(err), 0)),
                                };
                            }
                            Ok(n) => {
                                if let Some((fd, dir)) = ready {
                                    if data.epoll_drained(n) {
                                        e.clear_ready(fd, dir);
                                    }
                                }
                                return Poll::Ready((Ok(n), 0));
                            }
                            Err(err) => return Poll::Ready((Err(err), 0)),
                        }
                    }
                }
            }
        });
        match res {
            Poll::Ready((r, flags)) => {
                let r = match r {
                    Err(e) if this.expired && e.raw_os_error() == Some(libc::ECANCELED) => {
                        Err(timed_out())
                    }
                    r => r,
                };
                this.state = State::Done;
                let data = this.data.take().expect("data present");
                Poll::Ready(data.complete(r, flags))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: OpCode> Drop for Op<T> {
    fn drop(&mut self) {
        let State::Uring(key) = self.state else {
            return;
        };
        let Some(data) = self.data.take() else {
            return;
        };
        let mut data = Some(data);
        let _ = try_with_ctx(|rt| {
            if let Ok(mut drv) = rt.driver.try_borrow_mut() {
                if let Driver::Uring(u) = &mut *drv {
                    u.orphan(key, data.take().expect("data present"), &rt.metrics);
                }
            }
        });
        if let Some(d) = data {
            // No driver to hand it to: the kernel may still use its memory,
            // so leak it rather than free it under the kernel's feet.
            std::mem::forget(d);
        }
    }
}
