//! The cooperative budget: how much ready I/O a task may take in one poll
//! before its operations answer `Pending` and it yields.
//!
//! # Why
//! A task that finds input ready keeps running: an HTTP/2 connection task
//! flooded with small frames could take a whole buffer ring of completions
//! (1 024 buffers) in one poll while every other task of the thread waited
//! for the next turn. tokio bounds this with its coop budget (128 units per
//! task poll), glommio with preemption on a timer.
//!
//! # The rule
//! Each poll of a task (and of `block_on`'s main future) starts with
//! [`BUDGET`] units. One unit is spent for each result of I/O handed to the
//! task: an operation's completion ([`crate::driver`]'s `Op` on both
//! backends, each CQE of a multishot receive or accept) and each chunk read
//! from bytes already received (a partly read ring buffer). When none is
//! left, the next such call wakes the task and answers `Pending` *before* it
//! takes anything, so no completion or byte is lost or reordered: the task
//! runs again in the next loop turn, after every other task that was ready
//! and after the driver has reaped new completions.
//!
//! Outside a ringkit task's poll, a hosted tokio task (feature `tokio`,
//! `Builder::host_tokio`) that polls ringkit I/O spends tokio's budget
//! instead, a unit per poll of a ringkit operation, as tokio's own
//! resources do; elsewhere there is no budget. A task that must not yield
//! wraps its future in [`unconstrained`].
//!
//! # The figure
//! 128, as tokio's. With 4 KiB ring buffers (and 4 KiB a unit on epoll) a
//! task takes at most 512 KiB of input per poll. An echo or HTTP/1 connection task spends one or two
//! units per poll, so the budget never binds for it; it binds for a task that
//! keeps finding input ready (a flooding peer), and for one that loops over
//! many completions (a log flusher writing many segments at once), which
//! then resumes in the next turn.
//!
//! A timer polled after an operation the budget deferred may fire first,
//! as under tokio's budget.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Units a task gets per poll.
pub(crate) const BUDGET: u32 = 128;

/// No ringkit task is being polled (tokio's budget applies, if any).
const OUTSIDE: u32 = u32::MAX;
/// [`unconstrained`]: no budget at all.
const NONE: u32 = u32::MAX - 1;

thread_local! {
    static LEFT: Cell<u32> = const { Cell::new(OUTSIDE) };
    /// Times a call answered `Pending` because the budget was spent.
    static YIELDS: Cell<u64> = const { Cell::new(0) };
}

/// Runs `f` (one poll of a task) with a fresh budget, then restores the
/// budget in force before (a task polled from inside another's poll, as a
/// nested `block_on` does, leaves its caller's budget as it was).
pub(crate) fn with_budget<R>(f: impl FnOnce() -> R) -> R {
    with_left(BUDGET, f)
}

fn with_left<R>(left: u32, f: impl FnOnce() -> R) -> R {
    struct Restore(u32);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = LEFT.try_with(|l| l.set(self.0));
        }
    }
    let _restore = Restore(LEFT.with(|l| l.replace(left)));
    f()
}

/// `Ready` when the task may take one more result of I/O; else the task is
/// woken (to run again next turn) and `Pending` returned. Call it before
/// taking anything, and [`spend`] once a result is taken.
#[inline]
pub(crate) fn poll_proceed(cx: &mut Context<'_>) -> Poll<()> {
    match LEFT.with(Cell::get) {
        0 => {}
        #[cfg(feature = "tokio")]
        OUTSIDE => return tokio_proceed(cx),
        _ => return Poll::Ready(()),
    }
    YIELDS.with(|y| y.set(y.get() + 1));
    cx.waker().wake_by_ref();
    Poll::Pending
}

/// A tokio task (hosted mode) polling ringkit I/O: one unit of its tokio
/// budget per poll (outside any tokio task, tokio grants it). tokio defers
/// the wake of a task it makes yield.
#[cfg(feature = "tokio")]
fn tokio_proceed(cx: &mut Context<'_>) -> Poll<()> {
    match tokio::task::coop::poll_proceed(cx) {
        Poll::Ready(unit) => {
            unit.made_progress();
            Poll::Ready(())
        }
        Poll::Pending => {
            YIELDS.with(|y| y.set(y.get() + 1));
            Poll::Pending
        }
    }
}

/// Whether the budget has a unit left (for calls that never wait: they
/// answer "nothing here" instead of yielding).
#[inline]
pub(crate) fn has_budget() -> bool {
    match LEFT.with(Cell::get) {
        0 => false,
        #[cfg(feature = "tokio")]
        OUTSIDE => tokio::task::coop::has_budget_remaining(),
        _ => true,
    }
}

/// One result of I/O was handed to the task.
#[inline]
pub(crate) fn spend() {
    LEFT.with(|l| {
        let v = l.get();
        if v < NONE && v != 0 {
            l.set(v - 1);
        }
    });
}

/// Bytes of input one unit stands for: a result of `n` bytes costs one
/// unit per `UNIT_BYTES` (at least one). A ring buffer holds 4 KiB, so on
/// io_uring every CQE is one unit; epoll's receive takes up to 64 KiB at
/// once, and counted as one unit it let a flooded connection take 16x
/// the input per poll (under a WINDOW_UPDATE flood the probe's p99 was
/// 2.5x io_uring's).
pub(crate) const UNIT_BYTES: usize = 4096;

/// A result of `n` bytes was handed to the task, its first unit already
/// spent: spend the rest (see [`UNIT_BYTES`]). Only taking more then
/// yields; nothing taken is given back.
#[inline]
pub(crate) fn spend_bytes(n: usize) {
    let extra = (n.saturating_sub(1) / UNIT_BYTES) as u32;
    if extra == 0 {
        return;
    }
    LEFT.with(|l| {
        let v = l.get();
        if v < NONE {
            l.set(v.saturating_sub(extra));
        }
    });
}

/// Times on this thread a task was made to yield by the budget.
pub(crate) fn yields() -> u64 {
    YIELDS.with(Cell::get)
}

/// Runs `fut` with no cooperative budget: its ringkit I/O never answers
/// `Pending` because the task has taken much in one poll. For a task that
/// must drain what is ready before anything else runs; a task that reads
/// from a peer should not use it (one peer could then hold the thread).
///
/// ```
/// ringkit::Runtime::new().unwrap().block_on(ringkit::unconstrained(async {
///     // I/O here is never deferred by the budget.
/// }));
/// ```
pub fn unconstrained<F: Future>(fut: F) -> Unconstrained<F> {
    Unconstrained { fut }
}

/// The future of [`unconstrained`].
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Unconstrained<F> {
    fut: F,
}

impl<F: Future> Future for Unconstrained<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: structural pinning of the only field; it is never moved
        // out and `Unconstrained` has no `Drop` or `Unpin` impl of its own.
        let fut = unsafe { self.map_unchecked_mut(|s| &mut s.fut) };
        with_left(NONE, || fut.poll(cx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    #[test]
    fn a_large_chunk_costs_a_unit_per_4_kib() {
        let mut cx = Context::from_waker(Waker::noop());
        with_budget(|| {
            spend();
            spend_bytes(UNIT_BYTES);
            assert_eq!(LEFT.with(Cell::get), BUDGET - 1, "4 KiB: one unit");
            spend();
            spend_bytes(64 * 1024);
            assert_eq!(LEFT.with(Cell::get), BUDGET - 1 - 16, "64 KiB: sixteen");
            for _ in 0..7 {
                spend();
                spend_bytes(64 * 1024);
            }
            assert!(poll_proceed(&mut cx).is_pending(), "spent: yields");
        });
        with_left(NONE, || {
            spend_bytes(1 << 20);
            assert_eq!(LEFT.with(Cell::get), NONE, "unconstrained");
        });
    }

    #[test]
    fn spent_budget_yields_and_restores() {
        let mut cx = Context::from_waker(Waker::noop());
        assert!(poll_proceed(&mut cx).is_ready(), "no budget outside a task");
        with_budget(|| {
            for _ in 0..BUDGET {
                assert!(poll_proceed(&mut cx).is_ready());
                spend();
            }
            let before = yields();
            assert!(poll_proceed(&mut cx).is_pending());
            assert_eq!(yields(), before + 1);
            assert!(!has_budget());
            // Nested: a fresh budget, and the outer one comes back after.
            with_budget(|| assert!(poll_proceed(&mut cx).is_ready()));
            assert!(poll_proceed(&mut cx).is_pending());
            with_left(NONE, || {
                spend();
                assert!(poll_proceed(&mut cx).is_ready())
            });
        });
        assert!(poll_proceed(&mut cx).is_ready());
    }
}
