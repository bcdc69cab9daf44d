//! Whole requests from a byte stream: head, then body by its framing.
//!
//! [`RequestDecoder`] is the sans-I/O request reader the server drives. The
//! caller keeps the bytes not yet consumed and calls
//! [`RequestDecoder::decode`] with them (plus whatever arrived since); each
//! call consumes a prefix and may yield one complete [`Request`]. Pipelined
//! requests come out one per call, in order.
//!
//! # Contract
//! - Bytes a call did not consume must be passed again, at the start of the
//!   next call's input (the decoder remembers how far it scanned them for
//!   the end of a head, so a head trickling in is not re-parsed per byte).
//! - An error is final: framing is lost, so the connection must close after
//!   the error's response.

use crate::chunked::ChunkedDecoder;
use crate::head::Framing;
use crate::parse::parse_head;
use crate::{Error, Head, Limits, Parsed, Request};

/// Body bytes reserved up front for a `Content-Length` body (more as it
/// comes): a head alone makes the server reserve little.
const BODY_PREALLOC: u64 = 4 * 1024;

#[derive(Debug)]
enum State {
    Head,
    Body {
        head: Head,
        body: Vec<u8>,
        kind: BodyKind,
        continue_sent: bool,
    },
}

#[derive(Debug)]
enum BodyKind {
    Length(u64),
    Chunked(ChunkedDecoder),
}

/// Reads requests out of a byte stream. See the module docs.
#[derive(Debug)]
pub struct RequestDecoder {
    limits: Limits,
    state: State,
    /// Bytes at the start of the pending input already known not to hold
    /// the end of a head.
    scanned: usize,
    /// Whether those bytes hold the end of the request line.
    line_seen: bool,
}

impl RequestDecoder {
    /// A decoder enforcing `limits`.
    pub fn new(limits: Limits) -> RequestDecoder {
        RequestDecoder {
            limits,
            state: State::Head,
            scanned: 0,
            line_seen: false,
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Whether a request has started (its head is complete and its body is
    /// being read). The caller knows separately whether it holds unconsumed
    /// bytes of a head.
    pub fn in_body(&self) -> bool {
        matches!(self.state, State::Body { .. })
    }

    /// Bytes of the body being read received so far (what a client had
    /// to send to make the server hold them).
    pub fn body_held(&self) -> usize {
        match &self.state {
            State::Body { body, .. } => body.len(),
            State::Head => 0,
        }
    }

    /// Memory taken by the request being read once its head is complete:
    /// the head's storage (its capacity, which a recycled one keeps from a
    /// larger head) and the body buffer's capacity, which is more than
    /// [`body_held`](Self::body_held) as the buffer grows by doubling, and
    /// at most 4 KiB for a body only announced. 0 while no head is
    /// complete.
    pub fn allocated(&self) -> usize {
        match &self.state {
            State::Body { head, body, .. } => head.allocated() + body.capacity(),
            State::Head => 0,
        }
    }

    /// Whether to send `100 Continue` now: true once per request that asked
    /// for it, while its body is incomplete. Call it when `decode` returned
    /// `Partial`, before reading more.
    pub fn take_continue(&mut self) -> bool {
        match &mut self.state {
            State::Body {
                head,
                continue_sent,
                ..
            } if head.expect_continue() && !*continue_sent => {
                *continue_sent = true;
                true
            }
            _ => false,
        }
    }

    /// Consume a prefix of `input`; returns how many bytes and, if a request
    /// completed, the request.
    pub fn decode(&mut self, input: &[u8]) -> Result<(usize, Parsed<Request>), Error> {
        let mut used = 0;
        if let State::Head = self.state {
            match self.decode_head(input)? {
                None => return Ok((0, Parsed::Partial)),
                Some(head) => {
                    used = head.len();
                    let kind = match head.framing() {
                        Framing::None => {
                            return Ok((used, Parsed::Complete(Request::new(head, Vec::new()))));
                        }
                        Framing::Length(n) => BodyKind::Length(n),
                        Framing::Chunked => BodyKind::Chunked(ChunkedDecoder::new(
                            self.limits.max_body_bytes,
                            self.limits.max_head_bytes,
                        )),
                    };
                    let cap = match kind {
                        BodyKind::Length(n) => n.min(BODY_PREALLOC) as usize,
                        BodyKind::Chunked(_) => 0,
                    };
                    self.state = State::Body {
                        head,
                        body: Vec::with_capacity(cap),
                        kind,
                        continue_sent: false,
                    };
                }
            }
        }
        let State::Body { body, kind, .. } = &mut self.state else {
            unreachable!("head state handled above")
        };
        let rest = &input[used..];
        let done = match kind {
            BodyKind::Length(remaining) => {
                let take = rest
                    .len()
                    .min(usize::try_from(*remaining).unwrap_or(usize::MAX));
                body.extend_from_slice(&rest[..take]);
                used += take;
                *remaining -= take as u64;
                *remaining == 0
            }
            BodyKind::Chunked(d) => {
                used += d.decode(rest, body)?;
                d.is_done()
            }
        };
        if !done {
            return Ok((used, Parsed::Partial));
        }
        let State::Body { head, body, .. } = std::mem::replace(&mut self.state, State::Head) else {
            unreachable!("in body state")
        };
        Ok((used, Parsed::Complete(Request::new(head, body))))
    }

    /// Parse a head if one is complete in `input`; cheap when it is not.
    fn decode_head(&mut self, input: &[u8]) -> Result<Option<Head>, Error> {
        if input.is_empty() {
            self.scanned = 0;
            self.line_seen = false;
            return Ok(None);
        }
        // Parse when the input is new (a garbage first line is refused at
        // once), when the request line or the whole head may have just
        // ended, or when the input is over a limit; otherwise wait without
        // parsing again, so a head trickling in costs linear time.
        let from = self.scanned.saturating_sub(3).min(input.len());
        let new = &input[from..];
        let mut parse =
            self.scanned == 0 || input.len() >= self.limits.max_head_bytes || has_head_end(new);
        if !self.line_seen {
            if new.contains(&b'\n') {
                self.line_seen = true;
                parse = true;
            } else if input.len() > self.limits.max_uri_len {
                parse = true;
            }
        }
        if !parse {
            self.scanned = input.len();
            return Ok(None);
        }
        match parse_head(input, &self.limits)? {
            Parsed::Partial => {
                self.scanned = input.len();
                Ok(None)
            }
            Parsed::Complete(head) => {
                self.scanned = 0;
                self.line_seen = false;
                Ok(Some(head))
            }
        }
    }
}

/// Whether `b` holds an empty line after a line end (`\n\n` or `\n\r\n`).
fn has_head_end(b: &[u8]) -> bool {
    b.windows(2).enumerate().any(|(i, w)| {
        w[0] == b'\n' && (w[1] == b'\n' || (w[1] == b'\r' && b.get(i + 2) == Some(&b'\n')))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_end() {
        assert!(has_head_end(b"a\r\n\r\n"));
        assert!(has_head_end(b"a\n\n"));
        assert!(!has_head_end(b"a\r\nb\r\n"));
        assert!(!has_head_end(b"\n\r"));
    }

    #[test]
    fn trickled_head_is_found() {
        let req = b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n";
        let mut d = RequestDecoder::new(Limits::default());
        let mut pending = Vec::new();
        let mut got = None;
        for &b in req.iter() {
            pending.push(b);
            let (n, r) = d.decode(&pending).unwrap();
            pending.drain(..n);
            if let Parsed::Complete(r) = r {
                got = Some(r);
            }
        }
        assert_eq!(got.unwrap().path(), "/x");
        assert!(pending.is_empty());
    }
}
