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

use super::mime;
use super::path::SafePath;
use super::resolve::{self, Found, Refusal, Root, Stat};

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
/// from. Cloning it (a cache hit) allocates nothing.
#[derive(Debug, Clone)]
pub(crate) struct OpenFile {
    pub(crate) file: Rc<ringkit::fs::File>,
    pub(crate) stat: Stat,
    /// By the extension of the path it was found at.
    pub(crate) content_type: &'static str,
}

impl OpenFile {
    async fn open(root: &Root, found: Found) -> Result<OpenFile, Opened> {
        let stat = found.stat;
        let content_type = mime::content_type(resolve::file_name(&found.rel));
        let rel = found.rel.clone();
        match root.open_file(found).await {
            Ok(f) => Ok(OpenFile {
                file: Rc::new(f),
                stat,
                content_type,
            }),
            Err(e) => Err(Opened::OpenFailed(rel, e)),
        }
    }
}

#[derive(Debug)]
struct Entry {
    open: OpenFile,
    checked: Instant,
    used: u64,
}

/// One thread's cache for one [`super::StaticFiles`]: request paths
/// without, then with, a trailing slash (two maps, so a lookup borrows the
/// request's bytes instead of building a key).
#[derive(Debug, Default)]
pub(crate) struct Cache {
    maps: [HashMap<Vec<u8>, Entry>; 2],
    tick: u64,
}

impl Cache {
    fn len(&self) -> usize {
        self.maps[0].len() + self.maps[1].len()
    }
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
        entries: c.borrow().get(&id).map_or(0, Cache::len),
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

/// Run `f` on `id`'s cache on this thread.
fn with_cache<R>(id: u64, f: impl FnOnce(&mut Cache) -> R) -> R {
    CACHES.with(|c| f(c.borrow_mut().entry(id).or_default()))
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
    let (bytes, slash) = (p.as_bytes(), usize::from(p.trailing_slash()));
    let now = Instant::now();
    let cached = with_cache(id, |cache| {
        cache.tick += 1;
        let tick = cache.tick;
        cache.maps[slash].get_mut(bytes).map(|e| {
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
    let forget = || with_cache(id, |cache| cache.maps[slash].remove(bytes));
    let found = match root.find(p, index).await {
        Ok(f) => f,
        Err(r) => {
            forget();
            return Opened::Refused(r);
        }
    };
    let open = match stale {
        // The same file (a path names one file: same inode, same path).
        Some(old) if same_content(&old.stat, &found.stat) => {
            found.close().await;
            old
        }
        _ => match OpenFile::open(root, found).await {
            Ok(f) => f,
            Err(failed) => {
                forget();
                return failed;
            }
        },
    };
    with_cache(id, |cache| {
        let used = cache.tick;
        let entry = Entry {
            open: open.clone(),
            checked: now,
            used,
        };
        cache.maps[slash].insert(bytes.to_vec(), entry);
        if cache.len() > cfg.max {
            // Evict the least recently used, down to 7/8 of the bound, so
            // the sort is paid once per max/8 misses, not on every one.
            let excess = cache.len() - cfg.max * 7 / 8;
            let mut by_age: Vec<(u64, usize, Vec<u8>)> = (0..2)
                .flat_map(|m| {
                    cache.maps[m]
                        .iter()
                        .map(move |(k, e)| (e.used, m, k.clone()))
                })
                .collect();
            by_age.sort_unstable_by_key(|(used, ..)| *used);
            for (_, m, k) in by_age.into_iter().take(excess) {
                cache.maps[m].remove(&k);
            }
        }
    });
    Opened::Ready(open)
}

async fn open_uncached(root: &Root, p: &SafePath, index: &str) -> Opened {
    match root.find(p, index).await {
        Ok(found) => match OpenFile::open(root, found).await {
            Ok(f) => Opened::Ready(f),
            Err(failed) => failed,
        },
        Err(r) => Opened::Refused(r),
    }
}
