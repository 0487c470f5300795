//! Differential tests: TEA's NFs, driven through their `TeaNf` hooks over a
//! stand-in for the DRAM table (lookup, remote miss, punt, insert,
//! re-inject), give the same outputs — frames, verdicts, table contents —
//! as references built from `inca_apps::core` alone, on random packets.

use std::collections::BTreeMap;

use inca_apps::core::nat::{self, Allocator, Direction, Keying, Mapping, Pool};
use inca_apps::fixtures::{flow_frame, FlowProto};
use inca_apps::headers::parse;
use inca_switch::PortId;
use inca_tea::nf::TeaNat;
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
