//! Accepting connection after connection on one listener.
//!
//! io_uring: one multishot `IORING_OP_ACCEPT` stays armed across calls and
//! posts a CQE per connection (fds non-blocking, close-on-exec). A transient
//! error (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`) ends it and is returned by
//! that call; the next call arms a new one, so the listener is never lost.
//! A multishot that ends without a connection is re-armed at once.
//!
//! epoll: each call is one [`Accept`] (wait readable, then `accept4`).

use std::future::poll_fn;
use std::io;
use std::os::fd::{IntoRawFd, RawFd};

use ringkit_uring::opcode::{self, Target};

use super::accept::Accept;
use crate::driver::multishot::{Multishot, Shot};
use crate::driver::uring::MultiKind;
use crate::driver::Op;

/// The accepting side of one listener fd (which it does not own).
#[derive(Debug)]
pub(crate) struct AcceptMulti {
    fd: RawFd,
    shot: Multishot,
}

impl AcceptMulti {
    pub(crate) fn new(fd: RawFd) -> AcceptMulti {
        AcceptMulti {
            fd,
            shot: Multishot::new(MultiKind::Accept),
        }
    }

    /// The next accepted connection's fd (owned by the caller).
    pub(crate) async fn next(&self) -> io::Result<RawFd> {
        loop {
            let fd = self.fd;
            let shot = poll_fn(|cx| {
                self.shot.poll_next(cx, || {
                    opcode::Accept::new(Target::Fd(fd), std::ptr::null_mut(), std::ptr::null_mut())
                        .flags(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC)
                        .multishot(true)
                        .build()
                })
            })
            .await?;
            match shot {
                // No multishot here (epoll): one plain accept.
                Shot::Single => {
                    let (fd, _) = Op::new(Accept::new(self.fd)).await?;
                    return Ok(fd.into_raw_fd());
                }
                // Ended without a connection: arm a new one.
                Shot::Ended => continue,
                Shot::Cqe(res, _) if res < 0 => return Err(io::Error::from_raw_os_error(-res)),
                Shot::Cqe(res, _) => return Ok(res),
            }
        }
    }

    /// Cancel the armed multishot, before the listener's fd is closed.
    pub(crate) fn cancel(&self) {
        self.shot.cancel();
    }
}
