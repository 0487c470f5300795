//! Regression tests of the switch blocks on one switch (the
//! `inca_switch::harness` driver, the test playing the store) for bugs the
//! linearizability campaign found.

use std::net::Ipv4Addr;

use inca_switch::harness::Harness;
use inca_switch::{Nanos, Profile, Switch};
use inca_wire::builder::{build_udp_frame, Endpoints};
use inca_wire::redplane::{build_ack_frame, parse_udp_frame, AckRepr, AckType, ReqType, Request};

use super::{RedPlane, RedPlaneConfig, Route};
use crate::apps::sync_counter::SyncCounter;

const STORE: u16 = 2;
const UP: u16 = 1;
const DOWN: u16 = 0;
const T0: Nanos = 10_000_000;

fn switch() -> Harness<Switch<RedPlane<SyncCounter>>> {
    let cfg = RedPlaneConfig {
        routes: vec![
            Route {
                net: [0; 4],
                len: 0,
                port: UP,
            },
            Route {
                net: [10, 0, 0, 0],
                len: 8,
                port: DOWN,
            },
        ],
        slots: 64,
        ..RedPlaneConfig::default()
    };
    let sw = Switch::new(Profile::tofino(), RedPlane::new(SyncCounter::new(), cfg)).unwrap();
    Harness::new(sw, 7)
}

fn ep(src: [u8; 4], dst: [u8; 4]) -> Endpoints {
    Endpoints::new(
        [2, 0, 0, 0, 0, 9],
        Ipv4Addr::from(src),
        [2, 0, 0, 0, 0, 8],
        Ipv4Addr::from(dst),
    )
}

/// (type, seq, key, value, piggyback, ident) of each request sent so far.
type Req = (u8, u16, Vec<u8>, Vec<u8>, Vec<u8>, u16);

fn requests(h: &mut Harness<Switch<RedPlane<SyncCounter>>>) -> Vec<Req> {
    h.take()
        .into_iter()
        .filter(|t| t.port == STORE)
        .filter_map(|t| {
            let info = parse_udp_frame(&t.frame).ok()?;
            let r = Request::new_checked(info.payload, 13, 4).ok()?;
            Some((
                r.type_byte(),
                r.seq(),
                r.key().to_vec(),
                r.value().to_vec(),
                r.piggyback().to_vec(),
                info.ident,
            ))
        })
        .collect()
}

fn ack(kind: AckType, seq: u16, key: &[u8], value: &[u8], piggy: &[u8], ident: u16) -> Vec<u8> {
    let mut e = ep([10, 254, 0, 1], [10, 255, 0, 1]);
    e.ident = ident;
    let ack = AckRepr {
        ack_type: kind,
        seq,
        key,
        value: if kind.carries_value() { value } else { &[] },
        piggyback: piggy,
    };
    build_ack_frame(&e, 8001, &ack).unwrap()
}

/// A re-grant of an installed key (the store fenced the owner again)
/// reaches the data plane one control-plane write at a time. Packets that
/// arrive meanwhile must not run on the new value under the old grant's
/// sequence numbers: such a write is fenced (never durable) but its
/// increment stayed in the register, so the new grant's writes counted one
/// too many (campaign seed 10: Checker B, output 437 against 436).
#[test]
fn a_regrant_is_installed_atomically() {
    let mut h = switch();
    let pkt = build_udp_frame(
        &ep([10, 0, 0, 1], [192, 0, 2, 1]),
        1000,
        80,
        &[0u8; 32],
        true,
    )
    .unwrap();
    h.send(T0, DOWN, pkt.clone());
    h.advance_to(T0 + 10_000);
    let reqs = requests(&mut h);
    assert_eq!(reqs.len(), 1);
    let (_, _, key, _, piggy, ident) = reqs[0].clone();
    h.send(
        T0 + 20_000,
        STORE,
        ack(AckType::LeaseNew, 0, &key, &[0; 4], &piggy, ident),
    );
    h.advance_to(T0 + 900_000);
    let first: Vec<Req> = requests(&mut h);
    assert!(first
        .iter()
        .any(|r| r.0 == ReqType::LeaseRenew as u8 && r.1 == 1));
    // The store re-grants with fence 4096 and the value 100; packets keep
    // arriving every 10 µs while the control plane installs it.
    let t = T0 + 1_000_000;
    let stamp = (t >> 16) as u16;
    h.send(
        t,
        STORE,
        ack(
            AckType::LeaseMigrate,
            4096,
            &key,
            &100u32.to_be_bytes(),
            &[],
            stamp,
        ),
    );
    for i in 0..60 {
        h.send(t + 1_000 + i * 10_000, DOWN, pkt.clone());
    }
    h.advance_to(t + 2_000_000);
    let writes: Vec<(u16, u32)> = requests(&mut h)
        .into_iter()
        .filter(|r| r.0 == ReqType::LeaseRenew as u8 && (4097..8192).contains(&r.1))
        .map(|r| (r.1, u32::from_be_bytes([r.3[0], r.3[1], r.3[2], r.3[3]])))
        .collect();
    assert!(!writes.is_empty(), "the new grant is used");
    for (seq, value) in writes {
        assert_eq!(
            value,
            100 + u32::from(seq - 4096),
            "write {seq} continues from the store's value"
        );
    }
}
