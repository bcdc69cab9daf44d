//! One connection: echo until end of stream, error, or an idle drain.
//!
//! Each connection is one task whose future stays in memory between polls;
//! with 1000 connections those futures are cache misses, one per nested
//! `async fn` level touched, so each loop is written inline in its task.

use std::future::{poll_fn, Future};
use std::io;
use std::pin::pin;
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

use ringkit::net::TcpStream;
use ringkit::sync::DrainGuard;

use crate::thread::ThreadState;

/// Keeps a thread's count of open connections and a drain slot.
struct ConnGuard {
    st: Rc<ThreadState>,
    drain: DrainGuard,
}

impl ConnGuard {
    fn new(st: Rc<ThreadState>) -> ConnGuard {
        ConnGuard {
            drain: st.drain.enter(),
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
    drain: &'a DrainGuard,
    idle_time: Duration,
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
                if drain.poll_draining(cx).is_pending() {
                    return Poll::Pending;
                }
                // Draining started: from now on the read gets the idle time.
                idle.insert(Box::pin(ringkit::time::sleep(idle_time)))
            }
        };
        timer.as_mut().poll(cx).map(|()| None)
    })
}

pub(crate) async fn serve_pooled(st: Rc<ThreadState>, s: TcpStream) {
    let guard = ConnGuard::new(st);
    let st = &guard.st;
    let res = loop {
        let Some(buf) = next_read(&guard.drain, st.drain_idle, pin!(s.read_pooled())).await else {
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
        // The other buffers of a receive bundle are here already: echo them
        // all with one send.
        let Some(next) = s.take_pooled() else {
            if let (Err(e), _) = s.write_all(buf).await {
                break Err(e);
            }
            continue;
        };
        let mut batch = vec![buf, next];
        batch.extend(std::iter::from_fn(|| s.take_pooled()).take(62));
        if let Err(e) = s.write_all_pooled(batch).await {
            break Err(e);
        }
    };
    guard.finish(s, res);
}

pub(crate) async fn serve_single(st: Rc<ThreadState>, s: TcpStream) {
    let guard = ConnGuard::new(st);
    let (drain, idle) = (&guard.drain, guard.st.drain_idle);
    let mut buf = Vec::with_capacity(4096);
    let res = loop {
        buf.clear();
        let Some((res, b)) = next_read(drain, idle, pin!(s.read(buf))).await else {
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
