//! ringkit-bench: load generators, workloads, the comparison harness and
//! its reports. See BENCHMARKING.md for the rules these follow.

#![warn(missing_docs)]

pub mod bars;
pub mod compare;
pub mod echo;
pub mod file;
pub mod file_report;
pub mod fio;
pub mod generator;
pub mod http;
pub mod latency;
pub mod nop;
pub mod report;
pub mod study;
pub mod sysinfo;
pub mod torture;
pub mod wakeup;
pub mod wakeup_report;
