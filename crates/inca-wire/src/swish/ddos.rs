//! The DDoS detector's push digest (specs/swish.md §4.5, [our choice]
//! there): a baseline switch that finds a source suspicious sends the
//! controller one UDP datagram to port [`DIGEST_PORT`] whose payload is
//!
//! ```text
//! 0 src_ip:u32   4 local_est:u32   8 rid:u16   10 pad:u16
//! ```
//!
//! big-endian. [`Digest`] is the checked view, [`DigestRepr`] parses and
//! emits (the pad emits as zero).

use crate::error::{Result, WireError};

/// UDP destination port of a digest (§4.5).
pub const DIGEST_PORT: u16 = 47010;
/// Payload length.
pub const DIGEST_LEN: usize = 12;

/// A checked view of a digest payload.
#[derive(Debug, Clone, Copy)]
pub struct Digest<T: AsRef<[u8]>> {
    buf: T,
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl<T: AsRef<[u8]>> Digest<T> {
    /// Wraps `buf` if it holds a whole digest (extra bytes are ignored).
    pub fn new_checked(buf: T) -> Result<Self> {
        if buf.as_ref().len() < DIGEST_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Digest { buf })
    }

    /// The suspicious source.
    pub fn src_ip(&self) -> u32 {
        be32(self.buf.as_ref(), 0)
    }

    /// The reporting switch's estimate of its distinct destinations.
    pub fn local_est(&self) -> u32 {
        be32(self.buf.as_ref(), 4)
    }

    /// The reporting switch.
    pub fn rid(&self) -> u16 {
        let b = self.buf.as_ref();
        u16::from_be_bytes([b[8], b[9]])
    }

    /// The pad (zero when emitted; not checked).
    pub fn pad(&self) -> u16 {
        let b = self.buf.as_ref();
        u16::from_be_bytes([b[10], b[11]])
    }
}

/// A digest's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DigestRepr {
    /// The suspicious source.
    pub src_ip: u32,
    /// The reporting switch's estimate.
    pub local_est: u32,
    /// The reporting switch.
    pub rid: u16,
}

impl DigestRepr {
    /// Parses a digest payload.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let d = Digest::new_checked(buf)?;
        Ok(DigestRepr {
            src_ip: d.src_ip(),
            local_est: d.local_est(),
            rid: d.rid(),
        })
    }

    /// Writes the digest into the first [`DIGEST_LEN`] bytes of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let b = buf.get_mut(..DIGEST_LEN).ok_or(WireError::BufferTooSmall)?;
        b[0..4].copy_from_slice(&self.src_ip.to_be_bytes());
        b[4..8].copy_from_slice(&self.local_est.to_be_bytes());
        b[8..10].copy_from_slice(&self.rid.to_be_bytes());
        b[10..12].fill(0);
        Ok(())
    }

    /// The digest's bytes.
    pub fn to_bytes(&self) -> [u8; DIGEST_LEN] {
        let mut b = [0u8; DIGEST_LEN];
        // The array is exactly DIGEST_LEN long.
        let _ = self.emit(&mut b);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_round_trips_and_refuses_short_buffers() {
        let d = DigestRepr {
            src_ip: 0x0A01_0203,
            local_est: 502,
            rid: 2,
        };
        let b = d.to_bytes();
        assert_eq!(b[..4], [10, 1, 2, 3]);
        assert_eq!(DigestRepr::parse(&b), Ok(d));
        assert_eq!(DigestRepr::parse(&b[..11]), Err(WireError::Truncated));
        assert_eq!(d.emit(&mut [0u8; 4]), Err(WireError::BufferTooSmall));
    }
}
