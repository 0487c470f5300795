//! Spec §8 item 8 on one switch (the `inca_switch::harness` driver, the
//! test playing the store): the emulated request loss
//! (`request_drop_permille`) drops write requests but keeps their loop
//! copies, and the store-port queue depth seen by requests is reported
//! through `Program::report`.

use std::net::Ipv4Addr;

use inca_redplane::apps::sync_counter::SyncCounter;
use inca_redplane::switch::{RedPlane, RedPlaneConfig, Route};
use inca_switch::device::MILLIS;
use inca_switch::harness::Harness;
use inca_switch::{Nanos, Profile, Program, Switch};
use inca_wire::builder::{build_udp_frame, Endpoints};
use inca_wire::redplane::{build_ack_frame, parse_udp_frame, AckRepr, AckType, Request};

const STORE_PORT: u16 = 2;
const DOWN: u16 = 0;
const T0: Nanos = 10 * MILLIS;

type Rig = Harness<Switch<RedPlane<SyncCounter>>>;

fn rig(drop_permille: u16) -> Rig {
    let cfg = RedPlaneConfig {
        routes: vec![
            Route {
                net: [0; 4],
                len: 0,
                port: 1,
            },
            Route {
                net: [10, 0, 0, 0],
                len: 8,
                port: DOWN,
            },
        ],
        slots: 1024,
        request_drop_permille: drop_permille,
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

fn data() -> Vec<u8> {
    build_udp_frame(
        &ep([10, 0, 0, 1], [192, 0, 2, 1]),
        1000,
        80,
        &[0u8; 32],
        true,
    )
    .unwrap()
}

/// Requests on the store port since the last call: (type, key, ident,
/// piggybacked packet).
fn store_requests(h: &mut Rig) -> Vec<(u8, Vec<u8>, u16, Vec<u8>)> {
    h.advance_to(h.now() + 10_000);
    h.take()
        .into_iter()
        .filter(|t| t.port == STORE_PORT)
        .map(|t| {
            let info = parse_udp_frame(&t.frame).unwrap();
            let r = Request::new_checked(info.payload, 13, 4).unwrap();
            (
                r.type_byte(),
                r.key().to_vec(),
                info.ident,
                r.piggyback().to_vec(),
            )
        })
        .collect()
}

/// Leases the flow with a NEW_ACK for its first packet; returns the write
/// requests the re-injected packet produced.
fn grant(h: &mut Rig) -> Vec<(u8, Vec<u8>, u16, Vec<u8>)> {
    h.send(T0, DOWN, data());
    let reqs = store_requests(h);
    assert_eq!(reqs.len(), 1, "one LEASE_NEW (never dropped)");
    // The NEW_ACK hands the carried packet back for re-injection.
    let (_, key, ident, piggy) = &reqs[0];
    let mut e = ep([10, 254, 0, 1], [10, 255, 0, 1]);
    e.ident = *ident;
    let ack = AckRepr {
        ack_type: AckType::LeaseNew,
        seq: 0,
        key,
        value: &[0; 4],
        piggyback: piggy,
    };
    h.send(
        T0 + 20_000,
        STORE_PORT,
        build_ack_frame(&e, 8001, &ack).unwrap(),
    );
    h.advance_to(T0 + 900_000);
    store_requests(h)
}

fn counter(sw: &RedPlane<SyncCounter>, name: &str) -> u64 {
    let r = sw.report();
    r.counters
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| *v)
        .unwrap_or_else(|| panic!("no counter {name}"))
}

#[test]
fn without_loss_the_write_leaves_and_its_depth_is_recorded() {
    let mut h = rig(0);
    let writes = grant(&mut h);
    assert_eq!(writes.len(), 1);
    let sw = h.device.program();
    assert_eq!(sw.stats().requests_dropped, 0);
    assert!(sw.loop_occupancy().samples() >= 1);
    assert_eq!(counter(sw, "rp_writes"), 1);
    assert_eq!(
        counter(sw, "loop_queue_samples"),
        sw.loop_occupancy().samples()
    );
    let series = &sw.report().series;
    assert_eq!(series.len(), 1);
    assert_eq!(series[0].0, "loop_queue_max_bytes");
    assert_eq!(series[0].1.bin, MILLIS);
}

#[test]
fn full_loss_drops_every_request_but_the_loop_keeps_resending() {
    let mut h = rig(1000);
    let writes = grant(&mut h);
    assert!(writes.is_empty(), "the write request was dropped");
    assert_eq!(h.device.program().stats().requests_dropped, 1);
    assert_eq!(h.device.program().loop_copies(), 1, "its loop copy lives");
    // After RTO the loop resends; the resend is a request too and is dropped.
    let t = h.now();
    h.advance_to(t + 3 * MILLIS / 2);
    assert!(store_requests(&mut h).is_empty());
    let s = h.device.program().stats();
    assert!(s.retransmits >= 1);
    assert_eq!(s.requests_dropped, 1 + s.retransmits);
    // Loop copies queue on the store port, so requests saw some depth
    // samples (each loop pass is one).
    assert!(h.device.program().loop_occupancy().samples() > 10);
}

#[test]
fn request_drop_permille_is_a_parameter_and_bounded() {
    use inca_apps::params::Params;
    let ok = Params::parse(["request_drop_permille=15", "occupancy_bin_us=100"]).unwrap();
    let cfg = RedPlaneConfig::from_params(&ok).unwrap();
    assert_eq!(
        (cfg.request_drop_permille, cfg.occupancy_bin),
        (15, 100_000)
    );
    let bad = Params::parse(["request_drop_permille=1001"]).unwrap();
    assert!(RedPlaneConfig::from_params(&bad).is_err());
}
