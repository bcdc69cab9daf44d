//! The echo server on every core, with a graceful drain:
//! `cargo run -p ringkit --example echo_threads -- [ADDR] [THREADS]
//! [auto|uring|epoll]`. Each thread has its own runtime and its own
//! `SO_REUSEPORT` listener (thread-per-core). On Ctrl-C or SIGTERM each
//! thread closes its listener, lets every connection finish what it is
//! echoing (an idle one is closed at once), waits up to 10 s, and the
//! process exits 0. A second Ctrl-C ends it at once.

use std::io;
use std::pin::pin;
use std::time::Duration;

use ringkit::net::{TcpListener, TcpStream};
use ringkit::sync::{select, Drain, DrainGuard, Either};
use ringkit::{Backend, LaunchConfig};

/// Echo until the peer closes or, between messages, draining starts.
async fn echo(stream: TcpStream, guard: DrainGuard) -> io::Result<()> {
    let mut draining = pin!(guard.draining());
    loop {
        let mut read = pin!(stream.read_pooled());
        let chunk = match select(read.as_mut(), draining.as_mut()).await {
            Either::Left(chunk) => chunk?,
            Either::Right(()) => return Ok(()),
        };
        if chunk.is_empty() {
            return Ok(());
        }
        stream.write_all(chunk.to_vec()).await.0?;
    }
}

async fn serve_thread(i: usize, addr: String) -> io::Result<()> {
    let listener = TcpListener::bind_reuseport(addr.as_str())?;
    println!(
        "thread {i} listening on {} ({})",
        listener.local_addr()?,
        ringkit::backend_report().expect("inside the runtime")
    );
    let drain = Drain::new();
    let mut stop = pin!(ringkit::signal::shutdown_requested());
    while let Some(stream) = listener.accept_until(stop.as_mut()).await {
        let guard = drain.enter();
        ringkit::spawn(async move {
            if let Err(e) = echo(stream, guard).await {
                eprintln!("connection: {e}");
            }
        });
    }
    drop(listener); // new clients are refused from here on
    drain.start();
    if ringkit::time::timeout(Duration::from_secs(10), drain.drained())
        .await
        .is_err()
    {
        eprintln!("thread {i}: {} connections still open", drain.active());
    }
    println!("thread {i} drained");
    Ok(())
}

fn main() -> io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:7000".into());
    let threads = match args.next() {
        Some(n) => n
            .parse()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let backend: Backend = match args.next() {
        Some(b) => b
            .parse()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
        None => Backend::Auto,
    };
    // Bind once here so every thread gets the same port, even for port 0.
    let addr = std::net::TcpListener::bind(addr.as_str())?.local_addr()?;
    ringkit::signal::install()?;
    let handles = ringkit::launch(LaunchConfig::new(threads).backend(backend), move |i| {
        let addr = addr.to_string();
        async move {
            if let Err(e) = serve_thread(i, addr).await {
                eprintln!("thread {i}: {e}");
                ringkit::signal::request_shutdown();
            }
        }
    })?;
    for h in handles {
        h.join()
            .map_err(|_| io::Error::other("a thread panicked"))??;
    }
    Ok(())
}
