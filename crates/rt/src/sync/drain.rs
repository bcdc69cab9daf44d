//! The graceful-drain broadcast of one server thread.
//!
//! Each connection task holds a [`DrainGuard`] from [`Drain::enter`]; the
//! accept loop, on shutdown, calls [`Drain::start`], which wakes every
//! connection (so an idle one notices at once), and then awaits
//! [`Drain::drained`], which resolves when the last guard is dropped.
//!
//! ```
//! use std::pin::pin;
//! use ringkit::net::{TcpListener, TcpStream};
//! use ringkit::sync::{select, Drain, Either};
//! ringkit::run(async {
//!     let l = TcpListener::bind("127.0.0.1:0")?;
//!     let addr = l.local_addr()?;
//!     let drain = Drain::new();
//!     let _client = TcpStream::connect(addr).await?;
//!     let (conn, _) = l.accept().await?;
//!     let guard = drain.enter();
//!     // A connection task: read until the peer closes or draining starts.
//!     let task = ringkit::spawn(async move {
//!         let mut draining = pin!(guard.draining());
//!         loop {
//!             let mut read = pin!(conn.read_pooled());
//!             match select(read.as_mut(), draining.as_mut()).await {
//!                 Either::Left(Ok(buf)) if !buf.is_empty() => continue,
//!                 Either::Left(_) => return "closed",
//!                 Either::Right(()) => return "drained",
//!             }
//!         }
//!     });
//!     ringkit::yield_now().await;
//!     // The accept loop, on shutdown: stop accepting, then drain.
//!     drop(l);
//!     drain.start();
//!     drain.drained().await;
//!     assert_eq!(task.await.unwrap(), "drained");
//!     Ok::<_, std::io::Error>(())
//! })??;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! A connection learns of the drain either by awaiting
//! [`DrainGuard::draining`] (raced against its read with
//! [`select`](crate::sync::select)), by polling
//! [`DrainGuard::poll_draining`] beside its read (the waker is stored only
//! when it changes, so the hot path is an index and a `will_wake`), or by
//! registering its task's waker once ([`DrainGuard::set_waker`]) and
//! checking [`Drain::is_draining`] whenever it is woken.

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Shutdown broadcast and open-connection count of one server thread.
#[derive(Debug, Default)]
pub struct Drain {
    on: Cell<bool>,
    active: Cell<usize>,
    /// One slot per guard: the waker to wake when draining starts.
    wakers: RefCell<Vec<Option<Waker>>>,
    free: RefCell<Vec<usize>>,
    /// The task awaiting [`Drain::drained`].
    last: RefCell<Option<Waker>>,
}

impl Drain {
    /// A new switch, off, with no connection.
    pub fn new() -> Rc<Drain> {
        Rc::new(Drain::default())
    }

    /// Count a new connection; the guard uncounts it when dropped.
    pub fn enter(self: &Rc<Self>) -> DrainGuard {
        self.active.set(self.active.get() + 1);
        let slot = match self.free.borrow_mut().pop() {
            Some(slot) => slot,
            None => {
                let mut w = self.wakers.borrow_mut();
                w.push(None);
                w.len() - 1
            }
        };
        DrainGuard {
            drain: self.clone(),
            slot,
        }
    }

    /// Connections (guards) alive now.
    pub fn active(&self) -> usize {
        self.active.get()
    }

    /// Whether [`Drain::start`] has been called.
    pub fn is_draining(&self) -> bool {
        self.on.get()
    }

    /// Start draining: wake every connection. Idempotent.
    pub fn start(&self) {
        self.on.set(true);
        // Taken first: a woken task may enter or drop a guard.
        let wakers: Vec<Waker> = self
            .wakers
            .borrow_mut()
            .iter_mut()
            .filter_map(Option::take)
            .collect();
        for w in wakers {
            w.wake();
        }
    }

    /// Resolves once no guard is left (at once if none is).
    pub fn drained(&self) -> impl Future<Output = ()> + '_ {
        poll_fn(|cx| {
            if self.active.get() == 0 {
                Poll::Ready(())
            } else {
                *self.last.borrow_mut() = Some(cx.waker().clone());
                Poll::Pending
            }
        })
    }
}

/// One counted connection of a [`Drain`].
#[derive(Debug)]
pub struct DrainGuard {
    drain: Rc<Drain>,
    slot: usize,
}

impl DrainGuard {
    /// The drain this guard belongs to.
    pub fn drain(&self) -> &Drain {
        &self.drain
    }

    /// Ready once draining has started; until then `cx`'s waker is kept
    /// (replaced only when it changes) for [`Drain::start`] to wake.
    pub fn poll_draining(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.drain.on.get() {
            return Poll::Ready(());
        }
        let mut wakers = self.drain.wakers.borrow_mut();
        let w = &mut wakers[self.slot];
        if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *w = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    /// Resolves once draining has started: race it against a read with
    /// [`select`](crate::sync::select) to stop an idle connection (see the
    /// module example).
    pub fn draining(&self) -> impl Future<Output = ()> + '_ {
        poll_fn(|cx| self.poll_draining(cx))
    }

    /// Keep `waker` to be woken when draining starts (for a task that
    /// checks [`Drain::is_draining`] whenever it runs).
    pub fn set_waker(&self, waker: Waker) {
        self.drain.wakers.borrow_mut()[self.slot] = Some(waker);
    }
}

impl Drop for DrainGuard {
    fn drop(&mut self) {
        let d = &self.drain;
        if let Some(w) = d.wakers.borrow_mut().get_mut(self.slot) {
            *w = None;
        }
        d.free.borrow_mut().push(self.slot);
        d.active.set(d.active.get() - 1);
        if d.active.get() == 0 {
            if let Some(w) = d.last.borrow_mut().take() {
                w.wake();
            }
        }
    }
}
