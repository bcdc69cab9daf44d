//! Smoke tests of the wakeup, nop and file studies: each runs for a tiny
//! count or duration and must return a sane structure. No timing is
//! asserted (speed is measured by the studies, never in a test:
//! docs/ARCHITECTURE.md). A study that needs io_uring or a
//! kernel feature this machine lacks is skipped with a printed reason.

use std::io;

use ringkit_bench::file::{self, FileConfig, Job, JobPlan};
use ringkit_bench::nop::{self, NopConfig, NopVariant};
use ringkit_bench::wakeup::{self, Channel, Reader, WakeConfig};

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

#[test]
fn wakeup_every_reader_on_both_backends() {
    let cfg = WakeConfig {
        contenders: wakeup::contenders(&[Channel::Pipe, Channel::Eventfd], true),
        count: 50,
        warmup: 5,
        pause_us: (1, 5),
        rounds: 1,
        reader_cpu: 0,
        writer_cpu: 1,
    };
    let res = match wakeup::run(&cfg, &mut |_| {}) {
        Ok(r) => r,
        Err(e) if unavailable("wakeup", &e) => return,
        Err(e) => panic!("wakeup: {e}"),
    };
    assert_eq!(res.rows.len() + res.skipped.len(), cfg.contenders.len());
    for (n, why) in &res.skipped {
        eprintln!("skipped {n}: {why}");
    }
    for r in &res.rows {
        let s = res.samples.iter().find(|s| s.contender == r.name).unwrap();
        if let Some(e) = &s.error {
            // A flag set this kernel refuses is a skip, anything else a bug.
            assert!(e.contains("refused"), "{}: {e}", r.name);
            eprintln!("skipped {}: {e}", r.name);
            continue;
        }
        assert_eq!(s.latency.count, 50, "{}", r.name);
        let l = &s.latency;
        assert!(l.min <= l.p50 && l.p50 <= l.p90 && l.p90 <= l.p99);
        assert!(l.p99 <= l.p999 && l.p999 <= l.max && l.p50 > 0);
        if matches!(
            r.contender.reader,
            Reader::UringPoll { .. } | Reader::UringRead { .. }
        ) {
            assert!(r.enters_per_wake.is_some());
        }
    }
    // Both runtime backends ran (rt-uring unless io_uring is missing).
    assert!(res
        .rows
        .iter()
        .any(|r| r.name == "rt-epoll (socket)" && r.ok_samples == 1));
    let sec = wakeup::section(&res);
    assert!(sec.markdown.contains("| reader |"));
    assert_eq!(sec.svgs.len(), 2);
    assert!(sec.table.contains("target busy poll"));
}

#[test]
fn file_jobs_on_every_engine_kind() {
    let dir = tempfile::tempdir().expect("temp dir");
    let engines: Vec<file::Engine> = [
        "uring",
        "uring-fixed",
        "rt-uring",
        "rt-epoll",
        "fio-psync",
        "uring-sqpoll-spin",
        "glommio",
    ]
    .iter()
    .map(|e| e.parse().unwrap())
    .collect();
    let cfg = FileConfig {
        dir: dir.path().to_path_buf(),
        size: 2 << 20,
        plans: vec![
            JobPlan {
                job: Job::parse("randread,bs=4k,qd=4,direct=1").unwrap(),
                engines: engines.clone(),
            },
            JobPlan {
                // glommio's DmaFile is O_DIRECT only: skipped, with why.
                job: Job::parse("write,bs=8k,qd=2,direct=0").unwrap(),
                engines: [&engines[..4], &engines[6..]].concat(),
            },
            JobPlan {
                job: Job::parse("write,bs=4k,qd=4,direct=1").unwrap(),
                engines: engines[6..].to_vec(),
            },
        ],
        rounds: 1,
        secs: 0.05,
        cpu: 0,
        sq_cpu: 1,
        allow_shared_sqpoll: false,
    };
    let res = match file::run(&cfg, &mut |_| {}) {
        Ok(r) => r,
        Err(e) if unavailable("file", &e) => return,
        Err(e) => panic!("file: {e}"),
    };
    for (n, why) in &res.skipped {
        eprintln!("skipped {n}: {why}");
    }
    assert_eq!(res.rows.len() + res.skipped.len(), 13);
    assert!(
        res.skipped
            .iter()
            .any(|(n, why)| n.contains("glommio") && why.contains("O_DIRECT only")),
        "{:?}",
        res.skipped
    );
    for r in &res.rows {
        let s = res
            .samples
            .iter()
            .find(|s| s.engine == r.name && s.job == r.job.label())
            .unwrap();
        if let Some(e) = &s.error {
            // O_DIRECT on a filesystem without it is this machine's limit,
            // as is glommio's want of 512 KiB locked memory (`ulimit -l`).
            assert!(
                e.contains("O_DIRECT")
                    || e.contains("unavailable")
                    || e.to_lowercase().contains("memlock"),
                "{}: {e}",
                r.name
            );
            eprintln!("skipped {} / {}: {e}", s.job, r.name);
            continue;
        }
        assert_eq!(r.ok_samples, 1, "{r:?}");
        assert!(r.iops.median > 0.0 && r.lat_p50_us > 0.0 && r.lat_p50_us <= r.lat_p99_us);
        assert!(r.cpu_us_per_io >= 0.0);
    }
    // The test file is gone.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    let sec = file::section(&res);
    assert!(sec.markdown.contains("IOPOLL"));
    assert_eq!(sec.svgs.len(), 2);
}

/// fio with SQPOLL runs two busy threads (its job and the kernel's
/// poller); fio's own usr/sys figures are its job thread's. The study
/// charges fio its job thread over its I/O plus its ring's kernel threads,
/// read from /proc while it runs, and keeps the whole process (start-up
/// and exit included) apart.
#[test]
fn a_fio_run_with_sqpoll_is_charged_both_its_threads() {
    use ringkit_bench::file::fio::{self, FioEngine, FioJob};
    if let Err(why) = fio::version() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("f");
    std::fs::write(&path, vec![7u8; 16 << 20]).unwrap();
    let job = FioJob {
        file: &path,
        size: 16 << 20,
        bs: 4096,
        rw: "randread",
        qd: 8,
        direct: false,
        batch: 1,
        secs: 1.0,
        cpu: 0,
        sq_cpu: 1,
    };
    let engine = FioEngine::IoUring {
        fixed: false,
        sqpoll: true,
        hipri: false,
    };
    let r = match fio::run(&job, engine) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("skipped: fio with SQPOLL failed here: {e}");
            return;
        }
    };
    let n = r.ios as f64;
    let sum = |(u, s): (f64, f64)| (u + s) * n;
    let thread_s = sum(r.thread_cpu_per_io());
    let charged_s = sum(r.cpu_per_io());
    let proc_s = sum(r.process_cpu_per_io());
    eprintln!(
        "fio: job thread {thread_s:.2} s, charged {charged_s:.2} s, whole process {proc_s:.2} s over {:.2} s",
        r.secs
    );
    // The poller is seen and charged. How long it ran depends on what
    // else shares its CPU (other tests, a benchmark beside: it had 0.49 s
    // of 1.01 s with `compare echo` on that CPU), so only that it ran for
    // more than a few clock ticks (`cpu_per_io` adds it to the job
    // thread's).
    let ring_s = r.ring_threads_sys_s + r.ring_threads_user_s;
    assert!(ring_s >= 0.03, "fio's SQPOLL thread was not seen: {r:?}");
    // What is charged is part of the whole (one clock tick of slack per
    // thread read from /proc).
    assert!(
        charged_s <= proc_s + 0.05,
        "charged {charged_s:.3} s > whole {proc_s:.3} s"
    );
}
