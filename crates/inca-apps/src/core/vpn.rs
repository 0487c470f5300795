//! The VPN-gateway core: the VXLAN parser, the tunnel key, and the
//! re-tunnelling rewrite (outer addresses and VNI, outer IPv4 checksum
//! updated incrementally, UDP checksum cleared — allowed for VXLAN over
//! IPv4, and the only choice for a switch, which never sees the whole inner
//! frame).
//!
//! The variant the systems need is the key's width ([`TunnelKey`]): 7 bytes
//! with the 24-bit VNI in 3 (the plain gateway's switch tables), or 8 with
//! the VNI as a 32-bit word (TEA's table, spec §7).

use inca_switch::ParseError;
use inca_wire::ethernet::ethertype;
use inca_wire::{checksum, Ipv4Packet};

use crate::headers::{parse, Parsed, PROTO_UDP};

/// The VXLAN UDP port (RFC 7348).
pub const VXLAN_PORT: u16 = 4789;
/// Length of the VXLAN header.
pub const VXLAN_LEN: usize = 8;
/// The VXLAN I flag: the VNI is valid.
pub const VXLAN_FLAG_I: u8 = 0x08;
/// What the parser extracts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VpnMeta {
    /// Outer headers.
    pub outer: Parsed,
    /// The frame is a well-formed VXLAN packet (fields below are valid).
    pub vxlan: bool,
    /// Offset of the VXLAN header.
    pub vxlan_off: u16,
    /// VNI.
    pub vni: u32,
    /// Inner IPv4 source.
    pub inner_src: [u8; 4],
    /// Inner IPv4 destination.
    pub inner_dst: [u8; 4],
}

/// Parses outer Ethernet/IPv4/UDP, VXLAN, inner Ethernet and inner IPv4 from
/// the header window. A UDP packet to port 4789 whose VXLAN or inner headers
/// are cut short or malformed is an error; anything else that is not VXLAN
/// parses with `vxlan == false`.
pub fn parse_vxlan(header: &[u8]) -> Result<VpnMeta, ParseError> {
    let outer = parse(header)?;
    let mut m = VpnMeta {
        outer,
        ..VpnMeta::default()
    };
    if !(outer.has_ports && outer.proto == PROTO_UDP && outer.dport == VXLAN_PORT) {
        return Ok(m);
    }
    let vx = usize::from(outer.l4) + 8;
    let v = header
        .get(vx..vx + VXLAN_LEN)
        .ok_or(ParseError("VXLAN header beyond the window"))?;
    if v[0] & VXLAN_FLAG_I == 0 {
        return Ok(m); // no valid VNI: not ours
    }
    let vni = u32::from_be_bytes([0, v[4], v[5], v[6]]);
    let inner = vx + VXLAN_LEN;
    let eth = header
        .get(inner..inner + 14)
        .ok_or(ParseError("inner Ethernet beyond the window"))?;
    let mut et = u16::from_be_bytes([eth[12], eth[13]]);
    let mut l3 = inner + 14;
    if et == ethertype::VLAN {
        let tag = header
            .get(l3..l3 + 4)
            .ok_or(ParseError("inner VLAN tag beyond the window"))?;
        et = u16::from_be_bytes([tag[2], tag[3]]);
        l3 += 4;
    }
    if et != ethertype::IPV4 {
        return Err(ParseError("VXLAN inner frame is not IPv4"));
    }
    let ip = Ipv4Packet::new_checked_header(header.get(l3..).unwrap_or(&[]))
        .map_err(|_| ParseError("malformed inner IPv4 header"))?;
    m.vxlan = true;
    m.vxlan_off = vx as u16; // within the parse window, far below 64 KiB
    m.vni = vni;
    m.inner_src = ip.src_addr().octets();
    m.inner_dst = ip.dst_addr().octets();
    Ok(m)
}

/// ⟨VNI, VM address⟩: what a tunnel mapping is looked up by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TunnelKey {
    /// The VNI (24 bits).
    pub vni: u32,
    /// The VM's address (inner destination inbound, inner source
    /// outbound).
    pub vm: [u8; 4],
}

impl TunnelKey {
    /// ⟨`vni`, `vm`⟩.
    pub const fn new(vni: u32, vm: [u8; 4]) -> Self {
        TunnelKey { vni, vm }
    }

    /// The key of an inbound packet: its VNI and inner destination.
    pub fn inbound(m: &VpnMeta) -> Self {
        TunnelKey::new(m.vni, m.inner_dst)
    }

    /// The key of an outbound packet: its VNI and inner source.
    pub fn outbound(m: &VpnMeta) -> Self {
        TunnelKey::new(m.vni, m.inner_src)
    }

    /// 7 bytes: the VNI's low 3 bytes, then the address.
    pub fn to_bytes(self) -> [u8; 7] {
        let v = self.vni.to_be_bytes();
        let ip = self.vm;
        [v[1], v[2], v[3], ip[0], ip[1], ip[2], ip[3]]
    }

    /// 8 bytes: the VNI as a big-endian word, then the address.
    pub fn to_wide_bytes(self) -> [u8; 8] {
        let v = self.vni.to_be_bytes();
        let ip = self.vm;
        [v[0], v[1], v[2], v[3], ip[0], ip[1], ip[2], ip[3]]
    }
}

/// Re-addresses the tunnel of VXLAN packet `m` in header window `h`: outer
/// source `src`, outer destination `dst`, VNI `vni` (low 24 bits), the
/// outer IPv4 checksum updated, the UDP checksum cleared. False (and `h`
/// untouched) if `m` is not VXLAN or `h` ends before the VXLAN header.
pub fn retunnel(h: &mut [u8], m: &VpnMeta, src: [u8; 4], dst: [u8; 4], vni: u32) -> bool {
    let (l3, l4, vx) = (
        usize::from(m.outer.l3),
        usize::from(m.outer.l4),
        usize::from(m.vxlan_off),
    );
    if !m.vxlan || h.len() < vx + VXLAN_LEN || l3 + 20 > l4 || l4 + 8 > vx {
        return false;
    }
    let rd32 = |h: &[u8], o: usize| u32::from_be_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
    let mut sum = u16::from_be_bytes([h[l3 + 10], h[l3 + 11]]);
    sum = checksum::update_u32(sum, rd32(h, l3 + 12), u32::from_be_bytes(src));
    sum = checksum::update_u32(sum, rd32(h, l3 + 16), u32::from_be_bytes(dst));
    h[l3 + 12..l3 + 16].copy_from_slice(&src);
    h[l3 + 16..l3 + 20].copy_from_slice(&dst);
    h[l3 + 10..l3 + 12].copy_from_slice(&sum.to_be_bytes());
    h[l4 + 6..l4 + 8].copy_from_slice(&[0, 0]);
    h[vx + 4..vx + 7].copy_from_slice(&vni.to_be_bytes()[1..]);
    true
}
