//! The servers the hostile battery attacks: how each is started, the
//! timeouts it states, what a well-behaved exchange with it is, and what
//! each attack sends it.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, ServerName};
use serde::Serialize;

/// A server under attack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum Target {
    /// `ringkit http`: `GET /` answers 200 with an empty body.
    Http,
    /// `ringkit serve DIR`: static files.
    Serve,
    /// `ringkit serve DIR --tls-cert --tls-key`.
    ServeTls,
    /// `ringkit axum`: the hello app on ringkit-hyper.
    Axum,
    /// `ringkit axum --tls-cert --tls-key` (ALPN h2 and http/1.1).
    AxumTls,
    /// `ringkit echo`.
    Echo,
    /// `ringkit log serve`: length-prefixed records in, LSNs out.
    Log,
    /// nginx serving the same files as `Serve` (the reference).
    Nginx,
    /// nginx over TLS, as `ServeTls`.
    NginxTls,
    /// The same axum app with `axum::serve` on tokio (`ringkit-peer
    /// axum-http`), beside `Axum` on the HTTP/2 floods: the same hyper, so
    /// a difference is the runtime's.
    AxumTokio,
    /// The same app over TLS on tokio (`ringkit-peer axum-https`: rustls
    /// through tokio-rustls, hyper-util's auto builder), beside `AxumTls`.
    AxumTlsTokio,
}

/// Every ringkit server, in the order of the report.
pub const RINGKIT: [Target; 7] = [
    Target::Http,
    Target::Serve,
    Target::ServeTls,
    Target::Axum,
    Target::AxumTls,
    Target::Echo,
    Target::Log,
];

impl Target {
    /// Parse a `--server` value.
    pub fn parse(s: &str) -> Result<Target, String> {
        Ok(match s {
            "http" => Target::Http,
            "serve" => Target::Serve,
            "serve-tls" => Target::ServeTls,
            "axum" => Target::Axum,
            "axum-tls" => Target::AxumTls,
            "echo" => Target::Echo,
            "log" => Target::Log,
            "nginx" => Target::Nginx,
            "nginx-tls" => Target::NginxTls,
            "axum-tokio" => Target::AxumTokio,
            "axum-tls-tokio" => Target::AxumTlsTokio,
            _ => {
                return Err(format!(
                "{s:?}: want http, serve, serve-tls, axum, axum-tls, echo, log, nginx, nginx-tls, axum-tokio or axum-tls-tokio"
            ))
            }
        })
    }

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Target::Http => "http",
            Target::Serve => "serve",
            Target::ServeTls => "serve-tls",
            Target::Axum => "axum",
            Target::AxumTls => "axum-tls",
            Target::Echo => "echo",
            Target::Log => "log",
            Target::Nginx => "nginx",
            Target::NginxTls => "nginx-tls",
            Target::AxumTokio => "axum-tokio",
            Target::AxumTlsTokio => "axum-tls-tokio",
        }
    }

    /// It speaks HTTP.
    pub fn http(self) -> bool {
        !matches!(self, Target::Echo | Target::Log)
    }

    /// It speaks TLS.
    pub fn tls(self) -> bool {
        matches!(
            self,
            Target::ServeTls | Target::AxumTls | Target::NginxTls | Target::AxumTlsTokio
        )
    }

    /// It is nginx.
    pub fn nginx(self) -> bool {
        matches!(self, Target::Nginx | Target::NginxTls)
    }

    /// It takes `--max-connections` (nginx's `worker_connections` also
    /// counts its listeners; echo has no cap: its fd limit is one).
    pub fn has_cap(self) -> bool {
        !matches!(self, Target::Echo) && !self.nginx() && !self.peer()
    }

    /// It is a peer's server (`ringkit-peer`), not ringkit's.
    pub fn peer(self) -> bool {
        matches!(self, Target::AxumTokio | Target::AxumTlsTokio)
    }

    /// ringkit's axum, or the same app on tokio.
    pub fn axum(self) -> bool {
        matches!(
            self,
            Target::Axum | Target::AxumTls | Target::AxumTokio | Target::AxumTlsTokio
        )
    }

    /// The one backend it runs on whatever is asked (nginx: epoll; the
    /// tokio peer: tokio), or `None` for ringkit's servers.
    pub fn own_backend(self) -> Option<&'static str> {
        if self.nginx() {
            Some("epoll")
        } else if self.peer() {
            Some("tokio")
        } else {
            None
        }
    }
}

/// The timeouts a server states (what the budgets hold it to).
#[derive(Debug, Clone, Copy, Serialize, serde::Deserialize)]
pub struct Timeouts {
    /// A connection with nothing in progress (`None`: kept while the peer
    /// is alive).
    pub idle: Option<Duration>,
    /// A request head, handshake, preface or record from its first byte.
    pub header: Duration,
    /// A write that moves no byte (a client that never reads).
    pub send: Duration,
}

impl Timeouts {
    /// The defaults every ringkit server ships with (nginx: the same
    /// values are set in its configuration: `keepalive_timeout 60s`,
    /// `client_header_timeout 10s`, `client_body_timeout 10s`,
    /// `send_timeout 60s`).
    pub fn defaults(_t: Target) -> Timeouts {
        Timeouts {
            idle: Some(Duration::from_secs(60)),
            header: Duration::from_secs(10),
            send: Duration::from_secs(60),
        }
    }

    /// The short form (`cargo test`): the same rules, seconds instead of
    /// minutes.
    pub fn short(_t: Target) -> Timeouts {
        Timeouts {
            idle: Some(Duration::from_secs(4)),
            header: Duration::from_secs(2),
            send: Duration::from_secs(3),
        }
    }

    /// The server flags that set them (nothing when they are the
    /// defaults: a user's command line).
    fn flags(&self, t: Target, short: bool) -> Vec<String> {
        if !short {
            return Vec::new();
        }
        let s = |d: Duration| d.as_secs().to_string();
        let idle = self.idle.map(s).unwrap_or_default();
        let v: Vec<String> = match t {
            Target::Echo => vec![
                "--idle-timeout".into(),
                idle,
                "--send-timeout".into(),
                s(self.send),
            ],
            Target::Log => vec![
                "--idle-timeout-secs".into(),
                idle,
                "--frame-timeout-secs".into(),
                s(self.header),
            ],
            _ => vec![
                "--idle-timeout".into(),
                idle,
                "--header-timeout".into(),
                s(self.header),
                "--send-timeout".into(),
                s(self.send),
            ],
        };
        v
    }
}

/// Files, certificate and log directory of one run.
#[derive(Debug)]
pub struct Site {
    /// Document root: `small.txt` (3 bytes), `f16.bin` (16 KiB),
    /// `big.bin` (1 MiB).
    pub root: PathBuf,
    /// Scratch (the log's directory, nginx's files).
    pub scratch: PathBuf,
    /// PEM certificate and key for `localhost`.
    pub cert: PathBuf,
    /// See `cert`.
    pub key: PathBuf,
    /// What clients trust.
    pub ca: CertificateDer<'static>,
}

impl Site {
    /// Make the files under `dir` (which must be empty).
    pub fn make(dir: &Path) -> io::Result<Site> {
        // Absolute: nginx reads relative paths from its own prefix.
        let dir = &std::path::absolute(dir)?;
        let root = dir.join("www");
        let scratch = dir.join("scratch");
        std::fs::create_dir_all(&root)?;
        std::fs::create_dir_all(&scratch)?;
        std::fs::write(root.join("small.txt"), b"hi\n")?;
        std::fs::write(root.join("f16.bin"), vec![b'x'; 16 * 1024])?;
        std::fs::write(root.join("big.bin"), vec![b'y'; 1 << 20])?;
        let (cert, key, ca) = super::super::tls::make_cert(dir)?;
        Ok(Site {
            root,
            scratch,
            cert,
            key,
            ca,
        })
    }
}

/// Where and how a server is started.
#[derive(Debug)]
pub struct Launch<'a> {
    /// The `ringkit` binary.
    pub exe: &'a Path,
    /// `uring` or `epoll`.
    pub backend: &'a str,
    /// Its address.
    pub addr: SocketAddr,
    /// `--max-connections`.
    pub cap: usize,
    /// Files and certificate.
    pub site: &'a Site,
    /// Its timeouts.
    pub timeouts: &'a Timeouts,
    /// Pass the timeouts as flags (the short form).
    pub short: bool,
    /// A number unique in the run (the log's and nginx's directories).
    pub run: usize,
    /// `--max-buffered-mib` (the input budget per thread), when not the
    /// server's default.
    pub input_mib: Option<usize>,
}

/// The command that starts `t` as `l` says.
pub fn command(t: Target, l: &Launch) -> io::Result<Vec<String>> {
    let (exe, backend, addr, site, timeouts) = (l.exe, l.backend, l.addr, l.site, l.timeouts);
    let (cap, short, run) = (l.cap, l.short, l.run);
    let exe = exe.display().to_string();
    let a = addr.to_string();
    let root = site.root.display().to_string();
    let (cert, key) = (
        site.cert.display().to_string(),
        site.key.display().to_string(),
    );
    let mut v: Vec<String> = match t {
        Target::Http => vec![exe, "http".into()],
        Target::Serve => vec![exe, "serve".into(), root],
        Target::ServeTls => vec![
            exe,
            "serve".into(),
            root,
            "--tls-cert".into(),
            cert,
            "--tls-key".into(),
            key,
        ],
        Target::Axum => vec![exe, "axum".into()],
        Target::AxumTls => vec![
            exe,
            "axum".into(),
            "--tls-cert".into(),
            cert,
            "--tls-key".into(),
            key,
        ],
        Target::Echo => vec![exe, "echo".into()],
        Target::Log => {
            let dir = site.scratch.join(format!("log-{run}"));
            vec![
                exe,
                "log".into(),
                "serve".into(),
                "--dir".into(),
                dir.display().to_string(),
            ]
        }
        Target::AxumTokio => {
            let peer = crate::harness::peers::peer_binary(l.exe).map_err(io::Error::other)?;
            return Ok(vec![peer.display().to_string(), "axum-http".into(), a]);
        }
        Target::AxumTlsTokio => {
            let peer = crate::harness::peers::peer_binary(l.exe).map_err(io::Error::other)?;
            return Ok(vec![
                peer.display().to_string(),
                "axum-https".into(),
                a,
                cert,
                key,
            ]);
        }
        Target::Nginx | Target::NginxTls => {
            let dir = site.scratch.join(format!("nginx-{run}"));
            std::fs::create_dir_all(&dir)?;
            let conf = nginx_conf(&dir, addr, site, t.tls(), timeouts);
            let path = dir.join("nginx.conf");
            std::fs::write(&path, conf)?;
            return Ok(vec![
                crate::http::NGINX.into(),
                "-c".into(),
                path.display().to_string(),
            ]);
        }
    };
    v.extend(["--addr".into(), a, "--backend".into(), backend.into()]);
    if t.has_cap() {
        v.extend(["--max-connections".into(), cap.to_string()]);
    }
    if let Some(mib) = l.input_mib {
        v.extend(["--max-buffered-mib".into(), mib.to_string()]);
    }
    v.extend(timeouts.flags(t, short));
    Ok(v)
}

/// nginx serving `site.root`, one worker, with `timeouts`.
fn nginx_conf(dir: &Path, addr: SocketAddr, site: &Site, tls: bool, t: &Timeouts) -> String {
    let d = dir.display();
    let secs = |x: Duration| x.as_secs();
    let ssl = if tls {
        format!(
            "ssl_certificate {};\n        ssl_certificate_key {};\n",
            site.cert.display(),
            site.key.display()
        )
    } else {
        String::new()
    };
    format!(
        "worker_processes 1;
daemon off;
master_process off;
error_log {d}/error.log;
pid {d}/nginx.pid;
events {{ worker_connections 16384; use epoll; }}
http {{
    access_log off;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    keepalive_timeout {idle}s;
    client_header_timeout {h}s;
    client_body_timeout {h}s;
    send_timeout {s}s;
    sendfile on;
    server {{
        listen {addr}{l};
        {ssl}        root {root};
    }}
}}
",
        idle = t.idle.map_or(60, secs),
        h = secs(t.header),
        s = secs(t.send),
        l = if tls { " ssl" } else { "" },
        root = site.root.display(),
    )
}

/// A client's connection: plain TCP or rustls over it.
#[derive(Debug)]
pub enum Conn {
    /// In the clear.
    Plain(TcpStream),
    /// TLS.
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Read for Conn {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(b),
            Conn::Tls(s) => s.read(b),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(b),
            Conn::Tls(s) => s.write(b),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Tls(s) => s.flush(),
        }
    }
}

impl Conn {
    /// The TCP socket under it.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(s) => &s.sock,
        }
    }
}

/// Connect to `t` (TLS handshake done), with `limit` on every step.
pub fn connect(
    t: Target,
    addr: SocketAddr,
    tls: &Arc<rustls::ClientConfig>,
    limit: Duration,
) -> io::Result<Conn> {
    let tcp = TcpStream::connect_timeout(&addr, limit)?;
    tcp.set_read_timeout(Some(limit))?;
    tcp.set_write_timeout(Some(limit))?;
    tcp.set_nodelay(true)?;
    if !t.tls() {
        return Ok(Conn::Plain(tcp));
    }
    let name = ServerName::try_from("localhost").map_err(io::Error::other)?;
    let c = rustls::ClientConnection::new(tls.clone(), name).map_err(io::Error::other)?;
    let mut s = rustls::StreamOwned::new(c, tcp);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock)?;
    }
    Ok(Conn::Tls(Box::new(s)))
}

/// The path of a small response.
pub fn small_path(t: Target) -> &'static str {
    match t {
        Target::Http => "/",
        t if t.axum() => "/",
        _ => "/small.txt",
    }
}

/// The path of a ~16 KiB response (`ringkit http` serves only `/`).
pub fn large_path(t: Target) -> &'static str {
    match t {
        Target::Http => "/",
        t if t.axum() => "/bytes/16384",
        _ => "/f16.bin",
    }
}

/// The path of a 1 MiB response.
pub fn huge_path(t: Target) -> &'static str {
    match t {
        Target::Http => "/",
        t if t.axum() => "/bytes/1048576",
        _ => "/big.bin",
    }
}

/// `n` pipelined requests for `path`.
pub fn gets(path: &str, n: usize) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .repeat(n)
        .into_bytes()
}

/// One HTTP/1.1 response read: its status code and body length.
pub fn read_response(c: &mut impl Read) -> io::Result<(u16, usize)> {
    let head = crate::torture::tls::read_head(c)?
        .ok_or_else(|| io::Error::other("response head over 16 KiB"))?;
    let head = String::from_utf8_lossy(&head);
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::other(format!("bad status line: {head:?}")))?;
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    io::copy(&mut (&mut *c).take(len as u64), &mut io::sink())?;
    Ok((status, len))
}

/// One length-prefixed record appended to a `log serve`, and its LSN read.
pub fn append(c: &mut impl ReadWrite, rec: &[u8]) -> io::Result<u64> {
    c.write_all(&(rec.len() as u32).to_le_bytes())?;
    c.write_all(rec)?;
    let mut lsn = [0u8; 8];
    c.read_exact(&mut lsn)?;
    Ok(u64::from_le_bytes(lsn))
}

/// Read and write.
pub trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// One well-behaved exchange on `c`: a small request answered 200 with
/// the right length, 16 bytes echoed, or a record given an LSN.
pub fn exchange(t: Target, c: &mut Conn) -> io::Result<()> {
    match t {
        Target::Echo => {
            let msg = *b"well-behaved 16b";
            c.write_all(&msg)?;
            let mut back = [0u8; 16];
            c.read_exact(&mut back)?;
            if back != msg {
                return Err(io::Error::other("echo: wrong bytes"));
            }
            Ok(())
        }
        Target::Log => append(c, b"well-behaved").map(drop),
        _ => {
            c.write_all(&gets(small_path(t), 1))?;
            let (status, _) = read_response(c)?;
            if status != 200 {
                return Err(io::Error::other(format!("status {status}")));
            }
            Ok(())
        }
    }
}

/// A well-behaved upload: a 20 000-byte body in two writes 50 ms apart,
/// answered with any status but a 5xx (the servers here take no uploads:
/// 405 or 404 is an answer; 503 is being turned away).
pub fn upload(c: &mut Conn) -> io::Result<()> {
    c.write_all(b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 20000\r\n\r\n")?;
    // A server may answer (405) and close before taking the body: what
    // counts is its answer.
    let _ = c.write_all(&[b'u'; 10_000]);
    std::thread::sleep(Duration::from_millis(50));
    let _ = c.write_all(&[b'u'; 10_000]);
    let (status, _) = read_response(c)?;
    if status >= 500 {
        return Err(io::Error::other(format!("upload: status {status}")));
    }
    Ok(())
}

/// The bytes a client sends first, trickled by the slow attacks: a
/// request head (HTTP), a ClientHello (TLS), a record (log), a message
/// (echo).
pub fn opening(t: Target, tls: &Arc<rustls::ClientConfig>) -> io::Result<Vec<u8>> {
    if t.tls() {
        let name = ServerName::try_from("localhost").map_err(io::Error::other)?;
        let mut c = rustls::ClientConnection::new(tls.clone(), name).map_err(io::Error::other)?;
        let mut hello = Vec::new();
        c.write_tls(&mut hello)?;
        return Ok(hello);
    }
    Ok(match t {
        Target::Echo => b"a message trickled a byte a second".to_vec(),
        Target::Log => {
            let rec = vec![b'r'; 64];
            let mut v = (rec.len() as u32).to_le_bytes().to_vec();
            v.extend(rec);
            v
        }
        _ => b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n"
            .to_vec(),
    })
}
