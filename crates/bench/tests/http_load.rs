//! The built-in HTTP load generator against a tiny server on loopback, on
//! both backends: a correct server gives a clean run; a wrong body length, a
//! bad status or a truncated body make the run fail. No timed asserts.

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use ringkit::net::{TcpListener, TcpStream};
use ringkit_bench::http::load::{self, HttpLoadConfig, HttpLoadResult};

/// What the tiny server answers.
#[derive(Clone, Copy, Debug)]
enum Answer {
    /// `200`, empty body (like nginx `return 200;`).
    Ok,
    /// `200`, empty body, chunked.
    OkChunked,
    /// `200` with a 3-byte body (the generator expects 0).
    WrongLength,
    /// `500`, empty body.
    BadStatus,
    /// Claims 10 bytes of body, sends 3 and closes.
    ShortBody,
    /// `Ok`, each response 40 ms after the last.
    Slow,
    /// Reads every request, answers none.
    Silent,
}

impl Answer {
    fn bytes(self, close: bool) -> Vec<u8> {
        let conn = if close { "Connection: close\r\n" } else { "" };
        match self {
            Answer::Ok | Answer::Slow | Answer::Silent => {
                format!("HTTP/1.1 200 OK\r\n{conn}Content-Length: 0\r\n\r\n")
            }
            Answer::OkChunked => {
                format!("HTTP/1.1 200 OK\r\n{conn}Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
            }
            Answer::WrongLength => format!("HTTP/1.1 200 OK\r\n{conn}Content-Length: 3\r\n\r\nabc"),
            Answer::BadStatus => {
                format!("HTTP/1.1 500 Oops\r\n{conn}Content-Length: 0\r\n\r\n")
            }
            Answer::ShortBody => "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc".to_string(),
        }
        .into_bytes()
    }
}

/// `Slow`: each response leaves 40 ms after its request came, in order
/// (a delay line), however many are waiting.
async fn serve_slow(s: TcpStream) {
    let s = Rc::new(s);
    let line: Rc<std::cell::RefCell<std::collections::VecDeque<std::time::Instant>>> =
        Rc::default();
    let writer = {
        let (s, line) = (s.clone(), line.clone());
        ringkit::spawn(async move {
            loop {
                let front = line.borrow().front().copied();
                match front {
                    Some(at) if at <= std::time::Instant::now() => {
                        line.borrow_mut().pop_front();
                        if s.write_all(Answer::Ok.bytes(false)).await.0.is_err() {
                            return;
                        }
                    }
                    _ => ringkit::time::sleep(Duration::from_millis(1)).await,
                }
            }
        })
    };
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = Vec::with_capacity(4096);
    loop {
        buf.clear();
        let (res, b) = s.read(buf).await;
        buf = b;
        match res {
            Ok(0) | Err(_) => break,
            Ok(n) => pending.extend_from_slice(&buf[..n]),
        }
        while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            pending.drain(..end + 4);
            let at = std::time::Instant::now() + Duration::from_millis(40);
            line.borrow_mut().push_back(at);
        }
    }
    writer.abort();
}

async fn serve_conn(s: TcpStream, answer: Answer) {
    if let Answer::Slow = answer {
        return serve_slow(s).await;
    }
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = Vec::with_capacity(4096);
    loop {
        buf.clear();
        let (res, b) = s.read(buf).await;
        buf = b;
        match res {
            Ok(0) | Err(_) => return,
            Ok(n) => pending.extend_from_slice(&buf[..n]),
        }
        while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            let head: Vec<u8> = pending.drain(..end + 4).collect();
            let close = String::from_utf8_lossy(&head)
                .to_ascii_lowercase()
                .contains("connection: close");
            if let Answer::Silent = answer {
                continue;
            }
            if s.write_all(answer.bytes(close)).await.0.is_err() {
                return;
            }
            if close || matches!(answer, Answer::ShortBody) {
                return;
            }
        }
    }
}

/// Serve `answer` on this runtime while the generator runs on another
/// thread with the same backend; return what it measured.
async fn run(answer: Answer, close: bool) -> HttpLoadResult {
    run_at(answer, close, None).await
}

/// [`run`], in open loop at `rate` requests per second when given.
async fn run_at(answer: Answer, close: bool, rate: Option<f64>) -> HttpLoadResult {
    let l = Rc::new(TcpListener::bind("127.0.0.1:0").unwrap());
    let addr: SocketAddr = l.local_addr().unwrap();
    let server = {
        let l = l.clone();
        ringkit::spawn(async move {
            loop {
                let Ok((s, _)) = l.accept().await else {
                    continue;
                };
                ringkit::spawn(serve_conn(s, answer));
            }
        })
    };
    let mut cfg = HttpLoadConfig::new(addr, 8, Duration::from_millis(500));
    cfg.close = close;
    cfg.rate = rate;
    cfg.backend = ringkit::backend_report().expect("inside a runtime").chosen;
    let gen = std::thread::spawn(move || load::run_load(&cfg, &mut |_| {}));
    while !gen.is_finished() {
        ringkit::time::sleep(Duration::from_millis(5)).await;
    }
    server.abort();
    gen.join().expect("generator thread").expect("load run")
}

ringkit::test_all! {
    /// Open loop: the generator holds the asked rate (not the server's
    /// pace), every connection served about equally.
    async fn open_loop_holds_the_rate() {
        let r = run_at(Answer::Ok, false, Some(2000.0)).await;
        assert!(r.ok(), "{r:?}");
        // Counted by the schedule, sent or not: the asked rate.
        let rate = r.requests as f64 / r.secs;
        assert!((1800.0..2200.0).contains(&rate), "{rate:.0}/s: {r:?}");
        assert!(r.conn_min > 0, "{r:?}");
        assert_eq!(r.responses + r.unanswered + r.unsent, r.requests, "{r:?}");
    }

    /// A true open loop: responses 40 ms apart do not hold back the
    /// requests (one in flight per connection would send ~25 a second on
    /// each); several are in flight on a connection, pipelined. A server
    /// that never answers: every scheduled request is recorded with its
    /// wait up to the window's end, none dropped.
    async fn open_loop_sends_on_schedule_while_responses_are_late() {
        let r = run_at(Answer::Slow, false, Some(1000.0)).await;
        assert!(r.ok(), "{r:?}");
        let rate = r.requests as f64 / r.secs;
        assert!((900.0..1100.0).contains(&rate), "{rate:.0}/s: {r:?}");
        assert!(r.most_in_flight > 2, "{r:?}");
        assert!(r.p50_us >= 40_000.0, "{r:?}");
        assert_eq!(r.responses + r.unanswered + r.unsent, r.requests, "{r:?}");
        let r = run_at(Answer::Silent, false, Some(1000.0)).await;
        assert_eq!((r.responses, r.errors()), (0, 0), "{r:?}");
        assert_eq!(r.unanswered + r.unsent, r.requests, "{r:?}");
        assert!(r.requests > 300, "{r:?}");
        assert!(r.max_us >= 0.9 * r.secs * 1e6, "{r:?}");
    }

    /// An open loop pipelines by itself: --close and --pipeline are refused.
    async fn open_loop_refuses_close_and_pipeline() {
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let mut cfg = HttpLoadConfig::new(addr, 1, Duration::from_millis(10));
        cfg.rate = Some(10.0);
        cfg.close = true;
        let mut piped = cfg.clone();
        (piped.close, piped.pipeline) = (false, 2);
        for c in [cfg, piped] {
            let e = std::thread::spawn(move || load::run_load(&c, &mut |_| {}))
                .join()
                .unwrap()
                .unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
        }
    }

    async fn keep_alive_clean() {
        let r = run(Answer::Ok, false).await;
        assert!(r.ok(), "{r:?}");
        assert_eq!(r.errors(), 0);
        assert_eq!(r.expected_body_len, Some(0));
        assert!(r.responses > 0 && r.requests >= r.responses);
    }

    async fn chunked_clean() {
        let r = run(Answer::OkChunked, false).await;
        assert!(r.ok(), "{r:?}");
    }

    async fn close_clean() {
        let r = run(Answer::Ok, true).await;
        assert!(r.ok(), "{r:?}");
        assert!(r.responses > 0);
    }

    async fn wrong_body_length_fails() {
        let r = run(Answer::WrongLength, false).await;
        assert!(!r.ok());
        assert!(r.bad_body > 0, "{r:?}");
        assert_eq!(r.bad_status, 0);
    }

    async fn bad_status_fails() {
        let r = run(Answer::BadStatus, false).await;
        assert!(!r.ok());
        assert!(r.bad_status > 0, "{r:?}");
        let r = run(Answer::BadStatus, true).await;
        assert!(!r.ok() && r.bad_status > 0, "{r:?}");
    }

    async fn short_body_fails() {
        let r = run(Answer::ShortBody, false).await;
        assert!(!r.ok());
        assert!(r.read_errors > 0, "{r:?}");
        assert!(r.first_error.is_some());
    }
}

/// A server whose body is 1000 bytes, one byte of which it corrupts in
/// one response out of `every` (0: never).
async fn serve_corrupting(s: TcpStream, every: u64, count: Rc<std::cell::Cell<u64>>) {
    let body: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = Vec::with_capacity(4096);
    loop {
        let (res, b) = s.read(buf).await;
        buf = b;
        match res {
            Ok(0) | Err(_) => return,
            Ok(n) => pending.extend_from_slice(&buf[..n]),
        }
        while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            pending.drain(..end + 4);
            let n = count.get() + 1;
            count.set(n);
            let mut resp = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n".to_vec();
            let at = resp.len();
            resp.extend_from_slice(&body);
            if every > 0 && n % every == 0 {
                resp[at + 500] ^= 0x20;
            }
            if s.write_all(resp).await.0.is_err() {
                return;
            }
        }
    }
}

async fn run_corrupting(every: u64) -> HttpLoadResult {
    let l = Rc::new(TcpListener::bind("127.0.0.1:0").unwrap());
    let addr: SocketAddr = l.local_addr().unwrap();
    let count = Rc::new(std::cell::Cell::new(0u64));
    let server = {
        let (l, count) = (l.clone(), count.clone());
        ringkit::spawn(async move {
            loop {
                let Ok((s, _)) = l.accept().await else {
                    continue;
                };
                ringkit::spawn(serve_corrupting(s, every, count.clone()));
            }
        })
    };
    let body: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
    let mut cfg = HttpLoadConfig::new(addr, 4, Duration::from_millis(400));
    cfg.backend = ringkit::backend_report().expect("inside a runtime").chosen;
    cfg.expect_body_len = Some(1000);
    cfg.expect_crc32c = Some(crc32c::crc32c(&body));
    let gen = std::thread::spawn(move || load::run_load(&cfg, &mut |_| {}));
    while !gen.is_finished() {
        ringkit::time::sleep(Duration::from_millis(5)).await;
    }
    server.abort();
    let r = gen.join().expect("generator thread").expect("load run");
    assert!(
        count.get() > 2 * every.max(1),
        "too few responses ({}) for the test to mean anything",
        count.get()
    );
    r
}

ringkit::test_all! {
    /// Bodies are checked byte for byte: one corrupted byte in a thousand
    /// responses fails the run; a correct server passes with every
    /// response checked.
    async fn a_corrupted_byte_fails_the_sample() {
        let clean = run_corrupting(0).await;
        assert!(clean.ok(), "{clean:?}");
        assert!(clean.verified >= clean.responses, "{clean:?}");
        let bad = run_corrupting(1000).await;
        assert!(!bad.ok(), "{bad:?}");
        assert!(bad.bad_content > 0, "{bad:?}");
        assert_eq!(bad.bad_body, 0);
        assert!(bad.first_error.as_deref().is_some_and(|e| e.contains("CRC-32C")), "{bad:?}");
    }
}
