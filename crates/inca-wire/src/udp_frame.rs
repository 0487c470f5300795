//! Whole Ethernet/IPv4/UDP frames: the one parser every device uses to read
//! a UDP datagram out of a frame (RedPlane's protocol, TEA's agent protocol,
//! hosts).
//!
//! It accepts what a sane network carries and refuses the rest with a typed
//! [`WireError`], so callers count and drop instead of guessing: untagged or
//! 802.1Q-tagged Ethernet, IPv4 with options (skipped), a valid IPv4 header
//! checksum, no fragments, UDP bounded by its own length field (Ethernet
//! padding is not payload). The UDP checksum is not checked (devices in
//! inca send 0, "none", as RoCEv2 does).

use std::net::Ipv4Addr;

use crate::error::{Result, WireError};
use crate::ethernet::{ethertype, EthernetFrame, MacAddr};
use crate::ipv4::{protocol, Ipv4Packet};
use crate::udp::UdpDatagram;

/// What [`parse_udp_frame`] reads from an Ethernet/IPv4/UDP frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpFrame<'a> {
    /// Source MAC.
    pub src_mac: MacAddr,
    /// Destination MAC.
    pub dst_mac: MacAddr,
    /// IPv4 source.
    pub src_ip: Ipv4Addr,
    /// IPv4 destination.
    pub dst_ip: Ipv4Addr,
    /// IPv4 Identification (RedPlane carries the switch's send timestamp
    /// here).
    pub ident: u16,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// UDP payload, bounded by the UDP length (padding excluded).
    pub payload: &'a [u8],
}

/// Parses Ethernet (optionally tagged) / IPv4 / UDP. Fails on anything
/// else: not IPv4 or not UDP ([`WireError::Unsupported`]), a fragment
/// (`Unsupported`), a bad IPv4 header checksum ([`WireError::BadChecksum`]),
/// lengths that do not fit the frame ([`WireError::Truncated`] or
/// [`WireError::Malformed`]).
pub fn parse_udp_frame(frame: &[u8]) -> Result<UdpFrame<'_>> {
    let eth = EthernetFrame::new_checked(frame)?;
    if eth.ethertype() != ethertype::IPV4 {
        return Err(WireError::Unsupported("not IPv4"));
    }
    let (src_mac, dst_mac) = (eth.src(), eth.dst());
    let ip = Ipv4Packet::new_checked(&frame[eth.header_len()..])?;
    if ip.protocol() != protocol::UDP {
        return Err(WireError::Unsupported("not UDP"));
    }
    if ip.more_frags() || ip.frag_offset() != 0 {
        return Err(WireError::Unsupported("IPv4 fragment"));
    }
    if !ip.verify_checksum() {
        return Err(WireError::BadChecksum);
    }
    let (src_ip, dst_ip, ident) = (ip.src_addr(), ip.dst_addr(), ip.ident());
    // Re-slice from `frame` so the payload borrows the frame, not the view.
    let ip_start = eth.header_len() + ip.header_len();
    let ip_end = eth.header_len() + usize::from(ip.total_len());
    let datagram = frame
        .get(ip_start..ip_end)
        .ok_or(WireError::Malformed("IPv4 total length"))?;
    let udp = UdpDatagram::new_checked(datagram)?;
    let (src_port, dst_port) = (udp.src_port(), udp.dst_port());
    let payload = datagram
        .get(8..usize::from(udp.len()))
        .ok_or(WireError::Malformed("UDP length"))?;
    Ok(UdpFrame {
        src_mac,
        dst_mac,
        src_ip,
        dst_ip,
        ident,
        src_port,
        dst_port,
        payload,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{build_udp_frame, Endpoints};
    use crate::ethernet::VlanTag;

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    fn frame(vlan: Option<u16>) -> Vec<u8> {
        let mut ep = Endpoints::new([2, 0, 0, 0, 0, 1], A, [2, 0, 0, 0, 0, 2], B);
        ep.vlan = vlan.map(|vid| VlanTag {
            pcp: 0,
            dei: false,
            vid,
        });
        build_udp_frame(&ep, 1000, 2000, b"hello", true).unwrap()
    }

    #[test]
    fn reads_addresses_ports_and_the_payload() {
        for vlan in [None, Some(7)] {
            let f = frame(vlan);
            let u = parse_udp_frame(&f).unwrap();
            assert_eq!((u.src_ip, u.dst_ip), (A, B));
            assert_eq!((u.src_port, u.dst_port), (1000, 2000));
            assert_eq!(u.src_mac, [2, 0, 0, 0, 0, 1]);
            assert_eq!(u.dst_mac, [2, 0, 0, 0, 0, 2]);
            assert_eq!(u.payload, b"hello");
        }
    }

    #[test]
    fn padding_after_the_datagram_is_not_payload() {
        let mut f = frame(None);
        f.resize(f.len() + 20, 0xee);
        assert_eq!(parse_udp_frame(&f).unwrap().payload, b"hello");
    }

    #[test]
    fn a_bad_ipv4_checksum_is_refused() {
        let mut f = frame(None);
        f[14 + 10] ^= 0xff; // the header checksum
        assert_eq!(parse_udp_frame(&f), Err(WireError::BadChecksum));
        let mut g = frame(Some(3));
        g[18 + 8] ^= 1; // TTL of the tagged frame: the checksum no longer covers it
        assert_eq!(parse_udp_frame(&g), Err(WireError::BadChecksum));
    }

    #[test]
    fn other_protocols_fragments_and_bad_lengths_are_refused() {
        let f = frame(None);
        let mut not_ip = f.clone();
        not_ip[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        assert!(matches!(
            parse_udp_frame(&not_ip),
            Err(WireError::Unsupported(_))
        ));
        let mut frag = f.clone();
        frag[14 + 6] |= 0x20; // more fragments
        fix_ip_checksum(&mut frag);
        assert_eq!(
            parse_udp_frame(&frag),
            Err(WireError::Unsupported("IPv4 fragment"))
        );
        let mut long_udp = f.clone();
        long_udp[14 + 20 + 4..14 + 20 + 6].copy_from_slice(&200u16.to_be_bytes());
        assert!(parse_udp_frame(&long_udp).is_err());
        for n in 0..f.len() {
            assert!(parse_udp_frame(&f[..n]).is_err(), "truncated at {n}");
        }
    }

    fn fix_ip_checksum(f: &mut [u8]) {
        let mut ip = Ipv4Packet::new_checked(&mut f[14..]).unwrap();
        let c = ip.compute_checksum();
        ip.set_checksum(c);
    }
}
