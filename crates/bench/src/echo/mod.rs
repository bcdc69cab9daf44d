//! The echo study (`ringkit compare echo`): the contenders, the load
//! generator, the interleaved run, its summary and its report.

pub mod contenders;
pub mod external;
pub mod load;
mod open;
pub mod report;
pub mod results;
mod shared;
pub mod study;

pub use load::{fairness, run_load, run_load_threads, EchoClient, EchoLoadConfig, EchoLoadResult};
pub use results::{CompareConfig, CompareResults, PairedRatio, Sample, Summary};
pub use study::{run, study};
