//! Ring-level behaviour: SQ full, CQ overflow, SQPOLL, waiting with a timeout,
//! registered ring fds, big SQEs/CQEs, probing and MSG_RING.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::*;
use ringkit_uring::opcode::{self, Target};
use ringkit_uring::sys::{self, IoUringSqe128};
use ringkit_uring::{IoUring, KernelReport, SqFull};

fn nop(ud: u64) -> opcode::Entry {
    opcode::Nop::new().build().user_data(ud)
}

#[test]
fn sq_full_then_drained() {
    let mut ring = ring(8);
    let cap = ring.sq().capacity();
    assert_eq!(cap, 8);
    let mut pushed = 0u64;
    let err = loop {
        // SAFETY: NOP references no memory.
        match unsafe { ring.push(nop(pushed).sqe()) } {
            Ok(()) => pushed += 1,
            Err(e) => break e,
        }
        assert!(pushed <= u64::from(cap), "push never reported a full SQ");
    };
    assert_eq!(err, SqFull);
    assert_eq!(pushed, u64::from(cap));
    assert!(ring.sq().is_full());
    assert_eq!(ring.sq().space_left(), 0);

    assert_eq!(ring.submit().unwrap(), cap);
    assert_eq!(ring.sq().pending(), 0);
    assert_eq!(ring.sq().space_left(), cap);
    let got = wait(&mut ring, cap as usize);
    let uds: Vec<u64> = got.iter().map(|c| c.user_data).collect();
    assert_eq!(uds, (0..u64::from(cap)).collect::<Vec<_>>());

    // Room again: a second full batch goes through (ring indices wrap).
    for ud in 100..100 + u64::from(cap) {
        push_plain(&mut ring, nop(ud));
    }
    // SAFETY: NOP references no memory.
    assert_eq!(unsafe { ring.push(nop(999).sqe()) }, Err(SqFull));
    let got = wait(&mut ring, cap as usize);
    assert_eq!(got.first().unwrap().user_data, 100);
    assert_eq!(got.last().unwrap().user_data, 100 + u64::from(cap) - 1);
    assert_no_cqe(&mut ring);
}

/// Overflow a CQ of 8 with 32 NOPs, then reap with `reap`; every user_data
/// must arrive exactly once.
fn overflow_then_reap(reap: fn(&mut IoUring) -> Vec<u64>) {
    let mut ring = IoUring::builder(8).cqsize(8).build().unwrap();
    if ring.features() & sys::IORING_FEAT_NODROP == 0 {
        return skip("kernel lacks IORING_FEAT_NODROP: overflowed CQEs may be dropped");
    }
    let cq = ring.cq().capacity();
    assert_eq!(cq, 8);
    let total = 4 * u64::from(cq);
    let mut saw_overflow = false;
    let mut next = 0u64;
    while next < total {
        for _ in 0..ring.sq().capacity() {
            push_plain(&mut ring, nop(next));
            next += 1;
        }
        match ring.submit() {
            Ok(n) => assert_eq!(n, ring.sq().capacity()),
            Err(e) => panic!("submit while overflowing: {e}"),
        }
        saw_overflow |= ring.sq().cq_overflow();
    }
    assert!(saw_overflow, "IORING_SQ_CQ_OVERFLOW was never set");
    assert_eq!(ring.cq().ready(), cq, "the CQ itself is full");
    let got = reap(&mut ring);
    let unique: BTreeSet<u64> = got.iter().copied().collect();
    assert_eq!(got.len() as u64, total, "count: {got:?}");
    assert_eq!(unique, (0..total).collect(), "each user_data exactly once");
    assert!(
        !ring.sq().cq_overflow(),
        "overflow flag cleared once flushed"
    );
    assert_eq!(ring.cq().overflow(), 0, "no CQE was dropped");
    assert_no_cqe(&mut ring);
}

#[test]
fn cq_overflow_reaped_with_next_cqe() {
    overflow_then_reap(|ring| {
        let mut v = Vec::new();
        while let Some(c) = ring.next_cqe().unwrap() {
            assert_eq!(c.res, 0);
            v.push(c.user_data);
        }
        v
    });
}

#[test]
fn cq_overflow_reaped_with_completions_and_flush() {
    overflow_then_reap(|ring| {
        let mut v = Vec::new();
        loop {
            let before = v.len();
            v.extend(ring.completions().map(|c| c.user_data));
            if v.len() == before && !ring.sq().cq_overflow() {
                return v;
            }
            ring.flush_cq().unwrap();
        }
    });
}

#[test]
fn sqpoll_sleeps_and_submit_wakes_it() {
    let mut ring = match IoUring::builder(8)
        .sqpoll(Duration::from_millis(10))
        .build()
    {
        Ok(r) => r,
        Err(e) => return skip(&format!("SQPOLL ring refused: {e}")),
    };
    assert_ne!(ring.setup_flags() & sys::IORING_SETUP_SQPOLL, 0);
    push_plain(&mut ring, nop(1));
    ring.submit().unwrap();
    assert_eq!(wait_one(&mut ring).user_data, 1);

    // Idle 10 ms: the poller goes to sleep and says so.
    std::thread::sleep(Duration::from_millis(100));
    let deadline = Instant::now() + DEADLINE;
    while ring.sq().flags() & sys::IORING_SQ_NEED_WAKEUP == 0 {
        assert!(Instant::now() < deadline, "poller never set NEED_WAKEUP");
        std::thread::sleep(Duration::from_millis(10));
    }
    push_plain(&mut ring, nop(2));
    ring.submit().unwrap();
    // Watch the CQ without entering: only a woken poller can complete the NOP.
    let deadline = Instant::now() + DEADLINE;
    let c = loop {
        if let Some(c) = ring.completions().next() {
            break c;
        }
        assert!(
            Instant::now() < deadline,
            "submit did not wake the SQPOLL thread"
        );
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!((c.user_data, c.res), (2, 0));
}

#[test]
fn submit_and_wait_timeout_returns_without_a_cqe() {
    let mut ring = ring(4);
    if ring.features() & sys::IORING_FEAT_EXT_ARG == 0 {
        return skip("kernel lacks IORING_FEAT_EXT_ARG");
    }
    let t = Duration::from_millis(50);
    let start = Instant::now();
    assert_eq!(ring.submit_and_wait_timeout(1, t).unwrap(), 0);
    let waited = start.elapsed();
    assert!(
        waited >= t - Duration::from_millis(5),
        "returned early: {waited:?}"
    );
    assert!(waited < DEADLINE, "did not time out: {waited:?}");
    assert_no_cqe(&mut ring);

    // With an SQE that stays pending: it is submitted, nothing completes.
    let (pr, pw) = pipe();
    let mut buf = [0u8; 8];
    let r = opcode::Read::new(Target::Fd(raw(&pr)), buf.as_mut_ptr(), 8).offset(u64::MAX);
    // SAFETY: `buf` outlives the read, which completes below.
    unsafe { push(&mut ring, r.build().user_data(1)) };
    let start = Instant::now();
    assert_eq!(ring.submit_and_wait_timeout(1, t).unwrap(), 1);
    assert!(start.elapsed() >= t - Duration::from_millis(5));
    assert_no_cqe(&mut ring);
    write_fd(raw(&pw), b"late");
    let c = wait_one(&mut ring);
    assert_eq!((c.user_data, c.res), (1, 4));
    assert_eq!(&buf[..4], b"late");
}

#[test]
fn min_wait_returns_a_partial_batch() {
    let mut ring = ring(8);
    if ring.features() & sys::IORING_FEAT_MIN_TIMEOUT == 0 {
        return skip("kernel lacks IORING_FEAT_MIN_TIMEOUT (Linux 6.12)");
    }
    // Two NOPs, but we ask for 8: after the 2 ms minimum wait the kernel
    // returns with what it has instead of waiting for all 8 (or the 20 s
    // overall bound).
    for ud in 0..2 {
        // SAFETY: NOP references no memory.
        unsafe { push(&mut ring, nop(ud)) };
    }
    let start = Instant::now();
    ring.submit_and_wait_min(8, Duration::from_millis(2), Some(Duration::from_secs(20)))
        .unwrap();
    assert!(
        start.elapsed() < DEADLINE,
        "min_wait did not cut the wait short"
    );
    let got: BTreeSet<u64> = ring.completions().map(|c| c.user_data).collect();
    assert_eq!(got, BTreeSet::from([0, 1]));

    // Nothing pending at all: the overall timeout still bounds the wait.
    let start = Instant::now();
    assert_eq!(
        ring.submit_and_wait_min(1, Duration::from_millis(1), Some(Duration::from_millis(30)))
            .unwrap(),
        0
    );
    assert!(start.elapsed() < DEADLINE);
    assert_no_cqe(&mut ring);
}

#[test]
fn registered_ring_fd_runs_nops() {
    let mut ring = IoUring::builder(8).register_ring_fd(true).build().unwrap();
    if !ring.ring_fd_registered() {
        return skip("IORING_REGISTER_RING_FDS unsupported");
    }
    for round in 0..3u64 {
        for i in 0..4 {
            push_plain(&mut ring, nop(round * 10 + i));
        }
        assert_eq!(ring.submit_and_wait(4).unwrap(), 4);
        let uds: Vec<u64> = ring.completions().map(|c| c.user_data).collect();
        assert_eq!(uds, (round * 10..round * 10 + 4).collect::<Vec<_>>());
    }
    assert_eq!(
        ring.submit_and_wait_timeout(1, Duration::from_millis(5))
            .unwrap(),
        0
    );
    ring.unregister_ring_fd().unwrap();
    assert!(!ring.ring_fd_registered());
    push_plain(&mut ring, nop(50));
    assert_eq!(wait_one(&mut ring).user_data, 50);
    ring.register_ring_fd().unwrap();
    assert!(ring.ring_fd_registered());
    push_plain(&mut ring, nop(51));
    assert_eq!(wait_one(&mut ring).user_data, 51);
}

/// `IORING_NOP_CQE32`: a NOP that fills the big CQE half from `off`/`addr` (6.18+).
const IORING_NOP_CQE32: u32 = 1 << 5;

#[test]
fn sqe128_and_cqe32_rings() {
    let mut ring = IoUring::builder(4).sqe128().cqe32().build().unwrap();
    let want = sys::IORING_SETUP_SQE128 | sys::IORING_SETUP_CQE32;
    if ring.setup_flags() & want != want {
        return skip("SQE128/CQE32 unsupported");
    }
    // Three rounds over a 4-entry ring: the slot indexing wraps twice.
    for round in 0..3u64 {
        for i in 0..4u64 {
            let ud = round * 100 + i;
            if i % 2 == 0 {
                let big = IoUringSqe128 {
                    sqe: *nop(ud).sqe(),
                    cmd: [0xff; 8],
                };
                // SAFETY: NOP references no memory.
                unsafe { ring.sq().push128(&big) }.unwrap();
            } else {
                push_plain(&mut ring, nop(ud));
            }
        }
        assert_eq!(ring.submit_and_wait(4).unwrap(), 4);
        for i in 0..4u64 {
            let c = ring.cq().peek32().expect("a ready CQE");
            assert_eq!((c.cqe.user_data, c.cqe.res), (round * 100 + i, 0));
            assert_eq!(c.big_cqe, [0, 0]);
            ring.cq().advance(1);
        }
        assert!(ring.cq().peek32().is_none());
    }
    // The plain iterator also strides 32 bytes.
    for ud in 500..504 {
        push_plain(&mut ring, nop(ud));
    }
    ring.submit_and_wait(4).unwrap();
    let uds: Vec<u64> = ring.completions().map(|c| c.user_data).collect();
    assert_eq!(uds, [500, 501, 502, 503]);

    // The big half carries data when an op fills it.
    let mut e = nop(600);
    e.0.op_flags = IORING_NOP_CQE32;
    e.0.off = 0x1111_2222;
    e.0.addr = 0x3333_4444;
    push_plain(&mut ring, e);
    ring.submit_and_wait(1).unwrap();
    let c = ring.cq().peek32().unwrap();
    ring.cq().advance(1);
    if c.cqe.res == neg(libc::EINVAL) {
        return skip("IORING_NOP_CQE32 unsupported: big CQE payload not checked");
    }
    assert_eq!((c.cqe.user_data, c.cqe.res), (600, 0));
    assert_eq!(c.big_cqe, [0x1111_2222, 0x3333_4444]);
}

#[test]
fn probe_and_kernel_report() {
    let ring = ring(4);
    let p = ring.probe().unwrap();
    for op in [sys::IORING_OP_NOP, sys::IORING_OP_READ, sys::IORING_OP_SEND] {
        assert!(p.is_supported(op), "op {op} unsupported: {p:?}");
    }
    assert!(p.last_op() >= sys::IORING_OP_SEND);
    assert!(!p.is_supported(255), "opcode 255 does not exist");
    let names = p.supported_names();
    for n in ["NOP", "READ", "SEND", "WRITEV"] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    assert!(!p.unsupported_names().contains(&"NOP"));

    let r = KernelReport::gather();
    assert_eq!(r.usable, Ok(()));
    assert!(r.kernel.starts_with("Linux "), "{}", r.kernel);
    assert_ne!(r.features & sys::IORING_FEAT_NODROP, 0);
    assert!(
        r.feature_names().contains("NODROP"),
        "{}",
        r.feature_names()
    );
    assert_ne!(r.setup_flags & sys::IORING_SETUP_CQSIZE, 0);
    assert!(r.setup_flag_names().contains("CQSIZE"));
    let rp = r.probe.as_ref().expect("report has a probe");
    assert!(rp.is_supported(sys::IORING_OP_NOP));
    assert_eq!(rp.last_op(), p.last_op());
    eprintln!(
        "{}: features {}; setup flags {}",
        r.kernel,
        r.feature_names(),
        r.setup_flag_names()
    );
}

#[test]
fn msg_ring_posts_into_another_ring() {
    let mut a = ring(4);
    if !supports(&a, sys::IORING_OP_MSG_RING, "MSG_RING") {
        return;
    }
    let mut b = ring(4);
    let m = opcode::MsgRingData::new(Target::Fd(raw(&b)), 77, 0xbeef);
    push_plain(&mut a, m.build().user_data(1));
    assert_eq!(wait_one(&mut a).res, 0, "sender CQE");
    assert_no_cqe(&mut a);
    let c = wait_one(&mut b);
    assert_eq!((c.user_data, c.res), (0xbeef, 77));

    // A negative result and a second message arrive as sent.
    let m = opcode::MsgRingData::new(Target::Fd(raw(&b)), -5, 0xcafe);
    push_plain(&mut a, m.build().user_data(2));
    assert_eq!(wait_one(&mut a).res, 0);
    let c = wait_one(&mut b);
    assert_eq!((c.user_data, c.res), (0xcafe, -5));
    // (A ring fd cannot go in a registered file table: the kernel refuses
    // io_uring files there with EBADF, so `Target::Fixed` is not tried.)

    // A non-ring fd is refused.
    let (pr, _pw) = pipe();
    let m = opcode::MsgRingData::new(Target::Fd(raw(&pr)), 1, 1);
    push_plain(&mut a, m.build().user_data(3));
    assert_eq!(wait_one(&mut a).res, neg(libc::EBADFD));
}
