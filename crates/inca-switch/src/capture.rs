//! Running control logic without a switch: capture the writes it issues.
//!
//! A program's control handler normally acts through a [`ControlPlane`]
//! whose operations take effect on the switch after their latency.
//! [`capture_control`] runs a handler against a control plane that only
//! records: every operation comes back as a [`CapturedOp`] with a
//! description ([`ControlWrite`]: which table or register, which entry, what
//! value) instead of being applied. ExoPlane's device daemon needs exactly
//! this ("run the app's control logic, collect its writes") to mirror an
//! app's control-plane state onto another device; a captured set can also be
//! [replayed](Captured::replay) onto a live control plane unchanged.
//!
//! Describing a write costs a clone of its key and action data, so the
//! switch turns descriptions on only while capturing.

use std::any::Any;

use crate::control::{ControlPlane, IssuedOp, Op, PacketOutDest, Requests};
use crate::device::{ControlMessage, Nanos, PortId};
use crate::meter::MeterConfig;
use crate::objects::ObjectId;
use crate::pktgen::StreamConfig;
use crate::profile::ControlPlaneTiming;
use crate::program::{ControlEvent, Program};
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
    fn of_op(op: &Op) -> Option<ControlWrite> {
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

/// One operation a handler issued, described and held back.
pub struct CapturedOp {
    /// The request id the handler was given.
    pub request: u64,
    /// What it does.
    pub write: ControlWrite,
    op: Op,
    latency: Nanos,
    rate_limited: bool,
}

impl std::fmt::Debug for CapturedOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CapturedOp({}, {:?})", self.request, self.write)
    }
}

/// Everything one handler run asked for.
#[derive(Debug, Default)]
pub struct Captured {
    /// Its operations, in issue order.
    pub ops: Vec<CapturedOp>,
    /// Timers it set: `(at, token)`.
    pub timers: Vec<(Nanos, u64)>,
    /// Messages it sent out of the switch.
    pub messages: Vec<ControlMessage>,
}

impl Captured {
    /// The table and register writes alone (reads, packet-outs and
    /// configuration left out).
    pub fn writes(&self) -> impl Iterator<Item = &ControlWrite> {
        self.ops.iter().map(|o| &o.write).filter(|w| {
            matches!(
                w,
                ControlWrite::TableAdd { .. }
                    | ControlWrite::TableModify { .. }
                    | ControlWrite::TableDelete { .. }
                    | ControlWrite::RegisterWrite { .. }
                    | ControlWrite::RegisterClear { .. }
            )
        })
    }

    /// Issues the captured operations on `cp` (a switch whose program
    /// declared the same objects), in order, returning their new request
    /// ids. Timers and messages are not replayed.
    pub fn replay(self, cp: &mut ControlPlane<'_>) -> Vec<u64> {
        self.ops
            .into_iter()
            .map(|c| {
                *cp.next_request += 1;
                let request = *cp.next_request | cp.request_tag;
                cp.requests.ops.push(IssuedOp {
                    request,
                    op: c.op,
                    latency: c.latency,
                    rate_limited: c.rate_limited,
                });
                request
            })
            .collect()
    }
}

/// Runs `program`'s control handler for `event` at time `now` and returns
/// what it asked for instead of applying it. The program must have declared
/// its objects (its handles are what the writes name).
pub fn capture_control<P: Program>(
    program: &mut P,
    event: ControlEvent<P::Digest>,
    now: Nanos,
    timing: &ControlPlaneTiming,
) -> Captured {
    let mut requests = Requests {
        capture: true,
        ..Requests::default()
    };
    let mut next_request = 0;
    let mut cp = ControlPlane {
        now,
        timing,
        requests: &mut requests,
        next_request: &mut next_request,
        request_tag: 0,
    };
    program.control(event, &mut cp);
    let mut described = std::mem::take(&mut requests.described)
        .into_iter()
        .peekable();
    let ops = requests
        .ops
        .into_iter()
        .filter_map(|issued| {
            let write = match ControlWrite::of_op(&issued.op) {
                Some(w) => w,
                // Object writes were described when issued, in issue order.
                None => match described.next_if(|(r, _)| *r == issued.request) {
                    Some((_, w)) => w,
                    None => {
                        // Every object write describes itself when capturing.
                        debug_assert!(false, "undescribed object write {}", issued.request);
                        return None;
                    }
                },
            };
            Some(CapturedOp {
                request: issued.request,
                write,
                op: issued.op,
                latency: issued.latency,
                rate_limited: issued.rate_limited,
            })
        })
        .collect();
    Captured {
        ops,
        timers: requests.timers,
        messages: requests.messages,
    }
}
