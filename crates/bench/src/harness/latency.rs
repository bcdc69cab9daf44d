//! Shared measuring helpers of the wakeup, nop and file studies: latency
//! percentiles, a monotonic nanosecond clock, this process's CPU time, a
//! small deterministic RNG and the interleaving order of contenders.
//!
//! Percentiles use the nearest-rank method on the sorted samples: `pXX` is
//! the smallest sample such that at least XX % of all samples are `<=` it.
//! No interpolation, so every reported figure is a latency that happened.

use serde::Serialize;

/// Latency figures of one sample, in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct LatencySummary {
    /// Number of measurements.
    pub count: u64,
    /// Mean.
    pub avg: f64,
    /// Smallest.
    pub min: u64,
    /// Median (nearest rank).
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest.
    pub max: u64,
}

/// The nearest-rank `p`-th percentile (`0.0 < p <= 100.0`) of `sorted`
/// (ascending). `None` when `sorted` is empty.
pub fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    // rank = ceil(p/100 * n), clamped to 1..=n; the epsilon keeps float
    // error (0.999 * 1000 = 999.0000000000001) from bumping an exact rank.
    let rank = (p * n as f64 / 100.0 - 1e-9).ceil() as usize;
    Some(sorted[rank.clamp(1, n) - 1])
}

impl LatencySummary {
    /// Summarise `samples` (sorted in place). All zeros when empty.
    pub fn from_samples(samples: &mut [u64]) -> LatencySummary {
        if samples.is_empty() {
            return LatencySummary::default();
        }
        samples.sort_unstable();
        let sum: u128 = samples.iter().map(|&v| u128::from(v)).sum();
        let p = |q| percentile(samples, q).unwrap_or(0);
        LatencySummary {
            count: samples.len() as u64,
            avg: sum as f64 / samples.len() as f64,
            min: samples[0],
            p50: p(50.0),
            p90: p(90.0),
            p99: p(99.0),
            p999: p(99.9),
            max: samples[samples.len() - 1],
        }
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds (vDSO, no syscall). The same clock on
/// every CPU, so stamps taken on two CPUs can be subtracted.
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// User and system CPU seconds of this whole process (every thread, kernel
/// io threads such as the SQPOLL poller included), from `getrusage`.
pub fn process_cpu() -> (f64, f64) {
    // SAFETY: all-zero is a valid rusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is valid and writable.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

/// The order of contenders in `round`: rotated by one each round
/// (A B C, B C A, C A B, …) so slow drift hits every contender alike.
pub fn rotation(n: usize, round: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |i| (i + round) % n.max(1))
}

/// Each of `list` once per round for `rounds` rounds, as (round, item),
/// the order rotated every round ([`rotation`]: A B C, B C A, C A B, ...),
/// so a drift of the machine over the run spreads over every contender
/// instead of falling on one. Every study's rounds run in this order.
pub fn schedule<C>(list: &[C], rounds: usize) -> impl Iterator<Item = (usize, &C)> {
    (0..rounds).flat_map(move |r| rotation(list.len(), r).map(move |i| (r, &list[i])))
}

/// Busy-wait `ns` nanoseconds on the monotonic clock.
#[inline]
pub fn spin_for(ns: u64) {
    let end = now_ns() + ns;
    while now_ns() < end {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), Some(50));
        assert_eq!(percentile(&v, 90.0), Some(90));
        assert_eq!(percentile(&v, 99.0), Some(99));
        assert_eq!(percentile(&v, 99.9), Some(100));
        assert_eq!(percentile(&v, 100.0), Some(100));
        assert_eq!(percentile(&v, 0.0), Some(1));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[7], 99.9), Some(7));
        // Two samples: the median is the lower one (rank ceil(1.0) = 1).
        assert_eq!(percentile(&[3, 9], 50.0), Some(3));
        assert_eq!(percentile(&[3, 9], 50.1), Some(9));
    }

    #[test]
    fn summary_sorts_and_averages() {
        let mut v = vec![5, 1, 4, 2, 3];
        let s = LatencySummary::from_samples(&mut v);
        assert_eq!(v, vec![1, 2, 3, 4, 5]);
        assert_eq!((s.count, s.min, s.max, s.p50), (5, 1, 5, 3));
        assert!((s.avg - 3.0).abs() < 1e-9);
        assert_eq!((s.p90, s.p99, s.p999), (5, 5, 5));
        assert_eq!(
            LatencySummary::from_samples(&mut []),
            LatencySummary::default()
        );
    }

    #[test]
    fn summary_of_a_long_tail() {
        // 999 fast samples and one slow one: only p99.9 and max see it.
        let mut v = vec![1000u64; 999];
        v.push(1_000_000);
        let s = LatencySummary::from_samples(&mut v);
        assert_eq!((s.p50, s.p99, s.p999, s.max), (1000, 1000, 1000, 1_000_000));
        let mut v = vec![1000u64; 998];
        v.extend([1_000_000, 1_000_000]);
        let s = LatencySummary::from_samples(&mut v);
        assert_eq!(s.p999, 1_000_000);
    }

    #[test]
    fn rotation_covers_everyone_once() {
        for round in 0..5 {
            let mut order: Vec<usize> = rotation(3, round).collect();
            assert_eq!(order[0], round % 3);
            order.sort_unstable();
            assert_eq!(order, vec![0, 1, 2]);
        }
        assert_eq!(rotation(0, 3).count(), 0);
    }
}
