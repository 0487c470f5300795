//! The body codec: a bounds-checked reader and a writer of big-endian
//! fields, `Key`/`Val` (`len` 8 ‖ bytes) and item counts.
//!
//! The reader checks every count against the bytes left (count × smallest
//! item size) before the caller allocates for it, so a hostile count cannot
//! make a receiver reserve memory the frame does not carry.

use super::{ControlError, MAX_KEY_LEN};

/// A cursor over a body.
pub(super) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub(super) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(super) fn bytes(
        &mut self,
        field: &'static str,
        n: usize,
    ) -> Result<&'a [u8], ControlError> {
        if self.remaining() < n {
            return Err(ControlError::Short {
                field,
                need: n,
                have: self.remaining(),
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], ControlError> {
        let mut a = [0; N];
        a.copy_from_slice(self.bytes(field, N)?);
        Ok(a)
    }

    pub(super) fn u8(&mut self, field: &'static str) -> Result<u8, ControlError> {
        Ok(self.array::<1>(field)?[0])
    }

    pub(super) fn u16(&mut self, field: &'static str) -> Result<u16, ControlError> {
        Ok(u16::from_be_bytes(self.array(field)?))
    }

    pub(super) fn u32(&mut self, field: &'static str) -> Result<u32, ControlError> {
        Ok(u32::from_be_bytes(self.array(field)?))
    }

    pub(super) fn u64(&mut self, field: &'static str) -> Result<u64, ControlError> {
        Ok(u64::from_be_bytes(self.array(field)?))
    }

    /// A strict boolean: 0 or 1.
    pub(super) fn bool(&mut self, field: &'static str) -> Result<bool, ControlError> {
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(ControlError::BadValue { field, value }),
        }
    }

    /// `len` 8 ‖ bytes.
    pub(super) fn key(&mut self, field: &'static str) -> Result<Vec<u8>, ControlError> {
        let n = self.u8(field)?;
        Ok(self.bytes(field, usize::from(n))?.to_vec())
    }

    /// Checks that `count` items of at least `min_item` bytes fit in what is
    /// left, and returns the count as a usize for the caller's loop.
    pub(super) fn count(
        &self,
        field: &'static str,
        count: u64,
        min_item: usize,
    ) -> Result<usize, ControlError> {
        let fits = (self.remaining() / min_item.max(1)) as u64;
        if count > fits {
            return Err(ControlError::CountExceedsBody {
                field,
                count,
                min_item,
                remaining: self.remaining(),
            });
        }
        // count ≤ remaining bytes, which is a usize.
        Ok(count as usize)
    }

    /// Errors if the body has bytes after its last field.
    pub(super) fn finish(self) -> Result<(), ControlError> {
        if self.pos != self.buf.len() {
            return Err(ControlError::LengthMismatch {
                declared: self.buf.len(),
                actual: self.pos,
            });
        }
        Ok(())
    }
}

/// Appends big-endian fields to a body.
#[derive(Default)]
pub(super) struct Writer {
    pub(super) buf: Vec<u8>,
}

impl Writer {
    pub(super) fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    pub(super) fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    pub(super) fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    pub(super) fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    pub(super) fn bytes(&mut self, v: &[u8]) {
        self.buf.extend_from_slice(v);
    }

    /// `len` 8 ‖ bytes; refuses more than 255 bytes.
    pub(super) fn key(&mut self, field: &'static str, v: &[u8]) -> Result<(), ControlError> {
        if v.len() > MAX_KEY_LEN {
            return Err(ControlError::KeyTooLong {
                field,
                len: v.len(),
            });
        }
        self.u8(v.len() as u8);
        self.bytes(v);
        Ok(())
    }
}

/// A count that must fit `T` (u8, u16 or u32), or the encoder's error.
pub(super) fn count_as<T: TryFrom<usize>>(
    field: &'static str,
    n: usize,
) -> Result<T, ControlError> {
    T::try_from(n).map_err(|_| ControlError::TooManyItems { field, count: n })
}
