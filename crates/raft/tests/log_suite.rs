//! openraft's own log-storage suite (`openraft::testing::log::Suite`)
//! against [`LogStore`] on ringkit-log, in a temporary directory, on each
//! backend, buffered and `O_DIRECT`.

use openraft::testing::log::{StoreBuilder, Suite};
use openraft::StorageError;
use ringkit_log::Options;
use ringkit_raft::kv::{KvConfig, KvStateMachine};
use ringkit_raft::LogStore;

struct Builder {
    direct: bool,
}

impl StoreBuilder<KvConfig, LogStore<KvConfig>, KvStateMachine, tempfile::TempDir> for Builder {
    async fn build(
        &self,
    ) -> Result<(tempfile::TempDir, LogStore<KvConfig>, KvStateMachine), StorageError<KvConfig>>
    {
        let dir = tempfile::tempdir().expect("a temp dir");
        let opts = Options {
            direct: self.direct,
            segment_size: 256 << 10,
            max_batch: 64 << 10,
            ..Options::default()
        };
        let store = LogStore::open(dir.path().join("log"), opts)
            .await
            .expect("open the log");
        let sm = KvStateMachine::open(dir.path().join("sm"))
            .await
            .expect("open the state machine");
        Ok((dir, store, sm))
    }
}

ringkit::test_all! {
    async fn openraft_log_storage_suite_buffered() {
        Suite::test_all(Builder { direct: false }).await.unwrap();
    }
    async fn openraft_log_storage_suite_direct() {
        Suite::test_all(Builder { direct: true }).await.unwrap();
    }
}
