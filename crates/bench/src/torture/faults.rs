//! A real network's faults for `ringkit torture --faults PROFILE`.
//!
//! The server runs in a network namespace of its own, joined to this one by
//! a veth pair (`10.99.K.1` here, `10.99.K.2` in there), so its traffic
//! crosses a link that can misbehave. This kernel has no netem; the faults
//! come from what it has:
//!
//! - **loss** (`loss1`, `loss5`): nftables in the server's namespace drops
//!   that share of packets at random (`numgen random`), on input and output
//!   of its veth end, so both directions lose packets;
//! - **slow** (`slow`): a token bucket (`tc tbf`, 10 Mbit/s) on both ends;
//! - **delay**, **slice**, **reset**: a fault proxy ([`super::proxy`]) in
//!   this process between the clients and the server: 20 ms ± 5 ms per
//!   chunk each way (order kept), bytes forwarded in 1 to 16-byte segments,
//!   or connections reset mid-stream;
//! - **silent** (`silent`): after the chaos, peers that go silent mid-
//!   transfer (every packet dropped, no FIN, no RST; [`super::silent`]):
//!   the server must free their connections within its timeouts.
//!
//! Needs root, `ip` (iproute2), `nft` (nftables) and `tc`. The namespace
//! (and with it the veth pair and its rules) is deleted on drop.

use std::io;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::time::Duration;

use serde::Serialize;

/// What goes wrong on the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum FaultProfile {
    /// 1% of packets dropped, each direction.
    Loss1,
    /// 5% of packets dropped, each direction.
    Loss5,
    /// 20 ms ± 5 ms added to every chunk, each direction (proxy).
    Delay,
    /// A 10 Mbit/s link (tbf on both ends).
    Slow,
    /// Bytes forwarded in 1 to 16-byte segments (proxy).
    Slice,
    /// Some connections reset mid-stream (proxy).
    Reset,
    /// Peers that go silent mid-transfer: 100% drop, after the chaos.
    Silent,
}

impl FaultProfile {
    /// Every profile, in the order the long run takes them.
    pub const ALL: [FaultProfile; 7] = [
        FaultProfile::Loss1,
        FaultProfile::Loss5,
        FaultProfile::Delay,
        FaultProfile::Slow,
        FaultProfile::Slice,
        FaultProfile::Reset,
        FaultProfile::Silent,
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            FaultProfile::Loss1 => "loss1",
            FaultProfile::Loss5 => "loss5",
            FaultProfile::Delay => "delay",
            FaultProfile::Slow => "slow",
            FaultProfile::Slice => "slice",
            FaultProfile::Reset => "reset",
            FaultProfile::Silent => "silent",
        }
    }

    /// The proxy's faults, when the profile is made by the proxy.
    pub fn toxics(self) -> Option<super::proxy::Toxics> {
        use super::proxy::Toxics;
        match self {
            FaultProfile::Delay => Some(Toxics {
                delay: Some((Duration::from_millis(20), Duration::from_millis(5))),
                ..Toxics::default()
            }),
            FaultProfile::Slice => Some(Toxics {
                slice: Some(16),
                ..Toxics::default()
            }),
            FaultProfile::Reset => Some(Toxics {
                reset_per_mille: 30,
                ..Toxics::default()
            }),
            _ => None,
        }
    }
}

impl FromStr for FaultProfile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        FaultProfile::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown fault profile {s:?}: {}",
                    FaultProfile::ALL.map(FaultProfile::name).join(", ")
                )
            })
    }
}

/// Run a command; its stderr in the error.
fn sh(args: &[&str]) -> io::Result<()> {
    sh_input(args, None)
}

fn sh_input(args: &[&str], input: Option<&str>) -> io::Result<()> {
    use std::io::Write as _;
    let mut c = Command::new(args[0]);
    c.args(&args[1..])
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = c
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot run {}: {e}", args[0])))?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(text.as_bytes())?;
    }
    let o = child.wait_with_output()?;
    if o.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        )))
    }
}

/// Why network faults cannot run here, if they cannot.
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("network namespaces and nftables need root".into());
    }
    for (tool, pkg) in [("ip", "iproute2"), ("nft", "nftables"), ("tc", "iproute2")] {
        let found = Command::new(tool)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !found {
            return Some(format!("{tool} not found (apt-get install -y {pkg})"));
        }
    }
    None
}

/// The server's namespace and the veth pair to it; deleted on drop.
#[derive(Debug)]
pub struct Net {
    /// Namespace name.
    pub ns: String,
    /// The veth end in this namespace.
    host_if: String,
    /// The veth end in the server's namespace.
    ns_if: String,
    /// The server's address (in its namespace).
    pub server_ip: Ipv4Addr,
}

impl Net {
    /// Create the namespace and the link (`tag` keeps concurrent runs apart).
    pub fn create(tag: u32) -> io::Result<Net> {
        // A /30 no other link here uses (runs at once must not share one).
        let used = Command::new("ip")
            .args(["-o", "-4", "addr", "show"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let k = (0..250)
            .map(|i| (tag + i) % 250 + 1)
            .find(|k| !used.contains(&format!("10.99.{k}.")))
            .ok_or_else(|| io::Error::other("no free 10.99.K.0/30 for the fault link"))?;
        let ns = format!("rkfault{tag}");
        let host_if = format!("rkh{tag}");
        let ns_if = format!("rkn{tag}");
        // A namespace left by a killed run of the same tag goes first.
        let _ = sh(&["ip", "netns", "del", &ns]);
        sh(&["ip", "netns", "add", &ns])?;
        let net = Net {
            ns: ns.clone(),
            host_if: host_if.clone(),
            ns_if: ns_if.clone(),
            server_ip: Ipv4Addr::new(10, 99, k as u8, 2),
        };
        sh(&[
            "ip", "link", "add", &host_if, "type", "veth", "peer", "name", &ns_if, "netns", &ns,
        ])?;
        sh(&[
            "ip",
            "addr",
            "add",
            &format!("10.99.{k}.1/30"),
            "dev",
            &host_if,
        ])?;
        sh(&["ip", "link", "set", &host_if, "up"])?;
        sh(&[
            "ip",
            "-n",
            &ns,
            "addr",
            "add",
            &format!("10.99.{k}.2/30"),
            "dev",
            &ns_if,
        ])?;
        sh(&["ip", "-n", &ns, "link", "set", &ns_if, "up"])?;
        sh(&["ip", "-n", &ns, "link", "set", "lo", "up"])?;
        Ok(net)
    }

    /// `cmd` run inside the server's namespace (`ip netns exec` execs it,
    /// so the pid is the program's).
    pub fn wrap(&self, cmd: Vec<String>) -> Vec<String> {
        let mut v: Vec<String> = ["ip", "netns", "exec", &self.ns]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(cmd);
        v
    }

    /// Drop `percent`% of the packets crossing the link, both directions
    /// (100: every packet), replacing any earlier drop rule.
    pub fn drop_packets(&self, percent: u32) -> io::Result<()> {
        self.clear_drops();
        let verdict = if percent >= 100 {
            "drop".to_string()
        } else {
            format!("numgen random mod 100 < {percent} drop")
        };
        let rules = format!(
            "table inet rkfault {{\n\
             chain in {{ type filter hook input priority 0; policy accept; iifname \"{i}\" {verdict}; }}\n\
             chain out {{ type filter hook output priority 0; policy accept; oifname \"{i}\" {verdict}; }}\n\
             }}\n",
            i = self.ns_if
        );
        sh_input(
            &["ip", "netns", "exec", &self.ns, "nft", "-f", "-"],
            Some(&rules),
        )
    }

    /// Remove the drop rule, if any.
    pub fn clear_drops(&self) {
        let _ = sh(&[
            "ip", "netns", "exec", &self.ns, "nft", "delete", "table", "inet", "rkfault",
        ]);
    }

    /// Limit the link to `mbit` Mbit/s each way (tbf on both ends).
    pub fn rate_limit(&self, mbit: u32) -> io::Result<()> {
        let rate = format!("{mbit}mbit");
        let tbf = ["tbf", "rate", &rate, "burst", "32kbit", "latency", "400ms"];
        let mut host = vec!["tc", "qdisc", "replace", "dev", &self.host_if, "root"];
        host.extend(tbf);
        sh(&host)?;
        let mut inner = vec![
            "ip",
            "netns",
            "exec",
            &self.ns,
            "tc",
            "qdisc",
            "replace",
            "dev",
            &self.ns_if,
            "root",
        ];
        inner.extend(tbf);
        sh(&inner)
    }

    /// Apply `p`'s link faults (the proxy's and the silent phase's are not
    /// link rules).
    pub fn apply(&self, p: FaultProfile) -> io::Result<()> {
        match p {
            FaultProfile::Loss1 => self.drop_packets(1),
            FaultProfile::Loss5 => self.drop_packets(5),
            FaultProfile::Slow => self.rate_limit(10),
            _ => Ok(()),
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // Deleting the namespace deletes its veth end, and with it the pair.
        let _ = sh(&["ip", "netns", "del", &self.ns]);
        let _ = sh(&["ip", "link", "del", &self.host_if]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_by_name() {
        for p in FaultProfile::ALL {
            assert_eq!(p.name().parse::<FaultProfile>(), Ok(p));
        }
        assert!("netem"
            .parse::<FaultProfile>()
            .unwrap_err()
            .contains("loss5"));
        assert!(FaultProfile::Delay.toxics().is_some());
        assert!(FaultProfile::Loss5.toxics().is_none());
    }
}
