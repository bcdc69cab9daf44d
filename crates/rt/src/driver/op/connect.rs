//! `connect(2)`: io_uring `IORING_OP_CONNECT`; epoll: non-blocking connect,
//! wait writable, then `SO_ERROR`.

use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry, Target};

use crate::driver::{Dir, EpollOp, OpCode, Source, UringOp};

pub(crate) struct Connect {
    fd: RawFd,
    // Boxed: the kernel reads it after submission.
    addr: Box<socket2::SockAddr>,
    started: bool,
}

impl Connect {
    pub(crate) fn new(fd: RawFd, addr: socket2::SockAddr) -> Connect {
        Connect {
            fd,
            addr: Box::new(addr),
            started: false,
        }
    }
}

impl OpCode for Connect {
    type Output = io::Result<()>;

    fn complete(self, res: io::Result<u32>, _from: Source) -> io::Result<()> {
        match res {
            // Give epoll's "backlog full" the same raw errno io_uring reports.
            Err(e) if e.kind() == io::ErrorKind::ResourceBusy => {
                Err(io::Error::from_raw_os_error(libc::EAGAIN))
            }
            r => r.map(|_| ()),
        }
    }
}

impl UringOp for Connect {
    fn uring_entry(&mut self) -> Entry {
        opcode::Connect::new(Target::Fd(self.fd), self.addr.as_ptr(), self.addr.len()).build()
    }
}

impl EpollOp for Connect {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        Some((self.fd, Dir::Write))
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        if !self.started {
            self.started = true;
            // SAFETY: valid socket and address.
            let r = unsafe { libc::connect(self.fd, self.addr.as_ptr(), self.addr.len()) };
            if r == 0 {
                return Ok(0);
            }
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EINPROGRESS) => Err(io::ErrorKind::WouldBlock.into()),
                // EAGAIN from connect(2) is not "in progress": a Unix listener's
                // backlog is full (or no local port is free). Waiting for
                // writability would report a connection that never happened.
                Some(libc::EAGAIN) => Err(io::Error::new(
                    io::ErrorKind::ResourceBusy,
                    format!("connect: {e} (listener backlog full or no free local port)"),
                )),
                _ => Err(e),
            };
        }
        let mut err: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: valid socket; `err`/`len` are writable.
        let r = unsafe {
            libc::getsockopt(
                self.fd,
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                (&mut err as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        match err {
            0 => Ok(0),
            libc::EINPROGRESS | libc::EALREADY => Err(io::ErrorKind::WouldBlock.into()),
            e => Err(io::Error::from_raw_os_error(e)),
        }
    }
}
