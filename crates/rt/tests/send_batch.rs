//! `write_all_pooled` with each `SendBatch` lever: one vectored `SENDMSG`,
//! a chain of linked sends whose success CQEs are skipped but the last
//! (also on a 4-entry SQ, where long batches are split into short chains),
//! a send bundle from a send ring, and on epoll (where the setting is
//! ignored). Every byte is checked at
//! the peer.
//!
//! The early-release check: the echo case runs on a ring of 16 small
//! buffers while the peer does not read, so the sends wait on a full
//! socket while receives keep coming. A buffer released before the kernel
//! has sent it goes back to the ring at once and is refilled with later
//! bytes of the stream, which differ by position (`pattern`): the peer
//! would see them.

mod common;

use std::future::Future;
use std::io::{Read, Write};
use std::net::Shutdown;
use std::time::Duration;

use common::{kernel_has_bundles, pair, pattern};
use ringkit::driver::SendBatch;
use ringkit::net::{RecvBuf, TcpListener, TcpStream};
use ringkit::{Backend, Builder};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Vectored,
    Linked,
    /// Linked on a 4-entry SQ: chains of at most 3 sends.
    LinkedSmallSq,
    /// Send bundles from a send ring.
    Bundle,
    /// epoll, asked for linked sends (ignored: one `sendmsg`).
    Epoll,
}

const MODES: [Mode; 5] = [
    Mode::Vectored,
    Mode::Linked,
    Mode::LinkedSmallSq,
    Mode::Bundle,
    Mode::Epoll,
];

fn chains_hold() -> bool {
    ringkit_uring::skipped_chain_posts_one_cqe().unwrap_or(false)
}

/// Run `f` on a runtime in `mode` with `bufs` ring buffers of `size` bytes;
/// check that chains were used exactly when they should be.
fn run<F: Future<Output = ()>>(mode: Mode, bufs: (u16, u32), f: impl FnOnce() -> F) {
    ringkit::raise_nofile_limit();
    let b = Builder::new().recv_buffers(bufs.0, bufs.1);
    let b = match mode {
        Mode::Vectored => b.backend(Backend::Uring).send_batch(SendBatch::Vectored),
        Mode::Linked => b.backend(Backend::Uring).send_batch(SendBatch::Linked),
        Mode::LinkedSmallSq => b
            .backend(Backend::Uring)
            .entries(4)
            .send_batch(SendBatch::Linked),
        Mode::Bundle => b.backend(Backend::Uring).send_batch(SendBatch::Bundle),
        Mode::Epoll => b.backend(Backend::Epoll).send_batch(SendBatch::Linked),
    };
    let rt = match b.build() {
        Ok(rt) => rt,
        Err(e) if mode != Mode::Epoll => {
            eprintln!("skipped {mode:?}: io_uring unavailable here: {e}");
            return;
        }
        Err(e) => panic!("epoll runtime: {e}"),
    };
    rt.block_on(f());
    let m = rt.metrics();
    match mode {
        Mode::Linked | Mode::LinkedSmallSq if !chains_hold() => {
            eprintln!("no chain check: this kernel does not post one CQE per skipped chain");
        }
        Mode::Linked | Mode::LinkedSmallSq => {
            assert!(m.send_chain_links > 0, "no send was chained: {m:?}")
        }
        Mode::Bundle if !kernel_has_bundles() => {
            eprintln!("no bundle check: this kernel lacks IORING_FEAT_RECVSEND_BUNDLE");
        }
        Mode::Bundle => {
            assert!(m.send_bundles > 0, "no batch went as a bundle: {m:?}");
            // Every send took its entries (F_BUFFER), so one ring served all.
            assert_eq!(m.send_rings, 1, "send rings not reused: {m:?}");
        }
        Mode::Vectored | Mode::Epoll => {
            assert_eq!((m.send_chain_links, m.send_bundles), (0, 0))
        }
    }
}

/// The echo server's loop: everything already received goes back in one
/// `write_all_pooled`.
async fn echo(s: &TcpStream) -> std::io::Result<()> {
    loop {
        let first = s.read_pooled().await?;
        if first.is_empty() {
            return Ok(());
        }
        let mut batch = vec![first];
        batch.extend(std::iter::from_fn(|| s.take_pooled()).take(63));
        s.write_all_pooled(batch).await?;
    }
}

fn echo_with_the_send_socket_full(mode: Mode) {
    run(mode, (16, 1024), || async {
        let (s, t) = pair(|c| {
            let data = pattern(6 << 20);
            let mut w = c.try_clone().unwrap();
            let sent = data.clone();
            let writer = std::thread::spawn(move || {
                for chunk in sent.chunks(64 << 10) {
                    w.write_all(chunk).unwrap();
                }
                w.shutdown(Shutdown::Write).unwrap();
            });
            // Not reading for a while: the echo's sends fill the socket and
            // wait while the writer goes on.
            std::thread::sleep(Duration::from_millis(300));
            let mut got = Vec::new();
            (&c).read_to_end(&mut got).unwrap();
            writer.join().unwrap();
            assert_eq!(got.len(), data.len(), "bytes lost");
            if let Some(i) = got.iter().zip(&data).position(|(a, b)| a != b) {
                panic!("byte {i} differs: released early, or reordered");
            }
        })
        .await;
        echo(&s).await.unwrap();
        s.shutdown(Shutdown::Write).await.unwrap();
        t.join().unwrap();
    });
}

/// Heap buffers of uneven sizes into a socket the peer does not read for a
/// while: a member meets `EAGAIN` or sends short, and the rest must follow
/// from the exact byte where it stopped.
fn uneven_buffers_into_a_full_socket(mode: Mode) {
    let data = pattern(5 << 20);
    let sent = data.clone();
    run(mode, (64, 4096), || async move {
        let (s, t) = pair(move |c| {
            std::thread::sleep(Duration::from_millis(300));
            let mut got = Vec::new();
            (&c).read_to_end(&mut got).unwrap();
            assert_eq!(got.len(), data.len());
            assert!(got == data, "bytes lost or reordered");
        })
        .await;
        let mut bufs = Vec::new();
        let mut rest = &sent[..];
        for size in [1usize, 7, 70_000, 3, 250_000, 4096].iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (a, b) = rest.split_at((*size).min(rest.len()));
            bufs.push(RecvBuf::heap(a.to_vec()));
            rest = b;
        }
        s.write_all_pooled(bufs).await.unwrap();
        s.shutdown(Shutdown::Write).await.unwrap();
        t.join().unwrap();
    });
}

/// A peer that resets while a batch waits on its full socket: the write
/// fails with an error, and the runtime goes on serving the next peer.
fn reset_with_a_batch_queued(mode: Mode) {
    run(mode, (64, 4096), || async {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let c = std::net::TcpStream::connect(addr).unwrap();
            // A small, fixed receive buffer: the batch must not fit the
            // socket buffers whatever the kernel's autotuning allows
            // (Linux 6.18's tcp_rmem reaches 32 MiB).
            socket2::SockRef::from(&c)
                .set_recv_buffer_size(16 << 10)
                .unwrap();
            ready_rx.recv().unwrap();
            socket2::SockRef::from(&c)
                .set_linger(Some(Duration::ZERO))
                .unwrap();
            drop(c); // RST
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            c.write_all(b"still serving").unwrap();
            c.shutdown(Shutdown::Write).unwrap();
            let mut got = Vec::new();
            c.read_to_end(&mut got).unwrap();
            assert_eq!(got, b"still serving");
        });
        let (s, _) = l.accept().await.unwrap();
        // And a small, fixed send buffer on our side.
        {
            use std::os::fd::{AsRawFd, BorrowedFd};
            // SAFETY: `s` owns the fd and outlives this borrow.
            let fd = unsafe { BorrowedFd::borrow_raw(s.as_raw_fd()) };
            socket2::SockRef::from(&fd)
                .set_send_buffer_size(64 << 10)
                .unwrap();
        }
        let bufs = (0..64)
            .map(|_| RecvBuf::heap(vec![7u8; 64 << 10]))
            .collect();
        // The reset comes once the batch waits on the full socket.
        ringkit::spawn(async move {
            ringkit::time::sleep(Duration::from_millis(200)).await;
            ready_tx.send(()).unwrap();
        });
        let r = ringkit::time::timeout(Duration::from_secs(20), s.write_all_pooled(bufs))
            .await
            .expect("the write to a reset peer never ended");
        let e = r.expect_err("a write to a reset peer succeeded");
        assert!(
            matches!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            ),
            "{e}"
        );
        drop(s);
        let (s2, _) = l.accept().await.unwrap();
        echo(&s2).await.unwrap();
        s2.shutdown(Shutdown::Write).await.unwrap();
        t.join().unwrap();
    });
}

/// A batch whose future is dropped while it waits on a full socket: the
/// driver keeps its buffers and cancels the chain's running member (it
/// cannot know which), so nothing stays in flight once the stream is gone.
fn dropped_while_waiting(mode: Mode) {
    run(mode, (64, 4096), || async {
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let (s, t) = pair(move |c| {
            // Hold the connection open, unread, until told.
            release_rx.recv().unwrap();
            drop(c);
        })
        .await;
        let bufs = (0..32)
            .map(|_| RecvBuf::heap(vec![1u8; 256 << 10]))
            .collect();
        let done =
            ringkit::time::timeout(Duration::from_millis(200), s.write_all_pooled(bufs)).await;
        assert!(done.is_err(), "8 MiB went into an unread socket");
        drop(s);
        // The cancels run with the next turns; nothing may be left in flight
        // (the peer still holds its end, so only a cancel can end the send).
        let mut left = u64::MAX;
        for _ in 0..100 {
            ringkit::time::sleep(Duration::from_millis(10)).await;
            left = ringkit::metrics().ops_in_flight;
            if left == 0 {
                break;
            }
        }
        assert_eq!(left, 0, "ops still in flight");
        release_tx.send(()).unwrap();
        t.join().unwrap();
    });
}

macro_rules! every_mode {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                for mode in super::MODES {
                    super::$name(mode);
                }
            }
        )*
    };
}

mod all_modes {
    every_mode!(
        echo_with_the_send_socket_full,
        uneven_buffers_into_a_full_socket,
        reset_with_a_batch_queued,
        dropped_while_waiting,
    );
}
