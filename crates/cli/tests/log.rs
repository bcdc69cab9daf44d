//! `ringkit log serve` and `ringkit log dump`, on both backends: several
//! pipelining clients get each record's LSN in order; a bad frame closes
//! only its own connection; after the server is killed (SIGKILL), `dump`
//! returns every acknowledged record byte for byte.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn record(client: u64, i: u64) -> Vec<u8> {
    let len = ((client * 7919 + i * 104_729) % 5000) as usize;
    (0..len).map(|k| (k as u64 ^ client ^ i) as u8).collect()
}

fn start(dir: &Path, backend: &str) -> Option<(Child, String)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringkit"))
        .args([
            "log",
            "serve",
            "--segment-mib",
            "1",
            "--max-batch-kib",
            "256",
            "--backend",
            backend,
            "--addr",
            &addr,
            "--dir",
        ])
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    if !line.contains("serving") {
        let _ = child.wait();
        // Only a kernel without io_uring is a reason to skip.
        assert!(
            backend == "uring" && line.contains("io_uring"),
            "{backend}: {line}"
        );
        eprintln!("skipped on {backend}: {line}");
        return None;
    }
    Some((child, addr))
}

/// Send `n` records pipelined, then read the `n` LSNs.
fn client(addr: &str, id: u64, n: u64) -> Vec<(u64, Vec<u8>)> {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut out = Vec::new();
    for i in 0..n {
        let r = record(id, i);
        out.extend_from_slice(&(r.len() as u32).to_le_bytes());
        out.extend_from_slice(&r);
    }
    c.write_all(&out).unwrap();
    let mut lsns = vec![0u8; 8 * n as usize];
    c.read_exact(&mut lsns).unwrap();
    lsns.chunks(8)
        .enumerate()
        .map(|(i, b)| {
            (
                u64::from_le_bytes(b.try_into().unwrap()),
                record(id, i as u64),
            )
        })
        .collect()
}

fn dump(dir: &Path) -> HashMap<u64, Vec<u8>> {
    let out = Command::new(env!("CARGO_BIN_EXE_ringkit"))
        .args(["log", "dump", "--dir"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (mut at, b) = (0, &out.stdout);
    let mut got = HashMap::new();
    while at < b.len() {
        let lsn = u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
        let len = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        got.insert(lsn, b[at + 12..at + 12 + len].to_vec());
        at += 12 + len;
    }
    got
}

#[test]
fn serve_answers_lsns_in_order_and_dump_returns_every_acknowledged_record() {
    for backend in ["uring", "epoll"] {
        let t = tempfile::tempdir().unwrap();
        let Some((mut server, addr)) = start(t.path(), backend) else {
            continue;
        };
        let clients: Vec<_> = (0..4u64)
            .map(|id| {
                let addr = addr.clone();
                std::thread::spawn(move || client(&addr, id, 300))
            })
            .collect();
        let mut acked = HashMap::new();
        for c in clients {
            let got = c.join().unwrap();
            // In order on each connection.
            assert!(
                got.windows(2).all(|w| w[0].0 < w[1].0),
                "{backend}: LSNs out of order"
            );
            for (lsn, r) in got {
                assert!(acked.insert(lsn, r).is_none(), "{backend}: LSN {lsn} twice");
            }
        }
        assert_eq!(acked.len(), 1200);
        // A frame longer than a record may be closes that connection only.
        let mut bad = TcpStream::connect(&addr).unwrap();
        bad.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        bad.write_all(&u32::MAX.to_le_bytes()).unwrap();
        let mut b = [0u8; 8];
        assert_eq!(
            bad.read(&mut b).unwrap_or(0),
            0,
            "{backend}: a bad frame must close"
        );
        let after = client(&addr, 9, 5);
        assert_eq!(after.len(), 5);
        for (lsn, r) in after {
            acked.insert(lsn, r);
        }
        // SAFETY: signalling our own, not yet reaped, child by its pid.
        unsafe { libc::kill(server.id() as i32, libc::SIGKILL) };
        server.wait().unwrap();
        let dumped = dump(t.path());
        for (lsn, r) in &acked {
            assert_eq!(dumped.get(lsn), Some(r), "{backend}: LSN {lsn}");
        }
        assert_eq!(
            dumped.len(),
            acked.len(),
            "{backend}: no record beyond those acknowledged"
        );
    }
}

/// Every file of `dir` and its bytes.
fn snapshot(dir: &Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let d = std::fs::read(&p).unwrap();
            (p, d)
        })
        .collect()
}

/// `log bench` on a live log's directory refuses and touches nothing (it
/// ran `remove_dir_all` on it); `dump` beside the live server reads, and
/// after the server is gone leaves every byte of the directory as it was
/// (it recovered through a writing open, zeroing what it took for a tail).
#[test]
fn bench_refuses_a_live_log_and_dump_changes_no_byte() {
    for backend in ["uring", "epoll"] {
        let t = tempfile::tempdir().unwrap();
        let Some((mut server, addr)) = start(t.path(), backend) else {
            continue;
        };
        let acked = client(&addr, 1, 50);
        let before = snapshot(t.path());
        let out = Command::new(env!("CARGO_BIN_EXE_ringkit"))
            .args([
                "log",
                "bench",
                "--secs",
                "0.2",
                "--backend",
                backend,
                "--dir",
            ])
            .arg(t.path())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{backend}: bench ran on a live log");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("refusing") && err.contains("exists"),
            "{backend}: {err}"
        );
        assert_eq!(
            snapshot(t.path()),
            before,
            "{backend}: bench touched the log"
        );
        // The server goes on, and a dump beside it sees what was acknowledged.
        let more = client(&addr, 2, 20);
        let live = dump(t.path());
        for (lsn, r) in acked.iter().chain(&more) {
            assert_eq!(live.get(lsn), Some(r), "{backend}: LSN {lsn}");
        }
        // SAFETY: signalling our own, not yet reaped, child by its pid.
        unsafe { libc::kill(server.id() as i32, libc::SIGKILL) };
        server.wait().unwrap();
        let before = snapshot(t.path());
        assert_eq!(dump(t.path()).len(), 70);
        assert_eq!(snapshot(t.path()), before, "{backend}: dump wrote");
        // check agrees.
        let out = Command::new(env!("CARGO_BIN_EXE_ringkit"))
            .args(["log", "check", "--dir"])
            .arg(t.path())
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && said.contains("70 durable records"),
            "{said}"
        );
        assert_eq!(snapshot(t.path()), before, "{backend}: check wrote");
    }
}
