//! ringkit-hyper with the `tokio` feature: `serve` runs hosted workers, so
//! handlers use tokio (timers, spawn, a tokio socket); a handler that
//! panics costs its connection only and the worker keeps serving. Both
//! backends; the client is a plain blocking socket on its own thread.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use ringkit::Backend;

fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "ok" }))
        .route(
            "/tokio",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                let t = tokio::spawn(async { 40 + 2 });
                let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let a = l.local_addr().unwrap();
                let c =
                    tokio::spawn(async move { tokio::net::TcpStream::connect(a).await.is_ok() });
                let _ = l.accept().await.unwrap();
                format!("{} {}", t.await.unwrap(), c.await.unwrap())
            }),
        )
        .route(
            "/stuck",
            // A blocking job that outlives the server (an hour).
            get(|| async {
                tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_secs(3600)));
                "started"
            }),
        )
        .route(
            "/panic",
            get(|| async {
                if true {
                    panic!("handler panicked on purpose");
                }
                "unreachable"
            }),
        )
}

/// One request on a new connection; `None` when the server closed it
/// without an answer.
fn request(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    match s.read_to_string(&mut out) {
        Ok(_) if !out.is_empty() => Some(out),
        _ => None,
    }
}

type Server = std::thread::JoinHandle<std::io::Result<()>>;

fn start(backend: Backend) -> (SocketAddr, Server) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut cfg = ringkit_hyper::ServeConfig::new(addr);
    cfg.backend = backend;
    cfg.threads = 1;
    cfg.grace = Duration::from_secs(1);
    let server = std::thread::spawn(move || ringkit_hyper::serve(cfg, app));
    let start = std::time::Instant::now();
    while TcpStream::connect(addr).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "server did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (addr, server)
}

fn check(addr: SocketAddr) {
    let r = request(addr, "/tokio").expect("an answer");
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(r.ends_with("42 true"), "{r}");
    for _ in 0..3 {
        // The panicking request gets no answer (its connection closes) ...
        if let Some(r) = request(addr, "/panic") {
            assert!(r.starts_with("HTTP/1.1 500"), "{r}");
        }
        // ... and the worker keeps serving.
        let r = request(addr, "/").expect("the worker still serves");
        assert!(r.starts_with("HTTP/1.1 200") && r.ends_with("ok"), "{r}");
    }
}

/// Both backends at once, then one SIGTERM for the process: each hosted
/// server sees it (a signal's wake reaches a hosted ring), drains and
/// returns Ok, within its grace (1 s) twice over although a
/// `spawn_blocking` job of an hour is still running (`serve` used to wait
/// for it).
#[test]
fn serve_hosts_tokio_and_survives_panicking_handlers() {
    let mut servers = vec![start(Backend::Epoll)];
    if ringkit::Builder::new()
        .backend(Backend::Uring)
        .build()
        .is_ok()
    {
        servers.push(start(Backend::Uring));
    } else {
        eprintln!("skipped uring: io_uring unavailable");
    }
    for (addr, _) in &servers {
        check(*addr);
        let r = request(*addr, "/stuck").expect("an answer");
        assert!(r.ends_with("started"), "{r}");
    }
    let t0 = std::time::Instant::now();
    // SAFETY: signalling our own process; `serve` installed the handler,
    // which turns the signal into a graceful shutdown.
    unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
    for (_, h) in servers {
        h.join().unwrap().unwrap();
    }
    let took = t0.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "serve returned after {took:?}"
    );
}
