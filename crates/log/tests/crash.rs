//! Nothing acknowledged is lost: a child process appends from 8 writers and
//! prints each LSN once its append resolved; it is killed with SIGKILL at a
//! random moment, 20 times (both backends, buffered and `O_DIRECT`), and
//! after each kill the log is reopened and every acknowledged record must
//! be there, byte for byte, and every record it returns must be whole.
//!
//! And a full disk (a 1 MiB tmpfs): appends fail with a clear error,
//! acknowledged records stay readable, and the log works again once space
//! is freed.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ringkit::{Backend, Builder};
use ringkit_log::{Log, Options};

const CHILD_ENV: &str = "RINGKIT_LOG_CRASH_CHILD";

/// The payload writer `id` appends as its `n`th record.
fn payload(id: u64, n: u64) -> Vec<u8> {
    let mut x = (id << 40 | n).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let len = 1 + (x >> 7) as usize % 3000;
    let mut out = Vec::with_capacity(len + 16);
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&n.to_le_bytes());
    out.extend((0..len).map(|_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as u8
    }));
    out
}

fn options(direct: bool) -> Options {
    Options {
        direct,
        segment_size: 256 << 10,
        max_batch: 64 << 10,
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

/// The child: append forever from 8 writers, print `lsn id n` per ack.
#[test]
#[ignore = "the child of acknowledged_records_survive_sigkill"]
fn crash_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut parts = spec.split(',');
    let (dir, be, direct, start) = (
        parts.next().unwrap().to_string(),
        parts.next().unwrap().to_string(),
        parts.next().unwrap() == "direct",
        parts.next().unwrap().parse::<u64>().unwrap(),
    );
    let rt = Builder::new().backend(backend(&be)).build().unwrap();
    rt.block_on(async move {
        let log = Log::open(&dir, options(direct)).await.unwrap();
        println!("ready");
        let mut tasks = Vec::new();
        for id in 0..8u64 {
            let log = log.clone();
            tasks.push(ringkit::spawn(async move {
                let mut n = start;
                loop {
                    let lsn = log.append(payload(id, n)).await.unwrap();
                    // Printed only after the record is durable.
                    println!("{lsn} {id} {n}");
                    n += 1;
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
}

/// Run the child until killed after `ms`; the acknowledged (lsn -> id, n).
fn run_and_kill(
    dir: &Path,
    be: &str,
    direct: bool,
    start: u64,
    ms: u64,
) -> HashMap<u64, (u64, u64)> {
    let spec = format!(
        "{},{be},{},{start}",
        dir.display(),
        if direct { "direct" } else { "buffered" }
    );
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "crash_child",
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, spec)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut acked = HashMap::new();
        let mut ready = false;
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            // (libtest may print "test crash_child ... " before it.)
            if line.ends_with("ready") {
                ready = true;
                let _ = ready_tx.send(());
                continue;
            }
            let f: Vec<u64> = line.split(' ').filter_map(|x| x.parse().ok()).collect();
            if let [lsn, id, n] = f[..] {
                acked.insert(lsn, (id, n));
            }
        }
        (ready, acked)
    });
    // The kill comes `ms` after the log is open (opening a long log takes
    // a while: it is read back whole).
    let _ = ready_rx.recv_timeout(Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(ms));
    // SAFETY: signalling our own child by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let (ready, acked) = reader.join().unwrap();
    assert!(
        ready,
        "the child never opened the log ({} lines)",
        acked.len()
    );
    acked
}

#[test]
fn acknowledged_records_survive_sigkill() {
    let t = tempfile::tempdir().unwrap();
    let mut seed = 0x2545_F491_4F6C_DD1Du64 ^ std::process::id() as u64;
    let mut all: HashMap<u64, (u64, u64)> = HashMap::new();
    let mut total_acked = 0;
    for round in 0..20u64 {
        let be = if round % 2 == 0 { "uring" } else { "epoll" };
        let direct = round % 4 >= 2;
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let ms = 150 + seed % 350;
        let acked = run_and_kill(t.path(), be, direct, round * 1_000_000, ms);
        total_acked += acked.len();
        for (lsn, v) in &acked {
            assert!(
                all.insert(*lsn, *v).is_none(),
                "LSN {lsn} acknowledged twice"
            );
        }
        // Reopen and check everything acknowledged so far, every round.
        let rt = Builder::new().backend(backend(be)).build().unwrap();
        let durable = rt.block_on(async {
            let log = Log::open(t.path(), options(direct)).await.unwrap();
            for (&lsn, &(id, n)) in &all {
                let got = log.read(lsn).await.unwrap_or_else(|e| {
                    panic!("round {round}: acknowledged LSN {lsn} unreadable: {e}")
                });
                assert!(got == payload(id, n), "round {round}: LSN {lsn} differs");
            }
            // Every record the log returns is whole (checked by its CRC).
            let mut next = 1;
            while next <= log.durable_lsn() {
                let got = log.read_from(next, 4096).await.unwrap();
                next += got.len() as u64;
            }
            log.durable_lsn()
        });
        let max_acked = all.keys().max().copied().unwrap_or(0);
        assert!(
            durable >= max_acked,
            "round {round}: durable {durable} < acked {max_acked}"
        );
        eprintln!("round {round} ({be}, direct {direct}, killed after {ms} ms): {} acked, log at {durable}", acked.len());
    }
    assert!(
        total_acked > 1000,
        "the children acknowledged only {total_acked} records"
    );
}

/// A 1 MiB tmpfs, or `None` (printed) where it cannot be mounted.
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let d = tempfile::tempdir().ok()?;
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(d.path())
            .status();
        match st {
            Ok(s) if s.success() => Some(Tmpfs(d)),
            other => {
                eprintln!("skipped: cannot mount a tmpfs (needs root): {other:?}");
                None
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

ringkit::test_all! {
    async fn a_full_disk_fails_appends_clearly_and_recovers_when_freed() {
        let Some(fs) = Tmpfs::mount("1m") else { return };
        let dir = fs.0.path().join("log");
        // 300 KiB of other data: after the first segment and its spare
        // (512 KiB) there is no room for a third.
        std::fs::write(fs.0.path().join("filler"), vec![1u8; 300 << 10]).unwrap();
        let opts = Options { segment_size: 256 << 10, max_batch: 16 << 10, ..Options::default() };
        let log = Log::open(&dir, opts.clone()).await.unwrap();
        let mut acked = Vec::new();
        let started = Instant::now();
        let err = loop {
            assert!(started.elapsed() < Duration::from_secs(20), "the disk never filled");
            match log.append(payload(1, acked.len() as u64)).await {
                Ok(lsn) => acked.push(lsn),
                Err(e) => break e,
            }
        };
        assert!(
            err.to_string().contains("cannot start a new log segment")
                && err.raw_os_error().is_none()
                && err.kind() == std::io::ErrorKind::StorageFull,
            "{err:?}"
        );
        assert!(acked.len() > 100, "only {} appends before the disk was full", acked.len());
        // Everything acknowledged is readable; the log still answers.
        for (n, &lsn) in acked.iter().enumerate() {
            assert_eq!(log.read(lsn).await.unwrap(), payload(1, n as u64));
        }
        assert!(log.append(vec![0u8; log.max_record()]).await.is_err());
        // Room again: the next append starts the new segment and succeeds.
        std::fs::remove_file(fs.0.path().join("filler")).unwrap();
        let lsn = log.append(&b"room again"[..]).await.unwrap();
        assert_eq!(lsn, *acked.last().unwrap() + 1);
        drop(log);
        let log = Log::open(&dir, opts).await.unwrap();
        assert_eq!(log.read(lsn).await.unwrap(), b"room again");
        assert_eq!(log.durable_lsn(), lsn);
    }
}
