//! The test application's packets [our choice]: a UDP datagram to port
//! [`APP_PORT`] carrying one update and/or query of a key; the replica
//! writes its answer into the same datagram and sends it back out of the
//! port it came in on, so the sender learns the outcome (accepted or
//! rejected), the window it landed in, and what the query read.
//!
//! ```text
//! 0 op:u8 (1 update, 2 query, 3 both)  1 status:u8 (reply: 1 ok, 2 rejected)
//! 2 reply:u8 (bit 0: a reply; bit 1: not_ready, the query's answer is
//!   not a snapshot yet — a replica that joined and has not completed its
//!   first window, §5.6)                 3 rid:u8 (low byte of the replica)
//! 4 req_id:u32   8 key:u32   12 value:u32   16 win:u32   20 res[3]:u32
//! ```

use inca_wire::builder::{build_udp_frame, Endpoints};

use crate::addr::ReplicaAddr;

/// UDP destination port of application requests [our choice].
pub const APP_PORT: u16 = 47001;
/// Payload length.
pub const APP_LEN: usize = 32;
/// Offset of the payload in an untagged IPv4 frame without options.
pub const PAYLOAD_AT: usize = 42;
/// op bit: update.
pub const OP_UPDATE: u8 = 1;
/// op bit: query.
pub const OP_QUERY: u8 = 2;
/// status: the update was accepted (or a pure query was answered).
pub const ST_OK: u8 = 1;
/// status: the update was rejected (count = B).
pub const ST_REJECTED: u8 = 2;
/// Reply byte 2: a reply.
pub const REPLY: u8 = 1;
/// Reply byte 2: the query's answer is not ready (§5.6 join).
pub const REPLY_NOT_READY: u8 = 2;

/// A request's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppRequest {
    /// [`OP_UPDATE`] | [`OP_QUERY`].
    pub op: u8,
    /// The sender's id for it.
    pub req_id: u32,
    /// The key (cells hash_r(key)).
    pub key: u32,
    /// The update's value.
    pub value: u32,
}

/// A reply's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppReply {
    /// The request's op.
    pub op: u8,
    /// [`ST_OK`] or [`ST_REJECTED`].
    pub status: u8,
    /// Low byte of the answering replica's rid.
    pub rid: u8,
    /// The request id.
    pub req_id: u32,
    /// The key.
    pub key: u32,
    /// The update's value.
    pub value: u32,
    /// The window the replica was in.
    pub win: u32,
    /// What the query read, per row.
    pub res: [u32; 3],
    /// The query's answer is not ready: the replica joined and has not
    /// completed its first window (§5.6).
    pub not_ready: bool,
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl AppRequest {
    /// The request's UDP payload.
    pub fn payload(&self) -> [u8; APP_LEN] {
        let mut p = [0u8; APP_LEN];
        p[0] = self.op;
        p[4..8].copy_from_slice(&self.req_id.to_be_bytes());
        p[8..12].copy_from_slice(&self.key.to_be_bytes());
        p[12..16].copy_from_slice(&self.value.to_be_bytes());
        p
    }

    /// The request as a frame from a host at `host` to `replica`.
    pub fn frame(&self, host: &ReplicaAddr, replica: &ReplicaAddr) -> Vec<u8> {
        let p = self.payload();
        let ep = Endpoints::new(host.mac, host.ip, replica.mac, replica.ip);
        // Endpoints and a 32-byte payload always build.
        build_udp_frame(&ep, APP_PORT, APP_PORT, &p, false).unwrap_or_default()
    }

    /// Parses a request payload (not a reply).
    pub fn parse(p: &[u8]) -> Option<AppRequest> {
        if p.len() < APP_LEN || p[2] != 0 || p[0] & !(OP_UPDATE | OP_QUERY) != 0 || p[0] == 0 {
            return None;
        }
        Some(AppRequest {
            op: p[0],
            req_id: be32(p, 4),
            key: be32(p, 8),
            value: be32(p, 12),
        })
    }
}

impl AppReply {
    /// Parses a reply frame (None for anything else).
    pub fn parse_frame(frame: &[u8]) -> Option<AppReply> {
        let u = inca_wire::parse_udp_frame(frame).ok()?;
        if u.src_port != APP_PORT {
            return None;
        }
        AppReply::parse_payload(u.payload)
    }

    /// Parses a reply's UDP payload (None for a request or a short one).
    pub fn parse_payload(p: &[u8]) -> Option<AppReply> {
        if p.len() < APP_LEN || p[2] & !REPLY_NOT_READY != REPLY {
            return None;
        }
        Some(AppReply {
            op: p[0],
            status: p[1],
            rid: p[3],
            req_id: be32(p, 4),
            key: be32(p, 8),
            value: be32(p, 12),
            win: be32(p, 16),
            res: [be32(p, 20), be32(p, 24), be32(p, 28)],
            not_ready: p[2] & REPLY_NOT_READY != 0,
        })
    }

    /// Writes the reply into a request payload.
    pub fn write(&self, p: &mut [u8]) {
        if p.len() < APP_LEN {
            return;
        }
        p[1] = self.status;
        p[2] = if self.not_ready {
            REPLY | REPLY_NOT_READY
        } else {
            REPLY
        };
        p[3] = self.rid;
        p[16..20].copy_from_slice(&self.win.to_be_bytes());
        for (i, v) in self.res.iter().enumerate() {
            p[20 + 4 * i..24 + 4 * i].copy_from_slice(&v.to_be_bytes());
        }
    }
}

/// Column of `key` in row `row` of `cols` columns: a multiplicative hash
/// per row [our choice; a Tofino hash unit computes a CRC, any fixed
/// per-row function serves the protocol].
pub fn hash_col(row: usize, key: u32, cols: u32) -> u32 {
    const SEEDS: [u32; 3] = [0x9E37_79B1, 0x85EB_CA77, 0xC2B2_AE3D];
    let h = key.wrapping_add(row as u32).wrapping_mul(SEEDS[row % 3]);
    ((u64::from(h ^ (h >> 16)) * u64::from(cols)) >> 32) as u32
}
