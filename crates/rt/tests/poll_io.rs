//! `PollIo` (poll-based I/O over completion-based streams) on both
//! backends, over TCP and Unix sockets: 3 MiB written in odd-sized pieces
//! and read back through a small buffer, byte for byte, then a shutdown
//! the reader sees as end of stream.

use std::future::poll_fn;
use std::mem::MaybeUninit;

use ringkit::net::{PollIo, TcpListener, TcpStream, UnixStream};

fn pattern(len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// Write `data` through `w` in pieces of 1..=9000 bytes, flush, shut down;
/// meanwhile read everything from `r` through a 1000-byte buffer.
async fn round_trip(mut w: PollIo, mut r: PollIo, data: Vec<u8>) {
    let len = data.len();
    let writer = ringkit::spawn(async move {
        let mut off = 0;
        let mut step = 1;
        while off < data.len() {
            let end = (off + step).min(data.len());
            let n = poll_fn(|cx| w.poll_write(cx, &data[off..end]))
                .await
                .unwrap();
            assert!(n > 0);
            off += n;
            step = step * 7 % 9000 + 1;
        }
        poll_fn(|cx| w.poll_flush(cx)).await.unwrap();
        poll_fn(|cx| w.poll_shutdown(cx)).await.unwrap();
        data
    });
    let mut got = Vec::with_capacity(len);
    let mut buf = vec![MaybeUninit::<u8>::uninit(); 1000];
    loop {
        let n = poll_fn(|cx| r.poll_read(cx, &mut buf)).await.unwrap();
        if n == 0 {
            break;
        }
        // SAFETY: `poll_read` initialised the first `n` bytes.
        got.extend(buf[..n].iter().map(|b| unsafe { b.assume_init() }));
    }
    let data = writer.await.unwrap();
    assert_eq!(got.len(), data.len());
    assert!(got == data, "bytes differ");
}

ringkit::test_all! {
    async fn tcp_round_trip() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let c = ringkit::spawn(TcpStream::connect(addr));
        let (s, _) = l.accept().await.unwrap();
        let c = c.await.unwrap().unwrap();
        round_trip(s.into_poll_io(), c.into_poll_io(), pattern(3 << 20)).await;
    }

    async fn unix_round_trip() {
        let (a, b) = UnixStream::pair().unwrap();
        round_trip(a.into_poll_io(), b.into_poll_io(), pattern(3 << 20)).await;
    }

    async fn empty_calls_and_a_closed_peer() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut a = a.into_poll_io();
        assert_eq!(poll_fn(|cx| a.poll_write(cx, &[])).await.unwrap(), 0);
        assert_eq!(poll_fn(|cx| a.poll_read(cx, &mut [])).await.unwrap(), 0);
        drop(b);
        let mut buf = [MaybeUninit::<u8>::uninit(); 16];
        assert_eq!(poll_fn(|cx| a.poll_read(cx, &mut buf)).await.unwrap(), 0);
        // Writing to a closed peer fails on the flush, not silently.
        let _ = poll_fn(|cx| a.poll_write(cx, b"hello")).await;
        assert!(poll_fn(|cx| a.poll_flush(cx)).await.is_err());
    }
}
