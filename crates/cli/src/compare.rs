//! `ringkit compare`: the table of studies and the run that writes one
//! results directory (results.json, report.md, the SVG charts).

use std::path::PathBuf;

use clap::Args;
use ringkit_bench::harness::study::{Section, StudyOpts};

use crate::progress::{self, Progress};

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Study to run: echo, generator, http, static, axum, tls, app, hosting,
    /// grpc, service, pipeline, wakeup, nop, file, log, raft, latency, c10k,
    /// hostile or all (default: all). `raft` runs a 3-node openraft cluster
    /// of the replicated map on ringkit (io_uring, epoll) against the same
    /// cluster on tokio with an append-file log (32 clients writing 100 B,
    /// about 2 minutes; `--full` adds 1 client, and 32 writing 4 KiB, about
    /// 10 minutes; with `all` only under `--full`). `hostile` runs the battery of
    /// `ringkit torture hostile --short` against the seven ringkit servers
    /// and nginx (static files, clear and TLS), one table, attack by attack
    /// (about 8 minutes; with `all` only under `--full`, then on both
    /// backends). `latency` drives every server open loop at 25, 50,
    /// 75 and 90% of the best epoll server's open-loop capacity (what it
    /// completes when offered more than it carries) and reports p50
    /// to p99.9 beside the host's own stalls (about 8 minutes; with `all`
    /// only under `--full`); `c10k` holds 10 000 keep-alive connections on
    /// the HTTP, static and axum servers (every request answered, p99 at 50%
    /// of the best epoll server's open-loop capacity). `http` runs four
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
    /// and with `all` also the `app`, `hosting`, `grpc`, `raft`, `latency`, `c10k` and `hostile` studies. About
    /// an hour. Without it, each study runs its short variant (about a
    /// minute each; echo: 3 rounds of 2 s) and `all` is done in about 7
    /// minutes on a 2-core VM.
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
    /// Echo: the load generator: ringkit (one thread, every connection a
    /// task), threads (one blocking OS thread per connection, as
    /// rust_echo_bench; the report's fairness table shows how evenly each
    /// server shares itself among the connections), or rust-echo-bench
    /// (the tool itself, built from its own source: see --echo-bench; the
    /// report gives its own figure beside responses over its whole run)
    #[arg(long, value_enum, default_value = "ringkit")]
    client: ClientArg,
    /// Echo: rust_echo_bench's binary for --client rust-echo-bench
    /// (default: `echo_bench` on PATH; `cargo install --git
    /// https://github.com/haraldh/rust_echo_bench` builds it)
    #[arg(long)]
    echo_bench: Option<PathBuf>,
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

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum ClientArg {
    Ringkit,
    Threads,
    RustEchoBench,
}

type StudyFn = fn(&StudyOpts, &mut dyn FnMut(&str)) -> std::io::Result<Section>;

/// Every study `compare` knows, in the order `compare` (all) runs them.
const STUDIES: [(&str, StudyFn); 18] = [
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
    ("raft", ringkit_bench::raft::study),
    ("latency", ringkit_bench::latency::study),
    ("c10k", ringkit_bench::latency::study_c10k),
    ("hostile", ringkit_bench::torture::hostile::study::study),
];

/// Studies that `compare` (all) runs only with `--full`.
const LONG_ONLY: [&str; 7] = [
    "app", "hosting", "grpc", "raft", "latency", "c10k", "hostile",
];

/// Names that run several studies, or one under another name: `compare
/// http` is the HTTP study with its axum and TLS parts.
const GROUPS: [(&str, &[&str]); 3] = [
    ("http", &["http", "axum", "tls", "pipeline"]),
    ("service", &["app", "hosting", "grpc"]),
    ("http-core", &["http"]),
];

pub fn compare(a: CompareArgs) -> std::io::Result<()> {
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
        echo_client: match a.client {
            ClientArg::Ringkit => ringkit_bench::echo::EchoClient::Ringkit,
            ClientArg::Threads => ringkit_bench::echo::EchoClient::Threads,
            ClientArg::RustEchoBench => ringkit_bench::echo::EchoClient::RustEchoBench,
        },
        echo_bench: a.echo_bench.clone(),
    };
    let mut sections = Vec::new();
    let mut failed = Vec::new();
    let expected: Vec<f64> = studies
        .iter()
        .map(|(n, _)| progress::expected(n, !quick))
        .collect();
    let mut bar = Progress::new(&expected);
    for (i, (study, f)) in studies.into_iter().enumerate() {
        bar.start(i, study, expected[i]);
        let r = f(&opts, &mut |m| bar.message(m));
        bar.finish_study();
        match r {
            Ok(sec) => {
                bar.println(&format!("\n== {} ==\n{}", sec.study, sec.table));
                sections.push(sec);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
                bar.eprintln(&format!("ringkit compare: skipped study {study}: {e}"));
                sections.push(Section {
                    study: study.into(),
                    markdown: format!("## {study}\n\nSkipped: {e}\n"),
                    json: serde_json::json!({ "skipped": e.to_string() }),
                    ..Default::default()
                });
            }
            Err(e) => {
                bar.eprintln(&format!("ringkit compare: study {study} failed: {e}"));
                failed.push(format!("{study}: {e}"));
            }
        }
    }
    bar.finish();
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
