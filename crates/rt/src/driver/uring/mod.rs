//! The io_uring backend.
//!
//! # Lifecycle of an operation
//! Each in-flight operation owns a slot in `ops`; its key is the SQE's
//! `user_data`. Reserved `user_data` values ([`CANCEL_UD`], [`WAKE_UD`],
//! [`CLOSE_UD`]) never collide with slab keys. The skipped members of a
//! send chain carry `CHAIN_TAG | index << 32 | key`; the chain posts one
//! CQE, with the tail's plain key or a failing member's tagged one.
//!
//! ```text
//!  submit ──> Submitted ──poll──> Waiting(waker) ──CQE──> Completed ──poll──> (slot freed)
//!                 │                    │
//!                 └──── future dropped ┴──> Ignored(data) ──CQE──> data.orphan_result(), slot freed
//!
//!  multishot: Multi{queue, waker, done} ──dropped──> MultiIgnored(kind) ──last CQE──> freed
//! ```
//!
//! Only this module frees an operation's buffers while the kernel may use
//! them, and it frees them only after the final CQE.

use std::cell::RefCell;
use std::io;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ringkit_uring::opcode::{self, Entry, SqeFlags, Target};
use ringkit_uring::{sys, BufRing, Builder, IoUring};

mod fixed;
mod lifecycle;
mod ops;

use fixed::FixedFiles;
pub(crate) use lifecycle::MultiKind;
use lifecycle::{dispatch, CqeQueue, Lifecycle};

use super::waiters::Waiters;
use super::DriverConfig;
use crate::metrics::Metrics;

/// `user_data` of ASYNC_CANCEL SQEs: their CQEs are ignored.
pub(crate) const CANCEL_UD: u64 = u64::MAX;
/// `user_data` of the multishot poll on the remote-wake eventfd.
pub(crate) const WAKE_UD: u64 = u64::MAX - 1;
/// `user_data` of CLOSE SQEs for dropped sockets and files.
pub(crate) const CLOSE_UD: u64 = u64::MAX - 2;

/// Tag of the `user_data` of a skipped chain's members: `CHAIN_TAG |
/// index << 32 | key` (slab keys stay far below 2^32; the reserved values
/// above are matched first).
const CHAIN_TAG: u64 = 1 << 61;

/// Buffer group id of the runtime's provided-buffer ring.
pub(crate) const BGID: u16 = 0;

/// Opcodes the runtime needs; without one of them `Auto` picks epoll.
const REQUIRED_OPS: &[u8] = &[
    sys::IORING_OP_NOP,
    sys::IORING_OP_READ,
    sys::IORING_OP_WRITE,
    sys::IORING_OP_READV,
    sys::IORING_OP_WRITEV,
    sys::IORING_OP_SEND,
    sys::IORING_OP_RECV,
    sys::IORING_OP_SENDMSG,
    sys::IORING_OP_RECVMSG,
    sys::IORING_OP_ACCEPT,
    sys::IORING_OP_CONNECT,
    sys::IORING_OP_SHUTDOWN,
    sys::IORING_OP_CLOSE,
    sys::IORING_OP_OPENAT,
    sys::IORING_OP_STATX,
    sys::IORING_OP_FSYNC,
    sys::IORING_OP_SYNC_FILE_RANGE,
    sys::IORING_OP_POLL_ADD,
    sys::IORING_OP_ASYNC_CANCEL,
];

/// Bytes of received buffers one stream may leave unread before its
/// multishot receive pauses (see [`UringDriver::submit_multi`]): 64 of the
/// default 4 KiB buffers, about what a socket's receive buffer holds
/// before TCP's window closes on an unread connection.
pub(crate) const RECV_QUEUE_BYTES: u32 = 256 * 1024;

/// The thread-owned io_uring state.
#[derive(Debug)]
pub(crate) struct UringDriver {
    // Field order is drop order: the buffer ring unregisters from the ring,
    // so it must go before the ring's fd is closed.
    bufs: Option<Rc<RefCell<BufRing>>>,
    /// Feature `experiments`: the send levers' and batched waits' state
    /// (holds send rings, so it goes before the ring too).
    #[cfg(feature = "experiments")]
    pub(super) levers: super::experiments::UringLevers,
    ring: IoUring,
    ops: slab::Slab<Lifecycle>,
    wake_fd: RawFd,
    /// Hosted mode: an eventfd the kernel signals when completions (or,
    /// with `DEFER_TASKRUN`, task work that will post them) arrive
    /// (`IORING_REGISTER_EVENTFD`); created on first use.
    notify_fd: Option<std::os::fd::OwnedFd>,
    /// Hosted mode: queued SQEs kick the host loop.
    hosted: bool,
    wake_armed: bool,
    buf_count: u16,
    buf_size: u32,
    skip_success: bool,
    /// Multishot receives ask for bundles (`IORING_RECVSEND_BUNDLE`).
    recv_bundle: bool,
    /// The kernel takes a multishot receive's byte limit (`optlen`); set
    /// false at the first `EINVAL` that says it does not.
    recv_limit: bool,
    /// The registered file table (created on first use).
    fixed: FixedFiles,
}

impl UringDriver {
    /// Try the best flag sets in order. On failure: (reason, attempts).
    pub(crate) fn new(
        cfg: &DriverConfig,
        wake_fd: RawFd,
    ) -> Result<(UringDriver, Vec<String>), (String, Vec<String>)> {
        // A hosted ring never uses DEFER_TASKRUN (`Builder::build` refuses
        // it when asked; `hosted.rs` says why).
        let defer = sys::IORING_SETUP_DEFER_TASKRUN;
        let candidates: Vec<u32> = match cfg.flags {
            Some(f) => vec![f],
            None if cfg.hosted => vec![
                sys::IORING_SETUP_COOP_TASKRUN | sys::IORING_SETUP_TASKRUN_FLAG,
                0,
            ],
            None => vec![
                sys::IORING_SETUP_SINGLE_ISSUER | defer | sys::IORING_SETUP_TASKRUN_FLAG,
                sys::IORING_SETUP_COOP_TASKRUN | sys::IORING_SETUP_TASKRUN_FLAG,
                0,
            ],
        };
        let mut attempts = Vec::new();
        let mut last_err = None;
        let mut ring = None;
        for flags in candidates {
            let b = Builder::new(cfg.entries)
                .flags(flags | sys::IORING_SETUP_CLAMP)
                .cqsize(cfg.entries.saturating_mul(4))
                .strict(true)
                .register_ring_fd(true);
            match b.build() {
                Ok(r) => {
                    ring = Some(r);
                    break;
                }
                Err(e) => {
                    attempts.push(format!(
                        "{}: {e}",
                        ringkit_uring::flag_names(flags, sys::SETUP_FLAG_NAMES)
                    ));
                    last_err = Some(e);
                }
            }
        }
        let Some(ring) = ring else {
            let e = last_err.unwrap_or_else(|| io::Error::other("no flag set tried"));
            return Err((ringkit_uring::explain_setup_error(&e), attempts));
        };
        match ring.probe() {
            Ok(p) => {
                let missing: Vec<&str> = REQUIRED_OPS
                    .iter()
                    .filter(|&&op| !p.is_supported(op))
                    .map(|&op| sys::OP_NAMES[op as usize])
                    .collect();
                if !missing.is_empty() {
                    return Err((
                        format!(
                            "this kernel's io_uring lacks opcodes: {}",
                            missing.join(", ")
                        ),
                        attempts,
                    ));
                }
            }
            Err(e) => return Err((format!("io_uring probe failed: {e}"), attempts)),
        }
        let skip_success = ring.features() & sys::IORING_FEAT_CQE_SKIP != 0;
        let recv_bundle =
            cfg.recv_bundle && ring.features() & sys::IORING_FEAT_RECVSEND_BUNDLE != 0;
        #[cfg(feature = "experiments")]
        let levers =
            super::experiments::UringLevers::new(cfg.experiments, &ring, skipped_chains_hold());
        let mut d = UringDriver {
            ring,
            ops: slab::Slab::with_capacity(256),
            wake_fd,
            notify_fd: None,
            hosted: cfg.hosted,
            wake_armed: false,
            bufs: None,
            #[cfg(feature = "experiments")]
            levers,
            buf_count: cfg.buf_count,
            buf_size: cfg.buf_size,
            skip_success,
            recv_bundle,
            recv_limit: true,
            fixed: FixedFiles::new(cfg.fixed_files),
        };
        if let Err(e) = d.arm_wake(&Metrics::default()) {
            return Err((format!("could not arm the wake-up poll: {e}"), attempts));
        }
        Ok((d, attempts))
    }

    /// Feature `experiments`: an empty send ring for one send bundle.
    #[cfg(feature = "experiments")]
    pub(super) fn send_ring(&mut self, m: &Metrics) -> Option<super::experiments::PooledSendRing> {
        self.levers.send_ring(&self.ring, m)
    }

    /// Buffers a stream may leave unread before its multishot receive is
    /// paused: [`RECV_QUEUE_BYTES`] of them, at most a quarter of the ring
    /// (but at least 4: on a ring of fewer than 16 buffers a stream may
    /// take more, and `ENOBUFS` stands in).
    fn recv_cap(&self) -> u32 {
        (RECV_QUEUE_BYTES / self.buf_size.max(1))
            .min(u32::from(self.buf_count) / 4)
            .max(4)
    }

    /// The byte limit a new multishot receive gets (0: none, the kernel
    /// has no such limit): the kernel ends it there, so one arming can
    /// never take more of the ring than a stream's cap, however many
    /// buffers the kernel fills between two reaps.
    pub(crate) fn recv_limit(&self) -> u32 {
        if self.recv_limit {
            self.recv_cap().saturating_mul(self.buf_size)
        } else {
            0
        }
    }

    /// A multishot receive with a byte limit failed with `EINVAL`: this
    /// kernel has no such limit (Linux 6.17 added it); arm without.
    pub(crate) fn no_recv_limit(&mut self) {
        self.recv_limit = false;
    }

    /// Whether multishot receives take bundles of buffers.
    pub(crate) fn recv_bundle(&self) -> bool {
        self.recv_bundle
    }

    pub(crate) fn ops_in_flight(&self) -> usize {
        self.ops.len()
    }

    pub(crate) fn setup_flags(&self) -> u32 {
        self.ring.setup_flags()
    }

    pub(crate) fn entries(&self) -> (u32, u32) {
        (self.ring.params().sq_entries, self.ring.params().cq_entries)
    }

    pub(crate) fn ring_registered(&self) -> bool {
        self.ring.ring_fd_registered()
    }

    pub(crate) fn enter_count(&self) -> u64 {
        self.ring.enter_count()
    }

    /// The runtime's provided-buffer ring (created on first use).
    pub(crate) fn buf_ring(&mut self) -> io::Result<Rc<RefCell<BufRing>>> {
        if let Some(b) = &self.bufs {
            return Ok(b.clone());
        }
        let br = BufRing::new(&self.ring, BGID, self.buf_count, self.buf_size)?;
        let b = Rc::new(RefCell::new(br));
        self.bufs = Some(b.clone());
        Ok(b)
    }

    fn arm_wake(&mut self, m: &Metrics) -> io::Result<()> {
        let e = opcode::PollAdd::new(Target::Fd(self.wake_fd), libc::POLLIN as u32)
            .multi(true)
            .build()
            .user_data(WAKE_UD);
        self.push(e, m)?;
        self.wake_armed = true;
        Ok(())
    }

    /// Push an SQE, making room if the SQ is full (submit; on `EBUSY`, reap first).
    fn push(&mut self, e: Entry, m: &Metrics) -> io::Result<()> {
        loop {
            // SAFETY: every entry pushed by the runtime points only into memory
            // owned by its operation's slot data (or static/ring memory), which
            // the lifecycle keeps alive until the CQE (module docs).
            match unsafe { self.ring.push(e.sqe()) } {
                Ok(()) => {
                    Metrics::add(&m.sqes, 1);
                    // Hosted mode: an SQE queued by tokio's side while the
                    // loop waits idle must end the wait (only a park
                    // submits it).
                    if self.hosted {
                        crate::kick::kick_host();
                    }
                    return Ok(());
                }
                Err(_full) => match self.ring.submit() {
                    Ok(_) => {}
                    Err(err) if err.raw_os_error() == Some(libc::EBUSY) => self.reap(m)?,
                    Err(err) if err.raw_os_error() == Some(libc::EINTR) => {}
                    Err(err) => return Err(err),
                },
            }
        }
    }

    /// Submit until the SQ has `need` free entries, so that the next `need`
    /// pushes go in together (a linked group is never split across
    /// submissions). As `push` does: on `EBUSY` (CQ overflowing) reap, on
    /// `EINTR` retry; any other error is returned and nothing is pushed.
    fn make_room(&mut self, need: u32, m: &Metrics) -> io::Result<()> {
        while self.ring.sq().space_left() < need {
            if self.ring.sq().pending() == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("a group of {need} linked SQEs does not fit the submission queue"),
                ));
            }
            match self.ring.submit() {
                Ok(_) => {}
                Err(err) if err.raw_os_error() == Some(libc::EBUSY) => self.reap(m)?,
                Err(err) if err.raw_os_error() == Some(libc::EINTR) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    /// Queue `e` as a new single-shot operation; returns its key.
    pub(crate) fn submit(
        &mut self,
        e: Entry,
        link_timeout: Option<*const sys::KernelTimespec>,
        m: &Metrics,
    ) -> io::Result<usize> {
        let key = self.ops.insert(Lifecycle::Submitted);
        let e = e.user_data(key as u64);
        let res = match link_timeout {
            None => self.push(e, m),
            Some(ts) => {
                // The pair must not be split by a submit (the request would
                // run without its timeout): room for both, or an error.
                self.make_room(2, m).and_then(|()| {
                    self.push(e.flags(SqeFlags::IO_LINK), m)?;
                    self.push(opcode::LinkTimeout::new(ts).build().user_data(CANCEL_UD), m)
                })
            }
        };
        if let Err(err) = res {
            self.ops.remove(key);
            return Err(err);
        }
        Ok(key)
    }

    /// Queue `members` then `tail` as one chain: each member linked to the
    /// next and its success CQE skipped, so the chain posts exactly one CQE
    /// (the tail's, or the first failing member's; `skipped_chains_hold`
    /// was checked before any op asks for this). The chain is never split
    /// by a submit: the SQ gets room for all of it first. Returns the key.
    pub(crate) fn submit_chain(
        &mut self,
        members: Vec<Entry>,
        tail: Entry,
        m: &Metrics,
    ) -> io::Result<usize> {
        let need = members.len() as u32 + 1;
        self.make_room(need, m)?;
        let key = self.ops.insert(Lifecycle::Submitted);
        let member = SqeFlags::IO_LINK | SqeFlags::CQE_SKIP_SUCCESS;
        for (i, e) in members.into_iter().enumerate() {
            let ud = CHAIN_TAG | (i as u64) << 32 | key as u64;
            // Cannot fail: the room was made above, so push never submits.
            self.push(e.flags(member).user_data(ud), m)?;
        }
        self.push(tail.user_data(key as u64), m)?;
        Metrics::add(&m.send_chain_links, u64::from(need - 1));
        Ok(key)
    }

    /// Queue `e` as a multishot operation of `kind`; returns its key.
    ///
    /// A receive is paused (cancelled) once [`RECV_QUEUE_BYTES`] of its
    /// buffers wait unread: a task that reads slower than its peer sends
    /// (held by its budget, closing, or just not reading) would otherwise
    /// let the kernel drain the socket into the shared buffer ring without
    /// bound, where on epoll the socket's own buffer fills and TCP holds
    /// the peer back. The owner re-arms when it has read the queue.
    pub(crate) fn submit_multi(
        &mut self,
        e: Entry,
        kind: MultiKind,
        m: &Metrics,
    ) -> io::Result<usize> {
        let cap = match kind {
            MultiKind::Recv => self.recv_cap(),
            MultiKind::Accept => 0,
        };
        let key = self.ops.insert(Lifecycle::Multi {
            queue: CqeQueue::default(),
            wakers: Waiters::default(),
            done: false,
            cap,
            pausing: false,
        });
        if let Err(err) = self.push(e.user_data(key as u64), m) {
            self.ops.remove(key);
            return Err(err);
        }
        Ok(key)
    }

    /// Submit what is queued (so cancels of ops on `fd` run), then close(2).
    pub(crate) fn close_now(&mut self, fd: RawFd, m: &Metrics) {
        if self.ring.sq().pending() > 0 {
            let _ = self.ring.submit();
        }
        // SAFETY: the caller owned fd and gives it up.
        unsafe { libc::close(fd) };
        Metrics::add(&m.syscalls, 1);
    }

    /// Queue a CLOSE of `t` whose success posts no CQE (when the kernel can).
    fn push_close(&mut self, t: Target, m: &Metrics) -> io::Result<()> {
        let mut e = opcode::Close::new(t).build().user_data(CLOSE_UD);
        if self.skip_success {
            e = e.flags(SqeFlags::CQE_SKIP_SUCCESS);
        }
        self.push(e, m)
    }

    /// Close `fd` through the ring (batched with the next enter).
    pub(crate) fn close_fd(&mut self, fd: RawFd, m: &Metrics) {
        if self.push_close(Target::Fd(fd), m).is_err() {
            // SAFETY: we own fd and nobody uses it any more.
            unsafe { libc::close(fd) };
            Metrics::add(&m.syscalls, 1);
        }
    }

    /// SQEs queued but not yet submitted (a park after the reap that
    /// re-armed a multishot, say): a host loop must park again, not wait.
    pub(crate) fn sq_pending(&mut self) -> bool {
        self.ring.sq().pending() > 0
    }

    /// An fd that turns readable when a turn of [`park`](Self::park) with
    /// a zero timeout would find completions: an eventfd registered with
    /// the ring (created on first call). The kernel signals it when a CQE
    /// is posted. (Hosted rings never use `DEFER_TASKRUN`: see `new`.)
    pub(crate) fn readiness_fd(&mut self) -> io::Result<RawFd> {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        if let Some(fd) = &self.notify_fd {
            return Ok(fd.as_raw_fd());
        }
        // SAFETY: plain eventfd creation.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh fd we own.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        self.ring.register_eventfd(fd)?;
        self.notify_fd = Some(owned);
        Ok(fd)
    }

    /// One driver turn: submit everything queued and, if `timeout` is not
    /// zero, wait for a completion (at most `timeout`; `None`: no limit);
    /// then reap every CQE.
    pub(crate) fn park(&mut self, timeout: Option<Duration>, m: &Metrics) -> io::Result<()> {
        // Feature `experiments`: whether to wait for a batch of
        // completions (`BatchWait`); without it, never.
        #[cfg(feature = "experiments")]
        let batch = self.levers.batch(self.ops.len() as u32, timeout, m);
        #[cfg(not(feature = "experiments"))]
        let batch: Option<(u32, Duration)> = None;
        loop {
            let res = match timeout {
                Some(d) if d.is_zero() => {
                    if self.ring.sq().pending() > 0 || self.ring.cq_needs_enter() {
                        self.ring.submit()
                    } else {
                        Ok(0)
                    }
                }
                Some(d) => match batch {
                    Some((want, min)) => self.ring.submit_and_wait_min(want, min, Some(d)),
                    None => self.ring.submit_and_wait_timeout(1, d),
                },
                None => match batch {
                    // With no deadline the kernel ends the wait when the
                    // minimum runs out even if nothing completed: then
                    // wait for one, as an unbatched park does (an idle loop
                    // would otherwise wake every `min`).
                    Some((want, min)) => match self.ring.submit_and_wait_min(want, min, None) {
                        Ok(_) if self.ring.cq().ready() == 0 && !self.ring.cq_needs_enter() => {
                            self.ring.submit_and_wait(1)
                        }
                        r => r,
                    },
                    None => self.ring.submit_and_wait(1),
                },
            };
            match res {
                Ok(_) => {
                    if self.ring.sq().pending() == 0 {
                        self.fixed.sq_submitted();
                    }
                    break;
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => break,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    // CQ overflowing: reap to make room, then submit again.
                    self.reap(m)?;
                    continue;
                }
                Err(e) => return Err(e),
            }
        }
        #[cfg(feature = "experiments")]
        self.levers.parked();
        self.reap(m)
    }

    /// Reap every CQE (flushing overflowed ones) and wake their tasks.
    fn reap(&mut self, m: &Metrics) -> io::Result<()> {
        loop {
            let mut n = 0u64;
            let (mut buffers, mut bundled) = (0u64, 0u64);
            let mut wake_fired = None;
            let mut pauses = Vec::new();
            {
                let (ring, ops, bufs) = (&mut self.ring, &mut self.ops, &self.bufs);
                for cqe in ring.completions() {
                    n += 1;
                    match cqe.user_data {
                        CANCEL_UD | CLOSE_UD => {}
                        WAKE_UD => wake_fired = Some(cqe.more()),
                        ud if ud & CHAIN_TAG != 0 => {
                            // A chain member failed: its CQE is the chain's
                            // only one. Tell the op which member it was.
                            let index = ((ud >> 32) & 0xffff) as u16;
                            let key = (ud & 0xffff_ffff) as usize;
                            dispatch(ops, bufs, key, cqe, Some(index));
                        }
                        key => {
                            let (b, x, pause) = dispatch(ops, bufs, key as usize, cqe, None);
                            buffers += b;
                            bundled += x;
                            if pause {
                                pauses.push(key as usize);
                            }
                        }
                    }
                }
            }
            if !pauses.is_empty() {
                for &key in &pauses {
                    // Its owner left `cap` CQEs unread: cancel it, so the
                    // socket's own buffer fills and TCP holds the peer back
                    // (as on epoll); the owner re-arms once it has read
                    // what is queued (`ECANCELED` ends it).
                    self.cancel(key, m);
                    Metrics::add(&m.recv_pauses, 1);
                }
                // Submitted now, while the slot is still this operation's:
                // its owner, run before the next enter, may take a final
                // CQE already queued (the multishot ended by itself), free
                // the slot, and a new operation take the key, which a
                // cancel submitted later would hit instead.
                if self.ring.submit().is_ok() && self.ring.sq().pending() == 0 {
                    self.fixed.sq_submitted();
                }
            }
            Metrics::add(&m.cqes, n);
            Metrics::add(&m.recv_buffers, buffers);
            Metrics::add(&m.recv_bundled, bundled);
            if let Some(more) = wake_fired {
                drain_eventfd(self.wake_fd);
                Metrics::add(&m.syscalls, 1);
                if !more {
                    self.arm_wake(m)?;
                }
            }
            if self.ring.sq().cq_overflow() {
                // The kernel kept completions the CQ had no room for (NODROP):
                // flush them into the CQ and reap again. Nothing is lost.
                Metrics::add(&m.cq_overflows, 1);
                self.ring.flush_cq()?;
                continue;
            }
            return Ok(());
        }
    }

    /// Runtime shutdown: cancel everything in flight and wait (bounded) for
    /// the kernel to finish with every buffer before the ring goes away.
    pub(crate) fn shutdown(&mut self) {
        let m = Metrics::default();
        let e = opcode::AsyncCancel::new(0)
            .flags(sys::IORING_ASYNC_CANCEL_ANY | sys::IORING_ASYNC_CANCEL_ALL)
            .build()
            .user_data(CANCEL_UD);
        let _ = self.push(e, &m);
        let deadline = Instant::now() + Duration::from_secs(2);
        let live = |ops: &slab::Slab<Lifecycle>| {
            ops.iter().any(|(_, s)| {
                !matches!(
                    s,
                    Lifecycle::Completed(..) | Lifecycle::Multi { done: true, .. }
                )
            })
        };
        while live(&self.ops) && Instant::now() < deadline {
            if self.park(Some(Duration::from_millis(50)), &m).is_err() {
                break;
            }
        }
        // SQEs still queued (closes of fds dropped in the last turn, the
        // cancel itself when nothing was in flight) would go with the ring:
        // leaked fds, and peers that never see EOF. Enter once more, and
        // under SQPOLL wait (bounded) for the poller to take them.
        while self.ring.sq().pending() > 0 && Instant::now() < deadline {
            if self.ring.submit().is_err() {
                break;
            }
            if self.ring.sq().pending() > 0 {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        if live(&self.ops) {
            // The kernel may still write into these buffers: leak, never free.
            tracing::error!(
                "ringkit: operations still in flight at shutdown; leaking their buffers"
            );
            std::mem::forget(std::mem::take(&mut self.ops));
        }
        self.ops.clear();
    }
}

/// Whether this kernel posts exactly one CQE per chain of skipped links
/// (probed once per process on a small ring of its own).
fn skipped_chains_hold() -> bool {
    static HOLD: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HOLD.get_or_init(|| ringkit_uring::skipped_chain_posts_one_cqe().unwrap_or(false))
}

fn drain_eventfd(fd: RawFd) {
    let mut buf = 0u64;
    // SAFETY: reading 8 bytes into a valid u64 from our non-blocking eventfd.
    unsafe { libc::read(fd, (&mut buf as *mut u64).cast(), 8) };
}
