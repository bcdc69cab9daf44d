//! ringkit's files on the mount, on io_uring and on epoll: a write made
//! durable in one submission (`write_at_sync`, a write linked to an
//! `fdatasync`; `write_at_dsync`, an `RWF_DSYNC` write) survives a power
//! loss; a write alone does not; `O_DIRECT` writes are durable at once.

mod common;

use ringkit::fs::{FixedBufPool, OpenOptions};
use ringkit::Backend;

use common::Mounted;

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

ringkit::test_all! {
    async fn write_at_sync_survives_a_power_loss_and_write_at_alone_does_not() {
        let Some(m) = Mounted::new() else { return };
        let on_uring = ringkit::backend_report().unwrap().chosen == Backend::Uring;
        let sqes_before = ringkit::metrics().sqes_submitted;
        let dir = m.path().to_path_buf();
        let path = dir.join("seg");
        let f = OpenOptions::new().read(true).write(true).create(true).open(&path).await.unwrap();
        ringkit::fs::sync_dir(&dir).await.unwrap();
        let a = pattern(10_000, 1);
        let (n, _) = f.write_at_sync(a.clone(), 0).await;
        assert_eq!(n.unwrap(), a.len());
        // From a registered buffer: WRITE_FIXED linked to the sync.
        let pool = FixedBufPool::new(2, 4096).unwrap();
        let mut b = pool.get().await;
        b.as_mut_capacity()[..5].copy_from_slice(b"fixed");
        b.set_len(5);
        assert_eq!(f.write_at_sync(b, 10_000).await.0.unwrap(), 5);
        // Written, never synced: an extension and an overwrite.
        assert_eq!(f.write_at(b"lost tail".to_vec(), 10_005).await.0.unwrap(), 9);
        assert_eq!(f.write_at(vec![0xEE; 100], 0).await.0.unwrap(), 100);
        // Read back through the runtime: the new bytes are what a process sees.
        let (n, got) = f.read_at(Vec::with_capacity(20_000), 0).await;
        assert_eq!(n.unwrap(), 10_014);
        assert_eq!(&got[..100], &[0xEE; 100][..]);
        assert_eq!(&got[10_000..], b"fixedlost tail");
        f.close().await.unwrap();
        m.quiesce();
        let st = m.fs.power_loss();
        assert_eq!((st.files_reverted, st.inodes_dropped), (1, 0), "{st:?}");
        assert!(st.bytes_dropped >= 9, "{st:?}");
        let want = [&a[..], b"fixed"].concat();
        assert_eq!(std::fs::read(&path).unwrap(), want);

        // A write, then sync_all: durable.
        let f = OpenOptions::new().read(true).write(true).open(&path).await.unwrap();
        assert_eq!(f.metadata().await.unwrap().len(), 10_005);
        assert_eq!(f.write_at(b"synced tail".to_vec(), 10_005).await.0.unwrap(), 11);
        f.sync_all().await.unwrap();
        f.close().await.unwrap();
        m.quiesce();
        assert_eq!(m.fs.power_loss(), Default::default());
        let want = [&want[..], b"synced tail"].concat();
        assert_eq!(std::fs::read(&path).unwrap(), want);

        // O_DIRECT: durable with no sync; the gap before it is a hole.
        let f = OpenOptions::new().write(true).direct(true).open(&path).await.unwrap();
        let mut b = pool.get().await;
        b.as_mut_capacity().fill(b'd');
        b.set_len(4096);
        assert_eq!(f.write_at(b, 16_384).await.0.unwrap(), 4096);
        f.close().await.unwrap();
        m.quiesce();
        m.fs.power_loss();
        let got = std::fs::read(&path).unwrap();
        assert_eq!(got.len(), 20_480);
        assert_eq!(&got[..want.len()], &want[..]);
        assert!(got[want.len()..16_384].iter().all(|&x| x == 0));
        assert!(got[16_384..].iter().all(|&x| x == b'd'));
        if on_uring {
            // Through the ring, not beside it.
            assert!(ringkit::metrics().sqes_submitted - sqes_before >= 10);
        }
    }

    /// (An `RWF_DSYNC` write reaches FUSE as a write and an `FSYNC` of
    /// the whole file: here it cannot show that the sync covers its own
    /// range only; that is the crash-state explorer's to model.)
    async fn write_at_dsync_survives_a_power_loss() {
        let Some(m) = Mounted::new() else { return };
        let dir = m.path().to_path_buf();
        let path = dir.join("seg");
        let f = OpenOptions::new().read(true).write(true).create(true).open(&path).await.unwrap();
        ringkit::fs::sync_dir(&dir).await.unwrap();
        let a = pattern(10_000, 3);
        assert_eq!(f.write_at_dsync(a.clone(), 0).await.0.unwrap(), a.len());
        // From a registered buffer: WRITE_FIXED with RWF_DSYNC.
        let pool = FixedBufPool::new(1, 4096).unwrap();
        let mut b = pool.get().await;
        b.as_mut_capacity()[..5].copy_from_slice(b"fixed");
        b.set_len(5);
        assert_eq!(f.write_at_dsync(b, 10_000).await.0.unwrap(), 5);
        // Written, never synced: lost.
        assert_eq!(f.write_at(b"lost tail".to_vec(), 10_005).await.0.unwrap(), 9);
        f.close().await.unwrap();
        m.quiesce();
        let st = m.fs.power_loss();
        assert_eq!((st.files_reverted, st.inodes_dropped), (1, 0), "{st:?}");
        let want = [&a[..], b"fixed"].concat();
        assert_eq!(std::fs::read(&path).unwrap(), want);
    }
}
