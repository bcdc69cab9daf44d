//! ringkit-bench: load generators, workloads, the comparison harness and
//! its reports. See BENCHMARKING.md for the rules these follow.

#![warn(missing_docs)]

pub mod compare;
pub mod echo;
pub mod file;
pub mod http;
pub mod nop;
pub mod report;
pub mod study;
pub mod sysinfo;
pub mod torture;
pub mod wakeup;
