//! `ringkit http` (the benchmark server) and `ringkit serve DIR` (static files).
//!
//! Both start through [`ringkit::serve_threads`]: one runtime per thread, each with its own
//! `SO_REUSEPORT` listener on the same address, and stop gracefully on
//! `SIGINT`/`SIGTERM`: no new connections, in-flight responses finish, exit 0.

use std::cell::Cell;
use std::io;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use clap::Args;
use ringkit_http::static_files::StaticFiles;
use ringkit_http::{
    FileSend, Handler, Limits, Method, Request, Response, Server, ServerConfig, StatusCode,
};

/// Settings shared by both servers.
/// The timeouts and connection cap of every HTTP server (`http`, `serve`,
/// `axum`).
#[derive(Args, Debug, Clone)]
pub struct ConnArgs {
    /// Close a connection with nothing in progress after this many seconds
    /// (idle keep-alive, or nothing sent since the accept).
    #[arg(long, default_value_t = 60)]
    pub idle_timeout: u64,
    /// Seconds a client may take to send a request head once its first
    /// byte has arrived (slowloris defence; a TLS handshake too; for
    /// `http` and `serve` the body as well); over it the server answers 408
    /// or closes.
    #[arg(long, default_value_t = 10)]
    pub header_timeout: u64,
    /// Close a connection whose response has not moved a byte for this
    /// many seconds (a client that stops reading; nginx's send_timeout).
    #[arg(long, default_value_t = 60)]
    pub send_timeout: u64,
    /// Connections served at once per thread; beyond it new connections
    /// are accepted and closed at once.
    #[arg(long, default_value_t = 10_000)]
    pub max_connections: usize,
    /// MiB of input held at most per thread, across all connections
    /// (incomplete heads; for `http` and `serve` also bodies being read); a
    /// connection that would take more is answered 503 (`axum`: closed).
    #[arg(long, default_value_t = 32)]
    pub max_buffered_mib: usize,
}

impl ConnArgs {
    /// A flag's seconds as a duration (at least 1 s).
    pub fn secs(s: u64) -> Duration {
        Duration::from_secs(s.max(1))
    }
}

#[derive(Args, Debug, Clone)]
#[command(mut_arg("addr", |a| a.default_value("127.0.0.1:8080")))]
pub struct ServerArgs {
    /// Address (default 127.0.0.1:8080), backend, threads, CPUs.
    #[command(flatten)]
    launch: ringkit::LaunchArgs,
    /// Timeouts and the connection cap.
    #[command(flatten)]
    conn: ConnArgs,
    /// Largest request body accepted, in bytes (larger: 413).
    #[arg(long, default_value_t = 1024 * 1024)]
    max_body: u64,
    /// io_uring: slots of the registered file table that connections are
    /// promoted into after 16 operations (keep-alive connections; a
    /// one-request connection never is); 0 = plain fds.
    #[arg(long, default_value_t = 4096, env = "RINGKIT_FIXED_FILES")]
    fixed_files: u32,
    /// io_uring: let one receive completion cover several buffers when a
    /// client pipelines more than one holds (IORING_RECVSEND_BUNDLE, Linux
    /// 6.10; ignored where the kernel lacks it): on or off.
    #[arg(long, default_value = "on", value_parser = crate::parse_on_off, action = clap::ArgAction::Set, env = "RINGKIT_RECV_BUNDLE")]
    recv_bundle: bool,
    /// File bodies over 16 KiB: sendfile = sendfile(2) after a head sent
    /// with MSG_MORE, no copy through user memory; splice = splice(2) file
    /// -> pipe -> socket, corked; copy = read each piece into a buffer and
    /// send it (on io_uring all through the ring). `on` is sendfile, `off`
    /// is copy.
    #[arg(long, default_value = "sendfile", value_parser = FileSend::parse)]
    zero_copy: FileSend,
    /// Write this thread's runtime counters (io_uring enters, SQEs, CQEs,
    /// syscalls, accepted connections) as JSON to PATH.<thread> at start and
    /// on SIGUSR1, from a writer thread (never on the serving loop);
    /// `ringkit compare` reads them.
    #[arg(long)]
    stats: Option<PathBuf>,
}

impl ServerArgs {
    fn config(&self) -> ServerConfig {
        ServerConfig {
            limits: Limits {
                max_body_bytes: self.max_body,
                ..Limits::default()
            },
            idle_timeout: ConnArgs::secs(self.conn.idle_timeout),
            header_timeout: ConnArgs::secs(self.conn.header_timeout),
            send_timeout: ConnArgs::secs(self.conn.send_timeout),
            max_connections: self.conn.max_connections.max(1),
            file_send: self.zero_copy,
            max_buffered_bytes: self.conn.max_buffered_mib.max(1) << 20,
            ..ServerConfig::default()
        }
    }
}

/// `ringkit http`: the benchmark server (`GET /` answers 200, empty body).
#[derive(Args, Debug)]
pub struct HttpArgs {
    #[command(flatten)]
    server: ServerArgs,
    /// Make every `GET /` response this many bytes longer with an `X-Pad`
    /// header (at least 10; 0: none): to send the same bytes as a server
    /// with more headers (nginx adds 39: `Server` and `Connection`) and see
    /// what they cost.
    #[arg(long, default_value_t = 0)]
    pad: usize,
}

/// `ringkit serve DIR`: a static file server.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Directory to serve; a request for a directory serves its index.html.
    dir: PathBuf,
    #[command(flatten)]
    server: ServerArgs,
    /// Serve dot-files (`.env`, `.git/…`) too; by default they are 404.
    #[arg(long)]
    allow_hidden: bool,
    /// Add `Cache-Control: VALUE` to every file response.
    #[arg(long)]
    cache_control: Option<String>,
    /// Open-file cache: files kept open with their metadata, per thread
    /// (nginx's open_file_cache); a hit makes no lookup, open or close.
    /// 0 turns it off.
    #[arg(long, default_value_t = 1000)]
    open_file_cache: usize,
    /// Seconds a cached file is served before its path is looked up again
    /// (a replaced, truncated or deleted file is seen after at most this).
    #[arg(long, default_value_t = 1.0, value_parser = parse_secs)]
    open_file_cache_valid: f64,
    /// HTTPS (ALPN http/1.1): file bodies are then read and encrypted (no
    /// kTLS, no sendfile).
    #[command(flatten)]
    tls: ringkit_tls::TlsArgs,
}

/// Seconds: a finite, non-negative number.
fn parse_secs(v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(s) if (0.0..1e9).contains(&s) => Ok(s),
        Ok(_) => Err(format!("{v:?}: want seconds, at least 0")),
        Err(e) => Err(format!("{v:?}: {e}")),
    }
}

/// The benchmark handler, as cheap as it can be: no router, no allocation.
/// `GET`/`HEAD /` → 200 with an empty body (like nginx `return 200;`),
/// another method on `/` → 405, any other path → 404.
async fn bench(req: Request) -> Response {
    if req.path() != "/" {
        return Response::new(StatusCode::NOT_FOUND);
    }
    match req.method() {
        Method::Get | Method::Head => Response::ok(),
        _ => Response::new(StatusCode::METHOD_NOT_ALLOWED).header("allow", "GET, HEAD"),
    }
}

pub fn http(a: HttpArgs) -> io::Result<()> {
    if a.pad == 0 {
        return run("ringkit http", &a.server, |server, _| (server, bench));
    }
    // "x-pad: " (7) + value + CRLF (2).
    let value: &'static str = "p".repeat(a.pad.saturating_sub(9).max(1)).leak();
    run("ringkit http", &a.server, move |server, _| {
        let padded = move |req: Request| async move {
            let r = bench(req).await;
            if r.status() == StatusCode::OK {
                r.header("x-pad", value)
            } else {
                r
            }
        };
        (server, padded)
    })
}

pub fn serve(a: ServeArgs) -> io::Result<()> {
    let mut files = StaticFiles::new(&a.dir)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", a.dir.display())))?
        .allow_hidden(a.allow_hidden)
        .open_file_cache(a.open_file_cache)
        .open_file_cache_valid(std::time::Duration::from_secs_f64(a.open_file_cache_valid));
    if let Some(cc) = &a.cache_control {
        files = files.cache_control(cc.clone());
    }
    let tls = a.tls.server_config(&[b"http/1.1"])?;
    eprintln!(
        "ringkit serve: serving {}{} (open-file cache: {})",
        a.dir.display(),
        if tls.is_some() { " over TLS" } else { "" },
        match a.open_file_cache {
            0 => "off".to_string(),
            n => format!(
                "{n} files per thread, revalidated every {} s",
                a.open_file_cache_valid
            ),
        }
    );
    run("ringkit serve", &a.server, move |server, _| {
        let server = match &tls {
            Some(cfg) => server.tls(cfg.clone()),
            None => server,
        };
        (server, files.clone())
    })
}

/// Start the threads ([`ringkit_http::serve`]), each serving what `make`
/// returns, and wait for them (they return after a graceful shutdown).
fn run<H, F>(name: &'static str, args: &ServerArgs, make: F) -> io::Result<()>
where
    H: Handler,
    F: Fn(Server, usize) -> (Server, H) + Send + Sync + Clone + 'static,
{
    let launch = args.launch.launch_config().builder(
        ringkit::Builder::new()
            .backend(args.launch.backend)
            .fixed_files(args.fixed_files)
            .recv_bundle(args.recv_bundle),
    );
    let addr = args.launch.addr_or("127.0.0.1:8080");
    let stats = args.stats.clone();
    ringkit_http::serve(launch, addr, args.config(), move |server, i| {
        let local = server.local_addr().unwrap_or(addr);
        eprintln!(
            "{name}: thread {i} listening on {local} with {}",
            ringkit::backend_report().expect("inside a runtime")
        );
        let server = match &stats {
            Some(path) => {
                let accepted = Rc::new(Cell::new(0u64));
                ringkit::publish::spawn_writer(path.clone(), i, accepted.clone());
                server.count_accepted(accepted)
            }
            None => server,
        };
        make(server, i)
    })
    .map_err(|e| io::Error::new(e.kind(), format!("{name}: {e}")))?;
    if let Some(sig) = ringkit::signal::requested_by() {
        eprintln!("{name}: stopped (signal {sig})");
    }
    Ok(())
}
