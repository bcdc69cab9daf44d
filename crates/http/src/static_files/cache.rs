//! The open-file cache (nginx's `open_file_cache`): per runtime thread, a
//! request path maps to the file it resolved to, held open, with its
//! metadata. A hit costs no syscall: no lookup, no open, no close.
//!
//! - An entry is made only from a successful [`Root::find`] (the same
//!   contained `openat2(RESOLVE_BENEATH)` lookup, or the realpath
//!   fallback) and [`Root::open_file`]: containment is never weakened.
//!   Refusals (404, 403, ...) are not cached.
//! - An entry older than `valid` is revalidated before use: the path is
//!   looked up again (contained, as always) and compared with the entry
//!   (device, inode, size, modification time). The same file keeps its open
//!   descriptor; a replaced, truncated or rewritten one is reopened; a
//!   deleted or unreadable one drops the entry and answers as a miss
//!   would (404, 403).
//! - At most `max` entries; the least recently used goes first. Dropping
//!   an entry drops its `File` (closed through the ring on io_uring), or,
//!   while a response still sends from it, when that response is done.
//!
//! Between revalidations a file changed in place is served with the old
//! metadata: a body that comes out shorter than its `Content-Length`
//! closes the connection (see [`crate::FileBody`]), never a wrong length.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::path::SafePath;
use super::resolve::{Refusal, Root, Stat};

/// Settings of the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    /// Entries per thread (0: off).
    pub max: usize,
    /// How long an entry is used without looking at the file system again.
    pub valid: Duration,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            max: 1000,
            valid: Duration::from_secs(1),
        }
    }
}

/// A file ready to serve: open, with the metadata the response is built
/// from, and its path relative to the root (for its content type).
#[derive(Debug, Clone)]
pub(crate) struct OpenFile {
    pub(crate) file: Rc<ringkit::fs::File>,
    pub(crate) stat: Stat,
    pub(crate) rel: PathBuf,
}

#[derive(Debug)]
struct Entry {
    open: OpenFile,
    checked: Instant,
    used: u64,
}

/// One thread's cache for one [`super::StaticFiles`].
#[derive(Debug, Default)]
pub(crate) struct Cache {
    map: HashMap<(Vec<u8>, bool), Entry>,
    tick: u64,
}

/// Counters, for tests and diagnostics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Entries now.
    pub entries: usize,
}

thread_local! {
    /// Per thread: one cache per `StaticFiles` (by its id). Files are
    /// `!Send`, and each runtime thread has its own ring.
    static CACHES: RefCell<HashMap<u64, Cache>> = RefCell::new(HashMap::new());
}

/// The entry count of `id`'s cache on this thread.
pub(crate) fn stats(id: u64) -> CacheStats {
    CACHES.with(|c| CacheStats {
        entries: c.borrow().get(&id).map_or(0, |c| c.map.len()),
    })
}

/// How an open went.
pub(crate) enum Opened {
    Ready(OpenFile),
    Refused(Refusal),
    /// The lookup succeeded but opening for reading failed.
    OpenFailed(PathBuf, std::io::Error),
}

fn same_content(a: &Stat, b: &Stat) -> bool {
    a.dev == b.dev && a.ino == b.ino && a.size == b.size && a.mtime == b.mtime
}

/// Find and open what `p` names, through `id`'s cache on this thread.
pub(crate) async fn open(
    id: u64,
    cfg: CacheConfig,
    root: &Root,
    p: &SafePath,
    index: &str,
) -> Opened {
    if cfg.max == 0 {
        return open_uncached(root, p, index).await;
    }
    let key = (p.as_bytes().to_vec(), p.trailing_slash());
    let now = Instant::now();
    let cached = CACHES.with(|c| {
        let mut c = c.borrow_mut();
        let cache = c.entry(id).or_default();
        cache.tick += 1;
        let tick = cache.tick;
        cache.map.get_mut(&key).map(|e| {
            e.used = tick;
            (e.open.clone(), now.duration_since(e.checked) < cfg.valid)
        })
    });
    let stale = match cached {
        Some((open, true)) => return Opened::Ready(open),
        Some((open, false)) => Some(open),
        None => None,
    };
    // Miss or stale: the contained lookup, as without a cache.
    let found = match root.find(p, index) {
        Ok(f) => f,
        Err(r) => {
            CACHES.with(|c| {
                if let Some(cache) = c.borrow_mut().get_mut(&id) {
                    cache.map.remove(&key);
                }
            });
            return Opened::Refused(r);
        }
    };
    let open = match stale {
        Some(old) if same_content(&old.stat, &found.stat) && old.rel == found.rel => old,
        _ => {
            let (stat, rel) = (found.stat, found.rel.clone());
            match root.open_file(found).await {
                Ok(f) => OpenFile {
                    file: Rc::new(f),
                    stat,
                    rel,
                },
                Err(e) => {
                    CACHES.with(|c| {
                        if let Some(cache) = c.borrow_mut().get_mut(&id) {
                            cache.map.remove(&key);
                        }
                    });
                    return Opened::OpenFailed(rel, e);
                }
            }
        }
    };
    CACHES.with(|c| {
        let mut c = c.borrow_mut();
        let cache = c.entry(id).or_default();
        let used = cache.tick;
        cache.map.insert(
            key,
            Entry {
                open: open.clone(),
                checked: now,
                used,
            },
        );
        if cache.map.len() > cfg.max {
            // Evict the least recently used, down to 7/8 of the bound, so
            // the sort is paid once per max/8 misses, not on every one.
            let excess = cache.map.len() - cfg.max * 7 / 8;
            let mut by_age: Vec<(u64, (Vec<u8>, bool))> =
                cache.map.iter().map(|(k, e)| (e.used, k.clone())).collect();
            by_age.sort_unstable_by_key(|(used, _)| *used);
            for (_, k) in by_age.into_iter().take(excess) {
                cache.map.remove(&k);
            }
        }
    });
    Opened::Ready(open)
}

async fn open_uncached(root: &Root, p: &SafePath, index: &str) -> Opened {
    let found = match root.find(p, index) {
        Ok(f) => f,
        Err(r) => return Opened::Refused(r),
    };
    let (stat, rel) = (found.stat, found.rel.clone());
    match root.open_file(found).await {
        Ok(f) => Opened::Ready(OpenFile {
            file: Rc::new(f),
            stat,
            rel,
        }),
        Err(e) => Opened::OpenFailed(rel, e),
    }
}
