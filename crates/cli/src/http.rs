//! `ringkit http` and `ringkit serve` (owned by the HTTP server work).

use clap::Args;

/// `ringkit http`: the benchmark server (`GET /` answers 200, empty body).
#[derive(Args, Debug)]
pub struct HttpArgs {}

/// `ringkit serve DIR`: a static file server.
#[derive(Args, Debug)]
pub struct ServeArgs {}

pub fn http(_a: HttpArgs) -> std::io::Result<()> {
    Err(std::io::Error::other("ringkit http: not built yet"))
}

pub fn serve(_a: ServeArgs) -> std::io::Result<()> {
    Err(std::io::Error::other("ringkit serve: not built yet"))
}
