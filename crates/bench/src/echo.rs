//! The echo workload: a server on the runtime, and a verifying load generator.
//!
//! # Server
//! Thread-per-core, one `SO_REUSEPORT` listener per thread; each connection
//! echoes what it reads until end of stream. Accept errors (`EMFILE`, ...)
//! back off and retry; `SIGTERM`/`SIGINT` drain and exit (see [`run_server`]).
//! [`EchoLimits`] shrinks resources on purpose for fault injection.
//!
//! # Load generator
//! Like rust_echo_bench (same flags, same "Speed:" line), but on ringkit's
//! io_uring runtime on one thread: every connection is a task that keeps
//! `pipeline` messages of `len` bytes in flight (write them, read them all
//! back, compare every byte). Connections are opened and warmed up first; the
//! measured window starts only once all are up, and throughput is divided by
//! the window actually measured (not the nominal duration).

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::pin;
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use ringkit::net::{TcpListener, TcpStream};
use ringkit::{Backend, LaunchConfig};
use serde::{Deserialize, Serialize};

use crate::sysinfo::CpuTimes;

/// How the echo server receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvMode {
    /// io_uring: one multishot RECV per connection into the provided-buffer
    /// ring, and the send goes straight from that buffer (epoll: pooled reads).
    Multishot,
    /// One RECV per read into the connection's own buffer (the plain path).
    Single,
}

impl std::str::FromStr for RecvMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "multishot" => Ok(RecvMode::Multishot),
            "single" => Ok(RecvMode::Single),
            o => Err(format!("unknown recv mode {o:?} (multishot|single)")),
        }
    }
}

/// Echo server settings.
#[derive(Debug, Clone)]
pub struct EchoServerConfig {
    /// Listen address.
    pub addr: SocketAddr,
    /// Backend for every thread.
    pub backend: Backend,
    /// Runtime threads (one listener each, `SO_REUSEPORT`).
    pub threads: usize,
    /// CPUs to pin threads to.
    pub cpus: Vec<usize>,
    /// Receive path.
    pub recv: RecvMode,
    /// io_uring: registered file table slots that busy connections are
    /// promoted into ([`ringkit::Builder::fixed_files`]); 0 = plain fds.
    pub fixed_files: u32,
    /// Write runtime counters to `PATH.<thread>` every 50 ms.
    pub stats: Option<PathBuf>,
    /// Resource limits (for fault injection) and shutdown timing.
    pub limits: EchoLimits,
}

/// Resource limits and graceful-shutdown timing of the echo server. The
/// defaults are what a production server wants; the knobs exist so that
/// `ringkit torture` and the fault tests can shrink a resource on purpose.
#[derive(Debug, Clone, PartialEq)]
pub struct EchoLimits {
    /// io_uring SQ entries (the CQ gets 4x): a tiny ring makes the SQ fill
    /// and the CQ overflow. `None`: the runtime default (256).
    pub entries: Option<u32>,
    /// Provided-buffer ring of the multishot receive: count (a power of two)
    /// and bytes per buffer. A tiny ring runs dry (`ENOBUFS`). `None`: the
    /// runtime default.
    pub recv_buffers: Option<(u16, u32)>,
    /// Set the soft `RLIMIT_NOFILE` to this (accept then fails with `EMFILE`
    /// once it is reached). `None`: raise it to the hard limit.
    pub nofile: Option<u64>,
    /// io_uring batch wait (`Builder::batch_wait`): wait for up to this many
    /// completions, returning after the minimum wait once one is ready.
    /// `None`: wait for one (the default).
    pub batch_wait: Option<(u32, Duration)>,
    /// After `SIGTERM`/`SIGINT`, a connection that stays idle this long is
    /// closed (its in-flight data has been echoed by then).
    pub drain_idle: Duration,
    /// After `SIGTERM`/`SIGINT`, connections still open after this long are
    /// closed and the server exits anyway.
    pub drain_timeout: Duration,
}

impl Default for EchoLimits {
    fn default() -> Self {
        EchoLimits {
            entries: None,
            recv_buffers: None,
            nofile: None,
            batch_wait: None,
            drain_idle: Duration::from_millis(1000),
            drain_timeout: Duration::from_secs(10),
        }
    }
}

/// Counters a server thread publishes (see `EchoServerConfig::stats`).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct ServerStats {
    /// `io_uring_enter` calls.
    pub uring_enters: u64,
    /// `epoll_wait` calls.
    pub epoll_waits: u64,
    /// Other syscalls made by the runtime.
    pub other_syscalls: u64,
    /// SQEs submitted.
    pub sqes: u64,
    /// CQEs reaped.
    pub cqes: u64,
    /// Connections accepted.
    pub accepted: u64,
}

impl ServerStats {
    /// Sum of two.
    pub fn add(&self, o: &ServerStats) -> ServerStats {
        ServerStats {
            uring_enters: self.uring_enters + o.uring_enters,
            epoll_waits: self.epoll_waits + o.epoll_waits,
            other_syscalls: self.other_syscalls + o.other_syscalls,
            sqes: self.sqes + o.sqes,
            cqes: self.cqes + o.cqes,
            accepted: self.accepted + o.accepted,
        }
    }
    /// Difference `self - earlier`.
    pub fn since(&self, e: &ServerStats) -> ServerStats {
        ServerStats {
            uring_enters: self.uring_enters.saturating_sub(e.uring_enters),
            epoll_waits: self.epoll_waits.saturating_sub(e.epoll_waits),
            other_syscalls: self.other_syscalls.saturating_sub(e.other_syscalls),
            sqes: self.sqes.saturating_sub(e.sqes),
            cqes: self.cqes.saturating_sub(e.cqes),
            accepted: self.accepted.saturating_sub(e.accepted),
        }
    }
    /// All syscalls counted.
    pub fn syscalls(&self) -> u64 {
        self.uring_enters + self.epoll_waits + self.other_syscalls
    }
    /// Read and sum every `PATH.<n>` file.
    pub fn read_all(path: &std::path::Path) -> ServerStats {
        let mut total = ServerStats::default();
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return total;
        };
        let prefix = format!("{}.", name.to_string_lossy());
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                if n.starts_with(&prefix) && !n.ends_with(".tmp") {
                    if let Ok(s) = std::fs::read_to_string(e.path()) {
                        if let Ok(st) = serde_json::from_str::<ServerStats>(&s) {
                            total = total.add(&st);
                        }
                    }
                }
            }
        }
        total
    }
}

/// Run the echo server until `SIGTERM` or `SIGINT`, then shut down
/// gracefully and return `Ok`. Prints the backend of each thread once it is
/// listening, and a summary per thread at the end.
///
/// # Shutdown
/// On the first `SIGTERM`/`SIGINT` every thread: closes its listener (new
/// connections are refused from then on); wakes its connections, which keep
/// echoing whatever arrives and close once idle for
/// [`EchoLimits::drain_idle`] (or at end of stream), so a message in flight
/// is echoed whole; waits until all are closed or
/// [`EchoLimits::drain_timeout`] has passed; and returns.
///
/// `SIGPIPE` is ignored (sends use `MSG_NOSIGNAL` anyway; this covers any
/// other write to a closed socket).
pub fn run_server(cfg: EchoServerConfig) -> io::Result<()> {
    ignore_sigpipe();
    match cfg.limits.nofile {
        Some(n) => set_nofile_limit(n)?,
        None => {
            ringkit::raise_nofile_limit();
        }
    }
    ringkit::signal::install()?;
    let mut builder = ringkit::Builder::new().backend(cfg.backend);
    if let Some(n) = cfg.limits.entries {
        builder = builder.entries(n);
    }
    if let Some((count, size)) = cfg.limits.recv_buffers {
        builder = builder.recv_buffers(count, size);
    }
    if let Some((want, min)) = cfg.limits.batch_wait {
        builder = builder.batch_wait(want, min);
    }
    builder = builder.fixed_files(cfg.fixed_files);
    let launch = LaunchConfig::new(cfg.threads)
        .cpus(cfg.cpus.clone())
        .builder(builder);
    let cfg2 = cfg.clone();
    let handles = ringkit::launch(launch, move |i| {
        let cfg = cfg2.clone();
        async move {
            if let Err(e) = serve_thread(i, cfg).await {
                eprintln!("ringkit echo: thread {i}: {e}");
                std::process::exit(1);
            }
        }
    })?;
    for h in handles {
        h.join()
            .map_err(|_| io::Error::other("server thread panicked"))??;
    }
    eprintln!(
        "ringkit echo: shut down cleanly (signal {})",
        ringkit::signal::requested_by().unwrap_or(0)
    );
    Ok(())
}

/// Ignore `SIGPIPE` for the whole process.
fn ignore_sigpipe() {
    // SAFETY: setting a signal's disposition to SIG_IGN has no preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
}

/// Set the soft `RLIMIT_NOFILE` to `n` (at most the hard limit).
fn set_nofile_limit(n: u64) -> io::Result<()> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into a valid rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(io::Error::last_os_error());
    }
    r.rlim_cur = n.min(r.rlim_max);
    // SAFETY: setrlimit reads a valid rlimit.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Spawn a task on the current runtime that writes this thread's counters
/// ([`ServerStats`], JSON) to `PATH.<thread>` every 50 ms, atomically (write
/// then rename). `compare` reads them at the window's start and end.
/// `accepted` is the server's own count of accepted connections.
pub fn spawn_stats_writer(path: PathBuf, thread: usize, accepted: Rc<Cell<u64>>) {
    ringkit::spawn(async move {
        let file = PathBuf::from(format!("{}.{thread}", path.display()));
        let tmp = PathBuf::from(format!("{}.{thread}.tmp", path.display()));
        loop {
            let m = ringkit::metrics();
            let s = ServerStats {
                uring_enters: m.uring_enters,
                epoll_waits: m.epoll_waits,
                other_syscalls: m.other_syscalls,
                sqes: m.sqes_submitted,
                cqes: m.cqes_reaped,
                accepted: accepted.get(),
            };
            if let Ok(j) = serde_json::to_string(&s) {
                if std::fs::write(&tmp, j).is_ok() {
                    let _ = std::fs::rename(&tmp, &file);
                }
            }
            ringkit::time::sleep(Duration::from_millis(50)).await;
        }
    });
}

/// One server thread's shared state: counters and the drain switch its
/// connections watch.
struct ThreadState {
    accepted: Rc<Cell<u64>>,
    /// Connections open now.
    active: Cell<usize>,
    /// Connection errors caused by the peer (reset, broken pipe): expected
    /// when clients vanish, counted but not printed.
    peer_errors: Cell<u64>,
    /// Other connection errors (printed, the first few).
    other_errors: Cell<u64>,
    /// Pooled reads whose data did not come in a provided-buffer ring slot:
    /// on io_uring, the ring had run dry (`ENOBUFS`) and a plain receive
    /// stood in (on epoll, every pooled read).
    heap_reads: Cell<u64>,
    drain: Drain,
}

impl ThreadState {
    fn note_error(&self, e: &io::Error) {
        use io::ErrorKind::*;
        if matches!(
            e.kind(),
            ConnectionReset | BrokenPipe | ConnectionAborted | UnexpectedEof
        ) {
            self.peer_errors.set(self.peer_errors.get() + 1);
            return;
        }
        let n = self.other_errors.get() + 1;
        self.other_errors.set(n);
        if n <= 10 {
            eprintln!("ringkit echo: error: connection: {e}");
        }
    }
}

/// The drain switch of one thread. Until it is turned on, each connection's
/// pending read also waits on it (through a slot holding its task's waker,
/// refreshed only when the waker changes, so the hot path stays a
/// `Vec` index and a `will_wake`); turning it on wakes them all.
struct Drain {
    on: Cell<bool>,
    idle: Duration,
    wakers: RefCell<Vec<Option<std::task::Waker>>>,
    free: RefCell<Vec<usize>>,
}

impl Drain {
    fn new(idle: Duration) -> Drain {
        Drain {
            on: Cell::new(false),
            idle,
            wakers: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
        }
    }

    fn register(&self) -> usize {
        if let Some(slot) = self.free.borrow_mut().pop() {
            return slot;
        }
        let mut w = self.wakers.borrow_mut();
        w.push(None);
        w.len() - 1
    }

    fn unregister(&self, slot: usize) {
        if let Some(w) = self.wakers.borrow_mut().get_mut(slot) {
            *w = None;
        }
        self.free.borrow_mut().push(slot);
    }

    /// Ready once draining has started; until then `cx`'s waker is kept
    /// in `slot` for [`Drain::start`].
    fn poll_wait(&self, slot: usize, cx: &mut std::task::Context<'_>) -> Poll<()> {
        if self.on.get() {
            return Poll::Ready(());
        }
        let mut wakers = self.wakers.borrow_mut();
        let w = &mut wakers[slot];
        if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *w = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    fn start(&self) {
        self.on.set(true);
        let wakers: Vec<_> = self
            .wakers
            .borrow_mut()
            .iter_mut()
            .map(Option::take)
            .collect();
        for w in wakers.into_iter().flatten() {
            w.wake();
        }
    }
}

/// One of two futures, whichever finishes first (the other is left as is).
enum Either<A, B> {
    Left(A),
    Right(B),
}

/// Poll `a` then `b` until one is ready. Neither is dropped: the caller
/// still owns both, so a read raced against a signal loses nothing.
async fn select<A: Future, B: Future>(
    mut a: std::pin::Pin<&mut A>,
    mut b: std::pin::Pin<&mut B>,
) -> Either<A::Output, B::Output> {
    poll_fn(|cx| {
        if let Poll::Ready(v) = a.as_mut().poll(cx) {
            return Poll::Ready(Either::Left(v));
        }
        if let Poll::Ready(v) = b.as_mut().poll(cx) {
            return Poll::Ready(Either::Right(v));
        }
        Poll::Pending
    })
    .await
}

async fn serve_thread(i: usize, cfg: EchoServerConfig) -> io::Result<()> {
    let listener = TcpListener::bind_reuseport(cfg.addr)?;
    let report = ringkit::backend_report();
    eprintln!(
        "ringkit echo: thread {i} listening on {} with {report} (recv {:?})",
        listener.local_addr()?,
        cfg.recv,
    );
    let st = Rc::new(ThreadState {
        accepted: Rc::new(Cell::new(0)),
        active: Cell::new(0),
        peer_errors: Cell::new(0),
        other_errors: Cell::new(0),
        heap_reads: Cell::new(0),
        drain: Drain::new(cfg.limits.drain_idle),
    });
    if let Some(path) = cfg.stats.clone() {
        spawn_stats_writer(path, i, st.accepted.clone());
    }
    let mut shutdown = pin!(ringkit::signal::shutdown_requested());
    let mut backoff = Duration::from_millis(1);
    let mut accept_errors = 0u64;
    // Accept errors are printed at most once a second (and whenever the
    // error changes), with the count of those not printed.
    let mut last_print: Option<(Instant, String)> = None;
    let mut unprinted = 0u64;
    loop {
        let accept = pin!(listener.accept_stream());
        match select(accept, shutdown.as_mut()).await {
            Either::Left(Ok(s)) => {
                backoff = Duration::from_millis(1);
                st.accepted.set(st.accepted.get() + 1);
                let _ = s.set_nodelay(true);
                // One task type per receive path, so that an idle
                // connection's task is only as large as its own path needs.
                match cfg.recv {
                    RecvMode::Multishot => ringkit::spawn(serve_pooled(st.clone(), s)),
                    RecvMode::Single => ringkit::spawn(serve_single(st.clone(), s)),
                };
            }
            // The peer gave up before we accepted: nothing to serve.
            Either::Left(Err(e)) if e.kind() == io::ErrorKind::ConnectionAborted => {}
            Either::Left(Err(e)) => {
                // EMFILE/ENFILE and friends: back off and keep serving.
                accept_errors += 1;
                let msg = e.to_string();
                let due = last_print
                    .as_ref()
                    .is_none_or(|(t, m)| t.elapsed() >= Duration::from_secs(1) || *m != msg);
                if due {
                    eprintln!(
                        "ringkit echo: accept error: {msg}; retrying in {backoff:?} ({unprinted} more since the last report)"
                    );
                    last_print = Some((Instant::now(), msg));
                    unprinted = 0;
                } else {
                    unprinted += 1;
                }
                let sleep = pin!(ringkit::time::sleep(backoff));
                if let Either::Right(()) = select(sleep, shutdown.as_mut()).await {
                    break;
                }
                backoff = (backoff * 2).min(Duration::from_millis(100));
            }
            Either::Right(()) => break,
        }
    }
    // New connections are refused from here on.
    drop(listener);
    eprintln!(
        "ringkit echo: thread {i}: shutdown requested; listener closed; draining {} connections",
        st.active.get()
    );
    st.drain.start();
    let deadline = Instant::now() + cfg.limits.drain_timeout;
    while st.active.get() > 0 && Instant::now() < deadline {
        ringkit::time::sleep(Duration::from_millis(5)).await;
    }
    eprintln!(
        "ringkit echo: thread {i}: stopped: {} connections accepted, {} still open at the drain deadline, {} peer resets, {} other connection errors, {} accept errors",
        st.accepted.get(),
        st.active.get(),
        st.peer_errors.get(),
        st.other_errors.get(),
        accept_errors,
    );
    eprintln!(
        "ringkit echo: thread {i}: runtime counters: {} pooled_reads_outside_ring={}",
        ringkit::metrics(),
        st.heap_reads.get()
    );
    Ok(())
}

/// Keeps a thread's count of open connections and a drain slot.
struct ConnGuard {
    st: Rc<ThreadState>,
    slot: usize,
}

impl ConnGuard {
    fn new(st: Rc<ThreadState>) -> ConnGuard {
        st.active.set(st.active.get() + 1);
        ConnGuard {
            slot: st.drain.register(),
            st,
        }
    }

    /// Count the connection's error, if any; then close the socket before
    /// the guard says the connection is gone.
    fn finish(self, s: TcpStream, res: io::Result<()>) {
        if let Err(e) = res {
            self.st.note_error(&e);
        }
        drop(s);
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.st.active.set(self.st.active.get() - 1);
        self.st.drain.unregister(self.slot);
    }
}

/// Await `read`. Before draining it races the drain switch (without
/// dropping the read); once draining, it gives up (`None`) when nothing
/// arrives for the idle time.
///
/// `read` comes pinned by the caller: moved in by value, it would take room
/// twice in the task (as the argument and as the pinned local). A plain
/// `poll_fn` rather than an `async fn`: it is awaited once per message by
/// every connection, and its state is three words and the idle timer's box
/// (created only while draining).
fn next_read<'a, F: Future>(
    drain: &'a Drain,
    slot: usize,
    mut read: std::pin::Pin<&'a mut F>,
) -> impl Future<Output = Option<F::Output>> + 'a {
    let mut idle: Option<std::pin::Pin<Box<ringkit::time::Sleep>>> = None;
    poll_fn(move |cx| {
        if let Poll::Ready(v) = read.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        let timer = match &mut idle {
            Some(t) => t,
            None => {
                if drain.poll_wait(slot, cx).is_pending() {
                    return Poll::Pending;
                }
                // Draining started: from now on the read gets the idle time.
                idle.insert(Box::pin(ringkit::time::sleep(drain.idle)))
            }
        };
        timer.as_mut().poll(cx).map(|()| None)
    })
}

// One connection. Each is one task whose future stays in memory between
// polls; with 1000 connections those futures are cache misses, one per
// nested `async fn` level touched, so the loop is written inline here
// rather than in a helper the task would await.
async fn serve_pooled(st: Rc<ThreadState>, s: TcpStream) {
    let guard = ConnGuard::new(st);
    let (st, slot) = (&guard.st, guard.slot);
    let res = loop {
        let Some(buf) = next_read(&st.drain, slot, pin!(s.read_pooled())).await else {
            break Ok(());
        };
        let buf = match buf {
            Ok(b) if b.is_empty() => break Ok(()),
            Ok(b) => b,
            Err(e) => break Err(e),
        };
        if !buf.is_ring_buffer() {
            st.heap_reads.set(st.heap_reads.get() + 1);
        }
        if let (Err(e), _) = s.write_all(buf).await {
            break Err(e);
        }
    };
    guard.finish(s, res);
}

async fn serve_single(st: Rc<ThreadState>, s: TcpStream) {
    let guard = ConnGuard::new(st);
    let (drain, slot) = (&guard.st.drain, guard.slot);
    let mut buf = Vec::with_capacity(4096);
    let res = loop {
        buf.clear();
        let Some((res, b)) = next_read(drain, slot, pin!(s.read(buf))).await else {
            break Ok(());
        };
        buf = b;
        match res {
            Ok(0) => break Ok(()),
            Ok(_) => {}
            Err(e) => break Err(e),
        }
        let (res, b) = s.write_all(buf).await;
        buf = b;
        if let Err(e) = res {
            break Err(e);
        }
    };
    guard.finish(s, res);
}

/// Load generator settings.
#[derive(Debug, Clone)]
pub struct EchoLoadConfig {
    /// Server address.
    pub addr: SocketAddr,
    /// Connections.
    pub conns: usize,
    /// Message length.
    pub len: usize,
    /// Measured window.
    pub duration: Duration,
    /// Messages in flight per connection.
    pub pipeline: usize,
    /// Backend of the generator's own runtime.
    pub backend: Backend,
}

/// What the generator measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EchoLoadResult {
    /// Messages written in the window.
    pub requests: u64,
    /// Messages read back (and verified) in the window.
    pub responses: u64,
    /// The measured window, seconds.
    pub secs: f64,
    /// Time to open all connections, seconds.
    pub connect_secs: f64,
    /// Connections that failed (connect or I/O error).
    pub failed_conns: u64,
    /// Messages that came back different.
    pub mismatches: u64,
    /// First error seen, if any.
    pub first_error: Option<String>,
    /// Round-trip latency percentiles, microseconds.
    pub p50_us: f64,
    /// p99.
    pub p99_us: f64,
    /// p99.9.
    pub p999_us: f64,
    /// Mean.
    pub mean_us: f64,
    /// CPU seconds (user+sys) the generator itself used in the window.
    pub client_cpu_s: f64,
}

impl EchoLoadResult {
    /// Responses per second.
    pub fn rps(&self) -> f64 {
        if self.secs > 0.0 {
            self.responses as f64 / self.secs
        } else {
            0.0
        }
    }
    /// Round trips per second of the generator's own CPU: what one fully
    /// busy core could drive, whether or not the server kept up.
    pub fn rps_per_client_cpu(&self) -> f64 {
        if self.client_cpu_s > 0.0 {
            self.responses as f64 / self.client_cpu_s
        } else {
            0.0
        }
    }
    /// A run with a lost connection or a wrong byte is a failed run.
    pub fn ok(&self) -> bool {
        self.failed_conns == 0 && self.mismatches == 0 && self.responses > 0
    }
}

/// Moments of a load run, for callers that sample the server around the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// All connections are up; the window starts now.
    WindowStart,
    /// The window ended now.
    WindowEnd,
}

struct Shared {
    phase: Cell<u8>,
    requests: Cell<u64>,
    responses: Cell<u64>,
    connected: Cell<usize>,
    failed: Cell<u64>,
    mismatches: Cell<u64>,
    first_error: RefCell<Option<String>>,
    hist: RefCell<Histogram<u64>>,
}

/// Run the load on this thread (which gets its own runtime).
pub fn run_load(cfg: &EchoLoadConfig, hook: &mut dyn FnMut(Phase)) -> io::Result<EchoLoadResult> {
    ringkit::raise_nofile_limit();
    let rt = ringkit::Builder::new().backend(cfg.backend).build()?;
    let shared = Rc::new(Shared {
        phase: Cell::new(0),
        requests: Cell::new(0),
        responses: Cell::new(0),
        connected: Cell::new(0),
        failed: Cell::new(0),
        mismatches: Cell::new(0),
        first_error: RefCell::new(None),
        hist: RefCell::new(
            Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds"),
        ),
    });
    // On io_uring the replies arrive by multishot recv into the buffer ring
    // (armed once per connection, no failed recv and poll re-arm per round
    // trip); on epoll a plain read into the connection's own buffer.
    let pooled = rt.backend_report().chosen == Backend::Uring;
    rt.block_on(async {
        let start = Instant::now();
        let mut handles = Vec::with_capacity(cfg.conns);
        for id in 0..cfg.conns {
            let sh = shared.clone();
            let (addr, len, pipeline) = (cfg.addr, cfg.len, cfg.pipeline.max(1));
            handles.push(ringkit::spawn(async move {
                if let Err(e) = conn_task(id, addr, len, pipeline, pooled, &sh).await {
                    sh.failed.set(sh.failed.get() + 1);
                    sh.first_error.borrow_mut().get_or_insert(e.to_string());
                }
            }));
        }
        // Wait until every connection is up (or failed) before measuring.
        while shared.connected.get() + (shared.failed.get() as usize) < cfg.conns {
            if start.elapsed() > Duration::from_secs(30) {
                break;
            }
            ringkit::time::sleep(Duration::from_millis(1)).await;
        }
        let connect_secs = start.elapsed().as_secs_f64();
        // A short warm-up, then the window.
        ringkit::time::sleep(Duration::from_millis(200)).await;
        hook(Phase::WindowStart);
        let t0 = Instant::now();
        let cpu0 = CpuTimes::own();
        shared.phase.set(1);
        ringkit::time::sleep(cfg.duration).await;
        shared.phase.set(2);
        let secs = t0.elapsed().as_secs_f64();
        let cpu = CpuTimes::own().since(&cpu0);
        hook(Phase::WindowEnd);
        for h in handles {
            let _ = h.await;
        }
        let hist = shared.hist.borrow();
        let q = |p: f64| hist.value_at_quantile(p) as f64 / 1000.0;
        Ok(EchoLoadResult {
            requests: shared.requests.get(),
            responses: shared.responses.get(),
            secs,
            connect_secs,
            failed_conns: shared.failed.get(),
            mismatches: shared.mismatches.get(),
            first_error: shared.first_error.borrow().clone(),
            p50_us: q(0.5),
            p99_us: q(0.99),
            p999_us: q(0.999),
            mean_us: hist.mean() / 1000.0,
            client_cpu_s: cpu.user + cpu.system,
        })
    })
}

fn fill(buf: &mut [u8], id: usize, seq: u64) {
    let mut x =
        (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seq.wrapping_mul(0xD1B5_4A32_D192_ED03);
    for chunk in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
}

/// One connection of the generator: write `pipeline` messages, read them
/// back, check every byte against what was sent (in place, no copy).
async fn conn_task(
    id: usize,
    addr: SocketAddr,
    len: usize,
    pipeline: usize,
    mut pooled: bool,
    sh: &Shared,
) -> io::Result<()> {
    let s = TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    sh.connected.set(sh.connected.get() + 1);
    let total = len * pipeline;
    let mut out = vec![0u8; total];
    let mut chunk: Vec<u8> = Vec::with_capacity(if pooled { 0 } else { total.max(4096) });
    let mut seq = 0u64;
    while sh.phase.get() < 2 {
        seq += 1;
        fill(&mut out, id, seq);
        let counting = sh.phase.get() == 1;
        let t = Instant::now();
        let (res, o) = s.write_all(out).await;
        out = o;
        res?;
        if counting {
            sh.requests.set(sh.requests.get() + pipeline as u64);
        }
        let mut got = 0;
        while got < total {
            let check = |back: &[u8]| -> io::Result<usize> {
                let n = back.len();
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "server closed the connection",
                    ));
                }
                if got + n > total || back != &out[got..got + n] {
                    sh.mismatches.set(sh.mismatches.get() + 1);
                    return Err(io::Error::new(io::ErrorKind::InvalidData, "echo mismatch"));
                }
                Ok(n)
            };
            got += if pooled {
                match s.read_pooled().await {
                    Ok(back) => check(&back)?,
                    // A kernel without buffer rings or multishot receive
                    // (before 5.19 / 6.0) refuses the first one: read plainly.
                    Err(e)
                        if got == 0
                            && matches!(
                                e.raw_os_error(),
                                Some(libc::EINVAL | libc::EOPNOTSUPP | libc::ENOSYS)
                            ) =>
                    {
                        pooled = false;
                        chunk.reserve(total.max(4096));
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            } else {
                chunk.clear();
                let (res, c) = s.read(chunk).await;
                chunk = c;
                let n = res?;
                check(&chunk[..n])?
            };
        }
        if counting && sh.phase.get() == 1 {
            sh.responses.set(sh.responses.get() + pipeline as u64);
            let us = t.elapsed().as_nanos() as u64;
            let _ = sh.hist.borrow_mut().record(us.max(1));
        }
    }
    Ok(())
}

/// The same load with rust_echo_bench's client design: one OS thread per
/// connection, blocking `write_all` + `read_exact`, every byte checked. Kept
/// to measure how much more our single-threaded generator can drive.
pub fn run_load_threads(cfg: &EchoLoadConfig) -> io::Result<EchoLoadResult> {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    let phase = Arc::new(AtomicU8::new(0));
    let connected = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(AtomicU64::new(0));
    let responses = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let mismatches = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(Mutex::new(None::<String>));
    let hist = Arc::new(Mutex::new(
        Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds"),
    ));
    let start = Instant::now();
    let mut threads = Vec::new();
    for id in 0..cfg.conns {
        let (phase, connected, requests, responses, failed, mismatches, first_error, hist) = (
            phase.clone(),
            connected.clone(),
            requests.clone(),
            responses.clone(),
            failed.clone(),
            mismatches.clone(),
            first_error.clone(),
            hist.clone(),
        );
        let (addr, len) = (cfg.addr, cfg.len);
        threads.push(
            std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || {
                    let run = || -> io::Result<()> {
                        let mut s = std::net::TcpStream::connect(addr)?;
                        s.set_nodelay(true)?;
                        connected.fetch_add(1, Ordering::SeqCst);
                        let mut out = vec![0u8; len];
                        let mut back = vec![0u8; len];
                        let mut local = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
                            .expect("histogram bounds");
                        let mut seq = 0;
                        while phase.load(Ordering::Relaxed) < 2 {
                            seq += 1;
                            fill(&mut out, id, seq);
                            let counting = phase.load(Ordering::Relaxed) == 1;
                            let t = Instant::now();
                            s.write_all(&out)?;
                            if counting {
                                requests.fetch_add(1, Ordering::Relaxed);
                            }
                            s.read_exact(&mut back)?;
                            if back != out {
                                mismatches.fetch_add(1, Ordering::Relaxed);
                                return Err(io::Error::new(
                                    io::ErrorKind::InvalidData,
                                    "echo mismatch",
                                ));
                            }
                            if counting && phase.load(Ordering::Relaxed) == 1 {
                                responses.fetch_add(1, Ordering::Relaxed);
                                let _ = local.record((t.elapsed().as_nanos() as u64).max(1));
                            }
                        }
                        let _ = hist.lock().map(|mut h| h.add(&local));
                        Ok(())
                    };
                    if let Err(e) = run() {
                        failed.fetch_add(1, Ordering::SeqCst);
                        if let Ok(mut f) = first_error.lock() {
                            f.get_or_insert(e.to_string());
                        }
                    }
                })?,
        );
    }
    while connected.load(Ordering::SeqCst) + (failed.load(Ordering::SeqCst) as usize) < cfg.conns
        && start.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    let connect_secs = start.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    let cpu0 = CpuTimes::own();
    phase.store(1, Ordering::SeqCst);
    std::thread::sleep(cfg.duration);
    phase.store(2, Ordering::SeqCst);
    let secs = t0.elapsed().as_secs_f64();
    let cpu = CpuTimes::own().since(&cpu0);
    for t in threads {
        let _ = t.join();
    }
    let hist = hist
        .lock()
        .map_err(|_| io::Error::other("histogram lock poisoned"))?;
    let q = |p: f64| hist.value_at_quantile(p) as f64 / 1000.0;
    let first_error = first_error.lock().ok().and_then(|f| f.clone());
    Ok(EchoLoadResult {
        requests: requests.load(Ordering::SeqCst),
        responses: responses.load(Ordering::SeqCst),
        secs,
        connect_secs,
        failed_conns: failed.load(Ordering::SeqCst),
        mismatches: mismatches.load(Ordering::SeqCst),
        first_error,
        p50_us: q(0.5),
        p99_us: q(0.99),
        p999_us: q(0.999),
        mean_us: hist.mean() / 1000.0,
        client_cpu_s: cpu.user + cpu.system,
    })
}
