//! The current thread's runtime state ([`Context`]) and how code reaches it.
//!
//! A runtime installs its boxed `Context` in a thread-local when built and
//! removes it when dropped ([`crate::runtime`]); everything that needs the
//! runtime (spawning, timers, I/O, wakers) reaches it through [`with_ctx`] /
//! [`try_with_ctx`]. This module owns the executor's run queue and the
//! waker's vtable; it imports only the layers below it (driver, metrics, the
//! scheduler's data in [`crate::sched`], the timer heap in
//! [`crate::timers`]), so no module that uses the context is imported back.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::ptr::NonNull;
use std::sync::Arc;
use std::task::{Context as TaskCx, Poll, RawWaker, RawWakerVTable, Waker};
use std::time::{Duration, Instant};

use crate::driver::{BackendReport, Driver};
use crate::kick::kick_host;
use crate::metrics::{Metrics, MetricsSnapshot};
use crate::sched::{self, BoxFuture, OnAbort, Remote, TaskSlot, MAIN_KEY};
use crate::timers::Timers;

thread_local! {
    static CURRENT: Cell<Option<NonNull<Context>>> = const { Cell::new(None) };
}

/// Run `f` with the current thread's runtime context. Panics outside a runtime.
pub(crate) fn with_ctx<R>(f: impl FnOnce(&Context) -> R) -> R {
    try_with_ctx(f).expect("not inside a ringkit runtime (build a Runtime on this thread first)")
}

/// Run `f` with the current runtime context, or return `None` without one.
pub(crate) fn try_with_ctx<R>(f: impl FnOnce(&Context) -> R) -> Option<R> {
    let p = CURRENT.try_with(Cell::get).ok().flatten()?;
    // SAFETY: CURRENT is set only while the `Runtime` owning this boxed
    // Context is alive on this thread; `Runtime::drop` clears it first.
    Some(f(unsafe { p.as_ref() }))
}

/// Whether this thread has a runtime installed.
pub(crate) fn is_installed() -> bool {
    CURRENT.with(Cell::get).is_some()
}

/// Make `ctx` this thread's context.
///
/// # Safety
/// `ctx` must stay alive and in place until [`uninstall`] runs on this
/// thread (the runtime owns it boxed and uninstalls it before freeing it).
pub(crate) unsafe fn install(ctx: &Context) {
    CURRENT.with(|c| c.set(Some(NonNull::from(ctx))));
}

/// This thread has no context any more (also during thread teardown).
pub(crate) fn uninstall() {
    let _ = CURRENT.try_with(|c| c.set(None));
}

/// Per-thread runtime state. Fields are in cells: tasks, driver and timers are
/// borrowed separately and never across a task poll.
pub(crate) struct Context {
    /// The id in this runtime's wakers (reused after the runtime is gone).
    pub(crate) id: u16,
    /// Unique in the process: handles and timers compare it before acting.
    pub(crate) serial: u64,
    pub(crate) driver: RefCell<Driver>,
    tasks: RefCell<slab::Slab<TaskSlot>>,
    queue: RefCell<VecDeque<u64>>,
    main_woken: Cell<bool>,
    next_gen: Cell<u16>,
    pub(crate) timers: RefCell<Timers>,
    /// The clock as of the end of the last park (one read per loop turn):
    /// for deadlines that need no precision ([`crate::time::coarse_now`]).
    pub(crate) now: Cell<Instant>,
    pub(crate) metrics: Metrics,
    remote: Arc<Remote>,
    report: BackendReport,
    /// Hosted mode: tasks get tokio budgets of their own (see `poll_task`).
    hosted: bool,
}

impl Context {
    /// A new context for runtime `id` (its registry id) on `driver`.
    pub(crate) fn new(
        id: u16,
        driver: Driver,
        report: BackendReport,
        remote: Arc<Remote>,
        hosted: bool,
    ) -> Box<Context> {
        Box::new(Context {
            id,
            serial: sched::next_serial(),
            driver: RefCell::new(driver),
            tasks: RefCell::new(slab::Slab::new()),
            queue: RefCell::new(VecDeque::new()),
            main_woken: Cell::new(false),
            next_gen: Cell::new(0),
            timers: RefCell::new(Timers::default()),
            now: Cell::new(Instant::now()),
            metrics: Metrics::default(),
            remote,
            report,
            hosted,
        })
    }

    /// Which backend runs, and why.
    pub(crate) fn report(&self) -> &BackendReport {
        &self.report
    }

    /// The waker of `block_on`'s main future.
    pub(crate) fn main_waker(&self) -> Waker {
        waker(self.id, 0, MAIN_KEY)
    }

    /// Mark the main future to be polled on the next turn.
    pub(crate) fn wake_main(&self) {
        self.main_woken.set(true);
    }

    /// Drop every task while the context is still installed, so their
    /// in-flight operations hand buffers to the driver and get cancelled;
    /// then their handles resolve to `Cancelled` (a handle kept past the
    /// runtime must not wait forever). Dropping a future may spawn or
    /// abort: loop until the slab stays empty, for at most
    /// [`DROP_ROUNDS`] rounds (a task whose drop spawns a task that does the
    /// same would otherwise keep the tear-down spinning for good): the
    /// tasks still there after that are leaked, with an error logged. Then
    /// the run queue is cleared.
    pub(crate) fn drop_tasks(&self) {
        for round in 0.. {
            let tasks: Vec<TaskSlot> = self.tasks.borrow_mut().drain().collect();
            if tasks.is_empty() {
                break;
            }
            if round == DROP_ROUNDS {
                tracing::error!(
                    "ringkit: tasks kept spawning tasks from their drops for {DROP_ROUNDS} \
                     rounds while the runtime shut down; leaking the {} left",
                    tasks.len()
                );
                for mut t in tasks {
                    std::mem::forget(t.future.take());
                    if let Some(f) = t.on_abort.take() {
                        f(None);
                    }
                }
                break;
            }
            let mut reports = Vec::with_capacity(tasks.len());
            for mut t in tasks {
                // A drop that panics must not skip the other tasks' drops
                // or the rest of the runtime's tear-down (a panic inside
                // another unwinding drop would abort the process): caught
                // and logged, as tokio catches a panic in a task's drop.
                let fut = t.future.take();
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(fut)));
                let panicked = r.err().map(|p| panic_message(&*p));
                if let Some(what) = &panicked {
                    tracing::error!(
                        "ringkit: a task's drop panicked while the runtime shut down: {what}"
                    );
                }
                reports.extend(t.on_abort.take().map(|f| (f, panicked)));
            }
            for (f, panicked) in reports {
                f(panicked);
            }
        }
        self.queue.borrow_mut().clear();
    }

    /// This runtime's counters, the driver's included.
    pub(crate) fn snapshot(&self) -> MetricsSnapshot {
        let drv = self.driver.borrow();
        crate::metrics::snapshot(
            &self.metrics,
            drv.enter_count(),
            drv.ops_in_flight() as u64,
            crate::coop::yields(),
        )
    }

    /// Put a woken task (or the main future) on the run queue, once.
    pub(crate) fn schedule(&self, data: u64) {
        let (_, gen, key) = sched::decode(data);
        if key == MAIN_KEY {
            self.main_woken.set(true);
        } else {
            let mut tasks = self.tasks.borrow_mut();
            match tasks.get_mut(key as usize) {
                Some(slot) if slot.gen == gen && !slot.scheduled => {
                    slot.scheduled = true;
                    self.queue.borrow_mut().push_back(data);
                }
                _ => return,
            }
        }
        kick_host();
    }

    /// Returns `(serial, gen, key)`.
    pub(crate) fn spawn_raw(&self, fut: BoxFuture, on_abort: OnAbort) -> (u64, u16, u32) {
        let gen = self.next_gen.get().wrapping_add(1);
        self.next_gen.set(gen);
        let key = self.tasks.borrow_mut().insert(TaskSlot {
            gen,
            future: Some(fut),
            scheduled: true,
            aborted: false,
            on_abort: Some(on_abort),
        }) as u32;
        assert!(key != MAIN_KEY, "too many tasks");
        self.queue
            .borrow_mut()
            .push_back(sched::encode(self.id, gen, key));
        self.metrics
            .tasks_spawned
            .set(self.metrics.tasks_spawned.get() + 1);
        kick_host();
        (self.serial, gen, key)
    }

    pub(crate) fn abort(&self, key: u32, gen: u16) {
        let mut tasks = self.tasks.borrow_mut();
        if let Some(slot) = tasks.get_mut(key as usize) {
            if slot.gen == gen && !slot.aborted {
                slot.aborted = true;
                if !slot.scheduled {
                    slot.scheduled = true;
                    self.queue
                        .borrow_mut()
                        .push_back(sched::encode(self.id, gen, key));
                    kick_host();
                }
            }
        }
    }

    /// Poll one task from the queue. Returns false when the queue is empty.
    fn run_one(&self) -> bool {
        let Some(data) = self.queue.borrow_mut().pop_front() else {
            return false;
        };
        let (_, gen, key) = sched::decode(data);
        let (fut, aborted) = {
            let mut tasks = self.tasks.borrow_mut();
            let Some(slot) = tasks.get_mut(key as usize) else {
                return true;
            };
            if slot.gen != gen {
                return true;
            }
            slot.scheduled = false;
            (slot.future.take(), slot.aborted)
        };
        let Some(mut fut) = fut else { return true };
        if aborted {
            self.finish_aborted(key, fut);
            return true;
        }
        let waker = waker(self.id, gen, key);
        let mut cx = TaskCx::from_waker(&waker);
        self.metrics.polls.set(self.metrics.polls.get() + 1);
        let done =
            crate::coop::with_budget(|| poll_task(fut.as_mut(), &mut cx, self.hosted, false))
                .is_ready();
        let mut tasks = self.tasks.borrow_mut();
        if done {
            tasks.remove(key as usize);
        } else if tasks[key as usize].aborted {
            drop(tasks);
            self.finish_aborted(key, fut);
        } else {
            tasks[key as usize].future = Some(fut);
        }
        true
    }

    fn finish_aborted(&self, key: u32, fut: BoxFuture) {
        // Drop the future first (its ops cancel), then report the
        // cancellation. A drop that panics is caught, as tokio catches it:
        // the slot is still freed and the `JoinHandle` gets the panic
        // (it used to escape `block_on`, and the handle never resolved).
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(fut)));
        let panicked = r.err().map(|p| panic_message(&*p));
        let slot = self.tasks.borrow_mut().remove(key as usize);
        if let Some(f) = { slot }.on_abort.take() {
            f(panicked);
        }
    }

    fn drain_remote(&self) {
        let woken: Vec<u64> = {
            let mut q = self.remote.queue.lock().unwrap_or_else(|e| e.into_inner());
            if q.is_empty() {
                return;
            }
            std::mem::take(&mut *q)
        };
        for d in woken {
            self.schedule(d);
        }
    }

    pub(crate) fn has_runnable(&self) -> bool {
        self.main_woken.get() || !self.queue.borrow().is_empty()
    }

    /// Poll the main future if it was woken; then run what was runnable at
    /// the start of the turn (tasks woken meanwhile wait for the next turn,
    /// so I/O is never starved). Hosted, the main future comes last: it
    /// spends tokio's budget for good (see [`poll_task`]), each task's
    /// guard gives back what the task spent, so the tasks before it cannot
    /// leave it less than the turn started with, and it cannot leave them
    /// none (a main future draining a busy tokio channel starved them).
    pub(crate) fn run_turn<F: Future>(
        &self,
        mut fut: std::pin::Pin<&mut F>,
        tcx: &mut TaskCx<'_>,
    ) -> Poll<F::Output> {
        let mut main = |fut: std::pin::Pin<&mut F>| {
            if self.main_woken.replace(false) {
                crate::coop::with_budget(|| poll_task(fut, tcx, self.hosted, true))
            } else {
                Poll::Pending
            }
        };
        if !self.hosted {
            if let Poll::Ready(v) = main(fut.as_mut()) {
                return Poll::Ready(v);
            }
        }
        let n = self.queue.borrow().len();
        for _ in 0..n {
            if !self.run_one() {
                break;
            }
        }
        if self.hosted {
            return main(fut);
        }
        Poll::Pending
    }

    /// Park the driver (at most `timeout`), then fire due timers and take
    /// in remote wakes.
    pub(crate) fn park(&self, timeout: Option<Duration>) {
        if let Err(e) = self.driver.borrow_mut().park(timeout, &self.metrics) {
            tracing::error!("ringkit: driver park failed: {e}");
        }
        let now = Instant::now();
        self.now.set(now);
        self.timers.borrow_mut().fire(now);
        self.drain_remote();
    }
}

/// Poll one task (or the main future).
///
/// With the `tokio` feature, tokio's cooperative budget is kept per task:
///
/// - **Hosted**, the main future (`block_on`'s) is polled last in a turn
///   with the budget in force: all of tokio's 128 units when the turn
///   starts a poll of the joint loop's future, as a tokio task's poll has
///   them (tokio's own coop tests count on the 128): the tasks before it
///   give back what they spend. Each spawned task gets a budget of its
///   own: the turn's, one less (`poll_proceed` below takes one). A whole ringkit turn runs inside one poll of the
///   joint loop's future, where tokio allows 128 operations on its
///   resources (semaphores, timers, sockets) for everything polled; without
///   this the first tasks of a turn would use them up and the rest would
///   see every tokio resource `Pending` and be polled for nothing.
///   `poll_proceed` takes one unit of the budget in force and returns a
///   guard that, dropped without `made_progress`, puts the budget back to
///   what it was (tokio documents this): each task starts from the same
///   budget. tokio has no public call that sets a fresh budget, so this is
///   as close to "a tokio task's poll" as hosted mode can get.
/// - **Not hosted**, the task is polled unconstrained. A plain runtime run
///   from inside a tokio task (a `#[tokio::test]`) would otherwise charge
///   the outer task's budget, and once it was spent every tokio resource
///   would answer `Pending` with a wake deferred to a tokio scheduler that
///   this blocked thread never runs again: a hang.
///
/// Outside tokio this costs a thread-local read.
fn poll_task<F: Future + ?Sized>(
    fut: std::pin::Pin<&mut F>,
    cx: &mut TaskCx<'_>,
    hosted: bool,
    main: bool,
) -> Poll<F::Output> {
    #[cfg(feature = "tokio")]
    {
        if !hosted {
            return std::pin::pin!(tokio::task::coop::unconstrained(fut)).poll(cx);
        }
        if main {
            return fut.poll(cx);
        }
        // Pending only when the turn's budget is already spent (tokio has
        // then deferred a wake of this task): poll it anyway, as before.
        if let Poll::Ready(restore) = tokio::task::coop::poll_proceed(cx) {
            let r = fut.poll(cx);
            drop(restore);
            return r;
        }
    }
    #[cfg(not(feature = "tokio"))]
    let _ = (hosted, main);
    fut.poll(cx)
}

/// A panic's message, where its payload is a string.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

/// Rounds of [`Context::drop_tasks`] before the tasks left are leaked.
const DROP_ROUNDS: usize = 4096;

static VTABLE: RawWakerVTable = RawWakerVTable::new(clone_raw, wake_raw, wake_raw, drop_raw);

fn clone_raw(data: *const ()) -> RawWaker {
    RawWaker::new(data, &VTABLE)
}

fn wake_raw(data: *const ()) {
    wake_data(data as usize as u64);
}

fn drop_raw(_: *const ()) {}

/// A waker for slot `key` of runtime `rt`.
pub(crate) fn waker(rt: u16, gen: u16, key: u32) -> Waker {
    let data = sched::encode(rt, gen, key) as usize as *const ();
    // SAFETY: the vtable functions treat `data` as a plain number; they never
    // dereference it, so any value is valid on any thread.
    unsafe { Waker::from_raw(RawWaker::new(data, &VTABLE)) }
}

pub(crate) fn wake_data(data: u64) {
    let (rt, _, _) = sched::decode(data);
    let local = try_with_ctx(|cx| {
        if cx.id == rt {
            cx.schedule(data);
            true
        } else {
            false
        }
    });
    if local != Some(true) {
        if let Some(r) = sched::remote(rt) {
            r.wake(data);
        }
    }
}
