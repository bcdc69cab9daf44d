//! TLS for ringkit-hyper with rustls (the `ring` provider: it builds with
//! the Rust toolchain and a C compiler alone).
//!
//! [`TlsIo`] (from `ringkit-tls`, shared with ringkit-http) runs a
//! `rustls::ServerConnection` over ringkit's `PollIo`; [`server_config`]
//! loads a PEM certificate chain and key.

pub use ringkit_tls::{server_config, TlsIo};
