//! Adversarial host workloads (issue 8): traffic meant to hurt a stateful
//! switch rather than to measure it. Two `[[host.workload]]` kinds, both
//! UDP at a paced rate like `udp`:
//!
//! - `new_flows` — a new-flow flood: packet i comes from the i-th
//!   (source address, source port) of `src_prefix` × `src_ports`, so every
//!   packet is a 5-tuple the switch has not seen (until the space wraps,
//!   which a report note announces). Each one costs a stateful NF a table
//!   miss and, for a NAT, a slow-path insert.
//! - `tuples` — packets cycle through an explicit list of sources
//!   (`sources = ["10.2.0.1:5000", ...]`), round robin. The list can be
//!   computed by the scenario instead (`craft = { ... }`): keys crafted to
//!   collide in a target switch's hash units, which only the system that
//!   owns the switch program can compute, so the scenario asks its
//!   [`crate::scenario::SwitchFactory::craft_sources`] with a
//!   [`CraftRequest`].
//!
//! [our choice] Attack packets carry no probe header (their payload is
//! zeros), so a receiver counts them as `rx_udp_plain` while the probes of
//! legitimate generators keep `rx_probes` and the latency histogram to
//! themselves: the legitimate throughput and latency under attack are read
//! straight off the sink.

use std::net::{Ipv4Addr, SocketAddrV4};

use serde::Deserialize;

use super::host::{Quantity, SizeSpec};

/// Most sources a `tuples` workload holds (crafted or listed).
pub const MAX_SOURCES: usize = 1 << 20;

/// A new-flow flood.
///
/// ```toml
/// kind = "new_flows"
/// dst = "192.0.2.1:5000"
/// pps = 1000000                  # or rate = "10Gbps"
/// size = 66                      # default 1000
/// start = "210ms"                # stop = .., count = .. as for udp
/// src_prefix = "10.64.0.0/12"    # required: where the new sources come from
/// src_ports = [1024, 65535]      # default [1024, 65535]
/// ```
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewFlowsConfig {
    /// Name in counters and notes.
    pub name: Option<String>,
    /// Destination address and port.
    pub dst: Option<SocketAddrV4>,
    /// Bits per second on the wire, or `"line"`.
    pub rate: Option<Quantity>,
    /// Packets per second.
    pub pps: Option<u64>,
    /// Frame sizes. Default 1000 bytes.
    pub size: Option<SizeSpec>,
    /// First packet (time). Default 0.
    pub start: Option<Quantity>,
    /// No packet at or after this time.
    pub stop: Option<Quantity>,
    /// At most this many packets.
    pub count: Option<u64>,
    /// Sources are drawn from this prefix ("a.b.c.d/len").
    pub src_prefix: Option<String>,
    /// Inclusive source-port range. Default [1024, 65535].
    pub src_ports: Option<[u16; 2]>,
}

/// Traffic over a fixed list of sources, round robin.
///
/// ```toml
/// kind = "tuples"
/// dst = "192.0.2.1:5000"
/// pps = 1000000
/// size = 66
/// sources = ["10.2.0.1:5000", "10.2.0.9:5000"]
/// # or, computed by the scenario from a switch's hash units:
/// craft = { target = "tea", attack = "sketch", keys = 256, src_prefix = "10.96.0.0/16" }
/// ```
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuplesConfig {
    /// Name in counters and notes.
    pub name: Option<String>,
    /// Destination address and port.
    pub dst: Option<SocketAddrV4>,
    /// Bits per second on the wire, or `"line"`.
    pub rate: Option<Quantity>,
    /// Packets per second.
    pub pps: Option<u64>,
    /// Frame sizes. Default 1000 bytes.
    pub size: Option<SizeSpec>,
    /// First packet (time). Default 0.
    pub start: Option<Quantity>,
    /// No packet at or after this time.
    pub stop: Option<Quantity>,
    /// At most this many packets.
    pub count: Option<u64>,
    /// The sources, in sending order.
    #[serde(default)]
    pub sources: Vec<SocketAddrV4>,
    /// Sources the scenario computes (appended to `sources`).
    pub craft: Option<CraftSpec>,
}

/// What to craft, as written in a scenario.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CraftSpec {
    /// The switch (by scenario name) whose hash units the keys target.
    pub target: String,
    /// The attack, in the target system's vocabulary (TEA: "sketch",
    /// "bucket").
    pub attack: String,
    /// How many keys.
    pub keys: usize,
    /// Sources are drawn from this prefix.
    pub src_prefix: String,
    /// Inclusive source-port range. Default [1024, 65535].
    pub src_ports: Option<[u16; 2]>,
    /// Attack-specific options, passed through.
    #[serde(default)]
    pub options: toml::Table,
}

/// What a factory is asked to craft: the target switch's program and
/// parameters (as the scenario gives them to the factory), and the space
/// of packets the workload can send.
#[derive(Debug, Clone)]
pub struct CraftRequest {
    /// The target switch's program.
    pub program: String,
    /// Its parameters (`name`, value text).
    pub params: Vec<(String, String)>,
    /// The attack.
    pub attack: String,
    /// How many keys.
    pub keys: usize,
    /// Where the packets go.
    pub dst: SocketAddrV4,
    /// IP protocol of the packets (17: UDP).
    pub proto: u8,
    /// Source prefix (network, length).
    pub src_prefix: (Ipv4Addr, u8),
    /// Inclusive source-port range.
    pub src_ports: (u16, u16),
    /// Attack-specific options.
    pub options: toml::Table,
}

/// Parses "a.b.c.d/len" (network bits beyond `len` cleared).
pub fn parse_prefix(s: &str) -> Option<(Ipv4Addr, u8)> {
    let (ip, len) = s.split_once('/')?;
    let ip: Ipv4Addr = ip.trim().parse().ok()?;
    let len: u8 = len.trim().parse().ok()?;
    if len > 32 {
        return None;
    }
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    Some((Ipv4Addr::from(u32::from(ip) & mask), len))
}

/// The (source, port) of flow `k` of a prefix × port-range space: ports
/// vary fastest, then host addresses (wrapping at the space's size).
pub fn nth_source(prefix: (Ipv4Addr, u8), ports: (u16, u16), k: u64) -> (Ipv4Addr, u16) {
    let nports = u64::from(ports.1.saturating_sub(ports.0)) + 1;
    let hosts = 1u64 << (32 - u32::from(prefix.1.min(32)));
    let k = k % (nports * hosts);
    let port = ports.0 + (k % nports) as u16;
    let host = (k / nports) as u32;
    (Ipv4Addr::from(u32::from(prefix.0) | host), port)
}

/// Number of distinct sources of a prefix × port-range space.
pub fn space(prefix: (Ipv4Addr, u8), ports: (u16, u16)) -> u64 {
    (u64::from(ports.1.saturating_sub(ports.0)) + 1) * (1u64 << (32 - u32::from(prefix.1.min(32))))
}

/// Resolves every `craft` of `workloads` through `craft` (given the
/// target's name and the request without program/params filled in, it
/// returns the sources); the sources are appended to the workload's list
/// and `craft` is removed. Errors name the workload.
pub fn resolve_crafts(
    workloads: &mut [super::host::WorkloadConfig],
    mut craft: impl FnMut(&str, CraftRequest) -> Result<Vec<SocketAddrV4>, String>,
) -> Result<(), String> {
    for (i, w) in workloads.iter_mut().enumerate() {
        let super::host::WorkloadConfig::Tuples(t) = w else {
            continue;
        };
        let Some(c) = t.craft.take() else {
            continue;
        };
        let field = format!("workload[{i}] (tuples).craft");
        let dst = t
            .dst
            .ok_or_else(|| format!("{field}: the workload needs dst"))?;
        let src_prefix = parse_prefix(&c.src_prefix)
            .ok_or_else(|| format!("{field}.src_prefix: {:?} is not a.b.c.d/len", c.src_prefix))?;
        let src_ports = match c.src_ports {
            Some([lo, hi]) if lo == 0 || lo > hi => {
                return Err(format!(
                    "{field}.src_ports: [{lo}, {hi}] is not a range of non-zero ports"
                ))
            }
            Some([lo, hi]) => (lo, hi),
            None => (1024, 65535),
        };
        if c.keys == 0 || c.keys > MAX_SOURCES {
            return Err(format!(
                "{field}.keys: {} is outside 1..={MAX_SOURCES}",
                c.keys
            ));
        }
        let req = CraftRequest {
            program: String::new(),
            params: Vec::new(),
            attack: c.attack.clone(),
            keys: c.keys,
            dst,
            proto: 17,
            src_prefix,
            src_ports,
            options: c.options.clone(),
        };
        let got = craft(&c.target, req).map_err(|e| format!("{field}: {e}"))?;
        if got.is_empty() {
            return Err(format!("{field}: the target crafted no keys"));
        }
        t.sources.extend(got);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_enumerate_the_space_ports_first_and_wrap() {
        let p = parse_prefix("10.2.0.7/30").unwrap();
        assert_eq!(p, (Ipv4Addr::new(10, 2, 0, 4), 30));
        let ports = (5000, 5001);
        assert_eq!(space(p, ports), 8);
        let all: Vec<_> = (0..8).map(|k| nth_source(p, ports, k)).collect();
        assert_eq!(all[0], (Ipv4Addr::new(10, 2, 0, 4), 5000));
        assert_eq!(all[1], (Ipv4Addr::new(10, 2, 0, 4), 5001));
        assert_eq!(all[7], (Ipv4Addr::new(10, 2, 0, 7), 5001));
        let mut d = all.clone();
        d.sort();
        d.dedup();
        assert_eq!(d.len(), 8, "all distinct");
        assert_eq!(nth_source(p, ports, 8), all[0], "wraps");
        assert!(parse_prefix("10.0.0.0/33").is_none());
    }

    use super::super::host::{Host, HostConfig, WorkloadConfig, WAKE_TOKEN};
    use inca_switch::device::{Device, DeviceRng, Input, Nanos, Output};
    use rand::SeedableRng;

    /// Runs a host until `end`; the (source, port, payload starts with a
    /// probe) of every UDP frame it sent.
    fn sent(toml: &str, end: Nanos) -> Vec<(Ipv4Addr, u16, bool)> {
        let cfg = HostConfig::from_toml(toml).unwrap();
        let mut h = Host::new(cfg, [2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], 10_000_000_000).unwrap();
        let mut rng = DeviceRng::seed_from_u64(1);
        let (mut out, mut got) = (Vec::new(), Vec::new());
        h.start(0, &mut rng, &mut out);
        loop {
            let mut wake = None;
            for o in out.drain(..) {
                match o {
                    Output::Transmit { frame, .. } => {
                        let eth = inca_wire::EthernetFrame::new_checked(&frame[..]).unwrap();
                        let ip = inca_wire::Ipv4Packet::new_checked(eth.payload()).unwrap();
                        let udp = inca_wire::UdpDatagram::new_checked(ip.payload()).unwrap();
                        let probe = super::super::host::Probe::parse(udp.payload()).is_some();
                        got.push((ip.src_addr(), udp.src_port(), probe));
                    }
                    Output::Timer { at, .. } => wake = Some(at),
                    Output::Control(_) | Output::Session { .. } => {}
                }
            }
            match wake {
                Some(at) if at < end => {
                    h.handle(at, Input::Timer { token: WAKE_TOKEN }, &mut rng, &mut out)
                }
                _ => return got,
            }
        }
    }

    #[test]
    fn new_flows_sends_a_new_source_per_packet_without_probes() {
        let got = sent(
            r#"
ip = "10.1.2.1"
[[workload]]
kind = "new_flows"
dst = "192.0.2.1:5000"
pps = 1000000
count = 20
size = 66
src_prefix = "10.64.0.0/30"
src_ports = [7000, 7004]
"#,
            1_000_000,
        );
        assert_eq!(got.len(), 20);
        let mut d: Vec<_> = got.iter().map(|g| (g.0, g.1)).collect();
        d.sort();
        d.dedup();
        assert_eq!(d.len(), 20, "every packet a new 5-tuple");
        assert!(got.iter().all(|g| !g.2), "attack traffic carries no probe");
        assert_eq!((got[0].0, got[0].1), (Ipv4Addr::new(10, 64, 0, 0), 7000));
    }

    #[test]
    fn tuples_cycle_through_their_sources_and_crafts_need_a_scenario() {
        let got = sent(
            r#"
ip = "10.1.2.1"
[[workload]]
kind = "tuples"
dst = "192.0.2.1:5000"
pps = 1000000
count = 5
size = 66
sources = ["10.9.0.1:1000", "10.9.0.2:2000"]
"#,
            1_000_000,
        );
        let want = [("10.9.0.1", 1000), ("10.9.0.2", 2000)];
        for (i, g) in got.iter().enumerate() {
            let (ip, port) = want[i % 2];
            assert_eq!((g.0, g.1), (ip.parse().unwrap(), port));
        }
        assert_eq!(got.len(), 5);
        let crafted = r#"
ip = "10.1.2.1"
[[workload]]
kind = "tuples"
dst = "192.0.2.1:5000"
pps = 1000
craft = { target = "tea", attack = "sketch", keys = 3, src_prefix = "10.96.0.0/16" }
"#;
        let mut cfg = HostConfig::from_toml(crafted).unwrap();
        assert!(
            Host::new(cfg.clone(), [2; 6], [3; 6], 1).is_err(),
            "unresolved craft"
        );
        let mut asked = None;
        resolve_crafts(&mut cfg.workloads, |t, r| {
            asked = Some((t.to_string(), r.attack.clone(), r.keys, r.src_prefix));
            Ok((0..3)
                .map(|i| SocketAddrV4::new(Ipv4Addr::new(10, 96, 0, i), 9))
                .collect())
        })
        .unwrap();
        assert_eq!(
            asked,
            Some((
                "tea".into(),
                "sketch".into(),
                3,
                (Ipv4Addr::new(10, 96, 0, 0), 16)
            ))
        );
        let WorkloadConfig::Tuples(t) = &cfg.workloads[0] else {
            panic!("not tuples")
        };
        assert_eq!(t.sources.len(), 3);
        assert!(t.craft.is_none());
        assert!(Host::new(cfg, [2; 6], [3; 6], 1).is_ok());
    }
}
