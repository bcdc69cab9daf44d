//! Per-thread counters, cheap enough to leave on (plain `Cell`s, no atomics).
//!
//! The benchmarks read them to report syscalls and `io_uring_enter` calls per
//! request: see [`crate::metrics()`] inside a runtime or [`crate::Runtime::metrics`].

use std::cell::Cell;
use std::fmt;

use crate::runtime::Context;

#[derive(Debug, Default)]
pub(crate) struct Metrics {
    pub(crate) sqes: Cell<u64>,
    pub(crate) cqes: Cell<u64>,
    pub(crate) cq_overflows: Cell<u64>,
    pub(crate) epoll_waits: Cell<u64>,
    pub(crate) syscalls: Cell<u64>,
    pub(crate) parks: Cell<u64>,
    pub(crate) polls: Cell<u64>,
    pub(crate) tasks_spawned: Cell<u64>,
}

impl Metrics {
    #[inline]
    pub(crate) fn add(c: &Cell<u64>, n: u64) {
        c.set(c.get() + n);
    }
}

/// A copy of a runtime's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    /// `io_uring_enter` syscalls (io_uring backend).
    pub uring_enters: u64,
    /// SQEs pushed to the ring.
    pub sqes_submitted: u64,
    /// CQEs reaped from the ring.
    pub cqes_reaped: u64,
    /// Times the kernel reported CQ overflow (entries were flushed, none lost).
    pub cq_overflows: u64,
    /// `epoll_wait` syscalls (epoll backend).
    pub epoll_waits: u64,
    /// Other syscalls made by the driver (epoll backend: read, write, accept...;
    /// both: eventfd reads, epoll_ctl).
    pub other_syscalls: u64,
    /// Driver parks (loop turns).
    pub parks: u64,
    /// Task polls.
    pub task_polls: u64,
    /// Tasks spawned.
    pub tasks_spawned: u64,
    /// Operations the driver tracks right now (io_uring: slab entries of
    /// in-flight, completed-but-unpolled and cancelled operations; epoll: 0).
    /// A gauge, not a counter: it must return to its baseline when the
    /// connections that made it rise are gone.
    pub ops_in_flight: u64,
}

impl MetricsSnapshot {
    /// All syscalls counted: enters + epoll_waits + others.
    pub fn syscalls(&self) -> u64 {
        self.uring_enters + self.epoll_waits + self.other_syscalls
    }

    /// Counter-wise difference `self - earlier`.
    pub fn since(&self, earlier: &MetricsSnapshot) -> MetricsSnapshot {
        MetricsSnapshot {
            uring_enters: self.uring_enters - earlier.uring_enters,
            sqes_submitted: self.sqes_submitted - earlier.sqes_submitted,
            cqes_reaped: self.cqes_reaped - earlier.cqes_reaped,
            cq_overflows: self.cq_overflows - earlier.cq_overflows,
            epoll_waits: self.epoll_waits - earlier.epoll_waits,
            other_syscalls: self.other_syscalls - earlier.other_syscalls,
            parks: self.parks - earlier.parks,
            task_polls: self.task_polls - earlier.task_polls,
            tasks_spawned: self.tasks_spawned - earlier.tasks_spawned,
            ops_in_flight: self.ops_in_flight,
        }
    }
}

impl fmt::Display for MetricsSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "io_uring_enter={} sqes={} cqes={} cq_overflows={} epoll_wait={} other_syscalls={} parks={} polls={}",
            self.uring_enters,
            self.sqes_submitted,
            self.cqes_reaped,
            self.cq_overflows,
            self.epoll_waits,
            self.other_syscalls,
            self.parks,
            self.task_polls
        )
    }
}

pub(crate) fn snapshot(cx: &Context) -> MetricsSnapshot {
    let m = &cx.metrics;
    MetricsSnapshot {
        uring_enters: cx.driver.borrow().enter_count(),
        sqes_submitted: m.sqes.get(),
        cqes_reaped: m.cqes.get(),
        cq_overflows: m.cq_overflows.get(),
        epoll_waits: m.epoll_waits.get(),
        other_syscalls: m.syscalls.get(),
        parks: m.parks.get(),
        task_polls: m.polls.get(),
        tasks_spawned: m.tasks_spawned.get(),
        ops_in_flight: cx.driver.borrow().ops_in_flight() as u64,
    }
}
