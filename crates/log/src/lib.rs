//! A durable append log on ringkit.
//!
//! [`Log::append`] resolves with the record's LSN once the record is on
//! disk and `fdatasync` has returned. **Group commit**: appends that arrive
//! while a batch is being written go into the next batch, so a log with
//! many writers makes one write and one `fdatasync` per batch, not per
//! record. On io_uring the write and its sync are one submission (a
//! `WRITE_FIXED` from a registered buffer, linked to the `FSYNC`); a short
//! write is never acknowledged (see `ringkit::fs::File::write_at_sync`).
//!
//! # On disk
//! A directory of segments, `<first LSN, 20 digits>.seg`, each zero-filled
//! to [`Options::segment_size`] when made (the next one in the background
//! once the current is half full), so a sync writes data only. Records are
//! framed with their length, LSN and a CRC32C (see [`record`]).
//! [`Log::open`] recovers: the last segment's records end at the first one
//! that does not check (a torn tail: a cut or damaged last record), and
//! the rest of that segment is zeroed; damage anywhere else is an error,
//! never a wrong record. `O_DIRECT` ([`Options::direct`]) writes whole
//! blocks: a batch rewrites the partial block it starts in.
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

mod batch;
mod log;
pub mod record;
mod segment;

use std::io;

pub use log::{Commit, Log, Stats};

/// How a log is written.
#[derive(Debug, Clone)]
pub struct Options {
    /// Write with `O_DIRECT` (no page cache; whole 4 KiB blocks).
    pub direct: bool,
    /// Bytes per segment file (a multiple of 4096, at least 64 KiB).
    pub segment_size: u64,
    /// The most bytes one batch writes (records and their headers); also
    /// bounds one record. At least 4096.
    pub max_batch: usize,
    /// Register the batch buffer with the ring (`WRITE_FIXED`) when the
    /// runtime has no other registered buffers.
    pub registered_buffers: bool,
}

impl Default for Options {
    /// Buffered, 64 MiB segments, batches up to 1 MiB, registered buffer.
    fn default() -> Options {
        Options {
            direct: false,
            segment_size: 64 << 20,
            max_batch: 1 << 20,
            registered_buffers: true,
        }
    }
}

impl Options {
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
        if self.max_batch < 4096 || self.max_batch as u64 > self.segment_size {
            return bad(format!(
                "max_batch {}: want at least 4096 and at most segment_size",
                self.max_batch
            ));
        }
        Ok(())
    }
}
