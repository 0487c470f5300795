//! The MERGE / MERGE_ACK body (specs/exoplane.md §4.3), after a shim of
//! type MERGE or MERGE_ACK: one register entry per packet, since a
//! pipeline reaches each register array once per pass.
//!
//! ```text
//! obj_id 16 | op 8 | width 8 | slot 32 | round 64 | delta 64   (24 bytes)
//! ```
//!
//! `op` is 1 ADD mod 2^width, 2 OR, 3 MAX; `width` is 8, 16, 32 or 64.
//! [`MergeOp::apply`] is what a register action computes for a MERGE:
//! `reg ⊕ delta` at the declared width (the definition of the op codes;
//! the synchronisation algebra around it, with inverses and history, is
//! the sync module's).

use crate::error::{Result, WireError};

/// Length of the body.
pub const MERGE_LEN: usize = 24;

/// The merge operator of a MERGE (§4.3, §5.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum MergeOp {
    /// Addition modulo 2^width (counters, sketch rows).
    Add = 1,
    /// Bitwise OR (Bloom filters).
    Or = 2,
    /// Maximum (unsigned).
    Max = 3,
}

impl MergeOp {
    /// Every operator, in code order.
    pub const ALL: [MergeOp; 3] = [MergeOp::Add, MergeOp::Or, MergeOp::Max];

    /// Decodes an `op` byte.
    pub fn from_u8(v: u8) -> Result<Self> {
        Ok(match v {
            1 => MergeOp::Add,
            2 => MergeOp::Or,
            3 => MergeOp::Max,
            _ => return Err(WireError::Unsupported("unknown merge op")),
        })
    }

    /// `a ⊕ b` at `width` bits (both truncated to the width first).
    /// `width` must be one of [`WIDTHS`]; any other is treated as 64.
    pub fn apply(self, width: u8, a: u64, b: u64) -> u64 {
        let mask = width_mask(width);
        let (a, b) = (a & mask, b & mask);
        match self {
            MergeOp::Add => a.wrapping_add(b) & mask,
            MergeOp::Or => a | b,
            MergeOp::Max => a.max(b),
        }
    }
}

/// The widths a MERGE may name.
pub const WIDTHS: [u8; 4] = [8, 16, 32, 64];

fn width_mask(width: u8) -> u64 {
    match width {
        8 => 0xFF,
        16 => 0xFFFF,
        32 => 0xFFFF_FFFF,
        _ => u64::MAX,
    }
}

/// The fields of a MERGE or MERGE_ACK body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MergeRepr {
    /// The register object (the app's object id).
    pub obj_id: u16,
    /// The operator.
    pub op: MergeOp,
    /// The register's width in bits.
    pub width: u8,
    /// The register index.
    pub slot: u32,
    /// The synchronisation round the delta belongs to.
    pub round: u64,
    /// The value folded in.
    pub delta: u64,
}

impl MergeRepr {
    /// Reads a body at the start of `buf`: an unknown op, a width not in
    /// [`WIDTHS`] or a delta wider than its width is refused (what parses
    /// emits again).
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let b = buf.get(..MERGE_LEN).ok_or(WireError::Truncated)?;
        let op = MergeOp::from_u8(b[2])?;
        let width = b[3];
        if !WIDTHS.contains(&width) {
            return Err(WireError::Unsupported("merge width (8, 16, 32 or 64)"));
        }
        let u64_at = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_be_bytes(w)
        };
        let delta = u64_at(16);
        if delta & !width_mask(width) != 0 {
            return Err(WireError::Malformed("merge delta wider than its width"));
        }
        Ok(MergeRepr {
            obj_id: u16::from_be_bytes([b[0], b[1]]),
            op,
            width,
            slot: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            round: u64_at(8),
            delta,
        })
    }

    /// Writes the body to the start of `buf`. A width outside [`WIDTHS`]
    /// or a delta wider than the width is refused.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if !WIDTHS.contains(&self.width) {
            return Err(WireError::OutOfRange("merge width (8, 16, 32 or 64)"));
        }
        if self.delta & !width_mask(self.width) != 0 {
            return Err(WireError::OutOfRange("merge delta wider than its width"));
        }
        let b = buf.get_mut(..MERGE_LEN).ok_or(WireError::BufferTooSmall)?;
        b[0..2].copy_from_slice(&self.obj_id.to_be_bytes());
        b[2] = self.op as u8;
        b[3] = self.width;
        b[4..8].copy_from_slice(&self.slot.to_be_bytes());
        b[8..16].copy_from_slice(&self.round.to_be_bytes());
        b[16..24].copy_from_slice(&self.delta.to_be_bytes());
        Ok(())
    }

    /// The bytes needed to emit the body.
    pub const fn buffer_len(&self) -> usize {
        MERGE_LEN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_round_trip() {
        let r = MergeRepr {
            obj_id: 0x0102,
            op: MergeOp::Max,
            width: 32,
            slot: 0x0A0B0C0D,
            round: 7,
            delta: 0xFFFF_FFFF,
        };
        let mut b = [0u8; MERGE_LEN];
        r.emit(&mut b).unwrap();
        assert_eq!(&b[..8], &[1, 2, 3, 32, 0x0A, 0x0B, 0x0C, 0x0D]);
        assert_eq!(&b[8..16], &7u64.to_be_bytes());
        assert_eq!(MergeRepr::parse(&b).unwrap(), r);
        assert_eq!(MergeRepr::parse(&b[..23]), Err(WireError::Truncated));
        b[3] = 12;
        assert!(MergeRepr::parse(&b).is_err());
        b[3] = 32;
        b[2] = 4;
        assert!(MergeRepr::parse(&b).is_err());
        let wide = MergeRepr {
            delta: 1 << 32,
            ..r
        };
        assert!(matches!(wide.emit(&mut b), Err(WireError::OutOfRange(_))));
        // Found by the fuzz target: a wide delta is refused on parse too.
        r.emit(&mut b).unwrap();
        b[16..24].copy_from_slice(&(1u64 << 32).to_be_bytes());
        assert!(matches!(MergeRepr::parse(&b), Err(WireError::Malformed(_))));
    }

    #[test]
    fn ops_at_their_width() {
        assert_eq!(MergeOp::Add.apply(8, 250, 10), 4);
        assert_eq!(MergeOp::Add.apply(64, u64::MAX, 2), 1);
        assert_eq!(MergeOp::Or.apply(16, 0x0F0F, 0xF000), 0xFF0F);
        assert_eq!(MergeOp::Max.apply(32, 3, 9), 9);
        assert_eq!(MergeOp::Max.apply(8, 0x1FF, 3), 0xFF);
    }
}
