//! openraft's network between nodes over ringkit TCP: one connection per
//! peer per client openraft makes (replication, heartbeat, snapshot),
//! kept open and made again after a failure; one call in flight on it at
//! a time, each bounded by openraft's hard TTL. A node's connections
//! leave from its own address (`local`), so a test can cut one node off
//! with firewall rules on its address alone.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use openraft::error::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::type_config::alias::{SnapshotOf, VoteOf};
use openraft::{BasicNode, RaftNetworkV2};
use ringkit::net::TcpStream;

use crate::kv::KvConfig;
use crate::wire::{self, Answer, Call};

/// Makes a [`Peer`] per target; `local` is the address connections leave
/// from (`None`: any).
#[derive(Debug, Clone)]
pub struct Network {
    /// Source address of this node's connections.
    pub local: Option<SocketAddr>,
}

impl RaftNetworkFactory<KvConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, _target: u64, node: &BasicNode) -> Peer {
        Peer {
            addr: node.addr.clone(),
            local: self.local,
            conn: None,
        }
    }
}

/// A connection to one peer.
#[derive(Debug)]
pub struct Peer {
    addr: String,
    local: Option<SocketAddr>,
    conn: Option<TcpStream>,
}

/// Connect to `addr` (from `local` if given), with `TCP_NODELAY`.
pub async fn connect(addr: &str, local: Option<SocketAddr>) -> io::Result<TcpStream> {
    let to: SocketAddr = addr
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{addr}: {e}")))?;
    let s = match local {
        Some(l) => TcpStream::connect_from(SocketAddr::new(l.ip(), 0), to).await?,
        None => TcpStream::connect(to).await?,
    };
    s.set_nodelay(true)?;
    Ok(s)
}

impl Peer {
    /// One call and its answer, within `ttl`; a failure drops the
    /// connection (the next call makes a new one).
    async fn call(&mut self, msg: &Call, ttl: Duration) -> io::Result<Answer> {
        let res = ringkit::time::timeout(ttl, async {
            if self.conn.is_none() {
                self.conn = Some(connect(&self.addr, self.local).await?);
            }
            let c = self.conn.as_ref().expect("just made");
            wire::send(c, msg).await?;
            wire::recv(c)
                .await?
                .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "the peer closed"))
        })
        .await
        .unwrap_or_else(|_| {
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no answer from {} in {ttl:?}", self.addr),
            ))
        });
        if res.is_err() {
            self.conn = None;
        }
        res
    }
}

fn unreachable(e: io::Error) -> RPCError<KvConfig> {
    RPCError::Unreachable(Unreachable::new(&e))
}

fn unexpected(what: &str, a: Answer) -> RPCError<KvConfig> {
    let e = io::Error::other(format!("{what}: the peer answered {a:?}"));
    RPCError::Network(NetworkError::new(&e))
}

impl RaftNetworkV2<KvConfig> for Peer {
    type SnapshotData = std::io::Cursor<Vec<u8>>;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<KvConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<KvConfig>, RPCError<KvConfig>> {
        match self.call(&Call::Append(rpc), option.hard_ttl()).await {
            Ok(Answer::Append(r)) => Ok(r),
            Ok(a) => Err(unexpected("append", a)),
            Err(e) => Err(unreachable(e)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<KvConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<KvConfig>, RPCError<KvConfig>> {
        match self.call(&Call::Vote(rpc), option.hard_ttl()).await {
            Ok(Answer::Vote(r)) => Ok(r),
            Ok(a) => Err(unexpected("vote", a)),
            Err(e) => Err(unreachable(e)),
        }
    }

    async fn full_snapshot(
        &mut self,
        vote: VoteOf<KvConfig>,
        snapshot: SnapshotOf<KvConfig, Self::SnapshotData>,
        cancel: impl Future<Output = ReplicationClosed> + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<KvConfig>, StreamingError<KvConfig>> {
        let call = Call::Snapshot {
            vote,
            meta: snapshot.meta,
            data: snapshot.snapshot.into_inner(),
        };
        let sent = std::pin::pin!(self.call(&call, option.hard_ttl().max(Duration::from_secs(10))));
        let cancel = std::pin::pin!(cancel);
        let got = ringkit::sync::select(sent, cancel).await;
        match got {
            ringkit::sync::Either::Left(Ok(Answer::Snapshot(r))) => Ok(r),
            ringkit::sync::Either::Left(Ok(a)) => {
                let e = io::Error::other(format!("snapshot: the peer answered {a:?}"));
                Err(StreamingError::Network(NetworkError::new(&e)))
            }
            ringkit::sync::Either::Left(Err(e)) => {
                Err(StreamingError::Unreachable(Unreachable::new(&e)))
            }
            ringkit::sync::Either::Right(closed) => Err(StreamingError::Closed(closed)),
        }
    }
}
