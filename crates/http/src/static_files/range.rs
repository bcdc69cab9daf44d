//! `Range: bytes=…` (RFC 9110 §14.1–14.2), pure.
//!
//! One satisfiable range gives 206 with `Content-Range: bytes a-b/len`. No
//! satisfiable range gives 416 with `Content-Range: bytes */len`. Several
//! ranges are answered with the whole representation (200), which the RFC
//! allows ("a server MAY ignore the Range header field") and which spares a
//! multipart body; so is a header we cannot parse or a unit other than
//! `bytes`.

/// A byte range, both ends inclusive, within a representation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    /// First byte offset.
    pub start: u64,
    /// Last byte offset (inclusive).
    pub end: u64,
}

impl ByteRange {
    /// Number of bytes in the range.
    pub fn len(&self) -> u64 {
        self.end - self.start + 1
    }

    /// Never true: a range holds at least one byte.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The `Content-Range` value for a 206: `bytes a-b/len`.
    pub fn content_range(&self, total: u64) -> String {
        format!("bytes {}-{}/{}", self.start, self.end, total)
    }
}

/// What a `Range` header asks of a representation of a given length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeAnswer {
    /// Serve the whole thing (no header, ignored, malformed or several ranges).
    Full,
    /// Serve one part: 206.
    Partial(ByteRange),
    /// No range overlaps the representation: 416.
    Unsatisfiable,
}

/// The `Content-Range` value for a 416: `bytes */len`.
pub fn unsatisfied_range(total: u64) -> String {
    format!("bytes */{total}")
}

/// At most this many range specs are looked at; more is treated as malformed.
const MAX_SPECS: usize = 64;

/// Evaluate a `Range` header value against a representation of `len` bytes.
pub fn evaluate(header: &str, len: u64) -> RangeAnswer {
    let Some((unit, set)) = header.trim().split_once('=') else {
        return RangeAnswer::Full;
    };
    if !unit.trim().eq_ignore_ascii_case("bytes") {
        return RangeAnswer::Full;
    }
    let mut satisfiable = None;
    let mut count = 0;
    let mut specs = 0;
    for spec in set.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        specs += 1;
        if specs > MAX_SPECS {
            return RangeAnswer::Full;
        }
        match parse_spec(spec, len) {
            Spec::Invalid => return RangeAnswer::Full,
            Spec::Unsatisfiable => {}
            Spec::Range(r) => {
                count += 1;
                satisfiable = Some(r);
            }
        }
    }
    match (specs, count, satisfiable) {
        (0, _, _) => RangeAnswer::Full,
        (_, 0, _) => RangeAnswer::Unsatisfiable,
        (_, 1, Some(r)) => RangeAnswer::Partial(r),
        _ => RangeAnswer::Full,
    }
}

enum Spec {
    Invalid,
    Unsatisfiable,
    Range(ByteRange),
}

/// Digits only (no sign, no space); saturates at `u64::MAX` on overflow,
/// which is harmless here (offsets beyond any file).
fn number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(s.bytes().fold(0u64, |n, d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    }))
}

fn parse_spec(spec: &str, len: u64) -> Spec {
    let Some((first, last)) = spec.split_once('-') else {
        return Spec::Invalid;
    };
    if first.is_empty() {
        // Suffix range `-n`: the last n bytes.
        let Some(n) = number(last) else {
            return Spec::Invalid;
        };
        if n == 0 || len == 0 {
            return Spec::Unsatisfiable;
        }
        return Spec::Range(ByteRange {
            start: len - n.min(len),
            end: len - 1,
        });
    }
    let Some(start) = number(first) else {
        return Spec::Invalid;
    };
    let end = if last.is_empty() {
        u64::MAX
    } else {
        match number(last) {
            Some(e) if e >= start => e,
            _ => return Spec::Invalid,
        }
    };
    if start >= len {
        return Spec::Unsatisfiable;
    }
    Spec::Range(ByteRange {
        start,
        end: end.min(len - 1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use RangeAnswer::*;

    fn part(start: u64, end: u64) -> RangeAnswer {
        Partial(ByteRange { start, end })
    }

    #[test]
    fn table() {
        let table: &[(&str, u64, RangeAnswer)] = &[
            ("bytes=0-9", 100, part(0, 9)),
            ("bytes=0-0", 100, part(0, 0)),
            ("bytes=10-", 100, part(10, 99)),
            ("bytes=-10", 100, part(90, 99)),
            ("bytes=-1000", 100, part(0, 99)),
            ("bytes=90-1000", 100, part(90, 99)),
            ("bytes=99-99", 100, part(99, 99)),
            ("Bytes = 5-6", 100, part(5, 6)),
            ("bytes= 5-6 ,", 100, part(5, 6)),
            ("bytes=0-18446744073709551616", 100, part(0, 99)),
            ("bytes=-18446744073709551616", 100, part(0, 99)),
            ("bytes=100-", 100, Unsatisfiable),
            ("bytes=100-200", 100, Unsatisfiable),
            ("bytes=-0", 100, Unsatisfiable),
            ("bytes=0-", 0, Unsatisfiable),
            ("bytes=-5", 0, Unsatisfiable),
            ("bytes=100-,200-", 100, Unsatisfiable),
            ("bytes=99999999999999999999-", 100, Unsatisfiable),
            ("bytes=200-300,5-6", 100, part(5, 6)),
            ("bytes=0-1,5-6", 100, Full),
            ("bytes=9-5", 100, Full),
            ("bytes=a-b", 100, Full),
            ("bytes=-", 100, Full),
            ("bytes=5", 100, Full),
            ("bytes=+5-6", 100, Full),
            ("bytes=5- 6", 100, Full),
            ("bytes=", 100, Full),
            ("items=0-5", 100, Full),
            ("0-5", 100, Full),
            ("", 100, Full),
        ];
        for &(h, len, want) in table {
            assert_eq!(evaluate(h, len), want, "{h:?} len {len}");
        }
    }

    #[test]
    fn too_many_specs_is_full() {
        let h = format!("bytes={}", vec!["0-0"; MAX_SPECS + 1].join(","));
        assert_eq!(evaluate(&h, 10), Full);
    }

    #[test]
    fn content_range_values() {
        let r = ByteRange { start: 0, end: 9 };
        assert_eq!(r.len(), 10);
        assert_eq!(r.content_range(100), "bytes 0-9/100");
        assert_eq!(unsatisfied_range(100), "bytes */100");
    }
}
