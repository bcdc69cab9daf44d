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
//! its own in a table the handler writes to (`eventfd_table.rs`, whose
//! module docs give the protocol that keeps a handler from ever writing to a
//! closed fd). The handler, which may run on any thread, sets `REQUESTED`
//! inside that table's notify, before it writes to the eventfds: a waiter
//! registers its fd, then checks `REQUESTED` again, so a signal is either
//! seen by that check or finds the fd in its slot.
//!
//! If the slot table is full, or an eventfd cannot be made, a waiter falls
//! back to checking the flag every 50 ms.
//!
//! # Other handlers
//! A handler installed before ours (tokio's `signal`, through
//! signal-hook-registry, or any other `sigaction`) is kept and called after
//! ours on every signal, with the same arguments; one installed after ours
//! must do the same (signal-hook-registry, and so tokio, does). `SIG_IGN`
//! and `SIG_DFL` are not called: ringkit takes the signal over from them.
//!
//! The first signal (or [`request_shutdown`]) starts a graceful shutdown. A
//! second *signal* ends the process at once, as an operator who presses
//! Ctrl-C twice expects: the handler puts back the default action and
//! raises the signal again (both async-signal-safe), so the process dies of
//! it (exit status 128 + signal in a shell) without waiting for the drain.
//! A shutdown requested by code ([`request_shutdown`], as when a server
//! thread fails) does not count as the first: the operator's first signal
//! still drains. [`set_exit_on_second_signal`]`(false)` turns the exit off,
//! for a program that handles repeated signals itself (through tokio's
//! `signal`, say).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering::SeqCst};
use std::sync::OnceLock;
use std::time::Duration;

use crate::eventfd_table::EventfdTable;

static REQUESTED: AtomicBool = AtomicBool::new(false);
/// A signal (not [`request_shutdown`]) has been handled.
static SIGNALED: AtomicBool = AtomicBool::new(false);
/// Whether a second signal ends the process ([`set_exit_on_second_signal`]).
static EXIT_ON_SECOND: AtomicBool = AtomicBool::new(true);
/// The signal that requested shutdown (0: [`request_shutdown`]; -1: none).
static SIGNAL: AtomicI32 = AtomicI32::new(-1);
/// The eventfds of the tasks awaiting shutdown.
static WAITERS: EventfdTable = EventfdTable::new();
static INSTALLED: OnceLock<Result<(), i32>> = OnceLock::new();
/// The handlers that were in place before ours, for `SIGINT` and `SIGTERM`
/// (`sa_sigaction`, 0 for none to call), and whether each takes `siginfo`.
/// Written before our handler is installed, read by it: atomics, so the
/// reads are async-signal-safe.
static PREV_HANDLER: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];
static PREV_SIGINFO: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];

fn slot(sig: libc::c_int) -> Option<usize> {
    match sig {
        libc::SIGINT => Some(0),
        libc::SIGTERM => Some(1),
        _ => None,
    }
}

/// Install the `SIGINT`/`SIGTERM` handler (idempotent; also done by the
/// first [`shutdown_requested`]). Call it early in a server, so that a
/// signal arriving before anything awaits shutdown is not fatal.
pub fn install() -> io::Result<()> {
    let r = INSTALLED.get_or_init(|| {
        for (i, sig) in [libc::SIGINT, libc::SIGTERM].into_iter().enumerate() {
            // SAFETY: a zeroed sigaction is a valid out-parameter, filled by
            // the call for a valid signal number (no action is changed).
            let prev = unsafe {
                let mut prev: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, std::ptr::null(), &mut prev) != 0 {
                    return Err(io::Error::last_os_error()
                        .raw_os_error()
                        .unwrap_or(libc::EINVAL));
                }
                prev
            };
            let h = prev.sa_sigaction;
            if h != libc::SIG_DFL && h != libc::SIG_IGN && h != on_signal as SigAction as usize {
                PREV_SIGINFO[i].store(prev.sa_flags & libc::SA_SIGINFO != 0, SeqCst);
                PREV_HANDLER[i].store(h, SeqCst);
            }
            // SAFETY: a zeroed sigaction is a valid starting point; we set the
            // handler (an extern "C" fn of the SA_SIGINFO signature), an
            // empty mask and SA_RESTART | SA_SIGINFO, then install it for a
            // valid signal number.
            let rc = unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as SigAction as libc::sighandler_t;
                libc::sigemptyset(&mut sa.sa_mask);
                sa.sa_flags = libc::SA_RESTART | libc::SA_SIGINFO;
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

type SigAction = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    if SIGNALED.swap(true, SeqCst) && EXIT_ON_SECOND.load(SeqCst) {
        // The second signal: stop now (see the module docs).
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
    chain(sig, info, ctx);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
}

/// Call the handler that was in place before ours, if there was one to
/// call. Async-signal-safe as far as that handler is.
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let Some(i) = slot(sig) else { return };
    let h = PREV_HANDLER[i].load(SeqCst);
    if h == 0 {
        return;
    }
    if PREV_SIGINFO[i].load(SeqCst) {
        // SAFETY: `h` is the `sa_sigaction` of a handler installed with
        // SA_SIGINFO, so it has this signature; the arguments are the
        // kernel's, passed on unchanged.
        let f: SigAction = unsafe { std::mem::transmute::<usize, SigAction>(h) };
        f(sig, info, ctx);
    } else {
        // SAFETY: `h` is the `sa_handler` of a handler installed without
        // SA_SIGINFO (neither SIG_DFL nor SIG_IGN), so it takes the signal
        // number only.
        let f: extern "C" fn(libc::c_int) =
            unsafe { std::mem::transmute::<usize, extern "C" fn(libc::c_int)>(h) };
        f(sig);
    }
}

/// Set the flag and wake every registered waiter. Async-signal-safe:
/// atomics and `write(2)` only.
fn notify(sig: i32) {
    WAITERS.notify(|| {
        let _ = SIGNAL.compare_exchange(-1, sig, SeqCst, SeqCst);
        REQUESTED.store(true, SeqCst);
    });
}

/// Whether a second `SIGINT`/`SIGTERM` ends the process at once (the
/// default) or is handled like the first (see the module docs).
pub fn set_exit_on_second_signal(exit: bool) {
    EXIT_ON_SECOND.store(exit, SeqCst);
}

/// Request shutdown from code, as if `SIGTERM` had arrived (but recorded as
/// signal 0, and not counted as a first signal: the next signal still
/// drains). Wakes every waiter on every thread.
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
    let Some(slot) = WAITERS.register() else {
        return poll_flag().await;
    };
    loop {
        // Checked after registering: see the module docs.
        if is_shutdown_requested() {
            return;
        }
        if let Err(e) = slot.wait().await {
            tracing::warn!("ringkit: signal eventfd read failed: {e}; polling instead");
            drop(slot);
            return poll_flag().await;
        }
    }
}

async fn poll_flag() {
    while !is_shutdown_requested() {
        crate::time::sleep(Duration::from_millis(50)).await;
    }
}
