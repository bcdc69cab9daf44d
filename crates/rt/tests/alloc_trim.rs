//! `ringkit::alloc::freed`: once a thread reports enough freed memory, the
//! allocator gives its free pages back to the kernel a moment later.
//! Before, a server that freed a burst's buffers kept them mapped (after
//! 1 000 pipelined bursts at once, 138 MB mapped, 4.4 MB in use).

use std::time::Duration;

use ringkit::Backend;

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

#[test]
fn freed_memory_goes_back_to_the_kernel() {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        eprintln!("skipped: the trim is glibc's");
        return;
    }
    for backend in [Backend::Epoll, Backend::Uring] {
        let rt = match ringkit::Builder::new().backend(backend).build() {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("skipped {backend:?}: {e}");
                continue;
            }
        };
        let (kept, after) = rt.block_on(async {
            // 1 000 buffers of 96 KiB (under glibc's mmap threshold, so
            // from the heap), each followed by a small one that stays: the
            // freed ones cannot be returned by shrinking the heap.
            let mut big = Vec::new();
            let mut small = Vec::new();
            for i in 0..1000u32 {
                big.push(vec![i as u8 | 1; 96 * 1024]);
                small.push(vec![i as u8; 64]);
            }
            let before = rss_kib();
            let freed: usize = big.iter().map(Vec::capacity).sum();
            drop(big);
            let kept = rss_kib();
            ringkit::alloc::freed(freed);
            ringkit::time::sleep(ringkit::alloc::TRIM_DELAY + Duration::from_millis(500)).await;
            let after = rss_kib();
            drop(small);
            assert!(
                before > 90_000,
                "{backend:?}: the buffers were not faulted in ({before} KiB)"
            );
            (kept, after)
        });
        assert!(
            kept.saturating_sub(after) > 60_000,
            "{backend:?}: RSS {kept} KiB after the free, {after} KiB after the trim"
        );
    }
}
