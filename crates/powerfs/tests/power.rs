//! Power loss through the real kernel: a mount per test, used with plain
//! `std::fs` and libc calls, the power cut with `PowerFs::power_loss`.

mod common;

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use common::{sync_dir, Mounted};

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

/// A file at `path` with `bytes`, synced, its directory synced.
fn durable_file(path: &Path, bytes: &[u8]) {
    let mut f = File::create(path).unwrap();
    f.write_all(bytes).unwrap();
    f.sync_data().unwrap();
    sync_dir(path.parent().unwrap());
}

#[test]
fn writes_without_fsync_are_gone_after_a_power_loss() {
    let Some(m) = Mounted::new() else { return };
    let p = m.path();
    // Durable, then overwritten and extended without a sync.
    durable_file(&p.join("old"), b"durable");
    // Never synced, nor its directory: the file is gone.
    fs::write(p.join("new"), b"never synced").unwrap();
    let f = OpenOptions::new().write(true).open(p.join("old")).unwrap();
    f.write_all_at(b"D", 0).unwrap();
    f.write_all_at(b" and more", 7).unwrap();
    drop(f);
    assert_eq!(fs::read(p.join("old")).unwrap(), b"Durable and more");
    assert_eq!(m.fs.used(), 12 + 16);
    // `new`'s 12 bytes, `old`'s 1 + 9.
    assert_eq!(m.fs.unsynced(), 12 + 1 + 9);
    // Its data synced, its name not: gone too.
    let mut f = File::create(p.join("data-only")).unwrap();
    f.write_all(b"synced bytes").unwrap();
    f.sync_all().unwrap();
    drop(f);
    // The kernel has seen all three (attributes cached, names in the
    // dentry cache): none of it may hide the loss.
    assert_eq!(fs::metadata(p.join("old")).unwrap().len(), 16);
    m.quiesce();
    let st = m.fs.power_loss();
    assert_eq!(st.inodes_dropped, 2, "{st:?}");
    assert_eq!(st.files_reverted, 1, "{st:?}");
    assert_eq!(st.bytes_dropped, 10 + 12 + 12, "{st:?}");
    assert_eq!(names(p), ["old"]);
    assert_eq!(
        fs::read(p.join("new")).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert!(!p.join("data-only").exists());
    assert_eq!(fs::metadata(p.join("old")).unwrap().len(), 7);
    assert_eq!(fs::read(p.join("old")).unwrap(), b"durable");
    assert_eq!((m.fs.used(), m.fs.unsynced()), (7, 0));
    // A truncation without a sync is undone too.
    let f = OpenOptions::new().write(true).open(p.join("old")).unwrap();
    f.set_len(2).unwrap();
    drop(f);
    m.quiesce();
    m.fs.power_loss();
    assert_eq!(fs::read(p.join("old")).unwrap(), b"durable");
}

#[test]
fn names_are_durable_once_their_directory_is_synced() {
    let Some(m) = Mounted::new() else { return };
    let p = m.path();
    // write + fdatasync + directory fsync: survives.
    durable_file(&p.join("a"), b"aaaa");
    fs::create_dir(p.join("sub")).unwrap();
    sync_dir(p);
    durable_file(&p.join("sub/b"), b"bbbb");
    // Renamed, the directory not synced: back to the old name.
    fs::rename(p.join("a"), p.join("a2")).unwrap();
    m.quiesce();
    m.fs.power_loss();
    assert_eq!(names(p), ["a", "sub"]);
    assert_eq!(fs::read(p.join("a")).unwrap(), b"aaaa");
    // Renamed and synced: kept.
    fs::rename(p.join("a"), p.join("a2")).unwrap();
    sync_dir(p);
    m.quiesce();
    m.fs.power_loss();
    assert_eq!(names(p), ["a2", "sub"]);
    assert_eq!(fs::read(p.join("a2")).unwrap(), b"aaaa");
    // Unlinked without a sync: back. With one: gone.
    fs::remove_file(p.join("a2")).unwrap();
    fs::remove_file(p.join("sub/b")).unwrap();
    sync_dir(&p.join("sub"));
    m.quiesce();
    let st = m.fs.power_loss();
    assert_eq!(st.dirs_reverted, 1, "{st:?}");
    assert_eq!(fs::read(p.join("a2")).unwrap(), b"aaaa");
    assert!(names(&p.join("sub")).is_empty());
    // Replaced by rename (the write_replace pattern): old or new, never a
    // mix; with the sync, the new one.
    durable_file(&p.join("state.tmp"), b"new state");
    fs::rename(p.join("state.tmp"), p.join("a2")).unwrap();
    m.quiesce();
    m.fs.power_loss();
    assert_eq!(fs::read(p.join("a2")).unwrap(), b"aaaa");
    assert_eq!(fs::read(p.join("state.tmp")).unwrap(), b"new state");
    fs::rename(p.join("state.tmp"), p.join("a2")).unwrap();
    sync_dir(p);
    m.quiesce();
    m.fs.power_loss();
    assert_eq!(names(p), ["a2", "sub"]);
    assert_eq!(fs::read(p.join("a2")).unwrap(), b"new state");
    // Between directories: synced only at the source, the file is gone.
    durable_file(&p.join("sub/c"), b"cc");
    fs::rename(p.join("sub/c"), p.join("c")).unwrap();
    sync_dir(&p.join("sub"));
    m.quiesce();
    let st = m.fs.power_loss();
    assert_eq!(st.inodes_dropped, 1, "{st:?}");
    assert!(!p.join("c").exists() && !p.join("sub/c").exists());
    // Hard links and RENAME_NOREPLACE.
    fs::hard_link(p.join("a2"), p.join("link")).unwrap();
    sync_dir(p);
    use std::os::unix::fs::MetadataExt;
    assert_eq!(fs::metadata(p.join("a2")).unwrap().nlink(), 2);
    let (from, to) = (c"a2", c"link");
    let dir = File::open(p).unwrap();
    // SAFETY: plain syscall on a descriptor we hold and two NUL-terminated
    // names that outlive it.
    let r = unsafe {
        libc::renameat2(
            dir.as_raw_fd(),
            from.as_ptr(),
            dir.as_raw_fd(),
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    assert_eq!(r, -1);
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::EEXIST)
    );
}

#[test]
fn direct_and_dsync_writes_are_durable_at_once() {
    let Some(m) = Mounted::new() else { return };
    let p = m.path();
    durable_file(&p.join("direct"), b"");
    durable_file(&p.join("dsync"), b"");
    durable_file(&p.join("fcntl"), b"");
    durable_file(&p.join("buffered"), b"");
    let opened = |name: &str, flags: i32| {
        OpenOptions::new()
            .write(true)
            .custom_flags(flags)
            .open(p.join(name))
            .unwrap()
    };
    let block = vec![7u8; 4096];
    // No alignment is needed on FUSE, but keep it honest.
    opened("direct", libc::O_DIRECT)
        .write_all_at(&block, 0)
        .unwrap();
    opened("dsync", libc::O_DSYNC)
        .write_all_at(b"dsync", 0)
        .unwrap();
    opened("buffered", 0).write_all_at(b"lost", 0).unwrap();
    let f = opened("fcntl", 0);
    f.write_all_at(b"before ", 0).unwrap();
    // SAFETY: fcntl on a descriptor we hold; only its status flags change.
    unsafe {
        let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
        assert_eq!(
            libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl | libc::O_DIRECT),
            0
        );
    }
    // Past the durable size with a gap: the gap is a hole (zeros).
    f.write_all_at(b"after", 10).unwrap();
    drop(f);
    m.quiesce();
    m.fs.power_loss();
    assert_eq!(fs::read(p.join("direct")).unwrap(), block);
    assert_eq!(fs::read(p.join("dsync")).unwrap(), b"dsync");
    assert_eq!(fs::read(p.join("buffered")).unwrap(), b"");
    assert_eq!(
        fs::read(p.join("fcntl")).unwrap(),
        b"\0\0\0\0\0\0\0\0\0\0after"
    );
}

fn statfs_bytes(p: &Path) -> (u64, u64) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    let mut s = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is a NUL-terminated path and `s` has room for a statvfs,
    // which the call fills on success (checked before reading it).
    let s = unsafe {
        assert_eq!(libc::statvfs(c.as_ptr(), s.as_mut_ptr()), 0);
        s.assume_init()
    };
    (s.f_blocks * s.f_frsize, s.f_bavail * s.f_frsize)
}

#[test]
fn a_full_file_system_refuses_growth_and_changes_nothing() {
    let Some(m) = Mounted::new() else { return };
    let p = m.path();
    assert_eq!(statfs_bytes(p).0, 1 << 40);
    fs::write(p.join("a"), vec![1u8; 8192]).unwrap();
    m.fs.set_capacity(Some(12288));
    assert_eq!(statfs_bytes(p), (12288, 4096));
    let enospc = |e: std::io::Error| assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(p.join("a"))
        .unwrap();
    enospc(f.write_at(&[2u8; 8192], 8192).unwrap_err());
    enospc(f.set_len(20000).unwrap_err());
    // SAFETY: fallocate on a descriptor we hold.
    let r = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, 16384) };
    assert_eq!(r, -1);
    enospc(std::io::Error::last_os_error());
    enospc(fs::write(p.join("b"), vec![3u8; 4097]).unwrap_err());
    // Nothing changed: no short write, no partial file.
    assert_eq!(fs::read(p.join("a")).unwrap(), vec![1u8; 8192]);
    assert_eq!(fs::metadata(p.join("b")).unwrap().len(), 0);
    assert_eq!(m.fs.used(), 8192);
    // Room for exactly what is left.
    f.write_all_at(&[2u8; 4096], 8192).unwrap();
    enospc(f.write_at(&[2u8], 12288).unwrap_err());
    // Lifted: fine again.
    m.fs.set_capacity(None);
    f.write_all_at(&[2u8; 8192], 12288).unwrap();
    // SAFETY: fallocate on a descriptor we hold.
    assert_eq!(unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, 65536) }, 0);
    assert_eq!(f.metadata().unwrap().len(), 65536);
    assert_eq!(m.fs.used(), 65536);
}

/// The torn state a seed leaves of a file: 8 durable sectors of `A`,
/// overwritten with `B` and extended by 8 of `C`, none of it synced.
fn torn_with(seed: u64) -> Vec<u8> {
    let m = Mounted::new().expect("usable: checked by the caller");
    let p = m.path();
    durable_file(&p.join("f"), &[b'A'; 4096]);
    durable_file(&p.join("other"), b"x");
    let f = OpenOptions::new().write(true).open(p.join("f")).unwrap();
    f.write_all_at(&[b'B'; 4096], 0).unwrap();
    f.write_all_at(&[b'C'; 4096], 4096).unwrap();
    drop(f);
    fs::write(p.join("other"), b"yy").unwrap();
    m.quiesce();
    let st = m.fs.power_loss_torn(seed);
    assert!(st.inodes_dropped == 0 && st.dirs_reverted == 0, "{st:?}");
    fs::read(p.join("f")).unwrap()
}

#[test]
fn a_torn_power_loss_keeps_a_mix_of_whole_sectors() {
    if let Err(why) = ringkit_powerfs::PowerFs::usable() {
        eprintln!("skipped: {why}");
        return;
    }
    let (mut old, mut new) = (0, 0);
    let mut results = Vec::new();
    for seed in 0..6 {
        let got = torn_with(seed);
        assert!(got.len() >= 4096 && got.len() <= 8192 && got.len() % 512 == 0);
        for (i, s) in got.chunks(512).enumerate() {
            let fill = s[0];
            assert!(
                s.iter().all(|&b| b == fill),
                "seed {seed}: sector {i} is mixed"
            );
            match (i < 8, fill) {
                (true, b'A') => old += 1,
                (true, b'B') => new += 1,
                (false, b'C') => {}
                (false, 0) => assert!(i < got.len() / 512 - 1, "the last sector is a kept one"),
                _ => panic!("seed {seed}: sector {i} holds {fill}"),
            }
        }
        results.push(got);
    }
    assert!(old > 0 && new > 0, "a mix: {old} old, {new} new sectors");
    assert!(results.windows(2).any(|w| w[0] != w[1]), "seeds differ");
    // Deterministic by seed.
    assert_eq!(torn_with(3), results[3]);
}

#[test]
fn dropping_a_mount_in_use_aborts_it_and_nothing_hangs() {
    let Some(m) = Mounted::new() else { return };
    let path = m.path().join("open");
    let f = File::create(&path).unwrap();
    let dir = m.path().to_path_buf();
    drop(m);
    // The connection is aborted: the descriptor still held fails, and
    // closing it does not wait for an answer that cannot come.
    let e = f.write_at(b"x", 0).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOTCONN), "{e}");
    drop(f);
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(!mounts.contains(dir.to_str().unwrap()), "still mounted");
}

#[test]
fn shared_mmap_writes_are_durable_once_synced() {
    let Some(m) = Mounted::new() else { return };
    let p = m.path();
    durable_file(&p.join("mapped"), &[b'a'; 8192]);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(p.join("mapped"))
        .unwrap();
    let map = |f: &File| {
        // SAFETY: a fresh shared mapping of 8192 bytes of a file we hold
        // open, checked before use and unmapped by the caller.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                8192,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED, "{}", std::io::Error::last_os_error());
        ptr.cast::<u8>()
    };
    let ptr = map(&f);
    // SAFETY: the mapping is 8192 bytes long; then written back, synced
    // (msync, fsync) and unmapped.
    unsafe {
        std::ptr::write_bytes(ptr, b'b', 4096);
        assert_eq!(libc::msync(ptr.cast(), 8192, libc::MS_SYNC), 0);
    }
    f.sync_data().unwrap();
    // SAFETY: the same mapping, written past the synced page, then
    // unmapped without a sync (`msync(MS_SYNC)` would be one: it fsyncs).
    unsafe {
        std::ptr::write_bytes(ptr.add(4096), b'c', 4096);
        assert_eq!(libc::munmap(ptr.cast(), 8192), 0);
    }
    // The close writes the dirty page back (FUSE flush): no sync.
    drop(f);
    assert_eq!(&fs::read(p.join("mapped")).unwrap()[4096..4100], b"cccc");
    m.quiesce();
    m.fs.power_loss();
    let got = fs::read(p.join("mapped")).unwrap();
    assert!(got[..4096].iter().all(|&b| b == b'b'));
    assert!(got[4096..].iter().all(|&b| b == b'a'));
}
