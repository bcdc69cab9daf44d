//! `ringkit raft bench`: commits per second and commit latency of a local
//! cluster of the replicated map, under closed-loop clients writing to
//! the leader (each `set` answered once committed by a majority and
//! applied). The nodes run pinned to `--cpu` (default 0), the clients to
//! `--client-cpu` (default 1).
//!
//! `--engine tokio` runs the same cluster as `ringkit-peer openraft-node`
//! processes (openraft on tokio, its log an append file with fsync per
//! batch), the peer `compare raft` sets beside ringkit.

use std::cell::RefCell;
use std::io;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use clap::Args;
use hdrhistogram::Histogram;
use ringkit_raft::client::{Client, Reply};

use crate::raft_cluster::{make_cluster, members, scratch, teardown, NodeArgs, NodeProc};

/// `ringkit raft bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Nodes.
    #[arg(long, default_value_t = 3)]
    pub nodes: u64,
    /// Concurrent clients, each one write at a time.
    #[arg(long, default_value_t = 32)]
    pub clients: usize,
    /// Seconds measured (after --warmup).
    #[arg(long, default_value_t = 5.0)]
    pub secs: f64,
    /// Seconds of load before measuring.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Bytes of each value written.
    #[arg(long, default_value_t = 100)]
    pub value: usize,
    /// The port every node listens on (node N on 127.0.0.1N).
    #[arg(long, default_value_t = 7500)]
    pub port: u16,
    /// Directory of the nodes' data (default: a new one under the temp
    /// dir, removed after).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// CPU of the clients.
    #[arg(long, default_value_t = 1)]
    pub client_cpu: usize,
    /// Print one JSON line too.
    #[arg(long)]
    pub json: bool,
    /// The nodes: ringkit (`ringkit raft serve`: ringkit-log on ringkit)
    /// or tokio (`ringkit-peer openraft-node`: openraft on tokio, an
    /// append file with fsync per batch; built first if out of date).
    #[arg(long, value_enum, default_value = "ringkit")]
    pub engine: Engine,
    /// The `ringkit-peer` binary for `--engine tokio` (default: the one
    /// next to this `ringkit`, built first if out of date).
    #[arg(long)]
    pub peer_bin: Option<PathBuf>,
    #[command(flatten)]
    pub node: NodeArgs,
}

/// Which nodes `ringkit raft bench` runs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// ringkit-log on ringkit.
    Ringkit,
    /// openraft on tokio with an append-file log (`ringkit-peer`).
    Tokio,
}

pub fn bench(mut a: BenchArgs) -> io::Result<()> {
    if a.node.cpu.is_none() {
        a.node.cpu = Some(0);
    }
    let peer = match a.engine {
        Engine::Ringkit => None,
        Engine::Tokio => {
            if a.node.direct {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "--direct: the tokio peer's log file is buffered (fsync per batch)",
                ));
            }
            if a.node.no_recycle {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "--no-recycle: the tokio peer's log is one append file, with no segments",
                ));
            }
            match a.peer_bin.clone() {
                Some(p) => Some(p),
                None => {
                    let me = std::env::current_exe()?;
                    Some(
                        ringkit_bench::harness::peers::peer_binary(&me)
                            .map_err(io::Error::other)?,
                    )
                }
            }
        }
    };
    let (root, remove) = scratch(a.dir.clone(), "raft-bench")?;
    let mut nodes: Vec<NodeProc> = (1..=a.nodes.clamp(1, 9))
        .map(|id| match &peer {
            None => NodeProc::start(id, a.port, &root, &a.node),
            Some(p) => NodeProc::start_peer(id, a.port, &root, &a.node, p.clone()),
        })
        .collect::<io::Result<_>>()?;
    let _ = ringkit::pin_to_cpu(a.client_cpu);
    let rt = ringkit::Runtime::new()?;
    let res = rt.block_on(async {
        make_cluster(&nodes, Duration::from_secs(10)).await?;
        let hist = Rc::new(RefCell::new(
            Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("bounds"),
        ));
        let failed = Rc::new(RefCell::new(0u64));
        let start = Instant::now();
        let measure_from = start + Duration::from_secs_f64(a.warmup);
        let until = measure_from + Duration::from_secs_f64(a.secs);
        let value = "v".repeat(a.value);
        let tasks: Vec<_> = (0..a.clients.max(1))
            .map(|i| {
                let (hist, failed, value) = (hist.clone(), failed.clone(), value.clone());
                let mut c = Client::new(members(&nodes));
                ringkit::spawn(async move {
                    let key = format!("k{i}");
                    while Instant::now() < until {
                        let t = Instant::now();
                        let r = c.set(&key, &value).await;
                        let done = Instant::now();
                        if t < measure_from || done > until {
                            continue;
                        }
                        match r {
                            Reply::Ok(_) => {
                                let us = (done - t).as_micros().max(1) as u64;
                                hist.borrow_mut().saturating_record(us);
                            }
                            _ => *failed.borrow_mut() += 1,
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            let _ = t.await;
        }
        let h = hist.borrow();
        let n = h.len();
        let rate = n as f64 / a.secs;
        let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        println!(
            "ringkit raft bench ({}): {} nodes, {} clients, {:.1} s: {:.0} commits/s, p50 {:.2} ms, \
             p99 {:.2} ms, p99.9 {:.2} ms, {} failed",
            engine_name(a.engine, a.node.backend),
            nodes.len(),
            a.clients,
            a.secs,
            rate,
            ms(0.5),
            ms(0.99),
            ms(0.999),
            failed.borrow()
        );
        if a.json {
            println!(
                "{}",
                serde_json::json!({
                    "commits_per_sec": rate,
                    "p50_ms": ms(0.5),
                    "p99_ms": ms(0.99),
                    "p999_ms": ms(0.999),
                    "failed": *failed.borrow(),
                    "clients": a.clients,
                    "engine": engine_name(a.engine, a.node.backend),
                })
            );
        }
        Ok::<_, io::Error>(())
    });
    teardown(&mut nodes, &root, remove);
    res
}

/// The nodes' name in the output: `ringkit-uring`, `ringkit-epoll`,
/// `ringkit-auto` or `openraft-tokio`.
fn engine_name(e: Engine, b: ringkit::Backend) -> &'static str {
    match (e, b) {
        (Engine::Tokio, _) => "openraft-tokio",
        (Engine::Ringkit, ringkit::Backend::Uring) => "ringkit-uring",
        (Engine::Ringkit, ringkit::Backend::Epoll) => "ringkit-epoll",
        (Engine::Ringkit, ringkit::Backend::Auto) => "ringkit-auto",
    }
}
