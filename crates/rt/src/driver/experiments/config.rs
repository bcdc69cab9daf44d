//! The levers' public settings: how a batch is sent ([`SendBatch`]) and
//! how a blocking park waits ([`BatchWait`]).

use std::time::Duration;

/// How `TcpStream::write_all_pooled` sends a batch of buffers on io_uring
/// (epoll always makes one `sendmsg`). The levers are kept as a switch so
/// that each can be measured against the others (`ringkit compare echo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SendBatch {
    /// One `IORING_OP_SENDMSG` with an iovec per buffer: one SQE and one
    /// CQE for the batch. The default.
    #[default]
    Vectored,
    /// One `IORING_OP_SEND` per buffer, linked in order (`IOSQE_IO_LINK`),
    /// every one but the last with `IOSQE_CQE_SKIP_SUCCESS`: one CQE for the
    /// batch. Needs the kernel to post exactly one CQE per such chain
    /// (probed once, [`ringkit_uring::skipped_chain_posts_one_cqe`]);
    /// otherwise `Vectored`, with a warning.
    Linked,
    /// One `IORING_OP_SEND` with `IORING_RECVSEND_BUNDLE` from a send ring
    /// of the batch's buffers (`ringkit_uring::SendRing`, a ring per send
    /// in flight, pooled per thread): one SQE and one CQE for the batch.
    /// Needs `IORING_FEAT_RECVSEND_BUNDLE` (Linux 6.10); otherwise
    /// `Vectored`, with a warning.
    Bundle,
}

/// How a blocking park waits (`Builder::batch_wait_policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BatchWait {
    /// Return as soon as one completion is ready.
    #[default]
    Off,
    /// Always wait for up to `want` completions, returning once `min_wait`
    /// has passed and at least one is ready.
    Fixed {
        /// Completions to wait for.
        want: u32,
        /// Longest wait once one completion is ready.
        min_wait: Duration,
    },
    /// As [`BatchWait::Fixed`], but only while the loop is the bottleneck:
    /// its thread was on CPU for at least 95% of a recent window of a few
    /// milliseconds; below 75% it wakes for every completion again. A
    /// lightly loaded loop never waits for a batch (its idle time in the
    /// kernel is not CPU time), nor does one with time to spare while its
    /// peers are slow (holding their replies back would slow them more).
    Adaptive {
        /// Completions to wait for.
        want: u32,
        /// Longest wait once one completion is ready.
        min_wait: Duration,
    },
}

/// The longest minimum wait a policy may ask for, in µs (1 s).
const MAX_MIN_WAIT_US: u64 = 1_000_000;

impl BatchWait {
    /// The adaptive policy with the default figures: 32 completions,
    /// 50 µs.
    pub const AUTO: BatchWait = BatchWait::Adaptive {
        want: 32,
        min_wait: Duration::from_micros(50),
    };

    /// The policy as the driver runs it: `want` at least 1, `min_wait` in
    /// whole µs from 1 µs to 1 s (the kernel takes µs; a minimum of 0
    /// would wait for `want` completions however long they take).
    pub(crate) fn normalized(self) -> BatchWait {
        let fix = |want: u32, min_wait: Duration| {
            let us = u64::try_from(min_wait.as_micros())
                .unwrap_or(u64::MAX)
                .clamp(1, MAX_MIN_WAIT_US);
            (want.max(1), Duration::from_micros(us))
        };
        match self {
            BatchWait::Off => BatchWait::Off,
            BatchWait::Fixed { want, min_wait } => {
                let (want, min_wait) = fix(want, min_wait);
                BatchWait::Fixed { want, min_wait }
            }
            BatchWait::Adaptive { want, min_wait } => {
                let (want, min_wait) = fix(want, min_wait);
                BatchWait::Adaptive { want, min_wait }
            }
        }
    }
}

impl std::str::FromStr for BatchWait {
    type Err = String;
    /// `off`, `auto` ([`BatchWait::AUTO`]), `WANT:MICROS` (fixed) or
    /// `auto:WANT:MICROS` (adaptive).
    fn from_str(s: &str) -> Result<BatchWait, String> {
        let s = s.trim();
        let bad =
            || format!("{s:?}: expected off, auto, WANT:MICROS (e.g. 32:50) or auto:WANT:MICROS");
        let pair = |v: &str| -> Result<(u32, Duration), String> {
            let (w, us) = v.split_once(':').ok_or_else(bad)?;
            let want: u32 = w.trim().parse().map_err(|_| bad())?;
            let us: u64 = us.trim().parse().map_err(|_| bad())?;
            if want == 0 {
                return Err(format!("{s:?}: WANT must be at least 1"));
            }
            if !(1..=MAX_MIN_WAIT_US).contains(&us) {
                return Err(format!(
                    "{s:?}: MICROS must be 1 to {MAX_MIN_WAIT_US} (0 would wait for WANT completions however long they take)"
                ));
            }
            Ok((want, Duration::from_micros(us)))
        };
        match s {
            "off" => Ok(BatchWait::Off),
            "auto" => Ok(BatchWait::AUTO),
            _ => match s.strip_prefix("auto:") {
                Some(rest) => {
                    pair(rest).map(|(want, min_wait)| BatchWait::Adaptive { want, min_wait })
                }
                None => pair(s).map(|(want, min_wait)| BatchWait::Fixed { want, min_wait }),
            },
        }
    }
}

impl std::fmt::Display for BatchWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BatchWait::Off => f.write_str("off"),
            BatchWait::Fixed { want, min_wait } => write!(f, "{want}:{}", min_wait.as_micros()),
            BatchWait::Adaptive { want, min_wait } => {
                write!(f, "auto:{want}:{}", min_wait.as_micros())
            }
        }
    }
}

impl std::str::FromStr for SendBatch {
    type Err = String;
    fn from_str(s: &str) -> Result<SendBatch, String> {
        match s.to_ascii_lowercase().as_str() {
            "vectored" => Ok(SendBatch::Vectored),
            "linked" => Ok(SendBatch::Linked),
            "bundle" => Ok(SendBatch::Bundle),
            other => Err(format!(
                "unknown send batch {other:?} (expected vectored, linked or bundle)"
            )),
        }
    }
}

impl std::fmt::Display for SendBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SendBatch::Vectored => "vectored",
            SendBatch::Linked => "linked",
            SendBatch::Bundle => "bundle",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values at their limits: `want` 0 becomes 1; a minimum of 0 or
    /// under 1 µs becomes 1 µs; anything past 1 s, `Duration::MAX` too,
    /// becomes 1 s (its µs do not fit a u64: they must not wrap).
    #[test]
    fn limits_are_clamped_not_wrapped() {
        let n = |want, min_wait| BatchWait::Fixed { want, min_wait }.normalized();
        let f = |want, us| BatchWait::Fixed {
            want,
            min_wait: Duration::from_micros(us),
        };
        assert_eq!(n(0, Duration::ZERO), f(1, 1));
        assert_eq!(n(32, Duration::from_nanos(500)), f(32, 1));
        assert_eq!(n(32, Duration::from_secs(5)), f(32, 1_000_000));
        assert_eq!(n(32, Duration::MAX), f(32, 1_000_000));
        // 2^64 µs and a little: wrapped, this read as 448 384 µs.
        assert_eq!(
            n(32, Duration::from_secs(18_446_744_073_710)),
            f(32, 1_000_000)
        );
        assert_eq!(
            BatchWait::Adaptive {
                want: 0,
                min_wait: Duration::MAX
            }
            .normalized(),
            BatchWait::Adaptive {
                want: 1,
                min_wait: Duration::from_secs(1)
            }
        );
    }
}
