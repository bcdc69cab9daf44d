//! The replicated map on tokio: the same type config, requests and state
//! machine as `ringkit_raft::kv`, its snapshot written with `tokio::fs`
//! (a temporary file, synced, renamed, the directory synced).

use std::collections::BTreeMap;
use std::io::{self, Cursor};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures_util::TryStreamExt;
use openraft::storage::{EntryResponder, RaftStateMachine};
use openraft::type_config::alias::{LogIdOf, SnapshotMetaOf, SnapshotOf, StoredMembershipOf};
use openraft::{EntryPayload, OptionalSend, RaftSnapshotBuilder};
use serde::{Deserialize, Serialize};

/// A write to the map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    Set { key: String, value: String },
    Append { key: String, value: String },
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Request::Set { key, value } => write!(f, "set {key}={value}"),
            Request::Append { key, value } => write!(f, "append {key}+={value}"),
        }
    }
}

/// What a write returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    pub value: Option<String>,
}

openraft::declare_raft_types!(
    /// The map's types, on openraft's default runtime (tokio).
    pub KvConfig:
        D = Request,
        R = Response,
);

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct KvData {
    last_applied: Option<LogIdOf<KvConfig>>,
    last_membership: StoredMembershipOf<KvConfig>,
    map: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMetaOf<KvConfig>,
    data: Vec<u8>,
}

/// The map's state machine. Clones share it.
#[derive(Debug, Clone)]
pub struct KvStateMachine {
    dir: PathBuf,
    data: Arc<Mutex<KvData>>,
    snapshot: Arc<Mutex<Option<StoredSnapshot>>>,
}

const SNAPSHOT: &str = "snapshot";

/// Write `bytes` to `path` by a synced temporary file and a rename, then
/// sync the directory.
pub async fn write_replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = tokio::fs::File::create(&tmp).await?;
    tokio::io::AsyncWriteExt::write_all(&mut f, bytes).await?;
    f.sync_all().await?;
    tokio::fs::rename(&tmp, path).await?;
    let dir = path.parent().unwrap_or(Path::new("."));
    tokio::fs::File::open(dir).await?.sync_all().await
}

impl KvStateMachine {
    /// The state machine keeping its snapshots in `dir`, from the one
    /// there if any.
    pub async fn open(dir: &Path) -> io::Result<KvStateMachine> {
        tokio::fs::create_dir_all(dir).await?;
        let sm = KvStateMachine {
            dir: dir.to_path_buf(),
            data: Arc::default(),
            snapshot: Arc::default(),
        };
        match tokio::fs::read(dir.join(SNAPSHOT)).await {
            Ok(b) => {
                let s: StoredSnapshot = serde_json::from_slice(&b)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                *sm.data.lock().unwrap() = decode(&s.data)?;
                *sm.snapshot.lock().unwrap() = Some(s);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(sm)
    }

    /// The value of `key`, as applied here.
    pub fn get(&self, key: &str) -> Option<String> {
        self.data.lock().unwrap().map.get(key).cloned()
    }

    async fn keep(&self, s: StoredSnapshot) -> io::Result<()> {
        let bytes = serde_json::to_vec(&s).map_err(io::Error::other)?;
        write_replace(&self.dir.join(SNAPSHOT), &bytes).await?;
        *self.snapshot.lock().unwrap() = Some(s);
        Ok(())
    }
}

fn decode(b: &[u8]) -> io::Result<KvData> {
    serde_json::from_slice(b).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

impl RaftSnapshotBuilder<KvConfig> for KvStateMachine {
    type SnapshotData = Cursor<Vec<u8>>;

    async fn build_snapshot(&mut self) -> Result<SnapshotOf<KvConfig, Cursor<Vec<u8>>>, io::Error> {
        let (data, meta) = {
            let d = self.data.lock().unwrap();
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
        let d = self.data.lock().unwrap();
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
                let mut d = self.data.lock().unwrap();
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
        *self.data.lock().unwrap() = decoded;
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<SnapshotOf<KvConfig, Cursor<Vec<u8>>>>, io::Error> {
        Ok(self
            .snapshot
            .lock()
            .unwrap()
            .as_ref()
            .map(|s| SnapshotOf::<KvConfig, _> {
                meta: s.meta.clone(),
                snapshot: Cursor::new(s.data.clone()),
            }))
    }
}
