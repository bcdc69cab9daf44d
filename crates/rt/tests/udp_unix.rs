//! UDP, Unix-domain sockets and the owned-buffer types (over a Unix
//! socket pair), each test run once per backend
//! (`ringkit::test_all!`: `<name>::uring` and `<name>::epoll`).

use std::io;
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::time::Duration;

use ringkit::buf::{AlignedBuf, BufPool};
use ringkit::fs::OpenOptions;
use ringkit::net::{TcpListener, UdpSocket, UnixListener, UnixStream};
use ringkit::{Backend, Builder};

/// Deterministic, random-looking bytes (xorshift64*), different per `seed`.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

/// Read exactly `len` bytes from `s` (looping over short reads).
async fn unix_read_exact(s: &UnixStream, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let (res, buf) = s.read(Vec::with_capacity(len - out.len())).await;
        let n = res.unwrap();
        assert!(n > 0, "unexpected EOF after {} of {len} bytes", out.len());
        out.extend_from_slice(&buf[..n]);
    }
    out
}

/// Read until EOF from `s`.
async fn unix_read_to_eof(s: &UnixStream) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let (res, buf) = s.read(Vec::with_capacity(4096)).await;
        match res.unwrap() {
            0 => return out,
            n => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// Echo everything read from `s` back to it until EOF; returns the byte count.
async fn unix_echo_until_eof(s: UnixStream) -> usize {
    let mut total = 0;
    loop {
        let (res, buf) = s.read(Vec::with_capacity(4096)).await;
        let n = res.unwrap();
        if n == 0 {
            return total;
        }
        total += n;
        s.write_all(buf).await.0.unwrap();
    }
}

ringkit::test_all! {
    /// UDP: both directions, sender address, datagram boundaries.
    async fn udp_send_recv() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        assert_ne!(aa.port(), 0);
        assert_ne!(aa, ba);

        let (res, _) = a.send_to(&b"ping"[..], ba).await;
        assert_eq!(res.unwrap(), 4);
        let (res, buf) = b.recv_from(Vec::with_capacity(64)).await;
        let (n, from) = res.unwrap();
        assert_eq!((n, from), (4, aa));
        assert_eq!(buf, b"ping");

        let (res, _) = b.send_to(b"pong!".to_vec(), aa).await;
        assert_eq!(res.unwrap(), 5);
        let (res, buf) = a.recv_from(Vec::with_capacity(64)).await;
        assert_eq!(res.unwrap(), (5, ba));
        assert_eq!(buf, b"pong!");

        // Several datagrams of different sizes, sent back to back, keep
        // their boundaries and order (loopback does not reorder).
        let sizes = [1usize, 100, 0, 1472, 7, 9000];
        for (i, &len) in sizes.iter().enumerate() {
            let (res, _) = a.send_to(pattern(len, i as u64), ba).await;
            assert_eq!(res.unwrap(), len);
        }
        for (i, &len) in sizes.iter().enumerate() {
            let (res, buf) = b.recv_from(Vec::with_capacity(65536)).await;
            let (n, from) = res.unwrap();
            assert_eq!(from, aa);
            assert_eq!(n, len, "datagram {i}");
            assert_eq!(buf, pattern(len, i as u64), "datagram {i}");
        }

        // A datagram bigger than the buffer is truncated to it (and the rest
        // is discarded: the next receive gets the next datagram).
        let (res, _) = a.send_to(pattern(500, 1), ba).await;
        res.unwrap();
        let (res, _) = a.send_to(&b"next"[..], ba).await;
        res.unwrap();
        let (res, buf) = b.recv_from(Vec::with_capacity(10)).await;
        assert_eq!(res.unwrap().0, 10);
        assert_eq!(buf, pattern(500, 1)[..10]);
        let (res, buf) = b.recv_from(Vec::with_capacity(64)).await;
        assert_eq!(res.unwrap(), (4, aa));
        assert_eq!(buf, b"next");

        // A receive that waits: the datagram arrives from another task.
        let waiter = ringkit::spawn(async move {
            let (res, buf) = b.recv_from(Vec::with_capacity(64)).await;
            (res.unwrap(), buf)
        });
        ringkit::time::sleep(Duration::from_millis(20)).await;
        let (res, _) = a.send_to(&b"late"[..], ba).await;
        res.unwrap();
        let ((n, from), buf) = waiter.await.unwrap();
        assert_eq!((n, from), (4, aa));
        assert_eq!(buf, b"late");
    }

    /// UnixStream::pair: echo, then shutdown(Write) gives the peer EOF.
    async fn unix_pair_echo() {
        let (a, b) = UnixStream::pair().unwrap();
        let echo = ringkit::spawn(unix_echo_until_eof(b));
        let a = Rc::new(a);
        let msg = pattern(300_000, 3);
        // Write and read concurrently (two tasks on one stream): 300 KB is
        // more than the socket buffers hold.
        let writer = ringkit::spawn({
            let (a, msg) = (a.clone(), msg.clone());
            async move {
                a.write_all(msg).await.0.unwrap();
                // The peer reads EOF after what we wrote...
                a.shutdown(Shutdown::Write).await.unwrap();
            }
        });
        let got = unix_read_to_eof(&a).await;
        writer.await.unwrap();
        assert_eq!(got.len(), msg.len());
        assert!(got == msg, "echoed bytes differ");
        // ...so the echo task ended, having echoed everything.
        assert_eq!(echo.await.unwrap(), msg.len());
        // Writing after shutdown(Write) fails with EPIPE (no SIGPIPE).
        let (res, _) = a.write(&b"x"[..]).await;
        assert_eq!(res.unwrap_err().raw_os_error(), Some(libc::EPIPE));
    }

    /// UnixListener::bind + UnixStream::connect + accept + echo + EOF.
    async fn unix_listener_echo() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("echo.sock");
        let l = UnixListener::bind(&path).unwrap();
        let e = UnixListener::bind(&path).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "{e}");
        // The error names the path (a bare "Address in use" did not).
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        let server = ringkit::spawn(async move {
            let mut served = Vec::new();
            for _ in 0..2 {
                let s = l.accept().await.unwrap();
                served.push(unix_echo_until_eof(s).await);
            }
            served
        });
        for round in 0..2u64 {
            let c = UnixStream::connect(&path).await.unwrap();
            let msg = pattern(1000 + round as usize, round);
            c.write_all(msg.clone()).await.0.unwrap();
            assert_eq!(unix_read_exact(&c, msg.len()).await, msg);
            c.shutdown(Shutdown::Write).await.unwrap();
            // The server sees EOF, stops echoing and drops its end: EOF here.
            let (res, _) = c.read(Vec::with_capacity(16)).await;
            assert_eq!(res.unwrap(), 0, "EOF after the peer saw our shutdown");
        }
        assert_eq!(server.await.unwrap(), vec![1000, 1001]);

        let e = UnixStream::connect(dir.path().join("missing.sock"))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
    }

    /// Vec<u8>, Box<[u8]>, &'static [u8], &'static str, PooledBuf and
    /// AlignedBuf all work for writes and reads, on a stream and on a file.
    async fn owned_buffer_types() {
        let (a, b) = UnixStream::pair().unwrap();
        let pool = BufPool::new(256, 4);

        // Vec<u8>
        let (res, _) = a.write(b"vec".to_vec()).await;
        assert_eq!(res.unwrap(), 3);
        let (res, buf) = b.read(Vec::with_capacity(3)).await;
        assert_eq!(res.unwrap(), 3);
        assert_eq!(buf, b"vec");

        // Box<[u8]>: written whole, read up to its length.
        let boxed: Box<[u8]> = b"boxed!".to_vec().into_boxed_slice();
        let (res, _) = a.write_all(boxed).await;
        res.unwrap();
        let (res, buf) = b.read(vec![0u8; 6].into_boxed_slice()).await;
        assert_eq!(res.unwrap(), 6);
        assert_eq!(&buf[..], b"boxed!");

        // &'static [u8] and &'static str
        let (res, _) = a.write_all(&b"static"[..]).await;
        res.unwrap();
        let (res, _) = a.write_all("str").await;
        res.unwrap();
        assert_eq!(unix_read_exact(&b, 9).await, b"staticstr");

        // PooledBuf, both ways; buffers go back to the pool.
        let mut p = pool.get();
        p.extend_from_slice(b"pooled");
        let (res, p) = a.write_all(p).await;
        res.unwrap();
        drop(p);
        assert_eq!(pool.idle(), 1);
        let (res, p) = b.read(pool.get()).await;
        assert_eq!(res.unwrap(), 6);
        assert_eq!(&p[..], b"pooled");
        assert_eq!(p.capacity(), 256);
        drop(p);
        assert_eq!(pool.idle(), 1, "the same buffer was reused and returned");

        // AlignedBuf
        let mut al = AlignedBuf::new(4096, 4096);
        al.as_mut_slice().copy_from_slice(&pattern(4096, 11));
        let (res, _) = a.write_all(al).await;
        res.unwrap();
        let mut got = Vec::new();
        while got.len() < 4096 {
            let (res, al) = b.read(AlignedBuf::new(4096, 4096)).await;
            let n = res.unwrap();
            assert!(n > 0);
            assert_eq!(al.as_slice().len(), n, "set_init records the length");
            got.extend_from_slice(al.as_slice());
        }
        assert_eq!(got, pattern(4096, 11));

        // The same types on a file.
        let dir = tempfile::tempdir().unwrap();
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .open(dir.path().join("bufs.bin"))
            .await
            .unwrap();
        let (res, _) = f.write_at(b"vec".to_vec(), 0).await;
        assert_eq!(res.unwrap(), 3);
        let (res, _) = f.write_at(b"box".to_vec().into_boxed_slice(), 3).await;
        assert_eq!(res.unwrap(), 3);
        let (res, _) = f.write_at(&b"sta"[..], 6).await;
        assert_eq!(res.unwrap(), 3);
        let mut p = pool.get();
        p.extend_from_slice(b"poo");
        let (res, _) = f.write_at(p, 9).await;
        assert_eq!(res.unwrap(), 3);
        let mut al = AlignedBuf::new(4096, 4096);
        al.set_len(3);
        al.as_mut_slice().copy_from_slice(b"ali");
        let (res, _) = f.write_at(al, 12).await;
        assert_eq!(res.unwrap(), 3);

        let (res, v) = f.read_at(Vec::with_capacity(15), 0).await;
        assert_eq!(res.unwrap(), 15);
        assert_eq!(v, b"vecboxstapooali");
        let (res, bx) = f.read_at(vec![0u8; 3].into_boxed_slice(), 3).await;
        assert_eq!(res.unwrap(), 3);
        assert_eq!(&bx[..], b"box");
        let (res, p) = f.read_at(pool.get(), 9).await;
        assert_eq!(res.unwrap(), 6);
        assert_eq!(&p[..], b"pooali");
        let (res, al) = f.read_at(AlignedBuf::new(4096, 4096), 0).await;
        assert_eq!(res.unwrap(), 15);
        assert_eq!(al.as_slice(), b"vecboxstapooali");
        f.close().await.unwrap();
    }
}

// ---------------------------------------------------------------------------
// Regressions: library bugs these tests found (fixed in 07777e5).

/// Like `test_all!`'s runner, for tests whose two backends differ.
fn run_on<F: std::future::Future<Output = ()>>(backend: Backend, fut: F) {
    let rt = match Builder::new().backend(backend).build() {
        Ok(rt) => rt,
        Err(e) if backend == Backend::Uring => {
            eprintln!("skipped: io_uring unavailable here: {e}");
            return;
        }
        Err(e) => panic!("cannot build a {backend} runtime: {e}"),
    };
    assert_eq!(rt.backend_report().chosen, backend);
    rt.block_on(fut);
}

/// Dropping a socket closes it at once, as on std and on the epoll backend:
/// its port can be bound again right away.
async fn drop_then_rebind() {
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = a.local_addr().unwrap();
    drop(a);
    let b = UdpSocket::bind(addr).expect("rebinding the UDP port of a dropped socket");
    assert_eq!(b.local_addr().unwrap(), addr);

    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    let l = TcpListener::bind(addr).expect("rebinding the TCP port of a dropped listener");
    assert_eq!(l.local_addr().unwrap(), addr);
}

mod drop_then_rebind {
    use super::*;

    #[test]
    fn epoll() {
        run_on(Backend::Epoll, drop_then_rebind());
    }

    #[test]
    fn uring() {
        run_on(Backend::Uring, drop_then_rebind());
    }
}

/// connect() to a Unix listener whose backlog is full must not report
/// success on a socket that is not connected (io_uring gives EAGAIN).
async fn unix_connect_full_backlog() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("full.sock");
    let l = UnixListener::bind(&path).unwrap();
    let addr = socket2::SockAddr::unix(&path).unwrap();
    let mut fillers = Vec::new();
    loop {
        let s = socket2::Socket::new(
            socket2::Domain::UNIX,
            socket2::Type::STREAM.nonblocking(),
            None,
        )
        .unwrap();
        match s.connect(&addr) {
            Ok(()) => fillers.push(s),
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => break,
            Err(e) => panic!("filler connect {}: {e}", fillers.len()),
        }
        assert!(fillers.len() < 5000, "the backlog never filled");
    }
    let res = ringkit::time::timeout(Duration::from_millis(500), UnixStream::connect(&path)).await;
    match res {
        Err(_) => eprintln!("connect to a full backlog waited (timed out)"),
        Ok(Err(e)) => eprintln!("connect to a full backlog failed: {e}"),
        Ok(Ok(c)) => {
            // SAFETY: sockaddr_storage is plain data; all-zero is valid.
            let mut st: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
            // SAFETY: a valid fd and writable address storage of `len` bytes.
            let rc = unsafe {
                libc::getpeername(
                    c.as_raw_fd(),
                    (&mut st as *mut libc::sockaddr_storage).cast(),
                    &mut len,
                )
            };
            let err = io::Error::last_os_error();
            let (wres, _) = c.write(&b"x"[..]).await;
            assert!(
                rc == 0,
                "connect returned Ok on an unconnected socket: \
                 getpeername: {err}, write: {wres:?}"
            );
        }
    }
    drop((l, fillers));
}

mod unix_connect_full_backlog {
    use super::*;

    #[test]
    fn epoll() {
        run_on(Backend::Epoll, unix_connect_full_backlog());
    }

    #[test]
    fn uring() {
        run_on(Backend::Uring, unix_connect_full_backlog());
    }
}
