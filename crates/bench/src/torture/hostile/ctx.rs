//! What an attack is given ([`Ctx`]: the server, its address, timeouts and
//! cap, the TLS client) and what it reports ([`Outcome`]).

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use super::held::Held;
use super::target::{Target, Timeouts};

/// What an attack did and saw (before the budgets are applied).
#[derive(Debug, Default)]
pub struct Outcome {
    /// Hostile connections made.
    pub hostile: usize,
    /// Seconds until the server had closed every one (`None`: not all, or
    /// not asked).
    pub all_closed_after: Option<f64>,
    /// How many the server closed.
    pub closed: usize,
    /// The server must close them all within this (seconds).
    pub close_budget: Option<f64>,
    /// Burst then idle: KiB per connection, fresh and after the bursts.
    pub fresh_kib: Option<f64>,
    /// See `fresh_kib`.
    pub after_burst_kib: Option<f64>,
    /// What the reader should know.
    pub notes: Vec<String>,
    /// What went wrong that the attack itself saw (each a failure).
    pub broken: Vec<String>,
}

/// What an attack needs.
pub struct Ctx<'a> {
    /// The server.
    pub target: Target,
    /// Its address.
    pub addr: SocketAddr,
    /// Its stated timeouts.
    pub timeouts: Timeouts,
    /// Its connection cap (when it has one).
    pub cap: usize,
    /// Short form: fewer connections.
    pub short: bool,
    /// The TLS client.
    pub tls: &'a Arc<rustls::ClientConfig>,
    /// The server's RSS now, KiB.
    pub rss: &'a dyn Fn() -> u64,
}

impl std::fmt::Debug for Ctx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("target", &self.target)
            .field("addr", &self.addr)
            .field("timeouts", &self.timeouts)
            .field("cap", &self.cap)
            .field("short", &self.short)
            .finish_non_exhaustive()
    }
}

/// Slack on every close budget: the server's timer, and this side's 50 ms
/// checks.
pub(super) const SLACK: f64 = 2.0;
/// How long connections a server rightly keeps (echo's live idle peers)
/// are held before this side closes them.
pub(super) const HOLD: Duration = Duration::from_secs(3);

impl Ctx<'_> {
    pub(super) fn n(&self, full: usize, short: usize) -> usize {
        if self.short {
            short
        } else {
            full
        }
    }

    pub(super) fn idle_budget(&self) -> Option<f64> {
        self.timeouts.idle.map(|d| d.as_secs_f64() + SLACK)
    }

    /// A plain TCP connection (no handshake), with 2 s limits.
    pub(super) fn tcp(&self) -> io::Result<TcpStream> {
        let s = TcpStream::connect_timeout(&self.addr, Duration::from_secs(2))?;
        s.set_read_timeout(Some(Duration::from_secs(2)))?;
        s.set_write_timeout(Some(Duration::from_secs(2)))?;
        Ok(s)
    }

    /// Hold `held` until the server closes them all within `budget`, or,
    /// without one, for [`HOLD`]; fill in `o`.
    pub(super) fn await_close(&self, held: &mut Held, budget: Option<f64>, o: &mut Outcome) {
        o.hostile = held.len();
        o.close_budget = budget;
        match budget {
            Some(b) => o.all_closed_after = held.wait_closed(Duration::from_secs_f64(b + 1.0)),
            None => {
                std::thread::sleep(HOLD);
                held.check();
                o.notes.push(format!(
                    "no idle timeout: live idle peers are kept; released after {} s",
                    HOLD.as_secs()
                ));
            }
        }
        o.closed = held.closed();
    }
}
