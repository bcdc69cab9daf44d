//! What a connection waiting in `read_pooled` holds, on both backends: 400
//! connections each echo one 16-byte message and then wait for more; the
//! server thread's live heap must grow by well under one 4 KiB read buffer
//! per connection (the task, the stream and its registration only). A
//! backend whose pending receive owns a buffer fails this.
//!
//! Heap bytes are counted per thread by a counting global allocator, so the
//! client thread and other tests do not disturb the figure.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ringkit::net::TcpListener;

struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded to `System` unchanged; the counter is a
// const-initialised thread-local `Cell` (no allocation, no destructor).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = LIVE.try_with(|c| c.set(c.get() + l.size() as isize));
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        let _ = LIVE.try_with(|c| c.set(c.get() - l.size() as isize));
        // SAFETY: `p` came from `System.alloc` with layout `l`.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let _ = LIVE.try_with(|c| c.set(c.get() + new as isize - l.size() as isize));
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn live() -> isize {
    LIVE.with(Cell::get)
}

const CONNS: usize = 400;

/// Accept `n` connections, each echoing until end of stream; return when
/// the client thread says every echo came back.
async fn serve(l: &TcpListener, n: usize, done: &AtomicBool) {
    for _ in 0..n {
        let (s, _) = l.accept().await.unwrap();
        ringkit::spawn(async move {
            loop {
                let rb = s.read_pooled().await.unwrap();
                if rb.is_empty() {
                    break;
                }
                let (r, _) = s.write_all(rb).await;
                r.unwrap();
            }
        });
    }
    while !done.load(Ordering::Acquire) {
        ringkit::time::sleep(Duration::from_millis(5)).await;
    }
    // Let every task get back to its pending read.
    ringkit::time::sleep(Duration::from_millis(100)).await;
}

fn clients(
    addr: std::net::SocketAddr,
    n: usize,
    done: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<std::net::TcpStream>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        for i in 0..n {
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            let msg = [i as u8; 16];
            c.write_all(&msg).unwrap();
            let mut back = [0u8; 16];
            c.read_exact(&mut back).unwrap();
            assert_eq!(back, msg);
            v.push(c);
        }
        done.store(true, Ordering::Release);
        v
    })
}

ringkit::test_all! {
    async fn a_waiting_connection_holds_no_read_buffer() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        // Warm-up: shared state (buffer ring, scratch buffer, slabs) is
        // allocated here, not counted against the connections.
        let done = Arc::new(AtomicBool::new(false));
        let warm = clients(addr, 64, done.clone());
        serve(&l, 64, &done).await;
        let warm = warm.join().unwrap();

        let before = live();
        let done = Arc::new(AtomicBool::new(false));
        let c = clients(addr, CONNS, done.clone());
        serve(&l, CONNS, &done).await;
        let per_conn = (live() - before) as f64 / CONNS as f64;
        let conns = c.join().unwrap();
        println!("{per_conn:.0} heap bytes per waiting connection");
        assert!(
            per_conn < 2048.0,
            "{per_conn:.0} heap bytes per waiting connection: a read buffer is held"
        );
        drop((warm, conns));
    }
}
