//! Descriptions of control-plane operations ([`ControlWrite`]): what a
//! handler asked for, named by object and entry, for
//! [`crate::capture`].

use std::any::Any;

use super::{Op, PacketOutDest};
use crate::device::PortId;
use crate::meter::MeterConfig;
use crate::objects::ObjectId;
use crate::pktgen::StreamConfig;
use crate::table::MatchSpec;
use crate::tm::MirrorSession;

/// What one control-plane operation does.
#[derive(Debug)]
pub enum ControlWrite {
    /// Adds a table entry; `action` is the table's action data type `A`
    /// (downcast it with [`ControlWrite::action`]).
    TableAdd {
        /// The table.
        table: ObjectId,
        /// The entry's match.
        spec: MatchSpec,
        /// The action data.
        action: Box<dyn Any>,
    },
    /// Changes the action data of an entry.
    TableModify {
        /// The table.
        table: ObjectId,
        /// The entry's match.
        spec: MatchSpec,
        /// The new action data.
        action: Box<dyn Any>,
    },
    /// Deletes an entry.
    TableDelete {
        /// The table.
        table: ObjectId,
        /// The entry's match.
        spec: MatchSpec,
    },
    /// Writes one register entry (pairs as `hi << 32 | lo`).
    RegisterWrite {
        /// The register array.
        register: ObjectId,
        /// The entry.
        index: u64,
        /// The value.
        value: u64,
    },
    /// Writes consecutive register entries from `first` in one operation.
    RegisterWriteRange {
        /// The register array.
        register: ObjectId,
        /// First entry.
        first: u64,
        /// The values (pairs as `hi << 32 | lo`).
        values: Vec<u64>,
    },
    /// Zeroes register entries from `first`: `count` of them, or the whole
    /// array (`None`).
    RegisterClear {
        /// The register array.
        register: ObjectId,
        /// First entry.
        first: u64,
        /// How many (`None`: all).
        count: Option<u64>,
    },
    /// Reconfigures a meter.
    MeterConfigure {
        /// The meter array.
        meter: ObjectId,
        /// The meter.
        index: u64,
        /// Its configuration.
        config: MeterConfig,
    },
    /// Reads register entries (a read, listed so that nothing the handler
    /// asked for is hidden).
    RegisterRead {
        /// The register array.
        register: ObjectId,
        /// First entry.
        first: u64,
        /// How many.
        count: u64,
    },
    /// Reads one table entry's activity (hit flag and idle time).
    EntryRead {
        /// The table.
        table: ObjectId,
        /// The entry.
        spec: MatchSpec,
    },
    /// Reads counter cells.
    CounterRead {
        /// The counter array.
        counter: ObjectId,
        /// First cell.
        first: u64,
        /// How many.
        count: u64,
    },
    /// Re-arms a port's packet-generator port-down trigger.
    PktGenClearPortDown {
        /// The port.
        port: PortId,
    },
    /// Sends a frame into the data plane.
    PacketOut {
        /// The frame.
        frame: Vec<u8>,
        /// Where it goes.
        dest: PacketOutDest,
    },
    /// Sets (no members: deletes) a multicast group.
    Multicast {
        /// The group.
        group: u16,
        /// Its members, `(port, replica id)`.
        members: Vec<(PortId, u16)>,
    },
    /// Sets a mirror session.
    Mirror {
        /// The session.
        session: u16,
        /// Its configuration.
        config: MirrorSession,
    },
    /// Starts (`None`: stops) a packet-generator stream.
    PacketGen {
        /// The stream.
        stream: u8,
        /// Its configuration.
        config: Option<StreamConfig>,
    },
}

impl ControlWrite {
    /// The action data of a table add or modify, if it is an `A`.
    pub fn action<A: 'static>(&self) -> Option<&A> {
        match self {
            ControlWrite::TableAdd { action, .. } | ControlWrite::TableModify { action, .. } => {
                action.downcast_ref()
            }
            _ => None,
        }
    }

    /// The object it touches, if it touches one.
    pub fn object(&self) -> Option<ObjectId> {
        match *self {
            ControlWrite::TableAdd { table, .. }
            | ControlWrite::TableModify { table, .. }
            | ControlWrite::TableDelete { table, .. } => Some(table),
            ControlWrite::RegisterWrite { register, .. }
            | ControlWrite::RegisterWriteRange { register, .. }
            | ControlWrite::RegisterClear { register, .. }
            | ControlWrite::RegisterRead { register, .. } => Some(register),
            ControlWrite::EntryRead { table, .. } => Some(table),
            ControlWrite::CounterRead { counter, .. } => Some(counter),
            ControlWrite::MeterConfigure { meter, .. } => Some(meter),
            _ => None,
        }
    }

    /// The description of an operation that carries its own fields (all
    /// but object writes, which are described as they are issued).
    pub(crate) fn of_op(op: &Op) -> Option<ControlWrite> {
        Some(match op {
            // Object writes and reads are described as they are issued.
            Op::Objects(_) | Op::Read(_) => return None,
            &Op::RegisterRead { id, first, count } => ControlWrite::RegisterRead {
                register: id,
                first,
                count,
            },
            Op::PacketOut { frame, dest } => ControlWrite::PacketOut {
                frame: frame.clone(),
                dest: *dest,
            },
            Op::Multicast { group, members } => ControlWrite::Multicast {
                group: *group,
                members: members.clone(),
            },
            Op::Mirror { session, config } => ControlWrite::Mirror {
                session: *session,
                config: *config,
            },
            Op::PacketGen { stream, config } => ControlWrite::PacketGen {
                stream: *stream,
                config: config.clone(),
            },
            &Op::PktGenClearPortDown { port } => ControlWrite::PktGenClearPortDown { port },
        })
    }
}
