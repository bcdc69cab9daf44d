//! Every contender of the log study runs, commits, and rolls to new files:
//! ringkit-log on both backends, the tokio, std and glommio peers
//! (behaviour only; speed is the study's business).

use ringkit::Backend;
use ringkit_bench::log::{run, LogBenchConfig, LogEngine};

#[test]
fn every_log_contender_commits_and_rolls_files() {
    for engine in [
        LogEngine::Ringkit(Backend::Uring),
        LogEngine::Ringkit(Backend::Epoll),
        LogEngine::Tokio,
        LogEngine::Std,
        LogEngine::Glommio,
    ] {
        for direct in [false, true] {
            let t = tempfile::tempdir().unwrap();
            let cfg = LogBenchConfig {
                dir: t.path().join("log"),
                writers: 8,
                record: 4096,
                secs: 0.4,
                direct,
                engine,
                // Small files: the run makes several.
                file_size: 256 << 10,
                max_batch: 64 << 10,
                batches_in_flight: 2,
                dsync_writes: false,
            };
            let r = match run(&cfg) {
                Ok(r) => r,
                Err(e)
                    if engine == LogEngine::Glommio
                        && e.to_string().to_lowercase().contains("memlock") =>
                {
                    // glommio wants 512 KiB of locked memory (`ulimit -l`).
                    eprintln!("skipped glommio: {e}");
                    continue;
                }
                Err(e) if engine == LogEngine::Glommio && !direct => {
                    // glommio's DmaFile is O_DIRECT only: refused, clearly.
                    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
                    assert!(e.to_string().contains("O_DIRECT"), "{e}");
                    assert!(!cfg.dir.exists(), "nothing left behind");
                    continue;
                }
                Err(e) if engine == LogEngine::Ringkit(Backend::Uring) => {
                    eprintln!("skipped {}: {e}", engine.name());
                    continue;
                }
                Err(e) => panic!("{} (direct {direct}): {e}", engine.name()),
            };
            assert!(r.commits > 50, "{r:?}");
            assert!(r.batches >= 1 && r.batches <= r.commits, "{r:?}");
            assert!(r.bytes >= r.commits * (16 + 4096), "{r:?}");
            assert!(r.p50_us > 0.0 && r.p99_us >= r.p50_us, "{r:?}");
            let files = r.files;
            let left: Vec<_> = walk(&cfg.dir);
            assert!(
                left.is_empty() && !cfg.dir.exists(),
                "{} (direct {direct}): the run removes the directory it made; left: {left:?}",
                engine.name()
            );
            assert!(
                files >= 3,
                "{}: {files} files for {} bytes",
                engine.name(),
                r.bytes
            );
        }
    }
}

/// Every path under `dir` (empty if it is gone).
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            out.push(e.path());
            out.extend(walk(&e.path()));
        }
    }
    out
}
