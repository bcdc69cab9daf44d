//! The send timeout (`ServerConfig::send_timeout`), on both backends, in
//! the clear and over TLS: clients that ask for a large file and never read
//! used to hold their connection slot forever; now each is closed once its
//! response has not moved for the timeout, and a new client is served. A
//! slow but steady reader of a large file is not cut off.

mod harness;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use harness::with_server;
use ringkit_http::static_files::StaticFiles;
use ringkit_http::ServerConfig;

const HUGE: u64 = 256 << 20;

/// A directory with a sparse 256 MiB file and a small one.
fn site() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let f = std::fs::File::create(dir.path().join("huge.bin")).unwrap();
    f.set_len(HUGE).unwrap();
    let steady: Vec<u8> = (0..2u32 << 20).map(|i| (i % 239) as u8).collect();
    std::fs::write(dir.path().join("steady.bin"), steady).unwrap();
    std::fs::write(dir.path().join("small.txt"), b"small\n").unwrap();
    dir
}

fn config() -> ServerConfig {
    ServerConfig {
        send_timeout: Duration::from_secs(1),
        max_connections: 3,
        ..ServerConfig::default()
    }
}

/// A client socket with a 4 KiB receive buffer (set before connecting).
fn small_window(addr: SocketAddr) -> std::net::TcpStream {
    let c = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    c.set_recv_buffer_size(4096).unwrap();
    c.connect(&addr.into()).unwrap();
    c.into()
}

fn get(addr: SocketAddr, path: &str) -> Vec<u8> {
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    out
}

/// Seconds until the server closed `c` (FIN or RST seen), without ever
/// reading from it; `None` if it has not within `limit`.
fn seen_closed_within(c: &std::net::TcpStream, limit: Duration) -> Option<f64> {
    use std::os::fd::AsRawFd;
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        let mut p = libc::pollfd {
            fd: c.as_raw_fd(),
            events: libc::POLLRDHUP,
            revents: 0,
        };
        // SAFETY: one valid pollfd; a 50 ms timeout.
        unsafe { libc::poll(&mut p, 1, 50) };
        if p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0 {
            return Some(t0.elapsed().as_secs_f64());
        }
    }
    None
}

fn have(tool: &str) -> bool {
    let ok = Command::new(tool).arg("--version").output().is_ok();
    if !ok {
        eprintln!("skipped: {tool} not installed");
    }
    ok
}

ringkit::test_all! {
    /// Five clients that never read, under a cap of three connections.
    async fn stalled_readers_are_closed_and_new_clients_served() {
        let dir = site();
        let files = StaticFiles::new(dir.path()).unwrap();
        with_server(config(), files, |addr| {
            let stalled: Vec<_> = (0..5)
                .map(|_| {
                    let mut c = small_window(addr);
                    c.write_all(b"GET /huge.bin HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
                    c
                })
                .collect();
            std::thread::sleep(Duration::from_secs(3));
            // A new client is served (the cap would refuse it if the
            // stalled ones still held their slots).
            let t0 = Instant::now();
            let got = get(addr, "/small.txt");
            assert!(got.starts_with(b"HTTP/1.1 200"), "{:?}", String::from_utf8_lossy(&got));
            assert!(got.ends_with(b"small\n"));
            assert!(t0.elapsed() < Duration::from_secs(5));
            // And each stalled connection was closed: reading it ends
            // (EOF or reset) long before the 256 MiB body.
            for mut c in stalled {
                c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                let mut n = 0u64;
                let mut buf = vec![0u8; 1 << 16];
                loop {
                    match c.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(k) => n += k as u64,
                    }
                }
                assert!(n < HUGE / 4, "a stalled connection kept sending ({n} bytes)");
            }
        })
        .await;
    }

    /// A client that asks for a large file and never reads sees the server
    /// close (a reset) soon after the send timeout, without reading a byte:
    /// a FIN queued behind the unread body would never reach it.
    async fn a_reader_that_never_reads_sees_the_close() {
        let dir = site();
        let files = StaticFiles::new(dir.path()).unwrap();
        with_server(config(), files, |addr| {
            let mut c = small_window(addr);
            c.write_all(b"GET /huge.bin HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            // Send timeout 1 s, and slack for a busy machine.
            let after = seen_closed_within(&c, Duration::from_secs(5));
            assert!(after.is_some(), "no FIN or RST within 5 s of a never-read request");
        })
        .await;
    }

    /// 2 MiB read 16 KiB every 20 ms (about 2.6 s, well over the 1 s send
    /// timeout): every byte arrives.
    async fn a_slow_steady_reader_gets_the_whole_file() {
        let dir = site();
        let files = StaticFiles::new(dir.path()).unwrap();
        with_server(config(), files, |addr| {
            let mut c = small_window(addr);
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            c.write_all(b"GET /steady.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .unwrap();
            let t0 = Instant::now();
            let mut all = Vec::new();
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                let n = c.read(&mut buf).expect("read");
                if n == 0 {
                    break;
                }
                all.extend_from_slice(&buf[..n]);
                std::thread::sleep(Duration::from_millis(20));
            }
            let body_at = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
            let want: Vec<u8> = (0..2u32 << 20).map(|i| (i % 239) as u8).collect();
            assert!(all[body_at..] == want[..], "body differs ({} bytes)", all.len() - body_at);
            assert!(t0.elapsed() > Duration::from_secs(2), "the reader was not slow");
        })
        .await;
    }

    /// The same over TLS: stalled TLS readers are closed, a new client is
    /// served, and a slow steady TLS reader gets all of a 2 MiB file
    /// (Python's ssl for all).
    async fn stalled_tls_readers_are_closed() {
        if !have("python3") {
            return;
        }
        let dir = site();
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let cert = dir.path().join("cert.pem");
        let key = dir.path().join("key.pem");
        std::fs::write(&cert, ck.cert.pem()).unwrap();
        std::fs::write(&key, ck.key_pair.serialize_pem()).unwrap();
        let tls = ringkit_tls::server_config(&cert, &key, &[b"http/1.1"]).unwrap();
        let listener = ringkit::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let files = StaticFiles::new(dir.path()).unwrap();
        ringkit::spawn(async move {
            let _ = ringkit_http::Server::from_listener(listener)
                .config(config())
                .tls(tls)
                .with_shutdown(std::future::pending())
                .serve(files)
                .await;
        });
        let script = format!(
            "import socket, ssl, time\n\
             ctx = ssl.create_default_context(cafile='{cert}')\n\
             def conn():\n\
             \x20   s = socket.socket()\n\
             \x20   s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)\n\
             \x20   s.connect(('127.0.0.1', {port}))\n\
             \x20   return ctx.wrap_socket(s, server_hostname='localhost')\n\
             stalled = []\n\
             for i in range(5):\n\
             \x20   try:\n\
             \x20       t = conn()\n\
             \x20       t.sendall(b'GET /huge.bin HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n\
             \x20       stalled.append(t)\n\
             \x20   except (OSError, ssl.SSLError):\n\
             \x20       pass\n\
             print('stalled', len(stalled))\n\
             time.sleep(3)\n\
             t = conn()\n\
             t.settimeout(10)\n\
             t.sendall(b'GET /small.txt HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n')\n\
             d = b''\n\
             while True:\n\
             \x20   c = t.recv(65536)\n\
             \x20   if not c: break\n\
             \x20   d += c\n\
             print('fresh', d.startswith(b'HTTP/1.1 200'), d.endswith(b'small\\n'))\n\
             closed = 0\n\
             for t in stalled:\n\
             \x20   t.settimeout(20)\n\
             \x20   n = 0\n\
             \x20   try:\n\
             \x20       while True:\n\
             \x20           c = t.recv(65536)\n\
             \x20           if not c: break\n\
             \x20           n += len(c)\n\
             \x20   except (OSError, ssl.SSLError):\n\
             \x20       pass\n\
             \x20   closed += n < {limit}\n\
             print('closed', closed)\n\
             t = conn()\n\
             t.settimeout(20)\n\
             t.sendall(b'GET /steady.bin HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n')\n\
             d = b''\n\
             start = time.time()\n\
             while True:\n\
             \x20   c = t.recv(16384)\n\
             \x20   if not c: break\n\
             \x20   d += c\n\
             \x20   time.sleep(0.02)\n\
             body = d[d.index(b'\\r\\n\\r\\n') + 4:]\n\
             want = bytes(i % 239 for i in range(2 << 20))\n\
             print('steady', body == want, time.time() - start > 2)\n",
            cert = cert.display(),
            port = addr.port(),
            limit = HUGE / 4,
        );
        let out = harness::client(move || Command::new("python3").arg("-c").arg(script).output().unwrap()).await;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{text} {}", String::from_utf8_lossy(&out.stderr));
        // The cap of three refuses the last two stalled clients' handshakes.
        assert_eq!(text, "stalled 3\nfresh True True\nclosed 3\nsteady True True\n");
    }
}
