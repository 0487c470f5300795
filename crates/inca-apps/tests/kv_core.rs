//! Differential test: the plain key-value store through the switch model
//! and a reference built from `inca_apps::core::kv` alone (serve, answer)
//! give identical outputs — frames and ports — on random request sequences
//! (reads and updates of a few keys, new keys through the control plane, a
//! store that fills up, UDP with and without checksum).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use inca_apps::core::kv::{self, Op, Status};
use inca_apps::kvstore::{
    encode_kv, parse_kv, KvStore, Value, KV_PORT, OP_ACK, OP_READ, OP_REPLY, OP_UPDATE,
    STATUS_FULL, STATUS_MISS, STATUS_OK,
};
use inca_switch::harness::Harness;
use inca_switch::{PortId, Profile, Switch};
use inca_wire::{build_udp_frame, Endpoints};
use proptest::prelude::*;

const SEED: u64 = 11;
const FLOWS: usize = 4;
const STEP: u64 = 5_000_000;

/// The store as the core defines it.
#[derive(Default)]
struct Reference {
    values: BTreeMap<u64, Value>,
}

impl Reference {
    fn step(&mut self, port: PortId, frame: &[u8]) -> Vec<(PortId, Vec<u8>)> {
        let m = parse_kv(frame, false).expect("a KV request");
        let op = if m.op == OP_READ {
            Op::Read
        } else {
            Op::Update
        };
        let full = !self.values.contains_key(&m.key) && self.values.len() >= FLOWS;
        let s = kv::serve(op, self.values.get(&m.key).copied(), m.value);
        let (code, status) = match (op, s.status) {
            (Op::Read, Status::Ok) => (OP_REPLY, STATUS_OK),
            (Op::Read, Status::Miss) => (OP_REPLY, STATUS_MISS),
            (Op::Update, _) if full => (OP_ACK, STATUS_FULL),
            (Op::Update, _) => (OP_ACK, STATUS_OK),
        };
        if let (Some(v), false) = (s.store, full) {
            self.values.insert(m.key, v);
        }
        let mut f = frame.to_vec();
        for i in 0..6 {
            f.swap(i, 6 + i);
        }
        let mut value = Vec::new();
        for w in s.value {
            value.extend_from_slice(&w.to_be_bytes());
        }
        let kv_at = usize::from(m.kv);
        let fields: [(usize, &[u8]); 2] = [(kv_at, &[code, status]), (kv_at + 12, &value)];
        assert!(kv::answer(
            &mut f,
            usize::from(m.p.l3),
            usize::from(m.p.l4),
            &fields
        ));
        vec![(port, f)]
    }
}

fn request(op: (u8, u8, u16, u32, bool)) -> (PortId, Vec<u8>) {
    let (kind, key, id, x, sum) = op;
    let ep = Endpoints::new(
        [2, 0, 0, 0, 0, 1 + key % 3],
        Ipv4Addr::new(10, 0, 0, 1 + key % 3),
        [2, 0, 0, 0, 0, 0xaa],
        Ipv4Addr::new(10, 0, 0, 100),
    );
    let code = if kind % 2 == 0 { OP_READ } else { OP_UPDATE };
    let value: Value = [x, x.rotate_left(7), !x, x ^ 0x5555_aaaa];
    let payload = encode_kv(code, 0, id, u64::from(key % 6), &value);
    let frame = build_udp_frame(&ep, 40_000 + u16::from(key), KV_PORT, &payload, sum).unwrap();
    (PortId::from(key % 2) + 2, frame)
}

fn run(ops: &[(u8, u8, u16, u32, bool)]) {
    println!("seed {SEED}");
    let sw = Switch::new(Profile::tofino(), KvStore::new(FLOWS)).unwrap();
    let mut h = Harness::new(sw, SEED);
    let mut r = Reference::default();
    for (i, &op) in ops.iter().enumerate() {
        let (port, frame) = request(op);
        let t = i as u64 * STEP;
        h.send(t, port, frame.clone());
        h.advance_to(t + STEP - 1);
        let got: Vec<(PortId, Vec<u8>)> = h.take().into_iter().map(|t| (t.port, t.frame)).collect();
        let want = r.step(port, &frame);
        assert_eq!(got, want, "request {i} on port {port}: {frame:02x?}");
    }
    assert_eq!(h.device.program().stored(), r.values.len());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn plain_kv_store_matches_the_core(
        ops in prop::collection::vec(any::<(u8, u8, u16, u32, bool)>(), 1..50)
    ) {
        run(&ops);
    }
}
