//! The built-in HTTP load generator (`ringkit bench http`).
//!
//! One thread, ringkit's runtime, one task per connection (like
//! [`crate::echo::run_load`]). Keep-alive: each connection has one request in
//! flight (write it, read the whole response, repeat). `close`: every request
//! opens a new connection, sends `Connection: close`, reads the response and
//! closes (like wrk, the client closes as soon as the response is complete).
//!
//! Every response is framed ([`super::response`]) and checked: status equal
//! to the expected one, body length equal to the expected one (or, when none
//! is given, to the first response's). Connect, read and write errors,
//! resets, bad status, wrong body length, malformed responses and requests
//! still unanswered 5 s after the window are counted; any of them makes the
//! run failed ([`HttpLoadResult::ok`]). A connection with an I/O or framing
//! error is reopened after 10 ms.
//!
//! With a mix ([`HttpLoadConfig::mix`]), each request asks for a path picked
//! at random (uniformly, seeded per connection) from a list, and its
//! response is checked against that path's own body length.
//!
//! Pipelining ([`HttpLoadConfig::pipeline`] = N > 1, keep-alive only): a
//! connection writes N requests in one write, then reads and checks N
//! responses in order; anything after the Nth is an error. Latency is the
//! batch's, recorded for each of its responses.
//!
//! The window starts once every connection's first connect has completed
//! (plus 200 ms of warm-up); requests/s divide by the window measured. In
//! `close` mode a request's latency includes its connect.

use std::cell::{Cell, RefCell};
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use ringkit::net::TcpStream;
use ringkit::Backend;
use serde::{Deserialize, Serialize};

use super::exchange::{exchange, Asks, Bufs, Counters, Outcome, Shared, Want};
pub use super::exchange::{verify, VERIFY_ALL_UP_TO};
use super::open;
use crate::harness::open_loop::Window;
use crate::harness::phase::Phase;
use crate::harness::rng::Rng;

/// How long requests in flight at the end of the window may take.
const GRACE: Duration = Duration::from_secs(5);

/// Settings of a load run.
#[derive(Debug, Clone)]
pub struct HttpLoadConfig {
    /// Server address.
    pub addr: SocketAddr,
    /// `Host` header value.
    pub host: String,
    /// Request path.
    pub path: String,
    /// Connections (keep-alive) or concurrent requests (close).
    pub conns: usize,
    /// Measured window.
    pub duration: Duration,
    /// A new connection per request, `Connection: close`.
    pub close: bool,
    /// Status every response must have.
    pub expect_status: u16,
    /// Body length every response must have; `None`: the first one's.
    pub expect_body_len: Option<usize>,
    /// CRC-32C of the body every response must have (checked on the
    /// responses [`verify`] picks); `None`: the bytes are not known, only
    /// the length is checked. A mix's targets carry their own.
    pub expect_crc32c: Option<u32>,
    /// Backend of the generator's runtime.
    pub backend: Backend,
    /// Ask for these at random instead of `path` (each response checked
    /// against its own target's body length, not `expect_body_len`).
    pub mix: Option<Arc<[Target]>>,
    /// Seed of the random picks (with the connection's index).
    pub seed: u64,
    /// Requests written together on a keep-alive connection before their
    /// responses are read (1: one at a time).
    pub pipeline: usize,
    /// Open loop: this many requests per second in all, spread evenly over
    /// the connections, each sent at its scheduled moment; latency counts
    /// from that moment (as wrk2 does). `None`: closed loop.
    pub rate: Option<f64>,
}

/// A path of a mix and the body its every response must have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    /// Request path, e.g. `/mix/0042.bin`.
    pub path: String,
    /// Body length, bytes.
    pub body_len: usize,
    /// CRC-32C of the body, when known: responses are checked byte for
    /// byte against it (see [`verify`]).
    #[serde(default)]
    pub crc32c: Option<u32>,
}

impl Target {
    /// Read a mix from text: one `PATH BODY_LEN [CRC32C]` per line (the
    /// CRC-32C of the body in hex; blank lines and `#` comments skipped).
    pub fn parse_list(text: &str) -> Result<Vec<Target>, String> {
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = || {
                format!(
                    "line {}: expected `PATH BODY_LEN [CRC32C]`, got {line:?}",
                    i + 1
                )
            };
            let mut parts = line.split_whitespace();
            let path = parts.next().ok_or_else(bad)?;
            let body_len = parts.next().ok_or_else(bad)?.parse().map_err(|_| bad())?;
            let crc32c = match parts.next() {
                Some(c) => Some(u32::from_str_radix(c, 16).map_err(|_| bad())?),
                None => None,
            };
            if parts.next().is_some() {
                return Err(bad());
            }
            if !path.starts_with('/') {
                return Err(format!("line {}: path {path:?} must start with /", i + 1));
            }
            out.push(Target {
                path: path.to_string(),
                body_len,
                crc32c,
            });
        }
        if out.is_empty() {
            return Err("no targets in the list".into());
        }
        Ok(out)
    }
}

impl HttpLoadConfig {
    /// `GET /` keep-alive to `addr`, expecting `200` with an empty body.
    pub fn new(addr: SocketAddr, conns: usize, duration: Duration) -> HttpLoadConfig {
        HttpLoadConfig {
            addr,
            host: addr.to_string(),
            path: "/".into(),
            conns,
            duration,
            close: false,
            expect_status: 200,
            expect_body_len: Some(0),
            expect_crc32c: None,
            backend: Backend::Auto,
            mix: None,
            seed: 1,
            pipeline: 1,
            rate: None,
        }
    }

    /// The request bytes of `path`, built once.
    pub fn request_for(&self, path: &str) -> Vec<u8> {
        format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\n{}\r\n",
            path,
            self.host,
            if self.close {
                "Connection: close\r\n"
            } else {
                ""
            }
        )
        .into_bytes()
    }

    /// The request bytes of `path` (the single-path case).
    pub fn request(&self) -> Vec<u8> {
        self.request_for(&self.path)
    }
}

/// What a load run measured (counts are for the window unless noted).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HttpLoadResult {
    /// Requests counted in the window: closed loop, those written; open
    /// loop, those scheduled in it (sent or not, see `unsent`).
    pub requests: u64,
    /// Responses received and checked in the window.
    pub responses: u64,
    /// Open loop: requests scheduled in the window and sent, with no
    /// response by its end (recorded in the latencies with their wait up
    /// to the end).
    #[serde(default)]
    pub unanswered: u64,
    /// Open loop: requests scheduled in the window and never sent (the
    /// connection's writer was held up), recorded the same way.
    #[serde(default)]
    pub unsent: u64,
    /// Open loop: the most requests in flight at once on one connection.
    #[serde(default)]
    pub most_in_flight: usize,
    /// Response bytes read in the window.
    pub bytes: u64,
    /// The measured window, seconds.
    pub secs: f64,
    /// Time to open all connections, seconds.
    pub connect_secs: f64,
    /// Failed connects (whole run).
    pub connect_errors: u64,
    /// Failed or unexpectedly ended reads, resets included (whole run).
    pub read_errors: u64,
    /// Failed writes (whole run).
    pub write_errors: u64,
    /// Requests unanswered 5 s after the window ended.
    pub timeouts: u64,
    /// Responses with another status than expected (whole run).
    pub bad_status: u64,
    /// Responses with another body length than expected (whole run).
    pub bad_body: u64,
    /// Responses whose body bytes differ from the expected ones (whole
    /// run; of the responses checked, see [`verify`]).
    #[serde(default)]
    pub bad_content: u64,
    /// Responses whose body bytes were checked (whole run).
    #[serde(default)]
    pub verified: u64,
    /// Responses that could not be framed, or bytes nobody asked for (whole run).
    pub malformed: u64,
    /// The body length checked against.
    pub expected_body_len: Option<usize>,
    /// First error seen.
    pub first_error: Option<String>,
    /// The generator's own backend, as its runtime reported it.
    pub backend: String,
    /// Latency percentiles, microseconds.
    pub p50_us: f64,
    /// p90.
    #[serde(default)]
    pub p90_us: f64,
    /// p99.
    pub p99_us: f64,
    /// p99.9.
    pub p999_us: f64,
    /// Mean.
    pub mean_us: f64,
    /// Max.
    pub max_us: f64,
    /// Responses per connection in the window: fewest, median, most, and
    /// Jain's fairness index (see [`crate::echo::fairness`]).
    #[serde(default)]
    pub conn_min: u64,
    /// Median.
    #[serde(default)]
    pub conn_median: u64,
    /// Most.
    #[serde(default)]
    pub conn_max: u64,
    /// Jain's index.
    #[serde(default)]
    pub jain: f64,
}

impl HttpLoadResult {
    /// Responses per second.
    pub fn rps(&self) -> f64 {
        if self.secs > 0.0 {
            self.responses as f64 / self.secs
        } else {
            0.0
        }
    }
    /// All errors.
    pub fn errors(&self) -> u64 {
        self.connect_errors
            + self.read_errors
            + self.write_errors
            + self.timeouts
            + self.bad_status
            + self.bad_body
            + self.bad_content
            + self.malformed
    }
    /// A run with any error, or no response, failed.
    pub fn ok(&self) -> bool {
        self.errors() == 0 && self.responses > 0
    }
}

/// Run the load on this thread (it gets its own runtime). `hook` sees the
/// window start and end, e.g. to sample the server's CPU time.
pub fn run_load(cfg: &HttpLoadConfig, hook: &mut dyn FnMut(Phase)) -> io::Result<HttpLoadResult> {
    let interval = match cfg.rate {
        Some(r) if r > 0.0 && r.is_finite() => Some(Duration::from_secs_f64(cfg.conns as f64 / r)),
        Some(r) => {
            return Err(crate::harness::err::invalid_input(format!(
                "--rate {r}: want a positive number of requests per second"
            )))
        }
        None => None,
    };
    if interval.is_some() && (cfg.close || cfg.pipeline > 1) {
        return Err(crate::harness::err::invalid_input(
            "--rate pipelines as many requests on each keep-alive connection as its schedule \
             needs: it takes neither --close nor --pipeline",
        ));
    }
    ringkit::raise_nofile_limit();
    let rt = ringkit::Builder::new().backend(cfg.backend).build()?;
    let sh = Rc::new(Shared {
        phase: Cell::new(0),
        win: Window::default(),
        unanswered: Cell::new(0),
        unsent: Cell::new(0),
        most_in_flight: Cell::new(0),
        requests: Cell::new(0),
        responses: Cell::new(0),
        bytes: Cell::new(0),
        started: Cell::new(0),
        busy: Cell::new(0),
        errs: Counters::default(),
        expect_status: cfg.expect_status,
        expect_body: Cell::new(cfg.expect_body_len),
        expect_crc: cfg.expect_crc32c,
        verified: Cell::new(0),
        first_error: RefCell::new(None),
        hist: RefCell::new(
            Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds"),
        ),
        per_conn: RefCell::new(vec![0; cfg.conns]),
    });
    let asks = Rc::new(match &cfg.mix {
        Some(mix) => Asks::Mix(
            mix.iter()
                .map(|t| (cfg.request_for(&t.path), (t.body_len, t.crc32c)))
                .collect(),
        ),
        None => Asks::One(cfg.request()),
    });
    rt.block_on(async {
        let start = Instant::now();
        let mut handles = Vec::with_capacity(cfg.conns);
        for i in 0..cfg.conns {
            let (sh, asks) = (sh.clone(), asks.clone());
            let (addr, close) = (cfg.addr, cfg.close);
            let depth = if close { 1 } else { cfg.pipeline.max(1) };
            let rng = Rng::for_stream(cfg.seed, i as u64, 0);
            let pace = interval.map(|iv| (iv, iv.mul_f64(i as f64 / cfg.conns as f64)));
            handles.push(ringkit::spawn(async move {
                match pace {
                    Some(pace) => open::open_conn(i, addr, pace, &asks, rng, &sh).await,
                    None => conn_task(i, addr, close, depth, &asks, rng, &sh).await,
                }
            }));
        }
        while sh.started.get() < cfg.conns && start.elapsed() < Duration::from_secs(30) {
            ringkit::time::sleep(Duration::from_millis(1)).await;
        }
        let connect_secs = start.elapsed().as_secs_f64();
        ringkit::time::sleep(Duration::from_millis(200)).await;
        hook(Phase::WindowStart);
        let t0 = Instant::now();
        sh.win.open(t0);
        sh.phase.set(1);
        ringkit::time::sleep(cfg.duration).await;
        sh.phase.set(2);
        sh.win.close(Instant::now());
        let secs = t0.elapsed().as_secs_f64();
        hook(Phase::WindowEnd);
        if interval.is_some() {
            // Each open-loop connection records what it has unanswered.
            for h in handles.drain(..) {
                let _ = h.await;
            }
        }
        // Requests in flight finish; those that do not within GRACE are timeouts.
        let t1 = Instant::now();
        while sh.busy.get() > 0 && t1.elapsed() < GRACE {
            ringkit::time::sleep(Duration::from_millis(1)).await;
        }
        let timeouts = sh.busy.get() as u64;
        if timeouts > 0 {
            sh.first_error.borrow_mut().get_or_insert_with(|| {
                format!("{timeouts} requests unanswered {GRACE:?} after the window")
            });
        }
        for h in &handles {
            h.abort();
        }
        let hist = sh.hist.borrow();
        let q = |p: f64| hist.value_at_quantile(p) as f64 / 1000.0;
        let e = &sh.errs;
        let (conn_min, conn_median, conn_max, jain) = crate::echo::fairness(&sh.per_conn.borrow());
        Ok(HttpLoadResult {
            conn_min,
            conn_median,
            conn_max,
            jain,
            requests: sh.requests.get(),
            responses: sh.responses.get(),
            unanswered: sh.unanswered.get(),
            unsent: sh.unsent.get(),
            most_in_flight: sh.most_in_flight.get(),
            bytes: sh.bytes.get(),
            secs,
            connect_secs,
            connect_errors: e.connect.get(),
            read_errors: e.read.get(),
            write_errors: e.write.get(),
            timeouts,
            bad_status: e.bad_status.get(),
            bad_body: e.bad_body.get(),
            bad_content: e.bad_content.get(),
            verified: sh.verified.get(),
            malformed: e.malformed.get(),
            expected_body_len: sh.expect_body.get(),
            first_error: sh.first_error.borrow().clone(),
            backend: ringkit::backend_report()
                .expect("inside a runtime")
                .to_string(),
            p50_us: q(0.5),
            p90_us: q(0.9),
            p99_us: q(0.99),
            p999_us: q(0.999),
            mean_us: hist.mean() / 1000.0,
            max_us: hist.max() as f64 / 1000.0,
        })
    })
}

#[allow(clippy::too_many_arguments)]
async fn conn_task(
    slot: usize,
    addr: SocketAddr,
    close: bool,
    depth: usize,
    asks: &Asks,
    mut rng: Rng,
    sh: &Shared,
) {
    let mut req = Vec::new();
    let mut wants: Vec<Option<Want>> = Vec::with_capacity(depth);
    // Responses seen on this connection (for the content sample).
    let mut nth = 0u64;
    let mut rbuf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut acc: Vec<u8> = Vec::new();
    let mut first = true;
    let mut conn: Option<TcpStream> = None;
    while sh.phase.get() < 2 {
        let t = Instant::now();
        let counting = sh.phase.get() == 1;
        sh.busy.set(sh.busy.get() + 1);
        let s = match conn.take() {
            Some(s) => Some(s),
            None => {
                let r = TcpStream::connect(addr).await;
                if first {
                    first = false;
                    sh.started.set(sh.started.get() + 1);
                }
                match r {
                    Ok(s) => {
                        let _ = s.set_nodelay(true);
                        Some(s)
                    }
                    Err(e) => {
                        sh.error(&sh.errs.connect, || format!("connect: {e}"));
                        None
                    }
                }
            }
        };
        // The requests, and the body length each response must have (None:
        // the run's expectation).
        req.clear();
        wants.clear();
        for _ in 0..depth {
            match asks {
                Asks::One(r) => {
                    req.extend_from_slice(r);
                    wants.push(None);
                }
                Asks::Mix(list) => {
                    let (r, want) = &list[rng.range(0, list.len() as u64 - 1) as usize];
                    req.extend_from_slice(r);
                    wants.push(Some(*want));
                }
            }
        }
        let outcome = match &s {
            Some(s) => {
                let bufs = Bufs {
                    req: &mut req,
                    rbuf: &mut rbuf,
                    acc: &mut acc,
                };
                exchange(s, counting, &wants, bufs, &mut nth, sh).await
            }
            None => Outcome::Broken,
        };
        sh.busy.set(sh.busy.get() - 1);
        match outcome {
            Outcome::Done { reuse } => {
                if counting && sh.phase.get() == 1 {
                    sh.responses.set(sh.responses.get() + depth as u64);
                    sh.per_conn.borrow_mut()[slot] += depth as u64;
                    let ns = t.elapsed().as_nanos() as u64;
                    let _ = sh.hist.borrow_mut().record_n(ns.max(1), depth as u64);
                }
                if reuse && !close {
                    conn = s;
                }
            }
            Outcome::Broken => {
                drop(s);
                ringkit::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Target;

    #[test]
    fn target_lists() {
        let l = Target::parse_list("# c\n/a 1\n\n/b/c.txt   20 0a1b2c3d\n").unwrap();
        assert_eq!(
            l,
            vec![
                Target {
                    path: "/a".into(),
                    body_len: 1,
                    crc32c: None,
                },
                Target {
                    path: "/b/c.txt".into(),
                    body_len: 20,
                    crc32c: Some(0x0a1b_2c3d),
                }
            ]
        );
        assert!(Target::parse_list("/a 1 nothex").is_err());
        assert!(Target::parse_list("/a 1 00 extra").is_err());
        assert!(Target::parse_list("/a x").unwrap_err().contains("line 1"));
        assert!(Target::parse_list("a 1")
            .unwrap_err()
            .contains("start with /"));
        assert!(Target::parse_list("/a").is_err());
        assert!(Target::parse_list("# only\n").is_err());
    }
}
