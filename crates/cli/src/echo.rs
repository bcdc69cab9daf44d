//! `ringkit echo` (the echo server) and `ringkit bench echo` (its load
//! generator, flags and output line as rust_echo_bench's).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use ringkit::Backend;
use ringkit_bench::echo::load::{self as echo_load, EchoLoadConfig};
use ringkit_echo::{EchoLimits, EchoServerConfig, RecvMode};

use crate::parse_on_off;

#[derive(Args, Debug)]
#[command(mut_arg("addr", |a| a.default_value("127.0.0.1:7000")))]
pub struct EchoArgs {
    /// Address (default 127.0.0.1:7000), backend, threads, CPUs.
    #[command(flatten)]
    launch: ringkit::LaunchArgs,
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
    /// Write runtime counters to PATH.<thread> at start and on SIGUSR1, from
    /// a writer thread, never on the serving loop (used by `compare`).
    #[arg(long)]
    stats: Option<PathBuf>,
    /// io_uring: how the loop waits when it blocks (IORING_FEAT_MIN_TIMEOUT,
    /// Linux 6.12). WANT:MICROS (e.g. 32:50): always wait for up to WANT
    /// completions per enter, returning after MICROS once one is ready
    /// (fewer enters under load, up to MICROS more latency when traffic is
    /// light). auto (= auto:32:50): the same, but only while the loop is
    /// the bottleneck (its thread on CPU for 95% of the last few
    /// milliseconds; off again below 75%), so neither light traffic nor
    /// slow clients pay for it. off (the default): wake for every
    /// completion.
    #[arg(long, default_value = "off", env = "RINGKIT_BATCH_WAIT")]
    batch_wait: ringkit::BatchWait,
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
    /// Close a connection whose peer vanished (every packet dropped, no
    /// FIN, no RST) within about this many seconds: TCP keepalive probes
    /// and TCP_USER_TIMEOUT; a live idle peer answers the probes and stays.
    /// 0: off (the kernel notices after minutes of retransmissions, or
    /// never when nothing is owed).
    #[arg(long, default_value_t = 300.0)]
    dead_peer_timeout: f64,
    /// Close a connection that sends nothing for this many seconds (a live
    /// idle peer too: idle sockets must not hold the fd table); 0: never.
    #[arg(long, default_value_t = 60.0)]
    idle_timeout: f64,
}

/// Run the echo server until SIGINT/SIGTERM.
pub fn run(a: EchoArgs) -> std::io::Result<()> {
    ringkit_echo::run_server(EchoServerConfig {
        addr: a.launch.addr_or("127.0.0.1:7000"),
        backend: a.launch.backend,
        threads: a.launch.threads,
        cpus: a.launch.cpus,
        recv: a.recv,
        fixed_files: a.fixed_files,
        recv_bundle: a.recv_bundle,
        send_batch: a.send_batch,
        stats: a.stats,
        limits: EchoLimits {
            entries: a.entries,
            recv_buffers: a.recv_buffers.map(|n| (n, a.recv_buffer_size)),
            nofile: a.nofile,
            batch_wait: a.batch_wait,
            drain_idle: Duration::from_millis(a.drain_idle_ms),
            drain_timeout: Duration::from_secs_f64(a.drain_secs.max(0.0)),
            // 0: no limit.
            send_timeout: Duration::from_secs_f64(a.send_timeout.max(0.0)),
            dead_peer_timeout: Duration::from_secs_f64(a.dead_peer_timeout.max(0.0)),
            idle_timeout: Duration::from_secs_f64(a.idle_timeout.max(0.0)),
        },
    })
}

#[derive(Args, Debug)]
pub struct BenchEchoArgs {
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
    /// Open loop: send this many messages per second in all, each at its
    /// scheduled moment (not when the last reply came back), and count
    /// latency from that moment (free of coordinated omission). Each
    /// connection keeps as many messages in flight as its schedule needs;
    /// those unanswered or unsent at the window's end count with their
    /// wait up to the end. Default: closed loop. Needs --pipeline 1 and the
    /// ringkit client (the threads client refuses it).
    #[arg(long)]
    rate: Option<f64>,
    /// Print the result as JSON too.
    #[arg(long)]
    json: bool,
    /// ringkit: one thread, all connections as tasks on the runtime;
    /// threads: one blocking OS thread per connection (rust_echo_bench's
    /// design, to compare generators).
    #[arg(long, default_value = "ringkit")]
    client: String,
}

pub fn bench(a: BenchEchoArgs) -> std::io::Result<()> {
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
        rate: a.rate,
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
        "threads" => echo_load::run_load_threads(&cfg, &mut |_| {})?,
        other => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("unknown client {other:?} (ringkit|threads)"),
            ))
        }
    };
    // rust_echo_bench's line; in an open loop "request" is what the
    // schedule offered, sent or not.
    println!(
        "Speed: {:.0} request/sec{}, {:.0} response/sec",
        r.requests as f64 / r.secs,
        if a.rate.is_some() { " (offered)" } else { "" },
        r.responses as f64 / r.secs
    );
    println!("Requests: {}\nResponses: {}", r.requests, r.responses);
    println!(
        "Window: {:.3} s measured after {:.3} s of connecting\nLatency: p50 {:.1} us, p90 {:.1} us, p99 {:.1} us, p99.9 {:.1} us, max {:.1} us, mean {:.1} us",
        r.secs, r.connect_secs, r.p50_us, r.p90_us, r.p99_us, r.p999_us, r.max_us, r.mean_us
    );
    match a.rate {
        // The schedule fixes each connection's share: no fairness figure.
        Some(x) => println!(
            "Open loop at {x:.0} messages/s: {} unanswered and {} unsent at the window's end (in the latencies up to the end); at most {} in flight on one connection",
            r.unanswered, r.unsent, r.most_in_flight
        ),
        None => println!(
            "Fairness: responses per connection min {} / median {} / max {}, Jain's index {:.3}",
            r.conn_min, r.conn_median, r.conn_max, r.jain,
        ),
    }
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
