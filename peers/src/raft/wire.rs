//! The replicated map's protocol, as `ringkit raft` speaks it: frames of
//! a 4-byte little-endian length and that many bytes of JSON, one
//! [`Call`] answered by one [`Answer`] on the same connection, in turn.
//! The variants and their JSON are `ringkit_raft::wire`'s, so `ringkit
//! raft bench` drives this cluster as it drives its own.

use std::collections::BTreeMap;
use std::io;

use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::type_config::alias::{SnapshotMetaOf, VoteOf};
use openraft::BasicNode;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::sm::{KvConfig, Request};

/// The largest frame read.
pub const MAX_FRAME: usize = 64 << 20;

/// What a node is asked.
#[derive(Debug, Serialize, Deserialize)]
pub enum Call {
    Append(AppendEntriesRequest<KvConfig>),
    Vote(VoteRequest<KvConfig>),
    Snapshot {
        vote: VoteOf<KvConfig>,
        meta: SnapshotMetaOf<KvConfig>,
        data: Vec<u8>,
    },
    Write(Request),
    Read(String),
    Init(BTreeMap<u64, BasicNode>),
    Status,
}

/// What a node answers.
#[derive(Debug, Serialize, Deserialize)]
pub enum Answer {
    Append(AppendEntriesResponse<KvConfig>),
    Vote(VoteResponse<KvConfig>),
    Snapshot(SnapshotResponse<KvConfig>),
    Written { index: u64, value: Option<String> },
    Value(Option<String>),
    NotLeader(Option<(u64, String)>),
    Status(Status),
    Done,
    Error(String),
}

/// A node's view of the cluster.
#[derive(Debug, Serialize, Deserialize)]
pub struct Status {
    pub id: u64,
    pub leader: Option<u64>,
    pub term: u64,
    pub last_log: Option<u64>,
    pub applied: Option<u64>,
    pub state: String,
}

/// Write `msg` as one frame.
pub async fn send<T: Serialize>(s: &mut TcpStream, msg: &T) -> io::Result<()> {
    let mut frame = vec![0u8; 4];
    serde_json::to_writer(&mut frame, msg).map_err(io::Error::other)?;
    let len = (frame.len() - 4) as u32;
    frame[..4].copy_from_slice(&len.to_le_bytes());
    s.write_all(&frame).await
}

/// Read one frame; `Ok(None)` at a clean end of stream.
pub async fn recv<T: for<'de> Deserialize<'de>>(s: &mut TcpStream) -> io::Result<Option<T>> {
    let mut len = [0u8; 4];
    match s.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a frame of {len} bytes: at most {MAX_FRAME}"),
        ));
    }
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).await?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("a bad frame: {e}")))
}
