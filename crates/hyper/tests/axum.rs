//! An axum app on ringkit-hyper, on both backends, driven by real clients:
//! hyper's client over a ringkit stream (keep-alive, a 4 MiB body each
//! way), curl (HTTP/1.1 keep-alive and HTTP/2 prior knowledge) and
//! Python's `http.client`; and a graceful shutdown that lets the request in
//! flight finish. A client tool that is not installed is skipped with a
//! printed reason.

use std::cell::Cell;
use std::net::SocketAddr;
use std::process::Command;
use std::rc::Rc;
use std::time::Duration;

use axum::extract::Path;
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use ringkit::net::{TcpListener, TcpStream};

fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "Hello, World!" }))
        .route(
            "/json",
            get(|| async { Json(serde_json_like("message", "Hello, World!")) }),
        )
        .route(
            "/user/{id}",
            get(|Path(id): Path<String>| async move { Json(serde_json_like("id", &id)) }),
        )
        .route("/echo", post(|body: Bytes| async move { body }))
        .layer(axum::extract::DefaultBodyLimit::max(8 << 20))
        .route(
            "/slow",
            get(|| async {
                ringkit::time::sleep(Duration::from_millis(300)).await;
                "slow done"
            }),
        )
}

/// A one-field JSON object (keeps serde_json out of the dev-dependencies).
fn serde_json_like(k: &str, v: &str) -> std::collections::BTreeMap<String, String> {
    [(k.to_string(), v.to_string())].into()
}

/// Start the app on this runtime; returns its address and the switch that
/// starts a graceful shutdown.
fn start() -> (
    SocketAddr,
    Rc<Cell<bool>>,
    ringkit::JoinHandle<std::io::Result<()>>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = Rc::new(Cell::new(false));
    let flag = stop.clone();
    let shutdown = async move {
        while !flag.get() {
            ringkit::time::sleep(Duration::from_millis(5)).await;
        }
    };
    let h = ringkit::spawn(ringkit_hyper::serve_listener(
        listener,
        app(),
        None,
        shutdown,
        ringkit_hyper::ConnLimits {
            grace: Duration::from_secs(5),
            ..Default::default()
        },
    ));
    (addr, stop, h)
}

/// Run a blocking client on its own thread while this runtime keeps serving.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let h = std::thread::spawn(f);
    while !h.is_finished() {
        ringkit::time::sleep(Duration::from_millis(2)).await;
    }
    h.join().unwrap()
}

fn have(tool: &str) -> bool {
    let ok = Command::new(tool).arg("--version").output().is_ok();
    if !ok {
        eprintln!("skipped: {tool} not installed");
    }
    ok
}

async fn body_text(r: hyper::Response<hyper::body::Incoming>) -> (u16, Vec<u8>) {
    let status = r.status().as_u16();
    (
        status,
        r.into_body().collect().await.unwrap().to_bytes().to_vec(),
    )
}

ringkit::test_all! {
    async fn hyper_client_keep_alive_and_large_bodies() {
        let (addr, stop, server) = start();
        let stream = TcpStream::connect(addr).await.unwrap();
        let (mut tx, conn) = ringkit_hyper::client::handshake::<Full<Bytes>>(stream).await.unwrap();
        let conn = ringkit::spawn(conn);
        for (path, want) in [
            ("/", &b"Hello, World!"[..]),
            ("/json", &br#"{"message":"Hello, World!"}"#[..]),
            ("/user/7", &br#"{"id":"7"}"#[..]),
            ("/", &b"Hello, World!"[..]),
        ] {
            let req = Request::get(path).header("host", "x").body(Full::default()).unwrap();
            let (status, body) = body_text(tx.send_request(req).await.unwrap()).await;
            assert_eq!((status, body.as_slice()), (200, want), "{path}");
        }
        // 4 MiB each way on the same connection: reads across many ring
        // buffers, writes past the send buffer's high-water mark.
        let big: Vec<u8> = (0..4u32 << 20).map(|i| (i * 7 % 251) as u8).collect();
        let req = Request::post("/echo")
            .header("host", "x")
            .body(Full::new(Bytes::from(big.clone())))
            .unwrap();
        let (status, body) = body_text(tx.send_request(req).await.unwrap()).await;
        assert_eq!(status, 200);
        assert!(body == big, "echoed body differs ({} bytes)", body.len());
        let req = Request::get("/nope").header("host", "x").body(Full::default()).unwrap();
        assert_eq!(tx.send_request(req).await.unwrap().status(), 404);
        drop(tx);
        let _ = conn.await;
        stop.set(true);
        server.await.unwrap().unwrap();
    }

    async fn curl_http1_keep_alive_and_http2() {
        if !have("curl") {
            return;
        }
        let (addr, stop, server) = start();
        let out = blocking(move || {
            let one = Command::new("curl")
                .args(["-sS", "-w", " %{http_version} %{num_connects}\n"])
                .arg(format!("http://{addr}/"))
                .arg(format!("http://{addr}/user/abc"))
                .output()
                .unwrap();
            let two = Command::new("curl")
                .args(["-sS", "--http2-prior-knowledge", "-w", " %{http_version}\n"])
                .arg(format!("http://{addr}/json"))
                .output()
                .unwrap();
            (one, two)
        })
        .await;
        let one = String::from_utf8_lossy(&out.0.stdout).into_owned();
        assert!(out.0.status.success(), "{one} {}", String::from_utf8_lossy(&out.0.stderr));
        // Two requests, one connection (the second reused it: 0 new connects).
        assert_eq!(one, "Hello, World! 1.1 1\n{\"id\":\"abc\"} 1.1 0\n");
        let two = String::from_utf8_lossy(&out.1.stdout).into_owned();
        assert!(out.1.status.success(), "{two}");
        assert_eq!(two, "{\"message\":\"Hello, World!\"} 2\n");
        stop.set(true);
        server.await.unwrap().unwrap();
    }

    async fn python_http_client() {
        if !have("python3") {
            return;
        }
        let (addr, stop, server) = start();
        let script = format!(
            "import http.client\n\
             c = http.client.HTTPConnection('127.0.0.1', {port})\n\
             for p in ['/', '/json', '/user/py']:\n    \
                 c.request('GET', p)\n    \
                 r = c.getresponse()\n    \
                 print(r.status, r.read().decode())\n\
             c.request('POST', '/echo', body=b'x' * 100000)\n\
             r = c.getresponse()\n\
             print(r.status, len(r.read()))\n",
            port = addr.port()
        );
        let out = blocking(move || Command::new("python3").arg("-c").arg(script).output().unwrap()).await;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{text} {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(
            text,
            "200 Hello, World!\n200 {\"message\":\"Hello, World!\"}\n200 {\"id\":\"py\"}\n200 100000\n"
        );
        stop.set(true);
        server.await.unwrap().unwrap();
    }

    async fn graceful_shutdown_finishes_the_request_in_flight() {
        let (addr, stop, server) = start();
        let stream = TcpStream::connect(addr).await.unwrap();
        let (mut tx, conn) = ringkit_hyper::client::handshake::<Full<Bytes>>(stream).await.unwrap();
        let conn = ringkit::spawn(conn);
        let req = Request::get("/slow").header("host", "x").body(Full::default()).unwrap();
        let resp = ringkit::spawn(async move {
            let r = tx.send_request(req).await;
            r.map(|r| r.status().as_u16())
        });
        ringkit::time::sleep(Duration::from_millis(100)).await;
        stop.set(true);
        // While the request in flight drains, the listener is closed: a
        // new client is refused at once (it used to get a connection that
        // nobody served, then a reset when the drain ended).
        ringkit::time::sleep(Duration::from_millis(30)).await;
        let late = blocking(move || std::net::TcpStream::connect(addr)).await;
        assert!(
            matches!(&late, Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused),
            "connect during the drain: {late:?}"
        );
        let status = resp.await.unwrap();
        assert_eq!(status.unwrap(), 200);
        // The server returns once the connection is done, well within grace.
        ringkit::time::timeout(Duration::from_secs(3), server).await.unwrap().unwrap().unwrap();
        let _ = conn.await;
        // And no longer accepts.
        assert!(std::net::TcpStream::connect(addr).is_err(), "still listening");
    }
}

/// An address that cannot be bound is `serve`'s error, naming the address;
/// the caller's code after `serve` runs (it used to exit the process).
#[test]
fn serve_returns_a_bind_error_naming_the_address() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap();
    let mut cfg = ringkit_hyper::ServeConfig::new(addr);
    cfg.threads = 2;
    let e = ringkit_hyper::serve(cfg, app).expect_err("bound a busy address");
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "{e}");
    assert!(e.to_string().contains(&addr.to_string()), "{e}");
}

/// `serve` called where a tokio runtime is current (a `#[tokio::main]`
/// that made a pool, then called `serve`) logs a warning that says why and
/// what to do: requests drawing a connection made on the outer runtime used
/// to hang until the pool's timeout. (A busy address makes `serve` return
/// right after.)
#[test]
fn serve_inside_a_tokio_runtime_warns() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap();
    let outer = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let sink = out.clone();
    let sub = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || Sink(sink.clone()))
        .finish();
    let r = tracing::subscriber::with_default(sub, || {
        outer.block_on(async { ringkit_hyper::serve(ringkit_hyper::ServeConfig::new(addr), app) })
    });
    assert!(r.is_err(), "bound a busy address");
    let text = String::from_utf8_lossy(&out.lock().unwrap()).into_owned();
    assert!(
        text.contains("WARN") && text.contains("tokio runtime is current"),
        "{text:?}"
    );
    assert!(text.contains("closure"), "{text:?}");
}

struct Sink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `ServeConfig::new` runs one thread per available core, as a tokio user
/// expects (it used to run one).
#[test]
fn serve_config_defaults_to_a_thread_per_core() {
    let cfg = ringkit_hyper::ServeConfig::new("127.0.0.1:0".parse().unwrap());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(cfg.threads, cores);
}
