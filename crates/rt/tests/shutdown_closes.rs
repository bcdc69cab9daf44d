//! Closes queued on the ring are carried out when the runtime is dropped,
//! on both backends, plain and hosted. On io_uring a socket's close is an
//! SQE batched with the next enter; the shutdown only entered the kernel
//! while some operation was in flight, so closes queued in the last turn
//! were thrown away with the ring: 20 runtimes that each dropped a socket
//! pair leaked 40 fds, and a peer never saw EOF. One test per binary
//! process state: fds are counted, so the tests run one after the other.

use std::io::Read;
use std::time::Duration;

use ringkit::net::{TcpListener, UnixStream};
use ringkit::{Backend, Builder};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn builder(backend: Backend, hosted: bool) -> Builder {
    let b = Builder::new().backend(backend);
    if hosted {
        b.host_tokio()
    } else {
        b
    }
}

fn usable(backend: Backend) -> bool {
    let ok = builder(backend, false).build().is_ok();
    if !ok {
        eprintln!("skipped {backend:?}: unavailable here");
    }
    ok
}

fn sockets_dropped_in_the_last_turn(backend: Backend, hosted: bool) {
    // One runtime first, so lazily made process-wide state is counted.
    drop(builder(backend, hosted).build().unwrap());
    let before = open_fds();
    for _ in 0..20 {
        let rt = builder(backend, hosted).build().unwrap();
        rt.block_on(async {
            let _pair = UnixStream::pair().unwrap();
        });
        drop(rt);
    }
    let after = open_fds();
    assert_eq!(
        after, before,
        "{backend:?} (hosted {hosted}): {before} fds before 20 runtimes, {after} after"
    );
}

fn the_peer_sees_eof(backend: Backend, hosted: bool) {
    let std_l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_l.local_addr().unwrap();
    drop(std_l);
    let server = std::thread::spawn(move || {
        let rt = builder(backend, hosted).build().unwrap();
        rt.block_on(async {
            let l = TcpListener::bind(addr).unwrap();
            let (s, _) = l.accept().await.unwrap();
            drop(l);
            let (r, _) = s.write_all(b"bye".to_vec()).await;
            r.unwrap();
        });
        drop(rt);
        // The thread lives on: only the runtime's drop may close.
        std::thread::sleep(Duration::from_secs(3));
    });
    let mut c = loop {
        match std::net::TcpStream::connect(addr) {
            Ok(c) => break c,
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut got = Vec::new();
    let r = c.read_to_end(&mut got);
    assert!(
        r.is_ok() && got == b"bye",
        "{backend:?} (hosted {hosted}): {r:?} after {got:?}: no EOF"
    );
    server.join().unwrap();
}

#[test]
fn closes_queued_in_the_last_turn_are_carried_out() {
    for backend in [Backend::Epoll, Backend::Uring] {
        if !usable(backend) {
            continue;
        }
        for hosted in [false, true] {
            sockets_dropped_in_the_last_turn(backend, hosted);
            the_peer_sees_eof(backend, hosted);
        }
    }
}
