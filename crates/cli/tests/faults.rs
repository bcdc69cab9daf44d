//! Faults injected on purpose into `ringkit echo` (a child process), each on
//! both backends: after each one the server must still be up and echo
//! correct data, and exit 0 on `SIGTERM`.
//!
//! - `RLIMIT_NOFILE` reached: `accept` fails with `EMFILE`;
//! - a provided-buffer ring of 2 buffers: multishot receives hit `ENOBUFS`
//!   (with receive bundles, and with `--recv-bundle off`);
//! - a ring of 4 SQ entries and 16 CQ entries: full SQ, CQ overflow;
//! - peers that reset (RST) while the server is sending to them;
//! - `SIGPIPE` at its default (fatal) disposition when the server starts;
//! - `SIGTERM` with messages in flight: they complete, new connections are
//!   refused, idle connections are closed, exit code 0.
//!
//! (The HTTP server's panicking handler has its own test in the HTTP crate.)

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Generous: the machine may be busy.
const LIMIT: Duration = Duration::from_secs(60);

struct Server {
    child: Child,
    addr: SocketAddr,
    lines: Arc<Mutex<Vec<String>>>,
    /// Reads the child's stderr until it closes (at exit).
    reader: Option<std::thread::JoinHandle<()>>,
    /// SIGTERM was sent (a second one would end the server at once).
    signalled: std::cell::Cell<bool>,
}

impl Server {
    /// Start `ringkit echo` on `backend` with `extra` flags; `None` (after
    /// printing why) when io_uring is unavailable here.
    fn start(backend: &str, extra: &[&str], sigpipe_default: bool) -> Option<Server> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringkit"));
        cmd.args(["echo", "--addr", &addr.to_string(), "--backend", backend])
            .args(extra)
            .env_remove("RINGKIT_BACKEND")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if sigpipe_default {
            // SAFETY: runs in the child before exec; signal(2) is
            // async-signal-safe.
            unsafe {
                cmd.pre_exec(|| {
                    libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().expect("start ringkit echo");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let err = child.stderr.take().unwrap();
        let l2 = lines.clone();
        let reader = std::thread::spawn(move || {
            for l in BufReader::new(err).lines() {
                let Ok(l) = l else { break };
                eprintln!("  [server] {l}");
                l2.lock().unwrap().push(l);
            }
        });
        let mut s = Server {
            child,
            addr,
            lines,
            reader: Some(reader),
            signalled: std::cell::Cell::new(false),
        };
        let t0 = Instant::now();
        while s.count("listening on") == 0 {
            if let Some(st) = s.child.try_wait().unwrap() {
                let all = s.lines.lock().unwrap().join("\n");
                if backend == "uring" && all.contains("io_uring backend unavailable") {
                    eprintln!("skipped: io_uring unavailable here: {all}");
                    return None;
                }
                panic!("server exited at start ({st}):\n{all}");
            }
            assert!(t0.elapsed() < LIMIT, "server did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
        Some(s)
    }

    fn count(&self, pat: &str) -> usize {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(pat))
            .count()
    }

    fn wait_line(&self, pat: &str) {
        let t0 = Instant::now();
        while self.count(pat) == 0 {
            assert!(t0.elapsed() < LIMIT, "no server line with {pat:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    fn sigterm(&self) {
        self.signalled.set(true);
        // SAFETY: kill(2) on our own, not yet reaped, child.
        let rc = unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        assert_eq!(rc, 0, "kill: {}", io::Error::last_os_error());
    }

    /// SIGTERM (unless sent already: a second one ends the server at
    /// once), then the exit code must be 0, and no unexpected error lines.
    /// Returns the server's stderr.
    fn stop_cleanly(mut self) -> Vec<String> {
        if !self.signalled.get() {
            self.sigterm();
        }
        let t0 = Instant::now();
        let st = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            assert!(t0.elapsed() < LIMIT, "server did not exit after SIGTERM");
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(st.code(), Some(0), "exit after SIGTERM: {st}");
        // Every line the server wrote before exiting.
        if let Some(r) = self.reader.take() {
            r.join().unwrap();
        }
        let errors: Vec<String> = self
            .lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains("error:") && !l.contains("Too many open files"))
            .cloned()
            .collect();
        assert!(errors.is_empty(), "server errors: {errors:?}");
        let lines = self.lines.lock().unwrap().clone();
        lines
    }
}

/// A runtime counter from the server's exit line ("... name=N ...").
fn counter(lines: &[String], name: &str) -> u64 {
    lines
        .iter()
        .find_map(|l| l.split(&format!(" {name}=")).nth(1))
        .and_then(|v| v.split(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in the server's runtime counters"))
}

/// A figure from the server's final summary line ("..., 7 peer resets, ...").
fn summary_figure(lines: &[String], name: &str) -> u64 {
    let line = lines
        .iter()
        .find(|l| l.contains("stopped:"))
        .expect("the server's summary line");
    line.split(", ")
        .find_map(|part| part.strip_suffix(name))
        .and_then(|n| n.trim().rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {name:?} in {line:?}"))
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.alive() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Deterministic test bytes.
fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, LIMIT).expect("connect");
    s.set_read_timeout(Some(LIMIT)).unwrap();
    s.set_write_timeout(Some(LIMIT)).unwrap();
    s
}

/// Echo `len` bytes on `s` (written from another thread, so large messages
/// cannot deadlock) and check them.
fn echo_on(s: &TcpStream, seed: u64, len: usize) {
    let msg = pattern(seed, len);
    let mut w = s.try_clone().unwrap();
    let m2 = msg.clone();
    let writer = std::thread::spawn(move || w.write_all(&m2));
    let mut back = vec![0u8; len];
    (&*s).read_exact(&mut back).expect("read the echo");
    writer.join().unwrap().expect("write the message");
    assert!(back == msg, "a {len}-byte echo came back different");
}

/// Fresh connections, every size: the server still serves correct data.
fn still_serves(addr: SocketAddr) {
    for (i, len) in [1, 1000, 65_536, 1 << 20].into_iter().enumerate() {
        echo_on(&connect(addr), 1000 + i as u64, len);
    }
}

fn set_linger_zero(s: &TcpStream) {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on a valid socket with a valid linger struct.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "SO_LINGER: {}", io::Error::last_os_error());
}

macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn uring() {
                    super::$name("uring");
                }
                #[test]
                fn epoll() {
                    super::$name("epoll");
                }
            }
        )*
    };
}

both_backends!(
    emfile_on_accept,
    tiny_buffer_ring,
    tiny_buffer_ring_without_bundles,
    tiny_ring,
    linked_sends_on_a_tiny_ring,
    send_bundles_on_a_tiny_ring,
    reset_during_send,
    reset_during_linked_sends,
    reset_during_send_bundles,
    sigpipe_never_kills,
    sigterm_graceful,
);

/// Soft RLIMIT_NOFILE 32: more connections than fds. Accept fails with
/// EMFILE (and backs off) while the rest wait in the backlog; once some
/// close, every waiting connection is served, and so are new ones.
fn emfile_on_accept(backend: &str) {
    let Some(srv) = Server::start(backend, &["--nofile", "32"], false) else {
        return;
    };
    let conns: Vec<TcpStream> = (0..60).map(|_| connect(srv.addr)).collect();
    for (i, c) in conns.iter().enumerate() {
        (&*c).write_all(&pattern(i as u64, 100)).unwrap();
    }
    srv.wait_line("Too many open files");
    // Close the first 40 (served or not); the last 20 must then be served.
    let mut conns = conns;
    let waiting = conns.split_off(40);
    drop(conns);
    for (i, c) in waiting.iter().enumerate() {
        let mut back = vec![0u8; 100];
        (&*c)
            .read_exact(&mut back)
            .expect("a waiting connection is served");
        assert_eq!(back, pattern(40 + i as u64, 100));
    }
    drop(waiting);
    still_serves(srv.addr);
    let lines = srv.stop_cleanly();
    assert!(summary_figure(&lines, " accept errors") >= 1);
}

/// Two 1 KiB provided buffers for 32 busy connections: io_uring's multishot
/// receives run the ring dry (ENOBUFS) and fall back to plain receives; not
/// a byte may be lost or reordered. (On epoll the flag is accepted and the
/// same load must pass.)
fn tiny_buffer_ring(backend: &str) {
    let Some(srv) = Server::start(
        backend,
        &["--recv-buffers", "2", "--recv-buffer-size", "1024"],
        false,
    ) else {
        return;
    };
    concurrent_echoes(srv.addr, 32, 10, 64 * 1024);
    still_serves(srv.addr);
    let lines = srv.stop_cleanly();
    if backend == "uring" {
        assert!(
            counter(&lines, "pooled_reads_outside_ring") > 0,
            "the ring never ran dry"
        );
    }
}

/// The same with receive bundles switched off (`--recv-bundle off`, the
/// fallback a kernel without them takes): one buffer per completion.
fn tiny_buffer_ring_without_bundles(backend: &str) {
    let Some(srv) = Server::start(
        backend,
        &[
            "--recv-buffers",
            "2",
            "--recv-buffer-size",
            "1024",
            "--recv-bundle",
            "off",
        ],
        false,
    ) else {
        return;
    };
    concurrent_echoes(srv.addr, 32, 10, 64 * 1024);
    still_serves(srv.addr);
    srv.stop_cleanly();
}

/// Linked send chains (`--send-batch linked`) with a 4-entry SQ (chains of
/// at most 3 sends) and 16 provided buffers of 1 KiB, which every echo
/// batch spans: the chains' skipped CQEs must still release each buffer
/// only after it went, and not a byte may be lost or reordered. (On epoll
/// the flag is accepted and ignored.)
fn linked_sends_on_a_tiny_ring(backend: &str) {
    let chains = ringkit_uring::skipped_chain_posts_one_cqe().unwrap_or(false);
    send_batch_on_a_tiny_ring(backend, "linked", "send_chain_links", chains);
}

/// The same with send bundles (`--send-batch bundle`).
fn send_bundles_on_a_tiny_ring(backend: &str) {
    let bundles = ringkit_uring::IoUring::new(4)
        .map(|r| r.features() & ringkit_uring::sys::IORING_FEAT_RECVSEND_BUNDLE != 0)
        .unwrap_or(false);
    send_batch_on_a_tiny_ring(backend, "bundle", "send_bundles", bundles);
}

/// 32 busy connections echoed with `--send-batch how` on a tiny ring; on
/// io_uring where the kernel can (`works`), the runtime counter `used` must
/// show the lever was taken, and elsewhere that it was not.
fn send_batch_on_a_tiny_ring(backend: &str, how: &str, used: &str, works: bool) {
    let Some(srv) = Server::start(
        backend,
        &[
            "--send-batch",
            how,
            "--entries",
            "4",
            "--recv-buffers",
            "16",
            "--recv-buffer-size",
            "1024",
        ],
        false,
    ) else {
        return;
    };
    concurrent_echoes(srv.addr, 32, 10, 64 * 1024);
    still_serves(srv.addr);
    let lines = srv.stop_cleanly();
    let n = counter(&lines, used);
    if backend == "uring" && works {
        assert!(n > 0, "{used} = 0: the lever was never taken");
    } else {
        assert_eq!(n, 0, "{used} on a backend or kernel without the lever");
    }
}

/// A ring of 4 SQ / 16 CQ entries under 128 connections: the SQ fills and
/// the CQ overflows; every echo must still be right. (Receive bundles off:
/// with them one completion covers several buffers, and a CI run once saw
/// 64 connections never overflow the CQ.)
fn tiny_ring(backend: &str) {
    let Some(srv) = Server::start(backend, &["--entries", "4", "--recv-bundle", "off"], false)
    else {
        return;
    };
    if backend == "uring" {
        assert_eq!(srv.count("sq 4 cq 16"), 1, "the tiny ring took effect");
    }
    concurrent_echoes(srv.addr, 128, 10, 16 * 1024);
    still_serves(srv.addr);
    let lines = srv.stop_cleanly();
    if backend == "uring" {
        // 64 clients' completions into a 16-entry CQ between two reaps.
        assert!(
            counter(&lines, "cq_overflows") > 0,
            "the CQ never overflowed"
        );
    }
}

/// `threads` clients at once, each echoing `msgs` messages of up to `max` bytes.
fn concurrent_echoes(addr: SocketAddr, threads: usize, msgs: usize, max: usize) {
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            std::thread::spawn(move || {
                let s = connect(addr);
                for m in 0..msgs {
                    let len = 1 + (t * 7919 + m * 104_729) % max;
                    echo_on(&s, (t * 1000 + m) as u64, len);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().expect("client thread");
    }
}

/// Clients send 4 MiB without reading, then reset (SO_LINGER 0) while the
/// server is still sending the echo: the server's sends fail with
/// ECONNRESET/EPIPE and it carries on.
fn reset_during_send(backend: &str) {
    resets_mid_send(backend, &[]);
}

/// The same with the echo sent back as send bundles.
fn reset_during_send_bundles(backend: &str) {
    resets_mid_send(backend, &["--send-batch", "bundle"]);
}

/// The same with the echo sent back as linked send chains.
fn reset_during_linked_sends(backend: &str) {
    resets_mid_send(backend, &["--send-batch", "linked"]);
}

fn resets_mid_send(backend: &str, args: &[&str]) {
    let Some(mut srv) = Server::start(backend, args, false) else {
        return;
    };
    let hs: Vec<_> = (0..8)
        .map(|i| {
            let addr = srv.addr;
            std::thread::spawn(move || {
                let s = connect(addr);
                let mut w = s.try_clone().unwrap();
                // The server stops reading once our receive buffer is full
                // (it cannot send the echo): the write then gives up.
                w.set_write_timeout(Some(Duration::from_millis(300)))
                    .unwrap();
                let writer = std::thread::spawn(move || {
                    let _ = w.write_all(&pattern(i, 4 << 20));
                });
                // Read a little, so the server is mid-send, then vanish.
                let mut some = vec![0u8; 64 * 1024];
                (&s).read_exact(&mut some).expect("first part of the echo");
                assert_eq!(some, pattern(i, 64 * 1024));
                let _ = writer.join();
                // A reset with no FIN before it (a shutdown sent one, and a
                // server that saw the end of input first could close
                // without meeting the reset): its send in flight fails.
                set_linger_zero(&s);
                drop(s);
            })
        })
        .collect();
    for h in hs {
        h.join().expect("client thread");
    }
    assert!(srv.alive(), "server died after peers reset");
    still_serves(srv.addr);
    let lines = srv.stop_cleanly();
    assert!(
        summary_figure(&lines, " peer resets") >= 1,
        "no send or receive met a reset peer"
    );
}

/// The server starts with SIGPIPE at its default (fatal) disposition;
/// peers that close with unread data make its sends fail. It must live.
fn sigpipe_never_kills(backend: &str) {
    let Some(mut srv) = Server::start(backend, &[], true) else {
        return;
    };
    for i in 0..20 {
        let s = connect(srv.addr);
        (&s).write_all(&pattern(i, 256 * 1024)).ok();
        // Close with the echo unread: the kernel answers with a RST, and the
        // server's next send hits a closed socket (EPIPE, not SIGPIPE).
        drop(s);
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(srv.alive(), "server killed (SIGPIPE?)");
    still_serves(srv.addr);
    let lines = srv.stop_cleanly();
    assert!(
        summary_figure(&lines, " peer resets") >= 1,
        "no send met a closed peer"
    );
}

/// SIGTERM while 8 clients are each in the middle of a 2 MiB message
/// (written in pieces): every message comes back whole, an idle
/// connection is closed (EOF), a new connection is refused, exit code 0.
fn sigterm_graceful(backend: &str) {
    let Some(srv) = Server::start(backend, &["--drain-idle-ms", "2000"], false) else {
        return;
    };
    let addr = srv.addr;
    let idle = connect(addr);
    echo_on(&idle, 7, 10);
    let started = Arc::new(std::sync::Barrier::new(9));
    let hs: Vec<_> = (0..8u64)
        .map(|i| {
            let started = started.clone();
            std::thread::spawn(move || {
                let s = connect(addr);
                let msg = pattern(100 + i, 2 << 20);
                let mut w = s.try_clone().unwrap();
                let m2 = msg.clone();
                let writer = std::thread::spawn(move || {
                    for (k, piece) in m2.chunks(64 * 1024).enumerate() {
                        w.write_all(piece)?;
                        if k == 1 {
                            started.wait();
                        }
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    io::Result::Ok(())
                });
                let mut back = vec![0u8; msg.len()];
                (&s).read_exact(&mut back)
                    .expect("in-flight message echoed");
                writer.join().unwrap().expect("write");
                assert!(back == msg, "in-flight message {i} came back different");
                // Then the server closes the drained connection.
                let mut rest = Vec::new();
                (&s).read_to_end(&mut rest).expect("EOF after draining");
                assert!(rest.is_empty());
            })
        })
        .collect();
    started.wait();
    srv.sigterm();
    srv.wait_line("listener closed");
    match TcpStream::connect_timeout(&addr, LIMIT) {
        Err(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}"),
        Ok(_) => panic!("a new connection was accepted after SIGTERM"),
    }
    for h in hs {
        h.join().expect("in-flight client");
    }
    let mut rest = Vec::new();
    (&idle)
        .read_to_end(&mut rest)
        .expect("idle connection closed");
    assert!(rest.is_empty());
    // stop_cleanly waits for the drain to end and requires exit code 0.
    srv.stop_cleanly();
}
