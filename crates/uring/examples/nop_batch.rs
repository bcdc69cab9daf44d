//! Submit N NOPs in batches of B on ringkit-uring and report the rate.
//!
//! One `submit_and_wait(batch)` (one `io_uring_enter`) per batch; the enters
//! are counted here, not estimated.
//!
//! `cargo run --release -p ringkit-uring --example nop_batch -- [N] [B]`
//! (defaults: N = 1_000_000, B = 32)

use std::process::ExitCode;
use std::time::Instant;

use ringkit_uring::{opcode, IoUring};

/// Largest SQ the kernel accepts (`IORING_MAX_ENTRIES`).
const MAX_BATCH: u64 = 32768;

fn usage(msg: &str) -> ExitCode {
    eprintln!("nop_batch: {msg}");
    eprintln!("usage: nop_batch [N] [B]");
    eprintln!("  Submit N NOPs (default 1_000_000) in batches of B (default 32, 1..={MAX_BATCH}).");
    ExitCode::from(2)
}

/// A count, underscores allowed (`1_000_000`).
fn parse(arg: &str) -> Option<u64> {
    arg.replace('_', "").parse().ok()
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() > 2 || args.iter().any(|a| a == "-h" || a == "--help") {
        return usage("at most two arguments");
    }
    let Some(total) = args.first().map_or(Some(1_000_000), |a| parse(a)) else {
        return usage(&format!("N must be a number, got {:?}", args[0]));
    };
    let Some(batch) = args.get(1).map_or(Some(32), |a| parse(a)) else {
        return usage(&format!("B must be a number, got {:?}", args[1]));
    };
    if batch == 0 || batch > MAX_BATCH {
        return usage(&format!("B must be in 1..={MAX_BATCH}, got {batch}"));
    }
    let batch = batch as u32;

    let mut ring = match IoUring::new(batch.next_power_of_two()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("nop_batch: io_uring setup failed: {e}");
            eprintln!("  {}", ringkit_uring::explain_setup_error(&e));
            return ExitCode::FAILURE;
        }
    };
    let nop = opcode::Nop::new().build();

    let mut done: u64 = 0;
    let mut enters: u64 = 0;
    let start = Instant::now();
    while done < total {
        let n = (total - done).min(u64::from(batch)) as u32;
        for i in 0..n {
            let e = nop.user_data(done + u64::from(i));
            // SAFETY: a NOP references no memory.
            if unsafe { ring.push(e.sqe()) }.is_err() {
                eprintln!("nop_batch: submission queue unexpectedly full");
                return ExitCode::FAILURE;
            }
        }
        let mut reaped = 0u32;
        while reaped < n {
            // First pass submits the batch; a pass after EINTR only waits.
            match ring.submit_and_wait(n - reaped) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    eprintln!("nop_batch: io_uring_enter: {e}");
                    return ExitCode::FAILURE;
                }
            }
            enters += 1;
            for cqe in ring.completions() {
                if cqe.res != 0 {
                    eprintln!("nop_batch: NOP {} failed: {}", cqe.user_data, cqe.res);
                    return ExitCode::FAILURE;
                }
                reaped += 1;
            }
        }
        done += u64::from(n);
    }
    let secs = start.elapsed().as_secs_f64();

    println!(
        "{total} NOPs in batches of {batch} (ring {} entries, flags {})",
        ring.sq().capacity(),
        ringkit_uring::flag_names(ring.setup_flags(), ringkit_uring::sys::SETUP_FLAG_NAMES)
    );
    println!("time:             {:.3} s", secs);
    if total > 0 {
        println!("NOPs/s:           {:.0}", total as f64 / secs);
        println!("ns per NOP:       {:.1}", secs * 1e9 / total as f64);
        println!("io_uring_enter:   {enters}");
        println!("NOPs per enter:   {:.2}", total as f64 / enters as f64);
    }
    ExitCode::SUCCESS
}
