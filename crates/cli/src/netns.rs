//! Network namespaces for `ringkit torture raft`: one namespace per node,
//! each with a veth into a bridge in the calling namespace, all on one
//! /24 (`10.X.Y.N` for node N, the bridge `.254`), so the clients reach
//! every node and a node can be cut off by nftables drops inside its own
//! namespace, touching nothing else on the host. Names carry this
//! process's id; everything made is removed on drop.

use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;

/// What a cut drops, seen from the cut node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Everything in and out: the node is alone, clients cut off too.
    All,
    /// Everything coming in but the answers on connections the node
    /// opened: it reaches the others, they do not reach it (one way).
    Inbound,
    /// Traffic with the other nodes only: clients still reach it (a node
    /// that believes it leads keeps being asked).
    Peers,
}

/// The namespaces and the bridge of one run.
#[derive(Debug)]
pub struct Net {
    tag: String,
    net: [u8; 3],
    made: Vec<String>,
    bridge: Option<String>,
}

/// Run `args` (a command and its arguments); its stderr in the error.
fn run(args: &[&str]) -> io::Result<()> {
    let out = Command::new(args[0]).args(&args[1..]).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

impl Net {
    /// Why namespaces cannot be made here, if they cannot: root, `ip`
    /// and `nft` are needed.
    pub fn usable() -> Result<(), String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root".into());
        }
        for tool in [&["ip", "netns", "list"][..], &["nft", "list", "tables"]] {
            run(tool).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Namespaces for nodes `1..=n`, the /24 chosen from this process's
    /// id and `salt` (runs side by side must pass different salts, e.g.
    /// their ports).
    pub fn new(n: u8, salt: u16) -> io::Result<Net> {
        let pid = std::process::id();
        let mut net = Net {
            tag: format!("{pid}"),
            net: [10, 100 + (pid % 100) as u8, (salt % 251) as u8],
            made: Vec::new(),
            bridge: None,
        };
        let bridge = format!("rkb{}", net.tag);
        run(&["ip", "link", "add", &bridge, "type", "bridge"])?;
        net.bridge = Some(bridge.clone());
        let gw = format!("{}/24", net.ip(254));
        run(&["ip", "addr", "add", &gw, "dev", &bridge])?;
        run(&["ip", "link", "set", &bridge, "up"])?;
        for id in 1..=n {
            let ns = net.ns(id);
            run(&["ip", "netns", "add", &ns])?;
            net.made.push(ns.clone());
            let veth = format!("rkv{}n{id}", net.tag);
            run(&[
                "ip", "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ])?;
            run(&["ip", "link", "set", &veth, "master", &bridge])?;
            run(&["ip", "link", "set", &veth, "up"])?;
            let addr = format!("{}/24", net.ip(id));
            let inside = |args: &[&str]| {
                let mut v = vec!["ip", "netns", "exec", &ns];
                v.extend_from_slice(args);
                run(&v)
            };
            inside(&["ip", "link", "set", "lo", "up"])?;
            inside(&["ip", "addr", "add", &addr, "dev", "eth0"])?;
            inside(&["ip", "link", "set", "eth0", "up"])?;
        }
        Ok(net)
    }

    fn ip(&self, host: u8) -> Ipv4Addr {
        Ipv4Addr::new(self.net[0], self.net[1], self.net[2], host)
    }

    /// Node `id`'s address.
    pub fn addr(&self, id: u64) -> IpAddr {
        IpAddr::V4(self.ip(id as u8))
    }

    /// Node `id`'s namespace.
    pub fn ns(&self, id: u8) -> String {
        format!("rkraft{}n{id}", self.tag)
    }

    /// Cut node `id` off as `cut` says, with nftables rules in its
    /// namespace (loopback is never cut). One cut per node at a time:
    /// [`Net::heal`] it first.
    pub fn cut(&self, id: u8, cut: Cut) -> io::Result<()> {
        let peers = || {
            let others: Vec<String> = (1..=self.made.len() as u8)
                .filter(|&p| p != id)
                .map(|p| self.ip(p).to_string())
                .collect();
            others.join(", ")
        };
        let (input, output) = match cut {
            Cut::All => ("drop".to_string(), "drop".to_string()),
            Cut::Inbound => ("drop".to_string(), "accept".to_string()),
            Cut::Peers => ("accept".to_string(), "accept".to_string()),
        };
        let mut script = format!(
            "add table inet cut; \
             add chain inet cut in {{ type filter hook input priority 0; policy {input}; }}; \
             add chain inet cut out {{ type filter hook output priority 0; policy {output}; }}; \
             add rule inet cut in iif lo accept; add rule inet cut out oif lo accept"
        );
        if cut == Cut::Inbound {
            // One way: what the node sends goes, and the answers to the
            // connections it opened come back; nothing else comes in
            // (no new connection, nothing on one a peer opened).
            script.push_str("; add rule inet cut in ct direction reply accept");
        }
        if cut == Cut::Peers {
            let p = peers();
            script.push_str(&format!(
                "; add rule inet cut in ip saddr {{ {p} }} drop; \
                 add rule inet cut out ip daddr {{ {p} }} drop"
            ));
        }
        self.nft_in(id, &script)
    }

    /// Undo [`Net::cut`].
    pub fn heal(&self, id: u8) -> io::Result<()> {
        self.nft_in(id, "delete table inet cut")
    }

    fn nft_in(&self, id: u8, script: &str) -> io::Result<()> {
        run(&["ip", "netns", "exec", &self.ns(id), "nft", script])
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // Deleting a namespace deletes its veth end, and so the pair.
        for ns in self.made.drain(..) {
            let _ = run(&["ip", "netns", "del", &ns]);
        }
        if let Some(b) = self.bridge.take() {
            let _ = run(&["ip", "link", "del", &b]);
        }
    }
}
