//! A client of the replicated map: finds the leader (following the
//! nodes' redirects) and tells a call that certainly did not happen from
//! one whose outcome is unknown, which a history checker must know.

use std::net::SocketAddr;
use std::time::Duration;

use ringkit::net::TcpStream;

use crate::kv::Request;
use crate::network::connect;
use crate::wire::{self, Answer, Call, Status};

/// The outcome of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// The node answered.
    Ok(Answer2),
    /// Certainly not carried out: no node took it (no leader reachable).
    Refused(String),
    /// Sent, and no answer: it may or may not have taken effect.
    Unknown(String),
}

/// The answers a client sees (a [`wire::Answer`] without the Raft ones).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer2 {
    /// A write committed and applied at this index, with its result.
    Written {
        /// Its log index.
        index: u64,
        /// What the state machine answered.
        value: Option<String>,
    },
    /// A read's value.
    Value(Option<String>),
    /// Done.
    Done,
    /// A node's status.
    Status(Status),
}

/// A client of a cluster of `nodes` (id, address).
#[derive(Debug)]
pub struct Client {
    nodes: Vec<(u64, String)>,
    leader: Option<usize>,
    conn: Option<(usize, TcpStream)>,
    next: usize,
    /// How long a call may wait for its answer.
    pub timeout: Duration,
    /// The address connections leave from (`None`: any).
    pub local: Option<SocketAddr>,
}

impl Client {
    /// A client of these nodes, 2 s per call.
    pub fn new(nodes: Vec<(u64, String)>) -> Client {
        Client {
            nodes,
            leader: None,
            conn: None,
            next: 0,
            timeout: Duration::from_secs(2),
            local: None,
        }
    }

    /// Set `key` to `value`.
    pub async fn set(&mut self, key: &str, value: &str) -> Reply {
        let req = Request::Set {
            key: key.into(),
            value: value.into(),
        };
        self.call(&Call::Write(req)).await
    }

    /// Append `value` to the list under `key`.
    pub async fn append(&mut self, key: &str, value: &str) -> Reply {
        let req = Request::Append {
            key: key.into(),
            value: value.into(),
        };
        self.call(&Call::Write(req)).await
    }

    /// A linearizable read of `key`.
    pub async fn read(&mut self, key: &str) -> Reply {
        self.call(&Call::Read(key.into())).await
    }

    /// A linearizable read of `key` sent first to node `i` of the list,
    /// whichever node leads: a node that does not lead redirects, one
    /// that believes it leads must confirm it (ReadIndex) before it
    /// answers. (A checker sends reads everywhere this way, so a node
    /// that answers from its own state alone is caught.)
    pub async fn read_from(&mut self, i: usize, key: &str) -> Reply {
        self.leader = Some(i % self.nodes.len().max(1));
        self.read(key).await
    }

    /// The status of node `i` of the list (no redirect).
    pub async fn status_of(&mut self, i: usize) -> Reply {
        self.call_on(i, &Call::Status).await
    }

    /// Send `call` to node `i` of the list.
    pub async fn call_on(&mut self, i: usize, call: &Call) -> Reply {
        let (r, _) = self.once(i, call).await;
        r
    }

    /// One call to node `i`: the reply, and the leader hint if the node
    /// refused as not the leader.
    async fn once(&mut self, i: usize, call: &Call) -> (Reply, Option<Option<u64>>) {
        if self.conn.as_ref().is_none_or(|(at, _)| *at != i) {
            self.conn = None;
            let made = ringkit::time::timeout(self.timeout, connect(&self.nodes[i].1, self.local));
            match made.await {
                Ok(Ok(s)) => self.conn = Some((i, s)),
                Ok(Err(e)) => return (Reply::Refused(format!("connect: {e}")), None),
                Err(_) => return (Reply::Refused("connect: timed out".into()), None),
            }
        }
        let s = &self.conn.as_ref().expect("connected").1;
        let exchange = async {
            wire::send(s, call).await?;
            wire::recv::<Answer>(s).await
        };
        let got = ringkit::time::timeout(self.timeout, exchange).await;
        let answer = match got {
            Ok(Ok(Some(a))) => a,
            Ok(Ok(None)) => {
                self.conn = None;
                return (Reply::Unknown("the node closed".into()), None);
            }
            Ok(Err(e)) => {
                self.conn = None;
                return (Reply::Unknown(e.to_string()), None);
            }
            Err(_) => {
                self.conn = None;
                return (Reply::Unknown("no answer in time".into()), None);
            }
        };
        let reply = match answer {
            Answer::Written { index, value } => Reply::Ok(Answer2::Written { index, value }),
            Answer::Value(v) => Reply::Ok(Answer2::Value(v)),
            Answer::Done => Reply::Ok(Answer2::Done),
            Answer::Status(s) => Reply::Ok(Answer2::Status(s)),
            Answer::NotLeader(hint) => {
                let r = Reply::Refused("not the leader".into());
                return (r, Some(hint.map(|h| h.0)));
            }
            Answer::Error(e) => Reply::Unknown(e),
            other => Reply::Unknown(format!("an answer for a node: {other:?}")),
        };
        (reply, None)
    }

    /// Send `call` to the leader, following redirects; refused only when
    /// no node takes it within a few rounds of the nodes.
    pub async fn call(&mut self, call: &Call) -> Reply {
        let n = self.nodes.len();
        let mut last = String::from("no node");
        for attempt in 0..4 * n {
            let i = self.leader.unwrap_or(self.next % n);
            match self.once(i, call).await {
                (Reply::Refused(why), hint) => {
                    last = why;
                    self.leader = hint
                        .flatten()
                        .and_then(|id| self.nodes.iter().position(|(nid, _)| *nid == id))
                        .filter(|&j| j != i);
                    if self.leader.is_none() {
                        self.next = i + 1;
                        if attempt >= n {
                            // An election under way: give it a moment.
                            ringkit::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                }
                (r, _) => {
                    if matches!(r, Reply::Ok(_)) {
                        self.leader = Some(i);
                    } else {
                        self.leader = None;
                        self.next = i + 1;
                    }
                    return r;
                }
            }
        }
        Reply::Refused(last)
    }
}
