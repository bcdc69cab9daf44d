//! TLS configuration shared by ringkit's servers (`ringkit-http`'s
//! `serve --tls-*`, `ringkit-hyper`): rustls with the `ring` provider,
//! which builds with the Rust toolchain and a C compiler alone (no cmake,
//! no Go). [`server_config`] loads a PEM certificate chain and key; its
//! errors name the file and say what is wrong with it. [`TlsIo`] is the
//! one TLS stream adapter both servers use (rustls over ringkit's
//! `PollIo`).

use std::io;
use std::path::Path;
use std::sync::Arc;

mod io_adapter;
pub use io_adapter::TlsIo;
#[cfg(feature = "clap")]
mod args;
#[cfg(feature = "clap")]
pub use args::TlsArgs;

pub use rustls;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;

/// A server configuration from a PEM certificate chain and a PEM private
/// key, TLS 1.2 and 1.3, offering ALPN `alpn`: `[b"http/1.1"]` for
/// ringkit-http's `Server::tls` (HTTP/1 only: it drops any h2 offer),
/// `[b"h2", b"http/1.1"]` for ringkit-hyper, which speaks both.
pub fn server_config(cert: &Path, key: &Path, alpn: &[&[u8]]) -> io::Result<Arc<ServerConfig>> {
    let bad = |path: &Path, what: String| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: {what}", path.display()),
        )
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad(cert, format!("cannot read a PEM certificate chain: {e}")))?
        .collect::<Result<_, _>>()
        .map_err(|e| bad(cert, format!("not a PEM certificate chain: {e}")))?;
    if certs.is_empty() {
        return Err(bad(cert, "no certificate in it".into()));
    }
    let key_der = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| bad(key, format!("no usable PEM private key: {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| io::Error::other(format!("TLS versions: {e}")))?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| {
            bad(
                key,
                format!("does not match the certificate or is unusable: {e}"),
            )
        })?;
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(cfg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_a_pair_and_names_bad_files() {
        let dir = tempfile::tempdir().unwrap();
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        std::fs::write(&cert, ck.cert.pem()).unwrap();
        std::fs::write(&key, ck.key_pair.serialize_pem()).unwrap();
        let cfg = server_config(&cert, &key, &[b"http/1.1"]).unwrap();
        assert_eq!(cfg.alpn_protocols, vec![b"http/1.1".to_vec()]);

        let missing = dir.path().join("missing.pem");
        let e = server_config(&missing, &key, &[]).unwrap_err();
        assert!(e.to_string().contains("missing.pem"), "{e}");
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, b"not a pem file at all").unwrap();
        for (c, k) in [(&garbage, &key), (&cert, &garbage)] {
            let e = server_config(c, k, &[]).unwrap_err();
            assert!(e.to_string().contains("garbage.pem"), "{e}");
        }
        let other = rcgen::generate_simple_self_signed(vec!["x".into()]).unwrap();
        let other_key = dir.path().join("other-key.pem");
        std::fs::write(&other_key, other.key_pair.serialize_pem()).unwrap();
        let e = server_config(&cert, &other_key, &[]).unwrap_err();
        assert!(e.to_string().contains("other-key.pem"), "{e}");
    }
}
