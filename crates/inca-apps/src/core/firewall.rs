//! The stateful-firewall core: which side a packet comes from, the key of
//! its connection, what opens and closes a connection, and RedPlane's TCP
//! handshake tracker.
//!
//! The variants the systems need are explicit:
//!
//! - [`Side::by_port`] (the plain and TEA firewalls: one port is the
//!   outside) or [`Side::by_prefix`] (RedPlane: the protected network).
//! - Connection keys: the 5-tuple as the inside sent it
//!   ([`Orientation::AsSentFromInside`], the plain firewall: one entry
//!   serves both directions), the 5-tuple as the outside sends it
//!   ([`Orientation::AsSentFromOutside`], TEA: only outside packets are
//!   looked up), or the inside endpoint ([`inside_end`], RedPlane, 6 bytes).
//! - What opens a connection ([`Opening`]): any inside TCP/UDP packet but a
//!   RST (plain), or an inside TCP SYN (TEA). A RST closes one (plain).
//! - RedPlane's state byte ([`handshake_step`]): 0 none, 1 SYN out, 2
//!   established; inbound passes from 1 on.

use super::{reversed_five_tuple, Endpoint, Prefix};
use crate::headers::{Parsed, PROTO_TCP};
use inca_switch::PortId;

/// TCP SYN flag.
pub const TCP_SYN: u8 = 0x02;
/// TCP RST flag.
pub const TCP_RST: u8 = 0x04;
/// TCP ACK flag.
pub const TCP_ACK: u8 = 0x10;

/// Where a packet comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The protected side.
    Inside,
    /// Everything else.
    Outside,
}

impl Side {
    /// Outside if the packet arrived on the outside port.
    pub fn by_port(ingress: PortId, outside_port: PortId) -> Self {
        if ingress == outside_port {
            Side::Outside
        } else {
            Side::Inside
        }
    }

    /// Inside if the source is in `internal`, outside if the destination
    /// is; None if neither end is protected.
    pub fn by_prefix(p: &Parsed, internal: Prefix) -> Option<Self> {
        if internal.contains(p.src) {
            Some(Side::Inside)
        } else if internal.contains(p.dst) {
            Some(Side::Outside)
        } else {
            None
        }
    }
}

/// Which direction's 5-tuple keys a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Orientation {
    /// As the inside host sends it.
    AsSentFromInside,
    /// As the remote end sends it.
    AsSentFromOutside,
}

/// The key of the connection of packet `p` from `side`: its own 5-tuple if
/// it travels the keyed direction, its reverse otherwise.
pub fn conn_key(p: &Parsed, side: Side, orientation: Orientation) -> [u8; 13] {
    match (side, orientation) {
        (Side::Inside, Orientation::AsSentFromInside)
        | (Side::Outside, Orientation::AsSentFromOutside) => p.five_tuple(),
        _ => reversed_five_tuple(p),
    }
}

/// The inside end of packet `p` from `side`: its source if from inside,
/// its destination if from outside.
pub fn inside_end(p: &Parsed, side: Side) -> Endpoint {
    match side {
        Side::Inside => Endpoint::new(p.src, p.sport),
        Side::Outside => Endpoint::new(p.dst, p.dport),
    }
}

/// A TCP packet with RST set.
pub fn is_rst(p: &Parsed) -> bool {
    p.proto == PROTO_TCP && p.tcp_flags & TCP_RST != 0
}

/// A TCP connection request: SYN without ACK.
pub fn is_syn(p: &Parsed) -> bool {
    p.proto == PROTO_TCP && p.tcp_flags & (TCP_SYN | TCP_ACK) == TCP_SYN
}

/// What opens a connection from inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    /// Any TCP or UDP packet but a RST (a RST opens nothing).
    AnyButRst,
    /// Only a TCP SYN.
    TcpSyn,
}

impl Opening {
    /// Whether packet `p` (with ports) from `side` opens its connection.
    pub fn opens(self, p: &Parsed, side: Side) -> bool {
        side == Side::Inside
            && p.has_ports
            && match self {
                Opening::AnyButRst => !is_rst(p),
                Opening::TcpSyn => is_syn(p),
            }
    }
}

/// RedPlane's handshake state: whether an inside TCP packet changes it,
/// from headers alone — a SYN, or a pure ACK without payload (the
/// handshake's third packet). `h` is the header window `p` was parsed from.
pub fn handshake_writes(p: &Parsed, h: &[u8]) -> bool {
    if p.tcp_flags & TCP_SYN != 0 && p.tcp_flags & TCP_ACK == 0 {
        return true;
    }
    let (l3, l4) = (usize::from(p.l3), usize::from(p.l4));
    let payload = (|| {
        let total = usize::from(u16::from_be_bytes([*h.get(l3 + 2)?, *h.get(l3 + 3)?]));
        let doff = usize::from(h.get(l4 + 12)? >> 4) * 4;
        Some(total.saturating_sub(l4 - l3 + doff))
    })();
    p.tcp_flags == TCP_ACK && payload == Some(0)
}

/// One step of RedPlane's handshake state (0 none, 1 SYN out, 2
/// established) for a packet from `side` with `tcp_flags`, `write` if
/// [`handshake_writes`] said so: (passes, next state). Inside packets always
/// pass; outside ones from state 1 on.
pub fn handshake_step(state: u8, side: Side, write: bool, tcp_flags: u8) -> (bool, u8) {
    if side == Side::Outside {
        return (state >= 1, state);
    }
    let next = match write {
        false => state,
        true if tcp_flags & TCP_SYN != 0 => state.max(1),
        true if state >= 1 => 2,
        true => state,
    };
    (true, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt() -> Parsed {
        Parsed {
            ipv4: true,
            proto: PROTO_TCP,
            src: [10, 0, 0, 1],
            dst: [8, 8, 8, 8],
            sport: 4000,
            dport: 80,
            has_ports: true,
            tcp_flags: TCP_SYN,
            ..Parsed::default()
        }
    }

    #[test]
    fn keys_of_both_directions_meet() {
        let out = pkt();
        let back = Parsed {
            src: out.dst,
            dst: out.src,
            sport: out.dport,
            dport: out.sport,
            ..out
        };
        for o in [
            Orientation::AsSentFromInside,
            Orientation::AsSentFromOutside,
        ] {
            assert_eq!(
                conn_key(&out, Side::Inside, o),
                conn_key(&back, Side::Outside, o)
            );
        }
        assert_eq!(
            inside_end(&out, Side::Inside),
            inside_end(&back, Side::Outside)
        );
    }

    #[test]
    fn openings_and_handshake() {
        let syn = pkt();
        let rst = Parsed {
            tcp_flags: TCP_RST,
            ..syn
        };
        assert!(Opening::TcpSyn.opens(&syn, Side::Inside));
        assert!(!Opening::TcpSyn.opens(&syn, Side::Outside));
        assert!(!Opening::AnyButRst.opens(&rst, Side::Inside));
        assert_eq!(handshake_step(0, Side::Outside, false, 0), (false, 0));
        assert_eq!(handshake_step(0, Side::Inside, true, TCP_SYN), (true, 1));
        assert_eq!(handshake_step(1, Side::Inside, true, TCP_ACK), (true, 2));
        assert_eq!(handshake_step(1, Side::Outside, false, 0), (true, 1));
    }

    #[test]
    fn prefix_sides() {
        let net = Prefix::new([10, 0, 0, 0], 8);
        assert_eq!(Side::by_prefix(&pkt(), net), Some(Side::Inside));
        let stray = Parsed {
            src: [1, 1, 1, 1],
            ..pkt()
        };
        assert_eq!(Side::by_prefix(&stray, net), None);
        assert!(Prefix::new([0; 4], 0).contains([1, 2, 3, 4]));
    }
}
