//! openraft's own conformance suite for runtimes, on each ringkit backend.

use openraft_rt::testing::Suite;
use ringkit_raft::runtime::{Epoll, RingkitRuntime, Uring};

fn uring_usable() -> bool {
    match ringkit::Runtime::builder()
        .backend(ringkit::Backend::Uring)
        .build()
    {
        Ok(_) => true,
        Err(e) => {
            eprintln!("skipped: io_uring unavailable here: {e}");
            false
        }
    }
}

#[test]
fn openraft_runtime_suite_on_io_uring() {
    if uring_usable() {
        Suite::<RingkitRuntime<Uring>>::test_all();
    }
}

#[test]
fn openraft_runtime_suite_on_epoll() {
    Suite::<RingkitRuntime<Epoll>>::test_all();
}
