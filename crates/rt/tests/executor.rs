//! The executor, timers and metrics, on both backends (`test_all!`): many
//! tasks, spawning from tasks, abort (of a sleeping task and of a task blocked
//! in a socket read), panics, `yield_now`, wakes from another thread, timers,
//! and the metrics counters (with the io_uring batching ratio on a
//! 1000-connection echo).

use std::cell::{Cell, RefCell};
use std::net::Shutdown;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use ringkit::net::{TcpListener, TcpStream};
use ringkit::time::{interval, sleep, sleep_until, timeout, Elapsed};
use ringkit::{Backend, JoinError, JoinHandle};

/// Sets its flag when dropped: proves a task's future was dropped.
struct DropFlag(Rc<Cell<bool>>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.set(true);
    }
}

fn is_uring() -> bool {
    ringkit::backend_report().expect("inside a runtime").chosen == Backend::Uring
}

async fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
    let (s, _) = l.accept().await.unwrap();
    (c, s)
}

async fn read_exact(s: &TcpStream, n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        // Bounded, so a lost byte or wake-up fails the test instead of hanging it.
        let (res, buf) = timeout(
            Duration::from_secs(20),
            s.read(Vec::with_capacity(n - out.len())),
        )
        .await
        .expect("read stuck for 20 s (lost data or lost wake-up)");
        let k = res.unwrap();
        assert!(k > 0, "unexpected EOF after {} of {n} bytes", out.len());
        out.extend_from_slice(&buf[..k]);
    }
    out
}

/// A spawn tree: `fanout^depth` leaves, each returning its path id.
fn tree(depth: u32, id: u64) -> JoinHandle<u64> {
    ringkit::spawn(async move {
        if depth == 0 {
            ringkit::yield_now().await;
            return id;
        }
        let hs: Vec<_> = (0..10).map(|i| tree(depth - 1, id * 10 + i)).collect();
        let mut sum = 0;
        for h in hs {
            sum += h.await.unwrap();
        }
        sum
    })
}

fn tree_expected(depth: u32, id: u64) -> u64 {
    if depth == 0 {
        id
    } else {
        (0..10).map(|i| tree_expected(depth - 1, id * 10 + i)).sum()
    }
}

/// State shared with a std thread that wakes a task from outside the runtime.
#[derive(Default)]
struct Remote {
    waker: Mutex<Option<Waker>>,
    done: AtomicBool,
}

/// Wait (no I/O, no timer of our own) until a std thread sets `done` and
/// wakes us after `delay`. Returns how many times we were polled.
async fn wait_for_remote_wake(delay: Duration) -> u32 {
    let shared = Arc::new(Remote::default());
    let mut thread = None;
    let mut polls = 0;
    std::future::poll_fn(|cx| {
        polls += 1;
        if shared.done.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        *shared.waker.lock().unwrap() = Some(cx.waker().clone());
        if thread.is_none() {
            let sh = shared.clone();
            thread = Some(std::thread::spawn(move || {
                std::thread::sleep(delay);
                sh.done.store(true, Ordering::Release);
                let w = sh.waker.lock().unwrap().take();
                w.expect("waker registered").wake();
            }));
        }
        Poll::Pending
    })
    .await;
    thread.unwrap().join().unwrap();
    polls
}

ringkit::test_all! {
    /// 10 000 spawned tasks all complete with the right outputs.
    async fn ten_thousand_tasks() {
        let before = ringkit::metrics();
        let hs: Vec<_> = (0..10_000u64)
            .map(|i| {
                ringkit::spawn(async move {
                    if i % 3 == 0 {
                        ringkit::yield_now().await;
                    }
                    i * i
                })
            })
            .collect();
        for (i, h) in hs.into_iter().enumerate() {
            assert_eq!(h.await.unwrap(), (i as u64) * (i as u64));
        }
        let m = ringkit::metrics().since(&before);
        assert_eq!(m.tasks_spawned, 10_000);
        assert!(m.task_polls >= 10_000);
    }

    /// Tasks spawned from tasks (a tree of 1111 tasks), and a detached task
    /// (its handle dropped) still runs.
    async fn spawn_from_tasks() {
        assert_eq!(tree(3, 1).await.unwrap(), tree_expected(3, 1));
        let ran = Rc::new(Cell::new(false));
        let r = ran.clone();
        let h = ringkit::spawn(async move {
            let inner = ringkit::spawn(async move {
                sleep(Duration::from_millis(2)).await;
                r.set(true);
            });
            drop(inner); // detached
        });
        h.await.unwrap();
        // Wait for it rather than for a fixed time: on a starved thread one
        // park can fire both timers, and this task is polled first.
        let waited = ringkit::time::timeout(Duration::from_secs(10), async {
            while !ran.get() {
                sleep(Duration::from_millis(1)).await;
            }
        })
        .await;
        assert!(waited.is_ok(), "a detached task did not run");
    }

    /// Aborting a task blocked in a sleep: Cancelled, and its future was dropped.
    async fn abort_sleeping_task() {
        let dropped = Rc::new(Cell::new(false));
        let guard = DropFlag(dropped.clone());
        let h = ringkit::spawn(async move {
            let _guard = guard;
            sleep(Duration::from_secs(30)).await;
            "finished"
        });
        sleep(Duration::from_millis(5)).await;
        assert!(!h.is_finished());
        assert!(!dropped.get());
        let t0 = Instant::now();
        h.abort();
        match h.await {
            Err(JoinError::Cancelled) => {}
            other => panic!("expected Cancelled, got {other:?}"),
        }
        assert!(dropped.get(), "the aborted task's future was not dropped");
        assert!(t0.elapsed() < Duration::from_secs(30));
        // Aborting a finished task changes nothing.
        let h = ringkit::spawn(async { 7 });
        ringkit::yield_now().await;
        ringkit::yield_now().await;
        assert!(h.is_finished());
        h.abort();
        assert_eq!(h.await.unwrap(), 7);
    }

    /// Aborting a task blocked on a socket read: the read is cancelled, the
    /// runtime carries on and the socket works for another reader, with no
    /// byte lost.
    async fn abort_task_blocked_on_read() {
        let (c, s) = pair().await;
        let s = Rc::new(s);
        for round in 0..5u8 {
            let dropped = Rc::new(Cell::new(false));
            let guard = DropFlag(dropped.clone());
            let s2 = s.clone();
            let h = ringkit::spawn(async move {
                let _guard = guard;
                let (res, buf) = s2.read(Vec::with_capacity(64)).await;
                buf[..res.unwrap()].to_vec()
            });
            sleep(Duration::from_millis(5)).await; // the read is in flight
            assert!(!h.is_finished(), "read completed with no data sent");
            let sqes = ringkit::metrics().sqes_submitted;
            h.abort();
            match h.await {
                Err(JoinError::Cancelled) => {}
                other => panic!("expected Cancelled, got {other:?}"),
            }
            assert!(dropped.get());
            assert_eq!(Rc::strong_count(&s), 1, "the aborted task still holds the stream");
            if is_uring() {
                // The in-flight RECV was cancelled (an ASYNC_CANCEL was queued).
                assert!(ringkit::metrics().sqes_submitted > sqes);
            }
            sleep(Duration::from_millis(1)).await; // the runtime carries on
            let msg = vec![round; 10 + round as usize];
            c.write_all(msg.clone()).await.0.unwrap();
            assert_eq!(read_exact(&s, msg.len()).await, msg, "round {round}");
        }
    }

    /// A panicking task gives JoinError::Panicked; the runtime lives on.
    async fn panicking_task() {
        let h = ringkit::spawn(async {
            ringkit::yield_now().await;
            panic!("boom {}", 42);
        });
        match h.await {
            Err(JoinError::Panicked(m)) => assert!(m.contains("boom 42"), "message: {m}"),
            other => panic!("expected Panicked, got {other:?}"),
        }
        // A task that panics with a socket read in flight.
        let (c, s) = pair().await;
        let h = ringkit::spawn(async move {
            let r = timeout(Duration::from_millis(5), s.read(Vec::with_capacity(8))).await;
            assert!(r.is_err());
            let _read = std::pin::pin!(s.read(Vec::with_capacity(8)));
            panic!("with I/O");
        });
        assert!(matches!(h.await, Err(JoinError::Panicked(_))));
        drop(c);
        // Still alive: tasks, timers and I/O.
        assert_eq!(ringkit::spawn(async { 5 }).await.unwrap(), 5);
        sleep(Duration::from_millis(1)).await;
        let (c, s) = pair().await;
        c.write_all(&b"alive"[..]).await.0.unwrap();
        assert_eq!(read_exact(&s, 5).await, b"alive");
    }

    /// yield_now lets other tasks run before the yielding one continues.
    async fn yield_now_interleaves() {
        let counter = Rc::new(Cell::new(0u32));
        let c2 = counter.clone();
        let other = ringkit::spawn(async move {
            for _ in 0..100 {
                c2.set(c2.get() + 1);
                ringkit::yield_now().await;
            }
        });
        for _ in 0..50 {
            let before = counter.get();
            ringkit::yield_now().await;
            assert!(counter.get() > before, "yield_now did not let the other task run");
        }
        other.await.unwrap();
        // Two spawned tasks interleave.
        let log = Rc::new(RefCell::new(Vec::new()));
        let hs: Vec<_> = ['a', 'b']
            .into_iter()
            .map(|tag| {
                let log = log.clone();
                ringkit::spawn(async move {
                    for _ in 0..10 {
                        log.borrow_mut().push(tag);
                        ringkit::yield_now().await;
                    }
                })
            })
            .collect();
        for h in hs {
            h.await.unwrap();
        }
        let log = log.borrow();
        let last_a = log.iter().rposition(|&t| t == 'a').unwrap();
        let first_b = log.iter().position(|&t| t == 'b').unwrap();
        assert!(first_b < last_a, "tasks did not interleave: {log:?}");
    }

    /// A std thread wakes a task (and the main future) blocked with no I/O.
    async fn remote_wake() {
        let t0 = Instant::now();
        let h = ringkit::spawn(wait_for_remote_wake(Duration::from_millis(20)));
        // The 5 s watchdog only bounds the test: without the remote wake the
        // task would still be pending when it fires.
        match timeout(Duration::from_secs(5), h).await {
            Ok(polls) => assert!(polls.unwrap() >= 2),
            Err(Elapsed) => panic!("a wake from another thread did not reach the task"),
        }
        assert!(t0.elapsed() >= Duration::from_millis(20));
        // The main future itself.
        let t0 = Instant::now();
        let r = timeout(Duration::from_secs(5), wait_for_remote_wake(Duration::from_millis(20))).await;
        assert!(r.is_ok(), "a wake from another thread did not reach block_on");
        assert!(t0.elapsed() >= Duration::from_millis(20));
    }

    /// sleep waits at least its duration.
    async fn sleep_waits_at_least() {
        for ms in [0u64, 1, 5, 20] {
            let d = Duration::from_millis(ms);
            let t0 = Instant::now();
            sleep(d).await;
            assert!(t0.elapsed() >= d, "sleep({d:?}) returned after {:?}", t0.elapsed());
        }
        let deadline = Instant::now() + Duration::from_millis(10);
        sleep_until(deadline).await;
        assert!(Instant::now() >= deadline);
        // Many concurrent sleeps, each at least its own duration.
        let hs: Vec<_> = (0..200u64)
            .map(|i| {
                ringkit::spawn(async move {
                    let d = Duration::from_micros(i * 97 % 15_000);
                    let t0 = Instant::now();
                    sleep(d).await;
                    t0.elapsed() >= d
                })
            })
            .collect();
        for h in hs {
            assert!(h.await.unwrap());
        }
    }

    /// timeout: Elapsed when the future is slower, the output when it is not.
    async fn timeout_returns_elapsed() {
        let t0 = Instant::now();
        let r = timeout(Duration::from_millis(10), sleep(Duration::from_secs(30))).await;
        assert_eq!(r, Err(Elapsed));
        assert!(t0.elapsed() >= Duration::from_millis(10));
        assert!(t0.elapsed() < Duration::from_secs(30));
        assert_eq!(timeout(Duration::from_secs(30), async { 5 }).await, Ok(5));
        let r = timeout(Duration::from_secs(30), async {
            sleep(Duration::from_millis(2)).await;
            6
        })
        .await;
        assert_eq!(r, Ok(6));
        let e: std::io::Error = Elapsed.into();
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
    }

    /// interval ticks, each tick no earlier than scheduled.
    async fn interval_ticks() {
        let period = Duration::from_millis(5);
        let t0 = Instant::now();
        let mut iv = interval(period);
        let mut last = t0;
        for k in 1..=5u32 {
            let at = iv.tick().await;
            let now = Instant::now();
            assert!(at > last, "tick {k} not after the previous one");
            assert!(at >= t0 + period * k, "tick {k} scheduled too early");
            assert!(now >= at, "tick {k} fired before its instant");
            last = at;
        }
        assert!(t0.elapsed() >= period * 5);
    }

    /// Counters move; on io_uring one io_uring_enter serves many operations.
    async fn metrics_count_and_batching() {
        const CONNS: usize = 1000;
        const ROUNDS: usize = 3;
        let ops = Rc::new(Cell::new(0u64));
        let count = |ops: &Rc<Cell<u64>>, n: u64| ops.set(ops.get() + n);
        let before = ringkit::metrics();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let o = ops.clone();
        let server = ringkit::spawn(async move {
            let mut hs = Vec::new();
            for _ in 0..CONNS {
                let (s, _) = l.accept().await.unwrap();
                count(&o, 1);
                let o = o.clone();
                hs.push(ringkit::spawn(async move {
                    loop {
                        let (res, buf) = s.read(Vec::with_capacity(1024)).await;
                        count(&o, 1);
                        if res.unwrap() == 0 {
                            return;
                        }
                        s.write_all(buf).await.0.unwrap();
                        count(&o, 1);
                    }
                }));
            }
            for h in hs {
                h.await.unwrap();
            }
        });
        let clients: Vec<_> = (0..CONNS)
            .map(|i| {
                let o = ops.clone();
                ringkit::spawn(async move {
                    let c = TcpStream::connect(addr).await.unwrap();
                    count(&o, 1);
                    for r in 0..ROUNDS {
                        let msg = vec![(i + r) as u8; 100];
                        c.write_all(msg.clone()).await.0.unwrap();
                        count(&o, 1);
                        let got = read_exact(&c, 100).await;
                        count(&o, 1);
                        assert_eq!(got, msg);
                    }
                    c.shutdown(Shutdown::Write).await.unwrap();
                    count(&o, 1);
                })
            })
            .collect();
        for h in clients {
            h.await.unwrap();
        }
        server.await.unwrap();
        let m = ringkit::metrics().since(&before);
        let ops = ops.get();
        eprintln!("{m}");
        assert!(m.parks > 0 && m.task_polls > 0);
        assert_eq!(m.tasks_spawned, 2 * CONNS as u64 + 1);
        if is_uring() {
            assert!(m.uring_enters > 0 && m.sqes_submitted > 0 && m.cqes_reaped > 0);
            assert_eq!(m.epoll_waits, 0);
            eprintln!(
                "io_uring: {} enters for {ops} operations ({} SQEs): {:.4} enters per operation",
                m.uring_enters,
                m.sqes_submitted,
                m.uring_enters as f64 / ops as f64
            );
            assert!(
                m.uring_enters * 4 < ops,
                "io_uring_enter is not batching: {} enters for {ops} operations",
                m.uring_enters
            );
        } else {
            assert!(m.epoll_waits > 0);
            assert_eq!(m.uring_enters, 0);
            eprintln!(
                "epoll: {} epoll_waits and {} other syscalls for {ops} operations",
                m.epoll_waits, m.other_syscalls
            );
        }
    }
}

/// `backend_report` outside a runtime is `None` (it used to panic), inside
/// one the runtime's report, and on another thread `None` again.
#[test]
fn backend_report_is_none_outside_a_runtime() {
    assert!(ringkit::backend_report().is_none());
    let rt = ringkit::Builder::new()
        .backend(Backend::Epoll)
        .build()
        .unwrap();
    rt.block_on(async {
        let r = ringkit::backend_report().expect("inside a runtime");
        assert_eq!(r.chosen, Backend::Epoll);
        let off = std::thread::spawn(ringkit::backend_report).join().unwrap();
        assert!(off.is_none(), "another thread has no runtime");
    });
}
