//! How a record lies on disk: a 16-byte header, then the payload.
//!
//! ```text
//! offset 0   u32 LE  CRC32C of bytes 4.. of the header and the payload
//! offset 4   u32 LE  payload length
//! offset 8   u64 LE  LSN (1, 2, 3, ... across the whole log)
//! offset 16  payload
//! ```
//!
//! The checksum covers the length and the LSN as well as the payload, so a
//! header torn from its payload, a payload cut short, a flipped bit, and
//! bytes left over from an earlier record at that place (whose LSN is not
//! the one expected there) are each told apart from a whole record. A
//! segment is zero-filled when it is made, and a zeroed header never
//! checks (its CRC field is 0, the CRC32C of its other twelve zero bytes is
//! not), so the first header that does not check ends the records.

/// Bytes before the payload.
pub const HEADER: usize = 16;

/// The checksum of a record: CRC32C over the length, the LSN and the payload.
fn checksum(len: u32, lsn: u64, payload: &[u8]) -> u32 {
    let mut head = [0u8; 12];
    head[..4].copy_from_slice(&len.to_le_bytes());
    head[4..].copy_from_slice(&lsn.to_le_bytes());
    crc32c::crc32c_append(crc32c::crc32c(&head), payload)
}

/// Append the framed record to `out`.
pub fn encode(lsn: u64, payload: &[u8], out: &mut Vec<u8>) {
    let len = u32::try_from(payload.len()).expect("record length checked by the caller");
    out.extend_from_slice(&checksum(len, lsn, payload).to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&lsn.to_le_bytes());
    out.extend_from_slice(payload);
}

/// Write the framed record into `out` (which must hold `HEADER + payload.len()` bytes).
pub fn encode_into(lsn: u64, payload: &[u8], out: &mut [u8]) {
    let len = u32::try_from(payload.len()).expect("record length checked by the caller");
    out[..4].copy_from_slice(&checksum(len, lsn, payload).to_le_bytes());
    out[4..8].copy_from_slice(&len.to_le_bytes());
    out[8..16].copy_from_slice(&lsn.to_le_bytes());
    out[HEADER..HEADER + payload.len()].copy_from_slice(payload);
}

/// What lies at a place where record `want` should start.
#[derive(Debug, PartialEq, Eq)]
pub enum Found<'a> {
    /// A whole record with the expected LSN: its payload and framed length.
    Record(&'a [u8], usize),
    /// Not a whole record of that LSN: the end of the records (or damage).
    End,
    /// The header says the payload runs past `buf`: read more and look again.
    NeedMore(usize),
}

/// Parse the record at the start of `buf`, which must be record `want`.
pub fn decode(buf: &[u8], want: u64) -> Found<'_> {
    if buf.len() < HEADER {
        return Found::NeedMore(HEADER);
    }
    let crc = u32::from_le_bytes(buf[..4].try_into().expect("4 bytes"));
    let len = u32::from_le_bytes(buf[4..8].try_into().expect("4 bytes"));
    let lsn = u64::from_le_bytes(buf[8..16].try_into().expect("8 bytes"));
    if lsn != want {
        return Found::End;
    }
    let total = HEADER + len as usize;
    if buf.len() < total {
        return Found::NeedMore(total);
    }
    let payload = &buf[HEADER..total];
    if checksum(len, lsn, payload) != crc {
        return Found::End;
    }
    Found::Record(payload, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let mut b = Vec::new();
        encode(7, b"hello", &mut b);
        encode(8, b"", &mut b);
        assert_eq!(decode(&b, 7), Found::Record(&b"hello"[..], 21));
        assert_eq!(decode(&b[21..], 8), Found::Record(&b""[..], 16));
        // Wrong LSN, cut payload, flipped bit, zeros.
        assert_eq!(decode(&b, 8), Found::End);
        assert_eq!(decode(&b[..20], 7), Found::NeedMore(21));
        let mut bad = b.clone();
        bad[18] ^= 1;
        assert_eq!(decode(&bad, 7), Found::End);
        assert_eq!(decode(&[0u8; 64], 0), Found::End);
        let mut enc = vec![0u8; 21];
        encode_into(7, b"hello", &mut enc);
        assert_eq!(enc, b[..21]);
    }
}
