//! The two sides of every attack: the hostile connections held open (and
//! when the server closed each), and the well-behaved client beside them
//! (how long it waited for each answer).

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::target::{self, Conn, Target};

/// Hostile connections, and when the server closed each.
#[derive(Debug)]
pub struct Held {
    conns: Vec<(Conn, Option<Instant>)>,
    since: Instant,
}

impl Held {
    /// None yet; closing times count from now.
    pub fn new() -> Held {
        Held {
            conns: Vec::new(),
            since: Instant::now(),
        }
    }

    /// Count closing times from now.
    pub fn restart_clock(&mut self) {
        self.since = Instant::now();
    }

    /// Hold `c`.
    pub fn push(&mut self, c: Conn) {
        self.conns.push((c, None));
    }

    /// How many are held.
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    /// The connections, to write to.
    pub fn conns_mut(&mut self) -> impl Iterator<Item = &mut Conn> {
        self.conns
            .iter_mut()
            .filter(|(_, closed)| closed.is_none())
            .map(|(c, _)| c)
    }

    /// Note every connection the server has closed (it sent FIN or RST),
    /// without reading from any: a client that never reads stays one.
    pub fn check(&mut self) {
        let now = Instant::now();
        let mut fds: Vec<libc::pollfd> = self
            .conns
            .iter()
            .map(|(c, _)| libc::pollfd {
                fd: c.tcp().as_raw_fd(),
                events: libc::POLLRDHUP,
                revents: 0,
            })
            .collect();
        for chunk in fds.chunks_mut(1024) {
            // SAFETY: `chunk` is a valid array of pollfd of the length passed;
            // timeout 0 never blocks.
            unsafe { libc::poll(chunk.as_mut_ptr(), chunk.len() as libc::nfds_t, 0) };
        }
        for ((_, closed), p) in self.conns.iter_mut().zip(&fds) {
            let gone = p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0;
            if closed.is_none() && gone {
                *closed = Some(now);
            }
        }
    }

    /// How many the server has closed.
    pub fn closed(&self) -> usize {
        self.conns.iter().filter(|(_, c)| c.is_some()).count()
    }

    /// Seconds from the clock's start to the last close, once all closed.
    pub fn all_closed_after(&self) -> Option<f64> {
        let mut last = self.since;
        for (_, c) in &self.conns {
            last = last.max((*c)?);
        }
        Some(last.duration_since(self.since).as_secs_f64())
    }

    /// Check until every connection is closed or `limit` has passed.
    pub fn wait_closed(&mut self, limit: Duration) -> Option<f64> {
        let end = Instant::now() + limit;
        loop {
            self.check();
            if let Some(t) = self.all_closed_after() {
                return Some(t);
            }
            if Instant::now() >= end {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Close them all from this side.
    pub fn release(&mut self) {
        self.conns.clear();
    }
}

impl Default for Held {
    fn default() -> Held {
        Held::new()
    }
}

/// The well-behaved client: every `every`, a fresh connection and one
/// exchange (with an HTTP server, every third one an upload of 20 000
/// bytes), retried (every 50 ms) until it succeeds; the wait is from the
/// first try to the answer.
#[derive(Debug)]
pub struct Probe {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<ProbeFigures>>,
    thread: Option<JoinHandle<()>>,
}

/// What the well-behaved client saw.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct ProbeFigures {
    /// The longest wait for an answer, seconds.
    pub worst_wait_secs: f64,
    /// Exchanges answered.
    pub answered: u64,
    /// Tries that failed (and were retried).
    pub failed_tries: u64,
    /// The last failure, verbatim.
    pub last_error: String,
    /// An exchange was still unanswered at the end (its wait so far is in
    /// `worst_wait_secs`).
    pub unanswered_at_end: bool,
    /// Waits of the answered exchanges, median and 99th percentile, ms
    /// (0 in runs from before they were kept).
    #[serde(default)]
    pub p50_ms: f64,
    /// See `p50_ms`.
    #[serde(default)]
    pub p99_ms: f64,
    #[serde(skip)]
    waits_ms: Vec<f64>,
}

impl Probe {
    /// Start probing `t` at `addr`.
    pub fn start(
        t: Target,
        addr: SocketAddr,
        tls: Arc<rustls::ClientConfig>,
        every: Duration,
    ) -> Probe {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(ProbeFigures::default()));
        let (s, w) = (stop.clone(), seen.clone());
        let thread = std::thread::spawn(move || {
            let mut round = 0u64;
            while !s.load(Ordering::Relaxed) {
                let began = Instant::now();
                round += 1;
                // Every third exchange with an HTTP server is an upload.
                let up = t.http() && round % 3 == 0;
                loop {
                    let r =
                        target::connect(t, addr, &tls, Duration::from_secs(2)).and_then(|mut c| {
                            if up {
                                target::upload(&mut c)
                            } else {
                                target::exchange(t, &mut c)
                            }
                        });
                    let waited = began.elapsed().as_secs_f64();
                    let mut g = w.lock().unwrap_or_else(|e| e.into_inner());
                    g.worst_wait_secs = g.worst_wait_secs.max(waited);
                    match r {
                        Ok(()) => {
                            g.answered += 1;
                            g.waits_ms.push(waited * 1e3);
                            g.unanswered_at_end = false;
                            break;
                        }
                        Err(e) => {
                            g.failed_tries += 1;
                            g.last_error = e.to_string();
                            g.unanswered_at_end = true;
                        }
                    }
                    drop(g);
                    if s.load(Ordering::Relaxed) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                std::thread::sleep(every);
            }
        });
        Probe {
            stop,
            seen,
            thread: Some(thread),
        }
    }

    /// Stop it and say what it saw. An exchange still being retried
    /// counts with its wait so far.
    pub fn finish(mut self) -> ProbeFigures {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
        let mut g = self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut w = std::mem::take(&mut g.waits_ms);
        w.sort_by(f64::total_cmp);
        let at = |q: f64| w.get(((w.len() as f64 * q) as usize).min(w.len().saturating_sub(1)));
        g.p50_ms = at(0.5).copied().unwrap_or(0.0);
        g.p99_ms = at(0.99).copied().unwrap_or(0.0);
        g
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
    }
}
