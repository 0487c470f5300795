//! The software NAT baseline on a multi-core server: the NAT core of
//! `inca_apps::core::nat`, run to completion per core on
//! [`inca_server::MultiCoreServer`] — the server baseline the papers
//! compare switch NATs against — and its `[[server]] kind = "sw_nat"`.
//!
//! Packets from the inside port are keyed by their 5-tuple; a new flow gets
//! a public endpoint from the allocator of the core that sees it (core `i`
//! allocates ports of public address `public + i`, so cores never hand out
//! the same endpoint without talking to each other [our choice, in the
//! spirit of per-worker port ranges in software NATs]); both directions go
//! into one flow table all cores read (the reply may hash to another core:
//! RSS is not symmetric), at most `flows` flows. Replies from the outside
//! port are translated back; unsolicited ones are dropped. Checksums are
//! updated incrementally, as in the switch NAT.
//!
//! Parameters (`params` of the server): `cores`, `rss`
//! ([`inca_server::RssConfig`]), `costs` ([`CoreCosts`]), `nic`
//! ([`inca_server::NicConfig`]) and `nat` ([`NatConfig`]).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use inca_apps::core::nat::{self as core, Allocator, Direction, Mapping, Pool, PORTS_PER_ADDRESS};
use inca_apps::core::Endpoint;
use inca_apps::headers::parse;
use inca_server::{
    CoreCosts, MultiCoreServer, NfOutput, NicConfig, PortMacs, RssConfig, ServerConfig, SoftwareNf,
};
use inca_sim::scenario::ServerSetup;
use inca_switch::device::PortId;
use serde::{Deserialize, Serialize};

use crate::error::SystemError;
use crate::server::ServerNode;

/// The NAT's own parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NatConfig {
    /// Most flows in the table (default 65,536, as the switch NAT).
    pub flows: usize,
    /// The first public address; core `i` uses `public + i`.
    pub public: Ipv4Addr,
    /// The inside port.
    pub inside_port: PortId,
    /// The outside port.
    pub outside_port: PortId,
}

impl Default for NatConfig {
    fn default() -> Self {
        NatConfig {
            flows: 65_536,
            public: Ipv4Addr::new(198, 51, 100, 1),
            inside_port: 0,
            outside_port: 1,
        }
    }
}

/// Most flows a software NAT's table may be given [our choice: 2^24, a
/// server's DRAM holds far more, this bounds a typo].
pub const MAX_FLOWS: usize = 1 << 24;

/// What the NAT did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NatStats {
    /// Outbound packets translated.
    pub translated_out: u64,
    /// Inbound packets translated back.
    pub translated_in: u64,
    /// New flows given a public endpoint.
    pub new_flows: u64,
    /// New flows refused: the core's pool or the table is full.
    pub refused: u64,
    /// Inbound packets of no known flow.
    pub unsolicited: u64,
    /// Frames that do not parse.
    pub malformed: u64,
    /// Well-formed frames a NAT does not translate (not TCP, UDP or ICMP
    /// echo).
    pub not_nat: u64,
}

/// The software NAT. See the module documentation.
#[derive(Debug)]
pub struct SoftwareNat {
    config: NatConfig,
    /// One allocator per core.
    allocators: Vec<Allocator>,
    /// Inside 5-tuple → public endpoint.
    out: BTreeMap<[u8; 13], Endpoint>,
    /// Reply 5-tuple → inside endpoint.
    back: BTreeMap<[u8; 13], Endpoint>,
    stats: NatStats,
}

impl SoftwareNat {
    /// A NAT for `cores` cores.
    pub fn new(config: NatConfig, cores: usize) -> Result<Self, String> {
        if !(1..=MAX_FLOWS).contains(&config.flows) {
            return Err(format!(
                "nat.flows must be from 1 to {MAX_FLOWS}, not {}",
                config.flows
            ));
        }
        if config.inside_port == config.outside_port {
            return Err("nat.inside_port and nat.outside_port must differ".into());
        }
        let base = u32::from(config.public);
        let allocators = (0..cores)
            .map(|i| {
                let ip = base.wrapping_add(i as u32).to_be_bytes();
                Allocator::new(Pool { base: ip }, u64::from(PORTS_PER_ADDRESS))
            })
            .collect();
        Ok(SoftwareNat {
            config,
            allocators,
            out: BTreeMap::new(),
            back: BTreeMap::new(),
            stats: NatStats::default(),
        })
    }

    /// Counters.
    pub fn stats(&self) -> &NatStats {
        &self.stats
    }

    /// Flows in the table.
    pub fn flows(&self) -> usize {
        self.out.len()
    }
}

impl SoftwareNf for SoftwareNat {
    fn name(&self) -> &str {
        "sw_nat"
    }

    fn process(&mut self, core: usize, port: PortId, mut frame: Vec<u8>, out: &mut Vec<NfOutput>) {
        let Ok(parsed) = parse(&frame) else {
            self.stats.malformed += 1;
            return;
        };
        let Some(p) = parsed.ipv4.then(|| core::flow(&parsed)).flatten() else {
            self.stats.not_nat += 1;
            return;
        };
        let key = p.five_tuple();
        if Direction::by_port(port, self.config.outside_port) == Direction::Inbound {
            let Some(&inside) = self.back.get(&key) else {
                self.stats.unsolicited += 1;
                return;
            };
            core::translate(&mut frame, &p, Direction::Inbound, inside);
            self.stats.translated_in += 1;
            out.push((self.config.inside_port, frame));
            return;
        }
        let public = match self.out.get(&key) {
            Some(&e) => e,
            None => {
                let allocator = &mut self.allocators[core];
                let fresh = if self.out.len() < self.config.flows {
                    allocator.allocate(&p)
                } else {
                    None
                };
                let Some(public) = fresh else {
                    self.stats.refused += 1;
                    return;
                };
                let m = Mapping::of(&p, public);
                self.out.insert(m.out_key, m.public);
                self.back.insert(m.reply_key, m.inside);
                self.stats.new_flows += 1;
                public
            }
        };
        core::translate(&mut frame, &p, Direction::Outbound, public);
        self.stats.translated_out += 1;
        out.push((self.config.outside_port, frame));
    }

    fn counters(&self) -> Vec<(String, u64)> {
        let s = self.stats;
        vec![
            ("translated_out".into(), s.translated_out),
            ("translated_in".into(), s.translated_in),
            ("new_flows".into(), s.new_flows),
            ("refused".into(), s.refused),
            ("unsolicited".into(), s.unsolicited),
            ("malformed".into(), s.malformed),
            ("not_nat".into(), s.not_nat),
            ("flows".into(), self.out.len() as u64),
        ]
    }

    fn reset(&mut self) {
        let cores = self.allocators.len();
        if let Ok(fresh) = SoftwareNat::new(self.config.clone(), cores) {
            self.allocators = fresh.allocators;
        }
        self.out.clear();
        self.back.clear();
    }
}

/// The `sw_nat` server's `params`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SwNatParams {
    /// Cores running the NAT.
    pub cores: usize,
    /// RSS.
    pub rss: RssConfig,
    /// CPU time per packet.
    pub costs: CoreCosts,
    /// The NIC.
    pub nic: NicConfig,
    /// The NAT.
    pub nat: NatConfig,
}

impl Default for SwNatParams {
    fn default() -> Self {
        SwNatParams {
            cores: 1,
            rss: RssConfig::default(),
            // CLIP spec §8.1 (calibration inputs, marked [our choice]
            // there): DPDK I/O 400 ns + software SNAT (full parse, lookup,
            // rewrite, checksums) 700 ns per packet. No public per-packet
            // measurement of a DPDK NAT was at hand; see docs/calibration.md.
            costs: CoreCosts {
                fixed_ns: 1_100,
                per_byte_ps: 0,
            },
            nic: NicConfig::default(),
            nat: NatConfig::default(),
        }
    }
}

/// The `[[server]] kind = "sw_nat"` node from its scenario set-up.
pub fn build(setup: &ServerSetup) -> Result<ServerNode<SoftwareNat>, SystemError> {
    let params: SwNatParams = toml::Value::Table(setup.params.clone())
        .try_into()
        .map_err(|e| SystemError::Refused(format!("server {:?} params: {e}", setup.name)))?;
    let refuse = |e: String| SystemError::Refused(format!("server {:?}: {e}", setup.name));
    let ports: Vec<PortMacs> = setup
        .macs
        .iter()
        .zip(&setup.neighbour_macs)
        .map(|(&mac, &neighbour)| PortMacs { mac, neighbour })
        .collect();
    let needed = usize::from(params.nat.inside_port.max(params.nat.outside_port)) + 1;
    if ports.len() < needed {
        return Err(refuse(format!(
            "the NAT uses port {} but the server has {} linked port(s)",
            needed - 1,
            ports.len()
        )));
    }
    let nat = SoftwareNat::new(params.nat.clone(), params.cores).map_err(refuse)?;
    let config = ServerConfig {
        cores: params.cores,
        rss: params.rss,
        costs: params.costs,
        nic: params.nic,
    };
    let server = MultiCoreServer::new(config, ports, nat).map_err(|e| refuse(e.to_string()))?;
    Ok(ServerNode(server))
}

#[cfg(test)]
mod tests {
    use super::*;
    use inca_wire::{build_udp_frame, parse_udp_frame, Endpoints};

    fn udp(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16) -> Vec<u8> {
        let ep = Endpoints::new([2; 6], Ipv4Addr::from(src), [4; 6], Ipv4Addr::from(dst));
        build_udp_frame(&ep, sport, dport, b"hello", true).unwrap()
    }

    #[test]
    fn translates_both_ways_with_valid_checksums_and_per_core_addresses() {
        let mut nat = SoftwareNat::new(NatConfig::default(), 2).unwrap();
        let mut out = Vec::new();
        nat.process(1, 0, udp([10, 0, 0, 1], 5000, [8, 8, 8, 8], 53), &mut out);
        let (port, f) = out.pop().unwrap();
        assert_eq!(port, 1);
        let u = parse_udp_frame(&f).expect("checksums still valid");
        // Core 1 allocates from the second public address.
        assert_eq!(
            (u.src_ip, u.src_port),
            (Ipv4Addr::new(198, 51, 100, 2), 1024)
        );
        // The reply, seen by core 0, finds the flow.
        nat.process(
            0,
            1,
            udp([8, 8, 8, 8], 53, [198, 51, 100, 2], 1024),
            &mut out,
        );
        let (port, f) = out.pop().unwrap();
        assert_eq!(port, 0);
        let u = parse_udp_frame(&f).unwrap();
        assert_eq!((u.dst_ip, u.dst_port), (Ipv4Addr::new(10, 0, 0, 1), 5000));
        // Unsolicited and garbage are counted and dropped.
        nat.process(
            0,
            1,
            udp([8, 8, 8, 8], 53, [198, 51, 100, 2], 999),
            &mut out,
        );
        nat.process(0, 0, vec![0; 20], &mut out);
        assert!(out.is_empty());
        let s = *nat.stats();
        assert_eq!(
            (s.translated_out, s.translated_in, s.unsolicited),
            (1, 1, 1)
        );
        assert_eq!((s.new_flows, s.malformed + s.not_nat), (1, 1));
    }

    #[test]
    fn the_flow_table_is_bounded() {
        let cfg = NatConfig {
            flows: 2,
            ..NatConfig::default()
        };
        let mut nat = SoftwareNat::new(cfg, 1).unwrap();
        let mut out = Vec::new();
        for sport in 0..5 {
            nat.process(0, 0, udp([10, 0, 0, 1], sport, [8, 8, 8, 8], 53), &mut out);
        }
        assert_eq!((out.len(), nat.flows(), nat.stats().refused), (2, 2, 3));
    }
}
