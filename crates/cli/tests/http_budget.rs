//! The input budget of `ringkit serve` is fair, on both backends: clients
//! that fill it cannot turn away a well-behaved upload whose body arrives
//! in two parts. Both cases were reproduced by a review against the first
//! fair budget (evict the largest holder, share = limit / holders):
//! - connections whose almost-complete bodies were completed, and which
//!   then download a large file without reading, kept their charge while
//!   the file was written: evicting them freed nothing, and every upload
//!   got 503;
//! - 64 holders of 16 KiB each made the share (1 MiB / 65) smaller than a
//!   20 000-byte upload's buffer: refused.

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::{backend_usable, start};
use ringkit_bench::torture::hostile::target::read_response;

/// `POST` 20 000 bytes in two writes 100 ms apart; the status.
fn upload(addr: SocketAddr) -> u16 {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n")
        .unwrap();
    let _ = c.write_all(&[b'u'; 10_000]);
    std::thread::sleep(Duration::from_millis(100));
    let _ = c.write_all(&[b'u'; 10_000]);
    read_response(&mut c).unwrap().0
}

/// A connection that sends all but the last byte of a `len`-byte body.
fn holder(addr: SocketAddr, len: usize) -> TcpStream {
    let mut c = TcpStream::connect(addr).unwrap();
    let head = format!("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: {len}\r\n\r\n");
    c.write_all(head.as_bytes()).unwrap();
    c.write_all(&vec![b'b'; len - 1]).unwrap();
    c
}

fn served_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let f = std::fs::File::create(dir.path().join("big.bin")).unwrap();
    f.set_len(256 << 20).unwrap();
    dir
}

fn downloads_after_a_body(backend: &str) {
    if !backend_usable(backend) {
        return;
    }
    let dir = served_dir();
    let d = dir.path().to_str().unwrap();
    let srv = start(&["serve", d, "--max-buffered-mib", "1"], backend, None);
    let mut held = Vec::new();
    // Four fill the budget; the fifth and sixth evict them (or are
    // refused).
    for _ in 0..6 {
        let mut c = holder(srv.addr, 256 * 1024);
        std::thread::sleep(Duration::from_millis(30));
        // The last byte, and a download the client never reads.
        c.write_all(b"bGET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        held.push(c);
    }
    std::thread::sleep(Duration::from_millis(300));
    let got: Vec<u16> = (0..6).map(|_| upload(srv.addr)).collect();
    eprintln!("{backend}: uploads beside 6 stalled downloads: {got:?}");
    assert!(got.iter().all(|&s| s < 500), "{backend}: {got:?}");
    drop(held);
}

#[test]
fn stalled_downloads_keep_no_charge_for_the_bodies_they_completed() {
    for backend in ["uring", "epoll"] {
        downloads_after_a_body(backend);
    }
}

fn many_small_holders(backend: &str) {
    if !backend_usable(backend) {
        return;
    }
    let dir = served_dir();
    let d = dir.path().to_str().unwrap();
    let srv = start(&["serve", d, "--max-buffered-mib", "1"], backend, None);
    let held: Vec<TcpStream> = (0..64).map(|_| holder(srv.addr, 16 * 1024 + 1)).collect();
    std::thread::sleep(Duration::from_millis(300));
    let got: Vec<u16> = (0..3).map(|_| upload(srv.addr)).collect();
    eprintln!("{backend}: uploads beside 64 holders of 16 KiB: {got:?}");
    assert!(got.iter().all(|&s| s < 500), "{backend}: {got:?}");
    drop(held);
}

#[test]
fn many_small_holders_cannot_refuse_an_ordinary_upload() {
    for backend in ["uring", "epoll"] {
        many_small_holders(backend);
    }
}
