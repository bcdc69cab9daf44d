//! Hostile input over real sockets, on both backends: random bytes and
//! mutated requests must never make the server panic (a panic hook counts
//! every panic in this test binary, which has no handler that panics on
//! purpose), every answer must be well-formed HTTP, and the server must keep
//! serving. A request trickled in one byte per write is served too.

mod harness;

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use harness::*;
use ringkit_http::{Method, Request, Response, Router, ServerConfig};

static PANICS: AtomicUsize = AtomicUsize::new(0);

fn count_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            prev(info);
        }));
    });
}

fn app() -> Router {
    Router::new()
        .get("/", |_req: Request| async { Response::ok().body("ok") })
        .route(Method::Post, "/echo", |req: Request| async move {
            Response::ok().body(req.into_body())
        })
}

/// xorshift64*: reproducible without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const SEEDS: &[&[u8]] = &[
    b"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
    b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
    b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
];

/// A seed request with a few bytes changed, inserted or removed, or plain
/// random bytes; always ends with a well-formed request and close, so a
/// connection the server kept open still ends.
fn mutant(rng: &mut Rng) -> Vec<u8> {
    let mut v = if rng.below(4) == 0 {
        (0..rng.below(200)).map(|_| rng.next() as u8).collect()
    } else {
        SEEDS[rng.below(SEEDS.len())].to_vec()
    };
    for _ in 0..rng.below(4) {
        let at = rng.below(v.len() + 1);
        match rng.below(3) {
            0 if at < v.len() => v[at] = rng.next() as u8,
            1 => v.insert(at, b"\r\n :;,\x00\t0123456789abcdefHTP/."[rng.below(26)]),
            _ if at < v.len() => {
                v.remove(at);
            }
            _ => {}
        }
    }
    v.extend_from_slice(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    v
}

/// Check every response in `out`; returns how many there were (none is
/// right when the input ended inside a request, e.g. a chunk size that
/// swallowed the rest: the server closes without answering).
fn check_responses(out: &[u8], input: &[u8]) -> usize {
    let mut count = 0;
    let mut rest = out;
    while !rest.is_empty() {
        // A refusal may come while the client still writes (the server
        // answered, half-closed and lingered): its bytes are all there.
        let Some((r, n)) = parse_response(rest, false) else {
            panic!(
                "truncated response {:?} to {:?}",
                String::from_utf8_lossy(rest),
                String::from_utf8_lossy(input)
            );
        };
        assert!(
            matches!(
                r.status,
                100 | 200 | 400 | 404 | 405 | 413 | 414 | 417 | 431 | 501 | 505
            ),
            "status {} to {:?}",
            r.status,
            String::from_utf8_lossy(input)
        );
        rest = &rest[n..];
        count += 1;
    }
    count
}

fn still_serves(addr: SocketAddr) {
    let r = parse_all(&exchange(addr, b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"));
    assert_eq!((r[0].status, &r[0].body[..]), (200, &b"ok"[..]));
}

ringkit::test_all! {
    async fn random_and_mutated_requests() {
        count_panics();
        let before = PANICS.load(Ordering::SeqCst);
        with_server(ServerConfig::default(), app(), |addr| {
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
            let mut answered = 0;
            for _ in 0..300 {
                let input = mutant(&mut rng);
                let mut s = connect(addr);
                // The server may refuse and close before all is written.
                let _ = s.write_all(&input);
                let _ = s.shutdown(std::net::Shutdown::Write);
                if check_responses(&read_to_end(&mut s), &input) > 0 {
                    answered += 1;
                }
            }
            // Most inputs end in a complete request: the test must have
            // seen answers, not only closed connections.
            assert!(answered > 200, "only {answered} of 300 answered");
            still_serves(addr);
        })
        .await;
        assert_eq!(PANICS.load(Ordering::SeqCst), before, "the server panicked");
    }

    async fn trickled_request() {
        with_server(ServerConfig::default(), app(), |addr| {
            let mut s = connect(addr);
            s.set_nodelay(true).unwrap();
            let req = b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
            for b in req.iter() {
                s.write_all(&[*b]).unwrap();
                std::thread::sleep(Duration::from_micros(200));
            }
            let mut carry = Vec::new();
            let r = read_response(&mut s, false, &mut carry);
            assert_eq!((r.status, &r.body[..]), (200, &b"abc"[..]));
        })
        .await;
    }
}
