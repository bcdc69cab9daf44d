//! The replicated key-value map: openraft's type config for it
//! ([`KvConfig`]) and its state machine ([`KvStateMachine`]).
//!
//! The map is in memory; snapshots are also written to the state
//! machine's directory (`snapshot`, replaced by rename and synced), so a
//! node whose log was purged up to a snapshot restarts from it. Entries
//! after the snapshot are applied again from the log on restart: openraft
//! re-applies up to the committed index the log store saved.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Cursor};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use futures_util::TryStreamExt;
use openraft::storage::{EntryResponder, RaftStateMachine};
use openraft::type_config::alias::{LogIdOf, SnapshotMetaOf, SnapshotOf, StoredMembershipOf};
use openraft::{EntryPayload, OptionalSend, RaftSnapshotBuilder};
use serde::{Deserialize, Serialize};

use crate::runtime::RingkitRuntime;

/// A write to the map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Set `key` to `value`.
    Set {
        /// The key.
        key: String,
        /// Its new value.
        value: String,
    },
    /// Append `value` to the list under `key` (the torture's history
    /// check reads the order writes were applied in from it).
    Append {
        /// The key.
        key: String,
        /// The element appended.
        value: String,
    },
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::Set { key, value } => write!(f, "set {key}={value}"),
            Request::Append { key, value } => write!(f, "append {key}+={value}"),
        }
    }
}

/// What a write returns: the key's value after it (for an append, the
/// number of elements).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    /// The value after the write.
    pub value: Option<String>,
}

openraft::declare_raft_types!(
    /// openraft's types for the replicated map, on ringkit.
    pub KvConfig:
        D = Request,
        R = Response,
        AsyncRuntime = RingkitRuntime,
);

/// A `Raft` of the replicated map.
pub type KvRaft = openraft::Raft<KvConfig, KvStateMachine>;

/// What the map holds, as a snapshot serialises it.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct KvData {
    /// The last entry applied.
    pub last_applied: Option<LogIdOf<KvConfig>>,
    /// The last membership applied.
    pub last_membership: StoredMembershipOf<KvConfig>,
    /// The map. A key written with `Append` holds its elements joined by
    /// `,`.
    pub map: BTreeMap<String, String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMetaOf<KvConfig>,
    data: Vec<u8>,
}

/// The map's state machine. Clones share it.
#[derive(Debug, Clone)]
pub struct KvStateMachine {
    inner: Rc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Where snapshots are kept (`None`: in memory only).
    dir: Option<PathBuf>,
    data: RefCell<KvData>,
    snapshot: RefCell<Option<StoredSnapshot>>,
    /// One snapshot write at a time: openraft builds snapshots in a task
    /// of their own, so a build and an install (which share the file and
    /// its `.tmp`) can run at once.
    writing: futures_util::lock::Mutex<()>,
}

const SNAPSHOT: &str = "snapshot";

impl KvStateMachine {
    /// A state machine whose snapshots live in memory only (tests).
    pub fn in_memory() -> KvStateMachine {
        KvStateMachine {
            inner: Rc::new(Inner {
                dir: None,
                data: RefCell::new(KvData::default()),
                snapshot: RefCell::new(None),
                writing: futures_util::lock::Mutex::new(()),
            }),
        }
    }

    /// A state machine keeping its snapshots in `dir` (made if missing),
    /// starting from the snapshot there if any.
    pub async fn open(dir: impl AsRef<Path>) -> io::Result<KvStateMachine> {
        let dir = dir.as_ref().to_path_buf();
        make_dir_durably(&dir).await?;
        let sm = KvStateMachine {
            inner: Rc::new(Inner {
                dir: Some(dir.clone()),
                data: RefCell::new(KvData::default()),
                snapshot: RefCell::new(None),
                writing: futures_util::lock::Mutex::new(()),
            }),
        };
        match std::fs::read(dir.join(SNAPSHOT)) {
            Ok(b) => {
                let s: StoredSnapshot = serde_json::from_slice(&b).map_err(|e| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{}: snapshot: {e}", dir.display()),
                    )
                })?;
                *sm.inner.data.borrow_mut() = decode(&s.data)?;
                *sm.inner.snapshot.borrow_mut() = Some(s);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(sm)
    }

    /// The value of `key`, as applied here.
    pub fn get(&self, key: &str) -> Option<String> {
        self.inner.data.borrow().map.get(key).cloned()
    }

    /// The last entry applied here.
    pub fn last_applied(&self) -> Option<LogIdOf<KvConfig>> {
        self.inner.data.borrow().last_applied
    }

    /// Make `s` the snapshot, on disk first, unless a newer one is kept
    /// already (a build that began before an install ended after it).
    async fn keep(&self, s: StoredSnapshot) -> io::Result<()> {
        let _one = self.inner.writing.lock().await;
        let newer_kept = self
            .inner
            .snapshot
            .borrow()
            .as_ref()
            .is_some_and(|k| k.meta.last_log_id > s.meta.last_log_id);
        if newer_kept {
            return Ok(());
        }
        if let Some(dir) = &self.inner.dir {
            let bytes = serde_json::to_vec(&s).map_err(io::Error::other)?;
            ringkit::fs::write_replace(dir.join(SNAPSHOT), bytes).await?;
        }
        *self.inner.snapshot.borrow_mut() = Some(s);
        Ok(())
    }
}

/// Make `dir` and its missing parents, each made durable in its parent
/// (a directory is a name in its parent's entries: without the parent's
/// sync a power loss takes it away, and the snapshot in it with it, while
/// the log stays purged behind that snapshot).
async fn make_dir_durably(dir: &Path) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut d = dir;
    while !d.is_dir() {
        missing.push(d);
        match d.parent() {
            Some(p) if !p.as_os_str().is_empty() => d = p,
            _ => break,
        }
    }
    let parent = |d: &Path| {
        let p = d.parent().filter(|p| !p.as_os_str().is_empty());
        p.unwrap_or(Path::new(".")).to_path_buf()
    };
    let synced_any = !missing.is_empty();
    for d in missing.into_iter().rev() {
        match ringkit::fs::create_dir(d).await {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        ringkit::fs::sync_dir(parent(d)).await?;
    }
    // Made by an earlier run that died before its sync: synced now.
    if !synced_any {
        ringkit::fs::sync_dir(parent(dir)).await?;
    }
    Ok(())
}

fn decode(b: &[u8]) -> io::Result<KvData> {
    serde_json::from_slice(b)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("snapshot data: {e}")))
}

impl RaftSnapshotBuilder<KvConfig> for KvStateMachine {
    type SnapshotData = Cursor<Vec<u8>>;

    async fn build_snapshot(&mut self) -> Result<SnapshotOf<KvConfig, Cursor<Vec<u8>>>, io::Error> {
        let (data, meta) = {
            let d = self.inner.data.borrow();
            let data = serde_json::to_vec(&*d).map_err(io::Error::other)?;
            let meta = SnapshotMetaOf::<KvConfig> {
                last_log_id: d.last_applied,
                last_membership: d.last_membership.clone(),
            };
            (data, meta)
        };
        self.keep(StoredSnapshot {
            meta: meta.clone(),
            data: data.clone(),
        })
        .await?;
        Ok(SnapshotOf::<KvConfig, _> {
            meta,
            snapshot: Cursor::new(data),
        })
    }
}

impl RaftStateMachine<KvConfig> for KvStateMachine {
    type SnapshotData = Cursor<Vec<u8>>;
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogIdOf<KvConfig>>, StoredMembershipOf<KvConfig>), io::Error> {
        let d = self.inner.data.borrow();
        Ok((d.last_applied, d.last_membership.clone()))
    }

    async fn apply<Strm>(&mut self, mut entries: Strm) -> Result<(), io::Error>
    where
        Strm: futures_util::Stream<Item = Result<EntryResponder<KvConfig>, io::Error>>
            + Unpin
            + OptionalSend,
    {
        while let Some((entry, responder)) = entries.try_next().await? {
            let response = {
                let mut d = self.inner.data.borrow_mut();
                d.last_applied = Some(entry.log_id);
                match entry.payload {
                    EntryPayload::Blank => Response { value: None },
                    EntryPayload::Normal(Request::Set { key, value }) => {
                        d.map.insert(key, value.clone());
                        Response { value: Some(value) }
                    }
                    EntryPayload::Normal(Request::Append { key, value }) => {
                        let list = d.map.entry(key).or_default();
                        if !list.is_empty() {
                            list.push(',');
                        }
                        list.push_str(&value);
                        let n = list.split(',').count();
                        Response {
                            value: Some(n.to_string()),
                        }
                    }
                    EntryPayload::Membership(m) => {
                        d.last_membership =
                            StoredMembershipOf::<KvConfig>::new(Some(entry.log_id), m);
                        Response { value: None }
                    }
                }
            };
            if let Some(r) = responder {
                r.send(response);
            }
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMetaOf<KvConfig>,
        snapshot: Cursor<Vec<u8>>,
    ) -> Result<(), io::Error> {
        let data = snapshot.into_inner();
        let decoded = decode(&data)?;
        self.keep(StoredSnapshot {
            meta: meta.clone(),
            data,
        })
        .await?;
        *self.inner.data.borrow_mut() = decoded;
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<SnapshotOf<KvConfig, Cursor<Vec<u8>>>>, io::Error> {
        Ok(self
            .inner
            .snapshot
            .borrow()
            .as_ref()
            .map(|s| SnapshotOf::<KvConfig, _> {
                meta: s.meta.clone(),
                snapshot: Cursor::new(s.data.clone()),
            }))
    }
}
