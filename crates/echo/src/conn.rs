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

use crate::idle::IdleSlot;
use crate::state::ThreadState;

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
/// dropping the read) and the idle timeout; once draining, it gives up
/// (`None`) when nothing arrives for the drain's idle time.
///
/// `read` comes pinned by the caller: moved in by value, it would take room
/// twice in the task (as the argument and as the pinned local). A plain
/// `poll_fn` rather than an `async fn`: it is awaited once per message by
/// every connection, and its state is a few words and the drain timer's
/// box (created only while draining).
fn next_read<'a, F: Future>(
    drain: &'a DrainGuard,
    idle_time: Duration,
    timeout: &'a Option<IdleSlot>,
    mut read: std::pin::Pin<&'a mut F>,
) -> impl Future<Output = Option<F::Output>> + 'a {
    let mut idle: Option<std::pin::Pin<Box<ringkit::time::Sleep>>> = None;
    poll_fn(move |cx| {
        if let Poll::Ready(v) = read.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        if let Some(t) = timeout {
            if t.poll_expired(cx).is_ready() {
                return Poll::Ready(None);
            }
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
    let timeout = st.idle.as_ref().map(|i| i.register());
    let res = loop {
        let read = pin!(s.read_pooled());
        let Some(buf) = next_read(&guard.drain, st.drain_idle, &timeout, read).await else {
            break Ok(());
        };
        if let Some(t) = &timeout {
            t.touch();
        }
        let buf = match buf {
            Ok(b) if b.is_empty() => break Ok(()),
            Ok(b) => b,
            Err(e) => break Err(e),
        };
        if !buf.is_ring_buffer() {
            st.heap_reads.set(st.heap_reads.get() + 1);
        }
        // Boxed: the write's future (a bounded send with three send plans)
        // is several times the idle read's, and an unboxed await would size
        // every idle connection's task by it. One small allocation per
        // echo instead of ~600 bytes per connection at rest.
        if let Err(e) = Box::pin(echo_back(&s, buf)).await {
            break Err(e);
        }
    };
    guard.finish(s, res);
}

/// Send `buf` back, with the other buffers of its receive bundle (already
/// here) in the same send.
async fn echo_back(s: &TcpStream, buf: ringkit::buf::RecvBuf) -> io::Result<()> {
    let Some(next) = s.take_pooled() else {
        return s.write_all(buf).await.0;
    };
    let mut batch = vec![buf, next];
    batch.extend(std::iter::from_fn(|| s.take_pooled()).take(62));
    s.write_all_pooled(batch).await
}

pub(crate) async fn serve_single(st: Rc<ThreadState>, s: TcpStream) {
    let guard = ConnGuard::new(st);
    let (drain, idle) = (&guard.drain, guard.st.drain_idle);
    let timeout = guard.st.idle.as_ref().map(|i| i.register());
    let mut buf = Vec::with_capacity(4096);
    let res = loop {
        buf.clear();
        let Some((res, b)) = next_read(drain, idle, &timeout, pin!(s.read(buf))).await else {
            break Ok(());
        };
        if let Some(t) = &timeout {
            t.touch();
        }
        buf = b;
        match res {
            Ok(0) => break Ok(()),
            Ok(_) => {}
            Err(e) => break Err(e),
        }
        // Boxed for the same reason as in `serve_pooled`.
        let (res, b) = Box::pin(s.write_all(buf)).await;
        buf = b;
        if let Err(e) = res {
            break Err(e);
        }
    };
    guard.finish(s, res);
}

#[cfg(test)]
mod tests {
    use ringkit::net::{TcpListener, TcpStream};

    use super::*;

    /// An idle connection costs its task's future, which is as large as its
    /// largest await: the write path must stay boxed so the resting read
    /// sizes the task (memory per connection, issue 24's target 1 KiB).
    #[test]
    fn a_connection_task_is_sized_by_its_read() {
        let rt = ringkit::Runtime::builder()
            .backend(ringkit::Backend::Epoll)
            .build()
            .unwrap();
        rt.block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
            let st = ThreadState::new(Duration::from_secs(1), None);
            let pooled = serve_pooled(st.clone(), c);
            let n = std::mem::size_of_val(&pooled);
            println!("serve_pooled: {n} bytes");
            assert!(n <= 384, "serve_pooled's future is {n} bytes");
            drop(pooled);
            let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
            let single = serve_single(st, c);
            let n = std::mem::size_of_val(&single);
            println!("serve_single: {n} bytes");
            assert!(n <= 384, "serve_single's future is {n} bytes");
        });
    }
}
