//! IPv4 (RFC 791).
//!
//! ```text
//!  0 ver(4)|IHL(4)   1 DSCP(6)|ECN(2)   2..4 total length
//!  4..6 identification                 6..8 flags(3: 0,DF,MF)|fragment offset(13, units of 8 B)
//!  8 TTL   9 protocol   10..12 header checksum
//! 12..16 source   16..20 destination   20..IHL*4 options
//! ```
//! The payload ends at `total length`, not at the end of the buffer, because
//! Ethernet pads short frames.

use std::net::Ipv4Addr;

use crate::checksum;
use crate::error::{Result, WireError};

/// Length of a header without options.
pub const MIN_HEADER_LEN: usize = 20;

/// IP protocol numbers this crate knows.
pub mod protocol {
    /// ICMP.
    pub const ICMP: u8 = 1;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
}

mod field {
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const LENGTH: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLG_OFF: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC: usize = 12;
    pub const DST: usize = 16;
}

/// A zero-copy view of an IPv4 packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps without checks; accessors may panic on a short buffer.
    pub fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wraps after checking version 4, IHL >= 5, that the header with its
    /// options fits, and that `header_len <= total_len <= buffer length`.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_checked_header(buffer)?;
        if usize::from(p.total_len()) > p.buffer.as_ref().len() {
            return Err(WireError::Truncated);
        }
        Ok(p)
    }

    /// Wraps a buffer that may hold only the first bytes of the packet (a
    /// switch parser's window, a truncated capture): checks version 4,
    /// IHL >= 5, that the header with its options fits, and that
    /// `header_len <= total_len`, but not that the whole packet is present.
    /// [`Ipv4Packet::payload`] then gives the part of the payload that is.
    pub fn new_checked_header(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        let len = p.buffer.as_ref().len();
        if len < MIN_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if p.version() != 4 {
            return Err(WireError::Malformed("IPv4 version is not 4"));
        }
        let hl = p.header_len();
        if hl < MIN_HEADER_LEN {
            return Err(WireError::Malformed("IPv4 IHL < 5"));
        }
        if hl > len {
            return Err(WireError::Truncated);
        }
        if usize::from(p.total_len()) < hl {
            return Err(WireError::Malformed("IPv4 total length < header length"));
        }
        Ok(p)
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

    /// Version, high nibble of byte 0.
    pub fn version(&self) -> u8 {
        self.b()[field::VER_IHL] >> 4
    }

    /// Header length in bytes: IHL (low nibble of byte 0) × 4.
    pub fn header_len(&self) -> usize {
        usize::from(self.b()[field::VER_IHL] & 0x0F) * 4
    }

    /// The whole byte 1 (DSCP << 2 | ECN), historically "type of service".
    pub fn tos(&self) -> u8 {
        self.b()[field::TOS]
    }

    /// DSCP, byte 1 bits 7..2.
    pub fn dscp(&self) -> u8 {
        self.tos() >> 2
    }

    /// ECN, byte 1 bits 1..0.
    pub fn ecn(&self) -> u8 {
        self.tos() & 0x03
    }

    /// Total length of header and payload.
    pub fn total_len(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        self.u16_at(field::IDENT)
    }

    /// Don't-fragment flag (byte 6 bit 6).
    pub fn dont_frag(&self) -> bool {
        self.b()[field::FLG_OFF] & 0x40 != 0
    }

    /// More-fragments flag (byte 6 bit 5).
    pub fn more_frags(&self) -> bool {
        self.b()[field::FLG_OFF] & 0x20 != 0
    }

    /// Fragment offset in units of 8 bytes (13 bits).
    pub fn frag_offset(&self) -> u16 {
        self.u16_at(field::FLG_OFF) & 0x1FFF
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.b()[field::TTL]
    }

    /// Upper-layer protocol number.
    pub fn protocol(&self) -> u8 {
        self.b()[field::PROTOCOL]
    }

    /// Header checksum as stored.
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        let b = self.b();
        Ipv4Addr::new(b[12], b[13], b[14], b[15])
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = self.b();
        Ipv4Addr::new(b[16], b[17], b[18], b[19])
    }

    /// Option bytes (empty when IHL = 5), passed through unparsed.
    pub fn options(&self) -> &[u8] {
        &self.b()[MIN_HEADER_LEN..self.header_len()]
    }

    /// The header bytes, options included.
    pub fn header(&self) -> &[u8] {
        &self.b()[..self.header_len()]
    }

    /// Payload: from the end of the options to `total_len` (or to the end
    /// of the buffer, for a view made with [`Ipv4Packet::new_checked_header`]).
    pub fn payload(&self) -> &[u8] {
        let end = usize::from(self.total_len()).min(self.b().len());
        &self.b()[self.header_len()..end]
    }

    /// Whether the header checksum is correct (the header sums to 0xFFFF).
    pub fn verify_checksum(&self) -> bool {
        checksum::fold(checksum::sum(self.header())) == 0xFFFF
    }

    /// The checksum the header should carry, whatever it carries now.
    pub fn compute_checksum(&self) -> u16 {
        let h = self.header();
        let acc = checksum::combine(
            checksum::sum(&h[..field::CHECKSUM]),
            checksum::sum(&h[field::CHECKSUM + 2..]),
        );
        !checksum::fold(acc)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    fn set_u16_at(&mut self, i: usize, v: u16) {
        self.bm()[i..i + 2].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets version 4 and the header length (multiple of 4, 20..=60).
    pub fn set_header_len(&mut self, len: usize) -> Result<()> {
        if !(MIN_HEADER_LEN..=60).contains(&len) || len & 3 != 0 {
            return Err(WireError::OutOfRange("IPv4 header length"));
        }
        self.bm()[field::VER_IHL] = 0x40 | (len / 4) as u8;
        Ok(())
    }

    /// Sets byte 1 (DSCP << 2 | ECN).
    pub fn set_tos(&mut self, v: u8) {
        self.bm()[field::TOS] = v;
    }

    /// Sets the total length.
    pub fn set_total_len(&mut self, v: u16) {
        self.set_u16_at(field::LENGTH, v);
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, v: u16) {
        self.set_u16_at(field::IDENT, v);
    }

    /// Sets DF, MF and the fragment offset (8-byte units, 13 bits).
    pub fn set_flags_frag(&mut self, dont_frag: bool, more_frags: bool, offset: u16) -> Result<()> {
        if offset > 0x1FFF {
            return Err(WireError::OutOfRange("IPv4 fragment offset"));
        }
        let v = u16::from(dont_frag) << 14 | u16::from(more_frags) << 13 | offset;
        self.set_u16_at(field::FLG_OFF, v);
        Ok(())
    }

    /// Sets the TTL.
    pub fn set_ttl(&mut self, v: u8) {
        self.bm()[field::TTL] = v;
    }

    /// Sets the protocol number.
    pub fn set_protocol(&mut self, v: u8) {
        self.bm()[field::PROTOCOL] = v;
    }

    /// Stores a checksum value as is.
    pub fn set_checksum(&mut self, v: u16) {
        self.set_u16_at(field::CHECKSUM, v);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.bm()[field::SRC..field::SRC + 4].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.bm()[field::DST..field::DST + 4].copy_from_slice(&a.octets());
    }

    /// Recomputes and stores the header checksum.
    pub fn fill_checksum(&mut self) {
        let c = self.compute_checksum();
        self.set_checksum(c);
    }

    /// Mutable payload (up to `total_len`).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (h, t) = (self.header_len(), usize::from(self.total_len()));
        let b = self.bm();
        let t = t.min(b.len());
        &mut b[h..t]
    }
}

/// The fields of an IPv4 header without options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Upper-layer protocol.
    pub protocol: u8,
    /// Payload length (total length minus header length).
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// DSCP << 2 | ECN.
    pub tos: u8,
    /// Identification.
    pub ident: u16,
    /// Don't-fragment flag.
    pub dont_frag: bool,
    /// More-fragments flag.
    pub more_frags: bool,
    /// Fragment offset in 8-byte units.
    pub frag_offset: u16,
}

impl Ipv4Repr {
    /// Reads a checked view, rejecting a bad header checksum. Options are
    /// skipped; `payload_len` excludes them.
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv4Packet<T>) -> Result<Self> {
        if !p.verify_checksum() {
            return Err(WireError::BadChecksum);
        }
        Ok(Ipv4Repr {
            src: p.src_addr(),
            dst: p.dst_addr(),
            protocol: p.protocol(),
            payload_len: p.payload().len(),
            ttl: p.ttl(),
            tos: p.tos(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
            more_frags: p.more_frags(),
            frag_offset: p.frag_offset(),
        })
    }

    /// Header length emitted: always 20 (no options).
    pub fn buffer_len(&self) -> usize {
        MIN_HEADER_LEN
    }

    /// Writes a 20-byte header with a correct checksum at the start of `buf`.
    /// The payload is not touched.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if buf.len() < MIN_HEADER_LEN {
            return Err(WireError::BufferTooSmall);
        }
        let total = u16::try_from(MIN_HEADER_LEN + self.payload_len)
            .map_err(|_| WireError::OutOfRange("IPv4 total length > 65535"))?;
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..MIN_HEADER_LEN]);
        p.set_header_len(MIN_HEADER_LEN)?;
        p.set_tos(self.tos);
        p.set_total_len(total);
        p.set_ident(self.ident);
        p.set_flags_frag(self.dont_frag, self.more_frags, self.frag_offset)?;
        p.set_ttl(self.ttl);
        p.set_protocol(self.protocol);
        p.set_src_addr(self.src);
        p.set_dst_addr(self.dst);
        p.fill_checksum();
        Ok(())
    }
}

#[cfg(test)]
mod window_tests {
    use super::*;

    #[test]
    fn a_header_window_parses_without_the_whole_packet() {
        let mut buf = vec![0u8; 1500];
        buf[0] = 0x45;
        buf[2..4].copy_from_slice(&1500u16.to_be_bytes());
        let window = &buf[..64];
        assert_eq!(
            Ipv4Packet::new_checked(window).err(),
            Some(WireError::Truncated)
        );
        let p = Ipv4Packet::new_checked_header(window).unwrap();
        assert_eq!(p.total_len(), 1500);
        assert_eq!(p.payload().len(), 44, "only what the window holds");
        assert!(Ipv4Packet::new_checked_header(&buf[..19]).is_err());
    }
}
