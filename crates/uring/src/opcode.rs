//! Operations: one small declarative entry per `IORING_OP_*`.
//!
//! Each entry has its required arguments (taken by `new`), optional fields with
//! defaults (set by same-named builder methods), the opcode, and a `build()`
//! that zeroes an SQE and fills it. The doc line names the syscall it mirrors.
//! Building an entry is safe; pushing it ([`crate::IoUring::push`]) is not,
//! because the kernel will use the memory the entry points to.

#![allow(clippy::new_without_default)]

use std::os::fd::RawFd;

use crate::sys::{self, IoUringSqe, KernelTimespec};

/// The file an operation works on: a plain fd or a registered (fixed) file index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A regular file descriptor.
    Fd(RawFd),
    /// An index into the registered file table (`IOSQE_FIXED_FILE`).
    Fixed(u32),
}

impl From<RawFd> for Target {
    fn from(fd: RawFd) -> Self {
        Target::Fd(fd)
    }
}

/// Where an operation that creates a file (accept, openat, socket) puts it:
/// a normal fd (default), a given slot of the registered file table, or any
/// free slot (`IORING_FILE_INDEX_ALLOC`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dest {
    /// Return a normal fd.
    #[default]
    Fd,
    /// Install in registered slot `n`.
    Slot(u32),
    /// Install in any free registered slot; the CQE result is the slot.
    AnySlot,
}

impl Dest {
    fn file_index(self) -> u32 {
        match self {
            Dest::Fd => 0,
            Dest::Slot(n) => n + 1,
            Dest::AnySlot => sys::IORING_FILE_INDEX_ALLOC,
        }
    }
}

/// `IOSQE_*` flags for an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SqeFlags(pub u8);

impl SqeFlags {
    /// `IOSQE_FIXED_FILE` (set automatically for [`Target::Fixed`]).
    pub const FIXED_FILE: SqeFlags = SqeFlags(sys::IOSQE_FIXED_FILE);
    /// `IOSQE_IO_DRAIN`: start only after every earlier SQE completed.
    pub const IO_DRAIN: SqeFlags = SqeFlags(sys::IOSQE_IO_DRAIN);
    /// `IOSQE_IO_LINK`: the next SQE starts only if this one succeeds.
    pub const IO_LINK: SqeFlags = SqeFlags(sys::IOSQE_IO_LINK);
    /// `IOSQE_IO_HARDLINK`: the next SQE starts when this one ends, whatever its result.
    pub const IO_HARDLINK: SqeFlags = SqeFlags(sys::IOSQE_IO_HARDLINK);
    /// `IOSQE_ASYNC`: go straight to the io-wq worker pool.
    pub const ASYNC: SqeFlags = SqeFlags(sys::IOSQE_ASYNC);
    /// `IOSQE_BUFFER_SELECT`: take a buffer from the group in `buf_group`.
    pub const BUFFER_SELECT: SqeFlags = SqeFlags(sys::IOSQE_BUFFER_SELECT);
    /// `IOSQE_CQE_SKIP_SUCCESS`: post no CQE when it succeeds.
    pub const CQE_SKIP_SUCCESS: SqeFlags = SqeFlags(sys::IOSQE_CQE_SKIP_SUCCESS);
}

impl std::ops::BitOr for SqeFlags {
    type Output = SqeFlags;
    fn bitor(self, rhs: SqeFlags) -> SqeFlags {
        SqeFlags(self.0 | rhs.0)
    }
}

/// A built SQE, ready to push.
#[derive(Debug, Clone, Copy)]
#[repr(transparent)]
pub struct Entry(pub IoUringSqe);

impl Entry {
    /// Set `user_data`, echoed back in the CQE.
    #[inline]
    pub fn user_data(mut self, v: u64) -> Entry {
        self.0.user_data = v;
        self
    }

    /// Add `IOSQE_*` flags.
    #[inline]
    pub fn flags(mut self, f: SqeFlags) -> Entry {
        self.0.flags |= f.0;
        self
    }

    /// Run with a registered personality (credentials).
    pub fn personality(mut self, id: u16) -> Entry {
        self.0.personality = id;
        self
    }

    /// The raw SQE.
    pub fn sqe(&self) -> &IoUringSqe {
        &self.0
    }
}

#[inline]
fn target(sqe: &mut IoUringSqe, t: Target) {
    match t {
        Target::Fd(fd) => sqe.fd = fd,
        Target::Fixed(i) => {
            sqe.fd = i as i32;
            sqe.flags |= sys::IOSQE_FIXED_FILE;
        }
    }
}

macro_rules! opcode {
    (
        $( #[$outer:meta] )*
        pub struct $name:ident {
            $( $field:ident : $tname:ty ),* $(,)?
            ;;
            $(
                $( #[$opt_meta:meta] )*
                $opt_field:ident : $opt_tname:ty = $default:expr
            ),* $(,)?
        }
        const CODE = $opcode:expr;
        fn build($self:ident, $sqe:ident) $build:block
    ) => {
        $( #[$outer] )*
        #[derive(Debug, Clone, Copy)]
        pub struct $name {
            $( $field: $tname, )*
            $( $opt_field: $opt_tname, )*
        }

        impl $name {
            /// The `IORING_OP_*` code.
            pub const CODE: u8 = $opcode;

            /// The operation with its required arguments; optional fields take their defaults.
            #[inline]
            #[allow(clippy::too_many_arguments)]
            pub fn new($( $field: $tname ),*) -> Self {
                $name {
                    $( $field, )*
                    $( $opt_field: $default, )*
                }
            }

            $(
                $( #[$opt_meta] )*
                #[doc = concat!("Set `", stringify!($opt_field), "` (default `", stringify!($default), "`).")]
                #[inline]
                pub const fn $opt_field(mut self, v: $opt_tname) -> Self {
                    self.$opt_field = v;
                    self
                }
            )*

            /// Zero an SQE and fill it for this operation.
            #[inline]
            pub fn build($self) -> Entry {
                let mut $sqe = IoUringSqe { opcode: Self::CODE, ..IoUringSqe::default() };
                $build
                Entry($sqe)
            }
        }
    };
}

opcode! {
    /// Does nothing; completes with 0. Measures the ring itself.
    pub struct Nop { ;; }
    const CODE = sys::IORING_OP_NOP;
    fn build(self, sqe) { sqe.fd = -1; }
}

opcode! {
    /// Vectored read, like `preadv2(2)`.
    pub struct Readv {
        fd: Target, iovec: *const libc::iovec, len: u32
        ;;
        /// File offset; `u64::MAX` reads at the file position.
        offset: u64 = 0,
        /// `RWF_*` flags.
        rw_flags: i32 = 0,
        ioprio: u16 = 0,
    }
    const CODE = sys::IORING_OP_READV;
    fn build(self, sqe) {
        target(&mut sqe, self.fd);
        sqe.addr = self.iovec as u64;
        sqe.len = self.len;
        sqe.off = self.offset;
        sqe.op_flags = self.rw_flags as u32;
        sqe.ioprio = self.ioprio;
    }
}

opcode! {
    /// Vectored write, like `pwritev2(2)`.
    pub struct Writev {
        fd: Target, iovec: *const libc::iovec, len: u32
        ;;
        /// File offset; `u64::MAX` writes at the file position.
        offset: u64 = 0,
        /// `RWF_*` flags.
        rw_flags: i32 = 0,
        ioprio: u16 = 0,
    }
    const CODE = sys::IORING_OP_WRITEV;
    fn build(self, sqe) {
        target(&mut sqe, self.fd);
        sqe.addr = self.iovec as u64;
        sqe.len = self.len;
        sqe.off = self.offset;
        sqe.op_flags = self.rw_flags as u32;
        sqe.ioprio = self.ioprio;
    }
}

opcode! {
    /// Read, like `pread(2)`. With [`SqeFlags::BUFFER_SELECT`] `buf` may be
    /// null and a buffer is taken from `buf_group`.
    pub struct Read {
        fd: Target, buf: *mut u8, len: u32
        ;;
        /// File offset; `u64::MAX` reads at the file position (pipes, sockets).
        offset: u64 = 0,
        /// `RWF_*` flags.
        rw_flags: i32 = 0,
        /// Provided-buffer group, with `BUFFER_SELECT`.
        buf_group: u16 = 0,
        ioprio: u16 = 0,
    }
    const CODE = sys::IORING_OP_READ;
    fn build(self, sqe) {
        target(&mut sqe, self.fd);
        sqe.addr = self.buf as u64;
        sqe.len = self.len;
        sqe.off = self.offset;
        sqe.op_flags = self.rw_flags as u32;
        sqe.buf_index = self.buf_group;
        sqe.ioprio = self.ioprio;
    }
}

opcode! {
    /// Write, like `pwrite(2)`.
    pub struct Write {
        fd: Target, buf: *const u8, len: u32
        ;;
        /// File offset; `u64::MAX` writes at the file position (pipes, sockets).
        offset: u64 = 0,
        /// `RWF_*` flags.
        rw_flags: i32 = 0,
        ioprio: u16 = 0,
    }
    const CODE = sys::IORING_OP_WRITE;
    fn build(self, sqe) {
        target(&mut sqe, self.fd);
        sqe.addr = self.buf as u64;
        sqe.len = self.len;
        sqe.off = self.offset;
        sqe.op_flags = self.rw_flags as u32;
        sqe.ioprio = self.ioprio;
    }
}

opcode! {
    /// Read into a registered buffer, like `pread(2)`; `buf` lies inside buffer `buf_index`.
    pub struct ReadFixed {
        fd: Target, buf: *mut u8, len: u32, buf_index: u16
        ;;
        offset: u64 = 0,
        rw_flags: i32 = 0,
    }
    const CODE = sys::IORING_OP_READ_FIXED;
    fn build(self, sqe) {
        target(&mut sqe, self.fd);
        sqe.addr = self.buf as u64;
        sqe.len = self.len;
        sqe.off = self.offset;
        sqe.op_flags = self.rw_flags as u32;
        sqe.buf_index = self.buf_index;
    }
}

opcode! {
    /// Write from a registered buffer, like `pwrite(2)`.
    pub struct WriteFixed {
        fd: Target, buf: *const u8, len: u32, buf_index: u16
        ;;
        offset: u64 = 0,
        rw_flags: i32 = 0,
    }
    const CODE = sys::IORING_OP_WRITE_FIXED;
    fn build(self, sqe) {
        target(&mut sqe, self.fd);
        sqe.addr = self.buf as u64;
        sqe.len = self.len;
        sqe.off = self.offset;
        sqe.op_flags = self.rw_flags as u32;
        sqe.buf_index = self.buf_index;
    }
}

opcode! {
    /// Flush a file, like `fsync(2)` (or `fdatasync(2)` with `IORING_FSYNC_DATASYNC`).
    pub struct Fsync {
        fd: Target
        ;;
        /// `IORING_FSYNC_DATASYNC` or 0.
        flags: u32 = 0,
    }
    const CODE = sys::IORING_OP_FSYNC;
    fn build(self, sqe) {
        target(&mut sqe, self.fd);
        sqe.op_flags = self.flags;
    }
}

opcode! {
    /// Sync a file range, like `sync_file_range(2)`.
    pub struct SyncFileRange {
        fd: Target, len: u32
        ;;
        offset: u64 = 0,
        /// `SYNC_FILE_RANGE_*` flags.
        flags: u32 = 0,
    }
    const CODE = sys::IORING_OP_SYNC_FILE_RANGE;
    fn build(self, sqe) {
        target(&mut sqe, self.fd);
        sqe.len = self.len;
        sqe.off = self.offset;
        sqe.op_flags = self.flags;
    }
}

opcode! {
    /// Allocate (or, with `FALLOC_FL_*` `mode` bits, punch or zero) a file
    /// range, like `fallocate(2)`.
    pub struct Fallocate {
        fd: Target, offset: u64, len: u64
        ;;
        /// `FALLOC_FL_*` flags (0: allocate and extend the size).
        mode: i32 = 0,
    }
    const CODE = sys::IORING_OP_FALLOCATE;
    fn build(self, sqe) {
        target(&mut sqe, self.fd);
        sqe.off = self.offset;
        // The kernel takes the length from `addr` and the mode from `len`.
        sqe.addr = self.len;
        sqe.len = self.mode as u32;
    }
}

opcode! {
    /// Set a file's size, like `ftruncate(2)` (Linux 6.9; older kernels
    /// answer `EINVAL`).
    pub struct Ftruncate {
        fd: Target, len: u64
        ;;
    }
    const CODE = sys::IORING_OP_FTRUNCATE;
    fn build(self, sqe) {
        target(&mut sqe, self.fd);
        sqe.off = self.len;
    }
}

opcode! {
    /// Wait for readiness, like `poll(2)` on one fd. Multishot keeps posting
    /// a CQE (with `F_MORE`) on each event until removed.
    pub struct PollAdd {
        fd: Target, events: u32
        ;;
        /// `IORING_POLL_ADD_MULTI`.
        multi: bool = false,
    }
    const CODE = sys::IORING_OP_POLL_ADD;
    fn build(self, sqe) {
        target(&mut sqe, self.fd);
        sqe.op_flags = self.events;
        if self.multi {
            sqe.len = sys::IORING_POLL_ADD_MULTI;
        }
    }
}

opcode! {
    /// Remove a poll request by its `user_data`.
    pub struct PollRemove {
        user_data: u64
        ;;
    }
    const CODE = sys::IORING_OP_POLL_REMOVE;
    fn build(self, sqe) {
        sqe.fd = -1;
        sqe.addr = self.user_data;
    }
}

opcode! {
    /// Send a message, like `sendmsg(2)`.
    pub struct SendMsg {
        fd: Target, msg: *const libc::msghdr
        ;;
        /// `MSG_*` flags.
        flags: u32 = 0,
        ioprio: u16 = 0,
    }
    const CODE = sys::IORING_OP_SENDMSG;
    fn build(self, sqe) {
        target(&mut sqe, self.fd);
        sqe.addr = self.msg as u64;
        sqe.len = 1;
        sqe.op_flags = self.flags;
        sqe.ioprio = self.ioprio;
    }
}

opcode! {
    /// Receive a message, like `recvmsg(2)`.
    pub struct RecvMsg {
        fd: Target, msg: *mut libc::msghdr
        ;;
        /// `MSG_*` flags.
        flags: u32 = 0,
        ioprio: u16 = 0,
        buf_group: u16 = 0,
    }
    const CODE = sys::IORING_OP_RECVMSG;
    fn build(self, sqe) {
        target(&mut sqe, self.fd);
        sqe.addr = self.msg as u64;
        sqe.len = 1;
        sqe.op_flags = self.flags;
        sqe.ioprio = self.ioprio;
        sqe.buf_index = self.buf_group;
    }
}

opcode! {
    /// Send, like `send(2)` (or `sendto(2)` with a destination).
    pub struct Send {
        fd: Target, buf: *const u8, len: u32
        ;;
        /// `MSG_*` flags.
        flags: i32 = 0,
        /// Destination for unconnected sockets (sendto).
        dest_addr: *const libc::sockaddr = std::ptr::null(),
        dest_addr_len: libc::socklen_t = 0,
    }
    const CODE = sys::IORING_OP_SEND;
    fn build(self, sqe) {
        target(&mut sqe, self.fd);
        sqe.addr = self.buf as u64;
        sqe.len = self.len;
        sqe.op_flags = self.flags as u32;
        sqe.off = self.dest_addr as u64;
        sqe.file_index = self.dest_addr_len;
    }
}

opcode! {
    /// Receive, like `recv(2)`. With [`SqeFlags::BUFFER_SELECT`] `buf` may be
    /// null and a buffer is taken from `buf_group`.
    pub struct Recv {
        fd: Target, buf: *mut u8, len: u32
        ;;
        /// `MSG_*` flags.
        flags: i32 = 0,
        buf_group: u16 = 0,
    }
    const CODE = sys::IORING_OP_RECV;
    fn build(self, sqe) {
        target(&mut sqe, self.fd);
        sqe.addr = self.buf as u64;
        sqe.len = self.len;
        sqe.op_flags = self.flags as u32;
        sqe.buf_index = self.buf_group;
    }
}

opcode! {
    /// Multishot receive into buffers of a provided-buffer group, like
    /// repeated `recv(2)`: a CQE (with `F_MORE` and `F_BUFFER`) per arrival.
    pub struct RecvMulti {
        fd: Target, buf_group: u16
        ;;
        /// `MSG_*` flags.
        flags: i32 = 0,
        /// `IORING_RECVSEND_BUNDLE` (kernel 6.10, `IORING_FEAT_RECVSEND_BUNDLE`):
        /// one CQE may cover several buffers ([`crate::BufRing::bundle`]).
        bundle: bool = false,
        /// End the multishot once this many bytes were received (`optlen`;
        /// 0: no limit). Kernels without it fail the receive with `EINVAL`.
        limit: u32 = 0,
    }
    const CODE = sys::IORING_OP_RECV;
    fn build(self, sqe) {
        target(&mut sqe, self.fd);
        sqe.op_flags = self.flags as u32;
        sqe.buf_index = self.buf_group;
        // `optlen`, which shares the word of `file_index`.
        sqe.file_index = self.limit;
        sqe.flags |= sys::IOSQE_BUFFER_SELECT;
        sqe.ioprio = sys::IORING_RECV_MULTISHOT;
        if self.bundle {
            sqe.ioprio |= sys::IORING_RECVSEND_BUNDLE;
        }
    }
}

opcode! {
    /// Send bundle (`IORING_RECVSEND_BUNDLE` on `IORING_OP_SEND`, kernel
    /// 6.10, `IORING_FEAT_RECVSEND_BUNDLE`): one send of the buffers
    /// published in group `buf_group` ([`crate::SendRing`]), in ring order,
    /// as one `sendmsg` with an iovec per entry (at most 256 per round). The
    /// kernel adds `MSG_WAITALL`. The CQE counts the bytes sent, and carries
    /// `F_BUFFER` with the first entry's id once entries were taken.
    pub struct SendBundle {
        fd: Target, buf_group: u16
        ;;
        /// `MSG_*` flags.
        flags: i32 = 0,
    }
    const CODE = sys::IORING_OP_SEND;
    fn build(self, sqe) {
        target(&mut sqe, self.fd);
        sqe.op_flags = self.flags as u32;
        sqe.buf_index = self.buf_group;
        sqe.flags |= sys::IOSQE_BUFFER_SELECT;
        sqe.ioprio = sys::IORING_RECVSEND_BUNDLE;
    }
}

opcode! {
    /// Zero-copy send, like `send(2)` with `MSG_ZEROCOPY`: a result CQE (with
    /// `F_MORE`), then a notification CQE (`F_NOTIF`) once `buf` is free again.
    pub struct SendZc {
        fd: Target, buf: *const u8, len: u32
        ;;
        /// Registered buffer to send from (`IORING_RECVSEND_FIXED_BUF`).
        buf_index: Option<u16> = None,
        /// `MSG_*` flags.
        flags: i32 = 0,
        /// `IORING_SEND_ZC_*` / `IORING_RECVSEND_*` flags.
        zc_flags: u16 = 0,
        dest_addr: *const libc::sockaddr = std::ptr::null(),
        dest_addr_len: libc::socklen_t = 0,
    }
    const CODE = sys::IORING_OP_SEND_ZC;
    fn build(self, sqe) {
        target(&mut sqe, self.fd);
        sqe.addr = self.buf as u64;
        sqe.len = self.len;
        sqe.op_flags = self.flags as u32;
        sqe.ioprio = self.zc_flags;
        if let Some(i) = self.buf_index {
            sqe.buf_index = i;
            sqe.ioprio |= sys::IORING_RECVSEND_FIXED_BUF;
        }
        sqe.off = self.dest_addr as u64;
        sqe.file_index = self.dest_addr_len;
    }
}

opcode! {
    /// Accept a connection, like `accept4(2)`. `multishot` posts a CQE per
    /// connection until cancelled; `dest` may install it as a direct descriptor.
    pub struct Accept {
        fd: Target, addr: *mut libc::sockaddr, addrlen: *mut libc::socklen_t
        ;;
        /// `SOCK_NONBLOCK` / `SOCK_CLOEXEC`.
        flags: i32 = 0,
        /// `IORING_ACCEPT_MULTISHOT` (addr should be null then).
        multishot: bool = false,
        /// Normal fd, or a registered-file slot.
        dest: Dest = Dest::Fd,
    }
    const CODE = sys::IORING_OP_ACCEPT;
    fn build(self, sqe) {
        target(&mut sqe, self.fd);
        sqe.addr = self.addr as u64;
        sqe.off = self.addrlen as u64;
        sqe.op_flags = self.flags as u32;
        if self.multishot {
            sqe.ioprio |= sys::IORING_ACCEPT_MULTISHOT;
        }
        sqe.file_index = self.dest.file_index();
    }
}

opcode! {
    /// Connect a socket, like `connect(2)`.
    pub struct Connect {
        fd: Target, addr: *const libc::sockaddr, addrlen: libc::socklen_t
        ;;
    }
    const CODE = sys::IORING_OP_CONNECT;
    fn build(self, sqe) {
        target(&mut sqe, self.fd);
        sqe.addr = self.addr as u64;
        sqe.off = u64::from(self.addrlen);
    }
}

opcode! {
    /// Shut down part of a connection, like `shutdown(2)`.
    pub struct Shutdown {
        fd: Target, how: i32
        ;;
    }
    const CODE = sys::IORING_OP_SHUTDOWN;
    fn build(self, sqe) {
        target(&mut sqe, self.fd);
        sqe.len = self.how as u32;
    }
}

opcode! {
    /// Close a file, like `close(2)`; for [`Target::Fixed`] it frees the slot.
    pub struct Close {
        fd: Target
        ;;
    }
    const CODE = sys::IORING_OP_CLOSE;
    fn build(self, sqe) {
        match self.fd {
            Target::Fd(fd) => sqe.fd = fd,
            Target::Fixed(i) => sqe.file_index = i + 1,
        }
    }
}

opcode! {
    /// Open a file, like `openat(2)`.
    pub struct OpenAt {
        dirfd: RawFd, pathname: *const libc::c_char
        ;;
        /// `O_*` flags.
        flags: i32 = 0,
        mode: libc::mode_t = 0,
        dest: Dest = Dest::Fd,
    }
    const CODE = sys::IORING_OP_OPENAT;
    fn build(self, sqe) {
        sqe.fd = self.dirfd;
        sqe.addr = self.pathname as u64;
        sqe.len = self.mode;
        sqe.op_flags = self.flags as u32;
        sqe.file_index = self.dest.file_index();
    }
}

/// `struct open_how` of `openat2(2)` (`linux/openat2.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenHow {
    /// `O_*` flags.
    pub flags: u64,
    /// Mode for `O_CREAT`/`O_TMPFILE`.
    pub mode: u64,
    /// `RESOLVE_*` flags.
    pub resolve: u64,
}

opcode! {
    /// Open a file relative to `dirfd`, like `openat2(2)`: `how` says the
    /// flags and how the path may be resolved (`RESOLVE_BENEATH`, ...). The
    /// kernel copies `*how` when it prepares the entry, at submission.
    pub struct OpenAt2 {
        dirfd: RawFd, pathname: *const libc::c_char, how: *const OpenHow
        ;;
        dest: Dest = Dest::Fd,
    }
    const CODE = sys::IORING_OP_OPENAT2;
    fn build(self, sqe) {
        sqe.fd = self.dirfd;
        sqe.addr = self.pathname as u64;
        // addr2 (the `off` field) points at the struct, len is its size.
        sqe.off = self.how as u64;
        sqe.len = std::mem::size_of::<OpenHow>() as u32;
        sqe.file_index = self.dest.file_index();
    }
}

opcode! {
    /// Rename, like `renameat2(2)`.
    pub struct RenameAt {
        olddirfd: RawFd, oldpath: *const libc::c_char,
        newdirfd: RawFd, newpath: *const libc::c_char
        ;;
        /// `RENAME_*` flags (`RENAME_NOREPLACE`, `RENAME_EXCHANGE`).
        flags: u32 = 0,
    }
    const CODE = sys::IORING_OP_RENAMEAT;
    fn build(self, sqe) {
        sqe.fd = self.olddirfd;
        sqe.addr = self.oldpath as u64;
        sqe.len = self.newdirfd as u32;
        sqe.off = self.newpath as u64;
        sqe.op_flags = self.flags;
    }
}

opcode! {
    /// Remove a name, like `unlinkat(2)` (`AT_REMOVEDIR` for a directory).
    pub struct UnlinkAt {
        dirfd: RawFd, pathname: *const libc::c_char
        ;;
        /// `AT_REMOVEDIR` or 0.
        flags: i32 = 0,
    }
    const CODE = sys::IORING_OP_UNLINKAT;
    fn build(self, sqe) {
        sqe.fd = self.dirfd;
        sqe.addr = self.pathname as u64;
        sqe.op_flags = self.flags as u32;
    }
}

opcode! {
    /// Make a directory, like `mkdirat(2)`.
    pub struct MkdirAt {
        dirfd: RawFd, pathname: *const libc::c_char
        ;;
        mode: libc::mode_t = 0o777,
    }
    const CODE = sys::IORING_OP_MKDIRAT;
    fn build(self, sqe) {
        sqe.fd = self.dirfd;
        sqe.addr = self.pathname as u64;
        sqe.len = self.mode;
    }
}

opcode! {
    /// File status, like `statx(2)`.
    pub struct Statx {
        dirfd: RawFd, pathname: *const libc::c_char, statxbuf: *mut libc::statx
        ;;
        /// `AT_*` flags (`AT_EMPTY_PATH` to stat `dirfd` itself).
        flags: i32 = 0,
        /// `STATX_*` mask.
        mask: u32 = 0,
    }
    const CODE = sys::IORING_OP_STATX;
    fn build(self, sqe) {
        sqe.fd = self.dirfd;
        sqe.addr = self.pathname as u64;
        sqe.off = self.statxbuf as u64;
        sqe.len = self.mask;
        sqe.op_flags = self.flags as u32;
    }
}

opcode! {
    /// Move data between a pipe and a file, like `splice(2)`. An offset of
    /// `-1` uses the file position (and must be used for pipes).
    pub struct Splice {
        fd_in: Target, off_in: i64, fd_out: Target, off_out: i64, len: u32
        ;;
        /// `SPLICE_F_*` flags.
        flags: u32 = 0,
    }
    const CODE = sys::IORING_OP_SPLICE;
    fn build(self, sqe) {
        target(&mut sqe, self.fd_out);
        sqe.off = self.off_out as u64;
        sqe.addr = self.off_in as u64;
        sqe.len = self.len;
        sqe.op_flags = self.flags;
        match self.fd_in {
            Target::Fd(fd) => sqe.file_index = fd as u32,
            Target::Fixed(i) => {
                sqe.file_index = i;
                sqe.op_flags |= sys::SPLICE_F_FD_IN_FIXED;
            }
        }
    }
}

opcode! {
    /// Complete after a time or after `count` other completions, whichever is first.
    pub struct Timeout {
        timespec: *const KernelTimespec
        ;;
        /// Complete after this many CQEs (0: time only).
        count: u32 = 0,
        /// `IORING_TIMEOUT_*` flags.
        flags: u32 = 0,
    }
    const CODE = sys::IORING_OP_TIMEOUT;
    fn build(self, sqe) {
        sqe.fd = -1;
        sqe.addr = self.timespec as u64;
        sqe.len = 1;
        sqe.off = u64::from(self.count);
        sqe.op_flags = self.flags;
    }
}

opcode! {
    /// Remove (or, with `IORING_TIMEOUT_UPDATE`, change) a timeout by `user_data`.
    pub struct TimeoutRemove {
        user_data: u64
        ;;
        /// `IORING_TIMEOUT_UPDATE` / `IORING_LINK_TIMEOUT_UPDATE`.
        flags: u32 = 0,
        /// The new expiry, for an update (read by the kernel at submission).
        timespec: *const KernelTimespec = std::ptr::null(),
    }
    const CODE = sys::IORING_OP_TIMEOUT_REMOVE;
    fn build(self, sqe) {
        sqe.fd = -1;
        sqe.addr = self.user_data;
        sqe.off = self.timespec as u64;
        sqe.op_flags = self.flags;
    }
}

opcode! {
    /// A timeout for the SQE linked before it (`IOSQE_IO_LINK`): cancels it
    /// with `-ECANCELED` if it has not completed in time.
    pub struct LinkTimeout {
        timespec: *const KernelTimespec
        ;;
        flags: u32 = 0,
    }
    const CODE = sys::IORING_OP_LINK_TIMEOUT;
    fn build(self, sqe) {
        sqe.fd = -1;
        sqe.addr = self.timespec as u64;
        sqe.len = 1;
        sqe.op_flags = self.flags;
    }
}

opcode! {
    /// Cancel in-flight requests: by `user_data` (default), or every request
    /// on a file (`fd`), optionally all matches (`IORING_ASYNC_CANCEL_ALL`).
    pub struct AsyncCancel {
        user_data: u64
        ;;
        /// `IORING_ASYNC_CANCEL_*` flags.
        flags: u32 = 0,
        /// Cancel by file instead of `user_data`.
        fd: Option<Target> = None,
        /// With `IORING_ASYNC_CANCEL_OP`: the opcode to match.
        op: u8 = 0,
    }
    const CODE = sys::IORING_OP_ASYNC_CANCEL;
    fn build(self, sqe) {
        sqe.fd = -1;
        sqe.addr = self.user_data;
        sqe.op_flags = self.flags;
        sqe.len = u32::from(self.op);
        match self.fd {
            None => {}
            Some(Target::Fd(fd)) => {
                sqe.fd = fd;
                sqe.op_flags |= sys::IORING_ASYNC_CANCEL_FD;
            }
            Some(Target::Fixed(i)) => {
                sqe.fd = i as i32;
                sqe.op_flags |= sys::IORING_ASYNC_CANCEL_FD | sys::IORING_ASYNC_CANCEL_FD_FIXED;
            }
        }
    }
}

opcode! {
    /// Hand `nbufs` buffers of `len` bytes, starting at `addr` with ids from
    /// `bid`, to group `bgid` (the legacy provided-buffer interface).
    pub struct ProvideBuffers {
        addr: *mut u8, len: i32, nbufs: u16, bgid: u16, bid: u16
        ;;
    }
    const CODE = sys::IORING_OP_PROVIDE_BUFFERS;
    fn build(self, sqe) {
        sqe.fd = i32::from(self.nbufs);
        sqe.addr = self.addr as u64;
        sqe.len = self.len as u32;
        sqe.off = u64::from(self.bid);
        sqe.buf_index = self.bgid;
    }
}

opcode! {
    /// Post a CQE with `user_data` and `result` into another ring.
    pub struct MsgRingData {
        ring_fd: Target, result: i32, user_data: u64
        ;;
        /// `IORING_MSG_RING_*` flags.
        flags: u32 = 0,
        /// CQE flags to post, with `IORING_MSG_RING_FLAGS_PASS`.
        cqe_flags: u32 = 0,
    }
    const CODE = sys::IORING_OP_MSG_RING;
    fn build(self, sqe) {
        target(&mut sqe, self.ring_fd);
        sqe.addr = sys::IORING_MSG_DATA;
        sqe.len = self.result as u32;
        sqe.off = self.user_data;
        sqe.op_flags = self.flags;
        sqe.file_index = self.cqe_flags;
    }
}

opcode! {
    /// Create a socket, like `socket(2)`.
    pub struct Socket {
        domain: i32, socket_type: i32, protocol: i32
        ;;
        dest: Dest = Dest::Fd,
    }
    const CODE = sys::IORING_OP_SOCKET;
    fn build(self, sqe) {
        sqe.fd = self.domain;
        sqe.off = self.socket_type as u64;
        sqe.len = self.protocol as u32;
        sqe.file_index = self.dest.file_index();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_target_sets_the_flag() {
        let e = Read::new(Target::Fixed(3), std::ptr::null_mut(), 16).build();
        assert_eq!(e.0.fd, 3);
        assert_eq!(e.0.flags & sys::IOSQE_FIXED_FILE, sys::IOSQE_FIXED_FILE);
        assert_eq!(e.0.opcode, sys::IORING_OP_READ);
    }

    #[test]
    fn dest_slots_are_one_based_in_the_sqe() {
        let e = Socket::new(libc::AF_INET, libc::SOCK_STREAM, 0)
            .dest(Dest::Slot(0))
            .build();
        assert_eq!(e.0.file_index, 1);
        let e = Socket::new(libc::AF_INET, libc::SOCK_STREAM, 0)
            .dest(Dest::AnySlot)
            .build();
        assert_eq!(e.0.file_index, sys::IORING_FILE_INDEX_ALLOC);
    }

    #[test]
    fn recv_multi_selects_buffers() {
        let e = RecvMulti::new(Target::Fd(5), 7).build();
        assert_eq!(e.0.buf_index, 7);
        assert_ne!(e.0.flags & sys::IOSQE_BUFFER_SELECT, 0);
        assert_eq!(e.0.ioprio, sys::IORING_RECV_MULTISHOT);
    }
}
