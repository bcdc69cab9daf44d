//! The TLS flags every server command shares (feature `clap`).

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use rustls::ServerConfig;

/// `--tls-cert` and `--tls-key`: serve TLS when both are given.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TlsArgs {
    /// Serve TLS (rustls) with this PEM certificate chain.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

impl TlsArgs {
    /// The server configuration (offering ALPN `alpn`) when TLS was asked
    /// for, `None` otherwise; errors name the file at fault.
    pub fn server_config(&self, alpn: &[&[u8]]) -> io::Result<Option<Arc<ServerConfig>>> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => crate::server_config(cert, key, alpn).map(Some),
            _ => Ok(None),
        }
    }
}
