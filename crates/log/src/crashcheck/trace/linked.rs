//! Writes that carry their own sync: a write linked to an `fdatasync`
//! (`FsOp::WriteSync`, the sync over the whole file, run only after every
//! byte was written) and an `RWF_DSYNC` write (`FsOp::WriteDsync`, the
//! sync over the bytes it wrote, a short write's included). Each is
//! recorded as its write when issued and as the sync's effect when it
//! returns.

use std::io;
use std::os::fd::RawFd;

use ringkit::fs::hook::Fault;

use super::{Event, Recorder, State};

/// A write with its own sync, in flight.
#[derive(Debug, Clone, Copy)]
pub(super) struct Linked {
    /// The index of its write's event.
    write: usize,
    /// The bytes it asked to write.
    len: usize,
    /// Where its sync was counted as started (`sync_starts`), if it runs.
    start: Option<usize>,
    /// Whether its sync was failed by fault injection.
    sync_failed: bool,
    /// `RWF_DSYNC`: the sync covers what the write wrote, and runs after a
    /// short write too. Else a linked `fdatasync`: it covers the whole
    /// file, and a short write cancels it.
    dsync: bool,
}

impl Recorder {
    /// A write with its own sync is issued: its write is recorded now (the
    /// kernel may write any of it from here on), as much of it as the
    /// planted fault lets through; a failed sync is recorded after it.
    pub(super) fn linked_before(
        &self,
        fd: RawFd,
        offset: u64,
        data: &[u8],
        fault: Option<Fault>,
        dsync: bool,
    ) -> Option<Fault> {
        let (written, sync_failed) = match &fault {
            None => (data.len(), false),
            Some(Fault::Short(n)) => (*n, false),
            Some(Fault::FailSync(_)) => (data.len(), true),
            Some(Fault::Fail(_)) => return fault,
        };
        let mut st = self.st.borrow_mut();
        let Some(&node) = st.fds.get(&fd) else {
            return fault;
        };
        // The failed sync's event was pushed by `fault_for`: the write goes
        // before it, so that the sync's failure covers it.
        let at = st.events.len() - usize::from(sync_failed);
        let old = st.disk.before_write(fd, node, offset, written);
        st.disk.wrote(node, at, offset, old);
        if sync_failed {
            st.disk.failed(node);
        }
        st.events.insert(
            at,
            Event::Write {
                node,
                offset,
                data: data[..written].to_vec(),
            },
        );
        // The sync runs (a failed one too) unless a linked write came up
        // short; an `RWF_DSYNC` write syncs what it wrote.
        let start = (dsync || written == data.len()).then_some(st.events.len());
        st.linked.insert(
            (fd, offset),
            Linked {
                write: at,
                len: data.len(),
                start,
                sync_failed,
                dsync,
            },
        );
        drop(st);
        if start.is_some() {
            self.sync_started(fd);
        }
        fault
    }

    /// A write with its own sync that the kill splits: the write is
    /// recorded (it reaches the page cache), its sync is never issued and
    /// not recorded.
    pub(super) fn linked_killed(
        &self,
        fd: RawFd,
        offset: u64,
        data: &[u8],
        dsync: bool,
    ) -> Option<Fault> {
        let mut st = self.st.borrow_mut();
        if let Some(&node) = st.fds.get(&fd) {
            let at = st.events.len();
            let old = st.disk.before_write(fd, node, offset, data.len());
            st.disk.wrote(node, at, offset, old);
            st.events.push(Event::Write {
                node,
                offset,
                data: data.to_vec(),
            });
            st.linked.insert(
                (fd, offset),
                Linked {
                    write: at,
                    len: data.len(),
                    start: None,
                    sync_failed: true,
                    dsync,
                },
            );
        }
        Some(Fault::FailSync(io::Error::from_raw_os_error(libc::EIO)))
    }

    /// A write with its own sync returned. A linked `fdatasync` that ran
    /// and succeeded covers everything recorded before the pair was issued
    /// and its own write (not what completed beside it); an `RWF_DSYNC`
    /// write that succeeded covers the bytes it wrote, nothing else.
    pub(super) fn linked_after(st: &mut State, fd: RawFd, offset: u64, res: &io::Result<u64>) {
        let Some(l) = st.linked.remove(&(fd, offset)) else {
            return;
        };
        let node = st.fds[&fd];
        st.linked_done += 1;
        st.dsync_done += u64::from(l.dsync);
        if let (Some(start), Some(q)) = (l.start, st.sync_starts.get_mut(&fd)) {
            if let Some(i) = q.iter().position(|&s| s == start) {
                q.remove(i);
            }
        }
        match res {
            Ok(n) if l.dsync && !l.sync_failed => {
                if let Event::Write { data: d, .. } = &mut st.events[l.write] {
                    d.truncate(*n as usize);
                }
                st.disk.synced_write(node, l.write);
                st.events.push(Event::SyncWrite {
                    node,
                    write: l.write,
                });
            }
            Ok(n) if *n as usize == l.len && !l.sync_failed => {
                st.disk.synced(node, l.write + 1);
                st.events.push(Event::SyncFile {
                    node,
                    upto: l.write + 1,
                });
            }
            // Short: what the kernel wrote, nothing synced.
            Ok(n) => {
                if let Event::Write { data: d, .. } = &mut st.events[l.write] {
                    d.truncate(*n as usize);
                }
            }
            Err(_) if l.sync_failed => {}
            // A sync failure of the disk's own: what it covered is in limbo.
            Err(e) => {
                st.disk.failed(node);
                let how = if l.dsync { "RWF_DSYNC" } else { "linked" };
                st.events.push(Event::Faulted {
                    what: format!("fdatasync fd {fd} ({how}, {e})"),
                    node: Some(node),
                    data: Vec::new(),
                });
            }
        }
    }
}
