//! Smoke tests of the wakeup, nop and file studies: each runs for a tiny
//! count or duration and must return a sane structure. No timing is
//! asserted (BENCHMARKING.md rule 8). A study that needs io_uring or a
//! kernel feature this machine lacks is skipped with a printed reason.

use std::io;

use ringkit_bench::nop::{self, NopConfig, NopVariant};

/// True (after printing why) when `e` means "this machine cannot do it".
fn unavailable(what: &str, e: &io::Error) -> bool {
    if e.kind() == io::ErrorKind::Unsupported {
        eprintln!("skipped {what}: {e}");
        return true;
    }
    false
}

#[test]
fn nop_runs_every_variant_and_batch() {
    let cfg = NopConfig {
        batches: vec![1, 4],
        variants: vec![NopVariant::Plain, NopVariant::RegFd, NopVariant::Sqpoll],
        rounds: 2,
        secs: 0.01,
        cpu: 0,
        sqpoll_cpu: 1,
    };
    let res = match nop::run(&cfg, &mut |_| {}) {
        Ok(r) => r,
        Err(e) if unavailable("nop", &e) => return,
        Err(e) => panic!("nop: {e}"),
    };
    let expected_variants = 3 - res.skipped.len();
    assert_eq!(res.rows.len(), 2 * expected_variants);
    assert_eq!(res.samples.len(), 2 * 2 * expected_variants);
    for r in &res.rows {
        if r.variant == NopVariant::RegFd && r.ok_samples == 0 {
            eprintln!("regfd failed here (old kernel?): {:?}", res.samples);
            continue;
        }
        assert_eq!(r.ok_samples, 2, "{r:?} / {:?}", res.samples);
        assert!(r.nops_per_sec.median > 0.0);
        match r.variant {
            // One enter per batch, counted by the ring.
            NopVariant::Plain | NopVariant::RegFd => {
                assert_eq!(r.nops_per_enter, Some(f64::from(r.batch)))
            }
            NopVariant::Sqpoll => assert!(r.flags.contains("SQPOLL")),
        }
    }
    let sec = nop::section(&res);
    assert!(sec.markdown.starts_with("## "));
    assert_eq!(sec.svgs.len(), 1);
    assert!(sec.json["rows"].is_array());
}

#[test]
fn nop_refuses_sqpoll_on_the_submitters_cpu() {
    let cfg = NopConfig {
        batches: vec![1],
        variants: vec![NopVariant::Sqpoll],
        rounds: 1,
        secs: 0.01,
        cpu: 0,
        sqpoll_cpu: 0,
    };
    let res = match nop::run(&cfg, &mut |_| {}) {
        Ok(r) => r,
        Err(e) if unavailable("nop", &e) => return,
        Err(e) => panic!("nop: {e}"),
    };
    assert!(res.rows.is_empty());
    assert_eq!(res.skipped.len(), 1);
    assert!(res.skipped[0].1.contains("share CPU"));
}
