//! The recorder: a [`FsHook`] that turns every change `ringkit::fs` makes
//! under one root directory into a trace of events on nodes (files and
//! directories, named by number, as inodes are), with the workload's
//! acknowledgements between them. It can also fail the k-th operation of
//! one kind (fault injection).

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

use ringkit::fs::hook::{Fault, FsHook, FsOp};

use super::cache::{self, DiskView};

mod linked;
use linked::Linked;

/// The `fallocate` mode that zeroes a range inside a file
/// (`FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE`), modelled as a write of
/// zeros.
const ZERO_RANGE: i32 = libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE;

pub use super::cache::Node;

/// One change, in the order the kernel saw it.
#[derive(Debug, Clone)]
pub enum Event {
    /// A new name `name` in directory `dir` for a new node.
    Create {
        dir: Node,
        name: OsString,
        node: Node,
        is_dir: bool,
    },
    /// `O_TRUNC` of an existing file.
    Truncate { node: Node },
    /// Bytes written at `offset`.
    Write {
        node: Node,
        offset: u64,
        data: Vec<u8>,
    },
    /// `fallocate` (mode 0: the size grows to cover the range).
    Alloc { node: Node, end: u64 },
    /// `fsync`/`fdatasync` of a file returned: its changes recorded before
    /// event `upto` (where the sync was issued) are durable. A change
    /// recorded later completed after the sync started, which need not
    /// cover it (two batches in flight: the second's write completes while
    /// the first's sync runs).
    SyncFile { node: Node, upto: usize },
    /// An `RWF_DSYNC` write returned: the bytes of its write (event
    /// `write`) are durable, and nothing else of the file.
    SyncWrite { node: Node, write: usize },
    /// `fsync` of a directory returned: its names changed before event
    /// `upto` are durable.
    SyncDir { node: Node, upto: usize },
    /// `from` renamed to `to`, both in directory `dir`.
    Rename {
        dir: Node,
        from: OsString,
        to: OsString,
    },
    /// `name` removed from `dir`.
    Remove { dir: Node, name: OsString },
    /// The workload saw record `lsn` acknowledged (payload number `id`).
    Ack { lsn: u64, id: u64 },
    /// The workload appended payload `id` (acknowledged or not later).
    Appended { id: u64 },
    /// The workload reopened the log (a new recovery starts here).
    Reopen,
    /// A crash: the workload goes on in a new root holding a crash state
    /// of the trace so far (each path, the node it now is, its bytes or
    /// `None` for a directory), all durable; `choice` says which state.
    Crash {
        files: Vec<(PathBuf, Node, Option<Vec<u8>>)>,
        choice: String,
    },
    /// The workload issued an edit of the log, or saw one acknowledged.
    Edit(Edit),
    /// An operation failed by fault injection.
    Faulted {
        what: String,
        node: Option<Node>,
        data: Vec<u8>,
    },
}

/// An edit the workload issued (then the same with its acknowledgement).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edit {
    /// `truncate(from)` called when payload `next_id` was the next to be
    /// appended.
    Truncate { from: u64, next_id: u64 },
    /// That truncation acknowledged.
    Truncated { from: u64, next_id: u64 },
    /// `purge(below)` called.
    Purge { below: u64 },
    /// That purge acknowledged.
    Purged { below: u64 },
    /// The `n`th `save_state` called.
    SaveState { n: u64 },
    /// That state acknowledged.
    StateSaved { n: u64 },
    /// A truncation that failed, found not done by the next recovery.
    NotTruncated { from: u64, next_id: u64 },
    /// A purge that failed, found not done by the next recovery.
    NotPurged { below: u64 },
    /// A purge past the end that failed after its hole was written: the
    /// next recovery keeps the records before it, and the LSNs up to
    /// `below` stay skipped.
    PurgeHole { below: u64 },
    /// A state save that failed, found not in place by the next recovery.
    NotSaved { n: u64 },
}

/// Which operations a fault plan counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    Open,
    Read,
    Write,
    Sync,
    Alloc,
    Rename,
    Remove,
    Mkdir,
}

impl OpKind {
    /// Every kind.
    pub const ALL: [OpKind; 8] = [
        OpKind::Open,
        OpKind::Read,
        OpKind::Write,
        OpKind::Sync,
        OpKind::Alloc,
        OpKind::Rename,
        OpKind::Remove,
        OpKind::Mkdir,
    ];

    fn of(op: &FsOp<'_>) -> Option<OpKind> {
        Some(match op {
            FsOp::Open { .. } => OpKind::Open,
            FsOp::Read { .. } => OpKind::Read,
            FsOp::Write { .. } | FsOp::WriteSync { .. } | FsOp::WriteDsync { .. } => OpKind::Write,
            FsOp::Sync { .. } => OpKind::Sync,
            FsOp::Allocate { .. } | FsOp::SetLen { .. } => OpKind::Alloc,
            FsOp::Rename { .. } => OpKind::Rename,
            FsOp::Remove { .. } => OpKind::Remove,
            FsOp::CreateDir { .. } => OpKind::Mkdir,
            FsOp::Close { .. } => return None,
        })
    }
}

/// What to fail: the `nth` (from 1) operation of `kind` under the root,
/// with `error` (`None`, for writes: a short write, cut at the last page
/// boundary of the file before its middle, or `ENOSPC` if there is none).
#[derive(Debug, Clone, Copy)]
pub struct FaultPlan {
    pub kind: OpKind,
    pub nth: u64,
    pub error: Option<i32>,
}

#[derive(Debug, Default)]
struct State {
    events: Vec<Event>,
    names: HashMap<PathBuf, Node>,
    dirs: Vec<bool>,
    fds: HashMap<RawFd, Node>,
    counts: HashMap<OpKind, u64>,
    fault: Option<FaultPlan>,
    fired: bool,
    /// The fault refused an `RWF_DSYNC` write (`EOPNOTSUPP`, `ENOSYS`).
    refused: bool,
    /// Per descriptor, where each sync in flight was issued (the trace's
    /// length then), oldest first.
    sync_starts: HashMap<RawFd, std::collections::VecDeque<usize>>,
    /// Rules of the log's own broken as it ran (two syncs of one file in
    /// flight).
    violations: Vec<String>,
    /// Linked writes and syncs in flight, by descriptor and offset: the
    /// index of their write's event (recorded when issued) and where their
    /// sync was counted as started.
    linked: HashMap<(RawFd, u64), Linked>,
    /// Writes with their own sync that returned.
    linked_done: u64,
    /// Of those, `RWF_DSYNC` writes.
    dsync_done: u64,
    /// The disk apart from the page cache.
    disk: DiskView,
    /// Crashes the workload went through.
    crashes: u64,
    /// Ranges zeroed with `FALLOC_FL_ZERO_RANGE`.
    zeroed_ranges: u64,
    /// The disk's bytes under each write in flight, by descriptor and
    /// offset, taken when it was issued.
    pre: HashMap<(RawFd, u64), Vec<u8>>,
}

/// Records every change under `root` (which must exist and be empty).
#[derive(Debug)]
pub struct Recorder {
    /// Where the recorded tree is (a crash moves it to a new directory).
    root: RefCell<PathBuf>,
    st: RefCell<State>,
    /// A process kill, armed by the workload.
    pub kill: super::kill::Kill,
    /// The live log's state, asked at every operation.
    pub watch: super::watch::Watch,
}

impl Recorder {
    /// A recorder of `root`, failing as `fault` says.
    pub fn new(root: &Path, fault: Option<FaultPlan>) -> Recorder {
        let mut st = State {
            fault,
            ..State::default()
        };
        st.names.insert(PathBuf::new(), 0);
        st.dirs.push(true);
        Recorder {
            root: RefCell::new(root.to_path_buf()),
            st: RefCell::new(st),
            kill: Default::default(),
            watch: Default::default(),
        }
    }

    /// Add a workload event.
    pub fn note(&self, e: Event) {
        self.st.borrow_mut().events.push(e);
    }

    /// The log's own rules it saw broken as the workload ran.
    pub fn violations(&self) -> Vec<String> {
        self.st.borrow().violations.clone()
    }

    /// How many writes with their own sync returned, and how many of
    /// those were `RWF_DSYNC` writes.
    pub fn linked(&self) -> (u64, u64) {
        let st = self.st.borrow();
        (st.linked_done, st.dsync_done)
    }

    /// Writes a failed sync left in the cache only, and `O_DIRECT` reads
    /// shown the disk's bytes instead of the cache's.
    pub fn cache_split(&self) -> (u64, u64) {
        let st = self.st.borrow();
        (st.disk.lost_ranges, st.disk.reads_shown)
    }

    /// Whether the planned fault was injected.
    pub fn fired(&self) -> bool {
        self.st.borrow().fired
    }

    /// Whether the fault refused an `RWF_DSYNC` write.
    pub fn refused(&self) -> bool {
        self.st.borrow().refused
    }

    /// The workload goes on in `root`, which holds `files` (a crash state,
    /// see `crash.rs`): new nodes for them, all durable; descriptors open
    /// before are forgotten, and late operations of the crashed log on the
    /// old tree are not the recorder's any more.
    pub fn crashed(&self, root: &Path, files: Vec<(PathBuf, Option<Vec<u8>>)>, choice: String) {
        *self.root.borrow_mut() = root.to_path_buf();
        let mut guard = self.st.borrow_mut();
        let st = &mut *guard;
        st.names.clear();
        st.names.insert(PathBuf::new(), 0);
        st.fds.clear();
        st.sync_starts.clear();
        st.linked.clear();
        st.pre.clear();
        st.disk.forget();
        let mut out = Vec::with_capacity(files.len());
        for (rel, data) in files {
            let node = st.dirs.len();
            st.dirs.push(data.is_none());
            st.names.insert(rel.clone(), node);
            out.push((rel, node, data));
        }
        st.crashes += 1;
        st.events.push(Event::Crash { files: out, choice });
    }

    /// Ranges zeroed with `FALLOC_FL_ZERO_RANGE` that completed.
    pub fn zeroed_ranges(&self) -> u64 {
        self.st.borrow().zeroed_ranges
    }

    /// How many crashes the workload went through.
    pub fn crashes(&self) -> u64 {
        self.st.borrow().crashes
    }

    /// Stop injecting faults.
    pub fn disarm(&self) {
        self.st.borrow_mut().fault = None;
    }

    /// How many events the trace holds.
    pub fn event_count(&self) -> usize {
        self.st.borrow().events.len()
    }

    /// The trace so far.
    pub fn events(&self) -> Vec<Event> {
        self.st.borrow().events.clone()
    }

    fn rel(&self, p: &Path) -> Option<PathBuf> {
        p.strip_prefix(&*self.root.borrow())
            .ok()
            .map(Path::to_path_buf)
    }

    /// The directory node and name of `rel`.
    fn parent(st: &State, rel: &Path) -> Option<(Node, OsString)> {
        let dir = rel.parent().unwrap_or(Path::new(""));
        Some((*st.names.get(dir)?, rel.file_name()?.to_os_string()))
    }

    /// A new node named `rel` (its directory must be known), recorded.
    fn create(st: &mut State, rel: PathBuf, is_dir: bool) -> Option<Node> {
        let (dir, name) = Self::parent(st, &rel)?;
        let node = st.dirs.len();
        st.dirs.push(is_dir);
        st.names.insert(rel, node);
        st.events.push(Event::Create {
            dir,
            name,
            node,
            is_dir,
        });
        Some(node)
    }

    /// Whether `op` is under the root (a descriptor we track, or a path).
    fn ours(&self, st: &State, op: &FsOp<'_>) -> bool {
        match op {
            FsOp::Open { path, .. } | FsOp::Remove { path } | FsOp::CreateDir { path } => {
                self.rel(path).is_some()
            }
            FsOp::Rename { from, .. } => self.rel(from).is_some(),
            FsOp::Read { fd, .. }
            | FsOp::Write { fd, .. }
            | FsOp::WriteSync { fd, .. }
            | FsOp::WriteDsync { fd, .. }
            | FsOp::Sync { fd, .. }
            | FsOp::Allocate { fd, .. }
            | FsOp::SetLen { fd, .. }
            | FsOp::Close { fd } => st.fds.contains_key(fd),
        }
    }

    fn node_of(&self, st: &State, op: &FsOp<'_>) -> Option<Node> {
        match op {
            FsOp::Read { fd, .. }
            | FsOp::Write { fd, .. }
            | FsOp::WriteSync { fd, .. }
            | FsOp::WriteDsync { fd, .. }
            | FsOp::Sync { fd, .. }
            | FsOp::Allocate { fd, .. }
            | FsOp::SetLen { fd, .. } => st.fds.get(fd).copied(),
            _ => None,
        }
    }
}

impl FsHook for Recorder {
    fn before(&self, op: &FsOp<'_>) -> Option<Fault> {
        if self.ours(&self.st.borrow(), op) && self.kill.refuses() {
            return Some(Fault::Fail(io::Error::from_raw_os_error(libc::EIO)));
        }
        if let Some(n) = self.watch.news() {
            self.note(Event::Edit(Edit::StateSaved { n }));
        }
        let dsync = matches!(op, FsOp::WriteDsync { .. });
        if let FsOp::WriteSync { fd, offset, data } | FsOp::WriteDsync { fd, offset, data } = op {
            if self.ours(&self.st.borrow(), op) && self.kill.splits_linked() {
                return self.linked_killed(*fd, *offset, data, dsync);
            }
        }
        let fault = self.fault_for(op);
        if let FsOp::WriteSync { fd, offset, data } | FsOp::WriteDsync { fd, offset, data } = op {
            return self.linked_before(*fd, *offset, data, fault, dsync);
        }
        if let (None, FsOp::Sync { fd, .. }) = (&fault, op) {
            self.sync_started(*fd);
        }
        let written = match (&fault, op) {
            (None | Some(Fault::Short(_)), FsOp::Write { fd, offset, data }) => {
                Some((*fd, *offset, data.len()))
            }
            (
                None,
                &FsOp::Allocate {
                    fd,
                    mode,
                    offset,
                    len,
                },
            ) if mode == ZERO_RANGE => Some((fd, offset, len as usize)),
            _ => None,
        };
        if let Some((fd, offset, len)) = written {
            let mut st = self.st.borrow_mut();
            if let Some(&node) = st.fds.get(&fd) {
                let old = st.disk.before_write(fd, node, offset, len);
                st.pre.insert((fd, offset), old);
            }
        }
        fault
    }

    fn read_done(&self, fd: RawFd, offset: u64, data: &mut [u8]) {
        let mut st = self.st.borrow_mut();
        if let Some(&node) = st.fds.get(&fd) {
            if cache::is_direct(fd) {
                st.disk.direct_read(node, offset, data);
            }
        }
    }

    fn after(&self, op: &FsOp<'_>, res: &io::Result<u64>) {
        let mut guard = self.st.borrow_mut();
        let st = &mut *guard;
        if !self.ours(st, op) {
            return;
        }
        if !matches!(op, FsOp::Close { .. } | FsOp::Read { .. }) {
            self.kill.completed();
        }
        if let FsOp::WriteSync { fd, offset, .. } | FsOp::WriteDsync { fd, offset, .. } = op {
            Self::linked_after(st, *fd, *offset, res);
            return;
        }
        // Where the sync now returning was issued. Syncs of one descriptor
        // may return out of order; taking the oldest start is still sound:
        // after k of them returned, the latest start among those k is at
        // or past the k-th oldest, so everything before the k-th oldest is
        // covered by one that returned.
        // A descriptor closed with a sync never returned (its task was
        // dropped) must not lend that sync's start to the next file that
        // gets the same number.
        let upto = match op {
            FsOp::Sync { fd, .. } => st.sync_starts.get_mut(fd).and_then(|q| q.pop_front()),
            FsOp::Close { fd } => {
                st.sync_starts.remove(fd);
                None
            }
            _ => None,
        };
        let Ok(n) = res else { return };
        self.record(st, op, *n, upto);
    }
}

impl Recorder {
    /// A write of `data` at `offset` of `fd` completed (whole, or the
    /// part a short write wrote).
    fn wrote(st: &mut State, fd: RawFd, offset: u64, data: Vec<u8>) {
        let node = st.fds[&fd];
        if let Some(mut old) = st.pre.remove(&(fd, offset)) {
            old.truncate(data.len());
            let at = st.events.len();
            st.disk.wrote(node, at, offset, old);
        }
        st.events.push(Event::Write { node, offset, data });
    }

    /// A sync of `fd` is issued now: flag it if another is in flight.
    fn sync_started(&self, fd: RawFd) {
        {
            let mut st = self.st.borrow_mut();
            if st.fds.contains_key(&fd) {
                let at = st.events.len();
                let q = st.sync_starts.entry(fd).or_default();
                // A writeback error is reported to one `fdatasync` of an
                // open file: the other could return success over pages the
                // kernel failed to write. The log never overlaps them.
                let overlap = !q.is_empty();
                q.push_back(at);
                if overlap {
                    st.violations.push(format!(
                        "two fdatasyncs of one file in flight at once (event {at}): \
                         a writeback error reaches only one of them"
                    ));
                }
            }
        }
    }

    /// The fault planned for `op`, if this is its turn (counted either way).
    fn fault_for(&self, op: &FsOp<'_>) -> Option<Fault> {
        let mut st = self.st.borrow_mut();
        if !self.ours(&st, op) {
            return None;
        }
        let kind = OpKind::of(op)?;
        fn bump(st: &mut State, kind: OpKind) -> u64 {
            let c = st.counts.entry(kind).or_insert(0);
            *c += 1;
            *c
        }
        let n = bump(&mut st, kind);
        let plan = st.fault?;
        let is_write = matches!(
            op,
            FsOp::Write { .. } | FsOp::WriteSync { .. } | FsOp::WriteDsync { .. }
        );
        if st.fired || plan.kind != kind || plan.nth != n {
            // A linked write's sync, or an `RWF_DSYNC` write's, counts as a
            // sync (issued only after the write: never when the write is
            // faulted).
            if let FsOp::WriteSync { fd, .. } | FsOp::WriteDsync { fd, .. } = op {
                let m = bump(&mut st, OpKind::Sync);
                if !st.fired && plan.kind == OpKind::Sync && plan.nth == m {
                    st.fired = true;
                    let node = self.node_of(&st, op);
                    st.events.push(Event::Faulted {
                        what: format!("fdatasync fd {fd} (linked)"),
                        node,
                        data: Vec::new(),
                    });
                    let e = plan.error.unwrap_or(libc::EIO);
                    return Some(Fault::FailSync(io::Error::from_raw_os_error(e)));
                }
            }
            return None;
        }
        st.fired = true;
        let node = self.node_of(&st, op);
        // A short write is not a failure (the rest is written after it):
        // named apart, so a poisoned log is looked for only after errors.
        let short = plan.error.is_none() && is_write;
        // A kernel without `RWF_DSYNC` refuses it before writing anything:
        // not a failed write (the log writes the batch again another way),
        // so named apart too.
        let refused = matches!(op, FsOp::WriteDsync { .. })
            && matches!(plan.error, Some(libc::EOPNOTSUPP | libc::ENOSYS));
        st.refused = refused;
        let what = if short {
            format!("short {op}")
        } else if refused {
            format!("refused {op}")
        } else {
            op.to_string()
        };
        let data = match op {
            FsOp::Write { data, .. }
            | FsOp::WriteSync { data, .. }
            | FsOp::WriteDsync { data, .. } => data.to_vec(),
            _ => Vec::new(),
        };
        if let (FsOp::Sync { .. }, Some(n)) = (op, node) {
            st.disk.failed(n);
        }
        st.events.push(Event::Faulted { what, node, data });
        Some(match (plan.error, op) {
            // A short write to a file ends where the kernel stopped copying:
            // at a page boundary of the file (the page it could not get
            // fails whole). With none inside the write, nothing is written.
            (
                None,
                FsOp::Write { data, offset, .. }
                | FsOp::WriteSync { data, offset, .. }
                | FsOp::WriteDsync { data, offset, .. },
            ) => {
                let cut = (offset + data.len() as u64 / 2) / 4096 * 4096;
                if cut > *offset {
                    Fault::Short((cut - offset) as usize)
                } else {
                    Fault::Fail(io::Error::from_raw_os_error(libc::ENOSPC))
                }
            }
            (Some(e), _) => Fault::Fail(io::Error::from_raw_os_error(e)),
            (None, _) => Fault::Fail(io::Error::from_raw_os_error(libc::EIO)),
        })
    }

    /// Record `op`, which completed with `n`; a sync covers the changes
    /// recorded before `upto`.
    fn record(&self, st: &mut State, op: &FsOp<'_>, n: u64, upto: Option<usize>) {
        let n = &n;
        match op {
            FsOp::Open {
                path,
                create,
                truncate,
                ..
            } => {
                let Some(rel) = self.rel(path) else { return };
                let node = match st.names.get(&rel) {
                    Some(&node) => {
                        if *truncate && !st.dirs[node] {
                            st.disk.truncated(node);
                            st.events.push(Event::Truncate { node });
                        }
                        node
                    }
                    None if *create => {
                        let Some(node) = Self::create(st, rel, false) else {
                            return;
                        };
                        node
                    }
                    None => return, // made outside the recorder's view
                };
                st.fds.insert(*n as RawFd, node);
            }
            FsOp::CreateDir { path } => {
                if let Some(rel) = self.rel(path) {
                    Self::create(st, rel, true);
                }
            }
            FsOp::Write { fd, offset, data } => Self::wrote(st, *fd, *offset, data.to_vec()),
            // Zeroing a range inside the file (a recycled segment): its
            // bytes read as zeros, and a crash before a sync may leave any
            // of its sectors old or zero, as after a write of zeros.
            &FsOp::Allocate {
                fd,
                mode,
                offset,
                len,
            } if mode == ZERO_RANGE => {
                st.zeroed_ranges += 1;
                Self::wrote(st, fd, offset, vec![0; len as usize])
            }
            FsOp::Sync { fd, .. } => {
                let node = st.fds[fd];
                let upto = upto.unwrap_or(st.events.len());
                st.disk.synced(node, upto);
                st.events.push(if st.dirs[node] {
                    Event::SyncDir { node, upto }
                } else {
                    Event::SyncFile { node, upto }
                });
            }
            FsOp::Allocate {
                fd,
                mode,
                offset,
                len,
            } => {
                if *mode == 0 {
                    let node = st.fds[fd];
                    st.events.push(Event::Alloc {
                        node,
                        end: offset + len,
                    });
                } else {
                    // Punched holes and other modes change bytes the
                    // model would not see: say so rather than go blind.
                    st.violations.push(format!(
                        "fallocate mode {mode:#x}: the explorer models only mode 0 and a \
                         zeroed range"
                    ));
                }
            }
            // A size change drops or adds bytes the model would not see
            // (ringkit-log never makes one): say so rather than go blind.
            FsOp::SetLen { len, .. } => st.violations.push(format!(
                "set_len to {len}: the explorer does not model size changes"
            )),
            FsOp::Rename { from, to } => {
                let (Some(f), Some(t)) = (self.rel(from), self.rel(to)) else {
                    return;
                };
                let (Some((dir, fname)), Some((tdir, tname))) =
                    (Self::parent(st, &f), Self::parent(st, &t))
                else {
                    return;
                };
                assert_eq!(
                    dir, tdir,
                    "the recorder models renames within one directory"
                );
                if let Some(node) = st.names.remove(&f) {
                    st.names.insert(t, node);
                }
                st.events.push(Event::Rename {
                    dir,
                    from: fname,
                    to: tname,
                });
            }
            FsOp::Remove { path } => {
                let Some(rel) = self.rel(path) else { return };
                let Some((dir, name)) = Self::parent(st, &rel) else {
                    return;
                };
                st.names.remove(&rel);
                st.events.push(Event::Remove { dir, name });
            }
            FsOp::Close { fd } => {
                st.fds.remove(fd);
            }
            FsOp::Read { .. } | FsOp::WriteSync { .. } | FsOp::WriteDsync { .. } => {}
        }
    }
}
