//! The cooperative budget, on both backends: a task that keeps finding I/O
//! ready (a peer flooding it with bytes, a backlog of connections) yields
//! after at most 128 results per poll, so another task of the thread runs
//! in between; `ringkit::unconstrained` lifts the limit. Nothing read under
//! the budget is lost or reordered.
//!
//! How it is seen: a ticker task counts its polls (it yields every time);
//! the busy task notes how many results it took in a row while the ticker
//! did not move.

use std::cell::Cell;
use std::future::poll_fn;
use std::io::Write;
use std::mem::MaybeUninit;
use std::rc::Rc;
use std::time::Duration;

use ringkit::net::{TcpListener, TcpStream};

/// What the runtime documents: 128 results of I/O per task poll.
const BUDGET: usize = 128;

/// Counts its polls until `stop` is set.
fn ticker(ticks: Rc<Cell<u64>>, stop: Rc<Cell<bool>>) -> ringkit::JoinHandle<()> {
    ringkit::spawn(async move {
        while !stop.get() {
            ticks.set(ticks.get() + 1);
            ringkit::yield_now().await;
        }
    })
}

/// Longest run of results taken while the ticker did not move.
#[derive(Default)]
struct Runs {
    last_tick: u64,
    run: usize,
    longest: usize,
}

impl Runs {
    fn took_one(&mut self, ticks: &Cell<u64>) {
        let t = ticks.get();
        if t == self.last_tick {
            self.run += 1;
        } else {
            self.last_tick = t;
            self.run = 1;
        }
        self.longest = self.longest.max(self.run);
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

const FLOOD: usize = 256 * 1024;

/// A client writes `FLOOD` bytes and holds the connection; once they are
/// all at the server, a task reads them 64 bytes at a time through
/// `PollIo` (pooled: ring buffers on io_uring). Returns the longest run.
async fn flood_read(unconstrained: bool) -> usize {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let client = std::thread::spawn(move || {
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.write_all(&pattern(FLOOD)).unwrap();
        // Held open until the server has read everything.
        let _ = rx.recv();
    });
    let (s, _) = l.accept().await.unwrap();
    let mut io = s.into_poll_io();
    // Let every byte arrive before the first read.
    ringkit::time::sleep(Duration::from_millis(200)).await;
    let ticks = Rc::new(Cell::new(0));
    let stop = Rc::new(Cell::new(false));
    let t = ticker(ticks.clone(), stop.clone());
    let read_all = async {
        let mut runs = Runs::default();
        let mut got = Vec::with_capacity(FLOOD);
        let mut buf = [MaybeUninit::<u8>::uninit(); 64];
        while got.len() < FLOOD {
            let n = poll_fn(|cx| io.poll_read(cx, &mut buf)).await.unwrap();
            assert!(n > 0, "end of stream after {} bytes", got.len());
            // SAFETY: `poll_read` initialised the first `n` bytes.
            got.extend(buf[..n].iter().map(|b| unsafe { b.assume_init() }));
            runs.took_one(&ticks);
        }
        assert!(got == pattern(FLOOD), "bytes lost or reordered");
        runs.longest
    };
    let longest = if unconstrained {
        ringkit::unconstrained(read_all).await
    } else {
        read_all.await
    };
    stop.set(true);
    t.await.unwrap();
    tx.send(()).unwrap();
    client.join().unwrap();
    longest
}

ringkit::test_all! {
    async fn a_flooded_reader_yields_within_the_budget() {
        let before = ringkit::metrics().coop_yields;
        let longest = flood_read(false).await;
        assert!(
            longest <= BUDGET,
            "a task took {longest} reads in one poll while another task waited"
        );
        assert!(ringkit::metrics().coop_yields > before, "no yield counted");
    }

    async fn unconstrained_reads_what_is_ready_in_one_poll() {
        let longest = flood_read(true).await;
        assert!(
            longest > 2 * BUDGET,
            "unconstrained, the reader still yielded after {longest} reads"
        );
    }

    async fn a_backlog_of_connections_is_accepted_within_the_budget() {
        const CONNS: usize = 400;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        // Connected before the first accept: all in the backlog.
        let clients: Vec<std::net::TcpStream> = (0..CONNS)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect();
        let ticks = Rc::new(Cell::new(0));
        let stop = Rc::new(Cell::new(false));
        let t = ticker(ticks.clone(), stop.clone());
        let mut runs = Runs::default();
        let mut accepted: Vec<TcpStream> = Vec::with_capacity(CONNS);
        while accepted.len() < CONNS {
            accepted.push(l.accept().await.unwrap().0);
            runs.took_one(&ticks);
        }
        stop.set(true);
        t.await.unwrap();
        assert!(
            runs.longest <= BUDGET,
            "a task accepted {} connections in one poll while another task waited",
            runs.longest
        );
        drop(clients);
    }
}

/// Hosted mode: a tokio task (on the hosted `LocalSet`) that reads a flood
/// through ringkit I/O spends tokio's budget, so the ringkit turn (and its
/// ticker task) runs between its polls; it was unbounded.
#[test]
fn a_hosted_tokio_task_reading_a_flood_yields() {
    for backend in [ringkit::Backend::Epoll, ringkit::Backend::Uring] {
        let rt = match ringkit::Builder::new()
            .backend(backend)
            .host_tokio()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("skipped {backend:?}: {e}");
                continue;
            }
        };
        let longest = rt.block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            let client = std::thread::spawn(move || {
                let mut c = std::net::TcpStream::connect(addr).unwrap();
                c.write_all(&pattern(FLOOD)).unwrap();
                let _ = rx.recv();
            });
            let (s, _) = l.accept().await.unwrap();
            let mut io = s.into_poll_io();
            ringkit::time::sleep(Duration::from_millis(200)).await;
            let ticks = Rc::new(Cell::new(0));
            let stop = Rc::new(Cell::new(false));
            let t = ticker(ticks.clone(), stop.clone());
            let ticks2 = ticks.clone();
            let reader = tokio::task::spawn_local(async move {
                let mut runs = Runs::default();
                let mut got = 0;
                let mut buf = [MaybeUninit::<u8>::uninit(); 64];
                while got < FLOOD {
                    let n = poll_fn(|cx| io.poll_read(cx, &mut buf)).await.unwrap();
                    assert!(n > 0);
                    got += n;
                    runs.took_one(&ticks2);
                }
                runs.longest
            });
            let longest = reader.await.unwrap();
            stop.set(true);
            t.await.unwrap();
            tx.send(()).unwrap();
            client.join().unwrap();
            longest
        });
        assert!(
            longest <= 2 * BUDGET,
            "{backend:?}: a hosted tokio task took {longest} reads in one poll"
        );
    }
}
