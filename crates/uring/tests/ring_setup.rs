//! Builder options, flag fallback, deferred task work and eventfd registration.

mod common;

use std::io;
use std::time::Duration;

use common::*;
use ringkit_uring::opcode::{self, SqeFlags, Target};
use ringkit_uring::{explain_setup_error, flag_names, sys, IoUring};

fn nop(ud: u64) -> opcode::Entry {
    opcode::Nop::new().build().user_data(ud)
}

/// Non-blocking read of an eventfd counter: `None` when it is zero.
fn eventfd_count(fd: i32) -> Option<u64> {
    let mut v = 0u64;
    // SAFETY: `v` is 8 writable bytes, as eventfd reads need.
    let n = unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
    if n == 8 {
        Some(v)
    } else {
        let e = io::Error::last_os_error();
        assert_eq!(e.raw_os_error(), Some(libc::EAGAIN), "eventfd read: {e}");
        None
    }
}

fn nonblocking_eventfd() -> std::os::fd::OwnedFd {
    // SAFETY: eventfd has no memory arguments.
    own(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })
}

#[test]
fn entries_round_up_and_cqsize_is_validated() {
    let mut ring = IoUring::builder(5).build().unwrap();
    assert_eq!(ring.sq().capacity(), 8);
    assert_eq!(ring.cq().capacity(), 16, "default CQ is twice the SQ");
    assert_eq!(ring.params().sq_entries, 8);

    let mut ring = IoUring::builder(4).cqsize(64).build().unwrap();
    assert_eq!(ring.cq().capacity(), 64);
    assert_ne!(ring.setup_flags() & sys::IORING_SETUP_CQSIZE, 0);

    let e = IoUring::builder(8).cqsize(4).build().unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "CQ smaller than SQ");
}

#[test]
fn clamp_caps_oversized_rings() {
    let e = IoUring::builder(1 << 20).build().unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
    let mut ring = IoUring::builder(1 << 20).clamp().build().unwrap();
    assert_eq!(ring.sq().capacity(), 32768);
    push_plain(&mut ring, nop(1));
    assert_eq!(wait_one(&mut ring).user_data, 1);
}

#[test]
fn refused_performance_flags_are_stripped_unless_strict() {
    // SQPOLL refuses COOP_TASKRUN and TASKRUN_FLAG (no IPIs to coordinate).
    let b = IoUring::builder(8)
        .sqpoll(Duration::from_millis(10))
        .coop_taskrun()
        .taskrun_flag();
    let want = sys::IORING_SETUP_COOP_TASKRUN | sys::IORING_SETUP_TASKRUN_FLAG;
    let mut ring = match b.build() {
        Ok(r) => r,
        Err(e) => return skip(&format!("SQPOLL ring refused: {e}")),
    };
    assert_eq!(
        ring.stripped_flags(),
        want,
        "stripped {}",
        flag_names(ring.stripped_flags(), sys::SETUP_FLAG_NAMES)
    );
    assert_eq!(ring.setup_flags() & want, 0);
    assert_ne!(
        ring.setup_flags() & sys::IORING_SETUP_SQPOLL,
        0,
        "SQPOLL kept"
    );
    push_plain(&mut ring, nop(1));
    assert_eq!(wait_one(&mut ring).user_data, 1);

    let e = b.clone().strict(true).build().unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EINVAL));

    // SQPOLL + DEFER_TASKRUN: only DEFER_TASKRUN goes; SINGLE_ISSUER stays.
    let ring = IoUring::builder(8)
        .sqpoll(Duration::from_millis(10))
        .defer_taskrun()
        .build()
        .unwrap();
    assert_eq!(ring.stripped_flags(), sys::IORING_SETUP_DEFER_TASKRUN);
    assert_ne!(ring.setup_flags() & sys::IORING_SETUP_SINGLE_ISSUER, 0);

    // A refused flag that is not a performance flag is an error.
    let e = IoUring::builder(8)
        .flags(sys::IORING_SETUP_SQ_AFF)
        .build()
        .unwrap_err();
    assert_eq!(
        e.raw_os_error(),
        Some(libc::EINVAL),
        "SQ_AFF without SQPOLL"
    );

    // Nothing refused, nothing stripped.
    let ring = IoUring::builder(8)
        .coop_taskrun()
        .taskrun_flag()
        .build()
        .unwrap();
    assert_eq!(ring.stripped_flags(), 0);
    assert_eq!(ring.setup_flags() & want, want);
}

#[test]
fn sqpoll_pinned_to_a_cpu() {
    let mut ring = match IoUring::builder(4)
        .sqpoll(Duration::from_millis(10))
        .sqpoll_cpu(0)
        .build()
    {
        Ok(r) => r,
        Err(e) => return skip(&format!("SQPOLL ring refused: {e}")),
    };
    let want = sys::IORING_SETUP_SQPOLL | sys::IORING_SETUP_SQ_AFF;
    assert_eq!(ring.setup_flags() & want, want);
    push_plain(&mut ring, nop(3));
    assert_eq!(wait_one(&mut ring).user_data, 3);
}

#[test]
fn sqpoll_sub_millisecond_idle_is_not_a_second() {
    let idle = Duration::from_micros(500);
    let mut ring = match IoUring::builder(4).sqpoll(idle).build() {
        Ok(r) => r,
        Err(e) => return skip(&format!("SQPOLL ring refused: {e}")),
    };
    assert_ne!(
        ring.params().sq_thread_idle,
        0,
        "0 means the kernel default (1 s)"
    );
    push_plain(&mut ring, nop(1));
    assert_eq!(wait_one(&mut ring).user_data, 1);
    // With a 0.5 ms idle the poller must be asleep long before 300 ms. A
    // machine too busy to run it is told apart by our own sleeps' overshoot
    // (5 ms naps that took much longer): then this says so and skips.
    let start = std::time::Instant::now();
    let mut late = Duration::ZERO;
    while ring.sq().flags() & sys::IORING_SQ_NEED_WAKEUP == 0 {
        if start.elapsed() >= Duration::from_millis(300) {
            if late > Duration::from_millis(100) {
                return skip(&format!(
                    "the machine is starved (our 5 ms sleeps overshot by {late:?} in all): \
                     cannot tell a 500 µs idle from the 1 s default"
                ));
            }
            panic!("poller still awake after 300 ms with a 500 µs idle");
        }
        let nap = std::time::Instant::now();
        std::thread::sleep(Duration::from_millis(5));
        late += nap.elapsed().saturating_sub(Duration::from_millis(5));
    }
}

#[test]
fn defer_taskrun_completes_only_on_getevents() {
    let mut ring = IoUring::builder(8)
        .defer_taskrun()
        .no_sqarray()
        .build()
        .unwrap();
    let want = sys::IORING_SETUP_DEFER_TASKRUN | sys::IORING_SETUP_SINGLE_ISSUER;
    if ring.setup_flags() & want != want {
        return skip("DEFER_TASKRUN unsupported");
    }
    let (pr, pw) = pipe();
    let mut buf = [0u8; 8];
    let r = opcode::Read::new(Target::Fd(raw(&pr)), buf.as_mut_ptr(), 8).offset(u64::MAX);
    // SAFETY: `buf` outlives the wait.
    unsafe { push(&mut ring, r.build().user_data(1)) };
    assert_eq!(ring.submit().unwrap(), 1);
    write_fd(raw(&pw), b"later");
    // The completion waits as task work until we enter with GETEVENTS.
    assert_eq!(ring.cq().ready(), 0);
    let c = wait_one(&mut ring);
    assert_eq!((c.user_data, c.res), (1, 5));
    assert_eq!(&buf[..5], b"later");
}

#[test]
fn taskrun_flag_makes_next_cqe_run_task_work() {
    let mut ring = IoUring::builder(8)
        .defer_taskrun()
        .taskrun_flag()
        .build()
        .unwrap();
    let want = sys::IORING_SETUP_DEFER_TASKRUN | sys::IORING_SETUP_TASKRUN_FLAG;
    if ring.setup_flags() & want != want {
        return skip("DEFER_TASKRUN + TASKRUN_FLAG unsupported");
    }
    let (pr, pw) = pipe();
    let mut buf = [0u8; 8];
    let r = opcode::Read::new(Target::Fd(raw(&pr)), buf.as_mut_ptr(), 8).offset(u64::MAX);
    // SAFETY: `buf` outlives the read, reaped below.
    unsafe { push(&mut ring, r.build().user_data(1)) };
    assert_eq!(ring.submit().unwrap(), 1);
    assert!(!ring.sq().taskrun());
    write_fd(raw(&pw), b"tw");
    assert!(ring.sq().taskrun(), "kernel flagged pending task work");
    assert!(ring.cq_needs_enter());
    let c = ring
        .next_cqe()
        .unwrap()
        .expect("next_cqe ran the task work");
    assert_eq!((c.user_data, c.res), (1, 2));
    assert!(!ring.sq().taskrun());
}

#[test]
fn eventfd_signals_and_can_be_disabled() {
    let mut ring = ring(8);
    let efd = nonblocking_eventfd();
    ring.register_eventfd(raw(&efd)).unwrap();
    push_plain(&mut ring, nop(1));
    wait_one(&mut ring);
    assert_eq!(eventfd_count(raw(&efd)), Some(1));

    ring.cq().set_eventfd_disabled(true);
    push_plain(&mut ring, nop(2));
    wait_one(&mut ring);
    assert_eq!(eventfd_count(raw(&efd)), None, "disabled: no signal");

    ring.cq().set_eventfd_disabled(false);
    push_plain(&mut ring, nop(3));
    wait_one(&mut ring);
    assert_eq!(eventfd_count(raw(&efd)), Some(1));

    ring.unregister_eventfd().unwrap();
    push_plain(&mut ring, nop(4));
    wait_one(&mut ring);
    assert_eq!(eventfd_count(raw(&efd)), None, "unregistered: no signal");
    assert_eq!(
        ring.unregister_eventfd().unwrap_err().raw_os_error(),
        Some(libc::ENXIO)
    );
}

#[test]
fn eventfd_async_signals_only_worker_completions() {
    let mut ring = ring(8);
    let efd = nonblocking_eventfd();
    ring.register_eventfd_async(raw(&efd)).unwrap();
    push_plain(&mut ring, nop(1));
    wait_one(&mut ring);
    assert_eq!(eventfd_count(raw(&efd)), None, "inline NOP does not signal");
    push_plain(&mut ring, nop(2).flags(SqeFlags::ASYNC));
    wait_one(&mut ring);
    assert_eq!(eventfd_count(raw(&efd)), Some(1), "io-wq NOP signals");
}

#[test]
fn sq_wait_returns_once_sqpoll_made_room() {
    let mut ring = match IoUring::builder(4)
        .sqpoll(Duration::from_millis(1000))
        .build()
    {
        Ok(r) => r,
        Err(e) => return skip(&format!("SQPOLL ring refused: {e}")),
    };
    for ud in 0..4 {
        push_plain(&mut ring, nop(ud));
    }
    ring.submit().unwrap();
    ring.sq_wait().unwrap();
    assert!(ring.sq().space_left() > 0, "the poller consumed SQEs");
    let got = wait(&mut ring, 4);
    assert_eq!(
        got.iter().map(|c| c.user_data).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
}

#[test]
fn setup_errors_are_explained() {
    let s = explain_setup_error(&io::Error::from_raw_os_error(libc::ENOSYS));
    assert!(s.contains("ENOSYS") && s.contains("CONFIG_IO_URING"), "{s}");
    let s = explain_setup_error(&io::Error::from_raw_os_error(libc::ENOMEM));
    assert!(s.contains("RLIMIT_MEMLOCK"), "{s}");
    let s = explain_setup_error(&io::Error::from_raw_os_error(libc::EPERM));
    assert!(s.contains("EPERM"), "{s}");
    assert_eq!(flag_names(0, sys::SETUP_FLAG_NAMES), "none");
    assert_eq!(
        flag_names(
            sys::IORING_SETUP_SQPOLL | sys::IORING_SETUP_CQSIZE,
            sys::SETUP_FLAG_NAMES
        ),
        "SQPOLL|CQSIZE"
    );
}
