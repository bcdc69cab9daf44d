//! The io_uring kernel ABI, written by hand from `include/uapi/linux/io_uring.h`.
//!
//! Only what ringkit uses is here. Every struct is `#[repr(C)]` and its size and
//! field offsets are pinned by the tests at the bottom of this file, so a typo
//! cannot ship. Names follow the kernel header (`IORING_*`, `io_uring_sqe` ...),
//! in Rust case.

#![allow(missing_docs)]

use std::io;

// ---------------------------------------------------------------------------
// Syscalls
// ---------------------------------------------------------------------------

/// `io_uring_setup(2)`: returns the ring fd.
///
/// # Safety
/// `params` must point to a valid, writable `IoUringParams`.
pub unsafe fn io_uring_setup(entries: u32, params: *mut IoUringParams) -> io::Result<i32> {
    // SAFETY: the caller guarantees `params` is valid for writes.
    let ret = unsafe { libc::syscall(libc::SYS_io_uring_setup, entries, params) };
    cvt(ret).map(|fd| fd as i32)
}

/// `io_uring_enter2(2)`: submit and/or wait. `arg`/`argsz` are a sigset or an
/// `IoUringGeteventsArg` when `IORING_ENTER_EXT_ARG` is set.
///
/// # Safety
/// `fd` must be a ring fd (or a registered ring index with
/// `IORING_ENTER_REGISTERED_RING`); `arg` must be null or valid for `argsz` bytes.
pub unsafe fn io_uring_enter(
    fd: i32,
    to_submit: u32,
    min_complete: u32,
    flags: u32,
    arg: *const libc::c_void,
    argsz: usize,
) -> io::Result<u32> {
    // SAFETY: the caller guarantees the arguments satisfy the kernel's contract.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_io_uring_enter,
            fd,
            to_submit,
            min_complete,
            flags,
            arg,
            argsz,
        )
    };
    cvt(ret).map(|n| n as u32)
}

/// `io_uring_register(2)`.
///
/// # Safety
/// `arg` must be valid for what `opcode` reads or writes, for `nr_args` items.
pub unsafe fn io_uring_register(
    fd: i32,
    opcode: u32,
    arg: *const libc::c_void,
    nr_args: u32,
) -> io::Result<u32> {
    // SAFETY: the caller guarantees `arg` matches `opcode`.
    let ret = unsafe { libc::syscall(libc::SYS_io_uring_register, fd, opcode, arg, nr_args) };
    cvt(ret).map(|n| n as u32)
}

fn cvt(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

// ---------------------------------------------------------------------------
// Setup
// ---------------------------------------------------------------------------

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct IoSqringOffsets {
    pub head: u32,
    pub tail: u32,
    pub ring_mask: u32,
    pub ring_entries: u32,
    pub flags: u32,
    pub dropped: u32,
    pub array: u32,
    pub resv1: u32,
    pub user_addr: u64,
}

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct IoCqringOffsets {
    pub head: u32,
    pub tail: u32,
    pub ring_mask: u32,
    pub ring_entries: u32,
    pub overflow: u32,
    pub cqes: u32,
    pub flags: u32,
    pub resv1: u32,
    pub user_addr: u64,
}

/// `struct io_uring_params`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct IoUringParams {
    pub sq_entries: u32,
    pub cq_entries: u32,
    pub flags: u32,
    pub sq_thread_cpu: u32,
    pub sq_thread_idle: u32,
    pub features: u32,
    pub wq_fd: u32,
    pub resv: [u32; 3],
    pub sq_off: IoSqringOffsets,
    pub cq_off: IoCqringOffsets,
}

// Setup flags (`io_uring_params.flags`).
pub const IORING_SETUP_IOPOLL: u32 = 1 << 0;
pub const IORING_SETUP_SQPOLL: u32 = 1 << 1;
pub const IORING_SETUP_SQ_AFF: u32 = 1 << 2;
pub const IORING_SETUP_CQSIZE: u32 = 1 << 3;
pub const IORING_SETUP_CLAMP: u32 = 1 << 4;
pub const IORING_SETUP_ATTACH_WQ: u32 = 1 << 5;
pub const IORING_SETUP_R_DISABLED: u32 = 1 << 6;
pub const IORING_SETUP_SUBMIT_ALL: u32 = 1 << 7;
pub const IORING_SETUP_COOP_TASKRUN: u32 = 1 << 8;
pub const IORING_SETUP_TASKRUN_FLAG: u32 = 1 << 9;
pub const IORING_SETUP_SQE128: u32 = 1 << 10;
pub const IORING_SETUP_CQE32: u32 = 1 << 11;
pub const IORING_SETUP_SINGLE_ISSUER: u32 = 1 << 12;
pub const IORING_SETUP_DEFER_TASKRUN: u32 = 1 << 13;
pub const IORING_SETUP_NO_MMAP: u32 = 1 << 14;
pub const IORING_SETUP_REGISTERED_FD_ONLY: u32 = 1 << 15;
pub const IORING_SETUP_NO_SQARRAY: u32 = 1 << 16;

/// Setup flags with their kernel names, for reports.
pub const SETUP_FLAG_NAMES: &[(u32, &str)] = &[
    (IORING_SETUP_IOPOLL, "IOPOLL"),
    (IORING_SETUP_SQPOLL, "SQPOLL"),
    (IORING_SETUP_SQ_AFF, "SQ_AFF"),
    (IORING_SETUP_CQSIZE, "CQSIZE"),
    (IORING_SETUP_CLAMP, "CLAMP"),
    (IORING_SETUP_ATTACH_WQ, "ATTACH_WQ"),
    (IORING_SETUP_R_DISABLED, "R_DISABLED"),
    (IORING_SETUP_SUBMIT_ALL, "SUBMIT_ALL"),
    (IORING_SETUP_COOP_TASKRUN, "COOP_TASKRUN"),
    (IORING_SETUP_TASKRUN_FLAG, "TASKRUN_FLAG"),
    (IORING_SETUP_SQE128, "SQE128"),
    (IORING_SETUP_CQE32, "CQE32"),
    (IORING_SETUP_SINGLE_ISSUER, "SINGLE_ISSUER"),
    (IORING_SETUP_DEFER_TASKRUN, "DEFER_TASKRUN"),
    (IORING_SETUP_NO_MMAP, "NO_MMAP"),
    (IORING_SETUP_REGISTERED_FD_ONLY, "REGISTERED_FD_ONLY"),
    (IORING_SETUP_NO_SQARRAY, "NO_SQARRAY"),
];

// Features (`io_uring_params.features`).
pub const IORING_FEAT_SINGLE_MMAP: u32 = 1 << 0;
pub const IORING_FEAT_NODROP: u32 = 1 << 1;
pub const IORING_FEAT_SUBMIT_STABLE: u32 = 1 << 2;
pub const IORING_FEAT_RW_CUR_POS: u32 = 1 << 3;
pub const IORING_FEAT_CUR_PERSONALITY: u32 = 1 << 4;
pub const IORING_FEAT_FAST_POLL: u32 = 1 << 5;
pub const IORING_FEAT_POLL_32BITS: u32 = 1 << 6;
pub const IORING_FEAT_SQPOLL_NONFIXED: u32 = 1 << 7;
pub const IORING_FEAT_EXT_ARG: u32 = 1 << 8;
pub const IORING_FEAT_NATIVE_WORKERS: u32 = 1 << 9;
pub const IORING_FEAT_RSRC_TAGS: u32 = 1 << 10;
pub const IORING_FEAT_CQE_SKIP: u32 = 1 << 11;
pub const IORING_FEAT_LINKED_FILE: u32 = 1 << 12;
pub const IORING_FEAT_REG_REG_RING: u32 = 1 << 13;
pub const IORING_FEAT_RECVSEND_BUNDLE: u32 = 1 << 14;
pub const IORING_FEAT_MIN_TIMEOUT: u32 = 1 << 15;

/// Feature bits with their kernel names, for reports.
pub const FEATURE_NAMES: &[(u32, &str)] = &[
    (IORING_FEAT_SINGLE_MMAP, "SINGLE_MMAP"),
    (IORING_FEAT_NODROP, "NODROP"),
    (IORING_FEAT_SUBMIT_STABLE, "SUBMIT_STABLE"),
    (IORING_FEAT_RW_CUR_POS, "RW_CUR_POS"),
    (IORING_FEAT_CUR_PERSONALITY, "CUR_PERSONALITY"),
    (IORING_FEAT_FAST_POLL, "FAST_POLL"),
    (IORING_FEAT_POLL_32BITS, "POLL_32BITS"),
    (IORING_FEAT_SQPOLL_NONFIXED, "SQPOLL_NONFIXED"),
    (IORING_FEAT_EXT_ARG, "EXT_ARG"),
    (IORING_FEAT_NATIVE_WORKERS, "NATIVE_WORKERS"),
    (IORING_FEAT_RSRC_TAGS, "RSRC_TAGS"),
    (IORING_FEAT_CQE_SKIP, "CQE_SKIP"),
    (IORING_FEAT_LINKED_FILE, "LINKED_FILE"),
    (IORING_FEAT_REG_REG_RING, "REG_REG_RING"),
    (IORING_FEAT_RECVSEND_BUNDLE, "RECVSEND_BUNDLE"),
    (IORING_FEAT_MIN_TIMEOUT, "MIN_TIMEOUT"),
];

// mmap offsets.
pub const IORING_OFF_SQ_RING: i64 = 0;
pub const IORING_OFF_CQ_RING: i64 = 0x800_0000;
pub const IORING_OFF_SQES: i64 = 0x1000_0000;

// SQ ring flags (`*sq_off.flags`), written by the kernel.
pub const IORING_SQ_NEED_WAKEUP: u32 = 1 << 0;
pub const IORING_SQ_CQ_OVERFLOW: u32 = 1 << 1;
pub const IORING_SQ_TASKRUN: u32 = 1 << 2;

// CQ ring flags (`*cq_off.flags`), written by the application.
pub const IORING_CQ_EVENTFD_DISABLED: u32 = 1 << 0;

// Enter flags.
pub const IORING_ENTER_GETEVENTS: u32 = 1 << 0;
pub const IORING_ENTER_SQ_WAKEUP: u32 = 1 << 1;
pub const IORING_ENTER_SQ_WAIT: u32 = 1 << 2;
pub const IORING_ENTER_EXT_ARG: u32 = 1 << 3;
pub const IORING_ENTER_REGISTERED_RING: u32 = 1 << 4;

/// `struct io_uring_getevents_arg`, passed with `IORING_ENTER_EXT_ARG`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct IoUringGeteventsArg {
    pub sigmask: u64,
    pub sigmask_sz: u32,
    pub min_wait_usec: u32,
    pub ts: u64,
}

/// `struct __kernel_timespec`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct KernelTimespec {
    pub tv_sec: i64,
    pub tv_nsec: i64,
}

impl From<std::time::Duration> for KernelTimespec {
    fn from(d: std::time::Duration) -> Self {
        KernelTimespec {
            tv_sec: d.as_secs() as i64,
            tv_nsec: d.subsec_nanos() as i64,
        }
    }
}

// ---------------------------------------------------------------------------
// SQE and CQE
// ---------------------------------------------------------------------------

/// `struct io_uring_sqe`, 64 bytes. Unions are flattened to their first member;
/// the doc of each field lists the other names the kernel gives it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct IoUringSqe {
    pub opcode: u8,
    /// `IOSQE_*` flags.
    pub flags: u8,
    /// Also: send/recv and accept flags (`IORING_RECVSEND_*`, `IORING_ACCEPT_*`).
    pub ioprio: u16,
    pub fd: i32,
    /// Also `addr2`, `cmd_op`.
    pub off: u64,
    /// Also `splice_off_in`, `level`/`optname`.
    pub addr: u64,
    pub len: u32,
    /// `rw_flags`, `fsync_flags`, `poll32_events`, `msg_flags`, `timeout_flags`,
    /// `accept_flags`, `cancel_flags`, `open_flags`, `statx_flags`, `splice_flags`,
    /// `msg_ring_flags`, ...
    pub op_flags: u32,
    pub user_data: u64,
    /// Also `buf_group`.
    pub buf_index: u16,
    pub personality: u16,
    /// Also `splice_fd_in`, `optlen`, `addr_len` (low 16 bits).
    pub file_index: u32,
    pub addr3: u64,
    pub pad2: u64,
}

/// The 128-byte SQE of rings set up with `IORING_SETUP_SQE128`: a normal SQE
/// followed by 64 bytes of command data.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct IoUringSqe128 {
    pub sqe: IoUringSqe,
    pub cmd: [u64; 8],
}

/// `struct io_uring_cqe`, 16 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoUringCqe {
    pub user_data: u64,
    pub res: i32,
    pub flags: u32,
}

/// The 32-byte CQE of rings set up with `IORING_SETUP_CQE32`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoUringCqe32 {
    pub cqe: IoUringCqe,
    pub big_cqe: [u64; 2],
}

// SQE flags (`sqe.flags`).
pub const IOSQE_FIXED_FILE: u8 = 1 << 0;
pub const IOSQE_IO_DRAIN: u8 = 1 << 1;
pub const IOSQE_IO_LINK: u8 = 1 << 2;
pub const IOSQE_IO_HARDLINK: u8 = 1 << 3;
pub const IOSQE_ASYNC: u8 = 1 << 4;
pub const IOSQE_BUFFER_SELECT: u8 = 1 << 5;
pub const IOSQE_CQE_SKIP_SUCCESS: u8 = 1 << 6;

// CQE flags.
pub const IORING_CQE_F_BUFFER: u32 = 1 << 0;
pub const IORING_CQE_F_MORE: u32 = 1 << 1;
pub const IORING_CQE_F_SOCK_NONEMPTY: u32 = 1 << 2;
pub const IORING_CQE_F_NOTIF: u32 = 1 << 3;
pub const IORING_CQE_F_BUF_MORE: u32 = 1 << 4;
pub const IORING_CQE_BUFFER_SHIFT: u32 = 16;

// Opcodes (`enum io_uring_op`).
pub const IORING_OP_NOP: u8 = 0;
pub const IORING_OP_READV: u8 = 1;
pub const IORING_OP_WRITEV: u8 = 2;
pub const IORING_OP_FSYNC: u8 = 3;
pub const IORING_OP_READ_FIXED: u8 = 4;
pub const IORING_OP_WRITE_FIXED: u8 = 5;
pub const IORING_OP_POLL_ADD: u8 = 6;
pub const IORING_OP_POLL_REMOVE: u8 = 7;
pub const IORING_OP_SYNC_FILE_RANGE: u8 = 8;
pub const IORING_OP_SENDMSG: u8 = 9;
pub const IORING_OP_RECVMSG: u8 = 10;
pub const IORING_OP_TIMEOUT: u8 = 11;
pub const IORING_OP_TIMEOUT_REMOVE: u8 = 12;
pub const IORING_OP_ACCEPT: u8 = 13;
pub const IORING_OP_ASYNC_CANCEL: u8 = 14;
pub const IORING_OP_LINK_TIMEOUT: u8 = 15;
pub const IORING_OP_CONNECT: u8 = 16;
pub const IORING_OP_FALLOCATE: u8 = 17;
pub const IORING_OP_OPENAT: u8 = 18;
pub const IORING_OP_CLOSE: u8 = 19;
pub const IORING_OP_FILES_UPDATE: u8 = 20;
pub const IORING_OP_STATX: u8 = 21;
pub const IORING_OP_READ: u8 = 22;
pub const IORING_OP_WRITE: u8 = 23;
pub const IORING_OP_FADVISE: u8 = 24;
pub const IORING_OP_MADVISE: u8 = 25;
pub const IORING_OP_SEND: u8 = 26;
pub const IORING_OP_RECV: u8 = 27;
pub const IORING_OP_OPENAT2: u8 = 28;
pub const IORING_OP_EPOLL_CTL: u8 = 29;
pub const IORING_OP_SPLICE: u8 = 30;
pub const IORING_OP_PROVIDE_BUFFERS: u8 = 31;
pub const IORING_OP_REMOVE_BUFFERS: u8 = 32;
pub const IORING_OP_TEE: u8 = 33;
pub const IORING_OP_SHUTDOWN: u8 = 34;
pub const IORING_OP_RENAMEAT: u8 = 35;
pub const IORING_OP_UNLINKAT: u8 = 36;
pub const IORING_OP_MKDIRAT: u8 = 37;
pub const IORING_OP_SYMLINKAT: u8 = 38;
pub const IORING_OP_LINKAT: u8 = 39;
pub const IORING_OP_MSG_RING: u8 = 40;
pub const IORING_OP_FSETXATTR: u8 = 41;
pub const IORING_OP_SETXATTR: u8 = 42;
pub const IORING_OP_FGETXATTR: u8 = 43;
pub const IORING_OP_GETXATTR: u8 = 44;
pub const IORING_OP_SOCKET: u8 = 45;
pub const IORING_OP_URING_CMD: u8 = 46;
pub const IORING_OP_SEND_ZC: u8 = 47;
pub const IORING_OP_SENDMSG_ZC: u8 = 48;
pub const IORING_OP_READ_MULTISHOT: u8 = 49;
pub const IORING_OP_FTRUNCATE: u8 = 55;

/// Opcode names, indexed by opcode, for probe reports.
pub const OP_NAMES: &[&str] = &[
    "NOP",
    "READV",
    "WRITEV",
    "FSYNC",
    "READ_FIXED",
    "WRITE_FIXED",
    "POLL_ADD",
    "POLL_REMOVE",
    "SYNC_FILE_RANGE",
    "SENDMSG",
    "RECVMSG",
    "TIMEOUT",
    "TIMEOUT_REMOVE",
    "ACCEPT",
    "ASYNC_CANCEL",
    "LINK_TIMEOUT",
    "CONNECT",
    "FALLOCATE",
    "OPENAT",
    "CLOSE",
    "FILES_UPDATE",
    "STATX",
    "READ",
    "WRITE",
    "FADVISE",
    "MADVISE",
    "SEND",
    "RECV",
    "OPENAT2",
    "EPOLL_CTL",
    "SPLICE",
    "PROVIDE_BUFFERS",
    "REMOVE_BUFFERS",
    "TEE",
    "SHUTDOWN",
    "RENAMEAT",
    "UNLINKAT",
    "MKDIRAT",
    "SYMLINKAT",
    "LINKAT",
    "MSG_RING",
    "FSETXATTR",
    "SETXATTR",
    "FGETXATTR",
    "GETXATTR",
    "SOCKET",
    "URING_CMD",
    "SEND_ZC",
    "SENDMSG_ZC",
    "READ_MULTISHOT",
    "WAITID",
    "FUTEX_WAIT",
    "FUTEX_WAKE",
    "FUTEX_WAITV",
    "FIXED_FD_INSTALL",
    "FTRUNCATE",
    "BIND",
    "LISTEN",
    "RECV_ZC",
    "EPOLL_WAIT",
    "READV_FIXED",
    "WRITEV_FIXED",
    "PIPE",
];

// Per-op flags.
pub const IORING_FSYNC_DATASYNC: u32 = 1 << 0;

pub const IORING_POLL_ADD_MULTI: u32 = 1 << 0;
pub const IORING_POLL_UPDATE_EVENTS: u32 = 1 << 1;
pub const IORING_POLL_UPDATE_USER_DATA: u32 = 1 << 2;
pub const IORING_POLL_ADD_LEVEL: u32 = 1 << 3;

pub const IORING_TIMEOUT_ABS: u32 = 1 << 0;
pub const IORING_TIMEOUT_UPDATE: u32 = 1 << 1;
pub const IORING_TIMEOUT_BOOTTIME: u32 = 1 << 2;
pub const IORING_TIMEOUT_REALTIME: u32 = 1 << 3;
pub const IORING_LINK_TIMEOUT_UPDATE: u32 = 1 << 4;
pub const IORING_TIMEOUT_ETIME_SUCCESS: u32 = 1 << 5;
pub const IORING_TIMEOUT_MULTISHOT: u32 = 1 << 6;

pub const IORING_RECVSEND_POLL_FIRST: u16 = 1 << 0;
pub const IORING_RECV_MULTISHOT: u16 = 1 << 1;
pub const IORING_RECVSEND_FIXED_BUF: u16 = 1 << 2;
pub const IORING_SEND_ZC_REPORT_USAGE: u16 = 1 << 3;
pub const IORING_RECVSEND_BUNDLE: u16 = 1 << 4;

pub const IORING_ACCEPT_MULTISHOT: u16 = 1 << 0;
pub const IORING_ACCEPT_DONTWAIT: u16 = 1 << 1;
pub const IORING_ACCEPT_POLL_FIRST: u16 = 1 << 2;

pub const IORING_ASYNC_CANCEL_ALL: u32 = 1 << 0;
pub const IORING_ASYNC_CANCEL_FD: u32 = 1 << 1;
pub const IORING_ASYNC_CANCEL_ANY: u32 = 1 << 2;
pub const IORING_ASYNC_CANCEL_FD_FIXED: u32 = 1 << 3;
pub const IORING_ASYNC_CANCEL_USERDATA: u32 = 1 << 4;
pub const IORING_ASYNC_CANCEL_OP: u32 = 1 << 5;

/// `file_index` value asking the kernel to pick a free direct descriptor slot.
pub const IORING_FILE_INDEX_ALLOC: u32 = !0;

pub const IORING_MSG_DATA: u64 = 0;
pub const IORING_MSG_SEND_FD: u64 = 1;
pub const IORING_MSG_RING_CQE_SKIP: u32 = 1 << 0;
pub const IORING_MSG_RING_FLAGS_PASS: u32 = 1 << 1;

pub const SPLICE_F_FD_IN_FIXED: u32 = 1 << 31;

// ---------------------------------------------------------------------------
// Register
// ---------------------------------------------------------------------------

pub const IORING_REGISTER_BUFFERS: u32 = 0;
pub const IORING_UNREGISTER_BUFFERS: u32 = 1;
pub const IORING_REGISTER_FILES: u32 = 2;
pub const IORING_UNREGISTER_FILES: u32 = 3;
pub const IORING_REGISTER_EVENTFD: u32 = 4;
pub const IORING_UNREGISTER_EVENTFD: u32 = 5;
pub const IORING_REGISTER_FILES_UPDATE: u32 = 6;
pub const IORING_REGISTER_EVENTFD_ASYNC: u32 = 7;
pub const IORING_REGISTER_PROBE: u32 = 8;
pub const IORING_REGISTER_PERSONALITY: u32 = 9;
pub const IORING_UNREGISTER_PERSONALITY: u32 = 10;
pub const IORING_REGISTER_RESTRICTIONS: u32 = 11;
pub const IORING_REGISTER_ENABLE_RINGS: u32 = 12;
pub const IORING_REGISTER_FILES2: u32 = 13;
pub const IORING_REGISTER_FILES_UPDATE2: u32 = 14;
pub const IORING_REGISTER_BUFFERS2: u32 = 15;
pub const IORING_REGISTER_BUFFERS_UPDATE: u32 = 16;
pub const IORING_REGISTER_IOWQ_AFF: u32 = 17;
pub const IORING_UNREGISTER_IOWQ_AFF: u32 = 18;
pub const IORING_REGISTER_IOWQ_MAX_WORKERS: u32 = 19;
pub const IORING_REGISTER_RING_FDS: u32 = 20;
pub const IORING_UNREGISTER_RING_FDS: u32 = 21;
pub const IORING_REGISTER_PBUF_RING: u32 = 22;
pub const IORING_UNREGISTER_PBUF_RING: u32 = 23;
pub const IORING_REGISTER_SYNC_CANCEL: u32 = 24;
pub const IORING_REGISTER_FILE_ALLOC_RANGE: u32 = 25;

pub const IORING_RSRC_REGISTER_SPARSE: u32 = 1 << 0;

/// `struct io_uring_rsrc_register` (`IORING_REGISTER_FILES2`/`BUFFERS2`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct IoUringRsrcRegister {
    pub nr: u32,
    pub flags: u32,
    pub resv2: u64,
    pub data: u64,
    pub tags: u64,
}

/// `struct io_uring_rsrc_update` (`IORING_REGISTER_FILES_UPDATE`, ring fds).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct IoUringRsrcUpdate {
    pub offset: u32,
    pub resv: u32,
    pub data: u64,
}

/// `struct io_uring_rsrc_update2` (`IORING_REGISTER_FILES_UPDATE2`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct IoUringRsrcUpdate2 {
    pub offset: u32,
    pub resv: u32,
    pub data: u64,
    pub tags: u64,
    pub nr: u32,
    pub resv2: u32,
}

/// `struct io_uring_probe_op`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct IoUringProbeOp {
    pub op: u8,
    pub resv: u8,
    pub flags: u16,
    pub resv2: u32,
}

pub const IO_URING_OP_SUPPORTED: u16 = 1 << 0;

/// `struct io_uring_probe` with room for 256 ops (the kernel fills `ops_len`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IoUringProbe {
    pub last_op: u8,
    pub ops_len: u8,
    pub resv: u16,
    pub resv2: [u32; 3],
    pub ops: [IoUringProbeOp; 256],
}

/// `struct io_uring_buf`: one entry of a provided-buffer ring.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct IoUringBuf {
    pub addr: u64,
    pub len: u32,
    pub bid: u16,
    /// For entry 0 this is the ring's tail (`io_uring_buf_ring.tail`).
    pub resv: u16,
}

/// `struct io_uring_buf_reg` (`IORING_REGISTER_PBUF_RING`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct IoUringBufReg {
    pub ring_addr: u64,
    pub ring_entries: u32,
    pub bgid: u16,
    pub flags: u16,
    pub resv: [u64; 3],
}

/// Byte offset of the tail inside a provided-buffer ring (`bufs[0].resv`).
pub const BUF_RING_TAIL_OFFSET: usize = 14;

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn sizes_match_the_kernel() {
        assert_eq!(size_of::<IoUringSqe>(), 64);
        assert_eq!(size_of::<IoUringSqe128>(), 128);
        assert_eq!(size_of::<IoUringCqe>(), 16);
        assert_eq!(size_of::<IoUringCqe32>(), 32);
        assert_eq!(size_of::<IoSqringOffsets>(), 40);
        assert_eq!(size_of::<IoCqringOffsets>(), 40);
        assert_eq!(size_of::<IoUringParams>(), 120);
        assert_eq!(size_of::<IoUringGeteventsArg>(), 24);
        assert_eq!(size_of::<KernelTimespec>(), 16);
        assert_eq!(size_of::<IoUringRsrcRegister>(), 32);
        assert_eq!(size_of::<IoUringRsrcUpdate>(), 16);
        assert_eq!(size_of::<IoUringRsrcUpdate2>(), 32);
        assert_eq!(size_of::<IoUringProbeOp>(), 8);
        assert_eq!(size_of::<IoUringProbe>(), 16 + 256 * 8);
        assert_eq!(size_of::<IoUringBuf>(), 16);
        assert_eq!(size_of::<IoUringBufReg>(), 40);
    }

    #[test]
    fn sqe_field_offsets_match_the_kernel() {
        assert_eq!(offset_of!(IoUringSqe, opcode), 0);
        assert_eq!(offset_of!(IoUringSqe, flags), 1);
        assert_eq!(offset_of!(IoUringSqe, ioprio), 2);
        assert_eq!(offset_of!(IoUringSqe, fd), 4);
        assert_eq!(offset_of!(IoUringSqe, off), 8);
        assert_eq!(offset_of!(IoUringSqe, addr), 16);
        assert_eq!(offset_of!(IoUringSqe, len), 24);
        assert_eq!(offset_of!(IoUringSqe, op_flags), 28);
        assert_eq!(offset_of!(IoUringSqe, user_data), 32);
        assert_eq!(offset_of!(IoUringSqe, buf_index), 40);
        assert_eq!(offset_of!(IoUringSqe, personality), 42);
        assert_eq!(offset_of!(IoUringSqe, file_index), 44);
        assert_eq!(offset_of!(IoUringSqe, addr3), 48);
        assert_eq!(offset_of!(IoUringSqe128, cmd), 64);
    }

    #[test]
    fn cqe_and_params_offsets_match_the_kernel() {
        assert_eq!(offset_of!(IoUringCqe, user_data), 0);
        assert_eq!(offset_of!(IoUringCqe, res), 8);
        assert_eq!(offset_of!(IoUringCqe, flags), 12);
        assert_eq!(offset_of!(IoUringCqe32, big_cqe), 16);
        assert_eq!(offset_of!(IoUringParams, flags), 8);
        assert_eq!(offset_of!(IoUringParams, features), 20);
        assert_eq!(offset_of!(IoUringParams, sq_off), 40);
        assert_eq!(offset_of!(IoUringParams, cq_off), 80);
        assert_eq!(offset_of!(IoSqringOffsets, array), 24);
        assert_eq!(offset_of!(IoSqringOffsets, user_addr), 32);
        assert_eq!(offset_of!(IoCqringOffsets, cqes), 20);
        assert_eq!(offset_of!(IoCqringOffsets, flags), 24);
        assert_eq!(offset_of!(IoUringGeteventsArg, ts), 16);
        assert_eq!(offset_of!(IoUringBuf, resv), BUF_RING_TAIL_OFFSET);
        assert_eq!(offset_of!(IoUringBufReg, bgid), 12);
        assert_eq!(offset_of!(IoUringRsrcUpdate2, nr), 24);
        assert_eq!(offset_of!(IoUringProbe, ops), 16);
    }

    #[test]
    fn op_names_are_indexed_by_opcode() {
        assert_eq!(OP_NAMES[IORING_OP_NOP as usize], "NOP");
        assert_eq!(OP_NAMES[IORING_OP_SPLICE as usize], "SPLICE");
        assert_eq!(OP_NAMES[IORING_OP_SOCKET as usize], "SOCKET");
        assert_eq!(OP_NAMES[IORING_OP_SEND_ZC as usize], "SEND_ZC");
        assert_eq!(
            OP_NAMES[IORING_OP_READ_MULTISHOT as usize],
            "READ_MULTISHOT"
        );
    }
}
