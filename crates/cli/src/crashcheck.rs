//! `ringkit log crashcheck`: the crash-state explorer of `ringkit-log` on
//! one seeded workload (see `ringkit_log::crashcheck`).

use std::io;
use std::path::PathBuf;

use clap::Args;
use ringkit::Backend;
use ringkit_log::crashcheck::{self, Config, FaultPlan, OpKind};

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
    /// Fail one operation: KIND:N:ERR, the Nth operation of KIND (open,
    /// read, write, sync, alloc, rename, remove, mkdir) fails with ERR (eio,
    /// enospc, eopnotsupp: an `RWF_DSYNC` write refused as by a kernel
    /// without the flag, or short: a short write).
    #[arg(long, value_parser = parse_fault)]
    fault: Option<FaultPlan>,
    /// Print the trace (every recorded event) to stderr.
    #[arg(long)]
    trace: bool,
    /// How the log makes batches durable: dsync (one RWF_DSYNC write),
    /// linked (a write linked to an fdatasync), or drawn at each open
    /// (the default).
    #[arg(long, value_parser = ["dsync", "linked"])]
    sync: Option<String>,
    /// auto | uring | epoll.
    #[arg(long, default_value = "auto")]
    backend: Backend,
}

fn parse_fault(s: &str) -> Result<FaultPlan, String> {
    let parts: Vec<&str> = s.split(':').collect();
    let [kind, nth, err] = parts[..] else {
        return Err(format!("{s}: want KIND:N:ERR, e.g. sync:3:eio"));
    };
    let kind = match kind {
        "open" => OpKind::Open,
        "read" => OpKind::Read,
        "write" => OpKind::Write,
        "sync" => OpKind::Sync,
        "alloc" => OpKind::Alloc,
        "rename" => OpKind::Rename,
        "remove" => OpKind::Remove,
        "mkdir" => OpKind::Mkdir,
        k => return Err(format!("{k}: not an operation kind")),
    };
    let nth = nth.parse().map_err(|e| format!("{nth}: {e}"))?;
    let error = match err {
        "eio" => Some(libc::EIO),
        "enospc" => Some(libc::ENOSPC),
        // On an `RWF_DSYNC` write: the kernel refuses the flag.
        "eopnotsupp" => Some(libc::EOPNOTSUPP),
        "short" => None,
        e => return Err(format!("{e}: want eio, enospc, eopnotsupp or short")),
    };
    Ok(FaultPlan { kind, nth, error })
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
    cfg.fault = a.fault;
    cfg.print_trace = a.trace;
    cfg.dsync = a.sync.as_deref().map(|s| s == "dsync");
    let rt = ringkit::Builder::new().backend(a.backend).build()?;
    let t = std::time::Instant::now();
    let r = rt.block_on(crashcheck::explore(&cfg))?;
    println!(
        "seed {} ops {} {} on {:?}{}: {} events, {} points, {} crash states explored ({} distinct, each recovered) in {:.1} s, {} records and {} edits (truncate, purge, state) acknowledged, {} purged segments recycled",
        a.seed,
        a.ops,
        if a.direct { "O_DIRECT" } else { "buffered" },
        ringkit::backend_report().expect("inside a runtime").chosen,
        match (a.fault, r.fault_fired) {
            (None, _) => String::new(),
            (Some(f), fired) => format!(", fault {f:?} {}", if fired { "fired" } else { "never reached" }),
        },
        r.events,
        r.points,
        r.states,
        r.distinct,
        t.elapsed().as_secs_f64(),
        r.acked,
        r.edits,
        r.recycled
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
