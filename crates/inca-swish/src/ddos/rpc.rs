//! The controller ↔ switch-CPU RPCs the DDoS baselines use: the §4.5 RPC
//! of `inca_wire::swish::ctl` (one codec for every SwiSh controller), with
//! the baselines' names for the three requests they make:
//!
//! - READ_REG array [`ARR_HEAD`] (the ring head) or [`ARR_RING`] (the
//!   ring);
//! - TABLE_ADD table 0 (the source block table), key the source address;
//! - the answer, VALUES (a TABLE_ADD's has none and says the entry is in).

use inca_wire::swish::ctl::Rpc;

/// READ_REG array: the ring head.
pub const ARR_HEAD: u8 = 0;
/// READ_REG array: the ring.
pub const ARR_RING: u8 = 1;
/// TABLE_ADD table: the source block table.
pub const TABLE_BLOCK: u8 = 0;

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

impl Request {
    /// The framed bytes.
    pub fn encode(&self) -> Vec<u8> {
        let rpc = match *self {
            Request::ReadHead { tag } => Rpc::ReadReg {
                tag,
                array: ARR_HEAD,
                start: 0,
                count: 1,
            },
            Request::ReadRing { tag, first, count } => Rpc::ReadReg {
                tag,
                array: ARR_RING,
                start: first,
                count,
            },
            Request::Block { tag, src } => Rpc::TableAdd {
                tag,
                table: TABLE_BLOCK,
                key: src.to_be_bytes().to_vec(),
            },
        };
        rpc.to_vec().expect("a request's body is a few bytes")
    }

    /// Decodes a request (None for anything malformed or unknown).
    pub fn decode(b: &[u8]) -> Option<Request> {
        match Rpc::parse(b).ok()? {
            Rpc::ReadReg {
                tag,
                array: ARR_HEAD,
                ..
            } => Some(Request::ReadHead { tag }),
            Rpc::ReadReg {
                tag,
                array: ARR_RING,
                start,
                count,
            } => Some(Request::ReadRing {
                tag,
                first: start,
                count,
            }),
            Rpc::TableAdd {
                tag,
                table: TABLE_BLOCK,
                key,
            } => Some(Request::Block {
                tag,
                src: u32::from_be_bytes(key.try_into().ok()?),
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
        Rpc::Values {
            tag: self.tag,
            values: self.values.clone(),
        }
        .to_vec()
        .expect("answers stay under the session's message limit")
    }

    /// Decodes an answer (None for anything malformed).
    pub fn decode(b: &[u8]) -> Option<Reply> {
        match Rpc::parse(b).ok()? {
            Rpc::Values { tag, values } => Some(Reply { tag, values }),
            _ => None,
        }
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
        assert_eq!(Reply::decode(&[0x81, 0xFF, 0xFF, 0xFF, 0xFF]), None);
        assert_eq!(Request::decode(&[]), None);
    }
}
