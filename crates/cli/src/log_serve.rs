//! `ringkit log serve`: a log over TCP that no client can take down or
//! lock out. Accept errors (a reset before accept, `EMFILE`) are retried
//! with backoff (`accept_until`), the fd limit is raised, connections are
//! capped, a connection that makes no progress is closed (idle, a record
//! begun and not finished, LSNs not read), and the bytes held for records
//! not yet whole are bounded across all connections. SIGINT/SIGTERM stop
//! accepting and wait for the appends already made.

use std::cell::Cell;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use clap::Args;
use ringkit::net::TcpStream;
use ringkit::LaunchConfig;
use ringkit_log::Log;

use crate::log_opts::LogOpts;

/// `ringkit log serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub log: LogOpts,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7400")]
    pub addr: SocketAddr,
    /// Connections at once; one more is closed as soon as it is accepted.
    #[arg(long, default_value_t = 10_000)]
    pub max_connections: usize,
    /// Seconds a connection may send nothing between records.
    #[arg(long, default_value_t = 60)]
    pub idle_timeout_secs: u64,
    /// Seconds a record may take to arrive, counted from its first byte
    /// (and a write of LSNs may wait without moving a byte: a client that
    /// does not read them).
    #[arg(long, default_value_t = 10)]
    pub frame_timeout_secs: u64,
    /// MiB held at most, across all connections, for bytes received and
    /// not yet answered (records not yet whole, records waiting for the
    /// appends before them); a connection that would need more is closed.
    #[arg(long, default_value_t = 32)]
    pub max_partial_mib: usize,
}

/// What every connection shares.
struct Limits {
    idle: Duration,
    frame: Duration,
    /// Bytes that may still be held for partial records.
    partial_left: Cell<usize>,
    open: Cell<usize>,
    max_open: usize,
}

pub fn serve(a: ServeArgs) -> io::Result<()> {
    let cfg = LaunchConfig::new(1).backend(a.log.backend);
    let dir = a.log.dir.clone();
    let opts = a.log.options();
    let (max_open, idle, frame, partial) = (
        a.max_connections.max(1),
        Duration::from_secs(a.idle_timeout_secs.max(1)),
        Duration::from_secs(a.frame_timeout_secs.max(1)),
        a.max_partial_mib.max(1) << 20,
    );
    ringkit::serve_threads(cfg, a.addr, move |_, l| {
        let (dir, opts) = (dir.clone(), opts.clone());
        async move {
            let log = Log::open(&dir, opts).await?;
            eprintln!(
                "ringkit log: serving {} on {} ({}), next LSN {}",
                dir.display(),
                l.local_addr()?,
                ringkit::backend_report().expect("inside a runtime"),
                log.next_lsn()
            );
            let limits = Rc::new(Limits {
                idle,
                frame,
                partial_left: Cell::new(partial),
                open: Cell::new(0),
                max_open,
            });
            let mut stop = std::pin::pin!(ringkit::signal::shutdown_requested());
            while let Some(s) = l.accept_until(stop.as_mut()).await {
                if limits.open.get() >= limits.max_open {
                    drop(s); // over the cap: closed at once
                    continue;
                }
                limits.open.set(limits.open.get() + 1);
                let (log, limits) = (log.clone(), limits.clone());
                ringkit::spawn(async move {
                    let peer = s.peer_addr().ok();
                    if let Err(e) = serve_conn(&log, &s, &limits).await {
                        if e.kind() != io::ErrorKind::TimedOut {
                            eprintln!("ringkit log: {peer:?}: {e}");
                        }
                    }
                    limits.open.set(limits.open.get() - 1);
                });
            }
            // Stopping: what was appended is made durable first.
            log.close().await;
            Ok(())
        }
    })
}

/// Bytes of a partial record held against the shared budget; given back
/// when dropped.
struct Held<'a> {
    limits: &'a Limits,
    n: usize,
}

impl Held<'_> {
    /// Hold `want` bytes in all: more from the budget, or `false`.
    fn grow_to(&mut self, want: usize) -> bool {
        if want <= self.n {
            return true;
        }
        let more = want - self.n;
        let left = self.limits.partial_left.get();
        if more > left {
            return false;
        }
        self.limits.partial_left.set(left - more);
        self.n = want;
        true
    }

    fn release(&mut self) {
        self.limits
            .partial_left
            .set(self.limits.partial_left.get() + self.n);
        self.n = 0;
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.release();
    }
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, what.to_string())
}

/// Most appends one connection has in flight: records past them wait in
/// its input (charged to the budget) until their LSNs are written.
const MAX_IN_FLIGHT: usize = 256;
/// Read sizes: small while idle (what an idle connection holds), large
/// while records flow.
const IDLE_READ: usize = 4 << 10;
const BUSY_READ: usize = 64 << 10;

/// Read framed records as they come; answer each with its LSN, in order.
async fn serve_conn(log: &Log, s: &TcpStream, limits: &Limits) -> io::Result<()> {
    let max = log.max_record();
    s.set_write_timeout(Some(limits.frame));
    let mut inbuf: Vec<u8> = Vec::new();
    let mut held = Held { limits, n: 0 };
    // When the bytes of the record now arriving began (the frame limit
    // runs from there, not from the last byte: a trickle is cut off).
    let mut started: Option<std::time::Instant> = None;
    loop {
        let limit = match started {
            None => limits.idle,
            Some(t) => limits.frame.saturating_sub(t.elapsed()),
        };
        let size = if inbuf.is_empty() {
            IDLE_READ
        } else {
            BUSY_READ
        };
        let read = ringkit::time::timeout(limit, s.read(Vec::with_capacity(size))).await;
        let Ok((n, chunk)) = read else {
            return Err(timed_out("no progress: closed"));
        };
        if n? == 0 {
            return Ok(());
        }
        if inbuf.is_empty() {
            started = Some(std::time::Instant::now());
        }
        inbuf.extend_from_slice(&chunk);
        // Every byte not yet answered is held against the budget.
        if !held.grow_to(inbuf.len()) {
            return Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                "the server holds too many unanswered bytes (--max-partial-mib): closed",
            ));
        }
        // Whole records, at most MAX_IN_FLIGHT at a time (LSNs in arrival
        // order), each group answered before the next is queued.
        loop {
            let mut commits = Vec::new();
            let mut at = 0;
            while inbuf.len() - at >= 4 && commits.len() < MAX_IN_FLIGHT {
                let len =
                    u32::from_le_bytes(inbuf[at..at + 4].try_into().expect("4 bytes")) as usize;
                if len > max {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("record of {len} bytes: at most {max}"),
                    ));
                }
                if inbuf.len() - at - 4 < len {
                    break;
                }
                commits.push(log.append(&inbuf[at + 4..at + 4 + len]));
                at += 4 + len;
            }
            if commits.is_empty() {
                break;
            }
            inbuf.drain(..at);
            // A new record starts where this group ended.
            started = (!inbuf.is_empty()).then(std::time::Instant::now);
            let mut out = Vec::with_capacity(commits.len() * 8);
            for c in commits {
                out.extend_from_slice(&c.await?.to_le_bytes());
            }
            s.write_all(out).await.0?;
        }
        held.release();
        if !held.grow_to(inbuf.len()) {
            return Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                "the server holds too many unanswered bytes (--max-partial-mib): closed",
            ));
        }
        if inbuf.is_empty() && inbuf.capacity() > BUSY_READ {
            inbuf = Vec::new();
        }
    }
}
