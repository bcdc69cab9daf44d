//! A TCP echo server on one thread: `cargo run -p ringkit --example echo --
//! [ADDR] [auto|uring|epoll]` (default 127.0.0.1:7000, auto). Prints
//! `listening on ADDR (BACKEND)`, serves until Ctrl-C or SIGTERM, and
//! exits 0.

use std::io;

use ringkit::net::{TcpListener, TcpStream};
use ringkit::sync::{select, Either};
use ringkit::{Backend, Builder};

/// Echo every byte back until the peer closes.
async fn echo(stream: TcpStream) -> io::Result<()> {
    let mut buf = Vec::with_capacity(16 * 1024);
    loop {
        // The buffer goes to the kernel and comes back holding exactly
        // the bytes read.
        let (n, b) = stream.read(buf).await;
        if n? == 0 {
            return Ok(());
        }
        let (r, b) = stream.write_all(b).await;
        r?;
        buf = b;
    }
}

fn main() -> io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:7000".into());
    let backend: Backend = match args.next() {
        Some(b) => b
            .parse()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
        None => Backend::Auto,
    };
    ringkit::signal::install()?;
    let rt = Builder::new().backend(backend).build()?;
    rt.block_on(async {
        let listener = TcpListener::bind(addr.as_str())?;
        println!(
            "listening on {} ({})",
            listener.local_addr()?,
            ringkit::backend_report().expect("inside the runtime")
        );
        let mut stop = std::pin::pin!(ringkit::signal::shutdown_requested());
        loop {
            let mut accept = std::pin::pin!(listener.accept());
            match select(accept.as_mut(), stop.as_mut()).await {
                Either::Left(Ok((stream, _peer))) => {
                    ringkit::spawn(async move {
                        if let Err(e) = echo(stream).await {
                            eprintln!("connection: {e}");
                        }
                    });
                }
                // EMFILE and friends: keep serving.
                Either::Left(Err(e)) => eprintln!("accept: {e}"),
                Either::Right(()) => return Ok(()),
            }
        }
    })
}
