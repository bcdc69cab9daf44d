//! `TcpStream::send_file` (sendfile) and `TcpStream::splice_file` (through
//! a pipe): file bytes to a socket without a user-space copy, on both
//! backends, each test by both ways: every byte checked, offsets, end of
//! file, a peer that resets midway, and a reader that stalls for a while.

use std::io::Read;
use std::rc::Rc;
use std::time::Duration;

use ringkit::net::{TcpListener, TcpStream};

fn pattern(len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect()
}

async fn file_with(bytes: &[u8]) -> (tempfile::TempDir, Rc<ringkit::fs::File>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.bin");
    std::fs::write(&path, bytes).unwrap();
    let f = ringkit::fs::File::open(&path).await.unwrap();
    (dir, Rc::new(f))
}

/// The two zero-copy ways.
#[derive(Debug, Clone, Copy)]
enum Via {
    SendFile,
    Splice,
}

const VIAS: [Via; 2] = [Via::SendFile, Via::Splice];

/// Send `file[offset..offset+len]` whole `via` one way; returns the bytes sent.
async fn send_all(
    via: Via,
    s: &TcpStream,
    f: &Rc<ringkit::fs::File>,
    mut offset: u64,
    len: usize,
) -> std::io::Result<usize> {
    let mut left = len;
    while left > 0 {
        let n = match via {
            Via::SendFile => s.send_file(&**f, offset, left).await?,
            Via::Splice => s.splice_file(f, offset, left).await?,
        };
        if n == 0 {
            break;
        }
        offset += n as u64;
        left -= n;
    }
    Ok(len - left)
}

/// A blocking reader on its own thread: reads `want` bytes (pausing
/// `pause` first) and returns them.
fn reader(
    addr: std::net::SocketAddr,
    want: usize,
    pause: Duration,
) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        std::thread::sleep(pause);
        let mut got = vec![0; want];
        c.read_exact(&mut got).unwrap();
        got
    })
}

async fn wait<T>(h: std::thread::JoinHandle<T>) -> T {
    while !h.is_finished() {
        ringkit::time::sleep(Duration::from_millis(2)).await;
    }
    h.join().unwrap()
}

ringkit::test_all! {
    async fn whole_file_and_a_range_arrive_intact() {
        for via in VIAS {
            let data = pattern(3 << 20);
            let (_d, f) = file_with(&data).await;
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let (off, len) = (12_345usize, 2_000_000usize);
            let h = reader(addr, data.len() + len, Duration::ZERO);
            let (s, _) = l.accept().await.unwrap();
            // Corked, as the HTTP server sends large bodies: held partial
            // segments must all come out once uncorked.
            s.set_cork(true).unwrap();
            assert_eq!(send_all(via, &s, &f, 0, data.len()).await.unwrap(), data.len());
            s.set_cork(false).unwrap();
            // The same stream again (its pipe is reused), from an offset.
            assert_eq!(send_all(via, &s, &f, off as u64, len).await.unwrap(), len);
            let got = wait(h).await;
            assert!(got[..data.len()] == data[..], "whole file differs");
            assert!(got[data.len()..] == data[off..off + len], "range differs");
            // Past the end: nothing to send.
            assert_eq!(s.send_file(&*f, data.len() as u64 + 10, 100).await.unwrap(), 0);
        }
    }

    async fn a_stalled_reader_is_waited_for() {
        for via in VIAS {
            // More than the socket buffers and the pipe hold: the sends must
            // wait while the reader sleeps, then finish.
            let data = pattern(8 << 20);
            let (_d, f) = file_with(&data).await;
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let h = reader(addr, data.len(), Duration::from_millis(1500));
            let (s, _) = l.accept().await.unwrap();
            assert_eq!(send_all(via, &s, &f, 0, data.len()).await.unwrap(), data.len());
            assert!(wait(h).await == data);
        }
    }

    async fn a_peer_that_resets_midway_ends_the_send_with_an_error() {
        for via in VIAS {
            let data = pattern(16 << 20);
            let (_d, f) = file_with(&data).await;
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let h = std::thread::spawn(move || {
                let mut c = std::net::TcpStream::connect(addr).unwrap();
                let mut got = vec![0; 100_000];
                c.read_exact(&mut got).unwrap();
                // RST instead of FIN.
                socket2::SockRef::from(&c).set_linger(Some(Duration::ZERO)).unwrap();
                drop(c);
                got
            });
            let (s, _) = l.accept().await.unwrap();
            let r = ringkit::time::timeout(Duration::from_secs(20), send_all(via, &s, &f, 0, data.len()))
                .await
                .expect("the send must end, not hang");
            assert!(r.is_err(), "16 MiB cannot all go to a peer that reset: {r:?}");
            assert!(wait(h).await == data[..100_000]);
            // The stream's pipe was dirty: a new send on another stream works.
            let h = reader(addr, 1000, Duration::ZERO);
            let (s2, _) = l.accept().await.unwrap();
            assert_eq!(send_all(via, &s2, &f, 0, 1000).await.unwrap(), 1000);
            assert!(wait(h).await == data[..1000]);
        }
    }
}
