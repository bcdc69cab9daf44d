//! ringkit-log as openraft's [`RaftLogStorage`].
//!
//! Raft index `i` is the log's LSN `i + 1` (ringkit-log's LSNs start at
//! 1; openraft's first index is 0). Each entry is one record, JSON. What
//! openraft needs beyond appends is ringkit-log's own, with its
//! durability rules:
//!
//! - `truncate_after` is [`Log::truncate`] (durable, crash-safe part way);
//! - `purge` saves the purged log id in the state, then [`Log::purge`];
//!   a crash between the two is finished at the next open;
//! - the vote, the committed log id and the purged log id are the log's
//!   state ([`Log::save_state`]), replaced atomically;
//! - the committed log id is saved at most once per
//!   [`LogStore::set_committed_every`] (default 50 ms; zero: durable on
//!   every call), and with every vote and purge. openraft calls
//!   `save_committed` after nearly every commit, and each state write runs
//!   with no batch in flight, so saving each one would drain the append
//!   pipeline every time. After a crash the committed id read back is
//!   then up to that much older than the last one given: the state
//!   machine is re-applied to it, and the cluster's commit brings it the
//!   rest (openraft's "optionally persisted committed"). Linearizable
//!   reads are not affected: they wait for the leader's commit to be
//!   applied;
//! - a first append at index `i` on an empty log skips the log to LSN
//!   `i + 1` ([`Log::purge`] past its end).
//!
//! Every write goes through the log's one queue, so a vote is durable
//! only after the entries appended before it, as openraft requires.
//!
//! `append` returns once the entries are queued; they are readable from
//! then on (from memory until durable), and openraft's callback fires
//! when the log has made them durable: group commit across appends, the
//! next batch written while the one before it syncs.
//!
//! A `LogStore` belongs to the ringkit thread that opened it (not `Send`),
//! as does the `Raft` using it.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use openraft::entry::RaftEntry;
use openraft::storage::{IOFlushed, RaftLogStorage};
use openraft::type_config::alias::{LogIdOf, VoteOf};
use openraft::{LogState, RaftLogReader, RaftTypeConfig};
use ringkit_log::{Log, Options};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// What a Raft log keeps beside its entries: the log's state blob.
#[derive(Debug, Serialize, Deserialize)]
#[serde(bound = "")]
struct Meta<C: RaftTypeConfig> {
    vote: Option<VoteOf<C>>,
    committed: Option<LogIdOf<C>>,
    purged: Option<LogIdOf<C>>,
}

impl<C: RaftTypeConfig> Default for Meta<C> {
    fn default() -> Self {
        Meta {
            vote: None,
            committed: None,
            purged: None,
        }
    }
}

/// openraft's log storage on a ringkit-log (see the [module docs](self)).
/// Clones share the log (the clone is also openraft's log reader).
pub struct LogStore<C: RaftTypeConfig> {
    inner: Rc<Shared<C>>,
}

/// What the clones share. A pending save of the committed id holds it
/// weakly, so the log closes when the last clone goes.
struct Shared<C: RaftTypeConfig> {
    log: Log,
    st: RefCell<St<C>>,
}

impl<C: RaftTypeConfig> Clone for LogStore<C> {
    fn clone(&self) -> Self {
        LogStore {
            inner: self.inner.clone(),
        }
    }
}

impl<C: RaftTypeConfig> Debug for LogStore<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.inner.st.borrow();
        f.debug_struct("LogStore")
            .field("dir", &self.inner.log.dir())
            .field("next_lsn", &st.next)
            .field("pending", &st.pending.len())
            .finish()
    }
}

struct St<C: RaftTypeConfig> {
    meta: Meta<C>,
    /// Entries appended and not yet durable, by index, each with the
    /// number of the append that queued it (a later append of the same
    /// index, after a truncation, must not be dropped when the earlier
    /// one becomes durable).
    pending: BTreeMap<u64, (u64, C::Entry)>,
    appends: u64,
    /// The LSN the next entry gets (pending ones counted).
    next: u64,
    /// The id of the last entry, if the log holds any.
    last: Option<LogIdOf<C>>,
    /// How long a committed id may wait to be saved (zero: not at all).
    committed_every: Duration,
    /// A save of the committed id is scheduled.
    committed_due: bool,
    /// The error of the last scheduled save, given to the next write.
    committed_err: Option<io::Error>,
}

fn lsn(index: u64) -> u64 {
    index + 1
}

fn bad_data(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("raft log entry: {e}"))
}

impl<C> LogStore<C>
where
    C: RaftTypeConfig,
    C::Entry: Serialize + DeserializeOwned + Clone,
{
    /// Open (or make) the Raft log in `dir`. Must run on a ringkit
    /// runtime; the store then belongs to it.
    pub async fn open(dir: impl AsRef<Path>, opts: Options) -> io::Result<Self> {
        let log = Log::open(dir, opts).await?;
        let meta: Meta<C> = match log.state() {
            Some(b) => serde_json::from_slice(&b).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: raft state: {e}", log.dir().display()),
                )
            })?,
            None => Meta::default(),
        };
        // A purge whose state was saved but whose log purge was cut short.
        if let Some(p) = &meta.purged {
            let below = lsn(p.index()) + 1;
            if log.first_lsn() < below {
                log.purge(below).await?;
            }
        }
        let next = log.next_lsn();
        let last = if next > log.first_lsn() {
            let e: C::Entry =
                serde_json::from_slice(&log.read(next - 1).await?).map_err(bad_data)?;
            Some(e.log_id())
        } else {
            None
        };
        Ok(LogStore {
            inner: Rc::new(Shared {
                log,
                st: RefCell::new(St {
                    meta,
                    pending: BTreeMap::new(),
                    appends: 0,
                    next,
                    last,
                    committed_every: Duration::from_millis(50),
                    committed_due: false,
                    committed_err: None,
                }),
            }),
        })
    }

    /// Save the committed log id at most once per `every` (and with every
    /// vote and purge); zero saves it durably on every call. See the
    /// [module docs](self) for what a crash then costs. A save still
    /// pending when the last clone of the store is dropped is not made
    /// (the log closes at once); one that fails is the error of the next
    /// write openraft asks for.
    pub fn set_committed_every(&self, every: Duration) {
        self.inner.st.borrow_mut().committed_every = every;
    }

    /// The ringkit-log underneath.
    pub fn log(&self) -> &Log {
        &self.inner.log
    }

    /// The first index the store holds (purged ones excluded).
    fn first_index(&self) -> u64 {
        let st = self.inner.st.borrow();
        let purged = st.meta.purged.as_ref().map_or(0, |p| p.index() + 1);
        purged.max(self.inner.log.first_lsn() - 1)
    }

    /// Save the meta as the log's state, queued after every write before.
    /// The error of a committed id's save made in the background, given
    /// to the next write openraft asks for (whichever it is).
    fn failed_save(&self) -> io::Result<()> {
        match self.inner.st.borrow_mut().committed_err.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn save_meta(&self) -> ringkit_log::Commit {
        let bytes = serde_json::to_vec(&self.inner.st.borrow().meta).expect("meta serialises");
        self.inner.log.save_state(bytes)
    }

    async fn entries(&self, lo: u64, hi: u64) -> io::Result<Vec<C::Entry>> {
        let lo = lo.max(self.first_index());
        if lo >= hi {
            return Ok(Vec::new());
        }
        // What is durable and what is still in memory, taken together:
        // entries leave the memory once durable, possibly while the file
        // read below waits, so the tail is copied first.
        let (durable_end, tail) = {
            let st = self.inner.st.borrow();
            let end = self.inner.log.next_lsn();
            let from = (end - 1).max(lo).min(hi);
            let tail: Vec<(u64, C::Entry)> = st
                .pending
                .range(from..hi)
                .map(|(&i, (_, e))| (i, e.clone()))
                .collect();
            (end, tail)
        };
        let mut out = Vec::new();
        let stop = durable_end.min(lsn(hi));
        let mut at = lsn(lo);
        while at < stop {
            let want = (stop - at).min(256) as usize;
            let got = self.inner.log.read_from(at, want).await?;
            let Some(&(l, _)) = got.last() else { break };
            for (_, b) in got {
                out.push(serde_json::from_slice(&b).map_err(bad_data)?);
            }
            at = l + 1;
        }
        let from = out.len() as u64 + lo;
        for (i, e) in tail {
            if i >= from {
                out.push(e);
            }
        }
        // Whole or an error: openraft must never see a gap.
        for (k, e) in out.iter().enumerate() {
            if e.index() != lo + k as u64 {
                return Err(io::Error::other(format!(
                    "raft log read {lo}..{hi}: entry {} where {} belongs (a truncation raced the read?)",
                    e.index(),
                    lo + k as u64
                )));
            }
        }
        Ok(out)
    }
}

impl<C> RaftLogReader<C> for LogStore<C>
where
    C: RaftTypeConfig,
    C::Entry: Serialize + DeserializeOwned + Clone,
{
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug>(
        &mut self,
        range: RB,
    ) -> Result<Vec<C::Entry>, io::Error> {
        let lo = match range.start_bound() {
            Bound::Included(&i) => i,
            Bound::Excluded(&i) => i + 1,
            Bound::Unbounded => 0,
        };
        let hi = match range.end_bound() {
            Bound::Included(&i) => i + 1,
            Bound::Excluded(&i) => i,
            Bound::Unbounded => u64::MAX,
        };
        let end = self.inner.st.borrow().next - 1;
        self.entries(lo, hi.min(end)).await
    }

    async fn read_vote(&mut self) -> Result<Option<VoteOf<C>>, io::Error> {
        Ok(self.inner.st.borrow().meta.vote.clone())
    }
}

impl<C> RaftLogStorage<C> for LogStore<C>
where
    C: RaftTypeConfig,
    C::Entry: Serialize + DeserializeOwned + Clone,
{
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<C>, io::Error> {
        let st = self.inner.st.borrow();
        let purged = st.meta.purged.clone();
        Ok(LogState {
            last_log_id: st.last.clone().or_else(|| purged.clone()),
            last_purged_log_id: purged,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &VoteOf<C>) -> Result<(), io::Error> {
        self.failed_save()?;
        self.inner.st.borrow_mut().meta.vote = Some(vote.clone());
        self.save_meta().await.map(drop)
    }

    async fn save_committed(&mut self, committed: Option<LogIdOf<C>>) -> Result<(), io::Error> {
        self.failed_save()?;
        let every = {
            let mut st = self.inner.st.borrow_mut();
            st.meta.committed = committed;
            if st.committed_due {
                return Ok(());
            }
            st.committed_due = !st.committed_every.is_zero();
            st.committed_every
        };
        if every.is_zero() {
            return self.save_meta().await.map(drop);
        }
        // Saved later, with whatever committed id is the latest by then;
        // not at all if the store is gone by then (as after a crash: the
        // committed id read back is older, never newer).
        let weak = Rc::downgrade(&self.inner);
        ringkit::spawn(async move {
            ringkit::time::sleep(every).await;
            let Some(inner) = weak.upgrade() else { return };
            let me = LogStore { inner };
            me.inner.st.borrow_mut().committed_due = false;
            if let Err(e) = me.save_meta().await {
                me.inner.st.borrow_mut().committed_err = Some(e);
            }
        });
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogIdOf<C>>, io::Error> {
        Ok(self.inner.st.borrow().meta.committed.clone())
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed<C>) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = C::Entry>,
    {
        self.failed_save()?;
        // Checked whole before anything is queued: a refused append leaves
        // the log as it was.
        let entries: Vec<C::Entry> = entries.into_iter().collect();
        let mut encoded = Vec::with_capacity(entries.len());
        {
            let st = self.inner.st.borrow();
            let mut next = st.next;
            for (k, entry) in entries.iter().enumerate() {
                let at = lsn(entry.index());
                // Only the first entry of an empty log may skip ahead.
                let skip = k == 0 && st.last.is_none() && at > next;
                if at != next && !skip {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!(
                            "append of index {} where index {} is next: the log takes no hole \
                             and no overwrite without truncate_after",
                            entry.index(),
                            next - 1
                        ),
                    ));
                }
                next = at + 1;
                encoded.push(serde_json::to_vec(entry).map_err(bad_data)?);
            }
        }
        let mut commits = Vec::new();
        let mut queued = Vec::new();
        let append_no = {
            let mut st = self.inner.st.borrow_mut();
            st.appends += 1;
            st.appends
        };
        for (entry, bytes) in entries.into_iter().zip(encoded) {
            let at = lsn(entry.index());
            let mut st = self.inner.st.borrow_mut();
            if at != st.next {
                // An empty log goes on at the entry's index (checked above).
                drop(self.inner.log.purge(at));
                st.next = at;
            }
            commits.push(self.inner.log.append(bytes));
            queued.push(entry.index());
            st.next = at + 1;
            st.last = Some(entry.log_id());
            st.pending.insert(entry.index(), (append_no, entry));
        }
        let inner = self.inner.clone();
        ringkit::spawn(async move {
            let mut res = Ok(());
            for c in commits {
                if let Err(e) = c.await {
                    res = Err(e);
                    break;
                }
            }
            let mut st = inner.st.borrow_mut();
            for i in queued {
                if st.pending.get(&i).is_some_and(|(n, _)| *n == append_no) {
                    st.pending.remove(&i);
                }
            }
            drop(st);
            callback.io_completed(res);
        });
        Ok(())
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogIdOf<C>>) -> Result<(), io::Error> {
        self.failed_save()?;
        let first = self.first_index();
        let from = last_log_id
            .as_ref()
            .map_or(first, |l| l.index() + 1)
            .max(first);
        {
            let mut st = self.inner.st.borrow_mut();
            if lsn(from) >= st.next {
                return Ok(());
            }
            st.pending.retain(|&i, _| i < from);
            st.next = lsn(from);
            st.last = last_log_id.filter(|l| l.index() >= first);
        }
        self.inner.log.truncate(lsn(from)).await.map(drop)
    }

    async fn purge(&mut self, log_id: LogIdOf<C>) -> Result<(), io::Error> {
        self.failed_save()?;
        let below = lsn(log_id.index()).saturating_add(1);
        let state = {
            let mut st = self.inner.st.borrow_mut();
            // Checked before the purged id is saved: the log refuses to
            // skip further, and a state naming such a purge would not open.
            if below - st.next.min(below) > u64::from(u32::MAX) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("purge up to index {}: too far past the end", log_id.index()),
                ));
            }
            if st.meta.purged.as_ref().is_some_and(|p| *p >= log_id) {
                return Ok(());
            }
            st.meta.purged = Some(log_id.clone());
            st.pending.retain(|&i, _| i > log_id.index());
            if st.last.as_ref().is_none_or(|l| l.index() <= log_id.index()) {
                st.last = None;
            }
            st.next = st.next.max(below);
            drop(st);
            self.save_meta()
        };
        let purge = self.inner.log.purge(below);
        state.await?;
        purge.await.map(drop)
    }
}
