//! UDP (RFC 768).
//!
//! ```text
//! 0..2 source port   2..4 destination port   4..6 length (header + payload)   6..8 checksum
//! ```
//! The checksum covers the IPv4 pseudo-header, the header and the payload;
//! 0 on the wire means "no checksum", so a computed 0 is sent as 0xFFFF.

use std::net::Ipv4Addr;

use crate::checksum;
use crate::error::{Result, WireError};
use crate::ipv4::protocol;

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
}

/// A zero-copy view of a UDP datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpDatagram<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpDatagram<T> {
    /// Wraps without checks; accessors may panic on a short buffer.
    pub fn new_unchecked(buffer: T) -> Self {
        UdpDatagram { buffer }
    }

    /// Wraps after checking `8 <= length field <= buffer length`.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let d = Self::new_unchecked(buffer);
        let len = d.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let l = usize::from(d.len());
        if l < HEADER_LEN {
            return Err(WireError::Malformed("UDP length < 8"));
        }
        if l > len {
            return Err(WireError::Truncated);
        }
        Ok(d)
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn u16_at(&self, i: usize) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[i], b[i + 1]])
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        self.u16_at(field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        self.u16_at(field::DST_PORT)
    }

    /// The length field: header plus payload.
    pub fn len(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) <= HEADER_LEN
    }

    /// Checksum as stored (0 = none).
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// Payload, bounded by the length field.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }

    /// The checksum this datagram should carry between `src` and `dst`
    /// (never 0: a computed 0 is expressed as 0xFFFF).
    pub fn compute_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> u16 {
        let b = &self.buffer.as_ref()[..usize::from(self.len())];
        let mut acc = checksum::pseudo_header_ipv4(src, dst, protocol::UDP, self.len());
        acc = checksum::combine(acc, checksum::sum(&b[..field::CHECKSUM]));
        acc = checksum::combine(acc, checksum::sum(&b[HEADER_LEN..]));
        match !checksum::fold(acc) {
            0 => 0xFFFF,
            c => c,
        }
    }

    /// True when the checksum is absent (0) or correct.
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        self.checksum() == 0 || self.checksum() == self.compute_checksum(src, dst)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpDatagram<T> {
    fn set_u16_at(&mut self, i: usize, v: u16) {
        self.buffer.as_mut()[i..i + 2].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        self.set_u16_at(field::SRC_PORT, v);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        self.set_u16_at(field::DST_PORT, v);
    }

    /// Sets the length field.
    pub fn set_len(&mut self, v: u16) {
        self.set_u16_at(field::LENGTH, v);
    }

    /// Stores a checksum value as is (0 disables it).
    pub fn set_checksum(&mut self, v: u16) {
        self.set_u16_at(field::CHECKSUM, v);
    }

    /// Computes and stores the checksum.
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        let c = self.compute_checksum(src, dst);
        self.set_checksum(c);
    }

    /// Mutable payload, bounded by the length field.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let l = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..l]
    }
}

/// The fields of a UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
}

impl UdpRepr {
    /// Reads a checked view, rejecting a present but wrong checksum.
    pub fn parse<T: AsRef<[u8]>>(d: &UdpDatagram<T>, src: Ipv4Addr, dst: Ipv4Addr) -> Result<Self> {
        if !d.verify_checksum(src, dst) {
            return Err(WireError::BadChecksum);
        }
        Ok(UdpRepr {
            src_port: d.src_port(),
            dst_port: d.dst_port(),
        })
    }

    /// Header plus `payload_len`.
    pub fn buffer_len(&self, payload_len: usize) -> usize {
        HEADER_LEN + payload_len
    }

    /// Writes header and `payload` into `buf`; the checksum is computed when
    /// `with_checksum`, else left 0.
    pub fn emit(
        &self,
        buf: &mut [u8],
        payload: &[u8],
        src: Ipv4Addr,
        dst: Ipv4Addr,
        with_checksum: bool,
    ) -> Result<()> {
        let total = self.buffer_len(payload.len());
        let len16 =
            u16::try_from(total).map_err(|_| WireError::OutOfRange("UDP length > 65535"))?;
        if buf.len() < total {
            return Err(WireError::BufferTooSmall);
        }
        let mut d = UdpDatagram::new_unchecked(&mut buf[..total]);
        d.set_src_port(self.src_port);
        d.set_dst_port(self.dst_port);
        d.set_len(len16);
        d.set_checksum(0);
        d.payload_mut().copy_from_slice(payload);
        if with_checksum {
            d.fill_checksum(src, dst);
        }
        Ok(())
    }
}
