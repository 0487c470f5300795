//! Differential tests: RedPlane's apps — their flow key, their reference
//! step (`SpecModel`) and their data-plane translation — agree with
//! references built from `inca_apps::core` alone, on random packets and
//! random replicated values: NAT, firewall, LB, EPC, KV, Sync-Counter, and
//! the bounded-mode Async-Counter and heavy-hitter sketch.

use inca_apps::core::counter::{self, Overflow};
use inca_apps::core::epc::Encap;
use inca_apps::core::firewall::{self, Side};
use inca_apps::core::kv::{self, Op};
use inca_apps::core::lb;
use inca_apps::core::nat::{self, Direction, Keying};
use inca_apps::core::sketch::{self, RowHashes};
use inca_apps::core::Endpoint;
use inca_apps::core::Prefix;
use inca_apps::fixtures::{flow_frame, FlowProto};
use inca_apps::headers::parse;
use inca_redplane::apps::epc::RpEpc;
use inca_redplane::apps::firewall::RpFirewall;
use inca_redplane::apps::kv::{RpKv, KV_PORT, OP_UPDATE as RP_KV_UPDATE};
use inca_redplane::apps::lb::RpLb;
use inca_redplane::apps::nat::RpNat;
use inca_redplane::apps::sync_counter::SyncCounter;
use inca_redplane::apps::{RedPlaneApp, SpecModel};
use inca_redplane::snapshot::{AsyncCounter, BoundedApp, HeavyHitterSketch};
use proptest::prelude::*;

const PUBLIC: [u8; 4] = [198, 51, 100, 1];

fn proto(i: u8) -> FlowProto {
    match i % 6 {
        0 => FlowProto::Tcp(0x02),
        1 => FlowProto::Tcp(0x10),
        2 => FlowProto::Udp,
        3 => FlowProto::UdpNoChecksum,
        4 => FlowProto::IcmpEcho(true),
        _ => FlowProto::IcmpEcho(false),
    }
}

/// A random packet: outbound from an inside host, or inbound to the public
/// address (or to some other address).
fn packet(op: (u8, u8, u8, u8)) -> Vec<u8> {
    let (kind, a, b, c) = op;
    let remote = [203, 0, 113, 1 + b % 2];
    match kind % 3 {
        0 => flow_frame(
            proto(c),
            [10, 0, 0, 1 + a % 3],
            1000 + u16::from(b),
            remote,
            80,
        ),
        1 => flow_frame(proto(c), remote, 80, PUBLIC, 1024 + u16::from(a)),
        _ => flow_frame(
            proto(c),
            remote,
            80,
            [10, 0, 0, 1 + a % 3],
            1000 + u16::from(b),
        ),
    }
}

/// What a reference step gives: the flow key, the outputs (from the IPv4
/// header on) and the address to route on.
type Step = (Option<Vec<u8>>, Vec<Vec<u8>>, Option<[u8; 4]>);

/// The NAT's reference step as the core defines it.
fn nat_reference(frame: &[u8], value: &[u8]) -> Step {
    let Some(p) = parse(frame)
        .ok()
        .filter(|p| p.ipv4)
        .and_then(|p| nat::flow(&p))
    else {
        return (None, Vec::new(), None);
    };
    let dir = Direction::by_public_address(&p, PUBLIC);
    let key = nat::key(&p, dir, Keying::Endpoint).as_bytes().to_vec();
    let to = Endpoint::from_bytes(value).filter(|e| value.len() == 6 && !e.is_unset());
    let Some(to) = to else {
        return (Some(key), Vec::new(), None);
    };
    let mut f = frame.to_vec();
    nat::translate(&mut f, &p, dir, to);
    let route = match dir {
        Direction::Outbound => p.dst,
        Direction::Inbound => to.ip,
    };
    (
        Some(key),
        vec![f[usize::from(p.l3)..].to_vec()],
        Some(route),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn redplane_nat_matches_the_core(
        op in any::<(u8, u8, u8, u8)>(),
        value in prop_oneof![Just(vec![0u8; 6]), prop::collection::vec(any::<u8>(), 6..=6)],
    ) {
        let nat = RpNat::new(PUBLIC, 1024, 64_512, 2);
        let frame = packet(op);
        let (key, outs, route) = nat_reference(&frame, &value);
        prop_assert_eq!(nat.spec_key(&frame), key.clone());
        let p = parse(&frame).unwrap();
        prop_assert_eq!(
            RedPlaneApp::key(&nat, &p, &frame).map(|k| k.as_slice().to_vec()),
            key.clone()
        );
        if key.is_some() {
            let (got, next) = nat.spec_step(&value, &frame);
            prop_assert_eq!(got, outs);
            prop_assert_eq!(next, value.clone());
            let mut f = frame.clone();
            prop_assert_eq!(nat.translate(&mut f, &p, &value), route);
        }
    }
}

/// The firewall's reference step as the core defines it: (key, outputs,
/// next value).
fn firewall_reference(frame: &[u8], state: &[u8]) -> (Option<Vec<u8>>, Vec<Vec<u8>>, Vec<u8>) {
    let internal = Prefix::new([10, 0, 0, 0], 8);
    let p = parse(frame).unwrap();
    let side = (p.ipv4 && p.proto == 6 && p.has_ports)
        .then(|| Side::by_prefix(&p, internal))
        .flatten();
    let Some(side) = side else {
        return (None, Vec::new(), state.to_vec());
    };
    let key = firewall::inside_end(&p, side).to_bytes().to_vec();
    let write = side == Side::Inside && firewall::handshake_writes(&p, frame);
    let s = state.first().copied().unwrap_or(0);
    let (pass, next) = firewall::handshake_step(s, side, write, p.tcp_flags);
    let mut v = vec![0u8; 6];
    v[0] = next;
    let out = if pass {
        vec![frame[usize::from(p.l3)..].to_vec()]
    } else {
        Vec::new()
    };
    (Some(key), out, v)
}

fn fw_proto(i: u8) -> FlowProto {
    match i % 6 {
        0 => FlowProto::Tcp(0x02),
        1 => FlowProto::Tcp(0x12),
        2 => FlowProto::Tcp(0x10),
        3 => FlowProto::Tcp(0x18),
        4 => FlowProto::Tcp(0x04),
        _ => FlowProto::Udp,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn redplane_firewall_matches_the_core(
        (kind, a, b, c) in any::<(u8, u8, u8, u8)>(),
        state in 0u8..4,
    ) {
        let fw = RpFirewall::new([10, 0, 0, 0], 8);
        let (host, remote) = ([10, 0, 0, 1 + a % 3], [203, 0, 113, 1 + b % 2]);
        let frame = match kind % 3 {
            0 => flow_frame(fw_proto(c), host, 1000 + u16::from(b), remote, 80),
            1 => flow_frame(fw_proto(c), remote, 80, host, 1000 + u16::from(b)),
            _ => flow_frame(fw_proto(c), remote, 80, [192, 0, 2, 1], 1000),
        };
        let value = [state, 0, 0, 0, 0, 0];
        let (key, outs, next) = firewall_reference(&frame, &value);
        prop_assert_eq!(fw.spec_key(&frame), key.clone());
        if key.is_some() {
            prop_assert_eq!(fw.spec_step(&value, &frame), (outs, next));
        }
    }
}

/// The load balancer's reference step as the core defines it.
fn lb_reference(frame: &[u8], value: &[u8], vip: Endpoint, backends: Prefix) -> Step {
    let Some(p) = parse(frame).ok().filter(|p| p.ipv4 && p.has_ports) else {
        return (None, Vec::new(), None);
    };
    let to_vip = lb::to_vip(&p, vip);
    if !to_vip && !backends.contains(p.src) {
        return (None, Vec::new(), None);
    }
    let key = lb::client_end(&p, to_vip).to_bytes().to_vec();
    let backend = Endpoint::from_bytes(value).filter(|e| value.len() == 6 && !e.is_unset());
    let Some(backend) = backend else {
        return (Some(key), Vec::new(), None);
    };
    let mut f = frame.to_vec();
    let route = if to_vip {
        lb::to_backend(&mut f, &p, backend);
        backend.ip
    } else {
        lb::from_backend(&mut f, &p, vip);
        p.dst
    };
    (
        Some(key),
        vec![f[usize::from(p.l3)..].to_vec()],
        Some(route),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn redplane_lb_matches_the_core(
        (kind, a, b, c) in any::<(u8, u8, u8, u8)>(),
        value in prop_oneof![Just(vec![0u8; 6]), prop::collection::vec(any::<u8>(), 6..=6)],
    ) {
        let vip = Endpoint::new([203, 0, 113, 10], 80);
        let net = Prefix::new([10, 1, 0, 0], 16);
        let rp = RpLb::new((vip.ip, vip.port), (net.net, net.len));
        let (client, cport) = ([198, 18, 0, 1 + a % 3], 2000 + u16::from(b));
        let frame = match kind % 4 {
            0 => flow_frame(proto(c), client, cport, vip.ip, vip.port),
            1 => flow_frame(proto(c), [10, 1, 0, 1 + b % 4], 8080, client, cport),
            2 => flow_frame(proto(c), client, cport, vip.ip, 81),
            _ => flow_frame(proto(c), [10, 2, 0, 1], 8080, client, cport),
        };
        let (key, outs, route) = lb_reference(&frame, &value, vip, net);
        prop_assert_eq!(rp.spec_key(&frame), key.clone());
        if key.is_some() {
            let (got, next) = rp.spec_step(&value, &frame);
            prop_assert_eq!(got, outs);
            prop_assert_eq!(next, value.clone());
            let mut f = frame.clone();
            let p = parse(&frame).unwrap();
            prop_assert_eq!(rp.translate(&mut f, &p, &value), route);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// Downlink packets to a UE: encapsulated toward its eNB with its
    /// downlink TEID exactly as the core's GTP-U header says.
    #[test]
    fn redplane_epc_downlink_matches_the_core(
        (a, c, len) in (any::<u8>(), any::<u8>(), 0usize..600),
        value in prop::collection::vec(any::<u8>(), 12..=12),
        no_enb in any::<bool>(),
    ) {
        let sgw = [192, 0, 2, 1];
        let epc = RpEpc::new(sgw, ([10, 200, 0, 0], 16));
        let mut value = value;
        if no_enb {
            value[8..12].copy_from_slice(&[0; 4]);
        }
        let ue = [10, 200, a, 1 + c % 9];
        let ep = inca_wire::Endpoints::new(
            [2, 0, 0, 0, 0, 1],
            std::net::Ipv4Addr::new(8, 8, 8, 8),
            [2, 0, 0, 0, 0, 2],
            std::net::Ipv4Addr::from(ue),
        );
        let frame = inca_wire::build_udp_frame(&ep, 53, 4000, &vec![7; len], true).unwrap();
        prop_assert_eq!(epc.spec_key(&frame), Some(ue.to_vec()));
        let (outs, next) = epc.spec_step(&value, &frame);
        prop_assert_eq!(&next, &value);
        let enb = [value[8], value[9], value[10], value[11]];
        if enb == [0; 4] {
            prop_assert!(outs.is_empty());
        } else {
            let teid = u32::from_be_bytes([value[4], value[5], value[6], value[7]]);
            let inner = &frame[14..];
            let e = Encap { src: sgw, enb, teid, dont_fragment: false };
            let mut want = e.header(inner.len()).to_vec();
            want.extend_from_slice(inner);
            prop_assert_eq!(outs, vec![want]);
        }
    }
}

/// A RedPlane KV request: UDP to port 5000, op, 4-byte key, 32-bit value
/// (with or without a UDP checksum; sometimes to another port).
fn kv_request(op: u8, key: u8, value: u32, sum: bool, other_port: bool) -> Vec<u8> {
    let ep = inca_wire::Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        std::net::Ipv4Addr::new(10, 0, 0, 1 + key % 3),
        [2, 0, 0, 0, 0, 2],
        std::net::Ipv4Addr::new(10, 9, 0, 1),
    );
    let mut body = vec![op % 3, 0, 0, 0, key % 5];
    body.extend_from_slice(&value.to_be_bytes());
    let dport = if other_port { 5001 } else { KV_PORT };
    inca_wire::build_udp_frame(&ep, 40_000, dport, &body, sum).unwrap()
}

/// The KV store's reference step as the core defines it: (key, outputs,
/// next value).
fn kv_reference(frame: &[u8], state: u32) -> (Option<Vec<u8>>, Vec<Vec<u8>>, u32) {
    let p = parse(frame).unwrap();
    let l4 = usize::from(p.l4);
    if p.dport != KV_PORT {
        return (None, Vec::new(), state);
    }
    let b = &frame[l4 + 8..l4 + 17];
    let op = if b[0] == RP_KV_UPDATE {
        Op::Update
    } else {
        Op::Read
    };
    let mut cell = state;
    let value = kv::apply(op, &mut cell, u32::from_be_bytes([b[5], b[6], b[7], b[8]]));
    let mut f = frame.to_vec();
    let fields: [(usize, &[u8]); 1] = [(l4 + 13, &value.to_be_bytes())];
    assert!(kv::answer(&mut f, usize::from(p.l3), l4, &fields));
    (
        Some(b[1..5].to_vec()),
        vec![f[usize::from(p.l3)..].to_vec()],
        cell,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn redplane_kv_matches_the_core(
        req in any::<(u8, u8, u32, bool, bool)>(),
        state in any::<u32>(),
    ) {
        let (op, key, value, sum, other) = req;
        let frame = kv_request(op, key, value, sum, other && key % 7 == 0);
        let kv_app = RpKv::new();
        let (key, outs, next) = kv_reference(&frame, state);
        prop_assert_eq!(kv_app.spec_key(&frame), key.clone());
        if key.is_some() {
            let (got, got_next) = kv_app.spec_step(&state.to_be_bytes(), &frame);
            prop_assert_eq!(got, outs);
            prop_assert_eq!(got_next, next.to_be_bytes().to_vec());
        }
    }

    #[test]
    fn redplane_counters_match_the_core(
        op in any::<(u8, u8, u8, u8)>(),
        state in any::<u32>(),
    ) {
        let frame = packet(op);
        let p = parse(&frame).unwrap();
        // Sync-Counter: an exact key per TCP/UDP 5-tuple, a wrapping count.
        let sync = SyncCounter::new();
        let key = counter::flow_key(&p).filter(|_| p.has_ports);
        prop_assert_eq!(sync.spec_key(&frame), key.map(|k| k.to_vec()));
        let (outs, next) = sync.spec_step(&state.to_be_bytes(), &frame);
        let mut want = state;
        counter::add(&mut want, 1, Overflow::Wrap);
        prop_assert_eq!(next, want.to_be_bytes().to_vec());
        prop_assert_eq!(outs.len(), 1);
        // Async-Counter: the flow counter's entry.
        let key = counter::flow_key(&p).unwrap();
        prop_assert_eq!(AsyncCounter::default().index_of(&key), counter::index(&key, 1024));
        // The bounded heavy hitter: RedPlane's row hashes, 64 entries, a
        // report exactly when the minimum reaches the threshold.
        let hh = HeavyHitterSketch::new(5, vec![1], 3);
        for r in 0..5 {
            prop_assert_eq!(hh.index_of(r, &key), RowHashes::Cycled.hash(r, 6, &key));
        }
        let counts = [u32::from(op.0 % 5), u32::from(op.1 % 5) + 2, 3];
        let reported = hh.on_update(&p, 1, &counts).is_some();
        prop_assert_eq!(reported, sketch::min(counts) == Some(3));
    }
}
