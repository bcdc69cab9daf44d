//! Operations, one file each. Every file implements [`super::OpCode`]
//! (the output), [`super::UringOp`] (the SQE it becomes) and
//! [`super::EpollOp`] (the readiness it waits for and the syscall it
//! makes), one impl per backend.

pub(crate) mod accept;
pub(crate) mod accept_multi;
pub(crate) mod close;
pub(crate) mod connect;
pub(crate) mod fallocate;
pub(crate) mod fsync;
pub(crate) mod ftruncate;
pub(crate) mod link;
pub(crate) mod open;
pub(crate) mod path;
pub(crate) mod raw;
pub(crate) mod read_at;
pub(crate) mod readv;
pub(crate) mod recv;
pub(crate) mod recv_multi;
pub(crate) mod recv_scratch;
pub(crate) mod recvmsg;
pub(crate) mod send;
pub(crate) mod send_batch;
pub(crate) mod sendfile;
pub(crate) mod sendmsg;
pub(crate) mod shutdown;
pub(crate) mod splice;
pub(crate) mod statx;
pub(crate) mod writable;
pub(crate) mod write_at;
pub(crate) mod write_sync;
pub(crate) mod writev;

use std::io;
use std::os::fd::RawFd;

/// What an SQE addresses: `fd`, or its registered-file slot if it has one.
pub(crate) fn target(fd: RawFd, fixed: Option<u32>) -> ringkit_uring::opcode::Target {
    use ringkit_uring::opcode::Target;
    fixed.map_or(Target::Fd(fd), Target::Fixed)
}

/// The error of a read into a buffer with no room: its `Ok(0)` would read
/// as end of stream.
pub(crate) fn no_room() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "read into a buffer of zero capacity (give it room, e.g. Vec::with_capacity)",
    )
}

/// `ret` of a libc call as `io::Result<u32>`.
pub(crate) fn cvt(ret: isize) -> io::Result<u32> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as u32)
    }
}
