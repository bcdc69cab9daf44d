//! What a torture run saw, and how it prints.

use serde::Serialize;

use super::echo::EchoCounts;
use super::http::HttpCounts;
use crate::harness::process::ProcSample;

/// Server figures at one moment.
#[derive(Debug, Clone, Copy, Default, Serialize, serde::Deserialize)]
pub struct ServerFigures {
    /// RSS, KiB.
    pub rss_kib: u64,
    /// Open fds.
    pub fds: u64,
}

impl From<ProcSample> for ServerFigures {
    fn from(s: ProcSample) -> Self {
        ServerFigures {
            rss_kib: s.rss_kib,
            fds: s.fds,
        }
    }
}

/// What a torture run saw.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct TortureReport {
    /// `echo` or `http`.
    pub mode: String,
    /// The server's command line.
    pub server_cmd: String,
    /// The server's own description of its backend (first thread).
    pub server_backend: String,
    /// Seed.
    pub seed: u64,
    /// Chaos seconds actually run.
    pub secs: f64,
    /// Concurrent connections.
    pub conns: usize,
    /// CPUs: server, clients.
    pub cpus: (Option<usize>, Option<usize>),
    /// What the echo clients did and saw.
    pub echo: Option<EchoCounts>,
    /// What the HTTP clients did and saw.
    pub http: Option<HttpCounts>,
    /// What the TLS clients did and saw (`--tls`).
    pub tls: Option<super::tls::TlsCounts>,
    /// Server at start (before any load).
    pub start: ServerFigures,
    /// Highest RSS and fd count seen while running.
    pub peak: ServerFigures,
    /// Server at the end (all client connections closed, settled); `None`
    /// in graceful mode, where the server has exited by then.
    pub end: Option<ServerFigures>,
    /// `accept` errors the server reported (expected only with a low nofile).
    pub accept_errors: u64,
    /// Other error lines from the server.
    pub server_errors: Vec<String>,
    /// The server's runtime counters at exit, per thread (echo server).
    pub server_counters: Vec<String>,
    /// Graceful shutdown: what a new connection got after the listener closed.
    pub refused_after_sigterm: Option<String>,
    /// Seconds from `SIGTERM` to exit.
    pub shutdown_secs: Option<f64>,
    /// The server's exit code (`None`: killed by a signal or did not exit).
    pub exit_code: Option<i32>,
    /// Network faults of the run (`--faults`), and what they did.
    pub faults: Option<FaultFigures>,
    /// Everything that makes this run a failure.
    pub failures: Vec<String>,
}

/// What a run with network faults saw.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct FaultFigures {
    /// The profile's name.
    pub profile: String,
    /// How the faults were made.
    pub how: String,
    /// Connections the fault proxy relayed (proxy profiles).
    pub relayed: u64,
    /// Connections the proxy reset on purpose.
    pub injected_resets: u64,
    /// Client losses explained by those resets (not failures).
    pub losses_explained: u64,
    /// The silent-peer phase (`silent`).
    pub silent: Option<super::silent::SilentFigures>,
}

impl TortureReport {
    /// Whether the run passed.
    pub fn ok(&self) -> bool {
        self.failures.is_empty()
    }
}

pub(crate) fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

impl std::fmt::Display for TortureReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "ringkit torture {}: {}",
            self.mode,
            if self.ok() { "PASSED" } else { "FAILED" }
        )?;
        writeln!(f, "  server:           {}", self.server_cmd)?;
        writeln!(f, "  backend:          {}", self.server_backend)?;
        let cpu = |c: Option<usize>| c.map_or("unpinned".to_string(), |c| format!("CPU {c}"));
        writeln!(
            f,
            "  run:              {:.1} s, {} connections, seed {}, server {}, clients {}",
            self.secs,
            self.conns,
            self.seed,
            cpu(self.cpus.0),
            cpu(self.cpus.1)
        )?;
        if let Some(x) = &self.faults {
            writeln!(f, "  faults:           {} ({})", x.profile, x.how)?;
            if x.relayed > 0 {
                writeln!(
                    f,
                    "  fault proxy:      {} connections relayed, {} reset on purpose ({} client losses explained by them)",
                    x.relayed, x.injected_resets, x.losses_explained
                )?;
            }
            if let Some(s) = &x.silent {
                writeln!(
                    f,
                    "  silent peers:     {} connections went silent (server fds {} -> {}); freed after {}",
                    s.conns,
                    s.fds_before,
                    s.fds_with_silent,
                    s.freed_after_secs
                        .map_or("never".to_string(), |t| format!("{t:.1} s"))
                )?;
            }
        }
        if let Some(c) = &self.echo {
            writeln!(
                f,
                "  connections:      {} opened in {} sessions ({} idle, {} connect-and-close, {} half-closed, {} vanished mid-message, {} reset during send)",
                c.tally.connects, c.tally.sessions, c.idle_sessions, c.flash_sessions, c.half_closes, c.vanished_mid_message, c.reset_during_send
            )?;
            writeln!(
                f,
                "  messages:         {} sent, {} verified ({} pipelined bursts, {} split writes)",
                c.messages_sent, c.messages_verified, c.tally.bursts, c.split_writes
            )?;
            c.tally.write_verified(f)?;
            if self.refused_after_sigterm.is_some() {
                writeln!(
                    f,
                    "  in flight:        {} connections were owed echo bytes at SIGTERM; {} got all of them back (the rest: clients that chose to vanish)",
                    c.owed_at_stop, c.completed_across_stop
                )?;
            }
            c.tally.write_errors(f)?;
        }
        if let Some(c) = &self.tls {
            writeln!(
                f,
                "  TLS:              {} handshakes, {} requests, {} responses verified ({:.1} MiB of body bytes)",
                c.handshakes,
                c.requests,
                c.verified,
                (c.bytes_verified / 1024) as f64 / 1024.0
            )?;
            writeln!(
                f,
                "  mismatches:       {}   losses: {}   stalls: {}   connect errors: {}",
                c.mismatches, c.losses, c.stalls, c.connect_errors
            )?;
            if c.timed_out > 0 {
                writeln!(
                    f,
                    "  timed out:        {} requests answered 408 after the server's request timeout (the faulty link held them back)",
                    c.timed_out
                )?;
            }
            for e in &c.errors {
                writeln!(f, "    client error: {e}")?;
            }
        }
        if let Some(c) = &self.http {
            writeln!(
                f,
                "  connections:      {} opened in {} sessions ({} closed by Connection: close, {} vanished mid-request)",
                c.tally.connects, c.tally.sessions, c.closes, c.vanished
            )?;
            writeln!(
                f,
                "  requests:         {} sent, {} responses verified ({} pipelined bursts, {} HEAD, {} 404, {} POST by length, {} POST chunked)",
                c.requests, c.responses_verified, c.tally.bursts, c.heads, c.not_found, c.posts_length, c.posts_chunked
            )?;
            c.tally.write_verified(f)?;
            if c.server_closes + c.closed_between_requests_at_shutdown > 0 {
                writeln!(
                    f,
                    "  server closes:    {} responses said Connection: close unasked, {} connections closed between responses during shutdown; {} pipelined requests left unanswered (not started by the server; retryable)",
                    c.server_closes, c.closed_between_requests_at_shutdown, c.unanswered_after_close
                )?;
            }
            if c.timed_out > 0 {
                writeln!(
                    f,
                    "  timed out:        {} requests answered 408 after the server's request timeout (the faulty link held them back)",
                    c.timed_out
                )?;
            }
            c.tally.write_errors(f)?;
        }
        writeln!(
            f,
            "  server errors:    {} ({} accept errors{})",
            self.server_errors.len(),
            self.accept_errors,
            if self.accept_errors > 0 {
                ", expected only with a low --nofile"
            } else {
                ""
            }
        )?;
        for e in self.server_errors.iter().take(10) {
            writeln!(f, "    server: {e}")?;
        }
        let end = self.end.map(|e| (mib(e.rss_kib), e.fds.to_string()));
        writeln!(
            f,
            "  server RSS:       start {}, peak {}, end {}",
            mib(self.start.rss_kib),
            mib(self.peak.rss_kib),
            end.as_ref().map_or("(exited)", |e| e.0.as_str())
        )?;
        writeln!(
            f,
            "  server open fds:  start {}, peak {}, end {}",
            self.start.fds,
            self.peak.fds,
            end.as_ref().map_or("(exited)", |e| e.1.as_str())
        )?;
        for c in &self.server_counters {
            writeln!(f, "  server counters:  {c}")?;
        }
        if let Some(r) = &self.refused_after_sigterm {
            writeln!(f, "  after SIGTERM:    new connection: {r}")?;
        }
        if let Some(s) = self.shutdown_secs {
            writeln!(f, "  shutdown:         {s:.2} s from SIGTERM to exit")?;
        }
        writeln!(
            f,
            "  exit code:        {}",
            self.exit_code
                .map_or("none (killed or hung)".into(), |c| c.to_string())
        )?;
        for x in &self.failures {
            writeln!(f, "  FAILURE: {x}")?;
        }
        Ok(())
    }
}
