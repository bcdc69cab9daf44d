//! [`FrameWalk`]: the DATA payload in the bytes an HTTP/2 server writes,
//! which is what the send timeout counts as a response's progress.

/// A walk over the HTTP/2 frames a server writes (its first byte starts a
/// frame: a server sends no preface), counting the payload bytes of DATA
/// frames: what a stalled response would not be sending.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FrameWalk {
    /// The frame header being read, and how much of it is here.
    head: [u8; 9],
    have: u8,
    /// Payload bytes of the current frame still to come.
    left: u32,
    /// The current frame is DATA.
    data: bool,
}

impl FrameWalk {
    /// Walk on over `buf`; the DATA payload bytes in it.
    pub(crate) fn data_in(&mut self, mut buf: &[u8]) -> u64 {
        let mut data = 0;
        while !buf.is_empty() {
            if self.left == 0 {
                let have = self.have as usize;
                let take = (9 - have).min(buf.len());
                self.head[have..have + take].copy_from_slice(&buf[..take]);
                self.have += take as u8;
                buf = &buf[take..];
                if self.have == 9 {
                    self.have = 0;
                    self.left = u32::from_be_bytes([0, self.head[0], self.head[1], self.head[2]]);
                    self.data = self.head[3] == 0;
                }
                continue;
            }
            let take = (self.left as usize).min(buf.len());
            if self.data {
                data += take as u64;
            }
            self.left -= take as u32;
            buf = &buf[take..];
        }
        data
    }
}

#[cfg(test)]
mod tests {
    use super::FrameWalk;

    fn frame(kind: u8, len: usize) -> Vec<u8> {
        let mut f = (len as u32).to_be_bytes()[1..].to_vec();
        f.extend([kind, 0, 0, 0, 0, 1]);
        f.extend(std::iter::repeat_n(7u8, len));
        f
    }

    #[test]
    fn counts_data_payload_only_however_the_writes_split() {
        // SETTINGS, PING, DATA 100, WINDOW_UPDATE, DATA 0, DATA 5000.
        let stream: Vec<u8> = [
            frame(4, 12),
            frame(6, 8),
            frame(0, 100),
            frame(8, 4),
            frame(0, 0),
            frame(0, 5000),
        ]
        .concat();
        for step in [1, 2, 5, 9, 10, 17, 4096, stream.len()] {
            let mut w = FrameWalk::default();
            let n: u64 = stream.chunks(step).map(|c| w.data_in(c)).sum();
            assert_eq!(n, 5100, "writes of {step} bytes");
        }
        let mut w = FrameWalk::default();
        assert_eq!(w.data_in(&[frame(6, 8), frame(6, 8)].concat()), 0);
    }
}
