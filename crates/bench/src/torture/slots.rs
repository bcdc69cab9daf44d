//! The one run loop of the chaos clients (`echo.rs`, `http.rs`): `conns`
//! slots on one ringkit thread, each running sessions back to back until
//! stopping; a tick every second; at the stop moment the client takes
//! note of what is owed, the caller is told (it may signal the server),
//! and the slots finish their sessions.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// What every chaos client keeps for the loop: its counts, how many
/// slots run until when, and the flag set when stopping begins.
#[derive(Debug)]
pub(crate) struct Common<C> {
    /// The counts so far.
    pub(crate) counts: RefCell<C>,
    /// Set when stopping begins; sessions look at it.
    pub(crate) stopping: Cell<bool>,
    conns: usize,
    stop_at: Instant,
}

impl<C: Default> Common<C> {
    /// `conns` slots until `stop_at`, nothing counted yet.
    pub(crate) fn new(conns: usize, stop_at: Instant) -> Common<C> {
        Common {
            counts: RefCell::new(C::default()),
            stopping: Cell::new(false),
            conns,
            stop_at,
        }
    }
}

impl<C> Common<C> {
    /// Count something.
    pub(crate) fn count(&self, f: impl FnOnce(&mut C)) {
        f(&mut self.counts.borrow_mut());
    }
}

/// A session's connection, counted in `tally(counts)`: the session, and
/// a failure to connect (during a graceful stop, a refusal is the server
/// closing its listener, counted apart). `None` when there is none.
pub(crate) async fn connect<C>(
    common: &Common<C>,
    cfg: &super::ChaosConfig,
    tally: fn(&mut C) -> &mut super::tally::Tally,
) -> Option<ringkit::net::TcpStream> {
    common.count(|c| tally(c).sessions += 1);
    let connect = ringkit::net::TcpStream::connect(cfg.addr);
    let failed = match ringkit::time::timeout(cfg.stall, connect).await {
        Ok(Ok(s)) => return Some(s),
        Ok(Err(_)) if common.stopping.get() && cfg.graceful_stop => {
            common.count(|c| tally(c).unserved_at_shutdown += 1);
            return None;
        }
        Ok(Err(e)) => format!("connect: {e}"),
        Err(_) => format!("connect: no answer in {:?}", cfg.stall),
    };
    common.count(|c| {
        let t = tally(c);
        t.connect_errors += 1;
        t.error(failed);
    });
    None
}

/// What a chaos client gives the loop.
pub(crate) trait Chaos: 'static {
    /// What the client counts.
    type Counts: Clone;
    /// Its counts, plan and stop flag.
    fn common(&self) -> &Common<Self::Counts>;
    /// One session of slot `slot`, its `n`th.
    fn session(self: Rc<Self>, slot: usize, n: u64) -> impl Future<Output = ()>;
    /// Stopping has begun (before the caller's `on_stop`).
    fn at_stop(&self) {}
}

/// Run the slots of `ctx` on a runtime of `backend` until its stop
/// moment; `tick` sees the counts every second; returns the final counts.
pub(crate) fn run_slots<C: Chaos>(
    ctx: Rc<C>,
    backend: ringkit::Backend,
    on_stop: &mut dyn FnMut(),
    tick: &mut dyn FnMut(&C::Counts),
) -> io::Result<C::Counts> {
    let (conns, stop_at) = (ctx.common().conns, ctx.common().stop_at);
    let rt = ringkit::Builder::new().backend(backend).build()?;
    rt.block_on(async {
        let slots: Vec<_> = (0..conns)
            .map(|slot| {
                let ctx = ctx.clone();
                ringkit::spawn(async move {
                    let mut n = 0u64;
                    while !ctx.common().stopping.get() {
                        ctx.clone().session(slot, n).await;
                        n += 1;
                    }
                })
            })
            .collect();
        while Instant::now() < stop_at {
            let left = stop_at.saturating_duration_since(Instant::now());
            ringkit::time::sleep(left.min(Duration::from_secs(1))).await;
            tick(&ctx.common().counts.borrow());
        }
        ctx.common().stopping.set(true);
        ctx.at_stop();
        on_stop();
        for h in slots {
            let _ = h.await;
        }
    });
    let counts = ctx.common().counts.borrow().clone();
    Ok(counts)
}
