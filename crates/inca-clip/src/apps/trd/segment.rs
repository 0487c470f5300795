//! What TRD reads of a packet (spec §7.2, §4.1): the TCP segment's key,
//! flags and sequence range, from the inner headers of a VXLAN packet or
//! from plain IPv4/TCP, and the serial-number arithmetic it judges them
//! with.
//!
//! Both halves read a segment with the same function over the same bytes
//! (the switch from its header window at the IPv4 header, the server from
//! the L3 bytes behind the shim), so the key the switch puts in the
//! request, the key the server's RSS and flow records use, and the key of
//! the `conn_idx` entry the controller installs are one key.
//!
//! - Key: (VNI, inner 5-tuple) per direction; plain TCP has VNI 0.
//! - `seq_end = seq + payload_len + SYN + FIN` (mod 2^32): the sequence
//!   number after the segment, as TCP counts it (RFC 9293 §3.4: SYN and
//!   FIN occupy one number each) [our choice: the spec's `end = seq + 1`
//!   of a SYN is this formula's value for a SYN without data].
//! - Not a segment [our choice]: anything but IPv4 carrying TCP (directly
//!   or in VXLAN over UDP port 4789 with the I flag), an IP fragment (a
//!   first fragment's length is not the segment's; later ones have no TCP
//!   header), a header cut short or inconsistent (IHL, data offset, total
//!   length). Such packets are forwarded untouched.

use crate::flow::FlowKey;

/// TCP's FIN flag.
pub const FIN: u8 = 0x01;
/// TCP's SYN flag.
pub const SYN: u8 = 0x02;
/// TCP's RST flag.
pub const RST: u8 = 0x04;

/// IP protocol numbers read here.
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
/// The VXLAN UDP port (RFC 7348) and header.
const VXLAN_PORT: u16 = 4789;
const VXLAN_LEN: usize = 8;
const VXLAN_FLAG_I: u8 = 0x08;
const ETH_LEN: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_VLAN: u16 = 0x8100;
const TCP_LEN: usize = 20;

/// One TCP segment as TRD sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// The connection's key in this direction.
    pub flow: FlowKey,
    /// TCP flags.
    pub flags: u8,
    /// Sequence number of the first byte (or of the SYN).
    pub seq: u32,
    /// `seq + payload_len + SYN + FIN`.
    pub seq_end: u32,
    /// TCP payload bytes.
    pub payload_len: u16,
    /// Bytes from the start of the (outer) IPv4 header to the end of the
    /// TCP header's fixed part: what the switch parser extracted
    /// (`parsed_len`, §4.2: 40 plain, 90 in VXLAN without options).
    pub parsed_len: u16,
}

impl Segment {
    /// Whether SYN, FIN or RST is set (the switch always sends such a
    /// segment to a server).
    pub fn is_control(&self) -> bool {
        self.flags & (SYN | FIN | RST) != 0
    }

    /// Whether it occupies sequence space (data, SYN or FIN): only such a
    /// segment can be a retransmission.
    pub fn occupies(&self) -> bool {
        self.seq_end != self.seq
    }
}

/// The IPv4 header at `ip`: (header length, total length, protocol), or
/// None if malformed, cut short or a fragment.
fn ipv4(ip: &[u8]) -> Option<(usize, usize, u8)> {
    let b = ip.get(..20)?;
    if b[0] >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(b[0] & 0x0F) * 4;
    let total = usize::from(u16::from_be_bytes([b[2], b[3]]));
    // More fragments, or a fragment offset: not a whole segment.
    let frag = u16::from_be_bytes([b[6], b[7]]) & 0x3FFF;
    if ihl < 20 || total < ihl || frag != 0 || ip.len() < ihl {
        return None;
    }
    Some((ihl, total, b[9]))
}

/// The TCP segment in the IPv4 packet at `ip` under context `ctx`;
/// `base` is `ip`'s offset from the outer IPv4 header.
fn tcp_in(ip: &[u8], ctx: u32, base: usize) -> Option<Segment> {
    let (ihl, total, proto) = ipv4(ip)?;
    if proto != PROTO_TCP {
        return None;
    }
    let t = ip.get(ihl..ihl + TCP_LEN)?;
    let doff = usize::from(t[12] >> 4) * 4;
    if doff < TCP_LEN || total < ihl + doff {
        return None;
    }
    let payload_len = u16::try_from(total - ihl - doff).ok()?;
    let flags = t[13];
    let seq = u32::from_be_bytes([t[4], t[5], t[6], t[7]]);
    let extra = u32::from(flags & SYN != 0) + u32::from(flags & FIN != 0);
    let seq_end = seq.wrapping_add(u32::from(payload_len)).wrapping_add(extra);
    let src = [ip[12], ip[13], ip[14], ip[15]];
    let dst = [ip[16], ip[17], ip[18], ip[19]];
    let sport = u16::from_be_bytes([t[0], t[1]]);
    let dport = u16::from_be_bytes([t[2], t[3]]);
    Some(Segment {
        flow: FlowKey::new(ctx, PROTO_TCP, src, dst, sport, dport),
        flags,
        seq,
        seq_end,
        payload_len,
        parsed_len: u16::try_from(base + ihl + TCP_LEN).ok()?,
    })
}

/// The segment of the IPv4 packet whose header starts `l3` (EtherType
/// IPv4): its own TCP, or the inner TCP of a VXLAN packet (VNI as the
/// key's context). None if it is neither (see the module documentation).
pub fn of_l3(l3: &[u8]) -> Option<Segment> {
    let (ihl, _, proto) = ipv4(l3)?;
    match proto {
        PROTO_TCP => tcp_in(l3, 0, 0),
        PROTO_UDP => {
            let udp = l3.get(ihl..ihl + 8)?;
            if u16::from_be_bytes([udp[2], udp[3]]) != VXLAN_PORT {
                return None;
            }
            let vx_at = ihl + 8;
            let vx = l3.get(vx_at..vx_at + VXLAN_LEN)?;
            if vx[0] & VXLAN_FLAG_I == 0 {
                return None;
            }
            let vni = u32::from_be_bytes([0, vx[4], vx[5], vx[6]]);
            let eth = vx_at + VXLAN_LEN;
            let e = l3.get(eth..eth + ETH_LEN)?;
            let mut et = u16::from_be_bytes([e[12], e[13]]);
            let mut inner = eth + ETH_LEN;
            if et == ETHERTYPE_VLAN {
                let tag = l3.get(inner..inner + 4)?;
                et = u16::from_be_bytes([tag[2], tag[3]]);
                inner += 4;
            }
            if et != ETHERTYPE_IPV4 {
                return None;
            }
            tcp_in(l3.get(inner..)?, vni, inner)
        }
        _ => None,
    }
}

/// The segment of a frame whose IPv4 header starts at `l3` (the offset the
/// switch parser found; None if `ipv4` is false).
pub fn of_frame(ipv4: bool, l3: usize, frame: &[u8]) -> Option<Segment> {
    if !ipv4 {
        return None;
    }
    of_l3(frame.get(l3..)?)
}

/// `a ≤ b` in 32-bit serial-number arithmetic (RFC 1982): `b` is `a` or
/// at most 2^31 − 1 ahead of it.
pub fn serial_le(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) >= 0
}

/// The later of `a` and `b` in serial-number arithmetic.
pub fn serial_max(a: u32, b: u32) -> u32 {
    if serial_le(a, b) {
        b
    } else {
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inca_wire::{build_tcp_frame, Endpoints, TcpFlags, TcpRepr};
    use std::net::Ipv4Addr;

    fn tcp_frame(flags: u8, seq: u32, payload: &[u8]) -> Vec<u8> {
        let ep = Endpoints::new(
            [2; 6],
            Ipv4Addr::new(10, 0, 0, 1),
            [4; 6],
            Ipv4Addr::new(10, 0, 0, 2),
        );
        let t = TcpRepr {
            src_port: 1234,
            dst_port: 80,
            seq,
            ack: 0,
            flags: TcpFlags(flags),
            window: 1024,
            urgent: 0,
            options: &[],
            payload,
        };
        build_tcp_frame(&ep, &t).unwrap()
    }

    /// A VXLAN frame around `inner` (an Ethernet frame) with VNI `vni`.
    fn vxlan(vni: u32, inner: &[u8]) -> Vec<u8> {
        let v = vni.to_be_bytes();
        let mut payload = vec![VXLAN_FLAG_I, 0, 0, 0, v[1], v[2], v[3], 0];
        payload.extend_from_slice(inner);
        let ep = Endpoints::new(
            [6; 6],
            Ipv4Addr::new(192, 0, 2, 1),
            [7; 6],
            Ipv4Addr::new(192, 0, 2, 2),
        );
        inca_wire::build_udp_frame(&ep, 49_152, VXLAN_PORT, &payload, true).unwrap()
    }

    #[test]
    fn plain_and_vxlan_segments_have_the_inner_key_and_range() {
        let f = tcp_frame(0x18, 1000, b"hello");
        let s = of_frame(true, 14, &f).unwrap();
        assert_eq!(
            s.flow,
            FlowKey::new(0, 6, [10, 0, 0, 1], [10, 0, 0, 2], 1234, 80)
        );
        assert_eq!((s.seq, s.seq_end, s.payload_len), (1000, 1005, 5));
        assert_eq!((s.flags, s.parsed_len, s.is_control()), (0x18, 40, false));
        let syn = of_l3(&tcp_frame(SYN, u32::MAX, b"")[14..]).unwrap();
        assert_eq!(syn.seq_end, 0, "SYN takes one number, wrapping");
        assert!(syn.is_control() && syn.occupies());
        let fin = of_l3(&tcp_frame(FIN | 0x10, 7, b"ab")[14..]).unwrap();
        assert_eq!(fin.seq_end, 10);
        let ack = of_l3(&tcp_frame(0x10, 7, b"")[14..]).unwrap();
        assert!(!ack.occupies());

        let v = vxlan(0xABCDEF, &f);
        let s2 = of_frame(true, 14, &v).unwrap();
        assert_eq!(
            s2.flow,
            FlowKey::new(0xABCDEF, 6, [10, 0, 0, 1], [10, 0, 0, 2], 1234, 80)
        );
        assert_eq!((s2.seq, s2.seq_end, s2.payload_len), (1000, 1005, 5));
        assert_eq!(s2.parsed_len, 90, "§4.2's VXLAN example");
        // Behind an inner VLAN tag.
        let mut tagged = f[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
        tagged.extend_from_slice(&f[12..]);
        let s3 = of_l3(&vxlan(9, &tagged)[14..]).unwrap();
        assert_eq!((s3.flow.ctx(), s3.parsed_len), (9, 94));
    }

    #[test]
    fn anything_else_is_not_a_segment_and_nothing_panics() {
        let f = tcp_frame(0x18, 1, b"xyz");
        assert_eq!(of_frame(false, 14, &f), None);
        // UDP, not VXLAN; VXLAN without the I flag; inner not IPv4.
        let udp = inca_apps::fixtures::flow_frame(
            inca_apps::fixtures::FlowProto::Udp,
            [1, 1, 1, 1],
            5,
            [2, 2, 2, 2],
            53,
        );
        assert_eq!(of_l3(&udp[14..]), None);
        let mut v = vxlan(1, &f);
        v[42] = 0;
        assert_eq!(of_l3(&v[14..]), None);
        let mut v = vxlan(1, &f);
        v[50 + 12] = 0x86;
        assert_eq!(of_l3(&v[14..]), None);
        // A VXLAN'd UDP inner packet.
        let inner = inca_apps::fixtures::vxlan_frame([1; 4], [2; 4], 5, [3; 4], [4; 4]);
        assert_eq!(of_l3(&inner[14..]), None);
        // Fragments, bad IHL, bad data offset, total length too small.
        for (at, v) in [(20usize, 0x20u8), (21, 1), (14, 0x44), (46, 0x40), (17, 30)] {
            let mut g = f.clone();
            g[at] = v;
            assert_eq!(of_l3(&g[14..]), None, "byte {at} = {v:#x}");
        }
        // Every truncation of both kinds.
        let v = vxlan(3, &f);
        for n in 0..v.len() {
            let _ = of_l3(&v[14.min(n)..n]);
        }
        for n in 0..f.len() {
            let _ = of_frame(true, 14, &f[..n]);
        }
        assert_eq!(of_frame(true, 400, &f), None);
    }

    #[test]
    fn serial_arithmetic_wraps() {
        assert!(serial_le(5, 5));
        assert!(serial_le(5, 6));
        assert!(!serial_le(6, 5));
        assert!(serial_le(u32::MAX - 2, 3), "3 is after the wrap");
        assert!(!serial_le(3, u32::MAX - 2));
        assert_eq!(serial_max(u32::MAX, 1), 1);
        assert_eq!(serial_max(1, u32::MAX), 1);
        assert_eq!(serial_max(7, 9), 9);
    }
}
