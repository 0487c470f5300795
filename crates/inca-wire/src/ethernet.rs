//! Ethernet II frames with an optional single 802.1Q tag.
//!
//! ```text
//! untagged:  0 dst(6) | 6 src(6) | 12 ethertype(2) | 14 payload
//! tagged:    0 dst(6) | 6 src(6) | 12 TPID 0x8100(2) | 14 TCI(2) | 16 ethertype(2) | 18 payload
//! TCI:       PCP(3) | DEI(1) | VID(12)
//! ```
//! Frames carry no FCS here (as captured by pcap).

use crate::error::{Result, WireError};

/// A MAC address, most significant byte first as on the wire.
pub type MacAddr = [u8; 6];

/// EtherType values this crate knows.
pub mod ethertype {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// ARP.
    pub const ARP: u16 = 0x0806;
    /// 802.1Q VLAN tag protocol identifier (TPID).
    pub const VLAN: u16 = 0x8100;
    /// IPv6.
    pub const IPV6: u16 = 0x86DD;
}

/// Length of an untagged Ethernet II header.
pub const HEADER_LEN: usize = 14;
/// Length of one 802.1Q tag (TPID + TCI).
pub const VLAN_TAG_LEN: usize = 4;

mod field {
    use core::ops::Range;
    /// Destination MAC, bytes 0..6.
    pub const DST: Range<usize> = 0..6;
    /// Source MAC, bytes 6..12.
    pub const SRC: Range<usize> = 6..12;
    /// EtherType, or TPID 0x8100 when tagged, bytes 12..14.
    pub const ETHERTYPE: Range<usize> = 12..14;
    /// Tag control information (PCP|DEI|VID) when tagged, bytes 14..16.
    pub const TCI: Range<usize> = 14..16;
    /// Inner EtherType when tagged, bytes 16..18.
    pub const INNER_ETHERTYPE: Range<usize> = 16..18;
}

/// The 802.1Q tag control information.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct VlanTag {
    /// Priority code point, 3 bits (TCI bits 15..13).
    pub pcp: u8,
    /// Drop eligible indicator (TCI bit 12).
    pub dei: bool,
    /// VLAN identifier, 12 bits (TCI bits 11..0).
    pub vid: u16,
}

impl VlanTag {
    /// Decodes a 16-bit TCI; every value is valid.
    pub fn from_tci(tci: u16) -> Self {
        VlanTag {
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0FFF,
        }
    }

    /// Encodes as a TCI, refusing values wider than their fields.
    pub fn tci(&self) -> Result<u16> {
        if self.pcp > 7 {
            return Err(WireError::OutOfRange("VLAN PCP > 7"));
        }
        if self.vid > 0x0FFF {
            return Err(WireError::OutOfRange("VLAN VID > 4095"));
        }
        Ok(u16::from(self.pcp) << 13 | u16::from(self.dei) << 12 | self.vid)
    }
}

/// Offset of the Ethernet payload in `frame`, whether or not it carries a tag.
pub fn payload_offset(frame: &[u8]) -> Result<usize> {
    Ok(EthernetFrame::new_checked(frame)?.header_len())
}

/// A zero-copy view of an Ethernet II frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

fn be16(b: &[u8], r: core::ops::Range<usize>) -> u16 {
    u16::from_be_bytes([b[r.start], b[r.start + 1]])
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps without checks; accessors may panic on a short buffer.
    pub fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wraps after checking that the header (and the tag, if the TPID says
    /// there is one) fits, so no accessor can panic.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let f = Self::new_unchecked(buffer);
        let len = f.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if f.is_tagged() && len < HEADER_LEN + VLAN_TAG_LEN {
            return Err(WireError::Truncated);
        }
        Ok(f)
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Destination MAC.
    pub fn dst(&self) -> MacAddr {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        a
    }

    /// Source MAC.
    pub fn src(&self) -> MacAddr {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        a
    }

    /// The EtherType at bytes 12..14: the TPID when tagged.
    pub fn outer_ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ETHERTYPE)
    }

    /// Whether an 802.1Q tag follows the source MAC.
    pub fn is_tagged(&self) -> bool {
        self.outer_ethertype() == ethertype::VLAN
    }

    /// The tag, if any.
    pub fn vlan(&self) -> Option<VlanTag> {
        self.is_tagged()
            .then(|| VlanTag::from_tci(be16(self.buffer.as_ref(), field::TCI)))
    }

    /// The EtherType of the payload: the inner one when tagged.
    pub fn ethertype(&self) -> u16 {
        if self.is_tagged() {
            be16(self.buffer.as_ref(), field::INNER_ETHERTYPE)
        } else {
            self.outer_ethertype()
        }
    }

    /// 14, or 18 with a tag.
    pub fn header_len(&self) -> usize {
        if self.is_tagged() {
            HEADER_LEN + VLAN_TAG_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Everything after the header (including any Ethernet padding).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination MAC.
    pub fn set_dst(&mut self, a: MacAddr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a);
    }

    /// Sets the source MAC.
    pub fn set_src(&mut self, a: MacAddr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a);
    }

    /// Sets the payload EtherType (the inner one when tagged).
    pub fn set_ethertype(&mut self, v: u16) {
        let r = if self.is_tagged() {
            field::INNER_ETHERTYPE
        } else {
            field::ETHERTYPE
        };
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }

    /// Rewrites the tag of an already tagged frame; adding or removing a tag
    /// changes the frame length, which a view cannot do.
    pub fn set_vlan(&mut self, tag: VlanTag) -> Result<()> {
        if !self.is_tagged() {
            return Err(WireError::Unsupported("frame has no 802.1Q tag to rewrite"));
        }
        let tci = tag.tci()?;
        self.buffer.as_mut()[field::TCI].copy_from_slice(&tci.to_be_bytes());
        Ok(())
    }

    /// Mutable payload.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        &mut self.buffer.as_mut()[h..]
    }
}

/// The parsed header of an Ethernet II frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Destination MAC.
    pub dst: MacAddr,
    /// Source MAC.
    pub src: MacAddr,
    /// The 802.1Q tag, if any.
    pub vlan: Option<VlanTag>,
    /// The payload EtherType (inner when tagged).
    pub ethertype: u16,
}

impl EthernetRepr {
    /// Reads the header of a checked view.
    pub fn parse<T: AsRef<[u8]>>(f: &EthernetFrame<T>) -> Result<Self> {
        Ok(EthernetRepr {
            dst: f.dst(),
            src: f.src(),
            vlan: f.vlan(),
            ethertype: f.ethertype(),
        })
    }

    /// Header length: 14, or 18 with a tag.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + if self.vlan.is_some() { VLAN_TAG_LEN } else { 0 }
    }

    /// Writes the header at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if buf.len() < self.buffer_len() {
            return Err(WireError::BufferTooSmall);
        }
        buf[field::DST].copy_from_slice(&self.dst);
        buf[field::SRC].copy_from_slice(&self.src);
        match self.vlan {
            Some(tag) => {
                let tci = tag.tci()?;
                buf[field::ETHERTYPE].copy_from_slice(&ethertype::VLAN.to_be_bytes());
                buf[field::TCI].copy_from_slice(&tci.to_be_bytes());
                buf[field::INNER_ETHERTYPE].copy_from_slice(&self.ethertype.to_be_bytes());
            }
            None => buf[field::ETHERTYPE].copy_from_slice(&self.ethertype.to_be_bytes()),
        }
        Ok(())
    }
}
