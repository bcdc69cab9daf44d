//! Held syncs (a slow disk): a sync waits, unanswered and without effect,
//! until it is released (then carried out) or failed (`EIO`, nothing made
//! durable); writes go on meanwhile.

mod common;

use std::io::Write;
use std::sync::mpsc;
use std::time::Duration;

use common::{sync_dir, Mounted};

/// Make a new file (its name durable), hold syncs, write `data` to it and
/// start its `fsync` in a thread; the sync's result comes on the channel.
fn sync_in_thread(m: &Mounted, data: &[u8]) -> mpsc::Receiver<std::io::Result<()>> {
    let path = m.path().join("f");
    let mut f = std::fs::File::create(&path).unwrap();
    sync_dir(m.path());
    m.fs.hold_syncs();
    f.write_all(data).unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = f.sync_data();
        drop(f);
        let _ = tx.send(r);
    });
    rx
}

#[test]
fn a_held_sync_waits_and_makes_nothing_durable_until_released() {
    let Some(m) = Mounted::new() else { return };
    let done = sync_in_thread(&m, b"held");
    assert!(
        done.recv_timeout(Duration::from_millis(200)).is_err(),
        "a held sync returned"
    );
    // Writes go on while it waits.
    std::fs::write(m.path().join("g"), b"more").unwrap();
    assert!(m.fs.unsynced() >= 4);
    m.fs.release_syncs();
    done.recv_timeout(Duration::from_secs(5))
        .expect("released sync returned")
        .expect("released sync succeeded");
    m.quiesce();
    m.fs.power_loss();
    assert_eq!(std::fs::read(m.path().join("f")).unwrap(), b"held");
}

#[test]
fn a_failed_held_sync_is_eio_and_the_power_loss_takes_its_bytes() {
    let Some(m) = Mounted::new() else { return };
    let done = sync_in_thread(&m, b"lost");
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(m.fs.fail_held_syncs(), 1);
    let err = done
        .recv_timeout(Duration::from_secs(5))
        .expect("failed sync returned")
        .expect_err("a failed sync reports an error");
    assert_eq!(err.raw_os_error(), Some(libc::EIO));
    m.fs.release_syncs();
    m.quiesce();
    m.fs.power_loss();
    assert_eq!(std::fs::read(m.path().join("f")).unwrap(), b"");
}
