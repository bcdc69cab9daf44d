//! Storage-engine file I/O, on both backends: registered buffers
//! (`FixedBufPool`, `O_DIRECT`), a write made durable in one submission
//! (`write_at_sync`, a short write never acknowledged; `write_at_dsync`,
//! a short write durable as far as it went), `fallocate`, and many reads
//! in one submission (each seen by a `fs::hook`).

use std::os::fd::RawFd;
use std::os::unix::fs::FileExt;
use std::process::Command;
use std::rc::Rc;
use std::time::Duration;

use ringkit::buf::IoBuf;
use ringkit::fs::hook::{Fault, FsHook, FsOp};
use ringkit::fs::{FixedBufPool, OpenOptions};
use ringkit::{Backend, Builder};

/// Deterministic bytes, different per `seed`.
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

fn on_uring() -> bool {
    ringkit::backend_report().expect("inside a runtime").chosen == Backend::Uring
}

ringkit::test_all! {
    async fn write_replace_makes_then_replaces_and_leaves_no_temporary() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("STATE");
        ringkit::fs::write_replace(&path, b"one".to_vec()).await.unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"one");
        ringkit::fs::write_replace(&path, b"two, longer".to_vec()).await.unwrap();
        ringkit::fs::write_replace(&path, b"3".to_vec()).await.unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"3");
        assert!(!t.path().join("STATE.tmp").exists());
        // A directory that is not there: an error naming the file.
        let e = ringkit::fs::write_replace(t.path().join("no/such"), vec![1])
            .await
            .unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
    }

    async fn fixed_buffers_read_and_write_o_direct() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("direct");
        let f = match OpenOptions::new().read(true).write(true).create(true).direct(true)
            .open(&path).await
        {
            Ok(f) => f,
            Err(e) => {
                eprintln!("skipped: O_DIRECT not supported under {}: {e}", t.path().display());
                return;
            }
        };
        let pool = FixedBufPool::new(4, 8192).unwrap();
        assert_eq!(pool.is_registered(), on_uring());
        let data = pattern(3 * 8192, 1);
        // Three aligned writes from registered buffers, in flight together.
        let mut writes = Vec::new();
        for (i, chunk) in data.chunks(8192).enumerate() {
            let mut b = pool.try_get().expect("a free buffer");
            assert_eq!(b.stable_ptr() as usize % 4096, 0);
            b.as_mut_capacity().copy_from_slice(chunk);
            b.set_len(8192);
            let f = &f;
            writes.push(async move { f.write_at(b, (i * 8192) as u64).await.0 });
        }
        for w in writes {
            assert_eq!(w.await.unwrap(), 8192);
        }
        f.sync_data().await.unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), data);
        // Read back into registered buffers, at an aligned offset.
        let (n, b) = f.read_at(pool.get().await, 8192).await;
        assert_eq!(n.unwrap(), 8192);
        assert_eq!(b.as_slice(), &data[8192..16384]);
        // Unaligned O_DIRECT is the kernel's EINVAL, clearly, not a hang.
        let mut b = b;
        b.set_len(100);
        let e = f.write_at(b, 1).await.0.unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
    }

    async fn one_fixed_pool_per_runtime_and_get_waits() {
        let pool = FixedBufPool::new(1, 4096).unwrap();
        if on_uring() {
            let e = FixedBufPool::new(1, 4096).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists, "{e}");
        }
        let e = FixedBufPool::new(1, 1000).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
        // The only buffer is out: `get` waits until it comes back.
        let held = pool.try_get().unwrap();
        assert!(pool.try_get().is_none());
        let p2 = pool.clone();
        let waiter = ringkit::spawn(async move { p2.get().await.capacity() });
        ringkit::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        // A waiter that gives up must not take the next one's wake.
        let p3 = pool.clone();
        let quitter = ringkit::spawn(async move {
            ringkit::time::timeout(Duration::from_millis(5), p3.get()).await.is_ok()
        });
        assert!(!quitter.await.unwrap());
        drop(held);
        assert_eq!(waiter.await.unwrap(), 4096);
        // The pool and its buffers gone, the ring's table is free again.
        drop(pool);
        let again = FixedBufPool::new(2, 4096).unwrap();
        assert_eq!(again.is_registered(), on_uring());
    }

    async fn write_at_sync_writes_and_syncs() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("log");
        let f = OpenOptions::new().read(true).write(true).create(true).open(&path).await.unwrap();
        let a = pattern(10_000, 2);
        let (n, _) = f.write_at_sync(a.clone(), 0).await;
        assert_eq!(n.unwrap(), a.len());
        // From a registered buffer: WRITE_FIXED linked to the sync.
        let pool = FixedBufPool::new(1, 4096).unwrap();
        let mut b = pool.get().await;
        b.as_mut_capacity()[..5].copy_from_slice(b"fixed");
        b.set_len(5);
        let (n, _) = f.write_at_sync(b, 10_000).await;
        assert_eq!(n.unwrap(), 5);
        let (r, _) = f.write_all_at_sync(&b"tail"[..], 10_005).await;
        r.unwrap();
        let got = std::fs::read(&path).unwrap();
        assert_eq!(&got[..10_000], &a[..]);
        assert_eq!(&got[10_000..], b"fixedtail");
        // A bad fd fails the write; the error is the write's.
        let (e, _) = ringkit::fs::File::from(std::os::fd::OwnedFd::from(
            std::fs::File::open(&path).unwrap(),
        ))
        .write_at_sync(vec![1u8; 10], 0)
        .await;
        assert_eq!(e.unwrap_err().raw_os_error(), Some(libc::EBADF));
    }

    async fn write_at_dsync_writes_from_any_buffer() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("log");
        let f = OpenOptions::new().read(true).write(true).create(true).open(&path).await.unwrap();
        let a = pattern(10_000, 6);
        let (n, _) = f.write_at_dsync(a.clone(), 0).await;
        assert_eq!(n.unwrap(), a.len());
        // From a registered buffer: WRITE_FIXED with RWF_DSYNC.
        let pool = FixedBufPool::new(1, 4096).unwrap();
        let mut b = pool.get().await;
        b.as_mut_capacity()[..5].copy_from_slice(b"fixed");
        b.set_len(5);
        assert_eq!(f.write_at_dsync(b, 10_000).await.0.unwrap(), 5);
        f.write_all_at_dsync(&b"tail"[..], 10_005).await.0.unwrap();
        let got = std::fs::read(&path).unwrap();
        assert_eq!(&got[..10_000], &a[..]);
        assert_eq!(&got[10_000..], b"fixedtail");
        // A descriptor open for reading only: the write's error.
        let ro = ringkit::fs::File::open(&path).await.unwrap();
        let (e, _) = ro.write_at_dsync(vec![1u8; 10], 0).await;
        assert_eq!(e.unwrap_err().raw_os_error(), Some(libc::EBADF));
    }

    async fn write_at_sync_reports_a_failed_sync_after_a_whole_write() {
        // The link's second half failing: `fdatasync` of /dev/null is
        // EINVAL, after a write that took every byte. Never `Ok`.
        let f = OpenOptions::new().write(true).open("/dev/null").await.unwrap();
        let (r, _) = f.write_at_sync(vec![1u8; 100], 0).await;
        let e = r.expect_err("the sync failed: the write must not be acknowledged");
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
        let (r, _) = f.write_all_at_sync(vec![1u8; 100], 0).await;
        assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::EINVAL));
    }

    async fn a_read_into_a_4_gib_buffer_is_not_an_end_of_file() {
        // An SQE's length is 32 bits: a capacity of exactly 4 GiB used to
        // wrap to a zero-length read, `Ok(0)`, which reads as EOF. (The
        // capacity is reserved, never touched.)
        let t = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(t.path(), b"hello").unwrap();
        let f = ringkit::fs::File::open(t.path()).await.unwrap();
        let (n, buf) = f.read_at(Vec::with_capacity(1usize << 32), 0).await;
        assert_eq!(n.unwrap(), 5);
        assert_eq!(&buf[..], b"hello");
    }

    async fn set_len_shrinks_extends_and_is_seen_by_the_hook() {
        // One `IORING_OP_FTRUNCATE` on io_uring (in place where the kernel
        // lacks it), the syscall on epoll: the same sizes and bytes either
        // way, errors as `ftruncate(2)` gives them, and a hook that sees
        // each call and can fail it.
        struct Seen(std::cell::RefCell<Vec<u64>>);
        impl FsHook for Seen {
            fn before(&self, op: &FsOp<'_>) -> Option<Fault> {
                match op {
                    FsOp::SetLen { len: 7, .. } => Some(Fault::Fail(
                        std::io::Error::from_raw_os_error(libc::EIO),
                    )),
                    _ => None,
                }
            }
            fn after(&self, op: &FsOp<'_>, res: &std::io::Result<u64>) {
                if let (FsOp::SetLen { len, .. }, Ok(_)) = (op, res) {
                    self.0.borrow_mut().push(*len);
                }
            }
        }
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("sized");
        std::fs::write(&path, pattern(10_000, 3)).unwrap();
        let f = OpenOptions::new().read(true).write(true).open(&path).await.unwrap();
        let seen = Rc::new(Seen(Default::default()));
        let prev = ringkit::fs::hook::set_hook(Some(seen.clone()));
        let before = ringkit::metrics();
        f.set_len(4096).await.unwrap();
        let spent = ringkit::metrics().since(&before);
        if on_uring() {
            // One SQE (and one syscall in place on a kernel before 6.9).
            assert_eq!(spent.sqes_submitted, 1, "{spent}");
            assert!(spent.other_syscalls <= 1, "{spent}");
        } else {
            assert_eq!(spent.other_syscalls, 1, "{spent}");
        }
        assert_eq!(std::fs::read(&path).unwrap(), pattern(10_000, 3)[..4096]);
        f.set_len(8192).await.unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 8192);
        assert!(bytes[4096..].iter().all(|&b| b == 0), "an extension reads as zeros");
        let planted = f.set_len(7).await.unwrap_err();
        assert_eq!(planted.raw_os_error(), Some(libc::EIO));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 8192, "a failed call changed nothing");
        ringkit::fs::hook::set_hook(prev);
        assert_eq!(*seen.0.borrow(), [4096, 8192]);
        // Past what an off_t holds: refused, by the ring or in place.
        let e = f.set_len(u64::MAX).await.unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
        // A file open for reading only.
        let ro = OpenOptions::new().read(true).open(&path).await.unwrap();
        let e = ro.set_len(0).await.unwrap_err();
        assert!(matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EBADF)), "{e}");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 8192);
    }

    async fn write_at_dsync_faults_are_made_as_the_kernel_makes_them() {
        // A short write writes (and syncs) its first bytes; a failed sync
        // leaves the write in the file and reports the error; a failed
        // write issues nothing. Each is seen by the hook after.
        struct Plant(std::cell::RefCell<Vec<String>>);
        impl FsHook for Plant {
            fn before(&self, op: &FsOp<'_>) -> Option<Fault> {
                match op {
                    FsOp::WriteDsync { offset: 0, .. } => Some(Fault::Short(4096)),
                    FsOp::WriteDsync { offset: 8192, .. } => Some(Fault::FailSync(
                        std::io::Error::from_raw_os_error(libc::EIO),
                    )),
                    FsOp::WriteDsync { offset: 16384, .. } => Some(Fault::Fail(
                        std::io::Error::from_raw_os_error(libc::ENOSPC),
                    )),
                    _ => None,
                }
            }
            fn after(&self, op: &FsOp<'_>, res: &std::io::Result<u64>) {
                if let FsOp::WriteDsync { offset, data, .. } = op {
                    let n = res.as_ref().ok();
                    self.0.borrow_mut().push(format!("{offset} {} {n:?}", data.len()));
                }
            }
        }
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("hooked");
        let f = OpenOptions::new().read(true).write(true).create(true).open(&path).await.unwrap();
        let plant = Rc::new(Plant(Default::default()));
        let prev = ringkit::fs::hook::set_hook(Some(plant.clone()));
        let data = pattern(8192, 7);
        let short = f.write_at_dsync(data.clone(), 0).await.0;
        let failed_sync = f.write_at_dsync(data.clone(), 8192).await.0;
        let failed = f.write_at_dsync(data.clone(), 16384).await.0;
        ringkit::fs::hook::set_hook(prev);
        assert_eq!(short.unwrap(), 4096);
        assert_eq!(failed_sync.unwrap_err().raw_os_error(), Some(libc::EIO));
        assert_eq!(failed.unwrap_err().raw_os_error(), Some(libc::ENOSPC));
        let got = std::fs::read(&path).unwrap();
        assert_eq!(got.len(), 16384, "the failed write issued nothing");
        assert_eq!(&got[..4096], &data[..4096]);
        assert!(got[4096..8192].iter().all(|&b| b == 0));
        assert_eq!(&got[8192..], &data[..], "the write under the failed sync");
        assert_eq!(
            *plant.0.borrow(),
            ["0 4096 Some(4096)", "8192 8192 None"],
            "a failed write is not seen after"
        );
    }

    async fn a_failed_dsync_sync_leaves_a_direct_write_in_the_file() {
        // As the kernel does: the write reaches the file, its sync fails.
        // The crash-state explorer's process kills take the write as done;
        // an `O_DIRECT` file must hold it too (a copy into an unaligned
        // buffer was refused with `EINVAL`, unseen).
        let eio = || Fault::FailSync(std::io::Error::from_raw_os_error(libc::EIO));
        let Some((res, got, data)) = planted_direct_dsync_write(eio).await else {
            return;
        };
        assert_eq!(res.unwrap_err().raw_os_error(), Some(libc::EIO));
        assert_eq!(got.len(), 4096 + 8192, "the write under the failed sync is in the file");
        assert_eq!(&got[4096..], &data[..]);
    }

    async fn a_planted_short_dsync_write_on_a_direct_file_is_short() {
        // The explorer's `Fault::Short(n)` under an RWF_DSYNC write: the
        // kernel writes the first n bytes. Copied into a `Vec`, an
        // `O_DIRECT` file refused them (EINVAL) and nothing was written.
        let Some((res, got, data)) = planted_direct_dsync_write(|| Fault::Short(4096)).await else {
            return;
        };
        assert_eq!(res.as_ref().ok(), Some(&4096), "{res:?}; file {} bytes", got.len());
        assert_eq!(&got[4096..], &data[..4096]);
    }

    async fn a_short_write_on_a_direct_file_is_finished() {
        // A write that comes back short (a full disk, a signal) is
        // continued from where it stopped, however often. The rest went
        // from a `Vec`, which an `O_DIRECT` file refuses (EINVAL): the log
        // then failed instead of finishing its batch.
        let faults: [fn() -> Fault; 2] = [|| Fault::Short(4096), || Fault::Short(2048)];
        let plain = planted_direct(&faults, |f, buf| async move {
            f.write_all_at(buf, 4096).await.0
        });
        let Some((res, got, data)) = plain.await else { return };
        assert!(res.is_ok(), "write_all_at: {res:?}");
        assert_eq!(&got[4096..], &data[..], "write_all_at");
        let dsync = planted_direct(&faults, |f, buf| async move {
            f.write_all_at_dsync(buf, 4096).await.0
        });
        let Some((res, got, data)) = dsync.await else { return };
        assert!(res.is_ok(), "write_all_at_dsync: {res:?}");
        assert_eq!(&got[4096..], &data[..], "write_all_at_dsync");
        let linked = planted_direct(&faults, |f, buf| async move {
            f.write_all_at_sync(buf, 4096).await.0
        });
        let Some((res, got, data)) = linked.await else { return };
        assert!(res.is_ok(), "write_all_at_sync: {res:?}");
        assert_eq!(&got[4096..], &data[..], "write_all_at_sync");
    }

    async fn a_planted_short_linked_write_as_long_as_the_write_is_synced_on_a_direct_file() {
        // `Short(n)` with n at least the write's length cuts nothing: the
        // write and its linked sync run as without the fault (on a direct
        // file the first n bytes went alone, reported durable unsynced).
        let fault: [fn() -> Fault; 1] = [|| Fault::Short(8192)];
        let whole = planted_direct(&fault, |f, buf| async move {
            let before = ringkit::metrics();
            let res = f.write_at_sync(buf, 4096).await.0;
            Ok((res?, ringkit::metrics().since(&before)))
        });
        let Some((res, got, data)) = whole.await else { return };
        let (n, m) = res.unwrap();
        assert_eq!(n, 8192);
        assert_eq!(&got[4096..], &data[..]);
        if on_uring() {
            assert_eq!(m.sqes_submitted, 2, "the write and its linked sync: {m:?}");
        }
    }

    async fn allocate_reserves_zeroed_space() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("seg");
        let f = OpenOptions::new().read(true).write(true).create(true).open(&path).await.unwrap();
        f.allocate(0, 1 << 20).await.unwrap();
        assert_eq!(f.metadata().await.unwrap().len(), 1 << 20);
        let (n, buf) = f.read_at(Vec::with_capacity(4096), 500_000).await;
        assert_eq!(n.unwrap(), 4096);
        assert!(buf.iter().all(|&b| b == 0));
        // Keep size: blocks past the end, the size unchanged.
        f.fallocate(libc::FALLOC_FL_KEEP_SIZE, 1 << 20, 1 << 20).await.unwrap();
        assert_eq!(f.metadata().await.unwrap().len(), 1 << 20);
        let e = f.fallocate(0x4000_0000, 0, 4096).await.unwrap_err();
        assert!(e.raw_os_error().is_some(), "{e}");
    }

    async fn read_many_at_returns_each_range_in_order() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("ranges");
        let data = pattern(1 << 20, 3);
        std::fs::write(&path, &data).unwrap();
        let f = ringkit::fs::File::open(&path).await.unwrap();
        let ranges: Vec<(u64, usize)> =
            (0..64u64).map(|i| ((i * 7919 * 13) % (1 << 20), 100 + (i as usize * 37) % 3000)).collect();
        let mut reads: Vec<(u64, Vec<u8>)> =
            ranges.iter().map(|&(o, l)| (o, Vec::with_capacity(l))).collect();
        // One past the end: Ok(0), and it does not disturb the others.
        reads.push((2 << 20, Vec::with_capacity(10)));
        let before = ringkit::metrics();
        let got = f.read_many_at(reads).await;
        if on_uring() {
            // One submission: the 65 SQEs went to the kernel in one enter
            // (a second may reap what the first did not wait for).
            let m = ringkit::metrics().since(&before);
            assert_eq!(m.sqes_submitted, 65, "{m:?}");
            assert!(m.uring_enters <= 3, "{m:?}");
        }
        assert_eq!(got.len(), 65);
        for (&(o, l), (n, buf)) in ranges.iter().zip(&got) {
            let n = *n.as_ref().unwrap();
            let want = &data[o as usize..(o as usize + l).min(data.len())];
            assert_eq!(n, want.len());
            assert_eq!(&buf[..], want, "range at {o}");
        }
        assert_eq!(*got[64].0.as_ref().unwrap(), 0);
    }

    async fn read_many_at_shows_each_read_to_the_hook() {
        // A disk that fails one range and holds other bytes than the page
        // cache under another (a test's stand-in): every read of
        // `read_many_at` goes through the hook as `read_at`'s does.
        struct Disk;
        impl FsHook for Disk {
            fn before(&self, op: &FsOp<'_>) -> Option<Fault> {
                match op {
                    FsOp::Read { offset: 8192, .. } => {
                        Some(Fault::Fail(std::io::Error::from_raw_os_error(libc::EIO)))
                    }
                    _ => None,
                }
            }
            fn read_done(&self, _fd: RawFd, offset: u64, data: &mut [u8]) {
                if offset == 4096 {
                    data.fill(0xAA);
                }
            }
        }
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("hooked");
        std::fs::write(&path, pattern(16384, 5)).unwrap();
        let f = ringkit::fs::File::open(&path).await.unwrap();
        let prev = ringkit::fs::hook::set_hook(Some(Rc::new(Disk)));
        let got = f
            .read_many_at((0..4u64).map(|i| (i * 4096, Vec::with_capacity(4096))).collect())
            .await;
        let (one, _) = f.read_at(Vec::with_capacity(4096), 8192).await;
        ringkit::fs::hook::set_hook(prev);
        let data = pattern(16384, 5);
        assert_eq!(got[0].1, data[..4096]);
        assert!(got[1].1.iter().all(|&b| b == 0xAA), "read_done saw the second range");
        assert_eq!(got[2].0.as_ref().unwrap_err().raw_os_error(), Some(libc::EIO));
        assert_eq!(one.unwrap_err().raw_os_error(), Some(libc::EIO), "as read_at's");
        assert_eq!(got[3].1, data[12288..]);
    }
}

// A write cut short by RLIMIT_FSIZE (in a child process: the limit is the
// process's) is reported short by `write_at_sync`, never as written and
// synced; `write_all_at_sync` then fails with the limit's error.

const CHILD_ENV: &str = "RINGKIT_FS_DURABLE_CHILD";

#[test]
fn short_write_is_never_acknowledged() {
    for backend in ["uring", "epoll"] {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "child_short_write",
                "--exact",
                "--include-ignored",
                "--nocapture",
            ])
            .env(CHILD_ENV, backend)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && text.contains("1 passed"),
            "{backend}:\n{text}"
        );
        assert!(
            text.contains("short write: 6000 of 8192") || text.contains("skipped"),
            "{text}"
        );
    }
}

#[test]
#[ignore = "run by short_write_is_never_acknowledged in a child process"]
fn child_short_write() {
    let Ok(backend) = std::env::var(CHILD_ENV) else {
        return;
    };
    let backend = if backend == "uring" {
        Backend::Uring
    } else {
        Backend::Epoll
    };
    // SAFETY: plain syscalls in this child process.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let lim = libc::rlimit {
            rlim_cur: 6000,
            rlim_max: libc::RLIM_INFINITY,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &lim), 0);
    }
    let rt = match Builder::new().backend(backend).build() {
        Ok(rt) => rt,
        Err(e) => {
            println!("skipped: {backend:?} unavailable: {e}");
            return;
        }
    };
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("capped");
    rt.block_on(async {
        let f = OpenOptions::new()
            .write(true)
            .create(true)
            .open(&path)
            .await
            .unwrap();
        let data = pattern(8192, 4);
        let (n, buf) = f.write_at_sync(data, 0).await;
        let n = n.unwrap();
        assert_eq!(n, 6000, "a short write must be reported short");
        println!("short write: {n} of {}", buf.bytes_init());
        let (r, buf) = f.write_all_at_sync(buf, 0).await;
        assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::EFBIG));
        // RWF_DSYNC: the short write is reported short (and what it wrote
        // is durable); the rest fails with the limit's error.
        assert_eq!(f.write_at_dsync(buf.clone(), 0).await.0.unwrap(), 6000);
        let (r, _) = f.write_all_at_dsync(buf, 0).await;
        assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::EFBIG));
    });
    let f = std::fs::File::open(&path).unwrap();
    let mut head = vec![0u8; 6000];
    f.read_exact_at(&mut head, 0).unwrap();
    assert_eq!(head, pattern(8192, 4)[..6000]);
}

/// A registered buffer that outlives its runtime: dropping it later, with
/// no runtime or another one on the thread, frees it without a panic, and
/// the next runtime registers a pool of its own.
#[test]
fn a_fixed_buffer_outliving_its_runtime() {
    for backend in [Backend::Uring, Backend::Epoll] {
        let Ok(rt) = Builder::new().backend(backend).build() else {
            eprintln!("skipped {backend:?}: unavailable");
            continue;
        };
        let buf = rt.block_on(async {
            let pool = FixedBufPool::new(2, 4096).unwrap();
            pool.get().await
        });
        drop(rt);
        let rt2 = Builder::new().backend(backend).build().unwrap();
        drop(buf);
        rt2.block_on(async {
            let pool = FixedBufPool::new(2, 4096).unwrap();
            assert_eq!(pool.is_registered(), backend == Backend::Uring);
        });
    }
}

/// An `RWF_DSYNC` write of 8192 pattern bytes at offset 4096 of an
/// `O_DIRECT` file, with `fault` planted on it: what it returned, the
/// file's bytes after, and the data. `None` (printed) where the file
/// system refuses `O_DIRECT`. In the build directory: the temp dir may be
/// tmpfs, which takes unaligned direct writes and would hide the bug.
async fn planted_direct_dsync_write(
    fault: fn() -> Fault,
) -> Option<(std::io::Result<usize>, Vec<u8>, Vec<u8>)> {
    let faults = [fault];
    planted_direct(&faults, |f, buf| async move {
        f.write_at_dsync(buf, 4096).await.0
    })
    .await
}

/// The 8192 bytes of [`planted_direct_dsync_write`] written by `write`,
/// `faults` planted on the first writes (`Write`, `WriteDsync`,
/// `WriteSync`), one each, in order, and nothing after them.
async fn planted_direct<R, F>(
    faults: &[fn() -> Fault],
    write: impl FnOnce(Rc<ringkit::fs::File>, ringkit::buf::AlignedBuf) -> F,
) -> Option<(std::io::Result<R>, Vec<u8>, Vec<u8>)>
where
    F: std::future::Future<Output = std::io::Result<R>>,
{
    struct Plant(std::cell::RefCell<std::collections::VecDeque<fn() -> Fault>>);
    impl FsHook for Plant {
        fn before(&self, op: &FsOp<'_>) -> Option<Fault> {
            if matches!(
                op,
                FsOp::Write { .. } | FsOp::WriteDsync { .. } | FsOp::WriteSync { .. }
            ) {
                return self.0.borrow_mut().pop_front().map(|f| f());
            }
            None
        }
    }
    let t = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = t.path().join("direct");
    let open = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .direct(true)
        .open(&path)
        .await;
    let f = match open {
        Ok(f) => Rc::new(f),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            println!("skipped: O_DIRECT refused in {}: {e}", t.path().display());
            return None;
        }
        Err(e) => panic!("{e}"),
    };
    let data = pattern(8192, 9);
    let mut buf = ringkit::buf::AlignedBuf::new(8192, 4096);
    buf.as_mut_slice().copy_from_slice(&data);
    let plant = Plant(std::cell::RefCell::new(faults.iter().copied().collect()));
    let prev = ringkit::fs::hook::set_hook(Some(Rc::new(plant)));
    let res = write(f, buf).await;
    ringkit::fs::hook::set_hook(prev);
    Some((res, std::fs::read(&path).unwrap(), data))
}
