//! The command-line flags every thread-per-core server shares (feature
//! `clap`): flatten [`LaunchArgs`] into a clap parser, then
//! [`LaunchArgs::launch_config`] for [`crate::serve_threads`]. Used by every
//! `ringkit` server command and the examples.
//!
//! ```
//! use clap::Parser;
//! #[derive(Parser)]
//! struct Cli {
//!     #[command(flatten)]
//!     launch: ringkit::LaunchArgs,
//! }
//! let cli = Cli::parse_from(["server", "--backend", "epoll", "--threads", "2"]);
//! assert_eq!(cli.launch.addr_or("127.0.0.1:8080").port(), 8080);
//! let _cfg = cli.launch.launch_config();
//! ```

use std::net::SocketAddr;

use crate::driver::Backend;
use crate::launcher::LaunchConfig;

/// Address, backend, threads and CPUs of a server (the `ringkit` server
/// commands and the examples flatten this one block). A command gives
/// `--addr` its default with `#[command(mut_arg("addr", |a|
/// a.default_value("127.0.0.1:8080")))]` on its own struct, or reads it
/// with [`addr_or`](Self::addr_or). `--backend` also reads
/// `RINGKIT_BACKEND` when the flag is not given (a parser that flattens
/// this asks for it; the library itself reads no environment).
#[derive(clap::Args, Debug, Clone)]
pub struct LaunchArgs {
    /// Address to listen on (every thread binds it with SO_REUSEPORT).
    #[arg(long)]
    pub addr: Option<SocketAddr>,
    /// I/O backend: auto (io_uring if usable here, else epoll, saying
    /// why), uring or epoll.
    #[arg(long, default_value = "auto", env = "RINGKIT_BACKEND")]
    pub backend: Backend,
    /// Runtime threads, one listener and one event loop each. One by
    /// default (not one per core, as the libraries' `ServeConfig::new`
    /// does): the studies pin a server's one loop to CPU 0 and its load
    /// to CPU 1.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// CPUs to pin the threads to, e.g. 0,1 (thread i runs on cpus[i % len]).
    #[arg(long, value_delimiter = ',')]
    pub cpus: Vec<usize>,
}

impl LaunchArgs {
    /// `--addr`, or `default` (which must parse as an address).
    pub fn addr_or(&self, default: &str) -> SocketAddr {
        self.addr
            .unwrap_or_else(|| default.parse().expect("a valid default address"))
    }

    /// Threads, CPUs and backend as a [`LaunchConfig`].
    pub fn launch_config(&self) -> LaunchConfig {
        LaunchConfig::new(self.threads)
            .cpus(self.cpus.clone())
            .backend(self.backend)
    }
}
