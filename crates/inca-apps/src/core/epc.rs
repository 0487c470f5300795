//! The EPC serving-gateway core: the GTP-U constants and the downlink
//! encapsulation (outer IPv4, UDP and GTP-U headers toward the eNB).
//!
//! The variant the systems need is whether the outer IPv4 header sets
//! don't-fragment ([`Encap::dont_fragment`]: the plain gateway does,
//! RedPlane's does not). What differs beyond the header — one TEID per user
//! (plain) or an uplink and a downlink TEID (RedPlane, spec §7), the
//! signalling format — is each system's state layout, not NF logic.

use inca_wire::checksum;

use crate::headers::PROTO_UDP;

/// UDP port of GTP-C (signalling).
pub const GTPC_PORT: u16 = 2123;
/// UDP port of GTP-U.
pub const GTPU_PORT: u16 = 2152;
/// GTP-U flags the gateways send: version 1, protocol type GTP, no options.
pub const GTPU_FLAGS: u8 = 0x30;
/// GTP-U message type of a user packet (G-PDU).
pub const GTPU_GPDU: u8 = 0xFF;
/// Bytes the downlink encapsulation adds: IPv4 20, UDP 8, GTP-U 8.
pub const ENCAP_LEN: usize = 36;

/// A downlink tunnel: from the gateway to a user's eNB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Encap {
    /// Outer source: the gateway's S1-U address.
    pub src: [u8; 4],
    /// Outer destination: the eNB.
    pub enb: [u8; 4],
    /// The tunnel id.
    pub teid: u32,
    /// Set DF in the outer IPv4 header.
    pub dont_fragment: bool,
}

impl Encap {
    /// The 36 bytes to insert before an inner IPv4 packet of `inner_len`
    /// bytes: outer IPv4 (TTL 64, checksum computed), UDP 2152 → 2152 with
    /// checksum 0, GTP-U G-PDU. Lengths saturate at 65,535 (callers that
    /// must not send a truncated length drop such packets first).
    pub fn header(&self, inner_len: usize) -> [u8; ENCAP_LEN] {
        let max = usize::from(u16::MAX);
        let total = (inner_len + ENCAP_LEN).min(max) as u16;
        let mut e = [0u8; ENCAP_LEN];
        e[0] = 0x45;
        e[2..4].copy_from_slice(&total.to_be_bytes());
        if self.dont_fragment {
            e[6] = 0x40;
        }
        e[8] = 64;
        e[9] = PROTO_UDP;
        e[12..16].copy_from_slice(&self.src);
        e[16..20].copy_from_slice(&self.enb);
        let sum = checksum::checksum(&e[..20]);
        e[10..12].copy_from_slice(&sum.to_be_bytes());
        e[20..22].copy_from_slice(&GTPU_PORT.to_be_bytes());
        e[22..24].copy_from_slice(&GTPU_PORT.to_be_bytes());
        e[24..26].copy_from_slice(&(total - 20).to_be_bytes());
        e[28] = GTPU_FLAGS;
        e[29] = GTPU_GPDU;
        e[30..32].copy_from_slice(&(inner_len.min(max) as u16).to_be_bytes());
        e[32..36].copy_from_slice(&self.teid.to_be_bytes());
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outer_header_checks_and_carries_the_lengths() {
        let e = Encap {
            src: [192, 0, 2, 2],
            enb: [172, 16, 0, 1],
            teid: 0xabcd,
            dont_fragment: true,
        };
        let h = e.header(100);
        assert_eq!(checksum::checksum(&h[..20]), 0);
        assert_eq!(u16::from_be_bytes([h[2], h[3]]), 136);
        assert_eq!(u16::from_be_bytes([h[24], h[25]]), 116);
        assert_eq!(u16::from_be_bytes([h[30], h[31]]), 100);
        assert_eq!(h[6], 0x40);
        let h = Encap {
            dont_fragment: false,
            ..e
        }
        .header(usize::from(u16::MAX));
        assert_eq!(u16::from_be_bytes([h[2], h[3]]), u16::MAX);
        assert_eq!(h[6], 0);
    }
}
