//! Contenders' server processes: what to run ([`Contender`]), started
//! pinned and stopped by pid ([`Server`], on the one launcher,
//! [`Process`]), on a free loopback port.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use super::process::{Launch, Output, Process};

/// Which family a contender belongs to (for "ratio to the best epoll").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum Family {
    /// io_uring based.
    Uring,
    /// epoll based.
    Epoll,
}

/// One server to measure.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Contender {
    /// Short name.
    pub name: String,
    /// io_uring or epoll.
    pub family: Family,
    /// Command line; `{addr}` and `{stats}` are substituted.
    pub cmd: Vec<String>,
    /// Whether it writes ringkit's counters (`--stats`).
    pub ringkit: bool,
}

pub use super::child::free_addr;

/// A contender's server process ([`Process`]), pinned, its output in a log
/// file; stopped by its pid (`SIGTERM`, then `SIGKILL` after 2 s) when
/// dropped.
#[derive(Debug)]
pub struct Server {
    process: Process,
}

impl Server {
    /// Start `c.cmd` (with `{addr}` and `{stats}` substituted) pinned to
    /// `cpu`, output to `log`, and wait until `addr` accepts connections.
    pub fn start(
        c: &Contender,
        addr: SocketAddr,
        stats: &Path,
        cpu: usize,
        log: &Path,
    ) -> io::Result<Server> {
        let cmd = substitute(&c.cmd, addr, stats);
        let launch = Launch {
            cpu: Some(cpu),
            output: Output::Log(log.to_path_buf()),
            ready_within: Duration::from_secs(10),
            sample: false,
            ..Launch::new(cmd, addr)
        };
        let process = Process::start(&launch)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", c.name)))?;
        Ok(Server { process })
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }
}

/// `cmd` with its `{addr}` and `{stats}` placeholders filled in.
pub fn substitute(cmd: &[String], addr: SocketAddr, stats: &Path) -> Vec<String> {
    cmd.iter()
        .map(|a| {
            a.replace("{addr}", &addr.to_string())
                .replace("{stats}", &stats.display().to_string())
        })
        .collect()
}

impl Drop for Server {
    fn drop(&mut self) {
        self.process.stop(libc::SIGTERM, Duration::from_secs(2));
    }
}

/// The command line of a ringkit server (`ringkit echo`, `ringkit http`,
/// `ringkit serve DIR`): the one place that knows how to launch one. Every
/// study, the torture and the idle study build theirs here.
///
/// `--addr` defaults to the `{addr}` placeholder that [`Server::start`]
/// substitutes; [`RingkitServer::stats`] adds `--stats {stats}`.
#[derive(Debug, Clone)]
pub struct RingkitServer {
    /// The binary and its subcommand (and directory, for `serve`).
    head: Vec<String>,
    addr: String,
    /// Every other `--flag value`.
    flags: Vec<String>,
}

impl RingkitServer {
    fn new(bin: &Path, sub: &[&str]) -> RingkitServer {
        let mut head = vec![bin.display().to_string()];
        head.extend(sub.iter().map(|s| s.to_string()));
        RingkitServer {
            head,
            addr: "{addr}".into(),
            flags: Vec::new(),
        }
    }

    /// `ringkit echo`.
    pub fn echo(bin: &Path) -> RingkitServer {
        RingkitServer::new(bin, &["echo"])
    }

    /// `ringkit http` (the `return 200` benchmark server).
    pub fn http(bin: &Path) -> RingkitServer {
        RingkitServer::new(bin, &["http"])
    }

    /// `ringkit axum` (the axum hello app on ringkit-hyper).
    pub fn axum(bin: &Path) -> RingkitServer {
        RingkitServer::new(bin, &["axum"])
    }

    /// `ringkit serve DIR`.
    pub fn serve(bin: &Path, dir: &Path) -> RingkitServer {
        let dir = dir.display().to_string();
        RingkitServer::new(bin, &["serve", &dir])
    }

    /// Listen on `addr` (default: the `{addr}` placeholder).
    pub fn addr(mut self, addr: impl ToString) -> Self {
        self.addr = addr.to_string();
        self
    }

    /// `--backend auto|uring|epoll`.
    pub fn backend(self, backend: impl ToString) -> Self {
        self.flag("--backend", backend)
    }

    /// `--threads N`.
    pub fn threads(self, n: usize) -> Self {
        self.flag("--threads", n)
    }

    /// `--stats {stats}`: publish the runtime's counters for the study.
    pub fn stats(self) -> Self {
        self.flag("--stats", "{stats}")
    }

    /// Any other `--flag value`.
    pub fn flag(mut self, name: &str, value: impl ToString) -> Self {
        self.flags.push(name.to_string());
        self.flags.push(value.to_string());
        self
    }

    /// The whole command line.
    pub fn cmd(&self) -> Vec<String> {
        let addr = ["--addr".to_string(), self.addr.clone()];
        [&self.head[..], &addr, &self.flags].concat()
    }

    /// A contender that runs this server; `ringkit` marks it as publishing
    /// the runtime's counters (it must have [`RingkitServer::stats`]).
    pub fn contender(&self, name: &str, family: Family) -> Contender {
        Contender {
            name: name.into(),
            family,
            ringkit: self.flags.iter().any(|a| a == "--stats"),
            cmd: self.cmd(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ringkit_server_command_lines() {
        let bin = Path::new("/bin/ringkit");
        let echo = RingkitServer::echo(bin)
            .backend("uring")
            .threads(1)
            .stats()
            .cmd();
        assert_eq!(
            echo.join(" "),
            "/bin/ringkit echo --addr {addr} --backend uring --threads 1 --stats {stats}"
        );
        let serve = RingkitServer::serve(bin, Path::new("/srv"))
            .addr("127.0.0.1:80")
            .backend("epoll")
            .cmd();
        assert_eq!(
            serve.join(" "),
            "/bin/ringkit serve /srv --addr 127.0.0.1:80 --backend epoll"
        );
        let c = RingkitServer::http(bin)
            .stats()
            .contender("x", Family::Uring);
        assert!(c.ringkit);
        assert!(
            !RingkitServer::http(bin)
                .contender("y", Family::Epoll)
                .ringkit
        );
    }
}
