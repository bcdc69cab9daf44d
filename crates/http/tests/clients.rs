//! Real clients against the server on loopback, on both backends: curl
//! (HTTP/1.0, HTTP/1.1, keep-alive across two URLs, `Expect: 100-continue`)
//! and Python's `http.client` (keep-alive, chunked upload, HEAD).
//!
//! A fresh machine may lack curl or python3: each test probes first and
//! skips with a printed reason instead of failing.

mod harness;

use std::cell::Cell;
use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::rc::Rc;

use harness::*;
use ringkit_http::{Method, Request, Response, Router, ServerConfig};

fn app() -> Router {
    Router::new()
        .get("/", |_req: Request| async {
            Response::ok().body("hello\n")
        })
        .get("/two", |_req: Request| async {
            Response::ok().body("two\n")
        })
        .route(Method::Post, "/echo", |req: Request| async move {
            Response::ok().body(req.into_body())
        })
}

/// Whether `tool --version` runs; prints why a test is skipped if not.
fn have(tool: &str) -> bool {
    let ok = Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: {tool} is not installed (apt-get install {tool})");
    }
    ok
}

fn run(cmd: &mut Command, stdin: &[u8]) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn client");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().expect("client output");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn curl(args: &[&str], stdin: &[u8]) -> (String, String) {
    let out = run(
        Command::new("curl")
            .args(["-sS", "--max-time", "60"])
            .args(args),
        stdin,
    );
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const PYTHON: &str = r#"
import http.client, json, sys
port = int(sys.argv[1])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
out = []
def req(method, path, body=None, headers={}, chunked=False):
    c.request(method, path, body=body, headers=headers, encode_chunked=chunked)
    r = c.getresponse()
    data = r.read()
    out.append({"status": r.status, "body": data.decode(), "len": r.getheader("content-length"),
                "date": r.getheader("date") is not None})
req("GET", "/")
req("GET", "/two")
req("POST", "/echo", body=b"posted")
req("POST", "/echo", body=iter([b"ab", b"cd", b"ef"]), headers={"Transfer-Encoding": "chunked"}, chunked=True)
req("HEAD", "/")
req("GET", "/missing")
req("DELETE", "/")
print(json.dumps(out))
"#;

ringkit::test_all! {
    async fn curl_versions() {
        if !have("curl") {
            return;
        }
        with_server(ServerConfig::default(), app(), |addr| {
            let url = format!("http://{addr}/");
            for v in ["--http1.0", "--http1.1"] {
                let (body, _) = curl(&[v, &url], b"");
                assert_eq!(body, "hello\n", "{v}");
            }
            let (out, _) = curl(&["-o", "/dev/null", "-w", "%{http_code}", &format!("{url}missing")], b"");
            assert_eq!(out, "404");
        })
        .await;
    }

    async fn curl_keep_alive_two_urls() {
        if !have("curl") {
            return;
        }
        let accepted = Rc::new(Cell::new(0u64));
        with_server_counted(ServerConfig::default(), app(), accepted.clone(), |addr| {
            let (body, _) = curl(&[&format!("http://{addr}/"), &format!("http://{addr}/two")], b"");
            assert_eq!(body, "hello\ntwo\n");
        })
        .await;
        assert_eq!(accepted.get(), 1, "curl should reuse one connection for both URLs");
    }

    async fn curl_expect_continue() {
        if !have("curl") {
            return;
        }
        with_server(ServerConfig::default(), app(), |addr| {
            let (body, err) = curl(
                &[
                    "-v",
                    "-H",
                    "Expect: 100-continue",
                    "--data-binary",
                    "@-",
                    &format!("http://{addr}/echo"),
                ],
                b"some body bytes",
            );
            assert_eq!(body, "some body bytes");
            assert!(err.contains("HTTP/1.1 100 Continue"), "no 100 Continue seen:\n{err}");
        })
        .await;
    }

    async fn python_http_client() {
        if !have("python3") {
            return;
        }
        let accepted = Rc::new(Cell::new(0u64));
        with_server_counted(ServerConfig::default(), app(), accepted.clone(), |addr| {
            let out = run(
                Command::new("python3").args(["-c", PYTHON, &addr.port().to_string()]),
                b"",
            );
            let got = String::from_utf8(out.stdout).unwrap();
            let want = concat!(
                r#"[{"status": 200, "body": "hello\n", "len": "6", "date": true}, "#,
                r#"{"status": 200, "body": "two\n", "len": "4", "date": true}, "#,
                r#"{"status": 200, "body": "posted", "len": "6", "date": true}, "#,
                r#"{"status": 200, "body": "abcdef", "len": "6", "date": true}, "#,
                r#"{"status": 200, "body": "", "len": "6", "date": true}, "#,
                r#"{"status": 404, "body": "not found\n", "len": "10", "date": true}, "#,
                r#"{"status": 405, "body": "method not allowed\n", "len": "19", "date": true}]"#,
            );
            assert_eq!(got.trim(), want);
        })
        .await;
        assert_eq!(accepted.get(), 1, "http.client should keep one connection");
    }
}
