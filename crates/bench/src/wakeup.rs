//! The wake-up latency study (`ringkit bench wakeup`, `ringkit compare wakeup`).
//!
//! A writer thread pinned to one CPU waits a short random pause (busy, so
//! its own timing is exact), stamps `t0` (`CLOCK_MONOTONIC`, vDSO) and
//! writes those 8 bytes to a pipe, an eventfd or a Unix socket. A reader
//! thread pinned to the other CPU is woken, stamps `t1` at once and takes
//! `t0` from the 8 bytes; `t1 - t0` is one latency. The reader acknowledges
//! each wake-up only after it is armed again, so every write finds a reader
//! that is waiting, and pairs `t0`/`t1` exactly.
//!
//! Readers:
//! - `epoll-block`: `epoll_wait` with a 1 s timeout; `epoll-busy`:
//!   `epoll_wait(0)` in a loop.
//! - `uring-poll-*`: a multishot `POLL_ADD`, then `read(2)` of the 8 bytes
//!   after `t1`; `uring-read-*`: a `READ` of 8 bytes submitted directly on
//!   the fd (its CQE carries the data).
//! - `*-block`: `io_uring_enter` waiting for one CQE with a 1 s timeout
//!   (`EXT_ARG`); `*-busy`: peek the CQ from shared memory in a loop,
//!   entering the kernel only when the ring says it must: with
//!   `TASKRUN_FLAG` when `IORING_SQ_TASKRUN` is set, and with
//!   `DEFER_TASKRUN` (whose task work runs only inside an enter with
//!   `GETEVENTS`) one non-blocking `GETEVENTS` enter per empty peek.
//! - every io_uring reader with three flag sets: `default`, `coop`
//!   (`COOP_TASKRUN|TASKRUN_FLAG`), `defer` (`DEFER_TASKRUN|SINGLE_ISSUER`;
//!   the ring is created on the reader thread, the only one that uses it).
//! - `rt-uring`, `rt-epoll`: a ringkit task awaiting `UnixStream::read` on
//!   each backend; the runtime has no pipe type, so these use a Unix
//!   socketpair, and raw `epoll-block`/`uring-poll-block` rows on the same
//!   socketpair show what the runtime itself adds. `rt-uring-file` awaits
//!   `fs::File::read_at` on the pipe itself (io_uring only: on epoll a file
//!   read is an inline `pread`, which a pipe refuses).
//!
//! Contenders run interleaved and rotated each round; the report gives the
//! median over rounds of each percentile (nearest rank, see
//! [`crate::latency`]).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ringkit::Backend;
use ringkit_uring::{opcode, sys, IoUring};
use serde::Serialize;

use crate::harness::latency::{now_ns, rotation, spin_for, LatencySummary};
use crate::harness::rng::Rng;
use crate::harness::stat::{stat, Stat};
use crate::harness::study::{Section, StudyOpts};
use crate::harness::sysinfo::SystemInfo;

/// What carries the 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
    Runtime(#[serde(serialize_with = "ser_backend")] Backend),
    /// A ringkit task awaiting `fs::File::read_at` on the pipe itself
    /// (io_uring backend only: on epoll `File` does an inline `pread`,
    /// which a pipe refuses with `ESPIPE`).
    RuntimeFile,
}

fn ser_backend<S: serde::Serializer>(b: &Backend, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(b)
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
#[derive(Debug, Clone, Serialize)]
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
#[derive(Debug, Clone, Serialize)]
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
#[derive(Debug, Clone, Serialize)]
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
#[derive(Debug, Clone, Serialize)]
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
#[derive(Debug, Clone, Serialize)]
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

/// What the reader and writer share.
struct Shared {
    /// Wake-ups the reader is armed for: `i + 1` means the reader waits
    /// for write `i`. Written by the reader (release), read by the writer.
    armed: AtomicU64,
    /// Set by either side when it stops (done or failed).
    stop: AtomicBool,
}

/// What the reader measured.
#[derive(Default)]
struct ReaderOut {
    lat: Vec<u64>,
    setup: String,
    enters: Option<u64>,
    timeouts: u64,
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// The reader's and writer's fds of a pipe or eventfd (same fd for both).
fn make_channel(ch: Channel) -> io::Result<(OwnedFd, OwnedFd)> {
    match ch {
        Channel::Pipe => {
            let mut fds = [0; 2];
            // SAFETY: `fds` has room for the two fds pipe2 writes.
            cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) })?;
            // SAFETY: pipe2 returned two fresh fds that we now own.
            Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
        }
        Channel::Eventfd => {
            // SAFETY: plain eventfd creation.
            let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
            // SAFETY: a fresh fd we own.
            let r = unsafe { OwnedFd::from_raw_fd(fd) };
            let w = r.try_clone()?;
            Ok((r, w))
        }
        Channel::Socket => {
            let (a, b) = std::os::unix::net::UnixStream::pair()?;
            a.set_nonblocking(true)?;
            Ok((a.into(), b.into()))
        }
    }
}

/// Read the 8-byte stamp from a readable fd.
#[inline]
fn read_stamp(fd: RawFd) -> io::Result<u64> {
    let mut b = [0u8; 8];
    // SAFETY: `b` is 8 writable bytes.
    let n = unsafe { libc::read(fd, b.as_mut_ptr().cast(), 8) };
    match n {
        8 => Ok(u64::from_ne_bytes(b)),
        n if n < 0 => Err(io::Error::last_os_error()),
        0 => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "writer closed",
        )),
        n => Err(io::Error::other(format!("short read of {n} bytes"))),
    }
}

/// Record wake-up `i` (if measured) and arm for `i + 1`.
#[inline]
fn record(out: &mut ReaderOut, sh: &Shared, warmup: u64, i: u64, t0: u64, t1: u64) {
    if i >= warmup {
        out.lat.push(t1.saturating_sub(t0));
    }
    // Release: pairs with the writer's acquire; nothing else is published.
    sh.armed.store(i + 2, Ordering::Release);
}

fn epoll_reader(
    fd: RawFd,
    busy: bool,
    total: u64,
    warmup: u64,
    sh: &Shared,
) -> io::Result<ReaderOut> {
    // SAFETY: plain epoll_create1.
    let ep = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
    // SAFETY: a fresh fd we own.
    let ep = unsafe { OwnedFd::from_raw_fd(ep) };
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: 1,
    };
    // SAFETY: valid epoll fd, fd and event.
    cvt(unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) })?;
    let mut out = ReaderOut {
        lat: Vec::with_capacity(total as usize),
        setup: "epoll, level-triggered".into(),
        ..Default::default()
    };
    sh.armed.store(1, Ordering::Release);
    let timeout = if busy { 0 } else { 1000 };
    let mut i = 0;
    while i < total {
        // SAFETY: `ev` has room for the one event asked for.
        let n = unsafe { libc::epoll_wait(ep.as_raw_fd(), &mut ev, 1, timeout) };
        if n <= 0 {
            if n < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                return Err(io::Error::last_os_error());
            }
            if !busy {
                out.timeouts += 1;
            }
            if sh.stop.load(Ordering::Relaxed) {
                return Err(io::Error::other("writer stopped early"));
            }
            continue;
        }
        let t1 = now_ns();
        let t0 = read_stamp(fd)?;
        record(&mut out, sh, warmup, i, t0, t1);
        i += 1;
    }
    Ok(out)
}

/// Wait for one CQE: block with a 1 s timeout, or spin on the CQ entering
/// only when the ring needs it.
#[inline]
fn uring_wait(
    ring: &mut IoUring,
    busy: bool,
    defer: bool,
    sh: &Shared,
    timeouts: &mut u64,
) -> io::Result<ringkit_uring::Cqe> {
    loop {
        if let Some(c) = ring.cq().peek() {
            ring.cq().advance(1);
            return Ok(c);
        }
        if busy {
            if defer || ring.cq_needs_enter() {
                // DEFER_TASKRUN: completions are posted only by task work run
                // inside an enter with GETEVENTS (min_complete 0: no sleep).
                ring.flush_cq()?;
            } else {
                std::hint::spin_loop();
            }
        } else {
            ring.submit_and_wait_timeout(1, Duration::from_secs(1))?;
            if ring.cq().ready() == 0 && !ring.cq_needs_enter() {
                *timeouts += 1;
            }
        }
        if sh.stop.load(Ordering::Relaxed) && ring.cq().ready() == 0 {
            return Err(io::Error::other("writer stopped early"));
        }
    }
}

fn uring_reader(
    fd: RawFd,
    read: bool,
    busy: bool,
    flags: FlagSet,
    total: u64,
    warmup: u64,
    sh: &Shared,
) -> io::Result<ReaderOut> {
    // The READ target. Leaked up front: if we leave early with a READ in
    // flight, the kernel may still write these 8 bytes while it tears the
    // ring down, so only the success path (no READ in flight) frees it.
    let buf: &'static mut [u8; 8] = Box::leak(Box::new([0u8; 8]));
    let mut ring = IoUring::builder(64).flags(flags.bits()).build()?;
    let got = ring.setup_flags();
    if got & flags.bits() != flags.bits() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "kernel refused {}; got {}",
                ringkit_uring::flag_names(flags.bits(), sys::SETUP_FLAG_NAMES),
                ringkit_uring::flag_names(got, sys::SETUP_FLAG_NAMES)
            ),
        ));
    }
    let defer = got & sys::IORING_SETUP_DEFER_TASKRUN != 0;
    let mut out = ReaderOut {
        lat: Vec::with_capacity(total as usize),
        setup: ringkit_uring::flag_names(got, sys::SETUP_FLAG_NAMES),
        ..Default::default()
    };
    let poll = opcode::PollAdd::new(fd.into(), libc::POLLIN as u32)
        .multi(true)
        .build()
        .user_data(1);
    let arm = |ring: &mut IoUring, buf: &mut [u8; 8]| -> io::Result<()> {
        if read {
            let e = opcode::Read::new(fd.into(), buf.as_mut_ptr(), 8)
                .offset(u64::MAX)
                .build()
                .user_data(2);
            // SAFETY: `buf` outlives the operation (see above).
            unsafe { ring.push(e.sqe()) }.map_err(|_| io::Error::other("SQ full"))?;
        } else {
            // SAFETY: POLL_ADD references no memory.
            unsafe { ring.push(poll.sqe()) }.map_err(|_| io::Error::other("SQ full"))?;
        }
        ring.submit()?;
        Ok(())
    };
    arm(&mut ring, buf)?;
    sh.armed.store(1, Ordering::Release);
    let enters0 = ring.enter_count();
    let mut i = 0;
    while i < total {
        let cqe = uring_wait(&mut ring, busy, defer, sh, &mut out.timeouts)?;
        let t1 = now_ns();
        if cqe.res < 0 {
            return Err(io::Error::from_raw_os_error(-cqe.res));
        }
        let t0 = if read {
            if cqe.res != 8 {
                return Err(io::Error::other(format!("short READ: {}", cqe.res)));
            }
            let t0 = u64::from_ne_bytes(*buf);
            if i + 1 < total {
                arm(&mut ring, buf)?;
            }
            t0
        } else {
            let t0 = read_stamp(fd)?;
            if !cqe.more() {
                // The kernel ended the multishot poll: add it again.
                arm(&mut ring, buf)?;
            }
            t0
        };
        record(&mut out, sh, warmup, i, t0, t1);
        i += 1;
    }
    out.enters = Some(ring.enter_count() - enters0);
    drop(ring);
    // SAFETY: `buf` came from Box::leak above; no READ is in flight (the
    // last completion was not re-armed) and the ring is gone.
    drop(unsafe { Box::from_raw(buf as *mut [u8; 8]) });
    Ok(out)
}

fn runtime_reader(
    backend: Backend,
    total: u64,
    warmup: u64,
    sh: &Shared,
    tx: mpsc::Sender<io::Result<OwnedFd>>,
) -> io::Result<ReaderOut> {
    let rt = match ringkit::Builder::new()
        .backend(backend)
        .ignore_env()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = tx.send(Err(io::Error::other("runtime failed")));
            return Err(io::Error::new(io::ErrorKind::Unsupported, e.to_string()));
        }
    };
    let setup = rt.backend_report().to_string();
    rt.block_on(async {
        let (a, b) = ringkit::net::UnixStream::pair()?;
        // The writer gets its own fd for b's socket; b itself stays here.
        // SAFETY: dup of an open fd; we own the result.
        let w = cvt(unsafe { libc::fcntl(b.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) })?;
        // SAFETY: a fresh fd we own.
        let _ = tx.send(Ok(unsafe { OwnedFd::from_raw_fd(w) }));
        drop(b);
        let mut out = ReaderOut {
            lat: Vec::with_capacity(total as usize),
            setup,
            ..Default::default()
        };
        sh.armed.store(1, Ordering::Release);
        let m0 = ringkit::metrics();
        let mut buf = Vec::with_capacity(8);
        for i in 0..total {
            let (res, b) = a.read(buf).await;
            let t1 = now_ns();
            buf = b;
            match res? {
                8 => {}
                0 => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "writer closed",
                    ))
                }
                n => return Err(io::Error::other(format!("short read of {n} bytes"))),
            }
            let t0 = u64::from_ne_bytes(buf[..8].try_into().expect("8 bytes"));
            buf.clear();
            record(&mut out, sh, warmup, i, t0, t1);
        }
        let enters = ringkit::metrics().since(&m0).uring_enters;
        out.enters = (ringkit::backend_report().chosen == Backend::Uring).then_some(enters);
        Ok(out)
    })
}

/// A ringkit task (io_uring backend) awaiting `File::read_at` on the pipe,
/// opened again through `/proc/self/fd`.
fn runtime_file_reader(fd: RawFd, total: u64, warmup: u64, sh: &Shared) -> io::Result<ReaderOut> {
    let rt = ringkit::Builder::new()
        .backend(Backend::Uring)
        .ignore_env()
        .build()
        .map_err(|e| io::Error::new(io::ErrorKind::Unsupported, e.to_string()))?;
    let setup = rt.backend_report().to_string();
    rt.block_on(async {
        let file = ringkit::fs::File::open(format!("/proc/self/fd/{fd}")).await?;
        let mut out = ReaderOut {
            lat: Vec::with_capacity(total as usize),
            setup,
            ..Default::default()
        };
        sh.armed.store(1, Ordering::Release);
        let m0 = ringkit::metrics();
        let mut buf = Vec::with_capacity(8);
        for i in 0..total {
            // A pipe has no position: the offset is ignored.
            let (res, b) = file.read_at(buf, 0).await;
            let t1 = now_ns();
            buf = b;
            match res? {
                8 => {}
                0 => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "writer closed",
                    ))
                }
                n => return Err(io::Error::other(format!("short read of {n} bytes"))),
            }
            let t0 = u64::from_ne_bytes(buf[..8].try_into().expect("8 bytes"));
            buf.clear();
            record(&mut out, sh, warmup, i, t0, t1);
        }
        let enters = ringkit::metrics().since(&m0).uring_enters;
        out.enters = (ringkit::backend_report().chosen == Backend::Uring).then_some(enters);
        Ok(out)
    })
}

fn writer(fd: RawFd, total: u64, pause_us: (u64, u64), seed: u64, sh: &Shared) -> io::Result<()> {
    let mut rng = Rng::new(seed);
    for i in 0..total {
        let deadline = Instant::now() + Duration::from_secs(5);
        // Acquire: pairs with the reader's release after it re-armed.
        while sh.armed.load(Ordering::Acquire) < i + 1 {
            if sh.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "reader not ready for wake-up {i} within 5 s"
                )));
            }
            std::hint::spin_loop();
        }
        spin_for(rng.range(pause_us.0, pause_us.1) * 1000);
        let t0 = now_ns().to_ne_bytes();
        // SAFETY: `t0` is 8 readable bytes.
        let n = unsafe { libc::write(fd, t0.as_ptr().cast(), 8) };
        if n != 8 {
            return Err(io::Error::other(format!(
                "write returned {n}: {}",
                io::Error::last_os_error()
            )));
        }
    }
    Ok(())
}

/// Run one sample of `c`.
fn sample(cfg: &WakeConfig, c: WakeContender, round: usize) -> WakeSample {
    let mut s = WakeSample {
        contender: c.name(),
        round,
        latency: LatencySummary::default(),
        setup: String::new(),
        enters_per_wake: None,
        timeouts: 0,
        error: None,
    };
    let total = cfg.warmup + cfg.count;
    let sh = Shared {
        armed: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    };
    let res: io::Result<ReaderOut> = std::thread::scope(|sc| {
        let (tx, rx) = mpsc::channel::<io::Result<OwnedFd>>();
        let (rfd, wfd) = match c.reader {
            Reader::Runtime(_) => (None, None),
            _ => {
                let (r, w) = make_channel(c.channel)?;
                (Some(r), Some(w))
            }
        };
        let sh = &sh;
        let reader = sc.spawn(move || {
            let r = (|| {
                ringkit::pin_to_cpu(cfg.reader_cpu)?;
                let fd = rfd.as_ref().map_or(-1, |f| f.as_raw_fd());
                match c.reader {
                    Reader::EpollBlock => epoll_reader(fd, false, total, cfg.warmup, sh),
                    Reader::EpollBusy => epoll_reader(fd, true, total, cfg.warmup, sh),
                    Reader::UringPoll { busy, flags } => {
                        uring_reader(fd, false, busy, flags, total, cfg.warmup, sh)
                    }
                    Reader::UringRead { busy, flags } => {
                        uring_reader(fd, true, busy, flags, total, cfg.warmup, sh)
                    }
                    Reader::Runtime(b) => runtime_reader(b, total, cfg.warmup, sh, tx),
                    Reader::RuntimeFile => runtime_file_reader(fd, total, cfg.warmup, sh),
                }
            })();
            sh.stop.store(true, Ordering::Relaxed);
            r
        });
        let wfd = match wfd {
            Some(w) => Some(w),
            None => match rx.recv_timeout(Duration::from_secs(10)) {
                Ok(Ok(w)) => Some(w),
                _ => None,
            },
        };
        let wres = match &wfd {
            Some(w) => {
                let seed = 0x5eed ^ (round as u64) << 32 ^ now_ns();
                let w = w.as_raw_fd();
                sc.spawn(move || {
                    let r = ringkit::pin_to_cpu(cfg.writer_cpu)
                        .and_then(|_| writer(w, total, cfg.pause_us, seed, sh));
                    if r.is_err() {
                        // Tell the reader no more writes come. (On success it
                        // still has the last wake-up to take: no stop then.)
                        sh.stop.store(true, Ordering::Relaxed);
                    }
                    r
                })
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("writer panicked")))
            }
            None => Ok(()),
        };
        // Closing the writer's end ends a runtime reader still waiting (EOF).
        drop(wfd);
        let rres = reader
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("reader panicked")));
        match (rres, wres) {
            (Err(e), _) => Err(e),
            (Ok(_), Err(e)) => Err(e),
            (Ok(o), Ok(())) => Ok(o),
        }
    });
    match res {
        Ok(mut o) => {
            s.latency = LatencySummary::from_samples(&mut o.lat);
            s.setup = o.setup;
            s.timeouts = o.timeouts;
            s.enters_per_wake = o.enters.map(|e| e as f64 / total as f64);
        }
        Err(e) => s.error = Some(e.to_string()),
    }
    s
}

/// Run the wake-up study. `progress` gets one line per sample.
pub fn run(cfg: &WakeConfig, progress: &mut dyn FnMut(&str)) -> io::Result<WakeResults> {
    let wall = Instant::now();
    if cfg.reader_cpu == cfg.writer_cpu {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "reader and writer must be pinned to different CPUs",
        ));
    }
    // SAFETY: sysconf has no preconditions.
    let cores = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
    if cfg.reader_cpu.max(cfg.writer_cpu) >= cores {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "needs CPUs {} and {}, this machine has {cores}",
                cfg.reader_cpu, cfg.writer_cpu
            ),
        ));
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
    for round in 0..cfg.rounds {
        for i in rotation(list.len(), round) {
            let s = sample(cfg, list[i], round);
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

pub use crate::wakeup_report::{markdown, section, table};

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
        assert!(crate::wakeup_report::verdict_text(&v).contains("MET"));
        assert!(verdict(&rows, Channel::Eventfd).busy_ratio.is_none());
    }
}
