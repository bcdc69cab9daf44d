//! `ringkit compare grpc`: gRPC through an outside client. ghz (a Go gRPC
//! load tool, `go install github.com/bojand/ghz/cmd/ghz@latest`) calls the
//! unary `ringkit.demo.Demo/Say` of the `axum_app` example (tonic's codec
//! over ringkit-hyper's HTTP/2, hosted) on ringkit-uring, ringkit-epoll and
//! the same binary on tokio. ghz is pinned to the client CPU, the server to
//! the server CPU; rounds interleaved and rotated; every call must end `OK`
//! (but those ghz itself cancels in flight when its time is up).
//! Server CPU per call: /proc before and after ghz's whole run (its
//! connection setup included, the same for every contender).

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::app::app_contender;
use crate::harness::fmt::{cpu, paired};
use crate::harness::latency::schedule;
use crate::harness::peers;
use crate::harness::server::{free_addr, Server};
use crate::harness::server::{Contender, Family};
use crate::harness::stat::{nan_from_null, stat, Stat};
use crate::harness::study::{Section, StudyOpts};
use crate::harness::sysinfo::CpuTimes;
use crate::harness::table::{Col, Table};
use serde::{Deserialize, Serialize};

/// Calls in flight (ghz `-c`), over one HTTP/2 connection.
const CONCURRENCY: usize = 50;

/// One ghz run against one contender.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Sample {
    contender: String,
    round: usize,
    calls: u64,
    rps: f64,
    #[serde(deserialize_with = "nan_from_null")]
    p50_us: f64,
    #[serde(deserialize_with = "nan_from_null")]
    p99_us: f64,
    #[serde(deserialize_with = "nan_from_null")]
    cpu_us_per_call: f64,
    error: Option<String>,
}

/// A contender as results.json names it.
#[derive(Debug, Serialize, Deserialize)]
struct Named {
    name: String,
    cmd: Vec<String>,
}

/// A contender's figures over its good samples; ratios paired per round
/// against app-tokio.
#[derive(Debug, Serialize, Deserialize)]
struct Row {
    contender: String,
    rps: Stat,
    cpu_us_per_call: Stat,
    p50_us: Stat,
    p99_us: Stat,
    rps_vs_ref_paired: Stat,
    cpu_vs_ref_paired: Stat,
    ok_samples: usize,
}

/// What the study measured: results.json's `studies.grpc`.
#[derive(Debug, Serialize, Deserialize)]
pub struct GrpcResults {
    concurrency: usize,
    rounds: usize,
    secs: f64,
    contenders: Vec<Named>,
    samples: Vec<Sample>,
    summary: Vec<Row>,
    /// ghz's CPU and the server's (`None`: a run from before they were
    /// kept).
    #[serde(default)]
    client_cpu: Option<usize>,
    #[serde(default)]
    server_cpu: Option<usize>,
}

/// ghz on PATH or in Go's default install directory.
fn ghz() -> Option<PathBuf> {
    let on_path = Command::new("ghz")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if on_path {
        return Some(PathBuf::from("ghz"));
    }
    let home = std::env::var_os("HOME")?;
    let p = Path::new(&home).join("go/bin/ghz");
    p.exists().then_some(p)
}

fn proto() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../hyper/examples/axum_app/demo.proto")
}

/// Run ghz for `secs` against `addr`; (calls, rps, p50 µs, p99 µs).
fn run_ghz(ghz: &Path, addr: &str, secs: f64, cpu: usize) -> io::Result<(u64, f64, f64, f64)> {
    let proto = proto();
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", &cpu.to_string()])
        .arg(ghz)
        .args(["--insecure", "--proto"])
        .arg(&proto)
        .args([
            "--call",
            "ringkit.demo.Demo.Say",
            "-d",
            r#"{"name":"ringkit"}"#,
        ])
        .args([
            "-c",
            &CONCURRENCY.to_string(),
            "--connections",
            "1",
            "--cpus",
            "1",
        ])
        .args(["-z", &format!("{}ms", (secs * 1000.0) as u64), "-O", "json"])
        .arg(addr)
        .stderr(Stdio::piped());
    let out = cmd.output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "ghz failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| io::Error::other(format!("ghz output is not JSON: {e}")))?;
    // When its time is up ghz cancels the calls in flight, which it counts
    // as `Unavailable`/`Canceled`: at most one per call in flight is that;
    // anything more, or any other code, fails the sample.
    let codes = v["statusCodeDistribution"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let cut: u64 = codes
        .iter()
        .filter(|(k, _)| *k != "OK")
        .map(|(k, n)| match k.as_str() {
            "Unavailable" | "Canceled" => n.as_u64().unwrap_or(u64::MAX),
            _ => u64::MAX,
        })
        .fold(0u64, u64::saturating_add);
    if cut > CONCURRENCY as u64 {
        return Err(io::Error::other(format!("calls not OK: {codes:?}")));
    }
    let calls = codes.get("OK").and_then(|n| n.as_u64()).unwrap_or(0);
    if calls == 0 {
        return Err(io::Error::other("ghz made no calls"));
    }
    let pct = |p: u64| {
        v["latencyDistribution"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["percentage"].as_u64() == Some(p)))
            .and_then(|x| x["latency"].as_f64())
            .map_or(f64::NAN, |ns| ns / 1000.0)
    };
    Ok((calls, v["rps"].as_f64().unwrap_or(0.0), pct(50), pct(99)))
}

/// Run the gRPC study for `ringkit compare`.
pub fn study(opts: &StudyOpts, progress: &mut dyn FnMut(&str)) -> io::Result<Section> {
    let ghz = ghz().ok_or_else(|| {
        crate::harness::err::unsupported(
            "ghz not found (go install github.com/bojand/ghz/cmd/ghz@latest)",
        )
    })?;
    let bin = peers::app_binary(&opts.ringkit_bin).map_err(io::Error::other)?;
    let dir = opts.out_dir.join("grpc");
    std::fs::create_dir_all(&dir)?;
    // No database, Redis or upstream: gRPC needs none (they connect on
    // first use).
    let (bin, pg, redis) = (
        bin.display().to_string(),
        "postgres://x@127.0.0.1:1/x",
        "redis://127.0.0.1:1/",
    );
    let contender =
        |name: &str, family, args: &[&str]| app_contender(&bin, name, family, pg, redis, args);
    let contenders = [
        contender("app-tokio", Family::Epoll, &["--runtime", "tokio"]),
        contender("app-ringkit-uring", Family::Uring, &["--backend", "uring"]),
        contender("app-ringkit-epoll", Family::Epoll, &["--backend", "epoll"]),
    ];
    let rounds = opts.rounds.unwrap_or(if opts.quick { 3 } else { 6 });
    let secs = opts.secs.unwrap_or(if opts.quick { 3.0 } else { 5.0 });
    let mut samples = Vec::new();
    for (round, c) in schedule(&contenders, rounds) {
        progress(&format!("round {}/{rounds}: {}", round + 1, c.name));
        let addr = free_addr()?;
        let log = dir.join(format!("{}-{round}.log", c.name));
        let server = Server::start(c, addr, &dir.join("stats"), opts.server_cpu, &log)?;
        std::thread::sleep(Duration::from_millis(200));
        let before = CpuTimes::of(server.pid())?;
        let r = run_ghz(&ghz, &addr.to_string(), secs, opts.client_cpu);
        let used = CpuTimes::of(server.pid())?.since(&before);
        drop(server);
        samples.push(match r {
            Ok((calls, rps, p50, p99)) => Sample {
                contender: c.name.clone(),
                round,
                calls,
                rps,
                p50_us: p50,
                p99_us: p99,
                cpu_us_per_call: (used.user + used.system) * 1e6 / calls as f64,
                error: None,
            },
            Err(e) => Sample {
                contender: c.name.clone(),
                round,
                calls: 0,
                rps: 0.0,
                p50_us: f64::NAN,
                p99_us: f64::NAN,
                cpu_us_per_call: f64::NAN,
                error: Some(e.to_string()),
            },
        });
    }
    let summary = summarize(&contenders, &samples);
    Ok(section(&GrpcResults {
        concurrency: CONCURRENCY,
        rounds,
        secs,
        contenders: contenders
            .iter()
            .map(|c| Named {
                name: c.name.clone(),
                cmd: c.cmd.clone(),
            })
            .collect(),
        samples,
        summary,
        client_cpu: Some(opts.client_cpu),
        server_cpu: Some(opts.server_cpu),
    }))
}

/// A row per contender.
fn summarize(contenders: &[Contender], samples: &[Sample]) -> Vec<Row> {
    let good = |c: &str| -> Vec<&Sample> {
        samples
            .iter()
            .filter(|s| s.contender == c && s.error.is_none())
            .collect()
    };
    let reference = "app-tokio";
    // Paired: each round's value over the reference's in that round.
    let paired = |c: &str, f: fn(&Sample) -> f64| {
        let refs = good(reference);
        let v: Vec<f64> = good(c)
            .iter()
            .filter_map(|s| {
                refs.iter()
                    .find(|r| r.round == s.round)
                    .map(|r| f(s) / f(r))
            })
            .collect();
        stat(v)
    };
    contenders
        .iter()
        .map(|c| {
            let g = good(&c.name);
            let of = |f: fn(&Sample) -> f64| stat(g.iter().map(|s| f(s)).collect());
            Row {
                contender: c.name.clone(),
                rps: of(|s| s.rps),
                cpu_us_per_call: of(|s| s.cpu_us_per_call),
                p50_us: of(|s| s.p50_us),
                p99_us: of(|s| s.p99_us),
                rps_vs_ref_paired: paired(&c.name, |s| s.rps),
                cpu_vs_ref_paired: paired(&c.name, |s| s.cpu_us_per_call),
                ok_samples: g.len(),
            }
        })
        .collect()
}

/// The study's section of the report.
pub fn section(res: &GrpcResults) -> Section {
    let (rounds, secs) = (res.rounds, res.secs);
    let mut md = format!(
        "## gRPC through ghz: the axum_app example's unary `Say` on ringkit (hosted) and tokio\n\n\
         - ghz (Go), pinned to CPU {}, {CONCURRENCY} calls in flight on one HTTP/2 connection, \
         {rounds} rounds of {secs} s, contenders interleaved and rotated; the server on CPU {}\n\
         - every call must end `OK`, but the at most {CONCURRENCY} in flight that ghz cancels when its time is up; server CPU per `OK` call from /proc over ghz's whole run\n\
         - ratios are paired against app-tokio (each round's over tokio's in that round; median and range): calls/s higher is better, CPU lower is better\n\n",
        cpu(res.client_cpu),
        cpu(res.server_cpu)
    );
    let mut t = Table::new(vec![
        Col::left("contender"),
        Col::right("calls/s"),
        Col::right("CPU µs/call").short("cpu µs/c"),
        Col::right("p50 µs"),
        Col::right("p99 µs"),
        Col::right("calls/s vs tokio, paired"),
        Col::right("CPU vs tokio, paired"),
        Col::right("ok samples").short("ok"),
    ]);
    for r in &res.summary {
        t.row(vec![
            r.contender.clone(),
            format!("{:.0}", r.rps.median),
            format!("{:.2}", r.cpu_us_per_call.median),
            format!("{:.0}", r.p50_us.median),
            format!("{:.0}", r.p99_us.median),
            paired(Some(r.rps_vs_ref_paired)),
            paired(Some(r.cpu_vs_ref_paired)),
            format!("{}/{rounds}", r.ok_samples),
        ]);
    }
    md += &t.markdown();
    let errors: Vec<String> = res
        .samples
        .iter()
        .filter_map(|s| {
            s.error
                .as_ref()
                .map(|e| format!("{} round {}: {e}", s.contender, s.round))
        })
        .collect();
    if !errors.is_empty() {
        md += &format!("\nFailed samples: {}\n", errors.join("; "));
    }
    md += "\nServers: the `axum_app` example (`--runtime tokio` for tokio; `--backend uring|epoll` for ringkit, hosted); \
           the proto is `crates/hyper/examples/axum_app/demo.proto`.\n";
    Section {
        study: "grpc".into(),
        table: t.text(),
        markdown: md,
        json: serde_json::to_value(res).unwrap_or_default(),
        ..Default::default()
    }
}
