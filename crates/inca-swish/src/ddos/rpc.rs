//! The controller ↔ switch-CPU RPCs the DDoS baselines use, in the §4.5
//! framing `{op:u8, len:u32, body}` (specs/swish.md §4.5; [our choice] of
//! the bodies, which the spec leaves open):
//!
//! - READ_REG (op 1): `tag:u32, array:u8, start:u32, count:u32` — array 0
//!   is the ring head, 1 the ring;
//! - TABLE_ADD (op 3): `tag:u32, table:u8, key:u32` — table 0 is the
//!   source block table (no action data);
//! - the answer (op 0x81): `tag:u32`, then the values read (u64 each; a
//!   TABLE_ADD's answer has none and says the entry is in).
//!
//! They travel on the simulator's management sessions, not as frames, so
//! they are here rather than in `inca_wire` (nothing parses them off a
//! wire); decoding refuses anything malformed.

/// READ_REG.
pub const OP_READ_REG: u8 = 1;
/// TABLE_ADD.
pub const OP_TABLE_ADD: u8 = 3;
/// The answer.
pub const OP_VALUES: u8 = 0x81;
/// READ_REG array: the ring head.
pub const ARR_HEAD: u8 = 0;
/// READ_REG array: the ring.
pub const ARR_RING: u8 = 1;

/// A request to a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Read the ring head.
    ReadHead {
        /// The controller's tag.
        tag: u32,
    },
    /// Read `count` ring entries from `first`.
    ReadRing {
        /// The controller's tag.
        tag: u32,
        /// First entry.
        first: u32,
        /// Entries.
        count: u32,
    },
    /// Add `src` to the block table.
    Block {
        /// The controller's tag.
        tag: u32,
        /// The source to block.
        src: u32,
    },
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)
        .map(|x| u32::from_be_bytes([x[0], x[1], x[2], x[3]]))
}

fn frame(op: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![op];
    v.extend_from_slice(&(body.len() as u32).to_be_bytes());
    v.extend_from_slice(body);
    v
}

/// `(op, body)` of a framed message whose length field fits.
fn unframe(b: &[u8]) -> Option<(u8, &[u8])> {
    let len = be32(b, 1)? as usize;
    let body = b.get(5..5usize.checked_add(len)?)?;
    Some((*b.first()?, body))
}

impl Request {
    /// The framed bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(13);
        match *self {
            Request::ReadHead { tag } => {
                b.extend_from_slice(&tag.to_be_bytes());
                b.push(ARR_HEAD);
                b.extend_from_slice(&0u32.to_be_bytes());
                b.extend_from_slice(&1u32.to_be_bytes());
                frame(OP_READ_REG, &b)
            }
            Request::ReadRing { tag, first, count } => {
                b.extend_from_slice(&tag.to_be_bytes());
                b.push(ARR_RING);
                b.extend_from_slice(&first.to_be_bytes());
                b.extend_from_slice(&count.to_be_bytes());
                frame(OP_READ_REG, &b)
            }
            Request::Block { tag, src } => {
                b.extend_from_slice(&tag.to_be_bytes());
                b.push(0);
                b.extend_from_slice(&src.to_be_bytes());
                frame(OP_TABLE_ADD, &b)
            }
        }
    }

    /// Decodes a request (None for anything malformed or unknown).
    pub fn decode(b: &[u8]) -> Option<Request> {
        let (op, body) = unframe(b)?;
        let tag = be32(body, 0)?;
        match (op, *body.get(4)?) {
            (OP_READ_REG, ARR_HEAD) => Some(Request::ReadHead { tag }),
            (OP_READ_REG, ARR_RING) => Some(Request::ReadRing {
                tag,
                first: be32(body, 5)?,
                count: be32(body, 9)?,
            }),
            (OP_TABLE_ADD, 0) => Some(Request::Block {
                tag,
                src: be32(body, 5)?,
            }),
            _ => None,
        }
    }
}

/// A switch's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The request's tag.
    pub tag: u32,
    /// The values read (pairs as `hi << 32 | lo`).
    pub values: Vec<u64>,
}

impl Reply {
    /// The framed bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = self.tag.to_be_bytes().to_vec();
        for v in &self.values {
            b.extend_from_slice(&v.to_be_bytes());
        }
        frame(OP_VALUES, &b)
    }

    /// Decodes an answer (None for anything malformed).
    pub fn decode(b: &[u8]) -> Option<Reply> {
        let (op, body) = unframe(b)?;
        if op != OP_VALUES || (body.len() < 4) || (body.len() - 4) % 8 != 0 {
            return None;
        }
        let values = body[4..]
            .chunks_exact(8)
            .map(|c| u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect();
        Some(Reply {
            tag: be32(body, 0)?,
            values,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_replies_round_trip_and_junk_is_refused() {
        for r in [
            Request::ReadHead { tag: 1 },
            Request::ReadRing {
                tag: 2,
                first: 65_000,
                count: 536,
            },
            Request::Block {
                tag: 3,
                src: 0x0A01_0001,
            },
        ] {
            let b = r.encode();
            assert_eq!(Request::decode(&b), Some(r));
            assert_eq!(Request::decode(&b[..b.len() - 1]), None);
        }
        let a = Reply {
            tag: 9,
            values: vec![1, u64::MAX],
        };
        assert_eq!(Reply::decode(&a.encode()), Some(a));
        assert_eq!(Reply::decode(&[OP_VALUES, 0xFF, 0xFF, 0xFF, 0xFF]), None);
        assert_eq!(Request::decode(&[]), None);
    }
}
