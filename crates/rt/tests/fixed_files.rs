//! Registered (fixed) files for busy sockets (`Builder::fixed_files`), on
//! both backends: a stream is promoted at its 16th operation on io_uring
//! (never on epoll), every byte still arrives, closing a promoted stream
//! really closes the socket (the peer sees EOF), slots are reused after
//! their close went through the ring, and a full table leaves streams on
//! plain fds.

use std::future::Future;
use std::net::Shutdown;
use std::time::Duration;

use ringkit::net::{TcpListener, TcpStream};
use ringkit::time::timeout;
use ringkit::{Backend, Builder};

const SLOTS: u32 = 4;

/// Run `fut` on a `backend` runtime with a 4-slot table; skips (printing
/// why) if io_uring is unavailable.
fn run<F: Future<Output = ()>>(backend: Backend, fut: impl FnOnce() -> F) {
    run_with(backend, Builder::new(), fut)
}

fn run_with<F: Future<Output = ()>>(backend: Backend, b: Builder, fut: impl FnOnce() -> F) {
    ringkit::raise_nofile_limit();
    let rt = match b.backend(backend).fixed_files(SLOTS).build() {
        Ok(rt) => rt,
        Err(e) if backend == Backend::Uring => {
            eprintln!("skipped: io_uring unavailable here: {e}");
            return;
        }
        Err(e) => panic!("cannot build a {backend} runtime: {e}"),
    };
    rt.block_on(fut());
}

fn msg(conn: usize, i: usize) -> Vec<u8> {
    let len = 1 + (conn * 37 + i * 101) % 3000;
    (0..len).map(|j| (conn * 7 + i * 13 + j) as u8).collect()
}

/// Echo until EOF, with plain reads or pooled ones; returns the slot the
/// stream was promoted to, if any. Dropping `s` at the end closes it.
async fn echo(s: TcpStream, pooled: bool) -> Option<u32> {
    // Pooled reads echo in ring-buffer-sized chunks: without NODELAY, Nagle
    // and the peer's delayed ACK would add 40 ms per message.
    s.set_nodelay(true).unwrap();
    let mut slot = None;
    loop {
        if pooled {
            let rb = s.read_pooled().await.unwrap();
            if rb.is_empty() {
                break;
            }
            s.write_all(rb).await.0.unwrap();
        } else {
            let (res, buf) = s.read(Vec::with_capacity(4096)).await;
            if res.unwrap() == 0 {
                break;
            }
            s.write_all(buf).await.0.unwrap();
        }
        slot = slot.or(s.registered_file());
    }
    slot
}

/// Send 40 messages, check each echo byte for byte, half-close, and expect
/// EOF once the server dropped its stream (bounded: a socket kept open by a
/// leaked registered-file slot would hang here). Returns the client
/// stream's own slot: it runs on the same runtime, so it is promoted too.
async fn client(addr: std::net::SocketAddr, conn: usize) -> Option<u32> {
    let c = TcpStream::connect(addr).await.unwrap();
    c.set_nodelay(true).unwrap();
    for i in 0..40 {
        let m = msg(conn, i);
        c.write_all(m.clone()).await.0.unwrap();
        let mut got = Vec::new();
        while got.len() < m.len() {
            let (res, buf) = c.read(Vec::with_capacity(4096)).await;
            let n = res.unwrap();
            assert!(n > 0, "conn {conn}: EOF in the middle of message {i}");
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, m, "conn {conn}, message {i}");
    }
    c.shutdown(Shutdown::Write).await.unwrap();
    let eof = timeout(Duration::from_secs(5), c.read(Vec::with_capacity(16)))
        .await
        .expect("the server's close did not reach the peer (slot not closed?)");
    assert_eq!(eof.0.unwrap(), 0, "conn {conn}: data after the echo");
    c.registered_file()
}

/// 12 connections one after another through a 4-slot table.
async fn sequential(backend: Backend) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let server = ringkit::spawn(async move {
        let mut slots = Vec::new();
        for i in 0..12 {
            let s = l.accept_stream().await.unwrap();
            slots.push(echo(s, i % 2 == 1).await);
        }
        slots
    });
    let mut slots = Vec::new();
    for conn in 0..12 {
        slots.push(client(addr, conn).await);
    }
    slots.extend(server.await.unwrap());
    match backend {
        // Every stream is promoted: the 4 slots are reused once each old
        // stream's close has been submitted.
        Backend::Uring => assert!(
            slots.iter().all(|s| s.is_some_and(|s| s < SLOTS)),
            "{slots:?}"
        ),
        _ => assert!(slots.iter().all(Option::is_none), "{slots:?}"),
    }
}

/// 6 connections at once (12 streams: both ends run here) through a 4-slot
/// table: 4 streams promoted, 8 on plain fds, all correct.
async fn concurrent(backend: Backend) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let server = ringkit::spawn(async move {
        let mut tasks = Vec::new();
        for i in 0..6 {
            let s = l.accept_stream().await.unwrap();
            tasks.push(ringkit::spawn(echo(s, i % 2 == 0)));
        }
        let mut slots = Vec::new();
        for t in tasks {
            slots.push(t.await.unwrap());
        }
        slots
    });
    let clients: Vec<_> = (0..6)
        .map(|c| ringkit::spawn(client(addr, 100 + c)))
        .collect();
    let mut slots = Vec::new();
    for c in clients {
        slots.push(c.await.unwrap());
    }
    slots.extend(server.await.unwrap());
    let promoted: Vec<u32> = slots.iter().flatten().copied().collect();
    match backend {
        Backend::Uring => {
            assert_eq!(promoted.len(), SLOTS as usize, "{slots:?}");
            let mut distinct = promoted.clone();
            distinct.sort_unstable();
            distinct.dedup();
            assert_eq!(
                distinct.len(),
                promoted.len(),
                "a slot given twice: {slots:?}"
            );
        }
        _ => assert!(promoted.is_empty(), "{slots:?}"),
    }
}

#[test]
fn sequential_streams_reuse_slots_uring() {
    run(Backend::Uring, || sequential(Backend::Uring));
}

#[test]
fn sequential_streams_reuse_slots_epoll() {
    run(Backend::Epoll, || sequential(Backend::Epoll));
}

#[test]
fn a_full_table_leaves_streams_on_plain_fds_uring() {
    run(Backend::Uring, || concurrent(Backend::Uring));
}

#[test]
fn a_full_table_leaves_streams_on_plain_fds_epoll() {
    run(Backend::Epoll, || concurrent(Backend::Epoll));
}

/// A provided-buffer ring of two 64-byte buffers runs dry on every message,
/// so pooled reads keep re-arming their multishot receive, and promotion
/// happens while one is being armed (it used to borrow the driver twice).
#[test]
fn promotion_while_arming_a_multishot_receive_uring() {
    let b = Builder::new().recv_buffers(2, 64);
    run_with(Backend::Uring, b, || sequential(Backend::Uring));
}

#[test]
fn promotion_while_arming_a_multishot_receive_epoll() {
    let b = Builder::new().recv_buffers(2, 64);
    run_with(Backend::Epoll, b, || sequential(Backend::Epoll));
}
