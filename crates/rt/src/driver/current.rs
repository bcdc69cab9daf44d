//! The driver of this thread's runtime, as operations reach it: the one
//! access point. The runtime installs it when it is built and removes it
//! when dropped; the driver never reaches up to the runtime (no import
//! cycle in the crate).
//!
//! Operations, streams and files reach the driver only through
//! [`driver`] and [`try_driver`], which hand out `&mut Driver` for the
//! length of a closure: none of them borrows the `RefCell` (only the
//! runtime's own loop does, between polls: `context.rs`, `runtime.rs`,
//! `hosted.rs`), so no caller has a borrow order to keep. The closure must not reach
//! the driver again (it holds it already); a nested call panics, naming
//! this rule. [`hand_off`] is for drops, which may run anywhere: it never
//! panics, and says when the driver was in use.

use std::cell::{Cell, RefCell};
use std::ptr::NonNull;

use super::Driver;
use crate::metrics::Metrics;

/// Where this thread's driver, counters and timers live.
#[derive(Clone, Copy)]
struct Slot {
    /// This runtime's number, unique in the process: an operation
    /// submitted on one runtime is never handed to a later one.
    id: u64,
    driver: NonNull<RefCell<Driver>>,
    metrics: NonNull<Metrics>,
    clock: Clock,
}

thread_local! {
    static CURRENT: Cell<Option<Slot>> = const { Cell::new(None) };
}

/// Make `driver`, `metrics` and the runtime's timers (`clock`) this
/// thread's.
///
/// # Safety
/// `driver` and `metrics` must stay at their addresses, alive, until
/// [`uninstall`] is called on this thread (the runtime keeps them in its
/// boxed context).
pub(crate) unsafe fn install(driver: &RefCell<Driver>, metrics: &Metrics, clock: Clock) {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let slot = Slot {
        id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        driver: NonNull::from(driver),
        metrics: NonNull::from(metrics),
        clock,
    };
    CURRENT.with(|c| c.set(Some(slot)));
}

/// No driver on this thread any more.
pub(crate) fn uninstall() {
    let _ = CURRENT.try_with(|c| c.set(None));
}

/// This thread's slot, as references (`None` outside a runtime).
fn slot<'a>() -> Option<(&'a RefCell<Driver>, &'a Metrics, Clock, u64)> {
    let s = CURRENT.try_with(Cell::get).ok().flatten()?;
    // SAFETY: `install`'s contract: both live at these addresses until
    // `uninstall`, which clears this slot first. The references do not
    // outlive the calls below, which run while the runtime is installed.
    Some(unsafe { (s.driver.as_ref(), s.metrics.as_ref(), s.clock, s.id) })
}

/// Run `f` with this thread's driver and counters, or `None` outside a
/// runtime. Panics if `f` (or its caller) already holds the driver.
pub(crate) fn try_driver<R>(f: impl FnOnce(&mut Driver, &Metrics) -> R) -> Option<R> {
    try_driver_of_runtime(|d, m, _| f(d, m))
}

/// As [`try_driver`], with the runtime's number ([`id`]) too: one read of
/// the thread-local for both (an operation's poll needs them together).
pub(crate) fn try_driver_of_runtime<R>(
    f: impl FnOnce(&mut Driver, &Metrics, u64) -> R,
) -> Option<R> {
    let (d, m, _, id) = slot()?;
    let mut d = d.try_borrow_mut().expect(
        "ringkit: the driver was reached from inside a call that holds it (current::driver is not reentrant)",
    );
    Some(f(&mut d, m, id))
}

/// Run `f` with this thread's driver and counters. Panics outside a
/// runtime, or if the driver is already held.
pub(crate) fn driver<R>(f: impl FnOnce(&mut Driver, &Metrics) -> R) -> R {
    try_driver(f).expect("not inside a ringkit runtime (build a Runtime on this thread first)")
}

/// Why [`hand_off`] could not run its closure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Away {
    /// No runtime on this thread (it was dropped first).
    NoRuntime,
    /// The driver is held further up this thread's stack.
    InUse,
}

/// For drops: run `f` with the driver if it is free; never panics.
pub(crate) fn hand_off<R>(f: impl FnOnce(&mut Driver, &Metrics) -> R) -> Result<R, Away> {
    let (d, m, _, _) = slot().ok_or(Away::NoRuntime)?;
    let mut d = d.try_borrow_mut().map_err(|_| Away::InUse)?;
    Ok(f(&mut d, m))
}

/// This thread's runtime's number (see `Slot::id`), or `None` outside
/// one.
pub(crate) fn id() -> Option<u64> {
    CURRENT.try_with(Cell::get).ok().flatten().map(|s| s.id)
}

/// Run `f` with this thread's counters alone (they are plain cells: no
/// borrow), or `None` outside a runtime.
pub(crate) fn try_metrics<R>(f: impl FnOnce(&Metrics) -> R) -> Option<R> {
    let (_, m, _, _) = slot()?;
    Some(f(m))
}

/// Count `n` syscalls made on this thread outside the driver (a direct
/// `libc` call: a socket option, a path lookup), so that
/// [`MetricsSnapshot::other_syscalls`](crate::MetricsSnapshot::other_syscalls)
/// stays the whole count. Nothing happens outside a runtime.
pub(crate) fn count_syscalls(n: u64) {
    try_metrics(|m| Metrics::add(&m.syscalls, n));
}

/// What the driver needs of the runtime's timers (bounded operations):
/// given by the runtime at install, so the driver does not import them.
#[derive(Clone, Copy)]
pub(crate) struct Clock {
    /// Poll a deadline: `Ready` once it has passed, else registered to
    /// wake the task (the runtime's timers, as `time::Sleep` does).
    pub(crate) poll: fn(&mut Deadline, &mut std::task::Context<'_>) -> std::task::Poll<()>,
    /// Forget a deadline's timer.
    pub(crate) cancel: fn(&mut Deadline),
    /// The loop turn's clock (cheap, early by at most a turn).
    pub(crate) coarse_now: fn() -> std::time::Instant,
}

/// A timer of the runtime, as plain data (no allocation per bounded op):
/// its instant and, once registered, `(runtime serial, timer id)`.
/// Dropping it cancels the timer.
pub(crate) struct Deadline {
    pub(crate) at: std::time::Instant,
    pub(crate) id: Option<(u64, u64)>,
    cancel: fn(&mut Deadline),
}

impl Deadline {
    /// A deadline at `at` on this thread's runtime (see [`clock`]).
    pub(crate) fn new(clock: &Clock, at: std::time::Instant) -> Deadline {
        Deadline {
            at,
            id: None,
            cancel: clock.cancel,
        }
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        (self.cancel)(self);
    }
}

/// The runtime's timers. Panics outside a runtime.
pub(crate) fn clock() -> Clock {
    slot()
        .map(|(_, _, c, _)| c)
        .expect("not inside a ringkit runtime (build a Runtime on this thread first)")
}
