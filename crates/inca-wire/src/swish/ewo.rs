//! The SwiSh EWO body (specs/swish.md §4.3): eventual, write-optimised
//! replication. It follows the common header (proto 2) and carries
//! absolute cell values, so a receiver merges them idempotently.
//!
//! ```text
//! 0..2  var_id     2 merge_kind   3 nvals   4..8 index
//! 8..10 slot_base  10..12 reserved          12.. nvals × u32 values
//! ```
//!
//! Values per kind: LWW `[value, version]`; GCNT one slot (an UPDATE,
//! `slot_base` = the writer's slot) or N slots from `slot_base` (a SYNC);
//! PNCNT the P slots, then the Nn slots; GSET and MAX one word.
//! [`Body`] is the checked view (a known kind, `nvals` words present);
//! [`BodyRepr`] parses and emits.

use crate::error::{Result, WireError};

/// Bytes before the values.
pub const BODY_FIXED_LEN: usize = 12;
/// Most values one body carries [our choice]: a PN-counter SYNC of
/// 2 × N_max = 16 slots.
pub const MAX_VALS: usize = 16;

/// EWO message types (the common header's type byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MsgType {
    /// A write's new absolute values (eager or batched).
    Update = 0x01,
    /// An anti-entropy copy of one entry of every array.
    Sync = 0x02,
}

impl MsgType {
    /// The type from its byte.
    pub fn from_u8(v: u8) -> Result<Self> {
        match v {
            0x01 => Ok(MsgType::Update),
            0x02 => Ok(MsgType::Sync),
            _ => Err(WireError::Unsupported("unknown EWO message type")),
        }
    }
}

/// How a variable's cells merge (§3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum MergeKind {
    /// Last writer wins: {value, version = ts:24 ‖ rid:8}.
    Lww = 1,
    /// Grow-only counter: one slot per writer, element-wise max.
    Gcnt = 2,
    /// Counter up and down: two G-counters.
    Pncnt = 3,
    /// Grow-only set of 32 bits: OR.
    Gset = 4,
    /// Max register.
    Max = 5,
}

impl MergeKind {
    /// The kind from its byte.
    pub fn from_u8(v: u8) -> Result<Self> {
        Ok(match v {
            1 => MergeKind::Lww,
            2 => MergeKind::Gcnt,
            3 => MergeKind::Pncnt,
            4 => MergeKind::Gset,
            5 => MergeKind::Max,
            _ => return Err(WireError::Unsupported("unknown EWO merge kind")),
        })
    }
}

mod field {
    pub const VAR: usize = 0;
    pub const KIND: usize = 2;
    pub const NVALS: usize = 3;
    pub const INDEX: usize = 4;
    pub const SLOT_BASE: usize = 8;
    pub const RESERVED: usize = 10;
}

/// A checked view of an EWO body.
#[derive(Debug, Clone, Copy)]
pub struct Body<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Body<T> {
    /// Checks the fixed part, the kind, `nvals` ≤ [`MAX_VALS`] and that the
    /// values are present (bytes after them are ignored).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < BODY_FIXED_LEN {
            return Err(WireError::Truncated);
        }
        MergeKind::from_u8(b[field::KIND])?;
        let n = usize::from(b[field::NVALS]);
        if n > MAX_VALS {
            return Err(WireError::Malformed("EWO nvals beyond 16"));
        }
        if b.len() < BODY_FIXED_LEN + 4 * n {
            return Err(WireError::Truncated);
        }
        Ok(Body { buffer })
    }

    fn u16_at(&self, at: usize) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[at], b[at + 1]])
    }

    fn u32_at(&self, at: usize) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
    }

    /// The variable.
    pub fn var_id(&self) -> u16 {
        self.u16_at(field::VAR)
    }

    /// The merge kind (checked in `new_checked`).
    pub fn merge_kind(&self) -> MergeKind {
        MergeKind::from_u8(self.buffer.as_ref()[field::KIND]).unwrap_or(MergeKind::Lww)
    }

    /// How many values follow.
    pub fn nvals(&self) -> u8 {
        self.buffer.as_ref()[field::NVALS]
    }

    /// The entry.
    pub fn index(&self) -> u32 {
        self.u32_at(field::INDEX)
    }

    /// The first slot the values stand for (counters).
    pub fn slot_base(&self) -> u16 {
        self.u16_at(field::SLOT_BASE)
    }

    /// The reserved field (zero when emitted).
    pub fn reserved(&self) -> u16 {
        self.u16_at(field::RESERVED)
    }

    /// Value `i` (`i < nvals`; others read 0).
    pub fn value(&self, i: usize) -> u32 {
        if i >= usize::from(self.nvals()) {
            return 0;
        }
        self.u32_at(BODY_FIXED_LEN + 4 * i)
    }

    /// Bytes the body occupies.
    pub fn len(&self) -> usize {
        BODY_FIXED_LEN + 4 * usize::from(self.nvals())
    }

    /// Never empty (the fixed part is there); for clippy's `len` rule.
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Body<T> {
    /// Sets value `i` (`i < nvals`; others are ignored).
    pub fn set_value(&mut self, i: usize, v: u32) {
        if i < usize::from(self.nvals()) {
            let at = BODY_FIXED_LEN + 4 * i;
            self.buffer.as_mut()[at..at + 4].copy_from_slice(&v.to_be_bytes());
        }
    }

    /// Sets the entry.
    pub fn set_index(&mut self, v: u32) {
        self.buffer.as_mut()[field::INDEX..field::INDEX + 4].copy_from_slice(&v.to_be_bytes());
    }
}

/// An EWO body, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BodyRepr {
    /// The variable.
    pub var_id: u16,
    /// The merge kind.
    pub kind: MergeKind,
    /// The entry.
    pub index: u32,
    /// The first slot the values stand for.
    pub slot_base: u16,
    /// The values (at most [`MAX_VALS`]).
    pub values: Vec<u32>,
}

impl BodyRepr {
    /// Parses a body (bytes after the values are ignored).
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let b = Body::new_checked(buf)?;
        Ok(BodyRepr {
            var_id: b.var_id(),
            kind: b.merge_kind(),
            index: b.index(),
            slot_base: b.slot_base(),
            values: (0..usize::from(b.nvals())).map(|i| b.value(i)).collect(),
        })
    }

    /// Bytes [`BodyRepr::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        BODY_FIXED_LEN + 4 * self.values.len()
    }

    /// Writes the body at the start of `out`.
    pub fn emit(&self, out: &mut [u8]) -> Result<()> {
        if self.values.len() > MAX_VALS {
            return Err(WireError::OutOfRange("EWO nvals beyond 16"));
        }
        let out = out
            .get_mut(..self.buffer_len())
            .ok_or(WireError::BufferTooSmall)?;
        out[field::VAR..field::VAR + 2].copy_from_slice(&self.var_id.to_be_bytes());
        out[field::KIND] = self.kind as u8;
        out[field::NVALS] = self.values.len() as u8;
        out[field::INDEX..field::INDEX + 4].copy_from_slice(&self.index.to_be_bytes());
        out[field::SLOT_BASE..field::SLOT_BASE + 2].copy_from_slice(&self.slot_base.to_be_bytes());
        out[field::RESERVED..field::RESERVED + 2].copy_from_slice(&[0, 0]);
        for (i, v) in self.values.iter().enumerate() {
            let at = BODY_FIXED_LEN + 4 * i;
            out[at..at + 4].copy_from_slice(&v.to_be_bytes());
        }
        Ok(())
    }

    /// The body as bytes.
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        let mut v = vec![0; self.buffer_len()];
        self.emit(&mut v)?;
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_round_trips_and_refuses_garbage() {
        let repr = BodyRepr {
            var_id: 0x0102,
            kind: MergeKind::Pncnt,
            index: 0xdead_beef,
            slot_base: 3,
            values: vec![1, 2, 0xffff_ffff, 4],
        };
        let bytes = repr.to_vec().unwrap();
        assert_eq!(bytes.len(), 12 + 16);
        assert_eq!(&bytes[..4], &[0x01, 0x02, 3, 4]);
        assert_eq!(BodyRepr::parse(&bytes).unwrap(), repr);
        assert_eq!(BodyRepr::parse(&bytes[..27]), Err(WireError::Truncated));
        let mut bad = bytes.clone();
        bad[2] = 9;
        assert!(BodyRepr::parse(&bad).is_err());
        bad[2] = 1;
        bad[3] = 17;
        assert!(BodyRepr::parse(&bad).is_err());
        let too_many = BodyRepr {
            values: vec![0; 17],
            ..repr
        };
        assert!(too_many.to_vec().is_err());
        assert_eq!(MsgType::from_u8(2), Ok(MsgType::Sync));
        assert!(MsgType::from_u8(3).is_err());
    }
}
