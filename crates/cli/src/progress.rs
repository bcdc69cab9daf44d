//! The live progress line of `ringkit compare`: which study (i of n), what
//! it is doing (contender, round), time so far and an ETA drawn from each
//! study's usual length on a 2-core VM (`EXPECTED_SECS`). When stderr is
//! not a terminal, plain lines instead, one per change.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Each study's usual length in seconds, short and full variant (the short
/// ones measured by a default `compare` on the 2-core VM of docs/results,
/// 2026-11-25: 7 min 13 s in all; an unknown study counts a minute).
const EXPECTED_SECS: [(&str, u32, u32); 17] = [
    ("echo", 55, 600),
    ("generator", 5, 120),
    ("http", 55, 420),
    ("static", 65, 420),
    ("axum", 40, 200),
    ("tls", 25, 200),
    ("app", 120, 420),
    ("hosting", 60, 300),
    ("grpc", 60, 200),
    ("pipeline", 30, 150),
    ("wakeup", 10, 60),
    ("nop", 10, 30),
    ("file", 40, 330),
    ("log", 110, 450),
    ("latency", 450, 1200),
    ("c10k", 200, 500),
    ("hostile", 480, 850),
];

/// The expected length of `study` in seconds.
pub fn expected(study: &str, full: bool) -> f64 {
    EXPECTED_SECS
        .iter()
        .find(|(n, _, _)| *n == study)
        .map_or(60.0, |&(_, s, f)| f64::from(if full { f } else { s }))
}

struct Clock {
    /// Expected seconds of the studies already finished.
    done: f64,
    /// When the current study began, and its expected length.
    study: Option<(Instant, f64)>,
    total: f64,
}

impl Clock {
    /// Expected seconds behind us: finished studies, plus the current one's
    /// time so far (at most its expected length).
    fn position(&self) -> f64 {
        let now = self
            .study
            .map_or(0.0, |(t, e)| t.elapsed().as_secs_f64().min(e));
        (self.done + now).min(self.total)
    }
}

/// The progress of one `compare` run.
pub struct Progress {
    clock: Arc<Mutex<Clock>>,
    bar: Option<ProgressBar>,
    started: Instant,
    last: String,
    n: usize,
}

impl Progress {
    /// A run of studies whose expected lengths are `expected`.
    pub fn new(expected: &[f64]) -> Progress {
        let total: f64 = expected.iter().sum();
        let clock = Arc::new(Mutex::new(Clock {
            done: 0.0,
            study: None,
            total,
        }));
        let bar = std::io::stderr().is_terminal().then(|| {
            let pb = ProgressBar::new(total.max(1.0) as u64);
            pb.set_style(
                ProgressStyle::with_template(
                    "{spinner} {elapsed_precise} {prefix} {msg}  (about {eta} left)",
                )
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            pb.enable_steady_tick(Duration::from_millis(200));
            // Keep the ETA moving between the studies' messages.
            let (pb2, clock) = (pb.clone(), clock.clone());
            std::thread::spawn(move || {
                while !pb2.is_finished() {
                    if let Ok(c) = clock.lock() {
                        pb2.set_position(c.position() as u64);
                    }
                    std::thread::sleep(Duration::from_millis(500));
                }
            });
            pb
        });
        Progress {
            clock,
            bar,
            started: Instant::now(),
            last: String::new(),
            n: expected.len(),
        }
    }

    /// Study number `i` (from 0), `name`, expected to take `expected` s.
    pub fn start(&mut self, i: usize, name: &str, expected: f64) {
        if let Ok(mut c) = self.clock.lock() {
            c.study = Some((Instant::now(), expected));
        }
        let prefix = format!("[{}/{} {name}]", i + 1, self.n);
        match &self.bar {
            Some(pb) => {
                pb.set_prefix(prefix.clone());
                pb.set_message("starting");
            }
            None => self.line(&prefix, "starting"),
        }
        self.last = prefix;
    }

    /// What the current study is doing now.
    pub fn message(&mut self, m: &str) {
        match &self.bar {
            Some(pb) => pb.set_message(m.to_string()),
            None => {
                let prefix = self.last.clone();
                self.line(&prefix, m);
            }
        }
    }

    /// The current study is over.
    pub fn finish_study(&mut self) {
        if let Ok(mut c) = self.clock.lock() {
            if let Some((_, e)) = c.study.take() {
                c.done += e;
            }
        }
    }

    /// Print `text` on stdout without tearing the progress line.
    pub fn println(&self, text: &str) {
        match &self.bar {
            Some(pb) => pb.suspend(|| println!("{text}")),
            None => println!("{text}"),
        }
    }

    /// Print `text` on stderr without tearing the progress line.
    pub fn eprintln(&self, text: &str) {
        match &self.bar {
            Some(pb) => pb.suspend(|| eprintln!("{text}")),
            None => eprintln!("{text}"),
        }
    }

    /// The whole run is over.
    pub fn finish(&self) {
        if let Some(pb) = &self.bar {
            pb.finish_and_clear();
        }
    }

    fn line(&self, prefix: &str, m: &str) {
        let left = self
            .clock
            .lock()
            .map(|c| c.total - c.position())
            .unwrap_or(0.0);
        eprintln!(
            "[{:>5.0} s] {prefix} {m}  (about {:.0} min left)",
            self.started.elapsed().as_secs_f64(),
            (left / 60.0).ceil()
        );
    }
}
