//! Send bundles (`IORING_RECVSEND_BUNDLE` on `IORING_OP_SEND`) from a
//! `SendRing` over loopback TCP: the protocol `SendRing` documents, checked
//! against the kernel.

mod common;

use std::io::Read as _;
use std::time::Duration;

use common::*;
use ringkit_uring::opcode::{self, Target};
use ringkit_uring::{sys, IoUring, SendRing};

fn send_ring(ring: &IoUring, bgid: u16) -> Option<SendRing> {
    if ring.features() & sys::IORING_FEAT_RECVSEND_BUNDLE == 0 {
        skip("kernel lacks IORING_FEAT_RECVSEND_BUNDLE (Linux 6.10)");
        return None;
    }
    Some(SendRing::new(ring, bgid, 256).expect("SendRing::new"))
}

fn bundle(fd: i32, bgid: u16, ud: u64) -> opcode::Entry {
    opcode::SendBundle::new(Target::Fd(fd), bgid)
        .flags(libc::MSG_NOSIGNAL)
        .build()
        .user_data(ud)
}

/// Two batches through one ring: each send takes every published entry,
/// posts one CQE (no `F_MORE`) with `F_BUFFER` and the first id, and the
/// peer gets the bytes in ring order.
#[test]
fn each_batch_is_one_send_and_one_cqe() {
    let mut ring = ring(8);
    let Some(mut sr) = send_ring(&ring, 7) else {
        return;
    };
    let (c, s) = tcp_pair();
    let mut expected = Vec::new();
    for (round, sizes) in [[5usize, 1, 4000], [3000, 2, 9]].iter().enumerate() {
        let bufs: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| vec![(round * 16 + i) as u8 + 1; n])
            .collect();
        let iov: Vec<(*const u8, u32)> =
            bufs.iter().map(|b| (b.as_ptr(), b.len() as u32)).collect();
        // SAFETY: the ring is empty (the first round, or the last CQE had
        // F_BUFFER); `bufs` lives until the CQE below.
        unsafe { sr.publish(iov.iter().copied()) }.unwrap();
        push_plain(&mut ring, bundle(raw(&c), 7, 1));
        let cqe = wait_one(&mut ring);
        let total: usize = sizes.iter().sum();
        assert_eq!(cqe.res, total as i32, "{cqe:?}");
        assert_ne!(cqe.flags & sys::IORING_CQE_F_BUFFER, 0, "{cqe:?}");
        assert_eq!(cqe.flags >> sys::IORING_CQE_BUFFER_SHIFT, 0, "first id");
        assert!(!cqe.more(), "a send that took every entry goes on");
        assert_no_cqe(&mut ring);
        expected.extend(bufs.concat());
    }
    let mut got = vec![0u8; expected.len()];
    (&s).read_exact(&mut got).unwrap();
    assert!(got == expected, "bytes out of ring order");
}

/// A send that fails before it selects (a bad fd) posts no `F_BUFFER`: the
/// entries stay published, which is why such a ring is not reused.
#[test]
fn a_failure_before_selection_takes_nothing() {
    let mut ring = ring(8);
    let Some(mut sr) = send_ring(&ring, 8) else {
        return;
    };
    let b = [1u8; 10];
    // SAFETY: fresh ring; `b` outlives the ring and the CQE.
    unsafe { sr.publish([(b.as_ptr(), 10)]) }.unwrap();
    push_plain(&mut ring, bundle(-1, 8, 2));
    let cqe = wait_one(&mut ring);
    assert_eq!(cqe.res, neg(libc::EBADF));
    assert_eq!(cqe.flags & sys::IORING_CQE_F_BUFFER, 0);
}

/// A batch larger than the socket takes: the send waits, goes on from where
/// it stopped once the peer reads, and still posts one CQE for all of it.
#[test]
fn a_batch_into_a_full_socket_completes_in_full() {
    let mut ring = ring(8);
    let Some(mut sr) = send_ring(&ring, 9) else {
        return;
    };
    let (c, s) = tcp_pair();
    let bufs: Vec<Vec<u8>> = (0..64u8).map(|i| vec![i; 128 << 10]).collect();
    let iov: Vec<(*const u8, u32)> = bufs.iter().map(|b| (b.as_ptr(), b.len() as u32)).collect();
    // SAFETY: fresh ring; `bufs` lives until the CQE.
    unsafe { sr.publish(iov.iter().copied()) }.unwrap();
    push_plain(&mut ring, bundle(raw(&c), 9, 3));
    ring.submit().unwrap();
    let reader = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        let mut got = vec![0u8; 64 * (128 << 10)];
        (&s).read_exact(&mut got).unwrap();
        got
    });
    let cqe = wait_one(&mut ring);
    let got = reader.join().unwrap();
    // A blocking-mode socket: the kernel waits for room and sends it all.
    assert_eq!(cqe.res, 64 * (128 << 10), "{cqe:?}");
    assert!(!cqe.more());
    assert!(got == bufs.concat(), "bytes lost or reordered");
}

#[test]
fn publish_refuses_empty_and_oversized_batches() {
    let ring = ring(8);
    let Some(mut sr) = send_ring(&ring, 10) else {
        return;
    };
    let b = [0u8; 1];
    let too_many = vec![(b.as_ptr(), 1u32); SendRing::MAX_BATCH + 1];
    // SAFETY: each call is refused before it writes anything.
    unsafe {
        assert!(sr.publish([]).is_err());
        assert!(sr.publish(too_many).is_err());
        assert!(sr.publish([(b.as_ptr(), 0)]).is_err());
    }
}
