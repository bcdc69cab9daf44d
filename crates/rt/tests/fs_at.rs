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
}
