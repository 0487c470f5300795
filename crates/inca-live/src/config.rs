//! What `inca node --config FILE` reads: one device and its ports, in the
//! same vocabulary as scenario files.
//!
//! ```toml
//! name = "sw1"
//! seed = 1
//! metrics = "127.0.0.1:9100"      # Prometheus text on this address (optional)
//! capture_dir = "captures"        # a pcap per port (optional)
//!
//! [device]
//! kind = "switch"                 # or "router"
//! profile = "tofino"
//! program = "nat"
//! params = { flows = 65536, outside_port = 0 }
//!
//! [[port]]
//! id = 0
//! interface = "veth-sw1-0"        # AF_PACKET on a Linux interface (root)
//!
//! [[port]]
//! id = 1
//! udp = { local = "127.0.0.1:40001", peer = "127.0.0.1:40002" }
//! link = { rate = "10Mbps", delay = "2ms", loss = 0.1 }   # optional
//! ingress_link = { delay = "2ms" }   # optional: what the peer sends
//!
//! session_listen = "127.0.0.1:7700"   # control sessions (TCP) listen here
//! [[session]]
//! id = 1                          # what the devices call it
//! peer = "127.0.0.1:7701"         # the peer node's session_listen
//! ```
//!
//! A port's `link` is a scenario link's model (the fields of a `[[link]]`
//! but its ends, name and capture) applied to what the port sends: see
//! [`crate::link`]. `ingress_link` is the same for what the peer sends,
//! applied as it arrives: for a peer that is no `inca node` and so models
//! nothing itself (a host of the testbed).
//!
//! (`session_listen`, like the other top-level keys, goes before the first
//! table in a real file.) See [`crate::session`] for how sessions connect.
//!
//! A system's device (state store, DRAM server) is `kind = "server"` with
//! `server = "redplane_store"`, `ip`, `params` and `neighbours` as a router's.
//!
//! A traffic generator is `kind = "host"` with the host's scenario settings
//! under `config` (`[device.config]`, `[[device.config.workload]]`).
//!
//! A router's routes are listed with its device:
//! `routes = [{ prefix = "10.0.0.0/8", ports = [1] }]`, and its neighbours'
//! MAC addresses (what it writes as destination) with
//! `neighbours = [{ port = 1, mac = "02:00:00:00:00:01" }]`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use inca_sim::scenario::LinkParams;
use serde::{Deserialize, Serialize};

/// One live node. See the module documentation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// The node's name (logs, metrics).
    pub name: String,
    /// Seed of the device's RNG.
    #[serde(default = "one")]
    pub seed: u64,
    /// Serve counters in Prometheus text format on this address.
    #[serde(default)]
    pub metrics: Option<SocketAddr>,
    /// Write a pcap per port into this folder.
    #[serde(default)]
    pub capture_dir: Option<PathBuf>,
    /// The device.
    pub device: DeviceSpec,
    /// Its ports.
    #[serde(default, rename = "port")]
    pub ports: Vec<PortSpec>,
    /// Where its control sessions listen (needed if it has any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_listen: Option<SocketAddr>,
    /// Its control sessions.
    #[serde(default, rename = "session", skip_serializing_if = "Vec::is_empty")]
    pub sessions: Vec<SessionSpec>,
}

/// A control session of a live node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionSpec {
    /// The id both ends' devices use.
    pub id: u32,
    /// The peer node's `session_listen` address.
    pub peer: SocketAddr,
}

fn one() -> u64 {
    1
}

/// Which device a node runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum DeviceSpec {
    /// A programmable switch running a program from the app catalog.
    Switch {
        /// Device profile.
        #[serde(default = "tofino")]
        profile: String,
        /// Program name.
        program: String,
        /// Program parameters.
        #[serde(default)]
        params: BTreeMap<String, toml::Value>,
        /// Profile model inputs to override.
        #[serde(default)]
        profile_set: BTreeMap<String, toml::Value>,
    },
    /// An ECMP router.
    Router {
        /// Routes.
        #[serde(default)]
        routes: Vec<RouteSpec>,
        /// MAC of the device at the other end of each port.
        #[serde(default)]
        neighbours: Vec<NeighbourSpec>,
        /// Failure-detection delay, ns.
        #[serde(default)]
        detect_delay: Option<u64>,
    },
    /// A device a system supplies (a RedPlane state-store server, a TEA DRAM
    /// server), as a scenario's `[[server]]`: `server` names the kind.
    Server {
        /// The kind of server (`redplane_store`, `tea_dram`).
        server: String,
        /// Its IPv4 address.
        ip: std::net::Ipv4Addr,
        /// Its configuration, in the device's own vocabulary.
        #[serde(default)]
        params: toml::Table,
        /// MAC of the device at the other end of each port (default
        /// broadcast).
        #[serde(default)]
        neighbours: Vec<NeighbourSpec>,
    },
    /// A host: a traffic generator or sink (the simulator's `Host`, with
    /// its workloads), on port 0.
    Host {
        /// The host's settings as in a scenario's `[[host]]` (`ip`,
        /// `workload`s, `tcp`), kept as TOML and read when the node starts.
        config: toml::Value,
        /// The host's MAC (default 02:00:00:00:00:01).
        #[serde(default)]
        mac: Option<String>,
        /// The MAC it sends to (default broadcast).
        #[serde(default)]
        gateway_mac: Option<String>,
        /// Its link rate for `rate = "line"` workloads, e.g. "10Gbps"
        /// (default 10 Gbps).
        #[serde(default)]
        link_rate: Option<String>,
    },
}

fn tofino() -> String {
    "tofino".into()
}

/// A router's route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSpec {
    /// `a.b.c.d/len`.
    pub prefix: String,
    /// The equal-cost ports.
    pub ports: Vec<u16>,
}

/// The MAC at the other end of a router port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NeighbourSpec {
    /// The port.
    pub port: u16,
    /// `aa:bb:cc:dd:ee:ff`.
    pub mac: String,
}

/// One port and what it is bound to: exactly one of `udp` and `interface`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortSpec {
    /// The device's port number.
    pub id: u16,
    /// A UDP point-to-point link.
    #[serde(default)]
    pub udp: Option<UdpSpec>,
    /// A Linux interface (AF_PACKET).
    #[serde(default)]
    pub interface: Option<String>,
    /// The scenario link model applied to what this port sends (a
    /// scenario link's fields: `rate`, `delay`, `queue`, `loss`,
    /// `duplicate`, `reorder`, `reorder_delay`, `jitter`); see
    /// [`crate::link`]. Absent: frames go out as the device sends them.
    #[serde(
        default,
        deserialize_with = "de_link",
        skip_serializing_if = "Option::is_none"
    )]
    pub link: Option<LinkParams>,
    /// The same for what the peer sends, applied as its frames arrive,
    /// before the device sees them: for a peer that is not an `inca node`
    /// (the testbed's hosts are Linux interfaces).
    #[serde(
        default,
        deserialize_with = "de_link",
        skip_serializing_if = "Option::is_none"
    )]
    pub ingress_link: Option<LinkParams>,
}

/// A port's `link` table, checked as it is read (so a bad probability is
/// reported with its line, as a misspelt key is).
fn de_link<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<LinkParams>, D::Error> {
    let params = LinkParams::deserialize(d)?;
    params.channel().map_err(serde::de::Error::custom)?;
    Ok(Some(params))
}

/// The two ends of a UDP link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UdpSpec {
    /// Our address.
    pub local: SocketAddr,
    /// The peer's address.
    pub peer: SocketAddr,
}

impl NodeConfig {
    /// Parses a node configuration; errors name the field and line.
    pub fn from_toml(text: &str) -> Result<NodeConfig, String> {
        let c: NodeConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        for p in &c.ports {
            if p.udp.is_some() == p.interface.is_some() {
                return Err(format!(
                    "port {}: give exactly one of `udp` and `interface`",
                    p.id
                ));
            }
        }
        let mut ids: Vec<u16> = c.ports.iter().map(|p| p.id).collect();
        ids.sort_unstable();
        if ids.windows(2).any(|w| w[0] == w[1]) {
            return Err("two ports have the same id".into());
        }
        if !c.sessions.is_empty() && c.session_listen.is_none() {
            return Err("session: a node with control sessions needs `session_listen`".into());
        }
        let mut ids: Vec<u32> = c.sessions.iter().map(|s| s.id).collect();
        ids.sort_unstable();
        if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("session: two sessions have id {}", w[0]));
        }
        for s in &c.sessions {
            if Some(s.peer) == c.session_listen {
                return Err(format!(
                    "session {}: peer {} is this node's own session_listen",
                    s.id, s.peer
                ));
            }
        }
        Ok(c)
    }

    /// As TOML (what `inca testbed` writes).
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_default()
    }
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return None;
    }
    let mut mac = [0u8; 6];
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16).ok()?;
    }
    Some(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example_and_round_trips() {
        let text = r#"
name = "sw1"
metrics = "127.0.0.1:9100"
[device]
kind = "switch"
program = "nat"
params = { flows = 1024, outside_port = 0 }
[[port]]
id = 0
interface = "veth0"
[[port]]
id = 1
udp = { local = "127.0.0.1:40001", peer = "127.0.0.1:40002" }
"#;
        let c = NodeConfig::from_toml(text).unwrap();
        assert_eq!(c.ports.len(), 2);
        assert_eq!(NodeConfig::from_toml(&c.to_toml()).unwrap(), c);
        assert!(NodeConfig::from_toml(&text.replace("interface = \"veth0\"", "")).is_err());
        let bad = NodeConfig::from_toml(&text.replace("program", "progrm")).unwrap_err();
        assert!(bad.contains("progrm") && bad.contains("line"), "{bad}");
        assert_eq!(parse_mac("02:00:00:00:00:0a"), Some([2, 0, 0, 0, 0, 10]));
        let with_sessions = text.replace(
            "[device]",
            "session_listen = \"127.0.0.1:7700\"\n[[session]]\nid = 1\npeer = \"127.0.0.1:7701\"\n[device]",
        );
        let c = NodeConfig::from_toml(&with_sessions).unwrap();
        assert_eq!(c.sessions[0].id, 1);
        assert_eq!(NodeConfig::from_toml(&c.to_toml()).unwrap(), c);
        let e = NodeConfig::from_toml(&with_sessions.replace("session_listen", "# ")).unwrap_err();
        assert!(e.contains("session_listen"), "{e}");
        let e = NodeConfig::from_toml(&with_sessions.replace("peer", "pear")).unwrap_err();
        assert!(e.contains("pear") && e.contains("line"), "{e}");
        assert_eq!(parse_mac("02:00"), None);
    }

    #[test]
    fn a_port_link_reads_the_scenario_vocabulary_and_bad_fields_name_their_line() {
        let text = r#"
name = "r"
[device]
kind = "router"
[[port]]
id = 0
udp = { local = "127.0.0.1:40001", peer = "127.0.0.1:40002" }
link = { rate = "10Mbps", delay = "2ms", loss = 0.1, queue = "64KiB" }
"#;
        let c = NodeConfig::from_toml(text).unwrap();
        let link = c.ports[0].link.clone().unwrap();
        let ch = link.channel().unwrap();
        assert_eq!(
            (ch.rate_bps, ch.delay, ch.queue_bytes),
            (10_000_000, 2_000_000, 65536)
        );
        assert_eq!(ch.loss, inca_sim::link::LossModel::Bernoulli { p: 0.1 });
        // Written back as numbers, read back the same.
        assert_eq!(NodeConfig::from_toml(&c.to_toml()).unwrap(), c);
        for (bad, field) in [
            ("loss = 0.1", "loss = 1.5"),
            ("delay = \"2ms\"", "delay = \"2 parsecs\""),
            ("rate = \"10Mbps\"", "rate = 0"),
            ("queue", "queu"),
        ] {
            let e = NodeConfig::from_toml(&text.replace(bad, field)).unwrap_err();
            assert!(e.contains("line 8"), "{field}: {e}");
        }
        let e = NodeConfig::from_toml(&text.replace("loss = 0.1", "duplicate = 2.0")).unwrap_err();
        assert!(e.contains("duplicate") && e.contains("line 8"), "{e}");
    }
}
