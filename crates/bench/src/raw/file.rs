//! The file study's raw engine: reads or writes kept `qd` deep on a bare
//! `ringkit-uring` ring, with the setup flags fio's io_uring engine uses.
//!
//! `qd` operations are kept in flight: every CQE is re-queued at once, and
//! the queued SQEs are submitted as soon as `batch` of them wait;
//! `submit_and_wait(1)` submits the rest and waits. `fixed`: one registered
//! buffer (`READ_FIXED`/`WRITE_FIXED`) and a registered file; `sqpoll_cpu`:
//! an SQPOLL poller pinned there; `iopoll`: `IORING_SETUP_IOPOLL`.
//!
//! Memory: one page-aligned region of `qd * bs` bytes, slot `i` used only by
//! the operation with `user_data == i`; it is freed only when nothing is in
//! flight (else leaked).

use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use ringkit::buf::{AlignedBuf, IoBufMut};
use ringkit_uring::opcode::{self, Target};
use ringkit_uring::{sys, IoUring};

use crate::harness::latency::{now_ns, process_cpu};
use crate::harness::rng::Rng;

/// What to run.
#[derive(Debug, Clone, Copy)]
pub struct RingJob {
    /// Writes (else reads).
    pub write: bool,
    /// Block size, bytes.
    pub bs: u32,
    /// Operations kept in flight.
    pub qd: u32,
    /// Submit once this many SQEs wait.
    pub batch: u32,
    /// Registered buffer and file.
    pub fixed: bool,
    /// SQPOLL, its poller on this CPU.
    pub sqpoll_cpu: Option<u32>,
    /// `IORING_SETUP_IOPOLL`.
    pub iopoll: bool,
    /// Reap by spinning on the completion ring instead of sleeping in
    /// `io_uring_enter` (fio's design under SQPOLL); with SQPOLL nothing
    /// then enters the kernel while I/O flows.
    pub spin: bool,
    /// Measured seconds.
    pub secs: f64,
}

/// What one measured run gives back (also the runtime engine's result).
#[derive(Debug, Default)]
pub struct Measured {
    /// Latency of each I/O, ns (submission to reap).
    pub lat: Vec<u64>,
    /// The measured window, seconds.
    pub secs: f64,
    /// User and system CPU seconds of this process over the window.
    pub cpu: (f64, f64),
    /// `io_uring_enter` calls, when counted.
    pub enters: Option<u64>,
    /// The setup that took effect, for the report.
    pub setup: String,
}

/// Run `job` on `fd` for `job.secs`, `next_offset` giving each I/O's
/// offset, on a ring of its own (see the module docs).
pub fn run(job: &RingJob, fd: RawFd, mut next_offset: impl FnMut() -> u64) -> io::Result<Measured> {
    let RingJob {
        fixed,
        sqpoll_cpu,
        iopoll,
        ..
    } = *job;
    let (qd, bs) = (job.qd as usize, job.bs as usize);
    // Declared before the ring so that it is dropped after it; leaked below
    // if operations might still be in flight.
    let mut mem = AlignedBuf::new(qd * bs, 4096);
    if job.write {
        let mut rng = Rng::new(7);
        for w in mem.as_mut_slice().chunks_exact_mut(8) {
            w.copy_from_slice(&rng.next_u64().to_ne_bytes());
        }
    }
    let base = mem.stable_mut_ptr();
    // The flags fio's io_uring engine asks for (COOP_TASKRUN, SINGLE_ISSUER
    // and DEFER_TASKRUN: no IPI to post completions, task work runs when we
    // reap), so that "the same options" holds; refused ones are stripped
    // (DEFER_TASKRUN under SQPOLL) and the setup line says what took effect.
    let mut b = IoUring::builder((qd as u32).next_power_of_two())
        .coop_taskrun()
        .defer_taskrun();
    if let Some(cpu) = sqpoll_cpu {
        b = b.sqpoll(Duration::from_millis(100)).sqpoll_cpu(cpu);
    }
    if iopoll {
        b = b.iopoll();
    }
    let mut ring = b.build()?;
    let target = if fixed {
        let iov = libc::iovec {
            iov_base: base.cast(),
            iov_len: qd * bs,
        };
        // SAFETY: `mem` outlives the registration: it is dropped after the
        // ring (or leaked), and only fixed operations touch it.
        unsafe { ring.register_buffers(&[iov]) }?;
        ring.register_files(&[fd])?;
        Target::Fixed(0)
    } else {
        Target::Fd(fd)
    };
    let mut m = Measured {
        setup: format!(
            "flags {}, {} SQ entries",
            ringkit_uring::flag_names(ring.setup_flags(), sys::SETUP_FLAG_NAMES),
            ring.sq().capacity()
        ),
        ..Default::default()
    };
    let write = job.write;
    let (sqpoll, spin) = (sqpoll_cpu.is_some(), job.spin);
    let push = |ring: &mut IoUring, slot: usize, off: u64| -> io::Result<()> {
        // SAFETY: slot < qd, so the slot's bytes lie inside `mem`.
        let p = unsafe { base.add(slot * bs) };
        let e = match (write, fixed) {
            (false, false) => opcode::Read::new(target, p, bs as u32).offset(off).build(),
            (false, true) => opcode::ReadFixed::new(target, p, bs as u32, 0)
                .offset(off)
                .build(),
            (true, false) => opcode::Write::new(target, p, bs as u32).offset(off).build(),
            (true, true) => opcode::WriteFixed::new(target, p, bs as u32, 0)
                .offset(off)
                .build(),
        };
        let e = e.user_data(slot as u64);
        let sqe = e.sqe();
        let waited_from = Instant::now();
        loop {
            // SAFETY: the slot's bytes stay valid and unused by anything else
            // until this operation's CQE is reaped (INVARIANT of `mem` above).
            if unsafe { ring.push(sqe) }.is_ok() {
                return Ok(());
            }
            // Under SQPOLL a completion can be seen before the poller has
            // moved the SQ head past its SQE (it updates the head after its
            // batch): the slot frees a moment later. The spinning engine
            // spins for it, the sleeping one waits in the kernel.
            if !sqpoll || waited_from.elapsed() > Duration::from_secs(10) {
                return Err(io::Error::other("SQ unexpectedly full"));
            }
            if spin {
                std::hint::spin_loop();
            } else {
                ring.sq_wait()?;
            }
        }
    };
    let mut started = vec![0u64; qd];
    let mut inflight = 0usize;
    // Submit once `batch` SQEs wait in the SQ; the wait below submits the
    // rest. The last SQE queued before that wait is left to it (`last`):
    // one enter instead of two.
    let batch = job.batch.max(1);
    let flush = |ring: &mut IoUring, last: bool| -> io::Result<()> {
        if !last && ring.sq().pending() >= batch {
            ring.submit()?;
        }
        Ok(())
    };
    let mut body = || -> io::Result<()> {
        let cpu0 = process_cpu();
        let enters0 = ring.enter_count();
        let t_start = now_ns();
        let deadline = t_start + (job.secs * 1e9) as u64;
        for (slot, s) in started.iter_mut().enumerate() {
            push(&mut ring, slot, next_offset())?;
            *s = now_ns();
            inflight += 1;
            flush(&mut ring, slot + 1 == qd)?;
        }
        let mut done: Vec<(usize, i32)> = Vec::with_capacity(qd);
        loop {
            let waited = if job.spin {
                spin_for_one(&mut ring, deadline)
            } else {
                ring.submit_and_wait(1).map(drop)
            };
            match waited {
                Ok(()) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::EBUSY)) => {}
                Err(e) => return Err(e),
            }
            let now = now_ns();
            done.clear();
            done.extend(ring.completions().map(|c| (c.user_data as usize, c.res)));
            // Reaped: no longer in flight, even if we stop at an error below.
            inflight -= done.len();
            for (i, &(slot, res)) in done.iter().enumerate() {
                if res != bs as i32 {
                    return Err(if res < 0 {
                        io::Error::from_raw_os_error(-res)
                    } else {
                        io::Error::other(format!("short I/O: {res} of {bs} bytes"))
                    });
                }
                if now < deadline {
                    m.lat.push(now - started[slot]);
                    push(&mut ring, slot, next_offset())?;
                    started[slot] = now_ns();
                    inflight += 1;
                    flush(&mut ring, i + 1 == done.len())?;
                }
            }
            if now >= deadline {
                let cpu1 = process_cpu();
                m.secs = (now - t_start) as f64 / 1e9;
                m.cpu = (cpu1.0 - cpu0.0, cpu1.1 - cpu0.1);
                m.enters = Some(ring.enter_count() - enters0);
                return Ok(());
            }
        }
    };
    let r = body();
    // Reap what is still in flight before the buffers can go (each wait
    // bounded, so a lost completion cannot hang the tool).
    let deadline = Instant::now() + Duration::from_secs(10);
    while inflight > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match ring.submit_and_wait_timeout(1, left) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
            Err(_) => break,
        }
        inflight -= ring.completions().count().min(inflight);
    }
    drop(ring);
    if inflight > 0 {
        // The kernel may still write into it: never free it.
        std::mem::forget(mem);
    }
    r.map(|()| m)
}

/// Can `fd` (opened `O_DIRECT`) be read with IOPOLL? One read of `bs`
/// bytes on an IOPOLL ring.
pub fn probe_iopoll(fd: RawFd, bs: u32) -> Result<(), String> {
    let mut ring = IoUring::builder(4)
        .iopoll()
        .build()
        .map_err(|e| format!("IOPOLL ring: {e}"))?;
    let mut buf = AlignedBuf::new(bs as usize, 4096);
    let e = opcode::Read::new(fd.into(), buf.stable_mut_ptr(), bs)
        .build()
        .user_data(1);
    // SAFETY: `buf` outlives the read: we wait for its completion below and
    // leak the buffer if we cannot.
    unsafe { ring.push(e.sqe()) }.map_err(|_| "SQ full".to_string())?;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Err(e) = ring.submit_and_wait(1) {
            if e.kind() != io::ErrorKind::Interrupted {
                std::mem::forget(buf);
                return Err(format!("io_uring_enter: {e}"));
            }
        }
        if let Some(c) = ring.completions().next() {
            return match c.res {
                r if r >= 0 => Ok(()),
                r if -r == libc::EOPNOTSUPP => Err(
                    "EOPNOTSUPP: the device has no poll queues (typical of VM disks; \
                     NVMe needs nvme.poll_queues>0)"
                        .into(),
                ),
                r => Err(format!("{}", io::Error::from_raw_os_error(-r))),
            };
        }
        if Instant::now() > deadline {
            std::mem::forget(buf);
            return Err("no completion within 5 s".into());
        }
    }
}

/// Submit what waits, then spin until a completion is posted: the ring's
/// tail read in user space, entering the kernel only when the ring says a
/// reap needs it (task work pending, an overflow). Bounded: 10 s past the
/// window's end without a completion is an error, not a hang.
fn spin_for_one(ring: &mut IoUring, deadline: u64) -> io::Result<()> {
    ring.submit()?;
    let limit = deadline + 10_000_000_000;
    while ring.cq().ready() == 0 {
        if ring.cq_needs_enter() {
            ring.flush_cq()?;
        }
        std::hint::spin_loop();
        if now_ns() > limit {
            return Err(io::Error::other("no completion 10 s past the window's end"));
        }
    }
    Ok(())
}
