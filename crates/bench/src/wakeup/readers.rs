//! One sample of the wake-up study: the writer thread and the reader thread
//! of one contender, each pinned, and every reader's loop.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ringkit::Backend;
use ringkit_uring::{sys, IoUring};

use super::spec::{Channel, FlagSet, Reader, WakeConfig, WakeContender, WakeSample};
use crate::harness::latency::{now_ns, spin_for, LatencySummary};
use crate::harness::rng::Rng;
use crate::raw::stamp::StampWait;

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
    let mut stamp = StampWait::new(fd, read);
    stamp.arm(&mut ring)?;
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
            let t0 = stamp.read_stamp();
            if i + 1 < total {
                stamp.arm(&mut ring)?;
            }
            t0
        } else {
            let t0 = read_stamp(fd)?;
            if !cqe.more() {
                // The kernel ended the multishot poll: add it again.
                stamp.arm(&mut ring)?;
            }
            t0
        };
        record(&mut out, sh, warmup, i, t0, t1);
        i += 1;
    }
    out.enters = Some(ring.enter_count() - enters0);
    // Ring first: a READ still in flight is cancelled with it (and then its
    // buffer is leaked by `stamp`).
    drop(ring);
    drop(stamp);
    Ok(out)
}

fn runtime_reader(
    backend: Backend,
    total: u64,
    warmup: u64,
    sh: &Shared,
    tx: mpsc::Sender<io::Result<OwnedFd>>,
) -> io::Result<ReaderOut> {
    let rt = match ringkit::Builder::new().backend(backend).build() {
        Ok(rt) => rt,
        Err(e) => {
            let _ = tx.send(Err(io::Error::other("runtime failed")));
            return Err(crate::harness::err::unsupported(e.to_string()));
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
        out.enters = (ringkit::backend_report().expect("inside a runtime").chosen
            == Backend::Uring)
            .then_some(enters);
        Ok(out)
    })
}

/// A ringkit task (io_uring backend) awaiting `File::read_at` on the pipe,
/// opened again through `/proc/self/fd`.
fn runtime_file_reader(fd: RawFd, total: u64, warmup: u64, sh: &Shared) -> io::Result<ReaderOut> {
    let rt = ringkit::Builder::new()
        .backend(Backend::Uring)
        .build()
        .map_err(|e| crate::harness::err::unsupported(e.to_string()))?;
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
        out.enters = (ringkit::backend_report().expect("inside a runtime").chosen
            == Backend::Uring)
            .then_some(enters);
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
pub(crate) fn sample(cfg: &WakeConfig, c: WakeContender, round: usize) -> WakeSample {
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
