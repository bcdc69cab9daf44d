//! The static file server's open-file cache against a real server on
//! loopback, on both backends: what a cached file becomes when the file
//! system changes under it, the bound, and that no descriptor leaks.
//!
//! Each request is `Connection: close` on a fresh std connection, read to
//! EOF, so every byte the server sent is seen.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use ringkit_http::static_files::StaticFiles;

const VALID: Duration = Duration::from_millis(200);

/// Status, declared Content-Length, and the body bytes that came.
struct Got {
    status: u16,
    length: Option<usize>,
    body: Vec<u8>,
}

fn get(addr: SocketAddr, target: &str) -> Got {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    // A connection the server closes early may end in a reset.
    let _ = s.read_to_end(&mut buf);
    let end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("{target}: no response head in {buf:?}"));
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    let status = head[9..12].parse().unwrap();
    let length = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().to_string())
        })
        .map(|v| v.parse().unwrap());
    Got {
        status,
        length,
        body: buf[end + 4..].to_vec(),
    }
}

/// Start the server with `files` on this runtime; returns its address.
fn serve(files: StaticFiles) -> SocketAddr {
    let listener = ringkit::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    ringkit::spawn(async move {
        let _ = ringkit_http::Server::from_listener(listener)
            .with_shutdown(std::future::pending())
            .serve(files)
            .await;
    });
    addr
}

/// Run `f` on a std thread without blocking the runtime.
async fn client<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let h = std::thread::spawn(f);
    while !h.is_finished() {
        ringkit::time::sleep(Duration::from_millis(2)).await;
    }
    match h.join() {
        Ok(v) => v,
        Err(p) => std::panic::resume_unwind(p),
    }
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn write(root: &Path, name: &str, body: &[u8]) {
    std::fs::write(root.join(name), body).unwrap();
}

ringkit::test_all! {
    async fn replaced_and_deleted_files_are_seen_after_the_interval() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        write(&root, "a.txt", b"first version");
        let files = StaticFiles::new(&root).unwrap().open_file_cache_valid(VALID);
        let probe = files.clone();
        let addr = serve(files);
        let r = root.clone();
        client(move || {
            let g = get(addr, "/a.txt");
            assert_eq!((g.status, g.body.as_slice()), (200, &b"first version"[..]));
            // Replace it (write a new file, rename over the old one).
            write(&r, "a.tmp", b"the second, longer version");
            std::fs::rename(r.join("a.tmp"), r.join("a.txt")).unwrap();
            // Within the interval the cached (old, still open) file may
            // still be served, whole and consistent.
            let g = get(addr, "/a.txt");
            assert_eq!(g.length, Some(g.body.len()));
            std::thread::sleep(VALID + Duration::from_millis(100));
            let g = get(addr, "/a.txt");
            assert_eq!((g.status, g.body.as_slice()), (200, &b"the second, longer version"[..]));
            // Deleted: 404 after the interval.
            std::fs::remove_file(r.join("a.txt")).unwrap();
            std::thread::sleep(VALID + Duration::from_millis(100));
            assert_eq!(get(addr, "/a.txt").status, 404);
            // And back again.
            write(&r, "a.txt", b"third");
            assert_eq!(get(addr, "/a.txt").body, b"third");
        })
        .await;
        assert!(probe.cache_stats().entries <= 1);
    }

    async fn a_truncated_file_never_disagrees_with_its_length() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let big = vec![b'x'; 256 * 1024];
        write(&root, "t.bin", &big);
        let addr = serve(StaticFiles::new(&root).unwrap().open_file_cache_valid(Duration::from_secs(60)));
        let r = root.clone();
        client(move || {
            assert_eq!(get(addr, "/t.bin").body.len(), big.len());
            // Truncated in place while cached (the interval is long, so the
            // cache still holds the old size): the response may promise the
            // old length, but then the connection closes short of it; it
            // never sends bytes that disagree with what it declared.
            std::fs::OpenOptions::new().write(true).open(r.join("t.bin")).unwrap().set_len(1000).unwrap();
            let g = get(addr, "/t.bin");
            assert_eq!(g.status, 200);
            let declared = g.length.unwrap();
            assert!(g.body.len() <= declared);
            if declared != 1000 {
                assert!(g.body.len() < declared, "a full body of the old length from a 1000-byte file");
            }
            assert!(g.body.iter().all(|&b| b == b'x'));
        })
        .await;
    }

    async fn the_cache_stays_bounded_and_leaks_no_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        for i in 0..40 {
            write(&root, &format!("f{i}.txt"), format!("file {i}").as_bytes());
        }
        let before = open_fds();
        let files = StaticFiles::new(&root).unwrap().open_file_cache(8);
        let probe = files.clone();
        let addr = serve(files);
        client(move || {
            for round in 0..3 {
                for i in 0..40 {
                    let g = get(addr, &format!("/f{i}.txt"));
                    assert_eq!(g.body, format!("file {i}").as_bytes(), "round {round}");
                }
            }
        })
        .await;
        let entries = probe.cache_stats().entries;
        assert!((1..=8).contains(&entries), "{entries} entries for a bound of 8");
        // Closed connections and evicted files are gone (closes through the
        // ring complete within a few loop turns).
        let mut now = open_fds();
        for _ in 0..100 {
            if now <= before + 8 + 4 {
                break;
            }
            ringkit::time::sleep(Duration::from_millis(10)).await;
            now = open_fds();
        }
        assert!(now <= before + 8 + 4, "{before} fds before, {now} after: a leak");
    }

    async fn a_symlink_swapped_outside_is_refused_after_the_interval() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(dir.path().join("secret.txt"), b"TOP-SECRET").unwrap();
        write(&root, "a.txt", b"public");
        std::os::unix::fs::symlink("a.txt", root.join("link")).unwrap();
        let addr = serve(StaticFiles::new(&root).unwrap().open_file_cache_valid(VALID));
        let r = root.clone();
        client(move || {
            assert_eq!(get(addr, "/link").body, b"public");
            std::fs::remove_file(r.join("link")).unwrap();
            std::os::unix::fs::symlink("../secret.txt", r.join("link")).unwrap();
            std::thread::sleep(VALID + Duration::from_millis(100));
            let g = get(addr, "/link");
            assert_eq!(g.status, 403);
            assert!(!g.body.windows(10).any(|w| w == b"TOP-SECRET"));
        })
        .await;
    }

    async fn an_unreadable_directory_answers_403_after_the_interval() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            eprintln!("skipped: running as root, which permission bits do not stop");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        std::fs::create_dir(root.join("d")).unwrap();
        write(&root, "d/x.txt", b"x");
        let addr = serve(StaticFiles::new(&root).unwrap().open_file_cache_valid(VALID));
        let r = root.clone();
        client(move || {
            assert_eq!(get(addr, "/d/x.txt").status, 200);
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(r.join("d"), std::fs::Permissions::from_mode(0o000)).unwrap();
            std::thread::sleep(VALID + Duration::from_millis(100));
            let status = get(addr, "/d/x.txt").status;
            std::fs::set_permissions(r.join("d"), std::fs::Permissions::from_mode(0o755)).unwrap();
            assert_eq!(status, 403);
        })
        .await;
    }
}
