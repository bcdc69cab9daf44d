//! The file study: every (job, engine) pair interleaved over rounds, fio
//! beside it, summarised per pair.

use std::io;
use std::path::Path;
use std::time::Instant;

use ringkit::Backend;
use ringkit_uring::IoUring;

use super::engines::{run_glommio, run_rt, run_uring};
use super::fio::{self, FioJob};
use super::job::{Engine, Job};
use super::report::section;
use super::testfile::{describe, probe_iopoll, TestFile};
use crate::harness::latency::{schedule, LatencySummary};
use crate::harness::stat::stat;
use crate::harness::study::{Section, StudyOpts};
use crate::harness::sysinfo::SystemInfo;
use crate::raw::file::Measured;

pub use super::spec::{FileConfig, FileResults, FileRow, FileSample, FileTarget, JobPlan};

/// Why `engine` must not run with `cfg`, if so; the bool says "only warn".
fn sqpoll_check(cfg: &FileConfig, engine: Engine) -> Option<(String, bool)> {
    if !engine.sqpoll() {
        return None;
    }
    // SAFETY: sysconf has no preconditions.
    let cores = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
    (cores < 2 || cfg.sq_cpu == cfg.cpu).then(|| {
        (
            format!(
                "SQPOLL poller would share CPU {} with the submitter ({cores} CPUs online): \
                 the two compete for one CPU (fio's io_uring engine fell from 62k to 4.6k IOPS \
                 in this setup); give the poller its own CPU (--sq-cpu)",
                cfg.cpu
            ),
            cfg.allow_shared_sqpoll,
        )
    })
}

fn sample(cfg: &FileConfig, path: &Path, job: &Job, engine: Engine, round: usize) -> FileSample {
    let mut s = FileSample {
        job: job.label(),
        engine: engine.name(),
        round,
        ..Default::default()
    };
    let measured: io::Result<Measured> = match engine {
        Engine::Fio(fe) => {
            let fj = FioJob {
                file: path,
                size: cfg.size,
                bs: job.bs,
                rw: job.rw.name(),
                qd: job.qd,
                direct: job.direct,
                batch: job.batch,
                secs: cfg.secs,
                cpu: cfg.cpu,
                sq_cpu: cfg.sq_cpu,
            };
            match fio::run(&fj, fe) {
                Ok(r) => {
                    s.ios = r.ios;
                    s.secs = r.secs;
                    s.lat_avg = r.lat_avg;
                    s.lat_p50 = r.lat_p50;
                    s.lat_p99 = r.lat_p99;
                    (s.cpu_user_per_io, s.cpu_sys_per_io) = r.cpu_per_io();
                    let (u, sy) = r.process_cpu_per_io();
                    s.whole_cpu_per_io = u + sy;
                    s.setup = format!("{} {}", r.version, fio::args(&fj, fe).join(" "));
                    return s;
                }
                Err(e) => Err(e),
            }
        }
        _ => std::thread::scope(|sc| {
            sc.spawn(|| {
                ringkit::pin_to_cpu(cfg.cpu)?;
                match engine {
                    Engine::Uring {
                        fixed,
                        sqpoll,
                        iopoll,
                        spin,
                    } => run_uring(cfg, path, job, (fixed, sqpoll, iopoll, spin)),
                    Engine::Rt(b) => run_rt(cfg, path, job, b),
                    Engine::Glommio => run_glommio(cfg, path, job),
                    Engine::Fio(_) => unreachable!("handled above"),
                }
            })
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("measuring thread panicked")))
        }),
    };
    match measured {
        Ok(mut m) => {
            let l = LatencySummary::from_samples(&mut m.lat);
            s.ios = l.count;
            s.secs = m.secs;
            s.lat_avg = l.avg;
            s.lat_p50 = l.p50 as f64;
            s.lat_p99 = l.p99 as f64;
            let n = l.count.max(1) as f64;
            s.cpu_user_per_io = m.cpu.0 / n;
            s.cpu_sys_per_io = m.cpu.1 / n;
            s.whole_cpu_per_io = s.cpu_user_per_io + s.cpu_sys_per_io;
            s.enters_per_io = m.enters.map(|e| e as f64 / n);
            s.setup = m.setup;
            if l.count == 0 {
                s.error = Some("no I/O completed".into());
            }
        }
        Err(e) => s.error = Some(e.to_string()),
    }
    s
}

/// Run the file study. `progress` gets one line per sample.
pub fn run(cfg: &FileConfig, progress: &mut dyn FnMut(&str)) -> io::Result<FileResults> {
    let wall = Instant::now();
    let mut skipped = Vec::new();
    let mut warnings = Vec::new();
    let fio_version = fio::version();
    let uring_ok = IoUring::new(8).map(drop).map_err(|e| e.to_string());
    if cfg.size < 1 << 20 {
        return Err(crate::harness::err::invalid_input(
            "the test file must be at least 1 MiB",
        ));
    }
    progress(&format!(
        "creating a {} MiB test file in {}",
        cfg.size >> 20,
        cfg.dir.display()
    ));
    let t_fill = Instant::now();
    let tf = TestFile::create(&cfg.dir, cfg.size)?;
    let (fs, device) = describe(tf.path());
    if fs == "tmpfs" {
        warnings.push(format!(
            "{} is on tmpfs: this measures memory, not a disk; name a directory on the disk (--dir)",
            cfg.dir.display()
        ));
    }
    let wants_iopoll = cfg
        .plans
        .iter()
        .flat_map(|p| &p.engines)
        .any(|e| e.iopoll());
    let iopoll = match &uring_ok {
        Ok(()) if wants_iopoll || cfg.plans.iter().any(|p| p.job.direct) => {
            let bs = cfg.plans.first().map_or(4096, |p| p.job.bs);
            probe_iopoll(tf.path(), bs)
        }
        Ok(()) => Err("not probed (no O_DIRECT job)".into()),
        Err(e) => Err(format!("io_uring unavailable: {e}")),
    };
    let target = FileTarget {
        path: tf.path().display().to_string(),
        device,
        fs,
        fill_secs: t_fill.elapsed().as_secs_f64(),
        iopoll,
    };
    // Decide what runs.
    let mut list: Vec<(Job, Engine)> = Vec::new();
    for p in &cfg.plans {
        for &e in &p.engines {
            let key = format!("{} / {}", p.job.label(), e.name());
            let why = match e {
                Engine::Fio(_) => fio_version.as_ref().err().cloned(),
                Engine::Glommio if !p.job.direct => {
                    Some("glommio's DmaFile is O_DIRECT only".into())
                }
                Engine::Uring { .. } | Engine::Rt(Backend::Uring) => uring_ok
                    .as_ref()
                    .err()
                    .map(|x| format!("io_uring unavailable: {x}")),
                _ => None,
            };
            let why = why.or_else(|| {
                (e.iopoll() && (!p.job.direct || target.iopoll.is_err())).then(|| {
                    format!(
                        "IOPOLL not supported here: {}",
                        if p.job.direct {
                            target.iopoll.clone().err().unwrap_or_default()
                        } else {
                            "needs O_DIRECT".into()
                        }
                    )
                })
            });
            let why = why.or_else(|| match sqpoll_check(cfg, e) {
                Some((w, true)) => {
                    warnings.push(format!("{key}: WARNING: {w}"));
                    None
                }
                Some((w, false)) => Some(w),
                None => None,
            });
            match why {
                Some(w) => skipped.push((key, w)),
                None => list.push((p.job, e)),
            }
        }
    }
    let total = list.len() * cfg.rounds;
    let mut samples = Vec::with_capacity(total);
    for (round, &(job, e)) in schedule(&list, cfg.rounds) {
        let s = sample(cfg, tf.path(), &job, e, round);
        progress(&format!(
            "[{}/{total}] round {round} {} / {}: {}",
            samples.len() + 1,
            s.job,
            s.engine,
            match &s.error {
                Some(e) => format!("error: {e}"),
                None => format!("{:.0} IOPS", s.ios as f64 / s.secs.max(1e-9)),
            }
        ));
        samples.push(s);
    }
    drop(tf);
    let rows = summarize(&list, &samples);
    Ok(FileResults {
        system: SystemInfo::gather(),
        config: cfg.clone(),
        target,
        fio: fio_version,
        rows,
        samples,
        skipped,
        warnings,
        wall_secs: wall.elapsed().as_secs_f64(),
    })
}

fn summarize(list: &[(Job, Engine)], samples: &[FileSample]) -> Vec<FileRow> {
    let mut rows: Vec<FileRow> = list
        .iter()
        .map(|&(job, engine)| {
            let (jl, en) = (job.label(), engine.name());
            let mine: Vec<&FileSample> = samples
                .iter()
                .filter(|s| s.job == jl && s.engine == en)
                .collect();
            let good: Vec<&&FileSample> = mine
                .iter()
                .filter(|s| s.error.is_none() && s.ios > 0 && s.secs > 0.0)
                .collect();
            let med =
                |f: &dyn Fn(&FileSample) -> f64| stat(good.iter().map(|s| f(s)).collect()).median;
            let epi: Vec<f64> = good.iter().filter_map(|s| s.enters_per_io).collect();
            let iops = stat(good.iter().map(|s| s.ios as f64 / s.secs).collect());
            FileRow {
                job,
                engine,
                name: en,
                effective_qd: engine.effective_qd(job.qd),
                mib_s: iops.median * f64::from(job.bs) / (1 << 20) as f64,
                iops,
                lat_avg_us: med(&|s| s.lat_avg) / 1e3,
                lat_p50_us: med(&|s| s.lat_p50) / 1e3,
                lat_p99_us: med(&|s| s.lat_p99) / 1e3,
                cpu_us_per_io: med(&|s| (s.cpu_user_per_io + s.cpu_sys_per_io) * 1e6),
                cpu_user_us: med(&|s| s.cpu_user_per_io * 1e6),
                cpu_sys_us: med(&|s| s.cpu_sys_per_io * 1e6),
                whole_cpu_us: med(&|s| s.whole_cpu_per_io * 1e6),
                enters_per_io: (!epi.is_empty()).then(|| stat(epi).median),
                iops_vs_fio: None,
                cpu_vs_fio: None,
                sys_vs_fio: None,
                fio_peer: None,
                setup: good.first().map_or_else(String::new, |s| s.setup.clone()),
                ok_samples: good.len(),
                samples: mine.len(),
            }
        })
        .collect();
    let peers: Vec<(Job, Engine, f64, f64, f64)> = rows
        .iter()
        .filter(|r| r.ok_samples > 0)
        .map(|r| {
            (
                r.job,
                r.engine,
                r.iops.median,
                r.cpu_us_per_io,
                r.cpu_sys_us,
            )
        })
        .collect();
    for r in &mut rows {
        let Some(peer) = r.engine.fio_peer() else {
            continue;
        };
        if let Some(&(_, _, iops, cpu, sys)) = peers.iter().find(|p| p.0 == r.job && p.1 == peer) {
            r.fio_peer = Some(peer.name());
            if r.ok_samples > 0 && iops > 0.0 {
                r.iops_vs_fio = Some(r.iops.median / iops);
                r.cpu_vs_fio = (cpu > 0.0).then(|| r.cpu_us_per_io / cpu);
                r.sys_vs_fio = (sys > 0.0).then(|| r.cpu_sys_us / sys);
            }
        }
    }
    rows
}

fn engines(names: &[&str]) -> Vec<Engine> {
    names
        .iter()
        .map(|n| n.parse().expect("built-in engine names parse"))
        .collect()
}

/// The engines of the seed's fio table rows: ringkit's ring with and
/// without SQPOLL, the runtime, fio's io_uring with and without SQPOLL,
/// libaio.
const SEED_TABLE: &[&str] = &[
    "uring",
    "uring-sqpoll",
    "rt-uring",
    "glommio",
    "fio-io_uring",
    "fio-io_uring-sqpoll",
    "fio-libaio",
];

/// The plans `ringkit compare file` runs. Full (about 3 minutes): 4 KiB
/// randread qd32 on every engine, randread qd1, sequential read qd32 at
/// 128 KiB, the seed's table (4 KiB qd32 sequential read and write and
/// random write, SQPOLL on and off) and randread qd32 submitted in
/// batches of 32; `--quick`: randread qd32 on six engines and the
/// sequential-write row of the seed's table.
pub fn default_plans(quick: bool) -> Vec<JobPlan> {
    let job = |s: &str| Job::parse(s).expect("built-in job specs parse");
    if quick {
        return vec![
            JobPlan {
                job: job("randread,bs=4k,qd=32,direct=1"),
                engines: engines(&[
                    "uring",
                    "uring-fixed",
                    "rt-uring",
                    "rt-epoll",
                    "glommio",
                    "fio-io_uring",
                    "fio-psync",
                ]),
            },
            JobPlan {
                // The seed's table in brief: sequential writes, SQPOLL on and off.
                job: job("write,bs=4k,qd=32,direct=1"),
                engines: engines(SEED_TABLE),
            },
        ];
    }
    vec![
        JobPlan {
            job: job("randread,bs=4k,qd=32,direct=1"),
            engines: engines(&[
                "uring",
                "uring-fixed",
                "uring-sqpoll",
                "uring-sqpoll-spin",
                "uring-iopoll",
                "rt-uring",
                "rt-epoll",
                "glommio",
                "fio-io_uring",
                "fio-io_uring-fixed",
                "fio-io_uring-sqpoll",
                "fio-io_uring-iopoll",
                "fio-libaio",
                "fio-psync",
            ]),
        },
        JobPlan {
            job: job("randread,bs=4k,qd=1,direct=1"),
            engines: engines(&["uring", "rt-uring", "rt-epoll", "fio-io_uring", "fio-psync"]),
        },
        JobPlan {
            job: job("read,bs=128k,qd=32,direct=1"),
            engines: engines(&["uring", "fio-io_uring", "fio-libaio"]),
        },
        // The seed's fio table: sequential read and write and random write
        // at 4 KiB, qd 32, SQPOLL on and off, against fio's io_uring and
        // libaio (random read is the first plan).
        JobPlan {
            job: job("read,bs=4k,qd=32,direct=1"),
            engines: engines(SEED_TABLE),
        },
        JobPlan {
            job: job("write,bs=4k,qd=32,direct=1"),
            engines: engines(SEED_TABLE),
        },
        JobPlan {
            job: job("randwrite,bs=4k,qd=32,direct=1"),
            engines: engines(SEED_TABLE),
        },
        JobPlan {
            job: job("randread,bs=4k,qd=32,direct=1,batch=32"),
            engines: engines(&["uring", "uring-fixed", "fio-io_uring"]),
        },
    ]
}

/// The configuration `ringkit compare file` uses: the test file in the
/// temp dir (`TMPDIR`), 256 MiB (quick: 64 MiB), 5 rounds of 1.5 s (quick:
/// 3 of 1 s). A VM disk's IOPS drift ±15% between samples: more, shorter
/// interleaved rounds give steadier medians than few long ones.
pub fn config_for(opts: &StudyOpts) -> FileConfig {
    FileConfig {
        dir: std::env::temp_dir(),
        size: if opts.quick { 64 << 20 } else { 256 << 20 },
        plans: default_plans(opts.quick),
        rounds: opts.rounds.unwrap_or(if opts.quick { 3 } else { 5 }),
        secs: opts.secs.unwrap_or(if opts.quick { 1.0 } else { 1.5 }),
        cpu: opts.client_cpu,
        sq_cpu: opts.server_cpu,
        allow_shared_sqpoll: false,
    }
}

/// Run the file study for `ringkit compare`.
pub fn study(opts: &StudyOpts, progress: &mut dyn FnMut(&str)) -> io::Result<Section> {
    Ok(section(&run(&config_for(opts), progress)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn shared_sqpoll_is_refused_unless_allowed() {
        let mut cfg = config_for(&StudyOpts {
            quick: true,
            rounds: None,
            secs: None,
            server_cpu: 0,
            client_cpu: 0,
            peer_syscalls: None,
            out_dir: PathBuf::new(),
            ringkit_bin: PathBuf::new(),
            peer_bin: Err(String::new()),
            want_peer_syscalls: false,
            conns: Vec::new(),
            msg_len: 512,
            pipeline: 1,
            only: Vec::new(),
            echo_client: Default::default(),
            echo_bench: None,
        });
        let e: Engine = "uring-sqpoll".parse().unwrap();
        assert_eq!(sqpoll_check(&cfg, e).map(|x| x.1), Some(false));
        cfg.allow_shared_sqpoll = true;
        assert_eq!(sqpoll_check(&cfg, e).map(|x| x.1), Some(true));
        assert!(sqpoll_check(&cfg, "uring".parse().unwrap()).is_none());
    }
}
