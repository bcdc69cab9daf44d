//! `StaticFiles` behind the real server on loopback, on both backends.
//!
//! The server runs on the test's runtime; each client is plain blocking
//! `std::net::TcpStream` code on a std thread (so it cannot share the
//! server's bugs), sending raw bytes. Most requests carry
//! `Connection: close` and the client reads to EOF, so the test sees every
//! byte the server sent — a HEAD or 304 that leaks a body, or a traversal
//! that leaks a file, cannot hide behind framing.
//!
//! The tree (see [`Fixture`]): `root/` is served; `secret.txt` sits next to
//! it and must never come out, whatever the path or symlink.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::symlink;
use std::path::PathBuf;

use ringkit_http::static_files::StaticFiles;

mod harness;
use harness::client;

const SECRET: &[u8] = b"TOP-SECRET-0451";
const LARGE: usize = 8 << 20;

/// A temp tree: root/{index.html, a.txt, style.css, app.js, data.json,
/// pic.png, blob, empty.txt, large.bin, sub/index.html, sub/page.html,
/// nodir/x.txt, .env, in-link -> a.txt, out-link -> ../secret.txt,
/// out-dir -> .., abs-link -> <abs secret>, etc-link -> /etc}, secret.txt.
struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    large: Vec<u8>,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let w = |p: &str, b: &[u8]| {
            let p = root.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b).unwrap();
        };
        w("index.html", b"<h1>home</h1>");
        w("a.txt", b"0123456789abcdefghij");
        w("style.css", b"body{}");
        w("app.js", b"let x;");
        w("data.json", b"{}");
        w("pic.png", b"\x89PNG");
        w("blob", b"\x00\x01");
        w("empty.txt", b"");
        w("sub/index.html", b"<p>sub</p>");
        w("sub/page.html", b"<p>page</p>");
        w("nodir/x.txt", b"x");
        w(".env", SECRET);
        // Not a simple pattern, so a shifted or repeated chunk shows.
        let large: Vec<u8> = (0..LARGE as u64)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        w("large.bin", &large);
        let secret = dir.path().join("secret.txt");
        std::fs::write(&secret, SECRET).unwrap();
        symlink("a.txt", root.join("in-link")).unwrap();
        symlink("../secret.txt", root.join("out-link")).unwrap();
        symlink("..", root.join("out-dir")).unwrap();
        symlink(&secret, root.join("abs-link")).unwrap();
        symlink("/etc", root.join("etc-link")).unwrap();
        Fixture {
            _dir: dir,
            root,
            large,
        }
    }
}

/// A response as read off the wire.
#[derive(Debug)]
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Everything received, head included.
    raw: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Parse one response from the front of `buf`; `head_only` for HEAD and
/// bodiless statuses. Returns it and the bytes it took, or `None` if
/// incomplete.
fn parse_resp(buf: &[u8], head_only: bool) -> Option<(Resp, usize)> {
    let end = find(buf, b"\r\n\r\n")? + 4;
    let head = std::str::from_utf8(&buf[..end]).expect("response head is not UTF-8");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status: u16 = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (n, v) = l.split_once(':').expect("header line without colon");
            (n.trim().to_string(), v.trim().to_string())
        })
        .collect();
    let len = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .map_or(0, |(_, v)| v.parse::<usize>().unwrap());
    let body_len = if head_only || status == 304 { 0 } else { len };
    if buf.len() < end + body_len {
        return None;
    }
    let resp = Resp {
        status,
        headers,
        body: buf[end..end + body_len].to_vec(),
        raw: buf[..end + body_len].to_vec(),
    };
    Some((resp, end + body_len))
}

/// One request on a fresh connection with `Connection: close`; reads to
/// EOF and checks nothing follows the response.
fn request(addr: SocketAddr, method: &str, target: &str, extra: &[(&str, &str)]) -> Resp {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut req = format!("{method} {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n");
    for (n, v) in extra {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    let (resp, used) = parse_resp(&buf, method == "HEAD")
        .unwrap_or_else(|| panic!("{method} {target}: short response {buf:?}"));
    assert_eq!(
        used,
        buf.len(),
        "{method} {target}: bytes after the response"
    );
    resp
}

fn get(addr: SocketAddr, target: &str) -> Resp {
    request(addr, "GET", target, &[])
}

/// Start the server with `files` on this runtime; returns its address.
fn serve(files: StaticFiles) -> SocketAddr {
    harness::serve_forever(ringkit_http::ServerConfig::default(), files)
}

fn never_leaks(r: &Resp, what: &str) {
    assert!(find(&r.raw, SECRET).is_none(), "{what}: secret leaked");
    assert!(
        find(&r.raw, b"root:").is_none(),
        "{what}: /etc/passwd leaked"
    );
}

/// Every way out of the root we could think of. Each must be refused
/// (400/403/404) without a byte of the secret, with both containment
/// methods.
const TRAVERSALS: &[&str] = &[
    "/../secret.txt",
    "/..%2fsecret.txt",
    "/..%2Fsecret.txt",
    "/%2e%2e/secret.txt",
    "/%2E%2E/secret.txt",
    "/%2E%2e/secret.txt",
    "/.%2e/secret.txt",
    "/%2e./secret.txt",
    "/%2E%2E%2Fsecret.txt",
    "/%2e%2e%2fsecret.txt",
    "/sub/../../secret.txt",
    "/sub/%2e%2e/%2e%2e/secret.txt",
    "/./../secret.txt",
    "//etc/passwd",
    "//../secret.txt",
    "/%2f..%2fsecret.txt",
    "/%00",
    "/a%00b",
    "/a.txt%00.html",
    "/..\\secret.txt",
    "/%5c..%5csecret.txt",
    "/..%5csecret.txt",
    "/sub\\..\\..\\secret.txt",
    "/%252e%252e/secret.txt",
    "/%c0%ae%c0%ae/secret.txt",
    "/etc/passwd",
    "/out-link",
    "/out-dir/secret.txt",
    "/out-dir/root/../secret.txt",
    "/abs-link",
    "/etc-link/passwd",
    "/.env",
    "/%2eenv",
    "/sub/../.env",
    "http://evil/../secret.txt",
    "/out-link/",
    "/out-dir/",
];

fn check_traversals(addr: SocketAddr) {
    for t in TRAVERSALS {
        let r = get(addr, t);
        never_leaks(&r, t);
        assert!(
            matches!(r.status, 400 | 403 | 404),
            "{t}: status {} (want 400/403/404)",
            r.status
        );
    }
    // Absolute-form targets and `*` are not file paths either.
    for t in ["*", "secret.txt", "../secret.txt"] {
        let r = get(addr, t);
        never_leaks(&r, t);
        assert!(r.status >= 400, "{t}: status {}", r.status);
    }
}

ringkit::test_all! {
    async fn traversal_is_refused() {
        let fx = Fixture::new();
        let addr = serve(StaticFiles::new(&fx.root).unwrap());
        client(move || check_traversals(addr)).await;
        drop(fx);
    }

    async fn traversal_is_refused_with_the_cache_off() {
        let fx = Fixture::new();
        let addr = serve(StaticFiles::new(&fx.root).unwrap().open_file_cache(0));
        client(move || check_traversals(addr)).await;
        drop(fx);
    }

    async fn traversal_is_refused_without_openat2() {
        let fx = Fixture::new();
        let addr = serve(StaticFiles::new(&fx.root).unwrap().force_canonicalize());
        client(move || check_traversals(addr)).await;
        drop(fx);
    }

    async fn files_dirs_and_symlinks_inside() {
        let fx = Fixture::new();
        let addr = serve(StaticFiles::new(&fx.root).unwrap());
        client(move || {
            let r = get(addr, "/a.txt");
            assert_eq!((r.status, &r.body[..]), (200, &b"0123456789abcdefghij"[..]));
            assert_eq!(r.header("accept-ranges"), Some("bytes"));
            assert_eq!(get(addr, "/").body, b"<h1>home</h1>");
            assert_eq!(get(addr, "/sub/").body, b"<p>sub</p>");
            assert_eq!(get(addr, "/sub/page.html?v=1").body, b"<p>page</p>");
            assert_eq!(get(addr, "/in-link").body, b"0123456789abcdefghij");
            assert_eq!(get(addr, "/%61.txt").body, b"0123456789abcdefghij");
            let r = get(addr, "/sub");
            assert_eq!((r.status, r.header("location")), (301, Some("/sub/")));
            let r = get(addr, "/sub?x=1");
            assert_eq!((r.status, r.header("location")), (301, Some("/sub/?x=1")));
            assert_eq!(get(addr, "/nodir/").status, 404);
            assert_eq!(get(addr, "/missing").status, 404);
            assert_eq!(get(addr, "/a.txt/").status, 404);
            let r = get(addr, "/empty.txt");
            assert_eq!((r.status, r.body.len()), (200, 0));
            assert_eq!(r.header("content-length"), Some("0"));
            assert_eq!(get(addr, "/a%zz").status, 400);
        })
        .await;
        drop(fx);
    }

    async fn content_types() {
        let fx = Fixture::new();
        let addr = serve(StaticFiles::new(&fx.root).unwrap());
        client(move || {
            for (path, want) in [
                ("/index.html", "text/html; charset=utf-8"),
                ("/a.txt", "text/plain; charset=utf-8"),
                ("/style.css", "text/css; charset=utf-8"),
                ("/app.js", "text/javascript; charset=utf-8"),
                ("/data.json", "application/json"),
                ("/pic.png", "image/png"),
                ("/blob", "application/octet-stream"),
                ("/large.bin", "application/octet-stream"),
                ("/sub/", "text/html; charset=utf-8"),
            ] {
                let r = request(addr, "HEAD", path, &[]);
                assert_eq!(r.header("content-type"), Some(want), "{path}");
            }
        })
        .await;
        drop(fx);
    }

    async fn conditional_get() {
        let fx = Fixture::new();
        let addr = serve(StaticFiles::new(&fx.root).unwrap());
        client(move || {
            let r = get(addr, "/a.txt");
            let etag = r.header("etag").expect("etag").to_string();
            let lm = r.header("last-modified").expect("last-modified").to_string();
            assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
            let cond = |h: &[(&str, &str)]| request(addr, "GET", "/a.txt", h);
            for h in [
                vec![("If-None-Match", etag.as_str())],
                vec![("If-None-Match", "*")],
                vec![("If-None-Match", "\"x\", \"y\"")].into_iter()
                    .chain([("If-None-Match", etag.as_str())]).collect(),
                vec![("If-Modified-Since", lm.as_str())],
                vec![("If-None-Match", etag.as_str()), ("If-Modified-Since", "Thu, 01 Jan 1970 00:00:00 GMT")],
            ] {
                let r = cond(&h);
                assert_eq!(r.status, 304, "{h:?}");
                assert!(r.body.is_empty());
                assert_eq!(r.header("etag"), Some(etag.as_str()));
            }
            // An entity tag that does not match wins over a date that would.
            let r = cond(&[("If-None-Match", "\"other\""), ("If-Modified-Since", lm.as_str())]);
            assert_eq!((r.status, &r.body[..]), (200, &b"0123456789abcdefghij"[..]));
            let r = cond(&[("If-Modified-Since", "Thu, 01 Jan 1970 00:00:00 GMT")]);
            assert_eq!(r.status, 200);
            let r = cond(&[("If-Match", "\"other\"")]);
            assert_eq!(r.status, 412);
            let r = request(addr, "HEAD", "/a.txt", &[("If-None-Match", etag.as_str())]);
            assert_eq!(r.status, 304);
        })
        .await;
        drop(fx);
    }

    async fn ranges() {
        let fx = Fixture::new();
        let addr = serve(StaticFiles::new(&fx.root).unwrap());
        client(move || {
            let range = |r: &str| request(addr, "GET", "/a.txt", &[("Range", r)]);
            for (h, body, cr) in [
                ("bytes=0-9", &b"0123456789"[..], "bytes 0-9/20"),
                ("bytes=10-", b"abcdefghij", "bytes 10-19/20"),
                ("bytes=-3", b"hij", "bytes 17-19/20"),
                ("bytes=-100", b"0123456789abcdefghij", "bytes 0-19/20"),
                ("bytes=5-5", b"5", "bytes 5-5/20"),
                ("bytes=15-1000", b"fghij", "bytes 15-19/20"),
            ] {
                let r = range(h);
                assert_eq!(r.status, 206, "{h}");
                assert_eq!(&r.body[..], body, "{h}");
                assert_eq!(r.header("content-range"), Some(cr), "{h}");
            }
            for h in ["bytes=20-", "bytes=100-200", "bytes=-0"] {
                let r = range(h);
                assert_eq!(r.status, 416, "{h}");
                assert_eq!(r.header("content-range"), Some("bytes */20"), "{h}");
                assert!(r.body.is_empty());
            }
            // Several ranges and malformed ones get the whole file.
            for h in ["bytes=0-1,5-6", "bytes=5-2", "lines=1-2", "bytes=x"] {
                let r = range(h);
                assert_eq!((r.status, r.body.len()), (200, 20), "{h}");
            }
            // If-Range: a current validator lets the range apply, a stale one does not.
            let etag = get(addr, "/a.txt").header("etag").unwrap().to_string();
            let r = request(addr, "GET", "/a.txt", &[("Range", "bytes=0-1"), ("If-Range", &etag)]);
            assert_eq!((r.status, &r.body[..]), (206, &b"01"[..]));
            let r = request(addr, "GET", "/a.txt", &[("Range", "bytes=0-1"), ("If-Range", "\"stale\"")]);
            assert_eq!((r.status, r.body.len()), (200, 20));
            // A range deep in the large file.
            let r = request(addr, "GET", "/large.bin", &[("Range", "bytes=5000000-5000009")]);
            assert_eq!(r.status, 206);
            r.body
        })
        .await
        .iter()
        .zip(&fx.large[5_000_000..5_000_010])
        .for_each(|(a, b)| assert_eq!(a, b));
    }

    async fn head_and_methods() {
        let fx = Fixture::new();
        let addr = serve(StaticFiles::new(&fx.root).unwrap());
        client(move || {
            let r = request(addr, "HEAD", "/large.bin", &[]);
            assert_eq!(r.status, 200);
            assert_eq!(r.header("content-length"), Some(LARGE.to_string().as_str()));
            assert!(r.body.is_empty());
            // `request` read to EOF: nothing followed the head.
            assert!(r.raw.ends_with(b"\r\n\r\n"));
            let r = request(addr, "HEAD", "/a.txt", &[("Range", "bytes=0-1")]);
            assert_eq!((r.status, r.header("content-length")), (200, Some("20")));
            for m in ["POST", "PUT", "DELETE", "OPTIONS", "PATCH", "BREW"] {
                let extra: &[(&str, &str)] = if m == "POST" || m == "PUT" {
                    &[("Content-Length", "0")]
                } else {
                    &[]
                };
                let r = request(addr, m, "/a.txt", extra);
                assert_eq!(r.status, 405, "{m}");
                assert_eq!(r.header("allow"), Some("GET, HEAD"), "{m}");
                never_leaks(&r, m);
            }
        })
        .await;
        drop(fx);
    }

    async fn large_file_intact() {
        let fx = Fixture::new();
        let addr = serve(StaticFiles::new(&fx.root).unwrap());
        let body = client(move || {
            let r = get(addr, "/large.bin");
            assert_eq!(r.status, 200);
            assert_eq!(r.header("content-length"), Some(LARGE.to_string().as_str()));
            r.body
        })
        .await;
        assert!(body == fx.large, "8 MiB body differs");
    }

    async fn keep_alive_after_file_bodies() {
        let fx = Fixture::new();
        let addr = serve(StaticFiles::new(&fx.root).unwrap());
        let large_len = fx.large.len();
        client(move || {
            // Pipelined on one connection: the framing of each body must be exact.
            let mut s = TcpStream::connect(addr).unwrap();
            let reqs = "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n\
                        HEAD /large.bin HTTP/1.1\r\nHost: t\r\n\r\n\
                        GET /a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=-2\r\n\r\n\
                        GET /large.bin HTTP/1.1\r\nHost: t\r\n\r\n\
                        GET /sub/ HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
            s.write_all(reqs.as_bytes()).unwrap();
            let mut buf = Vec::new();
            s.read_to_end(&mut buf).unwrap();
            let mut at = 0;
            let mut next = |head_only| {
                let (r, n) = parse_resp(&buf[at..], head_only).expect("short response");
                at += n;
                r
            };
            assert_eq!(next(false).body, b"0123456789abcdefghij");
            assert_eq!(next(true).header("content-length"), Some(large_len.to_string().as_str()));
            assert_eq!(next(false).body, b"ij");
            assert_eq!(next(false).body.len(), large_len);
            assert_eq!(next(false).body, b"<p>sub</p>");
            assert_eq!(at, buf.len());
        })
        .await;
        drop(fx);
    }

    async fn prefix_mount_in_router() {
        let fx = Fixture::new();
        let files = StaticFiles::new(&fx.root).unwrap().strip_prefix("/assets");
        let app = ringkit_http::Router::new()
            .get("/assets/*", files)
            .get("/hello", |_req: ringkit_http::Request| async {
                ringkit_http::Response::ok().body("hi")
            });
        let listener = ringkit::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        ringkit::spawn(async move {
            let server = ringkit_http::Server::from_listener(listener);
            let _ = server.with_shutdown(std::future::pending()).serve(app).await;
        });
        client(move || {
            assert_eq!(get(addr, "/assets/a.txt").body, b"0123456789abcdefghij");
            assert_eq!(get(addr, "/assets/sub/").body, b"<p>sub</p>");
            assert_eq!(get(addr, "/hello").body, b"hi");
            let r = get(addr, "/assets/../secret.txt");
            never_leaks(&r, "prefix traversal");
            assert!(matches!(r.status, 403 | 404));
        })
        .await;
        drop(fx);
    }
}

/// curl, when installed, against the same server (`-r`, `-z`, `-I`).
fn curl_available() -> bool {
    std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn curl(args: &[&str]) -> (String, Vec<u8>) {
    let out = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "60", "-o", "-", "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("run curl");
    assert!(
        out.status.success(),
        "curl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut body = out.stdout;
    let nl = body.iter().rposition(|&b| b == b'\n').unwrap();
    let code = String::from_utf8(body[nl + 1..].to_vec()).unwrap();
    body.truncate(nl);
    (code, body)
}

ringkit::test_all! {
    async fn with_curl() {
        if !curl_available() {
            eprintln!("skipped: curl is not installed");
            return;
        }
        let fx = Fixture::new();
        let addr = serve(StaticFiles::new(&fx.root).unwrap());
        let large = fx.large.clone();
        client(move || {
            let url = |p: &str| format!("http://{addr}{p}");
            assert_eq!(curl(&["-r", "0-9", &url("/a.txt")]), ("206".into(), b"0123456789".to_vec()));
            assert_eq!(curl(&["-r", "-3", &url("/a.txt")]), ("206".into(), b"hij".to_vec()));
            // -z DATE: If-Modified-Since; a date in the future gets 304.
            let (code, body) = curl(&["-z", "Fri, 01 Jan 2100 00:00:00 GMT", &url("/a.txt")]);
            assert_eq!((code.as_str(), body.len()), ("304", 0));
            let (code, body) = curl(&["-z", "Thu, 01 Jan 1970 00:00:01 GMT", &url("/a.txt")]);
            assert_eq!((code.as_str(), &body[..]), ("200", &b"0123456789abcdefghij"[..]));
            let (code, _) = curl(&["-I", &url("/large.bin")]);
            assert_eq!(code, "200");
            // --path-as-is keeps curl from normalising the dots away.
            let (code, body) = curl(&["--path-as-is", &url("/../secret.txt")]);
            assert!(code == "403" || code == "404", "{code}");
            assert!(find(&body, SECRET).is_none());
            let (code, body) = curl(&[&url("/large.bin")]);
            assert_eq!(code, "200");
            assert!(body == large, "curl: 8 MiB body differs");
        })
        .await;
        drop(fx);
    }
}
