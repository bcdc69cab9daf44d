//! Burst then idle: fresh idle connections, a burst of pipelined
//! requests on each, idleness, then every connection closed; memory per
//! idle connection is sampled before and after the bursts.

use std::io::{self, Read, Write};
use std::time::Duration;

use super::ctx::{Ctx, Outcome};
use super::target::{self, Conn, Target};

/// Fresh idle connections, then a burst on each, then idleness, then
/// every connection closed. HTTP servers get the bursts at once: each
/// connection's 64 requests are sent before any reply is read, so the
/// server holds every connection's replies together (1 000 at once took
/// `ringkit serve` to 450 MiB, and glibc kept 100 MiB of it afterwards).
pub(super) fn burst_then_idle(cx: &Ctx, o: &mut Outcome) -> io::Result<()> {
    let t = cx.target;
    // The log syncs each burst: fewer connections, so that all of them
    // stay within the short form's idle timeout.
    let n = match t {
        Target::Log => cx.n(100, 20),
        _ => cx.n(BURST_CONNS, 100),
    };
    let before = (cx.rss)();
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n {
        let mut c = target::connect(t, cx.addr, cx.tls, Duration::from_secs(5))?;
        target::exchange(t, &mut c)?;
        conns.push(c);
    }
    std::thread::sleep(Duration::from_millis(300));
    let fresh = (cx.rss)();
    if matches!(t, Target::Echo | Target::Log) {
        for c in &mut conns {
            burst(t, c)?;
        }
    } else {
        let reqs = target::gets(target::large_path(t), BURST);
        for c in &mut conns {
            c.write_all(&reqs)?;
        }
        for c in &mut conns {
            read_burst(c)?;
        }
    }
    // What a server gives back once a burst is over may take a moment
    // (ringkit-http asks the allocator 1 s after).
    std::thread::sleep(Duration::from_millis(1500));
    let after = (cx.rss)();
    // Every connection was still open when sampled (or the figure says
    // nothing of it).
    for c in &mut conns {
        target::exchange(t, c)?;
    }
    // The harness samples RSS once the attack returns: after the close.
    drop(conns);
    std::thread::sleep(Duration::from_millis(1500));
    let per = |x: u64| x.saturating_sub(before) as f64 / n as f64;
    o.hostile = n;
    o.fresh_kib = Some(per(fresh));
    o.after_burst_kib = Some(per(after));
    Ok(())
}

/// Requests in a burst.
const BURST: usize = 64;
/// Connections bursting at once (full form).
pub(super) const BURST_CONNS: usize = 1000;

/// Read a burst's replies, checking each is a 200 (buffered: the last
/// reply ends the connection's input, so nothing read ahead is lost).
fn read_burst(c: &mut Conn) -> io::Result<()> {
    let mut r = io::BufReader::with_capacity(64 * 1024, c);
    for i in 0..BURST {
        let (status, _) = target::read_response(&mut r)
            .map_err(|e| io::Error::new(e.kind(), format!("reply {i} of a burst: {e}")))?;
        if status != 200 {
            return Err(io::Error::other(format!("burst: status {status}")));
        }
    }
    Ok(())
}

/// 64 pipelined requests for ~16 KiB each, every reply read.
pub(crate) fn burst(t: Target, c: &mut Conn) -> io::Result<()> {
    const N: usize = BURST;
    match t {
        Target::Echo => {
            let msg = vec![b'e'; 16 * 1024];
            let mut back = vec![0u8; msg.len()];
            for _ in 0..N {
                c.write_all(&msg)?;
                c.read_exact(&mut back)?;
            }
        }
        Target::Log => {
            let rec = vec![b'r'; 16 * 1024];
            let mut all = Vec::new();
            for _ in 0..N {
                all.extend_from_slice(&(rec.len() as u32).to_le_bytes());
                all.extend_from_slice(&rec);
            }
            c.write_all(&all)?;
            let mut lsns = [0u8; 8 * N];
            c.read_exact(&mut lsns)?;
        }
        _ => {
            c.write_all(&target::gets(target::large_path(t), N))?;
            read_burst(c)?;
        }
    }
    Ok(())
}
