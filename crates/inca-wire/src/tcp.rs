//! TCP (RFC 9293), header only: no connection state lives here.
//!
//! ```text
//!  0..2 source port   2..4 destination port   4..8 sequence number   8..12 acknowledgment number
//! 12 data offset(4)|reserved(3)|NS(1)   13 CWR|ECE|URG|ACK|PSH|RST|SYN|FIN
//! 14..16 window   16..18 checksum (with IPv4 pseudo-header)   18..20 urgent pointer
//! 20..offset*4 options (passed through untouched)   then payload to the end of the buffer
//! ```
//! TCP has no length field: the segment is the whole IPv4 payload.

use core::ops::{BitOr, BitOrAssign};
use std::net::Ipv4Addr;

use crate::checksum;
use crate::error::{Result, WireError};
use crate::ipv4::protocol;

/// Length of a header without options.
pub const MIN_HEADER_LEN: usize = 20;
/// Longest options area (data offset 15).
pub const MAX_OPTIONS_LEN: usize = 40;

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const SEQ: usize = 4;
    pub const ACK: usize = 8;
    pub const DATA_OFF: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WINDOW: usize = 14;
    pub const CHECKSUM: usize = 16;
    pub const URGENT: usize = 18;
}

/// The eight flag bits of byte 13.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    /// No more data from sender.
    pub const FIN: TcpFlags = TcpFlags(0x01);
    /// Synchronize sequence numbers.
    pub const SYN: TcpFlags = TcpFlags(0x02);
    /// Reset the connection.
    pub const RST: TcpFlags = TcpFlags(0x04);
    /// Push.
    pub const PSH: TcpFlags = TcpFlags(0x08);
    /// Acknowledgment field significant.
    pub const ACK: TcpFlags = TcpFlags(0x10);
    /// Urgent pointer significant.
    pub const URG: TcpFlags = TcpFlags(0x20);
    /// ECN echo.
    pub const ECE: TcpFlags = TcpFlags(0x40);
    /// Congestion window reduced.
    pub const CWR: TcpFlags = TcpFlags(0x80);

    /// No flags.
    pub const fn empty() -> Self {
        TcpFlags(0)
    }

    /// The raw byte.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Whether every flag in `other` is set.
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | rhs.0)
    }
}

impl BitOrAssign for TcpFlags {
    fn bitor_assign(&mut self, rhs: TcpFlags) {
        self.0 |= rhs.0;
    }
}

/// A zero-copy view of a TCP segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpSegment<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpSegment<T> {
    /// Wraps without checks; accessors may panic on a short buffer.
    pub fn new_unchecked(buffer: T) -> Self {
        TcpSegment { buffer }
    }

    /// Wraps after checking `20 <= data offset × 4 <= buffer length`.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let s = Self::new_unchecked(buffer);
        let len = s.buffer.as_ref().len();
        if len < MIN_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let hl = s.header_len();
        if hl < MIN_HEADER_LEN {
            return Err(WireError::Malformed("TCP data offset < 5"));
        }
        if hl > len {
            return Err(WireError::Truncated);
        }
        Ok(s)
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    fn u16_at(&self, i: usize) -> u16 {
        u16::from_be_bytes([self.b()[i], self.b()[i + 1]])
    }

    fn u32_at(&self, i: usize) -> u32 {
        let b = self.b();
        u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        self.u16_at(field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        self.u16_at(field::DST_PORT)
    }

    /// Sequence number.
    pub fn seq(&self) -> u32 {
        self.u32_at(field::SEQ)
    }

    /// Acknowledgment number.
    pub fn ack(&self) -> u32 {
        self.u32_at(field::ACK)
    }

    /// Header length in bytes: data offset (byte 12 bits 7..4) × 4.
    pub fn header_len(&self) -> usize {
        usize::from(self.b()[field::DATA_OFF] >> 4) * 4
    }

    /// The NS (nonce sum) bit, byte 12 bit 0; historic, passed through.
    pub fn ns(&self) -> bool {
        self.b()[field::DATA_OFF] & 0x01 != 0
    }

    /// Flags (byte 13).
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(self.b()[field::FLAGS])
    }

    /// Receive window.
    pub fn window(&self) -> u16 {
        self.u16_at(field::WINDOW)
    }

    /// Checksum as stored.
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// Urgent pointer.
    pub fn urgent(&self) -> u16 {
        self.u16_at(field::URGENT)
    }

    /// Option bytes, untouched.
    pub fn options(&self) -> &[u8] {
        &self.b()[MIN_HEADER_LEN..self.header_len()]
    }

    /// Payload: everything after the options.
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..]
    }

    /// The checksum the segment should carry between `src` and `dst`.
    /// Segments longer than 65535 bytes cannot be carried by IPv4; their
    /// length is truncated in the pseudo-header.
    pub fn compute_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> u16 {
        let b = self.b();
        let mut acc = checksum::pseudo_header_ipv4(src, dst, protocol::TCP, b.len() as u16);
        acc = checksum::combine(acc, checksum::sum(&b[..field::CHECKSUM]));
        acc = checksum::combine(acc, checksum::sum(&b[field::CHECKSUM + 2..]));
        !checksum::fold(acc)
    }

    /// Whether the stored checksum is correct.
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        self.checksum() == self.compute_checksum(src, dst)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpSegment<T> {
    fn set_u16_at(&mut self, i: usize, v: u16) {
        self.buffer.as_mut()[i..i + 2].copy_from_slice(&v.to_be_bytes());
    }

    fn set_u32_at(&mut self, i: usize, v: u32) {
        self.buffer.as_mut()[i..i + 4].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        self.set_u16_at(field::SRC_PORT, v);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        self.set_u16_at(field::DST_PORT, v);
    }

    /// Sets the sequence number.
    pub fn set_seq(&mut self, v: u32) {
        self.set_u32_at(field::SEQ, v);
    }

    /// Sets the acknowledgment number.
    pub fn set_ack(&mut self, v: u32) {
        self.set_u32_at(field::ACK, v);
    }

    /// Sets the header length (multiple of 4, 20..=60), clearing reserved bits and NS.
    pub fn set_header_len(&mut self, len: usize) -> Result<()> {
        if !(MIN_HEADER_LEN..=MIN_HEADER_LEN + MAX_OPTIONS_LEN).contains(&len) || len & 3 != 0 {
            return Err(WireError::OutOfRange("TCP header length"));
        }
        self.buffer.as_mut()[field::DATA_OFF] = ((len / 4) as u8) << 4;
        Ok(())
    }

    /// Sets the flags byte.
    pub fn set_flags(&mut self, f: TcpFlags) {
        self.buffer.as_mut()[field::FLAGS] = f.0;
    }

    /// Sets the window.
    pub fn set_window(&mut self, v: u16) {
        self.set_u16_at(field::WINDOW, v);
    }

    /// Stores a checksum value as is.
    pub fn set_checksum(&mut self, v: u16) {
        self.set_u16_at(field::CHECKSUM, v);
    }

    /// Sets the urgent pointer.
    pub fn set_urgent(&mut self, v: u16) {
        self.set_u16_at(field::URGENT, v);
    }

    /// Computes and stores the checksum.
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        let c = self.compute_checksum(src, dst);
        self.set_checksum(c);
    }

    /// Mutable option bytes.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        &mut self.buffer.as_mut()[MIN_HEADER_LEN..h]
    }

    /// Mutable payload.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        &mut self.buffer.as_mut()[h..]
    }
}

/// The fields of a TCP segment, borrowing options and payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpRepr<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// Flags.
    pub flags: TcpFlags,
    /// Receive window.
    pub window: u16,
    /// Urgent pointer.
    pub urgent: u16,
    /// Raw options; length a multiple of 4, at most 40.
    pub options: &'a [u8],
    /// Payload.
    pub payload: &'a [u8],
}

impl<'a> TcpRepr<'a> {
    /// Reads a checked view, rejecting a wrong checksum.
    pub fn parse(s: &TcpSegment<&'a [u8]>, src: Ipv4Addr, dst: Ipv4Addr) -> Result<Self> {
        if !s.verify_checksum(src, dst) {
            return Err(WireError::BadChecksum);
        }
        let b: &'a [u8] = s.buffer;
        let hl = s.header_len();
        Ok(TcpRepr {
            src_port: s.src_port(),
            dst_port: s.dst_port(),
            seq: s.seq(),
            ack: s.ack(),
            flags: s.flags(),
            window: s.window(),
            urgent: s.urgent(),
            options: &b[MIN_HEADER_LEN..hl],
            payload: &b[hl..],
        })
    }

    /// Header, options and payload.
    pub fn buffer_len(&self) -> usize {
        MIN_HEADER_LEN + self.options.len() + self.payload.len()
    }

    /// Writes the whole segment with its checksum into `buf`.
    pub fn emit(&self, buf: &mut [u8], src: Ipv4Addr, dst: Ipv4Addr) -> Result<()> {
        if self.options.len() & 3 != 0 || self.options.len() > MAX_OPTIONS_LEN {
            return Err(WireError::OutOfRange("TCP options length"));
        }
        let total = self.buffer_len();
        if total > usize::from(u16::MAX) {
            return Err(WireError::OutOfRange("TCP segment > 65535"));
        }
        if buf.len() < total {
            return Err(WireError::BufferTooSmall);
        }
        let mut s = TcpSegment::new_unchecked(&mut buf[..total]);
        s.set_src_port(self.src_port);
        s.set_dst_port(self.dst_port);
        s.set_seq(self.seq);
        s.set_ack(self.ack);
        s.set_header_len(MIN_HEADER_LEN + self.options.len())?;
        s.set_flags(self.flags);
        s.set_window(self.window);
        s.set_checksum(0);
        s.set_urgent(self.urgent);
        s.options_mut().copy_from_slice(self.options);
        s.payload_mut().copy_from_slice(self.payload);
        s.fill_checksum(src, dst);
        Ok(())
    }
}
