//! The EXO shim (specs/exoplane.md §4.1): 12 bytes after the Ethernet
//! header (and its 802.1Q tag, if any) on switch↔device links and between
//! the CPU port and the pipelines. The frame's EtherType becomes
//! [`super::ETHERTYPE`]; the original one moves into `next_type`.
//!
//! ```text
//! byte 0: ver 4 | type 4     byte 1: flags (bit 0 FAILOVER)
//! byte 2: app_id             byte 3: ldev
//! bytes 4-5: in_port         bytes 6-7: out_port
//! bytes 8-9: next_type       bytes 10-11: rsvd (0)
//! ```
//!
//! [`Shim`] is the checked view (version 1 and a known type; reserved
//! flag bits and `rsvd` are ignored when read and written as 0 [our
//! choice]); [`ShimRepr`] parses and emits; [`push`] / [`pop`] insert and
//! remove the shim in a whole frame, and [`push_in_place`] /
//! [`pop_in_place`] do the byte work for a pipeline that inserts and
//! removes header bytes itself (a switch `PacketCtx`).

use crate::error::{Result, WireError};
use crate::ethernet::{EthernetFrame, HEADER_LEN, VLAN_TAG_LEN};

/// Length of the shim.
pub const SHIM_LEN: usize = 12;
/// The only version (`ver`).
pub const VERSION: u8 = 1;
/// `flags` bit 0: the packet was steered to the replica because the
/// primary is down (§5.2 step 5).
pub const FLAG_FAILOVER: u8 = 0x01;

/// The shim's `type` (§4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ShimType {
    /// Switch → device: a flow-manager miss to be served by a device.
    ToDev = 1,
    /// Device → switch: served; the switch pops the shim and sends the
    /// frame out of `out_port`, running no app.
    FromDev = 2,
    /// CPU → pipeline: fold a delta into a register (§4.3 body follows).
    Merge = 3,
    /// Pipeline → CPU: the merge was applied (§4.3 body follows).
    MergeAck = 4,
    /// Pipeline → CPU: a control event (a device MISS, a port-down copy).
    Punt = 5,
}

impl ShimType {
    /// Every type, in code order.
    pub const ALL: [ShimType; 5] = [
        ShimType::ToDev,
        ShimType::FromDev,
        ShimType::Merge,
        ShimType::MergeAck,
        ShimType::Punt,
    ];

    /// Decodes a 4-bit type code.
    pub fn from_u8(v: u8) -> Result<Self> {
        Ok(match v {
            1 => ShimType::ToDev,
            2 => ShimType::FromDev,
            3 => ShimType::Merge,
            4 => ShimType::MergeAck,
            5 => ShimType::Punt,
            _ => return Err(WireError::Unsupported("unknown EXO shim type")),
        })
    }
}

mod field {
    pub const VER_TYPE: usize = 0;
    pub const FLAGS: usize = 1;
    pub const APP_ID: usize = 2;
    pub const LDEV: usize = 3;
    pub const IN_PORT: usize = 4;
    pub const OUT_PORT: usize = 6;
    pub const NEXT_TYPE: usize = 8;
    pub const RSVD: usize = 10;
}

/// A checked view of a shim at the start of `buffer`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shim<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Shim<T> {
    /// Wraps `buffer` after checking its length, version and type, so no
    /// accessor can fail.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < SHIM_LEN {
            return Err(WireError::Truncated);
        }
        if b[field::VER_TYPE] >> 4 != VERSION {
            return Err(WireError::Unsupported("EXO shim version"));
        }
        ShimType::from_u8(b[field::VER_TYPE] & 0x0F)?;
        Ok(Shim { buffer })
    }

    fn be16(&self, at: usize) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[at], b[at + 1]])
    }

    /// The message type.
    pub fn shim_type(&self) -> ShimType {
        // Checked in `new_checked`; ToDev is never reached.
        ShimType::from_u8(self.buffer.as_ref()[field::VER_TYPE] & 0x0F).unwrap_or(ShimType::ToDev)
    }

    /// The flags byte as sent (reserved bits included).
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// Whether the packet went to the replica ([`FLAG_FAILOVER`]).
    pub fn failover(&self) -> bool {
        self.flags() & FLAG_FAILOVER != 0
    }

    /// The application id.
    pub fn app_id(&self) -> u8 {
        self.buffer.as_ref()[field::APP_ID]
    }

    /// The logical device id.
    pub fn ldev(&self) -> u8 {
        self.buffer.as_ref()[field::LDEV]
    }

    /// The switch port the packet first arrived on.
    pub fn in_port(&self) -> u16 {
        self.be16(field::IN_PORT)
    }

    /// The switch port the app chose (0 in TO_DEV).
    pub fn out_port(&self) -> u16 {
        self.be16(field::OUT_PORT)
    }

    /// The frame's original EtherType.
    pub fn next_type(&self) -> u16 {
        self.be16(field::NEXT_TYPE)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Shim<T> {
    fn set_be16(&mut self, at: usize, v: u16) {
        self.buffer.as_mut()[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the type (the version stays 1).
    pub fn set_shim_type(&mut self, t: ShimType) {
        self.buffer.as_mut()[field::VER_TYPE] = (VERSION << 4) | t as u8;
    }

    /// Sets the flags byte (reserved bits are cleared).
    pub fn set_flags(&mut self, flags: u8) {
        self.buffer.as_mut()[field::FLAGS] = flags & FLAG_FAILOVER;
    }

    /// Sets the egress port the app chose.
    pub fn set_out_port(&mut self, port: u16) {
        self.set_be16(field::OUT_PORT, port)
    }

    /// Sets the logical device id.
    pub fn set_ldev(&mut self, ldev: u8) {
        self.buffer.as_mut()[field::LDEV] = ldev;
    }
}

/// The fields of a shim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShimRepr {
    /// The message type.
    pub shim_type: ShimType,
    /// Sent to the replica because the primary is down.
    pub failover: bool,
    /// The application id.
    pub app_id: u8,
    /// The logical device id.
    pub ldev: u8,
    /// The switch port the packet first arrived on.
    pub in_port: u16,
    /// The switch port the app chose (0 in TO_DEV).
    pub out_port: u16,
    /// The original EtherType.
    pub next_type: u16,
}

impl ShimRepr {
    /// Reads a shim at the start of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let s = Shim::new_checked(buf)?;
        Ok(ShimRepr {
            shim_type: s.shim_type(),
            failover: s.failover(),
            app_id: s.app_id(),
            ldev: s.ldev(),
            in_port: s.in_port(),
            out_port: s.out_port(),
            next_type: s.next_type(),
        })
    }

    /// The 12 bytes of the shim.
    pub fn to_bytes(&self) -> [u8; SHIM_LEN] {
        let mut b = [0u8; SHIM_LEN];
        b[field::VER_TYPE] = (VERSION << 4) | self.shim_type as u8;
        b[field::FLAGS] = if self.failover { FLAG_FAILOVER } else { 0 };
        b[field::APP_ID] = self.app_id;
        b[field::LDEV] = self.ldev;
        b[field::IN_PORT..field::IN_PORT + 2].copy_from_slice(&self.in_port.to_be_bytes());
        b[field::OUT_PORT..field::OUT_PORT + 2].copy_from_slice(&self.out_port.to_be_bytes());
        b[field::NEXT_TYPE..field::NEXT_TYPE + 2].copy_from_slice(&self.next_type.to_be_bytes());
        b[field::RSVD..field::RSVD + 2].copy_from_slice(&[0, 0]);
        b
    }

    /// Writes the shim to the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let b = buf.get_mut(..SHIM_LEN).ok_or(WireError::BufferTooSmall)?;
        b.copy_from_slice(&self.to_bytes());
        Ok(())
    }

    /// The bytes needed to emit the shim.
    pub const fn buffer_len(&self) -> usize {
        SHIM_LEN
    }
}

/// Offset of the EtherType field the shim takes over: 12, or 16 behind an
/// 802.1Q tag (the tag stays outside the shim, so a VLAN-keyed classifier
/// still sees it).
pub fn ethertype_offset(frame: &[u8]) -> Result<usize> {
    let f = EthernetFrame::new_checked(frame)?;
    Ok(if f.is_tagged() {
        HEADER_LEN - 2 + VLAN_TAG_LEN
    } else {
        HEADER_LEN - 2
    })
}

/// The shim of a frame, if its EtherType says it carries one: `Ok(None)`
/// for any other frame, an error for a shim EtherType over bad bytes.
pub fn shim_of(frame: &[u8]) -> Result<Option<(usize, ShimRepr)>> {
    let at = ethertype_offset(frame)?;
    if u16::from_be_bytes([frame[at], frame[at + 1]]) != super::ETHERTYPE {
        return Ok(None);
    }
    let start = at + 2;
    Ok(Some((start, ShimRepr::parse(&frame[start..])?)))
}

/// Prepares a push in `header` (at least the Ethernet header): writes the
/// shim EtherType over the frame's own and returns where the shim goes and
/// its bytes, with `next_type` set to the EtherType it replaced. The
/// caller inserts the bytes there. A frame already carrying a shim is
/// refused (shims do not nest).
pub fn push_in_place(header: &mut [u8], repr: ShimRepr) -> Result<(usize, [u8; SHIM_LEN])> {
    let at = ethertype_offset(header)?;
    let old = u16::from_be_bytes([header[at], header[at + 1]]);
    if old == super::ETHERTYPE {
        return Err(WireError::Malformed("frame already carries an EXO shim"));
    }
    header[at..at + 2].copy_from_slice(&super::ETHERTYPE.to_be_bytes());
    let repr = ShimRepr {
        next_type: old,
        ..repr
    };
    Ok((at + 2, repr.to_bytes()))
}

/// Prepares a pop in `header` (at least the Ethernet header and the
/// shim): reads the shim, writes `next_type` back as the EtherType and
/// returns the shim and the offset of its 12 bytes, which the caller
/// removes. A frame without a shim, or with a malformed one, is refused
/// unchanged.
pub fn pop_in_place(header: &mut [u8]) -> Result<(ShimRepr, usize)> {
    let (start, repr) = shim_of(header)?.ok_or(WireError::Malformed("no EXO shim"))?;
    header[start - 2..start].copy_from_slice(&repr.next_type.to_be_bytes());
    Ok((repr, start))
}

/// Inserts a shim into `frame` after its Ethernet header (and tag); the
/// frame's EtherType moves into `next_type` (the `next_type` given is
/// ignored). Refused, frame unchanged, if the frame is not Ethernet or
/// already carries a shim.
pub fn push(frame: &mut Vec<u8>, repr: ShimRepr) -> Result<()> {
    let (at, bytes) = push_in_place(frame, repr)?;
    frame.splice(at..at, bytes);
    Ok(())
}

/// Removes the shim from `frame`, restoring its EtherType; returns the
/// shim. Refused, frame unchanged, if there is none or it is malformed.
pub fn pop(frame: &mut Vec<u8>) -> Result<ShimRepr> {
    let (repr, at) = pop_in_place(frame)?;
    frame.drain(at..at + SHIM_LEN);
    Ok(repr)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(tagged: bool) -> Vec<u8> {
        let mut f = vec![0xAA; 12];
        if tagged {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x07]);
        }
        f.extend_from_slice(&[0x08, 0x00]);
        f.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        f
    }

    fn to_dev() -> ShimRepr {
        ShimRepr {
            shim_type: ShimType::ToDev,
            failover: true,
            app_id: 3,
            ldev: 2,
            in_port: 0x0105,
            out_port: 0,
            next_type: 0,
        }
    }

    #[test]
    fn layout_is_the_spec_s() {
        let r = ShimRepr {
            out_port: 0xBEEF,
            next_type: 0x0800,
            ..to_dev()
        };
        assert_eq!(
            r.to_bytes(),
            [0x11, 0x01, 3, 2, 0x01, 0x05, 0xBE, 0xEF, 0x08, 0x00, 0, 0]
        );
        assert_eq!(ShimRepr::parse(&r.to_bytes()).unwrap(), r);
    }

    #[test]
    fn push_then_pop_restores_the_frame() {
        for tagged in [false, true] {
            let orig = frame(tagged);
            let mut f = orig.clone();
            push(&mut f, to_dev()).unwrap();
            assert_eq!(f.len(), orig.len() + SHIM_LEN);
            let (_, s) = shim_of(&f).unwrap().unwrap();
            assert_eq!(s.next_type, 0x0800);
            assert_eq!(s.app_id, 3);
            // Shims do not nest.
            assert!(push(&mut f.clone(), to_dev()).is_err());
            let r = pop(&mut f).unwrap();
            assert_eq!(
                r,
                ShimRepr {
                    next_type: 0x0800,
                    ..to_dev()
                }
            );
            assert_eq!(f, orig);
            assert!(pop(&mut f).is_err(), "no shim left");
            assert_eq!(f, orig, "a refused pop leaves the frame alone");
        }
    }

    #[test]
    fn bad_version_type_and_length_are_refused() {
        let mut b = to_dev().to_bytes();
        assert_eq!(ShimRepr::parse(&b[..11]), Err(WireError::Truncated));
        b[0] = 0x21;
        assert!(matches!(
            ShimRepr::parse(&b),
            Err(WireError::Unsupported(_))
        ));
        for t in [0u8, 6, 15] {
            b[0] = 0x10 | t;
            assert!(ShimRepr::parse(&b).is_err(), "type {t}");
        }
        // Reserved flag bits are ignored on read and cleared on write.
        let mut b = to_dev().to_bytes();
        b[1] = 0xFE;
        let mut s = Shim::new_checked(&mut b[..]).unwrap();
        assert!(!s.failover());
        s.set_flags(0xFF);
        assert_eq!(s.flags(), FLAG_FAILOVER);
        s.set_shim_type(ShimType::FromDev);
        s.set_out_port(7);
        assert_eq!(s.shim_type(), ShimType::FromDev);
        assert_eq!(s.out_port(), 7);
    }
}
