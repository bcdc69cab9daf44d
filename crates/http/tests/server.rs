//! The server over real sockets, on both backends: keep-alive, HTTP/1.0,
//! pipelining, HEAD, chunked uploads, `Expect: 100-continue`, the router's
//! 404/405, a panicking handler, limits, timeouts, the connection cap and
//! graceful shutdown.

mod harness;

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use harness::*;
use ringkit_http::{Limits, Method, Request, Response, Router, Server, ServerConfig};

fn app() -> Router {
    Router::new()
        .get("/", |_req: Request| async { Response::ok().body("hello") })
        .route(Method::Post, "/echo", |req: Request| async move {
            Response::ok().body(req.into_body())
        })
        .get("/panic", |_req: Request| async {
            if true {
                panic!("handler panicked on purpose");
            }
            Response::ok()
        })
        .get("/big", |_req: Request| async {
            Response::ok().body(
                (0..100_000u32)
                    .map(|i| (i % 251) as u8)
                    .collect::<Vec<u8>>(),
            )
        })
        .get("/close", |_req: Request| async {
            Response::ok().body("bye").close()
        })
        .get("/query", |req: Request| async move {
            Response::ok().body(format!("{}|{}", req.path(), req.query().unwrap_or("-")))
        })
}

fn small_limits() -> ServerConfig {
    ServerConfig {
        limits: Limits {
            max_body_bytes: 1000,
            max_head_bytes: 2048,
            max_headers: 20,
            max_uri_len: 256,
        },
        ..ServerConfig::default()
    }
}

/// Send one request on a fresh connection and expect exactly one response
/// with this status, `Connection: close`, then EOF.
fn refused(addr: std::net::SocketAddr, req: &[u8], status: u16) {
    let out = exchange(addr, req);
    let resps = parse_all(&out);
    assert_eq!(resps.len(), 1, "{:?}", String::from_utf8_lossy(&out));
    assert_eq!(
        resps[0].status,
        status,
        "{:?}",
        String::from_utf8_lossy(req)
    );
    assert!(resps[0].closes(), "{:?}", resps[0]);
}

ringkit::test_all! {
    async fn get_and_keep_alive() {
        with_server(ServerConfig::default(), app(), |addr| {
            let mut s = connect(addr);
            let mut carry = Vec::new();
            for _ in 0..3 {
                s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
                let r = read_response(&mut s, false, &mut carry);
                assert_eq!((r.status, &r.body[..]), (200, &b"hello"[..]));
                assert_eq!(r.header("content-length"), Some("5"));
                assert!(!r.closes());
                httpdate::parse_http_date(r.header("date").unwrap()).unwrap();
            }
        })
        .await;
    }

    async fn http10_closes_unless_keep_alive() {
        with_server(ServerConfig::default(), app(), |addr| {
            let out = exchange(addr, b"GET / HTTP/1.0\r\n\r\n");
            let r = parse_all(&out);
            assert_eq!(r.len(), 1);
            assert!(r[0].closes());
            let mut s = connect(addr);
            let mut carry = Vec::new();
            for _ in 0..2 {
                s.write_all(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").unwrap();
                let r = read_response(&mut s, false, &mut carry);
                assert_eq!(r.status, 200);
                assert_eq!(r.header("connection"), Some("keep-alive"));
            }
        })
        .await;
    }

    async fn pipelined_in_order() {
        with_server(ServerConfig::default(), app(), |addr| {
            let req = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n\
                POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc\
                GET /missing HTTP/1.1\r\nHost: t\r\n\r\n\
                POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nxy\r\n1\r\nz\r\n0\r\n\r\n\
                GET /query?a=1 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n\
                GET / HTTP/1.1\r\nHost: t\r\n\r\n";
            let r = parse_all(&exchange(addr, req));
            let got: Vec<(u16, &[u8])> = r.iter().map(|r| (r.status, &r.body[..])).collect();
            assert_eq!(
                got,
                vec![
                    (200, &b"hello"[..]),
                    (200, b"abc"),
                    (404, b"not found\n"),
                    (200, b"xyz"),
                    (200, b"/query|a=1"),
                ]
            );
            assert!(r[4].closes());
        })
        .await;
    }

    async fn many_pipelined() {
        with_server(ServerConfig::default(), app(), |addr| {
            let one = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";
            let req: Vec<u8> = one.iter().copied().cycle().take(one.len() * 500).collect();
            let r = parse_all(&exchange(addr, &req));
            assert_eq!(r.len(), 500);
            assert!(r.iter().all(|r| r.status == 200 && r.body == b"hello"));
        })
        .await;
    }

    async fn head_sends_no_body() {
        with_server(ServerConfig::default(), app(), |addr| {
            let out = exchange(addr, b"HEAD /big HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
            let (r, n) = parse_response(&out, true).unwrap();
            assert_eq!(r.status, 200);
            assert_eq!(r.header("content-length"), Some("100000"));
            assert_eq!(n, out.len(), "bytes after a HEAD response");
        })
        .await;
    }

    async fn big_body() {
        with_server(ServerConfig::default(), app(), |addr| {
            let r = parse_all(&exchange(addr, b"GET /big HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n"));
            assert_eq!(r.len(), 2);
            let want: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
            assert_eq!(r[0].body, want);
            assert_eq!(r[1].body, b"hello");
        })
        .await;
    }

    async fn expect_continue() {
        with_server(ServerConfig::default(), app(), |addr| {
            let mut s = connect(addr);
            s.write_all(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n").unwrap();
            let mut carry = Vec::new();
            let r = read_response(&mut s, false, &mut carry);
            assert_eq!(r.status, 100);
            s.write_all(b"hello").unwrap();
            let r = read_response(&mut s, false, &mut carry);
            assert_eq!((r.status, &r.body[..]), (200, &b"hello"[..]));
            // A body over the limit is refused without 100.
            refused(addr, b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5000000\r\nExpect: 100-continue\r\n\r\n", 413);
            refused(addr, b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: magic\r\n\r\nhello", 417);
        })
        .await;
    }

    async fn router_404_405() {
        with_server(ServerConfig::default(), app(), |addr| {
            let r = parse_all(&exchange(
                addr,
                b"GET /nope HTTP/1.1\r\nHost: t\r\n\r\nDELETE / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
            ));
            assert_eq!(r.len(), 2);
            assert_eq!(r[0].status, 404);
            assert_eq!(r[1].status, 405);
            assert_eq!(r[1].header("allow"), Some("GET, HEAD"));
        })
        .await;
    }

    async fn panicking_handler_gets_500_and_server_lives() {
        with_server(ServerConfig::default(), app(), |addr| {
            let out = exchange(addr, b"GET /panic HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n");
            let r = parse_all(&out);
            assert_eq!(r.len(), 1, "the connection must close after the 500");
            assert_eq!(r[0].status, 500);
            assert!(r[0].closes());
            let r = parse_all(&exchange(addr, b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"));
            assert_eq!(r[0].status, 200);
        })
        .await;
    }

    async fn handler_asks_to_close() {
        with_server(ServerConfig::default(), app(), |addr| {
            let r = parse_all(&exchange(addr, b"GET /close HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n"));
            assert_eq!(r.len(), 1);
            assert!(r[0].closes());
        })
        .await;
    }

    async fn limits_413_414_431() {
        with_server(small_limits(), app(), |addr| {
            refused(addr, b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1001\r\n\r\n", 413);
            let mut chunked = b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            for _ in 0..3 {
                chunked.extend_from_slice(b"190\r\n");
                chunked.extend_from_slice(&[b'a'; 400]);
                chunked.extend_from_slice(b"\r\n");
            }
            chunked.extend_from_slice(b"0\r\n\r\n");
            refused(addr, &chunked, 413);
            let long_uri = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(300));
            refused(addr, long_uri.as_bytes(), 414);
            let long_line = format!("GET /{}", "a".repeat(5000));
            refused(addr, long_line.as_bytes(), 414);
            let big_head = format!("GET / HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n", "b".repeat(3000));
            refused(addr, big_head.as_bytes(), 431);
            let mut many = String::from("GET / HTTP/1.1\r\nHost: t\r\n");
            for i in 0..30 {
                many.push_str(&format!("X-{i}: v\r\n"));
            }
            many.push_str("\r\n");
            refused(addr, many.as_bytes(), 431);
            // Under the limits all is well.
            let r = parse_all(&exchange(addr, b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc"));
            assert_eq!(r[0].body, b"abc");
        })
        .await;
    }

    async fn bad_requests_close() {
        with_server(ServerConfig::default(), app(), |addr| {
            refused(addr, b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400);
            refused(addr, b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 400);
            refused(addr, b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n", 400);
            refused(addr, b"GET / HTTP/2.0\r\nHost: t\r\n\r\n", 505);
            refused(addr, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 400);
            refused(addr, b"GET / HTTP/1.1\r\n\r\n", 400);
        })
        .await;
    }

    async fn header_timeout_408() {
        let c = ServerConfig {
            header_timeout: Duration::from_millis(300),
            ..ServerConfig::default()
        };
        with_server(c, app(), |addr| {
            let mut s = connect(addr);
            s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n").unwrap();
            let r = parse_all(&read_to_end(&mut s));
            assert_eq!(r.len(), 1);
            assert_eq!(r[0].status, 408);
            assert!(r[0].closes());
        })
        .await;
    }

    async fn idle_timeout_closes_silently() {
        let c = ServerConfig {
            idle_timeout: Duration::from_millis(300),
            ..ServerConfig::default()
        };
        with_server(c, app(), |addr| {
            let mut s = connect(addr);
            s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
            let mut carry = Vec::new();
            assert_eq!(read_response(&mut s, false, &mut carry).status, 200);
            // Then nothing: the server closes without a response.
            assert!(read_to_end(&mut s).is_empty());
        })
        .await;
    }

    async fn connection_cap() {
        let c = ServerConfig {
            max_connections: 1,
            ..ServerConfig::default()
        };
        with_server(c, app(), |addr| {
            let mut a = connect(addr);
            a.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
            let mut carry = Vec::new();
            assert_eq!(read_response(&mut a, false, &mut carry).status, 200);
            // A is open and counted: B is accepted and closed at once.
            let mut b = connect(addr);
            let _ = b.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
            assert!(read_to_end(&mut b).is_empty());
            a.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
            assert_eq!(read_response(&mut a, false, &mut carry).status, 200);
        })
        .await;
    }

    async fn a_drain_does_not_wait_on_idle_keep_alive_clients() {
        let listener = ringkit::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let server = ringkit::spawn(
            Server::from_listener(listener)
                .with_shutdown(async move {
                    while !stop2.load(Ordering::SeqCst) {
                        ringkit::time::sleep(Duration::from_millis(5)).await;
                    }
                })
                .serve(app()),
        );
        // Ten clients, one request each, then idle: they neither read nor
        // close (a connection pool). The drain waited 2 s for each.
        let idle = std::thread::spawn(move || {
            (0..10)
                .map(|_| {
                    let mut c = connect(addr);
                    let mut carry = Vec::new();
                    c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
                    assert_eq!(read_response(&mut c, false, &mut carry).status, 200);
                    c
                })
                .collect::<Vec<_>>()
        });
        while !idle.is_finished() {
            ringkit::time::sleep(Duration::from_millis(2)).await;
        }
        let held = idle.join().unwrap();
        let t0 = std::time::Instant::now();
        stop.store(true, Ordering::SeqCst);
        let served = ringkit::time::timeout(Duration::from_secs(10), server).await;
        served.unwrap().unwrap().unwrap();
        // The linger is 100 ms; the bug this guards against took 2 s. 1.5 s
        // leaves a busy machine room without hiding it.
        assert!(t0.elapsed() < Duration::from_millis(1500), "drain took {:?}", t0.elapsed());
        drop(held);
    }

    async fn graceful_shutdown() {
        let listener = ringkit::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let started = Arc::new(AtomicBool::new(false));
        let (stop2, started2) = (stop.clone(), started.clone());
        let app = app().get("/slow", move |_req: Request| {
            let started = started2.clone();
            async move {
                started.store(true, Ordering::SeqCst);
                ringkit::time::sleep(Duration::from_millis(300)).await;
                Response::ok().body("slow")
            }
        });
        let stop3 = stop.clone();
        let server = ringkit::spawn(
            Server::from_listener(listener)
                .with_shutdown(async move {
                    while !stop3.load(Ordering::SeqCst) {
                        ringkit::time::sleep(Duration::from_millis(5)).await;
                    }
                })
                .serve(app),
        );
        let client = std::thread::spawn(move || {
            // A: one request, then idle on keep-alive.
            let mut a = connect(addr);
            let mut carry = Vec::new();
            a.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
            assert_eq!(read_response(&mut a, false, &mut carry).status, 200);
            // B: a request in flight when shutdown starts.
            let mut b = connect(addr);
            b.write_all(b"GET /slow HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
            while !started.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(2));
            }
            stop2.store(true, Ordering::SeqCst);
            // A is idle: closed without a response.
            assert!(read_to_end(&mut a).is_empty());
            // B finishes its response, marked close, then EOF.
            let r = parse_all(&read_to_end(&mut b));
            assert_eq!(r.len(), 1);
            assert_eq!((r[0].status, &r[0].body[..]), (200, &b"slow"[..]));
            assert!(r[0].closes());
            // The listener is closed.
            assert!(std::net::TcpStream::connect(addr).is_err());
        });
        while !client.is_finished() {
            ringkit::time::sleep(Duration::from_millis(2)).await;
        }
        stop.store(true, Ordering::SeqCst);
        let res = client.join();
        let served = ringkit::time::timeout(Duration::from_secs(60), server).await;
        if let Err(p) = res {
            std::panic::resume_unwind(p);
        }
        served.unwrap().unwrap().unwrap();
    }
}
