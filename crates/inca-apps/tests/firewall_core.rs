//! Differential test: the plain firewall program through the switch model
//! and a reference built from `inca_apps::core::firewall` alone give
//! identical outputs (frames and ports) on random packet sequences: inside
//! connections opened, replies let in, unsolicited packets and RSTs.

use std::collections::BTreeMap;

use inca_apps::core::firewall::{self, is_rst, Opening, Orientation, Side};
use inca_apps::firewall::Firewall;
use inca_apps::fixtures::{flow_frame, FlowProto};
use inca_apps::headers::parse;
use inca_switch::device::SECONDS;
use inca_switch::harness::Harness;
use inca_switch::{PortId, Profile, Switch};
use proptest::prelude::*;

const OUTSIDE: PortId = 0;
const STEP: u64 = 5_000_000;

/// The firewall as the core defines it: connection key → inside port.
#[derive(Default)]
struct Reference {
    conns: BTreeMap<[u8; 13], PortId>,
}

impl Reference {
    fn step(&mut self, port: PortId, frame: &[u8]) -> Vec<(PortId, Vec<u8>)> {
        let Some(p) = parse(frame).ok().filter(|p| p.has_ports) else {
            return Vec::new();
        };
        let side = Side::by_port(port, OUTSIDE);
        let key = firewall::conn_key(&p, side, Orientation::AsSentFromInside);
        let out = match (side, self.conns.get(&key).copied()) {
            (Side::Outside, Some(inside)) => inside,
            (Side::Outside, None) => return Vec::new(),
            (Side::Inside, Some(_)) => OUTSIDE,
            (Side::Inside, None) => {
                if Opening::AnyButRst.opens(&p, side) {
                    self.conns.insert(key, port);
                }
                return vec![(OUTSIDE, frame.to_vec())];
            }
        };
        if is_rst(&p) {
            self.conns.remove(&key);
        }
        vec![(out, frame.to_vec())]
    }
}

fn proto(i: u8) -> FlowProto {
    match i % 5 {
        0 => FlowProto::Tcp(0x02),
        1 => FlowProto::Tcp(0x10),
        2 => FlowProto::Tcp(0x04),
        3 => FlowProto::Udp,
        _ => FlowProto::IcmpEcho(true),
    }
}

fn packet(op: (u8, u8, u8, u8)) -> (PortId, Vec<u8>) {
    let (kind, a, b, c) = op;
    let (host, hport) = ([10, 0, 0, 1 + a % 3], 1000 + u16::from(b % 3));
    let (remote, rport) = ([203, 0, 113, 1 + b % 2], 80 + u16::from(a % 2));
    if kind % 2 == 0 {
        (
            2 + PortId::from(c % 2),
            flow_frame(proto(c / 2), host, hport, remote, rport),
        )
    } else {
        (
            OUTSIDE,
            flow_frame(proto(c / 2), remote, rport, host, hport),
        )
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn plain_firewall_matches_the_core(ops in prop::collection::vec(any::<(u8, u8, u8, u8)>(), 1..60)) {
        let fw = Firewall::new(1024, OUTSIDE, 60 * SECONDS);
        let mut h = Harness::new(Switch::new(Profile::tofino(), fw).unwrap(), 1);
        let mut r = Reference::default();
        for (i, &op) in ops.iter().enumerate() {
            let (port, frame) = packet(op);
            let t = i as u64 * STEP;
            h.send(t, port, frame.clone());
            h.advance_to(t + STEP - 1);
            let got: Vec<_> = h.take().into_iter().map(|t| (t.port, t.frame)).collect();
            prop_assert_eq!(got, r.step(port, &frame), "packet {} on port {}", i, port);
        }
        prop_assert_eq!(h.device.program().connections(), r.conns.len());
    }
}
