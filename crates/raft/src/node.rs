//! A node of the replicated map: its log on ringkit-log, its state
//! machine, openraft on ringkit, and a listener answering nodes and
//! clients ([`crate::wire`]).
//!
//! # Why a restarted leader must win an election
//!
//! openraft 0.10's
//! `Config::enable_leader_restore` (on by default) lets a node that led
//! before a restart lead again at once, with no vote, if its vote is
//! committed. That is not Raft, and it is unsafe with this storage: the
//! leader counts itself in a commit only once its own log is durable, so an
//! entry can be committed by the two followers' durable copies while it is
//! still in the leader's group-commit queue. Kill the leader and one
//! follower together: the leader comes back without that tail, resumes in
//! the same term, and hands out the same log ids again with other entries;
//! the restarted follower, seeing matching ids, keeps its old entries, and
//! acknowledged writes are lost (the list forks). The state machine is in
//! memory and the committed id is saved lazily, which the docs of that
//! setting name as the other preconditions. `node.rs` turns it off, so a
//! restarted node is a follower until it wins an election, and an election
//! needs a majority whose logs are no longer than its own: any majority
//! holds a node with every committed entry. What a restarted node claims is
//! then only what it made durable: its vote (saved before it is used), its
//! log (every entry openraft was told is durable), the committed id (saved
//! behind the entries appended before it, so never past the durable log;
//! older than the latest by up to 50 ms) and its last snapshot (synced and
//! renamed before the log behind it is purged). The state machine is
//! rebuilt from those at start. `torture raft --nemesis slow-disk-power-loss`
//! reproduces the loss when the setting is on (`scripts/plant`).
//!
//! # A node whose Raft core stops exits
//! A storage error (a full disk, a failed sync) stops openraft's core; the
//! node then closes its listener and `ringkit raft serve` exits with the
//! reason, so clients get a refused connection and go to another node
//! instead of errors of unknown outcome.

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use openraft::async_runtime::WatchReceiver;
use openraft::{BasicNode, ReadPolicy, SnapshotPolicy};
use ringkit::net::{TcpListener, TcpStream};
use ringkit_log::Options;

use crate::kv::{KvConfig, KvRaft, KvStateMachine};
use crate::network::Network;
use crate::wire::{self, Answer, Call, Status};
use crate::LogStore;

/// How a node runs.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Its id (openraft's node id).
    pub id: u64,
    /// Where it listens; its connections to other nodes leave from this
    /// address too.
    pub listen: SocketAddr,
    /// Its directory: `log/` (ringkit-log) and `sm/` (snapshots).
    pub dir: PathBuf,
    /// The log's options (`O_DIRECT`, segment size, ...).
    pub log: Options,
    /// Heartbeat interval (ms); elections time out after 3 to 6 of them.
    pub heartbeat_ms: u64,
    /// Build a snapshot (and purge the log behind it) every this many
    /// applied entries.
    pub snapshot_every: u64,
    /// How long a connection may stay silent, or leave an answer unread,
    /// before the node closes it.
    pub idle: std::time::Duration,
    /// How long the committed log id may wait to be saved
    /// ([`LogStore::set_committed_every`]; zero: on every commit).
    pub committed_every: std::time::Duration,
}

impl NodeConfig {
    /// Node `id` on `listen` with its data in `dir`: the log's default
    /// options (buffered), 100 ms heartbeats, a snapshot every 10 000
    /// entries, connections let go after [`IDLE`] without progress, the
    /// committed id saved at most every 50 ms.
    pub fn new(id: u64, listen: SocketAddr, dir: impl Into<PathBuf>) -> NodeConfig {
        NodeConfig {
            id,
            listen,
            dir: dir.into(),
            log: Options::default(),
            heartbeat_ms: 100,
            snapshot_every: 10_000,
            idle: IDLE,
            committed_every: std::time::Duration::from_millis(50),
        }
    }
}

/// A running node's parts.
#[derive(Debug)]
struct Node {
    raft: KvRaft,
    sm: KvStateMachine,
    budget: wire::Budget,
    open: std::cell::Cell<usize>,
    idle: std::time::Duration,
}

/// Run node `cfg` until `stop` completes (then openraft is shut down and
/// the listener closed). Must run on a ringkit runtime. The cluster is
/// made by a [`Call::Init`] to one node.
pub async fn serve(cfg: NodeConfig, stop: impl Future<Output = ()>) -> io::Result<()> {
    let store = LogStore::<KvConfig>::open(cfg.dir.join("log"), cfg.log.clone()).await?;
    store.set_committed_every(cfg.committed_every);
    let sm = KvStateMachine::open(cfg.dir.join("sm")).await?;
    let config = openraft::Config {
        cluster_name: "ringkit-kv".into(),
        heartbeat_interval: cfg.heartbeat_ms,
        election_timeout_min: cfg.heartbeat_ms * 3,
        election_timeout_max: cfg.heartbeat_ms * 6,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(cfg.snapshot_every),
        max_in_snapshot_log_to_keep: cfg.snapshot_every / 2,
        // Standard Raft: a restarted leader wins an election like any
        // node. openraft's default lets it resume leading with no vote,
        // which is unsafe here: its log tail may not have been durable
        // when it died (the followers' copies made those entries
        // committed), so it would hand out the same log ids again with
        // other entries (see the module docs).
        enable_leader_restore: Some(false),
        ..Default::default()
    };
    let config = Arc::new(
        config
            .validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?,
    );
    let net = Network {
        local: Some(cfg.listen),
    };
    let raft = KvRaft::new(cfg.id, config, net, store, sm.clone())
        .await
        .map_err(|e| io::Error::other(format!("raft: {e}")))?;
    let node = Rc::new(Node {
        raft,
        sm,
        budget: wire::Budget::new(FRAME_BUDGET),
        open: std::cell::Cell::new(0),
        idle: cfg.idle,
    });
    let listener = TcpListener::bind(cfg.listen)?;
    let accept = async {
        loop {
            match listener.accept().await {
                Ok((s, _)) if node.open.get() >= MAX_CONNECTIONS => drop(s),
                Ok((s, _)) => {
                    let node = node.clone();
                    node.open.set(node.open.get() + 1);
                    ringkit::spawn(async move {
                        if let Err(e) = connection(&node, s).await {
                            tracing::debug!("raft node: a connection ended: {e}");
                        }
                        node.open.set(node.open.get() - 1);
                    });
                }
                Err(e) => {
                    tracing::warn!("raft node: accept: {e}");
                    ringkit::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            }
        }
    };
    // A node whose Raft core has stopped (a storage error, say a full
    // disk) must not go on answering: it stops serving and says why.
    let fatal = {
        let died = std::pin::pin!(core_stopped(&node.raft));
        let (accept, stop) = (std::pin::pin!(accept), std::pin::pin!(stop));
        let serving = std::pin::pin!(ringkit::sync::select(accept, stop));
        match ringkit::sync::select(serving, died).await {
            ringkit::sync::Either::Left(_) => None,
            ringkit::sync::Either::Right(why) => Some(why),
        }
    };
    drop(listener);
    let _ = node.raft.shutdown().await;
    match fatal {
        None => Ok(()),
        Some(why) => Err(io::Error::other(format!(
            "node {}: the Raft core stopped ({why}); the node stops serving",
            cfg.id
        ))),
    }
}

/// Completes, with the reason, once `raft`'s core has stopped on its own.
async fn core_stopped(raft: &KvRaft) -> String {
    let mut m = raft.metrics();
    loop {
        if let Err(fatal) = &m.borrow_watched().running_state {
            return fatal.to_string();
        }
        if m.changed().await.is_err() {
            return "its metrics channel closed".into();
        }
    }
}

/// Connections a node keeps open at once (more are closed at accept).
pub const MAX_CONNECTIONS: usize = 1024;
/// Bytes of frames a node reads at once, over all its connections.
pub const FRAME_BUDGET: usize = 2 * wire::MAX_FRAME;
/// How long a connection may stay silent, or leave an answer unread,
/// before the node closes it (the default of [`NodeConfig::idle`]).
pub const IDLE: std::time::Duration = std::time::Duration::from_secs(120);

async fn connection(node: &Node, s: TcpStream) -> io::Result<()> {
    s.set_nodelay(true)?;
    // A peer that stops reading its answers is let go, not waited on.
    s.set_write_timeout(Some(node.idle));
    loop {
        let call =
            match ringkit::time::timeout(node.idle, wire::recv_within::<Call>(&s, &node.budget))
                .await
            {
                Ok(Ok(Some(call))) => call,
                Ok(Ok(None)) => return Ok(()),
                Ok(Err(e)) => return Err(e),
                Err(_) => return Err(io::Error::new(io::ErrorKind::TimedOut, "idle")),
            };
        let answer = answer(node, call).await;
        wire::send(&s, &answer).await?;
    }
}

fn not_leader(f: &openraft::error::ForwardToLeader<KvConfig>) -> Answer {
    Answer::NotLeader(
        f.leader_id
            .zip(f.leader_node.as_ref().map(|n| n.addr.clone())),
    )
}

/// The answer to a write. Only a write refused before its entry was
/// appended is `NotLeader` (certainly not carried out, so a client may
/// send it elsewhere); one whose entry was discarded on a leader change
/// may still commit, so it is an error of unknown outcome, never retried.
pub fn write_answer(
    r: Result<
        openraft::raft::ClientWriteResponse<KvConfig>,
        openraft::error::RaftError<KvConfig, openraft::error::ClientWriteError<KvConfig>>,
    >,
) -> Answer {
    match r {
        Ok(r) => Answer::Written {
            index: r.log_id.index,
            value: r.data.value,
        },
        Err(e) => match e.api_error() {
            Some(openraft::error::ClientWriteError::ForwardToLeader(f)) => not_leader(f),
            _ => Answer::Error(e.to_string()),
        },
    }
}

async fn answer(node: &Node, call: Call) -> Answer {
    let raft = &node.raft;
    match call {
        Call::Append(rpc) => match raft.append_entries(rpc).await {
            Ok(r) => Answer::Append(r),
            Err(e) => Answer::Error(e.to_string()),
        },
        Call::Vote(rpc) => match raft.vote(rpc).await {
            Ok(r) => Answer::Vote(r),
            Err(e) => Answer::Error(e.to_string()),
        },
        Call::Snapshot { vote, meta, data } => {
            let snapshot = openraft::type_config::alias::SnapshotOf::<KvConfig, _> {
                meta,
                snapshot: std::io::Cursor::new(data),
            };
            match raft.install_full_snapshot(vote, snapshot).await {
                Ok(r) => Answer::Snapshot(r),
                Err(e) => Answer::Error(e.to_string()),
            }
        }
        Call::Write(req) => write_answer(raft.client_write(req).await),
        Call::Read(key) => match raft.get_read_linearizer(ReadPolicy::ReadIndex).await {
            Ok(l) => match l.await_ready(raft).await {
                Ok(_) => Answer::Value(node.sm.get(&key)),
                Err(e) => Answer::Error(e.to_string()),
            },
            Err(e) => match e.forward_to_leader() {
                Some(f) => not_leader(f),
                None => Answer::Error(e.to_string()),
            },
        },
        Call::Init(members) => {
            let members: BTreeMap<u64, BasicNode> = members;
            match raft.initialize(members).await {
                Ok(()) => Answer::Done,
                Err(e) => Answer::Error(e.to_string()),
            }
        }
        Call::Status => {
            let m = raft.metrics().borrow_watched().clone();
            Answer::Status(Status {
                id: m.id,
                leader: m.current_leader,
                term: m.current_term,
                last_log: m.last_log_index,
                applied: m.last_applied.map(|l| l.index),
                state: format!("{:?}", m.state),
            })
        }
    }
}
