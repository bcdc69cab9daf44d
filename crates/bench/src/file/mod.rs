//! The file I/O study (`ringkit bench file`, `ringkit compare file`): a
//! small fio-like job runner on ringkit, side by side with fio.
//!
//! A job is a direction (`read`, `write`, `randread`, `randwrite`), a block
//! size, a queue depth, `O_DIRECT` or buffered, and a submission batch
//! ([`Job::parse`]: `randread,bs=4k,qd=32,direct=1,batch=1`). The tool creates one test file of the
//! asked size in the directory the user names (default: the temp dir),
//! fills it with pseudo-random bytes, drops it from the page cache, and
//! removes it at the end.
//!
//! Engines ([`Engine`]):
//! - `uring[-fixed][-sqpoll][-iopoll]`: written directly on `ringkit-uring`,
//!   with the setup flags fio's io_uring engine uses (`COOP_TASKRUN`,
//!   `SINGLE_ISSUER|DEFER_TASKRUN`, stripped where refused). `qd` operations
//!   are kept in flight: every CQE is re-queued at once, and the queued
//!   SQEs are submitted as soon as `batch` of them wait (default 1: each at
//!   once, like fio's default `iodepth_batch_submit=1`); `submit_and_wait(1)`
//!   submits the rest and waits.
//!
//!   Why the default is 1: on this project's reference VM (virtio-blk,
//!   mq-deadline) submitting the re-queued reads in one enter per reap
//!   (`batch=32`) cost 8-20% of the IOPS against fio (device latency p50 470
//!   against 364 us) for 13% less CPU per I/O; io_uring plugs a batch of
//!   three or more reads, so the disk gets them in one kick. Submitting each
//!   read at once matched fio (1.03x). The full study runs both. `fixed`:
//!   one registered buffer (`READ_FIXED`/`WRITE_FIXED`) and a registered
//!   file; `sqpoll`: the poller pinned to another CPU (refused when it would
//!   share the submitter's CPU — on a 2-core machine that setup collapses);
//!   `iopoll`: `IORING_SETUP_IOPOLL`, probed first (most VM disks have no
//!   poll queues and answer `EOPNOTSUPP`).
//! - `rt-uring`, `rt-epoll`: `qd` ringkit tasks looping on
//!   `File::read_at`/`write_at`. On epoll files have no readiness, so each
//!   call is an inline `pread`/`pwrite`: effectively queue depth 1, fio's
//!   psync stand-in.
//! - `glommio`: `qd` glommio tasks on one executor pinned to the same CPU,
//!   on its `DmaFile` (`read_at_aligned`, `write_at` from its registered
//!   I/O memory); `O_DIRECT` jobs only.
//! - `fio-*` ([`fio`]): the same job through fio's io_uring, libaio
//!   and psync engines, skipped with an install hint when fio is missing.
//!
//! Latency is from submission (push of the SQE, or the call) to the reap of
//! the completion, like fio's `lat` (which the fio rows report). CPU per I/O
//! is this process's user+system time over the window (`getrusage`, which
//! includes the SQPOLL kernel thread), and for fio its whole process tree
//! measured around it (`wait4`; fio's own figures are one thread's).

mod engines;
pub mod fio;
pub mod job;
pub mod report;
mod spec;
pub mod study;
pub mod testfile;

pub use job::{parse_size, Engine, Job, Rw};
pub use report::{markdown, section, table, targets};
pub use study::{
    config_for, default_plans, run, study, FileConfig, FileResults, FileRow, FileSample,
    FileTarget, JobPlan,
};
pub use testfile::{probe_iopoll, TestFile};
