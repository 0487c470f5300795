//! The messages of §4.6 as one typed enum, and whole frames.
//!
//! [`Message::decode`] reads a body given its type; [`Frame::decode`] reads
//! header and body and insists the header's `length` is exactly the body
//! given. Items are checked against the body before they are allocated (see
//! `codec`). Encoders refuse what the wire cannot carry: keys over 255
//! bytes, counts over their field, bodies over [`MAX_BODY_LEN`].
//!
//! Body layouts (big-endian; Key/Val = `len` 8 ‖ bytes; Entry = `obj` 16 ‖
//! Key ‖ Val ‖ `version` 64):
//!
//! ```text
//! 0x01 HELLO          pdev 16 | caps 32 | lost_state 8 (0/1)
//! 0x02 HELLO_ACK      round 64 | n 8 | n × (ldev 8 | role 8: 0 primary, 1 replica)
//! 0x10 WRITE_REQ      app 8 | uk Key | n 16 | n × (op 8 | obj 16 | Key | Val)
//! 0x11 WRITE_APPLY    app 8 | n 16 | n × (op 8 | Entry)
//! 0x12 WRITE_APPLIED  status 8: 0 OK, 1 FAILED
//! 0x13 WRITE_ACK      n 16 | n × (status 8: 0 OK, 1 EXISTS, 2 FAILED | version 64)
//! 0x20 PROMOTE_REPORT app 8 | uk Key | estimate 32 | elapsed_us 32
//! 0x21 EVENT_FWD      app 8 | len 16 | len bytes of frame
//! 0x30 SYNC_REQ       round 64 | n 32 | n × (app 8 | obj 16 | Key | snap 64 | hist 64)
//! 0x31 SYNC_RESP      same as SYNC_REQ
//! 0x40 DUMP           app 8 | n 32 | n × (op 8 | Entry) | last 8 (0/1)
//! 0x42 REJOIN         n 32 | n × (app 8 | obj 16 | Key | H 64)
//! 0x43 REJOIN_DONE    empty
//! 0x50 PING, 0x51 PONG  ts 64
//! ```
//!
//! `op` is a [`WriteOp`] (1 INSERT_IF_ABSENT, 2 UPSERT, 3 DELETE) wherever it
//! appears [our choice for WRITE_APPLY and DUMP, where the spec only says
//! `op` 8].
//!
//! Four fields extend §4.6's bodies [our choice], each something the
//! receiver needs and could not otherwise learn: WRITE_REQ's `uk` (the flow
//! that asks; the hub places the writes on shard(UK)'s holders, §5.4), DUMP's
//! `app` (object ids are per app, and a DUMP carries one app's entries), and
//! the `app` of each SYNC and REJOIN item (one round covers every app's
//! shared entries on the device, so `obj` alone does not name the entry).

use super::codec::{count_as, Reader, Writer};
use super::{ControlError, FrameHeader, HeaderRepr, HEADER_LEN, MAX_BODY_LEN};

macro_rules! code_enum {
    ($(#[$m:meta])* $name:ident, $field:literal { $($(#[$vm:meta])* $v:ident = $c:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum $name {
            $($(#[$vm])* $v = $c),+
        }

        impl $name {
            /// Every value, in code order.
            pub const ALL: &'static [$name] = &[$($name::$v),+];

            /// Decodes the byte; an undefined value is [`ControlError::BadValue`].
            pub fn from_u8(value: u8) -> Result<Self, ControlError> {
                match value {
                    $($c => Ok($name::$v),)+
                    _ => Err(ControlError::BadValue { field: $field, value }),
                }
            }
        }
    };
}

code_enum!(
    /// `op` of a write (WRITE_REQ, WRITE_APPLY, DUMP).
    WriteOp, "op" {
        /// Insert only if the key is absent (new flows).
        InsertIfAbsent = 1,
        /// Insert or overwrite.
        Upsert = 2,
        /// Remove the key.
        Delete = 3,
    }
);

code_enum!(
    /// A logical device's role on a physical device (HELLO_ACK).
    Role, "role" {
        /// Serves the logical device's traffic.
        Primary = 0,
        /// Holds a copy; takes over on failover.
        Replica = 1,
    }
);

code_enum!(
    /// WRITE_APPLIED `status`.
    AppliedStatus, "status" {
        /// Applied.
        Ok = 0,
        /// Could not apply (e.g. table full).
        Failed = 1,
    }
);

code_enum!(
    /// WRITE_ACK per-write `status`.
    AckStatus, "status" {
        /// Written.
        Ok = 0,
        /// INSERT_IF_ABSENT found the key present.
        Exists = 1,
        /// Not written.
        Failed = 2,
    }
);

code_enum!(
    /// Frame `type` (§4.6 table).
    MsgType, "type" {
        /// daemon → hub.
        Hello = 0x01,
        /// hub → daemon.
        HelloAck = 0x02,
        /// daemon → hub.
        WriteReq = 0x10,
        /// hub → holder.
        WriteApply = 0x11,
        /// holder → hub.
        WriteApplied = 0x12,
        /// hub → requester.
        WriteAck = 0x13,
        /// daemon → hub.
        PromoteReport = 0x20,
        /// hub → daemon.
        EventFwd = 0x21,
        /// hub → daemon.
        SyncReq = 0x30,
        /// daemon → hub.
        SyncResp = 0x31,
        /// hub → daemon.
        Dump = 0x40,
        /// hub → daemon.
        Rejoin = 0x42,
        /// daemon → hub.
        RejoinDone = 0x43,
        /// Either way.
        Ping = 0x50,
        /// Either way.
        Pong = 0x51,
    }
);

impl MsgType {
    /// Decodes a header's type byte; an undefined one is
    /// [`ControlError::UnknownType`].
    pub fn from_type_byte(value: u8) -> Result<Self, ControlError> {
        MsgType::from_u8(value).map_err(|_| ControlError::UnknownType(value))
    }

    /// The §4.6 name.
    pub fn name(self) -> &'static str {
        match self {
            MsgType::Hello => "HELLO",
            MsgType::HelloAck => "HELLO_ACK",
            MsgType::WriteReq => "WRITE_REQ",
            MsgType::WriteApply => "WRITE_APPLY",
            MsgType::WriteApplied => "WRITE_APPLIED",
            MsgType::WriteAck => "WRITE_ACK",
            MsgType::PromoteReport => "PROMOTE_REPORT",
            MsgType::EventFwd => "EVENT_FWD",
            MsgType::SyncReq => "SYNC_REQ",
            MsgType::SyncResp => "SYNC_RESP",
            MsgType::Dump => "DUMP",
            MsgType::Rejoin => "REJOIN",
            MsgType::RejoinDone => "REJOIN_DONE",
            MsgType::Ping => "PING",
            MsgType::Pong => "PONG",
        }
    }
}

/// One logical device and its role (HELLO_ACK item).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LdevRole {
    /// Logical device id.
    pub ldev: u8,
    /// Role on the receiving physical device.
    pub role: Role,
}

/// One requested write (WRITE_REQ item).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Write {
    /// What to do.
    pub op: WriteOp,
    /// Object id.
    pub obj: u16,
    /// Key (≤ 255 bytes).
    pub key: Vec<u8>,
    /// Value (≤ 255 bytes; empty for DELETE by convention).
    pub val: Vec<u8>,
}

/// A versioned object entry: `obj` 16 ‖ Key ‖ Val ‖ `version` 64.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Entry {
    /// Object id.
    pub obj: u16,
    /// Key (≤ 255 bytes).
    pub key: Vec<u8>,
    /// Value (≤ 255 bytes).
    pub val: Vec<u8>,
    /// Write order assigned by the hub.
    pub version: u64,
}

impl Entry {
    /// Bytes on the wire (for senders splitting batches under [`MAX_BODY_LEN`]).
    pub fn encoded_len(&self) -> usize {
        2 + 1 + self.key.len() + 1 + self.val.len() + 8
    }
}

/// `op` 8 ‖ Entry (WRITE_APPLY and DUMP item).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OpEntry {
    /// What to do with the entry.
    pub op: WriteOp,
    /// The entry.
    pub entry: Entry,
}

/// The outcome of one write (WRITE_ACK item).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WriteResult {
    /// Outcome.
    pub status: AckStatus,
    /// Version of the entry after the write (or the existing one's).
    pub version: u64,
}

/// One data-plane object entry's synchronisation state (SYNC_REQ/SYNC_RESP
/// item, Algorithms 3–4).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SyncItem {
    /// Application id [our choice: not in §4.6's item].
    pub app: u8,
    /// Object id.
    pub obj: u16,
    /// Key (≤ 255 bytes).
    pub key: Vec<u8>,
    /// Snapshot value.
    pub snap: u64,
    /// History value.
    pub hist: u64,
}

impl SyncItem {
    /// Bytes on the wire.
    pub fn encoded_len(&self) -> usize {
        1 + 2 + 1 + self.key.len() + 16
    }
}

/// One key's history value for a recovering device (REJOIN item).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RejoinItem {
    /// Application id [our choice: not in §4.6's item].
    pub app: u8,
    /// Object id.
    pub obj: u16,
    /// Key (≤ 255 bytes).
    pub key: Vec<u8>,
    /// `H`: the history to restore.
    pub h: u64,
}

impl RejoinItem {
    /// Bytes on the wire.
    pub fn encoded_len(&self) -> usize {
        1 + 2 + 1 + self.key.len() + 8
    }
}

impl OpEntry {
    /// Bytes on the wire.
    pub fn encoded_len(&self) -> usize {
        1 + self.entry.encoded_len()
    }
}

/// Body bytes of a DUMP besides its items (`app`, `n`, `last`), for senders
/// splitting a dump under [`MAX_BODY_LEN`].
pub const DUMP_FIXED_LEN: usize = 1 + 4 + 1;
/// Body bytes of a SYNC_REQ or SYNC_RESP besides its items (`round`, `n`).
pub const SYNC_FIXED_LEN: usize = 8 + 4;
/// Body bytes of a REJOIN besides its items (`n`).
pub const REJOIN_FIXED_LEN: usize = 4;

/// A control message: one variant per row of the §4.6 table.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Message {
    /// A daemon introduces its physical device.
    Hello {
        /// Physical device id.
        pdev: u16,
        /// Feature bitmap (§5.9).
        caps: u32,
        /// The device restarted without its state.
        lost_state: bool,
    },
    /// The hub assigns logical devices (at most 255).
    HelloAck {
        /// Current synchronisation round.
        round: u64,
        /// Logical devices and roles.
        ldevs: Vec<LdevRole>,
    },
    /// Strong writes a daemon asks for (at most 65,535).
    WriteReq {
        /// Application id.
        app: u8,
        /// Union key of the flow whose setup asks for the writes
        /// [our choice: not in §4.6's body].
        uk: Vec<u8>,
        /// The writes.
        writes: Vec<Write>,
    },
    /// Writes the hub orders a holder to apply (at most 65,535).
    WriteApply {
        /// Application id.
        app: u8,
        /// Versioned entries.
        entries: Vec<OpEntry>,
    },
    /// A holder's answer to WRITE_APPLY.
    WriteApplied {
        /// Outcome.
        status: AppliedStatus,
    },
    /// The hub's answer to WRITE_REQ, one result per write (at most 65,535).
    WriteAck {
        /// Per-write outcomes, in request order.
        results: Vec<WriteResult>,
    },
    /// A popular union key, for promotion (§5.5).
    PromoteReport {
        /// Application id.
        app: u8,
        /// Union key.
        uk: Vec<u8>,
        /// Count-min estimate.
        estimate: u32,
        /// Measurement window in µs.
        elapsed_us: u32,
    },
    /// A control event raised by a switch-served packet (frame ≤ 65,535 B).
    EventFwd {
        /// Application id.
        app: u8,
        /// The frame.
        frame: Vec<u8>,
    },
    /// The hub starts synchronisation round `round`.
    SyncReq {
        /// Round.
        round: u64,
        /// Entries.
        items: Vec<SyncItem>,
    },
    /// A daemon's reply to SYNC_REQ.
    SyncResp {
        /// Round.
        round: u64,
        /// Entries.
        items: Vec<SyncItem>,
    },
    /// State for a recovering device, in chunks.
    Dump {
        /// Application id of every entry [our choice: not in §4.6's body].
        app: u8,
        /// Entries.
        entries: Vec<OpEntry>,
        /// The final chunk.
        last: bool,
    },
    /// History values for a recovering device.
    Rejoin {
        /// Items.
        items: Vec<RejoinItem>,
    },
    /// The recovering device applied REJOIN.
    RejoinDone,
    /// Liveness probe (every 250 ms; 3 misses ⇒ peer dead).
    Ping {
        /// Sender's clock.
        ts: u64,
    },
    /// Answer to PING, echoing `ts`.
    Pong {
        /// The PING's `ts`.
        ts: u64,
    },
}

/// Smallest encodings of items, for the count checks.
const LDEV_MIN: usize = 2;
const WRITE_MIN: usize = 1 + 2 + 1 + 1;
const ENTRY_MIN: usize = 2 + 1 + 1 + 8;
const OP_ENTRY_MIN: usize = 1 + ENTRY_MIN;
const RESULT_MIN: usize = 1 + 8;
const SYNC_MIN: usize = 1 + 2 + 1 + 16;
const REJOIN_MIN: usize = 1 + 2 + 1 + 8;

fn read_entry(r: &mut Reader<'_>) -> Result<Entry, ControlError> {
    Ok(Entry {
        obj: r.u16("obj")?,
        key: r.key("key")?,
        val: r.key("val")?,
        version: r.u64("version")?,
    })
}

fn read_op_entries(r: &mut Reader<'_>, n: usize) -> Result<Vec<OpEntry>, ControlError> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let op = WriteOp::from_u8(r.u8("op")?)?;
        v.push(OpEntry {
            op,
            entry: read_entry(r)?,
        });
    }
    Ok(v)
}

fn read_sync(r: &mut Reader<'_>) -> Result<(u64, Vec<SyncItem>), ControlError> {
    let round = r.u64("round")?;
    let n = r.u32("n")?;
    let n = r.count("n", n.into(), SYNC_MIN)?;
    let mut items = Vec::with_capacity(n);
    for _ in 0..n {
        items.push(SyncItem {
            app: r.u8("app")?,
            obj: r.u16("obj")?,
            key: r.key("key")?,
            snap: r.u64("snap")?,
            hist: r.u64("hist")?,
        });
    }
    Ok((round, items))
}

fn write_entry(w: &mut Writer, e: &Entry) -> Result<(), ControlError> {
    w.u16(e.obj);
    w.key("key", &e.key)?;
    w.key("val", &e.val)?;
    w.u64(e.version);
    Ok(())
}

fn write_op_entries(w: &mut Writer, v: &[OpEntry]) -> Result<(), ControlError> {
    for oe in v {
        w.u8(oe.op as u8);
        write_entry(w, &oe.entry)?;
    }
    Ok(())
}

fn write_sync(w: &mut Writer, round: u64, items: &[SyncItem]) -> Result<(), ControlError> {
    w.u64(round);
    w.u32(count_as("n", items.len())?);
    for i in items {
        w.u8(i.app);
        w.u16(i.obj);
        w.key("key", &i.key)?;
        w.u64(i.snap);
        w.u64(i.hist);
    }
    Ok(())
}

impl Message {
    /// The frame type that carries this message.
    pub fn msg_type(&self) -> MsgType {
        match self {
            Message::Hello { .. } => MsgType::Hello,
            Message::HelloAck { .. } => MsgType::HelloAck,
            Message::WriteReq { .. } => MsgType::WriteReq,
            Message::WriteApply { .. } => MsgType::WriteApply,
            Message::WriteApplied { .. } => MsgType::WriteApplied,
            Message::WriteAck { .. } => MsgType::WriteAck,
            Message::PromoteReport { .. } => MsgType::PromoteReport,
            Message::EventFwd { .. } => MsgType::EventFwd,
            Message::SyncReq { .. } => MsgType::SyncReq,
            Message::SyncResp { .. } => MsgType::SyncResp,
            Message::Dump { .. } => MsgType::Dump,
            Message::Rejoin { .. } => MsgType::Rejoin,
            Message::RejoinDone => MsgType::RejoinDone,
            Message::Ping { .. } => MsgType::Ping,
            Message::Pong { .. } => MsgType::Pong,
        }
    }

    /// Decodes a body of type `t`; every byte must be used.
    pub fn decode(t: MsgType, body: &[u8]) -> Result<Message, ControlError> {
        let mut r = Reader::new(body);
        let m = match t {
            MsgType::Hello => Message::Hello {
                pdev: r.u16("pdev")?,
                caps: r.u32("caps")?,
                lost_state: r.bool("lost_state")?,
            },
            MsgType::HelloAck => {
                let round = r.u64("round")?;
                let n = r.u8("n")?;
                let n = r.count("n", n.into(), LDEV_MIN)?;
                let mut ldevs = Vec::with_capacity(n);
                for _ in 0..n {
                    let ldev = r.u8("ldev")?;
                    let role = Role::from_u8(r.u8("role")?)?;
                    ldevs.push(LdevRole { ldev, role });
                }
                Message::HelloAck { round, ldevs }
            }
            MsgType::WriteReq => {
                let app = r.u8("app")?;
                let uk = r.key("uk")?;
                let n = r.u16("n")?;
                let n = r.count("n", n.into(), WRITE_MIN)?;
                let mut writes = Vec::with_capacity(n);
                for _ in 0..n {
                    writes.push(Write {
                        op: WriteOp::from_u8(r.u8("op")?)?,
                        obj: r.u16("obj")?,
                        key: r.key("key")?,
                        val: r.key("val")?,
                    });
                }
                Message::WriteReq { app, uk, writes }
            }
            MsgType::WriteApply => {
                let app = r.u8("app")?;
                let n = r.u16("n")?;
                let n = r.count("n", n.into(), OP_ENTRY_MIN)?;
                Message::WriteApply {
                    app,
                    entries: read_op_entries(&mut r, n)?,
                }
            }
            MsgType::WriteApplied => Message::WriteApplied {
                status: AppliedStatus::from_u8(r.u8("status")?)?,
            },
            MsgType::WriteAck => {
                let n = r.u16("n")?;
                let n = r.count("n", n.into(), RESULT_MIN)?;
                let mut results = Vec::with_capacity(n);
                for _ in 0..n {
                    results.push(WriteResult {
                        status: AckStatus::from_u8(r.u8("status")?)?,
                        version: r.u64("version")?,
                    });
                }
                Message::WriteAck { results }
            }
            MsgType::PromoteReport => Message::PromoteReport {
                app: r.u8("app")?,
                uk: r.key("uk")?,
                estimate: r.u32("estimate")?,
                elapsed_us: r.u32("elapsed_us")?,
            },
            MsgType::EventFwd => {
                let app = r.u8("app")?;
                let len = r.u16("len")?;
                let len = r.count("len", len.into(), 1)?;
                Message::EventFwd {
                    app,
                    frame: r.bytes("frame", len)?.to_vec(),
                }
            }
            MsgType::SyncReq => {
                let (round, items) = read_sync(&mut r)?;
                Message::SyncReq { round, items }
            }
            MsgType::SyncResp => {
                let (round, items) = read_sync(&mut r)?;
                Message::SyncResp { round, items }
            }
            MsgType::Dump => {
                let app = r.u8("app")?;
                let n = r.u32("n")?;
                let n = r.count("n", n.into(), OP_ENTRY_MIN)?;
                let entries = read_op_entries(&mut r, n)?;
                Message::Dump {
                    app,
                    entries,
                    last: r.bool("last")?,
                }
            }
            MsgType::Rejoin => {
                let n = r.u32("n")?;
                let n = r.count("n", n.into(), REJOIN_MIN)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(RejoinItem {
                        app: r.u8("app")?,
                        obj: r.u16("obj")?,
                        key: r.key("key")?,
                        h: r.u64("H")?,
                    });
                }
                Message::Rejoin { items }
            }
            MsgType::RejoinDone => Message::RejoinDone,
            MsgType::Ping => Message::Ping { ts: r.u64("ts")? },
            MsgType::Pong => Message::Pong { ts: r.u64("ts")? },
        };
        r.finish()?;
        Ok(m)
    }

    /// The body bytes. Refuses keys or values over 255 bytes, counts over
    /// their field and bodies over [`MAX_BODY_LEN`].
    pub fn encode(&self) -> Result<Vec<u8>, ControlError> {
        let mut w = Writer::default();
        match self {
            Message::Hello {
                pdev,
                caps,
                lost_state,
            } => {
                w.u16(*pdev);
                w.u32(*caps);
                w.u8(u8::from(*lost_state));
            }
            Message::HelloAck { round, ldevs } => {
                w.u64(*round);
                w.u8(count_as("n", ldevs.len())?);
                for l in ldevs {
                    w.u8(l.ldev);
                    w.u8(l.role as u8);
                }
            }
            Message::WriteReq { app, uk, writes } => {
                w.u8(*app);
                w.key("uk", uk)?;
                w.u16(count_as("n", writes.len())?);
                for x in writes {
                    w.u8(x.op as u8);
                    w.u16(x.obj);
                    w.key("key", &x.key)?;
                    w.key("val", &x.val)?;
                }
            }
            Message::WriteApply { app, entries } => {
                w.u8(*app);
                w.u16(count_as("n", entries.len())?);
                write_op_entries(&mut w, entries)?;
            }
            Message::WriteApplied { status } => w.u8(*status as u8),
            Message::WriteAck { results } => {
                w.u16(count_as("n", results.len())?);
                for x in results {
                    w.u8(x.status as u8);
                    w.u64(x.version);
                }
            }
            Message::PromoteReport {
                app,
                uk,
                estimate,
                elapsed_us,
            } => {
                w.u8(*app);
                w.key("uk", uk)?;
                w.u32(*estimate);
                w.u32(*elapsed_us);
            }
            Message::EventFwd { app, frame } => {
                w.u8(*app);
                w.u16(count_as("len", frame.len())?);
                w.bytes(frame);
            }
            Message::SyncReq { round, items } | Message::SyncResp { round, items } => {
                write_sync(&mut w, *round, items)?
            }
            Message::Dump { app, entries, last } => {
                w.u8(*app);
                w.u32(count_as("n", entries.len())?);
                write_op_entries(&mut w, entries)?;
                w.u8(u8::from(*last));
            }
            Message::Rejoin { items } => {
                w.u32(count_as("n", items.len())?);
                for i in items {
                    w.u8(i.app);
                    w.u16(i.obj);
                    w.key("key", &i.key)?;
                    w.u64(i.h);
                }
            }
            Message::RejoinDone => {}
            Message::Ping { ts } | Message::Pong { ts } => w.u64(*ts),
        }
        if w.buf.len() > MAX_BODY_LEN {
            return Err(ControlError::FrameTooLong(w.buf.len()));
        }
        Ok(w.buf)
    }
}

/// A whole frame: the header's `req_id` and the message.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    /// Chosen by the requester; a reply echoes it.
    pub req_id: u64,
    /// The message.
    pub msg: Message,
}

impl Frame {
    /// Decodes exactly one frame: `bytes` must be the header and the
    /// `length` body bytes it declares, nothing more or less.
    pub fn decode(bytes: &[u8]) -> Result<Frame, ControlError> {
        let h = FrameHeader::new_checked(bytes)?;
        let t = h.msg_type()?;
        let actual = bytes.len() - HEADER_LEN;
        if h.body_len() != actual {
            return Err(ControlError::LengthMismatch {
                declared: h.body_len(),
                actual,
            });
        }
        Ok(Frame {
            req_id: h.req_id(),
            msg: Message::decode(t, &bytes[HEADER_LEN..])?,
        })
    }

    /// Header and body.
    pub fn encode(&self) -> Result<Vec<u8>, ControlError> {
        let body = self.msg.encode()?;
        let h = HeaderRepr {
            msg_type: self.msg.msg_type(),
            body_len: body.len(),
            req_id: self.req_id,
        }
        .emit()?;
        let mut v = Vec::with_capacity(HEADER_LEN + body.len());
        v.extend_from_slice(&h);
        v.extend_from_slice(&body);
        Ok(v)
    }
}
