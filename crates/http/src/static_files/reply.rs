//! What to answer for a found file, or for a refusal (pure).
//!
//! [`for_file`] turns the request's method and `If-*`/`Range` headers plus
//! the file's metadata into a [`Reply`]: a status, header fields, and which
//! bytes of the file (if any) make the body. It performs no I/O, so every
//! branch (304, 412, 206, 416, HEAD) is tested here without a socket; the
//! handler then streams the chosen bytes.
//!
//! Order of decisions, after RFC 9110: method (405 unless GET or HEAD),
//! preconditions (§13.2.2: 412 or 304), then `If-Range` and `Range` (GET
//! only: HEAD and other methods ignore `Range`, §14.2).

use super::conditional::{self, Conditions, Precondition, Validators};
use super::range::{self, RangeAnswer};

/// The request method, as far as files are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// GET: headers and body.
    Get,
    /// HEAD: the headers a GET would get, no body.
    Head,
    /// Anything else: 405.
    Other,
}

/// The header fields of a request that matter for a file.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileRequest<'a> {
    /// `If-Match`, `If-None-Match`, `If-Modified-Since`, `If-Unmodified-Since`.
    pub conditions: Conditions<'a>,
    /// `Range`.
    pub range: Option<&'a str>,
    /// `If-Range`.
    pub if_range: Option<&'a str>,
}

/// What a file's metadata says, for a reply.
#[derive(Debug, Clone, Copy)]
pub struct FileMeta {
    /// Inode.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time.
    pub mtime: std::time::SystemTime,
    /// `Content-Type`.
    pub content_type: &'static str,
}

/// The body of a [`Reply`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyBody {
    /// No body (`Content-Length: 0`, or none for 304).
    Empty,
    /// A short text (error pages).
    Text(&'static str),
    /// `len` bytes of the file from `offset`. For HEAD the length is
    /// announced and nothing is sent.
    File {
        /// First byte.
        offset: u64,
        /// Byte count (the `Content-Length`).
        len: u64,
    },
}

/// A status, header fields and a body choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// Header fields besides `Content-Length` (which the body implies).
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub body: ReplyBody,
}

impl Reply {
    fn new(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: ReplyBody::Empty,
        }
    }

    fn header(mut self, name: &'static str, value: impl Into<String>) -> Reply {
        self.headers.push((name, value.into()));
        self
    }

    /// The value of header `name`, if set (case-insensitive).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The methods a file answers to, for `Allow`.
pub const ALLOW: &str = "GET, HEAD";

/// A refusal with a short text body: 400, 403, 404, 405 (with `Allow`), 500.
pub fn refusal(status: u16) -> Reply {
    let text = match status {
        400 => "bad request\n",
        403 => "forbidden\n",
        404 => "not found\n",
        405 => "method not allowed\n",
        _ => "internal server error\n",
    };
    let r = Reply {
        body: ReplyBody::Text(text),
        ..Reply::new(status)
    }
    .header("Content-Type", "text/plain; charset=utf-8");
    if status == 405 {
        r.header("Allow", ALLOW)
    } else {
        r
    }
}

/// 301 to the same path with a slash appended (a directory asked for
/// without one). `raw_path` is the path as received (still encoded) and
/// has already passed [`super::path::sanitize`], so it starts with exactly
/// one `/` and the `Location` cannot point at another host.
pub fn add_slash(raw_path: &str, query: Option<&str>) -> Reply {
    let mut loc = format!("{raw_path}/");
    if let Some(q) = query {
        loc.push('?');
        loc.push_str(q);
    }
    Reply {
        body: ReplyBody::Text("moved\n"),
        ..Reply::new(301)
    }
    .header("Location", loc)
    .header("Content-Type", "text/plain; charset=utf-8")
}

/// The reply for a found regular file (see the module docs for the order).
pub fn for_file(verb: Verb, req: &FileRequest<'_>, f: &FileMeta) -> Reply {
    if verb == Verb::Other {
        return refusal(405);
    }
    let v = Validators::new(f.ino, f.size, f.mtime);
    let with_validators = |r: Reply| {
        let r = r.header("ETag", v.etag());
        match v.last_modified() {
            Some(lm) => r.header("Last-Modified", lm),
            None => r,
        }
    };
    match conditional::evaluate(&req.conditions, &v, true) {
        Precondition::Proceed => {}
        Precondition::NotModified => return with_validators(Reply::new(304)),
        Precondition::Failed => return Reply::new(412),
    }
    let ranged = match (verb, req.range) {
        (Verb::Get, Some(r))
            if req
                .if_range
                .is_none_or(|ir| conditional::if_range_matches(ir, &v)) =>
        {
            range::evaluate(r, f.size)
        }
        _ => RangeAnswer::Full,
    };
    let base = |status| {
        with_validators(Reply::new(status))
            .header("Content-Type", f.content_type)
            .header("Accept-Ranges", "bytes")
    };
    match ranged {
        RangeAnswer::Full => Reply {
            body: ReplyBody::File {
                offset: 0,
                len: f.size,
            },
            ..base(200)
        },
        RangeAnswer::Partial(r) => Reply {
            body: ReplyBody::File {
                offset: r.start,
                len: r.len(),
            },
            ..base(206).header("Content-Range", r.content_range(f.size))
        },
        RangeAnswer::Unsatisfiable => Reply::new(416)
            .header("Content-Range", range::unsatisfied_range(f.size))
            .header("Accept-Ranges", "bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    const LM: &str = "Tue, 02 Jan 2024 03:04:05 GMT";

    fn meta() -> FileMeta {
        FileMeta {
            ino: 7,
            size: 1000,
            mtime: UNIX_EPOCH + Duration::new(1_704_164_645, 1),
            content_type: "text/plain; charset=utf-8",
        }
    }

    fn etag() -> String {
        Validators::new(7, 1000, meta().mtime).etag().to_string()
    }

    fn get(req: FileRequest<'_>) -> Reply {
        for_file(Verb::Get, &req, &meta())
    }

    #[test]
    fn full_get_and_head() {
        for verb in [Verb::Get, Verb::Head] {
            let r = for_file(verb, &FileRequest::default(), &meta());
            assert_eq!(r.status, 200);
            assert_eq!(
                r.body,
                ReplyBody::File {
                    offset: 0,
                    len: 1000
                }
            );
            assert_eq!(r.get("content-type"), Some("text/plain; charset=utf-8"));
            assert_eq!(r.get("etag"), Some(etag().as_str()));
            assert_eq!(r.get("last-modified"), Some(LM));
            assert_eq!(r.get("accept-ranges"), Some("bytes"));
        }
    }

    #[test]
    fn other_methods_get_405_with_allow() {
        let r = for_file(Verb::Other, &FileRequest::default(), &meta());
        assert_eq!((r.status, r.get("allow")), (405, Some("GET, HEAD")));
    }

    #[test]
    fn not_modified() {
        let tag = etag();
        for req in [
            FileRequest {
                conditions: Conditions {
                    if_none_match: Some(&tag),
                    ..Default::default()
                },
                ..Default::default()
            },
            FileRequest {
                conditions: Conditions {
                    if_modified_since: Some(LM),
                    ..Default::default()
                },
                ..Default::default()
            },
        ] {
            for verb in [Verb::Get, Verb::Head] {
                let r = for_file(verb, &req, &meta());
                assert_eq!((r.status, r.body), (304, ReplyBody::Empty));
                assert_eq!(r.get("etag"), Some(tag.as_str()));
                assert_eq!(r.get("content-type"), None);
            }
        }
        let r = get(FileRequest {
            conditions: Conditions {
                if_match: Some("\"x\""),
                ..Default::default()
            },
            ..Default::default()
        });
        assert_eq!(r.status, 412);
    }

    #[test]
    fn ranges() {
        let r = get(FileRequest {
            range: Some("bytes=0-9"),
            ..Default::default()
        });
        assert_eq!(r.status, 206);
        assert_eq!(r.body, ReplyBody::File { offset: 0, len: 10 });
        assert_eq!(r.get("content-range"), Some("bytes 0-9/1000"));
        let r = get(FileRequest {
            range: Some("bytes=-100"),
            ..Default::default()
        });
        assert_eq!(
            r.body,
            ReplyBody::File {
                offset: 900,
                len: 100
            }
        );
        assert_eq!(r.get("content-range"), Some("bytes 900-999/1000"));
        let r = get(FileRequest {
            range: Some("bytes=1000-"),
            ..Default::default()
        });
        assert_eq!((r.status, r.body), (416, ReplyBody::Empty));
        assert_eq!(r.get("content-range"), Some("bytes */1000"));
        let r = get(FileRequest {
            range: Some("bytes=0-1,5-6"),
            ..Default::default()
        });
        assert_eq!(
            (r.status, r.body),
            (
                200,
                ReplyBody::File {
                    offset: 0,
                    len: 1000
                }
            )
        );
    }

    #[test]
    fn head_ignores_range() {
        let req = FileRequest {
            range: Some("bytes=0-9"),
            ..Default::default()
        };
        let r = for_file(Verb::Head, &req, &meta());
        assert_eq!(
            (r.status, r.body),
            (
                200,
                ReplyBody::File {
                    offset: 0,
                    len: 1000
                }
            )
        );
    }

    #[test]
    fn if_range() {
        let tag = etag();
        let stale = "\"stale\"";
        for (ir, want) in [
            (tag.as_str(), 206),
            (LM, 206),
            (stale, 200),
            ("W/\"x\"", 200),
        ] {
            let r = get(FileRequest {
                range: Some("bytes=0-9"),
                if_range: Some(ir),
                ..Default::default()
            });
            assert_eq!(r.status, want, "{ir}");
        }
    }

    #[test]
    fn refusals_and_redirect() {
        assert_eq!(refusal(404).body, ReplyBody::Text("not found\n"));
        assert_eq!(refusal(403).status, 403);
        assert_eq!(refusal(405).get("allow"), Some(ALLOW));
        let r = add_slash("/sub", Some("a=1"));
        assert_eq!((r.status, r.get("location")), (301, Some("/sub/?a=1")));
    }
}
