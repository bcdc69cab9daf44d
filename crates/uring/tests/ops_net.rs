//! Socket opcodes over loopback, provided-buffer rings, and cancellation.

mod common;

use std::io::{Read as _, Write as _};
use std::net::{TcpStream, UdpSocket};
use std::os::fd::AsRawFd;

use common::*;
use ringkit_uring::opcode::{self, Dest, Target};
use ringkit_uring::{sys, BufRing, IoUring};

const SA_LEN: libc::socklen_t = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;

fn recv_entry(fd: i32, buf: &mut [u8], ud: u64) -> opcode::Entry {
    opcode::Recv::new(Target::Fd(fd), buf.as_mut_ptr(), buf.len() as u32)
        .build()
        .user_data(ud)
}

/// A buffer ring, or `None` (with a skip reason) on kernels without them.
fn buf_ring(ring: &IoUring, bgid: u16, entries: u16, len: u32) -> Option<BufRing> {
    match BufRing::new(ring, bgid, entries, len) {
        Ok(b) => Some(b),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            skip(&format!("provided-buffer rings unsupported: {e}"));
            None
        }
        Err(e) => panic!("BufRing::new: {e}"),
    }
}

#[test]
fn send_and_recv() {
    let mut ring = ring(8);
    let (c, s) = tcp_pair();
    let mut buf = [0u8; 64];
    // RECV first: it must wait for the data.
    // SAFETY: `buf` outlives the wait.
    unsafe { push(&mut ring, recv_entry(raw(&s), &mut buf, 2)) };
    assert_eq!(ring.submit().unwrap(), 1);
    assert_no_cqe(&mut ring);
    let msg = b"hello over io_uring";
    let e = opcode::Send::new(Target::Fd(raw(&c)), msg.as_ptr(), msg.len() as u32);
    // SAFETY: static data.
    unsafe { push(&mut ring, e.build().user_data(1)) };
    let got = wait_sorted(&mut ring, 2);
    assert_eq!((got[0].user_data, got[0].res), (1, msg.len() as i32));
    assert_eq!((got[1].user_data, got[1].res), (2, msg.len() as i32));
    assert_eq!(&buf[..msg.len()], msg);
}

#[test]
fn sendmsg_and_recvmsg_over_udp() {
    let mut ring = ring(8);
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    let dest = sockaddr_in(b.local_addr().unwrap());
    let (p1, p2) = (b"abc".to_vec(), b"defg".to_vec());
    let siov = [
        libc::iovec {
            iov_base: p1.as_ptr() as *mut _,
            iov_len: p1.len(),
        },
        libc::iovec {
            iov_base: p2.as_ptr() as *mut _,
            iov_len: p2.len(),
        },
    ];
    // SAFETY: msghdr is plain data.
    let mut smsg: libc::msghdr = unsafe { std::mem::zeroed() };
    smsg.msg_name = (&dest as *const libc::sockaddr_in) as *mut _;
    smsg.msg_namelen = SA_LEN;
    smsg.msg_iov = siov.as_ptr() as *mut _;
    smsg.msg_iovlen = 2;

    let (mut r1, mut r2) = ([0u8; 4], [0u8; 16]);
    let riov = [
        libc::iovec {
            iov_base: r1.as_mut_ptr().cast(),
            iov_len: r1.len(),
        },
        libc::iovec {
            iov_base: r2.as_mut_ptr().cast(),
            iov_len: r2.len(),
        },
    ];
    // SAFETY: plain data.
    let mut from: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    // SAFETY: plain data.
    let mut rmsg: libc::msghdr = unsafe { std::mem::zeroed() };
    rmsg.msg_name = (&mut from as *mut libc::sockaddr_in).cast();
    rmsg.msg_namelen = SA_LEN;
    rmsg.msg_iov = riov.as_ptr() as *mut _;
    rmsg.msg_iovlen = 2;

    let rm = opcode::RecvMsg::new(Target::Fd(b.as_raw_fd()), &mut rmsg);
    let sm = opcode::SendMsg::new(Target::Fd(a.as_raw_fd()), &smsg);
    // SAFETY: both msghdrs, their iovecs, names and buffers outlive the wait.
    unsafe {
        push(&mut ring, rm.build().user_data(2));
        push(&mut ring, sm.build().user_data(1));
    }
    let got = wait_sorted(&mut ring, 2);
    assert_eq!((got[0].user_data, got[0].res), (1, 7));
    assert_eq!((got[1].user_data, got[1].res), (2, 7));
    assert_eq!(&r1, b"abcd");
    assert_eq!(&r2[..3], b"efg");
    assert_eq!(rmsg.msg_namelen, SA_LEN);
    assert_eq!(
        port_of(&from),
        a.local_addr().unwrap().port(),
        "sender address filled in"
    );
}

#[test]
fn recv_multishot_with_buf_ring() {
    let mut ring = ring(8);
    let Some(mut br) = buf_ring(&ring, 1, 8, 64) else {
        return;
    };
    let (mut c, s) = tcp_pair();
    push_plain(
        &mut ring,
        opcode::RecvMulti::new(Target::Fd(raw(&s)), br.bgid())
            .build()
            .user_data(9),
    );
    assert_eq!(ring.submit().unwrap(), 1);
    let msgs: [&[u8]; 3] = [b"one", b"second", b"the third message"];
    let mut bids = Vec::new();
    for m in msgs {
        c.write_all(m).unwrap();
        let cqe = wait_one(&mut ring);
        assert_eq!((cqe.user_data, cqe.res), (9, m.len() as i32), "{cqe:?}");
        assert!(cqe.more(), "multishot recv keeps F_MORE: {cqe:?}");
        let bid = cqe.buffer_id().expect("buffer id");
        assert!(bid < br.entries());
        assert_eq!(br.buffer(bid, cqe.res as usize), m);
        bids.push(bid);
        br.recycle(bid);
    }
    assert_ne!(bids[0], bids[1]);
    // EOF ends the multishot.
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let cqe = wait_one(&mut ring);
    assert_eq!((cqe.user_data, cqe.res), (9, 0));
    assert!(!cqe.more());
}

#[test]
fn buf_ring_runs_dry_with_enobufs_and_recovers_after_recycling() {
    let mut ring = ring(8);
    let Some(mut br) = buf_ring(&ring, 3, 2, 32) else {
        return;
    };
    let (mut c, s) = tcp_pair();
    let arm = |ring: &mut IoUring, ud: u64| {
        push_plain(
            ring,
            opcode::RecvMulti::new(Target::Fd(raw(&s)), 3)
                .build()
                .user_data(ud),
        );
        assert_eq!(ring.submit().unwrap(), 1);
    };
    arm(&mut ring, 1);
    // Each message is sent only after the previous one was received, so each
    // lands in its own buffer.
    let mut held = Vec::new();
    for m in [&b"msg-1"[..], b"msg-2"] {
        c.write_all(m).unwrap();
        let cqe = wait_one(&mut ring);
        assert_eq!(cqe.res, m.len() as i32, "{cqe:?}");
        assert!(cqe.more());
        let bid = cqe.buffer_id().unwrap();
        assert_eq!(br.buffer(bid, m.len()), m);
        held.push(bid);
    }
    assert_ne!(held[0], held[1]);
    // Both buffers are held by us: the next arrival finds the ring empty.
    c.write_all(b"msg-3").unwrap();
    let cqe = wait_one(&mut ring);
    assert_eq!((cqe.user_data, cqe.res), (1, neg(libc::ENOBUFS)), "{cqe:?}");
    assert!(!cqe.more(), "ENOBUFS ends the multishot");

    br.recycle_many(&held);
    arm(&mut ring, 2);
    let cqe = wait_one(&mut ring);
    assert_eq!((cqe.user_data, cqe.res), (2, 5), "{cqe:?}");
    assert!(cqe.more());
    let bid = cqe.buffer_id().unwrap();
    assert_eq!(br.buffer(bid, 5), b"msg-3", "the data waited in the socket");
    br.recycle(bid);
    drop(c);
    let cqe = wait_one(&mut ring);
    assert_eq!((cqe.user_data, cqe.res, cqe.more()), (2, 0, false));
}

#[test]
fn send_zc_result_then_notification() {
    let mut ring = ring(8);
    if !supports(&ring, sys::IORING_OP_SEND_ZC, "SEND_ZC") {
        return;
    }
    let (c, mut s) = tcp_pair();
    let payload: Vec<u8> = (0..10_000u32).map(|i| (i % 253) as u8).collect();
    let e = opcode::SendZc::new(Target::Fd(raw(&c)), payload.as_ptr(), payload.len() as u32);
    // SAFETY: `payload` outlives both CQEs (the notification is awaited below).
    unsafe { push(&mut ring, e.build().user_data(5)) };
    let got = wait(&mut ring, 2);
    assert_eq!(got[0].user_data, 5);
    assert_eq!(got[0].res, payload.len() as i32, "{got:?}");
    assert!(got[0].more() && !got[0].notif(), "result CQE: {:?}", got[0]);
    assert_eq!(got[1].user_data, 5);
    assert!(
        got[1].notif() && !got[1].more(),
        "notification CQE: {:?}",
        got[1]
    );
    let mut recvd = vec![0u8; payload.len()];
    s.read_exact(&mut recvd).unwrap();
    assert_eq!(recvd, payload);
}

#[test]
fn accept_and_connect() {
    let mut ring = ring(8);
    let (l, addr) = listener();
    // SAFETY: plain data.
    let mut peer: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut peer_len = SA_LEN;
    let acc = opcode::Accept::new(
        Target::Fd(raw(&l)),
        (&mut peer as *mut libc::sockaddr_in).cast(),
        &mut peer_len,
    )
    .flags(libc::SOCK_CLOEXEC);
    // SAFETY: socket() has no memory arguments.
    let cfd =
        own(unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) });
    let dst = sockaddr_in(addr);
    let con = opcode::Connect::new(
        Target::Fd(raw(&cfd)),
        (&dst as *const libc::sockaddr_in).cast(),
        SA_LEN,
    );
    // SAFETY: `peer`, `peer_len` and `dst` outlive the wait.
    unsafe {
        push(&mut ring, acc.build().user_data(1));
        push(&mut ring, con.build().user_data(2));
    }
    let got = wait_sorted(&mut ring, 2);
    assert_eq!((got[1].user_data, got[1].res), (2, 0), "connect: {got:?}");
    let afd = own(got[0].res);
    assert_eq!(peer_len, SA_LEN);
    assert_eq!(
        port_of(&peer),
        local_port(raw(&cfd)),
        "accept filled the peer address"
    );
    assert_eq!(peer_port(raw(&afd)), local_port(raw(&cfd)));
    let mut a = TcpStream::from(afd);
    let mut cl = TcpStream::from(cfd);
    cl.write_all(b"ok").unwrap();
    let mut b = [0u8; 2];
    a.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"ok");
}

#[test]
fn accept_multishot_three_connects() {
    let mut ring = ring(8);
    let (l, addr) = listener();
    let acc = opcode::Accept::new(
        Target::Fd(raw(&l)),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    )
    .multishot(true);
    push_plain(&mut ring, acc.build().user_data(7));
    assert_eq!(ring.submit().unwrap(), 1);
    let clients: Vec<TcpStream> = (0..3).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let got = wait(&mut ring, 3);
    let mut client_ports: Vec<u16> = clients
        .iter()
        .map(|c| c.local_addr().unwrap().port())
        .collect();
    let mut peer_ports = Vec::new();
    for c in &got {
        assert_eq!(c.user_data, 7);
        assert!(c.more(), "multishot accept keeps F_MORE: {c:?}");
        let fd = own(c.res);
        peer_ports.push(peer_port(raw(&fd)));
    }
    client_ports.sort_unstable();
    peer_ports.sort_unstable();
    assert_eq!(client_ports, peer_ports, "one accepted socket per connect");

    push_plain(&mut ring, opcode::AsyncCancel::new(7).build().user_data(8));
    let got = wait_sorted(&mut ring, 2);
    assert_eq!((got[0].user_data, got[0].res), (7, neg(libc::ECANCELED)));
    assert!(!got[0].more());
    assert_eq!((got[1].user_data, got[1].res), (8, 0));
}

#[test]
fn accept_direct_into_any_slot_then_recv_fixed() {
    let mut ring = ring(8);
    ring.register_files_sparse(4).expect("sparse file table");
    let (l, addr) = listener();
    let acc = opcode::Accept::new(
        Target::Fd(raw(&l)),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    )
    .dest(Dest::AnySlot);
    push_plain(&mut ring, acc.build().user_data(1));
    let mut client = TcpStream::connect(addr).unwrap();
    let c = wait_one(&mut ring);
    if c.res == neg(libc::EINVAL) {
        return skip("accept into IORING_FILE_INDEX_ALLOC unsupported (needs 5.19)");
    }
    assert!((0..4).contains(&c.res), "result is the slot: {c:?}");
    let slot = c.res as u32;
    client.write_all(b"direct!").unwrap();
    let mut buf = [0u8; 32];
    let r = opcode::Recv::new(Target::Fixed(slot), buf.as_mut_ptr(), 32);
    // SAFETY: `buf` outlives the wait.
    unsafe { push(&mut ring, r.build().user_data(2)) };
    let c = wait_one(&mut ring);
    assert_eq!(c.res, 7);
    assert_eq!(&buf[..7], b"direct!");
    // Closing the slot closes the connection: the client sees EOF.
    push_plain(
        &mut ring,
        opcode::Close::new(Target::Fixed(slot)).build().user_data(3),
    );
    assert_eq!(wait_one(&mut ring).res, 0);
    let mut rest = Vec::new();
    client.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
}

#[test]
fn shutdown_gives_the_peer_eof() {
    let mut ring = ring(4);
    let (c, s) = tcp_pair();
    push_plain(
        &mut ring,
        opcode::Shutdown::new(Target::Fd(raw(&c)), libc::SHUT_WR)
            .build()
            .user_data(1),
    );
    assert_eq!(wait_one(&mut ring).res, 0);
    let mut buf = [0u8; 8];
    // SAFETY: `buf` outlives the wait.
    unsafe { push(&mut ring, recv_entry(raw(&s), &mut buf, 2)) };
    assert_eq!(wait_one(&mut ring).res, 0, "peer reads EOF");
    // The other direction still works.
    (&s).write_all(b"back").unwrap();
    let mut b = [0u8; 4];
    (&c).read_exact(&mut b).unwrap();
    assert_eq!(&b, b"back");
}

#[test]
fn socket_op_creates_sockets() {
    let mut ring = ring(4);
    if !supports(&ring, sys::IORING_OP_SOCKET, "SOCKET") {
        return;
    }
    for (ty, ud) in [(libc::SOCK_STREAM, 1), (libc::SOCK_DGRAM, 2)] {
        let e = opcode::Socket::new(libc::AF_INET, ty | libc::SOCK_CLOEXEC, 0);
        push_plain(&mut ring, e.build().user_data(ud));
        let fd = own(wait_one(&mut ring).res);
        let mut got: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `got`/`len` are a valid int-sized option buffer.
        let r = unsafe {
            libc::getsockopt(
                raw(&fd),
                libc::SOL_SOCKET,
                libc::SO_TYPE,
                (&mut got as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!(r, 0);
        assert_eq!(got, ty);
    }
}

#[test]
fn cancel_a_pending_recv_by_user_data() {
    let mut ring = ring(8);
    let (_c, s) = tcp_pair();
    let mut buf = [0u8; 16];
    // SAFETY: `buf` outlives the wait for the recv's CQE.
    unsafe { push(&mut ring, recv_entry(raw(&s), &mut buf, 0x42)) };
    assert_eq!(ring.submit().unwrap(), 1);
    assert_no_cqe(&mut ring);
    push_plain(
        &mut ring,
        opcode::AsyncCancel::new(0x42).build().user_data(0x43),
    );
    let got = wait_sorted(&mut ring, 2);
    assert_eq!((got[0].user_data, got[0].res), (0x42, neg(libc::ECANCELED)));
    assert_eq!((got[1].user_data, got[1].res), (0x43, 0));
    push_plain(
        &mut ring,
        opcode::AsyncCancel::new(0x42).build().user_data(0x44),
    );
    assert_eq!(
        wait_one(&mut ring).res,
        neg(libc::ENOENT),
        "nothing left to cancel"
    );
}

/// A buffer group (receive or send ring) dropped after its ring, once a
/// new ring exists, unregisters nothing from the new ring: the new ring's
/// group with the same id keeps working.
#[test]
fn a_group_outliving_its_ring_never_touches_the_next_ring() {
    for send in [false, true] {
        let old_ring = ring(8);
        let (old_recv, old_send);
        if send {
            match ringkit_uring::SendRing::new(&old_ring, 1, 8) {
                Ok(r) => (old_recv, old_send) = (None, Some(r)),
                Err(e) => {
                    skip(&format!("send rings unsupported: {e}"));
                    continue;
                }
            }
        } else {
            let Some(b) = buf_ring(&old_ring, 1, 8, 64) else {
                return;
            };
            (old_recv, old_send) = (Some(b), None);
        }
        let old_fd = old_ring.as_raw_fd();
        drop(old_ring);
        // The next ring (the lowest free fd number: the old ring's, unless
        // its group still holds it open).
        let mut ring = ring(8);
        let new_fd = ring.as_raw_fd();
        let Some(mut br) = buf_ring(&ring, 1, 8, 64) else {
            return;
        };
        drop(old_recv);
        drop(old_send);
        let (mut c, s) = tcp_pair();
        push_plain(
            &mut ring,
            opcode::RecvMulti::new(Target::Fd(raw(&s)), br.bgid())
                .build()
                .user_data(9),
        );
        ring.submit().unwrap();
        c.write_all(b"still here").unwrap();
        let cqe = wait_one(&mut ring);
        assert_eq!(
            cqe.res, 10,
            "send ring {send}: the new ring's group was unregistered by the old one's drop \
             (old ring fd {old_fd}, new {new_fd}): {cqe:?}"
        );
        let bid = cqe.buffer_id().expect("buffer id");
        assert_eq!(br.buffer(bid, 10), b"still here");
        br.recycle(bid);
    }
}
