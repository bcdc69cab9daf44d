//! Request methods.

/// A request method. Methods outside the common set are [`Method::Other`];
/// [`crate::Head::method_str`] gives their name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// GET.
    Get,
    /// HEAD: like GET, but the server sends no body.
    Head,
    /// POST.
    Post,
    /// PUT.
    Put,
    /// DELETE.
    Delete,
    /// OPTIONS.
    Options,
    /// PATCH.
    Patch,
    /// CONNECT.
    Connect,
    /// TRACE.
    Trace,
    /// Any other token.
    Other,
}

impl Method {
    /// Classify a method token (case-sensitive, as RFC 9110 says).
    pub fn from_bytes(m: &[u8]) -> Method {
        match m {
            b"GET" => Method::Get,
            b"HEAD" => Method::Head,
            b"POST" => Method::Post,
            b"PUT" => Method::Put,
            b"DELETE" => Method::Delete,
            b"OPTIONS" => Method::Options,
            b"PATCH" => Method::Patch,
            b"CONNECT" => Method::Connect,
            b"TRACE" => Method::Trace,
            _ => Method::Other,
        }
    }

    /// The token ("OTHER" for [`Method::Other`]).
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Options => "OPTIONS",
            Method::Patch => "PATCH",
            Method::Connect => "CONNECT",
            Method::Trace => "TRACE",
            Method::Other => "OTHER",
        }
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The protocol version of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Version {
    /// HTTP/1.0: connections close after a response unless the request
    /// says `Connection: keep-alive`.
    Http10,
    /// HTTP/1.1: connections stay open unless `Connection: close`.
    Http11,
}

impl Version {
    /// "HTTP/1.0" or "HTTP/1.1".
    pub fn as_str(self) -> &'static str {
        match self {
            Version::Http10 => "HTTP/1.0",
            Version::Http11 => "HTTP/1.1",
        }
    }
}
