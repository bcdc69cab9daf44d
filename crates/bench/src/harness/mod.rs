//! What every study shares: statistics, server processes, syscall
//! counting, the load phases, report cells and charts, the `Section`
//! contract, system information, latency and random numbers, and finding
//! the peers. Nothing here imports a study.

pub mod backend_serde;
pub mod bars;
pub mod child;
pub mod curves;
pub mod err;
pub mod fmt;
pub mod latency;
pub mod made_dir;
pub mod open_loop;
pub mod peers;
pub mod phase;
pub mod process;
pub mod rng;
pub mod server;
pub mod services;
pub mod stalls;
pub mod stat;
pub mod study;
pub mod summary;
pub mod syscalls;
pub mod sysinfo;
pub mod table;
pub mod tasks;
