//! openraft's log storage built the usual way on tokio: one append-only
//! file written with `tokio::fs`, `fdatasync` per `append` call (one
//! batch: openraft hands over every entry it has ready), and every entry
//! also kept in memory, where reads are served from. The vote, the
//! committed id and the purged id are a small JSON file replaced by a
//! synced temporary file and a rename.
//!
//! As in `ringkit_raft::LogStore`, the committed id is saved at most once
//! per `committed_every` (and with every vote and purge), so both stores
//! do the same durable work per commit.
//!
//! A truncation cuts the file (`set_len`, synced); a purge only saves the
//! purged id: the file keeps the bytes and a reopen reads and skips them,
//! so the file and the time to open it grow with every entry ever
//! appended (no compaction: enough for a benchmark, not for a service).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io;
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::entry::RaftEntry;
use openraft::storage::{IOFlushed, RaftLogStorage};
use openraft::type_config::alias::{EntryOf, LogIdOf, VoteOf};
use openraft::{LogState, RaftLogReader};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::sm::{write_replace, KvConfig};

type Entry = EntryOf<KvConfig>;

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct Meta {
    vote: Option<VoteOf<KvConfig>>,
    committed: Option<LogIdOf<KvConfig>>,
    purged: Option<LogIdOf<KvConfig>>,
}

#[derive(Debug, Default)]
struct Mem {
    entries: BTreeMap<u64, Entry>,
    /// Where each entry starts in the file.
    offsets: BTreeMap<u64, u64>,
    /// The file's length.
    end: u64,
    meta: Meta,
    committed_due: bool,
    /// The error of a background save of the committed id, given to the
    /// next write.
    failed: Option<io::Error>,
}

/// The log store (clones share it; a clone is also its reader).
#[derive(Debug, Clone)]
pub struct FileLog {
    dir: PathBuf,
    mem: Arc<Mutex<Mem>>,
    file: Arc<tokio::sync::Mutex<tokio::fs::File>>,
    /// Serialises writes of the meta file.
    meta_write: Arc<tokio::sync::Mutex<()>>,
    committed_every: Duration,
}

const LOG: &str = "log";
const META: &str = "meta.json";

fn bad(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

impl FileLog {
    /// Open (or make) the store in `dir`. A torn last frame (a crash
    /// mid-write) is cut off.
    pub async fn open(dir: &Path, committed_every: Duration) -> io::Result<FileLog> {
        tokio::fs::create_dir_all(dir).await?;
        let meta: Meta = match tokio::fs::read(dir.join(META)).await {
            Ok(b) => serde_json::from_slice(&b).map_err(bad)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Meta::default(),
            Err(e) => return Err(e),
        };
        let mut file = tokio::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(dir.join(LOG))
            .await?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).await?;
        let mut mem = Mem {
            meta,
            ..Mem::default()
        };
        let purged = mem.meta.purged.map(|p| p.index);
        let mut at = 0usize;
        while at + 4 <= bytes.len() {
            let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4")) as usize;
            let Some(body) = bytes.get(at + 4..at + 4 + len) else {
                break;
            };
            let Ok(e) = serde_json::from_slice::<Entry>(body) else {
                break;
            };
            if purged.is_none_or(|p| e.index() > p) {
                mem.offsets.insert(e.index(), at as u64);
                mem.entries.insert(e.index(), e);
            }
            at += 4 + len;
        }
        if at < bytes.len() {
            file.set_len(at as u64).await?;
            file.sync_data().await?;
        }
        // The file's name (and the directory's) durable before any append
        // is acknowledged.
        for d in [dir, dir.parent().unwrap_or(Path::new("."))] {
            tokio::fs::File::open(d).await?.sync_all().await?;
        }
        mem.end = at as u64;
        Ok(FileLog {
            dir: dir.to_path_buf(),
            mem: Arc::new(Mutex::new(mem)),
            file: Arc::new(tokio::sync::Mutex::new(file)),
            meta_write: Arc::default(),
            committed_every,
        })
    }

    fn failed_save(&self) -> io::Result<()> {
        match self.mem.lock().unwrap().failed.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    async fn save_meta(&self) -> io::Result<()> {
        let _one = self.meta_write.lock().await;
        let bytes = serde_json::to_vec(&self.mem.lock().unwrap().meta).map_err(io::Error::other)?;
        write_replace(&self.dir.join(META), &bytes).await
    }
}

impl RaftLogReader<KvConfig> for FileLog {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, io::Error> {
        let mem = self.mem.lock().unwrap();
        Ok(mem.entries.range(range).map(|(_, e)| e.clone()).collect())
    }

    async fn read_vote(&mut self) -> Result<Option<VoteOf<KvConfig>>, io::Error> {
        Ok(self.mem.lock().unwrap().meta.vote)
    }
}

impl RaftLogStorage<KvConfig> for FileLog {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<KvConfig>, io::Error> {
        let mem = self.mem.lock().unwrap();
        let purged = mem.meta.purged;
        let last = mem.entries.values().next_back().map(|e| e.log_id());
        Ok(LogState {
            last_log_id: last.or(purged),
            last_purged_log_id: purged,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &VoteOf<KvConfig>) -> Result<(), io::Error> {
        self.failed_save()?;
        self.mem.lock().unwrap().meta.vote = Some(*vote);
        self.save_meta().await
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogIdOf<KvConfig>>,
    ) -> Result<(), io::Error> {
        self.failed_save()?;
        {
            let mut mem = self.mem.lock().unwrap();
            mem.meta.committed = committed;
            if mem.committed_due {
                return Ok(());
            }
            mem.committed_due = !self.committed_every.is_zero();
        }
        if self.committed_every.is_zero() {
            return self.save_meta().await;
        }
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(me.committed_every).await;
            me.mem.lock().unwrap().committed_due = false;
            if let Err(e) = me.save_meta().await {
                me.mem.lock().unwrap().failed = Some(e);
            }
        });
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogIdOf<KvConfig>>, io::Error> {
        Ok(self.mem.lock().unwrap().meta.committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: IOFlushed<KvConfig>,
    ) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = Entry>,
    {
        self.failed_save()?;
        let mut buf = Vec::new();
        {
            let mut mem = self.mem.lock().unwrap();
            for e in entries {
                let at = mem.end + buf.len() as u64;
                let json = serde_json::to_vec(&e).map_err(io::Error::other)?;
                buf.extend_from_slice(&(json.len() as u32).to_le_bytes());
                buf.extend_from_slice(&json);
                mem.offsets.insert(e.index(), at);
                mem.entries.insert(e.index(), e);
            }
            mem.end += buf.len() as u64;
        }
        // The batch written and synced before the callback (and before
        // anything queued after it).
        let mut f = self.file.lock().await;
        let res = async {
            f.write_all(&buf).await?;
            f.flush().await?;
            f.sync_data().await
        }
        .await;
        drop(f);
        let failed = res
            .as_ref()
            .err()
            .map(|e| io::Error::new(e.kind(), e.to_string()));
        callback.io_completed(res);
        match failed {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    async fn truncate_after(
        &mut self,
        last_log_id: Option<LogIdOf<KvConfig>>,
    ) -> Result<(), io::Error> {
        self.failed_save()?;
        let from = last_log_id.map_or(0, |l| l.index + 1);
        let cut = {
            let mut mem = self.mem.lock().unwrap();
            let cut = mem.offsets.range(from..).next().map(|(_, &o)| o);
            mem.entries.split_off(&from);
            mem.offsets.split_off(&from);
            if let Some(o) = cut {
                mem.end = o;
            }
            cut
        };
        if let Some(o) = cut {
            let f = self.file.lock().await;
            f.set_len(o).await?;
            f.sync_data().await?;
        }
        Ok(())
    }

    async fn purge(&mut self, log_id: LogIdOf<KvConfig>) -> Result<(), io::Error> {
        self.failed_save()?;
        {
            let mut mem = self.mem.lock().unwrap();
            mem.meta.purged = Some(log_id);
            let keep = mem.entries.split_off(&(log_id.index + 1));
            mem.entries = keep;
            let keep = mem.offsets.split_off(&(log_id.index + 1));
            mem.offsets = keep;
        }
        self.save_meta().await
    }
}
