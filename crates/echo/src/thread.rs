//! One server thread: its listener's accept loop, then the drain.

use std::io;
use std::pin::pin;
use std::time::{Duration, Instant};

use ringkit::net::TcpListener;
use ringkit::sync::{select, Either};

use crate::conn::{serve_pooled, serve_single};
use crate::state::ThreadState;
use crate::{EchoServerConfig, RecvMode};

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
