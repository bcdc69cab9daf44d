//! `ringkit::fs::{open_at, fd_metadata, close}` on both backends: a lookup
//! kept beneath its directory (`openat2` with `RESOLVE_BENEATH`), the
//! metadata of an `O_PATH` descriptor, and a close through the ring.

use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;

use ringkit::fs::{self, resolve};

ringkit::test_all! {
    async fn open_at_stays_beneath_and_metadata_matches() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/a.txt"), b"hello").unwrap();
        std::fs::write(t.path().join("secret"), b"no").unwrap();
        std::os::unix::fs::symlink("../../secret", root.join("sub/out")).unwrap();
        let dir = std::fs::File::open(&root).unwrap();
        let beneath = resolve::BENEATH | resolve::NO_MAGICLINKS;

        let fd = fs::open_at(dir.as_fd(), "sub/a.txt", libc::O_PATH, beneath).await.unwrap();
        let m = fs::fd_metadata(fd.as_fd()).await.unwrap();
        let want = std::fs::metadata(root.join("sub/a.txt")).unwrap();
        assert!(m.is_file());
        assert_eq!((m.len(), m.ino(), m.dev()), (5, want.ino(), want.dev()));
        fs::close(fd).await.unwrap();

        // Opened for reading, the file reads through the runtime.
        let fd = fs::open_at(dir.as_fd(), "sub/a.txt", libc::O_RDONLY, beneath).await.unwrap();
        let f = fs::File::from(fd);
        assert_eq!(f.read_to_end().await.unwrap(), b"hello");

        for escape in ["../secret", "sub/out", "/etc/passwd", "sub/../../secret"] {
            let e = fs::open_at(dir.as_fd(), escape, libc::O_PATH, beneath).await.unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EXDEV), "{escape}");
        }
        let e = fs::open_at(dir.as_fd(), "nope", libc::O_PATH, beneath).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
        let e = fs::open_at(dir.as_fd(), "a\0b", libc::O_PATH, beneath).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    }

    async fn descriptor_stat_runs_in_place_and_path_stat_on_the_ring() {
        // io_uring hands every IORING_OP_STATX to an io-wq thread; a stat
        // of an open descriptor is made in place instead (no SQE), with the
        // same answer. A stat by path still goes through the ring.
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("f");
        std::fs::write(&path, vec![7u8; 4321]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let want = std::fs::metadata(&path).unwrap();
        let before = ringkit::metrics();
        for _ in 0..100 {
            let m = fs::fd_metadata(file.as_fd()).await.unwrap();
            assert_eq!((m.len(), m.ino(), m.dev()), (4321, want.ino(), want.dev()));
        }
        let m = ringkit::metrics().since(&before);
        assert_eq!(m.sqes_submitted, 0, "{m:?}");
        assert!(m.other_syscalls >= 100, "{m:?}");

        let before = ringkit::metrics();
        let m = fs::metadata(&path).await.unwrap();
        assert_eq!(m.len(), 4321);
        let d = ringkit::metrics().since(&before);
        if ringkit::backend_report().expect("inside a runtime").chosen == ringkit::Backend::Uring {
            assert_eq!(d.sqes_submitted, 1, "{d:?}");
        }

        // A number no descriptor can have (above any RLIMIT_NOFILE this
        // process may raise to): the error, in place as well.
        // SAFETY: statx on a number that is not open reports EBADF and
        // touches nothing.
        let closed = unsafe { std::os::fd::BorrowedFd::borrow_raw(i32::MAX - 1) };
        let e = fs::fd_metadata(closed).await.unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
    }
}
