//! A parsed request head: the bytes as received plus positions into them.
//!
//! The head is copied once, out of the connection's receive buffer, into
//! storage that is recycled per thread: the method, target and every header
//! field are spans into those bytes, so a request costs no allocation per
//! header (and, in steady state, none at all: the storage of a dropped
//! request goes back to a small per-thread free list).

use std::cell::RefCell;

use crate::{Method, Version};

/// A byte range `start..end` into a head's bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) start: u32,
    pub(crate) end: u32,
}

impl Span {
    /// The position of `part`, which must be a slice of `base`.
    pub(crate) fn of(base: &[u8], part: &[u8]) -> Span {
        let start = (part.as_ptr() as usize).wrapping_sub(base.as_ptr() as usize);
        assert!(
            start <= base.len() && part.len() <= base.len() - start,
            "span outside its buffer"
        );
        Span {
            start: start as u32,
            end: (start + part.len()) as u32,
        }
    }

    pub(crate) fn get<'a>(&self, bytes: &'a [u8]) -> &'a [u8] {
        &bytes[self.start as usize..self.end as usize]
    }

    fn str<'a>(&self, bytes: &'a [u8]) -> &'a str {
        // Spans that `str` reads were `&str` in httparse's result: valid UTF-8.
        std::str::from_utf8(self.get(bytes)).unwrap_or("")
    }
}

/// How a request's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body.
    None,
    /// `Content-Length: n`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// Free storage kept per thread (more than this is dropped).
const POOL_MAX: usize = 256;
/// Storage that grew beyond this is not kept.
const POOL_MAX_BYTES: usize = 64 * 1024;

#[derive(Debug, Default)]
pub(crate) struct Storage {
    pub(crate) bytes: Vec<u8>,
    pub(crate) fields: Vec<(Span, Span)>,
}

thread_local! {
    static POOL: RefCell<Vec<Storage>> = const { RefCell::new(Vec::new()) };
}

impl Storage {
    pub(crate) fn take() -> Storage {
        POOL.try_with(|p| p.borrow_mut().pop())
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    fn give_back(mut self) {
        if self.bytes.capacity() > POOL_MAX_BYTES || self.bytes.capacity() == 0 {
            return;
        }
        self.bytes.clear();
        self.fields.clear();
        let _ = POOL.try_with(|p| {
            if let Ok(mut p) = p.try_borrow_mut() {
                if p.len() < POOL_MAX {
                    p.push(self);
                }
            }
        });
    }
}

/// A parsed request head (request line and header fields), owning its bytes.
#[derive(Debug)]
pub struct Head {
    pub(crate) storage: Storage,
    pub(crate) method: Method,
    pub(crate) method_span: Span,
    pub(crate) target: Span,
    /// `None`: `/` (an absolute-form target without a path).
    pub(crate) path: Option<Span>,
    pub(crate) query: Option<Span>,
    pub(crate) version: Version,
    pub(crate) framing: Framing,
    pub(crate) keep_alive: bool,
    pub(crate) expect_continue: bool,
}

impl Drop for Head {
    fn drop(&mut self) {
        std::mem::take(&mut self.storage).give_back();
    }
}

impl Head {
    /// The method.
    pub fn method(&self) -> Method {
        self.method
    }

    /// The method token as sent (useful for [`Method::Other`]).
    pub fn method_str(&self) -> &str {
        self.method_span.str(&self.storage.bytes)
    }

    /// The request target as sent (path and query, or an absolute URI).
    pub fn target(&self) -> &str {
        self.target.str(&self.storage.bytes)
    }

    /// The path, not percent-decoded, without the query (for an absolute-form
    /// target, the path part of it; `*` for `OPTIONS *`).
    pub fn path(&self) -> &str {
        self.path.map_or("/", |p| p.str(&self.storage.bytes))
    }

    /// The query, without the `?`.
    pub fn query(&self) -> Option<&str> {
        self.query.map(|q| q.str(&self.storage.bytes))
    }

    /// The protocol version.
    pub fn version(&self) -> Version {
        self.version
    }

    /// How the body is delimited.
    pub fn framing(&self) -> Framing {
        self.framing
    }

    /// Whether the connection stays open after this request's response
    /// (HTTP/1.1 unless `Connection: close`; HTTP/1.0 only with
    /// `Connection: keep-alive`).
    pub fn keep_alive(&self) -> bool {
        self.keep_alive
    }

    /// Whether the client sent `Expect: 100-continue` (HTTP/1.1 only) and
    /// waits for a `100 Continue` before it sends the body.
    pub fn expect_continue(&self) -> bool {
        self.expect_continue
    }

    /// The value of the first header field named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// Every header field, in order, as (name, value).
    pub fn headers(&self) -> impl Iterator<Item = (&str, &[u8])> + '_ {
        let b = &self.storage.bytes;
        self.storage
            .fields
            .iter()
            .map(move |(n, v)| (n.str(b), v.get(b)))
    }

    /// Size of the head in bytes, as received.
    pub fn len(&self) -> usize {
        self.storage.bytes.len()
    }

    /// Memory its storage takes: the bytes' and the fields' capacities
    /// (recycled storage keeps the capacity of a larger head before it).
    pub(crate) fn allocated(&self) -> usize {
        self.storage.bytes.capacity()
            + self.storage.fields.capacity() * std::mem::size_of::<(Span, Span)>()
    }

    /// Never true for a parsed head.
    pub fn is_empty(&self) -> bool {
        self.storage.bytes.is_empty()
    }
}
