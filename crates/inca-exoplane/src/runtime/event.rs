//! Control events of MEDIUM apps as the runtime carries them to the daemon
//! whose control logic handles them (§5.4 last paragraph: "punted to the
//! hub and forwarded (EVENT_FWD) to the daemon of primary(l)"), and the
//! same for events a device-served packet raises on a device.
//!
//! An event is the packet that raised it, behind a PUNT shim (§4.1) — the
//! frame EVENT_FWD's body carries (§4.6: `app` 8, `len` 16, frame bytes):
//!
//! - a punt to the app's control plane: the shim's `out_port` is the app
//!   program's own punt reason, as in a device's MISS (§4.5);
//! - a digest (e.g. the firewall's "delete this connection" on a RST):
//!   `out_port` = [`EVENT_DIGEST`] and the digest's bytes follow the frame
//!   as a trailer, `digest ‖ len 8` [our choice: §4.6 has no field for
//!   anything but the frame, and a trailer leaves the frame's headers where
//!   a parser looks for them].
//!
//! The shim's `ldev` names the flow's logical device and `in_port` the
//! switch port the packet came in on (apps name switch ports).

use inca_switch::PortId;
use inca_wire::exoplane::{shim, ShimRepr, ShimType};

/// `out_port` of an event's PUNT shim marking a digest event.
pub const EVENT_DIGEST: u16 = 0xFFFF;
/// Longest digest an event carries (its length is one byte).
pub const MAX_DIGEST: usize = 255;

/// What the app raised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A punt with the app program's own reason code.
    Punt(u16),
    /// A digest, as the app's digest codec wrote it
    /// ([`crate::app::catalog::AppProgram::digest_bytes`]).
    Digest(Vec<u8>),
}

/// An event, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The app.
    pub app_id: u8,
    /// The flow's logical device.
    pub ldev: u8,
    /// The switch port the packet came in on.
    pub in_port: PortId,
    /// The packet as the app saw it (no shim, no trailer).
    pub frame: Vec<u8>,
    /// What the app raised.
    pub kind: EventKind,
}

/// The event frame of `frame` (no shim) raising `kind` in app `app_id`;
/// None if the frame takes no shim or the digest is too long.
pub fn encode(
    app_id: u8,
    ldev: u8,
    in_port: PortId,
    frame: &[u8],
    kind: &EventKind,
) -> Option<Vec<u8>> {
    let out_port = match kind {
        EventKind::Punt(reason) if *reason != EVENT_DIGEST => *reason,
        EventKind::Punt(_) => return None,
        EventKind::Digest(_) => EVENT_DIGEST,
    };
    let mut f = frame.to_vec();
    let s = ShimRepr {
        shim_type: ShimType::Punt,
        failover: false,
        app_id,
        ldev,
        in_port,
        out_port,
        next_type: 0,
    };
    shim::push(&mut f, s).ok()?;
    if let EventKind::Digest(d) = kind {
        let len = u8::try_from(d.len()).ok()?;
        f.extend_from_slice(d);
        f.push(len);
    }
    Some(f)
}

/// Parses an event frame; None if it is not one (no PUNT shim, a trailer
/// longer than the frame).
pub fn decode(bytes: &[u8]) -> Option<Event> {
    let (_, s) = shim::shim_of(bytes).ok()??;
    if s.shim_type != ShimType::Punt {
        return None;
    }
    let mut f = bytes.to_vec();
    let kind = if s.out_port == EVENT_DIGEST {
        let len = usize::from(*f.last()?);
        let start = f.len().checked_sub(1 + len)?;
        let d = f[start..f.len() - 1].to_vec();
        f.truncate(start);
        EventKind::Digest(d)
    } else {
        EventKind::Punt(s.out_port)
    };
    shim::pop(&mut f).ok()?;
    Some(Event {
        app_id: s.app_id,
        ldev: s.ldev,
        in_port: s.in_port,
        frame: f,
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame() -> Vec<u8> {
        let ep = inca_wire::Endpoints::new(
            [2, 0, 0, 0, 0, 1],
            std::net::Ipv4Addr::new(10, 0, 0, 1),
            [2, 0, 0, 0, 0, 2],
            std::net::Ipv4Addr::new(203, 0, 113, 1),
        );
        inca_wire::build_udp_frame(&ep, 4000, 5353, &[7; 20], true).unwrap()
    }

    #[test]
    fn punt_and_digest_events_round_trip_and_junk_is_refused() {
        let f = frame();
        for kind in [EventKind::Punt(3), EventKind::Digest(vec![1; 13])] {
            let e = encode(9, 1, 4, &f, &kind).unwrap();
            let d = decode(&e).unwrap();
            assert_eq!((d.app_id, d.ldev, d.in_port), (9, 1, 4));
            assert_eq!((d.frame, d.kind), (f.clone(), kind));
        }
        assert!(decode(&f).is_none(), "no shim");
        assert!(encode(9, 1, 4, &f, &EventKind::Digest(vec![0; 256])).is_none());
        assert!(encode(9, 1, 4, &f, &EventKind::Punt(EVENT_DIGEST)).is_none());
        // A digest trailer claiming more bytes than the frame has.
        let mut e = encode(9, 1, 4, &f, &EventKind::Digest(vec![])).unwrap();
        *e.last_mut().unwrap() = 255;
        e.truncate(40);
        e.push(255);
        assert!(decode(&e).is_none());
    }
}
