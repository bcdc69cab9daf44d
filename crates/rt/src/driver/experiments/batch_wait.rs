//! When a blocking park waits for a batch of completions instead of one.
//!
//! A loop that wakes for every completion pays a sleep and a wake-up per
//! completion. When many independent peers trickle work in (a thousand
//! clients, each with one request in flight), each turn finds one or two
//! completions and the loop enters the kernel more than once per request.
//! `IORING_FEAT_MIN_TIMEOUT` (Linux 6.12) lets one `io_uring_enter` wait
//! for up to `want` completions but return once `min_wait` has passed and
//! at least one is ready: fewer enters and wake-ups, for up to `min_wait`
//! of added latency on a completion that arrives early in the wait.
//!
//! That latency is only worth paying when the loop itself is the
//! bottleneck. At light load a request that waits `min_wait` for company
//! that never comes is simply late. And when the loop has spare time while
//! its peers are the bottleneck (a thousand client threads on one CPU,
//! each waiting for its reply), holding replies back slows every peer: a
//! fixed 32:50 wait cost rust_echo_bench 0.77x of its requests per second
//! at c=1000 while the server was 70-80% busy. [`BatchWait::Adaptive`]
//! therefore measures the loop thread's own CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`) over windows of a few milliseconds and
//! waits for batches only while the thread was on CPU for nearly all of
//! the last window: on at [`ON_AT`], off again below [`OFF_BELOW`] (the
//! gap keeps a loop near one threshold from flapping, and batching lowers
//! the busy share it measures). Idle time inside `io_uring_enter` is not
//! CPU time, so a lightly loaded loop reads as idle however often it wakes
//! and never waits for a batch.

use std::time::{Duration, Instant};

use super::BatchWait;

/// Share of a window the thread must have been on CPU for batching to start.
pub(crate) const ON_AT: f64 = 0.95;
/// Share below which batching stops.
pub(crate) const OFF_BELOW: f64 = 0.75;
/// The shortest window a decision is made on.
const WINDOW: Duration = Duration::from_millis(2);
/// Parks between looks at the clock (keeps `Instant::now` off most parks).
const PARKS_PER_LOOK: u32 = 16;

/// The state of one driver's policy.
#[derive(Debug)]
pub(crate) struct Governor {
    policy: BatchWait,
    on: bool,
    parks: u32,
    since: Instant,
    cpu_since: Duration,
}

impl Governor {
    pub(crate) fn new(policy: BatchWait) -> Governor {
        Governor {
            policy,
            on: matches!(policy, BatchWait::Fixed { .. }),
            parks: 0,
            since: Instant::now(),
            // Only the adaptive policy reads the clock.
            cpu_since: match policy {
                BatchWait::Adaptive { .. } => thread_cpu_time(),
                _ => Duration::ZERO,
            },
        }
    }

    /// What the next blocking park waits for: `Some((want, min_wait))` to
    /// wait for a batch, `None` for one completion.
    pub(crate) fn wait(&self) -> Option<(u32, Duration)> {
        match self.policy {
            BatchWait::Fixed { want, min_wait } | BatchWait::Adaptive { want, min_wait }
                if self.on =>
            {
                Some((want.max(1), min_wait))
            }
            _ => None,
        }
    }

    /// Called after every park: now and then, close the window and decide.
    pub(crate) fn parked(&mut self) {
        if !matches!(self.policy, BatchWait::Adaptive { .. }) {
            return;
        }
        self.parks += 1;
        if self.parks < PARKS_PER_LOOK {
            return;
        }
        self.parks = 0;
        let now = Instant::now();
        if now.duration_since(self.since) >= WINDOW {
            self.observe(now, thread_cpu_time());
        }
    }

    /// Close the window at `now`, the thread having used `cpu` in all.
    fn observe(&mut self, now: Instant, cpu: Duration) {
        let wall = now.duration_since(self.since).as_secs_f64();
        let busy = cpu.saturating_sub(self.cpu_since).as_secs_f64() / wall.max(1e-9);
        self.on = decide(self.on, busy);
        self.since = now;
        self.cpu_since = cpu;
    }

    /// Whether the next blocking park waits for a batch.
    #[cfg(test)]
    fn is_on(&self) -> bool {
        self.on
    }
}

/// The hysteresis: on at `ON_AT`, off below `OFF_BELOW`.
fn decide(on: bool, busy: f64) -> bool {
    if on {
        busy >= OFF_BELOW
    } else {
        busy >= ON_AT
    }
}

/// CPU time this thread has used (user and system).
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if r != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hysteresis() {
        assert!(!decide(false, 0.90));
        assert!(decide(false, 0.96));
        assert!(decide(true, 0.80));
        assert!(!decide(true, 0.70));
    }

    /// Windows of known CPU time: idle and 70%-busy windows never batch,
    /// a saturated one does, and it stops once the load falls.
    #[test]
    fn batches_only_while_saturated() {
        let mut g = Governor::new(BatchWait::AUTO);
        assert_eq!(g.wait(), None);
        let (mut now, mut cpu) = (g.since, g.cpu_since);
        let mut window = |g: &mut Governor, share: f64| {
            now += Duration::from_millis(4);
            cpu += Duration::from_millis(4).mul_f64(share);
            g.observe(now, cpu);
            g.is_on()
        };
        assert!(!window(&mut g, 0.0));
        assert!(
            !window(&mut g, 0.7),
            "a loop with time to spare waits for nobody"
        );
        assert!(window(&mut g, 1.0));
        assert_eq!(g.wait(), Some((32, Duration::from_micros(50))));
        assert!(
            window(&mut g, 0.8),
            "batching lowers the busy share: stay on"
        );
        assert!(!window(&mut g, 0.5));
        assert_eq!(g.wait(), None);
    }

    /// The real clock: a sleeping thread's windows read as idle.
    #[test]
    fn an_idle_thread_never_batches() {
        let mut g = Governor::new(BatchWait::AUTO);
        for _ in 0..4 {
            std::thread::sleep(Duration::from_millis(3));
            for _ in 0..PARKS_PER_LOOK {
                g.parked();
            }
        }
        assert!(!g.is_on());
    }

    #[test]
    fn fixed_and_off_ignore_load() {
        let mut g = Governor::new(BatchWait::Fixed {
            want: 0,
            min_wait: Duration::from_micros(10),
        });
        std::thread::sleep(Duration::from_millis(3));
        for _ in 0..PARKS_PER_LOOK * 2 {
            g.parked();
        }
        assert_eq!(g.wait(), Some((1, Duration::from_micros(10))));
        let g = Governor::new(BatchWait::Off);
        assert_eq!(g.wait(), None);
    }
}
