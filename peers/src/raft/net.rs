//! openraft's network between nodes over tokio TCP: one connection per
//! peer per client openraft makes, kept open and made again after a
//! failure, each call bounded by openraft's hard TTL; connections leave
//! from the node's own address.

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
use tokio::net::{TcpSocket, TcpStream};

use super::sm::KvConfig;
use super::wire::{self, Answer, Call};

/// Makes a [`Peer`] per target.
#[derive(Debug, Clone)]
pub struct Network {
    pub local: SocketAddr,
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
    local: SocketAddr,
    conn: Option<TcpStream>,
}

async fn connect(addr: &str, local: SocketAddr) -> io::Result<TcpStream> {
    let to: SocketAddr = addr
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{addr}: {e}")))?;
    let sock = if to.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    sock.bind(SocketAddr::new(local.ip(), 0))?;
    let s = sock.connect(to).await?;
    s.set_nodelay(true)?;
    Ok(s)
}

impl Peer {
    async fn call(&mut self, msg: &Call, ttl: Duration) -> io::Result<Answer> {
        let res = tokio::time::timeout(ttl, async {
            if self.conn.is_none() {
                self.conn = Some(connect(&self.addr, self.local).await?);
            }
            let c = self.conn.as_mut().expect("just made");
            wire::send(c, msg).await?;
            wire::recv(c)
                .await?
                .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "the peer closed"))
        })
        .await
        .unwrap_or_else(|_| Err(io::Error::new(io::ErrorKind::TimedOut, "no answer in time")));
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
        cancel: impl Future<Output = ReplicationClosed> + openraft::OptionalSend + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<KvConfig>, StreamingError<KvConfig>> {
        let call = Call::Snapshot {
            vote,
            meta: snapshot.meta,
            data: snapshot.snapshot.into_inner(),
        };
        let ttl = option.hard_ttl().max(Duration::from_secs(10));
        tokio::select! {
            r = self.call(&call, ttl) => match r {
                Ok(Answer::Snapshot(r)) => Ok(r),
                Ok(a) => {
                    let e = io::Error::other(format!("snapshot: the peer answered {a:?}"));
                    Err(StreamingError::Network(NetworkError::new(&e)))
                }
                Err(e) => Err(StreamingError::Unreachable(Unreachable::new(&e))),
            },
            closed = cancel => Err(StreamingError::Closed(closed)),
        }
    }
}
