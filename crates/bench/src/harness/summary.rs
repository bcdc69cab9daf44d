//! The figures every server study (echo, HTTP) summarises per contender and
//! workload, computed one way for both.

use ringkit::publish::Published;
use serde::Serialize;

use super::server::{Contender, Family};
use super::stat::{stat, Stat};

/// One measured sample of a server, as the shared summary reads it.
pub trait ServerSample {
    /// Whether the sample counts (no error, load verified).
    fn ok(&self) -> bool;
    /// Server CPU seconds over the window: (user, system).
    fn cpu_secs(&self) -> (f64, f64);
    /// Server CPU µs per request answered: (user, system).
    fn cpu_us_per_req(&self) -> (f64, f64) {
        let (u, s) = self.cpu_secs();
        let r = self.answered().max(1) as f64;
        (u * 1e6 / r, s * 1e6 / r)
    }
    /// Requests (responses) per second.
    fn rps(&self) -> f64;
    /// Requests answered in the window.
    fn answered(&self) -> u64;
    /// p99 latency, µs.
    fn p99_us(&self) -> f64;
    /// The server's own counters over the window (ringkit servers).
    fn stats(&self) -> Option<&Published>;
}

/// How a peer's syscalls per request were counted, if at all.
#[derive(Debug, Clone)]
pub enum PeerSyscalls {
    /// Counted by a tool (`source` says which).
    Counted {
        /// Syscalls per request.
        per_req: f64,
        /// The tool.
        source: String,
    },
    /// Counting was on and failed.
    Failed(String),
    /// Counting was off, or no tool works here.
    NotMeasured,
}

/// The shared figures of one contender.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Figures {
    /// Contender.
    pub contender: String,
    /// io_uring or epoll.
    pub family: Family,
    /// Good samples.
    pub ok_samples: usize,
    /// All samples.
    pub samples: usize,
    /// Requests per second.
    pub rps: Stat,
    /// Server CPU µs per request (user + system).
    pub cpu_us: Stat,
    /// User part (median).
    pub cpu_user_us: f64,
    /// System part (median).
    pub cpu_sys_us: f64,
    /// p99 latency, µs (median over samples).
    pub p99_us: f64,
    /// Syscalls per request: perf/strace where a study counted them (peers
    /// always), else ringkit's own counters.
    pub syscalls_per_req: Option<f64>,
    /// Where the syscall figure comes from.
    pub syscalls_source: String,
    /// io_uring_enter calls per request (ringkit on io_uring).
    pub enters_per_req: Option<f64>,
    /// The server's CPU use during the window, in CPUs (median; 1.0: one
    /// core busy all the time). Well under 1 on a one-thread server means
    /// the load, not the server, set the pace: its req/s ratio understates
    /// the difference, and the CPU per request is the figure to read.
    pub cpu_util: f64,
}

/// Below this CPU use a one-thread server was not the bottleneck.
pub const LOAD_LIMITED_BELOW: f64 = 0.9;

impl Figures {
    /// Summarise `mine` (every sample of `c` in one workload); `peer` says
    /// how a peer's syscalls were counted (ringkit servers count their own).
    pub fn of<S: ServerSample>(c: &Contender, mine: &[&S], peer: PeerSyscalls) -> Figures {
        let good: Vec<&S> = mine.iter().copied().filter(|s| s.ok()).collect();
        let cpu: Vec<(f64, f64)> = good.iter().map(|s| s.cpu_us_per_req()).collect();
        let per_req = |f: &dyn Fn(&Published) -> u64| {
            let v: Vec<f64> = good
                .iter()
                .filter_map(|s| {
                    s.stats()
                        .map(|st| f(st) as f64 / s.answered().max(1) as f64)
                })
                .collect();
            (!v.is_empty()).then(|| stat(v).median)
        };
        // A count by a tool wins (a study may count ringkit's too, from
        // outside); otherwise ringkit servers count their own.
        let (syscalls, source) = match peer {
            PeerSyscalls::Counted { per_req, source } => (Some(per_req), source),
            _ if c.ringkit => (
                per_req(&|s| s.metrics.syscalls()),
                "ringkit counters".to_string(),
            ),
            PeerSyscalls::Failed(why) => (None, why),
            PeerSyscalls::NotMeasured => (
                None,
                "not measured (counting off, or neither perf nor strace works here)".to_string(),
            ),
        };
        Figures {
            contender: c.name.clone(),
            family: c.family,
            ok_samples: good.len(),
            samples: mine.len(),
            rps: stat(good.iter().map(|s| s.rps()).collect()),
            cpu_us: stat(cpu.iter().map(|(u, s)| u + s).collect()),
            cpu_user_us: stat(cpu.iter().map(|c| c.0).collect()).median,
            cpu_sys_us: stat(cpu.iter().map(|c| c.1).collect()).median,
            p99_us: stat(good.iter().map(|s| s.p99_us()).collect()).median,
            syscalls_per_req: syscalls,
            syscalls_source: source,
            enters_per_req: if c.ringkit && c.family == Family::Uring {
                per_req(&|s| s.metrics.uring_enters)
            } else {
                None
            },
            cpu_util: stat(
                cpu.iter()
                    .zip(&good)
                    .map(|((u, s), g)| (u + s) * g.rps() / 1e6)
                    .collect(),
            )
            .median,
        }
    }
}

/// The best epoll contender's requests/s (highest) and CPU per request
/// (lowest) medians among `rows` with good samples.
pub fn best_epoll<'a>(rows: impl Iterator<Item = &'a Figures>) -> (Option<f64>, Option<f64>) {
    let epoll: Vec<&Figures> = rows
        .filter(|r| r.family == Family::Epoll && r.ok_samples > 0)
        .collect();
    (
        epoll.iter().map(|r| r.rps.median).reduce(f64::max),
        epoll.iter().map(|r| r.cpu_us.median).reduce(f64::min),
    )
}

/// The report's "Servers" block of a server study: each contender's command
/// line and the banner it printed, then the contenders skipped and why.
pub fn servers_markdown(
    contenders: &[Contender],
    banners: &[(String, String)],
    skipped: &[(String, String)],
) -> String {
    use std::fmt::Write as _;
    let mut s = String::from("\n### Servers\n\n");
    for c in contenders {
        let banner = banners
            .iter()
            .find(|(n, _)| *n == c.name)
            .map_or("", |(_, b)| b.as_str());
        let _ = writeln!(
            s,
            "- **{}** ({:?}): `{}` — {}",
            c.name,
            c.family,
            c.cmd.join(" "),
            banner
        );
    }
    for (n, why) in skipped {
        let _ = writeln!(s, "- skipped **{n}**: {why}");
    }
    s
}
