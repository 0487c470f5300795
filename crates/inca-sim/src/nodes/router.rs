//! Routers: the fixed-function switches of the papers' testbeds.
//!
//! A router forwards IPv4 by longest-prefix match to a group of equal-cost
//! ports and picks one by a hash of the 5-tuple (ECMP). The pick is
//! resilient: a flow hashes over the whole group first and is moved only if
//! its port is down, so flows on healthy paths never move when another path
//! fails. A router learns that a port went down (or came back)
//! `detect_delay` after the link changed, as a routing protocol or BFD
//! would; until then it keeps sending into the dead link. It decrements the
//! TTL (incremental checksum update), rewrites the MAC addresses, and sends
//! the frame `latency` after it arrived.

use std::any::Any;

use inca_switch::device::{Device, DeviceRng, Input, Nanos, Output, PortId};
use inca_switch::hash::crc32;
use inca_switch::table::{MatchKind, MatchSpec, MatchTable, TableConfig};
use inca_wire::{checksum, EthernetFrame, Ipv4Packet};

use crate::engine::Node;
use crate::metrics::NodeReport;

/// A router's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterConfig {
    /// Forwarding latency.
    pub latency: Nanos,
    /// How long after a link changes state the router acts on it.
    pub detect_delay: Nanos,
    /// Seed of the ECMP hash (different per router, so that hashing does
    /// not polarise over several tiers).
    pub hash_seed: u32,
}

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig {
            latency: 1_000,
            detect_delay: 50_000_000,
            hash_seed: 0,
        }
    }
}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouterStats {
    /// Frames received.
    pub rx: u64,
    /// Frames forwarded.
    pub tx: u64,
    /// Frames that were not IPv4 or were malformed.
    pub malformed: u64,
    /// Frames with TTL ≤ 1.
    pub ttl_drops: u64,
    /// Frames with no route, or whose whole ECMP group was down.
    pub no_route_drops: u64,
    /// Flows moved off a down port by the resilient hash.
    pub rerouted: u64,
}

/// Maximum number of routes (the LPM table's size).
pub const MAX_ROUTES: usize = 1 << 20;

/// A router. See the module documentation.
#[derive(Debug)]
pub struct Router {
    config: RouterConfig,
    routes: MatchTable<Vec<PortId>>,
    /// Our MAC on each port.
    macs: Vec<[u8; 6]>,
    /// The MAC at the other end of each port.
    neighbours: Vec<[u8; 6]>,
    /// What the links are (as the simulator told us).
    physical_up: Vec<bool>,
    /// What routing believes (`physical_up`, `detect_delay` later).
    routing_up: Vec<bool>,
    stats: RouterStats,
}

impl Router {
    /// A router with `ports` ports, our MAC and the neighbour's MAC on each.
    pub fn new(config: RouterConfig, macs: Vec<[u8; 6]>, neighbours: Vec<[u8; 6]>) -> Self {
        let ports = macs.len();
        Router {
            config,
            routes: MatchTable::new(TableConfig {
                name: "routes".into(),
                kind: MatchKind::Lpm,
                key_bytes: 4,
                size: MAX_ROUTES,
                idle_timeout: None,
            }),
            macs,
            neighbours,
            physical_up: vec![true; ports],
            routing_up: vec![true; ports],
            stats: RouterStats::default(),
        }
    }

    /// Routes `prefix/len` to the equal-cost `ports`.
    pub fn add_route(
        &mut self,
        prefix: [u8; 4],
        len: u8,
        ports: Vec<PortId>,
    ) -> Result<(), String> {
        let spec = MatchSpec::Lpm {
            value: prefix.to_vec().into(),
            prefix_len: u16::from(len),
        };
        self.routes
            .insert(spec, ports, 0)
            .map_err(|e| e.to_string())
    }

    /// Counters.
    pub fn stats(&self) -> RouterStats {
        self.stats
    }

    /// Whether routing currently uses `port`.
    pub fn port_in_use(&self, port: PortId) -> bool {
        self.routing_up
            .get(usize::from(port))
            .copied()
            .unwrap_or(false)
    }

    /// The port a packet with this 5-tuple leaves on, if any.
    pub fn select(&self, dst: [u8; 4], flow: &[u8; 13]) -> Option<(PortId, bool)> {
        let group = self.routes.peek(&dst)?;
        if group.is_empty() {
            return None;
        }
        let mut key = [0u8; 17];
        key[..4].copy_from_slice(&self.config.hash_seed.to_be_bytes());
        key[4..].copy_from_slice(flow);
        let h = crc32(&key);
        let first = group[h as usize % group.len()];
        if self.port_in_use(first) {
            return Some((first, false));
        }
        let up: Vec<PortId> = group
            .iter()
            .copied()
            .filter(|&p| self.port_in_use(p))
            .collect();
        if up.is_empty() {
            return None;
        }
        Some((up[h.rotate_left(16) as usize % up.len()], true))
    }

    fn forward(&mut self, now: Nanos, mut frame: Vec<u8>, out: &mut Vec<Output>) {
        let Ok(eth) = EthernetFrame::new_checked(&frame[..]) else {
            self.stats.malformed += 1;
            return;
        };
        if eth.ethertype() != inca_wire::ethernet::ethertype::IPV4 {
            self.stats.malformed += 1;
            return;
        }
        let l3 = eth.header_len();
        let Ok(ip) = Ipv4Packet::new_checked_header(&frame[l3..]) else {
            self.stats.malformed += 1;
            return;
        };
        let ttl = ip.ttl();
        let dst = ip.dst_addr().octets();
        let flow = five_tuple(&ip);
        if ttl <= 1 {
            self.stats.ttl_drops += 1;
            return;
        }
        let Some((port, moved)) = self.select(dst, &flow) else {
            self.stats.no_route_drops += 1;
            return;
        };
        self.stats.rerouted += u64::from(moved);
        // TTL is the high byte of the word at offset 8; update the checksum
        // for that word (RFC 1624).
        let word = u16::from_be_bytes([frame[l3 + 8], frame[l3 + 9]]);
        frame[l3 + 8] = ttl - 1;
        let new_word = u16::from_be_bytes([frame[l3 + 8], frame[l3 + 9]]);
        let sum = u16::from_be_bytes([frame[l3 + 10], frame[l3 + 11]]);
        let sum = checksum::update_u16(sum, word, new_word);
        frame[l3 + 10..l3 + 12].copy_from_slice(&sum.to_be_bytes());
        let p = usize::from(port);
        if let (Some(src), Some(dst)) = (self.macs.get(p), self.neighbours.get(p)) {
            frame[0..6].copy_from_slice(dst);
            frame[6..12].copy_from_slice(src);
        }
        self.stats.tx += 1;
        out.push(Output::Transmit {
            at: now + self.config.latency,
            port,
            frame,
        });
    }
}

/// The 5-tuple of an IPv4 packet (ports 0 when not TCP/UDP, or a later
/// fragment, or cut off).
fn five_tuple(ip: &Ipv4Packet<&[u8]>) -> [u8; 13] {
    let mut k = [0u8; 13];
    k[0..4].copy_from_slice(&ip.src_addr().octets());
    k[4..8].copy_from_slice(&ip.dst_addr().octets());
    k[8] = ip.protocol();
    let l4 = ip.payload();
    if (k[8] == 6 || k[8] == 17) && ip.frag_offset() == 0 && l4.len() >= 4 {
        k[9..13].copy_from_slice(&l4[..4]);
    }
    k
}

impl Device for Router {
    fn handle(&mut self, now: Nanos, input: Input, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        match input {
            Input::Frame { frame, .. } => {
                self.stats.rx += 1;
                self.forward(now, frame, out);
            }
            Input::LinkState { port, up } => {
                if let Some(s) = self.physical_up.get_mut(usize::from(port)) {
                    *s = up;
                    out.push(Output::Timer {
                        at: now + self.config.detect_delay,
                        token: u64::from(port),
                    });
                }
            }
            Input::Timer { token } => {
                let p = token as usize;
                if let (Some(&phys), Some(r)) =
                    (self.physical_up.get(p), self.routing_up.get_mut(p))
                {
                    *r = phys;
                }
            }
            Input::Control(_) | Input::Session(_) => {}
        }
    }

    fn restart(&mut self, _now: Nanos, _rng: &mut DeviceRng, _out: &mut Vec<Output>) {
        // Routes are configuration; what routing believes is relearned.
        self.routing_up.clone_from(&self.physical_up);
    }
}

impl Node for Router {
    fn kind(&self) -> &'static str {
        "router"
    }

    fn report(&self, _now: Nanos) -> NodeReport {
        let s = self.stats;
        let mut r = NodeReport::default();
        for (k, v) in [
            ("rx_packets", s.rx),
            ("tx_packets", s.tx),
            ("malformed", s.malformed),
            ("ttl_drops", s.ttl_drops),
            ("no_route_drops", s.no_route_drops),
            ("rerouted", s.rerouted),
        ] {
            r.counters.insert(k.into(), v);
        }
        r
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router() -> Router {
        let mut r = Router::new(
            RouterConfig::default(),
            vec![[2, 0, 0, 0, 0, 1]; 4],
            vec![[2, 0, 0, 0, 0, 2]; 4],
        );
        r.add_route([10, 0, 0, 0], 8, vec![1, 2, 3]).unwrap();
        r.add_route([10, 1, 0, 0], 16, vec![0]).unwrap();
        r
    }

    fn flow(i: u16) -> [u8; 13] {
        let mut k = [0u8; 13];
        k[0..4].copy_from_slice(&[192, 0, 2, 1]);
        k[4..8].copy_from_slice(&[10, 0, 0, 9]);
        k[8] = 6;
        k[9..11].copy_from_slice(&i.to_be_bytes());
        k
    }

    #[test]
    fn longest_prefix_wins_and_ecmp_spreads_flows() {
        let r = router();
        assert_eq!(r.select([10, 1, 2, 3], &flow(1)).unwrap().0, 0);
        let mut used = [0u32; 4];
        for i in 0..3000 {
            used[usize::from(r.select([10, 0, 0, 9], &flow(i)).unwrap().0)] += 1;
        }
        assert_eq!(used[0], 0);
        for &n in &used[1..] {
            assert!((800..1200).contains(&n), "uneven ECMP: {used:?}");
        }
        assert!(r.select([11, 0, 0, 1], &flow(1)).is_none());
    }

    #[test]
    fn ecmp_is_stable_and_only_flows_on_a_failed_port_move() {
        let mut r = router();
        let before: Vec<PortId> = (0..1000)
            .map(|i| r.select([10, 0, 0, 9], &flow(i)).unwrap().0)
            .collect();
        let again: Vec<PortId> = (0..1000)
            .map(|i| r.select([10, 0, 0, 9], &flow(i)).unwrap().0)
            .collect();
        assert_eq!(before, again, "same flow, same port");
        let mut out = Vec::new();
        let mut rng = inca_switch::device::device_rng(1, 0);
        r.handle(
            0,
            Input::LinkState { port: 2, up: false },
            &mut rng,
            &mut out,
        );
        // Not yet: detection takes detect_delay.
        assert!(r.port_in_use(2));
        let Output::Timer { at, token } = out[0] else {
            panic!()
        };
        assert_eq!(at, 50_000_000);
        r.handle(at, Input::Timer { token }, &mut rng, &mut out);
        assert!(!r.port_in_use(2));
        for i in 0..1000u16 {
            let (p, _) = r.select([10, 0, 0, 9], &flow(i)).unwrap();
            if before[usize::from(i)] == 2 {
                assert_ne!(p, 2, "flow {i} rerouted off the failed port");
            } else {
                assert_eq!(
                    p,
                    before[usize::from(i)],
                    "flow {i} on a healthy port must not move"
                );
            }
        }
    }

    #[test]
    fn forwarding_decrements_ttl_and_keeps_the_checksum_valid() {
        let mut r = router();
        let ep = inca_wire::Endpoints::new(
            [2; 6],
            "192.0.2.1".parse().unwrap(),
            [4; 6],
            "10.0.0.9".parse().unwrap(),
        );
        let frame = inca_wire::build_udp_frame(&ep, 1, 2, b"hi", true).unwrap();
        let mut out = Vec::new();
        let mut rng = inca_switch::device::device_rng(1, 0);
        r.handle(5, Input::Frame { port: 0, frame }, &mut rng, &mut out);
        let Output::Transmit { at, frame, .. } = &out[0] else {
            panic!("{out:?}")
        };
        assert_eq!(*at, 1_005);
        let ip = Ipv4Packet::new_checked(&frame[14..]).unwrap();
        assert_eq!(ip.ttl(), 63);
        assert!(ip.verify_checksum());
        assert_eq!(&frame[0..6], &[2, 0, 0, 0, 0, 2]);
    }

    #[test]
    fn garbage_is_counted_not_fatal() {
        let mut r = router();
        let mut out = Vec::new();
        let mut rng = inca_switch::device::device_rng(1, 0);
        for len in 0..80 {
            r.handle(
                0,
                Input::Frame {
                    port: 0,
                    frame: vec![0x45; len],
                },
                &mut rng,
                &mut out,
            );
        }
        assert_eq!(r.stats().malformed, 80);
        assert!(out.is_empty());
    }
}
