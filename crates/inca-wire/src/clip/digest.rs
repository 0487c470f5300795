//! The pin-overflow digest (specs/clip.md §4.4): the switch tells the
//! controller about a ⟨flow, server⟩ pair that record mode could not store
//! in `pin_cache`, so the controller pins it in `pin_table`.
//!
//! ```text
//! byte 0: type 0xC1    bytes 1-16: flow (FlowKey)
//! byte 17: server_id   bytes 18-19: grp_ver
//! ```
//!
//! 20 bytes, the type byte first [our choice: §4.4 gives the fields, the
//! type and their sizes, not the order or a framing]. The switch driver
//! delivers each digest as one message; bytes after the 20 are not the
//! digest's and are ignored.

use crate::clip::FlowKey;
use crate::error::{Result, WireError};

/// The digest type byte.
pub const DIGEST_TYPE: u8 = 0xC1;
/// Bytes of a digest, type byte included.
pub const DIGEST_LEN: usize = 20;

/// A pin-overflow digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PinOverflow {
    /// The flow that could not be recorded.
    pub flow: FlowKey,
    /// The server the switch sent it to.
    pub server_id: u8,
    /// The version of the group slot used.
    pub grp_ver: u16,
}

impl PinOverflow {
    /// Reads a digest at the start of `buf`: at least 20 bytes, type 0xC1.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let b = buf.get(..DIGEST_LEN).ok_or(WireError::Truncated)?;
        if b[0] != DIGEST_TYPE {
            return Err(WireError::Unsupported("not a CLIP pin-overflow digest"));
        }
        let mut flow = [0u8; 16];
        flow.copy_from_slice(&b[1..17]);
        Ok(PinOverflow {
            flow,
            server_id: b[17],
            grp_ver: u16::from_be_bytes([b[18], b[19]]),
        })
    }

    /// The 20 bytes of the digest.
    pub fn to_bytes(&self) -> [u8; DIGEST_LEN] {
        let mut b = [0u8; DIGEST_LEN];
        b[0] = DIGEST_TYPE;
        b[1..17].copy_from_slice(&self.flow);
        b[17] = self.server_id;
        b[18..20].copy_from_slice(&self.grp_ver.to_be_bytes());
        b
    }

    /// Writes the digest to the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let b = buf.get_mut(..DIGEST_LEN).ok_or(WireError::BufferTooSmall)?;
        b.copy_from_slice(&self.to_bytes());
        Ok(())
    }

    /// The bytes [`emit`](Self::emit) writes.
    pub const fn buffer_len(&self) -> usize {
        DIGEST_LEN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_layout_round_trips_and_refuses_garbage() {
        let d = PinOverflow {
            flow: core::array::from_fn(|i| 0x10 + i as u8),
            server_id: 5,
            grp_ver: 0x0203,
        };
        let b = d.to_bytes();
        assert_eq!(b[0], 0xC1);
        assert_eq!(b[1..17], d.flow);
        assert_eq!(b[17..], [5, 2, 3]);
        assert_eq!(PinOverflow::parse(&b), Ok(d));
        let mut long = b.to_vec();
        long.push(0xFF);
        assert_eq!(PinOverflow::parse(&long), Ok(d));
        assert_eq!(PinOverflow::parse(&b[..19]), Err(WireError::Truncated));
        let mut bad = b;
        bad[0] = 0xC2;
        assert!(PinOverflow::parse(&bad).is_err());
        let mut out = [0u8; 19];
        assert_eq!(d.emit(&mut out), Err(WireError::BufferTooSmall));
        assert_eq!(d.buffer_len(), 20);
    }
}
