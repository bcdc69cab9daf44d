//! `ringkit torture echo|http` (owned by the reliability work).

use clap::Args;

/// `ringkit torture`.
#[derive(Args, Debug)]
pub struct TortureArgs {}

pub fn torture(_a: TortureArgs) -> std::io::Result<()> {
    Err(std::io::Error::other("ringkit torture: not built yet"))
}
