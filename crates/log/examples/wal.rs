//! A write-ahead log for a tiny key-value map: 8 tasks each set 100 keys,
//! every set durable in the log before it is applied; then the log is
//! reopened and replayed, and the map must come back the same.
//!
//! ```sh
//! cargo run -p ringkit-log --example wal -- /tmp/wal-demo [auto|uring|epoll]
//! ```

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use ringkit_log::{Log, Options};

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().unwrap_or_else(|| "wal-demo".into());
    let backend = args.next().unwrap_or_else(|| "auto".into());
    let backend = backend
        .parse()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let rt = ringkit::Builder::new().backend(backend).build()?;
    rt.block_on(async {
        let log = Log::open(&dir, Options::default()).await?;
        let map = Rc::new(RefCell::new(replay(&log).await?));
        let before = log.durable_lsn();
        let tasks: Vec<_> = (0..8)
            .map(|t| {
                let (log, map) = (log.clone(), map.clone());
                ringkit::spawn(async move {
                    for i in 0..100 {
                        let (k, v) = (format!("k{t}-{i}"), format!("v{}", i * t));
                        // Durable first (group commit: the 8 tasks share
                        // their fdatasyncs), then applied.
                        log.append(format!("{k}={v}")).await?;
                        map.borrow_mut().insert(k, v);
                    }
                    Ok::<_, std::io::Error>(())
                })
            })
            .collect();
        for t in tasks {
            t.await
                .map_err(|e| std::io::Error::other(e.to_string()))??;
        }
        let stats = log.stats();
        println!(
            "{} sets durable in {} batches ({}), log now at LSN {}",
            stats.records,
            stats.batches,
            ringkit::backend_report().expect("inside the runtime"),
            log.durable_lsn()
        );
        assert_eq!(log.durable_lsn(), before + 800);
        drop(log);
        // What a restart sees.
        let log = Log::open(&dir, Options::default()).await?;
        let replayed = replay(&log).await?;
        assert!(replayed == *map.borrow(), "the replayed map differs");
        println!("replayed {} keys: the same map", replayed.len());
        Ok(())
    })
}

/// Apply every record of the log, in LSN order.
async fn replay(log: &Log) -> std::io::Result<BTreeMap<String, String>> {
    let mut map = BTreeMap::new();
    let mut next = 1;
    loop {
        let got = log.read_from(next, 1024).await?;
        if got.is_empty() {
            return Ok(map);
        }
        for (lsn, rec) in got {
            let text = String::from_utf8_lossy(&rec);
            if let Some((k, v)) = text.split_once('=') {
                map.insert(k.to_string(), v.to_string());
            }
            next = lsn + 1;
        }
    }
}
