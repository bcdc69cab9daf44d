//! Dropping a hosted runtime never panics and never leaks, whatever its
//! tasks do in their `Drop`: a ringkit task whose drop spawns a tokio local
//! task, and one whose drop panics. One test in this binary, so nothing
//! else opens or closes descriptors while it counts them.

use std::time::Duration;

use ringkit::{Backend, Builder};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Runs `f` when dropped.
struct OnDrop<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

/// 50 hosted runtimes per backend, each dropped with two ringkit tasks
/// pending: one whose drop calls `tokio::task::spawn_local`, one whose drop
/// panics. Runtime::drop used to drop tokio's `LocalSet` first, so the
/// first panicked ("spawn_local called from outside of a LocalSet"), and
/// any panic skipped the rest of the tear-down: one eventfd leaked per
/// runtime.
#[test]
fn task_drops_that_spawn_or_panic_neither_panic_nor_leak() {
    let hook = std::panic::take_hook();
    // The task's own panic is expected; keep the output quiet.
    std::panic::set_hook(Box::new(|_| {}));
    for backend in [Backend::Epoll, Backend::Uring] {
        if Builder::new().backend(backend).build().is_err() {
            eprintln!("skipped {backend:?}: unavailable here");
            continue;
        }
        // One runtime first, so lazily made process-wide state is counted.
        drop(
            Builder::new()
                .backend(backend)
                .host_tokio()
                .build()
                .unwrap(),
        );
        let before = open_fds();
        for _ in 0..50 {
            let rt = Builder::new()
                .backend(backend)
                .host_tokio()
                .build()
                .unwrap();
            rt.block_on(async {
                ringkit::spawn(async {
                    let _d = OnDrop(|| {
                        tokio::task::spawn_local(async {});
                    });
                    ringkit::time::sleep(Duration::from_secs(3600)).await;
                });
                ringkit::spawn(async {
                    let _d = OnDrop(|| panic!("a task's drop panicked"));
                    ringkit::time::sleep(Duration::from_secs(3600)).await;
                });
                ringkit::yield_now().await;
            });
            let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(rt)));
            assert!(
                dropped.is_ok(),
                "{backend:?}: dropping the runtime panicked"
            );
        }
        let after = open_fds();
        eprintln!("{backend:?}: 50 runtimes dropped; {before} descriptors before, {after} after");
        assert_eq!(
            after,
            before,
            "{backend:?}: {} descriptors leaked by 50 runtimes",
            after as i64 - before as i64
        );
    }
    std::panic::set_hook(hook);
}
