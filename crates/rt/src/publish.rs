//! Publishing a server thread's counters to a file, for a process outside
//! (a benchmark) to read at the start and end of its measured window.
//!
//! [`spawn_writer`] writes [`Published`] as JSON to `PATH.<thread>` every
//! 50 ms, atomically (write `PATH.<thread>.tmp`, then rename), so a reader
//! never sees half a file; [`Published::read_all`] sums every thread's file.
//! Enabled by the `publish` feature.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::MetricsSnapshot;

/// What one server thread publishes: its runtime's counters and the
/// server's own count of accepted connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    /// The runtime's counters ([`crate::metrics()`]).
    pub metrics: MetricsSnapshot,
    /// Connections accepted.
    pub accepted: u64,
}

impl Published {
    /// Counter-wise sum (gauges summed too).
    pub fn add(&self, o: &Published) -> Published {
        Published {
            metrics: self.metrics.add(&o.metrics),
            accepted: self.accepted + o.accepted,
        }
    }

    /// Counter-wise difference `self - earlier` (0 where `earlier` is larger).
    pub fn since(&self, earlier: &Published) -> Published {
        Published {
            metrics: self.metrics.since(&earlier.metrics),
            accepted: self.accepted.saturating_sub(earlier.accepted),
        }
    }

    /// Read and sum every `PATH.<n>` file (missing or unreadable files
    /// count as zero).
    pub fn read_all(path: &Path) -> Published {
        let mut total = Published::default();
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return total;
        };
        let prefix = format!("{}.", name.to_string_lossy());
        let Ok(rd) = std::fs::read_dir(dir) else {
            return total;
        };
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if !n.starts_with(&prefix) || n.ends_with(".tmp") {
                continue;
            }
            if let Ok(s) = std::fs::read_to_string(e.path()) {
                if let Ok(p) = serde_json::from_str::<Published>(&s) {
                    total = total.add(&p);
                }
            }
        }
        total
    }
}

/// Spawn a task on the current runtime that publishes this thread's
/// counters to `PATH.<thread>` every 50 ms (see the module docs);
/// `accepted` is the server's own count of accepted connections.
pub fn spawn_writer(path: PathBuf, thread: usize, accepted: Rc<Cell<u64>>) {
    crate::spawn(async move {
        let file = PathBuf::from(format!("{}.{thread}", path.display()));
        let tmp = PathBuf::from(format!("{}.{thread}.tmp", path.display()));
        loop {
            let p = Published {
                metrics: crate::metrics(),
                accepted: accepted.get(),
            };
            if let Ok(j) = serde_json::to_string(&p) {
                if std::fs::write(&tmp, j).is_ok() {
                    let _ = std::fs::rename(&tmp, &file);
                }
            }
            crate::time::sleep(Duration::from_millis(50)).await;
        }
    });
}
