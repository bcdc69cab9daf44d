//! The epoll backend: edge-triggered readiness and non-blocking syscalls.
//!
//! # Protocol
//! Every fd an operation waits on is added to the epoll set once, for
//! `EPOLLIN|EPOLLOUT|EPOLLRDHUP|EPOLLET`, the first time an operation would
//! block on it. Per fd (a table indexed by fd number) we keep two readiness
//! bits and one waker per direction. An operation first checks the bit: if
//! clear it waits without a syscall; if set it makes the syscall, and on
//! `EAGAIN` clears the bit and waits. `epoll_wait` sets bits and wakes. All
//! of this runs on the runtime thread, so no edge can slip between the
//! `EAGAIN` and the clear. A short read also clears the read bit (the socket
//! is drained; new data brings a new edge), except once the peer has shut
//! down or the socket failed (`EPOLLRDHUP`/`EPOLLHUP`/`EPOLLERR`, remembered
//! until close): no edge follows that, and the next read returns at once.
//! Every task waiting on an fd and direction is kept and woken (two tasks
//! accepting on one listener, or receiving on one UDP socket, both wake);
//! the woken tasks retry their syscall and the losers wait again.
//!
//! Files have no readiness: their operations run inline (a `pread`/`pwrite`
//! on the runtime thread), like fio's psync engine.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::task::Waker;
use std::time::Duration;

use super::op::cvt;
use super::waiters::Waiters;
use super::Dir;
use crate::metrics::Metrics;

const WAKE_TOKEN: u64 = u64::MAX;

#[derive(Debug, Default)]
struct FdState {
    registered: bool,
    ready: [bool; 2],
    /// The peer shut down its write side, or the socket errored/hung up
    /// (`EPOLLRDHUP|EPOLLHUP|EPOLLERR` seen). Sticky until the fd is closed:
    /// reads never block again (they return EOF or the error), and there
    /// will be no further edge, so read readiness must not be cleared.
    read_closed: bool,
    /// The waiters of each direction.
    wakers: [Waiters; 2],
}

/// The thread-owned epoll state.
#[derive(Debug)]
pub(crate) struct EpollDriver {
    epfd: OwnedFd,
    fds: Vec<FdState>,
    events: Vec<libc::epoll_event>,
    wake_fd: RawFd,
    /// The last `epoll_wait` filled the event buffer: more may be ready.
    last_full: bool,
}

impl EpollDriver {
    pub(crate) fn new(wake_fd: RawFd) -> io::Result<EpollDriver> {
        // SAFETY: plain epoll_create1.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) } as isize)? as RawFd;
        // SAFETY: a fresh fd we own.
        let epfd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: WAKE_TOKEN,
        };
        // SAFETY: valid epoll fd, eventfd and event.
        cvt(unsafe { libc::epoll_ctl(fd, libc::EPOLL_CTL_ADD, wake_fd, &mut ev) } as isize)?;
        Ok(EpollDriver {
            epfd,
            fds: Vec::new(),
            events: vec![libc::epoll_event { events: 0, u64: 0 }; 1024],
            wake_fd,
            last_full: false,
        })
    }

    fn state(&mut self, fd: RawFd) -> &mut FdState {
        let i = fd as usize;
        if i >= self.fds.len() {
            self.fds.resize_with(i + 1, FdState::default);
        }
        &mut self.fds[i]
    }

    /// Whether `fd` may be ready in `dir` (unregistered fds count as ready:
    /// try the syscall first).
    pub(crate) fn is_ready(&mut self, fd: RawFd, dir: Dir) -> bool {
        match self.fds.get(fd as usize) {
            Some(s) if s.registered => s.ready[dir as usize],
            _ => true,
        }
    }

    pub(crate) fn clear_ready(&mut self, fd: RawFd, dir: Dir) {
        let st = self.state(fd);
        // A short read after the peer's FIN was reported looks "drained",
        // but the FIN's edge is already consumed: clearing here would make
        // the next read (which would return 0) wait forever.
        if dir == Dir::Read && st.read_closed {
            return;
        }
        st.ready[dir as usize] = false;
    }

    /// Register `fd` if needed and park `waker` until it is ready in `dir`.
    pub(crate) fn wait_ready(
        &mut self,
        fd: RawFd,
        dir: Dir,
        waker: &Waker,
        m: &Metrics,
    ) -> io::Result<()> {
        let epfd = self.epfd.as_raw_fd();
        let st = self.state(fd);
        if !st.registered {
            let mut ev = libc::epoll_event {
                events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
                u64: fd as u64,
            };
            Metrics::add(&m.syscalls, 1);
            // SAFETY: valid epoll fd and event; `fd` is open (owned by the caller's object).
            cvt(unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, &mut ev) } as isize)?;
            st.registered = true;
            // Edge-triggered ADD reports the current state at once, so start "not ready".
            st.ready = [false, false];
        }
        st.wakers[dir as usize].add(waker);
        Ok(())
    }

    pub(crate) fn park(&mut self, timeout: Option<Duration>, m: &Metrics) -> io::Result<()> {
        let ms = match timeout {
            None => -1,
            Some(d) if d.is_zero() => 0,
            // Round up so we never wake before a timer is due.
            Some(d) => d.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32,
        };
        Metrics::add(&m.epoll_waits, 1);
        // SAFETY: `events` is a valid buffer of its length.
        let n = unsafe {
            super::op::raw::epoll_wait(
                self.epfd.as_raw_fd(),
                self.events.as_mut_ptr(),
                self.events.len() as i32,
                ms,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(e)
            };
        }
        for i in 0..n as usize {
            let ev = self.events[i];
            let token = ev.u64;
            if token == WAKE_TOKEN {
                let mut buf = 0u64;
                Metrics::add(&m.syscalls, 1);
                // SAFETY: reading 8 bytes into a u64 from our non-blocking eventfd.
                unsafe { libc::read(self.wake_fd, (&mut buf as *mut u64).cast(), 8) };
                continue;
            }
            let bits = ev.events as i32;
            let st = self.state(token as RawFd);
            let err = bits & (libc::EPOLLERR | libc::EPOLLHUP) != 0;
            if err || bits & libc::EPOLLRDHUP != 0 {
                st.read_closed = true;
            }
            if err || bits & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLPRI) != 0 {
                st.ready[0] = true;
                st.wakers[0].wake_all();
            }
            if err || bits & libc::EPOLLOUT != 0 {
                st.ready[1] = true;
                st.wakers[1].wake_all();
            }
        }
        self.last_full = n as usize == self.events.len();
        if self.last_full {
            let len = self.events.len() * 2;
            self.events
                .resize(len, libc::epoll_event { events: 0, u64: 0 });
        }
        Ok(())
    }

    /// The epoll fd: readable while events are ready (for hosted mode).
    pub(crate) fn readiness_fd(&self) -> RawFd {
        self.epfd.as_raw_fd()
    }

    /// Whether the last park may have left events unread.
    pub(crate) fn may_have_more(&self) -> bool {
        self.last_full
    }

    /// Close `fd` (which also removes it from the epoll set) and reset its state.
    pub(crate) fn close_fd(&mut self, fd: RawFd, m: &Metrics) {
        if let Some(st) = self.fds.get_mut(fd as usize) {
            *st = FdState::default();
        }
        Metrics::add(&m.syscalls, 1);
        // SAFETY: the caller owned fd and gives it up.
        unsafe { libc::close(fd) };
    }
}
