//! When a 408 (Request Timeout) is the server's right, judged from the
//! client's own socket: a request the server's kernel had whole cannot
//! time out, however late the answer.
//!
//! A server may time out a request whose bytes the link held back (under
//! loss a pipelined body can wait seconds behind a lost window update).
//! It may not time out a request that had arrived: that is a server that
//! waited for bytes never owed (a framing bug), or that counted time it
//! spent elsewhere. The client tells the two apart by what its socket
//! still holds unacknowledged ([`unacked`], `SIOCOUTQ`) and by when it
//! last sent data ([`since_last_sent`], `TCP_INFO`).

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// Bytes written to `fd` that its peer has not acknowledged (unsent ones
/// included).
pub fn unacked(fd: RawFd) -> io::Result<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: SIOCOUTQ (TIOCOUTQ on a TCP socket) writes one int to `n`.
    if unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut n) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n.max(0) as usize)
}

/// How long ago the socket last sent data (a retransmission counts).
pub fn since_last_sent(fd: RawFd) -> io::Result<Duration> {
    // SAFETY: tcp_info is plain data; all zeroes is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes to `info`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Duration::from_millis(u64::from(info.tcpi_last_data_sent)))
}

/// What the client knows of one request when its 408 arrives.
#[derive(Debug, Clone, Copy)]
pub struct Held {
    /// Since its burst began to be written.
    pub elapsed: Duration,
    /// Whether the server's kernel had acknowledged every byte of it.
    pub acked: bool,
    /// Since the socket last sent data (this request's or a later one's).
    pub since_last_sent: Duration,
}

impl Held {
    /// Whether a 408 for this request is the server's right under a
    /// request timeout of `timeout`: the timeout has passed since the
    /// burst began (its timer starts no earlier), and the request had not
    /// arrived whole, or arrived only just (its last byte sent within
    /// half the timeout: the deadline and the last byte may cross).
    pub fn may_time_out(&self, timeout: Duration) -> bool {
        self.elapsed >= timeout && (!self.acked || self.since_last_sent < timeout / 2)
    }
}

/// Request `end` (its end's offset in a burst of which `written` bytes
/// were handed to the socket) is acknowledged whole when what the socket
/// still holds is no more than what was written after it.
pub fn request_acked(unacked: usize, written: usize, end: usize) -> bool {
    written >= end && unacked <= written - end
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(10);

    fn held(elapsed: u64, acked: bool, since: u64) -> Held {
        Held {
            elapsed: Duration::from_secs(elapsed),
            acked,
            since_last_sent: Duration::from_secs(since),
        }
    }

    #[test]
    fn a_408_is_right_only_for_a_request_held_back() {
        // Held back by the link, timeout passed: right.
        assert!(held(11, false, 0).may_time_out(T));
        // Whole but just arrived (deadline and last byte crossed): right.
        assert!(held(11, true, 2).may_time_out(T));
        // Sooner than the timeout: never.
        assert!(!held(9, false, 0).may_time_out(T));
        // The server had it whole for 6 s: a server bug.
        assert!(!held(16, true, 6).may_time_out(T));
    }

    #[test]
    fn a_request_is_acked_whole_when_the_queue_holds_only_later_bytes() {
        // Burst of 300 bytes, request ends at 100, all written.
        assert!(request_acked(0, 300, 100));
        assert!(request_acked(200, 300, 100));
        assert!(!request_acked(201, 300, 100));
        // Not all of it written yet.
        assert!(!request_acked(0, 50, 100));
    }

    #[test]
    fn the_socket_says_what_the_peer_has_not_acknowledged() {
        use std::io::{Read, Write};
        use std::os::fd::AsRawFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(b"hello").unwrap();
        let mut b = [0u8; 5];
        s.read_exact(&mut b).unwrap();
        // Loopback acknowledges at once; give it a moment anyway.
        let t0 = std::time::Instant::now();
        while unacked(c.as_raw_fd()).unwrap() > 0 && t0.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(unacked(c.as_raw_fd()).unwrap(), 0);
        assert!(since_last_sent(c.as_raw_fd()).unwrap() < Duration::from_secs(2));
        // A peer that stops reading: its window fills, and bytes stay queued.
        c.set_nonblocking(true).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        let mut written = 0usize;
        while let Ok(n) = c.write(&chunk) {
            written += n;
        }
        assert!(unacked(c.as_raw_fd()).unwrap() > 0, "{written} written");
        drop(s);
    }
}
