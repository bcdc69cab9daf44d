//! The state machine's snapshots on disk: openraft builds one in a task of
//! its own while the state machine goes on, so a build and an installed
//! snapshot (or two builds) can be written at once. Each must succeed, and
//! the newer snapshot must be the one kept, in memory and on disk. On both
//! backends.

use std::io::Cursor;

use openraft::storage::RaftStateMachine;
use openraft::testing::log_id;
use openraft::type_config::alias::SnapshotMetaOf;
use openraft::RaftSnapshotBuilder;
use ringkit::Backend;
use ringkit_raft::kv::{KvConfig, KvData, KvStateMachine};

fn concurrent_writes(backend: Backend) {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("sm");
    let rt = ringkit::Runtime::builder()
        .backend(backend)
        .build()
        .unwrap();
    rt.block_on(async {
        let mut sm = KvStateMachine::open(&dir).await.unwrap();
        for i in 1..=20u64 {
            let id = log_id::<KvConfig>(1, 1, i * 10);
            let data = KvData {
                last_applied: Some(id),
                ..KvData::default()
            };
            let meta = SnapshotMetaOf::<KvConfig> {
                last_log_id: Some(id),
                last_membership: Default::default(),
            };
            let bytes = serde_json::to_vec(&data).unwrap();
            let mut builder = sm.get_snapshot_builder().await;
            let mut installer = sm.clone();
            let (built, installed) = futures_util::future::join(
                builder.build_snapshot(),
                installer.install_snapshot(&meta, Cursor::new(bytes)),
            )
            .await;
            built.expect("a snapshot built while another is installed");
            installed.expect("a snapshot installed while another is built");
            let kept = sm.get_current_snapshot().await.unwrap().unwrap();
            assert_eq!(
                kept.meta.last_log_id,
                Some(id),
                "round {i}: an older snapshot replaced the newer"
            );
        }
    });
    drop(rt);
    let rt = ringkit::Runtime::builder()
        .backend(backend)
        .build()
        .unwrap();
    rt.block_on(async {
        let mut sm = KvStateMachine::open(&dir).await.unwrap();
        let kept = sm.get_current_snapshot().await.unwrap().unwrap();
        assert_eq!(kept.meta.last_log_id, Some(log_id::<KvConfig>(1, 1, 200)));
    });
}

#[test]
fn snapshots_written_at_once_keep_the_newer_on_io_uring() {
    concurrent_writes(Backend::Uring);
}

#[test]
fn snapshots_written_at_once_keep_the_newer_on_epoll() {
    concurrent_writes(Backend::Epoll);
}
