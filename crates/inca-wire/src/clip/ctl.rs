//! CLIP-CTL (specs/clip.md §4.5): the controller ↔ server control protocol,
//! one message per UDP datagram. The controller listens on
//! [`CONTROLLER_PORT`] (47100), server runtimes on [`SERVER_PORT`] (47101).
//!
//! ```text
//! 0  magic   (2)  0xC11C
//! 2  version (1)  1
//! 3  type    (1)  MsgType
//! 4  txn_id  (4)
//! 8  length  (2)  payload bytes after the header
//! 10 sender  (1)  0 = controller, else the server_id
//! 11 flags   (1)  b0 REPLY, b1 MORE (the list continues in the next message)
//! ```
//!
//! Payloads (big-endian; FlowKey = 16 bytes; Key = `key_len` 8 ‖ bytes;
//! Entry = Key ‖ `action_id` 8 ‖ `data_len` 8 ‖ data):
//!
//! ```text
//! 0x01 REGISTER          server_id 8 | n_cores 8 | mac 48 | switch_port 16
//! 0x03 HEARTBEAT         timestamp_ns 64
//! 0x10 MIRROR_INSERT     table_id 8 | count 16 | count × Entry
//! 0x11 MIRROR_DELETE     table_id 8 | count 16 | count × Key
//! 0x12 ENTRY_CREATED     table_id 8 | count 16 | count × Entry
//! 0x13 ENTRY_OFFLOADED   table_id 8 | count 16 | count × Key
//! 0x14 ENTRY_EXPIRED     table_id 8 | count 16 | count × Key
//! 0x20 TOPN_REQUEST      period_id 32 | n 16
//! 0x21 TOPN_REPORT       period_id 32 | count 16 | count × (FlowKey | est 32)
//! 0x30 FLOW_QUERY        grp_ver 16
//! 0x31 FLOW_QUERY_REPLY  count 16 | count × (FlowKey | first_seen 64 | last_seen 64 | offloaded 8)
//! 0x32 FLOW_EXPIRED      count 16 | count × FlowKey
//! 0x40 POOL_ASSIGN       app_id 8 | kind 8 (1 SNAT ports, 2 TRD indices) | base_ip 32 | lo 32 | hi 32
//! 0x41 CONN_NEW          FlowKey | idx 16
//! 0x42 CONN_RELEASE      FlowKey | idx 16
//! ```
//!
//! [our choice] where §4.5 is silent: the keys of 0x11, 0x13 and 0x14 are
//! length-prefixed like 0x10's (`key_len` 8 ‖ key); a bare
//! acknowledgement ([`CtlBody::Ack`]) is a message with the REPLY flag,
//! the type of the message it answers and an empty payload (every
//! request type's payload is non-empty, so the two never collide); a
//! reply that carries data (FLOW_QUERY_REPLY, TOPN_REPORT, a HEARTBEAT
//! echo) is that type's message, its REPLY flag set as the sender wishes.
//!
//! Decoding is strict so encoding is canonical: every byte string
//! [`CtlMessage::decode`] accepts re-encodes to itself. The datagram
//! length must be exactly header + `length`; counts must match the bytes;
//! unknown types, reserved flag bits, an empty payload without REPLY,
//! `offloaded` other than 0/1 and a pool `kind` other than 1/2 are
//! refused. [`split`] cuts list-carrying bodies so each message fits
//! [`MAX_DATAGRAM`].

use crate::clip::FlowKey;
use crate::error::{Result, WireError};

/// UDP port the controller listens on.
pub const CONTROLLER_PORT: u16 = 47100;
/// UDP port a server runtime listens on.
pub const SERVER_PORT: u16 = 47101;
/// `magic`.
pub const MAGIC: u16 = 0xC11C;
/// The only version.
pub const VERSION: u8 = 1;
/// Bytes of the header.
pub const HEADER_LEN: usize = 12;
/// The longest message a sender builds (header included): lists are split
/// to fit (§4.5).
pub const MAX_DATAGRAM: usize = 1400;
/// `flags` b0: this message answers the request with the same `txn_id`.
pub const FLAG_REPLY: u8 = 0x01;
/// `flags` b1: the list continues in the next message.
pub const FLAG_MORE: u8 = 0x02;
/// The defined flag bits.
pub const FLAGS_MASK: u8 = FLAG_REPLY | FLAG_MORE;
/// The longest key or entry data (`key_len` / `data_len` are one byte).
pub const MAX_KEY_LEN: usize = 255;
/// `sender` of the controller.
pub const CONTROLLER_ID: u8 = 0;

/// Message `type` (§4.5 table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum MsgType {
    /// S→C: a server announces itself.
    Register = 0x01,
    /// Both ways, every 100 ms.
    Heartbeat = 0x03,
    /// C→S: install mirrored entries.
    MirrorInsert = 0x10,
    /// C→S: delete mirrored entries.
    MirrorDelete = 0x11,
    /// S→C: entries the handler created.
    EntryCreated = 0x12,
    /// C→S: entries now in the switch table.
    EntryOffloaded = 0x13,
    /// C→S: switch copies aged out.
    EntryExpired = 0x14,
    /// C→S: report the top N flows.
    TopnRequest = 0x20,
    /// S→C: the top N flows by estimate.
    TopnReport = 0x21,
    /// C→S: live flows assigned via a group version.
    FlowQuery = 0x30,
    /// S→C: the answer to FLOW_QUERY.
    FlowQueryReply = 0x31,
    /// S→C: flows the server expired.
    FlowExpired = 0x32,
    /// C→S: a resource pool slice.
    PoolAssign = 0x40,
    /// S→C: a TRD connection got an index.
    ConnNew = 0x41,
    /// S→C: a TRD connection's index is to be freed.
    ConnRelease = 0x42,
}

impl MsgType {
    /// Every type, in code order.
    pub const ALL: [MsgType; 15] = [
        MsgType::Register,
        MsgType::Heartbeat,
        MsgType::MirrorInsert,
        MsgType::MirrorDelete,
        MsgType::EntryCreated,
        MsgType::EntryOffloaded,
        MsgType::EntryExpired,
        MsgType::TopnRequest,
        MsgType::TopnReport,
        MsgType::FlowQuery,
        MsgType::FlowQueryReply,
        MsgType::FlowExpired,
        MsgType::PoolAssign,
        MsgType::ConnNew,
        MsgType::ConnRelease,
    ];

    /// Decodes a type byte; an undefined one is refused.
    pub fn from_u8(v: u8) -> Result<Self> {
        MsgType::ALL
            .iter()
            .copied()
            .find(|t| *t as u8 == v)
            .ok_or(WireError::Unsupported("unknown CLIP-CTL type"))
    }

    /// The §4.5 name.
    pub fn name(self) -> &'static str {
        match self {
            MsgType::Register => "REGISTER",
            MsgType::Heartbeat => "HEARTBEAT",
            MsgType::MirrorInsert => "MIRROR_INSERT",
            MsgType::MirrorDelete => "MIRROR_DELETE",
            MsgType::EntryCreated => "ENTRY_CREATED",
            MsgType::EntryOffloaded => "ENTRY_OFFLOADED",
            MsgType::EntryExpired => "ENTRY_EXPIRED",
            MsgType::TopnRequest => "TOPN_REQUEST",
            MsgType::TopnReport => "TOPN_REPORT",
            MsgType::FlowQuery => "FLOW_QUERY",
            MsgType::FlowQueryReply => "FLOW_QUERY_REPLY",
            MsgType::FlowExpired => "FLOW_EXPIRED",
            MsgType::PoolAssign => "POOL_ASSIGN",
            MsgType::ConnNew => "CONN_NEW",
            MsgType::ConnRelease => "CONN_RELEASE",
        }
    }
}

/// POOL_ASSIGN `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum PoolKind {
    /// SNAT ports `lo..=hi` on `base_ip`.
    SnatPorts = 1,
    /// TRD connection indices `lo..=hi`.
    TrdIndices = 2,
}

impl PoolKind {
    /// Decodes the byte; anything but 1 and 2 is refused.
    pub fn from_u8(v: u8) -> Result<Self> {
        Ok(match v {
            1 => PoolKind::SnatPorts,
            2 => PoolKind::TrdIndices,
            _ => return Err(WireError::Malformed("unknown CLIP-CTL pool kind")),
        })
    }
}

/// A checked view of a CLIP-CTL header at the start of `buffer`: length,
/// magic and version are checked; the type byte is read raw and the
/// reserved flag bits are ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtlHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> CtlHeader<T> {
    /// Wraps `buffer` after checking its length (≥ 12), magic and version.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if u16::from_be_bytes([b[0], b[1]]) != MAGIC {
            return Err(WireError::Malformed("CLIP-CTL magic"));
        }
        if b[2] != VERSION {
            return Err(WireError::Unsupported("CLIP-CTL version"));
        }
        Ok(CtlHeader { buffer })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// `magic` (always [`MAGIC`] in a checked view).
    pub fn magic(&self) -> u16 {
        u16::from_be_bytes([self.b()[0], self.b()[1]])
    }

    /// `version` (always [`VERSION`] in a checked view).
    pub fn version(&self) -> u8 {
        self.b()[2]
    }

    /// The raw type byte.
    pub fn type_byte(&self) -> u8 {
        self.b()[3]
    }

    /// The decoded type.
    pub fn msg_type(&self) -> Result<MsgType> {
        MsgType::from_u8(self.type_byte())
    }

    /// The transaction id: a reply echoes its request's.
    pub fn txn_id(&self) -> u32 {
        let b = self.b();
        u32::from_be_bytes([b[4], b[5], b[6], b[7]])
    }

    /// Payload bytes after the header.
    pub fn payload_len(&self) -> u16 {
        u16::from_be_bytes([self.b()[8], self.b()[9]])
    }

    /// The sender: [`CONTROLLER_ID`] or a server id.
    pub fn sender(&self) -> u8 {
        self.b()[10]
    }

    /// The defined flag bits ([`FLAG_REPLY`], [`FLAG_MORE`]).
    pub fn flags(&self) -> u8 {
        self.b()[11] & FLAGS_MASK
    }

    /// Whether this is a reply.
    pub fn reply(&self) -> bool {
        self.flags() & FLAG_REPLY != 0
    }

    /// Whether the list continues in the next message.
    pub fn more(&self) -> bool {
        self.flags() & FLAG_MORE != 0
    }

    /// Header plus declared payload.
    pub fn total_len(&self) -> usize {
        HEADER_LEN + usize::from(self.payload_len())
    }

    /// The payload bytes present, at most `payload_len` of them.
    pub fn payload(&self) -> &[u8] {
        let end = self.total_len().min(self.b().len());
        &self.b()[HEADER_LEN..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> CtlHeader<T> {
    /// Sets the flags (reserved bits are cleared).
    pub fn set_flags(&mut self, flags: u8) {
        self.buffer.as_mut()[11] = flags & FLAGS_MASK;
    }

    /// Sets the transaction id.
    pub fn set_txn_id(&mut self, txn_id: u32) {
        self.buffer.as_mut()[4..8].copy_from_slice(&txn_id.to_be_bytes());
    }

    /// Sets the sender.
    pub fn set_sender(&mut self, sender: u8) {
        self.buffer.as_mut()[10] = sender;
    }
}

/// The header's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CtlHeaderRepr {
    /// Message type.
    pub msg_type: MsgType,
    /// Transaction id.
    pub txn_id: u32,
    /// Payload bytes.
    pub payload_len: u16,
    /// Sender.
    pub sender: u8,
    /// [`FLAG_REPLY`] | [`FLAG_MORE`]; other bits are written as 0.
    pub flags: u8,
}

impl CtlHeaderRepr {
    /// Reads the header at the start of `buf`; an unknown type is refused.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let h = CtlHeader::new_checked(buf)?;
        Ok(CtlHeaderRepr {
            msg_type: h.msg_type()?,
            txn_id: h.txn_id(),
            payload_len: h.payload_len(),
            sender: h.sender(),
            flags: h.flags(),
        })
    }

    /// The 12 header bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..2].copy_from_slice(&MAGIC.to_be_bytes());
        b[2] = VERSION;
        b[3] = self.msg_type as u8;
        b[4..8].copy_from_slice(&self.txn_id.to_be_bytes());
        b[8..10].copy_from_slice(&self.payload_len.to_be_bytes());
        b[10] = self.sender;
        b[11] = self.flags & FLAGS_MASK;
        b
    }

    /// Writes the header to the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let b = buf.get_mut(..HEADER_LEN).ok_or(WireError::BufferTooSmall)?;
        b.copy_from_slice(&self.to_bytes());
        Ok(())
    }

    /// The bytes [`emit`](Self::emit) writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
}

/// One mirrored-table entry (MIRROR_INSERT, ENTRY_CREATED).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MirrorEntry {
    /// The match key (≤ 255 bytes).
    pub key: Vec<u8>,
    /// The action.
    pub action_id: u8,
    /// The action data (≤ 255 bytes).
    pub data: Vec<u8>,
}

impl MirrorEntry {
    /// Its encoded length: `key_len` ‖ key ‖ `action_id` ‖ `data_len` ‖ data.
    pub fn wire_len(&self) -> usize {
        3 + self.key.len() + self.data.len()
    }
}

/// One live flow (FLOW_QUERY_REPLY item).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowInfo {
    /// The flow.
    pub flow: FlowKey,
    /// When the server first saw it (ns).
    pub first_seen: u64,
    /// When the server last saw it (ns).
    pub last_seen: u64,
    /// Whether its entry lives in the switch (expiry frozen).
    pub offloaded: bool,
}

/// Bytes of one FLOW_QUERY_REPLY item.
pub const FLOW_INFO_LEN: usize = 33;
/// Bytes of one TOPN_REPORT item.
pub const TOPN_ITEM_LEN: usize = 20;

/// A message's type and payload: one variant per §4.5 type, and
/// [`CtlBody::Ack`] for an empty REPLY.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CtlBody {
    /// 0x01, S→C.
    Register {
        /// The server's id (1..127).
        server_id: u8,
        /// Worker cores.
        n_cores: u8,
        /// The server port's MAC address.
        mac: [u8; 6],
        /// The switch port the server hangs off.
        switch_port: u16,
    },
    /// 0x03, both ways.
    Heartbeat {
        /// The sender's clock.
        timestamp_ns: u64,
    },
    /// 0x10, C→S: install entries in a mirrored table (every server).
    MirrorInsert {
        /// The app table.
        table_id: u8,
        /// The entries.
        entries: Vec<MirrorEntry>,
    },
    /// 0x11, C→S: delete entries by key.
    MirrorDelete {
        /// The app table.
        table_id: u8,
        /// The keys (each ≤ 255 bytes).
        keys: Vec<Vec<u8>>,
    },
    /// 0x12, S→C: entries the handler created (batched every 10 ms).
    EntryCreated {
        /// The app table.
        table_id: u8,
        /// The entries.
        entries: Vec<MirrorEntry>,
    },
    /// 0x13, C→S: these entries now live in the switch; freeze their expiry.
    EntryOffloaded {
        /// The app table.
        table_id: u8,
        /// The keys.
        keys: Vec<Vec<u8>>,
    },
    /// 0x14, C→S: the switch copies aged out; delete and free resources.
    EntryExpired {
        /// The app table.
        table_id: u8,
        /// The keys.
        keys: Vec<Vec<u8>>,
    },
    /// 0x20, C→S: report the top `n` flows of the period.
    TopnRequest {
        /// The report period.
        period_id: u32,
        /// How many flows.
        n: u16,
    },
    /// 0x21, S→C: flows and their largest `cms_est` of the period.
    TopnReport {
        /// The report period.
        period_id: u32,
        /// (flow, estimate), by estimate descending.
        items: Vec<(FlowKey, u32)>,
    },
    /// 0x30, C→S: which live flows were assigned via group version `grp_ver`.
    FlowQuery {
        /// The group version asked about.
        grp_ver: u16,
    },
    /// 0x31, S→C: the answer.
    FlowQueryReply {
        /// The flows.
        items: Vec<FlowInfo>,
    },
    /// 0x32, S→C: flows the server expired.
    FlowExpired {
        /// The flows.
        flows: Vec<FlowKey>,
    },
    /// 0x40, C→S: a pool slice for an app.
    PoolAssign {
        /// The app.
        app_id: u8,
        /// What the range counts.
        kind: PoolKind,
        /// SNAT's public address (0 for TRD).
        base_ip: [u8; 4],
        /// First port or index.
        lo: u32,
        /// Last port or index.
        hi: u32,
    },
    /// 0x41, S→C: a TRD connection got index `idx`.
    ConnNew {
        /// The connection.
        flow: FlowKey,
        /// Its register index.
        idx: u16,
    },
    /// 0x42, S→C: free the connection's index once the switch entry is gone.
    ConnRelease {
        /// The connection.
        flow: FlowKey,
        /// Its register index.
        idx: u16,
    },
    /// An acknowledgement of a message of type `of`: REPLY flag, empty
    /// payload [our choice].
    Ack {
        /// The type of the message acknowledged.
        of: MsgType,
    },
}

impl CtlBody {
    /// The header's type byte for this body.
    pub fn msg_type(&self) -> MsgType {
        match self {
            CtlBody::Register { .. } => MsgType::Register,
            CtlBody::Heartbeat { .. } => MsgType::Heartbeat,
            CtlBody::MirrorInsert { .. } => MsgType::MirrorInsert,
            CtlBody::MirrorDelete { .. } => MsgType::MirrorDelete,
            CtlBody::EntryCreated { .. } => MsgType::EntryCreated,
            CtlBody::EntryOffloaded { .. } => MsgType::EntryOffloaded,
            CtlBody::EntryExpired { .. } => MsgType::EntryExpired,
            CtlBody::TopnRequest { .. } => MsgType::TopnRequest,
            CtlBody::TopnReport { .. } => MsgType::TopnReport,
            CtlBody::FlowQuery { .. } => MsgType::FlowQuery,
            CtlBody::FlowQueryReply { .. } => MsgType::FlowQueryReply,
            CtlBody::FlowExpired { .. } => MsgType::FlowExpired,
            CtlBody::PoolAssign { .. } => MsgType::PoolAssign,
            CtlBody::ConnNew { .. } => MsgType::ConnNew,
            CtlBody::ConnRelease { .. } => MsgType::ConnRelease,
            CtlBody::Ack { of } => *of,
        }
    }

    /// How many list items the body carries (0 for a body without a list).
    pub fn item_count(&self) -> usize {
        match self {
            CtlBody::MirrorInsert { entries, .. } | CtlBody::EntryCreated { entries, .. } => {
                entries.len()
            }
            CtlBody::MirrorDelete { keys, .. }
            | CtlBody::EntryOffloaded { keys, .. }
            | CtlBody::EntryExpired { keys, .. } => keys.len(),
            CtlBody::TopnReport { items, .. } => items.len(),
            CtlBody::FlowQueryReply { items } => items.len(),
            CtlBody::FlowExpired { flows } => flows.len(),
            _ => 0,
        }
    }

    /// The payload's encoded length (what `length` will say).
    pub fn payload_len(&self) -> usize {
        let keys = |k: &[Vec<u8>]| k.iter().map(|k| 1 + k.len()).sum::<usize>();
        match self {
            CtlBody::Register { .. } => 10,
            CtlBody::Heartbeat { .. } => 8,
            CtlBody::MirrorInsert { entries, .. } | CtlBody::EntryCreated { entries, .. } => {
                3 + entries.iter().map(MirrorEntry::wire_len).sum::<usize>()
            }
            CtlBody::MirrorDelete { keys: k, .. }
            | CtlBody::EntryOffloaded { keys: k, .. }
            | CtlBody::EntryExpired { keys: k, .. } => 3 + keys(k),
            CtlBody::TopnRequest { .. } => 6,
            CtlBody::TopnReport { items, .. } => 6 + TOPN_ITEM_LEN * items.len(),
            CtlBody::FlowQuery { .. } => 2,
            CtlBody::FlowQueryReply { items } => 2 + FLOW_INFO_LEN * items.len(),
            CtlBody::FlowExpired { flows } => 2 + 16 * flows.len(),
            CtlBody::PoolAssign { .. } => 14,
            CtlBody::ConnNew { .. } | CtlBody::ConnRelease { .. } => 18,
            CtlBody::Ack { .. } => 0,
        }
    }

    /// Writes the payload; refuses keys or data over 255 bytes and lists
    /// over 65,535 items.
    fn write(&self, out: &mut Vec<u8>) -> Result<()> {
        fn count(out: &mut Vec<u8>, n: usize) -> Result<()> {
            let n = u16::try_from(n).map_err(|_| WireError::OutOfRange("CLIP-CTL count"))?;
            out.extend_from_slice(&n.to_be_bytes());
            Ok(())
        }
        fn key(out: &mut Vec<u8>, k: &[u8]) -> Result<()> {
            let n = u8::try_from(k.len()).map_err(|_| WireError::OutOfRange("CLIP-CTL key"))?;
            out.push(n);
            out.extend_from_slice(k);
            Ok(())
        }
        match self {
            CtlBody::Register {
                server_id,
                n_cores,
                mac,
                switch_port,
            } => {
                out.push(*server_id);
                out.push(*n_cores);
                out.extend_from_slice(mac);
                out.extend_from_slice(&switch_port.to_be_bytes());
            }
            CtlBody::Heartbeat { timestamp_ns } => {
                out.extend_from_slice(&timestamp_ns.to_be_bytes())
            }
            CtlBody::MirrorInsert { table_id, entries }
            | CtlBody::EntryCreated { table_id, entries } => {
                out.push(*table_id);
                count(out, entries.len())?;
                for e in entries {
                    key(out, &e.key)?;
                    out.push(e.action_id);
                    key(out, &e.data)?;
                }
            }
            CtlBody::MirrorDelete { table_id, keys }
            | CtlBody::EntryOffloaded { table_id, keys }
            | CtlBody::EntryExpired { table_id, keys } => {
                out.push(*table_id);
                count(out, keys.len())?;
                for k in keys {
                    key(out, k)?;
                }
            }
            CtlBody::TopnRequest { period_id, n } => {
                out.extend_from_slice(&period_id.to_be_bytes());
                out.extend_from_slice(&n.to_be_bytes());
            }
            CtlBody::TopnReport { period_id, items } => {
                out.extend_from_slice(&period_id.to_be_bytes());
                count(out, items.len())?;
                for (flow, est) in items {
                    out.extend_from_slice(flow);
                    out.extend_from_slice(&est.to_be_bytes());
                }
            }
            CtlBody::FlowQuery { grp_ver } => out.extend_from_slice(&grp_ver.to_be_bytes()),
            CtlBody::FlowQueryReply { items } => {
                count(out, items.len())?;
                for i in items {
                    out.extend_from_slice(&i.flow);
                    out.extend_from_slice(&i.first_seen.to_be_bytes());
                    out.extend_from_slice(&i.last_seen.to_be_bytes());
                    out.push(u8::from(i.offloaded));
                }
            }
            CtlBody::FlowExpired { flows } => {
                count(out, flows.len())?;
                for f in flows {
                    out.extend_from_slice(f);
                }
            }
            CtlBody::PoolAssign {
                app_id,
                kind,
                base_ip,
                lo,
                hi,
            } => {
                out.push(*app_id);
                out.push(*kind as u8);
                out.extend_from_slice(base_ip);
                out.extend_from_slice(&lo.to_be_bytes());
                out.extend_from_slice(&hi.to_be_bytes());
            }
            CtlBody::ConnNew { flow, idx } | CtlBody::ConnRelease { flow, idx } => {
                out.extend_from_slice(flow);
                out.extend_from_slice(&idx.to_be_bytes());
            }
            CtlBody::Ack { .. } => {}
        }
        Ok(())
    }

    /// Reads the payload of a message of type `ty`; it must be used up
    /// exactly. An empty payload is read as [`CtlBody::Ack`] (whether
    /// that is allowed is the caller's business: only with REPLY).
    pub fn decode(ty: MsgType, payload: &[u8]) -> Result<CtlBody> {
        if payload.is_empty() {
            return Ok(CtlBody::Ack { of: ty });
        }
        let mut r = Reader { buf: payload };
        let body = match ty {
            MsgType::Register => CtlBody::Register {
                server_id: r.u8()?,
                n_cores: r.u8()?,
                mac: r.array()?,
                switch_port: r.u16()?,
            },
            MsgType::Heartbeat => CtlBody::Heartbeat {
                timestamp_ns: r.u64()?,
            },
            MsgType::MirrorInsert | MsgType::EntryCreated => {
                let table_id = r.u8()?;
                let n = r.count(3)?;
                let mut entries = Vec::with_capacity(n);
                for _ in 0..n {
                    let key = r.key()?;
                    let action_id = r.u8()?;
                    let data = r.key()?;
                    entries.push(MirrorEntry {
                        key,
                        action_id,
                        data,
                    });
                }
                if ty == MsgType::MirrorInsert {
                    CtlBody::MirrorInsert { table_id, entries }
                } else {
                    CtlBody::EntryCreated { table_id, entries }
                }
            }
            MsgType::MirrorDelete | MsgType::EntryOffloaded | MsgType::EntryExpired => {
                let table_id = r.u8()?;
                let n = r.count(1)?;
                let mut keys = Vec::with_capacity(n);
                for _ in 0..n {
                    keys.push(r.key()?);
                }
                match ty {
                    MsgType::MirrorDelete => CtlBody::MirrorDelete { table_id, keys },
                    MsgType::EntryOffloaded => CtlBody::EntryOffloaded { table_id, keys },
                    _ => CtlBody::EntryExpired { table_id, keys },
                }
            }
            MsgType::TopnRequest => CtlBody::TopnRequest {
                period_id: r.u32()?,
                n: r.u16()?,
            },
            MsgType::TopnReport => {
                let period_id = r.u32()?;
                let n = r.count(TOPN_ITEM_LEN)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push((r.array()?, r.u32()?));
                }
                CtlBody::TopnReport { period_id, items }
            }
            MsgType::FlowQuery => CtlBody::FlowQuery { grp_ver: r.u16()? },
            MsgType::FlowQueryReply => {
                let n = r.count(FLOW_INFO_LEN)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(FlowInfo {
                        flow: r.array()?,
                        first_seen: r.u64()?,
                        last_seen: r.u64()?,
                        offloaded: match r.u8()? {
                            0 => false,
                            1 => true,
                            _ => return Err(WireError::Malformed("CLIP-CTL offloaded not 0/1")),
                        },
                    });
                }
                CtlBody::FlowQueryReply { items }
            }
            MsgType::FlowExpired => {
                let n = r.count(16)?;
                let mut flows = Vec::with_capacity(n);
                for _ in 0..n {
                    flows.push(r.array()?);
                }
                CtlBody::FlowExpired { flows }
            }
            MsgType::PoolAssign => CtlBody::PoolAssign {
                app_id: r.u8()?,
                kind: PoolKind::from_u8(r.u8()?)?,
                base_ip: r.array()?,
                lo: r.u32()?,
                hi: r.u32()?,
            },
            MsgType::ConnNew => CtlBody::ConnNew {
                flow: r.array()?,
                idx: r.u16()?,
            },
            MsgType::ConnRelease => CtlBody::ConnRelease {
                flow: r.array()?,
                idx: r.u16()?,
            },
        };
        if !r.buf.is_empty() {
            return Err(WireError::Malformed("CLIP-CTL payload has trailing bytes"));
        }
        Ok(body)
    }
}

/// A bounds-checked cursor over a payload.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.buf.len() < n {
            return Err(WireError::Truncated);
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    /// `len` 8 ‖ bytes.
    fn key(&mut self) -> Result<Vec<u8>> {
        let n = self.u8()?;
        Ok(self.take(usize::from(n))?.to_vec())
    }

    /// A 16-bit count, checked against the bytes left at `min_item` bytes
    /// per item before anything is allocated for it.
    fn count(&mut self, min_item: usize) -> Result<usize> {
        let n = usize::from(self.u16()?);
        if n > self.buf.len() / min_item {
            return Err(WireError::Malformed("CLIP-CTL count exceeds the payload"));
        }
        Ok(n)
    }
}

/// One CLIP-CTL message: header fields and body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CtlMessage {
    /// Transaction id (a reply echoes its request's).
    pub txn_id: u32,
    /// [`CONTROLLER_ID`] or the sending server's id.
    pub sender: u8,
    /// The REPLY flag (always sent for [`CtlBody::Ack`]).
    pub reply: bool,
    /// The MORE flag: the list continues in the next message.
    pub more: bool,
    /// Type and payload.
    pub body: CtlBody,
}

impl CtlMessage {
    /// The datagram: header and payload. Refuses (`OutOfRange`) a key or
    /// entry data over 255 bytes, a list over 65,535 items and a payload
    /// over 65,535 bytes. [`CtlBody::Ack`] is sent with REPLY set even if
    /// `reply` is false.
    pub fn try_encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(HEADER_LEN + self.body.payload_len());
        out.extend_from_slice(&[0; HEADER_LEN]);
        self.body.write(&mut out)?;
        let payload_len = u16::try_from(out.len() - HEADER_LEN)
            .map_err(|_| WireError::OutOfRange("CLIP-CTL payload over 65535 bytes"))?;
        let reply = self.reply || matches!(self.body, CtlBody::Ack { .. });
        let h = CtlHeaderRepr {
            msg_type: self.body.msg_type(),
            txn_id: self.txn_id,
            payload_len,
            sender: self.sender,
            flags: if reply { FLAG_REPLY } else { 0 } | if self.more { FLAG_MORE } else { 0 },
        };
        h.emit(&mut out)?;
        Ok(out)
    }

    /// The datagram, as [`try_encode`](Self::try_encode) builds it; a
    /// message it refuses (a key over 255 bytes, a list over 65,535
    /// items, a payload over 65,535 bytes: none of which [`split`] parts
    /// of well-formed bodies produce) encodes to an empty Vec, which
    /// [`decode`](Self::decode) refuses.
    pub fn encode(&self) -> Vec<u8> {
        self.try_encode().unwrap_or_default()
    }

    /// Reads one datagram, strictly: the header (magic, version, a known
    /// type, no reserved flag bits), exactly `length` payload bytes after
    /// it, and a payload that is the type's, used up exactly (an empty one
    /// only with REPLY: an [`CtlBody::Ack`]).
    pub fn decode(datagram: &[u8]) -> Result<CtlMessage> {
        let h = CtlHeader::new_checked(datagram)?;
        let ty = h.msg_type()?;
        if datagram[11] & !FLAGS_MASK != 0 {
            return Err(WireError::Malformed("CLIP-CTL reserved flag bits set"));
        }
        if datagram.len() < h.total_len() {
            return Err(WireError::Truncated);
        }
        if datagram.len() > h.total_len() {
            return Err(WireError::Malformed("CLIP-CTL bytes after the payload"));
        }
        let body = CtlBody::decode(ty, h.payload())?;
        if matches!(body, CtlBody::Ack { .. }) && !h.reply() {
            return Err(WireError::Malformed("CLIP-CTL empty payload without REPLY"));
        }
        Ok(CtlMessage {
            txn_id: h.txn_id(),
            sender: h.sender(),
            reply: h.reply(),
            more: h.more(),
            body,
        })
    }
}

/// Cuts a list-carrying body into parts whose messages (header included)
/// are at most `max` bytes each (pass [`MAX_DATAGRAM`]) and carry at most
/// 65,535 items, keeping every item exactly once and in order. A body
/// without a list, or whose list fits, comes back as the one part; an
/// empty list stays one part with no items. An item too big to fit `max`
/// on its own still gets a part of its own (so nothing is lost; its
/// message is longer than `max`). Callers send the parts in order and set
/// MORE on all but the last.
pub fn split(body: CtlBody, max: usize) -> Vec<CtlBody> {
    /// Greedy cut of `items` given the fixed bytes and each item's size.
    fn chunks<T>(
        items: Vec<T>,
        fixed: usize,
        max: usize,
        size: impl Fn(&T) -> usize,
    ) -> Vec<Vec<T>> {
        let mut parts = Vec::new();
        let mut cur = Vec::new();
        let mut len = HEADER_LEN + fixed;
        for item in items {
            let s = size(&item);
            if !cur.is_empty() && (len + s > max || cur.len() == usize::from(u16::MAX)) {
                parts.push(std::mem::take(&mut cur));
                len = HEADER_LEN + fixed;
            }
            len += s;
            cur.push(item);
        }
        parts.push(cur);
        parts
    }
    let key_len = |k: &Vec<u8>| 1 + k.len();
    match body {
        CtlBody::MirrorInsert { table_id, entries } => {
            chunks(entries, 3, max, MirrorEntry::wire_len)
                .into_iter()
                .map(|entries| CtlBody::MirrorInsert { table_id, entries })
                .collect()
        }
        CtlBody::EntryCreated { table_id, entries } => {
            chunks(entries, 3, max, MirrorEntry::wire_len)
                .into_iter()
                .map(|entries| CtlBody::EntryCreated { table_id, entries })
                .collect()
        }
        CtlBody::MirrorDelete { table_id, keys } => chunks(keys, 3, max, key_len)
            .into_iter()
            .map(|keys| CtlBody::MirrorDelete { table_id, keys })
            .collect(),
        CtlBody::EntryOffloaded { table_id, keys } => chunks(keys, 3, max, key_len)
            .into_iter()
            .map(|keys| CtlBody::EntryOffloaded { table_id, keys })
            .collect(),
        CtlBody::EntryExpired { table_id, keys } => chunks(keys, 3, max, key_len)
            .into_iter()
            .map(|keys| CtlBody::EntryExpired { table_id, keys })
            .collect(),
        CtlBody::TopnReport { period_id, items } => chunks(items, 6, max, |_| TOPN_ITEM_LEN)
            .into_iter()
            .map(|items| CtlBody::TopnReport { period_id, items })
            .collect(),
        CtlBody::FlowQueryReply { items } => chunks(items, 2, max, |_| FLOW_INFO_LEN)
            .into_iter()
            .map(|items| CtlBody::FlowQueryReply { items })
            .collect(),
        CtlBody::FlowExpired { flows } => chunks(flows, 2, max, |_| 16)
            .into_iter()
            .map(|flows| CtlBody::FlowExpired { flows })
            .collect(),
        other => vec![other],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(i: u32) -> FlowKey {
        let mut f = [0u8; 16];
        f[0] = 0xF1;
        f[12..].copy_from_slice(&i.to_be_bytes());
        f
    }

    fn entry(i: usize) -> MirrorEntry {
        MirrorEntry {
            key: vec![i as u8; 1 + i % 20],
            action_id: i as u8,
            data: vec![0xDA; i % 7],
        }
    }

    fn every_body() -> Vec<CtlBody> {
        vec![
            CtlBody::Register {
                server_id: 3,
                n_cores: 8,
                mac: [2, 0, 0, 0, 0, 3],
                switch_port: 17,
            },
            CtlBody::Heartbeat {
                timestamp_ns: 1_234_567_890_123,
            },
            CtlBody::MirrorInsert {
                table_id: 1,
                entries: vec![entry(0), entry(5), entry(30)],
            },
            CtlBody::MirrorDelete {
                table_id: 1,
                keys: vec![vec![1, 2, 3], vec![], vec![9; 255]],
            },
            CtlBody::EntryCreated {
                table_id: 2,
                entries: vec![entry(1)],
            },
            CtlBody::EntryOffloaded {
                table_id: 2,
                keys: vec![vec![7; 16]],
            },
            CtlBody::EntryExpired {
                table_id: 2,
                keys: vec![],
            },
            CtlBody::TopnRequest {
                period_id: 41,
                n: 256,
            },
            CtlBody::TopnReport {
                period_id: 41,
                items: vec![(flow(1), 900), (flow(2), 17)],
            },
            CtlBody::FlowQuery { grp_ver: 2 },
            CtlBody::FlowQueryReply {
                items: vec![
                    FlowInfo {
                        flow: flow(5),
                        first_seen: 10,
                        last_seen: 20,
                        offloaded: true,
                    },
                    FlowInfo {
                        flow: flow(6),
                        first_seen: 11,
                        last_seen: u64::MAX,
                        offloaded: false,
                    },
                ],
            },
            CtlBody::FlowExpired {
                flows: vec![flow(8), flow(9)],
            },
            CtlBody::PoolAssign {
                app_id: 3,
                kind: PoolKind::SnatPorts,
                base_ip: [198, 51, 100, 1],
                lo: 1024,
                hi: 33_791,
            },
            CtlBody::PoolAssign {
                app_id: 4,
                kind: PoolKind::TrdIndices,
                base_ip: [0; 4],
                lo: 0,
                hi: 32_767,
            },
            CtlBody::ConnNew {
                flow: flow(3),
                idx: 77,
            },
            CtlBody::ConnRelease {
                flow: flow(3),
                idx: 77,
            },
            CtlBody::Ack {
                of: MsgType::MirrorInsert,
            },
        ]
    }

    #[test]
    fn header_layout_is_the_spec_s() {
        let m = CtlMessage {
            txn_id: 0x0102_0304,
            sender: 0,
            reply: false,
            more: true,
            body: CtlBody::FlowQuery { grp_ver: 0xBEEF },
        };
        assert_eq!(
            m.encode(),
            [0xC1, 0x1C, 1, 0x30, 1, 2, 3, 4, 0, 2, 0, 0x02, 0xBE, 0xEF]
        );
        let h = CtlHeaderRepr::parse(&m.encode()).unwrap();
        assert_eq!(
            h,
            CtlHeaderRepr {
                msg_type: MsgType::FlowQuery,
                txn_id: 0x0102_0304,
                payload_len: 2,
                sender: 0,
                flags: FLAG_MORE,
            }
        );
        assert_eq!(h.to_bytes()[..], m.encode()[..12]);
        let v = CtlHeader::new_checked(m.encode()).unwrap();
        assert_eq!((v.magic(), v.version(), v.type_byte()), (MAGIC, 1, 0x30));
        assert_eq!((v.reply(), v.more(), v.total_len()), (false, true, 14));
        // The REGISTER payload, byte by byte.
        let reg = CtlMessage {
            txn_id: 7,
            sender: 3,
            reply: false,
            more: false,
            body: every_body().remove(0),
        };
        assert_eq!(
            reg.encode()[8..],
            [0, 10, 3, 0, 3, 8, 2, 0, 0, 0, 0, 3, 0, 17]
        );
    }

    #[test]
    fn every_type_round_trips() {
        let mut seen = std::collections::BTreeSet::new();
        for (i, body) in every_body().into_iter().enumerate() {
            seen.insert(body.msg_type());
            for (reply, more) in [(false, false), (true, false), (false, true), (true, true)] {
                let reply = reply || matches!(body, CtlBody::Ack { .. });
                let m = CtlMessage {
                    txn_id: 1000 + i as u32,
                    sender: i as u8,
                    reply,
                    more,
                    body: body.clone(),
                };
                let b = m.encode();
                assert_eq!(b.len(), HEADER_LEN + body.payload_len(), "{body:?}");
                assert_eq!(CtlMessage::decode(&b), Ok(m.clone()), "{body:?}");
                assert_eq!(b[3], body.msg_type() as u8);
                // Truncated or with extra bytes: refused.
                assert!(CtlMessage::decode(&b[..b.len() - 1]).is_err(), "{body:?}");
                let mut long = b.clone();
                long.push(0);
                assert!(CtlMessage::decode(&long).is_err(), "{body:?}");
                // Extra bytes counted in the length: refused by the payload.
                let mut padded = long.clone();
                let n = u16::from_be_bytes([padded[8], padded[9]]) + 1;
                padded[8..10].copy_from_slice(&n.to_be_bytes());
                assert!(CtlMessage::decode(&padded).is_err(), "{body:?}");
            }
        }
        assert_eq!(seen.len(), MsgType::ALL.len(), "every type is covered");
    }

    #[test]
    fn malformed_messages_are_refused() {
        let ok = CtlMessage {
            txn_id: 1,
            sender: 1,
            reply: false,
            more: false,
            body: CtlBody::TopnReport {
                period_id: 1,
                items: vec![(flow(1), 1)],
            },
        }
        .encode();
        assert!(CtlMessage::decode(&ok).is_ok());
        assert_eq!(CtlMessage::decode(&ok[..11]), Err(WireError::Truncated));
        let bad = |at: usize, v: u8| {
            let mut b = ok.clone();
            b[at] = v;
            CtlMessage::decode(&b)
        };
        assert!(bad(0, 0xC2).is_err(), "magic");
        assert!(bad(2, 2).is_err(), "version");
        assert!(bad(3, 0x02).is_err(), "unknown type");
        assert!(bad(3, 0x43).is_err(), "unknown type");
        assert!(bad(11, 0x04).is_err(), "reserved flag");
        // A count that promises more items than the bytes hold, or fewer.
        assert!(bad(HEADER_LEN + 5, 2).is_err());
        assert!(bad(HEADER_LEN + 5, 0).is_err());
        // An empty payload is an ack only with REPLY.
        let ack = CtlMessage {
            txn_id: 9,
            sender: 0,
            reply: false,
            more: false,
            body: CtlBody::Ack {
                of: MsgType::Register,
            },
        }
        .encode();
        assert_eq!(ack[11], FLAG_REPLY, "an ack always carries REPLY");
        let mut no_reply = ack.clone();
        no_reply[11] = 0;
        assert!(CtlMessage::decode(&no_reply).is_err());
        // offloaded must be 0 or 1; pool kind 1 or 2.
        let mut q = CtlMessage {
            txn_id: 1,
            sender: 1,
            reply: true,
            more: false,
            body: CtlBody::FlowQueryReply {
                items: vec![FlowInfo {
                    flow: flow(1),
                    first_seen: 0,
                    last_seen: 0,
                    offloaded: true,
                }],
            },
        }
        .encode();
        let last = q.len() - 1;
        q[last] = 2;
        assert!(CtlMessage::decode(&q).is_err());
        let mut p = CtlMessage {
            txn_id: 1,
            sender: 0,
            reply: false,
            more: false,
            body: every_body()[12].clone(),
        }
        .encode();
        p[HEADER_LEN + 1] = 3;
        assert!(CtlMessage::decode(&p).is_err());
        // A key longer than what is left.
        let mut d = CtlMessage {
            txn_id: 1,
            sender: 0,
            reply: false,
            more: false,
            body: CtlBody::MirrorDelete {
                table_id: 0,
                keys: vec![vec![1, 2]],
            },
        }
        .encode();
        d[HEADER_LEN + 3] = 3;
        assert_eq!(CtlMessage::decode(&d), Err(WireError::Truncated));
        // Encoders refuse what the wire cannot carry.
        let long_key = CtlMessage {
            txn_id: 1,
            sender: 0,
            reply: false,
            more: false,
            body: CtlBody::MirrorDelete {
                table_id: 0,
                keys: vec![vec![0; 256]],
            },
        };
        assert!(long_key.try_encode().is_err());
        assert!(long_key.encode().is_empty());
        assert!(CtlMessage::decode(&long_key.encode()).is_err());
    }

    /// A list body's payload as (fields before the count, item bytes).
    fn list_of(b: &CtlBody) -> (Vec<u8>, Vec<u8>) {
        let payload = CtlMessage {
            txn_id: 0,
            sender: 0,
            reply: false,
            more: false,
            body: b.clone(),
        }
        .encode()[HEADER_LEN..]
            .to_vec();
        let k = match b.msg_type() {
            MsgType::TopnReport => 6,
            MsgType::FlowQueryReply | MsgType::FlowExpired => 2,
            MsgType::MirrorInsert
            | MsgType::EntryCreated
            | MsgType::MirrorDelete
            | MsgType::EntryOffloaded
            | MsgType::EntryExpired => 3,
            _ => return (payload, Vec::new()),
        };
        (payload[..k - 2].to_vec(), payload[k..].to_vec())
    }

    #[test]
    fn split_keeps_every_item_once_and_fits_the_datagram() {
        let flows: Vec<FlowKey> = (0..500).map(flow).collect();
        let bodies = vec![
            CtlBody::MirrorInsert {
                table_id: 4,
                entries: (0..300).map(entry).collect(),
            },
            CtlBody::EntryCreated {
                table_id: 4,
                entries: (0..10)
                    .map(|i| MirrorEntry {
                        key: vec![i; 255],
                        action_id: i,
                        data: vec![i; 255],
                    })
                    .collect(),
            },
            CtlBody::MirrorDelete {
                table_id: 5,
                keys: (0..400).map(|i| vec![i as u8; i % 40]).collect(),
            },
            CtlBody::EntryOffloaded {
                table_id: 5,
                keys: (0..100).map(|i| vec![i as u8; 13]).collect(),
            },
            CtlBody::EntryExpired {
                table_id: 5,
                keys: (0..1000).map(|i| vec![i as u8; 4]).collect(),
            },
            CtlBody::TopnReport {
                period_id: 3,
                items: flows.iter().map(|f| (*f, 5)).collect(),
            },
            CtlBody::FlowQueryReply {
                items: flows
                    .iter()
                    .map(|f| FlowInfo {
                        flow: *f,
                        first_seen: 1,
                        last_seen: 2,
                        offloaded: false,
                    })
                    .collect(),
            },
            CtlBody::FlowExpired {
                flows: flows.clone(),
            },
            CtlBody::FlowExpired { flows: vec![] },
            CtlBody::FlowQuery { grp_ver: 1 },
        ];
        for body in bodies {
            let parts = split(body.clone(), MAX_DATAGRAM);
            assert!(!parts.is_empty());
            let (fixed, items) = list_of(&body);
            let mut joined = Vec::new();
            let mut count = 0;
            for p in &parts {
                assert_eq!(p.msg_type(), body.msg_type());
                let m = CtlMessage {
                    txn_id: 1,
                    sender: 1,
                    reply: false,
                    more: true,
                    body: p.clone(),
                };
                let bytes = m.try_encode().unwrap();
                assert!(bytes.len() <= MAX_DATAGRAM, "{} bytes", bytes.len());
                assert_eq!(CtlMessage::decode(&bytes).unwrap().body, *p);
                assert!(p.item_count() > 0 || parts.len() == 1);
                let (f, i) = list_of(p);
                assert_eq!(f, fixed, "every part keeps the fixed fields");
                joined.extend(i);
                count += p.item_count();
            }
            // Items are self-delimiting: the same bytes and count are the
            // same items in the same order.
            assert_eq!(joined, items, "every item exactly once, in order");
            assert_eq!(count, body.item_count());
            if HEADER_LEN + body.payload_len() <= MAX_DATAGRAM {
                assert_eq!(parts.len(), 1);
            } else {
                assert!(parts.len() > 1);
            }
        }
        // 1400-byte parts of FlowInfo hold (1400 - 14) / 33 = 42 items.
        let parts = split(
            CtlBody::FlowQueryReply {
                items: vec![
                    FlowInfo {
                        flow: flow(0),
                        first_seen: 0,
                        last_seen: 0,
                        offloaded: false
                    };
                    100
                ],
            },
            MAX_DATAGRAM,
        );
        assert_eq!(
            parts.iter().map(CtlBody::item_count).collect::<Vec<_>>(),
            [42, 42, 16]
        );
        // A max below one item: one item per part, nothing lost.
        let parts = split(
            CtlBody::FlowExpired {
                flows: flows[..3].to_vec(),
            },
            10,
        );
        assert_eq!(parts.len(), 3);
    }
}
