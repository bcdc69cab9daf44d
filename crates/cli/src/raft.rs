//! `ringkit raft`: a node of the replicated key-value map, and a local
//! cluster of them (each node its own process, on its own loopback
//! address, 127.0.0.1N).

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use ringkit_raft::node::{serve, NodeConfig};

use crate::raft_cluster::{make_cluster, scratch, teardown, NodeArgs, NodeProc};

/// `ringkit raft`.
#[derive(Subcommand, Debug)]
pub enum RaftCmd {
    /// Run one node until SIGTERM or Ctrl-C.
    Serve(ServeArgs),
    /// Start a cluster of local nodes (one process each), make it, and
    /// keep it running until Ctrl-C or --secs.
    Cluster(ClusterArgs),
    /// Commits/s and commit latency of a local cluster under closed-loop
    /// writers.
    Bench(crate::raft_bench::BenchArgs),
}

/// `ringkit raft serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// This node's id (1, 2, ...).
    #[arg(long)]
    pub id: u64,
    /// Where it listens; its connections to other nodes leave from this
    /// IP too.
    #[arg(long)]
    pub listen: SocketAddr,
    /// Its directory (log/ and sm/ inside; made if missing).
    #[arg(long)]
    pub dir: PathBuf,
    #[command(flatten)]
    pub node: NodeArgs,
}

/// `ringkit raft cluster`.
#[derive(Args, Debug)]
pub struct ClusterArgs {
    /// Nodes (node N listens on 127.0.0.1N:PORT).
    #[arg(long, default_value_t = 3)]
    pub nodes: u64,
    /// The port every node listens on (each on its own address).
    #[arg(long, default_value_t = 7100)]
    pub port: u16,
    /// Directory of the nodes' data (default: a new one under the temp
    /// dir, removed after).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Stop after this many seconds (default: at Ctrl-C).
    #[arg(long)]
    pub secs: Option<f64>,
    #[command(flatten)]
    pub node: NodeArgs,
}

pub fn raft(cmd: RaftCmd) -> io::Result<()> {
    match cmd {
        RaftCmd::Serve(a) => serve_node(a),
        RaftCmd::Cluster(a) => cluster(a),
        RaftCmd::Bench(a) => crate::raft_bench::bench(a),
    }
}

fn serve_node(a: ServeArgs) -> io::Result<()> {
    if let Some(cpu) = a.node.cpu {
        ringkit::pin_to_cpu(cpu)?;
    }
    ringkit::signal::install()?;
    let mut cfg = NodeConfig::new(a.id, a.listen, &a.dir);
    cfg.log.direct = a.node.direct;
    cfg.log.segment_size = a.node.segment_bytes();
    cfg.log.recycle_segments = !a.node.no_recycle;
    // A batch must fit a segment with room to spare: at most a quarter of
    // one (the log's default, 1 MiB, for segments of 4 MiB and more).
    cfg.log.max_batch = cfg.log.max_batch.min(cfg.log.segment_size as usize / 4);
    cfg.heartbeat_ms = a.node.heartbeat_ms.max(10);
    cfg.snapshot_every = a.node.snapshot_every.max(2);
    cfg.committed_every = Duration::from_millis(a.node.committed_every_ms);
    let rt = ringkit::Runtime::builder()
        .backend(a.node.backend)
        .build()?;
    eprintln!(
        "ringkit raft: node {} on {} ({}), data in {}",
        a.id,
        a.listen,
        rt.backend_report(),
        a.dir.display()
    );
    rt.block_on(serve(cfg, ringkit::signal::shutdown_requested()))
}

fn cluster(a: ClusterArgs) -> io::Result<()> {
    ringkit::signal::install()?;
    let (root, remove) = scratch(a.dir.clone(), "raft-cluster")?;
    let mut nodes = Vec::new();
    for id in 1..=a.nodes.clamp(1, 9) {
        nodes.push(NodeProc::start(id, a.port, &root, &a.node)?);
    }
    let rt = ringkit::Runtime::new()?;
    let res = rt.block_on(async {
        let leader = make_cluster(&nodes, Duration::from_secs(10)).await?;
        println!("ringkit raft: {} nodes, leader {leader}:", nodes.len());
        for n in &nodes {
            println!("  node {} on {} (data {})", n.id, n.addr, n.dir.display());
        }
        match a.secs {
            Some(s) => {
                let stop = ringkit::signal::shutdown_requested();
                let wait = ringkit::time::sleep(Duration::from_secs_f64(s));
                ringkit::sync::select(std::pin::pin!(stop), std::pin::pin!(wait)).await;
            }
            None => ringkit::signal::shutdown_requested().await,
        }
        Ok::<_, io::Error>(())
    });
    teardown(&mut nodes, &root, remove);
    res
}
