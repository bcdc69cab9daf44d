//! Peers that go silent: the last phase of `--faults silent`.
//!
//! After the chaos, `n` fresh connections are opened across the link: half
//! finish one exchange and then sit idle with nothing owed, half leave the
//! server mid-transfer (echo: 4 MiB written and never read back; HTTP: 64
//! pipelined requests for the largest file, never read). Then every packet
//! on the link is dropped: no FIN, no RST, no ACK, as when a peer loses
//! power. The server must notice and free every one of those connections
//! within its timeouts (echo: `--dead-peer-timeout`, `--send-timeout`;
//! HTTP: `--idle-timeout`, `--send-timeout`): its open fds must fall back to
//! what they were before the phase.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use rustls::pki_types::CertificateDer;

use super::faults::Net;
use super::TortureMode;
use crate::harness::process::{ProcSample, Process};

/// What the phase saw.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct SilentFigures {
    /// Silent connections opened.
    pub conns: usize,
    /// The server's open fds before the phase, and once they were opened.
    pub fds_before: u64,
    /// Open fds with the silent connections open.
    pub fds_with_silent: u64,
    /// Seconds from the silence until the server's fds were back.
    pub freed_after_secs: Option<f64>,
}

/// One exchange, so the connection is established and served.
fn one_exchange(s: &mut TcpStream, mode: TortureMode) -> io::Result<()> {
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    match mode {
        TortureMode::Echo => {
            s.write_all(&[7u8; 100])?;
            let mut back = [0u8; 100];
            s.read_exact(&mut back)?;
            if back != [7u8; 100] {
                return Err(io::Error::other("echo came back changed"));
            }
        }
        TortureMode::Http => {
            s.write_all(b"HEAD /f1.bin HTTP/1.1\r\nHost: t\r\n\r\n")?;
            let head = super::tls::read_head(s)?.unwrap_or_default();
            if !head.starts_with(b"HTTP/1.1 200") {
                return Err(io::Error::other("HEAD not answered 200"));
            }
        }
    }
    Ok(())
}

/// Leave the server with more to send than the socket buffers hold.
fn mid_transfer(s: &TcpStream, mode: TortureMode, largest: usize) -> io::Result<()> {
    let mut w = s.try_clone()?;
    w.set_write_timeout(Some(Duration::from_secs(2)))?;
    let bytes = match mode {
        TortureMode::Echo => vec![9u8; 4 << 20],
        TortureMode::Http => format!("GET /f{largest}.bin HTTP/1.1\r\nHost: t\r\n\r\n")
            .repeat(64)
            .into_bytes(),
    };
    // The write stops once both sides' buffers are full (the server is
    // then blocked sending to us): a timeout here is expected.
    std::thread::spawn(move || {
        let _ = w.write_all(&bytes);
    });
    Ok(())
}

/// Open one silent HTTPS peer: one verified response, then (when
/// `mid`) 64 requests for the largest file that it will never read.
fn tls_peer(
    addr: SocketAddr,
    ca: &CertificateDer<'static>,
    largest: usize,
    mid: bool,
) -> io::Result<(Box<dyn std::any::Any>, TcpStream)> {
    let mut s = super::tls::connect_for_silence(addr, ca)?;
    let sock = s.sock.try_clone()?;
    super::tls::head(&mut s)?;
    if mid {
        let req = format!("GET /f{largest}.bin HTTP/1.1\r\nHost: t\r\n\r\n").repeat(64);
        s.write_all(req.as_bytes())?;
        s.flush()?;
    }
    Ok((Box::new(s), sock))
}

/// Run the phase against `srv` at `addr` across `net` (over TLS when `ca`
/// is given). `largest` is the largest file's index (HTTP). Fails when the
/// fds are not back in `limit`.
#[allow(clippy::too_many_arguments)]
pub fn run(
    net: &Net,
    srv: &Process,
    addr: SocketAddr,
    mode: TortureMode,
    ca: Option<&CertificateDer<'static>>,
    largest: usize,
    n: usize,
    limit: Duration,
) -> Result<SilentFigures, String> {
    let fds = || ProcSample::of(srv.pid()).map(|s| s.fds);
    // The baseline once the final check's connections are gone: three
    // equal samples 100 ms apart (at most 5 s).
    let t0 = Instant::now();
    let mut before = fds().ok_or("server gone before the silent phase")?;
    let mut same = 0;
    while same < 2 && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(100));
        let now = fds().ok_or("server gone before the silent phase")?;
        same = if now == before { same + 1 } else { 0 };
        before = now;
    }
    let mut fig = SilentFigures {
        conns: n,
        fds_before: before,
        ..Default::default()
    };
    // The sockets, and what keeps a TLS session alive beside them.
    let mut conns: Vec<TcpStream> = Vec::with_capacity(n);
    let mut sessions: Vec<Box<dyn std::any::Any>> = Vec::new();
    for i in 0..n {
        if let Some(ca) = ca {
            let (session, sock) = tls_peer(addr, ca, largest, i % 2 == 1)
                .map_err(|e| format!("silent phase: TLS peer: {e}"))?;
            sessions.push(session);
            conns.push(sock);
            continue;
        }
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .map_err(|e| format!("silent phase: connect: {e}"))?;
        one_exchange(&mut s, mode).map_err(|e| format!("silent phase: first exchange: {e}"))?;
        if i % 2 == 1 {
            mid_transfer(&s, mode, largest).map_err(|e| format!("silent phase: {e}"))?;
        }
        conns.push(s);
    }
    // Let the server take in what was sent and block on its replies.
    std::thread::sleep(Duration::from_millis(500));
    fig.fds_with_silent = fds().unwrap_or(0);
    if fig.fds_with_silent < before + n as u64 {
        return Err(format!(
            "silent phase: {} fds with {n} connections open, {before} before",
            fig.fds_with_silent
        ));
    }
    net.drop_packets(100)
        .map_err(|e| format!("silent phase: {e}"))?;
    let t = Instant::now();
    let freed = loop {
        match fds() {
            Some(f) if f <= before => break Some(t.elapsed()),
            Some(_) if t.elapsed() < limit => std::thread::sleep(Duration::from_millis(100)),
            _ => break None,
        }
    };
    net.clear_drops();
    for s in &conns {
        let _ = socket2::SockRef::from(s).set_linger(Some(Duration::ZERO));
    }
    drop(sessions);
    drop(conns);
    fig.freed_after_secs = freed.map(|d| d.as_secs_f64());
    match freed {
        Some(_) => Ok(fig),
        None => Err(format!(
            "silent peers: the server still had {} fds {limit:?} after its {n} peers went silent ({before} before)",
            fds().unwrap_or(0)
        )),
    }
}
