//! Memory-ordering helpers for indices shared with the kernel.
//!
//! Every load or store of a ring index or flag word goes through one of these,
//! so the ordering is named at the call site (as liburing's `barrier.h` does).
//! Each call site carries a one-line comment saying what the kernel must see
//! and why this ordering is enough.

use std::sync::atomic::{fence, AtomicU32, Ordering};

/// Load that orders every later read after it (pairs with a kernel store-release).
///
/// # Safety
/// `p` must be valid, aligned and point into a live ring mapping.
#[inline(always)]
pub unsafe fn load_acquire(p: *const AtomicU32) -> u32 {
    // SAFETY: the caller guarantees `p` is valid and aligned.
    unsafe { (*p).load(Ordering::Acquire) }
}

/// Plain (`READ_ONCE`-like) load: no ordering against other memory.
///
/// # Safety
/// `p` must be valid, aligned and point into a live ring mapping.
#[inline(always)]
pub unsafe fn load_relaxed(p: *const AtomicU32) -> u32 {
    // SAFETY: the caller guarantees `p` is valid and aligned.
    unsafe { (*p).load(Ordering::Relaxed) }
}

/// Store that orders every earlier access before it (pairs with a kernel load-acquire).
///
/// # Safety
/// `p` must be valid, aligned and point into a live ring mapping.
#[inline(always)]
pub unsafe fn store_release(p: *const AtomicU32, v: u32) {
    // SAFETY: the caller guarantees `p` is valid and aligned.
    unsafe { (*p).store(v, Ordering::Release) }
}

/// Full fence (`smp_mb()`): orders earlier stores before later loads.
#[inline(always)]
pub fn full_fence() {
    fence(Ordering::SeqCst);
}

/// Store-release of a 16-bit index (the provided-buffer ring tail).
///
/// # Safety
/// `p` must be valid, aligned and point into a live ring mapping.
#[inline(always)]
pub unsafe fn store_release_u16(p: *const std::sync::atomic::AtomicU16, v: u16) {
    // SAFETY: the caller guarantees `p` is valid and aligned.
    unsafe { (*p).store(v, Ordering::Release) }
}
