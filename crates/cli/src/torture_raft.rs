//! `ringkit torture raft`: a three-node cluster (one process per node,
//! each in its own network namespace, or on its own loopback address when
//! namespaces cannot be made) under client load while rounds of faults
//! hit it: SIGKILL of the leader or of a follower at a random moment
//! (restarted on its data), or one node cut off by nftables drops in its
//! namespace, then healed. Clients append unique elements to one
//! list and read it; after the rounds a final read gives the list, and
//! the history is checked (`ringkit_raft::history`): nothing
//! acknowledged lost, reordered or duplicated, nothing refused present,
//! every read linearizable.

use std::cell::RefCell;
use std::io;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ringkit::Backend;
use ringkit_raft::client::{Answer2, Client, Reply};
use ringkit_raft::history::{self, Op, Outcome};

use crate::netns::Net;
use crate::raft::{make_cluster, members, scratch, teardown, wait_leader, NodeArgs, NodeProc};

/// What to run.
#[derive(Debug, Clone)]
pub struct RaftTorture {
    pub rounds: usize,
    pub seed: u64,
    pub clients: usize,
    pub backend: Backend,
    pub dir: Option<PathBuf>,
    pub port: u16,
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Microseconds since `t0`.
fn us(t0: Instant) -> u64 {
    t0.elapsed().as_micros() as u64
}

/// One client: appends (3 in 4) and reads until `stop`.
async fn client(
    id: usize,
    nodes: Vec<(u64, String)>,
    ops: Rc<RefCell<Vec<Op>>>,
    stop: Rc<RefCell<bool>>,
    t0: Instant,
) {
    let mut c = Client::new(nodes);
    c.timeout = Duration::from_secs(3);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((id as u64 + 1) * 0x1234_5677));
    let mut n = 0u64;
    while !*stop.borrow() {
        let begin = us(t0);
        if rng.below(4) == 0 {
            if let Reply::Ok(Answer2::Value(v)) = c.read("list").await {
                let list = v
                    .map(|s| s.split(',').map(str::to_string).collect())
                    .unwrap_or_default();
                ops.borrow_mut().push(Op::Read {
                    begin,
                    end: us(t0),
                    list,
                });
            }
            continue;
        }
        let value = format!("c{id}-{n}");
        n += 1;
        let outcome = match c.append("list", &value).await {
            Reply::Ok(Answer2::Written {
                value: Some(len), ..
            }) => Outcome::Ok(len.parse().unwrap_or(0)),
            Reply::Ok(_) | Reply::Unknown(_) => Outcome::Unknown,
            Reply::Refused(_) => Outcome::Refused,
        };
        ops.borrow_mut().push(Op::Append {
            begin,
            end: us(t0),
            value,
            outcome,
        });
        if outcome == Outcome::Refused {
            ringkit::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Run the torture; `log` reports progress. Errors: the cluster could not
/// be run; violations are in the returned verdict.
pub fn run(cfg: &RaftTorture, log: &mut dyn FnMut(&str)) -> io::Result<history::Verdict> {
    let (root, remove) = scratch(cfg.dir.clone(), "raft-torture")?;
    let node = NodeArgs {
        direct: false,
        segment_mib: 4,
        heartbeat_ms: 50,
        snapshot_every: 500,
        committed_every_ms: 50,
        backend: cfg.backend,
        cpu: None,
    };
    // Namespaces when they can be made (root, ip, nft): partitions are
    // drops inside one node's namespace. Otherwise loopback addresses,
    // and no partitions.
    let net = match Net::usable() {
        Ok(()) => Some(Net::new(3, cfg.port)?),
        Err(why) => {
            log(&format!(
                "partitions skipped: {why} (nodes on loopback addresses)"
            ));
            None
        }
    };
    let partitions = net.is_some();
    let mut nodes: Vec<NodeProc> = (1..=3)
        .map(|id| match &net {
            Some(n) => {
                log(&format!(
                    "node {id} in namespace {} at {}",
                    n.ns(id as u8),
                    n.addr(id)
                ));
                let addr = std::net::SocketAddr::new(n.addr(id), cfg.port);
                NodeProc::start_in(id, addr, &root, &node, n.ns(id as u8))
            }
            None => NodeProc::start(id, cfg.port, &root, &node),
        })
        .collect::<io::Result<_>>()?;
    let rt = ringkit::Runtime::new()?;
    let res = rt.block_on(async {
        make_cluster(&nodes, Duration::from_secs(10)).await?;
        let t0 = Instant::now();
        let ops = Rc::new(RefCell::new(Vec::new()));
        let stop = Rc::new(RefCell::new(false));
        let workers: Vec<_> = (0..cfg.clients.max(1))
            .map(|i| ringkit::spawn(client(i, members(&nodes), ops.clone(), stop.clone(), t0)))
            .collect();
        let mut rng = Rng(cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut status = Client::new(members(&nodes));
        status.timeout = Duration::from_millis(500);
        for round in 1..=cfg.rounds {
            ringkit::time::sleep(Duration::from_millis(200 + rng.below(600))).await;
            let leader = wait_leader(
                &mut status,
                nodes.len(),
                Instant::now() + Duration::from_secs(10),
            )
            .await
            .ok();
            // Each kind once first, then at random.
            let kinds = if partitions { 3 } else { 2 };
            let kind = if round as u64 <= kinds {
                round as u64 - 1
            } else {
                rng.below(kinds)
            };
            let victim = match (kind, leader) {
                (0, Some(l)) => l,
                _ => 1 + rng.below(3),
            };
            let what = match kind {
                0 => "kill the leader",
                1 => "kill a node",
                _ => "cut a node off",
            };
            log(&format!(
                "round {round}: {what} (node {victim}; leader {leader:?})"
            ));
            let i = victim as usize - 1;
            let hold = Duration::from_millis(300 + rng.below(900));
            if kind < 2 {
                nodes[i].kill(libc::SIGKILL);
                ringkit::time::sleep(hold).await;
                nodes[i].restart(&node)?;
            } else if let Some(net) = &net {
                net.cut(victim as u8)?;
                ringkit::time::sleep(hold).await;
                net.heal(victim as u8)?;
            }
        }
        // Let the cluster settle, stop the clients, read the list.
        ringkit::time::sleep(Duration::from_millis(500)).await;
        *stop.borrow_mut() = true;
        for w in workers {
            let _ = w.await;
        }
        let mut c = Client::new(members(&nodes));
        c.timeout = Duration::from_secs(3);
        let until = Instant::now() + Duration::from_secs(30);
        let final_list = loop {
            match c.read("list").await {
                Reply::Ok(Answer2::Value(v)) => {
                    break v
                        .map(|s| s.split(',').map(str::to_string).collect::<Vec<_>>())
                        .unwrap_or_default()
                }
                other if Instant::now() > until => {
                    return Err(io::Error::other(format!("no final read: {other:?}")))
                }
                _ => ringkit::time::sleep(Duration::from_millis(100)).await,
            }
        };
        let ops = ops.borrow();
        let mut v = history::check(&ops, &final_list);
        let unknown = ops
            .iter()
            .filter(|o| {
                matches!(
                    o,
                    Op::Append {
                        outcome: Outcome::Unknown,
                        ..
                    }
                )
            })
            .count();
        log(&format!(
            "{} operations: {} appends acknowledged, {unknown} unknown, {} reads; final list of {} \
             elements",
            v.ops,
            v.acked - v.reads,
            v.reads,
            final_list.len()
        ));
        if v.acked < cfg.rounds {
            v.violations
                .push(format!("only {} operations acknowledged", v.acked));
        }
        Ok(v)
    });
    let clean = remove && res.as_ref().is_ok_and(|v| v.violations.is_empty());
    teardown(&mut nodes, &root, clean);
    // The nodes are gone: now their namespaces may go.
    drop(net);
    if !clean {
        log(&format!("node data and logs kept in {}", root.display()));
    }
    res
}
