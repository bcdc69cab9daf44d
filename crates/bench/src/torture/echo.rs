//! Echo chaos clients: `conns` slots on one ringkit runtime, each running
//! random sessions back to back until told to stop.
//!
//! # A session
//! One connection, one of:
//! - **normal**: 1–30 steps, each one message (1 B – 256 KiB, written in up
//!   to 6 pieces split at random points with short pauses) or a pipelined
//!   burst of 2–12 messages written back to back (at most 1 MiB); after each
//!   step the writer waits until every byte has come back verified. It ends
//!   with a plain close, or a half-close (`shutdown(SHUT_WR)`) after which
//!   the server must echo what is left and then close (EOF).
//! - **vanish**: a few messages, then the client disappears with a RST
//!   (`SO_LINGER` 0): either in the middle of writing a message, or right
//!   after writing a large one whose echo the server is still sending.
//! - **idle**: one small message, then silence for 0.5–5 s, one more
//!   message, close.
//! - **flash**: connect and close at once (half of them with a RST).
//!
//! # Verification
//! A reader task per connection compares every byte that comes back with
//! the regenerated message stream ([`ByteGen`]); bytes the client never
//! asked for are a mismatch too. Anything the server owed and did not
//! deliver — an early EOF, a reset, a stall longer than the stall limit —
//! is a loss, except on a connection the server never answered at all once
//! a graceful shutdown started (it may still have been in the listen
//! backlog when the listener closed): those are counted apart as unserved.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use ringkit::net::TcpStream;
use serde::Serialize;

use super::slots::{run_slots, Chaos, Common};
use super::tally::Tally;

use crate::harness::rng::{ByteGen, Rng};

/// Largest message.
pub const MAX_MSG: usize = 256 * 1024;
/// Largest pipelined burst, bytes.
const MAX_BURST: usize = 1024 * 1024;

/// What the echo clients did and saw.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct EchoCounts {
    /// What every chaos client counts.
    #[serde(flatten)]
    pub tally: Tally,
    /// Messages written whole.
    pub messages_sent: u64,
    /// Messages that came back whole and verified.
    pub messages_verified: u64,
    /// Messages written in more than one piece.
    pub split_writes: u64,
    /// Clients that vanished (RST) in the middle of writing a message.
    pub vanished_mid_message: u64,
    /// Clients that reset while the server was sending them a large echo.
    pub reset_during_send: u64,
    /// Sessions ended by a half-close (the server's EOF verified).
    pub half_closes: u64,
    /// Idle sessions.
    pub idle_sessions: u64,
    /// Connect-and-close sessions.
    pub flash_sessions: u64,
    /// Connections owed echo bytes when stopping began (the `SIGTERM`, in
    /// graceful mode).
    pub owed_at_stop: u64,
    /// Of those, connections that then got every owed byte back.
    pub completed_across_stop: u64,
}

/// Settings of one echo chaos run.
pub type EchoChaos = super::ChaosConfig;

/// Shared state of the slots (one thread, so cells).
struct Ctx {
    cfg: EchoChaos,
    common: Common<EchoCounts>,
    next_conn: Cell<u64>,
    /// Open connections, to see what each is owed when stopping begins.
    live: RefCell<std::collections::HashMap<u64, std::rc::Weak<Conn>>>,
}

impl Ctx {
    fn count(&self, f: impl FnOnce(&mut EchoCounts)) {
        self.common.count(f);
    }
    /// Sleep unless stopping (then return at once).
    async fn pause(&self, d: Duration) {
        let end = Instant::now() + d;
        while !self.common.stopping.get() {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            ringkit::time::sleep(left.min(Duration::from_millis(100))).await;
        }
    }
}

/// How a connection's reader ended.
#[derive(Debug, Clone)]
enum End {
    Eof,
    Error(String),
    Mismatch,
    Stall,
}

/// One connection: the stream and what the reader still expects.
struct Conn {
    s: TcpStream,
    id: u64,
    /// Messages (seq, len) whose echo is still (partly) expected, in order.
    expect: RefCell<VecDeque<(u64, usize)>>,
    /// Bytes written so far (all messages).
    written: Cell<u64>,
    /// Bytes of messages pushed to `expect` (what a full echo returns).
    promised: Cell<u64>,
    /// Bytes verified so far.
    verified: Cell<u64>,
    /// Set when the reader stops.
    end: RefCell<Option<End>>,
    /// Bytes promised when stopping began, if some were still owed then.
    owed_at_stop: Cell<u64>,
    writer: Cell<Option<Waker>>,
    last_progress: Cell<Instant>,
}

impl Conn {
    fn wake_writer(&self) {
        if let Some(w) = self.writer.take() {
            w.wake();
        }
    }

    /// Wait until `target` bytes are verified, or the reader ended.
    async fn verified_up_to(&self, target: u64) -> Result<(), End> {
        poll_fn(|cx| {
            if self.verified.get() >= target {
                return Poll::Ready(Ok(()));
            }
            if let Some(e) = self.end.borrow().clone() {
                return Poll::Ready(Err(e));
            }
            self.writer.set(Some(cx.waker().clone()));
            Poll::Pending
        })
        .await
    }

    /// Wait until the reader ended (after a half-close: EOF expected).
    async fn reader_end(&self) -> End {
        poll_fn(|cx| {
            if let Some(e) = self.end.borrow().clone() {
                return Poll::Ready(e);
            }
            self.writer.set(Some(cx.waker().clone()));
            Poll::Pending
        })
        .await
    }
}

/// Run the chaos until `cfg.stop_at`, then let every session finish what
/// it started. `on_stop` runs once, when stopping begins (the caller sends
/// `SIGTERM` there in graceful mode); `tick` runs about once a second.
pub fn run(
    cfg: EchoChaos,
    backend: ringkit::Backend,
    on_stop: &mut dyn FnMut(),
    tick: &mut dyn FnMut(&EchoCounts),
) -> io::Result<EchoCounts> {
    let ctx = Rc::new(Ctx {
        common: Common::new(cfg.conns, cfg.stop_at),
        cfg,
        next_conn: Cell::new(1),
        live: RefCell::new(std::collections::HashMap::new()),
    });
    run_slots(ctx, backend, on_stop, tick)
}

impl Chaos for Ctx {
    type Counts = EchoCounts;

    fn common(&self) -> &Common<EchoCounts> {
        &self.common
    }

    async fn session(self: Rc<Self>, slot: usize, n: u64) {
        let rng = Rng::for_stream(self.cfg.seed, slot as u64, n);
        session(&self, rng).await
    }

    /// Note each connection still owed echo bytes.
    fn at_stop(&self) {
        for c in self
            .live
            .borrow()
            .values()
            .filter_map(std::rc::Weak::upgrade)
        {
            if c.promised.get() > c.verified.get() {
                c.owed_at_stop.set(c.promised.get());
                self.count(|n| n.owed_at_stop += 1);
            }
        }
    }
}

enum Kind {
    Normal,
    Vanish,
    Idle,
    Flash,
}

async fn session(ctx: &Rc<Ctx>, mut rng: Rng) {
    let kind = match rng.range(0, 99) {
        0..=64 => Kind::Normal,
        65..=79 => Kind::Vanish,
        80..=91 => Kind::Idle,
        _ => Kind::Flash,
    };
    let Some(s) = super::slots::connect(&ctx.common, &ctx.cfg, |c| &mut c.tally).await else {
        return;
    };
    let _ = s.set_nodelay(rng.chance(0.8));
    ctx.count(|c| c.tally.connects += 1);
    let id = ctx.next_conn.get();
    ctx.next_conn.set(id + 1);
    let conn = Rc::new(Conn {
        s,
        id,
        expect: RefCell::new(VecDeque::new()),
        written: Cell::new(0),
        promised: Cell::new(0),
        verified: Cell::new(0),
        end: RefCell::new(None),
        owed_at_stop: Cell::new(0),
        writer: Cell::new(None),
        last_progress: Cell::new(Instant::now()),
    });
    ctx.live.borrow_mut().insert(id, Rc::downgrade(&conn));
    let reader = ringkit::spawn(reader(conn.clone(), ctx.clone()));
    let mut seq = 0u64;
    let outcome = match kind {
        Kind::Normal => normal(ctx, &conn, &mut rng, &mut seq).await,
        Kind::Vanish => vanish(ctx, &conn, &mut rng, &mut seq).await,
        Kind::Idle => idle(ctx, &conn, &mut rng, &mut seq).await,
        Kind::Flash => {
            ctx.count(|c| c.flash_sessions += 1);
            if rng.chance(0.5) {
                let _ = conn.s.set_linger(Some(Duration::ZERO));
            }
            Ok(())
        }
    };
    let owed = conn.owed_at_stop.get();
    if owed > 0 && conn.verified.get() >= owed {
        ctx.count(|c| c.completed_across_stop += 1);
    }
    if let Err(e) = outcome {
        judge(ctx, &conn, e);
    }
    ctx.live.borrow_mut().remove(&id);
    reader.abort();
    let _ = reader.await;
    // Last reference: the socket closes (with a RST if lingering was set to 0).
    drop(conn);
}

/// Count a failed connection (or excuse it if a graceful shutdown explains it).
fn judge(ctx: &Ctx, conn: &Conn, e: End) {
    match e {
        // The reader counted it already.
        End::Mismatch => {}
        End::Stall => ctx.count(|c| {
            c.tally.stalls += 1;
            c.tally.error(format!(
                "conn {}: stalled: {} of {} bytes back, none for {:?}",
                conn.id,
                conn.verified.get(),
                conn.promised.get(),
                ctx.cfg.stall
            ));
        }),
        End::Eof | End::Error(..) => {
            if ctx.common.stopping.get() && ctx.cfg.graceful_stop && conn.verified.get() == 0 {
                ctx.count(|c| c.tally.unserved_at_shutdown += 1);
                return;
            }
            let what = match e {
                End::Error(m) => m,
                _ => "EOF".into(),
            };
            ctx.count(|c| {
                c.tally.losses += 1;
                c.tally.error(format!(
                    "conn {}: {what} with {} of {} bytes back{}",
                    conn.id,
                    conn.verified.get(),
                    conn.promised.get(),
                    if ctx.common.stopping.get() {
                        " (during shutdown)"
                    } else {
                        ""
                    }
                ));
            });
        }
    }
}

/// Write message `seq` (`len` bytes), in random pieces with random pauses,
/// or only its first `cut` bytes.
async fn write_message(
    ctx: &Ctx,
    conn: &Conn,
    rng: &mut Rng,
    seq: u64,
    len: usize,
    cut: Option<usize>,
) -> Result<(), End> {
    conn.expect.borrow_mut().push_back((seq, len));
    conn.promised.set(conn.promised.get() + len as u64);
    let data = ByteGen::message(conn.id, seq, len);
    let upto = cut.unwrap_or(len);
    let pieces = if len > 1 && rng.chance(0.3) {
        rng.range(2, 6.min(len as u64)) as usize
    } else {
        1
    };
    let mut points: Vec<usize> = (1..pieces)
        .map(|_| rng.range(1, len as u64 - 1) as usize)
        .collect();
    points.push(len);
    points.sort_unstable();
    points.dedup();
    if points.len() > 1 {
        ctx.count(|c| c.split_writes += 1);
    }
    let mut at = 0;
    for p in points {
        let end = p.min(upto);
        if end > at {
            let (res, _) = conn.s.write_all(data[at..end].to_vec()).await;
            if let Err(e) = res {
                return Err(End::Error(format!("write: {e}")));
            }
            conn.written.set(conn.written.get() + (end - at) as u64);
            at = end;
        }
        if at >= upto {
            break;
        }
        match rng.range(0, 3) {
            0 => ringkit::yield_now().await,
            1 => ctx.pause(Duration::from_micros(rng.range(50, 3000))).await,
            _ => {}
        }
    }
    if cut.is_none() {
        ctx.count(|c| c.messages_sent += 1);
    }
    Ok(())
}

/// Wait (with the stall limit) until everything promised is verified.
async fn settle(ctx: &Ctx, conn: &Conn) -> Result<(), End> {
    let target = conn.promised.get();
    match ringkit::time::timeout(ctx.cfg.stall, conn.verified_up_to(target)).await {
        Ok(r) => r,
        Err(_) => Err(End::Stall),
    }
}

/// One step: a single message or a pipelined burst, then wait for the echo.
async fn step(ctx: &Ctx, conn: &Conn, rng: &mut Rng, seq: &mut u64) -> Result<(), End> {
    if rng.chance(0.2) {
        ctx.count(|c| c.tally.bursts += 1);
        let n = rng.range(2, 12);
        let mut total = 0;
        for _ in 0..n {
            let len = rng.size(MAX_MSG).min(MAX_BURST - total).max(1);
            total += len;
            *seq += 1;
            write_message(ctx, conn, rng, *seq, len, None).await?;
            if total >= MAX_BURST {
                break;
            }
        }
    } else {
        *seq += 1;
        let len = rng.size(MAX_MSG);
        write_message(ctx, conn, rng, *seq, len, None).await?;
    }
    settle(ctx, conn).await
}

async fn normal(ctx: &Ctx, conn: &Conn, rng: &mut Rng, seq: &mut u64) -> Result<(), End> {
    let steps = rng.range(1, 30);
    for _ in 0..steps {
        if ctx.common.stopping.get() {
            break;
        }
        step(ctx, conn, rng, seq).await?;
        if rng.chance(0.2) {
            ctx.pause(Duration::from_millis(rng.range(1, 50))).await;
        }
    }
    if rng.chance(0.4) {
        // Half-close with one last message in flight: the server must echo
        // it all, then close its side.
        if !ctx.common.stopping.get() && rng.chance(0.5) {
            *seq += 1;
            let len = rng.size(MAX_MSG);
            write_message(ctx, conn, rng, *seq, len, None).await?;
        }
        if let Err(e) = conn.s.shutdown(std::net::Shutdown::Write).await {
            return Err(End::Error(format!("shutdown: {e}")));
        }
        let end = match ringkit::time::timeout(ctx.cfg.stall, conn.reader_end()).await {
            Ok(e) => e,
            Err(_) => End::Stall,
        };
        return match end {
            End::Eof if conn.verified.get() == conn.promised.get() => {
                ctx.count(|c| c.half_closes += 1);
                Ok(())
            }
            other => Err(other),
        };
    }
    Ok(())
}

async fn vanish(ctx: &Ctx, conn: &Conn, rng: &mut Rng, seq: &mut u64) -> Result<(), End> {
    for _ in 0..rng.range(0, 3) {
        if ctx.common.stopping.get() {
            return Ok(());
        }
        step(ctx, conn, rng, seq).await?;
    }
    if ctx.common.stopping.get() {
        return Ok(());
    }
    *seq += 1;
    if rng.chance(0.5) {
        // Disappear in the middle of a message.
        let len = rng.size(MAX_MSG).max(2);
        let cut = rng.range(1, len as u64 - 1) as usize;
        write_message(ctx, conn, rng, *seq, len, Some(cut)).await?;
        ctx.count(|c| c.vanished_mid_message += 1);
    } else {
        // Send a large message and reset while its echo is coming back.
        let len = rng.range(64 * 1024, MAX_MSG as u64) as usize;
        write_message(ctx, conn, rng, *seq, len, None).await?;
        ctx.count(|c| c.reset_during_send += 1);
    }
    let _ = conn.s.set_linger(Some(Duration::ZERO));
    Ok(())
}

async fn idle(ctx: &Ctx, conn: &Conn, rng: &mut Rng, seq: &mut u64) -> Result<(), End> {
    ctx.count(|c| c.idle_sessions += 1);
    *seq += 1;
    let len = rng.range(1, 64) as usize;
    write_message(ctx, conn, rng, *seq, len, None).await?;
    settle(ctx, conn).await?;
    ctx.pause(Duration::from_millis(rng.range(500, 5000))).await;
    if !ctx.common.stopping.get() {
        *seq += 1;
        let len = rng.range(1, 4096) as usize;
        write_message(ctx, conn, rng, *seq, len, None).await?;
        settle(ctx, conn).await?;
    }
    Ok(())
}

/// Read everything that comes back and compare it with what was sent.
async fn reader(conn: Rc<Conn>, ctx: Rc<Ctx>) {
    let stall = ctx.cfg.stall;
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut want = vec![0u8; 64 * 1024];
    // The message being verified: (seq, generator, bytes left).
    let mut cur: Option<(u64, ByteGen, usize)> = None;
    let end = loop {
        buf.clear();
        let (res, b) = conn.s.read_timeout(buf, Duration::from_secs(1)).await;
        buf = b;
        let n = match res {
            Ok(0) => break End::Eof,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                let owed = conn.written.get() > conn.verified.get();
                if owed && conn.last_progress.get().elapsed() > stall {
                    break End::Stall;
                }
                if !owed {
                    conn.last_progress.set(Instant::now());
                }
                continue;
            }
            Err(e) => break End::Error(format!("read: {e}")),
        };
        conn.last_progress.set(Instant::now());
        let mut got = &buf[..n];
        let mut bad = None;
        while !got.is_empty() {
            if cur.is_none() {
                match conn.expect.borrow_mut().pop_front() {
                    Some((seq, len)) => cur = Some((seq, ByteGen::new(conn.id, seq), len)),
                    None => {
                        bad = Some(format!(
                            "conn {}: {} bytes nobody sent, after byte {}",
                            conn.id,
                            got.len(),
                            conn.verified.get()
                        ));
                        break;
                    }
                }
            }
            let Some((seq, gen, left)) = cur.as_mut() else {
                unreachable!("set above")
            };
            let k = (*left).min(got.len());
            gen.fill(&mut want[..k]);
            if got[..k] != want[..k] {
                let at = (0..k).find(|&i| got[i] != want[i]).unwrap_or(0);
                bad = Some(format!(
                    "conn {}: message {seq}: byte {} of the stream differs (got {:#04x}, want {:#04x})",
                    conn.id,
                    conn.verified.get() + at as u64,
                    got[at],
                    want[at]
                ));
                break;
            }
            conn.verified.set(conn.verified.get() + k as u64);
            *left -= k;
            got = &got[k..];
            if *left == 0 {
                cur = None;
                ctx.count(|c| c.messages_verified += 1);
            }
            ctx.count(|c| c.tally.bytes_verified += k as u64);
        }
        if let Some(msg) = bad {
            ctx.count(|c| {
                c.tally.mismatches += 1;
                c.tally.error(msg);
            });
            break End::Mismatch;
        }
        conn.wake_writer();
    };
    *conn.end.borrow_mut() = Some(end);
    conn.wake_writer();
}

/// Fresh connections after the chaos: one message of each size must come
/// back intact.
pub fn final_check(addr: SocketAddr, limit: Duration) -> io::Result<()> {
    use std::io::{Read, Write};
    for (i, len) in [1usize, 100, 4096, 65_536, MAX_MSG].into_iter().enumerate() {
        let mut s = std::net::TcpStream::connect_timeout(&addr, limit)?;
        s.set_read_timeout(Some(limit))?;
        s.set_write_timeout(Some(limit))?;
        let msg = crate::harness::rng::ByteGen::message(u64::MAX - i as u64, 1, len);
        let writer = {
            let mut w = s.try_clone()?;
            let msg = msg.clone();
            std::thread::spawn(move || w.write_all(&msg))
        };
        let mut back = vec![0u8; len];
        s.read_exact(&mut back)?;
        writer
            .join()
            .map_err(|_| io::Error::other("writer thread panicked"))??;
        if back != msg {
            return Err(crate::harness::err::invalid_data(format!(
                "a {len}-byte echo came back different"
            )));
        }
    }
    Ok(())
}
