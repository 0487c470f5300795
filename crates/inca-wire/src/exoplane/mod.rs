//! ExoPlane's wire formats (specs/exoplane.md §4; docs/wire.md "ExoPlane").
//!
//! Numbers that identify ExoPlane traffic on a link are fixed here once so
//! that every part (switch and device programs, hub, daemons, dissector)
//! agrees on them.
//!
//! - [`control`] — the hub ↔ daemon TCP protocol (§4.6) and the REPORT
//!   digest (§4.5).
//! - [`netcache`] — the NetCache app's request header (§7).
//!
//! Telemetry (§4.2) reuses the probe and the per-hop telemetry stack
//! ([`crate::telemetry`]) rather than a 12-byte `t_in ‖ t_out` header of its
//! own: the switch, marked `telemetry = true`, stamps every probe at ingress
//! and egress, so `t_in` is its first ingress stamp and `t_out` its last
//! egress stamp (a device-served packet passes the switch twice and has
//! four switch stamps). [`rack_latency_ns`] computes `t_out − t_in`.

pub mod control;

use crate::telemetry::{StampPoint, TelemetryStack};

/// EtherType of the EXO shim (§4.1) [our choice]: IEEE 802 Local
/// Experimental EtherType 2. The spec's 0x88B5 (Local Experimental 1) is
/// taken by the LB app's marker frames (and named by CLIP's spec too,
/// specs/clip.md §4.2; inca's CLIP uses [`crate::clip::ETHERTYPE`]).
pub const ETHERTYPE: u16 = 0x88B6;

/// TCP port the hub listens on for device daemons (§4.6) [our choice].
pub const HUB_PORT: u16 = 7700;

/// UDP destination port of ExoPlane's latency probe traffic (§4.2) [our
/// choice]: next to the hub port. The spec's 9000 is RedPlane's node
/// control (heartbeat) port; 7701 is used by nothing in docs/wire.md. The
/// telemetry stack is found by the probe's magic, not by this port; the
/// port only keeps probes apart from application traffic in the apps' and
/// the flow manager's tables.
pub const TELEMETRY_PORT: u16 = 7701;

/// Rack latency of a probe (§4.2): the last egress stamp of `switch` minus
/// its first ingress stamp, in ns. `None` if the stack lacks either, or
/// if the egress precedes the ingress (clocks are per device, but one switch
/// stamps both).
pub fn rack_latency_ns<T: AsRef<[u8]>>(stack: &TelemetryStack<T>, switch: u32) -> Option<u64> {
    let mine = || stack.stamps().filter(|s| s.device == switch);
    let t_in = mine().find(|s| s.point == StampPoint::Ingress)?.time;
    let t_out = mine()
        .filter(|s| s.point == StampPoint::Egress)
        .last()?
        .time;
    t_out.checked_sub(t_in)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::{Stamp, STAMP_LEN, TELEMETRY_HEADER_LEN, TELEMETRY_MAGIC};

    fn stack(stamps: &[Stamp]) -> Vec<u8> {
        let mut b = TELEMETRY_MAGIC.to_be_bytes().to_vec();
        b.extend_from_slice(&[stamps.len() as u8, 0, 0, 0]);
        for s in stamps {
            let mut r = [0; STAMP_LEN];
            s.emit(&mut r).unwrap();
            b.extend_from_slice(&r);
        }
        assert_eq!(b.len(), TELEMETRY_HEADER_LEN + stamps.len() * STAMP_LEN);
        b
    }

    #[test]
    fn rack_latency_spans_first_switch_ingress_to_last_switch_egress() {
        let st = |device, point, time| Stamp {
            device,
            point,
            time,
        };
        use StampPoint::*;
        // Switch 1 → device 7 → switch 1: t_in = 100, t_out = 900.
        let b = stack(&[
            st(1, Ingress, 100),
            st(1, Egress, 200),
            st(7, Ingress, 300),
            st(7, Egress, 700),
            st(1, Ingress, 800),
            st(1, Egress, 900),
        ]);
        let s = TelemetryStack::new_checked(&b[..]).unwrap();
        assert_eq!(rack_latency_ns(&s, 1), Some(800));
        assert_eq!(rack_latency_ns(&s, 7), Some(400));
        assert_eq!(rack_latency_ns(&s, 2), None);
        let b = stack(&[st(1, Ingress, 100)]);
        assert_eq!(
            rack_latency_ns(&TelemetryStack::new_checked(&b[..]).unwrap(), 1),
            None
        );
    }
}
pub mod merge;
pub mod netcache;
pub mod shim;

pub use merge::{MergeOp, MergeRepr, MERGE_LEN};
pub use shim::{Shim, ShimRepr, ShimType, FLAG_FAILOVER, SHIM_LEN};
