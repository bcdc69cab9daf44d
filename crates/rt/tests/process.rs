//! Tests that need a process of their own: resource limits, a seccomp filter,
//! environment variables. Each parent test re-runs this test binary with
//! `--exact <child> --include-ignored --nocapture` and [`CHILD_ENV`] set to the
//! child's name; the child test is `#[ignore]` and returns at once unless that
//! variable names it. The parent checks the child's exit status, that exactly
//! one test ran, and the marker lines the child printed.

use std::io::{Read, Write};
use std::net::Shutdown;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use ringkit::net::{TcpListener, TcpStream};
use ringkit::{Backend, Builder};

/// Names the child test that should run in this process.
const CHILD_ENV: &str = "RINGKIT_TEST_CHILD";
/// Parameter for the child (a backend name).
const ARG_ENV: &str = "RINGKIT_TEST_CHILD_ARG";

/// Whether this process is the child for `name`.
fn is_child(name: &str) -> bool {
    std::env::var(CHILD_ENV).as_deref() == Ok(name)
}

fn child_arg() -> String {
    std::env::var(ARG_ENV).unwrap_or_default()
}

/// A child that hangs is killed after this long.
const CHILD_TIMEOUT: Duration = Duration::from_secs(60);

/// Run `cmd` to completion, killing it (and failing) after `limit`.
fn wait_with_timeout(mut cmd: Command, name: &str, limit: Duration) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn the child test process");
    let pipe = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = pipe(Box::new(child.stdout.take().expect("stdout")));
    let err = pipe(Box::new(child.stderr.take().expect("stderr")));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait for the child") {
            break st;
        }
        if Instant::now() > deadline {
            // Our own child, by its handle (not by name).
            let _ = child.kill();
            let _ = child.wait();
            let (o, e) = (out.join().unwrap(), err.join().unwrap());
            panic!(
                "child {name} hung for {limit:?} and was killed\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&o),
                String::from_utf8_lossy(&e)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// Run the child test `name` with extra environment variables; returns its
/// output after checking that it exited successfully and ran exactly one test.
fn run_child(name: &str, envs: &[(&str, &str)]) -> (String, String) {
    let exe = std::env::current_exe().expect("current_exe");
    let mut cmd = Command::new(exe);
    cmd.args([
        name,
        "--exact",
        "--include-ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_ENV, name)
    .env_remove("RINGKIT_BACKEND")
    .env_remove("RUST_LOG");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let Output {
        status,
        stdout,
        stderr,
    } = wait_with_timeout(cmd, name, CHILD_TIMEOUT);
    let stdout = String::from_utf8_lossy(&stdout).into_owned();
    let stderr = String::from_utf8_lossy(&stderr).into_owned();
    // Show what the child did (visible with --nocapture).
    eprintln!("---- child {name} {envs:?}: {status}\n{stdout}{stderr}----");
    assert!(
        status.success(),
        "child {name} failed ({status})\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stdout.contains("1 passed"),
        "child {name} did not run exactly one test\nstdout:\n{stdout}"
    );
    (stdout, stderr)
}

/// The rest of the first stdout line after `prefix` (libtest may print
/// `test name ... ` before it on the same line).
fn marker<'a>(stdout: &'a str, prefix: &str) -> Option<&'a str> {
    stdout
        .lines()
        .find_map(|l| l.split_once(prefix).map(|(_, rest)| rest))
        .map(str::trim)
}

fn nofile() -> libc::rlimit {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into a valid rlimit.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) };
    assert_eq!(rc, 0, "getrlimit: {}", std::io::Error::last_os_error());
    r
}

fn set_nofile(r: libc::rlimit) {
    // SAFETY: setrlimit reads a valid rlimit.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) };
    assert_eq!(rc, 0, "setrlimit: {}", std::io::Error::last_os_error());
}

/// The lowest fd number not in use (what the next new fd would get).
fn lowest_free_fd() -> libc::rlim_t {
    // SAFETY: dup of stdout (open: the parent captures it), closed at once.
    let fd = unsafe { libc::dup(1) };
    assert!(fd >= 0, "dup: {}", std::io::Error::last_os_error());
    // SAFETY: we just created fd.
    unsafe { libc::close(fd) };
    fd as libc::rlim_t
}

fn parse_backend(s: &str) -> Backend {
    s.parse()
        .unwrap_or_else(|e| panic!("bad backend {s:?}: {e}"))
}

// ---------------------------------------------------------------------------
// EMFILE on accept: the error is reported and the listener survives.
//
// Two ways to run out of fds:
// - "lower": RLIMIT_NOFILE is lowered to the lowest free fd number before
//   the first accept() (io_uring reads the limit when the ACCEPT is prepared);
// - "fill": accept() is already waiting (io_uring: multishot ACCEPT armed;
//   epoll: fd registered) when dup() takes every fd left under the limit.

fn emfile_parent(backend: &str, mode: &str) {
    let arg = format!("{backend}:{mode}");
    let (stdout, _) = run_child("child_emfile_accept", &[(ARG_ENV, &arg)]);
    if stdout.contains("skipped: io_uring unavailable") {
        assert_eq!(backend, "uring");
        return;
    }
    let err = marker(&stdout, "EMFILE-ACCEPT-ERR:").expect("the child reports the accept error");
    assert!(err.contains("EMFILE") || err.contains("ENFILE"), "{err}");
    assert!(stdout.contains("EMFILE-LISTENER-SURVIVED"), "{stdout}");
}

#[test]
fn emfile_on_accept_uring() {
    emfile_parent("uring", "lower");
}

#[test]
fn emfile_on_accept_epoll() {
    emfile_parent("epoll", "lower");
}

#[test]
fn emfile_on_armed_accept_uring() {
    emfile_parent("uring", "fill");
}

#[test]
fn emfile_on_armed_accept_epoll() {
    emfile_parent("epoll", "fill");
}

fn emfile_name(code: Option<i32>) -> &'static str {
    match code {
        Some(libc::EMFILE) => "EMFILE",
        Some(libc::ENFILE) => "ENFILE",
        _ => "other",
    }
}

/// dup() stdout until EMFILE; returns the fds taken.
fn take_all_fds() -> Vec<i32> {
    let mut fds = Vec::new();
    loop {
        // SAFETY: dup of stdout (open); every fd made is closed by the caller.
        let fd = unsafe { libc::dup(1) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            assert_eq!(e.raw_os_error(), Some(libc::EMFILE), "dup: {e}");
            return fds;
        }
        fds.push(fd);
        assert!(fds.len() < 100_000, "RLIMIT_NOFILE is not limiting dup");
    }
}

fn close_all(fds: Vec<i32>) {
    for fd in fds {
        // SAFETY: fds made by take_all_fds, owned by us.
        unsafe { libc::close(fd) };
    }
}

#[test]
#[ignore = "child process of emfile_on_*accept_*"]
fn child_emfile_accept() {
    if !is_child("child_emfile_accept") {
        return;
    }
    let arg = child_arg();
    let (backend, mode) = arg.split_once(':').expect("backend:mode");
    let backend = parse_backend(backend);
    let saved = nofile();
    if mode == "fill" {
        // Keep the number of fds to fill small.
        set_nofile(libc::rlimit {
            rlim_cur: saved.rlim_cur.min(512),
            rlim_max: saved.rlim_max,
        });
    }
    let rt = match Builder::new().backend(backend).build() {
        Ok(rt) => rt,
        Err(e) if backend == Backend::Uring => {
            println!("skipped: io_uring unavailable here: {e}");
            return;
        }
        Err(e) => panic!("cannot build a {backend} runtime: {e}"),
    };
    assert_eq!(rt.backend_report().chosen, backend);
    println!("backend: {}; mode: {mode}", rt.backend_report());
    rt.block_on(async {
        let l = std::rc::Rc::new(TcpListener::bind("127.0.0.1:0").unwrap());
        let addr = l.local_addr().unwrap();
        // Client sockets made while fds can still be created.
        let mk =
            || socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        let (c1, c2) = (mk(), mk());

        let err = match mode {
            "lower" => {
                // No new fd from here on: every number below the limit is taken.
                let low = lowest_free_fd();
                set_nofile(libc::rlimit {
                    rlim_cur: low,
                    rlim_max: saved.rlim_max,
                });
                // SAFETY: dup of stdout; we close it if it unexpectedly succeeds.
                let probe = unsafe { libc::dup(1) };
                let probe_err = std::io::Error::last_os_error();
                if probe >= 0 {
                    // SAFETY: we just created it.
                    unsafe { libc::close(probe) };
                }
                assert!(probe < 0, "RLIMIT_NOFILE={low} did not stop dup");
                assert_eq!(probe_err.raw_os_error(), Some(libc::EMFILE));
                println!("RLIMIT_NOFILE lowered from {} to {low}", saved.rlim_cur);
                // A client connects (no new fd on its side): the connection
                // waits in the backlog, and accepting it needs a new fd.
                c1.connect(&addr.into()).unwrap();
                let err = match l.accept().await {
                    Ok((s, peer)) => {
                        panic!("accept succeeded under RLIMIT_NOFILE={low}: {s:?} {peer}")
                    }
                    Err(e) => e,
                };
                set_nofile(saved);
                println!("RLIMIT_NOFILE restored to {}", saved.rlim_cur);
                err
            }
            "fill" => {
                // accept() waits first (nothing to accept yet)...
                let waiting = ringkit::spawn({
                    let l = l.clone();
                    async move { l.accept().await.map(|(_, peer)| peer) }
                });
                for _ in 0..5 {
                    ringkit::yield_now().await;
                }
                ringkit::time::sleep(Duration::from_millis(20)).await;
                assert!(!waiting.is_finished());
                // ...then the fds run out, then a client connects.
                let fds = take_all_fds();
                println!("took the {} fds left under RLIMIT_NOFILE", fds.len());
                c1.connect(&addr.into()).unwrap();
                let res = ringkit::time::timeout(Duration::from_secs(5), waiting).await;
                close_all(fds);
                match res {
                    Err(_) => panic!("the waiting accept saw nothing within 5 s"),
                    Ok(Err(join)) => panic!("accept task failed: {join}"),
                    Ok(Ok(Ok(peer))) => panic!("accept succeeded with no fd left: {peer}"),
                    Ok(Ok(Err(e))) => e,
                }
            }
            other => panic!("unknown mode {other}"),
        };
        let code = err.raw_os_error();
        println!("EMFILE-ACCEPT-ERR: {} ({err})", emfile_name(code));
        assert!(
            matches!(code, Some(libc::EMFILE) | Some(libc::ENFILE)),
            "accept failed with {err:?}, not EMFILE/ENFILE"
        );

        // fds are available again: the same listener accepts the waiting
        // connection, and the next one, and they carry data.
        let mut c1: std::net::TcpStream = c1.into();
        let (s, peer) = l.accept().await.expect("accept after fds came back");
        assert_eq!(peer, c1.local_addr().unwrap());
        echo_once(&s, &mut c1, 0).await;
        c2.connect(&addr.into()).unwrap();
        let mut c2: std::net::TcpStream = c2.into();
        let (s, peer) = l.accept().await.expect("second accept after fds came back");
        assert_eq!(peer, c2.local_addr().unwrap());
        echo_once(&s, &mut c2, 1).await;
        // And a connection made by the runtime itself.
        let server = ringkit::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            let (res, buf) = s.read(Vec::with_capacity(64)).await;
            res.unwrap();
            s.write_all(buf).await.0.unwrap();
        });
        let c3 = TcpStream::connect(addr).await.unwrap();
        c3.write_all(&b"third"[..]).await.0.unwrap();
        let (n, buf) = c3.read(Vec::with_capacity(64)).await;
        assert_eq!(&buf[..n.unwrap()], b"third");
        server.await.unwrap();
        println!("EMFILE-LISTENER-SURVIVED: accepted and echoed 3 connections afterwards");
    });
}

/// Blocking client `c` sends a line; the runtime side `s` echoes it back.
async fn echo_once(s: &TcpStream, c: &mut std::net::TcpStream, i: usize) {
    let msg = format!("hello {i}\n");
    c.write_all(msg.as_bytes()).unwrap();
    let mut got = Vec::new();
    while got.len() < msg.len() {
        let (res, buf) = s.read(Vec::with_capacity(64)).await;
        let n = res.unwrap();
        assert!(n > 0, "EOF from client {i}");
        got.extend_from_slice(&buf[..n]);
    }
    s.write_all(got).await.0.unwrap();
    let mut back = vec![0u8; msg.len()];
    c.read_exact(&mut back).unwrap();
    assert_eq!(back, msg.as_bytes());
    c.shutdown(Shutdown::Both).unwrap();
}

// ---------------------------------------------------------------------------
// Fallback to epoll when a seccomp filter refuses io_uring_setup (EPERM).

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7; // AUDIT_ARCH_AARCH64

/// Make `io_uring_setup` fail with EPERM on this thread (and threads it
/// creates later), as Docker's default seccomp profile does.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn forbid_io_uring_setup() {
    const NR: u32 = 425; // io_uring_setup on x86_64 and the generic table
    assert_eq!(libc::SYS_io_uring_setup, NR as libc::c_long);
    // offsetof(struct seccomp_data, nr) = 0, arch = 4.
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jeq = |k: u32, jt: u8, jf: u8| libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    };
    let filter = [
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 4),
        jeq(AUDIT_ARCH, 0, 3), // another arch: allow
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0),
        jeq(NR, 0, 1),
        stmt(
            libc::BPF_RET | libc::BPF_K,
            libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
        ),
        stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW),
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: plain prctl.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_NO_NEW_PRIVS,
            1 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    assert_eq!(
        rc,
        0,
        "PR_SET_NO_NEW_PRIVS: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: `prog` points at a valid filter that outlives the call (the
    // kernel copies it).
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER as libc::c_ulong,
            &prog as *const libc::sock_fprog,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    assert_eq!(rc, 0, "PR_SET_SECCOMP: {}", std::io::Error::last_os_error());
}

#[test]
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn seccomp_falls_back_to_epoll() {
    let (stdout, _) = run_child("child_seccomp_fallback", &[]);
    let reason = marker(&stdout, "SECCOMP-FALLBACK-REASON:").expect("reason printed");
    assert!(reason.contains("EPERM"), "{reason}");
    assert!(stdout.contains("SECCOMP-ECHO-OK"), "{stdout}");
    assert!(marker(&stdout, "SECCOMP-URING-ERR:").is_some(), "{stdout}");
}

#[test]
#[ignore = "child process of seccomp_falls_back_to_epoll"]
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn child_seccomp_fallback() {
    if !is_child("child_seccomp_fallback") {
        return;
    }
    forbid_io_uring_setup();
    // Sanity: the filter works.
    // SAFETY: io_uring_setup with a null params pointer only returns an error.
    let rc = unsafe { libc::syscall(libc::SYS_io_uring_setup, 4u32, std::ptr::null_mut::<u8>()) };
    let e = std::io::Error::last_os_error();
    assert_eq!((rc, e.raw_os_error()), (-1, Some(libc::EPERM)), "{e}");

    // The sysctl, if set, would give its own explanation; seccomp otherwise.
    let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    let names_seccomp = disabled.is_empty() || disabled == "0";

    let report = ringkit_uring::KernelReport::gather();
    let why = report
        .usable
        .expect_err("io_uring must be unusable under the filter");
    println!("KernelReport.usable: Err({why})");
    assert!(why.contains("EPERM"), "{why}");
    if names_seccomp {
        assert!(why.contains("seccomp"), "{why}");
    }

    {
        let rt = Builder::new().backend(Backend::Auto).build().unwrap();
        let report = rt.backend_report().clone();
        assert_eq!(report.requested, Backend::Auto);
        assert_eq!(report.chosen, Backend::Epoll, "{report:?}");
        let reason = report
            .fallback_reason
            .clone()
            .expect("a fallback reason is reported");
        println!("SECCOMP-FALLBACK-REASON: {reason}");
        println!("report: {report}; attempts: {:?}", report.attempts);
        assert!(reason.contains("EPERM"), "{reason}");
        if names_seccomp {
            assert!(reason.to_lowercase().contains("seccomp"), "{reason}");
        }
        assert!(report.to_string().contains(&reason));
        assert!(
            !report.attempts.is_empty(),
            "every flag set tried is listed"
        );
        assert!(report
            .attempts
            .iter()
            .all(|a| a.contains("EPERM") || a.contains("not permitted")));
        assert_eq!(
            ringkit::backend_report().expect("inside a runtime").chosen,
            Backend::Epoll
        );

        rt.block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let server = ringkit::spawn(async move {
                let (s, _) = l.accept().await.unwrap();
                loop {
                    let (res, buf) = s.read(Vec::with_capacity(1024)).await;
                    if res.unwrap() == 0 {
                        break;
                    }
                    s.write_all(buf).await.0.unwrap();
                }
            });
            let c = TcpStream::connect(addr).await.unwrap();
            let (r, w) = c.into_split();
            let msg: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
            // Write from another task while reading here: the echo does not
            // fit in the socket buffers if nobody reads.
            let writer = ringkit::spawn({
                let msg = msg.clone();
                async move {
                    w.write_all(msg).await.0.unwrap();
                    w.shutdown().await.unwrap();
                }
            });
            let mut got = Vec::new();
            loop {
                let (res, buf) = r.read(Vec::with_capacity(65536)).await;
                match res.unwrap() {
                    0 => break,
                    n => got.extend_from_slice(&buf[..n]),
                }
            }
            assert!(got == msg, "echo differs ({} bytes back)", got.len());
            writer.await.unwrap();
            server.await.unwrap();
            println!("SECCOMP-ECHO-OK: 100000 bytes echoed on epoll");
        });
    }

    // Asking for io_uring explicitly is an error that says why.
    let err = Builder::new()
        .backend(Backend::Uring)
        .build()
        .expect_err("Backend::Uring must fail under the filter");
    let msg = err.to_string();
    println!("SECCOMP-URING-ERR: {msg}");
    assert!(msg.contains("io_uring"), "{msg}");
    assert!(msg.contains("EPERM"), "{msg}");
    if names_seccomp {
        assert!(msg.contains("seccomp"), "{msg}");
    }
    // Epoll, asked for explicitly, has no fallback reason.
    let rt = Builder::new().backend(Backend::Epoll).build().unwrap();
    assert_eq!(rt.backend_report().chosen, Backend::Epoll);
    assert!(rt.backend_report().fallback_reason.is_none());
}

// ---------------------------------------------------------------------------
// The environment

/// The library never reads the environment: variables the `ringkit`
/// binary takes as fallbacks of its flags (`RINGKIT_BACKEND`, ...) change
/// nothing in a program that embeds the runtime, even when invalid.
#[test]
fn the_library_ignores_ringkit_variables() {
    for value in ["epoll", "bogus"] {
        let vars = [
            ("RINGKIT_BACKEND", value),
            ("RINGKIT_SEND_BATCH", value),
            ("RINGKIT_BATCH_WAIT", value),
            ("RINGKIT_FIXED_FILES", value),
            ("RINGKIT_RECV_BUNDLE", value),
        ];
        let (stdout, _) = run_child("child_backend_env", &vars);
        assert_eq!(marker(&stdout, "ENV-REQUESTED:"), Some("auto"), "{stdout}");
    }
}

#[test]
#[ignore = "child process of the_library_ignores_ringkit_variables"]
fn child_backend_env() {
    if !is_child("child_backend_env") {
        return;
    }
    let rt = Builder::new()
        .build()
        .expect("the environment was read, and refused");
    println!("ENV-REQUESTED: {}", rt.backend_report().requested);
    let n = rt.block_on(async {
        ringkit::time::sleep(Duration::from_millis(1)).await;
        7
    });
    assert_eq!(n, 7);
    drop(rt);
    assert!(ringkit::Runtime::new().is_ok());
    // One runtime per thread: a second on this thread is refused.
    let _rt = Builder::new().backend(Backend::Epoll).build().unwrap();
    let second = Builder::new().backend(Backend::Epoll).build();
    assert!(
        second.is_err(),
        "a second runtime on one thread must be refused"
    );
}
