//! A node's files after a power loss (`ringkit-powerfs`: what was not
//! synced is gone, directory entries included): the state machine's
//! snapshot, which the log is purged behind, must survive it, or the node
//! cannot start again. On both backends; skipped with the reason where
//! FUSE cannot be mounted.

use openraft::storage::RaftStateMachine;
use openraft::RaftSnapshotBuilder;
use ringkit::Backend;
use ringkit_powerfs::PowerFs;
use ringkit_raft::kv::KvStateMachine;

fn snapshot_survives(backend: Backend) {
    if let Err(why) = PowerFs::usable() {
        println!("skipped: {why}");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let disk = PowerFs::mount(t.path()).unwrap();
    let dir = t.path().join("sm");
    let rt = ringkit::Runtime::builder()
        .backend(backend)
        .build()
        .unwrap();
    rt.block_on(async {
        let mut sm = KvStateMachine::open(&dir).await.unwrap();
        let mut b = sm.get_snapshot_builder().await;
        b.build_snapshot().await.unwrap();
    });
    drop(rt);
    while disk.open_handles() > 0 {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    disk.power_loss();
    let rt = ringkit::Runtime::builder()
        .backend(backend)
        .build()
        .unwrap();
    rt.block_on(async {
        let mut sm = KvStateMachine::open(&dir).await.unwrap();
        assert!(
            sm.get_current_snapshot().await.unwrap().is_some(),
            "the snapshot built and acknowledged before the power loss is gone"
        );
    });
}

#[test]
fn a_snapshot_survives_power_loss_on_io_uring() {
    snapshot_survives(Backend::Uring);
}

#[test]
fn a_snapshot_survives_power_loss_on_epoll() {
    snapshot_survives(Backend::Epoll);
}
