//! The application operation an EWO replica serves [our choice]: a UDP
//! datagram to port [`APP_PORT`] asking for one local read or write of one
//! entry of one variable; the replica answers it in place (addresses
//! swapped, result filled in) out of the port it came in on. Tests and the
//! rig record these answers: they are the reads properties E3 and E4 judge.
//!
//! ```text
//! 0 op   1 status   2..4 var_id   4..8 index   8..12 arg
//! 12..16 req_id     16..20 result (value)      20..24 result2 (LWW version)
//! ```

/// UDP destination port of application operations [our choice].
pub const APP_PORT: u16 = 47001;
/// Bytes of an operation.
pub const OP_LEN: usize = 24;

/// What an operation asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Op {
    /// LWW: set to `arg`; G-set: OR `arg`; max register: max with `arg`.
    Write = 1,
    /// Counters: add `arg` to this replica's slot (P for a PN-counter).
    Inc = 2,
    /// PN-counter: add `arg` to this replica's Nn slot.
    Dec = 3,
    /// Read the entry.
    Read = 4,
}

impl Op {
    fn from_u8(v: u8) -> Option<Op> {
        Some(match v {
            1 => Op::Write,
            2 => Op::Inc,
            3 => Op::Dec,
            4 => Op::Read,
            _ => return None,
        })
    }
}

/// How the replica answered.
pub mod status {
    /// Done; the result fields hold the entry after the operation.
    pub const OK: u8 = 0;
    /// The replica is not serving yet (a joiner).
    pub const NOT_SERVING: u8 = 1;
    /// No such variable or entry, or an operation its kind does not have.
    pub const REFUSED: u8 = 2;
    /// Set by the sender: not answered yet.
    pub const REQUEST: u8 = 0xFF;
}

/// An operation or its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AppOp {
    /// What it asks.
    pub op: Op,
    /// [`status`]: `REQUEST` on the way in.
    pub status: u8,
    /// The variable.
    pub var_id: u16,
    /// The entry.
    pub index: u32,
    /// The operand.
    pub arg: u32,
    /// The sender's request id.
    pub req_id: u32,
    /// The entry's value after the operation (a counter's sum).
    pub result: u32,
    /// An LWW entry's version after the operation (else 0).
    pub result2: u32,
}

impl AppOp {
    /// A request.
    pub fn request(op: Op, var_id: u16, index: u32, arg: u32, req_id: u32) -> AppOp {
        AppOp {
            op,
            status: status::REQUEST,
            var_id,
            index,
            arg,
            req_id,
            result: 0,
            result2: 0,
        }
    }

    /// Parses the first [`OP_LEN`] bytes; `None` if short or an unknown op.
    pub fn parse(b: &[u8]) -> Option<AppOp> {
        let b = b.get(..OP_LEN)?;
        let w = |at: usize| u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        Some(AppOp {
            op: Op::from_u8(b[0])?,
            status: b[1],
            var_id: u16::from_be_bytes([b[2], b[3]]),
            index: w(4),
            arg: w(8),
            req_id: w(12),
            result: w(16),
            result2: w(20),
        })
    }

    /// The bytes.
    pub fn to_bytes(&self) -> [u8; OP_LEN] {
        let mut b = [0u8; OP_LEN];
        b[0] = self.op as u8;
        b[1] = self.status;
        b[2..4].copy_from_slice(&self.var_id.to_be_bytes());
        for (at, v) in [
            (4, self.index),
            (8, self.arg),
            (12, self.req_id),
            (16, self.result),
            (20, self.result2),
        ] {
            b[at..at + 4].copy_from_slice(&v.to_be_bytes());
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_round_trip_and_garbage_is_refused() {
        let mut a = AppOp::request(Op::Inc, 3, 7, 1, 99);
        a.result = 5;
        assert_eq!(AppOp::parse(&a.to_bytes()), Some(a));
        assert_eq!(AppOp::parse(&a.to_bytes()[..23]), None);
        let mut bad = a.to_bytes();
        bad[0] = 9;
        assert_eq!(AppOp::parse(&bad), None);
    }
}
