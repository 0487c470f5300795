//! The testbed behind `inca testbed up|down|status|crash SCENARIO`: a
//! scenario's topology built live on this machine (root only), so real TCP
//! stacks and tools run through inca's devices.
//!
//! - every **host** becomes a network namespace `inca-<testbed>-<host>` with
//!   one veth pair: `eth0` inside (the scenario's address and prefix, a
//!   default route through a gateway address of its subnet, static
//!   neighbour entries), the other end in the root namespace;
//! - every **switch** and **router** becomes an `inca node --config FILE`
//!   process whose ports are bound (AF_PACKET) to root-namespace veth ends;
//!   a link between two of them is a veth pair with both ends in the root
//!   namespace, MTU [`NODE_MTU`]; every **server** (state store, DRAM
//!   server) is such a process too, and a /32 destination for routing;
//! - **MAC addresses**: switch programs (the NAT, say) forward frames without
//!   rewriting Ethernet addresses, and Linux drops frames that are not
//!   addressed to it. So every host's `eth0` has the same MAC,
//!   [`HOST_MAC`] (allowed: each is alone on its own L2 segment), and every
//!   host's gateway and on-link neighbours resolve statically to it: a
//!   frame a host sends is addressed to whichever host receives it. Routers
//!   rewrite MACs; their neighbour on every port is [`HOST_MAC`] too.
//!
//! The testbed's name is the scenario file's stem (lowercase, anything but
//! letters, digits and `-` replaced by `-`). `up` records everything it
//! creates, as it creates it, in `<dir>/<name>.json` (`dir` is
//! `/run/inca-testbed`, or `$INCA_TESTBED_DIR`); node configurations and logs
//! go to `<dir>/<name>/`. `down` stops exactly the recorded processes and
//! deletes exactly the recorded interfaces and namespaces, then the state
//! file (configurations and logs stay). A failing `up` undoes what it
//! created before reporting. `crash` kills one node's process group and
//! sets its interfaces down, so its neighbours lose carrier (inca-live
//! turns that into `Input::LinkState`).
//!
//! - **management**: every node serves metrics, and the scenario's
//!   `[[session]]`s become its nodes' control sessions (TCP), on the
//!   testbed's own loopback address ([`management_ip`]); smart NICs are
//!   switch processes on the `smartnic` profile;
//! - `restart` brings a crashed node back afresh (interfaces up, a new
//!   process with the same configuration).
//!
//! Routers get the routes [`Loaded::build`] computes for the simulator
//! (shortest paths in hops, never through a host, all equal-cost next hops);
//! [`routes`] is the same computation as a pure function, since the
//! simulator's routes live inside its `Router`s.
//!
//! **Links**: a scenario link that sets any of `rate`, `delay`, `queue`,
//! `loss`, `duplicate`, `reorder`, `reorder_delay`, `jitter` (itself or
//! through `[defaults.link]`) gets the simulator's channel model on the
//! egress of each node port it joins (`link` in the node configuration,
//! applied by the runner: [`crate::link`]), so a link between two nodes is
//! modelled in both directions, as in the simulator. What a host sends
//! leaves a Linux interface, not a runner, so the host → node direction of
//! a host's link is the same channel on the node port's ingress
//! (`ingress_link`). `tc netem`/`tbf` on the host's `eth0` would be the
//! kernel's way, but the kernels this runs on need not have those qdiscs
//! (the development VM has neither), so the testbed does not rely on them.
//!
//! Not applied live: faults, host workloads (run real tools in the
//! namespaces instead) and router forwarding latency.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::config::{DeviceSpec, NeighbourSpec, NodeConfig, PortSpec, RouteSpec, SessionSpec};
use anyhow::{anyhow, bail, Context, Result};
use inca_sim::scenario::{next_hops_any, parse_prefix, Loaded, Scenario, SwitchFactory};
use serde::{Deserialize, Serialize};

/// The MAC address of every host's interface (see the module docs).
pub const HOST_MAC: &str = "02:00:00:00:00:01";
/// The interface of a host, inside its namespace.
pub const HOST_IF: &str = "eth0";
/// MTU of veth pairs between two nodes. [our choice] Jumbo (the fabric
/// inside a data centre usually is): systems encapsulate whole packets in
/// their own messages (a RedPlane LEASE_NEW carries the packet that asked,
/// 43 bytes more than a full-size frame), and a 1500-byte veth drops them.
/// Host interfaces keep 1500, so TCP segments stay full-size.
pub const NODE_MTU: u32 = 9000;
/// Where state files go unless `INCA_TESTBED_DIR` says otherwise.
pub const DEFAULT_DIR: &str = "/run/inca-testbed";
/// Node `i`'s control sessions listen on this port plus `i` of the
/// testbed's [`management_ip`] (spec exoplane §4.6: the hub on 7700).
pub const SESSION_PORT: u16 = 7700;
/// Node `i`'s metrics endpoint is this port plus `i`.
pub const METRICS_PORT: u16 = 9100;
/// Nodes a testbed numbers management ports for (the two ranges stay
/// apart).
pub const MAX_NODES: usize = 1000;

/// The effective user id, from `/proc/self/status`.
fn euid() -> Option<u32> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// Fails unless running as root (what `up`, `down` and `crash` need).
pub fn need_root() -> Result<()> {
    if euid() != Some(0) {
        bail!("needs root (network namespaces, veth pairs, AF_PACKET sockets): run it with sudo");
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Names

/// The testbed name of a scenario file: its stem, sanitised.
pub fn testbed_name(scenario: &Path) -> String {
    let stem = scenario
        .file_stem()
        .map_or("scenario".into(), |s| s.to_string_lossy().into_owned());
    let mut name: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(32)
        .collect();
    if name.is_empty() {
        name = "scenario".into();
    }
    name
}

/// The namespace of `host` in testbed `name`.
pub fn namespace(name: &str, host: &str) -> String {
    format!("inca-{name}-{host}")
}

/// FNV-1a of a testbed name: stable across Rust versions, unlike the std
/// hasher.
fn name_hash(name: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The root-namespace interface names of testbed `name` start with this:
/// `i` and six hex digits of a hash of the name (interface names have at
/// most 15 characters).
pub fn interface_prefix(name: &str) -> String {
    format!("i{:06x}", name_hash(name) & 0xff_ffff)
}

/// The testbed's management address: its nodes' control sessions and
/// metrics endpoints listen here. [our choice] A loopback address of its
/// own, `127.a.b.c` from the same hash as [`interface_prefix`] (the whole
/// of 127/8 is local on Linux), so two testbeds' fixed port numbers do
/// not collide and no management network needs building: node processes
/// all run in the root namespace.
pub fn management_ip(name: &str) -> Ipv4Addr {
    let h = name_hash(name) & 0xff_ffff;
    let [_, a, b, c] = h.to_be_bytes();
    Ipv4Addr::new(127, a, b, 1 + c % 254)
}

fn state_dir() -> PathBuf {
    std::env::var_os("INCA_TESTBED_DIR").map_or_else(|| PathBuf::from(DEFAULT_DIR), PathBuf::from)
}

fn state_file(name: &str) -> PathBuf {
    state_dir().join(format!("{name}.json"))
}

// ---------------------------------------------------------------------------
// The plan: what to create, computed from the scenario alone (no root, no
// side effects), so it can be tested anywhere.

/// A host's namespace and interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPlan {
    /// Scenario name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// Address.
    pub ip: Ipv4Addr,
    /// Prefix length.
    pub prefix_len: u8,
    /// Default gateway (a neighbour entry points it at [`HOST_MAC`]).
    pub gateway: Ipv4Addr,
    /// Other addresses of the subnet with a static neighbour entry (the
    /// gateway and the other hosts in the subnet).
    pub neighbours: Vec<Ipv4Addr>,
    /// The root-namespace end of its veth pair.
    pub root_if: String,
}

/// What `up` creates for a scenario.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Testbed name.
    pub name: String,
    /// Hosts.
    pub hosts: Vec<HostPlan>,
    /// veth pairs between two nodes (both ends in the root namespace).
    pub pairs: Vec<(String, String)>,
    /// One configuration per switch and router.
    pub nodes: Vec<NodeConfig>,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Kind {
    Switch,
    Router,
    Host,
    /// A system's device (state store, DRAM server): an `inca node`
    /// process like a switch, but an endpoint for routing like a host.
    Server,
}

/// The scenario's nodes in simulator order (switches, routers, hosts) and
/// its links resolved to (node index, port) pairs.
struct Topology {
    names: Vec<String>,
    kinds: Vec<Kind>,
    links: Vec<((usize, u16), (usize, u16))>,
}

fn topology(sc: &Scenario) -> Result<Topology> {
    let mut names = Vec::new();
    let mut kinds = Vec::new();
    for s in &sc.switch {
        names.push(s.name.get_ref().clone());
        kinds.push(Kind::Switch);
    }
    for r in &sc.router {
        names.push(r.name.get_ref().clone());
        kinds.push(Kind::Router);
    }
    for h in &sc.host {
        let name = h
            .name
            .as_ref()
            .ok_or_else(|| anyhow!("host {}: every host needs a name", h.ip))?;
        names.push(name.get_ref().clone());
        kinds.push(Kind::Host);
    }
    for s in &sc.server {
        names.push(s.name.get_ref().clone());
        kinds.push(Kind::Server);
    }
    let index = |end: &str| -> Result<(usize, u16)> {
        let (n, p) = end
            .split_once(':')
            .ok_or_else(|| anyhow!("link end {end:?}: write node:port"))?;
        let i = names
            .iter()
            .position(|x| x == n.trim())
            .ok_or_else(|| anyhow!("link end {end:?}: no such node"))?;
        let p: u16 = p
            .trim()
            .parse()
            .map_err(|_| anyhow!("link end {end:?}: bad port"))?;
        Ok((i, p))
    };
    let mut links = Vec::new();
    for l in &sc.link {
        links.push((index(l.a.get_ref())?, index(l.b.get_ref())?));
    }
    Ok(Topology {
        names,
        kinds,
        links,
    })
}

/// Every router's routes, as `inca run` computes them: for every host
/// address (/32) and every prefix a switch announces, the shortest paths in
/// hops (never through a host), all equal-cost next-hop ports as the group;
/// a prefix several switches announce is one route to the nearest of them.
/// Keyed by router name; routes in destination order (hosts, servers, then
/// announcements, in file order).
pub fn routes(sc: &Scenario) -> Result<BTreeMap<String, Vec<RouteSpec>>> {
    let t = topology(sc)?;
    let mut adj: BTreeMap<usize, Vec<(u16, usize)>> = BTreeMap::new();
    for &((a, pa), (b, pb)) in &t.links {
        adj.entry(a).or_default().push((pa, b));
        adj.entry(b).or_default().push((pb, a));
    }
    // Destinations with the nodes that stand for them. A prefix several
    // switches announce is one route towards the nearest of them (anycast),
    // as in the simulator; first appearance fixes the order.
    let mut destinations: Vec<(String, Vec<usize>)> = Vec::new();
    let mut add =
        |prefix: String, node: usize| match destinations.iter_mut().find(|(p, _)| *p == prefix) {
            Some((_, nodes)) => nodes.push(node),
            None => destinations.push((prefix, vec![node])),
        };
    let first_host = sc.switch.len() + sc.router.len();
    for (i, h) in sc.host.iter().enumerate() {
        add(format!("{}/32", h.ip), first_host + i);
    }
    let first_server = first_host + sc.host.len();
    for (i, s) in sc.server.iter().enumerate() {
        add(format!("{}/32", s.ip.get_ref()), first_server + i);
    }
    for (i, s) in sc.switch.iter().enumerate() {
        for a in &s.announce {
            let (ip, len) = parse_prefix(a.get_ref())
                .ok_or_else(|| anyhow!("announce {:?} is not a.b.c.d/len", a.get_ref()))?;
            add(format!("{}/{len}", Ipv4Addr::from(ip)), i);
        }
    }
    let mut out: BTreeMap<String, Vec<RouteSpec>> = BTreeMap::new();
    for r in &sc.router {
        out.insert(r.name.get_ref().clone(), Vec::new());
    }
    for (prefix, dests) in &destinations {
        // The same shortest paths `inca run` gives its routers.
        let endpoint = |n: usize| matches!(t.kinds[n], Kind::Host | Kind::Server);
        let hops = next_hops_any(&adj, endpoint, dests);
        for (r, kind) in t.kinds.iter().enumerate() {
            if let (Kind::Router, Some(ports)) = (kind, hops.get(&r)) {
                out.get_mut(&t.names[r])
                    .expect("every router has an entry")
                    .push(RouteSpec {
                        prefix: prefix.clone(),
                        ports: ports.clone(),
                    });
            }
        }
    }
    Ok(out)
}

/// The gateway of a host without one in the scenario: the last address of
/// its subnet before the broadcast (x.y.z.254 in a /24), or the one below
/// if that is the host.
pub fn default_gateway(ip: Ipv4Addr, prefix_len: u8) -> Option<Ipv4Addr> {
    if !(1..=30).contains(&prefix_len) {
        return None;
    }
    let mask = u32::MAX << (32 - prefix_len);
    let broadcast = (u32::from(ip) & mask) | !mask;
    let gw = if broadcast - 1 == u32::from(ip) {
        broadcast - 2
    } else {
        broadcast - 1
    };
    Some(Ipv4Addr::from(gw))
}

fn same_subnet(a: Ipv4Addr, b: Ipv4Addr, prefix_len: u8) -> bool {
    let mask = u32::MAX
        .checked_shl(32 - u32::from(prefix_len))
        .unwrap_or(0);
    u32::from(a) & mask == u32::from(b) & mask
}

/// What `up` will create for scenario `sc` as testbed `name`.
pub fn plan(sc: &Scenario, name: &str, capture_dir: Option<&Path>) -> Result<Plan> {
    let t = topology(sc)?;
    let prefix = interface_prefix(name);
    let mut ports: BTreeMap<usize, Vec<PortSpec>> = BTreeMap::new();
    let mut host_if: BTreeMap<usize, String> = BTreeMap::new();
    let mut pairs = Vec::new();
    for (k, &((a, pa), (b, pb))) in t.links.iter().enumerate() {
        // The scenario's link model, on each node's egress (see the
        // module docs for the direction a host sends).
        let params = sc.link[k].params().over(&sc.defaults.link);
        let link = (!params.is_empty()).then_some(params);
        let port = |id: u16, interface: String| PortSpec {
            id,
            udp: None,
            interface: Some(interface),
            link: link.clone(),
            ingress_link: None,
        };
        match (t.kinds[a] == Kind::Host, t.kinds[b] == Kind::Host) {
            (true, true) => bail!(
                "link {}-{}: a link between two hosts is not supported live",
                t.names[a],
                t.names[b]
            ),
            (false, false) => {
                let (ia, ib) = (format!("{prefix}-{k}a"), format!("{prefix}-{k}b"));
                ports.entry(a).or_default().push(port(pa, ia.clone()));
                ports.entry(b).or_default().push(port(pb, ib.clone()));
                pairs.push((ia, ib));
            }
            (ah, _) => {
                let ((h, hp), (n, np)) = if ah {
                    ((a, pa), (b, pb))
                } else {
                    ((b, pb), (a, pa))
                };
                if hp != 0 {
                    bail!(
                        "host {} is linked on port {hp}: hosts have one port, 0",
                        t.names[h]
                    );
                }
                if host_if.contains_key(&h) {
                    bail!("host {} is linked twice", t.names[h]);
                }
                let root = format!("{prefix}-{k}");
                // The host is a Linux interface: the node models what it
                // sends as it arrives.
                let node_port = PortSpec {
                    ingress_link: link.clone(),
                    ..port(np, root.clone())
                };
                ports.entry(n).or_default().push(node_port);
                host_if.insert(h, root);
            }
        }
    }

    let first_host = sc.switch.len() + sc.router.len();
    let mut hosts = Vec::new();
    for (i, h) in sc.host.iter().enumerate() {
        let hname = &t.names[first_host + i];
        let gateway = match h.gateway {
            Some(g) => g,
            None => default_gateway(h.ip, h.prefix_len).ok_or_else(|| {
                anyhow!(
                    "host {hname}: prefix_len {} leaves no gateway address: use 1..=30",
                    h.prefix_len
                )
            })?,
        };
        let mut neighbours = vec![gateway];
        for other in &sc.host {
            if other.ip != h.ip
                && same_subnet(other.ip, h.ip, h.prefix_len)
                && !neighbours.contains(&other.ip)
            {
                neighbours.push(other.ip);
            }
        }
        let root_if = host_if
            .get(&(first_host + i))
            .cloned()
            .ok_or_else(|| anyhow!("host {hname} is not linked to anything"))?;
        hosts.push(HostPlan {
            name: hname.clone(),
            namespace: namespace(name, hname),
            ip: h.ip,
            prefix_len: h.prefix_len,
            gateway,
            neighbours,
            root_if,
        });
    }

    let routes = routes(sc)?;
    let mut nodes = Vec::new();
    for (i, s) in sc.switch.iter().enumerate() {
        nodes.push(NodeConfig {
            name: s.name.get_ref().clone(),
            seed: sc.seed,
            metrics: None,
            capture_dir: capture_dir.map(Path::to_path_buf),
            device: DeviceSpec::Switch {
                profile: s.profile.get_ref().clone(),
                program: s.program.get_ref().clone(),
                params: s.params.clone(),
                profile_set: s.profile_set.clone(),
            },
            ports: sorted(ports.remove(&i).unwrap_or_default()),
            session_listen: None,
            sessions: Vec::new(),
        });
    }
    for (i, r) in sc.router.iter().enumerate() {
        let ports = sorted(ports.remove(&(sc.switch.len() + i)).unwrap_or_default());
        let neighbours = ports
            .iter()
            .map(|p| NeighbourSpec {
                port: p.id,
                mac: HOST_MAC.into(),
            })
            .collect();
        nodes.push(NodeConfig {
            name: r.name.get_ref().clone(),
            seed: sc.seed,
            metrics: None,
            capture_dir: capture_dir.map(Path::to_path_buf),
            device: DeviceSpec::Router {
                routes: routes.get(r.name.get_ref()).cloned().unwrap_or_default(),
                neighbours,
                detect_delay: r.detect_delay,
            },
            ports,
            session_listen: None,
            sessions: Vec::new(),
        });
    }
    let first_server = first_host + sc.host.len();
    for (i, s) in sc.server.iter().enumerate() {
        let ports = sorted(ports.remove(&(first_server + i)).unwrap_or_default());
        let neighbours = ports
            .iter()
            .map(|p| NeighbourSpec {
                port: p.id,
                mac: HOST_MAC.into(),
            })
            .collect();
        nodes.push(NodeConfig {
            name: s.name.get_ref().clone(),
            seed: sc.seed,
            metrics: None,
            capture_dir: capture_dir.map(Path::to_path_buf),
            device: DeviceSpec::Server {
                server: s.kind.get_ref().clone(),
                ip: *s.ip.get_ref(),
                params: s.params.clone(),
                neighbours,
            },
            ports,
            session_listen: None,
            sessions: Vec::new(),
        });
    }
    management(sc, name, &mut nodes)?;
    Ok(Plan {
        name: name.to_string(),
        hosts,
        pairs,
        nodes,
    })
}

/// Gives every node its metrics address and the nodes of the scenario's
/// `[[session]]`s their `session_listen` and sessions, on the testbed's
/// loopback address ([`management_ip`]): node `i` (in [`Plan::nodes`]
/// order) listens for sessions on [`SESSION_PORT`]` + i` and serves
/// metrics on [`METRICS_PORT`]` + i`. Both ends of a session list it (the
/// one with the smaller listen address dials, [`crate::session`]).
/// Session channel settings (rate, latency, loss, ...) are the
/// simulator's: live, the session is plain loopback TCP.
fn management(sc: &Scenario, name: &str, nodes: &mut [NodeConfig]) -> Result<()> {
    if nodes.len() > MAX_NODES {
        bail!(
            "{} nodes: the testbed numbers their management ports for at most {MAX_NODES}",
            nodes.len()
        );
    }
    let ip = std::net::IpAddr::V4(management_ip(name));
    for (i, n) in nodes.iter_mut().enumerate() {
        n.metrics = Some(SocketAddr::new(ip, METRICS_PORT + i as u16));
    }
    // Hosts are namespaces without an inca process: a session cannot end
    // there (None), unlike in the simulator.
    let mut names: BTreeMap<String, Option<usize>> = BTreeMap::new();
    for h in &sc.host {
        if let Some(n) = &h.name {
            names.insert(n.get_ref().clone(), None);
        }
    }
    for (i, n) in nodes.iter().enumerate() {
        names.insert(n.name.clone(), Some(i));
    }
    let declared = inca_sim::session::resolve(&sc.session, &names)
        .map_err(|(_, field, e)| anyhow!("session.{field}: {e}"))?;
    for d in declared {
        let [Some(a), Some(b)] = d.ends else {
            bail!(
                "session {}: live, a session joins two node processes (switches, smart NICs, routers, servers), not a host",
                d.name
            );
        };
        if a == b {
            bail!("session {}: both ends are node {}", d.name, nodes[a].name);
        }
        for (end, peer) in [(a, b), (b, a)] {
            let peer_listen = SocketAddr::new(ip, SESSION_PORT + peer as u16);
            let n = &mut nodes[end];
            if n.sessions.iter().any(|s| s.id == d.id.0) {
                bail!(
                    "session {}: node {} already has a session with id {}; give the sessions distinct ids",
                    d.name,
                    n.name,
                    d.id.0
                );
            }
            n.session_listen = Some(SocketAddr::new(ip, SESSION_PORT + end as u16));
            n.sessions.push(SessionSpec {
                id: d.id.0,
                peer: peer_listen,
            });
        }
    }
    Ok(())
}

fn sorted(mut ports: Vec<PortSpec>) -> Vec<PortSpec> {
    ports.sort_by_key(|p| p.id);
    ports
}

// ---------------------------------------------------------------------------
// State: what `up` created, as it created it.

/// A namespace `up` created.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NamespaceRecord {
    /// Namespace name.
    pub name: String,
    /// The host it stands for.
    pub host: String,
    /// The host's address.
    pub ip: Ipv4Addr,
}

/// A veth pair `up` created (deleting `name` deletes both ends).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InterfaceRecord {
    /// The root-namespace end.
    pub name: String,
    /// The other end (`eth0` in a namespace, or another root interface).
    pub peer: String,
    /// The namespace of the other end, if not the root one.
    pub peer_namespace: Option<String>,
}

/// A node process `up` started.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcessRecord {
    /// Node name.
    pub node: String,
    /// Its pid.
    pub pid: u32,
    /// Its configuration file.
    pub config: PathBuf,
    /// Its stdout and stderr.
    pub log: PathBuf,
    /// Its metrics endpoint (Prometheus text over HTTP), if it serves one.
    #[serde(default)]
    pub metrics: Option<SocketAddr>,
}

/// The state file of a testbed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct State {
    /// Testbed name.
    pub name: String,
    /// The scenario file `up` read.
    pub scenario: PathBuf,
    /// Node configurations and logs.
    pub dir: PathBuf,
    /// Where nodes write pcaps, if anywhere.
    pub capture_dir: Option<PathBuf>,
    /// Namespaces created.
    pub namespaces: Vec<NamespaceRecord>,
    /// veth pairs created.
    pub interfaces: Vec<InterfaceRecord>,
    /// Processes started.
    pub processes: Vec<ProcessRecord>,
}

impl State {
    fn save(&self) -> Result<()> {
        let path = state_file(&self.name);
        let tmp = path.with_extension("json.tmp");
        fs::write(&tmp, serde_json::to_string_pretty(self)?)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))?;
        Ok(())
    }

    fn load(name: &str) -> Result<Option<State>> {
        let path = state_file(name);
        match fs::read_to_string(&path) {
            Ok(text) => Ok(Some(serde_json::from_str(&text).with_context(|| {
                format!("{} is not a testbed state file", path.display())
            })?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }
}

// ---------------------------------------------------------------------------
// Commands

/// Runs `program args`, failing with its stderr.
fn sh(program: &str, args: &[&str]) -> Result<()> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {program}"))?;
    if !out.status.success() {
        bail!(
            "`{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn ip(args: &[&str]) -> Result<()> {
    sh("ip", args)
}

fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Checksum offload off: a switch process reads frames through AF_PACKET
/// and must see complete checksums (a partial one, left for a NIC that is
/// not there, would be "translated" and arrive wrong); and no segmentation
/// or receive offload, so every frame is at most one MTU.
fn offloads_off(netns: Option<&str>, dev: &str, warned: &mut bool) -> Result<()> {
    if !have("ethtool") {
        if !*warned {
            eprintln!(
                "warning: ethtool not found: checksum offload stays on, TCP and UDP through inca may see bad checksums (apt-get install ethtool)"
            );
            *warned = true;
        }
        return Ok(());
    }
    let run = |features: &[&str]| -> Result<()> {
        let mut args: Vec<&str> = Vec::new();
        if let Some(ns) = netns {
            args.extend(["netns", "exec", ns, "ethtool"]);
        }
        args.extend(["-K", dev]);
        args.extend(features);
        match netns {
            Some(_) => ip(&args),
            None => sh("ethtool", &args),
        }
    };
    run(&["tx", "off"])?;
    // Best effort: some are fixed on some kernels.
    let _ = run(&["tso", "off", "gso", "off", "gro", "off"]);
    Ok(())
}

/// No IPv6 on a root-namespace interface (router solicitations and MLD
/// reports would only be dropped by the devices). Best effort.
fn no_ipv6_root(dev: &str) {
    let _ = fs::write(format!("/proc/sys/net/ipv6/conf/{dev}/disable_ipv6"), "1");
}

// ---------------------------------------------------------------------------
// up

/// Creates the testbed of `scenario`: checks it builds with `factory` (the
/// same checks `inca run` makes), then creates and records its namespaces,
/// interfaces and node processes; a failure undoes what was created.
pub fn up(scenario: &Path, capture_dir: Option<&Path>, factory: &dyn SwitchFactory) -> Result<()> {
    let name = testbed_name(scenario);
    let loaded = Loaded::from_file(scenario, &[])?;
    // The same checks `inca run` makes (names, ports, programs that fit),
    // before anything is created.
    loaded
        .build(factory, None, None)
        .map_err(|e| anyhow!("{e}"))?;
    let capture_dir = match capture_dir {
        Some(d) => {
            fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
            Some(fs::canonicalize(d)?)
        }
        None => None,
    };
    let plan = plan(&loaded.scenario, &name, capture_dir.as_deref())
        .with_context(|| format!("{}", scenario.display()))?;

    let dir = state_dir();
    fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    if let Some(s) = State::load(&name)? {
        bail!(
            "testbed {name} is already up (from {}; state in {}): run `inca testbed down {}` first",
            s.scenario.display(),
            state_file(&name).display(),
            scenario.display()
        );
    }
    let node_dir = dir.join(&name);
    fs::create_dir_all(&node_dir)
        .with_context(|| format!("cannot create {}", node_dir.display()))?;
    let mut state = State {
        name: name.clone(),
        scenario: fs::canonicalize(scenario).unwrap_or_else(|_| scenario.to_path_buf()),
        dir: node_dir,
        capture_dir,
        namespaces: Vec::new(),
        interfaces: Vec::new(),
        processes: Vec::new(),
    };
    state.save()?;
    if let Err(e) = create(&plan, &mut state) {
        eprintln!("inca testbed up failed: undoing what it created");
        let problems = teardown(&state);
        for p in &problems {
            eprintln!("  {p}");
        }
        if problems.is_empty() {
            let _ = fs::remove_file(state_file(&name));
        } else {
            eprintln!(
                "  (state kept in {}: retry `inca testbed down`)",
                state_file(&name).display()
            );
        }
        return Err(e);
    }
    print_summary(&plan, &state);
    Ok(())
}

fn create(plan: &Plan, state: &mut State) -> Result<()> {
    let mut warned = false;
    for h in &plan.hosts {
        let ns = h.namespace.as_str();
        ip(&["netns", "add", ns])?;
        state.namespaces.push(NamespaceRecord {
            name: ns.to_string(),
            host: h.name.clone(),
            ip: h.ip,
        });
        state.save()?;
        if have("sysctl") {
            let _ = ip(&[
                "netns",
                "exec",
                ns,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ]);
        }
        ip(&[
            "link", "add", &h.root_if, "type", "veth", "peer", "name", HOST_IF, "netns", ns,
        ])?;
        state.interfaces.push(InterfaceRecord {
            name: h.root_if.clone(),
            peer: HOST_IF.into(),
            peer_namespace: Some(ns.to_string()),
        });
        state.save()?;
        no_ipv6_root(&h.root_if);
        ip(&["-n", ns, "link", "set", HOST_IF, "address", HOST_MAC])?;
        ip(&[
            "-n",
            ns,
            "addr",
            "add",
            &format!("{}/{}", h.ip, h.prefix_len),
            "dev",
            HOST_IF,
        ])?;
        offloads_off(Some(ns), HOST_IF, &mut warned)?;
        offloads_off(None, &h.root_if, &mut warned)?;
        ip(&["-n", ns, "link", "set", "lo", "up"])?;
        ip(&["-n", ns, "link", "set", HOST_IF, "up"])?;
        ip(&["link", "set", &h.root_if, "up"])?;
        for n in &h.neighbours {
            ip(&[
                "-n",
                ns,
                "neigh",
                "replace",
                &n.to_string(),
                "lladdr",
                HOST_MAC,
                "dev",
                HOST_IF,
                "nud",
                "permanent",
            ])?;
        }
        ip(&[
            "-n",
            ns,
            "route",
            "add",
            "default",
            "via",
            &h.gateway.to_string(),
            "dev",
            HOST_IF,
        ])?;
    }
    for (a, b) in &plan.pairs {
        ip(&["link", "add", a, "type", "veth", "peer", "name", b])?;
        state.interfaces.push(InterfaceRecord {
            name: a.clone(),
            peer: b.clone(),
            peer_namespace: None,
        });
        state.save()?;
        for dev in [a, b] {
            no_ipv6_root(dev);
            offloads_off(None, dev, &mut warned)?;
            ip(&["link", "set", dev, "mtu", &NODE_MTU.to_string()])?;
            ip(&["link", "set", dev, "up"])?;
        }
    }

    let mut children: Vec<(Child, usize)> = Vec::new();
    for node in &plan.nodes {
        let config = state.dir.join(format!("{}.toml", node.name));
        let log = state.dir.join(format!("{}.log", node.name));
        fs::write(&config, node.to_toml())
            .with_context(|| format!("cannot write {}", config.display()))?;
        let child = spawn_node(&config, &log, false)?;
        state.processes.push(ProcessRecord {
            node: node.name.clone(),
            pid: child.id(),
            config,
            log,
            metrics: node.metrics,
        });
        state.save()?;
        let interfaces = node.ports.iter().filter(|p| p.interface.is_some()).count();
        children.push((child, interfaces));
    }
    wait_running(&mut children, state)
}

/// Waits until every node has opened a packet socket per interface port
/// (or, failing that, is still running after a few seconds); fails if one
/// exits.
fn wait_running(children: &mut [(Child, usize)], state: &State) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut ready = vec![false; children.len()];
    loop {
        for (i, (child, want)) in children.iter_mut().enumerate() {
            let rec = &state.processes[i];
            if let Some(status) = child.try_wait()? {
                bail!(
                    "node {} exited ({status}) during start-up; its log {}:\n{}",
                    rec.node,
                    rec.log.display(),
                    log_tail(&rec.log, 20)
                );
            }
            if !ready[i] && packet_sockets(child.id()) >= *want {
                ready[i] = true;
            }
        }
        if ready.iter().all(|&r| r) {
            // Still alive a moment later (a port that fails to bind after
            // its socket opened exits at once).
            std::thread::sleep(Duration::from_millis(200));
            for (i, (child, _)) in children.iter_mut().enumerate() {
                if let Some(status) = child.try_wait()? {
                    let rec = &state.processes[i];
                    bail!(
                        "node {} exited ({status}) during start-up; its log {}:\n{}",
                        rec.node,
                        rec.log.display(),
                        log_tail(&rec.log, 20)
                    );
                }
            }
            return Ok(());
        }
        if Instant::now() > deadline {
            for (i, r) in ready.iter().enumerate() {
                if !r {
                    eprintln!(
                        "warning: node {} is running but has not opened all its packet sockets yet (see {})",
                        state.processes[i].node,
                        state.processes[i].log.display()
                    );
                }
            }
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// How many AF_PACKET sockets process `pid` holds.
fn packet_sockets(pid: u32) -> usize {
    let Ok(table) = fs::read_to_string(format!("/proc/{pid}/net/packet")) else {
        return 0;
    };
    let inodes: BTreeSet<String> = table
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().last().map(str::to_string))
        .collect();
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    fds.filter_map(|e| fs::read_link(e.ok()?.path()).ok())
        .filter_map(|t| {
            let t = t.to_string_lossy().into_owned();
            Some(t.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .filter(|i| inodes.contains(i))
        .count()
}

fn log_tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    if all.is_empty() {
        return "  | (empty)".into();
    }
    all[all.len().saturating_sub(lines)..]
        .iter()
        .map(|l| format!("  | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn print_summary(plan: &Plan, state: &State) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "testbed {} is up", plan.name);
    let _ = writeln!(out, "\nhosts (every eth0 has MAC {HOST_MAC}):");
    for h in &plan.hosts {
        let _ = writeln!(
            out,
            "  {:10} {:>15}/{:<2} gw {:15} netns {:24} (root end {})",
            h.name, h.ip, h.prefix_len, h.gateway, h.namespace, h.root_if
        );
    }
    let _ = writeln!(out, "\nnodes:");
    for (p, n) in state.processes.iter().zip(&plan.nodes) {
        let ports: Vec<String> = n
            .ports
            .iter()
            .map(|p| format!("{}={}", p.id, p.interface.as_deref().unwrap_or("?")))
            .collect();
        let _ = writeln!(
            out,
            "  {:10} pid {:<8} ports {}\n  {:10} config {}  log {}",
            p.node,
            p.pid,
            ports.join(" "),
            "",
            p.config.display(),
            p.log.display()
        );
        let mut management = Vec::new();
        if let Some(m) = n.metrics {
            management.push(format!("metrics http://{m}/"));
        }
        if let Some(l) = n.session_listen {
            let ids: Vec<String> = n.sessions.iter().map(|s| s.id.to_string()).collect();
            management.push(format!("sessions {} on {l}", ids.join(",")));
        }
        if !management.is_empty() {
            let _ = writeln!(out, "  {:10} {}", "", management.join("  "));
        }
    }
    if let Some(d) = &state.capture_dir {
        let _ = writeln!(out, "\ncaptures: {}/<node>-port<id>.pcap", d.display());
    }
    if let Some(h) = plan.hosts.first() {
        let _ = writeln!(
            out,
            "\nrun a command in a host: ip netns exec {} <command>",
            h.namespace
        );
    }
    let _ = writeln!(
        out,
        "stop it all: inca testbed down {}",
        state.scenario.display()
    );
}

// ---------------------------------------------------------------------------
// down and status

/// Stops the recorded processes and deletes the recorded interfaces and
/// namespaces of `scenario`'s testbed, then its state file.
pub fn down(scenario: &Path) -> Result<()> {
    let name = testbed_name(scenario);
    let Some(state) = State::load(&name)? else {
        println!(
            "testbed {name} is not up (no {})",
            state_file(&name).display()
        );
        return Ok(());
    };
    let problems = teardown(&state);
    if !problems.is_empty() {
        bail!(
            "testbed {name} is not completely down (state kept in {}):\n  {}",
            state_file(&name).display(),
            problems.join("\n  ")
        );
    }
    fs::remove_file(state_file(&name))
        .with_context(|| format!("cannot remove {}", state_file(&name).display()))?;
    println!(
        "testbed {name} is down: {} processes stopped, {} veth pairs and {} namespaces deleted",
        state.processes.len(),
        state.interfaces.len(),
        state.namespaces.len()
    );
    Ok(())
}

/// Kills node `node` (its whole process group, at once: a crash gives no
/// chance to say goodbye) and sets every interface it holds down. The
/// interfaces stay (so `down` deletes them as usual); the process record
/// stays too and `status` shows it dead.
/// [our choice] Interfaces down rather than deleted: a dead switch's ports
/// go dark but the cables are still there, as in the simulator's crash
/// fault (its links go down with it).
/// Crashes `node` of `scenario`'s testbed: SIGKILL to its process group,
/// its interfaces down.
pub fn crash(scenario: &Path, node: &str) -> Result<()> {
    let name = testbed_name(scenario);
    let Some(state) = State::load(&name)? else {
        bail!(
            "testbed {name} is not up (no {})",
            state_file(&name).display()
        );
    };
    let Some(p) = state.processes.iter().find(|p| p.node == node) else {
        let nodes: Vec<&str> = state.processes.iter().map(|p| p.node.as_str()).collect();
        bail!(
            "testbed {name} has no node process {node:?} (hosts cannot be crashed); its nodes: {}",
            nodes.join(", ")
        );
    };
    let text = fs::read_to_string(&p.config)
        .with_context(|| format!("cannot read {}", p.config.display()))?;
    let config =
        NodeConfig::from_toml(&text).map_err(|e| anyhow!("{}: {e}", p.config.display()))?;
    if alive(p) {
        // Nodes start in their own process group (pgid = pid).
        let _ = sh("kill", &["-KILL", "--", &format!("-{}", p.pid)]);
        let deadline = Instant::now() + Duration::from_secs(2);
        while alive(p) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if alive(p) {
            bail!("node {node} (pid {}) survived SIGKILL", p.pid);
        }
    } else {
        eprintln!("node {node} (pid {}) was not running", p.pid);
    }
    let mut downed = Vec::new();
    for port in &config.ports {
        if let Some(interface) = &port.interface {
            if interface_exists(interface) {
                ip(&["link", "set", interface, "down"])?;
                downed.push(interface.as_str());
            }
        }
    }
    println!(
        "node {node} crashed: pid {} killed, interfaces {} down",
        p.pid,
        downed.join(" ")
    );
    Ok(())
}

/// Restarts crashed node `node` of `scenario`'s testbed: sets its
/// interfaces up again and starts `inca node` with the configuration it
/// had (the log is appended to), recording the new pid. The device starts
/// afresh, as a power-cycled one does: whatever state it had is gone (an
/// ExoPlane daemon rejoins through the hub's DUMP/REJOIN, §5.8).
/// [our choice] Only a dead node is restarted; a live one is refused.
pub fn restart(scenario: &Path, node: &str) -> Result<()> {
    let name = testbed_name(scenario);
    let Some(mut state) = State::load(&name)? else {
        bail!(
            "testbed {name} is not up (no {})",
            state_file(&name).display()
        );
    };
    let Some(i) = state.processes.iter().position(|p| p.node == node) else {
        let nodes: Vec<&str> = state.processes.iter().map(|p| p.node.as_str()).collect();
        bail!(
            "testbed {name} has no node process {node:?}; its nodes: {}",
            nodes.join(", ")
        );
    };
    if alive(&state.processes[i]) {
        bail!(
            "node {node} (pid {}) is running: crash it first",
            state.processes[i].pid
        );
    }
    let rec = state.processes[i].clone();
    let text = fs::read_to_string(&rec.config)
        .with_context(|| format!("cannot read {}", rec.config.display()))?;
    let config =
        NodeConfig::from_toml(&text).map_err(|e| anyhow!("{}: {e}", rec.config.display()))?;
    let mut upped = Vec::new();
    for port in &config.ports {
        if let Some(interface) = &port.interface {
            ip(&["link", "set", interface, "up"])?;
            upped.push(interface.as_str());
        }
    }
    let child = spawn_node(&rec.config, &rec.log, true)?;
    state.processes[i].pid = child.id();
    state.save()?;
    let interfaces = upped.len();
    let mut children = vec![(child, interfaces)];
    let one = State {
        processes: vec![state.processes[i].clone()],
        ..state.clone()
    };
    wait_running(&mut children, &one)?;
    println!(
        "node {node} restarted: pid {}, interfaces {} up",
        state.processes[i].pid,
        upped.join(" ")
    );
    Ok(())
}

/// Starts `inca node --config <config>` in its own process group, its
/// output into `log` (appended to if `append`).
fn spawn_node(config: &Path, log: &Path, append: bool) -> Result<Child> {
    let bin = match std::env::var_os("INCA_BIN") {
        Some(b) => PathBuf::from(b),
        None => std::env::current_exe().context("cannot find the inca binary")?,
    };
    let out = fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(log)
        .with_context(|| format!("cannot create {}", log.display()))?;
    Command::new(&bin)
        .arg("node")
        .arg("--config")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        // Its own process group: a Ctrl-C meant for the shell that ran
        // `up` does not reach it; `down` stops it.
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start {} node", bin.display()))
}

/// Stops the recorded processes and deletes the recorded interfaces and
/// namespaces; returns what could not be undone. What is already gone is
/// fine.
fn teardown(state: &State) -> Vec<String> {
    let mut problems = Vec::new();
    let live: Vec<&ProcessRecord> = state.processes.iter().filter(|p| alive(p)).collect();
    for p in &live {
        signal(p.pid, "TERM");
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while live.iter().any(|p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for p in live.iter().filter(|p| alive(p)) {
        eprintln!(
            "node {} (pid {}) ignored SIGTERM for 5 s: SIGKILL",
            p.node, p.pid
        );
        signal(p.pid, "KILL");
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while live.iter().any(|p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for p in live.iter().filter(|p| alive(p)) {
        problems.push(format!("node {} (pid {}) is still running", p.node, p.pid));
    }
    for i in &state.interfaces {
        if interface_exists(&i.name) {
            if let Err(e) = ip(&["link", "del", &i.name]) {
                problems.push(format!("{e:#}"));
            }
        }
    }
    for n in &state.namespaces {
        if namespace_exists(&n.name) {
            // Processes started in the namespace by hand (an iperf3
            // server, say) were not started by `up`: they are left alone,
            // but they keep the (then nameless) namespace alive.
            let pids = Command::new("ip")
                .args(["netns", "pids", &n.name])
                .output()
                .map(|o| {
                    String::from_utf8_lossy(&o.stdout)
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            if !pids.is_empty() {
                eprintln!(
                    "warning: processes still run in {} (pids {pids}): not started by `inca testbed up`, left running; they keep the namespace alive until they exit",
                    n.name
                );
            }
            if let Err(e) = ip(&["netns", "del", &n.name]) {
                problems.push(format!("{e:#}"));
            }
        }
    }
    problems
}

/// Sends `sig` (`TERM`, `KILL`) to `pid`, which was just checked to be
/// our node.
fn signal(pid: u32, sig: &str) {
    let _ = sh("kill", &[&format!("-{sig}"), &pid.to_string()]);
}

/// Whether the recorded process is running and is still our node (its
/// command line names its configuration: pids get reused).
fn alive(p: &ProcessRecord) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{}/stat", p.pid)) else {
        return false;
    };
    // The state follows the parenthesised command name.
    if stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|s| s == "Z" || s == "X")
    {
        return false;
    }
    let Ok(cmdline) = fs::read(format!("/proc/{}/cmdline", p.pid)) else {
        return false;
    };
    let config = p.config.to_string_lossy();
    cmdline
        .split(|&b| b == 0)
        .any(|arg| arg == config.as_bytes())
}

fn interface_exists(name: &str) -> bool {
    Path::new("/sys/class/net").join(name).exists()
}

fn namespace_exists(name: &str) -> bool {
    Path::new("/run/netns").join(name).exists()
}

/// Prints what is up; whether everything recorded is still there.
pub fn status(scenario: &Path) -> Result<bool> {
    let name = testbed_name(scenario);
    let Some(state) = State::load(&name)? else {
        println!(
            "testbed {name} is not up (no {})",
            state_file(&name).display()
        );
        return Ok(false);
    };
    let mut ok = true;
    let mut mark = |good: bool| {
        ok &= good;
        if good {
            "ok"
        } else {
            "MISSING"
        }
    };
    println!("testbed {name} (from {})", state.scenario.display());
    println!("processes:");
    for p in &state.processes {
        let a = alive(p);
        let _ = mark(a);
        println!(
            "  {:10} pid {:<8} {}  log {}{}",
            p.node,
            p.pid,
            if a { "alive" } else { "DEAD" },
            p.log.display(),
            p.metrics
                .map(|m| format!("  metrics http://{m}/"))
                .unwrap_or_default()
        );
    }
    println!("namespaces:");
    for n in &state.namespaces {
        println!(
            "  {:24} host {:10} {:15} {}",
            n.name,
            n.host,
            n.ip,
            mark(namespace_exists(&n.name))
        );
    }
    println!("veth pairs:");
    for i in &state.interfaces {
        let peer = match &i.peer_namespace {
            Some(ns) => format!("{} in {ns}", i.peer),
            None => i.peer.clone(),
        };
        println!(
            "  {:15} <-> {:32} {}",
            i.name,
            peer,
            mark(interface_exists(&i.name))
        );
    }
    println!("{}", if ok { "all up" } else { "NOT all up" });
    Ok(ok)
}

#[cfg(test)]
mod tests;
