//! tokio's own integration tests as a standing outside suite for hosted
//! mode.
//!
//! `build.rs` copies the `tests/` directory of the tokio package this
//! workspace locks (unchanged but for one mechanical edit: each
//! `#[tokio::test(...)]` gains `crate = "crate::hosted"`) and
//! `tests/uring.rs` and `tests/epoll.rs` compile it, once per backend.
//! tokio's test macro then builds its runtime with the [`Builder`] here
//! instead of tokio's: a current-thread test body runs inside a hosted
//! ringkit runtime ([`ringkit::Builder::host_tokio`]) on that backend; a
//! multi-thread test runs on tokio's own runtime, as hosted mode is
//! current-thread only.
//!
//! Tests that do not pass hosted are listed, each with its reason, in
//! `known.txt`; `build.rs` marks them `#[ignore]` so
//! `cargo test -p ringkit-tokio-suite -- --ignored` runs exactly them.
//! Adding a line there is how a test is excused; a new tokio in
//! Cargo.lock brings its tests in unread.
//!
//! The crate is not a default member of the workspace: built beside
//! `ringkit-bench`, `ringkit` gets its `publish` feature and with it
//! serde_json, whose `PartialEq<Value> for u8` makes `assert_eq!(buf, [])`
//! ambiguous in five of tokio's files. CI runs `cargo test -p
//! ringkit-tokio-suite` on its own after `cargo test`.

use std::future::Future;
use std::io;

/// The stand-in for `tokio::runtime::Builder` that tokio's test macro
/// calls (`URING` picks the backend).
#[derive(Debug)]
pub struct Builder<const URING: bool> {
    multi_thread: bool,
    start_paused: bool,
    worker_threads: Option<usize>,
    name: Option<String>,
}

impl<const URING: bool> Builder<URING> {
    /// A current-thread test: hosted in ringkit.
    pub fn new_current_thread() -> Self {
        Builder {
            multi_thread: false,
            start_paused: false,
            worker_threads: None,
            name: None,
        }
    }

    /// A multi-thread test: tokio's own runtime.
    pub fn new_multi_thread() -> Self {
        Builder {
            multi_thread: true,
            ..Self::new_current_thread()
        }
    }

    /// As tokio's.
    pub fn worker_threads(mut self, n: usize) -> Self {
        self.worker_threads = Some(n);
        self
    }

    /// As tokio's: the body starts with tokio's clock paused.
    pub fn start_paused(mut self, paused: bool) -> Self {
        self.start_paused = paused;
        self
    }

    /// As tokio's: the runtime's name (`Handle::name`).
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }

    /// Accepted: hosted mode enables tokio's I/O and time drivers.
    pub fn enable_all(self) -> Self {
        self
    }

    /// A `flavor = "local"` test: hosted too (a hosted runtime runs its
    /// tasks in a tokio `LocalSet`, so `spawn_local` works).
    pub fn build_local(self, _options: tokio::runtime::LocalOptions) -> io::Result<Runtime> {
        self.build()
    }

    /// The runtime the test body runs on.
    pub fn build(self) -> io::Result<Runtime> {
        if self.multi_thread {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            if let Some(n) = self.worker_threads {
                b.worker_threads(n);
            }
            if let Some(name) = &self.name {
                b.name(name);
            }
            return Ok(Runtime::Tokio(b.enable_all().build()?));
        }
        let backend = if URING {
            ringkit::Backend::Uring
        } else {
            ringkit::Backend::Epoll
        };
        let (paused, name) = (self.start_paused, self.name);
        let rt = ringkit::Builder::new()
            .backend(backend)
            .host_tokio()
            .host_tokio_configure(move |b| {
                b.start_paused(paused);
                if let Some(name) = &name {
                    b.name(name);
                }
            })
            .build()?;
        Ok(Runtime::Hosted(rt))
    }
}

/// A test's runtime: hosted ringkit, or tokio's multi-thread runtime.
#[derive(Debug)]
pub enum Runtime {
    /// Current-thread tests.
    Hosted(ringkit::Runtime),
    /// Multi-thread tests.
    Tokio(tokio::runtime::Runtime),
}

impl Runtime {
    /// Runs the test body to its end.
    pub fn block_on<F: Future>(&self, fut: F) -> F::Output {
        match self {
            Runtime::Hosted(rt) => rt.block_on(fut),
            Runtime::Tokio(rt) => rt.block_on(fut),
        }
    }
}

/// The module a test crate names as `crate::hosted`: all of tokio, with
/// `runtime::Builder` replaced by this crate's for the given backend.
#[macro_export]
macro_rules! hosted_tokio {
    ($uring:expr) => {
        #[allow(unused_imports)]
        mod hosted {
            pub use tokio::*;
            pub mod runtime {
                pub use tokio::runtime::*;
                pub type Builder = $crate::Builder<{ $uring }>;
            }
        }
    };
}
