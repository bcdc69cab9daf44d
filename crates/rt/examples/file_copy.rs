//! Copy a file and make the copy durable: `cargo run -p ringkit --example
//! file_copy -- SRC DST [auto|uring|epoll]`. Reads and writes 256 KiB at a
//! time at explicit offsets (one ring operation each on io_uring), then
//! `fsync`s the copy before saying it is done.

use std::io;

use ringkit::fs::File;
use ringkit::{Backend, Builder};

const CHUNK: usize = 256 * 1024;

async fn copy(src: &str, dst: &str) -> io::Result<u64> {
    let from = File::open(src).await?;
    let to = File::create(dst).await?;
    let mut buf = Vec::with_capacity(CHUNK);
    let mut off = 0u64;
    loop {
        // The buffer holds exactly the `n` bytes read afterwards.
        let (n, b) = from.read_at(buf, off).await;
        let n = n?;
        if n == 0 {
            break;
        }
        let (r, b) = to.write_all_at(b, off).await;
        r?;
        buf = b;
        off += n as u64;
    }
    // Data and metadata on stable storage before we report success.
    to.sync_all().await?;
    Ok(off)
}

fn main() -> io::Result<()> {
    let mut args = std::env::args().skip(1);
    let usage = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "usage: file_copy SRC DST [auto|uring|epoll]",
        )
    };
    let src = args.next().ok_or_else(usage)?;
    let dst = args.next().ok_or_else(usage)?;
    let backend: Backend = match args.next() {
        Some(b) => b
            .parse()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
        None => Backend::Auto,
    };
    let rt = Builder::new().backend(backend).build()?;
    let n = rt.block_on(copy(&src, &dst))?;
    println!(
        "copied {n} bytes from {src} to {dst} ({})",
        rt.backend_report()
    );
    Ok(())
}
