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

/// What a chaos client gives the loop.
pub(crate) trait Chaos: 'static {
    /// What the client counts.
    type Counts: Clone;
    /// Its counts so far.
    fn counts(&self) -> &RefCell<Self::Counts>;
    /// Concurrent session slots, and the moment stopping begins.
    fn plan(&self) -> (usize, Instant);
    /// Set when stopping begins; sessions look at it.
    fn stopping(&self) -> &Cell<bool>;
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
    let (conns, stop_at) = ctx.plan();
    let rt = ringkit::Builder::new().backend(backend).build()?;
    rt.block_on(async {
        let slots: Vec<_> = (0..conns)
            .map(|slot| {
                let ctx = ctx.clone();
                ringkit::spawn(async move {
                    let mut n = 0u64;
                    while !ctx.stopping().get() {
                        ctx.clone().session(slot, n).await;
                        n += 1;
                    }
                })
            })
            .collect();
        while Instant::now() < stop_at {
            let left = stop_at.saturating_duration_since(Instant::now());
            ringkit::time::sleep(left.min(Duration::from_secs(1))).await;
            tick(&ctx.counts().borrow());
        }
        ctx.stopping().set(true);
        ctx.at_stop();
        on_stop();
        for h in slots {
            let _ = h.await;
        }
    });
    let counts = ctx.counts().borrow().clone();
    Ok(counts)
}
