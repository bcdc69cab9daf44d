//! A node keeps serving when clients send it garbage: a frame claiming
//! 200 MiB and then closing, a frame that is not JSON, a client that
//! connects and sends nothing. On both backends.

use std::collections::BTreeMap;
use std::time::Duration;

use openraft::BasicNode;
use ringkit::net::TcpStream;
use ringkit_raft::client::{Answer2, Client, Reply};
use ringkit_raft::node::{serve, NodeConfig};
use ringkit_raft::wire::Call;

async fn garbage() {
    let t = tempfile::tempdir().unwrap();
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (tx, rx) = futures_channel::oneshot::channel::<()>();
    let mut cfg = NodeConfig::new(1, addr, t.path().join("n1"));
    cfg.heartbeat_ms = 50;
    cfg.idle = Duration::from_secs(1);
    cfg.log.segment_size = 1 << 20;
    cfg.log.max_batch = 256 << 10;
    let node = ringkit::spawn(serve(cfg, async move {
        let _ = rx.await;
    }));
    let mut c = Client::new(vec![(1, addr.to_string())]);
    let members = BTreeMap::from([(
        1,
        BasicNode {
            addr: addr.to_string(),
        },
    )]);
    let mut tries = 0;
    while let Reply::Refused(why) = c.call_on(0, &Call::Init(members.clone())).await {
        tries += 1;
        assert!(tries < 100, "the node never listened: {why}");
        ringkit::time::sleep(Duration::from_millis(20)).await;
    }
    // A huge frame announced, a little sent, then closed.
    let s = TcpStream::connect(addr).await.unwrap();
    let mut frame = (200u32 << 20).to_le_bytes().to_vec();
    frame.extend_from_slice(&[b'x'; 1000]);
    s.write_all(frame).await.0.unwrap();
    drop(s);
    // Not JSON: the node closes that connection.
    let s = TcpStream::connect(addr).await.unwrap();
    let mut frame = 5u32.to_le_bytes().to_vec();
    frame.extend_from_slice(b"hello");
    s.write_all(frame).await.0.unwrap();
    let (n, _) = s.read(Vec::with_capacity(16)).await;
    assert_eq!(n.unwrap(), 0, "closed");
    // Large frames under way take from a budget of two: a third is
    // refused, while small calls go on.
    let mut big = Vec::new();
    for _ in 0..2 {
        let s = TcpStream::connect(addr).await.unwrap();
        let mut frame = (ringkit_raft::wire::MAX_FRAME as u32)
            .to_le_bytes()
            .to_vec();
        frame.extend_from_slice(&vec![b'x'; 1 << 20]);
        s.write_all(frame).await.0.unwrap();
        big.push(s);
    }
    ringkit::time::sleep(Duration::from_millis(50)).await;
    let third = TcpStream::connect(addr).await.unwrap();
    let frame = (ringkit_raft::wire::MAX_FRAME as u32)
        .to_le_bytes()
        .to_vec();
    third.write_all(frame).await.0.unwrap();
    let (n, _) = ringkit::time::timeout(Duration::from_secs(5), third.read(Vec::with_capacity(16)))
        .await
        .expect("the node closes a frame over its budget");
    assert_eq!(n.unwrap(), 0);
    // A client that sends calls and never reads the answers: the node
    // lets it go once its answers stop moving (the writer then fails),
    // instead of holding the connection for ever.
    let greedy = TcpStream::connect(addr).await.unwrap();
    let flood = ringkit::spawn(async move {
        let mut frame = Vec::new();
        for _ in 0..1000 {
            let body = b"\"Status\"";
            frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
            frame.extend_from_slice(body);
        }
        loop {
            let (r, f) = greedy.write_all(frame).await;
            frame = f;
            if r.is_err() {
                return;
            }
        }
    });
    ringkit::time::timeout(Duration::from_secs(20), flood)
        .await
        .expect("the node closes a connection that never reads")
        .unwrap();
    // (The earlier client's connection was let go too, idle: a new one.)
    let mut c = Client::new(vec![(1, addr.to_string())]);
    // Connected and silent, beside a client that works.
    let _silent = TcpStream::connect(addr).await.unwrap();
    for i in 0..20 {
        let r = c.append("k", &i.to_string()).await;
        assert!(matches!(r, Reply::Ok(Answer2::Written { .. })), "{r:?}");
    }
    let r = c.read("k").await;
    let want: Vec<String> = (0..20).map(|i| i.to_string()).collect();
    assert_eq!(r, Reply::Ok(Answer2::Value(Some(want.join(",")))));
    let _ = tx.send(());
    node.await.unwrap().unwrap();
}

ringkit::test_all! {
    async fn a_node_keeps_serving_beside_garbage_clients() {
        garbage().await;
    }
}

/// A write whose entry was discarded on a leader change may still commit:
/// its answer is an error (outcome unknown), never `NotLeader` (which a
/// client takes as "not carried out" and sends again).
#[test]
fn a_discarded_write_is_unknown_not_refused() {
    use openraft::error::{ClientWriteError, ForwardToLeader, RaftError};
    use ringkit_raft::kv::KvConfig;
    use ringkit_raft::node::write_answer;
    use ringkit_raft::wire::Answer;
    let discarded: RaftError<KvConfig, ClientWriteError<KvConfig>> =
        RaftError::APIError(ClientWriteError::LogEntryDiscarded(ForwardToLeader::empty()));
    assert!(matches!(write_answer(Err(discarded)), Answer::Error(_)));
    let refused: RaftError<KvConfig, ClientWriteError<KvConfig>> =
        RaftError::APIError(ClientWriteError::ForwardToLeader(ForwardToLeader::empty()));
    assert!(matches!(
        write_answer(Err(refused)),
        Answer::NotLeader(None)
    ));
}
