//! What this kernel's io_uring can do, and why it cannot when it cannot.

use std::fmt;
use std::io;

use crate::ring::{flag_names, Builder};
use crate::sys;

/// Opcodes supported by the running kernel (`IORING_REGISTER_PROBE`).
#[derive(Clone)]
pub struct Probe {
    last_op: u8,
    supported: [bool; 256],
}

impl fmt::Debug for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Probe")
            .field("last_op", &self.last_op)
            .field("supported", &self.supported_names())
            .finish()
    }
}

impl Probe {
    pub(crate) fn from_raw(p: &sys::IoUringProbe) -> Probe {
        let mut supported = [false; 256];
        for op in &p.ops[..p.ops_len as usize] {
            supported[op.op as usize] = op.flags & sys::IO_URING_OP_SUPPORTED != 0;
        }
        Probe {
            last_op: p.last_op,
            supported,
        }
    }

    /// Whether `opcode` (an `IORING_OP_*`) is supported.
    pub fn is_supported(&self, opcode: u8) -> bool {
        self.supported[opcode as usize]
    }

    /// The highest opcode the kernel knows.
    pub fn last_op(&self) -> u8 {
        self.last_op
    }

    /// Names of the supported opcodes.
    pub fn supported_names(&self) -> Vec<&'static str> {
        self.names(true)
    }

    /// Names of known opcodes this kernel lacks.
    pub fn unsupported_names(&self) -> Vec<&'static str> {
        self.names(false)
    }

    fn names(&self, want: bool) -> Vec<&'static str> {
        sys::OP_NAMES
            .iter()
            .enumerate()
            .filter(|(i, _)| self.supported[*i] == want)
            .map(|(_, n)| *n)
            .collect()
    }
}

/// Setup flags to try one at a time, with what each needs alongside it.
const FLAG_PROBES: &[(u32, u32)] = &[
    (sys::IORING_SETUP_SQPOLL, 0),
    (sys::IORING_SETUP_IOPOLL, 0),
    (sys::IORING_SETUP_CQSIZE, 0),
    (sys::IORING_SETUP_CLAMP, 0),
    (sys::IORING_SETUP_SUBMIT_ALL, 0),
    (sys::IORING_SETUP_COOP_TASKRUN, 0),
    (
        sys::IORING_SETUP_TASKRUN_FLAG,
        sys::IORING_SETUP_COOP_TASKRUN,
    ),
    (sys::IORING_SETUP_SQE128, 0),
    (sys::IORING_SETUP_CQE32, 0),
    (sys::IORING_SETUP_SINGLE_ISSUER, 0),
    (
        sys::IORING_SETUP_DEFER_TASKRUN,
        sys::IORING_SETUP_SINGLE_ISSUER,
    ),
    (sys::IORING_SETUP_NO_SQARRAY, 0),
];

/// Everything `ringkit probe` reports about io_uring on this machine.
#[derive(Debug, Clone)]
pub struct KernelReport {
    /// `uname -sr`.
    pub kernel: String,
    /// `Err(reason)` when a plain ring cannot be created, in plain words.
    pub usable: Result<(), String>,
    /// `IORING_FEAT_*` bits.
    pub features: u32,
    /// Setup flags a ring accepted when tried one at a time.
    pub setup_flags: u32,
    /// The opcode probe.
    pub probe: Option<Probe>,
}

impl KernelReport {
    /// Probe the running kernel: try a plain ring, then each setup flag.
    pub fn gather() -> KernelReport {
        let kernel = kernel_version();
        let ring = match Builder::new(4).strict(true).build() {
            Ok(r) => r,
            Err(e) => {
                return KernelReport {
                    kernel,
                    usable: Err(explain_setup_error(&e)),
                    features: 0,
                    setup_flags: 0,
                    probe: None,
                }
            }
        };
        let mut setup_flags = 0;
        for &(flag, needs) in FLAG_PROBES {
            let mut b = Builder::new(4).strict(true).flags(flag | needs);
            if flag == sys::IORING_SETUP_CQSIZE {
                b = b.cqsize(8);
            }
            if b.build().is_ok() {
                setup_flags |= flag;
            }
        }
        KernelReport {
            kernel,
            usable: Ok(()),
            features: ring.features(),
            setup_flags,
            probe: ring.probe().ok(),
        }
    }

    /// `IORING_FEAT_*` names.
    pub fn feature_names(&self) -> String {
        flag_names(self.features, sys::FEATURE_NAMES)
    }

    /// Setup flag names.
    pub fn setup_flag_names(&self) -> String {
        flag_names(self.setup_flags, sys::SETUP_FLAG_NAMES)
    }
}

/// `uname -sr` of the running kernel.
pub fn kernel_version() -> String {
    // SAFETY: `utsname` is plain data; uname fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return "unknown".into();
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!("{} {}", field(&u.sysname), field(&u.release))
}

/// Why `io_uring_setup` failed, in plain words.
pub fn explain_setup_error(e: &io::Error) -> String {
    let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(0);
    match e.raw_os_error() {
        Some(libc::ENOSYS) => {
            "io_uring_setup returned ENOSYS: this kernel was built without io_uring \
             (CONFIG_IO_URING=n) or is older than 5.1"
                .into()
        }
        Some(libc::EPERM) if disabled == 2 => {
            "io_uring_setup returned EPERM: io_uring is disabled for everyone by the \
             sysctl kernel.io_uring_disabled=2"
                .into()
        }
        Some(libc::EPERM) if disabled == 1 => {
            "io_uring_setup returned EPERM: kernel.io_uring_disabled=1 allows io_uring \
             only to processes in kernel.io_uring_group (or with CAP_SYS_ADMIN)"
                .into()
        }
        Some(libc::EPERM) => {
            "io_uring_setup returned EPERM: a seccomp filter forbids it, as Docker's and \
             many container runtimes' default profiles do"
                .into()
        }
        Some(libc::ENOMEM) => {
            "io_uring_setup returned ENOMEM: the ring could not be allocated; on kernels \
             before 5.12 rings count against RLIMIT_MEMLOCK (raise `ulimit -l`)"
                .into()
        }
        Some(libc::EINVAL) => {
            "io_uring_setup returned EINVAL: the kernel refused the requested flags or \
             entry count"
                .into()
        }
        _ => format!("io_uring_setup failed: {e}"),
    }
}

/// Whether a chain of linked SQEs whose members carry
/// `IOSQE_CQE_SKIP_SUCCESS` posts exactly one CQE however it ends: the
/// tail's when every member succeeds, and only the failing member's when
/// one fails (the kernel then also silences the `-ECANCELED` of the links
/// after it). A runtime that skips the CQEs of a chain's members relies on
/// this to know when the chain is over; it is checked here, on a small ring
/// of its own, with NOPs and a WRITE to fd -1, all of which complete inline.
/// `Ok(false)`: the kernel lacks `IORING_FEAT_CQE_SKIP` or behaves otherwise.
pub fn skipped_chain_posts_one_cqe() -> io::Result<bool> {
    use crate::opcode::{self, SqeFlags, Target};
    let mut ring = Builder::new(8).build()?;
    if ring.features() & sys::IORING_FEAT_CQE_SKIP == 0 {
        return Ok(false);
    }
    let member = SqeFlags::CQE_SKIP_SUCCESS | SqeFlags::IO_LINK;
    let chains: [(Vec<opcode::Entry>, (u64, i32)); 2] = [
        // Every member succeeds: one CQE, the tail's.
        (
            vec![
                opcode::Nop::new().build().flags(member).user_data(1),
                opcode::Nop::new().build().user_data(2),
            ],
            (2, 0),
        ),
        // The second member fails: one CQE, its own; the tail is silent.
        (
            vec![
                opcode::Nop::new().build().flags(member).user_data(3),
                opcode::Write::new(Target::Fd(-1), std::ptr::null(), 0)
                    .build()
                    .flags(member)
                    .user_data(4),
                opcode::Nop::new().build().user_data(5),
            ],
            (4, -libc::EBADF),
        ),
    ];
    for (entries, want) in chains {
        for e in entries {
            // SAFETY: NOPs and a zero-length WRITE to an invalid fd point
            // at no memory.
            unsafe { ring.push(e.sqe()) }.map_err(|_| io::Error::other("probe ring full"))?;
        }
        ring.submit_and_wait_timeout(1, std::time::Duration::from_millis(200))?;
        // Anything else the chain posts has been posted by now: every member
        // completes inline during the submit.
        let _ = ring.submit_and_wait_timeout(2, std::time::Duration::from_millis(1));
        let mut got = Vec::new();
        while let Some(c) = ring.next_cqe()? {
            got.push((c.user_data, c.res));
        }
        if got != [want] {
            return Ok(false);
        }
    }
    Ok(true)
}
