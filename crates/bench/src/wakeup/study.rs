//! The wake-up study's run and verdict.

use std::io;
use std::time::Instant;

use ringkit_uring::IoUring;

use super::readers::sample;
use super::report::section;
use crate::harness::latency::{schedule, LatencySummary};
use crate::harness::stat::stat;
use crate::harness::study::{Section, StudyOpts};
use crate::harness::sysinfo::SystemInfo;

use super::spec::*;

/// Run the wake-up study. `progress` gets one line per sample.
pub fn run(cfg: &WakeConfig, progress: &mut dyn FnMut(&str)) -> io::Result<WakeResults> {
    let wall = Instant::now();
    if cfg.reader_cpu == cfg.writer_cpu {
        return Err(crate::harness::err::invalid_input(
            "reader and writer must be pinned to different CPUs",
        ));
    }
    // SAFETY: sysconf has no preconditions.
    let cores = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
    if cfg.reader_cpu.max(cfg.writer_cpu) >= cores {
        return Err(crate::harness::err::unsupported(format!(
            "needs CPUs {} and {}, this machine has {cores}",
            cfg.reader_cpu, cfg.writer_cpu
        )));
    }
    let mut skipped = Vec::new();
    let mut list = Vec::new();
    let uring_ok = IoUring::new(8);
    for &c in &cfg.contenders {
        match (&uring_ok, c.reader.is_uring()) {
            (Err(e), true) => skipped.push((c.name(), format!("io_uring unavailable: {e}"))),
            _ => list.push(c),
        }
    }
    let total = list.len() * cfg.rounds;
    let mut samples: Vec<WakeSample> = Vec::with_capacity(total);
    for (round, &c) in schedule(&list, cfg.rounds) {
        let s = sample(cfg, c, round);
        progress(&format!(
            "[{}/{total}] round {round} {}: {}",
            samples.len() + 1,
            s.contender,
            match &s.error {
                Some(e) => format!("error: {e}"),
                None => format!("p50 {} ns, p99 {} ns", s.latency.p50, s.latency.p99),
            }
        ));
        samples.push(s);
    }
    // A contender whose every sample is "unsupported" is a skip, not a failure.
    let rows: Vec<WakeRow> = list.iter().map(|&c| summarize(c, &samples)).collect();
    let verdict = verdict(&rows, Channel::Pipe);
    Ok(WakeResults {
        system: SystemInfo::gather(),
        config: cfg.clone(),
        rows,
        verdict,
        samples,
        skipped,
        wall_secs: wall.elapsed().as_secs_f64(),
    })
}

fn summarize(c: WakeContender, samples: &[WakeSample]) -> WakeRow {
    let name = c.name();
    let mine: Vec<&WakeSample> = samples.iter().filter(|s| s.contender == name).collect();
    let good: Vec<&&WakeSample> = mine
        .iter()
        .filter(|s| s.error.is_none() && s.latency.count > 0)
        .collect();
    let med = |f: &dyn Fn(&LatencySummary) -> f64| {
        stat(good.iter().map(|s| f(&s.latency)).collect()).median
    };
    let epw: Vec<f64> = good.iter().filter_map(|s| s.enters_per_wake).collect();
    WakeRow {
        contender: c,
        name,
        avg: med(&|l| l.avg),
        p50: stat(good.iter().map(|s| s.latency.p50 as f64).collect()),
        p90: med(&|l| l.p90 as f64),
        p99: med(&|l| l.p99 as f64),
        p999: med(&|l| l.p999 as f64),
        enters_per_wake: (!epw.is_empty()).then(|| stat(epw).median),
        setup: good.first().map_or_else(String::new, |s| s.setup.clone()),
        ok_samples: good.len(),
        samples: mine.len(),
    }
}

/// Evaluate the targets on `channel`: best io_uring busy p50 vs epoll busy,
/// best io_uring blocking p50 vs epoll blocking.
pub fn verdict(rows: &[WakeRow], channel: Channel) -> WakeVerdict {
    let ok = |r: &&WakeRow| r.ok_samples > 0 && r.contender.channel == channel;
    let best = |busy: bool| {
        rows.iter()
            .filter(ok)
            .filter(|r| {
                matches!(
                    r.contender.reader,
                    Reader::UringPoll { .. } | Reader::UringRead { .. }
                ) && r.contender.reader.busy() == busy
            })
            .min_by(|a, b| a.p50.median.total_cmp(&b.p50.median))
            .map(|r| (r.name.clone(), r.p50.median))
    };
    let epoll = |reader: Reader| {
        rows.iter()
            .filter(ok)
            .find(|r| r.contender.reader == reader)
            .map(|r| r.p50.median)
    };
    let uring_busy = best(true);
    let uring_block = best(false);
    let epoll_busy = epoll(Reader::EpollBusy);
    let epoll_block = epoll(Reader::EpollBlock);
    let ratio = |u: &Option<(String, f64)>, e: Option<f64>| match (u, e) {
        (Some((_, u)), Some(e)) if e > 0.0 => Some(u / e),
        _ => None,
    };
    WakeVerdict {
        busy_ratio: ratio(&uring_busy, epoll_busy),
        block_ratio: ratio(&uring_block, epoll_block),
        uring_busy,
        epoll_busy,
        uring_block,
        epoll_block,
    }
}

/// The configuration `ringkit compare wakeup` uses: pipe and eventfd plus
/// the runtime rows, 5 rounds of 8 000 wake-ups (about 2 minutes);
/// `--quick`: pipe plus the runtime rows, 3 rounds of 2 000.
/// `--secs` is ignored (the study counts wake-ups, not seconds).
pub fn config_for(opts: &StudyOpts) -> WakeConfig {
    let d = WakeConfig::default();
    WakeConfig {
        contenders: if opts.quick {
            contenders(&[Channel::Pipe], true)
        } else {
            d.contenders
        },
        count: if opts.quick { 2_000 } else { d.count },
        rounds: opts.rounds.unwrap_or(if opts.quick { 3 } else { d.rounds }),
        reader_cpu: opts.server_cpu,
        writer_cpu: opts.client_cpu,
        ..d
    }
}

/// Run the wakeup study for `ringkit compare`.
pub fn study(opts: &StudyOpts, progress: &mut dyn FnMut(&str)) -> io::Result<Section> {
    Ok(section(&run(&config_for(opts), progress)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::stat::Stat;
    use ringkit::Backend;
    use ringkit_uring::sys;

    #[test]
    fn contender_list_covers_every_reader_and_flag_set() {
        let v = contenders(&[Channel::Pipe], false);
        // 2 epoll + 2 (poll, read) x 2 (block, busy) x 3 flag sets.
        assert_eq!(v.len(), 14);
        let names: Vec<String> = v.iter().map(|c| c.name()).collect();
        assert!(names.contains(&"uring-read-busy/defer (pipe)".to_string()));
        assert!(names.contains(&"epoll-busy (pipe)".to_string()));
        let with_rt = contenders(&[Channel::Pipe, Channel::Eventfd], true);
        assert_eq!(with_rt.len(), 14 * 2 + 1 + 4);
        assert!(with_rt
            .iter()
            .any(|c| c.reader == Reader::Runtime(Backend::Uring) && c.channel == Channel::Socket));
    }

    #[test]
    fn flag_sets_are_the_issues() {
        assert_eq!(FlagSet::Default.bits(), 0);
        assert_eq!(
            FlagSet::Defer.bits(),
            sys::IORING_SETUP_DEFER_TASKRUN | sys::IORING_SETUP_SINGLE_ISSUER
        );
        assert_eq!("eventfd".parse::<Channel>(), Ok(Channel::Eventfd));
    }

    fn row(reader: Reader, p50: f64) -> WakeRow {
        WakeRow {
            contender: WakeContender {
                reader,
                channel: Channel::Pipe,
            },
            name: reader.name(),
            avg: p50,
            p50: Stat {
                median: p50,
                min: p50,
                max: p50,
            },
            p90: p50,
            p99: p50,
            p999: p50,
            enters_per_wake: None,
            setup: String::new(),
            ok_samples: 1,
            samples: 1,
        }
    }

    #[test]
    fn verdict_picks_the_best_uring_reader() {
        let rows = vec![
            row(Reader::EpollBusy, 1000.0),
            row(Reader::EpollBlock, 4000.0),
            row(
                Reader::UringPoll {
                    busy: true,
                    flags: FlagSet::Default,
                },
                2000.0,
            ),
            row(
                Reader::UringPoll {
                    busy: true,
                    flags: FlagSet::Defer,
                },
                900.0,
            ),
            row(
                Reader::UringRead {
                    busy: false,
                    flags: FlagSet::Coop,
                },
                4100.0,
            ),
        ];
        let v = verdict(&rows, Channel::Pipe);
        assert_eq!(v.uring_busy.as_ref().map(|x| x.1), Some(900.0));
        assert_eq!(v.busy_ratio, Some(0.9));
        assert!((v.block_ratio.unwrap() - 1.025).abs() < 1e-9);
        assert!(crate::wakeup::report::verdict_text(&v).contains("MET"));
        assert!(verdict(&rows, Channel::Eventfd).busy_ratio.is_none());
    }
}
