//! The request parser on arbitrary bytes: `parse_head` must never panic,
//! and `RequestDecoder` (heads, Content-Length and chunked bodies,
//! pipelining) must decode the same requests whether the input arrives
//! whole or in pieces. (A refusal may come at a different point: in pieces,
//! a limit can trip before bytes that would have been refused for another
//! reason arrive, and a bad header is only seen when its head is parsed.
//! So: the requests of one run are a prefix of the other's; if neither
//! refuses, requests and leftover are equal; if both refuse, the requests
//! before the refusal are equal.)
//!
//! Input: the first byte picks the piece size (1..=256), the rest is the
//! byte stream.

#![no_main]

use libfuzzer_sys::fuzz_target;
use ringkit_http::{parse_head, Limits, Parsed, RequestDecoder};

/// What decoding a stream gave: the requests (method, target, version,
/// keep-alive, body), the refusal status if any, and the unconsumed bytes.
type Outcome = (
    Vec<(String, String, String, bool, Vec<u8>)>,
    Option<u16>,
    usize,
);

fn limits() -> Limits {
    Limits {
        max_head_bytes: 2048,
        max_headers: 16,
        max_uri_len: 512,
        max_body_bytes: 1 << 14,
    }
}

fn decode(data: &[u8], piece: usize) -> Outcome {
    let mut d = RequestDecoder::new(limits());
    let mut pending = Vec::new();
    let mut reqs = Vec::new();
    for chunk in data.chunks(piece) {
        pending.extend_from_slice(chunk);
        loop {
            match d.decode(&pending) {
                Ok((used, r)) => {
                    assert!(used <= pending.len());
                    pending.drain(..used);
                    match r {
                        Parsed::Complete(req) => {
                            assert!(req.body().len() as u64 <= limits().max_body_bytes);
                            assert!(req.target().contains(req.path()) || req.path() == "/");
                            let _ = (req.query(), req.headers().count(), req.expect_continue());
                            reqs.push((
                                req.method_str().to_string(),
                                req.target().to_string(),
                                req.version().as_str().to_string(),
                                req.keep_alive(),
                                req.body().to_vec(),
                            ));
                        }
                        Parsed::Partial => break,
                    }
                }
                Err(e) => return (reqs, Some(e.status().as_u16()), 0),
            }
        }
    }
    (reqs, None, pending.len())
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, data)) = data.split_first() else {
        return;
    };
    if let Ok(Parsed::Complete(h)) = parse_head(data, &limits()) {
        assert!(h.len() <= data.len());
        let _ = (
            h.method(),
            h.path(),
            h.query(),
            h.target(),
            h.headers().count(),
        );
    }
    let whole = decode(data, data.len().max(1));
    let pieces = decode(data, usize::from(first) + 1);
    let n = whole.0.len().min(pieces.0.len());
    assert_eq!(whole.0[..n], pieces.0[..n]);
    match (whole.1, pieces.1) {
        (None, None) => assert_eq!(whole, pieces),
        (Some(_), Some(_)) => assert_eq!(whole.0, pieces.0),
        _ => {}
    }
});
