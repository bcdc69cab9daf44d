//! HTTPS under faults: `ringkit torture http --tls`.
//!
//! `ringkit serve` runs with a fresh self-signed certificate; the clients
//! are blocking rustls connections on threads (the chaos clients speak
//! plain TCP). Each client thread, until the end of the run, opens a TLS
//! connection (through the fault proxy when the profile has one), asks for
//! random files on it with keep-alive, and compares every body byte with
//! what the file holds; every few requests it closes and reconnects, so
//! handshakes keep happening under the faults. A connection that breaks
//! mid-response is a loss unless the proxy reset it on purpose; one with
//! no byte for the stall limit is a stall.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::{CertificateDer, ServerName};
use serde::Serialize;

use super::http::{file_id, file_size, FILES};
use super::sendq;
use crate::harness::rng::{ByteGen, Rng};

/// What the TLS clients did and saw.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct TlsCounts {
    /// TLS connections established (handshakes done).
    pub handshakes: u64,
    /// Requests sent.
    pub requests: u64,
    /// Responses whose status, length and every body byte were right.
    pub verified: u64,
    /// Body bytes verified.
    pub bytes_verified: u64,
    /// Responses that came back wrong.
    pub mismatches: u64,
    /// Connections that broke (TLS or TCP error, early end) mid-exchange.
    pub losses: u64,
    /// Connections with nothing arriving for the stall limit.
    pub stalls: u64,
    /// Handshakes or connects that failed.
    pub connect_errors: u64,
    /// Requests answered 408 that the link had held back past the server's
    /// request timeout (across a faulty link only, [`super::sendq`]).
    #[serde(default)]
    pub timed_out: u64,
    /// The first errors, verbatim.
    pub errors: Vec<String>,
}

/// A certificate for `localhost` written to `dir` (cert.pem, key.pem);
/// returns the paths and the certificate the clients trust.
pub fn make_cert(
    dir: &Path,
) -> io::Result<(
    std::path::PathBuf,
    std::path::PathBuf,
    CertificateDer<'static>,
)> {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()])
        .map_err(|e| io::Error::other(format!("certificate: {e}")))?;
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, ck.cert.pem())?;
    std::fs::write(&key, ck.key_pair.serialize_pem())?;
    Ok((cert, key, ck.cert.der().clone()))
}

/// The torture's one TLS client: rustls trusting `ca`, offering
/// `http/1.1` only.
pub fn client_config(ca: &CertificateDer<'static>) -> io::Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).map_err(io::Error::other)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

pub(crate) type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// Connect and finish the handshake.
fn connect(addr: SocketAddr, cfg: &Arc<rustls::ClientConfig>, stall: Duration) -> io::Result<Tls> {
    let tcp = TcpStream::connect_timeout(&addr, stall)?;
    tcp.set_read_timeout(Some(stall))?;
    tcp.set_write_timeout(Some(stall))?;
    tcp.set_nodelay(true)?;
    let name = ServerName::try_from("localhost").map_err(io::Error::other)?;
    let conn = rustls::ClientConnection::new(cfg.clone(), name).map_err(io::Error::other)?;
    let mut s = rustls::StreamOwned::new(conn, tcp);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock)?;
    }
    Ok(s)
}

/// A TLS connection for the silent phase (5 s limits).
pub(crate) fn connect_for_silence(
    addr: SocketAddr,
    ca: &CertificateDer<'static>,
) -> io::Result<Tls> {
    connect(addr, &client_config(ca)?, Duration::from_secs(5))
}

/// A response head, read a byte at a time (these clients check, they do
/// not race), up to and with its blank line; `None` past 16 KiB. The
/// torture's blocking clients all read heads here.
pub(crate) fn read_head(s: &mut impl Read) -> io::Result<Option<Vec<u8>>> {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut b)?;
        head.push(b[0]);
        if head.len() > 16 * 1024 {
            return Ok(None);
        }
    }
    Ok(Some(head))
}

/// One `HEAD` answered 200 on `s`.
pub(crate) fn head(s: &mut Tls) -> io::Result<()> {
    write!(s, "HEAD /f1.bin HTTP/1.1\r\nHost: t\r\n\r\n")?;
    s.flush()?;
    let head = read_head(s)?.unwrap_or_default();
    if head.starts_with(b"HTTP/1.1 200") {
        Ok(())
    } else {
        Err(io::Error::other("HEAD not answered 200"))
    }
}

/// How one request went.
enum Got {
    Verified(usize),
    Wrong(String),
    /// A 408 the server had the right to send; it closes.
    TimedOut,
}

/// GET file `i` on `s` and check the answer against the file's bytes. A
/// 408 passes only under `request_timeout`, for a request the link held
/// back that long ([`sendq::Held`]).
fn fetch(s: &mut Tls, seed: u64, i: usize, request_timeout: Option<Duration>) -> io::Result<Got> {
    let began = Instant::now();
    write!(s, "GET /f{i}.bin HTTP/1.1\r\nHost: t\r\n\r\n")?;
    s.flush()?;
    // Where the request's ciphertext ends in the connection's byte stream.
    let fd = s.sock.as_raw_fd();
    let end = sendq::sent(fd)?.acked + sendq::unacked(fd)?;
    let Some(head) = read_head(s)? else {
        return Ok(Got::Wrong("response head over 16 KiB".into()));
    };
    let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
    if let Some(t) = request_timeout.filter(|_| text.starts_with("http/1.1 408")) {
        let held = sendq::Held::now(fd, began, end)?;
        if held.may_time_out(t) {
            return Ok(Got::TimedOut);
        }
        return Ok(Got::Wrong(format!(
            "/f{i}.bin: 408 for a request not held back past the server's {t:?} ({held:?})"
        )));
    }
    if !text.starts_with("http/1.1 200") {
        return Ok(Got::Wrong(format!(
            "/f{i}.bin: {}",
            text.lines().next().unwrap_or("")
        )));
    }
    let len: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(usize::MAX);
    let want = file_size(seed, i);
    if len != want {
        return Ok(Got::Wrong(format!(
            "/f{i}.bin: Content-Length {len}, file has {want}"
        )));
    }
    let mut body = vec![0u8; len];
    s.read_exact(&mut body)?;
    if body != ByteGen::message(file_id(i), 0, want) {
        return Ok(Got::Wrong(format!("/f{i}.bin: body bytes differ")));
    }
    Ok(Got::Verified(len))
}

/// Shared counters of the client threads.
#[derive(Default)]
struct Shared {
    handshakes: AtomicU64,
    requests: AtomicU64,
    verified: AtomicU64,
    bytes: AtomicU64,
    mismatches: AtomicU64,
    losses: AtomicU64,
    stalls: AtomicU64,
    connect_errors: AtomicU64,
    timed_out: AtomicU64,
    errors: std::sync::Mutex<Vec<String>>,
}

impl Shared {
    /// Count an I/O error where it belongs: no byte for the stall limit is
    /// a stall; rustls's `InvalidData` (a bad record MAC, a decrypt
    /// failure, an alert) is wrong bytes, not merely cut ones; anything
    /// else goes to `other`.
    fn note_io(&self, other: &AtomicU64, what: &str, e: io::Error, stall: Duration) {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                self.note(&self.stalls, format!("{what}: no byte for {stall:?}"))
            }
            io::ErrorKind::InvalidData => self.note(&self.mismatches, format!("{what}: TLS: {e}")),
            _ => self.note(other, format!("{what}: {e}")),
        }
    }

    fn note(&self, what: &AtomicU64, e: String) {
        what.fetch_add(1, Ordering::Relaxed);
        let mut v = self.errors.lock().unwrap_or_else(|p| p.into_inner());
        if v.len() < 20 {
            v.push(e);
        }
    }
}

/// `conns` client threads against `addr` until `stop_at`.
pub fn run(
    addr: SocketAddr,
    ca: &CertificateDer<'static>,
    conns: usize,
    seed: u64,
    stop_at: Instant,
    stall: Duration,
    request_timeout: Option<Duration>,
) -> io::Result<TlsCounts> {
    let cfg = client_config(ca)?;
    let sh = Arc::new(Shared::default());
    let threads: Vec<_> = (0..conns)
        .map(|t| {
            let (cfg, sh) = (cfg.clone(), sh.clone());
            std::thread::spawn(move || {
                let mut rng = Rng::for_stream(seed, 0x0054_4c53, t as u64);
                while Instant::now() < stop_at {
                    let mut s = match connect(addr, &cfg, stall) {
                        Ok(s) => s,
                        Err(e) => {
                            sh.note_io(&sh.connect_errors, "connect/handshake", e, stall);
                            std::thread::sleep(Duration::from_millis(50));
                            continue;
                        }
                    };
                    sh.handshakes.fetch_add(1, Ordering::Relaxed);
                    let per_conn = rng.range(1, 20);
                    for _ in 0..per_conn {
                        if Instant::now() >= stop_at {
                            break;
                        }
                        let i = rng.range(1, FILES as u64 - 1) as usize;
                        sh.requests.fetch_add(1, Ordering::Relaxed);
                        match fetch(&mut s, seed, i, request_timeout) {
                            Ok(Got::Verified(n)) => {
                                sh.verified.fetch_add(1, Ordering::Relaxed);
                                sh.bytes.fetch_add(n as u64, Ordering::Relaxed);
                            }
                            Ok(Got::TimedOut) => {
                                // Answered, and the server closes.
                                sh.verified.fetch_add(1, Ordering::Relaxed);
                                sh.timed_out.fetch_add(1, Ordering::Relaxed);
                                break;
                            }
                            Ok(Got::Wrong(e)) => {
                                sh.note(&sh.mismatches, e);
                                break;
                            }
                            Err(e) => {
                                sh.note_io(&sh.losses, &format!("/f{i}.bin"), e, stall);
                                break;
                            }
                        }
                    }
                    s.conn.send_close_notify();
                    let _ = s.flush();
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let errors = sh.errors.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok(TlsCounts {
        handshakes: l(&sh.handshakes),
        requests: l(&sh.requests),
        verified: l(&sh.verified),
        bytes_verified: l(&sh.bytes),
        mismatches: l(&sh.mismatches),
        losses: l(&sh.losses),
        stalls: l(&sh.stalls),
        connect_errors: l(&sh.connect_errors),
        timed_out: l(&sh.timed_out),
        errors,
    })
}

/// After the chaos: every file once, on one fresh TLS connection.
pub fn final_check(
    addr: SocketAddr,
    ca: &CertificateDer<'static>,
    seed: u64,
    stall: Duration,
) -> io::Result<()> {
    let cfg = client_config(ca)?;
    let mut s = connect(addr, &cfg, stall)?;
    for i in 1..FILES {
        match fetch(&mut s, seed, i, None)? {
            Got::Verified(_) => {}
            Got::Wrong(e) => return Err(io::Error::other(e)),
            Got::TimedOut => return Err(io::Error::other(format!("/f{i}.bin: 408"))),
        }
    }
    Ok(())
}
