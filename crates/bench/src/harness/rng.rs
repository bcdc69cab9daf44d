//! Deterministic randomness for every study and the torture: one seeded
//! generator (offsets, pauses, chaos decisions), and the byte stream every
//! torture message is made of, which the verifier regenerates instead of
//! keeping copies. Not for anything that needs real randomness.

/// SplitMix64: small, fast, good enough for choosing what to do next.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// A generator for `(seed, a, b)`: the same triple gives the same stream.
    pub fn for_stream(seed: u64, a: u64, b: u64) -> Rng {
        let mut r = Rng(seed ^ a.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let x = r.next_u64() ^ b.wrapping_mul(0xD1B5_4A32_D192_ED03);
        Rng(x)
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi` (`lo` when `hi <= lo`).
    #[inline]
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A size in `1..=max`, log-uniform (as many 1–10 byte messages as
    /// 10–100 KiB ones), with the two ends drawn a little more often.
    pub fn size(&mut self, max: usize) -> usize {
        let r = self.unit();
        if r < 0.03 {
            return 1;
        }
        if r < 0.06 {
            return max;
        }
        let v = ((max as f64).ln() * self.unit()).exp() as usize;
        v.clamp(1, max)
    }
}

/// The bytes of message `seq` of connection `conn`, produced in order: the
/// sender fills its buffer from one, the verifier compares what comes back
/// against another, chunk by chunk, at whatever boundaries the network chose.
#[derive(Debug, Clone)]
pub struct ByteGen {
    x: u64,
    word: [u8; 8],
    pos: usize,
}

impl ByteGen {
    /// The stream of message `seq` on connection `conn`.
    pub fn new(conn: u64, seq: u64) -> ByteGen {
        let mut r = Rng::for_stream(0x05EE_D0FB_17E5, conn, seq);
        ByteGen {
            x: r.next_u64() | 1,
            word: [0; 8],
            pos: 8,
        }
    }

    /// Fill `out` with the next bytes.
    pub fn fill(&mut self, out: &mut [u8]) {
        let mut i = 0;
        while i < out.len() {
            if self.pos == 8 {
                self.x ^= self.x << 13;
                self.x ^= self.x >> 7;
                self.x ^= self.x << 17;
                self.word = self.x.to_le_bytes();
                self.pos = 0;
            }
            let n = (8 - self.pos).min(out.len() - i);
            out[i..i + n].copy_from_slice(&self.word[self.pos..self.pos + n]);
            self.pos += n;
            i += n;
        }
    }

    /// The whole message of `len` bytes.
    pub fn message(conn: u64, seq: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        ByteGen::new(conn, seq).fill(&mut v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_generation_matches_whole() {
        let whole = ByteGen::message(7, 3, 1000);
        let mut g = ByteGen::new(7, 3);
        let mut got = Vec::new();
        for n in [1, 7, 8, 9, 13, 100, 862] {
            let mut b = vec![0u8; n];
            g.fill(&mut b);
            got.extend_from_slice(&b);
        }
        assert_eq!(got, whole);
        assert_ne!(ByteGen::message(7, 4, 64), ByteGen::message(7, 3, 64));
    }

    #[test]
    fn sizes_in_range() {
        let mut r = Rng::for_stream(1, 2, 3);
        for _ in 0..10_000 {
            let s = r.size(256 * 1024);
            assert!((1..=256 * 1024).contains(&s));
        }
    }

    #[test]
    fn rng_range_stays_inside() {
        let mut r = Rng::new(1);
        for _ in 0..10_000 {
            let v = r.range(10, 20);
            assert!((10..=20).contains(&v));
        }
        assert_eq!(r.range(5, 5), 5);
        assert_eq!(r.range(9, 3), 9);
    }
}
