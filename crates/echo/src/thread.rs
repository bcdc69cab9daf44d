//! One server thread: its listener's accept loop, then the drain.

use std::cell::Cell;
use std::io;
use std::pin::pin;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ringkit::net::TcpListener;
use ringkit::sync::{select, Drain, Either};

use crate::conn::{serve_pooled, serve_single};
use crate::idle::IdleSweep;
use crate::{EchoServerConfig, RecvMode};

/// One server thread's shared state: counters and the drain switch its
/// connections watch.
pub(crate) struct ThreadState {
    pub(crate) accepted: Rc<Cell<u64>>,
    /// Connection errors caused by the peer (reset, broken pipe): expected
    /// when clients vanish, counted but not printed.
    pub(crate) peer_errors: Cell<u64>,
    /// Other connection errors (printed, the first few).
    pub(crate) other_errors: Cell<u64>,
    /// Pooled reads whose data did not come in a provided-buffer ring slot:
    /// on io_uring, the ring had run dry (`ENOBUFS`) and a plain receive
    /// stood in (on epoll, every pooled read).
    pub(crate) heap_reads: Cell<u64>,
    pub(crate) drain: Rc<Drain>,
    /// After draining starts, a connection idle this long is closed.
    pub(crate) drain_idle: Duration,
    /// Connections idle past the limit are closed (`None`: never).
    pub(crate) idle: Option<Rc<IdleSweep>>,
}

impl ThreadState {
    /// A thread's state with nothing counted yet.
    pub(crate) fn new(drain_idle: Duration, idle_timeout: Option<Duration>) -> Rc<ThreadState> {
        Rc::new(ThreadState {
            accepted: Rc::new(Cell::new(0)),
            peer_errors: Cell::new(0),
            other_errors: Cell::new(0),
            heap_reads: Cell::new(0),
            drain: Drain::new(),
            drain_idle,
            idle: idle_timeout.map(IdleSweep::start),
        })
    }

    /// Count a connection's error; print it (the first few) unless the
    /// peer caused it: a reset, a close, or a timeout (a peer that stopped
    /// reading or vanished: the send and dead-peer timeouts did their job).
    pub(crate) fn note_error(&self, e: &io::Error) {
        use io::ErrorKind::*;
        if matches!(
            e.kind(),
            ConnectionReset | BrokenPipe | ConnectionAborted | UnexpectedEof | TimedOut
        ) {
            self.peer_errors.set(self.peer_errors.get() + 1);
            return;
        }
        let n = self.other_errors.get() + 1;
        self.other_errors.set(n);
        if n <= 10 {
            tracing::error!("ringkit echo: error: connection: {e}");
        }
    }
}

pub(crate) async fn serve_thread(
    i: usize,
    cfg: EchoServerConfig,
    listener: TcpListener,
) -> io::Result<()> {
    let report = ringkit::backend_report().map_or_else(|| "no runtime".into(), |r| r.to_string());
    tracing::info!(
        "ringkit echo: thread {i} listening on {} with {report} (recv {:?})",
        listener.local_addr()?,
        cfg.recv,
    );
    let idle = Some(cfg.limits.idle_timeout).filter(|d| !d.is_zero());
    let st = ThreadState::new(cfg.limits.drain_idle, idle);
    if let Some(path) = cfg.stats.clone() {
        ringkit::publish::spawn_writer(path, i, st.accepted.clone());
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
                s.set_write_timeout(Some(cfg.limits.send_timeout));
                let dead = cfg.limits.dead_peer_timeout;
                if !dead.is_zero() {
                    let _ = s.set_dead_peer_timeout(Some(dead));
                }
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
                    tracing::warn!(
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
    tracing::info!(
        "ringkit echo: thread {i}: shutdown requested; listener closed; draining {} connections",
        st.drain.active()
    );
    st.drain.start();
    let _ = ringkit::time::timeout(cfg.limits.drain_timeout, st.drain.drained()).await;
    tracing::info!(
        "ringkit echo: thread {i}: stopped: {} connections accepted, {} still open at the drain deadline, {} peer resets, {} other connection errors, {} accept errors",
        st.accepted.get(),
        st.drain.active(),
        st.peer_errors.get(),
        st.other_errors.get(),
        accept_errors,
    );
    tracing::info!(
        "ringkit echo: thread {i}: runtime counters: {} pooled_reads_outside_ring={}",
        ringkit::metrics(),
        st.heap_reads.get()
    );
    Ok(())
}
