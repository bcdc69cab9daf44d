//! Ring setup (flags, fallback, mmap) and the submit/wait entry points.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::Duration;

use crate::cqueue::{CompletionQueue, Completions, Cqe};
use crate::squeue::{SqFull, SubmissionQueue};
use crate::sys::{self, IoUringParams, IoUringSqe};

/// Flags the builder may drop, newest kernel feature first, when the kernel
/// answers `EINVAL`. They change performance, never meaning.
const STRIPPABLE: &[u32] = &[
    sys::IORING_SETUP_NO_SQARRAY,
    sys::IORING_SETUP_DEFER_TASKRUN,
    sys::IORING_SETUP_SINGLE_ISSUER,
    sys::IORING_SETUP_TASKRUN_FLAG,
    sys::IORING_SETUP_COOP_TASKRUN,
    sys::IORING_SETUP_SUBMIT_ALL,
];

/// Names of the bits set in `flags`, from a `(bit, name)` table, joined by `|`.
pub fn flag_names(flags: u32, table: &[(u32, &str)]) -> String {
    let names: Vec<&str> = table
        .iter()
        .filter(|(bit, _)| flags & bit != 0)
        .map(|(_, n)| *n)
        .collect();
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join("|")
    }
}

/// Builds an [`IoUring`] with setup flags.
///
/// Performance flags (`SUBMIT_ALL`, `COOP_TASKRUN`, `TASKRUN_FLAG`,
/// `SINGLE_ISSUER`, `DEFER_TASKRUN`, `NO_SQARRAY`) are stripped one by one,
/// newest first, when the kernel refuses the set with `EINVAL`, unless
/// [`strict`](Self::strict) is set. [`IoUring::setup_flags`] reports what took
/// effect and [`IoUring::stripped_flags`] what was dropped.
#[derive(Debug, Clone)]
pub struct Builder {
    entries: u32,
    params: IoUringParams,
    strict: bool,
    register_ring_fd: bool,
}

impl Builder {
    /// A builder for a ring with `entries` SQ entries (rounded up to a power of two by the kernel).
    pub fn new(entries: u32) -> Self {
        Builder {
            entries,
            params: IoUringParams::default(),
            strict: false,
            register_ring_fd: false,
        }
    }

    /// Add raw `IORING_SETUP_*` flags.
    pub fn flags(mut self, flags: u32) -> Self {
        self.params.flags |= flags;
        self
    }

    /// `IORING_SETUP_SQPOLL`: a kernel thread polls the SQ; it sleeps after
    /// `idle` without work (the wake-up costs a syscall).
    pub fn sqpoll(mut self, idle: Duration) -> Self {
        self.params.flags |= sys::IORING_SETUP_SQPOLL;
        // Round up: 0 would mean the kernel default (1 s), not "as short as possible".
        let ms = idle.as_nanos().div_ceil(1_000_000).max(1);
        self.params.sq_thread_idle = ms.min(u32::MAX as u128) as u32;
        self
    }

    /// `IORING_SETUP_SQ_AFF`: pin the SQPOLL thread to `cpu`.
    pub fn sqpoll_cpu(mut self, cpu: u32) -> Self {
        self.params.flags |= sys::IORING_SETUP_SQ_AFF;
        self.params.sq_thread_cpu = cpu;
        self
    }

    /// `IORING_SETUP_IOPOLL`: busy-poll for completions (O_DIRECT on polled devices only).
    pub fn iopoll(self) -> Self {
        self.flags(sys::IORING_SETUP_IOPOLL)
    }

    /// `IORING_SETUP_CQSIZE`: a CQ of `entries` (default: twice the SQ).
    pub fn cqsize(mut self, entries: u32) -> Self {
        self.params.flags |= sys::IORING_SETUP_CQSIZE;
        self.params.cq_entries = entries;
        self
    }

    /// `IORING_SETUP_CLAMP`: clamp oversized entry counts instead of failing.
    pub fn clamp(self) -> Self {
        self.flags(sys::IORING_SETUP_CLAMP)
    }

    /// `IORING_SETUP_SUBMIT_ALL`: keep submitting a batch after an SQE fails.
    pub fn submit_all(self) -> Self {
        self.flags(sys::IORING_SETUP_SUBMIT_ALL)
    }

    /// `IORING_SETUP_COOP_TASKRUN`: no IPI to run task work; it runs at the next enter.
    pub fn coop_taskrun(self) -> Self {
        self.flags(sys::IORING_SETUP_COOP_TASKRUN)
    }

    /// `IORING_SETUP_TASKRUN_FLAG`: the kernel sets `IORING_SQ_TASKRUN` when task work waits.
    pub fn taskrun_flag(self) -> Self {
        self.flags(sys::IORING_SETUP_TASKRUN_FLAG)
    }

    /// `IORING_SETUP_SINGLE_ISSUER`: only the creating thread submits.
    pub fn single_issuer(self) -> Self {
        self.flags(sys::IORING_SETUP_SINGLE_ISSUER)
    }

    /// `IORING_SETUP_DEFER_TASKRUN` (needs `SINGLE_ISSUER`): task work runs only
    /// when we enter with `GETEVENTS`.
    pub fn defer_taskrun(self) -> Self {
        self.flags(sys::IORING_SETUP_DEFER_TASKRUN | sys::IORING_SETUP_SINGLE_ISSUER)
    }

    /// `IORING_SETUP_NO_SQARRAY`: no SQ index array; SQEs are consumed in order.
    pub fn no_sqarray(self) -> Self {
        self.flags(sys::IORING_SETUP_NO_SQARRAY)
    }

    /// `IORING_SETUP_SQE128`: 128-byte SQEs.
    pub fn sqe128(self) -> Self {
        self.flags(sys::IORING_SETUP_SQE128)
    }

    /// `IORING_SETUP_CQE32`: 32-byte CQEs.
    pub fn cqe32(self) -> Self {
        self.flags(sys::IORING_SETUP_CQE32)
    }

    /// Fail with `EINVAL` instead of stripping refused performance flags.
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Register the ring fd (`IORING_REGISTER_RING_FDS`) so every enter skips
    /// the fd lookup. Silently not done on kernels without it; see
    /// [`IoUring::ring_fd_registered`].
    pub fn register_ring_fd(mut self, yes: bool) -> Self {
        self.register_ring_fd = yes;
        self
    }

    /// Create the ring.
    pub fn build(&self) -> io::Result<IoUring> {
        let mut params = self.params;
        let mut stripped = 0;
        let mut strip_at = 0;
        let fd = loop {
            let mut p = params;
            // SAFETY: `p` is a valid, writable params struct.
            match unsafe { sys::io_uring_setup(self.entries, &mut p) } {
                Ok(fd) => {
                    params = p;
                    break fd;
                }
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) && !self.strict => {
                    // Drop the next strippable flag that is set, newest first.
                    let next = STRIPPABLE[strip_at..]
                        .iter()
                        .position(|f| params.flags & f != 0);
                    match next {
                        Some(i) => {
                            let f = STRIPPABLE[strip_at + i];
                            params.flags &= !f;
                            stripped |= f;
                            strip_at += i + 1;
                        }
                        None => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
        };
        // SAFETY: io_uring_setup returned a fresh fd that nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut ring = IoUring::map(fd, params, stripped)?;
        if self.register_ring_fd {
            // Older kernels lack IORING_REGISTER_RING_FDS; the plain fd still works.
            let _ = ring.register_ring_fd();
        }
        Ok(ring)
    }
}

/// One `mmap`ed region, unmapped on drop.
#[derive(Debug)]
struct Mmap {
    // INVARIANT: `ptr..ptr+len` is a live mapping owned by this value.
    ptr: *mut libc::c_void,
    len: usize,
}

impl Mmap {
    fn new(fd: RawFd, len: usize, offset: i64) -> io::Result<Mmap> {
        // SAFETY: a fresh shared mapping of the ring fd; the kernel validates
        // `offset` and `len`, and we own the result.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                offset,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mmap { ptr, len })
    }

    /// A pointer `off` bytes into the mapping.
    fn at<T>(&self, off: u32) -> *mut T {
        debug_assert!((off as usize) < self.len);
        // SAFETY: `off` is a kernel-given offset inside the mapping.
        unsafe { self.ptr.cast::<u8>().add(off as usize).cast() }
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: INVARIANT: we own this mapping and nothing refers to it any more.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// An io_uring instance: the ring fd, its mapped SQ and CQ, and the SQE array.
///
/// Not `Send`: a ring belongs to the thread that made it (`SINGLE_ISSUER`,
/// registered ring fds and `DEFER_TASKRUN` are all per-thread).
#[derive(Debug)]
pub struct IoUring {
    sq: SubmissionQueue,
    cq: CompletionQueue,
    params: IoUringParams,
    stripped: u32,
    /// fd (or registered index) passed to `io_uring_enter`.
    enter_fd: i32,
    /// `IORING_ENTER_REGISTERED_RING` once the ring fd is registered.
    enter_flags: u32,
    /// `io_uring_enter` calls made through this ring (a metric).
    enters: std::cell::Cell<u64>,
    // Field order: the mappings are unmapped before the fd is closed.
    _sq_map: Mmap,
    _cq_map: Option<Mmap>,
    _sqe_map: Mmap,
    /// Shared with the buffer groups registered on this ring, so that a
    /// group dropped after the ring still acts on this ring and no other
    /// (the fd number could otherwise be reused by the next ring).
    fd: Arc<OwnedFd>,
}

impl IoUring {
    /// A ring with `entries` SQEs and default flags.
    pub fn new(entries: u32) -> io::Result<IoUring> {
        Builder::new(entries).build()
    }

    /// A [`Builder`] for a ring with `entries` SQEs.
    pub fn builder(entries: u32) -> Builder {
        Builder::new(entries)
    }

    fn map(fd: OwnedFd, p: IoUringParams, stripped: u32) -> io::Result<IoUring> {
        let raw = fd.as_raw_fd();
        let sqe_shift = u32::from(p.flags & sys::IORING_SETUP_SQE128 != 0);
        let cqe_shift = u32::from(p.flags & sys::IORING_SETUP_CQE32 != 0);
        let sq_len = if p.flags & sys::IORING_SETUP_NO_SQARRAY != 0 {
            // No index array: the SQ header ends before the CQ ring; cover its flags word.
            p.sq_off.flags as usize + 4
        } else {
            p.sq_off.array as usize + p.sq_entries as usize * 4
        };
        let cq_len = p.cq_off.cqes as usize
            + (p.cq_entries as usize) * (std::mem::size_of::<sys::IoUringCqe>() << cqe_shift);
        let single = p.features & sys::IORING_FEAT_SINGLE_MMAP != 0;
        let sq_map = Mmap::new(
            raw,
            if single { sq_len.max(cq_len) } else { sq_len },
            sys::IORING_OFF_SQ_RING,
        )?;
        let cq_map = if single {
            None
        } else {
            Some(Mmap::new(raw, cq_len, sys::IORING_OFF_CQ_RING)?)
        };
        let sqe_len = (p.sq_entries as usize) * (64 << sqe_shift);
        let sqe_map = Mmap::new(raw, sqe_len, sys::IORING_OFF_SQES)?;

        let cqm = cq_map.as_ref().unwrap_or(&sq_map);
        // SAFETY: offsets from the kernel, inside the mappings just made.
        let (sq_mask, sq_entries, cq_mask, cq_entries) = unsafe {
            (
                *sq_map.at::<u32>(p.sq_off.ring_mask),
                *sq_map.at::<u32>(p.sq_off.ring_entries),
                *cqm.at::<u32>(p.cq_off.ring_mask),
                *cqm.at::<u32>(p.cq_off.ring_entries),
            )
        };
        if p.flags & sys::IORING_SETUP_NO_SQARRAY == 0 {
            // Identity SQ index array, written once: slot i holds SQE i.
            let array = sq_map.at::<u32>(p.sq_off.array);
            for i in 0..sq_entries {
                // SAFETY: `array` has `sq_entries` u32 slots inside the SQ mapping.
                unsafe { array.add(i as usize).write(i) };
            }
        }
        let sq = SubmissionQueue {
            khead: sq_map.at::<AtomicU32>(p.sq_off.head),
            ktail: sq_map.at::<AtomicU32>(p.sq_off.tail),
            kflags: sq_map.at::<AtomicU32>(p.sq_off.flags),
            kdropped: sq_map.at::<AtomicU32>(p.sq_off.dropped),
            sqes: sqe_map.at::<IoUringSqe>(0),
            mask: sq_mask,
            entries: sq_entries,
            sqe_shift,
            // SAFETY: the tail word is inside the SQ mapping; nobody else writes it.
            tail: unsafe { *sq_map.at::<u32>(p.sq_off.tail) },
            sqpoll: p.flags & sys::IORING_SETUP_SQPOLL != 0,
        };
        let cq = CompletionQueue {
            khead: cqm.at::<AtomicU32>(p.cq_off.head),
            ktail: cqm.at::<AtomicU32>(p.cq_off.tail),
            koverflow: cqm.at::<AtomicU32>(p.cq_off.overflow),
            kflags: if p.cq_off.flags == 0 {
                std::ptr::null()
            } else {
                cqm.at::<AtomicU32>(p.cq_off.flags)
            },
            cqes: cqm.at::<sys::IoUringCqe>(p.cq_off.cqes),
            mask: cq_mask,
            entries: cq_entries,
            cqe_shift,
        };
        Ok(IoUring {
            sq,
            cq,
            params: p,
            stripped,
            enter_fd: raw,
            enter_flags: 0,
            enters: std::cell::Cell::new(0),
            _sq_map: sq_map,
            _cq_map: cq_map,
            _sqe_map: sqe_map,
            fd: Arc::new(fd),
        })
    }

    /// The ring's fd, kept open by whoever holds it (a registered buffer
    /// group, which must unregister from this ring even after it is dropped).
    pub(crate) fn shared_fd(&self) -> Arc<OwnedFd> {
        self.fd.clone()
    }

    /// The parameters the kernel returned (entries, flags, features, offsets).
    pub fn params(&self) -> &IoUringParams {
        &self.params
    }

    /// `IORING_SETUP_*` flags in effect.
    pub fn setup_flags(&self) -> u32 {
        self.params.flags
    }

    /// Requested flags the kernel refused and the builder dropped.
    pub fn stripped_flags(&self) -> u32 {
        self.stripped
    }

    /// `IORING_FEAT_*` bits of this kernel.
    pub fn features(&self) -> u32 {
        self.params.features
    }

    /// How many `io_uring_enter` syscalls this ring has made.
    pub fn enter_count(&self) -> u64 {
        self.enters.get()
    }

    /// The submission queue.
    pub fn sq(&mut self) -> &mut SubmissionQueue {
        &mut self.sq
    }

    /// The completion queue.
    pub fn cq(&mut self) -> &mut CompletionQueue {
        &mut self.cq
    }

    /// Both queues at once.
    pub fn split(&mut self) -> (&mut SubmissionQueue, &mut CompletionQueue) {
        (&mut self.sq, &mut self.cq)
    }

    /// Queue an SQE; see [`SubmissionQueue::push`].
    ///
    /// # Safety
    /// Memory the SQE points to must stay valid until its completion.
    #[inline]
    pub unsafe fn push(&mut self, sqe: &IoUringSqe) -> Result<(), SqFull> {
        // SAFETY: forwarded to the caller.
        unsafe { self.sq.push(sqe) }
    }

    /// Iterate every ready CQE without a syscall.
    #[inline]
    pub fn completions(&mut self) -> Completions<'_> {
        self.cq.iter()
    }

    /// The oldest ready CQE, consuming it. Flushes overflowed CQEs (and runs
    /// pending task work) with one `io_uring_enter` when the CQ is empty but
    /// the kernel has more.
    pub fn next_cqe(&mut self) -> io::Result<Option<Cqe>> {
        if let Some(c) = self.cq.peek() {
            self.cq.advance(1);
            return Ok(Some(c));
        }
        if self.cq_needs_enter() {
            self.flush_cq()?;
            if let Some(c) = self.cq.peek() {
                self.cq.advance(1);
                return Ok(Some(c));
            }
        }
        Ok(None)
    }

    /// Whether enters use a registered ring fd.
    pub fn ring_fd_registered(&self) -> bool {
        self.enter_flags & sys::IORING_ENTER_REGISTERED_RING != 0
    }

    /// Register this ring's fd with `IORING_REGISTER_RING_FDS` so later enters
    /// skip the fd table. The registration belongs to this thread.
    pub fn register_ring_fd(&mut self) -> io::Result<()> {
        if self.ring_fd_registered() {
            return Ok(());
        }
        let mut up = sys::IoUringRsrcUpdate {
            offset: u32::MAX, // any free slot
            resv: 0,
            data: self.as_raw_fd() as u64,
        };
        // SAFETY: one valid rsrc_update; the kernel writes the slot into `offset`.
        unsafe {
            sys::io_uring_register(
                self.as_raw_fd(),
                sys::IORING_REGISTER_RING_FDS,
                (&mut up as *mut sys::IoUringRsrcUpdate).cast(),
                1,
            )?
        };
        self.enter_fd = up.offset as i32;
        self.enter_flags |= sys::IORING_ENTER_REGISTERED_RING;
        Ok(())
    }

    /// Undo [`register_ring_fd`](Self::register_ring_fd).
    pub fn unregister_ring_fd(&mut self) -> io::Result<()> {
        if !self.ring_fd_registered() {
            return Ok(());
        }
        let up = sys::IoUringRsrcUpdate {
            offset: self.enter_fd as u32,
            resv: 0,
            data: 0,
        };
        // SAFETY: one valid rsrc_update naming our registered slot.
        unsafe {
            sys::io_uring_register(
                self.as_raw_fd(),
                sys::IORING_UNREGISTER_RING_FDS,
                (&up as *const sys::IoUringRsrcUpdate).cast(),
                1,
            )?
        };
        self.enter_fd = self.as_raw_fd();
        self.enter_flags &= !sys::IORING_ENTER_REGISTERED_RING;
        Ok(())
    }

    /// True when reaping needs an `io_uring_enter`: overflowed CQEs wait in the
    /// kernel, task work is pending (`TASKRUN_FLAG`), or the ring polls (`IOPOLL`).
    #[inline]
    pub fn cq_needs_enter(&self) -> bool {
        self.params.flags & sys::IORING_SETUP_IOPOLL != 0
            || self.sq.flags() & (sys::IORING_SQ_CQ_OVERFLOW | sys::IORING_SQ_TASKRUN) != 0
    }

    /// Raw `io_uring_enter` with this ring's fd (registered or not).
    ///
    /// # Safety
    /// `arg`/`argsz` must match `flags` (null, a sigset, or an `IoUringGeteventsArg`).
    pub unsafe fn enter(
        &self,
        to_submit: u32,
        min_complete: u32,
        flags: u32,
        arg: *const libc::c_void,
        argsz: usize,
    ) -> io::Result<u32> {
        self.enters.set(self.enters.get() + 1);
        // SAFETY: forwarded to the caller; `enter_fd` is our fd or registered index.
        unsafe {
            sys::io_uring_enter(
                self.enter_fd,
                to_submit,
                min_complete,
                flags | self.enter_flags,
                arg,
                argsz,
            )
        }
    }

    /// Flush overflowed CQEs into the CQ and run pending task work
    /// (`io_uring_enter` with `GETEVENTS` and no wait).
    pub fn flush_cq(&mut self) -> io::Result<()> {
        // SAFETY: no argument.
        match unsafe { self.enter(0, 0, sys::IORING_ENTER_GETEVENTS, std::ptr::null(), 0) } {
            Ok(_) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Submit queued SQEs without waiting. Returns how many the kernel took.
    pub fn submit(&mut self) -> io::Result<u32> {
        self.submit_inner(0, None)
    }

    /// Submit queued SQEs and wait until at least `want` CQEs are ready.
    ///
    /// Errors: `EBUSY` means the CQ is overflowing and the kernel will not
    /// take more SQEs: reap completions and call again. `EBADR` means the
    /// kernel lost completions (it could not allocate overflow entries).
    /// `EINTR` means a signal arrived while waiting.
    pub fn submit_and_wait(&mut self, want: u32) -> io::Result<u32> {
        self.submit_inner(want, None)
    }

    /// Like [`submit_and_wait`](Self::submit_and_wait), but wait at most
    /// `timeout` (`IORING_ENTER_EXT_ARG`; no SQE is used). A timeout or a
    /// signal is not an error: it returns the number submitted.
    pub fn submit_and_wait_timeout(&mut self, want: u32, timeout: Duration) -> io::Result<u32> {
        match self.submit_inner(want, Some(timeout)) {
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME) | Some(libc::EINTR)) => Ok(0),
            r => r,
        }
    }

    /// Submit, then wait for `want` CQEs with a minimum-wait batch window
    /// (`IORING_FEAT_MIN_TIMEOUT`, Linux 6.12): the kernel waits up to
    /// `min_wait` for `want` completions; once `min_wait` has passed it
    /// returns as soon as at least one is ready; `timeout` bounds the whole
    /// wait (`None`: no bound). Trades up to `min_wait` of latency for fewer
    /// wake-ups and enters under load. Returns `EINVAL` on kernels without
    /// the feature (check [`features()`](Self::features)).
    pub fn submit_and_wait_min(
        &mut self,
        want: u32,
        min_wait: Duration,
        timeout: Option<Duration>,
    ) -> io::Result<u32> {
        let to_submit = self.sq.publish();
        let mut flags = sys::IORING_ENTER_EXT_ARG | sys::IORING_ENTER_GETEVENTS;
        if self.sq.sqpoll && to_submit > 0 && self.sq.need_wakeup() {
            flags |= sys::IORING_ENTER_SQ_WAKEUP;
        }
        let ts = timeout.map(sys::KernelTimespec::from);
        let arg = sys::IoUringGeteventsArg {
            ts: ts.as_ref().map_or(0, |t| t as *const _ as u64),
            min_wait_usec: u32::try_from(min_wait.as_micros()).unwrap_or(u32::MAX),
            ..Default::default()
        };
        // SAFETY: `arg` and `ts` live across the call; argsz matches.
        let r = unsafe {
            self.enter(
                if self.sq.sqpoll { 0 } else { to_submit },
                want,
                flags,
                (&arg as *const sys::IoUringGeteventsArg).cast(),
                std::mem::size_of::<sys::IoUringGeteventsArg>(),
            )
        };
        match r {
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME) | Some(libc::EINTR)) => Ok(0),
            r => r,
        }
    }

    /// Block until the SQPOLL thread has made room in a full SQ
    /// (`IORING_ENTER_SQ_WAIT`).
    pub fn sq_wait(&mut self) -> io::Result<()> {
        // SAFETY: no argument.
        unsafe { self.enter(0, 0, sys::IORING_ENTER_SQ_WAIT, std::ptr::null(), 0)? };
        Ok(())
    }

    fn submit_inner(&mut self, want: u32, timeout: Option<Duration>) -> io::Result<u32> {
        let to_submit = self.sq.publish();
        let mut flags = 0;
        let mut need_enter = want > 0 || self.cq_needs_enter();
        if want > 0 || self.cq_needs_enter() {
            flags |= sys::IORING_ENTER_GETEVENTS;
        }
        if self.sq.sqpoll {
            // The poller consumes the SQ itself; enter only to wake it or to wait.
            if to_submit > 0 && self.sq.need_wakeup() {
                flags |= sys::IORING_ENTER_SQ_WAKEUP;
                need_enter = true;
            }
        } else if to_submit > 0 {
            need_enter = true;
        }
        if !need_enter {
            return Ok(to_submit);
        }
        if self.params.flags & sys::IORING_SETUP_DEFER_TASKRUN != 0 {
            // Deferred task work (and so completions) runs only with GETEVENTS:
            // ask for it on every enter; with min_complete 0 it never blocks.
            flags |= sys::IORING_ENTER_GETEVENTS;
        }
        match timeout {
            None => {
                // SAFETY: no argument.
                unsafe { self.enter(to_submit, want, flags, std::ptr::null(), 0) }
            }
            Some(t) => {
                let ts = sys::KernelTimespec::from(t);
                let arg = sys::IoUringGeteventsArg {
                    ts: &ts as *const _ as u64,
                    ..Default::default()
                };
                flags |= sys::IORING_ENTER_EXT_ARG | sys::IORING_ENTER_GETEVENTS;
                // SAFETY: `arg` and `ts` live across the call; argsz matches.
                unsafe {
                    self.enter(
                        to_submit,
                        want,
                        flags,
                        (&arg as *const sys::IoUringGeteventsArg).cast(),
                        std::mem::size_of::<sys::IoUringGeteventsArg>(),
                    )
                }
            }
        }
    }
}

impl Drop for IoUring {
    fn drop(&mut self) {
        // A registered ring fd holds a reference to the ring: drop it first.
        let _ = self.unregister_ring_fd();
    }
}

impl AsRawFd for IoUring {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
