//! The open-file cache (nginx's `open_file_cache`): per runtime thread, a
//! request path maps to the file it resolved to, held open, with its
//! metadata. A hit costs one `statx` of the open descriptor (in place on
//! both backends, see `ringkit::fs::fd_metadata`): no lookup, no open, no
//! close.
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
//! - One lookup per path at a time: while a path's lookup is in flight on
//!   this thread, later requests for it use the stale entry if there is one
//!   and otherwise wait for that lookup. Each lookup holds a descriptor, so
//!   10 000 connections asking for a cold or just-expired file would
//!   otherwise open it 10 000 times at once (`EMFILE`, then 500s).
//!
//! A file changed in place (same inode: edited, truncated, appended to) is
//! caught at the next hit: the `statx` of each hit compares its size and
//! modification time with the entry's, and a change sends the request to
//! the lookup. Only a change between that `statx` and the read (as between
//! nginx's `fstat` and its read without a cache) can still be served; a
//! body that comes out shorter than its `Content-Length` then closes the
//! connection (see [`crate::FileBody`]), never a wrong length. A change
//! that keeps both size and modification time (within the filesystem's
//! time resolution) is not seen until the entry is revalidated.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::task::{Poll, Waker};
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
    /// Lookups in flight, by (trailing slash, path).
    filling: HashMap<(usize, Vec<u8>), Rc<Fill>>,
    /// Lookups made (misses and revalidations).
    lookups: u64,
}

/// A lookup in flight: the requests that wait for it.
#[derive(Debug, Default)]
struct Fill {
    done: Cell<bool>,
    waiters: RefCell<Vec<Waker>>,
}

impl Fill {
    fn finish(&self) {
        self.done.set(true);
        for w in self.waiters.take() {
            w.wake();
        }
    }

    async fn wait(&self) {
        std::future::poll_fn(|cx| {
            if self.done.get() {
                return Poll::Ready(());
            }
            // A waiter polled again without being woken is the last one
            // pushed (the runtime polls one task at a time): O(1).
            let mut ws = self.waiters.borrow_mut();
            if !ws.last().is_some_and(|w| w.will_wake(cx.waker())) {
                ws.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }
}

/// Ends a lookup on every path out of [`open`], a dropped request's too:
/// the path is no longer filling and its waiters look again.
struct Filling<'a> {
    id: u64,
    key: Option<(usize, &'a [u8])>,
    fill: Rc<Fill>,
}

impl Drop for Filling<'_> {
    fn drop(&mut self) {
        if let Some((slash, bytes)) = self.key.take() {
            let _ = CACHES.try_with(|c| {
                if let Some(cache) = c.borrow_mut().get_mut(&self.id) {
                    cache.filling.remove(&(slash, bytes.to_vec()));
                }
            });
        }
        self.fill.finish();
    }
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
    /// Path lookups made so far (misses and revalidations; each opens the
    /// file): one per path at a time, however many requests ask for it.
    pub lookups: u64,
}

thread_local! {
    /// Per thread: one cache per `StaticFiles` (by its id). Files are
    /// `!Send`, and each runtime thread has its own ring.
    static CACHES: RefCell<HashMap<u64, Cache>> = RefCell::new(HashMap::new());
}

/// The entry and lookup counts of `id`'s cache on this thread.
pub(crate) fn stats(id: u64) -> CacheStats {
    CACHES.with(|c| {
        let c = c.borrow();
        let cache = c.get(&id);
        CacheStats {
            entries: cache.map_or(0, Cache::len),
            lookups: cache.map_or(0, |c| c.lookups),
        }
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

/// Whether the open file still has the size and modification time its
/// entry was made with (a `statx` in place: io_uring would hand
/// `IORING_OP_STATX` to an io-wq thread, a hop on every hit).
async fn unchanged(open: &OpenFile) -> bool {
    use std::os::fd::{AsRawFd, BorrowedFd};
    // SAFETY: the descriptor belongs to `open.file`, which outlives this
    // borrow (it is held by `open` across the await).
    let fd = unsafe { BorrowedFd::borrow_raw(open.file.as_raw_fd()) };
    match ringkit::fs::fd_metadata(fd).await {
        Ok(m) => m.len() == open.stat.size && m.modified() == open.stat.mtime,
        Err(_) => false,
    }
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
    let mut waited = false;
    let (now, stale, fill) = loop {
        let now = Instant::now();
        let cached = with_cache(id, |cache| {
            cache.tick += 1;
            let tick = cache.tick;
            let cached = cache.maps[slash].get_mut(bytes).map(|e| {
                e.used = tick;
                (e.open.clone(), now.duration_since(e.checked) < cfg.valid)
            });
            // Only a miss or a stale entry looks for a lookup in flight (a
            // hit allocates nothing).
            let filling = match &cached {
                Some((_, true)) => None,
                _ => cache.filling.get(&(slash, bytes.to_vec())).cloned(),
            };
            (cached, filling)
        });
        match cached {
            (Some((open, true)), _) => {
                // One statx on the open descriptor: a file changed in place
                // (same inode) must not be served under the head the
                // cache built from its old size and time.
                if unchanged(&open).await {
                    return Opened::Ready(open);
                }
                with_cache(id, |cache| cache.maps[slash].remove(bytes));
                continue;
            }
            // Being revalidated by another request: the stale entry will do.
            (Some((open, false)), Some(_)) => return Opened::Ready(open),
            // Being looked up by another request: wait, then look again.
            (None, Some(fill)) => {
                fill.wait().await;
                waited = true;
            }
            // Waited, and that lookup left no entry (refused, or the open
            // failed): look it up without the cache, all such requests at
            // once as before, not one after another.
            (None, None) if waited => return open_uncached(root, p, index).await,
            (stale, None) => {
                let fill = Rc::new(Fill::default());
                with_cache(id, |cache| {
                    cache.lookups += 1;
                    cache.filling.insert((slash, bytes.to_vec()), fill.clone())
                });
                break (now, stale.map(|(open, _)| open), fill);
            }
        }
    };
    let _filling = Filling {
        id,
        key: Some((slash, bytes)),
        fill,
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
            // Never the entry just made (with a bound of 1, 7/8 of it is 0).
            let excess = cache.len() - (cfg.max * 7 / 8).max(1);
            let mut by_age: Vec<(u64, usize, Vec<u8>)> = (0..2)
                .flat_map(|m| {
                    cache.maps[m]
                        .iter()
                        .filter(move |(k, _)| !(m == slash && k.as_slice() == bytes))
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
