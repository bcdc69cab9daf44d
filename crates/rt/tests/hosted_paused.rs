//! Hosted mode under a paused tokio clock (`tokio::time::pause`, as
//! `#[tokio::test(start_paused = true)]` does): ringkit's timers stay on
//! the real clock and never move tokio's, and nothing spins.
//!
//! Before, ringkit's next deadline was handed to tokio as a `Sleep`: the
//! paused clock auto-advanced to it (a ringkit sleep of 60 s made tokio's
//! clock jump 60 s), and a paused tokio sleep beside an armed ringkit timer
//! did not end, the loop spinning meanwhile.

use std::time::{Duration, Instant};

use ringkit::{Backend, Builder};

fn cpu_secs() -> f64 {
    // SAFETY: rusage is plain data; all zeroes is a valid value.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct we pass, nothing else.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// A hosted runtime on `backend`, or `None` (said why) where it cannot run.
fn hosted(backend: Backend) -> Option<ringkit::Runtime> {
    Builder::new()
        .backend(backend)
        .host_tokio()
        .build()
        .map_err(|e| eprintln!("skipped {backend:?}: {e}"))
        .ok()
}

#[test]
fn a_paused_tokio_clock_is_not_moved_by_ringkit_timers() {
    for backend in [Backend::Epoll, Backend::Uring] {
        let Some(rt) = hosted(backend) else { continue };
        let (paused_elapsed, wall, cpu, ringkit_slept) = rt.block_on(async {
            tokio::time::pause();
            // A long ringkit timer armed beside tokio's paused clock.
            let long = ringkit::spawn(ringkit::time::sleep(Duration::from_secs(60)));
            let t0 = tokio::time::Instant::now();
            let (w0, c0) = (Instant::now(), cpu_secs());
            tokio::time::sleep(Duration::from_millis(10)).await;
            tokio::time::advance(Duration::from_millis(5)).await;
            tokio::time::sleep(Duration::from_millis(10)).await;
            // A short ringkit timer still fires, on the real clock, with
            // no tokio timer pending meanwhile.
            let r0 = Instant::now();
            ringkit::time::sleep(Duration::from_millis(300)).await;
            let ringkit_slept = r0.elapsed();
            let paused_elapsed = t0.elapsed();
            long.abort();
            (paused_elapsed, w0.elapsed(), cpu_secs() - c0, ringkit_slept)
        });
        assert!(
            paused_elapsed < Duration::from_millis(200),
            "{backend:?}: tokio's paused clock moved {paused_elapsed:?} (to ringkit's timer)"
        );
        assert!(wall < Duration::from_secs(2), "{backend:?}: took {wall:?}");
        assert!(cpu < 0.15, "{backend:?}: {cpu:.2} s of CPU: the loop spun");
        assert!(
            ringkit_slept >= Duration::from_millis(300),
            "{backend:?}: a ringkit sleep of 300 ms ended after {ringkit_slept:?}"
        );
    }
}

/// `host_tokio_configure` with `start_paused`, as `#[tokio::test(start_paused
/// = true)]`: tokio's clock is paused at the runtime's start, on its
/// millisecond ticks, so a timer due now fires at once and `advance` past a
/// deadline wakes it. (With `pause()` called later, inside `block_on`, the
/// paused instant fell between ticks: `interval(MAX)`'s first tick stayed
/// pending, as did a 1 ms sleep after advancing 1.75 ms, in tokio's own
/// `time_interval` and `time_pause` tests.)
#[test]
fn start_paused_through_host_tokio_configure() {
    for backend in [Backend::Epoll, Backend::Uring] {
        let rt = match Builder::new()
            .backend(backend)
            .host_tokio()
            .host_tokio_configure(|b| {
                b.start_paused(true);
            })
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("skipped {backend:?}: {e}");
                continue;
            }
        };
        rt.block_on(async {
            let mut interval = tokio_test::task::spawn(tokio::time::interval(Duration::MAX));
            assert!(
                interval.enter(|cx, mut i| i.poll_tick(cx)).is_ready(),
                "{backend:?}: a tick due now was pending"
            );
            let mut sleep = tokio_test::task::spawn(tokio::time::sleep(Duration::from_millis(1)));
            assert!(sleep.poll().is_pending());
            tokio::time::advance(Duration::from_micros(1750)).await;
            assert!(
                sleep.is_woken(),
                "{backend:?}: advancing past a sleep did not wake it"
            );
            assert!(sleep.poll().is_ready());
        });
    }
}

/// The main future of a hosted `block_on` gets tokio's whole budget per
/// poll, as a tokio task's poll does (it had 127 of 128: a readiness
/// poll's unit and a guard's unit came off it, and tokio's own coop tests
/// saw it).
#[test]
fn hosted_main_future_gets_tokios_whole_budget() {
    for backend in [Backend::Epoll, Backend::Uring] {
        let Some(rt) = hosted(backend) else { continue };
        let spent = rt.block_on(async {
            // Start from a fresh poll of the joint loop.
            tokio::task::yield_now().await;
            let mut spent = 0;
            while tokio::task::coop::has_budget_remaining() {
                tokio::task::coop::consume_budget().await;
                spent += 1;
            }
            spent
        });
        assert_eq!(spent, 128, "{backend:?}");
    }
}

/// A hosted main future that always finds its tokio channel full spends
/// tokio's whole budget each poll; a ringkit task beside it must still get
/// its tokio resources (polled after the main future, it saw every one
/// `Pending`: no acquire in 100 000 receives).
#[test]
fn a_busy_hosted_main_future_does_not_starve_tasks() {
    for backend in [Backend::Epoll, Backend::Uring] {
        let Some(rt) = hosted(backend) else { continue };
        let received = rt.block_on(async {
            let done = std::rc::Rc::new(std::cell::Cell::new(false));
            let d = done.clone();
            let sem = std::sync::Arc::new(tokio::sync::Semaphore::new(1));
            ringkit::spawn(async move {
                for _ in 0..100 {
                    drop(sem.acquire().await.unwrap());
                    tokio::task::yield_now().await;
                }
                d.set(true);
            });
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            for _ in 0..1000 {
                tx.send(()).unwrap();
            }
            let mut received = 0u64;
            while !done.get() && received < 100_000 {
                rx.recv().await.unwrap();
                tx.send(()).unwrap();
                received += 1;
            }
            assert!(done.get(), "{backend:?}: the task starved");
            received
        });
        eprintln!("{backend:?}: the task finished after {received} receives");
    }
}
