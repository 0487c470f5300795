//! The network functions' pure cores: for each NF, the state transition and
//! the header rewrite, with no switch objects and no I/O. Every system
//! adapts the same core — the plain [`Program`](inca_switch::Program)s of
//! this crate, RedPlane's apps (state in replicated value bytes) and TEA's
//! NFs (state in a DRAM table) — keeping only where the state lives.
//!
//! One submodule per NF, because each core is small and the adapters import
//! one NF at a time:
//!
//! - [`nat`] — flow keys (5-tuple or endpoint), the direction decision
//!   (by ingress port or by public address), allocation of public endpoints
//!   from a pool, and the rewrite with incremental checksums.
//! - [`firewall`] — sides, connection keys, what opens and closes a
//!   connection, RedPlane's TCP handshake state.
//! - [`lb`] — the virtual service, connection keys, backend choice by hash,
//!   and the rewrites to the backend and back from the VIP.
//! - [`vpn`] — the VXLAN parser, tunnel keys and the re-tunnelling rewrite.
//! - [`epc`] — GTP constants and the downlink GTP-U encapsulation.
//! - [`kv`] — a read or an update on a key's value, and the answer turned
//!   around to the sender with its fields rewritten.
//! - [`counter`] — per-flow counters: the flow key, the entry a key counts
//!   in, wrap or saturate.
//! - [`sketch`] — row hash families, count-min and bitset cell updates,
//!   the minimum over rows and linear counting, and both sketches in
//!   memory.
//!
//! Where systems legitimately differ (RedPlane keys a NAT flow by its
//! endpoint and decides direction from addresses; the plain and TEA NATs key
//! by 5-tuple and decide from the ingress port), the core offers the
//! variants as explicit types instead of one copy per system.

pub mod counter;
pub mod epc;
pub mod firewall;
pub mod kv;
pub mod lb;
pub mod nat;
pub mod sketch;
pub mod vpn;

/// An IPv4 address and a port: a NAT's public or inside end, a load
/// balancer's backend. Its 6-byte form (address, then the port big-endian)
/// is the key and value format of RedPlane and TEA.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    /// The address.
    pub ip: [u8; 4],
    /// The port.
    pub port: u16,
}

impl Endpoint {
    /// `ip:port`.
    pub const fn new(ip: [u8; 4], port: u16) -> Self {
        Endpoint { ip, port }
    }

    /// The 6-byte form: address, then the port big-endian.
    pub fn to_bytes(self) -> [u8; 6] {
        let p = self.port.to_be_bytes();
        let [a, b, c, d] = self.ip;
        [a, b, c, d, p[0], p[1]]
    }

    /// Reads the 6-byte form from the start of `b` (None if shorter).
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        match *b.get(..6)? {
            [a, b, c, d, p0, p1] => Some(Endpoint::new([a, b, c, d], u16::from_be_bytes([p0, p1]))),
            _ => None,
        }
    }

    /// 0.0.0.0:0, the "no mapping" value RedPlane's store hands out.
    pub fn is_unset(self) -> bool {
        self == Endpoint::default()
    }
}

/// An IPv4 prefix `net/len`: a firewall's protected network, a load
/// balancer's backend network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    /// The network address.
    pub net: [u8; 4],
    /// The prefix length (values above 32 count as 32).
    pub len: u8,
}

impl Prefix {
    /// `net/len`.
    pub const fn new(net: [u8; 4], len: u8) -> Self {
        Prefix { net, len }
    }

    /// Whether `ip` is in the prefix.
    pub fn contains(&self, ip: [u8; 4]) -> bool {
        let len = u32::from(self.len.min(32));
        let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
        u32::from_be_bytes(ip) & mask == u32::from_be_bytes(self.net) & mask
    }
}

/// The 5-tuple of the other direction of `p`'s flow (ends swapped).
pub fn reversed_five_tuple(p: &crate::headers::Parsed) -> [u8; 13] {
    crate::headers::Parsed {
        src: p.dst,
        dst: p.src,
        sport: p.dport,
        dport: p.sport,
        ..*p
    }
    .five_tuple()
}
