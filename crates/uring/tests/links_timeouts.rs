//! Timeouts, cancellation and the SQE flags that order or silence requests.

mod common;

use std::time::{Duration, Instant};

use common::*;
use ringkit_uring::opcode::{self, SqeFlags, Target};
use ringkit_uring::sys::{self, KernelTimespec};

fn ts(d: Duration) -> KernelTimespec {
    KernelTimespec::from(d)
}

/// A WRITE to an invalid fd: fails with EBADF, references only static data.
fn failing_write(ud: u64) -> opcode::Entry {
    opcode::Write::new(Target::Fd(-1), b"x".as_ptr(), 1)
        .build()
        .user_data(ud)
}

#[test]
fn timeout_fires_with_etime() {
    let mut ring = ring(4);
    let t = ts(Duration::from_millis(10));
    let start = Instant::now();
    // SAFETY: `t` outlives the timeout's completion.
    unsafe { push(&mut ring, opcode::Timeout::new(&t).build().user_data(1)) };
    let c = wait_one(&mut ring);
    assert_eq!((c.user_data, c.res), (1, neg(libc::ETIME)));
    assert!(start.elapsed() >= Duration::from_millis(9), "fired early");
}

#[test]
fn timeout_with_count_completes_with_zero() {
    let mut ring = ring(8);
    let t = ts(Duration::from_secs(30));
    // SAFETY: `t` outlives the timeout, which completes below.
    unsafe {
        push(
            &mut ring,
            opcode::Timeout::new(&t).count(2).build().user_data(1),
        )
    };
    push_plain(&mut ring, opcode::Nop::new().build().user_data(2));
    push_plain(&mut ring, opcode::Nop::new().build().user_data(3));
    let start = Instant::now();
    let got = wait_sorted(&mut ring, 3);
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "waited for the clock"
    );
    assert_eq!((got[0].user_data, got[0].res), (1, 0), "{got:?}");
    assert_eq!((got[1].res, got[2].res), (0, 0));
}

#[test]
fn timeout_remove_cancels_the_timeout() {
    let mut ring = ring(8);
    let t = ts(Duration::from_secs(30));
    // SAFETY: `t` outlives the timeout, which is removed below.
    unsafe { push(&mut ring, opcode::Timeout::new(&t).build().user_data(1)) };
    assert_eq!(ring.submit().unwrap(), 1);
    assert_no_cqe(&mut ring);
    push_plain(
        &mut ring,
        opcode::TimeoutRemove::new(1).build().user_data(2),
    );
    let got = wait_sorted(&mut ring, 2);
    assert_eq!((got[0].user_data, got[0].res), (1, neg(libc::ECANCELED)));
    assert_eq!((got[1].user_data, got[1].res), (2, 0));
    push_plain(
        &mut ring,
        opcode::TimeoutRemove::new(1).build().user_data(3),
    );
    assert_eq!(wait_one(&mut ring).res, neg(libc::ENOENT));
}

#[test]
fn link_timeout_cancels_a_read_on_an_empty_pipe() {
    let mut ring = ring(8);
    let (pr, pw) = pipe();
    let mut buf = [0u8; 16];
    let t = ts(Duration::from_millis(10));
    let r = opcode::Read::new(Target::Fd(raw(&pr)), buf.as_mut_ptr(), 16).offset(u64::MAX);
    // SAFETY: `buf` and `t` outlive both completions.
    unsafe {
        push(&mut ring, r.build().flags(SqeFlags::IO_LINK).user_data(1));
        push(&mut ring, opcode::LinkTimeout::new(&t).build().user_data(2));
    }
    let got = wait_sorted(&mut ring, 2);
    assert_eq!((got[0].user_data, got[0].res), (1, neg(libc::ECANCELED)));
    assert_eq!((got[1].user_data, got[1].res), (2, neg(libc::ETIME)));

    // When the read completes in time, the link timeout is the one cancelled.
    write_fd(raw(&pw), b"in time");
    let t = ts(Duration::from_secs(30));
    // SAFETY: as above.
    unsafe {
        push(&mut ring, r.build().flags(SqeFlags::IO_LINK).user_data(3));
        push(&mut ring, opcode::LinkTimeout::new(&t).build().user_data(4));
    }
    let got = wait_sorted(&mut ring, 2);
    assert_eq!((got[0].user_data, got[0].res), (3, 7));
    assert_eq!((got[1].user_data, got[1].res), (4, neg(libc::ECANCELED)));
    assert_eq!(&buf[..7], b"in time");
}

#[test]
fn async_cancel_by_user_data_and_by_fd() {
    let mut ring = ring(8);
    let (pr, _pw) = pipe();
    let t = ts(Duration::from_secs(30));
    // SAFETY: `t` outlives the timeout, which is cancelled below.
    unsafe { push(&mut ring, opcode::Timeout::new(&t).build().user_data(1)) };
    push_plain(&mut ring, opcode::AsyncCancel::new(1).build().user_data(2));
    let got = wait_sorted(&mut ring, 2);
    assert_eq!((got[0].user_data, got[0].res), (1, neg(libc::ECANCELED)));
    assert_eq!((got[1].user_data, got[1].res), (2, 0));

    // Two reads pending on one pipe; cancel every request on that fd.
    let (mut a, mut b) = ([0u8; 4], [0u8; 4]);
    let ra = opcode::Read::new(Target::Fd(raw(&pr)), a.as_mut_ptr(), 4).offset(u64::MAX);
    let rb = opcode::Read::new(Target::Fd(raw(&pr)), b.as_mut_ptr(), 4).offset(u64::MAX);
    // SAFETY: `a` and `b` outlive the reads, which are cancelled below.
    unsafe {
        push(&mut ring, ra.build().user_data(10));
        push(&mut ring, rb.build().user_data(11));
    }
    assert_eq!(ring.submit().unwrap(), 2);
    assert_no_cqe(&mut ring);
    let c = opcode::AsyncCancel::new(0)
        .fd(Some(Target::Fd(raw(&pr))))
        .flags(sys::IORING_ASYNC_CANCEL_ALL);
    push_plain(&mut ring, c.build().user_data(12));
    let got = wait_sorted(&mut ring, 3);
    assert_eq!(got[0].res, neg(libc::ECANCELED));
    assert_eq!(got[1].res, neg(libc::ECANCELED));
    assert_eq!((got[2].user_data, got[2].res), (12, 2), "cancelled two");
}

#[test]
fn io_link_failure_cancels_the_rest_of_the_chain() {
    let mut ring = ring(8);
    push_plain(&mut ring, failing_write(1).flags(SqeFlags::IO_LINK));
    push_plain(
        &mut ring,
        opcode::Nop::new()
            .build()
            .flags(SqeFlags::IO_LINK)
            .user_data(2),
    );
    push_plain(&mut ring, opcode::Nop::new().build().user_data(3));
    let got = wait_sorted(&mut ring, 3);
    let res: Vec<i32> = got.iter().map(|c| c.res).collect();
    assert_eq!(
        res,
        [neg(libc::EBADF), neg(libc::ECANCELED), neg(libc::ECANCELED)]
    );

    // A successful chain runs in order: the read sees the linked write.
    let f = tempfile::tempfile().unwrap();
    let mut buf = [0u8; 8];
    let w = opcode::Write::new(Target::Fd(raw(&f)), b"chained!".as_ptr(), 8);
    let r = opcode::Read::new(Target::Fd(raw(&f)), buf.as_mut_ptr(), 8);
    // SAFETY: static data; `buf` outlives the wait.
    unsafe {
        push(&mut ring, w.build().flags(SqeFlags::IO_LINK).user_data(4));
        push(&mut ring, r.build().user_data(5));
    }
    let got = wait_sorted(&mut ring, 2);
    assert_eq!((got[0].res, got[1].res), (8, 8));
    assert_eq!(&buf, b"chained!");
}

#[test]
fn io_hardlink_continues_after_a_failure() {
    let mut ring = ring(8);
    push_plain(&mut ring, failing_write(1).flags(SqeFlags::IO_HARDLINK));
    push_plain(&mut ring, opcode::Nop::new().build().user_data(2));
    let got = wait_sorted(&mut ring, 2);
    assert_eq!((got[0].user_data, got[0].res), (1, neg(libc::EBADF)));
    assert_eq!(
        (got[1].user_data, got[1].res),
        (2, 0),
        "hard link still ran"
    );
}

#[test]
fn io_drain_waits_for_earlier_requests() {
    let mut ring = ring(8);
    let (pr, pw) = pipe();
    let mut buf = [0u8; 8];
    let r = opcode::Read::new(Target::Fd(raw(&pr)), buf.as_mut_ptr(), 8).offset(u64::MAX);
    // SAFETY: `buf` outlives the read, completed below.
    unsafe { push(&mut ring, r.build().user_data(1)) };
    // Control: a plain NOP completes at once while the read is pending.
    push_plain(&mut ring, opcode::Nop::new().build().user_data(2));
    assert_eq!(wait_one(&mut ring).user_data, 2);

    push_plain(
        &mut ring,
        opcode::Nop::new()
            .build()
            .flags(SqeFlags::IO_DRAIN)
            .user_data(3),
    );
    push_plain(&mut ring, opcode::Nop::new().build().user_data(4));
    assert_eq!(ring.submit().unwrap(), 2);
    assert_no_cqe(&mut ring);
    write_fd(raw(&pw), b"go");
    let got = wait(&mut ring, 3);
    let uds: Vec<u64> = got.iter().map(|c| c.user_data).collect();
    assert_eq!(uds, [1, 3, 4], "drained NOP ran after the read: {got:?}");
    assert_eq!(got[0].res, 2);
}

#[test]
fn async_flag_punts_and_still_completes() {
    let mut ring = ring(8);
    let f = tempfile::tempfile().unwrap();
    write_fd(raw(&f), b"async file");
    let (pr, pw) = pipe();
    let (mut fb, mut pb) = ([0u8; 16], [0u8; 16]);
    let rf = opcode::Read::new(Target::Fd(raw(&f)), fb.as_mut_ptr(), 16);
    let rp = opcode::Read::new(Target::Fd(raw(&pr)), pb.as_mut_ptr(), 16).offset(u64::MAX);
    // SAFETY: both buffers outlive the wait.
    unsafe {
        push(&mut ring, rf.build().flags(SqeFlags::ASYNC).user_data(1));
        push(&mut ring, rp.build().flags(SqeFlags::ASYNC).user_data(2));
    }
    assert_eq!(wait_one(&mut ring).user_data, 1);
    assert_eq!(&fb[..10], b"async file");
    write_fd(raw(&pw), b"worker");
    let c = wait_one(&mut ring);
    assert_eq!((c.user_data, c.res), (2, 6));
    assert_eq!(&pb[..6], b"worker");
}

#[test]
fn cqe_skip_success_posts_only_failures() {
    let mut ring = ring(8);
    if ring.features() & sys::IORING_FEAT_CQE_SKIP == 0 {
        return skip("kernel lacks IORING_FEAT_CQE_SKIP");
    }
    let skip_ok = SqeFlags::CQE_SKIP_SUCCESS;
    push_plain(
        &mut ring,
        opcode::Nop::new().build().flags(skip_ok).user_data(1),
    );
    push_plain(&mut ring, opcode::Nop::new().build().user_data(2));
    push_plain(&mut ring, failing_write(3).flags(skip_ok));
    push_plain(
        &mut ring,
        opcode::Nop::new().build().flags(skip_ok).user_data(4),
    );
    let got = wait_sorted(&mut ring, 2);
    assert_eq!((got[0].user_data, got[0].res), (2, 0));
    assert_eq!((got[1].user_data, got[1].res), (3, neg(libc::EBADF)));
    // Everything above completed inline during submit: nothing else is coming.
    assert_eq!(
        ring.submit_and_wait_timeout(1, Duration::from_millis(20))
            .unwrap(),
        0
    );
    assert_no_cqe(&mut ring);
}

/// The rule a chain of skipped sends rests on: when a member with
/// `CQE_SKIP_SUCCESS` fails, its own CQE is posted and the links after it
/// are cancelled silently, so the chain posts exactly one CQE. The probe
/// the runtime asks before chaining must agree with what the ring does.
#[test]
fn a_failing_skipped_link_member_posts_the_only_cqe() {
    let mut ring = ring(8);
    if ring.features() & sys::IORING_FEAT_CQE_SKIP == 0 {
        return skip("kernel lacks IORING_FEAT_CQE_SKIP");
    }
    let skip_link = SqeFlags::CQE_SKIP_SUCCESS | SqeFlags::IO_LINK;
    push_plain(
        &mut ring,
        opcode::Nop::new().build().flags(skip_link).user_data(1),
    );
    push_plain(&mut ring, failing_write(2).flags(skip_link));
    push_plain(
        &mut ring,
        opcode::Nop::new().build().flags(skip_link).user_data(3),
    );
    push_plain(&mut ring, opcode::Nop::new().build().user_data(4));
    let first = wait_one(&mut ring);
    assert_eq!((first.user_data, first.res), (2, neg(libc::EBADF)));
    // Everything completed inline during submit: nothing else is coming.
    assert_eq!(
        ring.submit_and_wait_timeout(1, Duration::from_millis(20))
            .unwrap(),
        0
    );
    assert_no_cqe(&mut ring);
    assert!(ringkit_uring::skipped_chain_posts_one_cqe().unwrap());
}
