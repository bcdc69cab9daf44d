//! The tasks waiting on one thing (an fd's direction on epoll, a multishot
//! operation on io_uring). Usually one; two tasks accepting on a shared
//! listener make two, and both must be woken or one hangs.

use std::task::Waker;

/// A set of wakers, deduplicated with [`Waker::will_wake`]; the first is
/// kept inline, so the common single waiter allocates nothing.
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    first: Option<Waker>,
    rest: Vec<Waker>,
}

impl Waiters {
    /// Add `w` unless it is already there.
    pub(crate) fn add(&mut self, w: &Waker) {
        match &self.first {
            None => self.first = Some(w.clone()),
            Some(f) if f.will_wake(w) => {}
            Some(_) => {
                if !self.rest.iter().any(|r| r.will_wake(w)) {
                    self.rest.push(w.clone());
                }
            }
        }
    }

    /// Wake and forget every waiter (each re-registers if it still waits).
    pub(crate) fn wake_all(&mut self) {
        if let Some(w) = self.first.take() {
            w.wake();
        }
        if !self.rest.is_empty() {
            // Dropped rather than drained: a burst of waiters must not keep
            // its allocation for the life of the fd.
            std::mem::take(&mut self.rest)
                .into_iter()
                .for_each(Waker::wake);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    use super::*;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn every_distinct_waiter_is_woken_once() {
        let a = Arc::new(Count(AtomicUsize::new(0)));
        let b = Arc::new(Count(AtomicUsize::new(0)));
        let (wa, wb) = (Waker::from(a.clone()), Waker::from(b.clone()));
        let mut w = Waiters::default();
        w.add(&wa);
        w.add(&wb);
        w.add(&wa);
        w.add(&wb);
        w.wake_all();
        w.wake_all();
        assert_eq!(a.0.load(Ordering::Relaxed), 1);
        assert_eq!(b.0.load(Ordering::Relaxed), 1);
    }
}
