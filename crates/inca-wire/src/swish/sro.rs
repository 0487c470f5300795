//! SwiSh SRO bodies (specs/swish.md §4.2): the 16-byte body after the
//! common header, then the key and the value, each padded with zeros to a
//! multiple of 4 bytes; the NAT's key and value encodings; and the
//! read-from-tail tunnel (IP-in-IP, RFC 2003).
//!
//! ```text
//! 0  seq:32            (0 in WRITE_REQ)
//! 4  origin_rid:16     6  var_id:16
//! 8  req_id:32         (monotone per origin)
//! 12 key_len:8         13 val_len:8      14 reserved:16
//! 16 key, padded to 4 B; then value, padded to 4 B
//! ```
//!
//! [`Body`] is the checked view, [`BodyRepr`] parses and emits; the type
//! byte of the common header is a [`MsgType`]. [`NatKey`] (7 B) and
//! [`NatValue`] (6 B) are the NAT's variable. [`encapsulate`] and
//! [`decapsulate`] wrap an Ethernet/IPv4 frame's IP packet, unmodified, in
//! an outer IPv4 header with protocol 4 (§4.2: no SwiSh header).

use std::net::Ipv4Addr;

use crate::error::{Result, WireError};
use crate::ipv4::{Ipv4Packet, MIN_HEADER_LEN};

/// Length of the fixed SRO body.
pub const BODY_LEN: usize = 16;
/// IP protocol number of IP-in-IP (RFC 2003).
pub const IPPROTO_IPIP: u8 = 4;
/// Ethernet header length the tunnel works on (untagged frames only).
const ETH_LEN: usize = 14;
/// The IPv4 ethertype.
const ETHERTYPE_IPV4: u16 = 0x0800;

/// SRO message types (§4.2), the common header's type byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum MsgType {
    /// Origin → head.
    WriteReq = 0x01,
    /// Hop by hop along the chain.
    Write = 0x02,
    /// Tail → every member (flag ACK), carrying the committed value.
    WriteAck = 0x03,
    /// A snapshot entry to a joiner (flag SNAPSHOT; seq = snapshot seq).
    SnapWrite = 0x04,
    /// Joiner → tail, for a snapshot entry.
    SnapAck = 0x05,
    /// Joiner → old tail, for a live write.
    ShadowAck = 0x06,
}

impl MsgType {
    /// Decodes the type byte.
    pub fn from_u8(v: u8) -> Result<Self> {
        Ok(match v {
            0x01 => MsgType::WriteReq,
            0x02 => MsgType::Write,
            0x03 => MsgType::WriteAck,
            0x04 => MsgType::SnapWrite,
            0x05 => MsgType::SnapAck,
            0x06 => MsgType::ShadowAck,
            _ => return Err(WireError::Unsupported("unknown SRO type")),
        })
    }
}

/// `n` rounded up to a multiple of 4.
pub fn padded(n: usize) -> usize {
    n.div_ceil(4) * 4
}

mod field {
    pub const SEQ: usize = 0;
    pub const ORIGIN: usize = 4;
    pub const VAR: usize = 6;
    pub const REQ: usize = 8;
    pub const KEY_LEN: usize = 12;
    pub const VAL_LEN: usize = 13;
}

/// A checked view of an SRO body (the bytes after the common header).
#[derive(Debug, Clone, Copy)]
pub struct Body<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Body<T> {
    /// Wraps `buffer`, checking that it holds the fixed body and the padded
    /// key and value it declares (trailing bytes are allowed: Ethernet pads).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = Body { buffer };
        let len = b.buffer.as_ref().len();
        if len < BODY_LEN || len < b.total_len() {
            return Err(WireError::Truncated);
        }
        Ok(b)
    }

    fn be32(&self, at: usize) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
    }

    fn be16(&self, at: usize) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[at], b[at + 1]])
    }

    /// The write's sequence number (0 in WRITE_REQ).
    pub fn seq(&self) -> u32 {
        self.be32(field::SEQ)
    }

    /// The replica that originated the write.
    pub fn origin_rid(&self) -> u16 {
        self.be16(field::ORIGIN)
    }

    /// The shared variable.
    pub fn var_id(&self) -> u16 {
        self.be16(field::VAR)
    }

    /// The origin's request id.
    pub fn req_id(&self) -> u32 {
        self.be32(field::REQ)
    }

    /// Key length in bytes (unpadded).
    pub fn key_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::KEY_LEN])
    }

    /// Value length in bytes (unpadded).
    pub fn val_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VAL_LEN])
    }

    /// Fixed body, padded key and padded value.
    pub fn total_len(&self) -> usize {
        BODY_LEN + padded(self.key_len()) + padded(self.val_len())
    }

    /// The key.
    pub fn key(&self) -> &[u8] {
        &self.buffer.as_ref()[BODY_LEN..BODY_LEN + self.key_len()]
    }

    /// The value.
    pub fn value(&self) -> &[u8] {
        let at = BODY_LEN + padded(self.key_len());
        &self.buffer.as_ref()[at..at + self.val_len()]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Body<T> {
    /// Sets the sequence number.
    pub fn set_seq(&mut self, v: u32) {
        self.buffer.as_mut()[field::SEQ..field::SEQ + 4].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the request id.
    pub fn set_req_id(&mut self, v: u32) {
        self.buffer.as_mut()[field::REQ..field::REQ + 4].copy_from_slice(&v.to_be_bytes());
    }
}

/// An SRO body's fields.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct BodyRepr {
    /// Sequence number (0 in WRITE_REQ).
    pub seq: u32,
    /// Originating replica.
    pub origin_rid: u16,
    /// Shared variable.
    pub var_id: u16,
    /// The origin's request id.
    pub req_id: u32,
    /// Key (at most 255 bytes).
    pub key: Vec<u8>,
    /// Value (at most 255 bytes).
    pub value: Vec<u8>,
}

impl BodyRepr {
    /// Parses a checked body.
    pub fn parse<T: AsRef<[u8]>>(b: &Body<T>) -> BodyRepr {
        BodyRepr {
            seq: b.seq(),
            origin_rid: b.origin_rid(),
            var_id: b.var_id(),
            req_id: b.req_id(),
            key: b.key().to_vec(),
            value: b.value().to_vec(),
        }
    }

    /// Bytes [`BodyRepr::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        BODY_LEN + padded(self.key.len()) + padded(self.value.len())
    }

    /// Writes the body (padding zeroed) into the start of `out`.
    pub fn emit(&self, out: &mut [u8]) -> Result<()> {
        let k = u8::try_from(self.key.len()).map_err(|_| WireError::OutOfRange("key_len"))?;
        let v = u8::try_from(self.value.len()).map_err(|_| WireError::OutOfRange("val_len"))?;
        let out = out
            .get_mut(..self.buffer_len())
            .ok_or(WireError::BufferTooSmall)?;
        out.fill(0);
        out[field::SEQ..field::SEQ + 4].copy_from_slice(&self.seq.to_be_bytes());
        out[field::ORIGIN..field::ORIGIN + 2].copy_from_slice(&self.origin_rid.to_be_bytes());
        out[field::VAR..field::VAR + 2].copy_from_slice(&self.var_id.to_be_bytes());
        out[field::REQ..field::REQ + 4].copy_from_slice(&self.req_id.to_be_bytes());
        out[field::KEY_LEN] = k;
        out[field::VAL_LEN] = v;
        out[BODY_LEN..BODY_LEN + self.key.len()].copy_from_slice(&self.key);
        let at = BODY_LEN + padded(self.key.len());
        out[at..at + self.value.len()].copy_from_slice(&self.value);
        Ok(())
    }

    /// The body as bytes.
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        let mut b = vec![0u8; self.buffer_len()];
        self.emit(&mut b)?;
        Ok(b)
    }
}

/// Length of a [`NatKey`] on the wire.
pub const NAT_KEY_LEN: usize = 7;
/// Length of a [`NatValue`] on the wire.
pub const NAT_VALUE_LEN: usize = 6;

/// The NAT variable's key: the inside endpoint and protocol (§4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NatKey {
    /// Inside address.
    pub ip: [u8; 4],
    /// Inside port.
    pub port: u16,
    /// IP protocol.
    pub proto: u8,
}

impl NatKey {
    /// int_ip ‖ int_port ‖ proto.
    pub fn to_bytes(&self) -> [u8; NAT_KEY_LEN] {
        let mut b = [0u8; NAT_KEY_LEN];
        b[..4].copy_from_slice(&self.ip);
        b[4..6].copy_from_slice(&self.port.to_be_bytes());
        b[6] = self.proto;
        b
    }

    /// Parses exactly [`NAT_KEY_LEN`] bytes.
    pub fn parse(b: &[u8]) -> Result<Self> {
        let b: &[u8; NAT_KEY_LEN] = b.try_into().map_err(|_| WireError::Malformed("NAT key"))?;
        Ok(NatKey {
            ip: [b[0], b[1], b[2], b[3]],
            port: u16::from_be_bytes([b[4], b[5]]),
            proto: b[6],
        })
    }
}

/// The NAT variable's value: the external endpoint (§4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NatValue {
    /// External address.
    pub ip: [u8; 4],
    /// External port.
    pub port: u16,
}

impl NatValue {
    /// ext_ip ‖ ext_port.
    pub fn to_bytes(&self) -> [u8; NAT_VALUE_LEN] {
        let mut b = [0u8; NAT_VALUE_LEN];
        b[..4].copy_from_slice(&self.ip);
        b[4..].copy_from_slice(&self.port.to_be_bytes());
        b
    }

    /// Parses exactly [`NAT_VALUE_LEN`] bytes.
    pub fn parse(b: &[u8]) -> Result<Self> {
        let b: &[u8; NAT_VALUE_LEN] = b
            .try_into()
            .map_err(|_| WireError::Malformed("NAT value"))?;
        Ok(NatValue {
            ip: [b[0], b[1], b[2], b[3]],
            port: u16::from_be_bytes([b[4], b[5]]),
        })
    }
}

fn ipv4_frame(frame: &[u8]) -> Result<Ipv4Packet<&[u8]>> {
    if frame.len() < ETH_LEN {
        return Err(WireError::Truncated);
    }
    if u16::from_be_bytes([frame[12], frame[13]]) != ETHERTYPE_IPV4 {
        return Err(WireError::Unsupported(
            "tunnel needs an untagged IPv4 frame",
        ));
    }
    Ipv4Packet::new_checked(&frame[ETH_LEN..])
}

/// The outer IPv4 header of the read-from-tail tunnel for an inner packet of
/// `inner_len` bytes with TOS `tos`: IHL 5, TOS copied, TTL 64, protocol 4,
/// checksum filled (RFC 2003 §3.1). The data plane inserts it after the
/// Ethernet header.
pub fn outer_header(inner_len: usize, tos: u8, src: Ipv4Addr, dst: Ipv4Addr) -> Result<[u8; 20]> {
    let total = u16::try_from(inner_len + MIN_HEADER_LEN)
        .map_err(|_| WireError::OutOfRange("tunnelled packet too long"))?;
    let mut h = [0u8; MIN_HEADER_LEN];
    let mut outer = Ipv4Packet::new_unchecked(&mut h[..]);
    outer.set_header_len(MIN_HEADER_LEN)?;
    outer.set_tos(tos);
    outer.set_total_len(total);
    outer.set_ident(0);
    outer.set_flags_frag(false, false, 0)?;
    outer.set_ttl(64);
    outer.set_protocol(IPPROTO_IPIP);
    outer.set_src_addr(src);
    outer.set_dst_addr(dst);
    outer.fill_checksum();
    Ok(h)
}

/// The read-from-tail tunnel: `frame` (untagged Ethernet/IPv4) with its IP
/// packet wrapped, unmodified, in an [`outer_header`] from `src` to `dst`.
/// Ethernet padding after the inner packet is dropped.
pub fn encapsulate(frame: &[u8], src: Ipv4Addr, dst: Ipv4Addr) -> Result<Vec<u8>> {
    let inner = ipv4_frame(frame)?;
    let inner_len = usize::from(inner.total_len());
    let outer = outer_header(inner_len, inner.tos(), src, dst)?;
    let mut out = Vec::with_capacity(ETH_LEN + MIN_HEADER_LEN + inner_len);
    out.extend_from_slice(&frame[..ETH_LEN]);
    out.extend_from_slice(&outer);
    out.extend_from_slice(&frame[ETH_LEN..ETH_LEN + inner_len]);
    Ok(out)
}

/// The outer destination of a tunnelled frame, if `frame` is one (IPv4,
/// protocol 4, a valid outer header).
pub fn tunnel_dst(frame: &[u8]) -> Option<Ipv4Addr> {
    let outer = ipv4_frame(frame).ok()?;
    (outer.protocol() == IPPROTO_IPIP).then(|| outer.dst_addr())
}

/// The inner frame of a tunnelled one: the Ethernet header kept, the outer
/// IPv4 header removed. Refuses anything not IP-in-IP or whose inner packet
/// is not a well-formed IPv4 packet.
pub fn decapsulate(frame: &[u8]) -> Result<Vec<u8>> {
    let outer = ipv4_frame(frame)?;
    if outer.protocol() != IPPROTO_IPIP {
        return Err(WireError::Unsupported("not IP-in-IP"));
    }
    let inner = Ipv4Packet::new_checked(outer.payload())?;
    let inner_len = usize::from(inner.total_len());
    let mut out = Vec::with_capacity(ETH_LEN + inner_len);
    out.extend_from_slice(&frame[..ETH_LEN]);
    out.extend_from_slice(&outer.payload()[..inner_len]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_round_trips_with_padding() {
        let r = BodyRepr {
            seq: 7,
            origin_rid: 2,
            var_id: 1,
            req_id: 0x0102_0304,
            key: NatKey {
                ip: [10, 0, 0, 1],
                port: 5000,
                proto: 6,
            }
            .to_bytes()
            .to_vec(),
            value: NatValue {
                ip: [198, 51, 100, 1],
                port: 1024,
            }
            .to_bytes()
            .to_vec(),
        };
        let b = r.to_vec().unwrap();
        assert_eq!(b.len(), 16 + 8 + 8);
        assert_eq!(&b[16 + 7..16 + 8], &[0]);
        let v = Body::new_checked(&b[..]).unwrap();
        assert_eq!(BodyRepr::parse(&v), r);
        assert_eq!(NatKey::parse(v.key()).unwrap().port, 5000);
        assert_eq!(NatValue::parse(v.value()).unwrap().port, 1024);
        assert_eq!(
            Body::new_checked(&b[..b.len() - 1]).err(),
            Some(WireError::Truncated)
        );
        assert!(MsgType::from_u8(7).is_err());
        assert_eq!(MsgType::from_u8(3).unwrap(), MsgType::WriteAck);
    }

    #[test]
    fn tunnel_wraps_and_unwraps_the_packet_unmodified() {
        let ep = crate::builder::Endpoints::new(
            [2, 0, 0, 0, 0, 1],
            Ipv4Addr::new(10, 0, 0, 1),
            [2, 0, 0, 0, 0, 2],
            Ipv4Addr::new(8, 8, 8, 8),
        );
        let f = crate::builder::build_udp_frame(&ep, 1, 2, b"hello", true).unwrap();
        let t = encapsulate(&f, Ipv4Addr::new(10, 47, 0, 1), Ipv4Addr::new(10, 47, 0, 3)).unwrap();
        assert_eq!(t.len(), f.len() + 20);
        assert_eq!(tunnel_dst(&t), Some(Ipv4Addr::new(10, 47, 0, 3)));
        assert_eq!(tunnel_dst(&f), None);
        let outer = Ipv4Packet::new_checked(&t[14..]).unwrap();
        assert!(outer.verify_checksum());
        assert_eq!(decapsulate(&t).unwrap(), f);
        assert!(decapsulate(&f).is_err());
        assert!(decapsulate(&t[..30]).is_err());
    }
}
