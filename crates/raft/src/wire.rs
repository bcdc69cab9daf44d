//! The protocol between nodes, and between a client and a node: frames
//! of a 4-byte little-endian length and that many bytes of JSON, one
//! [`Call`] answered by one [`Answer`] on the same connection, in turn.

use std::collections::BTreeMap;
use std::io;

use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::type_config::alias::{SnapshotMetaOf, VoteOf};
use openraft::BasicNode;
use ringkit::buf::IoBufExt;
use ringkit::net::TcpStream;
use serde::{Deserialize, Serialize};

use crate::kv::{KvConfig, Request};

/// The largest frame read (a snapshot of the map travels in one: a map
/// larger than this cannot be sent to a node that lags behind a purge).
pub const MAX_FRAME: usize = 64 << 20;

/// Bytes of a frame read at once.
const CHUNK: usize = 1 << 20;

/// Frames up to this size are read outside the [`Budget`].
pub const SMALL: usize = 1 << 20;

/// What a node is asked.
#[derive(Debug, Serialize, Deserialize)]
pub enum Call {
    /// Raft: replicate entries.
    Append(AppendEntriesRequest<KvConfig>),
    /// Raft: ask for a vote.
    Vote(VoteRequest<KvConfig>),
    /// Raft: install a whole snapshot.
    Snapshot {
        /// The sender's vote.
        vote: VoteOf<KvConfig>,
        /// What the snapshot covers.
        meta: SnapshotMetaOf<KvConfig>,
        /// The map, serialised.
        data: Vec<u8>,
    },
    /// Client: a write, answered once committed and applied.
    Write(Request),
    /// Client: a linearizable read of a key (ReadIndex).
    Read(String),
    /// Admin: make the cluster of these members (on one node, once).
    Init(BTreeMap<u64, BasicNode>),
    /// Admin: what this node knows.
    Status,
}

/// What a node answers.
#[derive(Debug, Serialize, Deserialize)]
pub enum Answer {
    /// To [`Call::Append`].
    Append(AppendEntriesResponse<KvConfig>),
    /// To [`Call::Vote`].
    Vote(VoteResponse<KvConfig>),
    /// To [`Call::Snapshot`].
    Snapshot(SnapshotResponse<KvConfig>),
    /// A write committed and applied at this log index, with its result.
    Written {
        /// The entry's index.
        index: u64,
        /// The state machine's answer.
        value: Option<String>,
    },
    /// A read's value.
    Value(Option<String>),
    /// This node is not the leader: the leader if known (id, address). The
    /// call was not carried out.
    NotLeader(Option<(u64, String)>),
    /// What this node knows.
    Status(Status),
    /// Done (init).
    Done,
    /// Failed; the call may or may not have taken effect (a write whose
    /// outcome is unknown).
    Error(String),
}

/// A node's view of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// This node.
    pub id: u64,
    /// The leader it knows of.
    pub leader: Option<u64>,
    /// Its term.
    pub term: u64,
    /// Its last log index.
    pub last_log: Option<u64>,
    /// Its last applied index.
    pub applied: Option<u64>,
    /// Its role ("Leader", "Follower", ...).
    pub state: String,
}

/// Write `msg` as one frame.
pub async fn send<T: Serialize>(s: &TcpStream, msg: &T) -> io::Result<()> {
    // One buffer: the length's room, then the JSON, then the length.
    let mut frame = vec![0u8; 4];
    serde_json::to_writer(&mut frame, msg).map_err(io::Error::other)?;
    let len = (frame.len() - 4) as u32;
    frame[..4].copy_from_slice(&len.to_le_bytes());
    s.write_all(frame).await.0
}

/// Read one frame; `Ok(None)` at a clean end of stream.
pub async fn recv<T: for<'de> Deserialize<'de>>(s: &TcpStream) -> io::Result<Option<T>> {
    recv_within(s, &Budget::new(MAX_FRAME)).await
}

/// Bytes of large frames (over [`SMALL`]) being read at once, shared by
/// the connections of a node: a frame that would take more is refused
/// (its connection closed), so peers announcing large frames cannot take
/// more memory than this, and small calls are never held up by them.
#[derive(Debug)]
pub struct Budget {
    left: std::cell::Cell<usize>,
}

impl Budget {
    /// A budget of `bytes`.
    pub fn new(bytes: usize) -> Budget {
        Budget {
            left: std::cell::Cell::new(bytes),
        }
    }
}

/// [`recv`], a large frame's bytes taken from `budget` while it is read.
pub async fn recv_within<T: for<'de> Deserialize<'de>>(
    s: &TcpStream,
    budget: &Budget,
) -> io::Result<Option<T>> {
    let (r, len) = s.read_exact(Vec::with_capacity(4).slice(..4)).await;
    match r {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && len.get_ref().is_empty() => {
            return Ok(None)
        }
        Err(e) => return Err(e),
    }
    let len = len.into_inner();
    let len = u32::from_le_bytes(len[..4].try_into().expect("4 bytes")) as usize;
    // Small frames (every call but a snapshot) never wait on the budget.
    let charged = if len > SMALL { len } else { 0 };
    if len > MAX_FRAME || charged > budget.left.get() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "a frame of {len} bytes: at most {MAX_FRAME}, and {} left of the budget of \
                 large frames being read",
                budget.left.get()
            ),
        ));
    }
    budget.left.set(budget.left.get() - charged);
    // In chunks: memory follows the bytes that arrive, not the length a
    // peer claims.
    let body = async {
        let mut body: Vec<u8> = Vec::new();
        while body.len() < len {
            let n = (len - body.len()).min(CHUNK);
            let (r, chunk) = s.read_exact(Vec::with_capacity(n).slice(..n)).await;
            r?;
            if body.is_empty() {
                // A frame of one chunk (nearly every call) is not copied.
                body = chunk.into_inner();
            } else {
                body.extend_from_slice(&chunk.into_inner());
            }
        }
        Ok::<_, io::Error>(body)
    }
    .await;
    budget.left.set(budget.left.get() + charged);
    serde_json::from_slice(&body?)
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("a bad frame: {e}")))
}
