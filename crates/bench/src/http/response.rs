//! Framing of HTTP/1.1 responses for the load generator: pure, no I/O.
//!
//! [`parse_response`] looks at the bytes received so far for one response
//! and says `Partial` (read more) or `Complete` (how many bytes the response
//! took, its status, its body length). Bodies are framed by `Content-Length`
//! or `Transfer-Encoding: chunked`; a body delimited by the end of the
//! connection is not supported (an error: the benchmark servers never send
//! one). Chunk data is skipped by size, so re-parsing a growing buffer costs
//! O(chunks), not O(bytes).

use std::fmt;

/// Most headers a response may carry.
const MAX_HEADERS: usize = 32;

/// A complete response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Bytes of body (for chunked: the sum of the chunk sizes).
    pub body_len: usize,
    /// Bytes the whole response took (head, body, chunk framing, trailers).
    pub len: usize,
    /// The server will close the connection after it (`Connection: close`,
    /// or HTTP/1.0 without `keep-alive`).
    pub close: bool,
    /// Where the body starts, when it is one contiguous run of bytes
    /// (`Content-Length`); `None` for a chunked body.
    pub body_at: Option<usize>,
}

/// Progress of parsing one response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parse {
    /// Need more bytes.
    Partial,
    /// The response is complete.
    Complete(Response),
}

/// Why a response cannot be framed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseError {
    /// The status line or a header is malformed.
    Head(httparse::Error),
    /// `Content-Length` is not a number, or appears twice with different values.
    ContentLength,
    /// A chunk size line or the CRLF after chunk data is malformed.
    Chunk,
    /// Neither `Content-Length` nor chunked: the body would run until close.
    NoLength,
}

impl fmt::Display for ResponseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResponseError::Head(e) => write!(f, "malformed response head: {e}"),
            ResponseError::ContentLength => write!(f, "bad Content-Length"),
            ResponseError::Chunk => write!(f, "malformed chunked body"),
            ResponseError::NoLength => write!(
                f,
                "response without Content-Length or chunked encoding (body until close is not supported)"
            ),
        }
    }
}

impl std::error::Error for ResponseError {}

fn has_token(v: &[u8], token: &str) -> bool {
    v.split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// Frame the response at the start of `buf`.
pub fn parse_response(buf: &[u8]) -> Result<Parse, ResponseError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut r = httparse::Response::new(&mut headers);
    let head_len = match r.parse(buf).map_err(ResponseError::Head)? {
        httparse::Status::Partial => return Ok(Parse::Partial),
        httparse::Status::Complete(n) => n,
    };
    let status = r.code.unwrap_or(0);
    let mut content_length: Option<usize> = None;
    let mut chunked = false;
    let mut close = r.version == Some(0);
    for h in r.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value)
                .ok()
                .and_then(|s| s.trim().parse::<usize>().ok())
                .ok_or(ResponseError::ContentLength)?;
            if content_length.is_some_and(|c| c != v) {
                return Err(ResponseError::ContentLength);
            }
            content_length = Some(v);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            // chunked must be the last coding when present.
            chunked = h
                .value
                .rsplit(|&b| b == b',')
                .next()
                .is_some_and(|t| t.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if h.name.eq_ignore_ascii_case("connection") {
            if has_token(h.value, "close") {
                close = true;
            } else if has_token(h.value, "keep-alive") {
                close = false;
            }
        }
    }
    let done = |body_len: usize, len: usize| {
        Ok(Parse::Complete(Response {
            status,
            body_len,
            len,
            close,
            body_at: Some(head_len),
        }))
    };
    // No body whatever the headers say: 1xx, 204, 304.
    if (100..200).contains(&status) || status == 204 || status == 304 {
        return done(0, head_len);
    }
    if chunked {
        return parse_chunked(buf, head_len).map(|p| match p {
            Some((body, len)) => Parse::Complete(Response {
                status,
                body_len: body,
                len,
                close,
                body_at: None,
            }),
            None => Parse::Partial,
        });
    }
    match content_length {
        Some(cl) if buf.len() - head_len >= cl => done(cl, head_len + cl),
        Some(_) => Ok(Parse::Partial),
        None => Err(ResponseError::NoLength),
    }
}

/// A chunked body starting at `pos`: `Some((body_len, end))` when complete.
fn parse_chunked(buf: &[u8], mut pos: usize) -> Result<Option<(usize, usize)>, ResponseError> {
    let mut body = 0usize;
    loop {
        let (n, size) = match httparse::parse_chunk_size(&buf[pos..]) {
            Ok(httparse::Status::Complete(x)) => x,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(_) => return Err(ResponseError::Chunk),
        };
        pos += n;
        if size == 0 {
            // Trailer fields, then an empty line.
            let rest = &buf[pos..];
            if rest.starts_with(b"\r\n") {
                return Ok(Some((body, pos + 2)));
            }
            return Ok(rest
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .map(|i| (body, pos + i + 4)));
        }
        let size = usize::try_from(size).map_err(|_| ResponseError::Chunk)?;
        let end = pos.checked_add(size).ok_or(ResponseError::Chunk)?;
        if buf.len() < end + 2 {
            return Ok(None);
        }
        if &buf[end..end + 2] != b"\r\n" {
            return Err(ResponseError::Chunk);
        }
        body += size;
        pos = end + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn complete(buf: &[u8]) -> Response {
        match parse_response(buf) {
            Ok(Parse::Complete(r)) => r,
            other => panic!("expected complete, got {other:?}"),
        }
    }

    #[test]
    fn nginx_return_200() {
        let b = b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Mon, 23 Nov 2026 13:00:00 GMT\r\nContent-Type: application/octet-stream\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n";
        let r = complete(b);
        assert_eq!(
            r,
            Response {
                status: 200,
                body_len: 0,
                len: b.len(),
                close: false,
                body_at: Some(b.len()),
            }
        );
    }

    #[test]
    fn content_length_body_and_pipelined_rest() {
        let b = b"HTTP/1.1 404 Not Found\r\ncontent-length: 5\r\n\r\nhelloHTTP/1.1 200";
        let r = complete(b);
        let first = b"HTTP/1.1 404 Not Found\r\ncontent-length: 5\r\n\r\nhello".len();
        assert_eq!((r.status, r.body_len, r.len), (404, 5, first));
    }

    #[test]
    fn partial_everywhere() {
        let b: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
        for cut in 0..b.len() {
            assert_eq!(parse_response(&b[..cut]), Ok(Parse::Partial), "cut {cut}");
        }
        assert_eq!(complete(b).body_len, 3);
        let c: &[u8] =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\n\r\n";
        for cut in 0..c.len() {
            assert_eq!(parse_response(&c[..cut]), Ok(Parse::Partial), "cut {cut}");
        }
        let r = complete(c);
        assert_eq!((r.body_len, r.len), (19, c.len()));
    }

    #[test]
    fn chunked_with_extension_and_trailers() {
        let b = b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n2;x=y\r\nhi\r\n0\r\nX-Trailer: 1\r\n\r\n";
        let r = complete(b);
        assert_eq!((r.body_len, r.len), (2, b.len()));
    }

    #[test]
    fn connection_close_and_http10() {
        assert!(
            complete(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n").close
        );
        assert!(complete(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").close);
        assert!(
            !complete(b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n")
                .close
        );
    }

    #[test]
    fn no_body_statuses() {
        let r = complete(b"HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n");
        assert_eq!((r.status, r.body_len), (204, 0));
    }

    #[test]
    fn errors() {
        assert!(matches!(
            parse_response(b"HTTX/1.1 200 OK\r\n\r\n"),
            Err(ResponseError::Head(_))
        ));
        assert_eq!(
            parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n"),
            Err(ResponseError::ContentLength)
        );
        assert_eq!(
            parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
            Err(ResponseError::ContentLength)
        );
        assert_eq!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
            Err(ResponseError::Chunk)
        );
        assert_eq!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabcd\r\n"),
            Err(ResponseError::Chunk)
        );
        assert_eq!(
            parse_response(b"HTTP/1.1 200 OK\r\n\r\n"),
            Err(ResponseError::NoLength)
        );
    }
}
