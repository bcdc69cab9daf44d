//! The pipeline without a runtime: offsets, depth, one sync at a time and
//! in-order acknowledgement, as plain function calls.

use super::*;
use crate::frame::SEGMENT_HEADER;

const MIB: u64 = 1 << 20;

fn geo(direct: bool, depth: usize) -> Geometry {
    Geometry {
        size: MIB,
        window: 256 << 10,
        depth,
        align: if direct { 4096 } else { 1 },
        block: 4096,
        max_batch: 64 << 10,
    }
}

fn fresh() -> Tail {
    Tail {
        end: SEGMENT_HEADER,
        next_lsn: 1,
    }
}

/// Plan and start a batch of `records` of `len` bytes each.
fn go(p: &mut Pipeline, g: &Geometry, acked: Tail, records: usize, len: usize) -> Plan {
    assert_eq!(
        p.next(g, acked, Some(Queued::Record(len)), true),
        Next::Batch
    );
    let plan = p.plan(g, acked, vec![Queued::Record(len); records]);
    p.start(g, acked, plan.clone());
    plan
}

/// The next batch handed out, as (id, acknowledged).
fn settled(p: &mut Pipeline, acked: Tail) -> Option<(u64, bool)> {
    p.done(acked).map(|d| (d.plan.id, d.ok))
}

/// A direct segment with room to spare whose window holds three blocks.
fn windowed() -> Geometry {
    Geometry {
        window: 3 * 4096,
        ..geo(true, 4)
    }
}

/// What acknowledging `d` does to the tail.
fn ack(acked: Tail, d: &Done) -> Tail {
    assert!(d.ok);
    assert_eq!((d.plan.start, d.plan.first), (acked.end, acked.next_lsn));
    Tail {
        end: d.plan.start + d.plan.len as u64,
        next_lsn: d.plan.first + d.plan.lsns(),
    }
}

#[test]
fn batches_follow_each_other_on_blocks() {
    let g = geo(true, 3);
    let mut p = Pipeline::default();
    let a = go(&mut p, &g, fresh(), 3, 100);
    assert_eq!((a.start, a.first, a.take), (SEGMENT_HEADER, 1, 3));
    assert_eq!(a.body, 3 * (HEADER + 100));
    assert_eq!(a.len, 4096, "padded to one block");
    assert!(a.sync_with_write, "nothing before it: linked or RWF_DSYNC");
    let b = go(&mut p, &g, fresh(), 2, 5000);
    assert_eq!((b.start, b.first), (SEGMENT_HEADER + 4096, 4));
    assert_eq!(b.len, 3 * 4096);
    assert!(!b.sync_with_write, "a batch before it: its sync waits");
    assert_eq!(
        p.tail(fresh()),
        Tail {
            end: SEGMENT_HEADER + 4 * 4096,
            next_lsn: 6
        }
    );
}

#[test]
fn buffered_batches_pad_only_so_no_header_straddles_a_sector() {
    let g = geo(false, 2);
    let mut p = Pipeline::default();
    // 32 + 16 + 449 = 497: the next header would cross byte 512.
    let a = go(&mut p, &g, fresh(), 1, 449);
    assert_eq!(a.len, 512);
    let mut p = Pipeline::default();
    let a = go(&mut p, &g, fresh(), 1, 400);
    assert_eq!(a.len, BATCH_HEADER + HEADER + 400);
}

#[test]
fn no_more_than_the_depth_is_in_flight() {
    let g = geo(true, 2);
    let mut p = Pipeline::default();
    go(&mut p, &g, fresh(), 1, 10);
    go(&mut p, &g, fresh(), 1, 10);
    assert_eq!(
        p.next(&g, fresh(), Some(Queued::Record(10)), true),
        Next::Wait
    );
    // Nor without a free buffer.
    let mut p = Pipeline::default();
    go(&mut p, &g, fresh(), 1, 10);
    assert_eq!(
        p.next(&g, fresh(), Some(Queued::Record(10)), false),
        Next::Wait
    );
}

#[test]
#[should_panic(expected = "more batches in flight than the depth")]
fn starting_past_the_depth_is_refused() {
    let g = geo(true, 1);
    let mut p = Pipeline::default();
    go(&mut p, &g, fresh(), 1, 10);
    let plan = p.plan(&g, fresh(), [Queued::Record(10)]);
    p.start(&g, fresh(), plan);
}

#[test]
fn one_sync_at_a_time_each_after_its_write_and_the_sync_before() {
    let g = geo(true, 3);
    let mut p = Pipeline::default();
    let a = go(&mut p, &g, fresh(), 1, 10);
    let b = go(&mut p, &g, fresh(), 1, 10);
    let c = go(&mut p, &g, fresh(), 1, 10);
    // a syncs with its write; b and c wait for theirs and for a's.
    assert_eq!(p.sync_to_start(), None);
    p.written(c.id, true);
    assert_eq!(
        p.sync_to_start(),
        None,
        "c's write is whole, but b is before it"
    );
    p.written(b.id, true);
    assert_eq!(p.sync_to_start(), None, "a's sync is in flight");
    p.synced(a.id, true);
    assert_eq!(p.sync_to_start(), Some(b.id));
    assert_eq!(p.sync_to_start(), None, "b's sync is in flight");
    p.synced(b.id, true);
    assert_eq!(p.sync_to_start(), Some(c.id));
    p.synced(c.id, true);
    assert_eq!(p.sync_to_start(), None);
}

#[test]
#[should_panic(expected = "syncs returned out of order")]
fn a_sync_returning_before_an_earlier_one_is_refused() {
    let g = geo(true, 2);
    let mut p = Pipeline::default();
    go(&mut p, &g, fresh(), 1, 10);
    let b = go(&mut p, &g, fresh(), 1, 10);
    p.written(b.id, true);
    // b's sync was never issued: a's is in flight.
    p.get(b.id).stage = Stage::Syncing;
    p.synced(b.id, true);
}

#[test]
fn acknowledgements_come_in_batch_order() {
    let g = geo(true, 2);
    let mut p = Pipeline::default();
    let mut acked = fresh();
    let a = go(&mut p, &g, acked, 2, 10);
    let b = go(&mut p, &g, acked, 3, 10);
    p.written(b.id, true);
    assert_eq!(p.done(acked), None, "nothing settled");
    p.synced(a.id, true);
    let d = p.done(acked).expect("a settled");
    assert_eq!(d.plan, a);
    acked = ack(acked, &d);
    assert_eq!(p.done(acked), None, "b's sync not issued yet");
    assert_eq!(p.sync_to_start(), Some(b.id));
    p.synced(b.id, true);
    let d = p.done(acked).expect("b settled");
    assert_eq!((d.plan.first, d.plan.lsns()), (3, 3));
    acked = ack(acked, &d);
    assert_eq!(p.tail(acked), acked, "nothing in flight");
    assert_eq!(p.len(), 0);
}

#[test]
fn nothing_after_a_failed_batch_is_synced_or_acknowledged() {
    let g = geo(true, 3);
    let mut p = Pipeline::default();
    let acked = fresh();
    let a = go(&mut p, &g, acked, 1, 10);
    let b = go(&mut p, &g, acked, 1, 10);
    let c = go(&mut p, &g, acked, 1, 10);
    p.written(b.id, true);
    p.synced(a.id, false);
    assert_eq!(p.sync_to_start(), None, "a failed: b is never synced");
    assert_eq!(settled(&mut p, acked), Some((a.id, false)));
    assert_eq!(settled(&mut p, acked), Some((b.id, false)));
    assert_eq!(p.done(acked), None, "c's write is still in flight");
    p.written(c.id, true);
    assert_eq!(p.sync_to_start(), None);
    assert_eq!(settled(&mut p, acked), Some((c.id, false)));
    // And nothing more starts in this log.
    assert_eq!(p.next(&g, acked, Some(Queued::Record(1)), true), Next::Wait);
}

#[test]
fn a_torn_write_fails_its_batch_and_the_ones_after() {
    let g = geo(false, 2);
    let mut p = Pipeline::default();
    let acked = fresh();
    let a = go(&mut p, &g, acked, 1, 10);
    let b = go(&mut p, &g, acked, 1, 10);
    p.written(b.id, false);
    assert_eq!(p.sync_to_start(), None);
    p.synced(a.id, true);
    let d = p.done(acked).expect("a");
    assert!(d.ok);
    let acked = ack(acked, &d);
    assert_eq!(settled(&mut p, acked), Some((b.id, false)));
}

#[test]
fn a_hole_goes_alone_and_an_edit_waits_for_every_batch() {
    let g = geo(true, 3);
    let p = Pipeline::default();
    let q = [Queued::Record(5), Queued::Hole(7), Queued::Record(5)];
    let plan = p.plan(&g, fresh(), q);
    assert_eq!(
        (plan.take, plan.hole),
        (1, 0),
        "a record, then the hole stops it"
    );
    let plan = p.plan(&g, fresh(), [Queued::Hole(7), Queued::Record(5)]);
    assert_eq!((plan.take, plan.hole, plan.body, plan.lsns()), (1, 7, 0, 7));
    let plan = p.plan(
        &g,
        fresh(),
        [Queued::Record(5), Queued::Edit, Queued::Record(5)],
    );
    assert_eq!(plan.take, 1, "an edit stops a batch");
    let mut p = Pipeline::default();
    assert_eq!(p.next(&g, fresh(), Some(Queued::Edit), true), Next::Edit);
    go(&mut p, &g, fresh(), 1, 5);
    assert_eq!(p.next(&g, fresh(), Some(Queued::Edit), true), Next::Wait);
}

#[test]
fn a_batch_never_spans_segments_or_the_window() {
    let g = Geometry {
        size: SEGMENT_HEADER + 3 * 4096,
        window: 4 * 4096,
        depth: 4,
        align: 4096,
        block: 4096,
        max_batch: 1 << 20,
    };
    let mut p = Pipeline::default();
    let a = go(&mut p, &g, fresh(), 1, 4100);
    assert_eq!(a.len, 2 * 4096);
    // The window leaves 4 blocks minus a's 2 and a header and block: no
    // room for another such record beside a.
    assert_eq!(
        p.next(&g, fresh(), Some(Queued::Record(4100)), true),
        Next::Wait
    );
    // Small ones fit the segment's last block, one per batch.
    let b = go(&mut p, &g, fresh(), 1, 10);
    assert_eq!(b.start + b.len as u64, g.size);
    // The segment is full: wait for the batches in flight, then roll.
    assert_eq!(
        p.next(&g, fresh(), Some(Queued::Record(10)), true),
        Next::Wait
    );
    let empty = Pipeline::default();
    let full = Tail {
        end: g.size,
        next_lsn: 3,
    };
    assert_eq!(
        empty.next(&g, full, Some(Queued::Record(10)), true),
        Next::Roll
    );
    // Many records are cut where the segment ends.
    let plan = empty.plan(&g, fresh(), vec![Queued::Record(1000); 20]);
    assert!(plan.start + plan.len as u64 <= g.size);
    assert_eq!(
        plan.take, 12,
        "12 records of 1016 bytes and a header fill 3 blocks: {plan:?}"
    );
}

#[test]
fn the_window_holds_back_a_batch_the_segment_has_room_for() {
    let g = windowed();
    let mut p = Pipeline::default();
    let a = go(&mut p, &g, fresh(), 1, 10);
    assert_eq!(a.len, 4096);
    // The segment has room; the window leaves 3 blocks less a's block, a
    // header and a block of padding: 4064 bytes.
    assert_eq!(p.limit(&g), 4096 - BATCH_HEADER);
    assert_eq!(
        p.next(&g, fresh(), Some(Queued::Record(4100)), true),
        Next::Wait
    );
    assert_eq!(
        p.next(&g, fresh(), Some(Queued::Record(4000)), true),
        Next::Batch
    );
    let b = p.plan(&g, fresh(), vec![Queued::Record(1000); 8]);
    assert_eq!(
        (b.take, b.len),
        (4, 4096),
        "records while they fit the window: {b:?}"
    );
}

#[test]
#[should_panic(expected = "more bytes in flight than the segment's window")]
fn starting_past_the_window_is_refused() {
    let g = windowed();
    let mut p = Pipeline::default();
    go(&mut p, &g, fresh(), 1, 10);
    let big = Pipeline::default().plan(&g, fresh(), [Queued::Record(8200)]);
    let plan = Plan {
        id: 1,
        start: SEGMENT_HEADER + 4096,
        first: 2,
        sync_with_write: false,
        ..big
    };
    p.start(&g, fresh(), plan);
}

#[test]
fn a_direct_log_whose_end_is_off_a_block_rolls() {
    let g = geo(true, 2);
    let odd = Tail {
        end: SEGMENT_HEADER + 100,
        next_lsn: 9,
    };
    assert_eq!(
        Pipeline::default().next(&g, odd, Some(Queued::Record(1)), true),
        Next::Roll
    );
}

/// Random events against a model: whatever order the disk answers in,
/// every rule above holds (the pipeline asserts them) and every batch is
/// done exactly once, in order.
#[test]
fn random_orders_of_answers_keep_every_rule() {
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut rand = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let (mut acks, mut fails) = (0, 0);
    for _ in 0..300 {
        let g = geo(rand(2) == 0, 1 + rand(4) as usize);
        let mut w = Walk::default();
        for _ in 0..60 {
            match rand(4) {
                0 if w.started < 20 => {
                    let len = 1 + rand(3000) as usize;
                    w.start(&g, len, 1 + rand(5) as usize);
                }
                1 if !w.writing.is_empty() => {
                    let i = rand(w.writing.len() as u64) as usize;
                    w.write(i, rand(10) != 0);
                }
                2 => w.sync(rand(10) != 0),
                _ => w.done(),
            }
        }
        // Every batch started is settled and handed out once the disk has
        // answered everything: nothing hangs.
        while !w.writing.is_empty() {
            w.write(0, true);
        }
        for _ in 0..=g.depth {
            w.sync(true);
            w.sync(true);
        }
        w.done();
        assert_eq!(w.finished, w.started, "a batch never settled");
        acks += w.acks;
        fails += w.fails;
    }
    assert!(
        acks > 500 && fails > 50,
        "the walk reached both ends: {acks} acknowledged, {fails} failed"
    );
}

/// The disk's side of the random walk: what was asked, what it answered.
#[derive(Default)]
struct Walk {
    p: Pipeline,
    acked: Option<Tail>,
    started: u64,
    finished: u64,
    failed: bool,
    acks: u64,
    fails: u64,
    /// Plain writes in flight.
    writing: Vec<u64>,
    /// The sync in flight (its batch).
    syncing: Option<u64>,
    /// Per batch: every answer so far was a success, and its sync returned.
    good: std::collections::HashMap<u64, (bool, bool)>,
}

impl Walk {
    fn acked(&self) -> Tail {
        self.acked.unwrap_or_else(fresh)
    }

    fn start(&mut self, g: &Geometry, len: usize, n: usize) {
        let acked = self.acked();
        if self.p.next(g, acked, Some(Queued::Record(len)), true) != Next::Batch {
            return;
        }
        let plan = self.p.plan(g, acked, vec![Queued::Record(len); n]);
        if plan.sync_with_write {
            assert_eq!(self.syncing, None, "a linked sync beside another");
            self.syncing = Some(plan.id);
        } else {
            self.writing.push(plan.id);
        }
        self.good.insert(plan.id, (true, false));
        self.p.start(g, acked, plan);
        self.started += 1;
    }

    fn write(&mut self, i: usize, whole: bool) {
        let id = self.writing.remove(i);
        self.good.get_mut(&id).expect("started").0 &= whole;
        self.p.written(id, whole);
    }

    fn sync(&mut self, ok: bool) {
        if let Some(id) = self.syncing.take() {
            let g = self.good.get_mut(&id).expect("started");
            (g.0, g.1) = (g.0 && ok, true);
            self.p.synced(id, ok);
        }
        if let Some(id) = self.p.sync_to_start() {
            assert!(self.good[&id].0, "a sync after a torn write");
            self.syncing = Some(id);
        }
    }

    fn done(&mut self) {
        while let Some(d) = self.p.done(self.acked()) {
            assert_eq!(d.plan.id, self.finished, "done out of order");
            self.finished += 1;
            if d.ok {
                assert!(!self.failed, "acknowledged after a failure");
                assert_eq!(
                    self.good[&d.plan.id],
                    (true, true),
                    "acknowledged without its own sync"
                );
                self.acked = Some(ack(self.acked(), &d));
                self.acks += 1;
            } else {
                self.failed = true;
                self.fails += 1;
            }
        }
    }
}

#[test]
fn a_batch_header_never_straddles_a_sector_and_padding_is_only_what_that_takes() {
    // Every start in three sectors, every length up to two: the next
    // header lies in one 512-byte sector (a crash leaves it whole or zero),
    // and a batch is padded only where its end leaves no room for one, to
    // the next sector and no further.
    let h = BATCH_HEADER as u64;
    for start in 0..1536u64 {
        for len in 1..1024usize {
            let p = no_straddle(start, len);
            let end = start + len as u64;
            let next = start + p as u64;
            assert!(
                next % 512 + h <= 512,
                "start {start} len {len}: a header at {next}"
            );
            if end % 512 + h <= 512 {
                assert_eq!(p, len, "start {start} len {len}: padded with room to spare");
            } else {
                assert_eq!(next, end.next_multiple_of(512), "start {start} len {len}");
            }
        }
    }
}

#[test]
fn a_buffered_batch_at_any_offset_leaves_the_next_header_in_one_sector() {
    // `Geometry::padded` at every offset of three sectors: what follows
    // the batch starts where a header fits in one sector, and the batch is
    // padded only where it must be.
    let g = geo(false, 2);
    let h = BATCH_HEADER as u64;
    for at in 0..1536u64 {
        for bytes in 0..700usize {
            let p = g.padded(at, bytes) as u64;
            let end = at + h + bytes as u64;
            let next = at + p;
            assert!(
                next % 512 + h <= 512,
                "at {at} bytes {bytes}: a header at {next}"
            );
            if end % 512 + h <= 512 {
                assert_eq!(
                    next, end,
                    "at {at} bytes {bytes}: padded with room to spare"
                );
            } else {
                assert_eq!(next, end.next_multiple_of(512), "at {at} bytes {bytes}");
            }
        }
    }
}
