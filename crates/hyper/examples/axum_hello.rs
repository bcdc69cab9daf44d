//! An axum app on ringkit (`ringkit_hyper::hello::app`): `GET /` (plain
//! text), `GET /json` (a small JSON object), `GET /user/{id}` (the path
//! parameter echoed in JSON).
//!
//! ```sh
//! cargo run --release -p ringkit-hyper --example axum_hello -- --addr 127.0.0.1:3000 --backend auto
//! ```

use std::net::SocketAddr;

use clap::Parser;
use ringkit::Backend;

/// An axum app served by ringkit-hyper.
#[derive(Parser, Debug)]
struct Args {
    /// Address to listen on (every thread binds it with SO_REUSEPORT).
    #[arg(long, default_value = "127.0.0.1:3000")]
    addr: SocketAddr,
    /// I/O backend: auto (io_uring if usable here, else epoll, saying why), uring or epoll.
    #[arg(long, default_value = "auto")]
    backend: Backend,
    /// Runtime threads, one listener each.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// CPUs to pin the threads to, e.g. 0,1.
    #[arg(long, value_delimiter = ',')]
    cpus: Vec<usize>,
}

fn main() -> std::io::Result<()> {
    let a = Args::parse();
    let mut cfg = ringkit_hyper::ServeConfig::new(a.addr);
    cfg.threads = a.threads;
    cfg.cpus = a.cpus;
    cfg.backend = a.backend;
    ringkit_hyper::serve(cfg, ringkit_hyper::hello::app)
}
