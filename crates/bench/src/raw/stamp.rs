//! What a wake-up study reader waits on in a bare ring: an 8-byte READ of
//! the writer's timestamp into a buffer this type owns, or a multishot
//! POLL_ADD (the reader then reads the stamp itself).

use std::io;
use std::os::fd::RawFd;

use ringkit_uring::{opcode, IoUring};

/// The READ target, or the POLL, of one reader.
///
/// INVARIANT: `buf` is a live heap allocation of 8 bytes from
/// `Box::into_raw`; while `in_flight`, the kernel may write it, so it is
/// freed only when no READ is in flight (else leaked on drop).
#[derive(Debug)]
pub struct StampWait {
    fd: RawFd,
    read: bool,
    buf: *mut [u8; 8],
    in_flight: bool,
}

impl StampWait {
    /// Wait on `fd` with READ (`read`) or a multishot POLL_ADD.
    pub fn new(fd: RawFd, read: bool) -> StampWait {
        StampWait {
            fd,
            read,
            buf: Box::into_raw(Box::new([0u8; 8])),
            in_flight: false,
        }
    }

    /// Push the READ (user_data 2) or the POLL (user_data 1) and submit.
    pub fn arm(&mut self, ring: &mut IoUring) -> io::Result<()> {
        if self.read {
            let e = opcode::Read::new(self.fd.into(), self.buf.cast::<u8>(), 8)
                .offset(u64::MAX)
                .build()
                .user_data(2);
            // SAFETY: `buf` stays allocated while the READ is in flight
            // (INVARIANT: `in_flight` is set before anything can drop us).
            unsafe { ring.push(e.sqe()) }.map_err(|_| io::Error::other("SQ full"))?;
            self.in_flight = true;
        } else {
            let poll = opcode::PollAdd::new(self.fd.into(), libc::POLLIN as u32)
                .multi(true)
                .build()
                .user_data(1);
            // SAFETY: POLL_ADD references no memory.
            unsafe { ring.push(poll.sqe()) }.map_err(|_| io::Error::other("SQ full"))?;
        }
        ring.submit()?;
        Ok(())
    }

    /// After the READ's CQE (8 bytes read): the stamp it read.
    pub fn read_stamp(&mut self) -> u64 {
        self.in_flight = false;
        // SAFETY: INVARIANT: `buf` is live; its READ completed, so the
        // kernel no longer writes it.
        u64::from_ne_bytes(unsafe { *self.buf })
    }
}

impl Drop for StampWait {
    fn drop(&mut self) {
        if !self.in_flight {
            // SAFETY: INVARIANT: from Box::into_raw, and no READ in flight.
            drop(unsafe { Box::from_raw(self.buf) });
        }
        // Else: the kernel may still write these 8 bytes as it tears the
        // ring down: leak them.
    }
}
