//! A local cluster of `ringkit raft serve` processes (or the tokio peer's
//! nodes): the settings every node shares, starting and stopping nodes,
//! making the cluster and finding its leader, and scratch directories.
//! `ringkit raft cluster`, `raft bench` and `torture raft` use it.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use ringkit::Backend;
use ringkit_raft::client::{Answer2, Client, Reply};
use ringkit_raft::openraft::BasicNode;
use ringkit_raft::wire::Call;

/// Settings every node of a cluster shares.
#[derive(Args, Debug, Clone)]
pub struct NodeArgs {
    /// Write the log with O_DIRECT.
    #[arg(long)]
    pub direct: bool,
    /// Log segment size, MiB.
    #[arg(long, default_value_t = 64)]
    pub segment_mib: u64,
    /// Log segment size in KiB instead (at least 64, a multiple of 4):
    /// small segments roll and purge often.
    #[arg(long, conflicts_with = "segment_mib")]
    pub segment_kib: Option<u64>,
    /// Unlink the log segments a snapshot's purge leaves rather than
    /// reuse them as later segments (the log's default before recycling).
    #[arg(long)]
    pub no_recycle: bool,
    /// Heartbeat interval, ms (elections after 3 to 6 of them).
    #[arg(long, default_value_t = 100)]
    pub heartbeat_ms: u64,
    /// Snapshot (and purge the log behind it) every this many entries.
    #[arg(long, default_value_t = 10_000)]
    pub snapshot_every: u64,
    /// Save the committed log id at most every this many ms (0: durably
    /// on every commit, which drains the log's pipeline each time).
    #[arg(long, default_value_t = 50)]
    pub committed_every_ms: u64,
    /// auto | uring | epoll.
    #[arg(long, default_value = "auto")]
    pub backend: Backend,
    /// Pin the node to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
}

impl NodeArgs {
    /// The log segment size these settings give, bytes.
    pub fn segment_bytes(&self) -> u64 {
        match self.segment_kib {
            Some(k) => k << 10,
            None => self.segment_mib.max(1) << 20,
        }
    }

    /// The arguments that give a `ringkit raft serve` these settings.
    pub fn to_args(&self) -> Vec<String> {
        let mut v = vec![
            match self.segment_kib {
                Some(k) => format!("--segment-kib={k}"),
                None => format!("--segment-mib={}", self.segment_mib),
            },
            format!("--heartbeat-ms={}", self.heartbeat_ms),
            format!("--snapshot-every={}", self.snapshot_every),
            format!("--committed-every-ms={}", self.committed_every_ms),
            format!("--backend={}", backend_name(self.backend)),
        ];
        if self.direct {
            v.push("--direct".into());
        }
        if self.no_recycle {
            v.push("--no-recycle".into());
        }
        if let Some(c) = self.cpu {
            v.push(format!("--cpu={c}"));
        }
        v
    }
}

fn backend_name(b: Backend) -> &'static str {
    match b {
        Backend::Auto => "auto",
        Backend::Uring => "uring",
        Backend::Epoll => "epoll",
    }
}

/// A node running as a child process.
#[derive(Debug)]
pub struct NodeProc {
    pub id: u64,
    pub addr: SocketAddr,
    pub dir: PathBuf,
    /// The peer binary it runs as `ringkit-peer openraft-node` (`None`:
    /// `ringkit raft serve`).
    pub peer: Option<PathBuf>,
    /// The network namespace it runs in (`None`: this one).
    pub netns: Option<String>,
    child: Option<Child>,
}

/// Node `id`'s address: 127.0.0.1N:port (its own IP, so firewall rules
/// can cut it off alone).
pub fn node_addr(id: u64, port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 10 + id as u8], port))
}

impl NodeProc {
    /// Start node `id` of `root` (its data in `root/nID`).
    pub fn start(id: u64, port: u16, root: &Path, node: &NodeArgs) -> io::Result<NodeProc> {
        Self::launch(id, node_addr(id, port), root, node, None, None)
    }

    /// Start node `id` of `root` on `addr` inside network namespace
    /// `netns` (run through `ip netns exec`, which becomes the node).
    pub fn start_in(
        id: u64,
        addr: SocketAddr,
        root: &Path,
        node: &NodeArgs,
        netns: String,
    ) -> io::Result<NodeProc> {
        Self::launch(id, addr, root, node, None, Some(netns))
    }

    /// Start node `id` of `root` as the openraft node on tokio of the
    /// `ringkit-peer` binary `peer` (the settings of `node` that apply to
    /// it: heartbeat, snapshots, committed id, CPU).
    pub fn start_peer(
        id: u64,
        port: u16,
        root: &Path,
        node: &NodeArgs,
        peer: PathBuf,
    ) -> io::Result<NodeProc> {
        Self::launch(id, node_addr(id, port), root, node, Some(peer), None)
    }

    fn launch(
        id: u64,
        addr: SocketAddr,
        root: &Path,
        node: &NodeArgs,
        peer: Option<PathBuf>,
        netns: Option<String>,
    ) -> io::Result<NodeProc> {
        let mut p = NodeProc {
            id,
            addr,
            dir: root.join(format!("n{id}")),
            peer,
            netns,
            child: None,
        };
        p.restart(node)?;
        Ok(p)
    }

    /// Start it again (after a kill), on the same data.
    pub fn restart(&mut self, node: &NodeArgs) -> io::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.with_extension("log"))?;
        let exe = match &self.peer {
            None => std::env::current_exe()?,
            Some(peer) => peer.clone(),
        };
        // `ip netns exec NS PROGRAM` execs PROGRAM in place: the child's
        // pid is the node's.
        let mut cmd = match &self.netns {
            None => Command::new(&exe),
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(&exe);
                c
            }
        };
        match &self.peer {
            None => {
                cmd.args(["raft", "serve"]).args(node.to_args());
            }
            Some(_) => {
                cmd.arg("openraft-node").args([
                    format!("--heartbeat-ms={}", node.heartbeat_ms),
                    format!("--snapshot-every={}", node.snapshot_every),
                    format!("--committed-every-ms={}", node.committed_every_ms),
                ]);
                if let Some(cpu) = node.cpu {
                    cmd.arg(format!("--cpu={cpu}"));
                }
            }
        }
        let child = cmd
            .arg(format!("--id={}", self.id))
            .arg(format!("--listen={}", self.addr))
            .arg(format!("--dir={}", self.dir.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        self.child = Some(child);
        Ok(())
    }

    /// Send `sig` to it (by pid) and reap it.
    pub fn kill(&mut self, sig: i32) {
        self.signal(sig);
        self.reap();
    }

    /// Send `sig` to it (by pid), if it runs; not reaped (see
    /// [`NodeProc::reap`]).
    pub fn signal(&self, sig: i32) {
        if let Some(c) = &self.child {
            // SAFETY: kill(2) on the pid of a child we spawned and have not
            // reaped yet (so the pid is still ours).
            unsafe { libc::kill(c.id() as i32, sig) };
        }
    }

    /// Wait for it to end (after a signal that ends it).
    pub fn reap(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
    }

    /// How it ended, if it has ended on its own (reaped then); `None`
    /// while it runs, or when it was never started or already reaped.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        let status = self.child.as_mut()?.try_wait().ok()??;
        self.child = None;
        Some(status)
    }

    /// Whether it has a process (running, stopped, or ended unreaped).
    pub fn is_started(&self) -> bool {
        self.child.is_some()
    }
}

impl Drop for NodeProc {
    fn drop(&mut self) {
        self.kill(libc::SIGKILL);
    }
}

/// The (id, address) list a client takes.
pub fn members(nodes: &[NodeProc]) -> Vec<(u64, String)> {
    nodes.iter().map(|n| (n.id, n.addr.to_string())).collect()
}

/// Make the cluster (init on node 1, retried until it listens) and wait
/// for a leader; returns its id.
pub async fn make_cluster(nodes: &[NodeProc], within: Duration) -> io::Result<u64> {
    let list = members(nodes);
    let init: BTreeMap<u64, BasicNode> = list
        .iter()
        .map(|(id, a)| (*id, BasicNode { addr: a.clone() }))
        .collect();
    let mut c = Client::new(list);
    let until = Instant::now() + within;
    loop {
        match c.call_on(0, &Call::Init(init.clone())).await {
            Reply::Refused(_) if Instant::now() < until => {
                ringkit::time::sleep(Duration::from_millis(20)).await
            }
            Reply::Refused(why) => return Err(io::Error::other(format!("node 1: {why}"))),
            _ => break,
        }
    }
    wait_leader(&mut c, nodes.len(), until).await
}

/// The leader the nodes agree on, once one is.
pub async fn wait_leader(c: &mut Client, n: usize, until: Instant) -> io::Result<u64> {
    loop {
        for i in 0..n {
            if let Reply::Ok(Answer2::Status(s)) = c.status_of(i).await {
                if s.state == "Leader" {
                    return Ok(s.id);
                }
            }
        }
        if Instant::now() >= until {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no leader elected in time",
            ));
        }
        ringkit::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A scratch directory: `dir` if given (must not exist), else a new one
/// under the temp dir; the second value says whether to remove it after.
pub fn scratch(dir: Option<PathBuf>, what: &str) -> io::Result<(PathBuf, bool)> {
    match dir {
        Some(d) => {
            if d.exists() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists: give a directory that does not", d.display()),
                ));
            }
            std::fs::create_dir_all(&d)?;
            Ok((d, false))
        }
        None => {
            let d = std::env::temp_dir().join(format!("ringkit-{what}-{}", std::process::id()));
            std::fs::create_dir_all(&d)?;
            Ok((d, true))
        }
    }
}

/// Stop the nodes (SIGTERM: they shut openraft down) and remove their
/// data if asked.
pub fn teardown(nodes: &mut [NodeProc], root: &Path, remove: bool) {
    for n in nodes {
        n.kill(libc::SIGTERM);
    }
    if remove {
        let _ = std::fs::remove_dir_all(root);
    }
}
