//! `ringkit`: probe the kernel, run the servers, generate load, compare.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

mod bench_http;
mod http;
mod log;
mod studies;
mod torture;

use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use ringkit::Backend;
use ringkit_bench::echo::load::{self as echo_load, EchoLoadConfig};
use ringkit_bench::harness::study::{Section, StudyOpts};
use ringkit_echo::{EchoLimits, EchoServerConfig, RecvMode};
use ringkit_uring::KernelReport;

/// ringkit: io_uring toolkit, runtime, servers and an honest io_uring-vs-epoll benchmark.
#[derive(Parser, Debug)]
#[command(name = "ringkit", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// What io_uring can do on this kernel, and which backend ringkit would pick (and why).
    Probe {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run the echo server.
    Echo(EchoArgs),
    /// Run the HTTP/1.1 benchmark server (`GET /` answers 200 with an empty body).
    Http(http::HttpArgs),
    /// Serve the files of a directory over HTTP/1.1.
    Serve(http::ServeArgs),
    /// Serve an axum app on ringkit through hyper (HTTP/1.1 and h2):
    /// `GET /` (text), `GET /json`, `GET /user/{id}`.
    Axum(AxumArgs),
    /// Load generators and micro-benchmarks.
    #[command(subcommand)]
    Bench(BenchCmd),
    /// Compare io_uring with epoll and the peers (tokio, monoio, nginx, fio), interleaved and pinned.
    Compare(CompareArgs),
    /// Chaos load against a server it starts, every byte verified.
    Torture(torture::TortureArgs),
    /// The durable append log: bench, serve over TCP, dump.
    #[command(subcommand)]
    Log(log::LogCmd),
}

#[derive(Args, Debug)]
struct AxumArgs {
    /// Address to listen on (every thread binds it with SO_REUSEPORT).
    #[arg(long, default_value = "127.0.0.1:3000")]
    addr: SocketAddr,
    /// auto | uring | epoll.
    #[arg(long, default_value = "auto", env = "RINGKIT_BACKEND")]
    backend: Backend,
    /// Runtime threads, one listener each.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// CPUs to pin the threads to, e.g. 0,1.
    #[arg(long, value_delimiter = ',')]
    cpus: Vec<usize>,
    /// Serve TLS (rustls; ALPN h2, http/1.1) with this PEM certificate chain.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct EchoArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7000")]
    addr: SocketAddr,
    /// auto | uring | epoll.
    #[arg(long, default_value = "auto", env = "RINGKIT_BACKEND")]
    backend: Backend,
    /// Runtime threads (each with its own SO_REUSEPORT listener).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// CPUs to pin the threads to, e.g. 0,1.
    #[arg(long, value_delimiter = ',')]
    cpus: Vec<usize>,
    /// multishot: multishot recv into a provided-buffer ring, send from that
    /// buffer (io_uring's modern path); single: one recv per read into the
    /// connection's own buffer (the plain path).
    #[arg(long, default_value = "multishot")]
    recv: RecvMode,
    /// io_uring: slots of the registered file table that connections are
    /// promoted into after 16 operations (their receives and sends then skip
    /// the kernel's per-operation file lookup); 0 = plain fds. The plain
    /// path is `--recv single --fixed-files 0`.
    #[arg(long, default_value_t = 4096, env = "RINGKIT_FIXED_FILES")]
    fixed_files: u32,
    /// io_uring: let one receive completion cover several buffers when a
    /// peer sends more than one holds (IORING_RECVSEND_BUNDLE, Linux 6.10;
    /// ignored where the kernel lacks it): on or off.
    #[arg(long, default_value = "on", value_parser = parse_on_off, action = clap::ArgAction::Set, env = "RINGKIT_RECV_BUNDLE")]
    recv_bundle: bool,
    /// io_uring: how everything already received is sent back in one go:
    /// vectored = one SENDMSG with an iovec per buffer; linked = one SEND
    /// per buffer, linked, every success CQE but the last skipped
    /// (IOSQE_CQE_SKIP_SUCCESS); bundle = one SEND with
    /// IORING_RECVSEND_BUNDLE from a send ring holding the batch (Linux
    /// 6.10). One CQE per batch in each case.
    #[arg(long, default_value = "vectored", env = "RINGKIT_SEND_BATCH")]
    send_batch: ringkit::driver::SendBatch,
    /// Write runtime counters to PATH.<thread> every 50 ms (used by `compare`).
    #[arg(long)]
    stats: Option<PathBuf>,
    /// io_uring: wait for up to WANT completions per enter, returning after
    /// MICROS once one is ready (IORING_FEAT_MIN_TIMEOUT, Linux 6.12), as
    /// WANT:MICROS, e.g. 32:50. Fewer enters under load, up to MICROS more
    /// latency when traffic is light. Default: off.
    #[arg(long, value_parser = parse_batch_wait, env = "RINGKIT_BATCH_WAIT")]
    batch_wait: Option<(u32, u64)>,
    /// Fault injection: io_uring SQ entries (the CQ gets 4x); e.g. 4 fills
    /// the SQ and overflows the CQ.
    #[arg(long)]
    entries: Option<u32>,
    /// Fault injection: buffers in the provided-buffer ring (a power of two;
    /// e.g. 2 runs dry: ENOBUFS).
    #[arg(long)]
    recv_buffers: Option<u16>,
    /// Bytes per provided buffer (with --recv-buffers).
    #[arg(long, default_value_t = 4096)]
    recv_buffer_size: u32,
    /// Fault injection: set the soft RLIMIT_NOFILE to N (accept hits EMFILE).
    #[arg(long)]
    nofile: Option<u64>,
    /// Graceful shutdown: after SIGTERM/SIGINT close a connection idle this long (ms).
    #[arg(long, default_value_t = 1000)]
    drain_idle_ms: u64,
    /// Graceful shutdown: give up on open connections after this long (s).
    #[arg(long, default_value_t = 10.0)]
    drain_secs: f64,
    /// Close a connection whose echo has not moved a byte for this many
    /// seconds (a client that stops reading; nginx's send_timeout); 0: no
    /// limit.
    #[arg(long, default_value_t = 60.0)]
    send_timeout: f64,
}

#[derive(Subcommand, Debug)]
enum BenchCmd {
    /// Echo load generator (flags and output line as rust_echo_bench).
    Echo(BenchEchoArgs),
    /// HTTP load generator (keep-alive or a new connection per request).
    Http(bench_http::BenchHttpArgs),
    /// Wake-up latency: pipe/eventfd writer on one CPU, reader on the other.
    Wakeup(studies::BenchWakeupArgs),
    /// Ring overhead: NOPs per second by batch size.
    Nop(studies::BenchNopArgs),
    /// File I/O job runner (fio-like), against fio when installed.
    File(studies::BenchFileArgs),
}

#[derive(Args, Debug)]
struct BenchEchoArgs {
    /// Server address.
    #[arg(short = 'a', long = "address", default_value = "127.0.0.1:7000")]
    addr: SocketAddr,
    /// Connections.
    #[arg(short = 'c', long = "number", default_value_t = 50)]
    conns: usize,
    /// Message length in bytes.
    #[arg(short = 'l', long = "length", default_value_t = 512)]
    len: usize,
    /// Measured seconds (after all connections are up).
    #[arg(short = 't', long = "duration", default_value_t = 10)]
    secs: u64,
    /// Messages in flight per connection.
    #[arg(long, default_value_t = 1)]
    pipeline: usize,
    /// Backend of the generator itself.
    #[arg(long, default_value = "auto")]
    backend: Backend,
    /// Pin the generator to this CPU.
    #[arg(long)]
    cpu: Option<usize>,
    /// Print the result as JSON too.
    #[arg(long)]
    json: bool,
    /// ringkit: one thread, all connections as tasks on the runtime;
    /// threads: one blocking OS thread per connection (rust_echo_bench's
    /// design, to compare generators).
    #[arg(long, default_value = "ringkit")]
    client: String,
}

#[derive(Args, Debug)]
struct CompareArgs {
    /// Study to run: echo, generator, http, static, axum, tls, app, hosting,
    /// grpc, service, pipeline, wakeup, nop, file, log or all (default: all). `http` runs four
    /// parts: `http-core` (ringkit-http against nginx, hyper and the rest),
    /// `axum` (axum on ringkit and on tokio), `tls` (HTTPS against nginx)
    /// and `pipeline` (16 pipelined requests per connection); each part also
    /// runs alone by its name. `service` runs three: `app` (a real axum
    /// service with PostgreSQL and Redis, ringkit hosted against tokio;
    /// needs postgresql and redis-server installed), `hosting` (what
    /// hosting tokio costs) and `grpc` (its gRPC service under ghz, an
    /// outside client).
    study: Option<String>,
    /// The long run for publishing: every study's full variant (more
    /// rounds, workloads and contenders, peers' syscalls counted by perf),
    /// and with `all` also the `app` and `hosting` studies. About 45
    /// minutes and more. Without it, each study runs its short variant
    /// (about a minute each; echo: 3 rounds of 2 s) and `all` is done in
    /// about 10 minutes.
    #[arg(long, conflicts_with = "quick")]
    full: bool,
    /// The short variants (the default; kept for old scripts).
    #[arg(long, hide = true)]
    quick: bool,
    /// Rounds (each contender once per round).
    #[arg(long)]
    rounds: Option<usize>,
    /// Measured seconds per sample.
    #[arg(long)]
    secs: Option<f64>,
    /// Echo: connection counts.
    #[arg(long, value_delimiter = ',', default_value = "50,1000")]
    conns: Vec<usize>,
    /// Echo: message length.
    #[arg(long, default_value_t = 512)]
    len: usize,
    /// Echo: messages in flight per connection (written together, then all
    /// read back; 1: one at a time).
    #[arg(long, default_value_t = 1)]
    pipeline: usize,
    /// Echo: only these contenders (comma-separated names).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Output directory (default: results/compare-<date>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Skip the separate runs that count peers' syscalls (perf stat on the
    /// syscall tracepoint, or strace without perf).
    #[arg(long)]
    no_strace: bool,
    /// CPU for servers.
    #[arg(long, default_value_t = 0)]
    server_cpu: usize,
    /// CPU for the load generator.
    #[arg(long, default_value_t = 1)]
    client_cpu: usize,
}

/// The servers' log lines (the libraries log through `tracing`): plain
/// messages on stderr, `info` and above unless `RUST_LOG` says otherwise.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .without_time()
        .with_level(false)
        .with_target(false)
        .try_init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let res = match cli.cmd {
        Cmd::Probe { json } => probe(json),
        Cmd::Echo(a) => ringkit_echo::run_server(EchoServerConfig {
            addr: a.addr,
            backend: a.backend,
            threads: a.threads,
            cpus: a.cpus,
            recv: a.recv,
            fixed_files: a.fixed_files,
            recv_bundle: a.recv_bundle,
            send_batch: a.send_batch,
            stats: a.stats,
            limits: EchoLimits {
                entries: a.entries,
                recv_buffers: a.recv_buffers.map(|n| (n, a.recv_buffer_size)),
                nofile: a.nofile,
                batch_wait: a.batch_wait.map(|(w, us)| (w, Duration::from_micros(us))),
                drain_idle: Duration::from_millis(a.drain_idle_ms),
                drain_timeout: Duration::from_secs_f64(a.drain_secs.max(0.0)),
                // 0: no limit.
                send_timeout: Duration::from_secs_f64(a.send_timeout.max(0.0)),
            },
        }),
        Cmd::Http(a) => http::http(a),
        Cmd::Serve(a) => http::serve(a),
        Cmd::Axum(a) => {
            let mut cfg = ringkit_hyper::ServeConfig::new(a.addr);
            cfg.threads = a.threads;
            cfg.cpus = a.cpus;
            cfg.backend = a.backend;
            match (&a.tls_cert, &a.tls_key) {
                (Some(cert), Some(key)) => {
                    ringkit_hyper::tls::server_config(cert, key, &[b"h2", b"http/1.1"])
                        .map(|t| cfg.tls = Some(t))
                        .and_then(|()| ringkit_hyper::serve(cfg, ringkit_hyper::hello::app))
                }
                _ => ringkit_hyper::serve(cfg, ringkit_hyper::hello::app),
            }
        }
        Cmd::Bench(BenchCmd::Echo(a)) => bench_echo(a),
        Cmd::Bench(BenchCmd::Http(a)) => bench_http::bench_http(a),
        Cmd::Bench(BenchCmd::Wakeup(a)) => studies::bench_wakeup(a),
        Cmd::Bench(BenchCmd::Nop(a)) => studies::bench_nop(a),
        Cmd::Bench(BenchCmd::File(a)) => studies::bench_file(a),
        Cmd::Compare(a) => compare_cmd(a),
        Cmd::Torture(a) => torture::torture(a),
        Cmd::Log(c) => log::log(c),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ringkit: {e}");
            ExitCode::FAILURE
        }
    }
}

fn parse_batch_wait(v: &str) -> Result<(u32, u64), String> {
    let (w, us) = v
        .split_once(':')
        .ok_or_else(|| format!("{v:?}: expected WANT:MICROS, e.g. 32:50"))?;
    let w: u32 = w.parse().map_err(|e| format!("WANT {w:?}: {e}"))?;
    let us: u64 = us.parse().map_err(|e| format!("MICROS {us:?}: {e}"))?;
    if w == 0 {
        return Err("WANT must be at least 1".into());
    }
    Ok((w, us))
}

fn probe(json: bool) -> std::io::Result<()> {
    let k = KernelReport::gather();
    let auto = ringkit::Builder::new()
        .backend(Backend::Auto)
        .ignore_env()
        .build()
        .map(|rt| rt.backend_report().clone());
    if json {
        let v = serde_json::json!({
            "kernel": k.kernel,
            "io_uring_usable": k.usable.is_ok(),
            "why_not": k.usable.as_ref().err(),
            "features": k.feature_names(),
            "setup_flags": k.setup_flag_names(),
            "opcodes_supported": k.probe.as_ref().map(|p| p.supported_names()),
            "opcodes_missing": k.probe.as_ref().map(|p| p.unsupported_names()),
            "auto_backend": auto.as_ref().map(|r| r.to_string()).map_err(|e| e.to_string()),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!("kernel:           {}", k.kernel);
    match &k.usable {
        Ok(()) => println!("io_uring:         usable"),
        Err(why) => println!("io_uring:         NOT usable: {why}"),
    }
    if k.usable.is_ok() {
        println!("features:         {}", k.feature_names());
        println!("setup flags:      {}", k.setup_flag_names());
        if let Some(p) = &k.probe {
            println!(
                "opcodes ({}):     {}",
                p.supported_names().len(),
                p.supported_names().join(" ")
            );
            let missing = p.unsupported_names();
            if !missing.is_empty() {
                println!("missing opcodes:  {}", missing.join(" "));
            }
        }
    }
    match auto {
        Ok(r) => {
            println!("Backend::Auto:    {r}");
            for a in &r.attempts {
                println!("  tried first:    {a}");
            }
        }
        Err(e) => println!("Backend::Auto:    cannot build a runtime: {e}"),
    }
    Ok(())
}

fn bench_echo(a: BenchEchoArgs) -> std::io::Result<()> {
    if let Some(cpu) = a.cpu {
        ringkit::pin_to_cpu(cpu)?;
    }
    let cfg = EchoLoadConfig {
        addr: a.addr,
        conns: a.conns,
        len: a.len,
        duration: Duration::from_secs(a.secs),
        pipeline: a.pipeline,
        backend: a.backend,
    };
    println!(
        "Benchmarking: {}\n{} clients, running {} bytes, {} sec.{}\n",
        a.addr,
        a.conns,
        a.len,
        a.secs,
        a.cpu
            .map(|c| format!(" (pinned to CPU {c})"))
            .unwrap_or_default()
    );
    let r = match a.client.as_str() {
        "ringkit" => echo_load::run_load(&cfg, &mut |_| {})?,
        "threads" => echo_load::run_load_threads(&cfg)?,
        other => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("unknown client {other:?} (ringkit|threads)"),
            ))
        }
    };
    println!(
        "Speed: {:.0} request/sec, {:.0} response/sec",
        r.requests as f64 / r.secs,
        r.responses as f64 / r.secs
    );
    println!("Requests: {}\nResponses: {}", r.requests, r.responses);
    println!(
        "Window: {:.3} s measured after {:.3} s of connecting\nLatency: p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us, mean {:.1} us",
        r.secs, r.connect_secs, r.p50_us, r.p99_us, r.p999_us, r.mean_us
    );
    println!(
        "Generator CPU: {:.0}% of one core; {:.0} round trips per generator CPU-second",
        100.0 * r.client_cpu_s / r.secs.max(1e-9),
        r.rps_per_client_cpu()
    );
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
    }
    if !r.ok() {
        return Err(std::io::Error::other(format!(
            "run FAILED: {} connections failed, {} mismatches{}",
            r.failed_conns,
            r.mismatches,
            r.first_error
                .map(|e| format!(" (first error: {e})"))
                .unwrap_or_default()
        )));
    }
    Ok(())
}

/// `on` or `off` (also `1`/`0`, `true`/`false`).
pub(crate) fn parse_on_off(v: &str) -> Result<bool, String> {
    match v {
        "on" | "1" | "true" => Ok(true),
        "off" | "0" | "false" => Ok(false),
        _ => Err(format!("{v:?}: expected on or off")),
    }
}

type StudyFn = fn(&StudyOpts, &mut dyn FnMut(&str)) -> std::io::Result<Section>;

/// Every study `compare` knows, in the order `compare` (all) runs them.
const STUDIES: [(&str, StudyFn); 14] = [
    ("echo", ringkit_bench::echo::study),
    ("generator", ringkit_bench::generator::study),
    ("http", ringkit_bench::http::study),
    ("static", ringkit_bench::serve::study),
    ("axum", ringkit_bench::axum::study),
    ("tls", ringkit_bench::tls::study),
    ("app", ringkit_bench::app::study),
    ("hosting", ringkit_bench::app::hosting),
    ("grpc", ringkit_bench::grpc::study),
    ("pipeline", ringkit_bench::pipeline::study),
    ("wakeup", ringkit_bench::wakeup::study),
    ("nop", ringkit_bench::nop::study),
    ("file", ringkit_bench::file::study),
    ("log", ringkit_bench::log::study),
];

/// Studies that `compare` (all) runs only with `--full`.
const LONG_ONLY: [&str; 3] = ["app", "hosting", "grpc"];

/// Names that run several studies, or one under another name: `compare
/// http` is the HTTP study with its axum and TLS parts.
const GROUPS: [(&str, &[&str]); 3] = [
    ("http", &["http", "axum", "tls", "pipeline"]),
    ("service", &["app", "hosting", "grpc"]),
    ("http-core", &["http"]),
];

fn compare_cmd(a: CompareArgs) -> std::io::Result<()> {
    let names = || {
        let studies = STUDIES.map(|(n, _)| n);
        let groups = GROUPS
            .iter()
            .map(|(g, _)| *g)
            .filter(|g| !studies.contains(g));
        studies
            .into_iter()
            .chain(groups)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let study = |name: &str| STUDIES.iter().copied().find(|(n, _)| *n == name);
    let quick = a.quick || !a.full;
    let studies: Vec<(&str, StudyFn)> = match a.study.as_deref() {
        // The short `all` leaves out the studies that need PostgreSQL and
        // Redis and build a large example: run them by name or with --full.
        None | Some("all") if quick => STUDIES
            .iter()
            .copied()
            .filter(|(n, _)| !LONG_ONLY.contains(n))
            .collect(),
        None | Some("all") => STUDIES.to_vec(),
        Some(s) => match GROUPS.iter().find(|(g, _)| *g == s) {
            Some((_, parts)) => parts.iter().filter_map(|p| study(p)).collect(),
            None => match study(s) {
                Some(study) => vec![study],
                None => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        format!("unknown study {s:?}: available: {} (or all)", names()),
                    ))
                }
            },
        },
    };
    let me = std::env::current_exe()?;
    let out = a.out.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(format!(
            "compare-{}",
            ringkit_bench::harness::sysinfo::utc_now().replace(':', "")
        ))
    });
    let opts = StudyOpts {
        quick,
        rounds: a.rounds,
        secs: a.secs,
        server_cpu: a.server_cpu,
        client_cpu: a.client_cpu,
        peer_syscalls: if a.no_strace || quick {
            None
        } else {
            ringkit_bench::harness::syscalls::SyscallTool::detect()
        },
        out_dir: out.clone(),
        ringkit_bin: me.clone(),
        peer_bin: ringkit_bench::harness::peers::peer_binary(&me),
        want_peer_syscalls: !a.no_strace && !quick,
        conns: a.conns.clone(),
        msg_len: a.len,
        pipeline: a.pipeline.max(1),
        only: a.only.clone(),
    };
    let mut sections = Vec::new();
    let mut failed = Vec::new();
    for (study, f) in studies {
        let r = run_study(study, &opts, f);
        match r {
            Ok(sec) => {
                println!("\n== {} ==\n{}", sec.study, sec.table);
                sections.push(sec);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
                eprintln!("ringkit compare: skipped study {study}: {e}");
                sections.push(Section {
                    study: study.into(),
                    markdown: format!("## {study}\n\nSkipped: {e}\n"),
                    json: serde_json::json!({ "skipped": e.to_string() }),
                    ..Default::default()
                });
            }
            Err(e) => {
                eprintln!("ringkit compare: study {study} failed: {e}");
                failed.push(format!("{study}: {e}"));
            }
        }
    }
    ringkit_bench::harness::study::write_sections(
        &ringkit_bench::harness::sysinfo::SystemInfo::gather(),
        &sections,
        &out,
    )?;
    println!(
        "\nwrote {}/results.json, report.md and the SVG charts",
        out.display()
    );
    if failed.is_empty() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "studies failed: {}",
            failed.join("; ")
        )))
    }
}

/// Run one study with a spinner showing its progress messages.
fn run_study(name: &str, opts: &StudyOpts, f: StudyFn) -> std::io::Result<Section> {
    let pb = ProgressBar::new_spinner();
    pb.set_style(
        ProgressStyle::with_template("{spinner} {elapsed_precise} {prefix}: {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb.set_prefix(name.to_string());
    pb.enable_steady_tick(Duration::from_millis(200));
    let r = f(opts, &mut |m| pb.set_message(m.to_string()));
    pb.finish_and_clear();
    r
}
