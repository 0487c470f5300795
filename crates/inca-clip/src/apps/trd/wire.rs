//! TRD's params (spec §4.3, P = 28), bit-packed MSB first in declaration
//! order with inca-wire's `pack`/`unpack` and field widths:
//!
//! - request: `flow: FlowKey` (128), `tcp_flags: 8`, `seq: 32`,
//!   `seq_end: 32`, `payload_len: 16` — 27 bytes;
//! - response: `idx: 16`, `op: 8`, `retx: 8`, `init_end: 32`,
//!   `seq_end: 32` — 12 bytes.

use inca_wire::clip::shim::{self, params as widths};

use super::segment::Segment;
use crate::flow::FlowKey;

/// TRD's params region.
pub const PARAMS_LEN: usize = widths::TRD_P;
/// `idx` of a connection without a switch index (indices exhausted, or
/// not tracked): software-only detection (§7.2).
pub const NO_IDX: u16 = 0xFFFF;

/// What `post_processing` does to `max_end[idx]` (§7.2) [our choice of
/// codes: NONE 0, INIT 1, MAX_UPDATE 2; any other value reads as NONE].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Leave it.
    None = 0,
    /// `max_end[idx] := init_end` (a new connection on this index).
    Init = 1,
    /// `max_end[idx] := serial_max(max_end[idx], seq_end)`, never flagging.
    MaxUpdate = 2,
}

impl Op {
    /// The op of a wire value (unknown values are NONE: the switch leaves
    /// the register alone rather than guess).
    pub fn from_u8(v: u8) -> Op {
        match v {
            1 => Op::Init,
            2 => Op::MaxUpdate,
            _ => Op::None,
        }
    }
}

/// The request list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrdReq {
    /// The connection's key.
    pub flow: FlowKey,
    /// TCP flags.
    pub tcp_flags: u8,
    /// First sequence number.
    pub seq: u32,
    /// The number after the segment.
    pub seq_end: u32,
    /// Payload bytes.
    pub payload_len: u16,
}

impl TrdReq {
    /// The request of a segment.
    pub fn of(s: &Segment) -> TrdReq {
        TrdReq {
            flow: s.flow,
            tcp_flags: s.flags,
            seq: s.seq,
            seq_end: s.seq_end,
            payload_len: s.payload_len,
        }
    }

    /// Packs it into `out` (the whole params region, padding zeroed);
    /// false if `out` is too short.
    pub fn write(&self, out: &mut [u8]) -> bool {
        let [hi, lo] = widths::flow_halves(&self.flow.0);
        let fields = [
            hi,
            lo,
            (u64::from(self.tcp_flags), 8),
            (u64::from(self.seq), 32),
            (u64::from(self.seq_end), 32),
            (u64::from(self.payload_len), 16),
        ];
        shim::pack(&fields, out).is_ok()
    }

    /// Reads a params region of exactly [`PARAMS_LEN`] bytes.
    pub fn read(params: &[u8]) -> Option<TrdReq> {
        if params.len() != PARAMS_LEN {
            return None;
        }
        let v = shim::unpack(params, widths::TRD_REQ).ok()?;
        let [hi, lo, flags, seq, seq_end, len] = v.as_slice() else {
            return None;
        };
        Some(TrdReq {
            flow: FlowKey(widths::flow_of_halves(*hi, *lo)),
            tcp_flags: *flags as u8,
            seq: *seq as u32,
            seq_end: *seq_end as u32,
            payload_len: *len as u16,
        })
    }
}

/// The response list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrdRes {
    /// The connection's register index, [`NO_IDX`] if none.
    pub idx: u16,
    /// What to do to `max_end[idx]`.
    pub op: Op,
    /// The server judged the segment a retransmission.
    pub retx: bool,
    /// INIT's value.
    pub init_end: u32,
    /// MAX_UPDATE's value (the segment's `seq_end`).
    pub seq_end: u32,
}

impl TrdRes {
    /// Packs it over the params region from offset 0 (the rest zeroed);
    /// false if `out` is too short.
    pub fn write(&self, out: &mut [u8]) -> bool {
        let fields = [
            (u64::from(self.idx), 16),
            (self.op as u64, 8),
            (u64::from(self.retx), 8),
            (u64::from(self.init_end), 32),
            (u64::from(self.seq_end), 32),
        ];
        shim::pack(&fields, out).is_ok()
    }

    /// Reads a response from the first bytes of `params`; None if it is
    /// shorter than the list.
    pub fn read(params: &[u8]) -> Option<TrdRes> {
        let v = shim::unpack(params, widths::TRD_RES).ok()?;
        let [idx, op, retx, init_end, seq_end] = v.as_slice() else {
            return None;
        };
        Some(TrdRes {
            idx: *idx as u16,
            op: Op::from_u8(*op as u8),
            retx: *retx != 0,
            init_end: *init_end as u32,
            seq_end: *seq_end as u32,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_is_the_spec_s_and_round_trips() {
        assert_eq!(PARAMS_LEN, 28);
        assert_eq!(PARAMS_LEN, crate::app::params_len(216, 96));
        let flow = FlowKey::new(0x0A0B0C, 6, [1, 2, 3, 4], [5, 6, 7, 8], 0x1112, 0x1314);
        let req = TrdReq {
            flow,
            tcp_flags: 0x12,
            seq: 0xA1A2A3A4,
            seq_end: 0xB1B2B3B4,
            payload_len: 0xC1C2,
        };
        let mut p = [0xEEu8; PARAMS_LEN];
        assert!(req.write(&mut p));
        let mut want = flow.0.to_vec();
        want.extend_from_slice(&[0x12, 0xA1, 0xA2, 0xA3, 0xA4, 0xB1, 0xB2, 0xB3, 0xB4]);
        want.extend_from_slice(&[0xC1, 0xC2, 0]);
        assert_eq!(p.to_vec(), want, "byte-aligned fields back to back");
        assert_eq!(TrdReq::read(&p), Some(req));
        assert_eq!(TrdReq::read(&p[..27]), None);
        assert!(!req.write(&mut [0u8; 26]));

        let res = TrdRes {
            idx: 0x0102,
            op: Op::MaxUpdate,
            retx: true,
            init_end: 0x03040506,
            seq_end: 0x0708090A,
        };
        assert!(res.write(&mut p));
        let mut want = vec![1, 2, 2, 1, 3, 4, 5, 6, 7, 8, 9, 10];
        want.resize(PARAMS_LEN, 0);
        assert_eq!(p.to_vec(), want, "response from offset 0, rest zeroed");
        assert_eq!(TrdRes::read(&p), Some(res));
        assert_eq!(TrdRes::read(&p[..11]), None);
        p[2] = 9;
        assert_eq!(TrdRes::read(&p).map(|r| r.op), Some(Op::None));
    }
}
