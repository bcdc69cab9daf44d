//! Hosted mode: tokio inside ringkit tasks, one loop, no lost wake-up.
//!
//! Every test runs on epoll and on io_uring with the flags hosted mode
//! picks by itself, with `COOP_TASKRUN` and with none. `DEFER_TASKRUN` is
//! refused for hosted rings (see `hosted_rings_refuse_defer_taskrun`). A
//! lost wake-up shows as a wait that ends only when the 10 s watchdog
//! timer fires, so each wait must end within 3 s of its cause.

use std::io::Write;
use std::time::{Duration, Instant};

use ringkit::net::{TcpListener, TcpStream};
use ringkit::{Backend, Builder, Runtime};

const SINGLE_ISSUER: u32 = 1 << 12;
const DEFER_TASKRUN: u32 = 1 << 13;
const COOP_TASKRUN: u32 = 1 << 8;
const TASKRUN_FLAG: u32 = 1 << 9;

/// (name, builder) for every configuration hosted mode must work in.
fn configs() -> Vec<(&'static str, Builder)> {
    let b = || Builder::new().host_tokio();
    vec![
        ("epoll", b().backend(Backend::Epoll)),
        ("uring default", b().backend(Backend::Uring)),
        (
            "uring coop_taskrun",
            b().backend(Backend::Uring)
                .uring_flags(COOP_TASKRUN | TASKRUN_FLAG),
        ),
        ("uring plain", b().backend(Backend::Uring).uring_flags(0)),
    ]
}

/// Run `test` on a fresh hosted runtime per configuration, each on its own
/// thread (one runtime per thread).
fn each_config<F, Fut>(test: F)
where
    F: Fn() -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = ()>,
{
    for (name, builder) in configs() {
        let test = test.clone();
        std::thread::spawn(move || {
            let rt = match builder.build() {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("skipped {name}: {e}");
                    return;
                }
            };
            assert!(rt.is_hosted());
            eprintln!("{name}: {}", rt.backend_report());
            rt.block_on(watchdog(name, test()));
        })
        .join()
        .unwrap_or_else(|_| panic!("{name}: test panicked"));
    }
}

/// Fail (instead of hanging) when `fut` takes more than 10 s: a ringkit
/// timer, so it also ends a wait whose own wake-up was lost.
async fn watchdog<F: std::future::Future<Output = ()>>(name: &str, fut: F) {
    ringkit::time::timeout(Duration::from_secs(10), fut)
        .await
        .unwrap_or_else(|_| panic!("{name}: still waiting after 10 s (lost wake-up)"));
}

fn assert_prompt(name: &str, start: Instant, cause_after: Duration) {
    let took = start.elapsed();
    assert!(
        took >= cause_after && took < cause_after + Duration::from_secs(3),
        "{name}: the wait ended after {took:?}, its cause came at {cause_after:?}"
    );
}

/// A ringkit completion (a read whose data arrives from another thread
/// 100 ms later) ends a blocked wait.
#[test]
fn completion_ends_a_blocked_wait() {
    each_config(|| async {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        // Every lower bound starts before its cause: a start taken after
        // the spawn could follow the thread's sleep by any delay a busy
        // machine adds, and the wait would seem to end before its cause.
        let start = Instant::now();
        let writer = std::thread::spawn(move || {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            std::thread::sleep(Duration::from_millis(100));
            s.write_all(b"late").unwrap();
            std::thread::sleep(Duration::from_millis(200));
        });
        let (s, _) = l.accept().await.unwrap();
        let (n, buf) = s.read(vec![0u8; 16]).await;
        assert_eq!(&buf[..n.unwrap()], b"late");
        assert_prompt("completion", start, Duration::from_millis(100));
        writer.join().unwrap();
    });
}

/// A tokio timer alone ends a blocked wait (no ringkit timer is pending).
#[test]
fn tokio_timer_ends_a_blocked_wait() {
    each_config(|| async {
        let start = Instant::now();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_prompt("tokio timer", start, Duration::from_millis(100));
        // And a ringkit timer, for symmetry.
        let start = Instant::now();
        ringkit::time::sleep(Duration::from_millis(100)).await;
        assert_prompt("ringkit timer", start, Duration::from_millis(100));
    });
}

/// A tokio socket event (an accept, then a read) ends a blocked wait.
#[test]
fn tokio_socket_event_ends_a_blocked_wait() {
    each_config(|| async {
        use tokio::io::AsyncReadExt;
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let start = Instant::now();
        let client = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            std::thread::sleep(Duration::from_millis(100));
            s.write_all(b"hi").unwrap();
        });
        let (mut s, _) = l.accept().await.unwrap();
        assert_prompt("tokio accept", start, Duration::from_millis(100));
        let mut buf = [0u8; 2];
        s.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"hi");
        assert_prompt("tokio read", start, Duration::from_millis(200));
        client.join().unwrap();
    });
}

/// Wakes from another thread (a tokio oneshot sent by a plain thread),
/// several in a row, each end a blocked wait of a ringkit task.
#[test]
fn cross_thread_wakes_end_blocked_waits() {
    each_config(|| async {
        for round in 0..4u32 {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let start = Instant::now();
            let sender = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                tx.send(round).unwrap();
            });
            let got = ringkit::spawn(async move { rx.await.unwrap() })
                .await
                .unwrap();
            assert_eq!(got, round);
            assert_prompt("cross-thread", start, Duration::from_millis(50));
            sender.join().unwrap();
        }
    });
}

/// A hosted ring never uses `DEFER_TASKRUN`: asked for, it is refused with
/// the reason; left to itself, hosted mode picks other flags. The reason,
/// measured on Linux 6.18: with `DEFER_TASKRUN`, a completion caused by an
/// eventfd write (here four cross-thread wakes in a row) signals the ring's
/// registered eventfd through an RCU callback, and only the first signal
/// arrived: round 0 woke after 63 ms, rounds 1-3 never did.
#[test]
fn hosted_rings_refuse_defer_taskrun() {
    std::thread::spawn(|| {
        let asked = Builder::new()
            .host_tokio()
            .backend(Backend::Uring)
            .uring_flags(SINGLE_ISSUER | DEFER_TASKRUN | TASKRUN_FLAG)
            .build();
        match asked {
            Ok(_) => panic!("a hosted ring with DEFER_TASKRUN was built"),
            Err(e) => assert!(e.to_string().contains("DEFER_TASKRUN"), "{e}"),
        }
        let Ok(rt) = Builder::new().host_tokio().backend(Backend::Uring).build() else {
            eprintln!("skipped: io_uring unavailable");
            return;
        };
        let flags = rt.backend_report().uring_flags;
        assert_eq!(flags & DEFER_TASKRUN, 0, "{}", rt.backend_report());
        drop(rt);
        // Without hosting, DEFER_TASKRUN stays the first choice.
        let rt = Builder::new().backend(Backend::Uring).build().unwrap();
        assert_ne!(rt.backend_report().uring_flags & DEFER_TASKRUN, 0);
    })
    .join()
    .unwrap();
}

/// A ringkit task made runnable by a tokio task on the same thread (while
/// ringkit is idle) runs at once.
#[test]
fn tokio_task_wakes_a_ringkit_task() {
    each_config(|| async {
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            tx.send("from tokio").unwrap();
        });
        let start = Instant::now();
        let msg = ringkit::spawn(async move { rx.await.unwrap() })
            .await
            .unwrap();
        assert_eq!(msg, "from tokio");
        assert_prompt("tokio to ringkit", start, Duration::from_millis(100));
    });
}

/// Ringkit work made by a tokio task while ringkit waits idle ends the
/// wait: a ringkit task spawned, a ringkit read queued (an SQE on io_uring),
/// a ringkit timer added. Each reaches the main task only through that
/// work, so a missed one shows as the 10 s watchdog.
#[test]
fn ringkit_work_made_by_tokio_tasks_ends_an_idle_wait() {
    each_config(|| async {
        // A task spawned from a tokio task.
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::task::spawn_local(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            ringkit::spawn(async move {
                let _ = tx.send(1u32);
            });
        });
        let start = Instant::now();
        assert_eq!(rx.await.unwrap(), 1);
        assert_prompt(
            "ringkit::spawn from tokio",
            start,
            Duration::from_millis(50),
        );

        // A read queued from a tokio task (its data is already there).
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let mut peer = std::net::TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().await.unwrap();
        peer.write_all(b"waiting").unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::task::spawn_local(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let (n, buf) = s.read(vec![0u8; 16]).await;
            let _ = tx.send(buf[..n.unwrap()].to_vec());
        });
        let start = Instant::now();
        assert_eq!(rx.await.unwrap(), b"waiting");
        assert_prompt("ringkit read from tokio", start, Duration::from_millis(50));

        // A ringkit timer added from a tokio task.
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::task::spawn_local(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            ringkit::time::sleep(Duration::from_millis(50)).await;
            let _ = tx.send(());
        });
        let start = Instant::now();
        rx.await.unwrap();
        assert_prompt(
            "ringkit timer from tokio",
            start,
            Duration::from_millis(100),
        );
        drop(peer);
    });
}

/// Limits: a ringkit timer of `Duration::MAX` (never) pending while the
/// loop waits on a tokio timer does not spin the thread or end the wait
/// early, and a zero-length ringkit sleep completes.
#[test]
fn never_and_zero_timers_while_hosted() {
    each_config(|| async {
        let never = ringkit::spawn(ringkit::time::sleep(Duration::MAX));
        let t0 = thread_cpu();
        let start = Instant::now();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_prompt(
            "tokio timer beside a never-timer",
            start,
            Duration::from_millis(300),
        );
        let used = thread_cpu() - t0;
        assert!(
            used < Duration::from_millis(100),
            "used {used:?} of CPU in 300 ms"
        );
        ringkit::time::sleep(Duration::ZERO).await;
        let r =
            ringkit::time::timeout(Duration::MAX, tokio::time::sleep(Duration::from_millis(10)))
                .await;
        assert!(r.is_ok());
        never.abort();
    });
}

/// The compatibility list, one by one, from inside a ringkit task:
/// spawn, spawn_local, spawn_blocking, time, net connect and listen, fs,
/// sync; and a ringkit socket used from inside a tokio task.
#[test]
fn tokio_apis_work_inside_ringkit_tasks() {
    each_config(|| async {
        ringkit::spawn(async {
            // spawn (Send), spawn_local (!Send), spawn_blocking.
            assert_eq!(tokio::spawn(async { 1 + 1 }).await.unwrap(), 2);
            let rc = std::rc::Rc::new(5);
            let r2 = rc.clone();
            assert_eq!(
                tokio::task::spawn_local(async move { *r2 }).await.unwrap(),
                5
            );
            let t = std::thread::current().id();
            let other = tokio::task::spawn_blocking(move || std::thread::current().id() != t)
                .await
                .unwrap();
            assert!(other, "spawn_blocking ran on the runtime thread");
            // time: sleep, timeout, interval.
            tokio::time::sleep(Duration::from_millis(5)).await;
            let r =
                tokio::time::timeout(Duration::from_millis(20), std::future::pending::<()>()).await;
            assert!(r.is_err());
            let mut iv = tokio::time::interval(Duration::from_millis(5));
            for _ in 0..3 {
                iv.tick().await;
            }
            // net: listen and connect, both tokio.
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let srv = tokio::spawn(async move {
                let (mut s, _) = l.accept().await.unwrap();
                let mut b = [0u8; 4];
                s.read_exact(&mut b).await.unwrap();
                s.write_all(&b).await.unwrap();
            });
            let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
            c.write_all(b"ping").await.unwrap();
            let mut b = [0u8; 4];
            c.read_exact(&mut b).await.unwrap();
            assert_eq!(&b, b"ping");
            srv.await.unwrap();
            // fs.
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("f");
            tokio::fs::write(&p, b"file").await.unwrap();
            assert_eq!(tokio::fs::read(&p).await.unwrap(), b"file");
            // sync: mpsc between a tokio task and this ringkit task.
            let (tx, mut rx) = tokio::sync::mpsc::channel(4);
            tokio::spawn(async move {
                for i in 0..10u32 {
                    tx.send(i).await.unwrap();
                }
            });
            let mut sum = 0;
            while let Some(i) = rx.recv().await {
                sum += i;
            }
            assert_eq!(sum, 45);
            // A ringkit socket inside a tokio local task (its ops go
            // through this thread's ringkit driver).
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let echo = tokio::task::spawn_local(async move {
                let (s, _) = l.accept().await.unwrap();
                let (n, buf) = s.read(vec![0u8; 8]).await;
                let n = n.unwrap();
                let (r, _) = s.write_all(buf[..n].to_vec()).await;
                r.unwrap();
            });
            let s = TcpStream::connect(addr).await.unwrap();
            let (r, _) = s.write_all(b"ring".to_vec()).await;
            r.unwrap();
            let (n, buf) = s.read(vec![0u8; 8]).await;
            assert_eq!(&buf[..n.unwrap()], b"ring");
            echo.await.unwrap();
        })
        .await
        .unwrap();
    });
}

/// An idle hosted server (a ringkit listener and a tokio listener, both
/// waiting) uses no CPU to speak of over 2 s: the thread sleeps.
#[test]
fn an_idle_hosted_thread_does_not_spin() {
    each_config(|| async {
        let ring_l = TcpListener::bind("127.0.0.1:0").unwrap();
        let tokio_l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = ringkit::spawn(async move { ring_l.accept().await.map(|_| ()) });
        let b = tokio::task::spawn_local(async move { tokio_l.accept().await.map(|_| ()) });
        let t0 = thread_cpu();
        ringkit::time::sleep(Duration::from_secs(2)).await;
        let used = thread_cpu() - t0;
        assert!(
            used < Duration::from_millis(100),
            "idle thread used {used:?} of CPU in 2 s"
        );
        a.abort();
        b.abort();
    });
}

/// Tasks of both kinds left running when the runtime is dropped are
/// dropped with it, without a panic: tokio's first (they may hold ringkit
/// operations), then ringkit's (they may hold tokio resources).
#[test]
fn dropping_a_hosted_runtime_with_tasks_of_both_kinds() {
    for (name, builder) in configs() {
        std::thread::spawn(move || {
            let Ok(rt) = builder.build() else {
                eprintln!("skipped {name}");
                return;
            };
            rt.block_on(async {
                let l = TcpListener::bind("127.0.0.1:0").unwrap();
                let addr = l.local_addr().unwrap();
                // A tokio task holding a ringkit accept in flight.
                tokio::task::spawn_local(async move {
                    let _ = l.accept().await;
                });
                // A ringkit task holding a tokio sleep and a tokio socket.
                ringkit::spawn(async move {
                    let _c = tokio::net::TcpStream::connect(addr).await;
                    tokio::time::sleep(Duration::from_secs(60)).await;
                });
                tokio::time::sleep(Duration::from_millis(50)).await;
            });
            drop(rt);
            // A new runtime on the same thread works.
            let rt = Runtime::new().unwrap();
            rt.block_on(ringkit::time::sleep(Duration::from_millis(1)));
        })
        .join()
        .unwrap_or_else(|_| panic!("{name}: panicked"));
    }
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Each ringkit task gets a tokio cooperative budget of its own, as a tokio
/// task does: 1 000 tasks each doing 100 rounds of an uncontended
/// `Semaphore::acquire` and a yield. When a whole ringkit turn shared one
/// budget (128 units per poll of the joint loop's future), every acquire
/// past the 128th of a turn returned `Pending`, so the first tasks of each
/// turn ran and the rest were polled for nothing: about 4.4 polls per round
/// instead of one, and the first 128 tasks finished long before the last.
#[test]
fn every_task_has_a_tokio_budget_of_its_own() {
    const TASKS: usize = 1000;
    const ROUNDS: u32 = 100;
    each_config(|| async {
        use std::cell::{Cell, RefCell};
        use std::rc::Rc;
        let sem = Rc::new(tokio::sync::Semaphore::new(TASKS));
        let done: Rc<Vec<Cell<u32>>> = Rc::new((0..TASKS).map(|_| Cell::new(0)).collect());
        // The rounds each task had done when the first task finished.
        let at_first_finish: Rc<RefCell<Option<Vec<u32>>>> = Rc::default();
        let polls_before = ringkit::metrics().task_polls;
        let t0 = Instant::now();
        let handles: Vec<_> = (0..TASKS)
            .map(|i| {
                let (sem, done, snap) = (sem.clone(), done.clone(), at_first_finish.clone());
                ringkit::spawn(async move {
                    for _ in 0..ROUNDS {
                        let _p = sem.acquire().await.unwrap();
                        ringkit::yield_now().await;
                        done[i].set(done[i].get() + 1);
                    }
                    let mut snap = snap.borrow_mut();
                    if snap.is_none() {
                        *snap = Some(done.iter().map(Cell::get).collect());
                    }
                })
            })
            .collect();
        for h in handles {
            h.await.unwrap();
        }
        let polls = ringkit::metrics().task_polls - polls_before;
        let ours = t0.elapsed();
        // The same work as tokio tasks, for the record (not asserted:
        // timings are the benchmarks' business).
        let t0 = Instant::now();
        let local: Vec<_> = (0..TASKS)
            .map(|_| {
                let sem = sem.clone();
                tokio::task::spawn_local(async move {
                    for _ in 0..ROUNDS {
                        let _p = sem.acquire().await.unwrap();
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        for h in local {
            h.await.unwrap();
        }
        eprintln!(
            "{polls} polls; ringkit tasks {ours:?}, the same as tokio spawn_local tasks {:?}",
            t0.elapsed()
        );
        // One poll per round and one to finish, per task; a little slack.
        let needed = TASKS as u64 * (ROUNDS as u64 + 1);
        assert!(
            polls <= needed * 12 / 10,
            "{polls} task polls for {needed} rounds: tasks were polled without budget"
        );
        // Interleaved: when the first task finished, the last 128 spawned
        // were nearly done too.
        let snap = at_first_finish.borrow_mut().take().unwrap();
        let behind = snap[TASKS - 128..].iter().copied().min().unwrap();
        assert!(
            behind + 2 >= ROUNDS,
            "when the first task finished, one of the last 128 had done {behind} of {ROUNDS} rounds"
        );
    });
}

/// What `f` logs through `tracing` on this thread, as text.
fn logged(f: impl FnOnce()) -> String {
    let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let sink = out.clone();
    let sub = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || Sink(sink.clone()))
        .finish();
    tracing::subscriber::with_default(sub, f);
    let v = out.lock().unwrap().clone();
    String::from_utf8_lossy(&v).into_owned()
}

struct Sink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A hosted runtime built where a tokio runtime is current logs a
/// warning that names the trap (resources made on the outer runtime are
/// not driven by this one); from a `spawn_blocking` job it is legitimate,
/// so it builds and runs.
#[test]
fn a_hosted_runtime_built_inside_tokio_warns() {
    let outer = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (text, got) = outer.block_on(async {
        tokio::task::spawn_blocking(|| {
            let mut got = 0;
            let text = logged(|| {
                let rt = Builder::new().host_tokio().build().unwrap();
                got = rt.block_on(async { tokio::spawn(async { 42 }).await.unwrap() });
            });
            (text, got)
        })
        .await
        .unwrap()
    });
    assert_eq!(got, 42);
    assert!(
        text.contains("WARN") && text.contains("driven only by it"),
        "{text:?}"
    );
    // Outside, nothing to say.
    let text = logged(|| drop(Builder::new().host_tokio().build().unwrap()));
    assert!(!text.contains("WARN"), "{text:?}");
}

/// `host_shutdown_timeout` bounds how long dropping a hosted runtime waits
/// for running `spawn_blocking` jobs (tokio's `shutdown_timeout`); without
/// it the drop waits for them, as tokio's own drop does.
#[test]
fn a_shutdown_timeout_bounds_blocking_jobs() {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let rt = Builder::new()
        .host_tokio()
        .host_shutdown_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    rt.block_on(async {
        let (started_tx, started) = tokio::sync::oneshot::channel();
        tokio::task::spawn_blocking(move || {
            let _ = started_tx.send(());
            // Until the test ends (the sender is dropped then).
            let _ = rx.recv();
        });
        started.await.unwrap();
    });
    let t0 = Instant::now();
    drop(rt);
    let took = t0.elapsed();
    drop(tx);
    assert!(
        took < Duration::from_secs(5),
        "the drop waited {took:?} for a blocking job"
    );
}

/// Runs `f` when dropped.
struct OnDrop<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

fn respawn_forever() {
    let d = OnDrop(respawn_forever);
    ringkit::spawn(async move {
        let _d = d;
        std::future::pending::<()>().await;
    });
}

/// A task whose drop spawns a task that does the same: the runtime's drop
/// ends (the tear-down used to spin on it for good), hosted and plain.
#[test]
fn a_drop_that_respawns_forever_does_not_hold_the_tear_down() {
    for hosted in [false, true] {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let b = Builder::new().backend(Backend::Epoll);
            let rt = if hosted { b.host_tokio() } else { b }.build().unwrap();
            rt.block_on(async {
                respawn_forever();
                ringkit::yield_now().await;
            });
            drop(rt);
            let _ = tx.send(());
        });
        assert!(
            rx.recv_timeout(Duration::from_secs(20)).is_ok(),
            "hosted {hosted}: the runtime's drop did not end"
        );
    }
}

/// A plain (not hosted) runtime run from inside a current-thread tokio
/// task, its tasks using a tokio channel 300 times: it finishes. Its tasks
/// used to charge the outer tokio task's budget; once it was spent every
/// `recv` answered `Pending` with a wake deferred to the blocked tokio
/// scheduler, and the runtime hung.
#[test]
fn a_plain_runtime_inside_a_tokio_task_does_not_spend_its_budget() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let outer = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let got = outer.block_on(async {
            let rt = Builder::new().backend(Backend::Epoll).build().unwrap();
            rt.block_on(async {
                let (t, mut r) = tokio::sync::mpsc::unbounded_channel();
                for i in 0..300 {
                    t.send(i).unwrap();
                }
                ringkit::spawn(async move {
                    let mut n = 0;
                    while n < 300 {
                        r.recv().await.unwrap();
                        n += 1;
                    }
                    n
                })
                .await
                .unwrap()
            })
        });
        let _ = tx.send(got);
    });
    let got = rx.recv_timeout(Duration::from_secs(20));
    assert_eq!(got, Ok(300), "the plain runtime hung inside a tokio task");
}
