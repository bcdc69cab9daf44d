//! The driver's settings: which backend, its ring and buffers, and the
//! report of what a runtime chose and why.

/// Which I/O backend a runtime uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// io_uring when usable here, else epoll (the reason is reported).
    #[default]
    Auto,
    /// io_uring or an error.
    Uring,
    /// epoll.
    Epoll,
}

impl std::str::FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Backend, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Backend::Auto),
            "uring" | "io_uring" | "iouring" => Ok(Backend::Uring),
            "epoll" => Ok(Backend::Epoll),
            other => Err(format!(
                "unknown backend {other:?} (expected auto, uring or epoll)"
            )),
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Auto => "auto",
            Backend::Uring => "uring",
            Backend::Epoll => "epoll",
        })
    }
}

/// What a runtime chose and why.
#[derive(Debug, Clone)]
pub struct BackendReport {
    /// What was asked for.
    pub requested: Backend,
    /// What runs: `Uring` or `Epoll`.
    pub chosen: Backend,
    /// `IORING_SETUP_*` flags in effect (io_uring only).
    pub uring_flags: u32,
    /// SQ / CQ entries (io_uring only).
    pub entries: (u32, u32),
    /// Whether the ring fd is registered.
    pub registered_ring: bool,
    /// Why `Auto` fell back to epoll, in plain words.
    pub fallback_reason: Option<String>,
    /// Flag sets tried before the one that worked, with the error each gave.
    pub attempts: Vec<String>,
}

impl BackendReport {
    pub(super) fn epoll(
        requested: Backend,
        fallback_reason: Option<String>,
        attempts: Vec<String>,
    ) -> Self {
        BackendReport {
            requested,
            chosen: Backend::Epoll,
            uring_flags: 0,
            entries: (0, 0),
            registered_ring: false,
            fallback_reason,
            attempts,
        }
    }

    /// Setup flags as names (`SINGLE_ISSUER|DEFER_TASKRUN`).
    pub fn flag_names(&self) -> String {
        ringkit_uring::flag_names(self.uring_flags, ringkit_uring::sys::SETUP_FLAG_NAMES)
    }
}

impl std::fmt::Display for BackendReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.chosen {
            Backend::Uring => write!(
                f,
                "io_uring (flags {}, sq {} cq {}, registered ring fd: {})",
                self.flag_names(),
                self.entries.0,
                self.entries.1,
                self.registered_ring
            ),
            _ => match &self.fallback_reason {
                Some(r) => write!(f, "epoll (fallback: {r})"),
                None => write!(f, "epoll (requested)"),
            },
        }
    }
}

/// Driver settings from the runtime builder.
#[derive(Debug, Clone)]
pub(crate) struct DriverConfig {
    pub(crate) entries: u32,
    pub(crate) flags: Option<u32>,
    pub(crate) buf_count: u16,
    pub(crate) buf_size: u32,
    /// io_uring only: slots of the registered (fixed) file table that busy
    /// sockets are promoted into; 0 = off.
    pub(crate) fixed_files: u32,
    /// io_uring only: multishot receives take several buffers per CQE
    /// (`IORING_RECVSEND_BUNDLE`) where the kernel can.
    pub(crate) recv_bundle: bool,
    /// io_uring only: the levers kept for measurement (feature
    /// `experiments`).
    #[cfg(feature = "experiments")]
    pub(crate) experiments: super::experiments::Levers,
    /// io_uring only: the ring is waited on through a host loop's reactor
    /// (hosted mode), so `DEFER_TASKRUN` is not used (see
    /// `UringDriver::new`).
    pub(crate) hosted: bool,
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            entries: 256,
            flags: None,
            buf_count: 1024,
            buf_size: 4096,
            fixed_files: 0,
            recv_bundle: true,
            #[cfg(feature = "experiments")]
            experiments: Default::default(),
            hosted: false,
        }
    }
}
