//! `ringkit`: probe the kernel, run the servers, generate load, compare.

use std::process::ExitCode;

mod bench_http;
mod compare;
mod crashcheck;
mod echo;
mod hostile;
mod http;
mod log;
mod log_opts;
mod log_serve;
mod nemesis;
mod netns;
mod probe;
mod progress;
mod raft;
mod raft_bench;
mod raft_cluster;
mod studies;
mod torture;
mod torture_raft;

use clap::{Args, Parser, Subcommand};

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
    Echo(echo::EchoArgs),
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
    Compare(compare::CompareArgs),
    /// Chaos load against a server it starts, every byte verified.
    Torture(torture::TortureArgs),
    /// The durable append log: bench, serve over TCP, dump.
    #[command(subcommand)]
    Log(log::LogCmd),
    /// The replicated key-value map on openraft, ringkit and ringkit-log.
    #[command(subcommand)]
    Raft(raft::RaftCmd),
}

#[derive(Args, Debug)]
#[command(mut_arg("addr", |a| a.default_value("127.0.0.1:3000")))]
struct AxumArgs {
    /// Address (default 127.0.0.1:3000), backend, threads, CPUs.
    #[command(flatten)]
    launch: ringkit::LaunchArgs,
    /// TLS (ALPN h2, http/1.1).
    #[command(flatten)]
    tls: ringkit_tls::TlsArgs,
    /// Timeouts and the connection cap.
    #[command(flatten)]
    conn: http::ConnArgs,
}

#[derive(Subcommand, Debug)]
enum BenchCmd {
    /// Echo load generator (flags and output line as rust_echo_bench).
    Echo(echo::BenchEchoArgs),
    /// HTTP load generator (keep-alive or a new connection per request).
    Http(bench_http::BenchHttpArgs),
    /// Wake-up latency: pipe/eventfd writer on one CPU, reader on the other.
    Wakeup(studies::BenchWakeupArgs),
    /// Ring overhead: NOPs per second by batch size.
    Nop(studies::BenchNopArgs),
    /// File I/O job runner (fio-like), against fio when installed.
    File(studies::BenchFileArgs),
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
        Cmd::Probe { json } => probe::probe(json),
        Cmd::Echo(a) => echo::run(a),
        Cmd::Http(a) => http::http(a),
        Cmd::Serve(a) => http::serve(a),
        Cmd::Axum(a) => axum(a),
        Cmd::Bench(BenchCmd::Echo(a)) => echo::bench(a),
        Cmd::Bench(BenchCmd::Http(a)) => bench_http::bench_http(a),
        Cmd::Bench(BenchCmd::Wakeup(a)) => studies::bench_wakeup(a),
        Cmd::Bench(BenchCmd::Nop(a)) => studies::bench_nop(a),
        Cmd::Bench(BenchCmd::File(a)) => studies::bench_file(a),
        Cmd::Compare(a) => compare::compare(a),
        // The battery of hostile clients has a module of its own.
        Cmd::Torture(a) if a.mode == torture::TortureMode::Hostile => std::env::current_exe()
            .and_then(|exe| {
                hostile::hostile(&a, exe, &mut |m: &str| eprintln!("ringkit torture: {m}"))
            }),
        Cmd::Torture(a) => torture::torture(a),
        Cmd::Log(c) => log::log(c),
        Cmd::Raft(c) => raft::raft(c),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ringkit: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `ringkit axum`: the hello app on ringkit-hyper.
fn axum(a: AxumArgs) -> std::io::Result<()> {
    let mut cfg = ringkit_hyper::ServeConfig::from_args(&a.launch, "127.0.0.1:3000");
    cfg.tls = a.tls.server_config(&[b"h2", b"http/1.1"])?;
    cfg.idle_timeout = http::ConnArgs::secs(a.conn.idle_timeout);
    cfg.header_timeout = http::ConnArgs::secs(a.conn.header_timeout);
    cfg.send_timeout = http::ConnArgs::secs(a.conn.send_timeout);
    cfg.max_connections = a.conn.max_connections.max(1);
    cfg.max_buffered_bytes = a.conn.max_buffered_mib.max(1) << 20;
    ringkit_hyper::serve(cfg, ringkit_hyper::hello::app)
}

/// `on` or `off` (also `1`/`0`, `true`/`false`).
pub(crate) fn parse_on_off(v: &str) -> Result<bool, String> {
    match v {
        "on" | "1" | "true" => Ok(true),
        "off" | "0" | "false" => Ok(false),
        _ => Err(format!("{v:?}: expected on or off")),
    }
}
