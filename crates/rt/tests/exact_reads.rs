//! Owned-buffer slices and exact reads, on both backends (`test_all!`):
//! `read_exact` on TCP and Unix streams across several arrivals and at an
//! early close, `read` into a slice's free tail and `write_all` of a part
//! of a buffer (no copy), and `File::read_exact_at` within and past the
//! end of a file.

use std::io;
use std::time::Duration;

use ringkit::buf::IoBufExt;
use ringkit::net::{TcpListener, TcpStream, UnixListener, UnixStream};

async fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
    let (s, _) = l.accept().await.unwrap();
    (c, s)
}

ringkit::test_all! {
    /// Ten bytes that arrive in three parts fill a 10-byte buffer; a peer
    /// that closes after 4 of 10 is `UnexpectedEof`, the 4 in the buffer.
    async fn read_exact_waits_for_every_byte() {
        let (c, s) = tcp_pair().await;
        let writer = ringkit::spawn(async move {
            for part in [&b"012"[..], b"3456", b"789"] {
                c.write_all(part).await.0.unwrap();
                ringkit::time::sleep(Duration::from_millis(20)).await;
            }
            c.write_all(&b"abcd"[..]).await.0.unwrap();
            drop(c);
        });
        let (r, buf) = s.read_exact(Vec::with_capacity(10)).await;
        r.unwrap();
        assert_eq!(buf, b"0123456789");
        let (r, buf) = s.read_exact(Vec::with_capacity(10)).await;
        let e = r.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{e}");
        assert_eq!(buf, b"abcd");
        writer.await.unwrap();
    }

    /// A frame's tail read into the free part of the buffer that holds its
    /// head, and a part of a buffer written without copying it out.
    async fn a_slice_reads_into_the_tail_and_writes_a_part() {
        let (c, s) = tcp_pair().await;
        c.write_all(&b"head"[..]).await.0.unwrap();
        let (r, mut buf) = s.read_exact(Vec::with_capacity(4)).await;
        r.unwrap();
        buf.reserve(4);
        c.write_all(&b"tail"[..]).await.0.unwrap();
        let (r, slice) = s.read_exact(buf.slice(4..8)).await;
        r.unwrap();
        let buf = slice.into_inner();
        assert_eq!(buf, b"headtail");
        // Bytes 2..6 go out as they are.
        let (r, slice) = s.write_all(buf.slice(2..6)).await;
        r.unwrap();
        assert_eq!(slice.into_inner(), b"headtail");
        let (r, got) = c.read_exact(Vec::with_capacity(4)).await;
        r.unwrap();
        assert_eq!(got, b"adta");
    }

    async fn read_exact_on_a_unix_stream() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let l = UnixListener::bind(&path).unwrap();
        let c = UnixStream::connect(&path).await.unwrap();
        let s = l.accept().await.unwrap();
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let expect = data.clone();
        let writer = ringkit::spawn(async move { c.write_all(data).await.0.unwrap() });
        let (r, buf) = s.read_exact(Vec::with_capacity(100_000)).await;
        r.unwrap();
        assert!(buf == expect, "the bytes differ");
        writer.await.unwrap();
    }

    /// Within the file: every byte asked for; across its end:
    /// `UnexpectedEof` with the bytes there were; a buffer filled in two
    /// parts through slices.
    async fn read_exact_at_fills_or_says_where_the_file_ended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 253) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let f = ringkit::fs::File::open(&path).await.unwrap();
        let (r, buf) = f.read_exact_at(Vec::with_capacity(4096), 100).await;
        r.unwrap();
        assert!(buf[..] == data[100..4196]);
        let (r, buf) = f.read_exact_at(Vec::with_capacity(4096), 8_000).await;
        let e = r.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{e}");
        assert!(buf[..] == data[8_000..], "{} bytes", buf.len());
        let (r, s) = f.read_exact_at(Vec::with_capacity(600).slice(..300), 0).await;
        r.unwrap();
        let (r, s) = f.read_exact_at(s.into_inner().slice(300..600), 300).await;
        r.unwrap();
        assert!(s.into_inner()[..] == data[..600]);
    }
}
