//! Helpers shared by the integration tests (each test binary uses a subset).
#![allow(dead_code)]

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use ringkit_uring::opcode::Entry;
use ringkit_uring::{Cqe, IoUring};

/// How long any single wait may take before the test fails instead of hanging.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// Print why a test does not run; use as `return skip("...")`.
pub fn skip(reason: &str) {
    eprintln!("skipped: {reason}");
}

/// A plain ring with `entries` SQEs.
pub fn ring(entries: u32) -> IoUring {
    IoUring::new(entries).expect("io_uring_setup")
}

/// True when the kernel supports `opcode`; otherwise prints a skip reason.
pub fn supports(ring: &IoUring, opcode: u8, name: &str) -> bool {
    let ok = ring.probe().expect("probe").is_supported(opcode);
    if !ok {
        skip(&format!("kernel does not support IORING_OP_{name}"));
    }
    ok
}

/// Queue one entry, panicking if the SQ is full.
///
/// # Safety
/// Memory the entry points to must stay valid until its completion.
pub unsafe fn push(ring: &mut IoUring, e: Entry) {
    // SAFETY: forwarded to the caller.
    unsafe { ring.push(e.sqe()) }.expect("SQ full");
}

/// Queue one entry that references no caller memory (NOP, CLOSE, SHUTDOWN, ...).
pub fn push_plain(ring: &mut IoUring, e: Entry) {
    // SAFETY: the caller only passes entries without pointers into its memory.
    unsafe { push(ring, e) }
}

/// Submit what is queued and collect exactly `n` CQEs, failing after [`DEADLINE`].
pub fn wait(ring: &mut IoUring, n: usize) -> Vec<Cqe> {
    let deadline = Instant::now() + DEADLINE;
    let mut out = Vec::with_capacity(n);
    loop {
        while out.len() < n {
            match ring.next_cqe().expect("next_cqe") {
                Some(c) => out.push(c),
                None => break,
            }
        }
        if out.len() == n {
            return out;
        }
        let now = Instant::now();
        assert!(
            now < deadline,
            "timed out waiting for {n} CQEs, got {out:?}"
        );
        let want = (n - out.len()) as u32;
        ring.submit_and_wait_timeout(want, deadline - now)
            .expect("submit_and_wait_timeout");
    }
}

/// Submit what is queued and wait for one CQE.
pub fn wait_one(ring: &mut IoUring) -> Cqe {
    wait(ring, 1)[0]
}

/// Collect `n` CQEs and return them ordered by `user_data` (stable for equal ids).
pub fn wait_sorted(ring: &mut IoUring, n: usize) -> Vec<Cqe> {
    let mut v = wait(ring, n);
    v.sort_by_key(|c| c.user_data);
    v
}

/// The CQE with `user_data` `ud` from `cqes` (exactly one must match).
pub fn by_ud(cqes: &[Cqe], ud: u64) -> Cqe {
    let m: Vec<&Cqe> = cqes.iter().filter(|c| c.user_data == ud).collect();
    assert_eq!(
        m.len(),
        1,
        "expected one CQE for user_data {ud} in {cqes:?}"
    );
    *m[0]
}

/// Assert no CQE is ready right now (no syscall except an overflow flush).
pub fn assert_no_cqe(ring: &mut IoUring) {
    assert_eq!(ring.next_cqe().expect("next_cqe"), None);
}

/// `-errno` as a CQE result.
pub fn neg(errno: i32) -> i32 {
    -errno
}

/// A close-on-exec pipe: (read end, write end).
pub fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(r, 0, "pipe2: {}", io::Error::last_os_error());
    // SAFETY: pipe2 just returned these fds; nobody else owns them.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// A close-on-exec eventfd with counter 0.
pub fn eventfd() -> OwnedFd {
    // SAFETY: eventfd has no memory arguments.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    assert!(fd >= 0, "eventfd: {}", io::Error::last_os_error());
    // SAFETY: a fresh fd that nobody else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// Blocking `write(2)` of all of `data`.
pub fn write_fd(fd: RawFd, data: &[u8]) {
    // SAFETY: `data` is valid for `data.len()` bytes.
    let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
    assert_eq!(
        n,
        data.len() as isize,
        "write: {}",
        io::Error::last_os_error()
    );
}

/// Blocking `read(2)` of at most `max` bytes.
pub fn read_fd(fd: RawFd, max: usize) -> Vec<u8> {
    let mut buf = vec![0u8; max];
    // SAFETY: `buf` is valid for `max` bytes of writes.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), max) };
    assert!(n >= 0, "read: {}", io::Error::last_os_error());
    buf.truncate(n as usize);
    buf
}

/// Whether `fd` is an open descriptor.
pub fn fd_is_open(fd: RawFd) -> bool {
    // SAFETY: F_GETFD only inspects the descriptor table.
    unsafe { libc::fcntl(fd, libc::F_GETFD) != -1 }
}

/// A listener on 127.0.0.1, port chosen by the kernel.
pub fn listener() -> (TcpListener, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let a = l.local_addr().expect("local_addr");
    (l, a)
}

/// A connected loopback TCP pair (client, server side).
pub fn tcp_pair() -> (TcpStream, TcpStream) {
    let (l, a) = listener();
    let c = TcpStream::connect(a).expect("connect");
    let (s, _) = l.accept().expect("accept");
    (c, s)
}

/// `sockaddr_in` for an IPv4 socket address.
pub fn sockaddr_in(a: SocketAddr) -> libc::sockaddr_in {
    let SocketAddr::V4(v4) = a else {
        panic!("IPv4 only")
    };
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: v4.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*v4.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// The port of a `sockaddr_in`, in host order.
pub fn port_of(sa: &libc::sockaddr_in) -> u16 {
    u16::from_be(sa.sin_port)
}

/// `getsockname(2)` port of a socket.
pub fn local_port(fd: RawFd) -> u16 {
    // SAFETY: sockaddr_in is plain data.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: `sa`/`len` are valid and sized for an IPv4 address.
    let r = unsafe { libc::getsockname(fd, (&mut sa as *mut libc::sockaddr_in).cast(), &mut len) };
    assert_eq!(r, 0, "getsockname: {}", io::Error::last_os_error());
    port_of(&sa)
}

/// `getpeername(2)` port of a socket.
pub fn peer_port(fd: RawFd) -> u16 {
    // SAFETY: sockaddr_in is plain data.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: `sa`/`len` are valid and sized for an IPv4 address.
    let r = unsafe { libc::getpeername(fd, (&mut sa as *mut libc::sockaddr_in).cast(), &mut len) };
    assert_eq!(r, 0, "getpeername: {}", io::Error::last_os_error());
    port_of(&sa)
}

/// Take ownership of a descriptor returned in a CQE.
pub fn own(fd: i32) -> OwnedFd {
    assert!(fd >= 0, "not an fd: {fd}");
    // SAFETY: the kernel just created this fd for us; nobody else owns it.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// Raw fd of anything with one (shorthand).
pub fn raw(f: &impl AsRawFd) -> RawFd {
    f.as_raw_fd()
}
