//! `io_uring_register(2)`: registered files and buffers, eventfd, probe.

use std::io;
use std::os::fd::RawFd;

use crate::probe::Probe;
use crate::ring::IoUring;
use crate::sys;

impl IoUring {
    fn register(&self, op: u32, arg: *const libc::c_void, nr: u32) -> io::Result<u32> {
        // SAFETY: every caller passes an `arg` that matches `op` and `nr`.
        unsafe { sys::io_uring_register(std::os::fd::AsRawFd::as_raw_fd(self), op, arg, nr) }
    }

    /// Register a file table (`IORING_REGISTER_FILES`); `-1` entries are empty slots.
    pub fn register_files(&self, fds: &[RawFd]) -> io::Result<()> {
        self.register(
            sys::IORING_REGISTER_FILES,
            fds.as_ptr().cast(),
            fds.len() as u32,
        )?;
        Ok(())
    }

    /// Register an empty table of `n` slots (`IORING_RSRC_REGISTER_SPARSE`),
    /// for direct descriptors from accept/openat/socket or a later update.
    pub fn register_files_sparse(&self, n: u32) -> io::Result<()> {
        let reg = sys::IoUringRsrcRegister {
            nr: n,
            flags: sys::IORING_RSRC_REGISTER_SPARSE,
            ..Default::default()
        };
        self.register(
            sys::IORING_REGISTER_FILES2,
            (&reg as *const sys::IoUringRsrcRegister).cast(),
            std::mem::size_of::<sys::IoUringRsrcRegister>() as u32,
        )?;
        Ok(())
    }

    /// Replace slots `offset..offset+fds.len()` (`-1` clears a slot).
    /// Returns how many slots were updated.
    pub fn register_files_update(&self, offset: u32, fds: &[RawFd]) -> io::Result<u32> {
        let up = sys::IoUringRsrcUpdate {
            offset,
            resv: 0,
            data: fds.as_ptr() as u64,
        };
        self.register(
            sys::IORING_REGISTER_FILES_UPDATE,
            (&up as *const sys::IoUringRsrcUpdate).cast(),
            fds.len() as u32,
        )
    }

    /// Drop the file table.
    pub fn unregister_files(&self) -> io::Result<()> {
        self.register(sys::IORING_UNREGISTER_FILES, std::ptr::null(), 0)?;
        Ok(())
    }

    /// Register buffers for `READ_FIXED`/`WRITE_FIXED` (pins their pages).
    ///
    /// # Safety
    /// The memory must stay valid until [`unregister_buffers`](Self::unregister_buffers)
    /// or the ring is dropped, and must not be used for anything else while a
    /// fixed operation may be writing it.
    pub unsafe fn register_buffers(&self, bufs: &[libc::iovec]) -> io::Result<()> {
        self.register(
            sys::IORING_REGISTER_BUFFERS,
            bufs.as_ptr().cast(),
            bufs.len() as u32,
        )?;
        Ok(())
    }

    /// Drop the registered buffers.
    pub fn unregister_buffers(&self) -> io::Result<()> {
        self.register(sys::IORING_UNREGISTER_BUFFERS, std::ptr::null(), 0)?;
        Ok(())
    }

    /// Signal `eventfd` on every posted CQE.
    pub fn register_eventfd(&self, eventfd: RawFd) -> io::Result<()> {
        self.register(
            sys::IORING_REGISTER_EVENTFD,
            (&eventfd as *const RawFd).cast(),
            1,
        )?;
        Ok(())
    }

    /// Signal `eventfd` only for completions that finished asynchronously.
    pub fn register_eventfd_async(&self, eventfd: RawFd) -> io::Result<()> {
        self.register(
            sys::IORING_REGISTER_EVENTFD_ASYNC,
            (&eventfd as *const RawFd).cast(),
            1,
        )?;
        Ok(())
    }

    /// Stop signalling the eventfd.
    pub fn unregister_eventfd(&self) -> io::Result<()> {
        self.register(sys::IORING_UNREGISTER_EVENTFD, std::ptr::null(), 0)?;
        Ok(())
    }

    /// Which opcodes this kernel supports (`IORING_REGISTER_PROBE`).
    pub fn probe(&self) -> io::Result<Probe> {
        let mut p = Box::new(sys::IoUringProbe {
            last_op: 0,
            ops_len: 0,
            resv: 0,
            resv2: [0; 3],
            ops: [sys::IoUringProbeOp::default(); 256],
        });
        self.register(
            sys::IORING_REGISTER_PROBE,
            (&mut *p as *mut sys::IoUringProbe).cast(),
            256,
        )?;
        Ok(Probe::from_raw(&p))
    }
}
