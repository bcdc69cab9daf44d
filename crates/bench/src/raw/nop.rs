//! NOP batches on a bare ring: the ring overhead study's two loops.

use std::io;
use std::time::{Duration, Instant};

use ringkit_uring::{opcode, IoUring};

/// One batch on a non-SQPOLL ring: push, one enter, reap.
#[inline]
pub fn batch_enter(ring: &mut IoUring, n: u32) -> io::Result<()> {
    let nop = opcode::Nop::new().build();
    for i in 0..n {
        // SAFETY: a NOP references no memory.
        unsafe { ring.push(nop.user_data(u64::from(i)).sqe()) }
            .map_err(|_| io::Error::other("SQ unexpectedly full"))?;
    }
    let mut reaped = 0;
    loop {
        match ring.submit_and_wait(n - reaped) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        for cqe in ring.completions() {
            if cqe.res != 0 {
                return Err(io::Error::other(format!("NOP failed: {}", cqe.res)));
            }
            reaped += 1;
        }
        if reaped >= n {
            return Ok(());
        }
    }
}

/// One batch on an SQPOLL ring: push, publish (enter only to wake the
/// poller), spin on the CQ.
#[inline]
pub fn batch_sqpoll(ring: &mut IoUring, n: u32) -> io::Result<()> {
    let nop = opcode::Nop::new().build();
    for i in 0..n {
        // SAFETY: a NOP references no memory.
        unsafe { ring.push(nop.user_data(u64::from(i)).sqe()) }
            .map_err(|_| io::Error::other("SQ unexpectedly full"))?;
    }
    ring.submit()?;
    let mut reaped = 0;
    let start = Instant::now();
    while reaped < n {
        for cqe in ring.completions() {
            if cqe.res != 0 {
                return Err(io::Error::other(format!("NOP failed: {}", cqe.res)));
            }
            reaped += 1;
        }
        if reaped < n {
            if ring.cq_needs_enter() {
                ring.flush_cq()?;
            }
            std::hint::spin_loop();
            if start.elapsed() > Duration::from_secs(5) {
                return Err(io::Error::other("SQPOLL: no completion within 5 s"));
            }
        }
    }
    Ok(())
}
