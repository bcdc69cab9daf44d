//! `ringkit log crashcheck`: the crash-state explorer of `ringkit-log` on
//! one seeded workload (see `ringkit_log::crashcheck`).

use std::io;
use std::path::PathBuf;

use clap::Args;
use ringkit::Backend;
use ringkit_log::crashcheck::{self, Config};

/// `ringkit log crashcheck`.
#[derive(Args, Debug)]
pub struct CrashcheckArgs {
    /// Workload steps (each appends 1-4 records; a reopen now and then).
    #[arg(long, default_value_t = 60)]
    ops: usize,
    /// Seed of the workload and of the states drawn.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write with O_DIRECT.
    #[arg(long)]
    direct: bool,
    /// The most crash states explored at one point of the trace.
    #[arg(long, default_value_t = 96)]
    budget: usize,
    /// Scratch directory (default: /dev/shm if there, else the temp dir);
    /// a new directory is made in it and removed after.
    #[arg(long)]
    scratch: Option<PathBuf>,
    /// auto | uring | epoll.
    #[arg(long, default_value = "auto")]
    backend: Backend,
}

pub fn run(a: CrashcheckArgs) -> io::Result<()> {
    let scratch = a.scratch.unwrap_or_else(|| {
        let shm = PathBuf::from("/dev/shm");
        if shm.is_dir() {
            shm
        } else {
            std::env::temp_dir()
        }
    });
    let mut cfg = Config::new(a.ops, a.seed, scratch);
    cfg.direct = a.direct;
    cfg.budget = a.budget.max(2);
    let rt = ringkit::Builder::new().backend(a.backend).build()?;
    let t = std::time::Instant::now();
    let r = rt.block_on(crashcheck::explore(&cfg))?;
    println!(
        "seed {} ops {} {} on {:?}: {} events, {} points, {} crash states explored in {:.1} s, {} records acknowledged",
        a.seed,
        a.ops,
        if a.direct { "O_DIRECT" } else { "buffered" },
        ringkit::backend_report().chosen,
        r.events,
        r.points,
        r.states,
        t.elapsed().as_secs_f64(),
        r.acked
    );
    if r.violations.is_empty() {
        println!("no violation");
        return Ok(());
    }
    for v in &r.violations {
        println!("VIOLATION: {v}");
    }
    std::process::exit(1);
}
