//! Files (`ringkit::fs`), each test run once per backend
//! (`ringkit::test_all!`: `<name>::uring` and `<name>::epoll`).

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use ringkit::buf::AlignedBuf;
use ringkit::fs::{self, File, OpenOptions};

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

    /// `O_DIRECT`'s alignment, as the kernel tells it: powers of two, and
    /// a direct write that keeps to them goes through.
    async fn dio_alignment_is_what_direct_writes_need() {
        // The build directory is on a disk (the temp dir may be tmpfs).
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let path = dir.path().join("dio");
        let f = OpenOptions::new().read(true).write(true).create(true).open(&path).await.unwrap();
        let Some(a) = f.dio_alignment().await.unwrap() else {
            println!("skipped: the kernel tells no O_DIRECT alignment for {}", path.display());
            return;
        };
        assert!(a.memory.is_power_of_two() && a.offset.is_power_of_two(), "{a:?}");
        assert!(a.offset <= 64 << 10, "{a:?}");
        let d = OpenOptions::new().write(true).direct(true).open(&path).await.unwrap();
        let n = a.offset as usize;
        let mut buf = AlignedBuf::new(n, (a.memory as usize).max(n));
        buf.as_mut_slice().fill(7);
        let (res, _) = d.write_at(buf, u64::from(a.offset)).await;
        assert_eq!(res.unwrap(), n);
        assert_eq!(std::fs::read(&path).unwrap()[n..], vec![7u8; n][..]);
        // A directory takes no direct I/O: nothing to tell.
        let d = File::open(dir.path()).await.unwrap();
        assert_eq!(d.dio_alignment().await.unwrap(), None);
    }
}

// ---------------------------------------------------------------------------
// Regressions: library bugs these tests found (fixed in 07777e5).

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
