//! `ringkit-peer openraft-node`: a node of the replicated map of `ringkit
//! raft`, built the usual way on tokio: the same openraft version, type
//! config, state machine, settings and protocol, with openraft on its
//! default runtime (tokio, current-thread, like the other peers: one
//! thread, pinned by `--cpu`) and its log in an append file written with
//! `tokio::fs`, fsync per batch ([`store`]). `ringkit raft bench
//! --engine tokio` runs a cluster of them; `ringkit compare raft` sets it
//! beside ringkit's.
//!
//! The types, state machine, network and answers are a copy of
//! `ringkit_raft`'s (`kv.rs`, `wire.rs`, `network.rs`, `node.rs`) on
//! tokio, not a dependency: depending on `ringkit-raft` would build
//! openraft with its `single-threaded` feature into this peer, which is
//! meant to be openraft as a tokio user gets it. A change to the protocol
//! is made in both.
//!
//! Usage: `ringkit-peer openraft-node --id N --listen ADDR --dir D
//! [--heartbeat-ms 100] [--snapshot-every 10000] [--committed-every-ms 50]
//! [--cpu C]`

mod net;
mod sm;
mod store;
mod wire;

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use openraft::async_runtime::WatchReceiver;
use openraft::{BasicNode, ReadPolicy, SnapshotPolicy};
use tokio::net::{TcpListener, TcpStream};

use sm::{KvConfig, KvStateMachine};
use wire::{Answer, Call, Status};

type KvRaft = openraft::Raft<KvConfig, KvStateMachine>;

/// A node's settings (the flags of `ringkit raft serve` that a cluster
/// shares).
#[derive(Debug)]
struct Args {
    id: u64,
    listen: SocketAddr,
    dir: PathBuf,
    heartbeat_ms: u64,
    snapshot_every: u64,
    committed_every_ms: u64,
    cpu: Option<usize>,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut flags: BTreeMap<&str, &str> = BTreeMap::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (k, v) = match a.split_once('=') {
            Some((k, v)) => (k, v),
            None => (
                a.as_str(),
                it.next()
                    .map(String::as_str)
                    .ok_or(format!("{a} needs a value"))?,
            ),
        };
        flags.insert(k.trim_start_matches("--"), v);
    }
    fn num<T: std::str::FromStr>(
        f: &BTreeMap<&str, &str>,
        k: &str,
        default: Option<T>,
    ) -> Result<T, String> {
        match f.get(k) {
            Some(v) => v.parse().map_err(|_| format!("--{k}: bad value {v}")),
            None => default.ok_or(format!("--{k} is needed")),
        }
    }
    let known = [
        "id",
        "listen",
        "dir",
        "heartbeat-ms",
        "snapshot-every",
        "committed-every-ms",
        "cpu",
    ];
    if let Some(k) = flags.keys().find(|k| !known.contains(k)) {
        return Err(format!("unknown flag --{k}"));
    }
    Ok(Args {
        id: num(&flags, "id", None)?,
        listen: num(&flags, "listen", None)?,
        dir: PathBuf::from(flags.get("dir").ok_or("--dir is needed")?),
        heartbeat_ms: num(&flags, "heartbeat-ms", Some(100))?.max(10),
        snapshot_every: num(&flags, "snapshot-every", Some(10_000))?.max(2),
        committed_every_ms: num(&flags, "committed-every-ms", Some(50))?,
        cpu: flags
            .get("cpu")
            .map(|_| num(&flags, "cpu", None))
            .transpose()?,
    })
}

/// Pin this thread (and the threads it makes later) to `cpu`.
fn pin(cpu: usize) -> io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET writes inside
    // it (cpu is checked against its size), and sched_setaffinity reads
    // `size_of` bytes of it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "no such CPU"));
        }
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Run `ringkit-peer openraft-node ARGS` until SIGTERM.
pub fn main(args: &[String]) -> io::Result<()> {
    let a = parse(args).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    if let Some(cpu) = a.cpu {
        pin(cpu)?;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // openraft spawns with `tokio::spawn`, or `spawn_local` when built
    // single-threaded (a build shared with ringkit-raft): a LocalSet runs
    // both.
    let local = tokio::task::LocalSet::new();
    eprintln!(
        "ringkit-peer: openraft node {} on tokio current_thread on {}, data in {}",
        a.id,
        a.listen,
        a.dir.display()
    );
    local.block_on(&rt, serve(a))
}

async fn serve(a: Args) -> io::Result<()> {
    let store = store::FileLog::open(
        &a.dir.join("log"),
        Duration::from_millis(a.committed_every_ms),
    )
    .await?;
    let sm = KvStateMachine::open(&a.dir.join("sm")).await?;
    let config = openraft::Config {
        cluster_name: "ringkit-kv".into(),
        heartbeat_interval: a.heartbeat_ms,
        election_timeout_min: a.heartbeat_ms * 3,
        election_timeout_max: a.heartbeat_ms * 6,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(a.snapshot_every),
        max_in_snapshot_log_to_keep: a.snapshot_every / 2,
        ..Default::default()
    };
    let config = Arc::new(
        config
            .validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?,
    );
    let net = net::Network { local: a.listen };
    let raft = KvRaft::new(a.id, config, net, store, sm.clone())
        .await
        .map_err(|e| io::Error::other(format!("raft: {e}")))?;
    let listener = TcpListener::bind(a.listen).await?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => {
                    let (raft, sm) = (raft.clone(), sm.clone());
                    tokio::task::spawn_local(async move {
                        let _ = connection(&raft, &sm, s).await;
                    });
                }
                Err(e) => {
                    eprintln!("ringkit-peer: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = term.recv() => break,
        }
    }
    let _ = raft.shutdown().await;
    Ok(())
}

async fn connection(raft: &KvRaft, sm: &KvStateMachine, mut s: TcpStream) -> io::Result<()> {
    s.set_nodelay(true)?;
    while let Some(call) = wire::recv::<Call>(&mut s).await? {
        let answer = answer(raft, sm, call).await;
        wire::send(&mut s, &answer).await?;
    }
    Ok(())
}

fn not_leader(f: &openraft::error::ForwardToLeader<KvConfig>) -> Answer {
    Answer::NotLeader(
        f.leader_id
            .zip(f.leader_node.as_ref().map(|n| n.addr.clone())),
    )
}

async fn answer(raft: &KvRaft, sm: &KvStateMachine, call: Call) -> Answer {
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
        Call::Write(req) => match raft.client_write(req).await {
            Ok(r) => Answer::Written {
                index: r.log_id.index,
                value: r.data.value,
            },
            Err(e) => match e.api_error() {
                Some(openraft::error::ClientWriteError::ForwardToLeader(f)) => not_leader(f),
                _ => Answer::Error(e.to_string()),
            },
        },
        Call::Read(key) => match raft.get_read_linearizer(ReadPolicy::ReadIndex).await {
            Ok(l) => match l.await_ready(raft).await {
                Ok(_) => Answer::Value(sm.get(&key)),
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
