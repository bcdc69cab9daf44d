//! Tasks, wakers and join handles.
//!
//! # Protocol
//! A task is a slot in the runtime's task slab: its boxed `!Send` future, a
//! generation number and a `scheduled` bit. A waker is not a pointer but a
//! number: runtime id (16 bits), generation (16 bits) and slot key (32 bits),
//! so waking costs no allocation and no atomic. Waking on the runtime's own
//! thread pushes the key onto the local run queue (once: `scheduled` dedupes);
//! waking from another thread goes through the runtime's `sched::Remote` (a locked
//! queue plus an eventfd that interrupts the driver's wait). A wake for a slot
//! whose generation changed is a stale wake and is ignored.
//!
//! While a task is polled its future is taken out of the slot, so the slab is
//! not borrowed during the poll and the task may spawn, wake or abort others.
//! Aborting marks the slot; the executor drops the future on the runtime
//! thread, outside any poll of it.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use crate::context::{panic_message, try_with_ctx, with_ctx};

/// Why a task produced no output.
#[derive(Debug)]
pub enum JoinError {
    /// [`JoinHandle::abort`] dropped it first, or its runtime was dropped
    /// before it finished.
    Cancelled,
    /// It panicked; the payload's message, when it was a string.
    Panicked(String),
}

impl std::fmt::Display for JoinError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JoinError::Cancelled => f.write_str("task was cancelled"),
            JoinError::Panicked(m) => write!(f, "task panicked: {m}"),
        }
    }
}

impl std::error::Error for JoinError {}

struct JoinState<T> {
    output: Option<Result<T, JoinError>>,
    waker: Option<Waker>,
}

/// Awaits the output of a spawned task. Dropping it detaches the task.
///
/// Not `Send`: a task belongs to the runtime thread that spawned it.
///
/// ```compile_fail
/// fn assert_send<T: Send>(_: T) {}
/// let rt = ringkit::Runtime::new().unwrap();
/// let h = rt.spawn(async {});
/// assert_send(h);
/// ```
pub struct JoinHandle<T> {
    state: Rc<RefCell<JoinState<T>>>,
    /// The runtime's serial: `abort` acts on that runtime only.
    rt: u64,
    gen: u16,
    key: u32,
}

impl<T> std::fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinHandle")
            .field("key", &self.key)
            .finish()
    }
}

impl<T> JoinHandle<T> {
    /// Cancel the task: its future is dropped (on this thread, before the next
    /// runtime turn ends) and awaiting this handle gives [`JoinError::Cancelled`].
    /// No effect if it already finished, or from another runtime than the
    /// task's (a runtime that is dropped cancels its tasks itself).
    pub fn abort(&self) {
        let _ = try_with_ctx(|cx| {
            if cx.serial == self.rt {
                cx.abort(self.key, self.gen);
            }
        });
    }

    /// Whether the task has finished (with output, panic or cancellation).
    pub fn is_finished(&self) -> bool {
        self.state.borrow().output.is_some()
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut st = self.state.borrow_mut();
        match st.output.take() {
            Some(out) => Poll::Ready(out),
            None => {
                st.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// Spawn `fut` on the current thread's runtime. Panics outside a runtime.
pub fn spawn<F>(fut: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let state = Rc::new(RefCell::new(JoinState {
        output: None,
        waker: None,
    }));
    let wrapped = Spawned {
        fut: CatchUnwind {
            fut: std::panic::AssertUnwindSafe(fut),
        },
        state: state.clone(),
    };
    let st2 = state.clone();
    let on_abort: crate::sched::OnAbort = Box::new(move |panicked| {
        let mut s = st2.borrow_mut();
        if s.output.is_none() {
            s.output = Some(Err(match panicked {
                Some(m) => JoinError::Panicked(m),
                None => JoinError::Cancelled,
            }));
        }
        if let Some(w) = s.waker.take() {
            w.wake();
        }
    });
    let (rt, gen, key) = with_ctx(|cx| cx.spawn_raw(Box::pin(wrapped), on_abort));
    JoinHandle {
        state,
        rt,
        gen,
        key,
    }
}

/// What the executor polls for a spawned future: the future (a panic
/// caught), then its output handed to the [`JoinHandle`]. Written by hand
/// rather than as an `async move` block: such a block keeps room for the
/// future twice (the captured variable and the future it awaits), which
/// doubled the memory of every task (e.g. of each idle connection).
struct Spawned<F: Future> {
    fut: CatchUnwind<F>,
    state: Rc<RefCell<JoinState<F::Output>>>,
}

impl<F: Future> Future for Spawned<F> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // SAFETY: `fut` is structurally pinned (never moved out of `self`);
        // `state` is an `Rc`, used by reference only.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above: `this.fut` stays where it is until dropped.
        let fut = unsafe { Pin::new_unchecked(&mut this.fut) };
        let out = match fut.poll(cx) {
            Poll::Ready(out) => out,
            Poll::Pending => return Poll::Pending,
        };
        let mut s = this.state.borrow_mut();
        s.output = Some(out.map_err(|p| JoinError::Panicked(panic_message(&*p))));
        if let Some(w) = s.waker.take() {
            w.wake();
        }
        Poll::Ready(())
    }
}

/// Polls a future, turning a panic into `Err(payload)`.
struct CatchUnwind<F> {
    fut: std::panic::AssertUnwindSafe<F>,
}

impl<F: Future> Future for CatchUnwind<F> {
    type Output = std::thread::Result<F::Output>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: structural pinning of the only field; we never move it out.
        let fut = unsafe { self.map_unchecked_mut(|s| &mut s.fut.0) };
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fut.poll(cx))) {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(p) => Poll::Ready(Err(p)),
        }
    }
}

/// Yield once to the runtime, letting other tasks and I/O run.
pub async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(move |cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await
}
