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

mod harness;
use harness::client;

/// How long a cache entry stays valid. Long enough that 200 connections
/// made one after another all arrive within it on a busy machine (at
/// 200 ms a starved client saw the entry expire mid-batch: two lookups).
const VALID: Duration = Duration::from_millis(1000);

/// Status, declared Content-Length, and the body bytes that came.
struct Got {
    status: u16,
    length: Option<usize>,
    body: Vec<u8>,
}

fn get(addr: SocketAddr, target: &str) -> Got {
    get_with(addr, target, "")
}

/// A GET with `extra` header lines (each ending in CRLF).
fn get_with(addr: SocketAddr, target: &str, extra: &str) -> Got {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n{extra}\r\n"
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
    harness::serve_forever(ringkit_http::ServerConfig::default(), files)
}

/// This process's open descriptors on files under `dir` (other tests of
/// this binary run at the same time, so a count of all would be noise).
fn open_fds_under(dir: &Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|e| std::fs::read_link(e.path()).is_ok_and(|t| t.starts_with(dir)))
        .count()
}

fn write(root: &Path, name: &str, body: &[u8]) {
    std::fs::write(root.join(name), body).unwrap();
}

/// `n` connections each send a GET for `target` before any response is
/// read, so the server sees them all at about once; every response must be
/// a whole 200 with `body`.
fn get_all_at_once(addr: SocketAddr, target: &str, n: usize, body: &[u8]) {
    get_all_at_once_status(addr, target, n, "200", body)
}

/// The same, expecting `status` and a body ending in `body`.
fn get_all_at_once_status(addr: SocketAddr, target: &str, n: usize, status: &str, body: &[u8]) {
    let mut conns: Vec<TcpStream> = (0..n).map(|_| TcpStream::connect(addr).unwrap()).collect();
    for s in &mut conns {
        write!(
            s,
            "GET {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
    }
    for mut s in conns {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).unwrap();
        let head = format!("HTTP/1.1 {status}");
        assert!(
            buf.starts_with(head.as_bytes()),
            "{:?}",
            String::from_utf8_lossy(&buf)
        );
        assert!(buf.ends_with(body));
    }
}

ringkit::test_all! {
    async fn many_requests_for_a_cold_or_expired_file_look_it_up_once() {
        // 200 requests at once for a file not yet cached, then again once
        // the entry has expired: one lookup (and one open) each time, not
        // one per request (10 000 connections did that to EMFILE).
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        write(&root, "hot.txt", b"hot file");
        let files = StaticFiles::new(&root).unwrap().open_file_cache_valid(VALID);
        let probe = files.clone();
        let addr = serve(files);
        client(move || get_all_at_once(addr, "/hot.txt", 200, b"hot file")).await;
        assert_eq!(probe.cache_stats().lookups, 1);
        ringkit::time::sleep(VALID + Duration::from_millis(100)).await;
        client(move || get_all_at_once(addr, "/hot.txt", 200, b"hot file")).await;
        assert_eq!(probe.cache_stats().lookups, 2);
        // A path that is not there: refusals are not cached, so the
        // requests that waited on the refused lookup each look it up
        // themselves, at once (not one after another), and all get 404.
        client(move || get_all_at_once_status(addr, "/missing.txt", 200, "404", b"")).await;
        assert_eq!(probe.cache_stats().entries, 1);
    }

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

    async fn a_file_changed_in_place_is_never_served_under_its_old_head() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        write(&root, "a.txt", b"0123456789");
        // A long interval: only the per-hit check can see the change.
        let addr = serve(StaticFiles::new(&root).unwrap().open_file_cache_valid(Duration::from_secs(60)));
        let r = root.clone();
        client(move || {
            let first = get(addr, "/a.txt");
            assert_eq!(first.body, b"0123456789");
            // Made longer in place (same inode): it was served as 200 with
            // the old length and ETag and the first 10 new bytes.
            let mut f = std::fs::OpenOptions::new().write(true).open(r.join("a.txt")).unwrap();
            f.write_all(b"ABCDEFGHIJKLMNOPQRST").unwrap();
            drop(f);
            let g = get(addr, "/a.txt");
            assert_eq!((g.status, g.body.as_slice()), (200, &b"ABCDEFGHIJKLMNOPQRST"[..]));
            assert_eq!(g.length, Some(20));
            // Made shorter in place: it was a closed connection, no response.
            let f = std::fs::OpenOptions::new().write(true).open(r.join("a.txt")).unwrap();
            f.set_len(5).unwrap();
            drop(f);
            let g = get(addr, "/a.txt");
            assert_eq!((g.status, g.body.as_slice()), (200, &b"ABCDE"[..]));
        })
        .await;
    }

    async fn a_shrunk_small_file_still_lets_earlier_pipelined_responses_out() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        write(&root, "a.txt", b"first file");
        write(&root, "s.txt", &[b'y'; 3000]);
        let addr = serve(StaticFiles::new(&root).unwrap().open_file_cache_valid(Duration::from_secs(60)));
        let r = root.clone();
        client(move || {
            assert_eq!(get(addr, "/s.txt").body.len(), 3000);
            // Cut short while cached: the cache still says 3000 bytes.
            std::fs::OpenOptions::new().write(true).open(r.join("s.txt")).unwrap().set_len(10).unwrap();
            let mut c = TcpStream::connect(addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            c.write_all(b"GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\nGET /s.txt HTTP/1.1\r\nHost: t\r\n\r\n")
                .unwrap();
            let mut got = Vec::new();
            let _ = c.read_to_end(&mut got);
            let text = String::from_utf8_lossy(&got);
            // The first response whole (it was a bare EOF), and the second
            // agreeing with its head (the hit's statx sees the new size).
            assert!(text.starts_with("HTTP/1.1 200") && text.contains("first file"), "{text:?}");
            let second = text.split("HTTP/1.1 ").nth(2).unwrap_or_default();
            assert!(
                second.is_empty() || (second.contains("Content-Length: 10\r\n") && second.ends_with("\r\n\r\nyyyyyyyyyy")),
                "{text:?}"
            );
        })
        .await;
    }

    async fn the_cache_stays_bounded_and_leaks_no_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        for i in 0..40 {
            write(&root, &format!("f{i}.txt"), format!("file {i}").as_bytes());
        }
        assert_eq!(open_fds_under(&root), 0);
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
        // Evicted files are closed (closes through the ring complete within
        // a few loop turns): what is open under the root is the root
        // directory itself and the cached files.
        let mut now = open_fds_under(&root);
        for _ in 0..100 {
            if now <= entries + 1 {
                break;
            }
            ringkit::time::sleep(Duration::from_millis(10)).await;
            now = open_fds_under(&root);
        }
        assert!(
            now <= entries + 1,
            "{now} descriptors under the root, {entries} files cached (+1 for the root): a leak"
        );
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

    async fn zero_copy_bodies_a_sparse_2_gib_file_and_ranges_near_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        // 2 GiB, sparse: a marked tail and a marked 1 MiB region in the middle.
        let size: u64 = 2 << 30;
        let f = std::fs::File::create(root.join("big.bin")).unwrap();
        f.set_len(size).unwrap();
        use std::os::unix::fs::FileExt;
        let tail: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        f.write_all_at(&tail, size - tail.len() as u64).unwrap();
        let mid: Vec<u8> = (0..(1u32 << 20)).map(|i| (i % 241) as u8 + 1).collect();
        f.write_all_at(&mid, 1 << 30).unwrap();
        drop(f);
        use ringkit_http::FileSend;
        for zero_copy in [FileSend::SendFile, FileSend::Splice, FileSend::Copy] {
            let config = ringkit_http::ServerConfig {
                file_send: zero_copy,
                ..Default::default()
            };
            let addr = harness::serve_forever(config, StaticFiles::new(&root).unwrap());
            let (t, m) = (tail.clone(), mid.clone());
            client(move || {
                // The last 100 000 bytes.
                let g = get_with(addr, "/big.bin", "Range: bytes=-100000\r\n");
                assert_eq!(g.status, 206, "{zero_copy:?}");
                assert!(g.body == t, "{zero_copy:?}: tail differs");
                // 1 MiB from the middle, by offsets.
                let r = format!("Range: bytes={}-{}\r\n", 1u64 << 30, (1u64 << 30) + (1 << 20) - 1);
                let g = get_with(addr, "/big.bin", &r);
                assert_eq!((g.status, g.length), (206, Some(1 << 20)));
                assert!(g.body == m, "{zero_copy:?}: middle differs");
                // Past the end: 416.
                let g = get_with(addr, "/big.bin", &format!("Range: bytes={size}-\r\n"));
                assert_eq!(g.status, 416);
            })
            .await;
        }
    }
}
