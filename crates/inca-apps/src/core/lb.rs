//! The L4 load-balancer core: whether a packet goes to the virtual service,
//! the connection it belongs to, the backend a new connection gets, and the
//! two rewrites (to the backend, back from the VIP).
//!
//! The variants the systems need are explicit:
//!
//! - Connection keys: the client 5-tuple ([`client_key`], the plain and
//!   TEA load balancers) or the client endpoint ([`client_end`], RedPlane,
//!   6 bytes).
//! - Backend choice ([`Spread`]): hash buckets over a power-of-two table
//!   (the plain load balancer's `lb_pool`) or the hash modulo the number of
//!   backends (TEA's slow path). Both hash the client 5-tuple with CRC-32,
//!   as the switch's hash unit does. RedPlane's store picks round-robin,
//!   which is store logic.
//! - Return traffic: rewritten back to the VIP ([`from_backend`], plain and
//!   RedPlane) or sent directly (TEA, DSR: no rewrite).

use super::Endpoint;
use crate::headers::{rewrite_end, End, Parsed};

/// Whether packet `p` is addressed to the virtual service `vip`.
pub fn to_vip(p: &Parsed, vip: Endpoint) -> bool {
    p.dst == vip.ip && p.dport == vip.port
}

/// The client 5-tuple of packet `p`: its own for a packet to the VIP
/// (`to_vip`), or the reverse of a backend's reply with the VIP put back.
pub fn client_key(p: &Parsed, to_vip: bool, vip: Endpoint) -> [u8; 13] {
    if to_vip {
        return p.five_tuple();
    }
    Parsed {
        src: p.dst,
        dst: vip.ip,
        sport: p.dport,
        dport: vip.port,
        ..*p
    }
    .five_tuple()
}

/// The client end of packet `p`: its source if it goes to the VIP, its
/// destination if it is a reply.
pub fn client_end(p: &Parsed, to_vip: bool) -> Endpoint {
    if to_vip {
        Endpoint::new(p.src, p.sport)
    } else {
        Endpoint::new(p.dst, p.dport)
    }
}

/// Rewrites a client's packet `p` in header window `h` to go to `backend`
/// (incremental checksums).
pub fn to_backend(h: &mut [u8], p: &Parsed, backend: Endpoint) {
    rewrite_end(h, p, End::Destination, backend.ip, backend.port);
}

/// Rewrites a backend's reply `p` in header window `h` to come from the
/// VIP (incremental checksums).
pub fn from_backend(h: &mut [u8], p: &Parsed, vip: Endpoint) {
    rewrite_end(h, p, End::Source, vip.ip, vip.port);
}

/// How a new connection's client 5-tuple picks a backend slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spread {
    /// One of this many buckets (a power of two): the low bits of the hash.
    Buckets(usize),
    /// One of this many backends: the hash modulo their number.
    Modulo(usize),
}

impl Spread {
    /// The slot of client 5-tuple `key` (None if there are no slots).
    pub fn slot(self, key: &[u8]) -> Option<usize> {
        let h = inca_switch::hash::crc32(key) as usize;
        match self {
            Spread::Buckets(0) | Spread::Modulo(0) => None,
            Spread::Buckets(n) => Some(h & (n - 1)),
            Spread::Modulo(n) => Some(h % n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_finds_its_clients_key() {
        let vip = Endpoint::new([192, 0, 2, 1], 80);
        let req = Parsed {
            src: [10, 0, 0, 1],
            sport: 4000,
            dst: vip.ip,
            dport: vip.port,
            proto: 6,
            has_ports: true,
            ..Parsed::default()
        };
        let reply = Parsed {
            src: [10, 1, 0, 1],
            sport: 8080,
            dst: req.src,
            dport: req.sport,
            ..req
        };
        assert!(to_vip(&req, vip) && !to_vip(&reply, vip));
        assert_eq!(client_key(&req, true, vip), client_key(&reply, false, vip));
        assert_eq!(client_end(&req, true), client_end(&reply, false));
    }

    #[test]
    fn spreads_stay_in_range() {
        let key = [7u8; 13];
        assert!(Spread::Buckets(8).slot(&key).unwrap() < 8);
        assert!(Spread::Modulo(3).slot(&key).unwrap() < 3);
        assert_eq!(Spread::Modulo(0).slot(&key), None);
    }
}
