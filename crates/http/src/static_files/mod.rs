//! Static files for `ringkit serve DIR`: [`StaticFiles`], a [`Handler`].
//!
//! ```no_run
//! use ringkit_http::static_files::StaticFiles;
//! use ringkit_http::Router;
//! # fn main() -> std::io::Result<()> {
//! // Everything under ./public, at the root of the site:
//! let site = StaticFiles::new("public")?;
//! // Or mounted under /assets/ next to other routes:
//! let assets = StaticFiles::new("public")?.strip_prefix("/assets");
//! let app = Router::new().get("/assets/*", assets);
//! # let _ = (site, app);
//! # Ok(())
//! # }
//! ```
//!
//! # What a request goes through
//! 1. Method: GET and HEAD only; anything else is 405 with `Allow: GET, HEAD`.
//! 2. [`path::sanitize`]: the raw path is percent-decoded and refused if it
//!    is malformed (400), tries to climb (`..` in any spelling, encoded
//!    slashes, `//`, NUL, backslashes: 403), or names a dot-file (404).
//! 3. [`resolve::Root::find`]: the path is looked up beneath the root with
//!    `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`, so no symlink can
//!    lead outside (403). A directory serves its `index.html` (else 404);
//!    asked for without a trailing slash it answers 301 to the slash form.
//!    Only regular files are served. The open-file cache (`cache`,
//!    [`StaticFiles::open_file_cache`]) keeps what such a lookup found open
//!    per thread and looks again at most once per
//!    [`StaticFiles::open_file_cache_valid`].
//! 4. [`reply::for_file`]: validators (`ETag`, `Last-Modified`), the
//!    preconditions (304/412), `Range` (206/416), `Content-Type` by
//!    extension ([`mime`]).
//! 5. The body is a [`FileBody`]: the server reads and writes it piece by
//!    piece, so a file of any size costs one buffer.
//!
//! The pieces, each pure unless it says otherwise:
//! - [`path`]: request target → [`path::SafePath`].
//! - [`resolve`]: opening a safe path beneath the root (file system).
//! - [`mime`]: content type by extension.
//! - [`conditional`]: `ETag`/`Last-Modified` and the `If-*` preconditions.
//! - [`range`]: `Range: bytes=…`.
//! - [`reply`]: status, header fields and body choice for a file.

mod cache;
pub mod conditional;
pub mod mime;
pub mod path;
pub mod range;
pub mod reply;
pub mod resolve;

use std::borrow::Cow;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::{FileBody, Handler, Head, Method, Request, Response, StatusCode};
pub use cache::{CacheConfig, CacheStats};
use cache::{OpenFile, Opened};
use conditional::Conditions;
use path::PathError;
use reply::{FileMeta, FileRequest, Reply, ReplyBody, Verb};
use resolve::{Containment, Refusal, Root};

/// Ids of `StaticFiles` values, for their per-thread caches.
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// Serves the files under one directory. Cheap to clone (the settings and
/// the directory fd are shared), so one value can be cloned into each
/// thread of a thread-per-core server.
#[derive(Debug, Clone)]
pub struct StaticFiles {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    root: Root,
    index: String,
    allow_hidden: bool,
    prefix: Option<String>,
    cache_control: Option<String>,
    /// Key of this value's open-file cache on each thread.
    id: u64,
    cache: CacheConfig,
}

impl StaticFiles {
    /// Serve `dir`. Fails if it cannot be opened as a directory.
    pub fn new(dir: impl AsRef<Path>) -> io::Result<StaticFiles> {
        Ok(StaticFiles {
            inner: Arc::new(Inner {
                root: Root::open(dir.as_ref())?,
                index: "index.html".to_string(),
                allow_hidden: false,
                prefix: None,
                cache_control: None,
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                cache: CacheConfig::default(),
            }),
        })
    }

    fn inner_mut(&mut self) -> &mut Inner {
        Arc::get_mut(&mut self.inner).expect("configure StaticFiles before cloning it")
    }

    /// The file a directory serves (default `index.html`). Configure
    /// before cloning (panics otherwise).
    pub fn index_file(mut self, name: impl Into<String>) -> StaticFiles {
        self.inner_mut().index = name.into();
        self
    }

    /// Serve names starting with `.` (default: no, they answer 404, so
    /// `.git/` or `.env` left in the directory do not leak). `.` and `..`
    /// are never served. Configure before cloning (panics otherwise).
    pub fn allow_hidden(mut self, allow: bool) -> StaticFiles {
        self.inner_mut().allow_hidden = allow;
        self
    }

    /// Strip this path prefix (e.g. `/assets`) before looking files up, for
    /// mounting under a [`crate::Router`] prefix route. Requests outside it
    /// answer 404. Configure before cloning (panics otherwise).
    pub fn strip_prefix(mut self, prefix: impl Into<String>) -> StaticFiles {
        let p: String = prefix.into();
        self.inner_mut().prefix = Some(p.trim_end_matches('/').to_string());
        self
    }

    /// Send this `Cache-Control` with files and 304s (default: none).
    /// Configure before cloning (panics otherwise).
    pub fn cache_control(mut self, value: impl Into<String>) -> StaticFiles {
        self.inner_mut().cache_control = Some(value.into());
        self
    }

    /// The open-file cache (nginx's `open_file_cache`, which nginx ships
    /// off): at most `max` files per thread kept open with their metadata
    /// (default 1000; 0 turns it off). A hit costs one `statx` of the open
    /// descriptor instead of a lookup, an open and a close.
    ///
    /// What it changes: a path is looked up again only after
    /// [`open_file_cache_valid`](Self::open_file_cache_valid) (so a file
    /// replaced by rename, deleted, or made unreadable, or a symlink
    /// swapped, is seen after up to that long; containment is checked at
    /// every lookup). A file changed in place is seen at the next hit,
    /// which compares size and modification time; a change between that
    /// check and the read is served as without a cache (a body shorter
    /// than its head closes the connection), and one that keeps both size
    /// and modification time is not seen until the path is looked up
    /// again. Configure before cloning (panics otherwise).
    pub fn open_file_cache(mut self, max: usize) -> StaticFiles {
        self.inner_mut().cache.max = max;
        self
    }

    /// How long a cached file is served before the path is looked up
    /// again (default 1 s). Configure before cloning (panics otherwise).
    pub fn open_file_cache_valid(mut self, valid: Duration) -> StaticFiles {
        self.inner_mut().cache.valid = valid;
        self
    }

    /// The open-file cache's settings.
    pub fn cache_config(&self) -> CacheConfig {
        self.inner.cache
    }

    /// The open-file cache on this thread.
    pub fn cache_stats(&self) -> CacheStats {
        cache::stats(self.inner.id)
    }

    /// Use user-space containment (`realpath` and a prefix check) instead
    /// of `openat2`: what kernels before 5.6 get. For tests of that path.
    /// Configure before cloning (panics otherwise).
    pub fn force_canonicalize(mut self) -> StaticFiles {
        self.inner_mut()
            .root
            .set_containment(Containment::Canonicalize);
        self
    }

    /// How lookups are kept inside the directory (found at start).
    pub fn containment(&self) -> Containment {
        self.inner.root.containment()
    }

    /// The canonical path of the served directory.
    pub fn root(&self) -> &Path {
        self.inner.root.path()
    }

    /// Answer one request.
    pub async fn serve(&self, req: &Head) -> Response {
        let verb = match req.method() {
            Method::Get => Verb::Get,
            Method::Head => Verb::Head,
            _ => Verb::Other,
        };
        if verb == Verb::Other {
            return respond(reply::refusal(405), None);
        }
        let inner = &*self.inner;
        let raw = req.path();
        let rest = match &inner.prefix {
            None => Some(raw),
            Some(p) => raw.strip_prefix(p.as_str()).filter(|r| r.starts_with('/')),
        };
        let Some(rest) = rest else {
            return respond(reply::refusal(404), None);
        };
        let safe = match path::sanitize(rest.as_bytes(), inner.allow_hidden) {
            Ok(p) => p,
            Err(PathError::BadRequest) => return respond(reply::refusal(400), None),
            Err(PathError::Forbidden) => return respond(reply::refusal(403), None),
            Err(PathError::Hidden) => return respond(reply::refusal(404), None),
        };
        let opened = cache::open(inner.id, inner.cache, &inner.root, &safe, &inner.index).await;
        let found: OpenFile = match opened {
            Opened::Ready(f) => f,
            Opened::Refused(Refusal::NotFound) => return respond(reply::refusal(404), None),
            Opened::Refused(Refusal::Forbidden) => return respond(reply::refusal(403), None),
            Opened::Refused(Refusal::AddSlash) => {
                return respond(reply::add_slash(raw, req.query()), None)
            }
            Opened::Refused(Refusal::Io(e)) => {
                tracing::warn!("static files: {raw}: {e}");
                return respond(reply::refusal(500), None);
            }
            Opened::OpenFailed(rel, e) => {
                tracing::warn!("static files: open {}: {e}", rel.display());
                let code = match e.kind() {
                    io::ErrorKind::NotFound => 404,
                    io::ErrorKind::PermissionDenied => 403,
                    _ => 500,
                };
                return respond(reply::refusal(code), None);
            }
        };
        let meta = FileMeta {
            ino: found.stat.ino,
            size: found.stat.size,
            mtime: found.stat.mtime,
            content_type: found.content_type,
        };
        let if_match = field(req, "if-match");
        let if_none_match = field(req, "if-none-match");
        let freq = FileRequest {
            conditions: Conditions {
                if_match: if_match.as_deref(),
                if_none_match: if_none_match.as_deref(),
                if_modified_since: single(req, "if-modified-since"),
                if_unmodified_since: single(req, "if-unmodified-since"),
            },
            range: single(req, "range"),
            if_range: single(req, "if-range"),
        };
        let reply = reply::for_file(verb, &freq, &meta);
        let cc = inner.cache_control.as_deref();
        let ReplyBody::File { offset, len } = reply.body else {
            return respond(reply, cc);
        };
        if len == 0 {
            return respond(reply, cc);
        }
        respond(reply, cc).body(FileBody::shared(found.file, offset, len))
    }
}

impl Handler for StaticFiles {
    async fn call(&self, req: Request) -> Response {
        self.serve(req.head()).await
    }
}

/// A header that may come on several lines (a list): joined with `, `.
/// `None` if absent or not UTF-8.
fn field<'a>(req: &'a Head, name: &str) -> Option<Cow<'a, str>> {
    let mut values = req
        .headers()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| std::str::from_utf8(v).ok());
    let first = values.next()??;
    let mut joined = Cow::Borrowed(first);
    for v in values {
        let s = joined.to_mut();
        s.push_str(", ");
        s.push_str(v?);
    }
    Some(joined)
}

/// A header that must come once: `None` if absent, repeated (ambiguous, so
/// ignored) or not UTF-8.
fn single<'a>(req: &'a Head, name: &str) -> Option<&'a str> {
    let mut values = req.headers().filter(|(n, _)| n.eq_ignore_ascii_case(name));
    let (_, v) = values.next()?;
    if values.next().is_some() {
        return None;
    }
    std::str::from_utf8(v).ok()
}

/// Turn a [`Reply`] into a [`Response`]. A file body is left empty: the
/// caller opens the file and sets it.
fn respond(r: Reply, cache_control: Option<&str>) -> Response {
    let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = Response::new(status);
    for (n, v) in r.headers {
        resp = resp.header(n, v);
    }
    if let (Some(cc), 200 | 206 | 304) = (cache_control, r.status) {
        resp = resp.header("Cache-Control", cc.to_string());
    }
    match r.body {
        ReplyBody::Text(t) => resp.body(t),
        ReplyBody::Empty | ReplyBody::File { .. } => resp,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Limits, Parsed};

    fn head(raw: &str) -> Request {
        match Request::parse(raw.as_bytes(), &Limits::default()) {
            Ok(Parsed::Complete((req, _))) => req,
            other => panic!("{raw:?}: {other:?}"),
        }
    }

    #[test]
    fn list_fields_join_lines_and_single_fields_refuse_repeats() {
        let req = head(
            "GET / HTTP/1.1\r\nHost: t\r\nIf-None-Match: \"a\"\r\nRange: bytes=0-1\r\n\
             if-none-match: \"b\", \"c\"\r\nIf-Range: \"a\"\r\nrange: bytes=2-3\r\n\r\n",
        );
        assert_eq!(
            field(&req, "If-None-Match").as_deref(),
            Some("\"a\", \"b\", \"c\"")
        );
        assert_eq!(field(&req, "if-match"), None);
        assert_eq!(single(&req, "if-range"), Some("\"a\""));
        assert_eq!(single(&req, "range"), None, "two Range fields: ignored");
        assert_eq!(single(&req, "if-match"), None);
    }

    #[test]
    fn refusals_without_a_socket() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), b"hi").unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        let files = StaticFiles::new(dir.path()).unwrap();
        assert_eq!(files.containment(), Containment::Openat2);
        let status = |raw: &str| {
            let req = head(raw);
            ringkit::run(files.serve(req.head()))
                .unwrap()
                .status()
                .as_u16()
        };
        assert_eq!(status("DELETE /a.txt HTTP/1.1\r\nHost: t\r\n\r\n"), 405);
        assert_eq!(status("GET /a%zz HTTP/1.1\r\nHost: t\r\n\r\n"), 400);
        assert_eq!(status("GET /../a.txt HTTP/1.1\r\nHost: t\r\n\r\n"), 403);
        assert_eq!(status("GET /.hidden HTTP/1.1\r\nHost: t\r\n\r\n"), 404);
        assert_eq!(status("GET /d HTTP/1.1\r\nHost: t\r\n\r\n"), 301);
        assert_eq!(status("GET /d/ HTTP/1.1\r\nHost: t\r\n\r\n"), 404);
        assert_eq!(status("GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n"), 200);
        assert_eq!(status("HEAD /a.txt HTTP/1.1\r\nHost: t\r\n\r\n"), 200);
        let prefixed = StaticFiles::new(dir.path())
            .unwrap()
            .strip_prefix("/files/");
        let status = |raw: &str| {
            let req = head(raw);
            ringkit::run(prefixed.serve(req.head()))
                .unwrap()
                .status()
                .as_u16()
        };
        assert_eq!(status("GET /files/a.txt HTTP/1.1\r\nHost: t\r\n\r\n"), 200);
        assert_eq!(status("GET /filesa.txt HTTP/1.1\r\nHost: t\r\n\r\n"), 404);
        assert_eq!(status("GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n"), 404);
    }

    #[test]
    fn is_send_sync_and_clone() {
        fn check<T: Send + Sync + Clone + 'static>() {}
        check::<StaticFiles>();
    }
}
