//! What the connections of one load share (counters, the measured window,
//! the histogram), and the bytes each message carries.

use std::cell::{Cell, RefCell};

use hdrhistogram::Histogram;

use crate::harness::open_loop::Window;

/// The counters and histogram of one load, shared by its connections.
pub(super) struct Shared {
    pub(super) phase: Cell<u8>,
    /// The measured window (open loop).
    pub(super) win: Window,
    pub(super) requests: Cell<u64>,
    pub(super) responses: Cell<u64>,
    pub(super) connected: Cell<usize>,
    pub(super) failed: Cell<u64>,
    pub(super) mismatches: Cell<u64>,
    /// Open loop: counted messages unanswered, and never sent, at the end.
    pub(super) unanswered: Cell<u64>,
    pub(super) unsent: Cell<u64>,
    /// Open loop: the most messages in flight on one connection.
    pub(super) most_in_flight: Cell<usize>,
    pub(super) first_error: RefCell<Option<String>>,
    pub(super) hist: RefCell<Histogram<u64>>,
    /// Responses of each connection in the window.
    pub(super) per_conn: RefCell<Vec<u64>>,
}

/// Fill `buf` with message `seq` of connection `id`: bytes a reply must
/// match exactly.
pub(super) fn fill(buf: &mut [u8], id: usize, seq: u64) {
    let mut x =
        (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seq.wrapping_mul(0xD1B5_4A32_D192_ED03);
    for chunk in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
}
