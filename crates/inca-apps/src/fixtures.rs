//! Ready-made NAT set-ups for benchmarks (the criterion benches and `inca
//! bench` build the same switch the same way, so their figures compare).

use std::net::Ipv4Addr;

use inca_switch::device::{Nanos, PortId, SECONDS};
use inca_switch::harness::Harness;
use inca_switch::{Profile, Switch};
use inca_wire::{build_tcp_frame, Endpoints, TcpFlags, TcpRepr};

use crate::nat::Nat;

/// The NAT's public address in these set-ups.
pub const PUBLIC: [u8; 4] = [198, 51, 100, 1];

/// A 64-byte TCP frame (ACK, 6 payload bytes) of inside flow `sport`:
/// 10.0.0.5:`sport` → 203.0.113.9:80.
pub fn nat_tcp_frame(sport: u16) -> Vec<u8> {
    let ep = Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        Ipv4Addr::new(10, 0, 0, 5),
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::new(203, 0, 113, 9),
    );
    let tcp = TcpRepr {
        src_port: sport,
        dst_port: 80,
        seq: 1,
        ack: 0,
        flags: TcpFlags::ACK,
        window: 1000,
        urgent: 0,
        options: &[],
        payload: &[0; 6],
    };
    build_tcp_frame(&ep, &tcp).expect("a valid TCP frame")
}

/// `flows` frames of [`nat_tcp_frame`], source ports 10,000 up.
pub fn nat_tcp_flows(flows: u16) -> Vec<Vec<u8>> {
    (0..flows).map(|f| nat_tcp_frame(10_000 + f)).collect()
}

/// The plain NAT on the `tofino` profile (65,536 mappings) with a mapping
/// for every flow of `templates`, installed through its control plane by
/// sending each flow's first packet on `inside`; outbound leaves on
/// `outside`. Returns the switch and the time the set-up reached, or what
/// went wrong.
pub fn installed_nat(
    templates: &[Vec<u8>],
    inside: PortId,
    outside: PortId,
) -> Result<(Switch<Nat>, Nanos), String> {
    let nat = Nat::new(65_536, outside, PUBLIC);
    let sw = Switch::new(Profile::tofino(), nat).map_err(|e| e.to_string())?;
    let mut h = Harness::new(sw, 1);
    for (i, f) in templates.iter().enumerate() {
        h.send(i as u64 * 1_000, inside, f.clone());
    }
    h.advance_to(SECONDS);
    if h.transmit_count != templates.len() as u64 {
        return Err(format!(
            "NAT set-up: {} of {} flows installed",
            h.transmit_count,
            templates.len()
        ));
    }
    let now = h.now();
    Ok((h.device, now))
}
