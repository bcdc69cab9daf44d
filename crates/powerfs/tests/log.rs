//! ringkit-log on the mount, on io_uring and on epoll, buffered and
//! `O_DIRECT`, as a crash would meet it. Each round, a child process opens
//! the log, appends records and prints each one once it is acknowledged
//! (durable), saves a state, then appends more without awaiting them until
//! it is killed (SIGKILL) a few milliseconds later; then the power is cut
//! (torn every other round) and this process opens the log and checks
//! that every record ever acknowledged is there, byte for byte, that the
//! last saved state is, and that every record there is whole. Segments are
//! small, so they are made (fallocate, zeros, sync, rename, directory
//! sync) in every round.

mod common;

use std::collections::BTreeMap;
use std::future::Future;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ringkit::{Backend, Builder};
use ringkit_log::{Log, Options};
use ringkit_powerfs::PowerFs;

use common::Mounted;

const CHILD_ENV: &str = "RINGKIT_POWERFS_LOG_CHILD";
/// Records a child appends and awaits in each round.
const ACKED: u64 = 150;

/// The payload of record `i` of round `round`: its identity, then bytes
/// derived from it (1 to 3000 of them).
fn payload(round: u64, i: u64) -> Vec<u8> {
    let mut x = (round << 32 | i).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let len = 1 + (x >> 11) as usize % 3000;
    let mut out = Vec::with_capacity(16 + len);
    out.extend_from_slice(&round.to_le_bytes());
    out.extend_from_slice(&i.to_le_bytes());
    out.extend((0..len).map(|_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as u8
    }));
    out
}

fn state(round: u64) -> Vec<u8> {
    format!("state of round {round}").into_bytes()
}

fn options(direct: bool) -> Options {
    Options {
        direct,
        segment_size: 256 << 10,
        max_batch: 32 << 10,
        ..Options::default()
    }
}

fn backend(name: &str) -> Backend {
    if name == "uring" {
        Backend::Uring
    } else {
        Backend::Epoll
    }
}

fn run<F: Future>(backend: Backend, f: F) -> F::Output {
    Builder::new().backend(backend).build().unwrap().block_on(f)
}

/// The child: one round's appends, until killed.
#[test]
#[ignore = "the child of the power-loss log tests"]
fn log_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let p: Vec<&str> = spec.split(',').collect();
    let (dir, be, direct, round) = (p[0], backend(p[1]), p[2] == "direct", p[3].parse().unwrap());
    run(be, async move {
        let log = Log::open(dir, options(direct)).await.unwrap();
        let commits: Vec<_> = (0..ACKED)
            .map(|i| (i, log.append(payload(round, i))))
            .collect();
        for (i, c) in commits {
            // Printed only once durable.
            println!("ack {} {i}", c.await.unwrap());
        }
        log.save_state(state(round)).await.unwrap();
        println!("state");
        // Never acknowledged: queued until the kill.
        for i in ACKED.. {
            drop(log.append(payload(round, i)));
            if i % 8 == 0 {
                ringkit::time::sleep(Duration::from_millis(1)).await;
            }
        }
    });
}

/// Run a child for `round` and kill it `ms` after its state is saved;
/// the records it acknowledged (LSN to payload).
fn run_child(dir: &Path, be: &str, direct: bool, round: u64, ms: u64) -> BTreeMap<u64, Vec<u8>> {
    let mode = if direct { "direct" } else { "buffered" };
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "log_child",
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, format!("{},{be},{mode},{round}", dir.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut acked = BTreeMap::new();
    let mut saved = false;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        // (libtest may print "test log_child ... " before a line.)
        if line.ends_with("state") {
            saved = true;
            break;
        }
        if let Some(rest) = line.split("ack ").nth(1) {
            let f: Vec<u64> = rest.split(' ').map(|x| x.parse().unwrap()).collect();
            acked.insert(f[0], payload(round, f[1]));
        }
    }
    std::thread::sleep(Duration::from_millis(ms));
    // SAFETY: signalling our own child by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    assert!(
        saved,
        "round {round}: the child ended before saving its state"
    );
    assert_eq!(acked.len() as u64, ACKED, "round {round}");
    acked
}

/// Open the log in this process and check it; closed (every descriptor
/// released) before returning.
fn check(
    fs: &PowerFs,
    dir: &Path,
    be: Backend,
    direct: bool,
    acked: &BTreeMap<u64, Vec<u8>>,
    st: &[u8],
) {
    run(be, async {
        let log = Log::open(dir, options(direct)).await.unwrap();
        assert_eq!(log.state().as_deref(), Some(st), "the last saved state");
        for (lsn, p) in acked {
            let got = log
                .read(*lsn)
                .await
                .unwrap_or_else(|e| panic!("acknowledged record {lsn} lost: {e}"));
            assert_eq!(&got, p, "record {lsn}");
        }
        // Whatever else is there is whole: a record as appended.
        let mut from = log.first_lsn();
        loop {
            let recs = log.read_from(from, 256).await.unwrap();
            let Some(&(last, _)) = recs.last() else { break };
            for (lsn, p) in recs {
                let r = u64::from_le_bytes(p[..8].try_into().unwrap());
                let i = u64::from_le_bytes(p[8..16].try_into().unwrap());
                assert_eq!(p, payload(r, i), "record {lsn} is not whole");
            }
            from = last + 1;
        }
        drop(log);
        // Closes go through the ring: let them run before the runtime
        // goes (and with it any close still queued).
        let until = Instant::now() + Duration::from_secs(10);
        while fs.open_handles() > 0 {
            assert!(Instant::now() < until, "the log's files stay open");
            ringkit::time::sleep(Duration::from_millis(1)).await;
        }
    });
}

fn acknowledged_records_survive(be: &str, direct: bool) {
    let Some(m) = Mounted::new() else { return };
    let dir = m.path().join("log");
    let mut acked = BTreeMap::new();
    let mut lost = 0;
    for round in 0..8u64 {
        let ms = 1 + round * 7 % 20;
        acked.extend(run_child(&dir, be, direct, round, ms));
        m.quiesce();
        let unsynced = m.fs.unsynced();
        let st = if round % 2 == 0 {
            m.fs.power_loss()
        } else {
            m.fs.power_loss_torn(round)
        };
        lost += st.bytes_dropped;
        eprintln!(
            "round {round} (killed {ms} ms after its state): {unsynced} bytes unsynced: {st:?}"
        );
        check(&m.fs, &dir, backend(be), direct, &acked, &state(round));
    }
    assert!(lost > 0, "no power cut found anything to take");
    eprintln!(
        "{} records acknowledged, all there; {lost} bytes lost to power cuts",
        acked.len()
    );
}

#[test]
fn acknowledged_records_survive_power_loss_uring_buffered() {
    acknowledged_records_survive("uring", false);
}

#[test]
fn acknowledged_records_survive_power_loss_uring_direct() {
    acknowledged_records_survive("uring", true);
}

#[test]
fn acknowledged_records_survive_power_loss_epoll_buffered() {
    acknowledged_records_survive("epoll", false);
}

#[test]
fn acknowledged_records_survive_power_loss_epoll_direct() {
    acknowledged_records_survive("epoll", true);
}
