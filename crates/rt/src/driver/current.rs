//! The driver of this thread's runtime, as operations reach it. The
//! runtime installs it when it is built and removes it when dropped; the
//! driver never reaches up to the runtime (no import cycle in the crate).

use std::cell::{Cell, RefCell};
use std::ptr::NonNull;

use super::Driver;
use crate::metrics::Metrics;

/// Where this thread's driver and counters live.
type Slot = Option<(NonNull<RefCell<Driver>>, NonNull<Metrics>)>;

thread_local! {
    static CURRENT: Cell<Slot> = const { Cell::new(None) };
}

/// What an operation gets: the driver and the counters.
pub(crate) struct Current<'a> {
    pub(crate) driver: &'a RefCell<Driver>,
    pub(crate) metrics: &'a Metrics,
}

/// Make `driver` and `metrics` this thread's.
///
/// # Safety
/// Both must stay at their addresses, alive, until [`uninstall`] is called
/// on this thread (the runtime keeps them in its boxed context).
pub(crate) unsafe fn install(driver: &RefCell<Driver>, metrics: &Metrics) {
    CURRENT.with(|c| c.set(Some((NonNull::from(driver), NonNull::from(metrics)))));
}

/// No driver on this thread any more.
pub(crate) fn uninstall() {
    let _ = CURRENT.try_with(|c| c.set(None));
    let _ = CLOCK.try_with(|c| c.set(None));
}

/// Run `f` with this thread's driver, or `None` outside a runtime.
pub(crate) fn try_with<R>(f: impl FnOnce(&Current<'_>) -> R) -> Option<R> {
    let (d, m) = CURRENT.try_with(Cell::get).ok().flatten()?;
    // SAFETY: `install`'s contract: both live at these addresses until
    // `uninstall`, which clears this slot first.
    let cur = unsafe {
        Current {
            driver: d.as_ref(),
            metrics: m.as_ref(),
        }
    };
    Some(f(&cur))
}

/// Run `f` with this thread's driver. Panics outside a runtime.
pub(crate) fn with<R>(f: impl FnOnce(&Current<'_>) -> R) -> R {
    try_with(f).expect("not inside a ringkit runtime (build a Runtime on this thread first)")
}

/// Count `n` syscalls made on this thread outside the driver (a direct
/// `libc` call: a socket option, a path lookup), so that
/// [`MetricsSnapshot::other_syscalls`](crate::MetricsSnapshot::other_syscalls)
/// stays the whole count. Nothing happens outside a runtime.
pub(crate) fn count_syscalls(n: u64) {
    try_with(|c| Metrics::add(&c.metrics.syscalls, n));
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

thread_local! {
    static CLOCK: Cell<Option<Clock>> = const { Cell::new(None) };
}

/// Give the driver the runtime's timers (with [`install`]).
pub(crate) fn install_clock(clock: Clock) {
    CLOCK.with(|c| c.set(Some(clock)));
}

/// The runtime's timers. Panics outside a runtime.
pub(crate) fn clock() -> Clock {
    CLOCK
        .with(Cell::get)
        .expect("not inside a ringkit runtime (build a Runtime on this thread first)")
}
