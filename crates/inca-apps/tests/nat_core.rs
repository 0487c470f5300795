//! Differential test: the plain NAT program through the switch model and a
//! reference built from `inca_apps::core::nat` alone (allocator, mapping,
//! rewrite) give identical outputs — frames and ports — on random packet
//! sequences (TCP, UDP with and without checksum, ICMP echo; inside flows,
//! replies to allocated endpoints, unsolicited outside packets).

use std::collections::BTreeMap;

use inca_apps::core::nat::{self, Allocator, Direction, Mapping, Pool};
use inca_apps::core::Endpoint;
use inca_apps::fixtures::{flow_frame, FlowProto};
use inca_apps::headers::parse;
use inca_apps::nat::Nat;
use inca_switch::harness::Harness;
use inca_switch::{PortId, Profile, Switch};
use proptest::prelude::*;

const OUTSIDE: PortId = 0;
const PUBLIC: [u8; 4] = [198, 51, 100, 1];
const FLOWS: usize = 1024;
const STEP: u64 = 5_000_000;

/// The NAT as the core defines it.
struct Reference {
    alloc: Allocator,
    /// Reply 5-tuple → (inside endpoint, inside port).
    back: BTreeMap<[u8; 13], (Endpoint, PortId)>,
}

impl Reference {
    fn new() -> Self {
        Reference {
            alloc: Allocator::new(Pool { base: PUBLIC }, FLOWS as u64),
            back: BTreeMap::new(),
        }
    }

    fn step(&mut self, port: PortId, frame: &[u8]) -> Vec<(PortId, Vec<u8>)> {
        let Some(p) = parse(frame).ok().and_then(|p| nat::flow(&p)) else {
            return Vec::new();
        };
        let mut f = frame.to_vec();
        match Direction::by_port(port, OUTSIDE) {
            Direction::Inbound => match self.back.get(&p.five_tuple()) {
                Some(&(to, inside)) => {
                    nat::translate(&mut f, &p, Direction::Inbound, to);
                    vec![(inside, f)]
                }
                None => Vec::new(),
            },
            Direction::Outbound => {
                let Some(public) = self.alloc.allocate(&p) else {
                    return Vec::new();
                };
                let m = Mapping::of(&p, public);
                self.back.entry(m.reply_key).or_insert((m.inside, port));
                nat::translate(&mut f, &p, Direction::Outbound, public);
                vec![(OUTSIDE, f)]
            }
        }
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

/// One random packet: from inside, a reply to an allocated endpoint, or
/// an unsolicited outside packet.
fn packet(op: (u8, u8, u8, u8), r: &Reference) -> (PortId, Vec<u8>) {
    let (kind, a, b, c) = op;
    let inside = [10, 0, 0, 1 + a % 3];
    let remote = [203, 0, 113, 1 + b % 2];
    match kind % 4 {
        0 | 1 => {
            let port = 2 + PortId::from(c % 2);
            let pr = proto(c / 2);
            (
                port,
                flow_frame(pr, inside, 1000 + u16::from(b % 4), remote, 80),
            )
        }
        2 if !r.alloc.is_empty() => {
            // A reply: swap a known inside flow's remote end onto the
            // public endpoint it was given.
            let keys: Vec<_> = r.back.keys().copied().collect();
            let k = keys[usize::from(a) % keys.len()];
            let (src, dst) = ([k[0], k[1], k[2], k[3]], [k[4], k[5], k[6], k[7]]);
            let (sport, dport) = (
                u16::from_be_bytes([k[9], k[10]]),
                u16::from_be_bytes([k[11], k[12]]),
            );
            let pr = match k[8] {
                6 => FlowProto::Tcp(0x10),
                17 => FlowProto::Udp,
                _ => FlowProto::IcmpEcho(false),
            };
            (OUTSIDE, flow_frame(pr, src, sport, dst, dport))
        }
        _ => {
            let pr = proto(c);
            (
                OUTSIDE,
                flow_frame(pr, remote, 80, PUBLIC, 1024 + u16::from(a % 8)),
            )
        }
    }
}

fn run(ops: &[(u8, u8, u8, u8)]) {
    let sw = Switch::new(Profile::tofino(), Nat::new(FLOWS, OUTSIDE, PUBLIC)).unwrap();
    let mut h = Harness::new(sw, 1);
    let mut r = Reference::new();
    for (i, &op) in ops.iter().enumerate() {
        let (port, frame) = packet(op, &r);
        let t = i as u64 * STEP;
        h.send(t, port, frame.clone());
        h.advance_to(t + STEP - 1);
        let got: Vec<(PortId, Vec<u8>)> = h.take().into_iter().map(|t| (t.port, t.frame)).collect();
        let want = r.step(port, &frame);
        assert_eq!(got, want, "packet {i} on port {port}: {frame:02x?}");
    }
    assert_eq!(h.device.program().allocated(), r.alloc.len());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn plain_nat_matches_the_core(ops in prop::collection::vec(any::<(u8, u8, u8, u8)>(), 1..60)) {
        run(&ops);
    }
}
