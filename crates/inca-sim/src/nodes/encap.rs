//! Frame shapes a `udp` generator can send besides plain UDP, and how a host
//! finds the probe in them when they arrive.
//!
//! Some network functions only act on particular frames: a stateful
//! firewall learns connections from TCP SYNs sent from inside and then
//! admits the reverse TCP flows, a VPN gateway looks up VXLAN-encapsulated
//! frames by ⟨VNI, inner destination⟩. A generator with `tcp_flags` sends
//! TCP segments (those flags, no options) carrying the probe as payload; with
//! `vxlan_vni` it wraps the frame it would have sent in VXLAN (RFC 7348).
//! With `gtpu_teid` it sends the frame's IPv4 packet in a GTP-U tunnel
//! (3GPP TS 29.281: UDP 2152, an 8-byte G-PDU header), the way an eNodeB
//! sends a UE's uplink to an EPC serving gateway.
//! A receiving host measures one-way latency from the probe in any of them,
//! so these flows are measured like plain UDP ones.

use std::net::Ipv4Addr;

use inca_wire::{
    build_tcp_frame, build_udp_frame, Endpoints, EthernetFrame, Ipv4Packet, TcpFlags, TcpRepr,
    TcpSegment, UdpDatagram,
};

/// The VXLAN UDP port (IANA).
pub const VXLAN_PORT: u16 = 4789;

/// Length of the VXLAN header.
pub const VXLAN_LEN: usize = 8;

/// The GTP-U UDP port (3GPP TS 29.281).
pub const GTPU_PORT: u16 = 2152;

/// Length of the mandatory GTP-U header (no sequence/N-PDU/extension).
pub const GTPU_LEN: usize = 8;

/// GTP-U flags sent: version 1, protocol type GTP, no optional fields.
pub const GTPU_FLAGS: u8 = 0x30;

/// GTP-U message type of a user packet (G-PDU).
pub const GTPU_GPDU: u8 = 0xFF;

/// Bytes GTP-U adds in front of the inner IPv4 packet: outer IPv4 (20),
/// UDP (8) and the GTP-U header (8).
pub const GTPU_OVERHEAD: usize = 20 + 8 + GTPU_LEN;

/// Ethernet (14) + IPv4 (20) + TCP without options (20).
pub const TCP_FRAME_HEADERS: usize = 54;

/// Ethernet (14) + IPv4 (20) + UDP (8) of a plain UDP frame.
pub const UDP_FRAME_HEADERS: usize = 42;

/// Bytes VXLAN adds in front of the inner frame: outer Ethernet, IPv4, UDP
/// and the VXLAN header.
pub const VXLAN_OVERHEAD: usize = UDP_FRAME_HEADERS + VXLAN_LEN;

/// The layer-4 header of a generated frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum L4 {
    /// UDP (the default).
    #[default]
    Udp,
    /// A TCP segment with these flags (sequence 1, acknowledgment 0 or 1 with
    /// ACK, window 65535, no options).
    Tcp(u8),
}

/// How a generated frame is shaped around its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Shape {
    /// The (inner, with VXLAN) layer-4 header.
    pub l4: L4,
    /// Wrap the frame in VXLAN with this 24-bit VNI.
    pub vxlan: Option<u32>,
    /// Send the frame's IPv4 packet in GTP-U with this TEID.
    pub gtpu: Option<u32>,
}

impl Shape {
    /// Header bytes in front of the payload.
    pub fn headers(&self) -> usize {
        let inner = match self.l4 {
            L4::Udp => UDP_FRAME_HEADERS,
            L4::Tcp(_) => TCP_FRAME_HEADERS,
        };
        inner + self.vxlan.map_or(0, |_| VXLAN_OVERHEAD) + self.gtpu.map_or(0, |_| GTPU_OVERHEAD)
    }

    /// Whether this is the plain UDP shape.
    pub fn is_plain(&self) -> bool {
        *self == Shape::default()
    }

    /// The frame carrying `payload` from `src:sport` to `dst:dport`. With
    /// VXLAN that 5-tuple is the inner frame's (untagged, same MACs), and
    /// the outer frame goes from `outer.src_ip` to `outer.dst_ip` with
    /// `outer`'s MACs and tag [our choice: both outer UDP ports are 4789,
    /// not a hash of the inner flow; nothing we model balances on it].
    /// With GTP-U likewise, from `outer.src_ip` to `outer.dst_ip` on UDP
    /// 2152 → 2152 [our choice, as for VXLAN], the inner IPv4 packet after
    /// the GTP-U header (flags 0x30, G-PDU, length = the inner packet's).
    pub fn build(
        &self,
        outer: &Endpoints,
        src: Ipv4Addr,
        sport: u16,
        dst: Ipv4Addr,
        dport: u16,
        payload: &[u8],
    ) -> Option<Vec<u8>> {
        let mut ep = *outer;
        ep.src_ip = src;
        ep.dst_ip = dst;
        if self.vxlan.is_some() {
            ep.vlan = None;
        }
        let frame = match self.l4 {
            L4::Udp => build_udp_frame(&ep, sport, dport, payload, true).ok()?,
            L4::Tcp(flags) => build_tcp_frame(
                &ep,
                &TcpRepr {
                    src_port: sport,
                    dst_port: dport,
                    seq: 1,
                    ack: u32::from(flags & TcpFlags::ACK.0 != 0),
                    flags: TcpFlags(flags),
                    window: 65_535,
                    urgent: 0,
                    options: &[],
                    payload,
                },
            )
            .ok()?,
        };
        if let Some(teid) = self.gtpu {
            // The inner IPv4 packet is the frame without its Ethernet header.
            let inner = frame.get(14..)?;
            let len = u16::try_from(inner.len()).ok()?;
            let mut body = Vec::with_capacity(GTPU_LEN + inner.len());
            body.extend_from_slice(&[GTPU_FLAGS, GTPU_GPDU]);
            body.extend_from_slice(&len.to_be_bytes());
            body.extend_from_slice(&teid.to_be_bytes());
            body.extend_from_slice(inner);
            return build_udp_frame(outer, GTPU_PORT, GTPU_PORT, &body, true).ok();
        }
        let Some(vni) = self.vxlan else {
            return Some(frame);
        };
        let mut body = Vec::with_capacity(VXLAN_LEN + frame.len());
        let v = (vni & 0x00ff_ffff).to_be_bytes();
        body.extend_from_slice(&[0x08, 0, 0, 0, v[1], v[2], v[3], 0]);
        body.extend_from_slice(&frame);
        build_udp_frame(outer, VXLAN_PORT, VXLAN_PORT, &body, true).ok()
    }
}

/// The payload of a TCP segment (`None` if it is malformed).
pub fn tcp_payload(segment: &[u8]) -> Option<&[u8]> {
    let s = TcpSegment::new_checked(segment).ok()?;
    segment.get(s.header_len()..)
}

/// The layer-4 payload of the inner frame of a VXLAN datagram's payload
/// (UDP or TCP over IPv4, first fragment); `None` if it is not one.
pub fn vxlan_inner_payload(udp_payload: &[u8]) -> Option<&[u8]> {
    let vx = udp_payload.get(..VXLAN_LEN)?;
    if vx[0] & 0x08 == 0 {
        return None;
    }
    let inner = &udp_payload[VXLAN_LEN..];
    let eth = EthernetFrame::new_checked(inner).ok()?;
    if eth.ethertype() != inca_wire::ethernet::ethertype::IPV4 {
        return None;
    }
    let off = inner.len() - eth.payload().len();
    let ip = Ipv4Packet::new_checked(&inner[off..]).ok()?;
    if ip.more_frags() || ip.frag_offset() != 0 {
        return None;
    }
    let l4_off = off + (inner.len() - off - ip.payload().len());
    let l4 = &inner[l4_off..];
    match ip.protocol() {
        inca_wire::ipv4::protocol::UDP => {
            let u = UdpDatagram::new_checked(l4).ok()?;
            let n = u.payload().len();
            l4.get(8..8 + n)
        }
        inca_wire::ipv4::protocol::TCP => tcp_payload(l4),
        _ => None,
    }
}

/// The layer-4 payload of the inner IPv4 packet of a GTP-U G-PDU (the
/// payload of a datagram to UDP 2152; UDP or TCP inside, first fragment);
/// `None` if it is not one. The optional sequence/N-PDU fields (4 bytes,
/// flagged S/PN/E) are skipped; a chain of extension headers is refused.
pub fn gtpu_inner_payload(udp_payload: &[u8]) -> Option<&[u8]> {
    let g = udp_payload.get(..GTPU_LEN)?;
    if g[0] >> 5 != 1 || g[0] & 0x10 == 0 || g[1] != GTPU_GPDU || g[0] & 0x04 != 0 {
        return None;
    }
    let off = if g[0] & 0x03 != 0 {
        GTPU_LEN + 4
    } else {
        GTPU_LEN
    };
    ip_l4_payload(udp_payload.get(off..)?)
}

/// The layer-4 payload of an IPv4 packet carrying UDP or TCP (first
/// fragment only).
fn ip_l4_payload(packet: &[u8]) -> Option<&[u8]> {
    let ip = Ipv4Packet::new_checked(packet).ok()?;
    if ip.more_frags() || ip.frag_offset() != 0 {
        return None;
    }
    let l4_off = packet.len() - ip.payload().len();
    let l4 = &packet[l4_off..];
    match ip.protocol() {
        inca_wire::ipv4::protocol::UDP => {
            let u = UdpDatagram::new_checked(l4).ok()?;
            let n = u.payload().len();
            l4.get(8..8 + n)
        }
        inca_wire::ipv4::protocol::TCP => tcp_payload(l4),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outer() -> Endpoints {
        Endpoints::new(
            [2, 0, 0, 0, 0, 1],
            Ipv4Addr::new(10, 1, 1, 1),
            [2, 0, 0, 0, 0, 2],
            Ipv4Addr::new(10, 255, 0, 1),
        )
    }

    #[test]
    fn tcp_syn_carries_the_payload_after_a_20_byte_header() {
        let s = Shape {
            l4: L4::Tcp(0x02),
            vxlan: None,
            gtpu: None,
        };
        let (a, b) = (Ipv4Addr::new(10, 1, 2, 1), Ipv4Addr::new(10, 2, 0, 7));
        let f = s.build(&outer(), a, 6000, b, 5000, b"hello").unwrap();
        assert_eq!(f.len(), s.headers() + 5);
        let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
        assert_eq!(ip.protocol(), inca_wire::ipv4::protocol::TCP);
        assert_eq!((ip.src_addr(), ip.dst_addr()), (a, b));
        let seg = TcpSegment::new_checked(ip.payload()).unwrap();
        assert_eq!(seg.flags().0, 0x02);
        assert_eq!((seg.src_port(), seg.dst_port()), (6000, 5000));
        assert_eq!(tcp_payload(ip.payload()), Some(&b"hello"[..]));
    }

    #[test]
    fn vxlan_wraps_the_inner_frame_and_is_unwrapped_again() {
        let s = Shape {
            l4: L4::Udp,
            vxlan: Some(0x01_0203),
            gtpu: None,
        };
        let vm = Ipv4Addr::new(10, 128, 3, 9);
        let f = s
            .build(&outer(), Ipv4Addr::new(10, 1, 1, 1), 7, vm, 5000, b"probe!")
            .unwrap();
        assert_eq!(f.len(), s.headers() + 6);
        let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
        assert_eq!(ip.dst_addr(), Ipv4Addr::new(10, 255, 0, 1));
        let udp = UdpDatagram::new_checked(ip.payload()).unwrap();
        assert_eq!(udp.dst_port(), VXLAN_PORT);
        let vx = &udp.payload()[..VXLAN_LEN];
        assert_eq!(vx, &[0x08, 0, 0, 0, 1, 2, 3, 0]);
        // The inner IPv4 destination is the VM, as a VPN gateway reads it.
        let inner_ip = Ipv4Packet::new_checked(&udp.payload()[VXLAN_LEN + 14..]).unwrap();
        assert_eq!(inner_ip.dst_addr(), vm);
        assert_eq!(vxlan_inner_payload(udp.payload()), Some(&b"probe!"[..]));
    }

    #[test]
    fn gtpu_tunnels_the_inner_ip_packet_and_is_unwrapped_again() {
        let s = Shape {
            l4: L4::Udp,
            vxlan: None,
            gtpu: Some(0x0102_0304),
        };
        let ue = Ipv4Addr::new(10, 200, 0, 7);
        let pdn = Ipv4Addr::new(203, 0, 113, 1);
        let f = s.build(&outer(), ue, 7000, pdn, 7, b"probe!").unwrap();
        assert_eq!(f.len(), s.headers() + 6);
        let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
        // The outer packet goes from the eNB (the host) to the gateway.
        assert_eq!(ip.src_addr(), Ipv4Addr::new(10, 1, 1, 1));
        assert_eq!(ip.dst_addr(), Ipv4Addr::new(10, 255, 0, 1));
        let udp = UdpDatagram::new_checked(ip.payload()).unwrap();
        assert_eq!((udp.src_port(), udp.dst_port()), (GTPU_PORT, GTPU_PORT));
        let g = &udp.payload()[..GTPU_LEN];
        // Flags, G-PDU, length of the inner packet (20 + 8 + 6), TEID.
        assert_eq!(g, &[0x30, 0xFF, 0, 34, 1, 2, 3, 4]);
        let inner = Ipv4Packet::new_checked(&udp.payload()[GTPU_LEN..]).unwrap();
        assert_eq!((inner.src_addr(), inner.dst_addr()), (ue, pdn));
        assert_eq!(gtpu_inner_payload(udp.payload()), Some(&b"probe!"[..]));
        // A GTP-U header with a sequence number (S flag): 4 more bytes.
        let mut seq = vec![0x32, 0xFF, 0, 38, 1, 2, 3, 4, 0, 9, 0, 0];
        seq.extend_from_slice(&udp.payload()[GTPU_LEN..]);
        assert_eq!(gtpu_inner_payload(&seq), Some(&b"probe!"[..]));
        // Not a G-PDU (echo request, type 1), or GTP' (PT clear): refused.
        let mut echo = udp.payload().to_vec();
        echo[1] = 1;
        assert_eq!(gtpu_inner_payload(&echo), None);
        let mut prime = udp.payload().to_vec();
        prime[0] = 0x20;
        assert_eq!(gtpu_inner_payload(&prime), None);
    }

    #[test]
    fn malformed_inner_frames_are_refused() {
        assert_eq!(gtpu_inner_payload(&[0x30, 0xFF, 0, 0]), None);
        assert_eq!(
            gtpu_inner_payload(&[0x30, 0xFF, 0, 0, 0, 0, 0, 1, 0x45]),
            None
        );
        assert_eq!(vxlan_inner_payload(&[]), None);
        assert_eq!(vxlan_inner_payload(&[0; 8]), None); // I flag clear
        let mut p = vec![0x08, 0, 0, 0, 0, 0, 1, 0];
        p.extend_from_slice(&[0xff; 20]); // not Ethernet/IPv4
        assert_eq!(vxlan_inner_payload(&p), None);
        assert_eq!(tcp_payload(&[0; 10]), None);
    }
}
