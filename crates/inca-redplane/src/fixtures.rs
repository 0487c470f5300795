//! Ready-made RedPlane set-ups for benchmarks (the criterion benches and
//! `inca bench` build the same switch the same way, so their figures
//! compare).

use std::net::Ipv4Addr;

use inca_apps::fixtures::PUBLIC;
use inca_switch::device::{Nanos, SECONDS};
use inca_switch::harness::Harness;
use inca_switch::{Profile, Switch};
use inca_wire::redplane::{build_ack_frame, parse_udp_frame, AckRepr, AckType, Request};
use inca_wire::Endpoints;

use crate::apps::nat::RpNat;
use crate::switch::{RedPlane, RedPlaneConfig, Route};

/// The RedPlane NAT on the `tofino` profile with a lease for every flow of
/// `templates` (sent on port 1; outbound leaves on port 0, the store is on
/// port 2), granted by NEW_ACKs played as the store. Leases last 100 s, so
/// packets after the set-up all take the read path without renewals.
/// Returns the switch and the time the set-up reached, or what went wrong.
pub fn leased_nat(templates: &[Vec<u8>]) -> Result<(Switch<RedPlane<RpNat>>, Nanos), String> {
    let cfg = RedPlaneConfig {
        routes: vec![Route {
            net: [0; 4],
            len: 0,
            port: 0,
        }],
        lease_period: 100 * SECONDS,
        renew_interval: 50 * SECONDS,
        slots: 65_536,
        ..RedPlaneConfig::default()
    };
    let mut app = RpNat::new(PUBLIC, 1024, 64_512, 1);
    // Outbound to a fixed outside port, as the plain NAT's.
    app.outside_port = Some(0);
    let sw = Switch::new(Profile::tofino(), RedPlane::new(app, cfg)).map_err(|e| e.to_string())?;
    let mut h = Harness::new(sw, 1);
    let mut t = 10_000_000;
    for f in templates {
        t += 1_000;
        h.send(t, 1, f.clone());
    }
    h.advance_to(t + 100_000);
    let store = Endpoints::new(
        [3; 6],
        Ipv4Addr::new(10, 254, 0, 1),
        [4; 6],
        Ipv4Addr::new(10, 255, 0, 1),
    );
    for (i, tx) in h.take().into_iter().enumerate() {
        let info = parse_udp_frame(&tx.frame).map_err(|e| format!("lease request: {e:?}"))?;
        let r = Request::new_checked(info.payload, 6, 6)
            .map_err(|e| format!("lease request: {e:?}"))?;
        let mut e = store;
        e.ident = info.ident;
        let port = 1024 + i as u16;
        let mut value = [PUBLIC[0], PUBLIC[1], PUBLIC[2], PUBLIC[3], 0, 0];
        value[4..].copy_from_slice(&port.to_be_bytes());
        let ack = AckRepr {
            ack_type: AckType::LeaseNew,
            seq: 0,
            key: r.key(),
            value: &value,
            piggyback: r.piggyback(),
        };
        t += 2_000;
        let frame = build_ack_frame(&e, 8001, &ack).map_err(|e| format!("ack: {e:?}"))?;
        h.send(t, 2, frame);
    }
    h.advance_to(t + SECONDS);
    let keys = h.device.program().keys();
    if keys != templates.len() {
        return Err(format!(
            "RedPlane set-up: {keys} of {} flows granted",
            templates.len()
        ));
    }
    let now = h.now();
    Ok((h.device, now))
}
