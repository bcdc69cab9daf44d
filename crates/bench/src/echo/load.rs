//! The echo load generator.
//!
//! Like rust_echo_bench (same flags, same "Speed:" line), but on ringkit's
//! io_uring runtime on one thread: every connection is a task that keeps
//! `pipeline` messages of `len` bytes in flight (write them, read them all
//! back, compare every byte). Connections are opened and warmed up first; the
//! measured window starts only once all are up, and throughput is divided by
//! the window actually measured (not the nominal duration).
//! [`run_load_threads`] is rust_echo_bench's own design (a blocking thread
//! per connection), kept to compare generators.

use std::cell::{Cell, RefCell};
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use ringkit::net::TcpStream;
use ringkit::Backend;
use serde::{Deserialize, Serialize};

use super::open;
use super::shared::{fill, Shared};
use crate::harness::open_loop::Window;
use crate::harness::phase::Phase;
use crate::harness::sysinfo::CpuTimes;

/// Load generator settings.
#[derive(Debug, Clone)]
pub struct EchoLoadConfig {
    /// Server address.
    pub addr: SocketAddr,
    /// Connections.
    pub conns: usize,
    /// Message length.
    pub len: usize,
    /// Measured window.
    pub duration: Duration,
    /// Messages in flight per connection.
    pub pipeline: usize,
    /// Backend of the generator's own runtime.
    pub backend: Backend,
    /// Open loop: this many messages per second in all, spread evenly
    /// over the connections, each sent at its scheduled moment whether or
    /// not the previous reply is late; latency counts from the scheduled
    /// moment (as wrk2 does, free of coordinated omission). `None`: closed
    /// loop (the next message when the reply is back).
    pub rate: Option<f64>,
}

/// Which client drives the echo study.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum EchoClient {
    /// [`run_load`]: one thread, every connection a task on ringkit.
    #[default]
    Ringkit,
    /// [`run_load_threads`]: one blocking OS thread per connection, as
    /// rust_echo_bench.
    Threads,
    /// rust_echo_bench itself, as a child process (see
    /// [`super::external`]).
    RustEchoBench,
}

/// What the generator measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EchoLoadResult {
    /// Messages counted in the window: closed loop, those written; open
    /// loop, those scheduled in it (sent or not, see `unsent`).
    pub requests: u64,
    /// Messages read back (and verified) in the window.
    pub responses: u64,
    /// Open loop: messages scheduled in the window and sent, with no echo
    /// by its end (recorded in the latencies with their wait up to the end).
    #[serde(default)]
    pub unanswered: u64,
    /// Open loop: messages scheduled in the window and never sent (the
    /// connection's writer was held up), recorded the same way.
    #[serde(default)]
    pub unsent: u64,
    /// Open loop: the most messages in flight at once on one connection
    /// (how many the schedule needed).
    #[serde(default)]
    pub most_in_flight: usize,
    /// The measured window, seconds.
    pub secs: f64,
    /// Time to open all connections, seconds (rust_echo_bench: how much
    /// longer than its nominal duration its run took).
    pub connect_secs: f64,
    /// rust_echo_bench's own "Speed" (responses over its nominal duration,
    /// see [`super::external`]); 0 for the other clients.
    #[serde(default)]
    pub tool_rps: f64,
    /// Connections the client gave up on and the server did not fail
    /// (rust_echo_bench ends a thread on a short read, which TCP allows).
    #[serde(default)]
    pub dead_conns: u64,
    /// Connections that failed (connect or I/O error).
    pub failed_conns: u64,
    /// Messages that came back different.
    pub mismatches: u64,
    /// First error seen, if any.
    pub first_error: Option<String>,
    /// Round-trip latency percentiles, microseconds.
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
    /// Slowest round trip.
    #[serde(default)]
    pub max_us: f64,
    /// CPU seconds (user+sys) the generator itself used in the window.
    pub client_cpu_s: f64,
    /// Responses per connection in the window: fewest, median, most.
    #[serde(default)]
    pub conn_min: u64,
    /// Median.
    #[serde(default)]
    pub conn_median: u64,
    /// Most.
    #[serde(default)]
    pub conn_max: u64,
    /// Jain's fairness index of the per-connection responses: 1 when every
    /// connection got the same, 1/n when one got everything.
    #[serde(default)]
    pub jain: f64,
}

/// Fewest, median and most of `per_conn`, and Jain's fairness index
/// `(Σx)² / (n·Σx²)`.
pub fn fairness(per_conn: &[u64]) -> (u64, u64, u64, f64) {
    if per_conn.is_empty() {
        return (0, 0, 0, 0.0);
    }
    let mut v = per_conn.to_vec();
    v.sort_unstable();
    let sum: f64 = v.iter().map(|&x| x as f64).sum();
    let sq: f64 = v.iter().map(|&x| (x as f64) * (x as f64)).sum();
    let jain = if sq > 0.0 {
        sum * sum / (v.len() as f64 * sq)
    } else {
        0.0
    };
    (v[0], v[v.len() / 2], v[v.len() - 1], jain)
}

impl EchoLoadResult {
    /// Responses per second.
    pub fn rps(&self) -> f64 {
        if self.secs > 0.0 {
            self.responses as f64 / self.secs
        } else {
            0.0
        }
    }
    /// Round trips per second of the generator's own CPU: what one fully
    /// busy core could drive, whether or not the server kept up.
    pub fn rps_per_client_cpu(&self) -> f64 {
        if self.client_cpu_s > 0.0 {
            self.responses as f64 / self.client_cpu_s
        } else {
            0.0
        }
    }
    /// A run with a lost connection or a wrong byte is a failed run.
    pub fn ok(&self) -> bool {
        self.failed_conns == 0 && self.mismatches == 0 && self.responses > 0
    }
}

/// Run the load on this thread (which gets its own runtime).
pub fn run_load(cfg: &EchoLoadConfig, hook: &mut dyn FnMut(Phase)) -> io::Result<EchoLoadResult> {
    if cfg.rate.is_some() && cfg.pipeline > 1 {
        return Err(crate::harness::err::invalid_input("--rate keeps as many messages in flight as its schedule needs; --pipeline is for the closed loop: use --pipeline 1"));
    }
    // Open loop: each connection's interval, and its offset in it.
    let interval = match cfg.rate {
        Some(r) if r > 0.0 && r.is_finite() => Some(Duration::from_secs_f64(cfg.conns as f64 / r)),
        Some(r) => {
            return Err(crate::harness::err::invalid_input(format!(
                "--rate {r}: want a positive number of messages per second"
            )))
        }
        None => None,
    };
    ringkit::raise_nofile_limit();
    let rt = ringkit::Builder::new().backend(cfg.backend).build()?;
    let shared = Rc::new(Shared {
        phase: Cell::new(0),
        win: Window::default(),
        requests: Cell::new(0),
        responses: Cell::new(0),
        connected: Cell::new(0),
        failed: Cell::new(0),
        mismatches: Cell::new(0),
        unanswered: Cell::new(0),
        unsent: Cell::new(0),
        most_in_flight: Cell::new(0),
        first_error: RefCell::new(None),
        hist: RefCell::new(
            Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds"),
        ),
        per_conn: RefCell::new(Vec::with_capacity(cfg.conns)),
    });
    // On io_uring the replies arrive by multishot recv into the buffer ring
    // (armed once per connection, no failed recv and poll re-arm per round
    // trip); on epoll a plain read into the connection's own buffer.
    let pooled = rt.backend_report().chosen == Backend::Uring;
    rt.block_on(async {
        let start = Instant::now();
        let mut handles = Vec::with_capacity(cfg.conns);
        for id in 0..cfg.conns {
            let sh = shared.clone();
            let (addr, len, pipeline) = (cfg.addr, cfg.len, cfg.pipeline.max(1));
            let pace = interval.map(|i| (i, i.mul_f64(id as f64 / cfg.conns as f64)));
            handles.push(ringkit::spawn(async move {
                let r = match pace {
                    Some(pace) => {
                        let mut mine = 0;
                        let r = open::open_conn(id, addr, len, pooled, pace, &sh, &mut mine).await;
                        sh.per_conn.borrow_mut().push(mine);
                        r
                    }
                    None => conn_task(id, addr, len, pipeline, pooled, &sh).await,
                };
                if let Err(e) = r {
                    sh.failed.set(sh.failed.get() + 1);
                    sh.first_error.borrow_mut().get_or_insert(e.to_string());
                }
            }));
        }
        // Wait until every connection is up (or failed) before measuring.
        while shared.connected.get() + (shared.failed.get() as usize) < cfg.conns {
            if start.elapsed() > Duration::from_secs(30) {
                break;
            }
            ringkit::time::sleep(Duration::from_millis(1)).await;
        }
        let connect_secs = start.elapsed().as_secs_f64();
        // A short warm-up, then the window.
        ringkit::time::sleep(Duration::from_millis(200)).await;
        hook(Phase::WindowStart);
        let t0 = Instant::now();
        let cpu0 = CpuTimes::own();
        shared.win.open(t0);
        shared.phase.set(1);
        ringkit::time::sleep(cfg.duration).await;
        shared.phase.set(2);
        shared.win.close(Instant::now());
        let secs = t0.elapsed().as_secs_f64();
        let cpu = CpuTimes::own().since(&cpu0);
        hook(Phase::WindowEnd);
        for h in handles {
            let _ = h.await;
        }
        let hist = shared.hist.borrow();
        let q = |p: f64| hist.value_at_quantile(p) as f64 / 1000.0;
        let (conn_min, conn_median, conn_max, jain) = fairness(&shared.per_conn.borrow());
        Ok(EchoLoadResult {
            conn_min,
            conn_median,
            conn_max,
            jain,
            requests: shared.requests.get(),
            responses: shared.responses.get(),
            unanswered: shared.unanswered.get(),
            unsent: shared.unsent.get(),
            most_in_flight: shared.most_in_flight.get(),
            secs,
            connect_secs,
            failed_conns: shared.failed.get(),
            mismatches: shared.mismatches.get(),
            first_error: shared.first_error.borrow().clone(),
            p50_us: q(0.5),
            p90_us: q(0.9),
            p99_us: q(0.99),
            p999_us: q(0.999),
            mean_us: hist.mean() / 1000.0,
            max_us: hist.max() as f64 / 1000.0,
            client_cpu_s: cpu.user + cpu.system,
            ..EchoLoadResult::default()
        })
    })
}

/// One connection of the generator: write `pipeline` messages, read them
/// back, check every byte against what was sent (in place, no copy).
async fn conn_task(
    id: usize,
    addr: SocketAddr,
    len: usize,
    pipeline: usize,
    mut pooled: bool,
    sh: &Shared,
) -> io::Result<()> {
    let mut mine = 0u64;
    let r = conn_loop(id, addr, len, pipeline, &mut pooled, sh, &mut mine).await;
    sh.per_conn.borrow_mut().push(mine);
    r
}

/// The body of [`conn_task`]; `mine` counts this connection's responses
/// in the window.
#[allow(clippy::too_many_arguments)]
async fn conn_loop(
    id: usize,
    addr: SocketAddr,
    len: usize,
    pipeline: usize,
    pooled: &mut bool,
    sh: &Shared,
    mine: &mut u64,
) -> io::Result<()> {
    let s = TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    sh.connected.set(sh.connected.get() + 1);
    let total = len * pipeline;
    let mut out = vec![0u8; total];
    let mut chunk: Vec<u8> = Vec::with_capacity(if *pooled { 0 } else { total.max(4096) });
    let mut seq = 0u64;
    while sh.phase.get() < 2 {
        seq += 1;
        fill(&mut out, id, seq);
        let t = Instant::now();
        let counting = sh.phase.get() == 1;
        let (res, o) = s.write_all(out).await;
        out = o;
        res?;
        if counting {
            sh.requests.set(sh.requests.get() + pipeline as u64);
        }
        let mut got = 0;
        while got < total {
            let check = |back: &[u8]| -> io::Result<usize> {
                let n = back.len();
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "server closed the connection",
                    ));
                }
                if got + n > total || back != &out[got..got + n] {
                    sh.mismatches.set(sh.mismatches.get() + 1);
                    return Err(crate::harness::err::invalid_data("echo mismatch"));
                }
                Ok(n)
            };
            got += if *pooled {
                match s.read_pooled().await {
                    Ok(back) => check(&back)?,
                    // A kernel without buffer rings or multishot receive
                    // (before 5.19 / 6.0) refuses the first one: read plainly.
                    Err(e)
                        if got == 0
                            && matches!(
                                e.raw_os_error(),
                                Some(libc::EINVAL | libc::EOPNOTSUPP | libc::ENOSYS)
                            ) =>
                    {
                        *pooled = false;
                        chunk.reserve(total.max(4096));
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            } else {
                chunk.clear();
                let (res, c) = s.read(chunk).await;
                chunk = c;
                let n = res?;
                check(&chunk[..n])?
            };
        }
        if counting && sh.phase.get() == 1 {
            sh.responses.set(sh.responses.get() + pipeline as u64);
            *mine += pipeline as u64;
            let us = t.elapsed().as_nanos() as u64;
            let _ = sh.hist.borrow_mut().record(us.max(1));
        }
    }
    Ok(())
}

/// A client that writes one message and waits for its echo cannot keep a
/// schedule or a pipeline: `--rate` and `--pipeline` are refused rather
/// than run as a closed loop under another name.
pub(crate) fn closed_loop_only(cfg: &EchoLoadConfig, client: &str) -> io::Result<()> {
    if cfg.rate.is_some() || cfg.pipeline > 1 {
        return Err(crate::harness::err::invalid_input(format!(
            "{client} runs a closed loop, one message at a time: \
                 --rate and --pipeline need the ringkit client"
        )));
    }
    Ok(())
}

/// The same load with rust_echo_bench's client design: one OS thread per
/// connection, blocking `write_all` + `read_exact`, every byte checked. Kept
/// to measure how much more our single-threaded generator can drive.
pub fn run_load_threads(
    cfg: &EchoLoadConfig,
    hook: &mut dyn FnMut(Phase),
) -> io::Result<EchoLoadResult> {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    // A blocking thread per connection writes, then waits for its echo:
    // it cannot keep a schedule, so it refuses one rather than run a
    // closed loop under an open loop's name.
    closed_loop_only(cfg, "the thread-per-connection client")?;
    let phase = Arc::new(AtomicU8::new(0));
    let connected = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(AtomicU64::new(0));
    let responses = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let mismatches = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(Mutex::new(None::<String>));
    let per_conn: Arc<Mutex<Vec<u64>>> = Arc::new(Mutex::new(Vec::with_capacity(cfg.conns)));
    let hist = Arc::new(Mutex::new(
        Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds"),
    ));
    let start = Instant::now();
    let mut threads = Vec::new();
    for id in 0..cfg.conns {
        let per_conn = per_conn.clone();
        let (phase, connected, requests, responses, failed, mismatches, first_error, hist) = (
            phase.clone(),
            connected.clone(),
            requests.clone(),
            responses.clone(),
            failed.clone(),
            mismatches.clone(),
            first_error.clone(),
            hist.clone(),
        );
        let (addr, len) = (cfg.addr, cfg.len);
        threads.push(
            std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || {
                    let run = || -> io::Result<()> {
                        let mut s = std::net::TcpStream::connect(addr)?;
                        s.set_nodelay(true)?;
                        connected.fetch_add(1, Ordering::SeqCst);
                        let mut out = vec![0u8; len];
                        let mut back = vec![0u8; len];
                        let mut local = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
                            .expect("histogram bounds");
                        let mut seq = 0;
                        let mut mine = 0u64;
                        while phase.load(Ordering::Relaxed) < 2 {
                            seq += 1;
                            fill(&mut out, id, seq);
                            let counting = phase.load(Ordering::Relaxed) == 1;
                            let t = Instant::now();
                            s.write_all(&out)?;
                            if counting {
                                requests.fetch_add(1, Ordering::Relaxed);
                            }
                            s.read_exact(&mut back)?;
                            if back != out {
                                mismatches.fetch_add(1, Ordering::Relaxed);
                                return Err(crate::harness::err::invalid_data("echo mismatch"));
                            }
                            if counting && phase.load(Ordering::Relaxed) == 1 {
                                responses.fetch_add(1, Ordering::Relaxed);
                                mine += 1;
                                let _ = local.record((t.elapsed().as_nanos() as u64).max(1));
                            }
                        }
                        let _ = hist.lock().map(|mut h| h.add(&local));
                        let _ = per_conn.lock().map(|mut v| v.push(mine));
                        Ok(())
                    };
                    if let Err(e) = run() {
                        failed.fetch_add(1, Ordering::SeqCst);
                        if let Ok(mut f) = first_error.lock() {
                            f.get_or_insert(e.to_string());
                        }
                    }
                })?,
        );
    }
    while connected.load(Ordering::SeqCst) + (failed.load(Ordering::SeqCst) as usize) < cfg.conns
        && start.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    let connect_secs = start.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(200));
    hook(Phase::WindowStart);
    let t0 = Instant::now();
    let cpu0 = CpuTimes::own();
    phase.store(1, Ordering::SeqCst);
    std::thread::sleep(cfg.duration);
    phase.store(2, Ordering::SeqCst);
    let secs = t0.elapsed().as_secs_f64();
    let cpu = CpuTimes::own().since(&cpu0);
    hook(Phase::WindowEnd);
    for t in threads {
        let _ = t.join();
    }
    let hist = hist
        .lock()
        .map_err(|_| io::Error::other("histogram lock poisoned"))?;
    let q = |p: f64| hist.value_at_quantile(p) as f64 / 1000.0;
    let first_error = first_error.lock().ok().and_then(|f| f.clone());
    let (conn_min, conn_median, conn_max, jain) =
        fairness(&per_conn.lock().map(|v| v.clone()).unwrap_or_default());
    Ok(EchoLoadResult {
        conn_min,
        conn_median,
        conn_max,
        jain,
        unanswered: 0,
        unsent: 0,
        most_in_flight: 1,
        requests: requests.load(Ordering::SeqCst),
        responses: responses.load(Ordering::SeqCst),
        secs,
        connect_secs,
        failed_conns: failed.load(Ordering::SeqCst),
        mismatches: mismatches.load(Ordering::SeqCst),
        first_error,
        p50_us: q(0.5),
        p90_us: q(0.9),
        p99_us: q(0.99),
        p999_us: q(0.999),
        mean_us: hist.mean() / 1000.0,
        max_us: hist.max() as f64 / 1000.0,
        client_cpu_s: cpu.user + cpu.system,
        ..EchoLoadResult::default()
    })
}
