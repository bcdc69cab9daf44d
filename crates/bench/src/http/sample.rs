//! One sample of the http study: start a server pinned, drive it with wrk
//! or the built-in generator, sample its CPU time and counters, stop it by
//! its pid; and the separate run that counts peers' syscalls.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::load::{self, HttpLoadConfig, HttpLoadResult};
use super::nginx::{nginx_conf, Site};
use super::results::{HttpSample, LoadTool, Workload};
use super::wrk;
use crate::harness::phase::Phase;
use crate::harness::server::{free_addr, Contender, Server};
use crate::harness::study::StudyOpts;
use crate::harness::syscalls::{SyscallTool, WindowCounter};
use crate::harness::sysinfo::CpuTimes;

/// Settings of one run of the study.
pub(crate) struct Run<'a> {
    pub(crate) opts: &'a StudyOpts,
    pub(crate) dir: PathBuf,
    pub(crate) nginx_dir: PathBuf,
    pub(crate) tool: LoadTool,
    pub(crate) secs: f64,
    /// What nginx serves.
    pub(crate) site: Site,
    /// `http` or `https`.
    pub(crate) scheme: &'static str,
}

impl Run<'_> {
    pub(super) fn wrk_secs(&self) -> u64 {
        self.secs.ceil().max(1.0) as u64
    }

    /// wrk's URL for `w` (wrk asks for one path only).
    fn wrk_url(&self, addr: SocketAddr, w: &Workload) -> io::Result<String> {
        if w.mix.is_some() {
            return Err(crate::harness::err::unsupported(
                "wrk cannot ask for a random mix of paths: use the built-in generator",
            ));
        }
        Ok(format!("{}://{addr}{}", self.scheme, w.path))
    }

    /// Start `c` on a fresh port (writing nginx's config first).
    pub(crate) fn start(
        &self,
        c: &Contender,
        tag: &str,
    ) -> io::Result<(Server, SocketAddr, PathBuf)> {
        let addr = free_addr()?;
        if c.name == "nginx" {
            std::fs::create_dir_all(&self.nginx_dir)?;
            std::fs::write(
                self.nginx_dir.join("nginx.conf"),
                nginx_conf(&self.nginx_dir, &addr.port().to_string(), &self.site),
            )?;
        }
        let stats = self.dir.join("tmp").join(format!("{}-{tag}", c.name));
        let log = self.dir.join("logs").join(format!("{}-{tag}.log", c.name));
        let server = Server::start(c, addr, &stats, self.opts.server_cpu, &log)?;
        // Let the server write its first counters and forget the readiness probe.
        std::thread::sleep(Duration::from_millis(120));
        Ok((server, addr, stats))
    }

    fn builtin(
        &self,
        addr: SocketAddr,
        w: &Workload,
        secs: f64,
        hook: &mut (dyn FnMut(Phase) + Send),
    ) -> io::Result<HttpLoadResult> {
        let mut cfg = HttpLoadConfig::new(addr, w.conns, Duration::from_secs_f64(secs));
        cfg.close = w.close;
        cfg.path.clone_from(&w.path);
        cfg.expect_body_len = w.body_len;
        cfg.expect_crc32c = w.crc32c;
        cfg.mix.clone_from(&w.mix);
        cfg.pipeline = w.pipeline;
        let cpu = self.opts.client_cpu;
        std::thread::scope(|s| {
            s.spawn(|| {
                ringkit::pin_to_cpu(cpu)?;
                load::run_load(&cfg, hook)
            })
            .join()
            .map_err(|_| io::Error::other("load generator panicked"))?
        })
    }

    pub(super) fn sample(&self, c: &Contender, w: &Workload, round: usize) -> HttpSample {
        let mut s = HttpSample {
            contender: c.name.clone(),
            workload: w.name.clone(),
            round,
            time_wait_at_start: time_wait(),
            ..HttpSample::default()
        };
        let tag = w.tag(&round.to_string());
        let mut go = || -> io::Result<()> {
            let (server, addr, stats_path) = self.start(c, &tag)?;
            let pid = server.pid();
            if w.mix.is_none() && self.scheme == "http" {
                s.resp_bytes = Some(probe_bytes(addr, &w.path)?);
            }
            let (cpu, st) = match self.tool {
                LoadTool::Wrk => {
                    let cmd =
                        wrk::command(&self.wrk_url(addr, w)?, w.conns, self.wrk_secs(), w.close);
                    let stats = c.ringkit.then_some(stats_path.as_path());
                    let (cpu0, st0) = CpuTimes::edge(pid, stats)?;
                    let (r, _) = wrk::run(&cmd, self.opts.client_cpu)?;
                    std::thread::sleep(Duration::from_millis(120));
                    let (cpu1, st1) = CpuTimes::edge(pid, stats)?;
                    let (cpu, st) = (cpu1.since(&cpu0), st1.since(&st0));
                    s.requests = r.requests;
                    s.rps = r.rps;
                    s.p50_us = r.p50_us;
                    s.p99_us = r.p99_us;
                    s.errors = r.errors();
                    s.wrk = Some(r);
                    (cpu, st)
                }
                LoadTool::Builtin => {
                    let stats = c.ringkit.then_some(stats_path.as_path());
                    let mut e0 = None;
                    let mut e1 = None;
                    let r = self.builtin(addr, w, self.secs, &mut |p| match p {
                        Phase::WindowStart => e0 = Some(CpuTimes::edge(pid, stats)),
                        Phase::WindowEnd => e1 = Some(CpuTimes::edge(pid, stats)),
                    })?;
                    let missing = || io::Error::other("the load run never reached its window");
                    let (c0, st0) = e0.ok_or_else(missing)??;
                    let (c1, st1) = e1.ok_or_else(missing)??;
                    s.requests = r.responses;
                    s.rps = r.rps();
                    s.p50_us = r.p50_us;
                    s.p99_us = r.p99_us;
                    s.errors = r.errors();
                    s.builtin = Some(r);
                    (c1.since(&c0), st1.since(&st0))
                }
            };
            drop(server);
            s.cpu_user_s = cpu.user;
            s.cpu_sys_s = cpu.system;
            if c.ringkit {
                s.stats = Some(st);
            }
            Ok(())
        };
        if let Err(e) = go() {
            s.error = Some(e.to_string());
        }
        s
    }

    /// Syscalls per request of a peer, counted by `tool` over a 2 s load
    /// on a separate run whose throughput is not used.
    pub(super) fn syscalls(
        &self,
        c: &Contender,
        w: &Workload,
        tool: SyscallTool,
    ) -> io::Result<f64> {
        let tag = w.tag(tool.name());
        let (server, addr, _) = self.start(c, &tag)?;
        let out = self.dir.join("logs").join(format!("{}-{tag}.txt", c.name));
        let requests = match self.tool {
            LoadTool::Wrk => {
                let child = tool.start(server.pid(), &out)?;
                let cmd = wrk::command(&self.wrk_url(addr, w)?, w.conns, 2, w.close);
                let r = wrk::run(&cmd, self.opts.client_cpu);
                SyscallTool::stop(child);
                r?.0.requests
            }
            LoadTool::Builtin => {
                let mut counter = WindowCounter::new(tool, server.pid(), &out);
                let r = self.builtin(addr, w, 2.0, &mut |p| counter.phase(p));
                counter.finish()?;
                r?.responses
            }
        };
        drop(server);
        Ok(tool.count(&out)? / requests.max(1) as f64)
    }
}

/// TCP sockets in TIME_WAIT now (`tw` in /proc/net/sockstat).
fn time_wait() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/net/sockstat").ok()?;
    let line = s.lines().find(|l| l.starts_with("TCP:"))?;
    let f: Vec<&str> = line.split_whitespace().collect();
    let i = f.iter().position(|x| *x == "tw")?;
    f.get(i + 1)?.parse().ok()
}

/// The bytes of one response to `GET path` (keep-alive), head and body:
/// what a contender sends per request, for the report.
fn probe_bytes(addr: SocketAddr, path: &str) -> io::Result<u64> {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(addr)?;
    c.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(c, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        if let Ok(crate::http::response::Parse::Complete(r)) =
            crate::http::response::parse_response(&buf)
        {
            return Ok(r.len as u64);
        }
        let n = c.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::other("probe: connection closed mid-response"));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}
