//! Giving freed memory back to the kernel after a burst.
//!
//! A server that frees large buffers after a burst (pipelined replies,
//! TLS records, a connection's read and write buffers) gives them to the
//! allocator, and glibc's keeps them: after 1 000 connections each made a
//! 64-request pipelined burst at once, 138 MB stayed mapped in the serving
//! thread's arena with 4.4 MB in use, for as long as the process ran,
//! whether the connections closed or not (`malloc_trim` brought it to 10
//! MB). Libraries report what they free with [`freed`]; once
//! [`TRIM_AFTER`] bytes were reported on a thread, a task asks the
//! allocator, [`TRIM_DELAY`] later, to return its free pages
//! (`malloc_trim(0)`: glibc only; with another allocator nothing happens).
//! At most once per delay per thread, and never while nothing is freed: an
//! idle server does not wake for it.

use std::cell::Cell;
use std::time::Duration;

/// Bytes reported freed on a thread that arm a trim.
pub const TRIM_AFTER: usize = 8 << 20;
/// How long after it is armed the trim runs (the rest of a burst frees
/// meanwhile, and one trim takes it all).
pub const TRIM_DELAY: Duration = Duration::from_secs(1);

thread_local! {
    /// Bytes reported since the last trim.
    static FREED: Cell<usize> = const { Cell::new(0) };
    /// A trim task is waiting.
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

/// `bytes` of heap went back to the allocator on this thread (an
/// estimate will do: it only decides when to trim). Past [`TRIM_AFTER`],
/// inside a runtime, a trim runs [`TRIM_DELAY`] later; outside one,
/// nothing happens.
pub fn freed(bytes: usize) {
    let Ok(total) = FREED.try_with(|f| {
        let t = f.get().saturating_add(bytes);
        f.set(t);
        t
    }) else {
        return;
    };
    if total < TRIM_AFTER || ARMED.with(Cell::get) || crate::backend_report().is_none() {
        return;
    }
    ARMED.with(|a| a.set(true));
    crate::spawn(async {
        // Disarmed however the task ends: dropped unfinished (its runtime
        // gone) it would leave the thread never trimming again.
        struct Disarm;
        impl Drop for Disarm {
            fn drop(&mut self) {
                let _ = FREED.try_with(|f| f.set(0));
                let _ = ARMED.try_with(|a| a.set(false));
            }
        }
        let _disarm = Disarm;
        crate::time::sleep(TRIM_DELAY).await;
        trim();
    });
}

/// Ask the allocator to return its free pages to the kernel now.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: no pointers (the argument is the padding to keep); glibc
    // locks each arena while it walks it.
    unsafe {
        libc::malloc_trim(0);
    }
}
