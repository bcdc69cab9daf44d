//! A hosted runtime dropped inside another tokio runtime's task: tokio
//! panics there ("Cannot drop a runtime in a context where blocking is not
//! allowed"), and ringkit's own tear-down still runs before the panic goes
//! on (it skipped the driver's shutdown and the remote registration: one
//! fd leaked per runtime). One test in this binary: it counts fds.

use std::panic::{catch_unwind, AssertUnwindSafe};

use ringkit::{Backend, Builder};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn a_hosted_runtime_dropped_inside_tokio_still_tears_itself_down() {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let outer = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for backend in [Backend::Epoll, Backend::Uring] {
        let b = || Builder::new().backend(backend).host_tokio();
        if b().build().is_err() {
            eprintln!("skipped {backend:?}: unavailable here");
            continue;
        }
        let before = open_fds();
        let mut panicked = 0;
        for _ in 0..10 {
            let r = catch_unwind(AssertUnwindSafe(|| {
                outer.block_on(async {
                    let rt = b().build().unwrap();
                    drop(rt);
                })
            }));
            panicked += r.is_err() as usize;
        }
        let after = open_fds();
        std::panic::set_hook(Box::new(|_| {}));
        eprintln!("{backend:?}: {panicked} of 10 drops panicked (tokio's refusal)");
        assert_eq!(after, before, "{backend:?}: fds {before} -> {after}");
    }
    std::panic::set_hook(hook);
}
