//! `ringkit torture raft`: a three-node cluster (one process per node,
//! each in its own network namespace and on its own power-loss file
//! system when the machine allows) under client load while rounds of
//! faults hit it ([`crate::nemesis`]: crashes of any number of nodes,
//! pauses, partitions of every shape, power loss, a full disk).
//!
//! Clients append unique elements to lists (a new key every few
//! seconds, so reads stay short) and read them from any node: a node
//! answers linearizably or redirects. After every round the lists are
//! read and the history so far is checked (`ringkit_raft::history`):
//! nothing acknowledged lost, reordered or duplicated, nothing refused
//! present, every read linearizable. The first violation ends the run
//! (its round and time are reported) unless `--keep-going`.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ringkit::Backend;
use ringkit_powerfs::PowerFs;
use ringkit_raft::client::{Answer2, Client, Reply};
use ringkit_raft::history::{self, Op, Outcome};

use crate::nemesis::{last_line, Cluster, Fault, Needs, Rng, Schedule};
use crate::netns::Net;
use crate::raft_cluster::{make_cluster, members, scratch, wait_leader, NodeArgs, NodeProc};

/// What to run.
#[derive(Debug, Clone)]
pub struct RaftTorture {
    pub rounds: usize,
    pub seed: u64,
    pub clients: usize,
    pub backend: Backend,
    pub dir: Option<PathBuf>,
    pub port: u16,
    /// The faults to draw from (empty: every one the machine allows).
    pub faults: Vec<Fault>,
    /// Go on after a violation (default: stop at the first).
    pub keep_going: bool,
}

/// What a run found.
#[derive(Debug, Default)]
pub struct Report {
    /// Operations, acknowledged operations and reads checked; the
    /// violations.
    pub verdict: history::Verdict,
    /// Rounds run.
    pub rounds: usize,
    /// The round after which the first violation was seen, and the
    /// seconds from the start of the load to then.
    pub first_violation: Option<(usize, f64)>,
    /// Each fault and how many times it ran.
    pub faults: BTreeMap<&'static str, usize>,
    /// Appends whose outcome is unknown.
    pub unknown: usize,
}

/// A new key every this long.
const KEY_EVERY: Duration = Duration::from_secs(4);

/// Microseconds since `t0`.
fn us(t0: Instant) -> u64 {
    t0.elapsed().as_micros() as u64
}

fn key(k: u32) -> String {
    format!("list{k}")
}

/// The clients' history, by key, and the appends still waiting for an
/// outcome (by client).
#[derive(Debug, Default)]
struct History {
    ops: BTreeMap<u32, Vec<Op>>,
    inflight: HashMap<usize, (u32, u64, String)>,
}

impl History {
    /// Key `k`'s history as a read that began at `t0` and ended at `t1`
    /// may have seen it: what ended before `t0` as it ended, what began
    /// before `t1` and had not ended by `t0` of unknown outcome (refusals
    /// stay refusals), and nothing begun later.
    fn as_seen(&self, k: u32, t0: u64, t1: u64) -> Vec<Op> {
        let mut out = Vec::new();
        for op in self.ops.get(&k).into_iter().flatten() {
            match op {
                Op::Append { end, .. } if *end < t0 => out.push(op.clone()),
                Op::Append {
                    begin,
                    value,
                    outcome,
                    ..
                } if *begin < t1 => out.push(Op::Append {
                    begin: *begin,
                    end: t1,
                    value: value.clone(),
                    outcome: match outcome {
                        Outcome::Refused => Outcome::Refused,
                        _ => Outcome::Unknown,
                    },
                }),
                Op::Read { end, .. } if *end < t0 => out.push(op.clone()),
                _ => {}
            }
        }
        for (kk, begin, value) in self.inflight.values() {
            if *kk == k && *begin < t1 {
                out.push(Op::Append {
                    begin: *begin,
                    end: t1,
                    value: value.clone(),
                    outcome: Outcome::Unknown,
                });
            }
        }
        out
    }

    fn keys(&self) -> Vec<u32> {
        let mut k: Vec<u32> = self.ops.keys().copied().collect();
        k.extend(self.inflight.values().map(|v| v.0));
        k.sort_unstable();
        k.dedup();
        k
    }
}

fn parse_list(v: Option<String>) -> Vec<String> {
    v.map(|s| s.split(',').map(str::to_string).collect())
        .unwrap_or_default()
}

/// One client: appends (3 in 4) and reads from any node until `stop`.
async fn client(
    id: usize,
    nodes: Vec<(u64, String)>,
    hist: Rc<RefCell<History>>,
    stop: Rc<RefCell<bool>>,
    t0: Instant,
) {
    let n = nodes.len() as u64;
    let mut c = Client::new(nodes);
    // Shorter than every fault: a client gives up on a node that hangs
    // and asks another (reads), so a node that answers when it should
    // not is asked while it should not.
    c.timeout = Duration::from_millis(500);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((id as u64 + 1) * 0x1234_5677));
    let mut seq = 0u64;
    while !*stop.borrow() {
        let k = (t0.elapsed().as_millis() / KEY_EVERY.as_millis()) as u32;
        let begin = us(t0);
        if rng.below(4) == 0 {
            if let Reply::Ok(Answer2::Value(v)) = c.read_from(rng.below(n) as usize, &key(k)).await
            {
                let op = Op::Read {
                    begin,
                    end: us(t0),
                    list: parse_list(v),
                };
                hist.borrow_mut().ops.entry(k).or_default().push(op);
            }
            continue;
        }
        let value = format!("c{id}-{seq}");
        seq += 1;
        hist.borrow_mut()
            .inflight
            .insert(id, (k, begin, value.clone()));
        let outcome = match c.append(&key(k), &value).await {
            Reply::Ok(Answer2::Written {
                value: Some(len), ..
            }) => Outcome::Ok(len.parse().unwrap_or(0)),
            Reply::Ok(_) | Reply::Unknown(_) => Outcome::Unknown,
            Reply::Refused(_) => Outcome::Refused,
        };
        {
            let mut h = hist.borrow_mut();
            h.inflight.remove(&id);
            h.ops.entry(k).or_default().push(Op::Append {
                begin,
                end: us(t0),
                value,
                outcome,
            });
        }
        if outcome == Outcome::Refused {
            ringkit::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A linearizable read of `k`, retried until `until`.
async fn read_until(c: &mut Client, k: &str, until: Instant) -> io::Result<Vec<String>> {
    loop {
        match c.read(k).await {
            Reply::Ok(Answer2::Value(v)) => return Ok(parse_list(v)),
            other if Instant::now() > until => {
                return Err(io::Error::other(format!("no read of {k}: {other:?}")))
            }
            _ => ringkit::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Read every key and check the history so far against what was read.
async fn checkpoint(
    hist: &Rc<RefCell<History>>,
    c: &mut Client,
    t0: Instant,
) -> io::Result<(history::Verdict, usize)> {
    let mut total = history::Verdict::default();
    let mut elements = 0;
    let keys = hist.borrow().keys();
    for k in keys {
        let begin = us(t0);
        let list = read_until(c, &key(k), Instant::now() + Duration::from_secs(20)).await?;
        let end = us(t0);
        elements += list.len();
        let ops = hist.borrow().as_seen(k, begin, end);
        let v = history::check(&ops, &list);
        // The check's read is a read like any: what it saw must stay (an
        // element of unknown outcome seen here may not vanish later).
        hist.borrow_mut()
            .ops
            .entry(k)
            .or_default()
            .push(Op::Read { begin, end, list });
        total.ops += v.ops;
        total.acked += v.acked;
        total.reads += v.reads;
        total
            .violations
            .extend(v.violations.into_iter().map(|m| format!("{}: {m}", key(k))));
    }
    Ok((total, elements))
}

/// The faults this machine can run, and why the others cannot.
fn menu(cfg: &RaftTorture, net: bool, disk: bool) -> (Vec<Fault>, Vec<&'static str>) {
    let asked = if cfg.faults.is_empty() {
        Fault::ALL.to_vec()
    } else {
        cfg.faults.clone()
    };
    let mut skipped = Vec::new();
    let menu = asked
        .into_iter()
        .filter(|f| {
            let ok = match f.needs() {
                Needs::Nothing => true,
                Needs::Net => net,
                Needs::Disk => disk,
            };
            if !ok {
                skipped.push(f.name());
            }
            ok
        })
        .collect();
    (menu, skipped)
}

/// The nodes' disks: a power-loss file system per node, mounted on its
/// directory (`None` and why, when FUSE cannot be used here).
fn disks(root: &std::path::Path) -> Result<Vec<PowerFs>, String> {
    PowerFs::usable()?;
    (1..=3)
        .map(|id| {
            let d = root.join(format!("n{id}"));
            std::fs::create_dir_all(&d).map_err(|e| e.to_string())?;
            PowerFs::mount(&d).map_err(|e| format!("mount on {}: {e}", d.display()))
        })
        .collect()
}

/// Run the torture; `log` reports progress. Errors: the cluster could not
/// be run; violations are in the report.
pub fn run(cfg: &RaftTorture, log: &mut dyn FnMut(&str)) -> io::Result<Report> {
    let (root, remove) = scratch(cfg.dir.clone(), "raft-torture")?;
    // Small segments and frequent snapshots: segments roll, snapshots are
    // taken and the log purged behind them many times while nodes die.
    let args = NodeArgs {
        direct: false,
        segment_mib: 1,
        segment_kib: Some(256),
        no_recycle: false,
        heartbeat_ms: 50,
        snapshot_every: 300,
        committed_every_ms: 50,
        backend: cfg.backend,
        cpu: None,
    };
    // Namespaces when they can be made (root, ip, nft), else loopback
    // addresses; a power-loss file system per node when FUSE works.
    let net = match Net::usable() {
        Ok(()) => Some(Net::new(3, cfg.port)?),
        Err(why) => {
            log(&format!(
                "no partitions: {why} (nodes on loopback addresses)"
            ));
            None
        }
    };
    let asked = if cfg.faults.is_empty() {
        &Fault::ALL[..]
    } else {
        &cfg.faults[..]
    };
    let want_disks = asked.iter().any(|f| f.needs() == Needs::Disk);
    let disks = match disks(&root) {
        _ if !want_disks => Vec::new(),
        Ok(d) => d,
        Err(why) => {
            log(&format!(
                "no power loss or full disk: {why} (plain directories)"
            ));
            Vec::new()
        }
    };
    let (menu, skipped) = menu(cfg, net.is_some(), !disks.is_empty());
    if !skipped.is_empty() {
        log(&format!(
            "faults this machine cannot run, skipped: {}",
            skipped.join(", ")
        ));
    }
    if menu.is_empty() {
        return Err(io::Error::other("no fault to run here"));
    }
    let nodes: Vec<NodeProc> = (1..=3)
        .map(|id| match &net {
            Some(n) => {
                let addr = std::net::SocketAddr::new(n.addr(id), cfg.port);
                NodeProc::start_in(id, addr, &root, &args, n.ns(id as u8))
            }
            None => NodeProc::start(id, cfg.port, &root, &args),
        })
        .collect::<io::Result<_>>()?;
    for n in &nodes {
        let disk = if disks.is_empty() {
            "a plain directory"
        } else {
            "a power-loss file system"
        };
        log(&format!(
            "node {} at {} on {disk} ({})",
            n.id,
            n.addr,
            n.dir.display()
        ));
    }
    let mut cluster = Cluster {
        nodes,
        args,
        net,
        disks,
        violations: Vec::new(),
    };
    // Ctrl-C or SIGTERM ends the run at the next round, and what it made
    // (processes, mounts, namespaces) is still taken down.
    ringkit::signal::install()?;
    let rt = ringkit::Runtime::new()?;
    let res = rt.block_on(rounds(cfg, &mut cluster, menu, log));
    let clean = remove && res.as_ref().is_ok_and(|r| r.verdict.violations.is_empty());
    // Stop the nodes, then unmount their disks, then remove the
    // namespaces (the nodes were in them) and the data.
    for n in &mut cluster.nodes {
        n.kill(libc::SIGTERM);
    }
    drop(std::mem::take(&mut cluster.disks));
    drop(cluster.net.take());
    if clean {
        let _ = std::fs::remove_dir_all(&root);
    } else {
        log(&format!("node data and logs kept in {}", root.display()));
    }
    res
}

async fn rounds(
    cfg: &RaftTorture,
    cluster: &mut Cluster,
    menu: Vec<Fault>,
    log: &mut dyn FnMut(&str),
) -> io::Result<Report> {
    make_cluster(&cluster.nodes, Duration::from_secs(10)).await?;
    let t0 = Instant::now();
    let hist = Rc::new(RefCell::new(History::default()));
    let stop = Rc::new(RefCell::new(false));
    let list = members(&cluster.nodes);
    let workers: Vec<_> = (0..cfg.clients.max(1))
        .map(|i| ringkit::spawn(client(i, list.clone(), hist.clone(), stop.clone(), t0)))
        .collect();
    let mut rng = Rng(cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut schedule = Schedule::new(menu, &mut rng);
    let mut status = Client::new(list.clone());
    status.timeout = Duration::from_millis(300);
    let mut checker = Client::new(list.clone());
    checker.timeout = Duration::from_secs(1);
    let mut report = Report::default();
    for round in 1..=cfg.rounds {
        ringkit::time::sleep(Duration::from_millis(300 + rng.below(700))).await;
        if ringkit::signal::is_shutdown_requested() {
            *stop.borrow_mut() = true;
            return Err(io::Error::new(
                io::ErrorKind::Interrupted,
                format!("interrupted before round {round}"),
            ));
        }
        let leader = wait_leader(&mut status, 3, Instant::now() + Duration::from_secs(10))
            .await
            .ok();
        let fault = schedule.next(&mut rng);
        *report.faults.entry(fault.name()).or_default() += 1;
        let what = cluster.apply(fault, leader, &mut rng).await?;
        log(&format!(
            "round {round}: {} (leader {}): {what}",
            fault.name(),
            leader.map_or("unknown".into(), |l| l.to_string())
        ));
        report.rounds = round;
        // Outside a full disk (handled by its fault) no node may end on
        // its own: one that does, say because its data would not open
        // after a power loss, is a violation (and is restarted).
        let mut violations = std::mem::take(&mut cluster.violations);
        for p in &mut cluster.nodes {
            if let Some(status) = p.exited() {
                let why = format!("node {} exited ({status}): {}", p.id, last_line(&p.dir));
                log(&format!("{why}; restarted"));
                violations.push(format!("round {round}: {why}"));
                p.restart(&cluster.args)?;
            }
        }
        if wait_leader(&mut status, 3, Instant::now() + Duration::from_secs(20))
            .await
            .is_err()
        {
            violations.push(format!(
                "round {round}: no leader within 20 s after the fault"
            ));
        }
        // A cluster whose majority is back must answer: a read that no
        // node serves for 20 s is a violation too (a node that cannot
        // start again, say).
        let (v, elements) = match checkpoint(&hist, &mut checker, t0).await {
            Ok(r) => r,
            Err(e) => (
                history::Verdict {
                    violations: vec![format!("round {round}: {e}")],
                    ..history::Verdict::default()
                },
                0,
            ),
        };
        violations.extend(v.violations);
        log(&format!(
            "round {round} checked: {} operations, {elements} elements, {}",
            v.ops,
            if violations.is_empty() {
                "sound"
            } else {
                "VIOLATIONS"
            }
        ));
        if !violations.is_empty() && report.first_violation.is_none() {
            let secs = t0.elapsed().as_secs_f64();
            report.first_violation = Some((round, secs));
            log(&format!(
                "first violation after round {round}, {secs:.1} s into the load"
            ));
            report.verdict.violations.extend(violations);
            if !cfg.keep_going {
                break;
            }
        } else {
            report.verdict.violations.extend(violations);
        }
    }
    // Let the cluster settle, stop the clients, check the whole history.
    ringkit::time::sleep(Duration::from_millis(500)).await;
    *stop.borrow_mut() = true;
    for w in workers {
        let _ = w.await;
    }
    let (v, elements) = match checkpoint(&hist, &mut checker, t0).await {
        Ok(r) => r,
        Err(e) => {
            report
                .verdict
                .violations
                .push(format!("the final check: {e}"));
            return Ok(report);
        }
    };
    let h = hist.borrow();
    report.unknown = h
        .ops
        .values()
        .flatten()
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
        "{} operations on {} keys: {} appends acknowledged, {} unknown, {} reads; {elements} \
         elements in the final lists",
        v.ops,
        h.ops.len(),
        v.acked - v.reads,
        report.unknown,
        v.reads,
    ));
    report.verdict.ops = v.ops;
    report.verdict.acked = v.acked;
    report.verdict.reads = v.reads;
    for m in v.violations {
        if !report.verdict.violations.contains(&m) {
            report.verdict.violations.push(m);
        }
    }
    if v.acked < report.rounds {
        report
            .verdict
            .violations
            .push(format!("only {} operations acknowledged", v.acked));
    }
    for p in &cluster.nodes {
        log(&format!("node {}: {}", p.id, log_extent(&p.dir)));
    }
    Ok(report)
}

/// What a node's log directory holds: its segments, by first LSN.
fn log_extent(dir: &std::path::Path) -> String {
    let mut segs: Vec<u64> = std::fs::read_dir(dir.join("log"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".seg")?.parse().ok())
        .collect();
    segs.sort_unstable();
    match (segs.first(), segs.last()) {
        (Some(a), Some(b)) => format!(
            "{} log segments, the first from LSN {a}, the last from LSN {b} (purged below {a})",
            segs.len()
        ),
        _ => "no log segment".into(),
    }
}
