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
    /// Serve TLS (ALPN h2, http/1.1) with this PEM certificate chain.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
}

fn main() -> std::io::Result<()> {
    let a = Args::parse();
    let mut cfg = ringkit_hyper::ServeConfig::new(a.addr);
    cfg.threads = a.threads;
    cfg.cpus = a.cpus;
    cfg.backend = a.backend;
    if let (Some(cert), Some(key)) = (&a.tls_cert, &a.tls_key) {
        cfg.tls = Some(ringkit_hyper::tls::server_config(
            cert,
            key,
            &[b"h2", b"http/1.1"],
        )?);
    }
    ringkit_hyper::serve(cfg, ringkit_hyper::hello::app)
}
