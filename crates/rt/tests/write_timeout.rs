//! `set_write_timeout`, on both backends: a peer that stops reading fails
//! every kind of write (`write_all`, pooled batches, `send_file`,
//! `splice_file`, a `PollIo` flush) with `TimedOut` once no byte has moved
//! for the limit, and gives the buffer back; a slow but steady reader is
//! never cut off, however long the whole write takes.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringkit::net::{TcpListener, TcpStream};
use ringkit::time::timeout;

fn set_buf(fd: i32, opt: i32, bytes: i32) {
    // SAFETY: setsockopt with a valid int option on an open socket.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (&bytes as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0);
}

/// A server-side stream with a small send buffer, and a std client with a
/// small receive buffer that runs `client` on its own thread.
async fn pair(
    client: impl FnOnce(std::net::TcpStream) + Send + 'static,
) -> (TcpStream, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        // The receive buffer is set before connecting, so the window the
        // handshake announces matches it.
        let c = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        c.set_recv_buffer_size(4096).unwrap();
        c.connect(&addr.into()).unwrap();
        client(c.into())
    });
    let (s, _) = l.accept().await.unwrap();
    set_buf(s.as_raw_fd(), libc::SO_SNDBUF, 4096);
    (s, t)
}

/// A client that never reads until `stop`, then closes.
fn stalled(stop: Arc<AtomicBool>) -> impl FnOnce(std::net::TcpStream) + Send + 'static {
    move |c| {
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(c);
    }
}

const LIMIT: Duration = Duration::from_millis(300);

/// Awaits `fut`, which must fail with `TimedOut` between the limit and a
/// generous bound.
async fn expect_timed_out<T: std::fmt::Debug>(
    what: &str,
    fut: impl std::future::Future<Output = std::io::Result<T>>,
) {
    let t0 = Instant::now();
    let r = timeout(Duration::from_secs(20), fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: a stalled reader held the write for 20 s"));
    let e = r.expect_err(&format!(
        "{what}: wrote everything to a peer that never reads"
    ));
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{what}: {e}");
    assert!(t0.elapsed() >= LIMIT, "{what}: timed out early");
}

ringkit::test_all! {
    async fn a_stalled_reader_times_out_every_write() {
        let stop = Arc::new(AtomicBool::new(false));
        let (s, t) = pair(stalled(stop.clone())).await;
        assert_eq!(s.write_timeout(), None);
        s.set_write_timeout(Some(LIMIT));
        assert_eq!(s.write_timeout(), Some(LIMIT));
        let big = vec![7u8; 8 << 20];
        expect_timed_out("write_all", async {
            let (r, buf) = s.write_all(big).await;
            assert_eq!(buf.len(), 8 << 20, "the buffer comes back whole");
            r
        })
        .await;
        // A file body, by sendfile and by splice.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![1u8; 4 << 20]).unwrap();
        let f = Rc::new(ringkit::fs::File::open(&path).await.unwrap());
        expect_timed_out("send_file", async {
            let mut off = 0;
            loop {
                off += s.send_file(&*f, off, 4 << 20).await? as u64;
            }
            #[allow(unreachable_code)]
            Ok(())
        })
        .await;
        expect_timed_out("splice_file", async {
            let mut off = 0;
            loop {
                off += s.splice_file(&f, off, 4 << 20).await? as u64;
            }
            #[allow(unreachable_code)]
            Ok(())
        })
        .await;
        stop.store(true, Ordering::Relaxed);
        t.join().unwrap();

        // A PollIo flush.
        let stop = Arc::new(AtomicBool::new(false));
        let (s, t) = pair(stalled(stop.clone())).await;
        s.set_write_timeout(Some(LIMIT));
        let mut io = s.into_poll_io();
        expect_timed_out("PollIo flush", async {
            let chunk = vec![3u8; 16 * 1024];
            for _ in 0..512 {
                let mut left = &chunk[..];
                while !left.is_empty() {
                    let n = std::future::poll_fn(|cx| io.poll_write(cx, left)).await?;
                    left = &left[n..];
                }
            }
            std::future::poll_fn(|cx| io.poll_flush(cx)).await
        })
        .await;
        stop.store(true, Ordering::Relaxed);
        t.join().unwrap();
    }

    /// 1 MiB to a reader taking 8 KiB every 25 ms (about 4 s in all, more
    /// than ten times the limit): every byte arrives.
    async fn a_slow_steady_reader_is_not_cut_off() {
        const LEN: usize = 1 << 20;
        let (s, t) = pair(|mut c| {
            let mut got = 0;
            let mut buf = [0u8; 8192];
            while got < LEN {
                let n = c.read(&mut buf).unwrap();
                assert!(n > 0, "EOF after {got} bytes");
                got += n;
                std::thread::sleep(Duration::from_millis(25));
            }
        })
        .await;
        s.set_write_timeout(Some(LIMIT));
        let t0 = Instant::now();
        let (r, _) = s.write_all(vec![5u8; LEN]).await;
        r.expect("a steady reader was cut off");
        // Until the reader has it all (only the tail may still be in flight).
        while !t.is_finished() {
            ringkit::time::sleep(Duration::from_millis(10)).await;
        }
        t.join().unwrap();
        assert!(
            t0.elapsed() > LIMIT * 3,
            "the reader was not slow ({:?}): the test proves nothing",
            t0.elapsed()
        );
    }
}
