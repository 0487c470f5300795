//! The NetCache request header of ExoPlane's leaf scenario (specs/exoplane.md
//! §7, [our choice] there): the start of a UDP payload to or from port
//! [`PORT`].
//!
//! ```text
//! op 8 | seq 32 | key 128 | value (0..=128 bytes, the rest of the payload)
//! ```
//!
//! `op` ([`Op`], [our choice]: the codes of inca-apps' KV header) is READ
//! or WRITE from a client, REPLY (to a READ) or ACK (to a WRITE) from the
//! storage server or a switch that answers; `seq` is the client's request
//! number, echoed; the value field runs to the end of the datagram (its
//! length is the UDP length minus 8 minus [`HEADER_LEN`]). There is no
//! status field: a cache answers only hits, so an answer carries a value.
//!
//! [`NetCacheHeader`] is the checked view (a known op, at most
//! [`MAX_VALUE`] value bytes), with setters; [`NetCacheRepr`] parses and
//! emits.

use crate::error::{Result, WireError};

/// UDP port of the protocol, both ends [our choice]: a cache classifies
/// answers by destination port, so clients send from it too.
pub const PORT: u16 = 50_000;
/// Bytes before the value: op, seq, key.
pub const HEADER_LEN: usize = 21;
/// Bytes of the key.
pub const KEY_LEN: usize = 16;
/// Most value bytes.
pub const MAX_VALUE: usize = 128;

mod field {
    pub const OP: usize = 0;
    pub const SEQ: usize = 1;
    pub const KEY: usize = 5;
    pub const VALUE: usize = 21;
}

/// The header's `op`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Op {
    /// Client: read the key's value.
    Read = 1,
    /// Client: write the value to the key.
    Write = 2,
    /// Answer to a READ, carrying the value.
    Reply = 3,
    /// Answer to a WRITE, carrying the value written.
    Ack = 4,
}

impl Op {
    /// Every op, in code order.
    pub const ALL: [Op; 4] = [Op::Read, Op::Write, Op::Reply, Op::Ack];

    /// Decodes an `op` byte.
    pub fn from_u8(v: u8) -> Result<Self> {
        Ok(match v {
            1 => Op::Read,
            2 => Op::Write,
            3 => Op::Reply,
            4 => Op::Ack,
            _ => return Err(WireError::Unsupported("unknown NetCache op")),
        })
    }

    /// Whether a client sends it (READ, WRITE) rather than an answerer.
    pub fn is_request(self) -> bool {
        matches!(self, Op::Read | Op::Write)
    }
}

/// A checked view of a NetCache header at the start of `buffer` (a UDP
/// payload: the value is everything after the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetCacheHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> NetCacheHeader<T> {
    /// Wraps `buffer` after checking its length and op, so no accessor can
    /// fail.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if b.len() > HEADER_LEN + MAX_VALUE {
            return Err(WireError::Malformed("NetCache value over 128 bytes"));
        }
        Op::from_u8(b[field::OP])?;
        Ok(NetCacheHeader { buffer })
    }

    /// The op.
    pub fn op(&self) -> Op {
        // Checked in `new_checked`; Read is never reached.
        Op::from_u8(self.buffer.as_ref()[field::OP]).unwrap_or(Op::Read)
    }

    /// The request number.
    pub fn seq(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([b[1], b[2], b[3], b[4]])
    }

    /// The key.
    pub fn key(&self) -> [u8; KEY_LEN] {
        let mut k = [0u8; KEY_LEN];
        k.copy_from_slice(&self.buffer.as_ref()[field::KEY..field::VALUE]);
        k
    }

    /// The value bytes (possibly none).
    pub fn value(&self) -> &[u8] {
        &self.buffer.as_ref()[field::VALUE..]
    }

    /// The whole header and value.
    pub fn into_inner(self) -> T {
        self.buffer
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> NetCacheHeader<T> {
    /// Sets the op.
    pub fn set_op(&mut self, op: Op) {
        self.buffer.as_mut()[field::OP] = op as u8;
    }

    /// Sets the request number.
    pub fn set_seq(&mut self, seq: u32) {
        self.buffer.as_mut()[field::SEQ..field::KEY].copy_from_slice(&seq.to_be_bytes());
    }

    /// Sets the key.
    pub fn set_key(&mut self, key: &[u8; KEY_LEN]) {
        self.buffer.as_mut()[field::KEY..field::VALUE].copy_from_slice(key);
    }

    /// The value bytes, to write in place (the length is the datagram's).
    pub fn value_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::VALUE..]
    }
}

/// The fields of a NetCache header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetCacheRepr {
    /// The op.
    pub op: Op,
    /// The request number.
    pub seq: u32,
    /// The key.
    pub key: [u8; KEY_LEN],
    /// The value (at most [`MAX_VALUE`] bytes).
    pub value: Vec<u8>,
}

impl NetCacheRepr {
    /// Reads a whole UDP payload as a header and its value.
    pub fn parse(payload: &[u8]) -> Result<Self> {
        let h = NetCacheHeader::new_checked(payload)?;
        Ok(NetCacheRepr {
            op: h.op(),
            seq: h.seq(),
            key: h.key(),
            value: h.value().to_vec(),
        })
    }

    /// The bytes needed to emit it.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.value.len()
    }

    /// Writes header and value to the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if self.value.len() > MAX_VALUE {
            return Err(WireError::OutOfRange("NetCache value (128 bytes)"));
        }
        let b = buf
            .get_mut(..self.buffer_len())
            .ok_or(WireError::BufferTooSmall)?;
        b[field::OP] = self.op as u8;
        b[field::SEQ..field::KEY].copy_from_slice(&self.seq.to_be_bytes());
        b[field::KEY..field::VALUE].copy_from_slice(&self.key);
        b[field::VALUE..].copy_from_slice(&self.value);
        Ok(())
    }

    /// The header and value as bytes (a UDP payload).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut b = vec![0u8; self.buffer_len()];
        self.emit(&mut b)?;
        Ok(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repr(value: usize) -> NetCacheRepr {
        NetCacheRepr {
            op: Op::Write,
            seq: 0x0102_0304,
            key: [0xAA; KEY_LEN],
            value: (0..value as u8).collect(),
        }
    }

    #[test]
    fn layout_and_round_trip() {
        let r = repr(3);
        let b = r.to_bytes().unwrap();
        assert_eq!(b.len(), 24);
        assert_eq!(&b[..5], &[2, 1, 2, 3, 4]);
        assert_eq!(&b[5..21], &[0xAA; 16]);
        assert_eq!(&b[21..], &[0, 1, 2]);
        assert_eq!(NetCacheRepr::parse(&b).unwrap(), r);
        let mut h = NetCacheHeader::new_checked(b).unwrap();
        h.set_op(Op::Ack);
        h.set_seq(9);
        h.set_key(&[1; KEY_LEN]);
        h.value_mut()[0] = 7;
        let b = h.into_inner();
        let p = NetCacheRepr::parse(&b).unwrap();
        assert_eq!((p.op, p.seq, p.key, p.value[0]), (Op::Ack, 9, [1; 16], 7));
        // No value at all is a header.
        assert!(NetCacheRepr::parse(&repr(0).to_bytes().unwrap()).is_ok());
    }

    #[test]
    fn bad_input_is_refused() {
        let b = repr(MAX_VALUE).to_bytes().unwrap();
        assert!(NetCacheRepr::parse(&b).is_ok());
        let mut long = b.clone();
        long.push(0);
        assert!(matches!(
            NetCacheRepr::parse(&long),
            Err(WireError::Malformed(_))
        ));
        assert_eq!(
            NetCacheRepr::parse(&b[..HEADER_LEN - 1]),
            Err(WireError::Truncated)
        );
        let mut bad = b;
        for op in [0u8, 5, 255] {
            bad[0] = op;
            assert!(matches!(
                NetCacheRepr::parse(&bad),
                Err(WireError::Unsupported(_))
            ));
        }
        assert_eq!(
            repr(MAX_VALUE + 1).to_bytes(),
            Err(WireError::OutOfRange("NetCache value (128 bytes)"))
        );
        assert_eq!(repr(4).emit(&mut [0u8; 24]), Err(WireError::BufferTooSmall));
        assert!(Op::ALL.iter().all(|&o| Op::from_u8(o as u8) == Ok(o)));
    }
}
