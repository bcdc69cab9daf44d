//! One server thread's state, which the thread and each of its
//! connections share.

use std::cell::Cell;
use std::io;
use std::rc::Rc;
use std::time::Duration;

use ringkit::sync::Drain;

use crate::idle::IdleSweep;

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
