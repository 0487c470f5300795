//! The parse step the apps share: Ethernet II with an optional 802.1Q tag,
//! IPv4, and the ports of TCP or UDP, read with `inca-wire`'s checked views
//! from the header window the switch gives the parser.

use inca_switch::{Gress, ParseError};
use inca_wire::{checksum, EthernetFrame, Ipv4Packet};

/// IP protocol numbers the apps look at.
pub const PROTO_TCP: u8 = 6;
/// UDP's protocol number.
pub const PROTO_UDP: u8 = 17;
/// ICMP's protocol number.
pub const PROTO_ICMP: u8 = 1;

/// What the parser found, as offsets into the frame and the fields the apps
/// match on. Offsets are `u16`: the parse window is at most a few hundred
/// bytes on a switch, and a frame is at most 64 KiB anywhere.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The frame carries IPv4 (otherwise only the Ethernet fields are set).
    pub ipv4: bool,
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// 802.1Q VLAN id (0 when untagged).
    pub vlan: u16,
    /// Offset of the IPv4 header (u16 keeps the metadata small: it travels
    /// with the packet through the traffic manager).
    pub l3: u16,
    /// Offset of the TCP/UDP header (0 if neither).
    pub l4: u16,
    /// IP protocol.
    pub proto: u8,
    /// Source address.
    pub src: [u8; 4],
    /// Destination address.
    pub dst: [u8; 4],
    /// TTL.
    pub ttl: u8,
    /// Source port (TCP/UDP only).
    pub sport: u16,
    /// Destination port (TCP/UDP only).
    pub dport: u16,
    /// The TCP or UDP header is within the window.
    pub has_ports: bool,
    /// TCP flags (0 for UDP).
    pub tcp_flags: u8,
    /// An ICMP echo request (`Some((true, id))`) or reply (`Some((false,
    /// id))`) with its identifier; see [`Parsed::icmp_echo_as_ports`].
    pub icmp_echo: Option<(bool, u16)>,
}

impl Parsed {
    /// An ICMP echo seen as a flow with ports, as NATs treat it: a request
    /// is (identifier, 0), a reply (0, identifier), so a reply's key is its
    /// request's key reversed, as with UDP. Anything else is returned as is.
    pub fn icmp_echo_as_ports(&self) -> Parsed {
        match self.icmp_echo {
            Some((request, id)) => Parsed {
                sport: if request { id } else { 0 },
                dport: if request { 0 } else { id },
                has_ports: true,
                ..*self
            },
            None => *self,
        }
    }

    /// The 13-byte 5-tuple key: src, dst, proto, sport, dport.
    pub fn five_tuple(&self) -> [u8; 13] {
        let mut k = [0u8; 13];
        k[0..4].copy_from_slice(&self.src);
        k[4..8].copy_from_slice(&self.dst);
        k[8] = self.proto;
        k[9..11].copy_from_slice(&self.sport.to_be_bytes());
        k[11..13].copy_from_slice(&self.dport.to_be_bytes());
        k
    }
}

/// Parses Ethernet, IPv4 and TCP/UDP ports from `header`. A frame too short
/// for Ethernet, or an IPv4 header that is malformed, is an error; a non-IPv4
/// frame parses with `ipv4 == false`; fragments after the first carry no
/// ports.
pub fn parse(header: &[u8]) -> Result<Parsed, ParseError> {
    let mut p = Parsed::default();
    parse_into(header, &mut p)?;
    Ok(p)
}

/// [`parse`] into `p`, the parser's metadata in place: returning a
/// [`Parsed`] by value to copy it into the metadata costs a
/// store-forwarding stall per packet (docs/performance.md). After an error
/// `p` holds a partial parse (the switch drops the packet).
pub fn parse_into(header: &[u8], p: &mut Parsed) -> Result<(), ParseError> {
    let eth = EthernetFrame::new_checked(header).map_err(|_| ParseError("short Ethernet frame"))?;
    *p = Parsed {
        dst_mac: eth.dst(),
        vlan: eth.vlan().map_or(0, |v| v.vid),
        ..Parsed::default()
    };
    if eth.ethertype() != inca_wire::ethernet::ethertype::IPV4 {
        return Ok(());
    }
    let l3 = eth.header_len();
    p.l3 = l3 as u16;
    let ip = Ipv4Packet::new_checked_header(&header[l3..])
        .map_err(|_| ParseError("malformed IPv4 header"))?;
    p.ipv4 = true;
    p.proto = ip.protocol();
    p.src = ip.src_addr().octets();
    p.dst = ip.dst_addr().octets();
    p.ttl = ip.ttl();
    if p.proto == PROTO_ICMP && ip.frag_offset() == 0 {
        let l4 = l3 + ip.header_len();
        if let Some(icmp) = header.get(l4..l4 + 8) {
            // Echo request (8) or reply (0), code 0.
            if icmp[1] == 0 && (icmp[0] == 8 || icmp[0] == 0) {
                p.l4 = l4 as u16;
                p.icmp_echo = Some((icmp[0] == 8, u16::from_be_bytes([icmp[4], icmp[5]])));
            }
        }
    }
    if (p.proto == PROTO_TCP || p.proto == PROTO_UDP) && ip.frag_offset() == 0 {
        let l4 = l3 + ip.header_len();
        let need = if p.proto == PROTO_TCP { 20 } else { 8 };
        if let Some(ports) = header.get(l4..l4 + need) {
            p.l4 = l4 as u16; // within the parse window, which is far below 64 KiB
            p.sport = u16::from_be_bytes([ports[0], ports[1]]);
            p.dport = u16::from_be_bytes([ports[2], ports[3]]);
            p.has_ports = true;
            if p.proto == PROTO_TCP {
                p.tcp_flags = ports[13];
            }
        }
    }
    Ok(())
}

/// The parser of an app whose egress does nothing: ingress extracts
/// [`Parsed`], egress extracts nothing (and so costs nothing).
pub fn parse_ingress_only(
    gress: Gress,
    header: &[u8],
    meta: &mut Parsed,
) -> Result<(), ParseError> {
    if gress == Gress::Ingress {
        parse_into(header, meta)?;
    }
    Ok(())
}

/// Which end of a flow [`rewrite_end`] changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The source address and port.
    Source,
    /// The destination address and port.
    Destination,
}

/// Rewrites one end of a parsed TCP, UDP or ICMP-echo packet in the header
/// window `h`: its address and port (for ICMP echo, the identifier, which
/// plays the port in both directions), updating the IPv4 and L4 checksums
/// incrementally (RFC 1624) — a switch never sees the payload the L4
/// checksum covers. A UDP checksum of 0 (none) stays 0. Offsets beyond the
/// window leave the packet unchanged (cannot happen once ports are parsed).
pub fn rewrite_end(h: &mut [u8], p: &Parsed, end: End, ip: [u8; 4], port: u16) {
    let (l3, l4) = (usize::from(p.l3), usize::from(p.l4));
    let (ip_off, port_off) = match (p.proto, end) {
        (PROTO_ICMP, End::Source) => (l3 + 12, l4 + 4),
        (PROTO_ICMP, End::Destination) => (l3 + 16, l4 + 4),
        (_, End::Source) => (l3 + 12, l4),
        (_, End::Destination) => (l3 + 16, l4 + 2),
    };
    let rd16 = |h: &[u8], o: usize| h.get(o..o + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    let ip_sum = l3 + 10;
    let (Some(ip_bytes), Some(old_port), Some(old_ip_sum)) = (
        h.get(ip_off..ip_off + 4),
        rd16(h, port_off),
        rd16(h, ip_sum),
    ) else {
        return;
    };
    let old_ip = u32::from_be_bytes([ip_bytes[0], ip_bytes[1], ip_bytes[2], ip_bytes[3]]);
    let new_ip = u32::from_be_bytes(ip);
    h[ip_off..ip_off + 4].copy_from_slice(&ip);
    h[port_off..port_off + 2].copy_from_slice(&port.to_be_bytes());
    let s = checksum::update_u32(old_ip_sum, old_ip, new_ip);
    h[ip_sum..ip_sum + 2].copy_from_slice(&s.to_be_bytes());
    let (l4_sum, pseudo_header) = match p.proto {
        PROTO_TCP => (l4 + 16, true),
        PROTO_UDP => (l4 + 6, true),
        // ICMP has no pseudo-header: only the identifier counts.
        PROTO_ICMP => (l4 + 2, false),
        _ => return,
    };
    let Some(old) = rd16(h, l4_sum) else {
        return;
    };
    if p.proto == PROTO_UDP && old == 0 {
        return;
    }
    let s = if pseudo_header {
        checksum::update_u32(old, old_ip, new_ip)
    } else {
        old
    };
    let s = checksum::update_u16(s, old_port, port);
    h[l4_sum..l4_sum + 2].copy_from_slice(&s.to_be_bytes());
}

/// Writes the 32-bit `new` at any byte offset `off` in `h` and updates the
/// L4 checksum at `sum_off` incrementally: [`write_fix_sum`] of its four
/// bytes.
pub fn write_u32_fix_sum(
    h: &mut [u8],
    l4: usize,
    off: usize,
    new: u32,
    sum_off: usize,
    udp: bool,
) -> bool {
    write_fix_sum(h, l4, off, &new.to_be_bytes(), sum_off, udp)
}

/// Writes `new` at any byte offset `off` in `h` and updates the L4 checksum
/// at `sum_off` incrementally (RFC 1624) word by word, with 16-bit words
/// counted from the L4 header at `l4` (so an odd offset works too).
///
/// For UDP (`udp`), whether there is a checksum is decided once, from the
/// checksum before the write: 0 (none) stays 0. A running checksum may pass
/// through 0 on the way (0 and 0xFFFF are the same one's-complement sum),
/// so every word is folded in regardless, and a final 0 is sent as 0xFFFF
/// (RFC 768: a computed zero is transmitted as all ones). Returns false
/// (and leaves `h` alone) if the field is beyond `h`.
pub fn write_fix_sum(
    h: &mut [u8],
    l4: usize,
    off: usize,
    new: &[u8],
    sum_off: usize,
    udp: bool,
) -> bool {
    if off < l4 || h.len() < off + new.len() || h.len() < sum_off + 2 {
        return false;
    }
    // The checksum words the field touches: from the even offset at or
    // before it to the even offset after it (relative to `l4`).
    let start = l4 + ((off - l4) & !1);
    let end = l4 + ((off + new.len() - l4 + 1) & !1);
    // A last odd byte is summed as if padded with zero (RFC 768).
    let byte = |h: &[u8], i: usize| h.get(i).copied().unwrap_or(0);
    let words = |h: &[u8]| -> Vec<u16> {
        (start..end)
            .step_by(2)
            .map(|i| u16::from_be_bytes([byte(h, i), byte(h, i + 1)]))
            .collect()
    };
    let before = words(h);
    h[off..off + new.len()].copy_from_slice(new);
    let after = words(h);
    let mut sum = u16::from_be_bytes([h[sum_off], h[sum_off + 1]]);
    if udp && sum == 0 {
        return true;
    }
    for (o, n) in before.into_iter().zip(after) {
        sum = checksum::update_u16(sum, o, n);
    }
    if udp && sum == 0 {
        sum = 0xFFFF;
    }
    h[sum_off..sum_off + 2].copy_from_slice(&sum.to_be_bytes());
    true
}

/// Turns a TCP or UDP packet around in header window `h` (IPv4 header at
/// `l3`, L4 header at `l4`): swaps the IPv4 addresses and the ports. Both
/// checksums stay valid, as their sums do not depend on the order. Returns
/// false (and leaves `h` alone) if the headers are beyond `h`.
pub fn reflect(h: &mut [u8], l3: usize, l4: usize) -> bool {
    if h.len() < l3 + 20 || h.len() < l4 + 4 {
        return false;
    }
    for i in 0..4 {
        h.swap(l3 + 12 + i, l3 + 16 + i);
    }
    for i in 0..2 {
        h.swap(l4 + i, l4 + 2 + i);
    }
    true
}
