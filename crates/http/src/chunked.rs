//! The chunked transfer coding (RFC 9112 §7.1), as a pure state machine.
//!
//! [`ChunkedDecoder::decode`] takes whatever bytes have arrived, appends the
//! body bytes they carry to `out`, and says how many input bytes it used. It
//! stops right after the last CRLF of the chunked body, so bytes of a
//! pipelined next request are left for the caller. Input may be split at any
//! byte: state lives in the decoder, never in the caller's buffer.
//!
//! Strict on framing, because a lenient chunk parser in front of a strict one
//! (or the reverse) is a request-smuggling vector:
//! - a chunk size is 1 or more hex digits, and must fit in 64 bits;
//! - after the size, only optional whitespace followed by `;` (an
//!   extension, which is skipped) or CRLF;
//! - every line ends in CRLF: a bare LF, or a CR not followed by LF, is an
//!   error; so is anything but CRLF right after a chunk's data;
//! - control bytes (other than HTAB) in extensions and trailers are errors;
//! - a chunk-size line, with its extensions, is at most [`MAX_LINE`] bytes,
//!   and all trailer fields together at most the configured trailer budget.
//!
//! Trailer fields are read and discarded.

use crate::Error;

/// Longest chunk-size line (size, extensions) accepted.
pub const MAX_LINE: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading hex digits of a chunk size.
    Size,
    /// Whitespace after the size; only `;` may follow.
    SizeWs,
    /// Inside chunk extensions, up to CR.
    Ext,
    /// CR of the size line seen; LF must follow.
    SizeLf,
    /// Inside a chunk's data.
    Data,
    /// After a chunk's data: CR must follow.
    DataCr,
    /// After a chunk's data and CR: LF must follow.
    DataLf,
    /// At the start of a trailer line (or the final CRLF).
    TrailerStart,
    /// Inside a trailer field line.
    Trailer,
    /// CR of a trailer line seen; LF must follow.
    TrailerLf,
    /// CR of the final empty line seen; LF must follow.
    FinalLf,
    /// The body is complete.
    Done,
}

/// Decoder state for one chunked body.
#[derive(Debug, Clone)]
pub struct ChunkedDecoder {
    state: State,
    /// Size of the chunk being read (while in `Size`) or what is left of it.
    remaining: u64,
    /// Digits (or line bytes) of the current size line.
    line: usize,
    /// Whether the current size line has a digit.
    digits: bool,
    /// Decoded body bytes so far.
    body: u64,
    max_body: u64,
    /// Trailer bytes so far, and the budget.
    trailer: usize,
    max_trailer: usize,
}

impl ChunkedDecoder {
    /// A decoder that refuses bodies over `max_body` bytes (413) and trailers
    /// over `max_trailer` bytes (431).
    pub fn new(max_body: u64, max_trailer: usize) -> ChunkedDecoder {
        ChunkedDecoder {
            state: State::Size,
            remaining: 0,
            line: 0,
            digits: false,
            body: 0,
            max_body,
            trailer: 0,
            max_trailer,
        }
    }

    /// Whether the whole body (and its trailers) has been read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decoded body bytes so far.
    pub fn body_len(&self) -> u64 {
        self.body
    }

    /// Decode from `input`, appending body bytes to `out`. Returns the input
    /// bytes used: all of them unless the body ended inside `input`. Errors
    /// are final: the stream cannot be resynchronised.
    pub fn decode(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, Error> {
        let mut i = 0;
        while i < input.len() {
            if self.state == State::Data {
                let take =
                    (input.len() - i).min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
                out.extend_from_slice(&input[i..i + take]);
                i += take;
                self.remaining -= take as u64;
                if self.remaining == 0 {
                    self.state = State::DataCr;
                }
                continue;
            }
            if self.state == State::Done {
                return Ok(i);
            }
            let b = input[i];
            i += 1;
            self.step(b)?;
        }
        Ok(i)
    }

    fn step(&mut self, b: u8) -> Result<(), Error> {
        const BAD_SIZE: Error = Error::BadRequest("invalid chunk size line");
        const NO_CRLF: Error = Error::BadRequest("chunk framing: expected CRLF");
        match self.state {
            State::Size | State::SizeWs | State::Ext => {
                self.line += 1;
                if self.line > MAX_LINE {
                    return Err(Error::BadRequest("chunk size line too long"));
                }
            }
            _ => {}
        }
        match self.state {
            State::Size => match b {
                b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                    let d = (b as char).to_digit(16).unwrap_or(0);
                    if self.remaining > (u64::MAX >> 4) {
                        return Err(Error::BadRequest("chunk size overflows"));
                    }
                    self.remaining = (self.remaining << 4) | u64::from(d);
                    self.digits = true;
                }
                b';' if self.digits => self.state = State::Ext,
                b' ' | b'\t' if self.digits => self.state = State::SizeWs,
                b'\r' if self.digits => self.state = State::SizeLf,
                _ => return Err(BAD_SIZE),
            },
            State::SizeWs => match b {
                b' ' | b'\t' => {}
                b';' => self.state = State::Ext,
                _ => return Err(BAD_SIZE),
            },
            State::Ext => match b {
                b'\r' => self.state = State::SizeLf,
                b'\t' => {}
                0..=0x1f | 0x7f => {
                    return Err(Error::BadRequest("control byte in chunk extension"))
                }
                _ => {}
            },
            State::SizeLf => {
                if b != b'\n' {
                    return Err(NO_CRLF);
                }
                self.line = 0;
                self.digits = false;
                if self.remaining == 0 {
                    self.state = State::TrailerStart;
                } else {
                    self.body = self.body.saturating_add(self.remaining);
                    if self.body > self.max_body {
                        return Err(Error::BodyTooLarge);
                    }
                    self.state = State::Data;
                }
            }
            State::Data => unreachable!("data is copied in bulk by decode"),
            State::DataCr => {
                if b != b'\r' {
                    return Err(NO_CRLF);
                }
                self.state = State::DataLf;
            }
            State::DataLf => {
                if b != b'\n' {
                    return Err(NO_CRLF);
                }
                self.state = State::Size;
            }
            State::TrailerStart => match b {
                b'\r' => self.state = State::FinalLf,
                b' ' | b'\t' => return Err(Error::BadRequest("obs-fold in a trailer")),
                _ => {
                    self.state = State::Trailer;
                    self.trailer_byte(b)?;
                }
            },
            State::Trailer => match b {
                b'\r' => self.state = State::TrailerLf,
                _ => self.trailer_byte(b)?,
            },
            State::TrailerLf => {
                if b != b'\n' {
                    return Err(NO_CRLF);
                }
                self.state = State::TrailerStart;
            }
            State::FinalLf => {
                if b != b'\n' {
                    return Err(NO_CRLF);
                }
                self.state = State::Done;
            }
            State::Done => unreachable!("decode stops at Done"),
        }
        Ok(())
    }

    fn trailer_byte(&mut self, b: u8) -> Result<(), Error> {
        if matches!(b, 0..=0x08 | 0x0a..=0x1f | 0x7f) {
            return Err(Error::BadRequest("control byte in a trailer field"));
        }
        self.trailer += 1;
        if self.trailer > self.max_trailer {
            return Err(Error::HeadersTooLarge);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(input: &[u8]) -> Result<(usize, Vec<u8>, bool), Error> {
        let mut d = ChunkedDecoder::new(1 << 20, 1024);
        let mut out = Vec::new();
        let n = d.decode(input, &mut out)?;
        Ok((n, out, d.is_done()))
    }

    /// Every split point, fed byte by byte, gives the same result as one call.
    fn decode_bytewise(input: &[u8]) -> Result<(usize, Vec<u8>, bool), Error> {
        let mut d = ChunkedDecoder::new(1 << 20, 1024);
        let mut out = Vec::new();
        let mut used = 0;
        for i in 0..input.len() {
            used += d.decode(&input[i..i + 1], &mut out)?;
            if d.is_done() {
                break;
            }
        }
        Ok((used, out, d.is_done()))
    }

    #[test]
    fn valid_bodies() {
        let cases: &[(&[u8], &[u8], usize)] = &[
            (b"0\r\n\r\n", b"", 5),
            (b"5\r\nhello\r\n0\r\n\r\nGET", b"hello", 15),
            (b"5;ext=1\r\nhello\r\n0\r\n\r\n", b"hello", 21),
            (b"5 ;ext\r\nhello\r\n0\r\n\r\n", b"hello", 20),
            (b"A\r\n0123456789\r\n0\r\n\r\n", b"0123456789", 20),
            (b"a\r\n0123456789\r\n0\r\n\r\n", b"0123456789", 20),
            (b"005\r\nhello\r\n0\r\nX-T: 1\r\n\r\n", b"hello", 25),
            (b"2\r\nhe\r\n3\r\nllo\r\n0\r\n\r\n", b"hello", 20),
        ];
        for (input, body, used) in cases {
            let (n, out, done) = decode_all(input).unwrap();
            assert!(done, "{:?}", String::from_utf8_lossy(input));
            assert_eq!((&out[..], n), (*body, *used));
            assert_eq!(decode_bytewise(input).unwrap(), (n, out, true));
        }
    }

    #[test]
    fn partial_input_is_not_done() {
        let (n, out, done) = decode_all(b"5\r\nhel").unwrap();
        assert_eq!((n, &out[..], done), (6, &b"hel"[..], false));
    }

    #[test]
    fn invalid_framing() {
        let cases: &[&[u8]] = &[
            b"\r\n",                      // no size
            b"x\r\n",                     // not hex
            b"0x5\r\nhello\r\n0\r\n\r\n", // 0x prefix
            b"-5\r\n",                    // sign
            b"5\nhello\r\n0\r\n\r\n",     // bare LF after size
            b"5\r\nhello\n0\r\n\r\n",     // bare LF after data
            b"5\r\nhelloXX0\r\n\r\n",     // data longer than size
            b"5\rhello",                  // CR without LF
            b"0\r\n\n",                   // bare LF at the end
            b"0\r\nX: 1\n\r\n",           // bare LF in a trailer
            b"0\r\n X: 1\r\n\r\n",        // obs-fold in a trailer
            b"5 5\r\n",                   // space inside the size
            b"5\x00\r\n",                 // NUL
            b"5;a\x00b\r\n",              // NUL in an extension
            b"fffffffffffffffff\r\n",     // 17 digits: overflow
            b" 5\r\n",                    // leading space
        ];
        for input in cases {
            assert!(
                decode_all(input).is_err(),
                "accepted {:?}",
                String::from_utf8_lossy(input)
            );
            assert!(decode_bytewise(input).is_err());
        }
    }

    #[test]
    fn limits() {
        let mut d = ChunkedDecoder::new(4, 1024);
        assert_eq!(
            d.decode(b"5\r\nhello\r\n", &mut Vec::new()),
            Err(Error::BodyTooLarge)
        );
        let mut d = ChunkedDecoder::new(100, 4);
        assert_eq!(
            d.decode(b"0\r\nX-Long: 1\r\n\r\n", &mut Vec::new()),
            Err(Error::HeadersTooLarge)
        );
        let mut line = b"1;".to_vec();
        line.resize(MAX_LINE + 10, b'a');
        assert!(ChunkedDecoder::new(100, 100)
            .decode(&line, &mut Vec::new())
            .is_err());
        // The largest size that fits is refused by the body limit, not overflow.
        let mut d = ChunkedDecoder::new(u64::MAX, 100);
        assert!(d.decode(b"ffffffffffffffff\r\n", &mut Vec::new()).is_ok());
    }
}
