//! Direct syscalls for the epoll backend's I/O.
//!
//! glibc's `recv`, `send`, `read`, `write`, `epoll_wait` and friends are
//! pthread cancellation points: once a process has a second thread (every
//! ringkit process does: runtimes run on their own threads), each call
//! switches the thread to asynchronous cancellation and back, two atomic
//! compare-and-swaps around the syscall. ringkit's descriptors are
//! non-blocking and it never cancels a thread, so it makes the syscall
//! itself. perf put those two switches at 0.8% of an epoll echo server's
//! CPU, as much as its whole task scheduler.
//!
//! Each function has its libc namesake's contract: -1 and `errno` on error.

use std::os::fd::RawFd;

use libc::{c_long, c_void};

/// `recvfrom(fd, buf, len, flags, NULL, NULL)`.
///
/// # Safety
/// `buf` is writable for `len` bytes.
pub(crate) unsafe fn recv(fd: RawFd, buf: *mut c_void, len: usize, flags: i32) -> isize {
    // SAFETY: the caller's contract; the address arguments are NULL.
    unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            fd as c_long,
            buf,
            len,
            flags as c_long,
            0usize,
            0usize,
        ) as isize
    }
}

/// `sendto(fd, buf, len, flags, NULL, 0)`.
///
/// # Safety
/// `buf` is readable for `len` bytes.
pub(crate) unsafe fn send(fd: RawFd, buf: *const c_void, len: usize, flags: i32) -> isize {
    // SAFETY: the caller's contract; no destination address.
    unsafe {
        libc::syscall(
            libc::SYS_sendto,
            fd as c_long,
            buf,
            len,
            flags as c_long,
            0usize,
            0usize,
        ) as isize
    }
}

/// `read(fd, buf, len)`.
///
/// # Safety
/// `buf` is writable for `len` bytes.
pub(crate) unsafe fn read(fd: RawFd, buf: *mut c_void, len: usize) -> isize {
    // SAFETY: the caller's contract.
    unsafe { libc::syscall(libc::SYS_read, fd as c_long, buf, len) as isize }
}

/// `write(fd, buf, len)`.
///
/// # Safety
/// `buf` is readable for `len` bytes.
pub(crate) unsafe fn write(fd: RawFd, buf: *const c_void, len: usize) -> isize {
    // SAFETY: the caller's contract.
    unsafe { libc::syscall(libc::SYS_write, fd as c_long, buf, len) as isize }
}

/// `sendmsg(fd, msg, flags)`.
///
/// # Safety
/// `msg` and everything it points to are valid for the call.
pub(crate) unsafe fn sendmsg(fd: RawFd, msg: *const libc::msghdr, flags: i32) -> isize {
    // SAFETY: the caller's contract.
    unsafe { libc::syscall(libc::SYS_sendmsg, fd as c_long, msg, flags as c_long) as isize }
}

/// `recvmsg(fd, msg, flags)`.
///
/// # Safety
/// `msg` and everything it points to are valid (and its buffers writable)
/// for the call.
pub(crate) unsafe fn recvmsg(fd: RawFd, msg: *mut libc::msghdr, flags: i32) -> isize {
    // SAFETY: the caller's contract.
    unsafe { libc::syscall(libc::SYS_recvmsg, fd as c_long, msg, flags as c_long) as isize }
}

/// `accept4(fd, addr, len, flags)`.
///
/// # Safety
/// `addr`/`len` are NULL or valid for the kernel to write the peer address.
pub(crate) unsafe fn accept4(
    fd: RawFd,
    addr: *mut libc::sockaddr,
    len: *mut libc::socklen_t,
    flags: i32,
) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { libc::syscall(libc::SYS_accept4, fd as c_long, addr, len, flags as c_long) as i32 }
}

/// `epoll_wait(epfd, events, max, timeout_ms)`, made as `epoll_pwait` with
/// no signal mask (the same call; every architecture has it, while
/// `epoll_wait` itself is x86-only).
///
/// # Safety
/// `events` is writable for `max` entries.
pub(crate) unsafe fn epoll_wait(
    epfd: RawFd,
    events: *mut libc::epoll_event,
    max: i32,
    timeout_ms: i32,
) -> i32 {
    // SAFETY: the caller's contract.
    unsafe {
        libc::syscall(
            libc::SYS_epoll_pwait,
            epfd as c_long,
            events,
            max as c_long,
            timeout_ms as c_long,
            // No mask (the kernel then ignores the size; 8 is its sigset).
            std::ptr::null::<libc::sigset_t>(),
            8 as c_long,
        ) as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Real syscalls: miri cannot run them.
    #[test]
    #[cfg_attr(miri, ignore)]
    fn errors_come_back_as_minus_one_and_errno() {
        let mut b = [0u8; 4];
        // SAFETY: a valid buffer; fd -1 is never open.
        let r = unsafe { read(-1, b.as_mut_ptr().cast(), b.len()) };
        assert_eq!(r, -1);
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EBADF)
        );
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn send_and_recv_move_bytes_over_a_socketpair() {
        let mut fds = [0; 2];
        // SAFETY: a valid array for two fds.
        let r = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, fds.as_mut_ptr()) };
        assert_eq!(r, 0);
        let msg = b"ringkit";
        // SAFETY: `msg` is readable for its length.
        let n = unsafe { send(fds[0], msg.as_ptr().cast(), msg.len(), libc::MSG_NOSIGNAL) };
        assert_eq!(n, msg.len() as isize);
        let mut b = [0u8; 16];
        // SAFETY: `b` is writable for its length.
        let n = unsafe { recv(fds[1], b.as_mut_ptr().cast(), b.len(), 0) };
        assert_eq!(&b[..n as usize], msg);
        // SAFETY: closing the fds we opened.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
    }
}
