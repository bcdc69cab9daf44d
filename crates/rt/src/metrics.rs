//! Per-thread counters, cheap enough to leave on (plain `Cell`s, no atomics).
//!
//! The benchmarks read them to report syscalls and `io_uring_enter` calls per
//! request: see [`crate::metrics()`] inside a runtime or [`crate::Runtime::metrics`].

use std::cell::Cell;
use std::fmt;

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
    pub(crate) recv_buffers: Cell<u64>,
    pub(crate) recv_bundled: Cell<u64>,
    pub(crate) recv_pauses: Cell<u64>,
    pub(crate) send_chain_links: Cell<u64>,
    pub(crate) send_bundles: Cell<u64>,
    pub(crate) send_rings: Cell<u64>,
    pub(crate) batch_waits: Cell<u64>,
    pub(crate) ops_leaked: Cell<u64>,
}

impl Metrics {
    #[inline]
    pub(crate) fn add(c: &Cell<u64>, n: u64) {
        c.set(c.get() + n);
    }
}

/// A copy of a runtime's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "publish", derive(serde::Serialize, serde::Deserialize))]
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
    /// Other syscalls: the driver's (epoll backend: read, write, accept...;
    /// both: eventfd reads, epoll_ctl), socket options, splices made in
    /// place on io_uring (the runtime counts each one it makes).
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
    /// Provided buffers received by live multishot receives (io_uring).
    #[cfg_attr(feature = "publish", serde(default))]
    pub recv_buffers: u64,
    /// Of those, the buffers that arrived after the first of a bundle CQE
    /// (`IORING_RECVSEND_BUNDLE`): each one a CQE saved.
    #[cfg_attr(feature = "publish", serde(default))]
    pub recv_bundled: u64,
    /// io_uring: multishot receives paused because their stream left its
    /// cap of received buffers unread (re-armed once it reads them).
    #[cfg_attr(feature = "publish", serde(default))]
    pub recv_pauses: u64,
    /// io_uring: operations submitted as skipped members of a chain (a
    /// write linked to its sync, or, feature `experiments`, a send chain);
    /// each one that succeeds is a CQE not posted.
    #[cfg_attr(feature = "publish", serde(default))]
    pub send_chain_links: u64,
    /// io_uring, feature `experiments`, `SendBatch::Bundle`: batches sent
    /// as send bundles.
    #[cfg_attr(feature = "publish", serde(default))]
    pub send_bundles: u64,
    /// io_uring, feature `experiments`, `SendBatch::Bundle`: send rings registered (each reused
    /// until its thread ends, or dropped when a send left entries in it).
    #[cfg_attr(feature = "publish", serde(default))]
    pub send_rings: u64,
    /// io_uring, feature `experiments`: blocking parks that asked the
    /// kernel for a batch of completions (`BatchWait`; counted before the wait, so one that found
    /// completions already there counts too).
    #[cfg_attr(feature = "publish", serde(default))]
    pub batch_waits: u64,
    /// Times a task's I/O answered `Pending` because the task had spent its
    /// cooperative budget in that poll (see [`crate::unconstrained`]); counted
    /// per thread.
    #[cfg_attr(feature = "publish", serde(default))]
    pub coop_yields: u64,
    /// io_uring: operations dropped in flight whose buffers the driver
    /// could not take over (it was in use), and which were leaked rather
    /// than freed while the kernel may still write to them. No code path
    /// is known to do this; a non-zero count is a bug to report.
    #[cfg_attr(feature = "publish", serde(default))]
    pub ops_leaked: u64,
}

impl MetricsSnapshot {
    /// All syscalls counted: enters + epoll_waits + others.
    pub fn syscalls(&self) -> u64 {
        self.uring_enters + self.epoll_waits + self.other_syscalls
    }

    /// Counter-wise difference `self - earlier` (0 where `earlier` is
    /// larger, as when a reading is missing); `ops_in_flight` is `self`'s.
    pub fn since(&self, earlier: &MetricsSnapshot) -> MetricsSnapshot {
        self.zip(earlier, u64::saturating_sub, self.ops_in_flight)
    }

    /// Counter-wise sum (of several threads); `ops_in_flight` summed too.
    pub fn add(&self, other: &MetricsSnapshot) -> MetricsSnapshot {
        self.zip(
            other,
            u64::saturating_add,
            self.ops_in_flight + other.ops_in_flight,
        )
    }

    fn zip(&self, o: &MetricsSnapshot, f: fn(u64, u64) -> u64, gauge: u64) -> MetricsSnapshot {
        MetricsSnapshot {
            uring_enters: f(self.uring_enters, o.uring_enters),
            sqes_submitted: f(self.sqes_submitted, o.sqes_submitted),
            cqes_reaped: f(self.cqes_reaped, o.cqes_reaped),
            cq_overflows: f(self.cq_overflows, o.cq_overflows),
            epoll_waits: f(self.epoll_waits, o.epoll_waits),
            other_syscalls: f(self.other_syscalls, o.other_syscalls),
            parks: f(self.parks, o.parks),
            task_polls: f(self.task_polls, o.task_polls),
            tasks_spawned: f(self.tasks_spawned, o.tasks_spawned),
            ops_in_flight: gauge,
            recv_buffers: f(self.recv_buffers, o.recv_buffers),
            recv_bundled: f(self.recv_bundled, o.recv_bundled),
            recv_pauses: f(self.recv_pauses, o.recv_pauses),
            send_chain_links: f(self.send_chain_links, o.send_chain_links),
            send_bundles: f(self.send_bundles, o.send_bundles),
            send_rings: f(self.send_rings, o.send_rings),
            batch_waits: f(self.batch_waits, o.batch_waits),
            coop_yields: f(self.coop_yields, o.coop_yields),
            ops_leaked: f(self.ops_leaked, o.ops_leaked),
        }
    }
}

impl fmt::Display for MetricsSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "io_uring_enter={} sqes={} cqes={} cq_overflows={} epoll_wait={} other_syscalls={} parks={} polls={} recv_buffers={} recv_bundled={} recv_pauses={} send_chain_links={} send_bundles={} send_rings={} batch_waits={} coop_yields={} ops_leaked={}",
            self.uring_enters,
            self.sqes_submitted,
            self.cqes_reaped,
            self.cq_overflows,
            self.epoll_waits,
            self.other_syscalls,
            self.parks,
            self.task_polls,
            self.recv_buffers,
            self.recv_bundled,
            self.recv_pauses,
            self.send_chain_links,
            self.send_bundles,
            self.send_rings,
            self.batch_waits,
            self.coop_yields,
            self.ops_leaked
        )
    }
}

/// The counters `m`, with the driver's own (`io_uring_enter` calls and
/// operations in flight) and the thread's cooperative yields.
pub(crate) fn snapshot(
    m: &Metrics,
    uring_enters: u64,
    ops_in_flight: u64,
    coop_yields: u64,
) -> MetricsSnapshot {
    MetricsSnapshot {
        uring_enters,
        sqes_submitted: m.sqes.get(),
        cqes_reaped: m.cqes.get(),
        cq_overflows: m.cq_overflows.get(),
        epoll_waits: m.epoll_waits.get(),
        other_syscalls: m.syscalls.get(),
        parks: m.parks.get(),
        task_polls: m.polls.get(),
        tasks_spawned: m.tasks_spawned.get(),
        ops_in_flight,
        recv_buffers: m.recv_buffers.get(),
        recv_bundled: m.recv_bundled.get(),
        recv_pauses: m.recv_pauses.get(),
        send_chain_links: m.send_chain_links.get(),
        send_bundles: m.send_bundles.get(),
        send_rings: m.send_rings.get(),
        batch_waits: m.batch_waits.get(),
        coop_yields,
        ops_leaked: m.ops_leaked.get(),
    }
}
