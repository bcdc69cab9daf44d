//! When a 408 (Request Timeout) is the server's right, judged from the
//! client's own socket: a request the server's kernel had whole long
//! enough cannot time out, however late the answer comes.
//!
//! A server may time out a request whose bytes the link held back (under
//! loss a pipelined body can wait seconds behind a lost window update).
//! It may not time out a request that had arrived: that is a server that
//! waited for bytes never owed (a framing bug), or that counted time it
//! spent elsewhere. The client tells the two apart by what the peer's
//! kernel has acknowledged (`TCP_INFO` `tcpi_bytes_acked`) and by when it
//! last sent data (`tcpi_last_data_sent`).
//!
//! Through the torture's fault proxy the peer is the proxy, not the
//! server: there the faulty link never holds a request back long, and
//! every 408 is a mismatch ([`super::ChaosConfig::request_timeout`]).

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// What a TCP socket says of the data it sent.
#[derive(Debug, Clone, Copy)]
pub struct Sent {
    /// Bytes the peer has acknowledged since the connection began.
    pub acked: u64,
    /// Since the socket last sent data (a retransmission counts).
    pub since: Duration,
}

/// Read [`Sent`] from `fd` (`TCP_INFO`).
pub fn sent(fd: RawFd) -> io::Result<Sent> {
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
    let have = std::mem::offset_of!(libc::tcp_info, tcpi_bytes_acked) + 8;
    if (len as usize) < have {
        return Err(io::Error::other("TCP_INFO without tcpi_bytes_acked"));
    }
    Ok(Sent {
        acked: info.tcpi_bytes_acked,
        since: Duration::from_millis(u64::from(info.tcpi_last_data_sent)),
    })
}

/// Bytes written to `fd` that its peer has not acknowledged yet (unsent
/// ones included): with [`Sent::acked`] just after a write, where that
/// write ends in the connection's byte stream.
pub fn unacked(fd: RawFd) -> io::Result<u64> {
    let mut n: libc::c_int = 0;
    // SAFETY: SIOCOUTQ (TIOCOUTQ on a TCP socket) writes one int to `n`.
    if unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut n) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n.max(0) as u64)
}

/// What the client knows of one request when its 408 arrives.
#[derive(Debug, Clone, Copy)]
pub struct Held {
    /// Since its burst began to be written.
    pub elapsed: Duration,
    /// Whether the server's kernel had acknowledged every byte of it.
    pub acked: bool,
    /// How long after the burst began the socket last sent data (this
    /// request's or a later one's; zero if before).
    pub last_sent_at: Duration,
}

impl Held {
    /// What socket `fd` says now of a request written from `began` whose
    /// last byte is byte `end` of the connection's stream (counted as
    /// [`Sent::acked`] counts).
    pub fn now(fd: RawFd, began: std::time::Instant, end: u64) -> io::Result<Held> {
        let sent = sent(fd)?;
        let elapsed = began.elapsed();
        Ok(Held {
            elapsed,
            acked: sent.acked >= end,
            last_sent_at: elapsed.saturating_sub(sent.since),
        })
    }

    /// Whether a 408 for this request is the server's right under a
    /// request timeout of `timeout`: the timeout has passed since the
    /// burst began (the server's timer starts no earlier), and the request
    /// had not arrived whole, or its last data left late (at least half
    /// the timeout after the burst began: the link held it back, and the
    /// deadline and the last byte may have crossed). Measured from the
    /// burst, not from the 408's arrival, so a 408 the link delayed too
    /// is judged alike.
    pub fn may_time_out(&self, timeout: Duration) -> bool {
        self.elapsed >= timeout && (!self.acked || self.last_sent_at >= timeout / 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(10);

    fn held(elapsed: u64, acked: bool, last_sent_at: u64) -> Held {
        Held {
            elapsed: Duration::from_secs(elapsed),
            acked,
            last_sent_at: Duration::from_secs(last_sent_at),
        }
    }

    #[test]
    fn a_408_is_right_only_for_a_request_held_back() {
        // Held back by the link, timeout passed: right.
        assert!(held(11, false, 0).may_time_out(T));
        // Whole, but its last data left late (9 s in): right, however
        // late the 408 itself arrives.
        assert!(held(11, true, 9).may_time_out(T));
        assert!(held(18, true, 9).may_time_out(T));
        // Sooner than the timeout: never.
        assert!(!held(9, false, 0).may_time_out(T));
        // Whole since 1 s in: a server bug.
        assert!(!held(16, true, 1).may_time_out(T));
    }

    #[test]
    fn the_socket_says_what_the_peer_has_acknowledged() {
        use std::io::{Read, Write};
        use std::os::fd::AsRawFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let base = sent(c.as_raw_fd()).unwrap().acked;
        c.write_all(b"hello").unwrap();
        let mut b = [0u8; 5];
        s.read_exact(&mut b).unwrap();
        // Loopback acknowledges at once; give it a moment anyway.
        let t0 = std::time::Instant::now();
        while sent(c.as_raw_fd()).unwrap().acked < base + 5 && t0.elapsed() < Duration::from_secs(2)
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        let now = sent(c.as_raw_fd()).unwrap();
        assert_eq!(now.acked, base + 5);
        assert!(now.since < Duration::from_secs(2));
        // A peer that stops reading: its window fills, and what is queued
        // behind it is not acknowledged.
        c.set_nonblocking(true).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        let mut written = 5u64;
        while let Ok(n) = c.write(&chunk) {
            written += n as u64;
        }
        std::thread::sleep(Duration::from_millis(50));
        assert!(sent(c.as_raw_fd()).unwrap().acked < base + written);
        drop(s);
    }
}
