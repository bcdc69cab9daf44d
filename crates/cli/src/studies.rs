//! `ringkit bench wakeup|nop|file` (owned by the wake-up/ring/file studies work).

use clap::Args;

/// `ringkit bench wakeup`.
#[derive(Args, Debug)]
pub struct BenchWakeupArgs {}

/// `ringkit bench nop`.
#[derive(Args, Debug)]
pub struct BenchNopArgs {}

/// `ringkit bench file`.
#[derive(Args, Debug)]
pub struct BenchFileArgs {}

pub fn bench_wakeup(_a: BenchWakeupArgs) -> std::io::Result<()> {
    Err(std::io::Error::other("ringkit bench wakeup: not built yet"))
}

pub fn bench_nop(_a: BenchNopArgs) -> std::io::Result<()> {
    Err(std::io::Error::other("ringkit bench nop: not built yet"))
}

pub fn bench_file(_a: BenchFileArgs) -> std::io::Result<()> {
    Err(std::io::Error::other("ringkit bench file: not built yet"))
}
