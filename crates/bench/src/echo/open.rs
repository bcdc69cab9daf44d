//! One echo connection in a true open loop: a writer sends a message at
//! each scheduled moment whatever the replies are doing, a reader checks
//! the echoes in order, so any number of messages may be in flight on the
//! connection ([`crate::harness::open_loop`]).

use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::time::Duration;

use ringkit::net::TcpStream;
use ringkit::sync::{select, Either};

use super::shared::{fill, Shared};
use crate::harness::open_loop::{settle, InFlight, Schedule};

/// Drive one connection until the window closes; `mine` counts its
/// replies in the window. `pooled`: read through the buffer ring.
pub(super) async fn open_conn(
    id: usize,
    addr: SocketAddr,
    len: usize,
    mut pooled: bool,
    pace: (Duration, Duration),
    sh: &Shared,
    mine: &mut u64,
) -> io::Result<()> {
    let s = TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    sh.connected.set(sh.connected.get() + 1);
    let mut schedule = Schedule::new(pace);
    let flight: InFlight<u64> = InFlight::default();
    let outcome = {
        let writer = pin!(write_side(&s, id, len, &mut schedule, &flight, sh));
        let reader = pin!(read_side(&s, id, len, &mut pooled, &flight, sh, mine));
        let work = pin!(select(writer, reader));
        // The window's end first: once it has closed, no reply is taken
        // (each is recorded by `settle` below, up to the end).
        match select(pin!(sh.win.closed()), work).await {
            Either::Right(Either::Left(r) | Either::Right(r)) => r,
            Either::Left(()) => Ok(()),
        }
    };
    // A connection that broke before the window's end still owes its
    // share of the window: wait for the end, then record what it had in
    // flight and what it never sent, up to the end (the run has failed,
    // but its latencies stay honest).
    if sh.win.end().is_none() {
        sh.win.closed().await;
    }
    sh.most_in_flight
        .set(sh.most_in_flight.get().max(flight.most()));
    let got = settle(
        &sh.win,
        &flight.dues(),
        &schedule,
        &mut sh.hist.borrow_mut(),
    );
    sh.unanswered.set(sh.unanswered.get() + got.unanswered);
    sh.unsent.set(sh.unsent.get() + got.unsent);
    sh.requests.set(sh.requests.get() + got.unsent);
    outcome
}

/// Send message `seq` at each scheduled moment.
async fn write_side(
    s: &TcpStream,
    id: usize,
    len: usize,
    schedule: &mut Schedule,
    flight: &InFlight<u64>,
    sh: &Shared,
) -> io::Result<()> {
    let mut out = vec![0u8; len];
    let mut seq = 0u64;
    loop {
        let due = schedule.next().await;
        seq += 1;
        fill(&mut out, id, seq);
        flight.push(due, seq);
        if sh.win.counts(due) {
            sh.requests.set(sh.requests.get() + 1);
        }
        let (res, o) = s.write_all(out).await;
        out = o;
        res?;
    }
}

/// Check the echoes byte for byte, in order, against the messages in
/// flight; record each whole one's latency from its scheduled moment.
async fn read_side(
    s: &TcpStream,
    id: usize,
    len: usize,
    pooled: &mut bool,
    flight: &InFlight<u64>,
    sh: &Shared,
    mine: &mut u64,
) -> io::Result<()> {
    let mut want = vec![0u8; len];
    // Bytes of the oldest message already matched, and its number (0: not
    // generated yet).
    let (mut at, mut want_seq) = (0usize, 0u64);
    let mut chunk: Vec<u8> = Vec::with_capacity(if *pooled { 0 } else { len.max(4096) });
    loop {
        let mut take = |back: &[u8]| -> io::Result<()> {
            if back.is_empty() {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "server closed the connection",
                ));
            }
            let mut rest = back;
            while !rest.is_empty() {
                let Some((due, seq)) = flight.front() else {
                    sh.mismatches.set(sh.mismatches.get() + 1);
                    return Err(crate::harness::err::invalid_data(
                        "echo of a message never sent",
                    ));
                };
                if want_seq != seq {
                    fill(&mut want, id, seq);
                    want_seq = seq;
                }
                let n = rest.len().min(len - at);
                if rest[..n] != want[at..at + n] {
                    sh.mismatches.set(sh.mismatches.get() + 1);
                    return Err(crate::harness::err::invalid_data("echo mismatch"));
                }
                at += n;
                rest = &rest[n..];
                if at == len {
                    at = 0;
                    flight.pop();
                    if sh.win.counts(due) && sh.win.end().is_none() {
                        sh.responses.set(sh.responses.get() + 1);
                        *mine += 1;
                        let ns = due.elapsed().as_nanos() as u64;
                        let _ = sh.hist.borrow_mut().record(ns.max(1));
                    }
                }
            }
            Ok(())
        };
        if *pooled {
            match s.read_pooled().await {
                Ok(back) => take(&back)?,
                // A kernel without buffer rings or multishot receive refuses
                // the first one: read plainly.
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EINVAL | libc::EOPNOTSUPP | libc::ENOSYS)
                    ) =>
                {
                    *pooled = false;
                    chunk.reserve(len.max(4096));
                }
                Err(e) => return Err(e),
            }
        } else {
            chunk.clear();
            let (res, c) = s.read(chunk).await;
            chunk = c;
            let n = res?;
            take(&chunk[..n])?;
        }
    }
}
