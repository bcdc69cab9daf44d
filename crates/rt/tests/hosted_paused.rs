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

#[test]
fn a_paused_tokio_clock_is_not_moved_by_ringkit_timers() {
    for backend in [Backend::Epoll, Backend::Uring] {
        let rt = match Builder::new()
            .backend(backend)
            .ignore_env()
            .host_tokio()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("skipped {backend:?}: {e}");
                continue;
            }
        };
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
