//! [`HubToDaemon`] and [`DaemonToHub`] to and from inca-wire's [`Message`].
//!
//! Encoding checks what the wire cannot carry before building the message,
//! so the caller gets a typed [`CodecError`] naming the field rather than a
//! truncated frame: keys and values over 255 bytes, item counts over their
//! field (HELLO_ACK 8 b; WRITE_REQ, WRITE_APPLY, WRITE_ACK 16 b; the rest
//! 32 b), EVENT_FWD frames over 65,535 bytes, roles other than 0 and 1, and
//! a `pdev` of [`MAX_PDEVS`] or more, which no holders bitmap can name.
//! Decoding applies the same id checks, so a daemon announcing such a
//! device is refused at the codec. Body size is checked when the frame is
//! encoded (see [`split`](super::split) for batches).

use inca_wire::exoplane::control::{
    AckStatus, AppliedStatus, Entry, LdevRole, Message, OpEntry, RejoinItem, Role, SyncItem, Write,
    WriteOp as WireOp, WriteResult,
};

use super::{CodecError, DaemonToHub, HubToDaemon};
use crate::hub::msg::{DaemonMsg, EntryRec, HubMsg, Write as HubWrite, WriteOp, WriteStatus};
use crate::ids::{AppId, EntryKey, LogicalId, ObjId, Pdev, UnionKey, MAX_KEY_LEN, MAX_PDEVS};
use crate::sync::{Rejoin, SyncItem as HubSyncItem, SyncReq, SyncResp};

const HUB_TO_DAEMON: &str = "hub→daemon";
const DAEMON_TO_HUB: &str = "daemon→hub";

fn key(field: &'static str, k: &[u8]) -> Result<Vec<u8>, CodecError> {
    if k.len() > MAX_KEY_LEN {
        return Err(CodecError::KeyTooLong {
            field,
            len: k.len(),
        });
    }
    Ok(k.to_vec())
}

fn count(field: &'static str, n: usize, max: usize) -> Result<(), CodecError> {
    if n > max {
        return Err(CodecError::TooManyItems {
            field,
            count: n,
            max,
        });
    }
    Ok(())
}

fn pdev(p: u16) -> Result<Pdev, CodecError> {
    if usize::from(p) >= MAX_PDEVS {
        return Err(CodecError::OutOfRange {
            field: "pdev",
            value: p.into(),
            max: MAX_PDEVS as u64 - 1,
        });
    }
    Ok(Pdev(p))
}

fn wire_op(op: WriteOp) -> WireOp {
    match op {
        WriteOp::InsertIfAbsent => WireOp::InsertIfAbsent,
        WriteOp::Upsert => WireOp::Upsert,
        WriteOp::Delete => WireOp::Delete,
    }
}

fn hub_op(op: WireOp) -> WriteOp {
    match op {
        WireOp::InsertIfAbsent => WriteOp::InsertIfAbsent,
        WireOp::Upsert => WriteOp::Upsert,
        WireOp::Delete => WriteOp::Delete,
    }
}

fn op_entries(recs: &[EntryRec]) -> Result<Vec<OpEntry>, CodecError> {
    recs.iter()
        .map(|r| {
            Ok(OpEntry {
                op: wire_op(r.op),
                entry: Entry {
                    obj: r.obj.0,
                    key: key("key", &r.key)?,
                    val: key("val", &r.value)?,
                    version: r.version,
                },
            })
        })
        .collect()
}

fn entry_recs(v: Vec<OpEntry>) -> Vec<EntryRec> {
    v.into_iter()
        .map(|oe| EntryRec {
            op: hub_op(oe.op),
            obj: ObjId(oe.entry.obj),
            key: oe.entry.key,
            value: oe.entry.val,
            version: oe.entry.version,
        })
        .collect()
}

fn sync_items(v: &[HubSyncItem]) -> Result<Vec<SyncItem>, CodecError> {
    count("n", v.len(), u32::MAX as usize)?;
    v.iter()
        .map(|i| {
            Ok(SyncItem {
                app: i.entry.app.0,
                obj: i.entry.obj.0,
                key: key("key", &i.entry.key)?,
                snap: i.snap,
                hist: i.hist,
            })
        })
        .collect()
}

fn hub_sync_items(v: Vec<SyncItem>) -> Vec<HubSyncItem> {
    v.into_iter()
        .map(|i| HubSyncItem {
            entry: EntryKey {
                app: AppId(i.app),
                obj: ObjId(i.obj),
                key: i.key,
            },
            snap: i.snap,
            hist: i.hist,
        })
        .collect()
}

fn ack_status(s: WriteStatus) -> AckStatus {
    match s {
        WriteStatus::Ok => AckStatus::Ok,
        WriteStatus::Exists => AckStatus::Exists,
        WriteStatus::Failed => AckStatus::Failed,
    }
}

fn write_status(s: AckStatus) -> WriteStatus {
    match s {
        AckStatus::Ok => WriteStatus::Ok,
        AckStatus::Exists => WriteStatus::Exists,
        AckStatus::Failed => WriteStatus::Failed,
    }
}

impl HubToDaemon {
    /// The wire message, or why the wire cannot carry it.
    pub fn to_wire(&self) -> Result<Message, CodecError> {
        Ok(match self {
            HubToDaemon::Hub(m) => hub_to_wire(m)?,
            HubToDaemon::EventFwd { app, frame } => {
                count("len", frame.len(), u16::MAX as usize)?;
                Message::EventFwd {
                    app: app.0,
                    frame: frame.clone(),
                }
            }
        })
    }

    /// The typed message of a frame a daemon received.
    pub fn from_wire(m: Message) -> Result<HubToDaemon, CodecError> {
        Ok(match m {
            Message::HelloAck { round, ldevs } => HubToDaemon::Hub(HubMsg::HelloAck {
                round,
                roles: ldevs
                    .into_iter()
                    .map(|l| (LogicalId(l.ldev), l.role as u8))
                    .collect(),
            }),
            Message::WriteApply { app, entries } => HubToDaemon::Hub(HubMsg::WriteApply {
                app: AppId(app),
                entries: entry_recs(entries),
            }),
            Message::WriteAck { results } => HubToDaemon::Hub(HubMsg::WriteAck {
                results: results
                    .into_iter()
                    .map(|r| (write_status(r.status), r.version))
                    .collect(),
            }),
            Message::Dump { app, entries, last } => HubToDaemon::Hub(HubMsg::Dump {
                app: AppId(app),
                entries: entry_recs(entries),
                last,
            }),
            Message::Ping { ts } => HubToDaemon::Hub(HubMsg::Ping { ts }),
            Message::Pong { ts } => HubToDaemon::Hub(HubMsg::Pong { ts }),
            Message::SyncReq { round, items } => HubToDaemon::Hub(HubMsg::SyncReq(SyncReq {
                round,
                items: hub_sync_items(items),
            })),
            Message::Rejoin { items } => HubToDaemon::Hub(HubMsg::Rejoin(Rejoin {
                items: items
                    .into_iter()
                    .map(|i| {
                        let e = EntryKey {
                            app: AppId(i.app),
                            obj: ObjId(i.obj),
                            key: i.key,
                        };
                        (e, i.h)
                    })
                    .collect(),
            })),
            Message::EventFwd { app, frame } => HubToDaemon::EventFwd {
                app: AppId(app),
                frame,
            },
            other => {
                return Err(CodecError::WrongDirection {
                    msg: other.msg_type().name(),
                    direction: HUB_TO_DAEMON,
                })
            }
        })
    }
}

fn hub_to_wire(m: &HubMsg) -> Result<Message, CodecError> {
    Ok(match m {
        HubMsg::HelloAck { round, roles } => {
            count("n", roles.len(), u8::MAX as usize)?;
            Message::HelloAck {
                round: *round,
                ldevs: roles
                    .iter()
                    .map(|&(l, r)| {
                        let role = Role::from_u8(r).map_err(|_| CodecError::OutOfRange {
                            field: "role",
                            value: r.into(),
                            max: 1,
                        })?;
                        Ok(LdevRole { ldev: l.0, role })
                    })
                    .collect::<Result<_, CodecError>>()?,
            }
        }
        HubMsg::WriteApply { app, entries } => {
            count("n", entries.len(), u16::MAX as usize)?;
            Message::WriteApply {
                app: app.0,
                entries: op_entries(entries)?,
            }
        }
        HubMsg::WriteAck { results } => {
            count("n", results.len(), u16::MAX as usize)?;
            Message::WriteAck {
                results: results
                    .iter()
                    .map(|&(s, version)| WriteResult {
                        status: ack_status(s),
                        version,
                    })
                    .collect(),
            }
        }
        HubMsg::Dump { app, entries, last } => {
            count("n", entries.len(), u32::MAX as usize)?;
            Message::Dump {
                app: app.0,
                entries: op_entries(entries)?,
                last: *last,
            }
        }
        HubMsg::SyncReq(r) => Message::SyncReq {
            round: r.round,
            items: sync_items(&r.items)?,
        },
        HubMsg::Rejoin(r) => {
            count("n", r.items.len(), u32::MAX as usize)?;
            Message::Rejoin {
                items: r
                    .items
                    .iter()
                    .map(|(e, h)| {
                        Ok(RejoinItem {
                            app: e.app.0,
                            obj: e.obj.0,
                            key: key("key", &e.key)?,
                            h: *h,
                        })
                    })
                    .collect::<Result<_, CodecError>>()?,
            }
        }
        HubMsg::Ping { ts } => Message::Ping { ts: *ts },
        HubMsg::Pong { ts } => Message::Pong { ts: *ts },
    })
}

impl DaemonToHub {
    /// The wire message, or why the wire cannot carry it.
    pub fn to_wire(&self) -> Result<Message, CodecError> {
        let DaemonToHub::Daemon(m) = self;
        daemon_to_wire(m)
    }

    /// The typed message of a frame the hub received.
    pub fn from_wire(m: Message) -> Result<DaemonToHub, CodecError> {
        Ok(DaemonToHub::Daemon(match m {
            Message::Hello {
                pdev: p,
                caps,
                lost_state,
            } => DaemonMsg::Hello {
                pdev: pdev(p)?,
                caps,
                lost_state,
            },
            Message::WriteReq { app, uk, writes } => DaemonMsg::WriteReq {
                app: AppId(app),
                uk: UnionKey(uk),
                writes: writes
                    .into_iter()
                    .map(|w| HubWrite {
                        op: hub_op(w.op),
                        obj: ObjId(w.obj),
                        key: w.key,
                        value: w.val,
                    })
                    .collect(),
            },
            Message::WriteApplied { status } => DaemonMsg::WriteApplied {
                ok: status == AppliedStatus::Ok,
            },
            Message::PromoteReport {
                app,
                uk,
                estimate,
                elapsed_us,
            } => DaemonMsg::PromoteReport {
                app: AppId(app),
                uk: UnionKey(uk),
                estimate,
                elapsed_us,
            },
            Message::RejoinDone => DaemonMsg::RejoinDone,
            Message::Ping { ts } => DaemonMsg::Ping { ts },
            Message::Pong { ts } => DaemonMsg::Pong { ts },
            Message::SyncResp { round, items } => DaemonMsg::SyncResp(SyncResp {
                round,
                items: hub_sync_items(items),
            }),
            other => {
                return Err(CodecError::WrongDirection {
                    msg: other.msg_type().name(),
                    direction: DAEMON_TO_HUB,
                })
            }
        }))
    }
}

fn daemon_to_wire(m: &DaemonMsg) -> Result<Message, CodecError> {
    Ok(match m {
        DaemonMsg::Hello {
            pdev: p,
            caps,
            lost_state,
        } => Message::Hello {
            pdev: pdev(p.0)?.0,
            caps: *caps,
            lost_state: *lost_state,
        },
        DaemonMsg::WriteReq { app, uk, writes } => {
            count("n", writes.len(), u16::MAX as usize)?;
            Message::WriteReq {
                app: app.0,
                uk: key("uk", &uk.0)?,
                writes: writes
                    .iter()
                    .map(|w| {
                        Ok(Write {
                            op: wire_op(w.op),
                            obj: w.obj.0,
                            key: key("key", &w.key)?,
                            val: key("val", &w.value)?,
                        })
                    })
                    .collect::<Result<_, CodecError>>()?,
            }
        }
        DaemonMsg::WriteApplied { ok } => Message::WriteApplied {
            status: if *ok {
                AppliedStatus::Ok
            } else {
                AppliedStatus::Failed
            },
        },
        DaemonMsg::PromoteReport {
            app,
            uk,
            estimate,
            elapsed_us,
        } => Message::PromoteReport {
            app: app.0,
            uk: key("uk", &uk.0)?,
            estimate: *estimate,
            elapsed_us: *elapsed_us,
        },
        DaemonMsg::RejoinDone => Message::RejoinDone,
        DaemonMsg::Ping { ts } => Message::Ping { ts: *ts },
        DaemonMsg::Pong { ts } => Message::Pong { ts: *ts },
        DaemonMsg::SyncResp(r) => Message::SyncResp {
            round: r.round,
            items: sync_items(&r.items)?,
        },
    })
}
