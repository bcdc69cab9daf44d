//! How `ringkit log` commands write the log: the options they share.

use std::path::PathBuf;

use clap::Args;
use ringkit::Backend;
use ringkit_log::Options;

/// How the log is written (shared by the commands).
#[derive(Args, Debug, Clone)]
pub struct LogOpts {
    /// The log's directory (`serve` makes it if missing; `bench` wants a
    /// path that does not exist, and removes what it made there).
    #[arg(long)]
    pub(crate) dir: PathBuf,
    /// Write with O_DIRECT.
    #[arg(long)]
    pub(crate) direct: bool,
    /// Segment size, MiB.
    #[arg(long, default_value_t = 64)]
    pub(crate) segment_mib: u64,
    /// Most bytes per batch (one write and one fdatasync), KiB.
    #[arg(long, default_value_t = 1024)]
    pub(crate) max_batch_kib: usize,
    /// Batches in flight at once, 1 or 2: with 2 the next batch is framed
    /// and written while the one before it syncs (for segments made from
    /// now on; a segment keeps the depth it was made with).
    #[arg(long, default_value_t = 2)]
    pub(crate) batches_in_flight: u32,
    /// Make each batch durable with a write linked to an `fdatasync`
    /// rather than one `RWF_DSYNC` write (the default); in `bench`, the
    /// peers (`--engine`) too.
    #[arg(long)]
    pub(crate) linked_sync: bool,
    /// auto | uring | epoll.
    #[arg(long, default_value = "auto")]
    pub(crate) backend: Backend,
}

impl LogOpts {
    pub(crate) fn options(&self) -> Options {
        Options {
            direct: self.direct,
            segment_size: self.segment_mib << 20,
            max_batch: self.max_batch_kib << 10,
            batches_in_flight: self.batches_in_flight,
            dsync_writes: !self.linked_sync,
            ..Options::default()
        }
    }
}
