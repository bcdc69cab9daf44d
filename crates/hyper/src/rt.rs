//! hyper's runtime hooks on ringkit: an executor and a timer.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::rt::{Executor, Sleep, Timer};

/// Spawns hyper's background futures (HTTP/2 streams, client connections)
/// on the current ringkit thread. They need not be `Send`: a connection and
/// everything it spawns stay on the thread that accepted it.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalExec;

impl<F> Executor<F> for LocalExec
where
    F: Future + 'static,
    F::Output: 'static,
{
    fn execute(&self, fut: F) {
        drop(ringkit::spawn(fut));
    }
}

/// hyper's timer on `ringkit::time` (the current thread's timer wheel).
#[derive(Debug, Clone, Copy, Default)]
pub struct RingkitTimer;

/// A ringkit sleep as hyper's `Sleep`.
#[derive(Debug)]
pub struct RingkitSleep(ringkit::time::Sleep);

impl Future for RingkitSleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl Sleep for RingkitSleep {}

impl Timer for RingkitTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        Box::pin(RingkitSleep(ringkit::time::sleep(duration)))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Sleep>> {
        Box::pin(RingkitSleep(ringkit::time::sleep_until(deadline)))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<RingkitSleep>() {
            Some(s) => s.get_mut().0.reset(new_deadline),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}
