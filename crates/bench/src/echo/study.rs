//! `ringkit compare echo`: contenders side by side, interleaved, pinned.
//!
//! For every connection count and round, each contender's server is started
//! as its own process pinned to the server CPU, driven by the load generator
//! on this process's thread pinned to the client CPU, and stopped by its pid.
//! Contenders are interleaved (A B C A B C ...) and rotated each round, so
//! drift hits all of them alike. Around the measured window we sample the
//! server's CPU time (/proc/PID/stat) and, for ringkit, its own counters.
//! Peers' syscalls come from a separate run (never timed), counted by
//! `perf stat` on the syscall tracepoint, or by `strace -c` without perf.

use std::io;
use std::time::{Duration, Instant};

use super::contenders::contenders;
use super::load::{self, EchoClient, EchoLoadConfig};
use super::results::{summarize, CompareConfig, CompareResults, Sample};
use crate::harness::latency::schedule;
use crate::harness::phase::Phase;
use crate::harness::server::{free_addr, Contender, Server};
use crate::harness::study::{Section, StudyOpts};
use crate::harness::syscalls::{SyscallTool, WindowCounter};
use crate::harness::sysinfo::{CpuTimes, SystemInfo};

fn one_sample(cfg: &CompareConfig, c: &Contender, conns: usize, round: usize, secs: f64) -> Sample {
    let mut sample = Sample {
        contender: c.name.clone(),
        conns,
        round,
        ..Sample::default()
    };
    let mut run = || -> io::Result<()> {
        let addr = free_addr()?;
        let stats_path = cfg
            .out_dir
            .join("tmp")
            .join(format!("{}-{conns}-{round}", c.name));
        let log = cfg
            .out_dir
            .join("logs")
            .join(format!("{}-{conns}-{round}.log", c.name));
        let server = Server::start(c, addr, &stats_path, cfg.server_cpu, &log)?;
        let pid = server.pid();
        let stats = c.ringkit.then_some(stats_path.as_path());
        let mut e0 = None;
        let mut e1 = None;
        let load_cfg = EchoLoadConfig {
            addr,
            conns,
            len: cfg.len,
            duration: Duration::from_secs_f64(secs),
            pipeline: cfg.pipeline,
            backend: ringkit::Backend::Auto,
            rate: None,
        };
        let mut hook = |p| match p {
            Phase::WindowStart => e0 = Some(CpuTimes::edge(pid, stats)),
            Phase::WindowEnd => e1 = Some(CpuTimes::edge(pid, stats)),
        };
        let load = match cfg.client {
            EchoClient::Ringkit => load::run_load(&load_cfg, &mut hook)?,
            EchoClient::Threads => load::run_load_threads(&load_cfg, &mut hook)?,
            EchoClient::RustEchoBench => {
                let bin = cfg.echo_bench.as_deref().ok_or_else(|| {
                    crate::harness::err::invalid_input("no rust_echo_bench binary")
                })?;
                super::external::run(bin, &load_cfg, &mut hook)?
            }
        };
        let missing = || io::Error::other("the load run never reached its window");
        let (cpu0, st0) = e0.ok_or_else(missing)??;
        let (cpu1, st1) = e1.ok_or_else(missing)??;
        drop(server);
        let cpu = cpu1.since(&cpu0);
        sample.cpu_user_s = cpu.user;
        sample.cpu_sys_s = cpu.system;
        if c.ringkit {
            sample.stats = Some(st1.since(&st0));
        }
        sample.load = load;
        Ok(())
    };
    if let Err(e) = run() {
        sample.error = Some(e.to_string());
    }
    sample
}

/// Syscalls per request of a contender, counted by `tool` over the window
/// of a separate run whose throughput is not used.
fn syscall_sample(
    cfg: &CompareConfig,
    c: &Contender,
    conns: usize,
    tool: SyscallTool,
) -> io::Result<f64> {
    let addr = free_addr()?;
    let stats_path = cfg.out_dir.join("tmp").join(format!("{}-syscalls", c.name));
    let log = cfg
        .out_dir
        .join("logs")
        .join(format!("{}-{conns}-syscalls.log", c.name));
    let out = cfg
        .out_dir
        .join("logs")
        .join(format!("{}-{conns}-{}.txt", c.name, tool.name()));
    let server = Server::start(c, addr, &stats_path, cfg.server_cpu, &log)?;
    let mut counter = WindowCounter::new(tool, server.pid(), &out);
    let load_cfg = EchoLoadConfig {
        addr,
        conns,
        len: cfg.len,
        duration: Duration::from_secs(2),
        pipeline: cfg.pipeline,
        backend: ringkit::Backend::Auto,
        rate: None,
    };
    let load = load::run_load(&load_cfg, &mut |p| counter.phase(p));
    counter.finish()?;
    let load = load?;
    drop(server);
    Ok(tool.count(&out)? / load.responses.max(1) as f64)
}

/// Run the comparison. `progress` is called after each sample.
pub fn run(
    cfg: &CompareConfig,
    contenders: Vec<Contender>,
    skipped: Vec<(String, String)>,
    progress: &mut dyn FnMut(&Sample, usize, usize),
) -> io::Result<CompareResults> {
    let wall = Instant::now();
    std::fs::create_dir_all(cfg.out_dir.join("logs"))?;
    // Removed at the end: never one this run did not make.
    crate::harness::made_dir::must_be_new_or_empty(&cfg.out_dir.join("tmp"))?;
    std::fs::create_dir_all(cfg.out_dir.join("tmp"))?;
    ringkit::pin_to_cpu(cfg.client_cpu)?;
    let total = cfg.conns.len() * cfg.rounds * contenders.len();
    let mut samples = Vec::new();
    let mut n = 0;
    for &conns in &cfg.conns {
        for (round, c) in schedule(&contenders, cfg.rounds) {
            let s = one_sample(cfg, c, conns, round, cfg.secs);
            n += 1;
            progress(&s, n, total);
            samples.push(s);
        }
    }
    let mut peer_calls: Vec<(String, usize, f64)> = Vec::new();
    if let Some(tool) = cfg.peer_syscalls {
        for &conns in &cfg.conns {
            for c in contenders.iter().filter(|c| !c.ringkit) {
                if let Ok(v) = syscall_sample(cfg, c, conns, tool) {
                    peer_calls.push((c.name.clone(), conns, v));
                }
            }
        }
    }
    let server_banners = contenders
        .iter()
        .filter_map(|c| {
            let log = cfg
                .out_dir
                .join("logs")
                .join(format!("{}-{}-0.log", c.name, cfg.conns[0]));
            std::fs::read_to_string(log)
                .ok()
                .and_then(|s| s.lines().next().map(|l| (c.name.clone(), l.to_string())))
        })
        .collect();
    let summary = summarize(&contenders, cfg, &samples, &peer_calls);
    let _ = std::fs::remove_dir_all(cfg.out_dir.join("tmp"));
    Ok(CompareResults {
        system: SystemInfo::gather(),
        config: cfg.clone(),
        contenders,
        server_banners,
        skipped,
        samples,
        summary,
        wall_secs: wall.elapsed().as_secs_f64(),
    })
}

/// Run the echo study for `ringkit compare`.
pub fn study(opts: &StudyOpts, progress: &mut dyn FnMut(&str)) -> io::Result<Section> {
    let (mut list, mut skipped) = contenders(&opts.ringkit_bin, &opts.peer_bin, opts.quick);
    if !opts.only.is_empty() {
        list.retain(|c| opts.only.contains(&c.name));
        if list.is_empty() {
            return Err(crate::harness::err::invalid_input(
                "--only matched no echo contender",
            ));
        }
    }
    if opts.peer_syscalls.is_none() && opts.want_peer_syscalls {
        let has_strace = std::process::Command::new("strace")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        skipped.push((
            "syscall counts of peers".into(),
            format!(
                "neither perf (raw_syscalls tracepoint) nor strace works here{} (apt-get install -y linux-perf strace)",
                if has_strace { "" } else { "; strace not installed" }
            ),
        ));
    }
    let cfg = CompareConfig {
        conns: if opts.conns.is_empty() {
            vec![50, 1000]
        } else {
            opts.conns.clone()
        },
        len: opts.msg_len,
        pipeline: opts.pipeline.max(1),
        rounds: opts.rounds.unwrap_or(3).max(1),
        secs: opts.secs.unwrap_or(if opts.quick { 2.0 } else { 10.0 }),
        server_cpu: opts.server_cpu,
        client_cpu: opts.client_cpu,
        peer_syscalls: opts.peer_syscalls,
        out_dir: opts.out_dir.join("echo"),
        client: opts.echo_client,
        echo_bench: match opts.echo_client {
            EchoClient::RustEchoBench => Some(super::external::find(opts.echo_bench.as_deref())?),
            _ => None,
        },
    };
    if cfg.client != EchoClient::Ringkit && cfg.pipeline > 1 {
        return Err(crate::harness::err::invalid_input(
            "--pipeline needs the ringkit client (the others send one message at a time)",
        ));
    }
    eprintln!(
        "ringkit compare echo: {} contenders x {:?} connections x {} rounds x {} s; server on CPU {}, load ({:?} client) on CPU {}",
        list.len(), cfg.conns, cfg.rounds, cfg.secs, cfg.server_cpu, cfg.client, cfg.client_cpu
    );
    for (n, why) in &skipped {
        eprintln!("  skipped {n}: {why}");
    }
    let res = run(&cfg, list, skipped, &mut |s, n, total| {
        let tool = if s.load.tool_rps > 0.0 {
            format!(
                " (its own figure {:.0}, {} threads gave up)",
                s.load.tool_rps, s.load.dead_conns
            )
        } else {
            String::new()
        };
        progress(&format!(
            "{n}/{total} {} c={} {:.0} req/s{tool}{}",
            s.contender,
            s.conns,
            s.load.rps(),
            if s.error.is_some() || !s.load.ok() {
                " FAILED"
            } else {
                ""
            }
        ));
    })?;
    Ok(super::report::section(&res))
}
