//! The request-head parser: sans-I/O, on [`httparse`], with the framing rules
//! and request-smuggling defences of RFC 9112 applied on top.
//!
//! [`parse_head`] looks at the bytes received so far and answers
//! [`Parsed::Partial`] (send more) or [`Parsed::Complete`] with a [`Head`]
//! whose [`Head::len`] is how many bytes it took. It does no I/O and keeps
//! no state, so it can be fed any split of the input and fuzzed.
//!
//! # What is refused (and why)
//! A server and a proxy in front of it must agree where each request ends;
//! every ambiguity below is one that has been used to smuggle a request past
//! a proxy, so each is refused with 400 and the connection closed:
//! - both `Content-Length` and `Transfer-Encoding`;
//! - more than one `Content-Length` field (even with equal values), or one
//!   that is not plain decimal digits (`+5`, `5,5`, ` 5 5`, overflow);
//! - more than one `Transfer-Encoding` field, `chunked` not last or applied
//!   twice, or any `Transfer-Encoding` in an HTTP/1.0 request; a valid
//!   chain with another coding before `chunked` (`gzip, chunked`) is 501,
//!   since we decode none;
//! - obsolete line folding (a field line starting with a space or tab),
//!   NUL, CR or LF inside a value, whitespace before a field's colon
//!   (httparse refuses these; the tables in the tests pin it);
//! - an HTTP/1.1 request without exactly one `Host`;
//! - a method longer than [`MAX_METHOD_LEN`].
//!
//! Limits ([`Limits`]) give 414 (target), 431 (head bytes or field count),
//! 413 (declared body length), 505 (version other than 1.x; HTTP/1.2 and
//! up are read as 1.1, RFC 9112 §2.3).

use std::mem::MaybeUninit;

use crate::head::{Framing, Span, Storage};
use crate::limits::MAX_HEADERS_CAP;
use crate::{Error, Head, Limits, Method, Version};

/// The outcome of a parse over incomplete input.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed<T> {
    /// More bytes are needed.
    Partial,
    /// Done.
    Complete(T),
}

/// Longest method accepted (400 beyond; real ones are under 20 bytes).
pub const MAX_METHOD_LEN: usize = 64;

/// Parse a request head from the start of `buf`. See the module docs.
pub fn parse_head(buf: &[u8], limits: &Limits) -> Result<Parsed<Head>, Error> {
    let window = &buf[..buf.len().min(limits.max_head_bytes)];
    let mut slots = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS_CAP];
    let slots = &mut slots[..limits.header_slots()];
    let mut req = httparse::Request::new(&mut []);
    let parsed = httparse::ParserConfig::default()
        .parse_request_with_uninit_headers(&mut req, window, slots);
    let n = match parsed {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return partial(buf, limits),
        Err(httparse::Error::TooManyHeaders) => return Err(Error::HeadersTooLarge),
        Err(httparse::Error::Version) => {
            // HTTP/1.x with x above 1 is read as HTTP/1.1 (RFC 9112 §2.3):
            // parsed again from a copy whose minor digit says 1.
            if let Some(at) = higher_minor(window) {
                let mut copy = buf.to_vec();
                copy[at] = b'1';
                return parse_head(&copy, limits);
            }
            return Err(version_error(window));
        }
        Err(httparse::Error::Token) => {
            return Err(Error::BadRequest("invalid token in the request line"))
        }
        Err(httparse::Error::HeaderName) => {
            return Err(Error::BadRequest("invalid header field name (or obs-fold)"))
        }
        Err(httparse::Error::HeaderValue) => {
            return Err(Error::BadRequest("invalid byte in a header field value"))
        }
        Err(httparse::Error::NewLine) => return Err(Error::BadRequest("invalid line ending")),
        Err(httparse::Error::Status) => return Err(Error::BadRequest("malformed request")),
    };
    let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version) else {
        return Err(Error::BadRequest("incomplete request line"));
    };
    if target.len() > limits.max_uri_len {
        return Err(Error::UriTooLong);
    }
    if method.len() > MAX_METHOD_LEN {
        return Err(Error::BadRequest("method too long"));
    }
    let version = match version {
        0 => Version::Http10,
        1 => Version::Http11,
        _ => return Err(Error::VersionNotSupported),
    };
    let method_kind = Method::from_bytes(method.as_bytes());
    let (path, query) = split_target(target, method_kind)?;

    let mut storage = Storage::take();
    storage.bytes.extend_from_slice(&buf[..n]);
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut saw_te = false;
    let mut hosts = 0u32;
    let mut close = false;
    let mut keep_alive_token = false;
    let mut expect_continue = false;
    for h in req.headers.iter() {
        let (name, value) = (h.name, h.value);
        if value.iter().any(|&b| b == 0 || b == b'\r' || b == b'\n') {
            return Err(Error::BadRequest("NUL, CR or LF in a header field value"));
        }
        storage
            .fields
            .push((Span::of(buf, name.as_bytes()), Span::of(buf, value)));
        // Dispatch on length first: most fields are none of these.
        match name.len() {
            4 if name.eq_ignore_ascii_case("host") => {
                if !valid_host(value) {
                    return Err(Error::BadRequest("invalid Host"));
                }
                hosts += 1
            }
            6 if name.eq_ignore_ascii_case("expect") => {
                if value.eq_ignore_ascii_case(b"100-continue") {
                    expect_continue = true;
                } else {
                    return Err(Error::ExpectationFailed);
                }
            }
            10 if name.eq_ignore_ascii_case("connection") => {
                for token in value.split(|&b| b == b',') {
                    let token = trim_ows(token);
                    if token.eq_ignore_ascii_case(b"close") {
                        close = true;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") {
                        keep_alive_token = true;
                    }
                }
            }
            14 if name.eq_ignore_ascii_case("content-length") => {
                if length.is_some() {
                    return Err(Error::BadRequest("more than one Content-Length"));
                }
                length = Some(parse_content_length(value)?);
            }
            17 if name.eq_ignore_ascii_case("transfer-encoding") => {
                if saw_te {
                    return Err(Error::BadRequest("more than one Transfer-Encoding"));
                }
                saw_te = true;
                chunked = parse_transfer_encoding(value)?;
            }
            _ => {}
        }
    }
    if saw_te && length.is_some() {
        return Err(Error::BadRequest(
            "both Content-Length and Transfer-Encoding",
        ));
    }
    if saw_te && version == Version::Http10 {
        return Err(Error::BadRequest(
            "Transfer-Encoding in an HTTP/1.0 request",
        ));
    }
    if version == Version::Http11 && hosts != 1 {
        return Err(Error::BadRequest(if hosts == 0 {
            "HTTP/1.1 request without Host"
        } else {
            "more than one Host"
        }));
    }
    let framing = match (chunked, length) {
        (true, _) => Framing::Chunked,
        (false, Some(0)) | (false, None) => Framing::None,
        (false, Some(n)) if n > limits.max_body_bytes => return Err(Error::BodyTooLarge),
        (false, Some(n)) => Framing::Length(n),
    };
    let keep_alive = match version {
        Version::Http11 => !close,
        Version::Http10 => keep_alive_token && !close,
    };
    Ok(Parsed::Complete(Head {
        storage,
        method: method_kind,
        method_span: Span::of(buf, method.as_bytes()),
        target: Span::of(buf, target.as_bytes()),
        path: path.map(|p| Span::of(buf, p.as_bytes())),
        query: query.map(|q| Span::of(buf, q.as_bytes())),
        version,
        framing,
        keep_alive,
        // RFC 9110 §10.1.1: ignore 100-continue from HTTP/1.0 clients.
        expect_continue: expect_continue && version == Version::Http11 && framing != Framing::None,
    }))
}

/// The input ended inside the head: wait, or refuse if it is already too big.
fn partial(buf: &[u8], limits: &Limits) -> Result<Parsed<Head>, Error> {
    let window = &buf[..buf.len().min(limits.max_head_bytes)];
    let line_end = window.iter().position(|&b| b == b'\n');
    let line = &window[..line_end.unwrap_or(window.len())];
    // The target is what follows the first space, up to the next: refuse it
    // as soon as what has arrived of it is over the limit.
    if let Some(sp) = line.iter().position(|&b| b == b' ') {
        if sp > MAX_METHOD_LEN {
            return Err(Error::BadRequest("method too long"));
        }
        let rest = &line[sp + 1..];
        let target = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
        if target > limits.max_uri_len {
            return Err(Error::UriTooLong);
        }
    } else if line.len() > MAX_METHOD_LEN && line_end.is_none() {
        // No space yet after a method longer than any real one.
        return Err(Error::BadRequest("method too long"));
    }
    if buf.len() >= limits.max_head_bytes {
        return Err(if line_end.is_some() {
            Error::HeadersTooLarge
        } else {
            Error::UriTooLong
        });
    }
    Ok(Parsed::Partial)
}

/// The request line of `buf` (without its line ending).
fn request_line(buf: &[u8]) -> &[u8] {
    let line = buf.split(|&b| b == b'\n').next().unwrap_or_default();
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Where the minor digit of an `HTTP/1.x` version with x above 1 is, in a
/// request line of exactly three parts.
fn higher_minor(buf: &[u8]) -> Option<usize> {
    let line = request_line(buf);
    if line.split(|&b| b == b' ').count() != 3 {
        return None;
    }
    match line.rsplit(|&b| b == b' ').next()? {
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', minor] if (b'2'..=b'9').contains(minor) => {
            Some(line.len() - 1)
        }
        _ => None,
    }
}

/// A `Host` value: `uri-host [ ":" port ]` (RFC 9110 §7.2), empty allowed:
/// the bytes of a reg-name, an IP literal or an IPv4 address and a port.
fn valid_host(v: &[u8]) -> bool {
    v.iter().all(|&b| {
        b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b':'
                    | b'%'
                    | b'['
                    | b']'
            )
    })
}

/// httparse says "bad version": 505 for a well-formed `HTTP/x.y` that is not
/// 1.0 or 1.1 at the end of a request line of three parts, 400 for anything
/// else (a space in the request target among it).
fn version_error(buf: &[u8]) -> Error {
    let line = request_line(buf);
    if line.split(|&b| b == b' ').count() != 3 {
        return Error::BadRequest(
            "a request line of more than three parts (a space in the target?)",
        );
    }
    let version = line.rsplit(|&b| b == b' ').next().unwrap_or_default();
    match version {
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            Error::VersionNotSupported
        }
        [b'H', b'T', b'T', b'P', b'/', major] if major.is_ascii_digit() => {
            Error::VersionNotSupported
        }
        _ => Error::BadRequest("malformed HTTP version"),
    }
}

/// Split a request target into path and query, both slices of `target`
/// (a path of `None` means `/`: an absolute-form target without a path).
/// Accepts origin form (`/p?q`), absolute form (`http://host/p?q`, which
/// RFC 9112 §3.2.2 says a server must accept) and `*` for OPTIONS.
fn split_target(target: &str, method: Method) -> Result<(Option<&str>, Option<&str>), Error> {
    if target.contains('#') {
        return Err(Error::BadRequest("fragment in the request target"));
    }
    let rest = if target.starts_with('/') {
        target
    } else if target == "*" && method == Method::Options {
        return Ok((Some(target), None));
    } else if let Some(after) = strip_scheme(target) {
        match after.find(['/', '?']) {
            Some(i) if after.as_bytes()[i] == b'/' => &after[i..],
            // `http://host?q`: the path is `/`.
            Some(i) => return Ok((None, Some(&after[i + 1..]))),
            // `http://host`: the path is `/`.
            None => return Ok((None, None)),
        }
    } else {
        return Err(Error::BadRequest(
            "request target is not origin or absolute form",
        ));
    };
    Ok(match rest.split_once('?') {
        Some((p, q)) => (Some(p), Some(q)),
        None => (Some(rest), None),
    })
}

fn strip_scheme(target: &str) -> Option<&str> {
    let b = target.as_bytes();
    if b.len() >= 7 && b[..7].eq_ignore_ascii_case(b"http://") {
        Some(&target[7..])
    } else if b.len() >= 8 && b[..8].eq_ignore_ascii_case(b"https://") {
        Some(&target[8..])
    } else {
        None
    }
}

/// `Content-Length`: 1*DIGIT, nothing else (no sign, no list, no spaces
/// inside; httparse already trimmed the optional whitespace around it).
pub(crate) fn parse_content_length(v: &[u8]) -> Result<u64, Error> {
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return Err(Error::BadRequest("Content-Length is not a decimal number"));
    }
    let mut n: u64 = 0;
    for &d in v {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
            .ok_or(Error::BadRequest("Content-Length overflows"))?;
    }
    Ok(n)
}

/// `Transfer-Encoding`: a comma list whose last coding must be `chunked`
/// (RFC 9112 §6.3: otherwise the length cannot be known), applied once.
/// Returns true when the body is chunked (always, when it returns Ok).
fn parse_transfer_encoding(v: &[u8]) -> Result<bool, Error> {
    let mut codings = v.split(|&b| b == b',').map(trim_ows).peekable();
    let mut other = false;
    while let Some(c) = codings.next() {
        let last = codings.peek().is_none();
        let is_chunked = c.eq_ignore_ascii_case(b"chunked");
        if c.is_empty() {
            return Err(Error::BadRequest("empty transfer coding"));
        }
        if last && !is_chunked {
            return Err(Error::BadRequest(
                "chunked is not the final transfer coding",
            ));
        }
        if !last && is_chunked {
            return Err(Error::BadRequest("chunked applied more than once"));
        }
        if !last {
            if !c.iter().all(|&b| is_tchar(b)) {
                return Err(Error::BadRequest("invalid transfer coding"));
            }
            other = true;
        }
    }
    if other {
        return Err(Error::NotImplemented("transfer codings other than chunked"));
    }
    Ok(true)
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_length_strict() {
        assert_eq!(parse_content_length(b"0"), Ok(0));
        assert_eq!(parse_content_length(b"0012"), Ok(12));
        for bad in [
            &b""[..],
            b"+1",
            b"-1",
            b"1,1",
            b"1 1",
            b"0x10",
            b"99999999999999999999",
        ] {
            assert!(parse_content_length(bad).is_err(), "{:?}", bad);
        }
    }

    #[test]
    fn transfer_encoding_rules() {
        assert_eq!(parse_transfer_encoding(b"chunked"), Ok(true));
        assert_eq!(parse_transfer_encoding(b"Chunked"), Ok(true));
        assert!(matches!(
            parse_transfer_encoding(b"gzip, chunked"),
            Err(Error::NotImplemented(_))
        ));
        for bad in [
            &b"gzip"[..],
            b"chunked, gzip",
            b"chunked, chunked",
            b"",
            b",chunked",
            b"chunked,",
        ] {
            assert!(
                matches!(parse_transfer_encoding(bad), Err(Error::BadRequest(_))),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn targets() {
        let ok = |t| split_target(t, Method::Get).unwrap();
        assert_eq!(ok("/a?b=1"), (Some("/a"), Some("b=1")));
        assert_eq!(ok("http://h/x?y"), (Some("/x"), Some("y")));
        assert_eq!(ok("http://h"), (None, None));
        assert_eq!(ok("http://h?q"), (None, Some("q")));
        assert_eq!(split_target("*", Method::Options), Ok((Some("*"), None)));
        assert!(split_target("*", Method::Get).is_err());
        assert!(split_target("a/b", Method::Get).is_err());
        assert!(split_target("/a#f", Method::Get).is_err());
        assert!(split_target("http://h?a#f", Method::Get).is_err());
    }
}
