//! `ringkit::signal`: SIGINT/SIGTERM wake every runtime thread, on both
//! backends. A signal is process-wide state, so each case runs in a child
//! process: the parent re-runs this test binary with `--exact <child>
//! --include-ignored` and [`CHILD_ENV`] naming the child, and checks its exit
//! status and the marker lines it printed.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringkit::{Backend, Builder};

const CHILD_ENV: &str = "RINGKIT_TEST_CHILD";
/// A child that hangs is killed after this long.
const CHILD_TIMEOUT: Duration = Duration::from_secs(60);

fn is_child(name: &str) -> bool {
    std::env::var(CHILD_ENV).as_deref() == Ok(name)
}

fn child_command(name: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        name,
        "--exact",
        "--include-ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_ENV, name)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    cmd
}

/// Wait for `child` (killing it after [`CHILD_TIMEOUT`]); returns whether it
/// succeeded, and its stdout and stderr.
fn finish(mut child: std::process::Child, mut stdout: String) -> (bool, String, String) {
    let deadline = Instant::now() + CHILD_TIMEOUT;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            // Our own child, by its handle.
            let _ = child.kill();
            let _ = child.wait();
            panic!("child hung for {CHILD_TIMEOUT:?} and was killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut stdout);
    }
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    (status.success(), stdout, stderr)
}

/// A runtime of `backend` on a new thread that awaits shutdown, or `None`
/// (printing why) when io_uring is unavailable here.
fn waiter(backend: Backend, waiting: Arc<AtomicUsize>) -> Option<std::thread::JoinHandle<()>> {
    let rt = Builder::new().backend(backend).build();
    if let Err(e) = &rt {
        if backend == Backend::Uring {
            println!("SKIP uring: {e}");
            return None;
        }
    }
    drop(rt);
    Some(std::thread::spawn(move || {
        let rt = Builder::new().backend(backend).build().unwrap();
        rt.block_on(async {
            // Two waiters on this runtime: both must resolve.
            let a = ringkit::spawn(ringkit::signal::shutdown_requested());
            let b = ringkit::spawn(ringkit::signal::shutdown_requested());
            ringkit::time::sleep(Duration::from_millis(10)).await;
            waiting.fetch_add(1, Ordering::SeqCst);
            a.await.unwrap();
            b.await.unwrap();
            // Once requested, a new waiter returns at once.
            ringkit::signal::shutdown_requested().await;
        });
        println!("WOKE {backend}");
    }))
}

#[test]
#[ignore = "child of signal_wakes_every_runtime"]
fn child_raise_sigterm() {
    if !is_child("child_raise_sigterm") {
        return;
    }
    ringkit::signal::install().unwrap();
    assert!(!ringkit::signal::is_shutdown_requested());
    let waiting = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = [Backend::Uring, Backend::Epoll]
        .into_iter()
        .filter_map(|b| waiter(b, waiting.clone()))
        .collect();
    while waiting.load(Ordering::SeqCst) < threads.len() {
        std::thread::sleep(Duration::from_millis(5));
    }
    // Let them park in their driver wait (not needed for correctness: a
    // waiter that registers late sees the flag).
    std::thread::sleep(Duration::from_millis(50));
    // SAFETY: sending a signal to our own process, whose handler is installed.
    assert_eq!(unsafe { libc::kill(libc::getpid(), libc::SIGTERM) }, 0);
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(ringkit::signal::requested_by(), Some(libc::SIGTERM));
    println!("DONE");
}

#[test]
fn signal_wakes_every_runtime() {
    let mut child = child_command("child_raise_sigterm").spawn().unwrap();
    let out = child.stdout.take().map(|mut o| {
        let mut s = String::new();
        let _ = o.read_to_string(&mut s);
        s
    });
    let (ok, stdout, stderr) = finish(child, out.unwrap_or_default());
    assert!(ok, "child failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("WOKE epoll"), "{stdout}");
    assert!(
        stdout.contains("WOKE uring") || stdout.contains("SKIP uring"),
        "{stdout}"
    );
    assert!(stdout.contains("DONE"), "{stdout}");
}

#[test]
#[ignore = "child of sigint_from_outside_stops_a_runtime"]
fn child_wait_for_sigint() {
    if !is_child("child_wait_for_sigint") {
        return;
    }
    ringkit::signal::install().unwrap();
    let backend = if Builder::new().backend(Backend::Uring).build().is_ok() {
        Backend::Uring
    } else {
        Backend::Epoll
    };
    let rt = Builder::new().backend(backend).build().unwrap();
    rt.block_on(async {
        let wait = ringkit::spawn(ringkit::signal::shutdown_requested());
        ringkit::time::sleep(Duration::from_millis(10)).await;
        println!("READY");
        wait.await.unwrap();
    });
    println!("STOPPED {:?}", ringkit::signal::requested_by());
}

/// Kills child `pid` (ours, not yet reaped) after [`CHILD_TIMEOUT`] unless
/// the returned flag is set first: a hung child then ends the parent's
/// blocking reads instead of hanging the test.
fn watchdog(pid: i32) -> Arc<AtomicUsize> {
    let done = Arc::new(AtomicUsize::new(0));
    let done2 = done.clone();
    std::thread::spawn(move || {
        let until = Instant::now() + CHILD_TIMEOUT;
        while Instant::now() < until {
            if done2.load(Ordering::SeqCst) != 0 {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: killing our own child, which has not been reaped yet.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    });
    done
}

#[test]
fn sigint_from_outside_stops_a_runtime() {
    let mut child = child_command("child_wait_for_sigint").spawn().unwrap();
    // If READY never comes, the read below would block forever: a watchdog
    // kills the child (ours, by pid, while we still hold it) after the timeout.
    let pid = child.id() as i32;
    let done = watchdog(pid);
    let mut lines = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if lines.read_line(&mut line).unwrap() == 0 {
            break;
        }
        seen.push_str(&line);
        // libtest prints "test <name> ... " before the child's own output.
        if line.contains("READY") {
            // SAFETY: signalling our own child process by its pid.
            assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
            break;
        }
    }
    let mut rest = String::new();
    let _ = lines.read_to_string(&mut rest);
    seen.push_str(&rest);
    let (ok, stdout, stderr) = finish(child, seen);
    done.store(1, Ordering::SeqCst);
    assert!(ok, "child failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.contains(&format!("STOPPED Some({})", libc::SIGINT)),
        "{stdout}"
    );
}

#[test]
#[ignore = "child of a_second_signal_ends_the_drain_at_once"]
fn child_slow_drain() {
    if !is_child("child_slow_drain") {
        return;
    }
    ringkit::signal::install().unwrap();
    ringkit::run(async {
        let wait = ringkit::spawn(ringkit::signal::shutdown_requested());
        ringkit::time::sleep(Duration::from_millis(10)).await;
        println!("READY");
        wait.await.unwrap();
        // A drain that would take 30 s (one slow download in flight).
        println!("DRAINING");
        ringkit::time::sleep(Duration::from_secs(30)).await;
        println!("DRAINED");
    })
    .unwrap();
}

/// The first SIGINT starts the drain; a second one ends the process at
/// once (killed by that signal) instead of waiting out the drain.
#[test]
fn a_second_signal_ends_the_drain_at_once() {
    use std::os::unix::process::ExitStatusExt;
    let mut child = child_command("child_slow_drain").spawn().unwrap();
    let pid = child.id() as i32;
    // A child that hangs is killed (ours, by pid, not yet reaped) after the
    // timeout, which ends the reads below.
    let done = watchdog(pid);
    let mut lines = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    let mut second_at = None;
    loop {
        let mut line = String::new();
        if lines.read_line(&mut line).unwrap() == 0 {
            break;
        }
        seen.push_str(&line);
        if line.contains("READY") || line.contains("DRAINING") {
            if line.contains("DRAINING") {
                second_at = Some(Instant::now());
            }
            // SAFETY: signalling our own, not yet reaped, child by its pid.
            assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
        }
    }
    let st = child.wait().unwrap();
    done.store(1, Ordering::SeqCst);
    let second_at = second_at.unwrap_or_else(|| panic!("no drain started: {seen}"));
    assert!(
        !seen.contains("DRAINED"),
        "the drain ran to its end: {seen}"
    );
    assert_eq!(st.signal(), Some(libc::SIGINT), "{st}: {seen}");
    assert!(
        second_at.elapsed() < Duration::from_secs(10),
        "the second SIGINT took {:?}",
        second_at.elapsed()
    );
}

/// Run child test `name`; it must succeed and print `marker`.
fn expect_child(name: &str, marker: &str) {
    let mut child = child_command(name).spawn().unwrap();
    let out = child.stdout.take().map(|mut o| {
        let mut s = String::new();
        let _ = o.read_to_string(&mut s);
        s
    });
    let (ok, stdout, stderr) = finish(child, out.unwrap_or_default());
    assert!(ok, "{name} failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains(marker), "{name}: {stdout}");
}

/// In a child: a tokio signal stream for `SIGTERM` and ringkit's handler,
/// installed in the order `tokio_first` says, then one `SIGTERM`: both must
/// see it. Prints `BOTH` when they do.
fn both_see_sigterm(tokio_first: bool) {
    let tokio_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut stream = None;
    let tokio_signal = || {
        let _g = tokio_rt.enter();
        Some(tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).unwrap())
    };
    if tokio_first {
        stream = tokio_signal();
    }
    ringkit::signal::install().unwrap();
    if !tokio_first {
        stream = tokio_signal();
    }
    let mut stream = stream.unwrap();
    // SAFETY: sending a signal to our own process, whose handlers are installed.
    assert_eq!(unsafe { libc::kill(libc::getpid(), libc::SIGTERM) }, 0);
    let got = tokio_rt
        .block_on(async { tokio::time::timeout(Duration::from_secs(10), stream.recv()).await });
    assert!(
        matches!(got, Ok(Some(()))),
        "tokio's signal stream never saw SIGTERM"
    );
    assert_eq!(ringkit::signal::requested_by(), Some(libc::SIGTERM));
    println!("BOTH");
}

#[test]
#[ignore = "child of tokio_and_ringkit_both_see_a_signal"]
fn child_tokio_first() {
    if is_child("child_tokio_first") {
        both_see_sigterm(true);
    }
}

#[test]
#[ignore = "child of tokio_and_ringkit_both_see_a_signal"]
fn child_ringkit_first() {
    if is_child("child_ringkit_first") {
        both_see_sigterm(false);
    }
}

/// ringkit's handler chains to one installed before it (tokio's, through
/// signal-hook-registry, which chains to ringkit's when it comes second):
/// whichever installs first, a tokio `signal(SIGTERM)` stream and
/// `shutdown_requested` both see the signal. ringkit used to replace
/// tokio's handler, and tokio's `recv()` never resolved.
#[test]
fn tokio_and_ringkit_both_see_a_signal() {
    for name in ["child_tokio_first", "child_ringkit_first"] {
        expect_child(name, "BOTH");
    }
}

#[test]
#[ignore = "child of code_requests_and_repeated_signals_do_not_kill"]
fn child_request_then_sigterm() {
    if !is_child("child_request_then_sigterm") {
        return;
    }
    ringkit::signal::install().unwrap();
    ringkit::signal::request_shutdown();
    // SAFETY: signalling our own process, whose handler is installed.
    assert_eq!(unsafe { libc::kill(libc::getpid(), libc::SIGTERM) }, 0);
    std::thread::sleep(Duration::from_millis(100));
    println!("ALIVE");
}

#[test]
#[ignore = "child of code_requests_and_repeated_signals_do_not_kill"]
fn child_no_exit_on_second() {
    if !is_child("child_no_exit_on_second") {
        return;
    }
    ringkit::signal::set_exit_on_second_signal(false);
    ringkit::signal::install().unwrap();
    for _ in 0..3 {
        // SAFETY: as above.
        assert_eq!(unsafe { libc::kill(libc::getpid(), libc::SIGTERM) }, 0);
        std::thread::sleep(Duration::from_millis(30));
    }
    assert_eq!(ringkit::signal::requested_by(), Some(libc::SIGTERM));
    println!("ALIVE");
}

/// A shutdown requested by code (a server thread that failed) does not
/// count as the operator's first signal: the next `SIGTERM` drains instead
/// of killing the process (it used to kill it). And with
/// `set_exit_on_second_signal(false)`, repeated signals never do.
#[test]
fn code_requests_and_repeated_signals_do_not_kill() {
    for name in ["child_request_then_sigterm", "child_no_exit_on_second"] {
        expect_child(name, "ALIVE");
    }
}
