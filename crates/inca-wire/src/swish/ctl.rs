//! The SwiSh controller ↔ switch-CPU RPC (specs/swish.md §4.5): one frame
//! `{op:u8, len:u32, body}` per message, carried on a control session (the
//! session keeps message boundaries; the frame keeps the spec's own length
//! so a byte stream without them parses alike).
//!
//! ```text
//! 0 op:u8   1 len:u32 (bytes of body)   5 body
//! READ_REG   tag:u32 array:u8 start:u32 count:u32
//! WRITE_REG  tag:u32 array:u8 start:u32 value:u64 × n
//! TABLE_ADD  tag:u32 table:u8 key bytes
//! TABLE_DEL  tag:u32 table:u8 key bytes
//! SET_CFG    tag:u32 name:u8 value bytes
//! MCAST_SET  tag:u32 group:u16 rid:u16 × n
//! INJECT     tag:u32 frame bytes
//! HEARTBEAT  tag:u32
//! VALUES     tag:u32 value:u64 × n       (switch → controller)
//! ```
//!
//! The spec names the ops and their arguments; the op codes, the `tag`
//! that pairs an answer with its request, and the VALUES answer are [our
//! choice], as is the table ops' layout (an exact-match key, no action
//! data: the DDoS baselines' source block table is the one user).
//! [`Frame`] is the checked view, [`Rpc`] the repr.

use crate::error::{Result, WireError};

/// TCP port of the RPC when it runs over plain TCP (§4.5).
pub const TCP_PORT: u16 = 50100;
/// Bytes before the body.
pub const HEADER_LEN: usize = 5;
/// Largest body accepted: a control session carries at most 16 MiB.
pub const MAX_BODY: usize = 16 << 20;

/// Op codes [our choice].
pub mod op {
    /// READ_REG(array, start, count).
    pub const READ_REG: u8 = 1;
    /// WRITE_REG(array, start, values).
    pub const WRITE_REG: u8 = 2;
    /// TABLE_ADD(table, key) (no action data).
    pub const TABLE_ADD: u8 = 3;
    /// TABLE_DEL(table, key).
    pub const TABLE_DEL: u8 = 4;
    /// MCAST_SET(group, rids).
    pub const MCAST_SET: u8 = 5;
    /// SET_CFG(name, value).
    pub const SET_CFG: u8 = 6;
    /// INJECT(packet): into the data plane through the CPU port.
    pub const INJECT: u8 = 7;
    /// HEARTBEAT.
    pub const HEARTBEAT: u8 = 8;
    /// The switch's answer: the values read (none for a write's).
    pub const VALUES: u8 = 0x81;
}

/// A checked view of one RPC frame.
#[derive(Debug, Clone, Copy)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wraps `buffer`: the header and the body its length declares must be
    /// there (bytes after it are not the frame's), and the length at most
    /// [`MAX_BODY`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let len = be32(b, 1) as usize;
        if len > MAX_BODY {
            return Err(WireError::Malformed("SwiSh RPC body over 16 MiB"));
        }
        if b.len() < HEADER_LEN + len {
            return Err(WireError::Truncated);
        }
        Ok(Frame { buffer })
    }

    /// The op.
    pub fn op(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// The declared body length.
    pub fn len(&self) -> usize {
        be32(self.buffer.as_ref(), 1) as usize
    }

    /// Whether the body is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The body (exactly `len` bytes).
    pub fn body(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + self.len()]
    }

    /// The frame's total length.
    pub fn total_len(&self) -> usize {
        HEADER_LEN + self.len()
    }
}

/// One RPC's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rpc {
    /// Read `count` entries of register `array` from `start`.
    ReadReg {
        /// Pairs the answer with the request.
        tag: u32,
        /// The register (the program's code for it).
        array: u8,
        /// First entry.
        start: u32,
        /// Entries.
        count: u32,
    },
    /// Write `values` into register `array` from `start` (a pair register's
    /// entry is `hi << 32 | lo`); answered by an empty VALUES once done.
    WriteReg {
        /// Pairs the answer with the request.
        tag: u32,
        /// The register.
        array: u8,
        /// First entry.
        start: u32,
        /// One per entry.
        values: Vec<u64>,
    },
    /// Add exact-match `key` to table `table` (the program's code for
    /// it); answered by an empty VALUES once the entry is in.
    TableAdd {
        /// Pairs the answer with the request.
        tag: u32,
        /// The table.
        table: u8,
        /// The key's bytes.
        key: Vec<u8>,
    },
    /// Delete `key` from table `table`; answered like TABLE_ADD.
    TableDel {
        /// Pairs the answer with the request.
        tag: u32,
        /// The table.
        table: u8,
        /// The key's bytes.
        key: Vec<u8>,
    },
    /// Set configuration item `name` (the program's code) to `value`.
    SetCfg {
        /// Pairs an answer with the request (none is sent for SDW's).
        tag: u32,
        /// The item.
        name: u8,
        /// Its new value.
        value: Vec<u8>,
    },
    /// Set multicast group `group` to the members `rids`.
    McastSet {
        /// Pairs an answer with the request.
        tag: u32,
        /// The group.
        group: u16,
        /// Its members.
        rids: Vec<u16>,
    },
    /// Push `frame` into the data plane through the CPU port.
    Inject {
        /// Pairs an answer with the request.
        tag: u32,
        /// The frame.
        frame: Vec<u8>,
    },
    /// Are you there.
    Heartbeat {
        /// Echoed in the answer.
        tag: u32,
    },
    /// The answer to the request with `tag`.
    Values {
        /// The request's tag.
        tag: u32,
        /// The values read (none for a write).
        values: Vec<u64>,
    },
}

fn u64s(b: &[u8]) -> Result<Vec<u64>> {
    if !b.len().is_multiple_of(8) {
        return Err(WireError::Malformed("SwiSh RPC values not whole u64s"));
    }
    Ok(b.chunks_exact(8)
        .map(|c| u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect())
}

impl Rpc {
    /// Parses one frame (bytes after its declared body are ignored).
    pub fn parse(bytes: &[u8]) -> Result<Rpc> {
        let f = Frame::new_checked(bytes)?;
        let b = f.body();
        if b.len() < 4 {
            return Err(WireError::Truncated);
        }
        let tag = be32(b, 0);
        let need = |n: usize| {
            if b.len() < n {
                Err(WireError::Truncated)
            } else {
                Ok(())
            }
        };
        Ok(match f.op() {
            op::READ_REG => {
                need(13)?;
                if b.len() != 13 {
                    return Err(WireError::Malformed("READ_REG body is 13 bytes"));
                }
                Rpc::ReadReg {
                    tag,
                    array: b[4],
                    start: be32(b, 5),
                    count: be32(b, 9),
                }
            }
            op::WRITE_REG => {
                need(9)?;
                Rpc::WriteReg {
                    tag,
                    array: b[4],
                    start: be32(b, 5),
                    values: u64s(&b[9..])?,
                }
            }
            op::SET_CFG => {
                need(5)?;
                Rpc::SetCfg {
                    tag,
                    name: b[4],
                    value: b[5..].to_vec(),
                }
            }
            op::MCAST_SET => {
                need(6)?;
                if !(b.len() - 6).is_multiple_of(2) {
                    return Err(WireError::Malformed("MCAST_SET rids not whole u16s"));
                }
                Rpc::McastSet {
                    tag,
                    group: u16::from_be_bytes([b[4], b[5]]),
                    rids: b[6..]
                        .chunks_exact(2)
                        .map(|c| u16::from_be_bytes([c[0], c[1]]))
                        .collect(),
                }
            }
            op::INJECT => Rpc::Inject {
                tag,
                frame: b[4..].to_vec(),
            },
            op::HEARTBEAT => {
                if b.len() != 4 {
                    return Err(WireError::Malformed("HEARTBEAT body is 4 bytes"));
                }
                Rpc::Heartbeat { tag }
            }
            op::VALUES => Rpc::Values {
                tag,
                values: u64s(&b[4..])?,
            },
            op::TABLE_ADD => {
                need(5)?;
                Rpc::TableAdd {
                    tag,
                    table: b[4],
                    key: b[5..].to_vec(),
                }
            }
            op::TABLE_DEL => {
                need(5)?;
                Rpc::TableDel {
                    tag,
                    table: b[4],
                    key: b[5..].to_vec(),
                }
            }
            _ => return Err(WireError::Unsupported("unknown SwiSh RPC op")),
        })
    }

    /// The op code.
    pub fn op(&self) -> u8 {
        match self {
            Rpc::ReadReg { .. } => op::READ_REG,
            Rpc::WriteReg { .. } => op::WRITE_REG,
            Rpc::TableAdd { .. } => op::TABLE_ADD,
            Rpc::TableDel { .. } => op::TABLE_DEL,
            Rpc::SetCfg { .. } => op::SET_CFG,
            Rpc::McastSet { .. } => op::MCAST_SET,
            Rpc::Inject { .. } => op::INJECT,
            Rpc::Heartbeat { .. } => op::HEARTBEAT,
            Rpc::Values { .. } => op::VALUES,
        }
    }

    /// The tag.
    pub fn tag(&self) -> u32 {
        match self {
            Rpc::ReadReg { tag, .. }
            | Rpc::WriteReg { tag, .. }
            | Rpc::TableAdd { tag, .. }
            | Rpc::TableDel { tag, .. }
            | Rpc::SetCfg { tag, .. }
            | Rpc::McastSet { tag, .. }
            | Rpc::Inject { tag, .. }
            | Rpc::Heartbeat { tag }
            | Rpc::Values { tag, .. } => *tag,
        }
    }

    /// The frame as bytes; `OutOfRange` if the body is over [`MAX_BODY`].
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        let mut out = vec![self.op(), 0, 0, 0, 0];
        out.extend_from_slice(&self.tag().to_be_bytes());
        match self {
            Rpc::ReadReg {
                array,
                start,
                count,
                ..
            } => {
                out.push(*array);
                out.extend_from_slice(&start.to_be_bytes());
                out.extend_from_slice(&count.to_be_bytes());
            }
            Rpc::WriteReg {
                array,
                start,
                values,
                ..
            } => {
                out.push(*array);
                out.extend_from_slice(&start.to_be_bytes());
                for v in values {
                    out.extend_from_slice(&v.to_be_bytes());
                }
            }
            Rpc::TableAdd { table, key, .. } | Rpc::TableDel { table, key, .. } => {
                out.push(*table);
                out.extend_from_slice(key);
            }
            Rpc::SetCfg { name, value, .. } => {
                out.push(*name);
                out.extend_from_slice(value);
            }
            Rpc::McastSet { group, rids, .. } => {
                out.extend_from_slice(&group.to_be_bytes());
                for r in rids {
                    out.extend_from_slice(&r.to_be_bytes());
                }
            }
            Rpc::Inject { frame, .. } => out.extend_from_slice(frame),
            Rpc::Heartbeat { .. } => {}
            Rpc::Values { values, .. } => {
                for v in values {
                    out.extend_from_slice(&v.to_be_bytes());
                }
            }
        }
        let len = out.len() - HEADER_LEN;
        if len > MAX_BODY {
            return Err(WireError::OutOfRange("SwiSh RPC body over 16 MiB"));
        }
        out[1..5].copy_from_slice(&(len as u32).to_be_bytes());
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rpc_round_trips() {
        let all = [
            Rpc::ReadReg {
                tag: 7,
                array: 10,
                start: 3,
                count: 64,
            },
            Rpc::WriteReg {
                tag: 8,
                array: 0,
                start: 0,
                values: vec![1 << 40 | 5, 0],
            },
            Rpc::SetCfg {
                tag: 9,
                name: 1,
                value: vec![1],
            },
            Rpc::McastSet {
                tag: 10,
                group: 2,
                rids: vec![1, 3],
            },
            Rpc::Inject {
                tag: 11,
                frame: vec![0xAA; 60],
            },
            Rpc::Heartbeat { tag: 12 },
            Rpc::TableAdd {
                tag: 13,
                table: 0,
                key: vec![10, 1, 0, 7],
            },
            Rpc::TableDel {
                tag: 14,
                table: 0,
                key: vec![10, 1, 0, 7],
            },
            Rpc::Values {
                tag: 7,
                values: vec![u64::MAX],
            },
        ];
        for r in all {
            let b = r.to_vec().unwrap();
            let f = Frame::new_checked(&b[..]).unwrap();
            assert_eq!((f.op(), f.total_len()), (r.op(), b.len()));
            assert_eq!(Rpc::parse(&b).unwrap(), r);
            assert_eq!(Rpc::parse(&b[..b.len() - 1]), Err(WireError::Truncated));
        }
    }

    #[test]
    fn malformed_frames_are_refused() {
        let read = Rpc::ReadReg {
            tag: 1,
            array: 0,
            start: 0,
            count: 1,
        }
        .to_vec()
        .unwrap();
        let mut long = read.clone();
        long[4] += 1;
        long.push(0);
        assert!(Rpc::parse(&long).is_err(), "READ_REG has a fixed body");
        let mut huge = read.clone();
        huge[1] = 0xFF;
        assert!(Frame::new_checked(&huge[..]).is_err());
        let mut odd = Rpc::Values {
            tag: 1,
            values: vec![1],
        }
        .to_vec()
        .unwrap();
        odd[4] -= 1;
        odd.pop();
        assert!(Rpc::parse(&odd).is_err());
        assert!(Rpc::parse(&[op::TABLE_ADD, 0, 0, 0, 4, 0, 0, 0, 1]).is_err());
        assert!(Rpc::parse(&[0x55, 0, 0, 0, 4, 0, 0, 0, 1]).is_err());
        assert!(Rpc::parse(&[op::HEARTBEAT, 0, 0, 0, 0]).is_err());
    }
}
