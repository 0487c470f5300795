//! SwiSh replication traffic (specs/swish.md §4): Ethernet II / IPv4 / UDP
//! to port [`UDP_PORT`] (47000), source port `47000 ^ (rid & 0xFF)` for ECMP
//! entropy, then the 8-byte common [`Header`] and one protocol's body:
//!
//! - [`sro`] — strong reads: chain writes, acks, snapshot transfer (§4.2);
//! - [`ewo`] — eventual writes: UPDATE and SYNC merges (§4.3);
//! - [`sdw`] — strong delayed writes: DATA, ACK and READY (§4.4);
//! - [`ddos`] — the DDoS baselines' push digest to the controller (§4.5; its
//!   own UDP port, no common header).
//! - [`ctl`] — the controller ↔ switch-CPU RPC (§4.5), on a control
//!   session rather than in replication traffic.
//!
//! ```text
//! byte 0: version 4 | proto 4   byte 1: type
//! byte 2: flags                 byte 3: group_id
//! bytes 4-5: src_rid            bytes 6-7: dst_rid (0xFFFF: the group)
//! ```
//!
//! All fields are big-endian. [`Header`] is the checked view (version 1, a
//! known proto); [`HeaderRepr`] parses and emits. The type byte is the
//! protocol's: each body module decodes it. Byte layouts are in
//! docs/wire.md, section "SwiSh".

use crate::error::{Result, WireError};

pub mod ctl;
pub mod ddos;
pub mod ewo;
pub mod sdw;
pub mod sro;

/// UDP destination port of every SwiSh replication packet [our choice].
pub const UDP_PORT: u16 = 47000;
/// Length of the common header.
pub const HEADER_LEN: usize = 8;
/// The only version.
pub const VERSION: u8 = 1;
/// `dst_rid` meaning "every member of the group".
pub const GROUP_RID: u16 = 0xFFFF;

/// The UDP source port a replica uses: 47000 XOR its rid's low byte, so ECMP
/// spreads replicas' traffic over paths (§4).
pub fn src_port(rid: u16) -> u16 {
    UDP_PORT ^ (rid & 0xFF)
}

/// Header flag bits (§4.1).
pub mod flags {
    /// The paper's update/ACK bit.
    pub const ACK: u8 = 0x01;
    /// A retransmission.
    pub const RETX: u8 = 0x02;
    /// The last packet of a batch (SDW's final column).
    pub const LAST: u8 = 0x04;
    /// A no-op write (SRO insert-if-absent on an existing key).
    pub const NOOP: u8 = 0x08;
    /// Part of a snapshot transfer (SRO join).
    pub const SNAPSHOT: u8 = 0x10;
}

/// Which protocol's body follows (§4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Proto {
    /// Strong reads, chain replication (§4.2).
    Sro = 1,
    /// Eventual writes, CRDT merges (§4.3).
    Ewo = 2,
    /// Strong delayed writes, windows (§4.4).
    Sdw = 3,
}

impl Proto {
    /// Decodes the 4-bit proto code.
    pub fn from_u8(v: u8) -> Result<Self> {
        Ok(match v {
            1 => Proto::Sro,
            2 => Proto::Ewo,
            3 => Proto::Sdw,
            _ => return Err(WireError::Unsupported("unknown SwiSh proto")),
        })
    }
}

mod field {
    pub const VER_PROTO: usize = 0;
    pub const TYPE: usize = 1;
    pub const FLAGS: usize = 2;
    pub const GROUP: usize = 3;
    pub const SRC_RID: usize = 4;
    pub const DST_RID: usize = 6;
}

/// A checked view of the common header at the start of a UDP payload.
#[derive(Debug, Clone, Copy)]
pub struct Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Header<T> {
    /// Wraps `buffer`, checking its length, version and proto.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let h = Header { buffer };
        let b = h.buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if b[field::VER_PROTO] >> 4 != VERSION {
            return Err(WireError::Unsupported("SwiSh version"));
        }
        Proto::from_u8(b[field::VER_PROTO] & 0x0F)?;
        Ok(h)
    }

    /// The protocol whose body follows.
    pub fn proto(&self) -> Proto {
        // Checked in `new_checked`.
        Proto::from_u8(self.buffer.as_ref()[field::VER_PROTO] & 0x0F).unwrap_or(Proto::Sro)
    }

    /// The protocol's type code.
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    /// The [`flags`] bits.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// The chain, EWO group or SDW collection.
    pub fn group_id(&self) -> u8 {
        self.buffer.as_ref()[field::GROUP]
    }

    /// The sending replica.
    pub fn src_rid(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::SRC_RID], b[field::SRC_RID + 1]])
    }

    /// The receiving replica, or [`GROUP_RID`].
    pub fn dst_rid(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::DST_RID], b[field::DST_RID + 1]])
    }

    /// The bytes after the common header.
    pub fn body(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// Sets the flags.
    pub fn set_flags(&mut self, v: u8) {
        self.buffer.as_mut()[field::FLAGS] = v;
    }

    /// Sets the type code.
    pub fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::TYPE] = v;
    }

    /// Sets the source replica.
    pub fn set_src_rid(&mut self, v: u16) {
        self.buffer.as_mut()[field::SRC_RID..field::SRC_RID + 2].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the destination replica.
    pub fn set_dst_rid(&mut self, v: u16) {
        self.buffer.as_mut()[field::DST_RID..field::DST_RID + 2].copy_from_slice(&v.to_be_bytes());
    }

    /// The bytes after the common header, writable.
    pub fn body_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// The common header's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HeaderRepr {
    /// Which protocol's body follows.
    pub proto: Proto,
    /// The protocol's type code.
    pub msg_type: u8,
    /// [`flags`] bits.
    pub flags: u8,
    /// Chain, EWO group or SDW collection.
    pub group_id: u8,
    /// Sender.
    pub src_rid: u16,
    /// Receiver, or [`GROUP_RID`].
    pub dst_rid: u16,
}

impl HeaderRepr {
    /// Parses the header at the start of `payload`.
    pub fn parse(payload: &[u8]) -> Result<Self> {
        let h = Header::new_checked(payload)?;
        Ok(HeaderRepr {
            proto: h.proto(),
            msg_type: h.msg_type(),
            flags: h.flags(),
            group_id: h.group_id(),
            src_rid: h.src_rid(),
            dst_rid: h.dst_rid(),
        })
    }

    /// Writes the header into the first [`HEADER_LEN`] bytes of `out`.
    pub fn emit(&self, out: &mut [u8]) -> Result<()> {
        let out = out.get_mut(..HEADER_LEN).ok_or(WireError::BufferTooSmall)?;
        out[field::VER_PROTO] = (VERSION << 4) | self.proto as u8;
        out[field::TYPE] = self.msg_type;
        out[field::FLAGS] = self.flags;
        out[field::GROUP] = self.group_id;
        out[field::SRC_RID..field::SRC_RID + 2].copy_from_slice(&self.src_rid.to_be_bytes());
        out[field::DST_RID..field::DST_RID + 2].copy_from_slice(&self.dst_rid.to_be_bytes());
        Ok(())
    }

    /// The header as its 8 bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        // The array is exactly HEADER_LEN long.
        let _ = self.emit(&mut b);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_refuses_garbage() {
        let repr = HeaderRepr {
            proto: Proto::Sdw,
            msg_type: 0x02,
            flags: flags::ACK | flags::LAST,
            group_id: 7,
            src_rid: 0x0102,
            dst_rid: GROUP_RID,
        };
        let bytes = repr.to_bytes();
        assert_eq!(bytes[0], 0x13);
        assert_eq!(HeaderRepr::parse(&bytes).unwrap(), repr);
        assert_eq!(HeaderRepr::parse(&bytes[..7]), Err(WireError::Truncated));
        let mut bad = bytes;
        bad[0] = 0x23;
        assert!(HeaderRepr::parse(&bad).is_err());
        bad[0] = 0x14;
        assert!(HeaderRepr::parse(&bad).is_err());
        assert_eq!(src_port(0x1234), 47000 ^ 0x34);
    }
}
