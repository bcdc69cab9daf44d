//! Real servers for the app study and its tests: PostgreSQL and Redis
//! from the system's packages, each in a temp dir on a free loopback port
//! (optionally pinned to a CPU), stopped by pid when dropped; and a small
//! upstream HTTP server. A missing binary is `None` with the reason
//! printed (`.ci/run` installs the packages).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A free loopback port (bound, then released).
pub fn free_port() -> u16 {
    super::child::free_addr()
        .expect("a free loopback port")
        .port()
}

pub use super::child::wait_for_port;

fn stop(child: &mut Child, signal: i32) {
    super::child::stop(child, signal, Duration::from_secs(10));
}

/// The directory of PostgreSQL's server binaries (`initdb`, `postgres`):
/// on PATH, or Debian's /usr/lib/postgresql/N/bin (the newest).
fn pg_bin() -> Option<PathBuf> {
    if let Ok(out) = Command::new("sh")
        .args(["-c", "command -v initdb"])
        .output()
    {
        let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() && !p.is_empty() {
            let p = std::fs::canonicalize(p).ok()?;
            return p.parent().map(Path::to_path_buf);
        }
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|d| d.join("initdb").exists() && d.join("postgres").exists())
        .collect();
    dirs.sort_by_key(|d| {
        d.parent()
            .and_then(|v| v.file_name()?.to_str()?.parse::<u32>().ok())
            .unwrap_or(0)
    });
    dirs.pop()
}

/// PostgreSQL refuses to run as root: under root it runs as the
/// `postgres` user (created by the package).
fn pg_user() -> Option<(u32, u32)> {
    // SAFETY: plain getuid.
    if unsafe { libc::getuid() } != 0 {
        return None;
    }
    let name = std::ffi::CString::new("postgres").unwrap();
    // SAFETY: getpwnam returns a pointer to static storage or null.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    if pw.is_null() {
        return None;
    }
    // SAFETY: non-null passwd entry.
    unsafe { Some(((*pw).pw_uid, (*pw).pw_gid)) }
}

/// Pin a child to `cpu` as it starts (`None`: wherever the kernel likes).
fn pin(cmd: &mut Command, cpu: Option<usize>) {
    super::child::prepare(cmd, cpu, false, false);
}

/// A PostgreSQL server of its own (trust auth, superuser `app`, no fsync).
#[derive(Debug)]
pub struct Postgres {
    bin: PathBuf,
    dir: tempfile::TempDir,
    /// Its port on 127.0.0.1.
    pub port: u16,
    child: Option<Child>,
    user: Option<(u32, u32)>,
    cpu: Option<usize>,
}

impl Postgres {
    /// initdb in a temp dir and start the server; `None` (printed) when
    /// PostgreSQL is not installed or cannot start here.
    pub fn start(cpu: Option<usize>) -> Option<Postgres> {
        let Some(bin) = pg_bin() else {
            eprintln!("skipped: PostgreSQL not installed (initdb, postgres not found)");
            return None;
        };
        let user = pg_user();
        // SAFETY: plain getuid.
        let root = unsafe { libc::getuid() } == 0;
        if root && user.is_none() {
            eprintln!("skipped: running as root and there is no `postgres` user to run PostgreSQL");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();
        }
        let data = dir.path().join("data");
        let mut initdb = Command::new(bin.join("initdb"));
        initdb
            .args(["-A", "trust", "-U", "app", "--no-sync", "-D"])
            .arg(&data)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some((uid, gid)) = user {
            initdb.uid(uid).gid(gid);
        }
        let out = initdb.output().unwrap();
        if !out.status.success() {
            eprintln!(
                "skipped: initdb failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            return None;
        }
        let mut pg = Postgres {
            bin,
            dir,
            port: free_port(),
            child: None,
            user,
            cpu,
        };
        if !pg.start_server() {
            eprintln!("skipped: PostgreSQL did not start");
            return None;
        }
        Some(pg)
    }

    fn start_server(&mut self) -> bool {
        let mut cmd = Command::new(self.bin.join("postgres"));
        cmd.arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-p", &self.port.to_string()])
            .args(["-c", "listen_addresses=127.0.0.1"])
            .arg("-c")
            .arg(format!(
                "unix_socket_directories={}",
                self.dir.path().display()
            ))
            .args(["-c", "fsync=off", "-c", "max_connections=200"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some((uid, gid)) = self.user {
            cmd.uid(uid).gid(gid);
        }
        pin(&mut cmd, self.cpu);
        match cmd.spawn() {
            Ok(c) => self.child = Some(c),
            Err(_) => return false,
        }
        // Ready when a query works (the port opens before recovery ends).
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            let ok = Command::new(self.bin.join("psql"))
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
                .args(["-U", "app", "-d", "postgres", "-c", "select 1"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if ok {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    /// `postgres://app@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://app@127.0.0.1:{}/postgres", self.port)
    }

    /// The server's pid.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Fast shutdown (SIGINT), waiting for the process to exit.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            stop(&mut c, libc::SIGINT);
        }
    }

    /// Start again on the same port and data; false if it did not come up.
    pub fn restart(&mut self) -> bool {
        self.stop();
        self.start_server()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A Redis server of its own (no persistence).
#[derive(Debug)]
pub struct Redis {
    dir: tempfile::TempDir,
    /// Its port on 127.0.0.1.
    pub port: u16,
    child: Option<Child>,
    cpu: Option<usize>,
}

impl Redis {
    /// Start `redis-server`; `None` (printed) when it is not installed.
    pub fn start(cpu: Option<usize>) -> Option<Redis> {
        let ok = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            eprintln!("skipped: redis-server not installed");
            return None;
        }
        let mut r = Redis {
            dir: tempfile::tempdir().unwrap(),
            port: free_port(),
            child: None,
            cpu,
        };
        if !r.start_server() {
            eprintln!("skipped: redis-server did not start");
            return None;
        }
        Some(r)
    }

    fn start_server(&mut self) -> bool {
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        pin(&mut cmd, self.cpu);
        match cmd.spawn() {
            Ok(c) => self.child = Some(c),
            Err(_) => return false,
        }
        wait_for_port(
            SocketAddr::from(([127, 0, 0, 1], self.port)),
            Duration::from_secs(10),
        )
    }

    /// `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The server's pid.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Stop it (SIGTERM), waiting for the process to exit.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            stop(&mut c, libc::SIGTERM);
        }
    }

    /// Start again on the same port; false if it did not come up.
    pub fn restart(&mut self) -> bool {
        self.stop();
        self.start_server()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A tiny HTTP/1.1 upstream: answers every request with `upstream ok`,
/// keep-alive, until dropped.
#[derive(Debug)]
pub struct Upstream {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    conns: Arc<std::sync::Mutex<Vec<TcpStream>>>,
}

impl Upstream {
    /// Listen on a free loopback port, serving from plain threads.
    pub fn start() -> Upstream {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        l.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let conns: Arc<std::sync::Mutex<Vec<TcpStream>>> = Arc::default();
        let (st, cs) = (stop.clone(), conns.clone());
        std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((s, _)) => {
                        cs.lock().unwrap().push(s.try_clone().unwrap());
                        std::thread::spawn(move || serve_upstream(s));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Upstream { addr, stop, conns }
    }

    /// `http://ADDR/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for c in self.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }
}

fn serve_upstream(s: TcpStream) {
    s.set_nonblocking(false).ok();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut w = s;
    loop {
        let mut len = 0usize;
        loop {
            let mut line = String::new();
            match r.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line == "\r\n" {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; len];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        let resp = "HTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\nupstream ok";
        if w.write_all(resp.as_bytes()).is_err() {
            return;
        }
    }
}

/// A running child process, stopped by pid (SIGINT, then SIGKILL after
/// 10 s) when dropped.
#[derive(Debug)]
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        stop(&mut self.0, libc::SIGINT);
    }
}

/// An example binary of this workspace next to the running test binary
/// (`target/<profile>/examples/NAME`, built by the workspace's `cargo
/// test`), or `None` with the reason printed (a skip).
pub fn built_example(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.parent()?.join("examples").join(name);
    if p.exists() {
        Some(p)
    } else {
        eprintln!(
            "skipped: example {name} not built at {} (run the workspace's `cargo test`)",
            p.display()
        );
        None
    }
}
