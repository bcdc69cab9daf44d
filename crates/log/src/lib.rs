//! A durable append log on ringkit.
//!
//! [`Log::append`] resolves with the record's LSN once the record is on
//! disk and its sync has returned. **Group commit**: appends that arrive
//! while a batch is being written go into the next batch, so a log with
//! many writers makes one durable write per batch, not per record.
//! **Pipelined**: two batches are in flight at once
//! ([`Options::batches_in_flight`]): the next is framed and written while
//! the one before it syncs; syncs never overlap, and appends resolve in
//! LSN order. A batch with none before it in flight is one operation: an
//! `RWF_DSYNC` write ([`Options::dsync_writes`], the default; on io_uring
//! a `WRITE_FIXED` from a registered buffer) or a write linked to an
//! `FSYNC`; a short write is never acknowledged (see
//! `ringkit::fs::File::write_at_dsync` and `write_at_sync`). A batch
//! written while one is in flight is followed by an `fdatasync` once that
//! one's sync returned. On epoll a write and its sync run inline on the
//! loop, so batches do not overlap there.
//!
//! # On disk
//! A directory: `MANIFEST` (the log's id and first LSN, written once by
//! rename) and segments, `<first LSN, 20 digits>.seg`, each zero-filled to
//! [`Options::segment_size`] when made (the next one in the background
//! once the current is half full), so a sync writes data only. A segment
//! starts with a 4096-byte header (the log's id, its first LSN, the most
//! bytes and batches that may be unsynced at once, and its block); then batches, each a 32-byte
//! header (first LSN, count, length, padding; its checksum covers the
//! log's id) and its records, each framed with its length, LSN and a
//! CRC32C (see [`record`]). With `O_DIRECT` ([`Options::direct`]) each batch
//! is padded to the next 4096-byte block, so no write ever covers a block
//! that holds acknowledged records. The block the file system asks of
//! `O_DIRECT` (`statx` `STATX_DIOALIGN`, at least 4096) is read when a
//! segment is made and kept in its header; a direct log refuses a file
//! system that asks more than 4096 (its records start 4096 bytes into a
//! segment, so its first batch could not start on such a block).
//!
//! # Recovery
//! [`Log::open`] tells a torn tail from corruption. Only the batches in
//! flight can be unsynced at a crash (each segment's header says how many
//! at most, and how many bytes they span), so bytes that are not a whole
//! batch are a torn tail only if they lie in the last segment, within that
//! window, followed by at most one whole batch fewer than were in flight
//! (the later batches, written whole while the torn one was cut) and
//! nothing else: they were never acknowledged, and are zeroed. Anything
//! else is damage to acknowledged records: `open` fails with
//! `InvalidData` naming the segment and offset and writes nothing (as
//! PostgreSQL and RocksDB stop rather than overwrite). So do a missing,
//! extra or foreign segment and a damaged manifest or header.
//! [`Log::open_read_only`] writes nothing at all (for dumps, checks and
//! readers beside a live writer); [`check()`] reports every problem of a
//! directory and [`salvage()`] copies the readable records into a new log.
//! A crash leaves each 512-byte sector of the batches in flight written or
//! still zero, so a batch header, or a batch whose every sector was
//! written, that does not check is damage too. What cannot be told from a
//! crash is damage that zeroes whole sectors at the very end of the log
//! (the last records then read as never written: PostgreSQL's WAL has the
//! same limit), or that leaves some sector of one of the last batches zero
//! (the last two with two in flight: both are then cleared, acknowledged
//! or not; `batches_in_flight: 1` keeps this to the last batch).
//!
//! # Truncate, purge, state
//! For a Raft log: [`Log::truncate`] removes the records from an LSN on
//! (the next append gets that LSN again), [`Log::purge`] those before one,
//! and [`Log::save_state`] keeps a small blob beside the records (a vote).
//! Each is queued with the appends and runs once the batches before it
//! are durable, so the log's writes stay in the order they were asked
//! for. A truncation writes an intent first (`TRUNCATE`, by rename): the
//! segment and bytes it cuts and the batch header it rewrites (the kept
//! records are not rewritten). [`Log::open`] finishes one it finds;
//! [`Log::open_read_only`], [`check()`] and [`salvage()`] read the log as
//! finished. A crash leaves the log before or after a truncation, never
//! between. A purge rewrites the manifest's first LSN (by rename), then
//! deletes the segments wholly before it; purged records never come back.
//!
//! # Failures
//! A segment that cannot be made (a full disk) fails the appends waiting
//! for it and nothing else: records already acknowledged stay readable and
//! the log works again once there is room. A failed write or sync leaves
//! the disk in a state the log cannot know (after a failed `fdatasync` the
//! kernel may have dropped the dirty pages), so the log refuses every
//! later append until it is opened again, which re-reads what is there.
//!
//! ```
//! ringkit::run(async {
//!     let dir = std::env::temp_dir().join(format!("ringkit-log-doc-{}", std::process::id()));
//!     let log = ringkit_log::Log::open(&dir, ringkit_log::Options::default()).await?;
//!     let a = log.append(&b"first"[..]);
//!     let b = log.append(&b"second"[..]);
//!     let (a, b) = (a.await?, b.await?); // durable: one batch, one fdatasync
//!     assert_eq!(b, a + 1);
//!     assert_eq!(log.read(a).await?, b"first");
//!     drop(log);
//!     std::fs::remove_dir_all(&dir)?;
//!     Ok::<_, std::io::Error>(())
//! })??;
//! # Ok::<(), std::io::Error>(())
//! ```

mod ack;
mod batch;
mod check;
pub mod crashcheck;
mod edit;

mod flush;
mod frame;
mod log;
mod manifest;
mod open;
mod pipeline;
pub mod record;
mod recover;
mod segment;
mod spare;

use std::io;

pub use check::{check, salvage, CheckReport, SalvageReport, SegmentReport};
pub use log::{Commit, Log, Stats};

/// How a log is written.
#[derive(Debug, Clone)]
pub struct Options {
    /// Write with `O_DIRECT` (no page cache; whole 4 KiB blocks; refused,
    /// with the reason, where the file system asks larger blocks).
    pub direct: bool,
    /// Bytes per segment file (a multiple of 4096, at least 64 KiB; and of
    /// the file system's `O_DIRECT` block where that is larger).
    pub segment_size: u64,
    /// The most bytes one batch writes (records and their headers); also
    /// bounds one record. At least 4096.
    pub max_batch: usize,
    /// Register the batch buffer with the ring (`WRITE_FIXED`) when the
    /// runtime has no other registered buffers.
    pub registered_buffers: bool,
    /// The first LSN of a log made by [`Log::open`] (a log that exists
    /// keeps its own). At least 1.
    pub first_lsn: u64,
    /// The most batches in flight at once in segments this log makes, 1
    /// or 2: with 2, the next batch is framed and written while the one
    /// before it syncs (acknowledgements stay in LSN order). Written into
    /// each segment's header, which recovery reads: a crash can leave that
    /// many batches at the end torn or whole, and recovery clears them. A
    /// segment keeps the depth it was made with.
    pub batches_in_flight: u32,
    /// Make a batch durable with one `RWF_DSYNC` write rather than a write
    /// linked to an `fdatasync`, when no batch before it is still in
    /// flight (`ringkit::fs::File::write_at_dsync`): one operation, a FUA
    /// write where the device has one, and on io_uring no hop to a kernel
    /// worker for the sync. A batch written while the one before it syncs
    /// still waits for that sync and issues its own `fdatasync`.
    pub dsync_writes: bool,
    /// Reuse segments a purge leaves as later segments, zeroed in place
    /// (`FALLOC_FL_ZERO_RANGE`), rather than unlink them and zero-fill new
    /// files: no extents freed, no zeros written. A segment is reused only
    /// when the log holds its one name and no read of the log holds it;
    /// a read-only open in another process reading purged records may
    /// then see them fail their checks.
    pub recycle_segments: bool,
}

impl Default for Options {
    /// Buffered, 64 MiB segments, batches up to 1 MiB, registered buffers,
    /// new logs start at LSN 1, two batches in flight, `RWF_DSYNC` writes,
    /// purged segments recycled.
    fn default() -> Options {
        Options {
            direct: false,
            segment_size: 64 << 20,
            max_batch: 1 << 20,
            registered_buffers: true,
            first_lsn: 1,
            batches_in_flight: 2,
            dsync_writes: true,
            recycle_segments: true,
        }
    }
}

impl Options {
    /// The most bytes a log written with these options may have unsynced at once:
    /// its batches in flight, each with its header, records and padding (at
    /// most what the segment header's 32 bits hold: the flusher keeps the
    /// batches in flight within it).
    /// `block`: what direct batches are padded to (the segment header's
    /// `align`).
    pub(crate) fn window(&self, block: u32) -> u64 {
        let one = (frame::BATCH_HEADER + self.max_batch) as u64 + u64::from(block);
        (one * u64::from(self.batches_in_flight)).min(u64::from(u32::MAX))
    }

    fn check(&self) -> io::Result<()> {
        let bad = |m: String| Err(io::Error::new(io::ErrorKind::InvalidInput, m));
        if self.segment_size < 64 << 10
            || self.segment_size % 4096 != 0
            || self.segment_size > u32::MAX as u64
        {
            return bad(format!(
                "segment_size {}: want a multiple of 4096 from 64 KiB to 4 GiB",
                self.segment_size
            ));
        }
        // A segment holds its header and at least one whole batch (with
        // its header and padding).
        let room = self.segment_size - 2 * 4096 - frame::BATCH_HEADER as u64;
        if self.max_batch < 4096 || self.max_batch as u64 > room {
            return bad(format!(
                "max_batch {}: want at least 4096 and at most segment_size - 8224 ({room})",
                self.max_batch
            ));
        }
        if self.first_lsn == 0 {
            return bad("first_lsn 0: LSNs start at 1".into());
        }
        if !(1..=frame::MAX_DEPTH).contains(&self.batches_in_flight) {
            return bad(format!(
                "batches_in_flight {}: want 1 or 2",
                self.batches_in_flight
            ));
        }
        Ok(())
    }
}
