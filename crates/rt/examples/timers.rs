//! Timeouts and intervals: `cargo run -p ringkit --example timers --
//! [auto|uring|epoll]`. A periodic tick, a read that times out (the bytes
//! that arrive later are not lost), and a whole operation under a deadline.

use std::io;
use std::time::{Duration, Instant};

use ringkit::net::{TcpListener, TcpStream};
use ringkit::time::{interval, sleep, timeout};
use ringkit::{Backend, Builder};

fn main() -> io::Result<()> {
    let backend: Backend = match std::env::args().nth(1) {
        Some(b) => b
            .parse()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
        None => Backend::Auto,
    };
    let rt = Builder::new().backend(backend).build()?;
    rt.block_on(async {
        // 1. An interval: ticks every 20 ms (missed ticks are skipped, not burst).
        let start = Instant::now();
        let mut every = interval(Duration::from_millis(20));
        for i in 1..=3 {
            every.tick().await;
            println!("tick {i} at {:?}", start.elapsed());
        }

        // 2. A read with a timeout: nothing arrives within 50 ms.
        let l = TcpListener::bind("127.0.0.1:0")?;
        let client = TcpStream::connect(l.local_addr()?).await?;
        let (server, _) = l.accept().await?;
        let (r, buf) = server
            .read_timeout(Vec::with_capacity(64), Duration::from_millis(50))
            .await;
        println!("read with a 50 ms timeout: {:?}", r.map_err(|e| e.kind()));
        // The data sent afterwards is read normally.
        client.write_all(&b"late"[..]).await.0?;
        let (n, buf) = server.read(buf).await;
        println!(
            "then read {:?}",
            std::str::from_utf8(&buf[..n?]).unwrap_or("?")
        );

        // 3. Any future under a deadline: it is dropped when time runs out.
        let slow = async {
            sleep(Duration::from_secs(5)).await;
            "finished"
        };
        match timeout(Duration::from_millis(30), slow).await {
            Ok(v) => println!("slow work: {v}"),
            Err(e) => println!("slow work: {e}"),
        }
        Ok(())
    })
}
