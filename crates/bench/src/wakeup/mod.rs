//! The wake-up latency study (`ringkit bench wakeup`, `ringkit compare wakeup`).
//!
//! A writer thread pinned to one CPU waits a short random pause (busy, so
//! its own timing is exact), stamps `t0` (`CLOCK_MONOTONIC`, vDSO) and
//! writes those 8 bytes to a pipe, an eventfd or a Unix socket. A reader
//! thread pinned to the other CPU is woken, stamps `t1` at once and takes
//! `t0` from the 8 bytes; `t1 - t0` is one latency. The reader acknowledges
//! each wake-up only after it is armed again, so every write finds a reader
//! that is waiting, and pairs `t0`/`t1` exactly.
//!
//! Readers:
//! - `epoll-block`: `epoll_wait` with a 1 s timeout; `epoll-busy`:
//!   `epoll_wait(0)` in a loop.
//! - `uring-poll-*`: a multishot `POLL_ADD`, then `read(2)` of the 8 bytes
//!   after `t1`; `uring-read-*`: a `READ` of 8 bytes submitted directly on
//!   the fd (its CQE carries the data).
//! - `*-block`: `io_uring_enter` waiting for one CQE with a 1 s timeout
//!   (`EXT_ARG`); `*-busy`: peek the CQ from shared memory in a loop,
//!   entering the kernel only when the ring says it must: with
//!   `TASKRUN_FLAG` when `IORING_SQ_TASKRUN` is set, and with
//!   `DEFER_TASKRUN` (whose task work runs only inside an enter with
//!   `GETEVENTS`) one non-blocking `GETEVENTS` enter per empty peek.
//! - every io_uring reader with three flag sets: `default`, `coop`
//!   (`COOP_TASKRUN|TASKRUN_FLAG`), `defer` (`DEFER_TASKRUN|SINGLE_ISSUER`;
//!   the ring is created on the reader thread, the only one that uses it).
//! - `rt-uring`, `rt-epoll`: a ringkit task awaiting `UnixStream::read` on
//!   each backend; the runtime has no pipe type, so these use a Unix
//!   socketpair, and raw `epoll-block`/`uring-poll-block` rows on the same
//!   socketpair show what the runtime itself adds. `rt-uring-file` awaits
//!   `fs::File::read_at` on the pipe itself (io_uring only: on epoll a file
//!   read is an inline `pread`, which a pipe refuses).
//!
//! Contenders run interleaved and rotated each round; the report gives the
//! median over rounds of each percentile (nearest rank, see
//! [`crate::harness::latency`]).

mod readers;
pub mod report;
mod spec;
mod study;

pub use report::{markdown, section, table};
pub use spec::{
    contenders, Channel, FlagSet, Reader, WakeConfig, WakeContender, WakeResults, WakeRow,
    WakeSample, WakeVerdict,
};
pub use study::{config_for, run, study, verdict};
