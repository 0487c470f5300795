//! Differential test: the plain load balancer through the switch model and
//! a reference built from `inca_apps::core::lb` alone (with the program's
//! bucket assignment as the pool) give identical outputs — frames and
//! ports — on random packet sequences: new and known connections to the
//! VIP, backend replies (known, racing, unknown), stray packets.

use std::collections::BTreeMap;

use inca_apps::core::lb::{self, Spread};
use inca_apps::core::Endpoint;
use inca_apps::fixtures::{flow_frame, FlowProto};
use inca_apps::headers::parse;
use inca_apps::lb::{Backend, LoadBalancer};
use inca_switch::device::SECONDS;
use inca_switch::harness::Harness;
use inca_switch::{PortId, Profile, Switch};
use proptest::prelude::*;

const VIP: Endpoint = Endpoint::new([192, 0, 2, 1], 80);
const BUCKETS: usize = 16;
const STEP: u64 = 5_000_000;

/// The load balancer as the core defines it.
struct Reference {
    buckets: Vec<Option<Backend>>,
    /// Client 5-tuple → (backend, client port).
    conns: BTreeMap<[u8; 13], (Backend, PortId)>,
}

impl Reference {
    fn step(&mut self, port: PortId, frame: &[u8]) -> Vec<(PortId, Vec<u8>)> {
        let Some(p) = parse(frame).ok().filter(|p| p.has_ports) else {
            return Vec::new();
        };
        let mut f = frame.to_vec();
        let to_vip = lb::to_vip(&p, VIP);
        let key = lb::client_key(&p, to_vip, VIP);
        let known = self.conns.get(&key).copied();
        if !to_vip {
            return match known {
                Some((b, client)) if b.ip == p.src && b.port == p.sport => {
                    lb::from_backend(&mut f, &p, VIP);
                    vec![(client, f)]
                }
                None if p.sport == VIP.port && port != 0 => {
                    lb::from_backend(&mut f, &p, VIP);
                    vec![(0, f)]
                }
                _ => Vec::new(),
            };
        }
        let backend = match known {
            Some((b, _)) => b,
            None => {
                let slot = Spread::Buckets(BUCKETS).slot(&key);
                let Some(b) = slot.and_then(|s| self.buckets[s]) else {
                    return Vec::new();
                };
                self.conns.insert(key, (b, port));
                b
            }
        };
        lb::to_backend(&mut f, &p, Endpoint::new(backend.ip, backend.port));
        vec![(backend.egress, f)]
    }
}

fn packet(op: (u8, u8, u8, u8)) -> (PortId, Vec<u8>) {
    let (kind, a, b, c) = op;
    let pr = if c % 2 == 0 {
        FlowProto::Tcp(0x10)
    } else {
        FlowProto::Udp
    };
    let (client, cport) = ([10, 9, 0, 1 + a % 3], 2000 + u16::from(b % 3));
    let backend = 1 + c % 3;
    match kind % 4 {
        0 | 1 => (0, flow_frame(pr, client, cport, VIP.ip, VIP.port)),
        2 => (
            PortId::from(backend),
            flow_frame(pr, [10, 1, 0, backend], VIP.port, client, cport),
        ),
        _ => (
            PortId::from(backend),
            flow_frame(pr, [10, 1, 0, backend], 9999, client, cport),
        ),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn plain_lb_matches_the_core(ops in prop::collection::vec(any::<(u8, u8, u8, u8)>(), 1..60)) {
        let pool = LoadBalancer::default_pool(3, VIP.port);
        let lb = LoadBalancer::new(1024, VIP.ip, VIP.port, pool, BUCKETS, 60 * SECONDS);
        let mut h = Harness::new(Switch::new(Profile::tofino(), lb).unwrap(), 1);
        h.advance_to(STEP);
        let mut r = Reference {
            buckets: h.device.program().assignment().to_vec(),
            conns: BTreeMap::new(),
        };
        prop_assert_eq!(r.buckets.len(), BUCKETS);
        for (i, &op) in ops.iter().enumerate() {
            let (port, frame) = packet(op);
            let t = (i as u64 + 1) * STEP;
            h.send(t, port, frame.clone());
            h.advance_to(t + STEP - 1);
            let got: Vec<_> = h.take().into_iter().map(|t| (t.port, t.frame)).collect();
            prop_assert_eq!(got, r.step(port, &frame), "packet {} on port {}", i, port);
        }
        prop_assert_eq!(h.device.program().connections(), r.conns.len());
    }
}
