//! The host's own stalls, recorded beside a server's tail: is a p99 the
//! server's, or the machine's?
//!
//! [`StallProbe`] runs one thread per CPU of a run, pinned, under
//! `SCHED_FIFO` (so no ordinary thread, server or load, can delay it),
//! sleeping to an absolute deadline every [`PERIOD`] on `CLOCK_MONOTONIC`
//! (cyclictest's method). How late each wake-up comes is time that CPU was
//! not there for anyone: the hypervisor ran something else, interrupts
//! were off, a higher-priority thread ran. Only wake-ups inside the
//! measured window are kept ([`StallProbe::window`]).
//!
//! It costs each CPU one wake-up per period (a few µs, under 1% at 1 ms),
//! the same for every contender. Where `SCHED_FIFO` is refused (not root),
//! the probe runs at normal priority and [`HostStalls::realtime`] says so:
//! its lateness then includes waiting behind the server and the load.

use std::io;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::latency::now_ns;

/// Time between a probe's wake-ups.
pub const PERIOD: Duration = Duration::from_millis(1);

/// A lateness at least this long is counted as a stall.
pub const STALL_US: u64 = 100;

/// What the probes saw in one window, every CPU's wake-ups together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct HostStalls {
    /// Wake-ups recorded.
    pub wakes: u64,
    /// Lateness of wake-ups at the 99th and 99.9th percentiles and the
    /// latest, µs.
    pub p99_us: f64,
    /// See `p99_us`.
    pub p999_us: f64,
    /// See `p99_us`.
    pub max_us: f64,
    /// Wake-ups at least [`STALL_US`] late.
    pub stalls: u64,
    /// Every probe ran under `SCHED_FIFO`.
    pub realtime: bool,
}

/// One probe's wake-ups, and whether it ran under `SCHED_FIFO`.
type Seen = (Histogram<u64>, bool);

const WARM: u8 = 0;
const RECORD: u8 = 1;
const STOP: u8 = 2;

/// Probe threads, one per CPU, running until [`StallProbe::finish`].
#[derive(Debug)]
pub struct StallProbe {
    state: Arc<AtomicU8>,
    threads: Vec<std::thread::JoinHandle<io::Result<Seen>>>,
}

impl StallProbe {
    /// Start a probe on each of `cpus`. They record nothing until
    /// [`StallProbe::window`]`(true)`.
    pub fn start(cpus: &[usize]) -> io::Result<StallProbe> {
        let state = Arc::new(AtomicU8::new(WARM));
        let mut threads = Vec::new();
        for &cpu in cpus {
            let st = state.clone();
            let t = std::thread::Builder::new()
                .name(format!("stall-probe-{cpu}"))
                .spawn(move || probe(cpu, &st))?;
            threads.push(t);
        }
        Ok(StallProbe { state, threads })
    }

    /// The measured window starts (`true`) or ends (`false`): wake-ups
    /// are recorded only in between.
    pub fn window(&self, open: bool) {
        let to = if open { RECORD } else { STOP };
        // A window that ended stays ended.
        let _ = self
            .state
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| {
                (s != STOP).then_some(to)
            });
    }

    /// Stop the probes and merge what they saw.
    pub fn finish(mut self) -> io::Result<HostStalls> {
        self.state.store(STOP, Ordering::SeqCst);
        let mut all = histogram();
        let mut realtime = true;
        for t in std::mem::take(&mut self.threads) {
            let (h, rt) = t
                .join()
                .map_err(|_| io::Error::other("stall probe panicked"))??;
            all.add(&h).map_err(|e| io::Error::other(e.to_string()))?;
            realtime &= rt;
        }
        Ok(summarize(&all, realtime))
    }
}

impl Drop for StallProbe {
    /// A probe dropped unfinished (its sample failed early) stops too: a
    /// real-time thread left waking every millisecond would disturb every
    /// later sample.
    fn drop(&mut self) {
        self.state.store(STOP, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn histogram() -> Histogram<u64> {
    // Lateness in ns, 1 ns to 10 s, 3 significant digits.
    Histogram::new_with_bounds(1, 10_000_000_000, 3).expect("valid bounds")
}

fn summarize(h: &Histogram<u64>, realtime: bool) -> HostStalls {
    let us = |ns: u64| ns as f64 / 1000.0;
    HostStalls {
        wakes: h.len(),
        p99_us: us(h.value_at_quantile(0.99)),
        p999_us: us(h.value_at_quantile(0.999)),
        max_us: us(h.max()),
        stalls: h.count_between(STALL_US * 1000, u64::MAX),
        realtime,
    }
}

/// One CPU's probe: wake every [`PERIOD`] and record how late.
fn probe(cpu: usize, state: &AtomicU8) -> io::Result<Seen> {
    ringkit::pin_to_cpu(cpu)?;
    let param = libc::sched_param { sched_priority: 50 };
    // SAFETY: sched_setscheduler on this thread (0) with a valid policy and
    // parameter; on refusal we run at normal priority and say so.
    let realtime = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0;
    // SAFETY: prctl with an integer argument: no timer slack, so a late
    // wake-up is the CPU's, not a coalescing allowance (0 for FIFO anyway).
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    let mut h = histogram();
    let period = PERIOD.as_nanos() as u64;
    let mut due = now_ns() + period;
    loop {
        let s = state.load(Ordering::Relaxed);
        if s == STOP {
            break;
        }
        let ts = libc::timespec {
            tv_sec: (due / 1_000_000_000) as libc::time_t,
            tv_nsec: (due % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: an absolute sleep on CLOCK_MONOTONIC to a valid timespec;
        // an interruption only makes the wake-up early (below, skipped).
        unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        let now = now_ns();
        if now >= due && s == RECORD {
            // Every period the stall swallowed is recorded with the
            // lateness a wake-up due then would have had (5 ms late: 5, 4,
            // 3, 2 and 1 ms), so the histogram is weighted by time, as a
            // steady stream of requests meeting the stall would be: its
            // p99.9 can be set beside a server's.
            record_late(&mut h, now - due, period);
        }
        // The next deadline from the schedule, or from now after a stall
        // longer than a period (its missed periods are recorded above).
        due += period;
        if due <= now {
            due = now + period;
        }
    }
    Ok((h, realtime))
}

/// Record a wake-up `late` ns late, and each period it swallowed.
fn record_late(h: &mut Histogram<u64>, mut late: u64, period: u64) {
    loop {
        let _ = h.record(late.max(1));
        if late < period {
            break;
        }
        late -= period;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_counts_stalls_over_the_threshold() {
        let mut h = histogram();
        for _ in 0..998 {
            h.record(5_000).unwrap();
        }
        h.record(150_000).unwrap();
        h.record(4_000_000).unwrap();
        let s = summarize(&h, true);
        assert_eq!((s.wakes, s.stalls), (1000, 2));
        assert!((s.max_us - 4000.0).abs() < 5.0, "{s:?}");
        assert!(s.p99_us < 6.0, "{s:?}");
    }

    #[test]
    fn a_stall_is_weighted_by_the_periods_it_swallowed() {
        let mut h = histogram();
        record_late(&mut h, 20_000, 1_000_000);
        assert_eq!(h.len(), 1);
        record_late(&mut h, 5_000_000, 1_000_000);
        // 5, 4, 3, 2 and 1 ms (and 0, recorded as 1 ns).
        assert_eq!(h.len(), 7);
        assert_eq!(h.count_between(900_000, 5_100_000), 5);
    }

    #[test]
    fn a_probe_records_only_inside_its_window() {
        let p = StallProbe::start(&[0]).unwrap();
        std::thread::sleep(Duration::from_millis(30));
        // Dropped unfinished, a probe stops its threads.
        drop(StallProbe::start(&[0]).unwrap());
        let t = std::time::Instant::now();
        p.window(true);
        std::thread::sleep(Duration::from_millis(50));
        p.window(false);
        let open = t.elapsed();
        std::thread::sleep(Duration::from_millis(30));
        let s = p.finish().unwrap();
        // At most one wake-up per ms the window was open (not the ~110 of
        // the probe's whole life); some, when it ran under SCHED_FIFO.
        assert!(s.wakes <= open.as_millis() as u64 + 2, "{s:?} in {open:?}");
        assert!(!s.realtime || s.wakes > 0, "{s:?}");
        let probes = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .filter(|e| {
                std::fs::read_to_string(e.path().join("comm"))
                    .is_ok_and(|c| c.starts_with("stall-probe"))
            })
            .count();
        assert_eq!(probes, 0, "probe threads left running");
    }
}
