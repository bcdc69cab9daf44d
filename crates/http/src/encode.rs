//! Writing response heads into the connection's output buffer.
//!
//! No allocation: the status line of common codes is a static string, `Date`
//! comes from the per-thread cache ([`crate::date`]), numbers are formatted
//! on the stack, and everything is appended to one reused `Vec`.

use crate::date::with_date;
use crate::{Response, StatusCode};

/// How a response head is framed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Framing {
    /// Value of `Content-Length` (the body's length, also for HEAD).
    pub(crate) content_length: u64,
    /// Send `Connection: close`.
    pub(crate) close: bool,
    /// The request was HTTP/1.0 and keeps the connection: say `keep-alive`.
    pub(crate) keep_alive_10: bool,
}

/// Append the status line and header fields of `resp` to `out`.
pub(crate) fn write_head(out: &mut Vec<u8>, resp: &Response, f: Framing) {
    let status = resp.status();
    write_status_line(out, status);
    out.extend_from_slice(b"Date: ");
    with_date(|d| out.extend_from_slice(d));
    out.extend_from_slice(b"\r\n");
    // RFC 9110 §8.6: no Content-Length in 1xx and 204; for 304 it would have
    // to be the length of the full representation, which we do not know.
    if !status.is_bodiless() {
        out.extend_from_slice(b"Content-Length: ");
        write_u64(out, f.content_length);
        out.extend_from_slice(b"\r\n");
    }
    if f.close {
        out.extend_from_slice(b"Connection: close\r\n");
    } else if f.keep_alive_10 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    for (n, v) in resp.headers() {
        out.extend_from_slice(n.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// `HTTP/1.1 <code> <reason>\r\n`.
pub(crate) fn write_status_line(out: &mut Vec<u8>, status: StatusCode) {
    if let Some(line) = status.status_line() {
        out.extend_from_slice(line);
        return;
    }
    out.extend_from_slice(b"HTTP/1.1 ");
    write_u64(out, u64::from(status.as_u16()));
    out.push(b' ');
    out.extend_from_slice(status.reason().as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Decimal digits of `n`, without allocating.
pub(crate) fn write_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        for n in [0u64, 7, 10, 12345, u64::MAX] {
            let mut v = Vec::new();
            write_u64(&mut v, n);
            assert_eq!(v, n.to_string().into_bytes());
        }
    }

    #[test]
    fn head_layout() {
        let mut out = Vec::new();
        let r = Response::new(StatusCode::from_u16(418).unwrap()).header("x-a", "b");
        write_head(
            &mut out,
            &r,
            Framing {
                content_length: 3,
                close: true,
                keep_alive_10: false,
            },
        );
        let s = String::from_utf8(out).unwrap();
        assert!(s.starts_with("HTTP/1.1 418 \r\nDate: "), "{s}");
        assert!(
            s.ends_with("\r\nContent-Length: 3\r\nConnection: close\r\nx-a: b\r\n\r\n"),
            "{s}"
        );
        let mut out = Vec::new();
        write_head(
            &mut out,
            &Response::new(StatusCode::NO_CONTENT),
            Framing {
                content_length: 0,
                close: false,
                keep_alive_10: false,
            },
        );
        assert!(!String::from_utf8(out).unwrap().contains("Content-Length"));
    }
}
