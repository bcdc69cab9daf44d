//! The echo study (`ringkit compare echo`): the contenders, the load
//! generator, the interleaved run, its summary and its report.

pub mod contenders;
pub mod load;
pub mod report;
pub mod study;
pub mod summary;

pub use load::{run_load, run_load_threads, EchoLoadConfig, EchoLoadResult};
pub use study::{run, study, CompareConfig, Sample};
pub use summary::{CompareResults, PairedRatio, Summary};
