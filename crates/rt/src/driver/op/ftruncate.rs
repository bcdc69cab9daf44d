//! `ftruncate(2)`: io_uring `IORING_OP_FTRUNCATE` (Linux 6.9); epoll:
//! the syscall inline. A kernel without the opcode answers `EINVAL`, and
//! the call is then made in place (`complete`): an `EINVAL` of
//! `ftruncate`'s own (a length past what the file system takes, a file
//! not open for writing) comes back the same.
//!
//! This file is the whole operation: what it asks of each backend, and
//! what its result means. It reads no flag bits and reaches no driver.

use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry, Target};

use super::cvt;
use crate::driver::{current, Dir, EpollOp, OpCode, Source, UringOp};

pub(crate) struct Ftruncate {
    pub(crate) fd: RawFd,
    pub(crate) len: u64,
}

/// The syscall, in place (lengths past `i64::MAX` are `EINVAL`, as the
/// kernel's own check says, without a call); `counted`: count it in the
/// thread's syscalls (the epoll driver counts its own attempts).
fn ftruncate(fd: RawFd, len: u64, counted: bool) -> io::Result<u32> {
    let Ok(len) = i64::try_from(len) else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    if counted {
        current::count_syscalls(1);
    }
    // SAFETY: a plain syscall on a file descriptor.
    cvt(unsafe { libc::ftruncate(fd, len) } as isize)
}

impl OpCode for Ftruncate {
    type Output = io::Result<()>;

    fn complete(self, res: io::Result<u32>, from: Source) -> io::Result<()> {
        match (res, from) {
            (Err(e), Source::Ring { .. }) if e.raw_os_error() == Some(libc::EINVAL) => {
                ftruncate(self.fd, self.len, true).map(drop)
            }
            (res, _) => res.map(drop),
        }
    }
}

impl UringOp for Ftruncate {
    fn uring_entry(&mut self) -> Entry {
        opcode::Ftruncate::new(Target::Fd(self.fd), self.len).build()
    }
}

impl EpollOp for Ftruncate {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        None
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        ftruncate(self.fd, self.len, false)
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    use super::*;

    /// A kernel before 6.9 answers the opcode with `EINVAL`: the size is
    /// then set in place, and an `EINVAL` of `ftruncate`'s own stays one.
    #[test]
    fn a_ring_without_the_opcode_gets_the_call_in_place() {
        let f = tempfile::tempfile().unwrap();
        let einval = || Err(io::Error::from_raw_os_error(libc::EINVAL));
        let ring = Source::Ring { cqe_flags: 0 };
        let op = Ftruncate {
            fd: f.as_raw_fd(),
            len: 12_345,
        };
        op.complete(einval(), ring).unwrap();
        assert_eq!(f.metadata().unwrap().len(), 12_345);
        let op = Ftruncate {
            fd: f.as_raw_fd(),
            len: u64::MAX,
        };
        let e = op.complete(einval(), ring).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
        // Other errors, and epoll's results, pass through untouched.
        let op = Ftruncate {
            fd: f.as_raw_fd(),
            len: 1,
        };
        let e = op
            .complete(Err(io::Error::from_raw_os_error(libc::EIO)), ring)
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO));
        assert_eq!(f.metadata().unwrap().len(), 12_345);
    }
}
