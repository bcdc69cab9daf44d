//! The optional fields of opcode entries: destination addresses, registered
//! buffers, direct descriptors, buffer selection and timeout updates.

mod common;

use std::io::{Read as _, Write as _};
use std::net::{TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use common::*;
use ringkit_uring::opcode::{self, Dest, SqeFlags, Target};
use ringkit_uring::sys::{self, KernelTimespec};
use ringkit_uring::BufRing;

const SA_LEN: libc::socklen_t = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;

#[test]
fn send_with_a_destination_address() {
    let mut ring = ring(4);
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    let dst = sockaddr_in(b.local_addr().unwrap());
    let msg = b"datagram";
    let s = opcode::Send::new(Target::Fd(a.as_raw_fd()), msg.as_ptr(), 8)
        .dest_addr((&dst as *const libc::sockaddr_in).cast())
        .dest_addr_len(SA_LEN);
    // SAFETY: `msg` is static; `dst` outlives the wait.
    unsafe { push(&mut ring, s.build().user_data(1)) };
    assert_eq!(wait_one(&mut ring).res, 8);
    let mut buf = [0u8; 16];
    let (n, from) = b.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], msg);
    assert_eq!(from, a.local_addr().unwrap());
}

#[test]
fn recvmsg_with_buffer_select_fills_a_whole_buffer() {
    let mut ring = ring(4);
    let br = match BufRing::new(&ring, 4, 4, 128) {
        Ok(b) => b,
        Err(e) => return skip(&format!("provided-buffer rings unsupported: {e}")),
    };
    let (mut c, s) = tcp_pair();
    let payload = b"recvmsg picks a provided buffer";
    c.write_all(payload).unwrap();
    // With buffer selection the iovec gives only the length wanted.
    let iov = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 128,
    }];
    // SAFETY: plain data.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_ptr() as *mut _;
    msg.msg_iovlen = 1;
    let r = opcode::RecvMsg::new(Target::Fd(raw(&s)), &mut msg)
        .buf_group(br.bgid())
        .build()
        .flags(SqeFlags::BUFFER_SELECT)
        .user_data(1);
    // SAFETY: `msg` and `iov` outlive the wait; the data lands in `br`.
    unsafe { push(&mut ring, r) };
    let cqe = wait_one(&mut ring);
    assert_eq!(cqe.res, payload.len() as i32, "{cqe:?}");
    let bid = cqe.buffer_id().expect("buffer id");
    assert_eq!(br.buffer(bid, payload.len()), payload);
}

#[test]
fn send_zc_from_a_registered_buffer() {
    // Declared before the ring, so it outlives the registration even on panic.
    let mut reg = vec![0u8; 4096];
    let mut ring = ring(4);
    if !supports(&ring, sys::IORING_OP_SEND_ZC, "SEND_ZC") {
        return;
    }
    reg[..11].copy_from_slice(b"fixed zcopy");
    let iov = [libc::iovec {
        iov_base: reg.as_mut_ptr().cast(),
        iov_len: reg.len(),
    }];
    // SAFETY: `reg` is not resized and outlives the ring (declared first).
    unsafe { ring.register_buffers(&iov) }.unwrap();
    let (c, mut s) = tcp_pair();
    let e = opcode::SendZc::new(Target::Fd(raw(&c)), reg.as_ptr(), 11).buf_index(Some(0));
    // SAFETY: `reg` is registered buffer 0 and outlives both CQEs.
    unsafe { push(&mut ring, e.build().user_data(1)) };
    let got = wait(&mut ring, 2);
    assert_eq!((got[0].res, got[0].more()), (11, true), "{got:?}");
    assert!(got[1].notif());
    let mut buf = [0u8; 11];
    s.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"fixed zcopy");
    ring.unregister_buffers().unwrap();
}

#[test]
fn socket_into_a_fixed_slot_then_connect_fixed() {
    let mut ring = ring(8);
    if !supports(&ring, sys::IORING_OP_SOCKET, "SOCKET") {
        return;
    }
    ring.register_files_sparse(4).unwrap();
    let so = opcode::Socket::new(libc::AF_INET, libc::SOCK_STREAM, 0).dest(Dest::Slot(2));
    push_plain(&mut ring, so.build().user_data(1));
    assert_eq!(wait_one(&mut ring).res, 0, "direct socket into slot 2");
    let so = opcode::Socket::new(libc::AF_INET, libc::SOCK_STREAM, 0).dest(Dest::AnySlot);
    push_plain(&mut ring, so.build().user_data(2));
    let any = wait_one(&mut ring).res;
    assert!((0..4).contains(&any) && any != 2, "free slot picked: {any}");

    let (l, addr) = listener();
    let dst = sockaddr_in(addr);
    let con = opcode::Connect::new(
        Target::Fixed(2),
        (&dst as *const libc::sockaddr_in).cast(),
        SA_LEN,
    );
    // SAFETY: `dst` outlives the wait.
    unsafe { push(&mut ring, con.build().user_data(3)) };
    assert_eq!(wait_one(&mut ring).res, 0);
    let (mut peer, _) = l.accept().unwrap();
    let s = opcode::Send::new(Target::Fixed(2), b"from slot".as_ptr(), 9);
    // SAFETY: static data.
    unsafe { push(&mut ring, s.build().user_data(4)) };
    assert_eq!(wait_one(&mut ring).res, 9);
    let mut buf = [0u8; 9];
    peer.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"from slot");
}

#[test]
fn accept_multishot_direct_and_cancel_by_fixed_fd() {
    let mut ring = ring(8);
    ring.register_files_sparse(8).unwrap();
    let (l, addr) = listener();
    let acc = opcode::Accept::new(
        Target::Fd(raw(&l)),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    )
    .multishot(true)
    .dest(Dest::AnySlot);
    push_plain(&mut ring, acc.build().user_data(1));
    let clients: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let got = wait(&mut ring, 2);
    let slots: Vec<i32> = got.iter().map(|c| c.res).collect();
    assert!(got.iter().all(|c| c.more()), "{got:?}");
    assert!(
        slots.iter().all(|s| (0..8).contains(s)) && slots[0] != slots[1],
        "{slots:?}"
    );

    // A recv pending on a direct descriptor, cancelled by that fixed fd.
    let mut buf = [0u8; 8];
    let r = opcode::Recv::new(Target::Fixed(slots[0] as u32), buf.as_mut_ptr(), 8);
    // SAFETY: `buf` outlives the recv, which is cancelled below.
    unsafe { push(&mut ring, r.build().user_data(2)) };
    assert_eq!(ring.submit().unwrap(), 1);
    let c = opcode::AsyncCancel::new(0).fd(Some(Target::Fixed(slots[0] as u32)));
    push_plain(&mut ring, c.build().user_data(3));
    let got = wait_sorted(&mut ring, 2);
    assert_eq!((got[0].user_data, got[0].res), (2, neg(libc::ECANCELED)));
    assert_eq!((got[1].user_data, got[1].res), (3, 0));

    push_plain(&mut ring, opcode::AsyncCancel::new(1).build().user_data(4));
    let got = wait_sorted(&mut ring, 2);
    assert_eq!((got[0].user_data, got[0].res), (1, neg(libc::ECANCELED)));
    assert_eq!((got[1].user_data, got[1].res), (4, 0));
    drop(clients);
}

#[test]
fn splice_from_a_fixed_file() {
    let mut ring = ring(4);
    if !supports(&ring, sys::IORING_OP_SPLICE, "SPLICE") {
        return;
    }
    let mut f = tempfile::tempfile().unwrap();
    f.write_all(b"spliced from slot").unwrap();
    let (pr, pw) = pipe();
    ring.register_files(&[-1, raw(&f), raw(&pw)]).unwrap();
    let s = opcode::Splice::new(Target::Fixed(1), 0, Target::Fixed(2), -1, 17);
    push_plain(&mut ring, s.build().user_data(1));
    assert_eq!(wait_one(&mut ring).res, 17);
    assert_eq!(read_fd(raw(&pr), 64), b"spliced from slot");
}

/// Arm a 30 s timeout as `ud`; return the timespec it points to.
fn long_timeout(ring: &mut ringkit_uring::IoUring, ud: u64) -> Box<KernelTimespec> {
    let t = Box::new(KernelTimespec::from(Duration::from_secs(30)));
    // SAFETY: the box is returned and kept alive by the caller until completion.
    unsafe { push(ring, opcode::Timeout::new(&*t).build().user_data(ud)) };
    assert_eq!(ring.submit().unwrap(), 1);
    t
}

#[test]
fn timeout_update_through_the_api() {
    let mut ring = ring(4);
    let _t = long_timeout(&mut ring, 1);
    let new = KernelTimespec::from(Duration::from_millis(10));
    let up = opcode::TimeoutRemove::new(1)
        .flags(sys::IORING_TIMEOUT_UPDATE)
        .timespec(&new);
    let start = Instant::now();
    // SAFETY: `new` outlives the wait.
    unsafe { push(&mut ring, up.build().user_data(2)) };
    let got = wait_sorted(&mut ring, 2);
    assert_eq!(
        (got[1].user_data, got[1].res),
        (2, 0),
        "update refused: {got:?}"
    );
    assert_eq!((got[0].user_data, got[0].res), (1, neg(libc::ETIME)));
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "the new expiry applied"
    );
}
