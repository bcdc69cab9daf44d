//! Three nodes of the replicated map in one ringkit runtime on loopback,
//! on each backend: the cluster elects a leader, commits writes, serves
//! linearizable reads, and goes on after its leader stops.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use openraft::BasicNode;
use ringkit_raft::client::{Answer2, Client, Reply};
use ringkit_raft::node::{serve, NodeConfig};
use ringkit_raft::wire::Call;

/// A free port, never one handed out before in this process: the two
/// backends' clusters start side by side, and a port released here could
/// be handed to the other cluster before its node bound it. Then one
/// cluster's leader sent appends to the other's, whose leader had the same
/// vote (term 1, node 1), and openraft panicked (`self.leader.is_none()`),
/// failing both tests at once in CI.
fn free_addr() -> SocketAddr {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if !given.contains(&a.port()) {
            given.push(a.port());
            return a;
        }
    }
}

async fn leader(c: &mut Client, n: usize, not: Option<u64>) -> u64 {
    for _ in 0..200 {
        for i in 0..n {
            if let Reply::Ok(Answer2::Status(s)) = c.status_of(i).await {
                if let Some(l) = s.leader.filter(|l| Some(*l) != not) {
                    if s.state == "Leader" {
                        return l;
                    }
                }
            }
        }
        ringkit::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no leader elected");
}

async fn three_nodes() {
    let t = tempfile::tempdir().unwrap();
    let addrs: Vec<SocketAddr> = (0..3).map(|_| free_addr()).collect();
    let mut stops = Vec::new();
    let mut nodes = Vec::new();
    for (i, a) in addrs.iter().enumerate() {
        let (tx, rx) = futures_channel::oneshot::channel::<()>();
        let mut cfg = NodeConfig::new(i as u64 + 1, *a, t.path().join(format!("n{}", i + 1)));
        cfg.heartbeat_ms = 50;
        cfg.log.segment_size = 1 << 20;
        cfg.log.max_batch = 256 << 10;
        cfg.snapshot_every = 40;
        nodes.push(ringkit::spawn(serve(cfg, async move {
            let _ = rx.await;
        })));
        stops.push(Some(tx));
    }
    let list: Vec<(u64, String)> = addrs
        .iter()
        .enumerate()
        .map(|(i, a)| (i as u64 + 1, a.to_string()))
        .collect();
    let members: BTreeMap<u64, BasicNode> = list
        .iter()
        .map(|(id, a)| (*id, BasicNode { addr: a.clone() }))
        .collect();
    let mut c = Client::new(list.clone());
    // Init once node 1 listens.
    let mut tries = 0;
    while let Reply::Refused(why) = c.call_on(0, &Call::Init(members.clone())).await {
        tries += 1;
        assert!(tries < 100, "node 1 never listened: {why}");
        ringkit::time::sleep(Duration::from_millis(20)).await;
    }
    let first = leader(&mut c, 3, None).await;
    for i in 0..100 {
        match c.append("k", &i.to_string()).await {
            Reply::Ok(Answer2::Written { value, .. }) => {
                assert_eq!(value, Some((i + 1).to_string()))
            }
            other => panic!("append {i}: {other:?}"),
        }
    }
    let all: Vec<String> = (0..100).map(|i| i.to_string()).collect();
    assert_eq!(
        c.read("k").await,
        Reply::Ok(Answer2::Value(Some(all.join(","))))
    );
    // The leader stops; another is elected and has every write.
    let _ = stops[first as usize - 1].take().unwrap().send(());
    let second = leader(&mut c, 3, Some(first)).await;
    assert_ne!(first, second);
    for i in 100..120 {
        assert!(
            matches!(c.append("k", &i.to_string()).await, Reply::Ok(_)),
            "append {i}"
        );
    }
    let all: Vec<String> = (0..120).map(|i| i.to_string()).collect();
    assert_eq!(
        c.read("k").await,
        Reply::Ok(Answer2::Value(Some(all.join(","))))
    );
    for s in stops.iter_mut().filter_map(Option::take) {
        let _ = s.send(());
    }
    for n in nodes {
        n.await.unwrap().unwrap();
    }
}

ringkit::test_all! {
    async fn three_nodes_commit_read_and_survive_their_leader() {
        three_nodes().await;
    }
}
