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
//! That latency is only worth paying when the loop is busy: at light load a
//! request that waits `min_wait` for company that never comes is simply
//! late. [`BatchWait::Adaptive`] therefore measures the loop thread's own
//! CPU time (`CLOCK_THREAD_CPUTIME_ID`) over windows of a few milliseconds
//! and waits for batches only while the thread was busy for most of the
//! last window: on at [`ON_AT`] of a window, off again below [`OFF_BELOW`]
//! (the gap keeps a loop near one threshold from flapping, and batching
//! lowers the busy share it measures). Idle time inside `io_uring_enter`
//! is not CPU time, so a lightly loaded loop reads as idle however often
//! it wakes, and never waits for a batch.

use std::time::{Duration, Instant};

use crate::driver::config::BatchWait;

/// Share of a window the thread must have been on CPU for batching to start.
pub(crate) const ON_AT: f64 = 0.5;
/// Share below which batching stops.
pub(crate) const OFF_BELOW: f64 = 0.3;
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
            cpu_since: thread_cpu_time(),
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
        let wall = now.duration_since(self.since);
        if wall < WINDOW {
            return;
        }
        let cpu = thread_cpu_time();
        let busy = cpu.saturating_sub(self.cpu_since).as_secs_f64() / wall.as_secs_f64();
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
        assert!(!decide(false, 0.45));
        assert!(decide(false, 0.55));
        assert!(decide(true, 0.35));
        assert!(!decide(true, 0.25));
    }

    #[test]
    fn an_idle_thread_never_batches_and_a_spinning_one_does() {
        let mut g = Governor::new(BatchWait::AUTO);
        assert_eq!(g.wait(), None);
        // Idle: the windows pass while the thread sleeps.
        for _ in 0..4 {
            std::thread::sleep(Duration::from_millis(3));
            for _ in 0..PARKS_PER_LOOK {
                g.parked();
            }
        }
        assert!(!g.is_on());
        // Busy: the thread spins through a window (again, should a loaded
        // machine have kept it off its CPU for half of one).
        let deadline = Instant::now() + Duration::from_secs(10);
        while !g.is_on() && Instant::now() < deadline {
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(5) {
                std::hint::spin_loop();
            }
            for _ in 0..PARKS_PER_LOOK {
                g.parked();
            }
        }
        assert!(g.is_on(), "a thread on CPU for a whole window batches");
        assert_eq!(g.wait(), Some((32, Duration::from_micros(50))));
        // Idle again: off after one window.
        std::thread::sleep(Duration::from_millis(5));
        for _ in 0..PARKS_PER_LOOK {
            g.parked();
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
