//! The wake-up study's contenders, configuration and results.

use ringkit::Backend;
use ringkit_uring::sys;
use serde::Serialize;

use crate::harness::latency::LatencySummary;
use crate::harness::stat::Stat;
use crate::harness::sysinfo::SystemInfo;

/// What carries the 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum Channel {
    /// `pipe2(2)`.
    Pipe,
    /// `eventfd(2)` (the 8 bytes are the counter).
    Eventfd,
    /// A Unix stream socketpair (the runtime rows and their raw baselines).
    Socket,
}

impl Channel {
    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            Channel::Pipe => "pipe",
            Channel::Eventfd => "eventfd",
            Channel::Socket => "socket",
        }
    }
}

impl std::str::FromStr for Channel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "pipe" => Ok(Channel::Pipe),
            "eventfd" => Ok(Channel::Eventfd),
            "socket" => Ok(Channel::Socket),
            _ => Err(format!("unknown channel {s:?}: pipe, eventfd or socket")),
        }
    }
}

/// io_uring setup flags of a reader's ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum FlagSet {
    /// No flags.
    Default,
    /// `COOP_TASKRUN|TASKRUN_FLAG`.
    Coop,
    /// `DEFER_TASKRUN|SINGLE_ISSUER`.
    Defer,
}

impl FlagSet {
    /// Every flag set.
    pub const ALL: [FlagSet; 3] = [FlagSet::Default, FlagSet::Coop, FlagSet::Defer];

    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            FlagSet::Default => "default",
            FlagSet::Coop => "coop",
            FlagSet::Defer => "defer",
        }
    }

    /// The `IORING_SETUP_*` bits.
    pub fn bits(self) -> u32 {
        match self {
            FlagSet::Default => 0,
            FlagSet::Coop => sys::IORING_SETUP_COOP_TASKRUN | sys::IORING_SETUP_TASKRUN_FLAG,
            FlagSet::Defer => sys::IORING_SETUP_DEFER_TASKRUN | sys::IORING_SETUP_SINGLE_ISSUER,
        }
    }
}

/// How the reader waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum Reader {
    /// `epoll_wait` with a 1 s timeout.
    EpollBlock,
    /// `epoll_wait(0)` in a loop.
    EpollBusy,
    /// Multishot `POLL_ADD`; `busy`: peek the CQ in a loop.
    UringPoll {
        /// Spin on the CQ instead of waiting in the kernel.
        busy: bool,
        /// Ring setup flags.
        flags: FlagSet,
    },
    /// `READ` of 8 bytes on the fd; `busy`: peek the CQ in a loop.
    UringRead {
        /// Spin on the CQ instead of waiting in the kernel.
        busy: bool,
        /// Ring setup flags.
        flags: FlagSet,
    },
    /// A ringkit task awaiting a read, on this backend.
    Runtime(#[serde(with = "crate::harness::backend_serde")] Backend),
    /// A ringkit task awaiting `fs::File::read_at` on the pipe itself
    /// (io_uring backend only: on epoll `File` does an inline `pread`,
    /// which a pipe refuses with `ESPIPE`).
    RuntimeFile,
}

impl Reader {
    /// Short name, e.g. `uring-poll-busy/coop`.
    pub fn name(self) -> String {
        let bb = |busy| if busy { "busy" } else { "block" };
        match self {
            Reader::EpollBlock => "epoll-block".into(),
            Reader::EpollBusy => "epoll-busy".into(),
            Reader::UringPoll { busy, flags } => {
                format!("uring-poll-{}/{}", bb(busy), flags.name())
            }
            Reader::UringRead { busy, flags } => {
                format!("uring-read-{}/{}", bb(busy), flags.name())
            }
            Reader::Runtime(b) => format!("rt-{b}"),
            Reader::RuntimeFile => "rt-uring-file".into(),
        }
    }

    /// Whether the reader spins instead of sleeping.
    pub fn busy(self) -> bool {
        match self {
            Reader::EpollBusy => true,
            Reader::UringPoll { busy, .. } | Reader::UringRead { busy, .. } => busy,
            _ => false,
        }
    }

    /// Whether it is an io_uring reader (raw or through the runtime).
    pub fn is_uring(self) -> bool {
        matches!(
            self,
            Reader::UringPoll { .. }
                | Reader::UringRead { .. }
                | Reader::Runtime(Backend::Uring)
                | Reader::RuntimeFile
        )
    }
}

/// One reader on one channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct WakeContender {
    /// How it waits.
    pub reader: Reader,
    /// What carries the bytes.
    pub channel: Channel,
}

impl WakeContender {
    /// `reader (channel)`.
    pub fn name(&self) -> String {
        format!("{} ({})", self.reader.name(), self.channel.name())
    }
}

/// Settings of a wake-up run.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct WakeConfig {
    /// Contenders.
    pub contenders: Vec<WakeContender>,
    /// Measured wake-ups per sample.
    pub count: u64,
    /// Unmeasured wake-ups before them.
    pub warmup: u64,
    /// Writer's pause before each write: uniform in this range, µs.
    pub pause_us: (u64, u64),
    /// Rounds.
    pub rounds: usize,
    /// CPU of the reader.
    pub reader_cpu: usize,
    /// CPU of the writer.
    pub writer_cpu: usize,
}

/// The standard contender list: for each channel, both epoll readers and
/// every io_uring reader with every flag set; with `runtime`, the runtime
/// rows and their raw baselines on a socketpair.
pub fn contenders(channels: &[Channel], runtime: bool) -> Vec<WakeContender> {
    let mut v = Vec::new();
    for &channel in channels.iter().filter(|c| **c != Channel::Socket) {
        let mut push = |reader| v.push(WakeContender { reader, channel });
        push(Reader::EpollBlock);
        push(Reader::EpollBusy);
        for flags in FlagSet::ALL {
            for busy in [false, true] {
                push(Reader::UringPoll { busy, flags });
                push(Reader::UringRead { busy, flags });
            }
        }
    }
    if runtime && channels.contains(&Channel::Pipe) {
        v.push(WakeContender {
            reader: Reader::RuntimeFile,
            channel: Channel::Pipe,
        });
    }
    if runtime || channels.contains(&Channel::Socket) {
        let channel = Channel::Socket;
        for reader in [
            Reader::EpollBlock,
            Reader::UringPoll {
                busy: false,
                flags: FlagSet::Defer,
            },
            Reader::Runtime(Backend::Epoll),
            Reader::Runtime(Backend::Uring),
        ] {
            v.push(WakeContender { reader, channel });
        }
    }
    v
}

impl Default for WakeConfig {
    fn default() -> Self {
        WakeConfig {
            contenders: contenders(&[Channel::Pipe, Channel::Eventfd], true),
            count: 8_000,
            warmup: 200,
            pause_us: (10, 50),
            rounds: 5,
            reader_cpu: 0,
            writer_cpu: 1,
        }
    }
}

/// One measured sample.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct WakeSample {
    /// Contender name.
    pub contender: String,
    /// Round.
    pub round: usize,
    /// Latency of the measured wake-ups, ns.
    pub latency: LatencySummary,
    /// Reader's setup flags that took effect (io_uring), or the backend report.
    pub setup: String,
    /// Reader's `io_uring_enter` calls per wake-up (raw io_uring readers).
    pub enters_per_wake: Option<f64>,
    /// Blocking waits that timed out (1 s) with nothing to read.
    pub timeouts: u64,
    /// Why the sample failed.
    pub error: Option<String>,
}

/// One contender over its rounds: medians of the per-round percentiles.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct WakeRow {
    /// Contender.
    pub contender: WakeContender,
    /// Its name.
    pub name: String,
    /// Mean, ns (median over rounds).
    pub avg: f64,
    /// p50, ns: median over rounds, min–max.
    pub p50: Stat,
    /// p90, ns (median over rounds).
    pub p90: f64,
    /// p99, ns (median over rounds).
    pub p99: f64,
    /// p99.9, ns (median over rounds).
    pub p999: f64,
    /// io_uring_enter per wake-up (median).
    pub enters_per_wake: Option<f64>,
    /// Setup that took effect.
    pub setup: String,
    /// Good samples.
    pub ok_samples: usize,
    /// All samples.
    pub samples: usize,
}

/// The issue's targets, evaluated on this run.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct WakeVerdict {
    /// Best io_uring busy reader and its p50.
    pub uring_busy: Option<(String, f64)>,
    /// `epoll-busy` p50 on the same channel.
    pub epoll_busy: Option<f64>,
    /// Best io_uring blocking reader and its p50.
    pub uring_block: Option<(String, f64)>,
    /// `epoll-block` p50 on the same channel.
    pub epoll_block: Option<f64>,
    /// uring busy p50 / epoll busy p50 (target <= 1.0).
    pub busy_ratio: Option<f64>,
    /// uring blocking p50 / epoll blocking p50 (target <= 1.05).
    pub block_ratio: Option<f64>,
}

/// Everything a wake-up run produced.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct WakeResults {
    /// Machine and tool.
    pub system: SystemInfo,
    /// Settings.
    pub config: WakeConfig,
    /// Per contender.
    pub rows: Vec<WakeRow>,
    /// The targets on the pipe channel.
    pub verdict: WakeVerdict,
    /// Raw samples.
    pub samples: Vec<WakeSample>,
    /// Contenders skipped and why.
    pub skipped: Vec<(String, String)>,
    /// Wall time, seconds.
    pub wall_secs: f64,
}
