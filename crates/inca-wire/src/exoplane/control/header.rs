//! The 16-byte control frame header, smoltcp style: a checked view over the
//! bytes and a repr to emit.
//!
//! ```text
//! 0  magic   (2)  0x4558
//! 2  version (1)  1
//! 3  type    (1)  MsgType
//! 4  length  (4)  body bytes after the header
//! 8  req_id  (8)  chosen by the requester; a reply echoes it
//! ```

use super::{ControlError, MsgType, HEADER_LEN, MAGIC, MAX_BODY_LEN, VERSION};

/// A checked view of a frame header. `new_checked` validates magic, version
/// and the body length bound; the type byte is read raw so a stream decoder
/// can skip a frame of an unknown type by its length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> FrameHeader<T> {
    /// Checks length, magic, version and `length ≤ MAX_BODY_LEN`, in that
    /// order (so a stream that lost sync reports its bad magic first).
    pub fn new_checked(buffer: T) -> Result<Self, ControlError> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(ControlError::Short {
                field: "header",
                need: HEADER_LEN,
                have: b.len(),
            });
        }
        let h = FrameHeader { buffer };
        if h.magic() != MAGIC {
            return Err(ControlError::BadMagic(h.magic()));
        }
        if h.version() != VERSION {
            return Err(ControlError::BadVersion(h.version()));
        }
        if h.body_len() > MAX_BODY_LEN {
            return Err(ControlError::FrameTooLong(h.body_len()));
        }
        Ok(h)
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// `magic`.
    pub fn magic(&self) -> u16 {
        u16::from_be_bytes([self.b()[0], self.b()[1]])
    }

    /// `version`.
    pub fn version(&self) -> u8 {
        self.b()[2]
    }

    /// The raw `type` byte.
    pub fn type_byte(&self) -> u8 {
        self.b()[3]
    }

    /// The decoded type.
    pub fn msg_type(&self) -> Result<MsgType, ControlError> {
        MsgType::from_type_byte(self.type_byte())
    }

    /// `length`: body bytes after the header.
    pub fn body_len(&self) -> usize {
        let b = self.b();
        u32::from_be_bytes([b[4], b[5], b[6], b[7]]) as usize
    }

    /// `req_id`.
    pub fn req_id(&self) -> u64 {
        let mut x = [0; 8];
        x.copy_from_slice(&self.b()[8..16]);
        u64::from_be_bytes(x)
    }

    /// Header plus body: the bytes this frame occupies on the stream.
    pub fn frame_len(&self) -> usize {
        HEADER_LEN + self.body_len()
    }
}

/// A frame header to emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderRepr {
    /// Message type.
    pub msg_type: MsgType,
    /// Body bytes (at most [`MAX_BODY_LEN`]).
    pub body_len: usize,
    /// Request id.
    pub req_id: u64,
}

impl HeaderRepr {
    /// Reads a checked view; fails only on an unknown type.
    pub fn parse<T: AsRef<[u8]>>(h: &FrameHeader<T>) -> Result<Self, ControlError> {
        Ok(HeaderRepr {
            msg_type: h.msg_type()?,
            body_len: h.body_len(),
            req_id: h.req_id(),
        })
    }

    /// Writes the 16 bytes.
    pub fn emit(&self) -> Result<[u8; HEADER_LEN], ControlError> {
        if self.body_len > MAX_BODY_LEN {
            return Err(ControlError::FrameTooLong(self.body_len));
        }
        let mut b = [0; HEADER_LEN];
        b[0..2].copy_from_slice(&MAGIC.to_be_bytes());
        b[2] = VERSION;
        b[3] = self.msg_type as u8;
        // MAX_BODY_LEN < 2^32, so the length fits its field.
        b[4..8].copy_from_slice(&(self.body_len as u32).to_be_bytes());
        b[8..16].copy_from_slice(&self.req_id.to_be_bytes());
        Ok(b)
    }
}
