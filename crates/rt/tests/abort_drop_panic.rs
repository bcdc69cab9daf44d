//! Aborting a task whose drop panics, on both backends, plain and hosted:
//! the panic is caught (as tokio catches it), the task's slot is freed and
//! its `JoinHandle` resolves with `JoinError::Panicked`. The panic used to
//! escape `block_on`, skipping the slot's removal, so the handle never
//! resolved.

use std::future::pending;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use ringkit::time::{sleep, timeout};
use ringkit::{yield_now, Backend, Builder, JoinError};

struct OnDrop<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

/// Run `f` on a fresh runtime of each backend, plain and hosted (a
/// backend unavailable here is skipped, saying so).
fn each_runtime(mut f: impl FnMut(ringkit::Runtime, Backend, bool)) {
    for backend in [Backend::Epoll, Backend::Uring] {
        for hosted in [false, true] {
            let mut b = Builder::new().backend(backend);
            if hosted {
                b = b.host_tokio();
            }
            match b.build() {
                Ok(rt) => f(rt, backend, hosted),
                Err(e) => eprintln!("skipped {backend:?}: {e}"),
            }
        }
    }
}

#[test]
fn an_aborted_task_whose_drop_panics_resolves_its_handle_with_the_panic() {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    each_runtime(|rt, backend, hosted| {
        // The handle comes out in a tuple: a block that yields a future
        // reads as a forgotten `.await`.
        let (h,) = rt.block_on(async {
            let h = ringkit::spawn(async {
                let _d = OnDrop(|| panic!("the drop panics"));
                pending::<()>().await
            });
            yield_now().await;
            (h,)
        });
        h.abort();
        let turn = catch_unwind(AssertUnwindSafe(|| {
            rt.block_on(sleep(Duration::from_millis(10)))
        }));
        assert!(
            turn.is_ok(),
            "{backend:?} hosted {hosted}: the panic escaped block_on"
        );
        let r = rt.block_on(timeout(Duration::from_secs(2), h));
        match r {
            Ok(Err(JoinError::Panicked(m))) => assert!(m.contains("the drop panics"), "{m}"),
            other => panic!("{backend:?} hosted {hosted}: {other:?}"),
        }
    });
    std::panic::set_hook(hook);
}

/// A task that, when dropped, spawns the next of `left` such tasks.
fn chain(left: usize, dropped: std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    if left == 0 {
        return;
    }
    // Made outside the future, so that dropping it unpolled runs it.
    let next = OnDrop(move || {
        dropped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        chain(left - 1, dropped.clone());
    });
    ringkit::spawn(async move {
        let _next = next;
        pending::<()>().await
    });
}

/// Tear-down drops tasks that tasks' drops spawn, a chain of 300 as tokio
/// does (it stopped after 64 rounds and leaked the rest).
#[test]
fn a_chain_of_300_drops_that_spawn_is_dropped_whole() {
    each_runtime(|rt, backend, hosted| {
        let dropped = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let d = dropped.clone();
        rt.block_on(async move {
            chain(300, d);
            yield_now().await;
        });
        drop(rt);
        assert_eq!(
            dropped.load(std::sync::atomic::Ordering::Relaxed),
            300,
            "{backend:?} hosted {hosted}"
        );
    });
}
