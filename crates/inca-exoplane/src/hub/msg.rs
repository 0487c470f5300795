//! Control-protocol messages between the hub and the device daemons
//! (specs/exoplane.md §4.6) as Rust values. The bytes are inca-wire's job;
//! these enums carry the same fields, named after the spec's message types.
//! Every message travels with the frame header's `req_id`, which pairs a
//! WRITE_APPLY with its WRITE_APPLIED and a WRITE_REQ with its WRITE_ACK.
//!
//! One deviation [our choice]: `WriteReq` carries the union key of the flow
//! that caused it. The hub needs it to place the writes on shard(UK)'s
//! primary and replica (§5.4 step 1) and to know which entries a flow uses;
//! §4.6's body has no field for it, so the wire format must add one.

use crate::ids::{AppId, ObjId, Pdev, UnionKey, Version};
use crate::sync::{Rejoin, SyncReq, SyncResp};

/// What a write does to its key (`op` 8 of WRITE_REQ/WRITE_APPLY/DUMP).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOp {
    /// Create the key unless it exists (then the status is `Exists`).
    InsertIfAbsent,
    /// Create or replace the key's value.
    Upsert,
    /// Remove the key everywhere.
    Delete,
}

/// One write a daemon asks for (an item of WRITE_REQ).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// What to do.
    pub op: WriteOp,
    /// The object written.
    pub obj: ObjId,
    /// The object's key bytes.
    pub key: Vec<u8>,
    /// The new value (ignored for deletes and for data-plane-updatable
    /// objects, whose slots start at the merge identity).
    pub value: Vec<u8>,
}

/// One entry as the hub hands it to a holder (`op` 8 ‖ Entry of
/// WRITE_APPLY and DUMP).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryRec {
    /// `Upsert` to store `value`, `Delete` to remove the key.
    pub op: WriteOp,
    /// The object.
    pub obj: ObjId,
    /// The key bytes.
    pub key: Vec<u8>,
    /// The value bytes (empty for deletes).
    pub value: Vec<u8>,
    /// The hub-assigned version; holders ignore versions ≤ the applied one.
    pub version: Version,
}

/// Outcome of one write (`status` 8 of WRITE_ACK).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteStatus {
    /// Applied at every live holder.
    Ok,
    /// INSERT_IF_ABSENT found the key; the stored value stands.
    Exists,
    /// Not applied (bad object, value too long, key being deleted …).
    Failed,
}

/// A daemon → hub message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DaemonMsg {
    /// HELLO: the daemon's device and whether it lost its state.
    Hello {
        /// The physical device the daemon runs.
        pdev: Pdev,
        /// Feature bitmap (§5.9).
        caps: u32,
        /// The device restarted empty and needs a DUMP.
        lost_state: bool,
    },
    /// WRITE_REQ for the flow `uk` of `app`.
    WriteReq {
        /// The app.
        app: AppId,
        /// The flow whose setup asks for the writes (see module doc).
        uk: UnionKey,
        /// The writes, each sequenced on its own key.
        writes: Vec<Write>,
    },
    /// WRITE_APPLIED for the WRITE_APPLY with the same `req_id`.
    WriteApplied {
        /// False when the device could not store the entry.
        ok: bool,
    },
    /// PROMOTE_REPORT: `uk` crossed the popularity threshold.
    PromoteReport {
        /// The app.
        app: AppId,
        /// The flow.
        uk: UnionKey,
        /// The count-min estimate when reported.
        estimate: u32,
        /// Microseconds since the sketch window started.
        elapsed_us: u32,
    },
    /// REJOIN_DONE: a rebuilt device restored its registers and may serve.
    RejoinDone,
    /// SYNC_RESP: the device's snapshots and histories for a round (§5.6).
    SyncResp(SyncResp),
    /// PING (liveness; either side may send it).
    Ping {
        /// Sender's timestamp, echoed in the PONG.
        ts: u64,
    },
    /// PONG: the answer to a PING.
    Pong {
        /// The PING's timestamp.
        ts: u64,
    },
}

/// A hub → daemon message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HubMsg {
    /// HELLO_ACK: the current sync round and the daemon's logical roles
    /// (`(l, 0)` primary, `(l, 1)` replica).
    HelloAck {
        /// The hub's sync round.
        round: u64,
        /// Logical ids with role.
        roles: Vec<(crate::ids::LogicalId, u8)>,
    },
    /// WRITE_APPLY: entries (one key each) to store in version order.
    WriteApply {
        /// The app.
        app: AppId,
        /// The entries.
        entries: Vec<EntryRec>,
    },
    /// WRITE_ACK: one status and version per write of the WRITE_REQ.
    WriteAck {
        /// `(status, version)` in request order.
        results: Vec<(WriteStatus, Version)>,
    },
    /// DUMP: part of the stream of every entry the device holds.
    Dump {
        /// The app of every entry in this message.
        app: AppId,
        /// The entries.
        entries: Vec<EntryRec>,
        /// This is the final DUMP message of the stream.
        last: bool,
    },
    /// REJOIN: the recorded history `H` per shared register entry the
    /// device holds (§5.6 recovery); items name the app as well [our choice,
    /// as SYNC items do].
    Rejoin(Rejoin),
    /// SYNC_REQ: the switch snapshot and `H[pdev][k]` per shared entry the
    /// device holds, for one round (§5.6).
    SyncReq(SyncReq),
    /// PING (liveness).
    Ping {
        /// Sender's timestamp, echoed in the PONG.
        ts: u64,
    },
    /// PONG: the answer to a PING.
    Pong {
        /// The PING's timestamp.
        ts: u64,
    },
}

/// A message addressed to one device's daemon.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToDaemon {
    /// The device.
    pub pdev: Pdev,
    /// The frame header's request id.
    pub req_id: u64,
    /// The message.
    pub msg: HubMsg,
}
