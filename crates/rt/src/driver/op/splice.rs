//! `splice(2)`: move bytes between a pipe and a file or socket without
//! copying them through user memory. io_uring: `IORING_OP_SPLICE`; epoll:
//! `splice(SPLICE_F_NONBLOCK)`, waiting for the output socket to be
//! writable when it is one (a file read into an empty pipe of ours never
//! blocks).
//!
//! [`send_file`] is the zero-copy body path built on it: file -> the
//! stream's pipe -> socket, a pipe-full at a time.

use std::any::Any;
use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::rc::Rc;

use ringkit_uring::opcode::{self, Entry, Target};

use super::cvt;
use super::writable::Writable;
use crate::driver::{op_within, Dir, EpollOp, Op, OpCode, Source, UringOp};

/// One splice of up to `len` bytes from `fd_in` (at `off_in`, or its
/// position: `None`) to `fd_out`.
pub(crate) struct Splice {
    fd_in: RawFd,
    off_in: Option<u64>,
    fd_out: RawFd,
    len: u32,
    /// `fd_out` is a socket: on epoll, wait for it to be writable.
    out_socket: bool,
    /// What owns the fds by number (the pipe, the file): alive until the
    /// final CQE even if the future is dropped, because io_uring looks
    /// `fd_in` up again when it retries a punted splice, and a closed
    /// number may by then name another file.
    _keep: [Rc<dyn Any>; 2],
}

impl Splice {
    /// The non-blocking `splice(2)` itself.
    fn attempt(&mut self) -> io::Result<u32> {
        let mut off = self.off_in.map(|o| o as libc::loff_t);
        let off_ptr = off
            .as_mut()
            .map_or(std::ptr::null_mut(), |o| o as *mut libc::loff_t);
        // SAFETY: `off_ptr` is null or points at a local that outlives the
        // call; the fds are kept open by `_keep` and the caller.
        cvt(unsafe {
            libc::splice(
                self.fd_in,
                off_ptr,
                self.fd_out,
                std::ptr::null_mut(),
                self.len as usize,
                libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
            )
        })
    }
}

impl OpCode for Splice {
    type Output = io::Result<usize>;

    fn complete(self, res: io::Result<u32>, _from: Source) -> Self::Output {
        res.map(|n| n as usize)
    }
}

impl UringOp for Splice {
    /// io_uring has no non-blocking issue for a splice: every
    /// `IORING_OP_SPLICE` is handed to an io-wq worker thread (perf put
    /// those threads at 53% of a static server's samples at 64 KiB). So
    /// the splice is tried in place first, as epoll does; only one that
    /// would block goes to the ring.
    fn uring_try_inline(&mut self) -> Option<Option<io::Result<u32>>> {
        Some(match self.attempt() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && !self.out_socket => None,
            r => Some(r),
        })
    }

    fn uring_entry(&mut self) -> Entry {
        let off_in = self.off_in.map_or(-1, |o| o as i64);
        opcode::Splice::new(
            Target::Fd(self.fd_in),
            off_in,
            Target::Fd(self.fd_out),
            -1,
            self.len,
        )
        .flags(libc::SPLICE_F_MOVE)
        .build()
    }
}

impl EpollOp for Splice {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        self.out_socket.then_some((self.fd_out, Dir::Write))
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        self.attempt()
    }
}

/// Most clean pipes a thread keeps for its next zero-copy sends.
const SPARE_PIPES: usize = 8;

thread_local! {
    /// This thread's clean pipes not in use. A send borrows one for its
    /// duration ([`PipeLease`]), so a connection holds no pipe (two fds)
    /// between sends: 500 idle keep-alive connections held 1 000 pipe fds.
    static SPARE: std::cell::RefCell<Vec<Rc<Pipe>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A pipe borrowed from this thread's spares (or made) for one send; back
/// to the spares when dropped clean, closed when dropped dirty (a send
/// that failed or was dropped midway may have left bytes in it).
#[derive(Debug)]
pub(crate) struct PipeLease(Rc<Pipe>);

impl PipeLease {
    /// A clean pipe of about `want` bytes.
    pub(crate) fn take(want: usize) -> io::Result<PipeLease> {
        let spare = SPARE.with(|s| s.borrow_mut().pop());
        let pipe = match spare {
            Some(p) => p,
            None => Rc::new(Pipe::new(want)?),
        };
        pipe.clean.set(false);
        Ok(PipeLease(pipe))
    }

    /// The pipe.
    pub(crate) fn pipe(&self) -> &Rc<Pipe> {
        &self.0
    }

    /// The send succeeded: the pipe is empty again.
    pub(crate) fn done(&self) {
        self.0.clean.set(true);
    }
}

impl Drop for PipeLease {
    fn drop(&mut self) {
        // Clean means every splice of the send completed (no operation
        // still holds it).
        if self.0.clean.get() && Rc::strong_count(&self.0) == 1 {
            let p = self.0.clone();
            let _ = SPARE.try_with(|s| {
                let mut s = s.borrow_mut();
                if s.len() < SPARE_PIPES {
                    s.push(p);
                }
            });
        }
    }
}

/// A pipe for zero-copy sends: empty between sends.
#[derive(Debug)]
pub(crate) struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    /// Its capacity, bytes.
    size: usize,
    /// Known empty: false from the start of a send until it succeeds, so a
    /// send that failed or was dropped midway leaves it marked dirty.
    pub(crate) clean: Cell<bool>,
}

impl Pipe {
    /// A non-blocking, close-on-exec pipe, grown towards `want` bytes
    /// (the kernel may give less: `/proc/sys/fs/pipe-max-size`).
    pub(crate) fn new(want: usize) -> io::Result<Pipe> {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two fds pipe2 writes.
        cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } as isize)?;
        // SAFETY: pipe2 returned two fresh fds that we now own.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: F_SETPIPE_SZ / F_GETPIPE_SZ on our own pipe.
        let size = unsafe {
            libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, want as libc::c_int);
            libc::fcntl(write.as_raw_fd(), libc::F_GETPIPE_SZ)
        };
        Ok(Pipe {
            read,
            write,
            size: if size > 0 { size as usize } else { 64 * 1024 },
            clean: Cell::new(true),
        })
    }
}

/// Send up to `len` bytes of `file` from `offset` to the socket `sock`
/// through `pipe` without copying them through user memory: one splice
/// into the pipe, then splices out of it until it is empty. Returns the
/// bytes sent; 0 means `file` ends before `offset`.
///
/// The caller marks the pipe dirty before and clean after a success: on an
/// error (or a drop) midway it may hold bytes and must not be reused. Each
/// wait on the socket is bounded by `limit` (`TimedOut` after it).
pub(crate) async fn send_file<F: AsRawFd + 'static>(
    sock: RawFd,
    file: &Rc<F>,
    offset: u64,
    len: usize,
    pipe: &Rc<Pipe>,
    limit: Option<std::time::Duration>,
) -> io::Result<usize> {
    let keep = || -> [Rc<dyn Any>; 2] { [pipe.clone(), file.clone()] };
    let chunk = len.min(pipe.size).min(u32::MAX as usize) as u32;
    let got = Op::new(Splice {
        fd_in: file.as_raw_fd(),
        off_in: Some(offset),
        fd_out: pipe.write.as_raw_fd(),
        len: chunk,
        out_socket: false,
        _keep: keep(),
    })
    .await?;
    let mut sent = 0;
    while sent < got {
        let out = Splice {
            fd_in: pipe.read.as_raw_fd(),
            off_in: None,
            fd_out: sock,
            len: (got - sent) as u32,
            out_socket: true,
            _keep: keep(),
        };
        // epoll waits for room inside the op: bounded too.
        let n = match op_within(out, limit).await {
            // io_uring arms no poll for a splice: a full non-blocking
            // socket answers EAGAIN. Wait until it drains, then go on.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                op_within(Writable { fd: sock }, limit).await?;
                continue;
            }
            r => r?,
        };
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        sent += n;
    }
    Ok(got)
}
