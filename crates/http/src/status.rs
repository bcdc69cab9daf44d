//! Status codes and their reason phrases.

/// An HTTP status code (100–999).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StatusCode(u16);

impl StatusCode {
    /// 100 Continue.
    pub const CONTINUE: StatusCode = StatusCode(100);
    /// 200 OK.
    pub const OK: StatusCode = StatusCode(200);
    /// 201 Created.
    pub const CREATED: StatusCode = StatusCode(201);
    /// 204 No Content.
    pub const NO_CONTENT: StatusCode = StatusCode(204);
    /// 206 Partial Content.
    pub const PARTIAL_CONTENT: StatusCode = StatusCode(206);
    /// 301 Moved Permanently.
    pub const MOVED_PERMANENTLY: StatusCode = StatusCode(301);
    /// 302 Found.
    pub const FOUND: StatusCode = StatusCode(302);
    /// 304 Not Modified.
    pub const NOT_MODIFIED: StatusCode = StatusCode(304);
    /// 400 Bad Request.
    pub const BAD_REQUEST: StatusCode = StatusCode(400);
    /// 403 Forbidden.
    pub const FORBIDDEN: StatusCode = StatusCode(403);
    /// 404 Not Found.
    pub const NOT_FOUND: StatusCode = StatusCode(404);
    /// 405 Method Not Allowed.
    pub const METHOD_NOT_ALLOWED: StatusCode = StatusCode(405);
    /// 408 Request Timeout.
    pub const REQUEST_TIMEOUT: StatusCode = StatusCode(408);
    /// 412 Precondition Failed.
    pub const PRECONDITION_FAILED: StatusCode = StatusCode(412);
    /// 413 Content Too Large.
    pub const PAYLOAD_TOO_LARGE: StatusCode = StatusCode(413);
    /// 414 URI Too Long.
    pub const URI_TOO_LONG: StatusCode = StatusCode(414);
    /// 416 Range Not Satisfiable.
    pub const RANGE_NOT_SATISFIABLE: StatusCode = StatusCode(416);
    /// 417 Expectation Failed.
    pub const EXPECTATION_FAILED: StatusCode = StatusCode(417);
    /// 431 Request Header Fields Too Large.
    pub const REQUEST_HEADER_FIELDS_TOO_LARGE: StatusCode = StatusCode(431);
    /// 500 Internal Server Error.
    pub const INTERNAL_SERVER_ERROR: StatusCode = StatusCode(500);
    /// 501 Not Implemented.
    pub const NOT_IMPLEMENTED: StatusCode = StatusCode(501);
    /// 503 Service Unavailable.
    pub const SERVICE_UNAVAILABLE: StatusCode = StatusCode(503);
    /// 505 HTTP Version Not Supported.
    pub const HTTP_VERSION_NOT_SUPPORTED: StatusCode = StatusCode(505);

    /// A status from its number; `None` outside 100–999.
    pub const fn from_u16(code: u16) -> Option<StatusCode> {
        if code >= 100 && code <= 999 {
            Some(StatusCode(code))
        } else {
            None
        }
    }

    /// The number.
    pub const fn as_u16(self) -> u16 {
        self.0
    }

    /// Whether a response with this status never has a body (1xx, 204, 304).
    pub const fn is_bodiless(self) -> bool {
        self.0 < 200 || self.0 == 204 || self.0 == 304
    }

    /// The reason phrase of the standard codes ("" for others).
    pub const fn reason(self) -> &'static str {
        match self.0 {
            100 => "Continue",
            101 => "Switching Protocols",
            200 => "OK",
            201 => "Created",
            202 => "Accepted",
            204 => "No Content",
            206 => "Partial Content",
            301 => "Moved Permanently",
            302 => "Found",
            303 => "See Other",
            304 => "Not Modified",
            307 => "Temporary Redirect",
            308 => "Permanent Redirect",
            400 => "Bad Request",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "Not Found",
            405 => "Method Not Allowed",
            406 => "Not Acceptable",
            408 => "Request Timeout",
            409 => "Conflict",
            410 => "Gone",
            411 => "Length Required",
            412 => "Precondition Failed",
            413 => "Content Too Large",
            414 => "URI Too Long",
            415 => "Unsupported Media Type",
            416 => "Range Not Satisfiable",
            417 => "Expectation Failed",
            429 => "Too Many Requests",
            431 => "Request Header Fields Too Large",
            500 => "Internal Server Error",
            501 => "Not Implemented",
            502 => "Bad Gateway",
            503 => "Service Unavailable",
            504 => "Gateway Timeout",
            505 => "HTTP Version Not Supported",
            _ => "",
        }
    }

    /// The whole status line of the most common codes, ready to write.
    pub(crate) const fn status_line(self) -> Option<&'static [u8]> {
        Some(match self.0 {
            200 => b"HTTP/1.1 200 OK\r\n",
            204 => b"HTTP/1.1 204 No Content\r\n",
            206 => b"HTTP/1.1 206 Partial Content\r\n",
            304 => b"HTTP/1.1 304 Not Modified\r\n",
            400 => b"HTTP/1.1 400 Bad Request\r\n",
            404 => b"HTTP/1.1 404 Not Found\r\n",
            405 => b"HTTP/1.1 405 Method Not Allowed\r\n",
            500 => b"HTTP/1.1 500 Internal Server Error\r\n",
            _ => return None,
        })
    }
}

impl std::fmt::Display for StatusCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.0, self.reason())
    }
}

impl From<StatusCode> for u16 {
    fn from(s: StatusCode) -> u16 {
        s.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_match_reasons() {
        for code in [200, 204, 206, 304, 400, 404, 405, 500] {
            let s = StatusCode::from_u16(code).unwrap();
            let want = format!("HTTP/1.1 {} {}\r\n", code, s.reason());
            assert_eq!(s.status_line().unwrap(), want.as_bytes());
        }
        assert!(StatusCode::from_u16(99).is_none());
        assert!(StatusCode::from_u16(1000).is_none());
    }
}
