//! tokio's `AsyncRead`/`AsyncWrite` on `PollIo` (feature `tokio`), on both
//! backends, with tokio's own helpers on ringkit's executor: `io::copy`
//! through `io::split` as an echo server for a std client that checks every
//! byte, line reads with `BufReader`, `read_exact` across ring buffers, and
//! a shutdown the peer sees as end of stream.

use std::io::{Read, Write};
use std::net::Shutdown;

use ringkit::net::{TcpListener, UnixStream};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

fn pattern(len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

ringkit::test_all! {
    async fn tokio_copy_echoes_every_byte() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let data = pattern(2 << 20);
        let sent = data.clone();
        let client = std::thread::spawn(move || {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            let mut w = s.try_clone().unwrap();
            let writer = std::thread::spawn(move || {
                for chunk in sent.chunks(7777) {
                    w.write_all(chunk).unwrap();
                }
                w.shutdown(Shutdown::Write).unwrap();
            });
            let mut got = Vec::new();
            s.read_to_end(&mut got).unwrap();
            writer.join().unwrap();
            got
        });
        let (s, _) = l.accept().await.unwrap();
        let (mut r, mut w) = tokio::io::split(s.into_poll_io());
        let n = tokio::io::copy(&mut r, &mut w).await.unwrap();
        w.shutdown().await.unwrap();
        assert_eq!(n, data.len() as u64);
        let got = client.join().unwrap();
        assert_eq!(got.len(), data.len());
        assert!(got == data, "echoed bytes differ");
    }

    async fn tokio_lines_exact_reads_and_shutdown() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut a = a.into_poll_io();
        let mut b = BufReader::new(b.into_poll_io());
        let body = pattern(300_000);
        let sent = body.clone();
        let writer = ringkit::spawn(async move {
            a.write_all(b"first line\nsecond\n").await.unwrap();
            a.write_all(&(sent.len() as u32).to_be_bytes()).await.unwrap();
            a.write_all(&sent).await.unwrap();
            a.shutdown().await.unwrap();
        });
        let mut line = String::new();
        b.read_line(&mut line).await.unwrap();
        assert_eq!(line, "first line\n");
        line.clear();
        b.read_line(&mut line).await.unwrap();
        assert_eq!(line, "second\n");
        let len = b.read_u32().await.unwrap() as usize;
        let mut got = vec![0u8; len];
        b.read_exact(&mut got).await.unwrap();
        assert!(got == body, "body differs");
        let mut rest = Vec::new();
        assert_eq!(b.read_to_end(&mut rest).await.unwrap(), 0, "end of stream after shutdown");
        writer.await.unwrap();
    }

    async fn tokio_write_to_a_closed_peer_fails() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut a = a.into_poll_io();
        drop(b);
        let mut buf = [0u8; 8];
        assert_eq!(a.read(&mut buf).await.unwrap(), 0);
        let _ = a.write_all(b"hello").await;
        assert!(a.flush().await.is_err(), "a flush to a closed peer must fail");
    }
}
