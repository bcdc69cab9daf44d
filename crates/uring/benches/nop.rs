//! NOP submit + reap, ringkit-uring side by side with the `io-uring` crate.
//!
//! Both contenders do exactly the same thing per iteration: a ring of
//! [`RING_ENTRIES`] SQEs with default setup flags, push `batch` NOPs,
//! `submit_and_wait(batch)` (one `io_uring_enter`), reap all `batch` CQEs.
//!
//! The process pins itself to CPU 1 first. After the criterion groups
//! (`nop/batch1`, `nop/batch32`; functions `ringkit` and `io-uring-crate`) a
//! summary runs the two contenders interleaved (A B A B ...) in rounds of
//! ~0.5 s and prints the median ns per NOP and the ratio
//! io-uring-crate / ringkit (>= 1.0: ringkit at least as fast).
//!
//! `cargo bench -p ringkit-uring --bench nop`

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};

/// SQ entries of both rings (the CQ gets twice that, the kernel default).
const RING_ENTRIES: u32 = 64;
/// Batch sizes measured.
const BATCHES: [u32; 2] = [1, 32];
/// The CPU the benchmark runs on.
const CPU: usize = 1;
/// Interleaved summary: rounds per contender and batch size, and round length.
const SUMMARY_ROUNDS: usize = 7;
const SUMMARY_ROUND: Duration = Duration::from_millis(500);

/// Pin the calling thread (the only one) to `cpu`.
fn pin_to_cpu(cpu: usize) -> std::io::Result<()> {
    // SAFETY: `cpu_set_t` is a plain bit set; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` (1) is below CPU_SETSIZE and `set` is a valid, writable cpu_set_t.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is this thread; `set` is valid for `size_of::<cpu_set_t>()` bytes.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// One contender: a ring plus its submit+reap round.
trait Contender {
    const NAME: &'static str;
    /// Push `n` NOPs, submit and wait for `n`, reap all `n`.
    fn round(&mut self, n: u32);
}

struct Ringkit(ringkit_uring::IoUring);

impl Ringkit {
    fn new() -> Self {
        let ring = ringkit_uring::IoUring::new(RING_ENTRIES).expect("ringkit ring");
        assert_eq!(ring.setup_flags(), 0, "ringkit ring has default flags");
        Ringkit(ring)
    }
}

impl Contender for Ringkit {
    const NAME: &'static str = "ringkit";

    #[inline]
    fn round(&mut self, n: u32) {
        let ring = &mut self.0;
        let nop = ringkit_uring::opcode::Nop::new().build();
        for i in 0..n {
            let e = nop.user_data(u64::from(i));
            // SAFETY: a NOP references no memory.
            unsafe { ring.push(e.sqe()) }.expect("sq has room");
        }
        let submitted = ring.submit_and_wait(n).expect("submit_and_wait");
        debug_assert_eq!(submitted, n);
        let mut reaped = 0u32;
        for cqe in ring.completions() {
            black_box(cqe);
            reaped += 1;
        }
        assert_eq!(reaped, n, "ringkit reaped every NOP");
    }
}

struct IoUringCrate(io_uring::IoUring);

impl IoUringCrate {
    fn new() -> Self {
        let ring = io_uring::IoUring::new(RING_ENTRIES).expect("io-uring ring");
        IoUringCrate(ring)
    }
}

impl Contender for IoUringCrate {
    const NAME: &'static str = "io-uring-crate";

    #[inline]
    fn round(&mut self, n: u32) {
        let ring = &mut self.0;
        let nop = io_uring::opcode::Nop::new().build();
        {
            let mut sq = ring.submission();
            for i in 0..n {
                let e = nop.clone().user_data(u64::from(i));
                // SAFETY: a NOP references no memory.
                unsafe { sq.push(&e) }.expect("sq has room");
            }
        }
        let submitted = ring.submit_and_wait(n as usize).expect("submit_and_wait");
        debug_assert_eq!(submitted, n as usize);
        let mut reaped = 0u32;
        for cqe in ring.completion() {
            black_box(cqe);
            reaped += 1;
        }
        assert_eq!(reaped, n, "io-uring-crate reaped every NOP");
    }
}

fn bench_one<C: Contender>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    c: &mut C,
    batch: u32,
) {
    group.bench_function(C::NAME, |b| b.iter(|| c.round(black_box(batch))));
}

fn criterion_groups(cr: &mut Criterion) {
    let mut rk = Ringkit::new();
    let mut iu = IoUringCrate::new();
    for batch in BATCHES {
        let mut group = cr.benchmark_group(format!("nop/batch{batch}"));
        group.throughput(Throughput::Elements(u64::from(batch)));
        bench_one(&mut group, &mut rk, batch);
        bench_one(&mut group, &mut iu, batch);
        group.finish();
    }
}

/// Run `c` with `batch` for about `dur`; returns ns per NOP.
fn timed_round<C: Contender>(c: &mut C, batch: u32, dur: Duration) -> f64 {
    // Check the clock every CHUNK rounds so reading it costs next to nothing.
    const CHUNK: u64 = 256;
    let start = Instant::now();
    let mut rounds = 0u64;
    loop {
        for _ in 0..CHUNK {
            c.round(black_box(batch));
        }
        rounds += CHUNK;
        let el = start.elapsed();
        if el >= dur {
            return el.as_nanos() as f64 / (rounds * u64::from(batch)) as f64;
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Interleaved A B A B rounds; prints medians and the ratio.
fn summary(rounds: usize, round: Duration) {
    println!();
    println!(
        "== summary: interleaved ringkit / io-uring-crate, {rounds} rounds of {} ms each, \
         ring {RING_ENTRIES} entries, default flags, pinned to CPU {CPU} ==",
        round.as_millis()
    );
    println!(
        "{:>7}  {:>16}  {:>23}  {:>26}",
        "batch", "ringkit ns/NOP", "io-uring-crate ns/NOP", "ratio io-uring/ringkit"
    );
    let mut rk = Ringkit::new();
    let mut iu = IoUringCrate::new();
    for batch in BATCHES {
        // Warm both up (page faults, caches, branch predictors).
        timed_round(&mut rk, batch, Duration::from_millis(50));
        timed_round(&mut iu, batch, Duration::from_millis(50));
        let mut a = Vec::with_capacity(rounds);
        let mut b = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            a.push(timed_round(&mut rk, batch, round));
            b.push(timed_round(&mut iu, batch, round));
        }
        let (amin, amax) = (
            a.iter().cloned().fold(f64::MAX, f64::min),
            a.iter().cloned().fold(0.0, f64::max),
        );
        let (bmin, bmax) = (
            b.iter().cloned().fold(f64::MAX, f64::min),
            b.iter().cloned().fold(0.0, f64::max),
        );
        let ma = median(&mut a);
        let mb = median(&mut b);
        println!("{batch:>7}  {ma:>16.1}  {mb:>23.1}  {:>26.3}", mb / ma);
        println!(
            "{:>7}  {:>16}  {:>23}",
            "range",
            format!("{amin:.1}..{amax:.1}"),
            format!("{bmin:.1}..{bmax:.1}")
        );
    }
    println!("(ratio >= 1.0 means ringkit is at least as fast)");
}

fn main() {
    match pin_to_cpu(CPU) {
        Ok(()) => println!("nop bench: pinned to CPU {CPU} (sched_setaffinity)"),
        Err(e) => println!("nop bench: could NOT pin to CPU {CPU}: {e}; figures may be noisy"),
    }
    let args: Vec<String> = std::env::args().collect();
    // `cargo test --benches` runs us with --test: one quick pass, no long summary.
    let test_mode = args.iter().any(|a| a == "--test");
    let list_mode = args.iter().any(|a| a == "--list");

    let mut cr = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
        .configure_from_args();
    criterion_groups(&mut cr);
    cr.final_summary();

    if list_mode {
        return;
    }
    if test_mode {
        summary(1, Duration::from_millis(5));
    } else {
        summary(SUMMARY_ROUNDS, SUMMARY_ROUND);
    }
}
