//! The host loop's idle wait (hosted mode, feature `tokio`) and the kick
//! that ends it. A leaf: the driver, the executor and the timers kick it
//! when they make ringkit work, without reaching up to the runtime.

#[cfg(feature = "tokio")]
use std::cell::{Cell, RefCell};

#[cfg(feature = "tokio")]
thread_local! {
    /// The waker of this thread's idle host loop, while it waits.
    static IDLE: RefCell<Option<std::task::Waker>> = const { RefCell::new(None) };
    /// Set by [`kick_host`]: the idle wait ends at its next poll.
    static KICKED: Cell<bool> = const { Cell::new(false) };
}

/// New ringkit work appeared on this thread (a task woken, spawned or
/// aborted, a timer added, an SQE queued): end the host loop's idle wait,
/// if it is in one. Cheap when it is not (one thread-local read); nothing
/// without the `tokio` feature.
#[inline]
pub(crate) fn kick_host() {
    #[cfg(feature = "tokio")]
    {
        let w = IDLE.try_with(|i| i.borrow_mut().take()).ok().flatten();
        if let Some(w) = w {
            let _ = KICKED.try_with(|k| k.set(true));
            w.wake();
        }
    }
}

/// The host loop waits with `w` (or stops waiting: `None`).
#[cfg(feature = "tokio")]
pub(crate) fn set_idle(w: Option<&std::task::Waker>) {
    let _ = IDLE.try_with(|i| *i.borrow_mut() = w.cloned());
}

/// Whether a kick came since the last look (and forget it).
#[cfg(feature = "tokio")]
pub(crate) fn take_kicked() -> bool {
    KICKED.with(|k| k.replace(false))
}

/// Forget this thread's idle state (a runtime is going away; the next one
/// starts clean).
#[cfg(feature = "tokio")]
pub(crate) fn clear_idle() {
    set_idle(None);
    let _ = KICKED.try_with(|k| k.set(false));
}
