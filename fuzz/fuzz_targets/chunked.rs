//! The chunked decoder on arbitrary bytes split at arbitrary points: every
//! split must give the same body, the same consumed count, the same
//! completion and the same error as one call on the whole input; a decoded
//! body re-encoded as one chunk must decode to itself.
//!
//! Input: the first 4 bytes are piece sizes (each 1..=64, cycled), the
//! rest is the chunked stream.

#![no_main]

use libfuzzer_sys::fuzz_target;
use ringkit_http::{ChunkedDecoder, Error};

const MAX_BODY: u64 = 1 << 16;
const MAX_TRAILER: usize = 1024;

#[derive(Debug, PartialEq)]
struct Outcome {
    used: usize,
    body: Vec<u8>,
    done: bool,
    err: Option<Error>,
}

fn run(data: &[u8], sizes: &[usize]) -> Outcome {
    let mut d = ChunkedDecoder::new(MAX_BODY, MAX_TRAILER);
    let mut out = Outcome {
        used: 0,
        body: Vec::new(),
        done: false,
        err: None,
    };
    let mut off = 0;
    let mut k = 0;
    while off < data.len() && !d.is_done() {
        let n = sizes[k % sizes.len()].min(data.len() - off);
        k += 1;
        match d.decode(&data[off..off + n], &mut out.body) {
            Ok(used) => {
                assert!(used <= n);
                out.used += used;
                if used < n {
                    assert!(d.is_done(), "stopped early without finishing");
                }
                off += n;
            }
            Err(e) => {
                // After an error the stream is dead: what was consumed
                // before it does not matter (and differs by split).
                out.err = Some(e);
                out.used = 0;
                return out;
            }
        }
    }
    assert!(d.body_len() == out.body.len() as u64 || !d.is_done());
    assert!(out.body.len() as u64 <= MAX_BODY);
    out.done = d.is_done();
    out
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let (seed, data) = data.split_at(4);
    let sizes: Vec<usize> = seed.iter().map(|&b| usize::from(b % 64) + 1).collect();
    let whole = run(data, &[data.len().max(1)]);
    let split = run(data, &sizes);
    let bytewise = run(data, &[1]);
    assert_eq!(whole, split);
    assert_eq!(whole, bytewise);
    if whole.done {
        let mut again = format!("{:x}\r\n", whole.body.len()).into_bytes();
        if !whole.body.is_empty() {
            again.extend_from_slice(&whole.body);
            again.extend_from_slice(b"\r\n0\r\n");
        }
        again.extend_from_slice(b"\r\n");
        let re = run(&again, &[again.len()]);
        assert!(
            re.done && re.err.is_none() && re.body == whole.body,
            "{re:?}"
        );
    }
});
