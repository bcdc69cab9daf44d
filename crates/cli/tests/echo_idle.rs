//! `ringkit echo --idle-timeout`: connections that send nothing are closed
//! at the timeout, on both backends, and the server keeps echoing for
//! others. (The timer was once re-armed against the loop turn's clock,
//! which does not move within a poll: it fired again at once and the
//! thread spun, serving nobody.)

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{backend_usable, closed_within, start};

fn echo_once(c: &mut TcpStream) -> std::io::Result<()> {
    c.set_read_timeout(Some(Duration::from_secs(2)))?;
    c.write_all(b"0123456789abcdef")?;
    let mut back = [0u8; 16];
    c.read_exact(&mut back)?;
    assert_eq!(&back, b"0123456789abcdef");
    Ok(())
}

fn idle(backend: &str) {
    if !backend_usable(backend) {
        return;
    }
    let srv = start(&["echo", "--idle-timeout", "1"], backend, None);
    // Many connections, started a few ms apart, so their deadlines fall
    // at every offset within the timer's tick.
    let mut conns: Vec<TcpStream> = (0..200)
        .map(|i| {
            let mut c = TcpStream::connect(srv.addr).unwrap();
            echo_once(&mut c).unwrap();
            std::thread::sleep(Duration::from_micros(2_000 + 37 * (i % 50)));
            c
        })
        .collect();
    let t0 = Instant::now();
    for c in &mut conns {
        assert!(
            closed_within(c, Duration::from_secs(4)),
            "{backend}: an idle connection was open after {:?}",
            t0.elapsed()
        );
    }
    // Still serving, promptly.
    let mut c = TcpStream::connect(srv.addr).unwrap();
    echo_once(&mut c).unwrap_or_else(|e| panic!("{backend}: no echo after the idle closes: {e}"));
}

#[test]
fn idle_connections_are_closed_and_the_server_keeps_serving() {
    for backend in ["uring", "epoll"] {
        idle(backend);
    }
}
