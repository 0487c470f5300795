//! SDW bodies (specs/swish.md §4.4): what follows the common header in
//! strong-delayed-writes traffic between replicas of one collection.
//!
//! ```text
//! 0  win:u32     4  col:u32     8  ncols:u32
//! 12 coll_id:u16 14 nrows:u8    15 reserved:u8
//! 16 vals[3]:u32 (DATA only; 12 bytes)
//! ```
//!
//! [`Body`] is the checked view (16 bytes at least; a DATA body 28, and
//! nrows ≤ 3); [`BodyRepr`] parses and emits; [`MsgType`] is the common
//! header's type byte for SDW. `win` compares modulo 2^32 ([`win_lt`]).

use crate::error::{Result, WireError};

/// Length of the fixed body.
pub const BODY_LEN: usize = 16;
/// Length of the DATA payload: three u32 cells.
pub const PAYLOAD_LEN: usize = 12;
/// Cells a packet carries at most (the per-packet memory-access limit, §2).
pub const MAX_ROWS: u8 = 3;

/// SDW's type codes (§4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MsgType {
    /// One column of a window's delta; LAST on the final column.
    Data = 0x01,
    /// A receiver has all of the sender's columns; col = ncols − 1.
    Ack = 0x02,
    /// The sender has reached window `win`.
    Ready = 0x03,
}

impl MsgType {
    /// Decodes the type byte.
    pub fn from_u8(v: u8) -> Result<Self> {
        Ok(match v {
            0x01 => MsgType::Data,
            0x02 => MsgType::Ack,
            0x03 => MsgType::Ready,
            _ => return Err(WireError::Unsupported("unknown SDW type")),
        })
    }

    /// Bytes of body a message of this type has.
    pub fn body_len(self) -> usize {
        match self {
            MsgType::Data => BODY_LEN + PAYLOAD_LEN,
            MsgType::Ack | MsgType::Ready => BODY_LEN,
        }
    }
}

/// `a < b` in 32-bit serial arithmetic (RFC 1982): window numbers wrap.
pub fn win_lt(a: u32, b: u32) -> bool {
    a != b && b.wrapping_sub(a) < 0x8000_0000
}

mod field {
    pub const WIN: usize = 0;
    pub const COL: usize = 4;
    pub const NCOLS: usize = 8;
    pub const COLL: usize = 12;
    pub const NROWS: usize = 14;
    pub const RESERVED: usize = 15;
    pub const VALS: usize = 16;
}

/// A checked view of an SDW body (the bytes after the common header).
#[derive(Debug, Clone, Copy)]
pub struct Body<T: AsRef<[u8]>> {
    buffer: T,
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl<T: AsRef<[u8]>> Body<T> {
    /// Wraps `buffer` for a message of type `ty`: checks it holds the body
    /// (and the payload for DATA) and that nrows ≤ 3.
    pub fn new_checked(buffer: T, ty: MsgType) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < ty.body_len() {
            return Err(WireError::Truncated);
        }
        if b[field::NROWS] > MAX_ROWS {
            return Err(WireError::Malformed("SDW nrows above 3"));
        }
        Ok(Body { buffer })
    }

    /// The window.
    pub fn win(&self) -> u32 {
        be32(self.buffer.as_ref(), field::WIN)
    }
    /// The column (rowgroup·C + c for R > 3).
    pub fn col(&self) -> u32 {
        be32(self.buffer.as_ref(), field::COL)
    }
    /// Columns the sender sends this window.
    pub fn ncols(&self) -> u32 {
        be32(self.buffer.as_ref(), field::NCOLS)
    }
    /// The collection.
    pub fn coll_id(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::COLL], b[field::COLL + 1]])
    }
    /// Rows carried (≤ 3).
    pub fn nrows(&self) -> u8 {
        self.buffer.as_ref()[field::NROWS]
    }
    /// The reserved byte (sent as 0, ignored).
    pub fn reserved(&self) -> u8 {
        self.buffer.as_ref()[field::RESERVED]
    }
    /// Cell `i` (< 3) of a DATA payload; 0 if the buffer has no payload.
    pub fn val(&self, i: usize) -> u32 {
        let b = self.buffer.as_ref();
        let at = field::VALS + 4 * i;
        if i >= usize::from(MAX_ROWS) || b.len() < at + 4 {
            return 0;
        }
        be32(b, at)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Body<T> {
    /// Sets the window.
    pub fn set_win(&mut self, v: u32) {
        self.buffer.as_mut()[field::WIN..field::WIN + 4].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the column.
    pub fn set_col(&mut self, v: u32) {
        self.buffer.as_mut()[field::COL..field::COL + 4].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets ncols.
    pub fn set_ncols(&mut self, v: u32) {
        self.buffer.as_mut()[field::NCOLS..field::NCOLS + 4].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets cell `i` (< 3) if the buffer has room for it.
    pub fn set_val(&mut self, i: usize, v: u32) {
        let at = field::VALS + 4 * i;
        let b = self.buffer.as_mut();
        if i < usize::from(MAX_ROWS) && b.len() >= at + 4 {
            b[at..at + 4].copy_from_slice(&v.to_be_bytes());
        }
    }
}

/// An SDW body's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BodyRepr {
    /// The message type (from the common header).
    pub msg_type: MsgType,
    /// Window.
    pub win: u32,
    /// Column.
    pub col: u32,
    /// Columns the sender sends this window.
    pub ncols: u32,
    /// Collection.
    pub coll_id: u16,
    /// Rows carried (≤ 3).
    pub nrows: u8,
    /// DATA cells (zero for ACK and READY).
    pub vals: [u32; 3],
}

impl BodyRepr {
    /// Parses a body of type `ty`.
    pub fn parse(body: &[u8], ty: MsgType) -> Result<Self> {
        let b = Body::new_checked(body, ty)?;
        let vals = if ty == MsgType::Data {
            [b.val(0), b.val(1), b.val(2)]
        } else {
            [0; 3]
        };
        Ok(BodyRepr {
            msg_type: ty,
            win: b.win(),
            col: b.col(),
            ncols: b.ncols(),
            coll_id: b.coll_id(),
            nrows: b.nrows(),
            vals,
        })
    }

    /// Bytes [`BodyRepr::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        self.msg_type.body_len()
    }

    /// Writes the body into the start of `out` (reserved byte 0).
    pub fn emit(&self, out: &mut [u8]) -> Result<()> {
        if self.nrows > MAX_ROWS {
            return Err(WireError::Malformed("SDW nrows above 3"));
        }
        let out = out
            .get_mut(..self.buffer_len())
            .ok_or(WireError::BufferTooSmall)?;
        out[field::WIN..field::WIN + 4].copy_from_slice(&self.win.to_be_bytes());
        out[field::COL..field::COL + 4].copy_from_slice(&self.col.to_be_bytes());
        out[field::NCOLS..field::NCOLS + 4].copy_from_slice(&self.ncols.to_be_bytes());
        out[field::COLL..field::COLL + 2].copy_from_slice(&self.coll_id.to_be_bytes());
        out[field::NROWS] = self.nrows;
        out[field::RESERVED] = 0;
        if self.msg_type == MsgType::Data {
            for (i, v) in self.vals.iter().enumerate() {
                let at = field::VALS + 4 * i;
                out[at..at + 4].copy_from_slice(&v.to_be_bytes());
            }
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
    fn data_round_trips_and_limits_hold() {
        let r = BodyRepr {
            msg_type: MsgType::Data,
            win: 0xFFFF_FFFF,
            col: 7,
            ncols: 65536,
            coll_id: 0x0102,
            nrows: 3,
            vals: [1, 2, 0xDEAD_BEEF],
        };
        let b = r.to_vec().unwrap();
        assert_eq!(b.len(), 28);
        assert_eq!(&b[12..16], &[1, 2, 3, 0]);
        assert_eq!(BodyRepr::parse(&b, MsgType::Data).unwrap(), r);
        assert_eq!(
            BodyRepr::parse(&b[..27], MsgType::Data),
            Err(WireError::Truncated)
        );
        // An ACK needs only the 16-byte body.
        let a = BodyRepr::parse(&b[..16], MsgType::Ack).unwrap();
        assert_eq!((a.win, a.vals), (0xFFFF_FFFF, [0; 3]));
        let mut bad = b.clone();
        bad[14] = 4;
        assert!(BodyRepr::parse(&bad, MsgType::Data).is_err());
        assert!(BodyRepr { nrows: 4, ..r }.to_vec().is_err());
        assert!(MsgType::from_u8(4).is_err());
        // A DATA frame is 14 + 20 + 8 + 8 + 28 = 78 bytes (§4.4).
        assert_eq!(14 + 20 + 8 + crate::swish::HEADER_LEN + b.len(), 78);
    }

    #[test]
    fn windows_compare_modulo_2_pow_32() {
        assert!(win_lt(0xFFFF_FFFF, 0));
        assert!(win_lt(1, 2));
        assert!(!win_lt(2, 2));
        assert!(!win_lt(0, 0xFFFF_FFFF));
    }
}
