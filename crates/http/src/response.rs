//! Responses: a status, header fields and a body, built by handlers.
//!
//! The server writes the framing itself: `Date`, `Content-Length` (from the
//! body) and `Connection: close` when the connection is closing. Fields with
//! those names (and `Transfer-Encoding`) set by a handler are ignored, so a
//! handler cannot make the framing lie. Header names and values are checked
//! when added: one holding CR, LF or NUL (response splitting) is dropped with
//! a warning.

use std::borrow::Cow;

use crate::StatusCode;

/// A response body.
#[derive(Debug, Default)]
pub enum Body {
    /// No body (`Content-Length: 0`).
    #[default]
    Empty,
    /// Bytes that live forever (no copy, no allocation).
    Static(&'static [u8]),
    /// Owned bytes.
    Bytes(Vec<u8>),
    /// A range of an open file, read and sent in pieces by the server.
    File(FileBody),
}

impl Body {
    /// Bytes the body holds (what `Content-Length` says).
    pub fn len(&self) -> u64 {
        match self {
            Body::Empty => 0,
            Body::Static(b) => b.len() as u64,
            Body::Bytes(b) => b.len() as u64,
            Body::File(f) => f.len,
        }
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl From<&'static [u8]> for Body {
    fn from(b: &'static [u8]) -> Body {
        Body::Static(b)
    }
}

impl From<&'static str> for Body {
    fn from(s: &'static str) -> Body {
        Body::Static(s.as_bytes())
    }
}

impl From<Vec<u8>> for Body {
    fn from(v: Vec<u8>) -> Body {
        Body::Bytes(v)
    }
}

impl From<String> for Body {
    fn from(s: String) -> Body {
        Body::Bytes(s.into_bytes())
    }
}

impl From<FileBody> for Body {
    fn from(f: FileBody) -> Body {
        Body::File(f)
    }
}

/// `len` bytes of an open file from `offset`. The server reads it with
/// `read_at` in pieces and writes each piece, so a large file costs one
/// piece of memory at a time. If the file turns out shorter than `len` (it
/// was truncated meanwhile) the connection is closed: the promised
/// `Content-Length` cannot be kept.
#[derive(Debug)]
pub struct FileBody {
    /// The open file (shared: an open-file cache may hold it too).
    pub file: std::rc::Rc<ringkit::fs::File>,
    /// First byte to send.
    pub offset: u64,
    /// Bytes to send.
    pub len: u64,
}

impl FileBody {
    /// `len` bytes of `file` from `offset`.
    pub fn new(file: ringkit::fs::File, offset: u64, len: u64) -> FileBody {
        FileBody::shared(std::rc::Rc::new(file), offset, len)
    }

    /// `len` bytes of a shared `file` from `offset`.
    pub fn shared(file: std::rc::Rc<ringkit::fs::File>, offset: u64, len: u64) -> FileBody {
        FileBody { file, offset, len }
    }
}

/// A header field name or value: borrowed from static data or owned.
pub type HeaderText = Cow<'static, str>;

/// A response. Build it with [`Response::new`] and the chained setters.
///
/// ```
/// use ringkit_http::{Response, StatusCode};
/// let r = Response::new(StatusCode::OK)
///     .header("content-type", "text/plain")
///     .body("hello");
/// assert_eq!(r.body_ref().len(), 5);
/// ```
#[derive(Debug)]
pub struct Response {
    status: StatusCode,
    headers: Vec<(HeaderText, HeaderText)>,
    body: Body,
    close: bool,
}

impl Response {
    /// A response with this status, no header fields and no body.
    pub fn new(status: StatusCode) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body: Body::Empty,
            close: false,
        }
    }

    /// 200 with no body.
    pub fn ok() -> Response {
        Response::new(StatusCode::OK)
    }

    /// A short text response (`text/plain; charset=utf-8`).
    pub fn text(status: StatusCode, body: impl Into<Body>) -> Response {
        Response::new(status)
            .header("content-type", "text/plain; charset=utf-8")
            .body(body)
    }

    /// `value` as a JSON body (`application/json`), feature `json`. A value
    /// that cannot be serialised (a map with non-string keys) gives a 500.
    ///
    /// ```
    /// let r = ringkit_http::Response::json(ringkit_http::StatusCode::OK, &[1, 2, 3]);
    /// assert_eq!(r.header_value("content-type"), Some("application/json"));
    /// ```
    #[cfg(feature = "json")]
    pub fn json(status: StatusCode, value: &impl serde::Serialize) -> Response {
        match serde_json::to_vec(value) {
            Ok(body) => Response::new(status)
                .header("content-type", "application/json")
                .body(body),
            Err(e) => {
                tracing::error!("ringkit-http: response not serialisable as JSON: {e}");
                Response::text(StatusCode::INTERNAL_SERVER_ERROR, "internal error\n")
            }
        }
    }

    /// Change the status.
    pub fn status_code(mut self, status: StatusCode) -> Response {
        self.status = status;
        self
    }

    /// Add a header field. Framing fields (`Content-Length`, `Transfer-Encoding`,
    /// `Connection`, `Date`) are set by the server and ignored here; a name
    /// that is not a token or a value holding CR, LF or NUL is dropped with a
    /// warning.
    pub fn header(mut self, name: impl Into<HeaderText>, value: impl Into<HeaderText>) -> Response {
        let (name, value) = (name.into(), value.into());
        if is_framing(&name) {
            return self;
        }
        let name_ok = !name.is_empty() && name.bytes().all(is_tchar);
        let value_ok = !value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0);
        if !name_ok || !value_ok {
            tracing::warn!("ringkit-http: dropping invalid response header {name:?}");
            return self;
        }
        self.headers.push((name, value));
        self
    }

    /// Set the body.
    pub fn body(mut self, body: impl Into<Body>) -> Response {
        self.body = body.into();
        self
    }

    /// Close the connection after this response (`Connection: close`).
    pub fn close(mut self) -> Response {
        self.close = true;
        self
    }

    /// The status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The header fields the handler set, in order.
    pub fn headers(&self) -> impl Iterator<Item = (&str, &str)> {
        self.headers.iter().map(|(n, v)| (&**n, &**v))
    }

    /// The first header field named `name` (case-insensitive).
    pub fn header_value(&self, name: &str) -> Option<&str> {
        self.headers()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// The body.
    pub fn body_ref(&self) -> &Body {
        &self.body
    }

    /// Whether the handler asked to close the connection.
    pub fn wants_close(&self) -> bool {
        self.close
    }

    pub(crate) fn into_body(self) -> Body {
        self.body
    }
}

fn is_framing(name: &str) -> bool {
    ["content-length", "transfer-encoding", "connection", "date"]
        .iter()
        .any(|f| name.eq_ignore_ascii_case(f))
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}
