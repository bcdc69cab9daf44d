//! Helpers shared by the stream tests that push bulk data through the
//! buffer ring (`recv_bundle.rs`, `send_batch.rs`).

use std::net::SocketAddr;

use ringkit::net::{TcpListener, TcpStream};

/// Whether this kernel has receive and send bundles
/// (`IORING_FEAT_RECVSEND_BUNDLE`, Linux 6.10).
pub fn kernel_has_bundles() -> bool {
    ringkit_uring::IoUring::new(4)
        .map(|r| r.features() & ringkit_uring::sys::IORING_FEAT_RECVSEND_BUNDLE != 0)
        .unwrap_or(false)
}

/// `len` bytes whose value depends on their position, so a byte that is
/// lost, repeated, reordered or overwritten by later data shows.
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// A listener and a std client thread running `client` on its stream.
pub async fn pair(
    client: impl FnOnce(std::net::TcpStream) + Send + 'static,
) -> (TcpStream, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr: SocketAddr = l.local_addr().unwrap();
    let t = std::thread::spawn(move || client(std::net::TcpStream::connect(addr).unwrap()));
    let (s, _) = l.accept().await.unwrap();
    (s, t)
}
