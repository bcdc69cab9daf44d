//! Shutdown on `SIGINT` / `SIGTERM`, for every runtime thread.
//!
//! ```no_run
//! ringkit::run(async {
//!     ringkit::signal::install().expect("install signal handlers");
//!     // ... start serving ...
//!     ringkit::signal::shutdown_requested().await;
//!     // stop accepting, finish in-flight work, return
//! })
//! .unwrap();
//! ```
//!
//! # Protocol
//! [`install`] puts one `sigaction` handler on `SIGINT` and `SIGTERM`
//! (process-wide, once). A waiter ([`shutdown_requested`]) is an eventfd of
//! its own, registered in a fixed table of atomic slots, on which its runtime
//! waits with an ordinary read (io_uring `READ`, or epoll readiness then
//! `read(2)`), so a waiting thread costs no polling and both backends work
//! the same. The handler, which may run on any thread:
//! 1. increments `IN_HANDLER`;
//! 2. sets `REQUESTED` (so a waiter that registers later returns at once);
//! 3. writes 1 to every registered eventfd (`write(2)` is
//!    async-signal-safe; nothing else it does allocates or locks);
//! 4. decrements `IN_HANDLER`, and restores `errno`.
//!
//! A waiter registers its fd, then checks `REQUESTED` again: the handler sets
//! the flag before it scans the slots, so a signal is either seen by that
//! check or finds the fd in its slot. On drop, a waiter empties its slot and
//! waits until `IN_HANDLER` is zero before closing the fd, so a handler that
//! loaded the fd number just before can never write to a closed (and maybe
//! reused) fd. The wait cannot deadlock: a handler never waits, and one that
//! interrupts the dropping thread runs to completion before the thread
//! resumes. All these atomics are `SeqCst`: the argument above needs one
//! total order between "slot emptied" and "handler entered".
//!
//! If the slot table is full, or an eventfd cannot be made, a waiter falls
//! back to checking the flag every 50 ms.
//!
//! The first signal (or [`request_shutdown`]) starts a graceful shutdown. A
//! signal that arrives once shutdown was already requested ends the process
//! at once, as an operator who presses Ctrl-C twice expects: the handler
//! puts back the default action and raises the signal again (both
//! async-signal-safe), so the process dies of it (exit status 128 + signal
//! in a shell) without waiting for the drain.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering::SeqCst};
use std::sync::OnceLock;
use std::time::Duration;

use crate::driver::op::recv::Recv;
use crate::driver::Op;
use crate::runtime::try_with_ctx;

/// Waiters that can be registered at once (more fall back to polling).
const SLOTS: usize = 256;

static REQUESTED: AtomicBool = AtomicBool::new(false);
/// The signal that requested shutdown (0: [`request_shutdown`]; -1: none).
static SIGNAL: AtomicI32 = AtomicI32::new(-1);
static IN_HANDLER: AtomicUsize = AtomicUsize::new(0);
static WAITERS: [AtomicI32; SLOTS] = [const { AtomicI32::new(-1) }; SLOTS];
static INSTALLED: OnceLock<Result<(), i32>> = OnceLock::new();

/// Install the `SIGINT`/`SIGTERM` handler (idempotent; also done by the
/// first [`shutdown_requested`]). Call it early in a server, so that a
/// signal arriving before anything awaits shutdown is not fatal.
pub fn install() -> io::Result<()> {
    let r = INSTALLED.get_or_init(|| {
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: a zeroed sigaction is a valid starting point; we set the
            // handler (an extern "C" fn of the right signature), an empty
            // mask and SA_RESTART, then install it for a valid signal number.
            let rc = unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                libc::sigemptyset(&mut sa.sa_mask);
                sa.sa_flags = libc::SA_RESTART;
                libc::sigaction(sig, &sa, std::ptr::null_mut())
            };
            if rc != 0 {
                return Err(io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EINVAL));
            }
        }
        Ok(())
    });
    r.map_err(io::Error::from_raw_os_error)
}

extern "C" fn on_signal(sig: libc::c_int) {
    if REQUESTED.load(SeqCst) {
        // The second request: stop now (see the module docs).
        // SAFETY: signal(2) and raise(3) are async-signal-safe; `sig` is the
        // valid signal number this handler was installed for.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
        return;
    }
    // SAFETY: __errno_location returns this thread's errno slot; saving and
    // restoring it keeps the interrupted code's errno intact.
    let saved = unsafe { *libc::__errno_location() };
    notify(sig);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
}

/// Set the flag and wake every registered waiter. Async-signal-safe:
/// atomics and `write(2)` only.
fn notify(sig: i32) {
    IN_HANDLER.fetch_add(1, SeqCst);
    let _ = SIGNAL.compare_exchange(-1, sig, SeqCst, SeqCst);
    REQUESTED.store(true, SeqCst);
    let one: u64 = 1;
    for slot in &WAITERS {
        let fd = slot.load(SeqCst);
        if fd >= 0 {
            // SAFETY: `fd` is a registered eventfd that is not closed while
            // IN_HANDLER is non-zero (see the module docs); we write 8 bytes
            // from a valid u64.
            unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
        }
    }
    IN_HANDLER.fetch_sub(1, SeqCst);
}

/// Request shutdown from code, exactly as if `SIGTERM` had arrived (but
/// recorded as signal 0). Wakes every waiter on every thread.
pub fn request_shutdown() {
    notify(0);
}

/// Whether shutdown has been requested (by a signal or [`request_shutdown`]).
pub fn is_shutdown_requested() -> bool {
    REQUESTED.load(SeqCst)
}

/// The signal that requested shutdown: `Some(SIGINT)`, `Some(SIGTERM)`,
/// `Some(0)` for [`request_shutdown`], `None` if none yet.
pub fn requested_by() -> Option<i32> {
    match SIGNAL.load(SeqCst) {
        -1 => None,
        s => Some(s),
    }
}

/// An eventfd registered in a slot; unregisters and closes on drop.
struct Registration {
    fd: i32,
    slot: usize,
}

impl Registration {
    fn new() -> Option<Registration> {
        // SAFETY: plain eventfd creation.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        for (slot, s) in WAITERS.iter().enumerate() {
            if s.compare_exchange(-1, fd, SeqCst, SeqCst).is_ok() {
                return Some(Registration { fd, slot });
            }
        }
        // SAFETY: we own fd; it was never registered.
        unsafe { libc::close(fd) };
        None
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        WAITERS[self.slot].store(-1, SeqCst);
        while IN_HANDLER.load(SeqCst) != 0 {
            std::hint::spin_loop();
        }
        let fd = self.fd;
        let closed = try_with_ctx(|rt| rt.driver.borrow_mut().close_fd(fd, &rt.metrics));
        if closed.is_none() {
            // SAFETY: we own fd; no runtime is left to close it for us.
            unsafe { libc::close(fd) };
        }
    }
}

/// Resolves once shutdown is requested: `SIGINT`, `SIGTERM` (installing the
/// handler if needed) or [`request_shutdown`]. Every pending and future call,
/// on every thread, resolves. Cancel-safe. Must run on a ringkit runtime.
pub async fn shutdown_requested() {
    if let Err(e) = install() {
        tracing::warn!("ringkit: cannot install signal handlers: {e}");
    }
    if is_shutdown_requested() {
        return;
    }
    let Some(reg) = Registration::new() else {
        return poll_flag().await;
    };
    loop {
        // Checked after registering: see the module docs.
        if is_shutdown_requested() {
            return;
        }
        let (res, _buf) = Op::new(Recv::new(reg.fd, false, Vec::with_capacity(8), None)).await;
        match res {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
                ) => {}
            Err(e) => {
                tracing::warn!("ringkit: signal eventfd read failed: {e}; polling instead");
                drop(reg);
                return poll_flag().await;
            }
        }
    }
}

async fn poll_flag() {
    while !is_shutdown_requested() {
        crate::time::sleep(Duration::from_millis(50)).await;
    }
}
