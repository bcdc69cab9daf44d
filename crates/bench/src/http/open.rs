//! One HTTP/1.1 keep-alive connection in a true open loop: a writer sends
//! a request at each scheduled moment whatever the responses are doing
//! (pipelining), a reader frames and checks the responses in order, so
//! any number of requests may be in flight on the connection
//! ([`crate::harness::open_loop`]).

use std::net::SocketAddr;
use std::pin::pin;
use std::time::Duration;

use ringkit::net::TcpStream;
use ringkit::sync::select;

use super::exchange::{check_response, Asks, Shared, Want, MAX_RESPONSE};
use super::response::{parse_response, Parse};
use crate::harness::open_loop::{settle, InFlight, Schedule};
use crate::harness::rng::Rng;

/// Drive connection `slot` until the window closes. Errors are counted in
/// `sh` (a broken connection ends this one's part in the run).
pub(super) async fn open_conn(
    slot: usize,
    addr: SocketAddr,
    pace: (Duration, Duration),
    asks: &Asks,
    rng: Rng,
    sh: &Shared,
) {
    let connected = TcpStream::connect(addr).await;
    sh.started.set(sh.started.get() + 1);
    let s = match connected {
        Ok(s) => s,
        Err(e) => return sh.error(&sh.errs.connect, || format!("connect: {e}")),
    };
    let _ = s.set_nodelay(true);
    let mut schedule = Schedule::new(pace);
    let flight: InFlight<Option<Want>> = InFlight::default();
    {
        let writer = pin!(write_side(&s, &mut schedule, &flight, asks, rng, sh));
        let reader = pin!(read_side(&s, slot, &flight, sh));
        let work = pin!(select(writer, reader));
        // The window's end first: once it has closed, no reply is taken
        // (each is recorded by `settle` below, up to the end).
        let _ = select(pin!(sh.win.closed()), work).await;
    }
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
}

/// Send a request at each scheduled moment; returns on a write error.
async fn write_side(
    s: &TcpStream,
    schedule: &mut Schedule,
    flight: &InFlight<Option<Want>>,
    asks: &Asks,
    mut rng: Rng,
    sh: &Shared,
) {
    let mut req = Vec::new();
    loop {
        let due = schedule.next().await;
        req.clear();
        let want = match asks {
            Asks::One(r) => {
                req.extend_from_slice(r);
                None
            }
            Asks::Mix(list) => {
                let (r, want) = &list[rng.range(0, list.len() as u64 - 1) as usize];
                req.extend_from_slice(r);
                Some(*want)
            }
        };
        flight.push(due, want);
        if sh.win.counts(due) {
            sh.requests.set(sh.requests.get() + 1);
        }
        let (res, r) = s.write_all(std::mem::take(&mut req)).await;
        req = r;
        if let Err(e) = res {
            return sh.error(&sh.errs.write, || format!("write: {e}"));
        }
    }
}

/// Frame and check the responses in order; record each one's latency from
/// its request's scheduled moment. Returns when the connection breaks.
async fn read_side(s: &TcpStream, slot: usize, flight: &InFlight<Option<Want>>, sh: &Shared) {
    let mut rbuf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut acc: Vec<u8> = Vec::new();
    let mut nth = 0u64;
    loop {
        rbuf.clear();
        let (res, b) = s.read(std::mem::take(&mut rbuf)).await;
        rbuf = b;
        let n = match res {
            Ok(0) => {
                return sh.error(&sh.errs.read, || {
                    "the server closed a keep-alive connection with requests scheduled".into()
                })
            }
            Ok(n) => n,
            Err(e) => return sh.error(&sh.errs.read, || format!("read: {e}")),
        };
        if sh.win.end().is_none() && sh.phase.get() == 1 {
            sh.bytes.set(sh.bytes.get() + n as u64);
        }
        acc.extend_from_slice(&rbuf[..n]);
        let mut pos = 0;
        loop {
            match parse_response(&acc[pos..]) {
                Ok(Parse::Partial) => break,
                Ok(Parse::Complete(r)) => {
                    let Some((due, want)) = flight.pop() else {
                        return sh.error(&sh.errs.malformed, || {
                            "a response to no request in flight".into()
                        });
                    };
                    check_response(&acc[pos..], &r, want, &mut nth, sh);
                    pos += r.len;
                    if sh.win.counts(due) && sh.win.end().is_none() {
                        sh.responses.set(sh.responses.get() + 1);
                        sh.per_conn.borrow_mut()[slot] += 1;
                        let ns = due.elapsed().as_nanos() as u64;
                        let _ = sh.hist.borrow_mut().record(ns.max(1));
                    }
                    if r.close {
                        return sh.error(&sh.errs.read, || {
                            "the server closed a keep-alive connection (Connection: close) in an open loop".into()
                        });
                    }
                }
                Err(e) => return sh.error(&sh.errs.malformed, || e.to_string()),
            }
        }
        acc.drain(..pos);
        if acc.len() > MAX_RESPONSE {
            return sh.error(&sh.errs.malformed, || {
                format!("response larger than {MAX_RESPONSE} bytes")
            });
        }
    }
}
