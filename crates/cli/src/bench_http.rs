//! `ringkit bench http` (owned by the HTTP benchmark work).

use clap::Args;

/// `ringkit bench http URL`: a verifying HTTP load generator.
#[derive(Args, Debug)]
pub struct BenchHttpArgs {}

pub fn bench_http(_a: BenchHttpArgs) -> std::io::Result<()> {
    Err(std::io::Error::other("ringkit bench http: not built yet"))
}
