//! Helpers of the stream tests (`stream_io.rs`, `stream_cancel.rs`):
//! deterministic data, loopback pairs, guarded waits, SIGPIPE checks.
#![allow(dead_code)]

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::net::Shutdown;
use std::pin::pin;
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

use ringkit::net::{TcpListener, TcpStream};
use ringkit::time::{sleep, timeout};
use ringkit::Backend;

// ---------------------------------------------------------------- helpers

/// xorshift64*: deterministic and dependency-free.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below((hi - lo + 1) as u64) as usize
    }
}

/// Byte `i` of test stream `seed`: a hash of the position, so a lost,
/// duplicated or reordered chunk of any length shows up.
pub fn byte_at(seed: u64, i: usize) -> u8 {
    let mut x = (i as u64 ^ seed.rotate_left(32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (x >> 56) as u8
}

/// Bytes `start..start + len` of test stream `seed`.
pub fn pattern(seed: u64, start: usize, len: usize) -> Vec<u8> {
    (start..start + len).map(|i| byte_at(seed, i)).collect()
}

/// Panics at the first byte of `got` that differs from stream `seed`.
pub fn check_stream(seed: u64, got: &[u8]) {
    if let Some(i) = (0..got.len()).find(|&i| got[i] != byte_at(seed, i)) {
        panic!(
            "byte stream corrupted at offset {i} of {} (lost, duplicated or reordered data)",
            got.len()
        );
    }
}

/// A connected (client, server) pair over loopback.
pub async fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
    let (s, peer) = l.accept().await.unwrap();
    assert_eq!(peer, c.local_addr().unwrap());
    (c, s)
}

/// Await `fut`, failing (instead of hanging) if it makes no progress for
/// 20 s: a lost byte or a lost wake-up would otherwise block a read forever.
pub async fn guarded<F: Future>(what: &str, fut: F) -> F::Output {
    match timeout(Duration::from_secs(20), fut).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: stuck for 20 s (lost data or lost wake-up)"),
    }
}

/// Read exactly `n` bytes with reads of at most about `chunk` bytes.
pub async fn read_exact(s: &TcpStream, n: usize, chunk: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let want = chunk.min(n - out.len());
        let (res, buf) = guarded("read_exact", s.read(Vec::with_capacity(want))).await;
        let k = res.unwrap();
        assert!(k > 0, "unexpected EOF after {} of {n} bytes", out.len());
        out.extend_from_slice(&buf[..k]);
    }
    out
}

/// Read until EOF.
pub async fn read_to_end(s: &TcpStream, chunk: usize) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let (res, buf) = guarded("read_to_end", s.read(Vec::with_capacity(chunk))).await;
        match res.unwrap() {
            0 => return out,
            k => out.extend_from_slice(&buf[..k]),
        }
    }
}

/// Poll `fut` during at most `turns + 1` runtime turns; `None` (and `fut` is
/// dropped, wherever it was) if it did not finish by then.
pub async fn poll_turns<F: Future>(turns: u32, fut: F) -> Option<F::Output> {
    let mut fut = pin!(fut);
    let mut left = turns;
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        if left == 0 {
            return Poll::Ready(None);
        }
        left -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}

/// Writes test stream `seed` in random chunks (yielding now and then so data
/// arrives continuously) until `stop` is set, then shuts down writing.
/// Returns how many bytes it sent.
pub async fn stream_writer(
    c: TcpStream,
    seed: u64,
    stop: Rc<Cell<bool>>,
    max_chunk: usize,
) -> usize {
    let mut rng = Rng::new(seed ^ 0x5555);
    let mut off = 0;
    while !stop.get() {
        let len = rng.range(1, max_chunk);
        let (res, _) = c.write_all(pattern(seed, off, len)).await;
        res.unwrap();
        off += len;
        match rng.below(8) {
            0 => sleep(Duration::from_micros(rng.below(300))).await,
            1..=3 => ringkit::yield_now().await,
            _ => {}
        }
    }
    c.shutdown(Shutdown::Write).await.unwrap();
    off
}

pub fn is_uring() -> bool {
    ringkit::backend_report().expect("inside a runtime").chosen == Backend::Uring
}

/// Blocks SIGPIPE on this thread for the guard's life, so a SIGPIPE raised by
/// a write on this thread stays pending where we can see it (blocked signals
/// are never discarded as ignored). Restores the mask on drop.
pub struct SigpipeBlocked {
    old: libc::sigset_t,
}

pub fn sigpipe_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialise it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        set
    }
}

impl SigpipeBlocked {
    pub fn new() -> SigpipeBlocked {
        let set = sigpipe_set();
        // SAFETY: valid sigset pointers; only this thread's mask changes.
        let old = unsafe {
            let mut old: libc::sigset_t = std::mem::zeroed();
            assert_eq!(
                libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old),
                0,
                "pthread_sigmask"
            );
            old
        };
        SigpipeBlocked { old }
    }

    pub fn pending(&self) -> bool {
        // SAFETY: valid sigset pointer.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            assert_eq!(libc::sigpending(&mut set), 0);
            libc::sigismember(&set, libc::SIGPIPE) == 1
        }
    }
}

impl Drop for SigpipeBlocked {
    fn drop(&mut self) {
        if self.pending() {
            let set = sigpipe_set();
            let zero = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: consume the pending SIGPIPE so unblocking cannot raise it.
            unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &zero) };
        }
        // SAFETY: restoring the mask saved in `new`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut()) };
    }
}

/// Set an integer socket option (buffer sizes) on a connected stream.
pub fn set_sock_int(s: &TcpStream, opt: libc::c_int, v: libc::c_int) {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid socket fd and a pointer to a live c_int of the given size.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "setsockopt: {}", io::Error::last_os_error());
}

/// One short echo on a fresh connection: proves the runtime still works.
pub async fn quick_echo(msg: &[u8]) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let server = ringkit::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let got = read_to_end(&s, 1024).await;
        s.write_all(got).await.0.unwrap();
    });
    let c = TcpStream::connect(addr).await.unwrap();
    c.write_all(msg.to_vec()).await.0.unwrap();
    c.shutdown(Shutdown::Write).await.unwrap();
    assert_eq!(read_to_end(&c, 1024).await, msg);
    server.await.unwrap();
}

/// Echo server for `read_pooled`: echoes every pooled buffer as it is.
/// Returns (bytes echoed, buffers that were provided-ring slots, heap buffers).
pub async fn pooled_echo(s: TcpStream) -> (usize, usize, usize) {
    let (mut n, mut ring, mut heap) = (0, 0, 0);
    loop {
        let rb = s.read_pooled().await.unwrap();
        if rb.is_empty() {
            return (n, ring, heap);
        }
        if rb.is_ring_buffer() {
            ring += 1;
        } else {
            heap += 1;
        }
        n += rb.len();
        let (res, rb) = s.write_all(rb).await;
        res.unwrap();
        drop(rb);
    }
}
