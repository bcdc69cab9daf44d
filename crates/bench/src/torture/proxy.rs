//! The fault proxy: a TCP relay between the chaos clients and the server
//! that adds what a real network does and loopback never does: delay with
//! jitter, bytes sliced into tiny segments, and resets mid-stream.
//!
//! Blocking threads, two per relayed connection and direction (a reader
//! and a writer joined by a channel), so a delay never holds up another
//! connection and never reorders bytes: each chunk is written at
//! `max(previous due time, arrival + delay ± jitter)`. An end of stream is
//! passed on as a shutdown once everything before it is written; an error
//! on one side resets the other (`SO_LINGER` 0), so a reset crosses the
//! proxy as a reset. With `reset_per_mille`, that share of connections is
//! reset on both sides at a random point of the server's reply stream; the
//! count is [`Proxy::resets`], which the torture uses to explain losses.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::harness::rng::Rng;

/// What the proxy does to the bytes it relays.
#[derive(Debug, Clone, Copy, Default)]
pub struct Toxics {
    /// Added to every chunk each way: mean and jitter (uniform ± jitter).
    pub delay: Option<(Duration, Duration)>,
    /// Write in segments of 1 to this many bytes (`TCP_NODELAY` on).
    pub slice: Option<usize>,
    /// Connections (per thousand) reset mid-stream.
    pub reset_per_mille: u32,
}

/// A running proxy. Dropping it stops accepting; relays already running
/// end when their connections do (the torture drops it once its clients
/// are done).
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    resets: Arc<AtomicU64>,
    relayed: Arc<AtomicU64>,
    accept: Option<JoinHandle<()>>,
}

/// What a reader hands its writer.
enum Chunk {
    Data(Vec<u8>, Instant),
    Eof(Instant),
    Reset,
}

/// Make the last close of `s` send a RST (`SO_LINGER` 0) and wake its
/// reader (`SHUT_RD` sends nothing): once every thread of the relay has
/// let go of it, the peer gets a reset, not an end of stream.
fn reset(s: &TcpStream) {
    let _ = socket2::SockRef::from(s).set_linger(Some(Duration::ZERO));
    let _ = s.shutdown(Shutdown::Read);
}

/// How long a blocked write waits before it looks at the cut flag.
const WRITE_SLICE: Duration = Duration::from_millis(100);

/// Write all of `bytes`, giving up (false) on an error or once the relay is
/// cut.
fn write_cut(to: &mut TcpStream, mut bytes: &[u8], cut: &AtomicBool) -> bool {
    while !bytes.is_empty() {
        if cut.load(Ordering::Relaxed) {
            return false;
        }
        match to.write(bytes) {
            Ok(0) => return false,
            Ok(n) => bytes = &bytes[n..],
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => return false,
        }
    }
    true
}

impl Proxy {
    /// Listen on a free loopback port and relay every connection to
    /// `upstream` with `toxics`; `seed` drives every random choice.
    pub fn start(upstream: SocketAddr, toxics: Toxics, seed: u64) -> io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let resets = Arc::new(AtomicU64::new(0));
        let relayed = Arc::new(AtomicU64::new(0));
        let (st, rs, rl) = (stop.clone(), resets.clone(), relayed.clone());
        let accept = std::thread::spawn(move || {
            let mut n = 0u64;
            while !st.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        n += 1;
                        rl.fetch_add(1, Ordering::Relaxed);
                        let rng = Rng::for_stream(seed, 0x7072_6f78, n);
                        let rs = rs.clone();
                        std::thread::spawn(move || relay(client, upstream, toxics, rng, &rs));
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Ok(Proxy {
            addr,
            stop,
            resets,
            relayed,
            accept: Some(accept),
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections the proxy reset on purpose.
    pub fn resets(&self) -> u64 {
        self.resets.load(Ordering::Relaxed)
    }

    /// Connections relayed.
    pub fn relayed(&self) -> u64 {
        self.relayed.load(Ordering::Relaxed)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// Relay one connection until both directions end.
fn relay(
    client: TcpStream,
    upstream: SocketAddr,
    toxics: Toxics,
    mut rng: Rng,
    resets: &AtomicU64,
) {
    let _ = client.set_nonblocking(false);
    let Ok(server) = TcpStream::connect_timeout(&upstream, Duration::from_secs(10)) else {
        reset(&client);
        return;
    };
    for s in [&client, &server] {
        let _ = s.set_nodelay(true);
        let _ = s.set_write_timeout(Some(WRITE_SLICE));
    }
    // A reset planned at a byte of the server's replies.
    let reset_at =
        (rng.range(0, 999) < u64::from(toxics.reset_per_mille)).then(|| rng.range(1, 256 * 1024));
    let cut = Arc::new(AtomicBool::new(false));
    let pairs = [
        (client.try_clone(), server.try_clone(), None, rng.next_u64()),
        (
            server.try_clone(),
            client.try_clone(),
            reset_at,
            rng.next_u64(),
        ),
    ];
    let mut threads = Vec::new();
    for (from, to, reset_at, seed) in pairs {
        let (Ok(from), Ok(to)) = (from, to) else {
            reset(&client);
            reset(&server);
            return;
        };
        // Bounded: a reader runs at most this many chunks ahead of its
        // writer, so a slow side slows the other (backpressure), as a
        // real path would.
        let (tx, rx) = mpsc::sync_channel::<Chunk>(16);
        let (to2, from2) = (to.try_clone(), from.try_clone());
        let cut_r = cut.clone();
        threads.push(std::thread::spawn(move || {
            read_side(from, tx, toxics, Rng::new(seed), reset_at, &cut_r)
        }));
        let cut_w = cut.clone();
        threads.push(std::thread::spawn(move || {
            if let (Ok(to), Ok(from)) = (to2, from2) {
                write_side(to, from, rx, toxics, Rng::new(seed ^ 1), &cut_w);
            }
            false
        }));
    }
    // Drop this thread's handles now: the last close sends the reset.
    drop((client, server));
    let mut planned = false;
    for t in threads {
        planned |= t.join().unwrap_or(false);
    }
    if planned {
        resets.fetch_add(1, Ordering::Relaxed);
    }
}

/// Read `from` and queue the chunks with their due times; true when it
/// cut the relay at its planned reset point.
fn read_side(
    mut from: TcpStream,
    tx: mpsc::SyncSender<Chunk>,
    toxics: Toxics,
    mut rng: Rng,
    reset_at: Option<u64>,
    cut: &AtomicBool,
) -> bool {
    let mut due = Instant::now();
    let mut seen = 0u64;
    let mut buf = vec![0u8; 16 * 1024];
    let mut next_due = |rng: &mut Rng| {
        let now = Instant::now();
        let d = match toxics.delay {
            Some((mean, jitter)) => {
                let j = jitter.as_micros() as u64;
                let us = mean.as_micros() as u64 + rng.range(0, 2 * j) - j;
                now + Duration::from_micros(us)
            }
            None => now,
        };
        due = due.max(d);
        due
    };
    loop {
        match from.read(&mut buf) {
            // Woken by a cut (SHUT_RD): not the peer's end of stream.
            Ok(_) if cut.load(Ordering::Relaxed) => {
                let _ = tx.send(Chunk::Reset);
                return false;
            }
            Ok(0) => {
                let _ = tx.send(Chunk::Eof(next_due(&mut rng)));
                return false;
            }
            Ok(n) => {
                seen += n as u64;
                if reset_at.is_some_and(|at| seen >= at) {
                    // Counted only if nothing cut the relay before: a relay
                    // already cut for another reason is not this reset's doing.
                    let first = !cut.swap(true, Ordering::SeqCst);
                    let _ = tx.send(Chunk::Reset);
                    return first;
                }
                if tx
                    .send(Chunk::Data(buf[..n].to_vec(), next_due(&mut rng)))
                    .is_err()
                {
                    return false;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => {
                let _ = tx.send(Chunk::Reset);
                return false;
            }
        }
    }
}

/// Write the chunks to `to` at their due times; pass an end of stream on
/// as a shutdown and an error or reset as a reset of both sides.
fn write_side(
    mut to: TcpStream,
    from: TcpStream,
    rx: mpsc::Receiver<Chunk>,
    toxics: Toxics,
    mut rng: Rng,
    cut: &AtomicBool,
) {
    let wait = |at: Instant| {
        let now = Instant::now();
        if at > now {
            std::thread::sleep(at - now);
        }
    };
    // Cut the relay: both sides get a reset once every handle is gone.
    let cut_both = |from: &TcpStream, to: &TcpStream| {
        cut.store(true, Ordering::Relaxed);
        reset(from);
        reset(to);
    };
    while let Ok(chunk) = rx.recv() {
        match chunk {
            Chunk::Data(bytes, at) => {
                wait(at);
                let ok = match toxics.slice {
                    Some(max) => bytes
                        .chunks(rng.range(1, max as u64) as usize)
                        .all(|piece| write_cut(&mut to, piece, cut)),
                    None => write_cut(&mut to, &bytes, cut),
                };
                if !ok {
                    cut_both(&from, &to);
                    return;
                }
            }
            Chunk::Eof(at) => {
                wait(at);
                let _ = to.shutdown(Shutdown::Write);
                return;
            }
            Chunk::Reset => {
                cut_both(&from, &to);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server on a thread; returns its address.
    fn echo_server() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                std::thread::spawn(move || {
                    let mut r = s.try_clone().unwrap();
                    let _ = io::copy(&mut r, &mut s);
                    let _ = s.shutdown(Shutdown::Write);
                });
            }
        });
        a
    }

    fn round_trip(p: &Proxy, len: usize) -> io::Result<Vec<u8>> {
        let mut c = TcpStream::connect(p.addr())?;
        let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        let mut w = c.try_clone()?;
        let d2 = data.clone();
        let t = std::thread::spawn(move || {
            w.write_all(&d2)?;
            w.shutdown(Shutdown::Write)
        });
        let mut back = Vec::new();
        c.read_to_end(&mut back)?;
        t.join().unwrap()?;
        assert_eq!(back, data, "bytes came back changed or reordered");
        Ok(back)
    }

    #[test]
    fn delay_and_slices_keep_every_byte_in_order() {
        let up = echo_server();
        let delay = Toxics {
            delay: Some((Duration::from_millis(20), Duration::from_millis(5))),
            ..Toxics::default()
        };
        let p = Proxy::start(up, delay, 1).unwrap();
        let t = Instant::now();
        round_trip(&p, 1).unwrap();
        // Two directions of at least 15 ms each.
        assert!(
            t.elapsed() >= Duration::from_millis(30),
            "{:?}",
            t.elapsed()
        );
        round_trip(&p, 300_000).unwrap();
        let sliced = Proxy::start(
            up,
            Toxics {
                slice: Some(16),
                ..Toxics::default()
            },
            2,
        )
        .unwrap();
        round_trip(&sliced, 100_000).unwrap();
        assert_eq!(sliced.relayed(), 1);
    }

    #[test]
    fn resets_cross_the_proxy_and_are_counted() {
        let up = echo_server();
        let all = Toxics {
            reset_per_mille: 1000,
            ..Toxics::default()
        };
        let p = Proxy::start(up, all, 3).unwrap();
        // 1 MiB: past any reset point (at most 256 KiB of replies).
        let r = round_trip(&p, 1 << 20);
        let e = r.expect_err("every connection is reset mid-stream");
        assert!(
            matches!(
                e.kind(),
                io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
            ),
            "{e}"
        );
        let t = Instant::now();
        while p.resets() == 0 && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(p.resets(), 1);
    }
}
