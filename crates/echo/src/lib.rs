//! ringkit-echo: a TCP echo server on the ringkit runtime.
//!
//! Thread-per-core, one `SO_REUSEPORT` listener per thread; each connection
//! echoes what it reads until end of stream. Accept errors (`EMFILE`, ...)
//! back off and retry; `SIGTERM`/`SIGINT` drain and exit (see [`run_server`]).
//! [`EchoLimits`] shrinks resources on purpose for fault injection. With
//! [`EchoServerConfig::stats`] each thread publishes its counters
//! ([`ringkit::publish`]) for a benchmark to read.
//!
//! `ringkit echo` runs it; `ringkit compare echo` measures it against epoll
//! and the peers.

#![warn(missing_docs)]

mod conn;
mod idle;
mod state;
mod thread;

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[cfg(feature = "experiments")]
use ringkit::BatchWait;
use ringkit::{Backend, LaunchConfig};

use thread::serve_thread;

/// How the echo server receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvMode {
    /// io_uring: one multishot RECV per connection into the provided-buffer
    /// ring, and the send goes straight from that buffer (epoll: pooled reads).
    Multishot,
    /// One RECV per read into the connection's own buffer (the plain path).
    Single,
}

impl std::str::FromStr for RecvMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "multishot" => Ok(RecvMode::Multishot),
            "single" => Ok(RecvMode::Single),
            o => Err(format!("unknown recv mode {o:?} (multishot|single)")),
        }
    }
}

/// Echo server settings.
#[derive(Debug, Clone)]
pub struct EchoServerConfig {
    /// Listen address.
    pub addr: SocketAddr,
    /// Backend for every thread.
    pub backend: Backend,
    /// Runtime threads (one listener each, `SO_REUSEPORT`).
    pub threads: usize,
    /// CPUs to pin threads to.
    pub cpus: Vec<usize>,
    /// Receive path.
    pub recv: RecvMode,
    /// io_uring: registered file table slots that busy connections are
    /// promoted into ([`ringkit::Builder::fixed_files`]); 0 = plain fds.
    pub fixed_files: u32,
    /// io_uring: multishot receives may take bundles of buffers
    /// ([`ringkit::Builder::recv_bundle`]).
    pub recv_bundle: bool,
    /// Feature `experiments`. io_uring: how a batch of received buffers is
    /// sent back ([`ringkit::Builder::send_batch`]).
    #[cfg(feature = "experiments")]
    pub send_batch: ringkit::driver::SendBatch,
    /// Write runtime counters to `PATH.<thread>` at start and on request
    /// ([`ringkit::publish`]).
    pub stats: Option<PathBuf>,
    /// Resource limits (for fault injection) and shutdown timing.
    pub limits: EchoLimits,
}

/// Resource limits and graceful-shutdown timing of the echo server. The
/// defaults are what a production server wants; the knobs exist so that
/// `ringkit torture` and the fault tests can shrink a resource on purpose.
#[derive(Debug, Clone, PartialEq)]
pub struct EchoLimits {
    /// io_uring SQ entries (the CQ gets 4x): a tiny ring makes the SQ fill
    /// and the CQ overflow. `None`: the runtime default (256).
    pub entries: Option<u32>,
    /// Provided-buffer ring of the multishot receive: count (a power of two)
    /// and bytes per buffer. A tiny ring runs dry (`ENOBUFS`). `None`: the
    /// runtime default.
    pub recv_buffers: Option<(u16, u32)>,
    /// Set the soft `RLIMIT_NOFILE` to this (accept then fails with `EMFILE`
    /// once it is reached). `None`: raise it to the hard limit.
    pub nofile: Option<u64>,
    /// Feature `experiments`. io_uring: how the loop waits when it blocks
    /// (`Builder::batch_wait_policy`). Default [`BatchWait::Off`]: wake for
    /// every completion. [`BatchWait::AUTO`] waits for up to 32 completions
    /// (50 µs at most once one is ready) only while the loop is the
    /// bottleneck; it is not the default because no client measured so far
    /// gained from it (rust_echo_bench at c=1000 lost requests per second;
    /// see `ringkit`'s `driver/experiments/`).
    #[cfg(feature = "experiments")]
    pub batch_wait: BatchWait,
    /// After `SIGTERM`/`SIGINT`, a connection that stays idle this long is
    /// closed (its in-flight data has been echoed by then).
    pub drain_idle: Duration,
    /// After `SIGTERM`/`SIGINT`, connections still open after this long are
    /// closed and the server exits anyway.
    pub drain_timeout: Duration,
    /// A connection whose echo has not moved a byte for this long (a
    /// client that sends but stops reading) is closed. Progress restarts
    /// the clock, as nginx's `send_timeout`. Default 60 s; zero: no limit.
    pub send_timeout: Duration,
    /// A peer that vanished (every packet dropped, no FIN, no RST) is
    /// noticed and its connection closed within about this long, by TCP
    /// keepalive probes and `TCP_USER_TIMEOUT`
    /// ([`ringkit::net::TcpStream::set_dead_peer_timeout`]); a live idle
    /// peer answers the probes and stays. Default 300 s; zero: off.
    pub dead_peer_timeout: Duration,
    /// A connection that sends nothing for this long is closed (a live
    /// idle peer too: idle sockets must not hold the fd table). Default
    /// 60 s; zero: off.
    pub idle_timeout: Duration,
}

impl Default for EchoLimits {
    fn default() -> Self {
        EchoLimits {
            entries: None,
            recv_buffers: None,
            nofile: None,
            #[cfg(feature = "experiments")]
            batch_wait: BatchWait::Off,
            drain_idle: Duration::from_millis(1000),
            drain_timeout: Duration::from_secs(10),
            send_timeout: Duration::from_secs(60),
            dead_peer_timeout: Duration::from_secs(300),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// Run the echo server until `SIGTERM` or `SIGINT`, then shut down
/// gracefully and return `Ok`. Logs (through `tracing`) the backend of each thread once it is
/// listening, and a summary per thread at the end.
///
/// # Shutdown
/// On the first `SIGTERM`/`SIGINT` every thread: closes its listener (new
/// connections are refused from then on); wakes its connections, which keep
/// echoing whatever arrives and close once idle for
/// [`EchoLimits::drain_idle`] (or at end of stream), so a message in flight
/// is echoed whole; waits until all are closed or
/// [`EchoLimits::drain_timeout`] has passed; and returns.
///
/// `SIGPIPE` is ignored (sends use `MSG_NOSIGNAL` anyway; this covers any
/// other write to a closed socket).
pub fn run_server(cfg: EchoServerConfig) -> io::Result<()> {
    ignore_sigpipe();
    let mut builder = ringkit::Builder::new().backend(cfg.backend);
    if let Some(n) = cfg.limits.entries {
        builder = builder.entries(n);
    }
    if let Some((count, size)) = cfg.limits.recv_buffers {
        builder = builder.recv_buffers(count, size);
    }
    builder = builder
        .fixed_files(cfg.fixed_files)
        .recv_bundle(cfg.recv_bundle);
    #[cfg(feature = "experiments")]
    {
        builder = builder
            .batch_wait_policy(cfg.limits.batch_wait)
            .send_batch(cfg.send_batch);
    }
    let launch = LaunchConfig::new(cfg.threads)
        .cpus(cfg.cpus.clone())
        .builder(builder);
    let addr = cfg.addr;
    ringkit::serve_threads(launch, addr, move |i, listener| {
        let cfg = cfg.clone();
        async move {
            // `serve_threads` raised the limit to the hard one; a limit
            // asked for replaces it (the same value from every thread).
            if let Some(n) = cfg.limits.nofile {
                set_nofile_limit(n)?;
            }
            serve_thread(i, cfg, listener).await
        }
    })
    .map_err(|e| io::Error::new(e.kind(), format!("ringkit echo: {e}")))?;
    tracing::info!(
        "ringkit echo: shut down cleanly (signal {})",
        ringkit::signal::requested_by().unwrap_or(0)
    );
    Ok(())
}

/// Ignore `SIGPIPE` for the whole process.
fn ignore_sigpipe() {
    // SAFETY: setting a signal's disposition to SIG_IGN has no preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
}

/// Set the soft `RLIMIT_NOFILE` to `n` (at most the hard limit).
fn set_nofile_limit(n: u64) -> io::Result<()> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into a valid rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(io::Error::last_os_error());
    }
    r.rlim_cur = n.min(r.rlim_max);
    // SAFETY: setrlimit reads a valid rlimit.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
