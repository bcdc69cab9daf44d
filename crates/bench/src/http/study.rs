//! `ringkit compare http`: nginx, ringkit (io_uring and epoll) and hyper
//! answering `GET /` with `200` and an empty body, side by side.
//!
//! For every workload and round, each contender's server is started as its
//! own process pinned to the server CPU and stopped by its pid; contenders
//! are interleaved and rotated every round. The load is wrk (`-t1`, pinned to
//! the client CPU) when installed, the built-in generator otherwise
//! (`RINGKIT_HTTP_LOAD=builtin|wrk` overrides).
//!
//! Server CPU per request: with wrk, the server's user+system CPU time from
//! /proc is sampled just before wrk starts and 120 ms after it exits (the
//! server is idle at both ends), and divided by wrk's total request count;
//! wrk's connects and warm-up are inside that span. With the built-in
//! generator, CPU is sampled at the start and end of the measured window.
//! ringkit servers' syscalls come from their `--stats` counters over the same
//! span; nginx's and hyper's from `perf stat -e raw_syscalls:sys_enter` (or
//! `strace -c -f` without perf) on a separate run
//! whose throughput is not used.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use super::nginx::{nginx_conf, nginx_version, Site, NGINX};
use super::report;
use super::results::{summarize, HttpResults, LoadTool, Workload};
use super::sample::Run;
use super::wrk;
use crate::harness::latency::schedule;
use crate::harness::server::{Contender, Family, RingkitServer};
use crate::harness::study::{Section, StudyOpts};
use crate::harness::summary::ServerSample;
use crate::harness::sysinfo::SystemInfo;

/// Whether the `ringkit-peer` binary knows the server `name` (one built
/// before it existed prints a usage line without it).
pub(crate) fn peer_has(peer: &Path, name: &str) -> Result<(), String> {
    let o = Command::new(peer)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", peer.display()))?;
    if String::from_utf8_lossy(&o.stderr).contains(name) {
        Ok(())
    } else {
        Err(format!(
            "{} predates {name}: rebuild it (cargo build --release -p ringkit-peers)",
            peer.display()
        ))
    }
}

/// nginx as a contender, its files in `nginx_dir`; or why it cannot run.
pub(crate) fn nginx_contender(nginx_dir: &Path) -> Result<Contender, (String, String)> {
    if !Path::new(NGINX).exists() {
        return Err((
            "nginx".into(),
            format!("{NGINX} not found (apt-get install -y nginx)"),
        ));
    }
    let d = nginx_dir.display().to_string();
    Ok(Contender {
        name: "nginx".into(),
        family: Family::Epoll,
        cmd: vec![
            NGINX.into(),
            "-p".into(),
            format!("{d}/"),
            "-e".into(),
            format!("{d}/error.log"),
            "-c".into(),
            format!("{d}/nginx.conf"),
        ],
        ringkit: false,
    })
}

/// A study of HTTP servers: what `compare http` and `compare static` share.
pub(crate) struct Spec {
    /// "http" or "static": the section's name and its folder under --out.
    pub study: &'static str,
    /// The report's heading.
    pub title: &'static str,
    /// The contender ratios divide by (nginx in the HTTP studies).
    pub reference: &'static str,
    /// What the workloads ask for, one sentence.
    pub about: String,
    /// Contenders (nginx's files go in `dir/nginx`).
    pub contenders: Vec<Contender>,
    /// Contenders that cannot run, and why.
    pub skipped: Vec<(String, String)>,
    /// What nginx serves.
    pub site: Site,
    /// Workloads, in order.
    pub workloads: Vec<Workload>,
    /// Use the built-in generator whatever is installed, for this reason.
    pub builtin_only: Option<&'static str>,
    /// `https`: the servers speak TLS, so the load is wrk (the built-in
    /// generator has no TLS); `http` otherwise.
    pub scheme: &'static str,
    /// The mix's list (`PATH BODY_LEN` lines), for the load command shown.
    pub mix_file: Option<PathBuf>,
    /// Count ringkit servers' syscalls from outside too (perf or strace,
    /// as peers'), not only by their own counters.
    pub count_ringkit_syscalls: bool,
}

/// Where a study keeps nginx's files: absolute, because nginx resolves
/// relative -c/-e paths against its prefix (-p), so a relative --out
/// directory used to double every path and nginx failed to start.
pub(crate) fn nginx_dir(dir: &Path) -> PathBuf {
    std::path::absolute(dir.join("nginx")).unwrap_or_else(|_| dir.join("nginx"))
}

/// Bytes of nginx's answer to `GET /` with `return 200;` in the study's
/// configuration (`server_tokens off`, no Content-Type; nginx 1.22): the
/// status line, `Server`, `Date`, `Content-Length: 0` and `Connection:
/// keep-alive`. ringkit and hyper send 75 bytes for the same answer (no
/// `Server`, no `Connection` on HTTP/1.1 keep-alive).
const NGINX_RETURN_200_BYTES: usize = 114;
/// What the other servers send for it without padding.
const PLAIN_200_BYTES: usize = 75;
/// The `--pad` that gives ringkit's (and hyper's) `GET /` nginx's size.
pub(crate) const RETURN_200_PAD: usize = NGINX_RETURN_200_BYTES - PLAIN_200_BYTES;

fn plan(opts: &StudyOpts, dir: &Path) -> Spec {
    // Every server sends nginx's size: ringkit and hyper add an `x-pad`
    // header of the difference (the report's "response bytes" column
    // shows what each sent).
    let pad = RETURN_200_PAD;
    let mut contenders = Vec::new();
    let mut skipped = Vec::new();
    match nginx_contender(&nginx_dir(dir)) {
        Ok(c) => contenders.push(c),
        Err(s) => skipped.push(s),
    }
    for (name, backend, family) in [
        ("ringkit-uring", "uring", Family::Uring),
        ("ringkit-epoll", "epoll", Family::Epoll),
    ] {
        let server = RingkitServer::http(&opts.ringkit_bin)
            .backend(backend)
            .threads(1)
            .stats()
            .flag("--pad", pad);
        contenders.push(server.contender(name, family));
    }
    match opts
        .peer_bin
        .clone()
        .and_then(|p| peer_has(&p, "hyper-http").map(|()| p))
    {
        Ok(p) => contenders.push(Contender {
            name: "hyper".into(),
            family: Family::Epoll,
            cmd: vec![
                p.display().to_string(),
                "hyper-http".into(),
                "{addr}".into(),
                pad.to_string(),
            ],
            ringkit: false,
        }),
        Err(e) => skipped.push(("hyper".into(), e)),
    }
    let workloads = if opts.quick {
        vec![Workload::new(100, false), Workload::new(100, true)]
    } else {
        vec![
            Workload::new(100, false),
            Workload::new(1000, false),
            Workload::new(100, true),
        ]
    };
    Spec {
        study: "http",
        title: "HTTP",
        reference: "nginx",
        about: format!(
            "`GET /` answered `200` with an empty body, {NGINX_RETURN_200_BYTES} bytes from every \
             server (nginx's size; ringkit and hyper add an `x-pad` header of {pad} bytes)"
        ),
        contenders,
        skipped,
        site: Site::Return200,
        workloads,
        builtin_only: None,
        scheme: "http",
        mix_file: None,
        count_ringkit_syscalls: false,
    }
}

/// Run the http study for `ringkit compare`.
pub fn study(opts: &StudyOpts, progress: &mut dyn FnMut(&str)) -> io::Result<Section> {
    let dir = opts.out_dir.join("http");
    let spec = plan(opts, &dir);
    Ok(report::section(&run(opts, spec, progress)?))
}

/// Run `spec`: every workload, rounds of every contender interleaved and
/// rotated, then the peers' syscall counts; logs under `out/<study>/`.
pub(crate) fn run(
    opts: &StudyOpts,
    p: Spec,
    progress: &mut dyn FnMut(&str),
) -> io::Result<HttpResults> {
    let wall = Instant::now();
    ringkit::raise_nofile_limit();
    let dir = opts.out_dir.join(p.study);
    std::fs::create_dir_all(dir.join("logs"))?;
    // Removed at the end: never one this run did not make.
    crate::harness::made_dir::must_be_new_or_empty(&dir.join("tmp"))?;
    std::fs::create_dir_all(dir.join("tmp"))?;
    if p.contenders.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "no {} contender can run: {}",
                p.study,
                p.skipped
                    .iter()
                    .map(|(n, w)| format!("{n}: {w}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        ));
    }
    let have_wrk = Path::new(wrk::WRK).exists();
    if p.scheme == "https" && !have_wrk {
        return Err(crate::harness::err::unsupported(format!(
            "{} not found (apt-get install -y wrk): the built-in generator has no TLS",
            wrk::WRK
        )));
    }
    let (tool, tool_reason) = match std::env::var("RINGKIT_HTTP_LOAD").as_deref() {
        _ if p.scheme == "https" => (
            LoadTool::Wrk,
            "wrk speaks https (the built-in generator has no TLS)".to_string(),
        ),
        _ if p.builtin_only.is_some() => (
            LoadTool::Builtin,
            p.builtin_only.unwrap_or_default().to_string(),
        ),
        Ok("builtin") => (LoadTool::Builtin, "RINGKIT_HTTP_LOAD=builtin".to_string()),
        Ok("wrk") if have_wrk => (LoadTool::Wrk, "RINGKIT_HTTP_LOAD=wrk".to_string()),
        _ if have_wrk => (LoadTool::Wrk, format!("{} is installed", wrk::WRK)),
        _ => (
            LoadTool::Builtin,
            format!(
                "{} not found (apt-get install -y wrk); using the built-in generator",
                wrk::WRK
            ),
        ),
    };
    let tool_version = match tool {
        LoadTool::Wrk => wrk::version().unwrap_or_else(|| "wrk (version unknown)".into()),
        LoadTool::Builtin => format!("ringkit bench http {}", env!("CARGO_PKG_VERSION")),
    };
    let workloads = p.workloads.clone();
    let rounds = opts.rounds.unwrap_or(3).max(1);
    let secs = opts.secs.unwrap_or(if opts.quick { 2.0 } else { 10.0 });
    let run = Run {
        opts,
        dir: dir.clone(),
        nginx_dir: nginx_dir(&dir),
        tool,
        secs,
        site: p.site.clone(),
        scheme: p.scheme,
    };
    let load_commands = workloads
        .iter()
        .map(|w| {
            let cmd = match tool {
                LoadTool::Wrk => wrk::command(
                    &format!("{}://127.0.0.1:PORT{}", p.scheme, w.path),
                    w.conns,
                    run.wrk_secs(),
                    w.close,
                )
                .iter()
                .map(|a| {
                    if a.contains(' ') {
                        format!("'{a}'")
                    } else {
                        a.clone()
                    }
                })
                .collect::<Vec<_>>()
                .join(" "),
                LoadTool::Builtin => format!(
                    "ringkit bench http {}://127.0.0.1:PORT{} {}-c {} -t {secs}{} --cpu {}",
                    p.scheme,
                    w.path,
                    match (&w.mix, &p.mix_file, w.body_len) {
                        (Some(_), Some(f), _) => format!("--paths {} ", f.display()),
                        (_, _, Some(n)) => format!("--body-len {n} "),
                        _ => String::new(),
                    },
                    w.conns,
                    if w.close {
                        " --close".to_string()
                    } else if w.pipeline > 1 {
                        format!(" --pipeline {}", w.pipeline)
                    } else {
                        String::new()
                    },
                    opts.client_cpu
                ),
            };
            (w.name.clone(), cmd)
        })
        .collect();
    let cs = &p.contenders;
    let total = workloads.len() * rounds * cs.len();
    let mut samples = Vec::new();
    for w in &workloads {
        for (round, c) in schedule(cs, rounds) {
            let s = run.sample(c, w, round);
            progress(&format!(
                "{}/{total} {} {} round {}: {:.0} req/s{}",
                samples.len() + 1,
                c.name,
                w.name,
                round,
                s.rps,
                if s.ok() { "" } else { " FAILED" }
            ));
            samples.push(s);
        }
    }
    let mut strace_calls: Vec<(String, String, Result<f64, String>)> = Vec::new();
    if let Some(tool) = opts.peer_syscalls {
        for w in &workloads {
            for c in cs.iter().filter(|c| !c.ringkit || p.count_ringkit_syscalls) {
                progress(&format!("{} {} {}", tool.name(), c.name, w.name));
                let r = run.syscalls(c, w, tool).map_err(|e| e.to_string());
                strace_calls.push((c.name.clone(), w.name.clone(), r));
            }
        }
    }
    let server_banners = cs
        .iter()
        .filter_map(|c| {
            if c.name == "nginx" {
                return nginx_version().map(|v| (c.name.clone(), v));
            }
            let tag = workloads[0].tag("0");
            let log = dir.join("logs").join(format!("{}-{tag}.log", c.name));
            std::fs::read_to_string(log)
                .ok()
                .and_then(|s| s.lines().next().map(|l| (c.name.clone(), l.to_string())))
        })
        .collect();
    let summary = summarize(
        p.reference,
        cs,
        &workloads,
        &samples,
        &strace_calls,
        opts.peer_syscalls,
    );
    let _ = std::fs::remove_dir_all(dir.join("tmp"));
    let has_nginx = cs.iter().any(|c| c.name == "nginx");
    Ok(HttpResults {
        study: p.study.into(),
        reference: p.reference.into(),
        title: p.title.into(),
        about: p.about,
        system: SystemInfo::gather(),
        tool,
        tool_reason,
        tool_version,
        nginx_version: if has_nginx { nginx_version() } else { None },
        nginx_conf: has_nginx.then(|| nginx_conf(&run.nginx_dir, "PORT", &p.site)),
        rounds,
        secs,
        server_cpu: opts.server_cpu,
        client_cpu: opts.client_cpu,
        workloads,
        contenders: p.contenders,
        load_commands,
        server_banners,
        skipped: p.skipped,
        samples,
        summary,
        wall_secs: wall.elapsed().as_secs_f64(),
    })
}
