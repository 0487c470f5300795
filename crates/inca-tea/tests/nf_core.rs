//! Differential tests: TEA's NFs, driven through their `TeaNf` hooks over a
//! stand-in for the DRAM table (lookup, remote miss, punt, insert,
//! re-inject), give the same outputs — frames, verdicts, table contents —
//! as references built from `inca_apps::core` alone, on random packets.

use std::collections::BTreeMap;

use inca_apps::core::firewall::{self, Opening, Orientation, Side};
use inca_apps::core::lb::{self, Spread};
use inca_apps::core::nat::{self, Allocator, Direction, Keying, Mapping, Pool};
use inca_apps::core::vpn::{self, TunnelKey};
use inca_apps::core::Endpoint;
use inca_apps::fixtures::vxlan_frame;
use inca_apps::fixtures::{flow_frame, FlowProto};
use inca_apps::headers::parse;
use inca_switch::PortId;
use inca_tea::nf::firewall::STATE_ESTABLISHED;
use inca_tea::nf::{TeaFirewall, TeaLb, TeaNat, TeaVpn};
use inca_tea::switch::{LookupMd, TeaNf, Verdict};
use proptest::prelude::*;

const OUTSIDE: PortId = 1;
const INSIDE: PortId = 2;
const PUBLIC: [u8; 4] = [198, 51, 100, 1];

/// One packet through an NF with its table as TEA would run it: the key
/// looked up, a miss handled, a punt's inserts applied and the packet
/// re-injected once. Returns (verdict, frame after).
fn run_nf<N: TeaNf>(
    nf: &mut N,
    table: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    port: PortId,
    frame: &[u8],
) -> (Verdict, Vec<u8>) {
    let mut f = frame.to_vec();
    let Ok(p) = parse(frame) else {
        return (Verdict::Drop, f);
    };
    let md = LookupMd {
        ingress_port: port,
        ..LookupMd::default()
    };
    let Some(key) = nf.key(frame, &p, port) else {
        if let Some((k, v)) = nf.learn(&p, port) {
            table.insert(k, v);
        }
        let v = nf.on_bypass(&mut f, &p, &md);
        return (v, f);
    };
    if let Some(v) = table.get(&key) {
        let v = nf.on_found(&mut f, &p, v, &md);
        return (v, f);
    }
    match nf.on_remote_miss(&mut f, &p, &md) {
        Verdict::ToCpu(reason) => {
            let action = nf.on_punt(frame, &p, port, reason);
            for (k, v) in action.inserts {
                table.insert(k, v);
            }
            match (action.reinject, table.get(&key)) {
                (true, Some(v)) => {
                    let mut f = frame.to_vec();
                    let v = nf.on_found(&mut f, &p, &v.clone(), &md);
                    (v, f)
                }
                _ => (Verdict::Drop, frame.to_vec()),
            }
        }
        v => (v, f),
    }
}

fn proto(i: u8) -> FlowProto {
    match i % 5 {
        0 => FlowProto::Tcp(0x02),
        1 => FlowProto::Tcp(0x10),
        2 => FlowProto::Udp,
        3 => FlowProto::UdpNoChecksum,
        _ => FlowProto::IcmpEcho(true),
    }
}

/// The NAT as the core defines it, with its state as a TEA table.
struct NatReference {
    alloc: Allocator,
    table: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl NatReference {
    fn step(&mut self, port: PortId, frame: &[u8]) -> (Verdict, Vec<u8>) {
        let mut f = frame.to_vec();
        let Some(p) = parse(frame).ok().and_then(|p| nat::flow(&p)) else {
            return (Verdict::Drop, f);
        };
        let dir = Direction::by_port(port, OUTSIDE);
        let key = nat::key(&p, dir, Keying::FiveTuple).as_bytes().to_vec();
        if !self.table.contains_key(&key) && dir == Direction::Outbound {
            let Some(public) = self.alloc.allocate(&p) else {
                return (Verdict::Drop, f);
            };
            let m = Mapping::of(&p, public);
            self.table
                .insert(m.out_key.to_vec(), m.public.to_bytes().to_vec());
            self.table
                .insert(m.reply_key.to_vec(), m.inside.to_bytes().to_vec());
        }
        let Some(to) = self
            .table
            .get(&key)
            .and_then(|v| inca_apps::core::Endpoint::from_bytes(v))
        else {
            return (Verdict::Drop, f);
        };
        nat::translate(&mut f, &p, dir, to);
        let out = match dir {
            Direction::Outbound => OUTSIDE,
            Direction::Inbound => INSIDE,
        };
        (Verdict::Forward(out), f)
    }
}

fn nat_packet(op: (u8, u8, u8, u8), r: &NatReference) -> (PortId, Vec<u8>) {
    let (kind, a, b, c) = op;
    let remote = [203, 0, 113, 1 + b % 2];
    match kind % 4 {
        0 | 1 => (
            INSIDE + PortId::from(c % 2) * 5,
            flow_frame(
                proto(c / 2),
                [10, 0, 0, 1 + a % 3],
                1000 + u16::from(b % 4),
                remote,
                80,
            ),
        ),
        2 if !r.table.is_empty() => {
            // A reply to some allocated public endpoint.
            let keys: Vec<_> = r.table.keys().filter(|k| k[4..8] == PUBLIC).collect();
            let Some(k) = keys.get(usize::from(a) % keys.len().max(1)) else {
                return (OUTSIDE, flow_frame(proto(c), remote, 80, PUBLIC, 1024));
            };
            let pr = match k[8] {
                6 => FlowProto::Tcp(0x10),
                17 => FlowProto::Udp,
                _ => FlowProto::IcmpEcho(false),
            };
            let port = |i: usize| u16::from_be_bytes([k[i], k[i + 1]]);
            (
                OUTSIDE,
                flow_frame(pr, [k[0], k[1], k[2], k[3]], port(9), PUBLIC, port(11)),
            )
        }
        _ => (
            OUTSIDE,
            flow_frame(proto(c), remote, 80, PUBLIC, 1024 + u16::from(a % 8)),
        ),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn tea_nat_matches_the_core(
        ops in prop::collection::vec(any::<(u8, u8, u8, u8)>(), 1..80),
        capacity in 1u64..40,
    ) {
        let mut nf = TeaNat::new(OUTSIDE, INSIDE, PUBLIC, capacity);
        let mut table = BTreeMap::new();
        let mut r = NatReference {
            alloc: Allocator::new(Pool { base: PUBLIC }, capacity),
            table: BTreeMap::new(),
        };
        for (i, &op) in ops.iter().enumerate() {
            let (port, frame) = nat_packet(op, &r);
            let got = run_nf(&mut nf, &mut table, port, &frame);
            let want = r.step(port, &frame);
            prop_assert_eq!(&got, &want, "packet {} on port {}", i, port);
            prop_assert_eq!(&table, &r.table, "table after packet {}", i);
        }
        prop_assert_eq!(nf.allocated(), r.alloc.len());
    }
}

/// The firewall as the core defines it, with its state as a TEA table:
/// outside packets look up their own 5-tuple; an inside SYN opens the
/// reverse one.
fn firewall_reference(
    table: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    port: PortId,
    frame: &[u8],
) -> (Verdict, Vec<u8>) {
    let f = frame.to_vec();
    let Ok(p) = parse(frame) else {
        return (Verdict::Drop, f);
    };
    let side = Side::by_port(port, OUTSIDE);
    match side {
        Side::Inside => {
            if Opening::TcpSyn.opens(&p, side) {
                let key = firewall::conn_key(&p, side, Orientation::AsSentFromOutside);
                table.insert(key.to_vec(), vec![STATE_ESTABLISHED]);
            }
            let v = if p.ipv4 {
                Verdict::Forward(OUTSIDE)
            } else {
                Verdict::Drop
            };
            (v, f)
        }
        Side::Outside => {
            let key = firewall::conn_key(&p, side, Orientation::AsSentFromOutside);
            let open = p.has_ports && table.get(&key[..]) == Some(&vec![STATE_ESTABLISHED]);
            (
                if open {
                    Verdict::Forward(INSIDE)
                } else {
                    Verdict::Drop
                },
                f,
            )
        }
    }
}

fn fw_proto(i: u8) -> FlowProto {
    match i % 5 {
        0 => FlowProto::Tcp(0x02),
        1 => FlowProto::Tcp(0x12),
        2 => FlowProto::Tcp(0x10),
        3 => FlowProto::Udp,
        _ => FlowProto::IcmpEcho(true),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn tea_firewall_matches_the_core(ops in prop::collection::vec(any::<(u8, u8, u8, u8)>(), 1..80)) {
        let mut nf = TeaFirewall::new(OUTSIDE, INSIDE);
        let (mut table, mut want_table) = (BTreeMap::new(), BTreeMap::new());
        for (i, &(kind, a, b, c)) in ops.iter().enumerate() {
            let (host, hport) = ([10, 0, 0, 1 + a % 3], 1000 + u16::from(b % 3));
            let (remote, rport) = ([203, 0, 113, 1 + b % 2], 80 + u16::from(a % 2));
            let (port, frame) = if kind % 2 == 0 {
                (INSIDE, flow_frame(fw_proto(c), host, hport, remote, rport))
            } else {
                (OUTSIDE, flow_frame(fw_proto(c), remote, rport, host, hport))
            };
            let got = run_nf(&mut nf, &mut table, port, &frame);
            let want = firewall_reference(&mut want_table, port, &frame);
            prop_assert_eq!(&got, &want, "packet {} on port {}", i, port);
            prop_assert_eq!(&table, &want_table, "table after packet {}", i);
        }
    }
}

const VIP: Endpoint = Endpoint::new([192, 0, 2, 1], 80);
const BACKEND_PORT: PortId = 3;

/// The load balancer as the core defines it, with its state as a TEA table.
fn lb_reference(
    table: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    backends: &[Endpoint],
    port: PortId,
    frame: &[u8],
) -> (Verdict, Vec<u8>) {
    let mut f = frame.to_vec();
    let Ok(p) = parse(frame) else {
        return (Verdict::Drop, f);
    };
    if !(p.has_ports && lb::to_vip(&p, VIP)) {
        // Return traffic is direct: no lookup, no rewrite.
        let v = if port == BACKEND_PORT {
            Verdict::Forward(OUTSIDE)
        } else {
            Verdict::Drop
        };
        return (v, f);
    }
    let key = lb::client_key(&p, true, VIP).to_vec();
    if !table.contains_key(&key) {
        let Some(slot) = Spread::Modulo(backends.len()).slot(&key) else {
            return (Verdict::Drop, f);
        };
        table.insert(key.clone(), backends[slot].to_bytes().to_vec());
    }
    let to = Endpoint::from_bytes(&table[&key]).unwrap();
    lb::to_backend(&mut f, &p, to);
    (Verdict::Forward(BACKEND_PORT), f)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn tea_lb_matches_the_core(
        ops in prop::collection::vec(any::<(u8, u8, u8, u8)>(), 1..80),
        n in 0usize..4,
    ) {
        let backends: Vec<Endpoint> =
            (0..n as u8).map(|i| Endpoint::new([10, 1, 0, 1 + i], 8080)).collect();
        let mut nf = TeaLb {
            vip: VIP.ip,
            vip_port: VIP.port,
            backends: backends.iter().map(|b| (b.ip, b.port)).collect(),
            client_port: OUTSIDE,
            backend_port: BACKEND_PORT,
        };
        let (mut table, mut want_table) = (BTreeMap::new(), BTreeMap::new());
        for (i, &(kind, a, b, c)) in ops.iter().enumerate() {
            let pr = if c % 2 == 0 { FlowProto::Tcp(0x10) } else { FlowProto::Udp };
            let (client, cport) = ([10, 9, 0, 1 + a % 3], 2000 + u16::from(b % 3));
            let (port, frame) = match kind % 3 {
                0 => (OUTSIDE, flow_frame(pr, client, cport, VIP.ip, VIP.port)),
                1 => (BACKEND_PORT, flow_frame(pr, [10, 1, 0, 1], 8080, client, cport)),
                _ => (OUTSIDE, flow_frame(pr, client, cport, VIP.ip, 81)),
            };
            let got = run_nf(&mut nf, &mut table, port, &frame);
            let want = lb_reference(&mut want_table, &backends, port, &frame);
            prop_assert_eq!(&got, &want, "packet {} on port {}", i, port);
            prop_assert_eq!(&table, &want_table, "table after packet {}", i);
        }
    }
}

const LOCAL: [u8; 4] = [192, 0, 2, 1];

/// The VPN gateway as the core defines it: inbound tunnels looked up by
/// their wide key and re-tunnelled to the server.
fn vpn_reference(
    table: &BTreeMap<Vec<u8>, Vec<u8>>,
    port: PortId,
    frame: &[u8],
) -> (Verdict, Vec<u8>) {
    let mut f = frame.to_vec();
    let m = vpn::parse_vxlan(frame).ok().filter(|m| m.vxlan);
    let (Some(m), true) = (m, port == OUTSIDE) else {
        let ipv4 = parse(frame).is_ok_and(|p| p.ipv4);
        let v = if port != OUTSIDE && ipv4 {
            Verdict::Forward(OUTSIDE)
        } else {
            Verdict::Drop
        };
        return (v, f);
    };
    let Some(v) = table.get(&TunnelKey::inbound(&m).to_wide_bytes()[..]) else {
        return (Verdict::Drop, f);
    };
    let server = [v[0], v[1], v[2], v[3]];
    let vni = u32::from_be_bytes([v[4], v[5], v[6], v[7]]);
    if vpn::retunnel(&mut f, &m, LOCAL, server, vni) {
        (Verdict::Forward(INSIDE), f)
    } else {
        (Verdict::Drop, frame.to_vec())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn tea_vpn_matches_the_core(
        ops in prop::collection::vec(any::<(u8, u8, u8, u8)>(), 1..60),
        mappings in prop::collection::vec((0u32..4, 0u8..4, any::<[u8; 4]>(), 0u32..1 << 24), 0..6),
    ) {
        let mut nf = TeaVpn { outside_port: OUTSIDE, inside_port: INSIDE, local: LOCAL };
        let mut table = BTreeMap::new();
        for &(vni, vm, server, int_vni) in &mappings {
            table.insert(
                TunnelKey::new(vni, [10, 0, 0, vm]).to_wide_bytes().to_vec(),
                inca_tea::nf::vpn::vpn_value(server, int_vni),
            );
        }
        let before = table.clone();
        for (i, &(kind, a, b, c)) in ops.iter().enumerate() {
            let remote = [203, 0, 113, 1 + c % 2];
            let (port, frame) = match kind % 4 {
                0 | 1 => (OUTSIDE, vxlan_frame(remote, LOCAL, u32::from(a % 4), [172, 16, 0, 1], [10, 0, 0, b % 4])),
                2 => (INSIDE, vxlan_frame([10, 9, 9, 9], remote, u32::from(a % 4), [10, 0, 0, b % 4], [172, 16, 0, 1])),
                _ => (OUTSIDE, flow_frame(FlowProto::Udp, remote, 53, LOCAL, 4000)),
            };
            let got = run_nf(&mut nf, &mut table, port, &frame);
            prop_assert_eq!(&got, &vpn_reference(&table, port, &frame), "packet {} on port {}", i, port);
        }
        prop_assert_eq!(table, before);
    }
}
