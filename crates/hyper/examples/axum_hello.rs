//! An axum app on ringkit (`ringkit_hyper::hello::app`): `GET /` (plain
//! text), `GET /json` (a small JSON object), `GET /user/{id}` (the path
//! parameter echoed in JSON).
//!
//! ```sh
//! cargo run --release -p ringkit-hyper --example axum_hello -- --addr 127.0.0.1:3000 --backend auto
//! ```

use clap::Parser;

/// An axum app served by ringkit-hyper.
#[derive(Parser, Debug)]
#[command(mut_arg("addr", |a| a.default_value("127.0.0.1:3000")))]
struct Args {
    /// Address (default 127.0.0.1:3000), backend, threads, CPUs.
    #[command(flatten)]
    launch: ringkit::LaunchArgs,
    /// TLS (ALPN h2, http/1.1).
    #[command(flatten)]
    tls: ringkit_tls::TlsArgs,
}

fn main() -> std::io::Result<()> {
    // The library logs through `tracing` only: this prints each thread's
    // "listening on" line.
    tracing_subscriber::fmt().init();
    let a = Args::parse();
    let mut cfg = ringkit_hyper::ServeConfig::from_args(&a.launch, "127.0.0.1:3000");
    cfg.tls = a.tls.server_config(&[b"h2", b"http/1.1"])?;
    ringkit_hyper::serve(cfg, ringkit_hyper::hello::app)
}
