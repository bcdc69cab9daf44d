//! A complete request: its [`Head`] and its body bytes.

use crate::decode::RequestDecoder;
use crate::{Error, Head, Limits, Parsed};

/// A request as handed to a handler: the head (method, target, version,
/// header fields; see [`Head`], which `Request` derefs to) and the whole
/// body, already read and de-chunked.
#[derive(Debug)]
pub struct Request {
    head: Head,
    body: Vec<u8>,
    /// Path parameters set by the [`Router`](crate::Router), decoded.
    params: Vec<(String, String)>,
}

impl Request {
    pub(crate) fn new(head: Head, body: Vec<u8>) -> Request {
        Request {
            head,
            body,
            params: Vec::new(),
        }
    }

    /// The value of path parameter `name` of the route that matched
    /// (`/users/{id}` gives `param("id")`), percent-decoded; `None` if the
    /// route has no such parameter.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn set_params(&mut self, params: Vec<(String, String)>) {
        self.params = params;
    }

    /// Parse one whole request (head and body) from the start of `bytes`:
    /// the sans-I/O entry point for tests and tools. Returns the request and
    /// how many bytes it took, or `Partial` if `bytes` ends inside it.
    pub fn parse(bytes: &[u8], limits: &Limits) -> Result<Parsed<(Request, usize)>, Error> {
        let mut d = RequestDecoder::new(limits.clone());
        let mut used = 0;
        loop {
            let (n, r) = d.decode(&bytes[used..])?;
            used += n;
            match r {
                Parsed::Complete(req) => return Ok(Parsed::Complete((req, used))),
                Parsed::Partial if n == 0 || used == bytes.len() => return Ok(Parsed::Partial),
                Parsed::Partial => {}
            }
        }
    }

    /// The head.
    pub fn head(&self) -> &Head {
        &self.head
    }

    /// The body (empty when there was none).
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// Take the body out.
    pub fn into_body(self) -> Vec<u8> {
        self.body
    }

    /// Split into head and body.
    pub fn into_parts(self) -> (Head, Vec<u8>) {
        (self.head, self.body)
    }
}

impl std::ops::Deref for Request {
    type Target = Head;
    fn deref(&self) -> &Head {
        &self.head
    }
}
