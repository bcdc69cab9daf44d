//! The flusher's decisions, without I/O: which queued items the next
//! batch takes and where it goes, when a batch's sync may start, and when
//! its appends may be acknowledged. `flush.rs` frames and writes what this
//! plans, and reports back what the disk said (`written`, `synced`); the
//! rules of the flusher's module doc are assertions here, unit-tested below
//! without a runtime:
//!
//! - a batch starts where the one before it ends (or where the records
//!   end), at the next LSN, on a block in direct mode, inside its segment
//!   and its window, with at most `depth` batches in flight;
//! - one sync of the segment at a time, in batch order, each issued only
//!   after its own write returned whole (a linked or `RWF_DSYNC` sync goes
//!   with its write only when nothing is in flight before it);
//! - a batch is done only when it and every batch before it are settled,
//!   in order; after a failed one, nothing later is synced or acknowledged.

use std::collections::VecDeque;

use crate::frame::BATCH_HEADER;
use crate::record::HEADER;

/// The last segment and the options, as the next batch sees them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Geometry {
    /// The segment file's size.
    pub size: u64,
    /// Its window (from its header): most bytes in flight at once.
    pub window: u64,
    /// Its depth (from its header): most batches in flight at once.
    pub depth: usize,
    /// What a batch starts on and is padded to: the block in direct mode
    /// (`O_DIRECT`), 1 buffered.
    pub align: u64,
    /// The block (the segment header's `align`): the room the window
    /// keeps for a batch's padding.
    pub block: u64,
    /// The options' bound on a batch's record bytes.
    pub max_batch: usize,
}

impl Geometry {
    /// Whether a batch of `bytes` record bytes at `at` fits the segment
    /// (with its header and padding). In direct mode a batch must start on
    /// a block: an end left unaligned (a buffered log reopened direct, with
    /// no room left to pad) fits nothing, so a new segment starts.
    pub(crate) fn fits(&self, at: u64, bytes: usize) -> bool {
        at % self.align == 0 && at + self.padded(at, bytes) as u64 <= self.size
    }

    /// The length on disk of a batch of `bytes` record bytes at `at`:
    /// header, records, zeros to a block in direct mode, and zeros so the
    /// next header does not straddle a sector.
    pub(crate) fn padded(&self, at: u64, bytes: usize) -> usize {
        let align = self.align as usize;
        no_straddle(at, (BATCH_HEADER + bytes).div_ceil(align) * align)
    }
}

/// The length of a batch of `len` bytes at `start`, padded so that the
/// next batch's header does not straddle a 512-byte sector: a header then
/// lies in one sector, which a crash leaves whole or zero, so a header
/// that is neither is damage (see `segment::classify`).
pub(crate) fn no_straddle(start: u64, len: usize) -> usize {
    let next = (start + len as u64) % 512;
    if next > 512 - BATCH_HEADER as u64 {
        len + (512 - next) as usize
    } else {
        len
    }
}

/// Where the acknowledged records end: the next batch's place when
/// nothing is in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tail {
    /// Offset in the last segment.
    pub end: u64,
    /// The next LSN.
    pub next_lsn: u64,
}

/// A queued item, as the plan sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Queued {
    /// A record of this many payload bytes.
    Record(usize),
    /// A hole of this many LSNs.
    Hole(u64),
    /// An edit.
    Edit,
}

impl Queued {
    /// Its bytes in a batch (a hole has none).
    fn bytes(self) -> usize {
        match self {
            Queued::Record(n) => HEADER + n,
            // As much room as an empty record: a hole's batch holds none.
            Queued::Hole(_) => HEADER,
            Queued::Edit => 0,
        }
    }
}

/// What the front of the queue waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Nothing can start now.
    Wait,
    /// An edit, with nothing in flight.
    Edit,
    /// The first record does not fit this segment (nothing in flight):
    /// start the next one.
    Roll,
    /// A batch can start: [`Pipeline::plan`].
    Batch,
}

/// A batch to frame and write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Its number, for the events about it.
    pub id: u64,
    /// Its first LSN.
    pub first: u64,
    /// Its offset in the segment.
    pub start: u64,
    /// How many items it takes from the front of the queue.
    pub take: usize,
    /// The LSNs of a hole (a batch of its own), or 0.
    pub hole: u64,
    /// Bytes of its records, their headers included.
    pub body: usize,
    /// Its length on disk: header, records, padding.
    pub len: usize,
    /// Whether its sync goes with its write (linked, or one `RWF_DSYNC`
    /// write): only when no batch is in flight before it.
    pub sync_with_write: bool,
}

impl Plan {
    /// The LSNs it takes.
    pub(crate) fn lsns(&self) -> u64 {
        if self.hole > 0 {
            self.hole
        } else {
            self.take as u64
        }
    }
}

/// A batch's way through the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Its write is in flight (with its sync when linked).
    Writing,
    /// Written whole; its sync waits for the one before it.
    Written,
    /// Its sync is in flight.
    Syncing,
    /// What its sync (or failed write) said.
    Settled(bool),
}

#[derive(Debug, Clone)]
struct Flight {
    plan: Plan,
    stage: Stage,
}

/// A batch whose fate is known, handed out in batch order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Done {
    /// The batch as planned.
    pub plan: Plan,
    /// Whether its appends may be acknowledged: its write and sync, and
    /// every earlier batch's, succeeded.
    pub ok: bool,
}

/// The batches in flight in the last segment, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Pipeline {
    flight: VecDeque<Flight>,
    next_id: u64,
    /// A batch failed: nothing after it is synced or acknowledged.
    broken: bool,
}

impl Pipeline {
    /// Batches in flight.
    pub(crate) fn len(&self) -> usize {
        self.flight.len()
    }

    /// Where the next batch goes: after the last one in flight, else
    /// where the acknowledged records end.
    pub(crate) fn tail(&self, acked: Tail) -> Tail {
        self.flight.back().map_or(acked, |f| Tail {
            end: f.plan.start + f.plan.len as u64,
            next_lsn: f.plan.first + f.plan.lsns(),
        })
    }

    /// The most record bytes the next batch may hold: the options' bound,
    /// and what the segment's window leaves beside the batches in flight.
    pub(crate) fn limit(&self, geo: &Geometry) -> usize {
        let busy: u64 = self.flight.iter().map(|f| f.plan.len as u64).sum();
        let in_window =
            geo.window
                .saturating_sub(busy + BATCH_HEADER as u64 + geo.block) as usize;
        geo.max_batch.min(in_window)
    }

    /// What the front of the queue can do now. `buffer_free`: a batch
    /// buffer is not in flight.
    pub(crate) fn next(
        &self,
        geo: &Geometry,
        acked: Tail,
        front: Option<Queued>,
        buffer_free: bool,
    ) -> Next {
        // A log whose batch failed starts nothing more (the flusher fails
        // what is queued).
        let Some(front) = front.filter(|_| !self.broken) else {
            return Next::Wait;
        };
        let room = |p: &Pipeline| {
            let first = front.bytes();
            first <= p.limit(geo) && geo.fits(p.tail(acked).end, first)
        };
        if self.flight.is_empty() {
            return match front {
                Queued::Edit => Next::Edit,
                _ if !room(self) => Next::Roll,
                _ => Next::Batch,
            };
        }
        // An edit, and a new segment, wait for every batch before them.
        if front == Queued::Edit || self.flight.len() >= geo.depth || !buffer_free || !room(self) {
            return Next::Wait;
        }
        Next::Batch
    }

    /// The next batch: the queue's front records while they fit (at least
    /// one), or a hole alone; it stops before an edit or a hole.
    pub(crate) fn plan(
        &self,
        geo: &Geometry,
        acked: Tail,
        queue: impl IntoIterator<Item = Queued>,
    ) -> Plan {
        let tail = self.tail(acked);
        let limit = self.limit(geo);
        let (mut take, mut hole, mut body) = (0, 0, 0);
        for q in queue {
            match q {
                Queued::Edit => break,
                Queued::Hole(n) if take == 0 => {
                    (take, hole) = (1, n);
                    break;
                }
                Queued::Hole(_) => break,
                Queued::Record(_) => {
                    let need = q.bytes();
                    // The first record always goes (`next` said it fits).
                    if take > 0 && (body + need > limit || !geo.fits(tail.end, body + need)) {
                        break;
                    }
                    take += 1;
                    body += need;
                }
            }
        }
        assert!(take > 0, "a batch planned with nothing to take");
        Plan {
            id: self.next_id,
            first: tail.next_lsn,
            start: tail.end,
            take,
            hole,
            body,
            len: geo.padded(tail.end, body),
            sync_with_write: self.flight.is_empty(),
        }
    }

    /// `plan`'s write was issued.
    pub(crate) fn start(&mut self, geo: &Geometry, acked: Tail, plan: Plan) {
        let tail = self.tail(acked);
        assert_eq!(plan.id, self.next_id, "a batch started out of turn");
        assert_eq!(
            (plan.start, plan.first),
            (tail.end, tail.next_lsn),
            "a batch framed apart from the one before it"
        );
        assert!(
            self.flight.len() < geo.depth,
            "more batches in flight than the depth"
        );
        let busy: u64 = self.flight.iter().map(|f| f.plan.len as u64).sum();
        assert!(
            busy + plan.len as u64 <= geo.window,
            "more bytes in flight than the segment's window"
        );
        assert!(
            plan.start + plan.len as u64 <= geo.size,
            "a batch past its segment"
        );
        assert_eq!(plan.start % geo.align, 0, "a direct batch off a block");
        assert_eq!(
            plan.len as u64 % geo.align,
            0,
            "a direct batch not whole blocks"
        );
        assert!(!self.broken, "a batch started after a failed one");
        assert_eq!(
            plan.sync_with_write,
            self.flight.is_empty(),
            "a sync with its write beside a batch in flight"
        );
        let stage = if plan.sync_with_write {
            Stage::Syncing
        } else {
            Stage::Writing
        };
        self.next_id += 1;
        self.flight.push_back(Flight { plan, stage });
    }

    fn get(&mut self, id: u64) -> &mut Flight {
        self.flight
            .iter_mut()
            .find(|f| f.plan.id == id)
            .expect("an event about a batch not in flight")
    }

    /// Batch `id`'s write (without its sync) returned: whole, or not.
    pub(crate) fn written(&mut self, id: u64, whole: bool) {
        // After a failed batch, a later one is never synced: it settles
        // failed as soon as its write returns.
        let whole = whole && !self.broken;
        let f = self.get(id);
        assert_eq!(f.stage, Stage::Writing, "a write reported twice");
        f.stage = if whole {
            Stage::Written
        } else {
            Stage::Settled(false)
        };
    }

    /// The next sync to issue, if one may go now: the oldest batch not
    /// settled, once written whole, with no sync in flight and none
    /// failed before it. Marks it syncing.
    pub(crate) fn sync_to_start(&mut self) -> Option<u64> {
        if self.broken {
            return None;
        }
        for f in self.flight.iter_mut() {
            match f.stage {
                Stage::Settled(true) => continue,
                Stage::Settled(false) | Stage::Writing | Stage::Syncing => return None,
                Stage::Written => {
                    f.stage = Stage::Syncing;
                    return Some(f.plan.id);
                }
            }
        }
        None
    }

    /// Batch `id`'s sync (or linked write and sync) returned.
    pub(crate) fn synced(&mut self, id: u64, ok: bool) {
        let oldest_open = self
            .flight
            .iter()
            .find(|f| f.stage != Stage::Settled(true))
            .map(|f| f.plan.id);
        let f = self.get(id);
        assert_eq!(f.stage, Stage::Syncing, "a sync that was not issued");
        f.stage = Stage::Settled(ok);
        assert_eq!(oldest_open, Some(id), "syncs returned out of order");
    }

    /// The oldest batch, once settled: acknowledged only if it and every
    /// batch before it succeeded.
    pub(crate) fn done(&mut self, acked: Tail) -> Option<Done> {
        let Stage::Settled(ok) = self.flight.front()?.stage else {
            return None;
        };
        let f = self.flight.pop_front().expect("a front");
        let ok = ok && !self.broken;
        if ok {
            assert_eq!(
                (f.plan.start, f.plan.first),
                (acked.end, acked.next_lsn),
                "a batch acknowledged out of order"
            );
        } else {
            self.broken = true;
            // Nothing after a failed batch is synced; the ones written
            // settle failed without a sync.
            for later in self.flight.iter_mut() {
                if later.stage == Stage::Written {
                    later.stage = Stage::Settled(false);
                }
            }
        }
        Some(Done { plan: f.plan, ok })
    }
}

#[cfg(test)]
#[path = "pipeline_tests.rs"]
mod tests;
