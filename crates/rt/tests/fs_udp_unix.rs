//! Files, UDP, Unix-domain sockets and the owned-buffer types, each test run
//! once per backend (`ringkit::test_all!`: `<name>::uring` and `<name>::epoll`).

use std::io;
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, SystemTime};

use ringkit::buf::{AlignedBuf, BufPool};
use ringkit::fs::{self, File, OpenOptions};
use ringkit::net::{TcpListener, UdpSocket, UnixListener, UnixStream};
use ringkit::{Backend, Builder};

/// Deterministic, random-looking bytes (xorshift64*), different per `seed`.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

/// Write `data` to a fresh file at `path` (std, outside the runtime's I/O).
fn std_write(path: &Path, data: &[u8]) {
    std::fs::write(path, data).unwrap();
}

/// Read exactly `len` bytes from `s` (looping over short reads).
async fn unix_read_exact(s: &UnixStream, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let (res, buf) = s.read(Vec::with_capacity(len - out.len())).await;
        let n = res.unwrap();
        assert!(n > 0, "unexpected EOF after {} of {len} bytes", out.len());
        out.extend_from_slice(&buf[..n]);
    }
    out
}

/// Read until EOF from `s`.
async fn unix_read_to_eof(s: &UnixStream) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let (res, buf) = s.read(Vec::with_capacity(4096)).await;
        match res.unwrap() {
            0 => return out,
            n => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// Echo everything read from `s` back to it until EOF; returns the byte count.
async fn unix_echo_until_eof(s: UnixStream) -> usize {
    let mut total = 0;
    loop {
        let (res, buf) = s.read(Vec::with_capacity(4096)).await;
        let n = res.unwrap();
        if n == 0 {
            return total;
        }
        total += n;
        s.write_all(buf).await.0.unwrap();
    }
}

/// Try O_DIRECT in `dir`: `Ok(None)` if the filesystem refuses it (EINVAL).
async fn direct_roundtrip_in(dir: &Path) -> io::Result<Option<()>> {
    const BLK: usize = 4096;
    const BLOCKS: usize = 4;
    let tmp = tempfile::tempdir_in(dir)?;
    let path = tmp.path().join("direct.bin");
    let refused = |e: &io::Error| e.raw_os_error() == Some(libc::EINVAL);
    let f = match OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .direct(true)
        .open(&path)
        .await
    {
        Ok(f) => f,
        Err(e) if refused(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    let data = pattern(BLK * BLOCKS, 77);
    // One aligned block per write, at block-aligned offsets.
    for i in 0..BLOCKS {
        let mut b = AlignedBuf::new(BLK, BLK);
        b.as_mut_slice()
            .copy_from_slice(&data[i * BLK..(i + 1) * BLK]);
        let (res, _) = f.write_at(b, (i * BLK) as u64).await;
        match res {
            Ok(n) => assert_eq!(n, BLK, "short O_DIRECT write of block {i}"),
            Err(e) if i == 0 && refused(&e) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    f.sync_all().await?;
    // Each block back on its own, in reverse order.
    for i in (0..BLOCKS).rev() {
        let (res, b) = f.read_at(AlignedBuf::new(BLK, BLK), (i * BLK) as u64).await;
        assert_eq!(res?, BLK, "short O_DIRECT read of block {i}");
        assert_eq!(b.as_slice(), &data[i * BLK..(i + 1) * BLK], "block {i}");
    }
    // All blocks in one aligned read.
    let (res, b) = f.read_at(AlignedBuf::new(BLK * BLOCKS, BLK), 0).await;
    assert_eq!(res?, BLK * BLOCKS);
    assert_eq!(b.as_slice(), &data[..]);
    // Past the end: 0 bytes, and the buffer says so.
    let (res, b) = f
        .read_at(AlignedBuf::new(BLK, BLK), (BLK * BLOCKS) as u64)
        .await;
    assert_eq!(res?, 0);
    assert!(b.as_slice().is_empty());
    assert_eq!(f.metadata().await?.len(), (BLK * BLOCKS) as u64);
    f.close().await?;
    Ok(Some(()))
}

ringkit::test_all! {
    /// A std-opened fd adopted as a File reads through the runtime, and goes
    /// back to an OwnedFd without being closed.
    async fn file_from_owned_fd() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("adopt.txt");
        std::fs::write(&path, b"adopted bytes").unwrap();
        let owned: std::os::fd::OwnedFd = std::fs::File::open(&path).unwrap().into();
        let f = ringkit::fs::File::from(owned);
        let (n, buf) = f.read_at(Vec::with_capacity(64), 0).await;
        assert_eq!(n.unwrap(), 13);
        assert_eq!(&buf[..], b"adopted bytes");
        let back: std::os::fd::OwnedFd = f.into();
        let mut std_file = std::fs::File::from(back);
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std_file, &mut s).unwrap();
        assert_eq!(s, "adopted bytes");
    }

    /// write_at/read_at at several offsets (with a hole), write_all_at,
    /// read past EOF, close.
    async fn file_write_read_at() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rw.bin");
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .open(&path)
            .await
            .unwrap();

        let (res, buf) = f.write_at(b"hello".to_vec(), 0).await;
        assert_eq!(res.unwrap(), 5);
        assert_eq!(buf, b"hello", "write_at hands the buffer back intact");
        let (res, _) = f.write_at(&b"world"[..], 100).await;
        assert_eq!(res.unwrap(), 5);
        let (res, _) = f.write_all_at(pattern(10_000, 1), 200).await;
        res.unwrap();

        // Read from the start: data, then the hole (zeros), then data.
        let (res, buf) = f.read_at(Vec::with_capacity(105), 0).await;
        assert_eq!(res.unwrap(), 105);
        assert_eq!(&buf[..5], b"hello");
        assert!(buf[5..100].iter().all(|&b| b == 0), "the hole reads as zeros");
        assert_eq!(&buf[100..105], b"world");

        // A read in the middle, at an odd offset.
        let (res, buf) = f.read_at(Vec::with_capacity(3), 102).await;
        assert_eq!(res.unwrap(), 3);
        assert_eq!(buf, b"rld");

        // The write_all_at region.
        let (res, buf) = f.read_at(Vec::with_capacity(10_000), 200).await;
        assert_eq!(res.unwrap(), 10_000);
        assert_eq!(buf, pattern(10_000, 1));

        // A read spanning EOF is short; a read at/after EOF is Ok(0).
        let size = 200 + 10_000;
        let (res, buf) = f.read_at(Vec::with_capacity(64), size - 10).await;
        assert_eq!(res.unwrap(), 10);
        assert_eq!(buf.len(), 10);
        let (res, buf) = f.read_at(Vec::with_capacity(64), size).await;
        assert_eq!(res.unwrap(), 0);
        assert!(buf.is_empty());
        let (res, _) = f.read_at(Vec::with_capacity(64), size + 1_000_000).await;
        assert_eq!(res.unwrap(), 0);

        // Overwrite in place.
        let (res, _) = f.write_all_at(&b"HE"[..], 0).await;
        res.unwrap();
        let (res, buf) = f.read_at(Vec::with_capacity(5), 0).await;
        assert_eq!(res.unwrap(), 5);
        assert_eq!(buf, b"HEllo");

        f.close().await.unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
        let on_disk = std::fs::read(&path).unwrap();
        assert_eq!(&on_disk[..5], b"HEllo");
    }

    /// read_to_end of a 1 MiB file (written by std, then by ringkit).
    async fn file_read_to_end_1mib() {
        let dir = tempfile::tempdir().unwrap();
        let data = pattern(1 << 20, 42);

        let p1 = dir.path().join("std.bin");
        std_write(&p1, &data);
        let f = File::open(&p1).await.unwrap();
        let got = f.read_to_end().await.unwrap();
        assert_eq!(got.len(), data.len());
        assert!(got == data, "content read back differs");
        f.close().await.unwrap();

        // Odd size, written through the runtime.
        let p2 = dir.path().join("rk.bin");
        let odd = pattern((1 << 20) + 12_345, 43);
        let f = File::create(&p2).await.unwrap();
        let (res, _) = f.write_all_at(odd.clone(), 0).await;
        res.unwrap();
        f.close().await.unwrap();
        let f = File::open(&p2).await.unwrap();
        let got = f.read_to_end().await.unwrap();
        assert_eq!(got.len(), odd.len());
        assert!(got == odd, "content read back differs");
        assert!(std::fs::read(&p2).unwrap() == odd);

        // Empty file.
        let p3 = dir.path().join("empty.bin");
        std_write(&p3, b"");
        let f = File::open(&p3).await.unwrap();
        assert!(f.read_to_end().await.unwrap().is_empty());
    }

    /// writev_at/readv_at with several buffers: content and per-buffer lengths.
    async fn file_vectored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.bin");
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .open(&path)
            .await
            .unwrap();

        let parts = vec![b"abc".to_vec(), b"defgh".to_vec(), Vec::new(), pattern(7000, 5)];
        let total: usize = parts.iter().map(Vec::len).sum();
        let (res, back) = f.writev_at(parts.clone(), 10).await;
        assert_eq!(res.unwrap(), total);
        assert_eq!(back, parts, "writev_at hands the buffers back in order");

        let mut expect = vec![0u8; 10];
        for p in &parts {
            expect.extend_from_slice(p);
        }
        assert_eq!(std::fs::read(&path).unwrap(), expect);

        // Read it back into buffers of capacities 4, 6, 1 and 9000: the first
        // three fill up, the last gets the rest.
        let caps = [4usize, 6, 1, 9000];
        let bufs: Vec<Vec<u8>> = caps.iter().map(|&c| Vec::with_capacity(c)).collect();
        let (res, bufs) = f.readv_at(bufs, 10).await;
        assert_eq!(res.unwrap(), total);
        let lens: Vec<usize> = bufs.iter().map(Vec::len).collect();
        assert_eq!(lens, vec![4, 6, 1, total - 11]);
        assert_eq!(bufs.concat(), &expect[10..]);
        assert_eq!(bufs[0], b"abcd");
        assert_eq!(bufs[1], b"efgh".iter().chain(&parts[3][..2]).copied().collect::<Vec<u8>>());

        // Boxed slices, at an offset close to EOF: a short read that leaves
        // the last buffers untouched.
        let bufs: Vec<Box<[u8]>> = vec![vec![0xEE; 3].into(), vec![0xEE; 3].into()];
        let off = (expect.len() - 4) as u64;
        let (res, bufs) = f.readv_at(bufs, off).await;
        assert_eq!(res.unwrap(), 4);
        assert_eq!(&bufs[0][..], &expect[expect.len() - 4..expect.len() - 1]);
        assert_eq!(bufs[1][0], expect[expect.len() - 1]);
        assert_eq!(&bufs[1][1..], &[0xEE, 0xEE]);

        // Past EOF: nothing.
        let (res, bufs) = f
            .readv_at(vec![Vec::with_capacity(8), Vec::with_capacity(8)], 1 << 30)
            .await;
        assert_eq!(res.unwrap(), 0);
        assert!(bufs.iter().all(Vec::is_empty));

        // Static slices through writev_at.
        let (res, _) = f
            .writev_at(vec![&b"xy"[..], &b"z"[..]], 0)
            .await;
        assert_eq!(res.unwrap(), 3);
        let (res, buf) = f.read_at(Vec::with_capacity(4), 0).await;
        assert_eq!(res.unwrap(), 4);
        assert_eq!(buf, b"xyz\0");
        f.close().await.unwrap();
    }

    /// sync_all, sync_data, sync_range, File::metadata, fs::metadata.
    async fn file_sync_and_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.bin");
        let before = SystemTime::now() - Duration::from_secs(5);
        let f = File::create(&path).await.unwrap();
        assert_eq!(f.metadata().await.unwrap().len(), 0);
        assert!(f.metadata().await.unwrap().is_empty());

        let (res, _) = f.write_all_at(pattern(8192 + 17, 9), 0).await;
        res.unwrap();
        f.sync_range(0, 8192 + 17, libc::SYNC_FILE_RANGE_WRITE).await.unwrap();
        f.sync_range(
            0,
            0,
            libc::SYNC_FILE_RANGE_WAIT_BEFORE
                | libc::SYNC_FILE_RANGE_WRITE
                | libc::SYNC_FILE_RANGE_WAIT_AFTER,
        )
        .await
        .unwrap();
        f.sync_data().await.unwrap();
        f.sync_all().await.unwrap();

        let m = f.metadata().await.unwrap();
        assert_eq!(m.len(), 8192 + 17);
        assert!(m.is_file());
        assert!(!m.is_dir());
        assert!(!m.is_empty());
        let modified = m.modified();
        assert!(modified >= before, "mtime {modified:?} is before {before:?}");
        assert!(modified <= SystemTime::now() + Duration::from_secs(5));
        let std_m = std::fs::metadata(&path).unwrap();
        assert_eq!(modified, std_m.modified().unwrap(), "mtime matches std's");
        assert_eq!(m.ino(), std::os::unix::fs::MetadataExt::ino(&std_m));
        assert_eq!(m.mode(), std::os::unix::fs::MetadataExt::mode(&std_m));

        let pm = fs::metadata(&path).await.unwrap();
        assert_eq!(pm.len(), 8192 + 17);
        assert!(pm.is_file());
        assert_eq!(pm.ino(), m.ino());

        let dm = fs::metadata(dir.path()).await.unwrap();
        assert!(dm.is_dir());
        assert!(!dm.is_file());

        let missing = dir.path().join("nope");
        let e = fs::metadata(&missing).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);

        // sync on a read-only fd is fine too.
        let r = File::open(&path).await.unwrap();
        r.sync_all().await.unwrap();
        r.close().await.unwrap();
        f.close().await.unwrap();
    }

    /// append, truncate, create_new, missing paths, bad option sets, mode.
    async fn file_open_options() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o.txt");
        std_write(&path, b"12345");

        // append: writes go to the end whatever the offset.
        let f = OpenOptions::new().append(true).open(&path).await.unwrap();
        let (res, _) = f.write_at(&b"abc"[..], 0).await;
        assert_eq!(res.unwrap(), 3);
        let (res, _) = f.write_all_at(&b"de"[..], 1).await;
        res.unwrap();
        f.close().await.unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"12345abcde");

        // read+append on the same fd reads at offsets normally.
        let f = OpenOptions::new().read(true).append(true).open(&path).await.unwrap();
        let (res, buf) = f.read_at(Vec::with_capacity(3), 2).await;
        assert_eq!(res.unwrap(), 3);
        assert_eq!(buf, b"345");
        f.close().await.unwrap();

        // truncate
        let f = OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .await
            .unwrap();
        assert_eq!(f.metadata().await.unwrap().len(), 0);
        f.close().await.unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);

        // create_new on an existing file: AlreadyExists.
        let e = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");

        // create_new on a new path works, with the given mode.
        let newp = dir.path().join("new.txt");
        let f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&newp)
            .await
            .unwrap();
        let mode = f.metadata().await.unwrap().mode();
        assert_eq!(mode & 0o077, 0, "mode {mode:o} was asked as 0o600");
        assert_eq!(mode & 0o600, 0o600, "mode {mode:o} was asked as 0o600");
        f.close().await.unwrap();

        // Missing file: NotFound, and the message names the path.
        let missing: PathBuf = dir.path().join("does-not-exist.txt");
        let e = File::open(&missing).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains(&*missing.to_string_lossy()),
            "error message {msg:?} does not name {}",
            missing.display()
        );
        // Missing parent directory, with create: NotFound too.
        let e = File::create(dir.path().join("no-dir/x"))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");

        // Write to a read-only fd fails (EBADF).
        let r = File::open(&path).await.unwrap();
        let (res, _) = r.write_at(&b"x"[..], 0).await;
        assert_eq!(res.unwrap_err().raw_os_error(), Some(libc::EBADF));
        drop(r);

        // Neither read nor write: InvalidInput, before any syscall.
        let e = OpenOptions::new().open(&path).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        // A path with a NUL byte: InvalidInput.
        let e = File::open("bad\0path").await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    /// O_DIRECT with AlignedBuf(4096, 4096) blocks.
    async fn file_o_direct() {
        let mut tried = Vec::new();
        let candidates = [
            std::env::temp_dir(),
            PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
            PathBuf::from("/work"),
            PathBuf::from("/var/tmp"),
        ];
        for dir in candidates {
            if !dir.is_dir() {
                continue;
            }
            match direct_roundtrip_in(&dir).await {
                Ok(Some(())) => {
                    eprintln!("O_DIRECT works in {}", dir.display());
                    return;
                }
                Ok(None) => tried.push(dir.display().to_string()),
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                    tried.push(format!("{} ({e})", dir.display()))
                }
                Err(e) => panic!("O_DIRECT in {}: {e}", dir.display()),
            }
        }
        eprintln!("skipped: O_DIRECT unsupported on {}", tried.join(", "));
    }

    /// UDP: both directions, sender address, datagram boundaries.
    async fn udp_send_recv() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        assert_ne!(aa.port(), 0);
        assert_ne!(aa, ba);

        let (res, _) = a.send_to(&b"ping"[..], ba).await;
        assert_eq!(res.unwrap(), 4);
        let (res, buf) = b.recv_from(Vec::with_capacity(64)).await;
        let (n, from) = res.unwrap();
        assert_eq!((n, from), (4, aa));
        assert_eq!(buf, b"ping");

        let (res, _) = b.send_to(b"pong!".to_vec(), aa).await;
        assert_eq!(res.unwrap(), 5);
        let (res, buf) = a.recv_from(Vec::with_capacity(64)).await;
        assert_eq!(res.unwrap(), (5, ba));
        assert_eq!(buf, b"pong!");

        // Several datagrams of different sizes, sent back to back, keep
        // their boundaries and order (loopback does not reorder).
        let sizes = [1usize, 100, 0, 1472, 7, 9000];
        for (i, &len) in sizes.iter().enumerate() {
            let (res, _) = a.send_to(pattern(len, i as u64), ba).await;
            assert_eq!(res.unwrap(), len);
        }
        for (i, &len) in sizes.iter().enumerate() {
            let (res, buf) = b.recv_from(Vec::with_capacity(65536)).await;
            let (n, from) = res.unwrap();
            assert_eq!(from, aa);
            assert_eq!(n, len, "datagram {i}");
            assert_eq!(buf, pattern(len, i as u64), "datagram {i}");
        }

        // A datagram bigger than the buffer is truncated to it (and the rest
        // is discarded: the next receive gets the next datagram).
        let (res, _) = a.send_to(pattern(500, 1), ba).await;
        res.unwrap();
        let (res, _) = a.send_to(&b"next"[..], ba).await;
        res.unwrap();
        let (res, buf) = b.recv_from(Vec::with_capacity(10)).await;
        assert_eq!(res.unwrap().0, 10);
        assert_eq!(buf, pattern(500, 1)[..10]);
        let (res, buf) = b.recv_from(Vec::with_capacity(64)).await;
        assert_eq!(res.unwrap(), (4, aa));
        assert_eq!(buf, b"next");

        // A receive that waits: the datagram arrives from another task.
        let waiter = ringkit::spawn(async move {
            let (res, buf) = b.recv_from(Vec::with_capacity(64)).await;
            (res.unwrap(), buf)
        });
        ringkit::time::sleep(Duration::from_millis(20)).await;
        let (res, _) = a.send_to(&b"late"[..], ba).await;
        res.unwrap();
        let ((n, from), buf) = waiter.await.unwrap();
        assert_eq!((n, from), (4, aa));
        assert_eq!(buf, b"late");
    }

    /// UnixStream::pair: echo, then shutdown(Write) gives the peer EOF.
    async fn unix_pair_echo() {
        let (a, b) = UnixStream::pair().unwrap();
        let echo = ringkit::spawn(unix_echo_until_eof(b));
        let a = Rc::new(a);
        let msg = pattern(300_000, 3);
        // Write and read concurrently (two tasks on one stream): 300 KB is
        // more than the socket buffers hold.
        let writer = ringkit::spawn({
            let (a, msg) = (a.clone(), msg.clone());
            async move {
                a.write_all(msg).await.0.unwrap();
                // The peer reads EOF after what we wrote...
                a.shutdown(Shutdown::Write).await.unwrap();
            }
        });
        let got = unix_read_to_eof(&a).await;
        writer.await.unwrap();
        assert_eq!(got.len(), msg.len());
        assert!(got == msg, "echoed bytes differ");
        // ...so the echo task ended, having echoed everything.
        assert_eq!(echo.await.unwrap(), msg.len());
        // Writing after shutdown(Write) fails with EPIPE (no SIGPIPE).
        let (res, _) = a.write(&b"x"[..]).await;
        assert_eq!(res.unwrap_err().raw_os_error(), Some(libc::EPIPE));
    }

    /// UnixListener::bind + UnixStream::connect + accept + echo + EOF.
    async fn unix_listener_echo() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("echo.sock");
        let l = UnixListener::bind(&path).unwrap();
        assert!(UnixListener::bind(&path).is_err(), "binding an existing path fails");
        let server = ringkit::spawn(async move {
            let mut served = Vec::new();
            for _ in 0..2 {
                let s = l.accept().await.unwrap();
                served.push(unix_echo_until_eof(s).await);
            }
            served
        });
        for round in 0..2u64 {
            let c = UnixStream::connect(&path).await.unwrap();
            let msg = pattern(1000 + round as usize, round);
            c.write_all(msg.clone()).await.0.unwrap();
            assert_eq!(unix_read_exact(&c, msg.len()).await, msg);
            c.shutdown(Shutdown::Write).await.unwrap();
            // The server sees EOF, stops echoing and drops its end: EOF here.
            let (res, _) = c.read(Vec::with_capacity(16)).await;
            assert_eq!(res.unwrap(), 0, "EOF after the peer saw our shutdown");
        }
        assert_eq!(server.await.unwrap(), vec![1000, 1001]);

        let e = UnixStream::connect(dir.path().join("missing.sock"))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
    }

    /// Vec<u8>, Box<[u8]>, &'static [u8], &'static str, PooledBuf and
    /// AlignedBuf all work for writes and reads, on a stream and on a file.
    async fn owned_buffer_types() {
        let (a, b) = UnixStream::pair().unwrap();
        let pool = BufPool::new(256, 4);

        // Vec<u8>
        let (res, _) = a.write(b"vec".to_vec()).await;
        assert_eq!(res.unwrap(), 3);
        let (res, buf) = b.read(Vec::with_capacity(3)).await;
        assert_eq!(res.unwrap(), 3);
        assert_eq!(buf, b"vec");

        // Box<[u8]>: written whole, read up to its length.
        let boxed: Box<[u8]> = b"boxed!".to_vec().into_boxed_slice();
        let (res, _) = a.write_all(boxed).await;
        res.unwrap();
        let (res, buf) = b.read(vec![0u8; 6].into_boxed_slice()).await;
        assert_eq!(res.unwrap(), 6);
        assert_eq!(&buf[..], b"boxed!");

        // &'static [u8] and &'static str
        let (res, _) = a.write_all(&b"static"[..]).await;
        res.unwrap();
        let (res, _) = a.write_all("str").await;
        res.unwrap();
        assert_eq!(unix_read_exact(&b, 9).await, b"staticstr");

        // PooledBuf, both ways; buffers go back to the pool.
        let mut p = pool.get();
        p.extend_from_slice(b"pooled");
        let (res, p) = a.write_all(p).await;
        res.unwrap();
        drop(p);
        assert_eq!(pool.idle(), 1);
        let (res, p) = b.read(pool.get()).await;
        assert_eq!(res.unwrap(), 6);
        assert_eq!(&p[..], b"pooled");
        assert_eq!(p.capacity(), 256);
        drop(p);
        assert_eq!(pool.idle(), 1, "the same buffer was reused and returned");

        // AlignedBuf
        let mut al = AlignedBuf::new(4096, 4096);
        al.as_mut_slice().copy_from_slice(&pattern(4096, 11));
        let (res, _) = a.write_all(al).await;
        res.unwrap();
        let mut got = Vec::new();
        while got.len() < 4096 {
            let (res, al) = b.read(AlignedBuf::new(4096, 4096)).await;
            let n = res.unwrap();
            assert!(n > 0);
            assert_eq!(al.as_slice().len(), n, "set_init records the length");
            got.extend_from_slice(al.as_slice());
        }
        assert_eq!(got, pattern(4096, 11));

        // The same types on a file.
        let dir = tempfile::tempdir().unwrap();
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .open(dir.path().join("bufs.bin"))
            .await
            .unwrap();
        let (res, _) = f.write_at(b"vec".to_vec(), 0).await;
        assert_eq!(res.unwrap(), 3);
        let (res, _) = f.write_at(b"box".to_vec().into_boxed_slice(), 3).await;
        assert_eq!(res.unwrap(), 3);
        let (res, _) = f.write_at(&b"sta"[..], 6).await;
        assert_eq!(res.unwrap(), 3);
        let mut p = pool.get();
        p.extend_from_slice(b"poo");
        let (res, _) = f.write_at(p, 9).await;
        assert_eq!(res.unwrap(), 3);
        let mut al = AlignedBuf::new(4096, 4096);
        al.set_len(3);
        al.as_mut_slice().copy_from_slice(b"ali");
        let (res, _) = f.write_at(al, 12).await;
        assert_eq!(res.unwrap(), 3);

        let (res, v) = f.read_at(Vec::with_capacity(15), 0).await;
        assert_eq!(res.unwrap(), 15);
        assert_eq!(v, b"vecboxstapooali");
        let (res, bx) = f.read_at(vec![0u8; 3].into_boxed_slice(), 3).await;
        assert_eq!(res.unwrap(), 3);
        assert_eq!(&bx[..], b"box");
        let (res, p) = f.read_at(pool.get(), 9).await;
        assert_eq!(res.unwrap(), 6);
        assert_eq!(&p[..], b"pooali");
        let (res, al) = f.read_at(AlignedBuf::new(4096, 4096), 0).await;
        assert_eq!(res.unwrap(), 15);
        assert_eq!(al.as_slice(), b"vecboxstapooali");
        f.close().await.unwrap();
    }
}

// ---------------------------------------------------------------------------
// Regressions: library bugs these tests found (fixed in 07777e5).

/// Like `test_all!`'s runner, for tests whose two backends differ.
fn run_on<F: std::future::Future<Output = ()>>(backend: Backend, fut: F) {
    let rt = match Builder::new().backend(backend).ignore_env().build() {
        Ok(rt) => rt,
        Err(e) if backend == Backend::Uring => {
            eprintln!("skipped: io_uring unavailable here: {e}");
            return;
        }
        Err(e) => panic!("cannot build a {backend} runtime: {e}"),
    };
    assert_eq!(rt.backend_report().chosen, backend);
    rt.block_on(fut);
}

ringkit::test_all! {
    /// Metadata::modified for a pre-1970 mtime (negative `stx_mtime.tv_sec`).
    async fn metadata_mtime_before_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.bin");
        let f = std::fs::File::create(&path).unwrap();
        let t = SystemTime::UNIX_EPOCH - Duration::from_millis(1500);
        f.set_modified(t).unwrap();
        drop(f);
        let want = std::fs::metadata(&path).unwrap().modified().unwrap();
        assert_eq!(want, t, "the filesystem keeps pre-1970 times");
        let m = fs::metadata(&path).await.unwrap();
        assert_eq!(m.modified(), t);
        let f = File::open(&path).await.unwrap();
        assert_eq!(f.metadata().await.unwrap().modified(), t);
    }
}

/// Dropping a socket closes it at once, as on std and on the epoll backend:
/// its port can be bound again right away.
async fn drop_then_rebind() {
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = a.local_addr().unwrap();
    drop(a);
    let b = UdpSocket::bind(addr).expect("rebinding the UDP port of a dropped socket");
    assert_eq!(b.local_addr().unwrap(), addr);

    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    let l = TcpListener::bind(addr).expect("rebinding the TCP port of a dropped listener");
    assert_eq!(l.local_addr().unwrap(), addr);
}

mod drop_then_rebind {
    use super::*;

    #[test]
    fn epoll() {
        run_on(Backend::Epoll, drop_then_rebind());
    }

    #[test]
    fn uring() {
        run_on(Backend::Uring, drop_then_rebind());
    }
}

/// connect() to a Unix listener whose backlog is full must not report
/// success on a socket that is not connected (io_uring gives EAGAIN).
async fn unix_connect_full_backlog() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("full.sock");
    let l = UnixListener::bind(&path).unwrap();
    let addr = socket2::SockAddr::unix(&path).unwrap();
    let mut fillers = Vec::new();
    loop {
        let s = socket2::Socket::new(
            socket2::Domain::UNIX,
            socket2::Type::STREAM.nonblocking(),
            None,
        )
        .unwrap();
        match s.connect(&addr) {
            Ok(()) => fillers.push(s),
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => break,
            Err(e) => panic!("filler connect {}: {e}", fillers.len()),
        }
        assert!(fillers.len() < 5000, "the backlog never filled");
    }
    let res = ringkit::time::timeout(Duration::from_millis(500), UnixStream::connect(&path)).await;
    match res {
        Err(_) => eprintln!("connect to a full backlog waited (timed out)"),
        Ok(Err(e)) => eprintln!("connect to a full backlog failed: {e}"),
        Ok(Ok(c)) => {
            // SAFETY: sockaddr_storage is plain data; all-zero is valid.
            let mut st: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
            // SAFETY: a valid fd and writable address storage of `len` bytes.
            let rc = unsafe {
                libc::getpeername(
                    c.as_raw_fd(),
                    (&mut st as *mut libc::sockaddr_storage).cast(),
                    &mut len,
                )
            };
            let err = io::Error::last_os_error();
            let (wres, _) = c.write(&b"x"[..]).await;
            assert!(
                rc == 0,
                "connect returned Ok on an unconnected socket: \
                 getpeername: {err}, write: {wres:?}"
            );
        }
    }
    drop((l, fillers));
}

mod unix_connect_full_backlog {
    use super::*;

    #[test]
    fn epoll() {
        run_on(Backend::Epoll, unix_connect_full_backlog());
    }

    #[test]
    fn uring() {
        run_on(Backend::Uring, unix_connect_full_backlog());
    }
}
