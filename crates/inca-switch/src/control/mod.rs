//! The control-plane agent: the switch CPU and its slow path to the data
//! plane.
//!
//! A program's control plane acts through a [`ControlPlane`] handle. What it
//! asks for does not happen at once: each operation (table write, register
//! read or write, entry or counter read, configuration change, packet-out)
//! goes through the control channel and takes effect after its latency from
//! the profile's [`ControlPlaneTiming`], no faster than the profile's
//! operation rate, in issue order. The channel has a window of RPCs in
//! flight and batches a handler's operations into RPCs
//! (`ControlPlaneAgent` below; serial on the tofino profile). Events
//! for the control plane (digests, punted packets, idle timeouts, read
//! results) reach one CPU thread that handles them one at a time, each costing
//! `cpu_per_event`. This is what makes control-plane-bound behaviour (a NAT's
//! first packet, a RedPlane lease grant) show up in experiments.

mod write;

use std::collections::VecDeque;

pub use write::ControlWrite;

use crate::device::{ControlMessage, DeviceRng, Nanos, PortId, SessionEvent, SessionId};
use crate::meter::MeterConfig;
use crate::objects::{Handle, ObjectId, Objects, RegisterHandle, TableHandle};
use crate::pktgen::StreamConfig;
use crate::profile::ControlPlaneTiming;
use crate::register::RegisterValue;
use crate::table::{EntryActivity, MatchSpec};
use crate::tm::MirrorSession;

/// Bound on events waiting for the control-plane CPU; more are dropped and
/// counted (a real switch CPU's socket buffers overflow the same way).
pub const CPU_QUEUE_LIMIT: usize = 65_536;
/// Bound on operations waiting for the control channel.
pub const OP_QUEUE_LIMIT: usize = 1 << 20;

/// Where a packet-out goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketOutDest {
    /// Straight into the queue of an egress port (egress still runs).
    Port(PortId),
    /// Into the ingress pipeline as if it had arrived on this port (its
    /// kind is [`crate::PacketKind::FromCpu`]); Tofino programs get the
    /// same effect from a CPU header that names the port.
    Ingress(PortId),
}

type ObjectsOp = Box<dyn FnOnce(&mut Objects, Nanos) -> Result<(), String>>;
type ReadOp = Box<dyn FnOnce(&mut Objects, Nanos) -> Result<Readback, String>>;

/// What a per-entry read brings back to the control plane.
pub(crate) enum Readback {
    /// A table entry's activity.
    Entry {
        table: ObjectId,
        spec: MatchSpec,
        activity: EntryActivity,
    },
    /// Counter cells as `(packets, bytes)`.
    Counters { first: u64, values: Vec<(u64, u64)> },
}

impl Readback {
    /// The event that delivers it, answering `request`.
    pub(crate) fn into_event<D>(self, request: u64) -> ControlEvent<D> {
        match self {
            Readback::Entry {
                table,
                spec,
                activity,
            } => ControlEvent::EntryActivity {
                request,
                table,
                spec,
                hit: activity.hit,
                idle: activity.idle,
            },
            Readback::Counters { first, values } => ControlEvent::CounterValues {
                request,
                first,
                values,
            },
        }
    }
}

/// One control-plane operation on its way to the data plane.
pub(crate) enum Op {
    /// Changes objects (table writes, register writes, meter configuration).
    Objects(ObjectsOp),
    /// Reads objects and answers with an event (entry activity, counters).
    Read(ReadOp),
    /// Reads `count` register entries from `first`.
    RegisterRead {
        id: ObjectId,
        first: u64,
        count: u64,
    },
    /// Sends a frame into the data plane.
    PacketOut { frame: Vec<u8>, dest: PacketOutDest },
    /// Sets (or, with no members, deletes) a multicast group.
    Multicast {
        group: u16,
        members: Vec<(PortId, u16)>,
    },
    /// Sets a mirror session.
    Mirror { session: u16, config: MirrorSession },
    /// Starts (or, with `None`, stops) a packet-generator stream.
    PacketGen {
        stream: u8,
        config: Option<StreamConfig>,
    },
    /// Re-arms a port's packet-generator port-down trigger.
    PktGenClearPortDown { port: PortId },
}

/// An operation with its request id and how long it takes.
pub(crate) struct IssuedOp {
    pub request: u64,
    pub op: Op,
    pub latency: Nanos,
    /// Counts against the operation rate (table and register operations,
    /// configuration); packet-outs do not.
    pub rate_limited: bool,
}

/// What a control-plane handler asked for, collected while it runs.
#[derive(Default)]
pub(crate) struct Requests {
    pub ops: Vec<IssuedOp>,
    pub timers: Vec<(Nanos, u64)>,
    pub messages: Vec<ControlMessage>,
    /// Messages for control sessions, in send order.
    pub sessions: Vec<(SessionId, Vec<u8>)>,
    /// Describe object writes in `described` as they are issued
    /// ([`crate::capture`]); off on a running switch.
    pub capture: bool,
    pub described: Vec<(u64, ControlWrite)>,
}

/// The program's handle to its control plane. See the module documentation.
pub struct ControlPlane<'a> {
    pub(crate) now: Nanos,
    pub(crate) timing: &'a ControlPlaneTiming,
    pub(crate) requests: &'a mut Requests,
    pub(crate) next_request: &'a mut u64,
    /// Ored into every request id this handle issues: a composite program
    /// gives each block its own tag, so that a read result or a failure
    /// finds its way back to the block that asked (0 for a plain program).
    pub(crate) request_tag: u64,
    pub(crate) rng: &'a mut DeviceRng,
}

/// Bits of a request id below a block's tag (see
/// [`ControlPlane::request_tag`]): room for 2^48 operations per run.
pub(crate) const REQUEST_SEQ_BITS: u32 = 48;

impl ControlPlane<'_> {
    /// The current time.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// The same control plane for a block of a composite: request ids carry
    /// `tag` in their top bits.
    pub(crate) fn tagged(&mut self, tag: u64) -> ControlPlane<'_> {
        ControlPlane {
            now: self.now,
            timing: self.timing,
            requests: self.requests,
            next_request: self.next_request,
            request_tag: tag << REQUEST_SEQ_BITS,
            rng: self.rng,
        }
    }

    /// Records what an object write does, when capturing.
    fn describe(&mut self, request: u64, write: Option<ControlWrite>) {
        if let Some(w) = write {
            self.requests.described.push((request, w));
        }
    }

    /// The switch's device RNG (seeded by the driver from the run seed; not
    /// rewound by a restart), for the control plane's random choices.
    pub fn rng(&mut self) -> &mut DeviceRng {
        self.rng
    }

    fn issue(&mut self, op: Op, latency: Nanos, rate_limited: bool) -> u64 {
        *self.next_request += 1;
        let request = *self.next_request | self.request_tag;
        self.requests.ops.push(IssuedOp {
            request,
            op,
            latency,
            rate_limited,
        });
        request
    }

    /// Adds a table entry. Returns the request id; a failure (table full,
    /// duplicate) comes back as [`crate::ControlEvent::OpFailed`].
    pub fn table_add<A: Clone + 'static>(
        &mut self,
        table: TableHandle<A>,
        spec: MatchSpec,
        action: A,
    ) -> u64 {
        let write = self.requests.capture.then(|| ControlWrite::TableAdd {
            table: table.id(),
            spec: spec.clone(),
            action: Box::new(action.clone()),
        });
        let op = Op::Objects(Box::new(move |o: &mut Objects, now| {
            let t = o.table_mut(table).ok_or("not a table of this program")?;
            t.insert(spec, action, now).map_err(|e| e.to_string())
        }));
        let request = self.issue(op, self.timing.table_write, true);
        self.describe(request, write);
        request
    }

    /// Changes the action data of an existing entry.
    pub fn table_modify<A: Clone + 'static>(
        &mut self,
        table: TableHandle<A>,
        spec: MatchSpec,
        action: A,
    ) -> u64 {
        let write = self.requests.capture.then(|| ControlWrite::TableModify {
            table: table.id(),
            spec: spec.clone(),
            action: Box::new(action.clone()),
        });
        let op = Op::Objects(Box::new(move |o: &mut Objects, _| {
            let t = o.table_mut(table).ok_or("not a table of this program")?;
            t.modify(&spec, action).map_err(|e| e.to_string())
        }));
        let request = self.issue(op, self.timing.table_write, true);
        self.describe(request, write);
        request
    }

    /// Deletes an entry.
    pub fn table_delete<A: Clone + 'static>(
        &mut self,
        table: TableHandle<A>,
        spec: MatchSpec,
    ) -> u64 {
        let write = self.requests.capture.then(|| ControlWrite::TableDelete {
            table: table.id(),
            spec: spec.clone(),
        });
        let op = Op::Objects(Box::new(move |o: &mut Objects, _| {
            let t = o.table_mut(table).ok_or("not a table of this program")?;
            t.delete(&spec).map(|_| ()).map_err(|e| e.to_string())
        }));
        let request = self.issue(op, self.timing.table_write, true);
        self.describe(request, write);
        request
    }

    /// Reads `count` entries of a register array from `first`; the values
    /// come back as [`crate::ControlEvent::RegisterValues`].
    pub fn register_read<T: RegisterValue>(
        &mut self,
        reg: RegisterHandle<T>,
        first: u64,
        count: u64,
    ) -> u64 {
        let latency =
            self.timing.register_op + self.timing.register_per_entry.saturating_mul(count);
        self.issue(
            Op::RegisterRead {
                id: reg.id(),
                first,
                count,
            },
            latency,
            true,
        )
    }

    /// Reads one table entry's activity: whether the data plane hit it
    /// since the previous such read (the read resets the flag, as Tofino's
    /// hit-state poll mode does) and the time since its last hit. It costs
    /// a one-entry hardware read (`register_op + register_per_entry`, [our
    /// choice]: the same PCIe read path as a register); the answer comes
    /// as [`crate::ControlEvent::EntryActivity`], a missing entry as
    /// [`crate::ControlEvent::OpFailed`].
    pub fn table_entry_read<A: Clone + 'static>(
        &mut self,
        table: TableHandle<A>,
        spec: MatchSpec,
    ) -> u64 {
        let write = self.requests.capture.then(|| ControlWrite::EntryRead {
            table: table.id(),
            spec: spec.clone(),
        });
        let op = Op::Read(Box::new(move |o: &mut Objects, now| {
            let t = o.table_mut(table).ok_or("not a table of this program")?;
            let activity = t.read_activity(&spec, now).map_err(|e| e.to_string())?;
            Ok(Readback::Entry {
                table: table.id(),
                spec,
                activity,
            })
        }));
        let latency = self.timing.register_op + self.timing.register_per_entry;
        let request = self.issue(op, latency, true);
        self.describe(request, write);
        request
    }

    /// Reads `count` cells of a counter array from `first`, costing what a
    /// register read of as many entries costs; the `(packets, bytes)`
    /// values come back as [`crate::ControlEvent::CounterValues`].
    pub fn counter_read(&mut self, counter: Handle, first: u64, count: u64) -> u64 {
        let write = self.requests.capture.then(|| ControlWrite::CounterRead {
            counter: counter.id(),
            first,
            count,
        });
        let op = Op::Read(Box::new(move |o: &mut Objects, _| {
            let values = (first..first.saturating_add(count))
                .map(|i| o.counter_read(counter, i))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string())?;
            Ok(Readback::Counters { first, values })
        }));
        let latency =
            self.timing.register_op + self.timing.register_per_entry.saturating_mul(count);
        let request = self.issue(op, latency, true);
        self.describe(request, write);
        request
    }

    /// Writes one register entry.
    pub fn register_write<T: RegisterValue>(
        &mut self,
        reg: RegisterHandle<T>,
        index: u64,
        value: T,
    ) -> u64 {
        let v = value.to_u64();
        let write = self
            .requests
            .capture
            .then_some(ControlWrite::RegisterWrite {
                register: reg.id(),
                index,
                value: v,
            });
        let op = Op::Objects(Box::new(move |o: &mut Objects, _| {
            o.register_write(reg.id(), index, v)
                .map_err(|e| e.to_string())
        }));
        let request = self.issue(
            op,
            self.timing.register_op + self.timing.register_per_entry,
            true,
        );
        self.describe(request, write);
        request
    }

    /// Writes `values` to consecutive entries of a register array from
    /// `first` as one operation, costing what a read of as many entries
    /// costs (`register_op + register_per_entry × n`): the batched write a
    /// driver issues for a range (BfRt's multi-entry register write;
    /// specs/swish.md §8.1 charges register reads and writes alike).
    /// Entries past the end fail the operation (`OpFailed`) after those
    /// before them were written.
    pub fn register_write_range<T: RegisterValue>(
        &mut self,
        reg: RegisterHandle<T>,
        first: u64,
        values: Vec<u64>,
    ) -> u64 {
        let n = values.len() as u64;
        let write = self
            .requests
            .capture
            .then(|| ControlWrite::RegisterWriteRange {
                register: reg.id(),
                first,
                values: values.clone(),
            });
        let op = Op::Objects(Box::new(move |o: &mut Objects, _| {
            for (i, &v) in values.iter().enumerate() {
                o.register_write(reg.id(), first + i as u64, v)
                    .map_err(|e| e.to_string())?;
            }
            Ok(())
        }));
        let latency = self.timing.register_op + self.timing.register_per_entry.saturating_mul(n);
        let request = self.issue(op, latency, true);
        self.describe(request, write);
        request
    }

    /// Sets every entry of a register array to zero. Costs time per entry.
    pub fn register_clear<T: RegisterValue>(
        &mut self,
        reg: RegisterHandle<T>,
        entries: u64,
    ) -> u64 {
        let op = Op::Objects(Box::new(move |o: &mut Objects, _| {
            o.register_clear(reg.id())
                .map(|_| ())
                .map_err(|e| e.to_string())
        }));
        let latency =
            self.timing.register_op + self.timing.register_per_entry.saturating_mul(entries);
        let request = self.issue(op, latency, true);
        self.describe(request, self.clear_write(reg.id(), 0, None));
        request
    }

    /// Sets every entry of a register array to zero with a caller-given
    /// cost, for systems whose specs model a bulk clear differently from
    /// per-entry writes (TEA's sketch epochs: 1 ms per 64K-entry array).
    pub fn register_clear_timed<T: RegisterValue>(
        &mut self,
        reg: RegisterHandle<T>,
        latency: Nanos,
    ) -> u64 {
        let op = Op::Objects(Box::new(move |o: &mut Objects, _| {
            o.register_clear(reg.id())
                .map(|_| ())
                .map_err(|e| e.to_string())
        }));
        let request = self.issue(op, latency, true);
        self.describe(request, self.clear_write(reg.id(), 0, None));
        request
    }

    /// Sets entries `first .. first + count` of a register array to zero
    /// with a caller-given cost: a bulk clear done in slices, so that other
    /// operations on the FIFO channel interleave with it instead of waiting
    /// for the whole array (TEA's sketch epochs). Entries past the end are
    /// ignored.
    pub fn register_clear_range_timed<T: RegisterValue>(
        &mut self,
        reg: RegisterHandle<T>,
        first: u64,
        count: u64,
        latency: Nanos,
    ) -> u64 {
        let op = Op::Objects(Box::new(move |o: &mut Objects, _| {
            for i in first..first.saturating_add(count) {
                if o.register_write(reg.id(), i, 0).is_err() {
                    break;
                }
            }
            Ok(())
        }));
        let request = self.issue(op, latency, true);
        self.describe(request, self.clear_write(reg.id(), first, Some(count)));
        request
    }

    fn clear_write(
        &self,
        register: ObjectId,
        first: u64,
        count: Option<u64>,
    ) -> Option<ControlWrite> {
        self.requests
            .capture
            .then_some(ControlWrite::RegisterClear {
                register,
                first,
                count,
            })
    }

    /// Reconfigures one meter.
    pub fn meter_configure(&mut self, meter: Handle, index: u64, config: MeterConfig) -> u64 {
        let write = self
            .requests
            .capture
            .then_some(ControlWrite::MeterConfigure {
                meter: meter.id(),
                index,
                config,
            });
        let op = Op::Objects(Box::new(move |o: &mut Objects, now| {
            o.meter_configure(meter.id(), index, config, now)
        }));
        let request = self.issue(op, self.timing.register_op, true);
        self.describe(request, write);
        request
    }

    /// Sends a frame into the data plane. It costs the punt latency plus its
    /// serialisation on the CPU channel, and keeps its place in the FIFO
    /// after earlier operations (so a packet-out issued after table writes
    /// sees them).
    pub fn packet_out(&mut self, frame: Vec<u8>, dest: PacketOutDest) -> u64 {
        let latency = self.timing.punt_latency + serialisation(frame.len(), self.timing.punt_bps);
        self.issue(Op::PacketOut { frame, dest }, latency, false)
    }

    /// Sets the members `(port, replica id)` of multicast group `group`; no
    /// members deletes it.
    pub fn multicast_group(&mut self, group: u16, members: Vec<(PortId, u16)>) -> u64 {
        self.issue(
            Op::Multicast { group, members },
            self.timing.table_write,
            true,
        )
    }

    /// Sets mirror session `session`.
    pub fn mirror_session(&mut self, session: u16, config: MirrorSession) -> u64 {
        self.issue(
            Op::Mirror { session, config },
            self.timing.table_write,
            true,
        )
    }

    /// Starts packet-generator stream `stream` (`None` stops it).
    pub fn packet_generator(&mut self, stream: u8, config: Option<StreamConfig>) -> u64 {
        self.issue(
            Op::PacketGen { stream, config },
            self.timing.table_write,
            true,
        )
    }

    /// Re-arms `port`'s packet-generator port-down trigger, which fires
    /// once and then stays latched until this clear (Tofino's
    /// `bf_pktgen_clear_port_down`). See [`crate::pktgen`].
    pub fn pktgen_clear_port_down(&mut self, port: PortId) -> u64 {
        self.issue(
            Op::PktGenClearPortDown { port },
            self.timing.table_write,
            true,
        )
    }

    /// Asks for [`crate::ControlEvent::Timer`] with `token` at time `at`.
    pub fn set_timer(&mut self, at: Nanos, token: u64) {
        self.requests.timers.push((at.max(self.now), token));
    }

    /// Sends a message out of the switch to whoever drives it.
    pub fn send(&mut self, message: ControlMessage) {
        self.requests.messages.push(message);
    }

    /// Sends `body` to the peer of control session `session` (a management
    /// network connection, not the control channel to the ASIC: no
    /// operation latency; it leaves when the handler's CPU time is over).
    /// A refusal comes back as [`crate::ControlEvent::Session`] with
    /// [`SessionEvent::Refused`].
    pub fn session_send(&mut self, session: SessionId, body: Vec<u8>) {
        self.requests.sessions.push((session, body));
    }
}

/// Time to serialise `bytes` at `bps` bits per second, rounded up.
pub fn serialisation(bytes: usize, bps: u64) -> Nanos {
    if bps == 0 {
        return 0;
    }
    let bits = bytes as u64 * 8;
    // u64 whenever it cannot overflow (every frame); u128 only beyond.
    match bits.checked_mul(1_000_000_000) {
        Some(n) => n.div_ceil(bps),
        None => (u128::from(bits) * 1_000_000_000).div_ceil(u128::from(bps)) as Nanos,
    }
}

/// The timing state of the control channel and the CPU.
///
/// The channel carries RPCs: a run of rate-limited operations issued by one
/// handler, up to the profile's `max_batch`, travels as one RPC and costs
/// the longest latency among them (the others ride along); any other
/// operation (a packet-out) is an RPC of its own. At most `max_in_flight`
/// RPCs are outstanding: an RPC starts when the one `max_in_flight` before
/// it has completed. Operations take effect in issue order (an RPC that
/// would finish before an earlier one waits for it), so a packet-out still
/// sees the table writes issued before it. With a window and batch of 1
/// (the tofino and server profiles) this is the strictly serial FIFO
/// channel: each operation starts when the previous one is done.
#[derive(Debug, Default)]
pub(crate) struct ControlPlaneAgent {
    /// Operations in flight, in completion order, with their completion time.
    pub in_flight: VecDeque<(Nanos, IssuedOp)>,
    /// Completion times of the last `max_in_flight` RPCs, oldest first.
    rpcs_done: VecDeque<Nanos>,
    /// When the last operation takes effect (later ones never before it).
    last_done: Nanos,
    /// The earliest start of the next rate-limited operation: each one
    /// takes `1e9 / max_ops_per_sec` of the op rate, batched or not.
    next_limited: Nanos,
    /// When the punt channel finishes serialising its last packet.
    pub punt_free: Nanos,
    /// When the CPU finishes its current event.
    pub cpu_free: Nanos,
    /// Operations refused because the queue was full.
    pub ops_dropped: u64,
    /// RPCs sent over the channel (a batch of writes is one).
    pub rpcs: u64,
}

impl std::fmt::Debug for IssuedOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IssuedOp({}, {} ns)", self.request, self.latency)
    }
}

impl ControlPlaneAgent {
    /// Queues the operations one handler issued at `now`, batching them
    /// into RPCs as the module documentation says. Returns each request id
    /// with its completion time, or `None` if the queue was full and the
    /// operation was refused.
    pub fn schedule(
        &mut self,
        now: Nanos,
        ops: Vec<IssuedOp>,
        timing: &ControlPlaneTiming,
    ) -> Vec<(u64, Option<Nanos>)> {
        let max_batch = timing.max_batch.max(1) as usize;
        let mut results = Vec::with_capacity(ops.len());
        let mut rpc: Vec<IssuedOp> = Vec::new();
        for op in ops {
            if self.in_flight.len() + rpc.len() >= OP_QUEUE_LIMIT {
                self.ops_dropped += 1;
                results.push((op.request, None));
                continue;
            }
            let joins = op.rate_limited
                && rpc.len() < max_batch
                && rpc.last().is_none_or(|last| last.rate_limited);
            if !joins && !rpc.is_empty() {
                self.send_rpc(now, std::mem::take(&mut rpc), timing, &mut results);
            }
            rpc.push(op);
        }
        if !rpc.is_empty() {
            self.send_rpc(now, rpc, timing, &mut results);
        }
        results
    }

    /// Starts one RPC as early as the window and the op rate allow.
    fn send_rpc(
        &mut self,
        now: Nanos,
        ops: Vec<IssuedOp>,
        timing: &ControlPlaneTiming,
        results: &mut Vec<(u64, Option<Nanos>)>,
    ) {
        let window = timing.max_in_flight.max(1) as usize;
        let mut start = now;
        if self.rpcs_done.len() >= window {
            start = start.max(self.rpcs_done.pop_front().unwrap_or(0));
        }
        let limited = ops.iter().filter(|o| o.rate_limited).count() as u64;
        if limited > 0 && timing.max_ops_per_sec > 0 {
            start = start.max(self.next_limited);
            let gap = 1_000_000_000 / timing.max_ops_per_sec;
            self.next_limited = start + gap * limited;
        }
        let latency = ops.iter().map(|o| o.latency).max().unwrap_or(0);
        let done = (start + latency).max(self.last_done);
        self.last_done = done;
        self.rpcs_done.push_back(done);
        self.rpcs += 1;
        for op in ops {
            results.push((op.request, Some(done)));
            self.in_flight.push_back((done, op));
        }
    }

    /// Forgets everything (crash); the counters survive, as the switch's
    /// own do.
    pub fn reset(&mut self) {
        *self = ControlPlaneAgent {
            ops_dropped: self.ops_dropped,
            rpcs: self.rpcs,
            ..ControlPlaneAgent::default()
        };
    }
}

/// An event for the program's control plane.
#[derive(Debug, Clone)]
pub enum ControlEvent<D> {
    /// The switch has (re)started with empty tables and registers: install
    /// static entries here.
    Start,
    /// A digest from the data plane.
    Digest(D),
    /// A packet punted from the data plane.
    PacketIn {
        /// The port it arrived on.
        port: PortId,
        /// The reason code the program gave.
        reason: u16,
        /// The frame.
        frame: Vec<u8>,
    },
    /// A table entry has not been hit for the table's idle timeout.
    IdleTimeout {
        /// The table.
        table: ObjectId,
        /// The entry.
        spec: MatchSpec,
    },
    /// Values of a register read issued earlier.
    RegisterValues {
        /// The request id the read returned.
        request: u64,
        /// The values, in index order (pairs as `hi << 32 | lo`).
        values: Vec<u64>,
    },
    /// An entry's activity, read with
    /// [`ControlPlane::table_entry_read`].
    EntryActivity {
        /// The request id the read returned.
        request: u64,
        /// The table.
        table: ObjectId,
        /// The entry.
        spec: MatchSpec,
        /// Hit since the previous read of this entry (or its insert).
        hit: bool,
        /// Time since its last hit (or its insert).
        idle: Nanos,
    },
    /// Counter cells read with [`ControlPlane::counter_read`].
    CounterValues {
        /// The request id the read returned.
        request: u64,
        /// The first index read.
        first: u64,
        /// `(packets, bytes)` per cell, in index order from `first`.
        values: Vec<(u64, u64)>,
    },
    /// A control-plane operation failed when it took effect.
    OpFailed {
        /// The request id the operation returned.
        request: u64,
        /// Why.
        error: String,
    },
    /// A control-plane timer set earlier fired.
    Timer {
        /// The program's token.
        token: u64,
    },
    /// A port changed state.
    PortStatus {
        /// The port.
        port: PortId,
        /// Whether it is up.
        up: bool,
    },
    /// A message from outside the switch (management network, experiment).
    Message(ControlMessage),
    /// Something happened on a control session (up, a message, reset,
    /// refusal).
    Session(SessionEvent),
}

impl<D> ControlEvent<D> {
    /// The event with another digest type, for a program that wraps others
    /// and hands them their events: `Err` with the digest if it is one
    /// (the wrapper decides whose it is), else the same event retyped.
    pub fn split_digest<E>(self) -> Result<ControlEvent<E>, D> {
        Ok(match self {
            ControlEvent::Digest(d) => return Err(d),
            ControlEvent::Start => ControlEvent::Start,
            ControlEvent::PacketIn {
                port,
                reason,
                frame,
            } => ControlEvent::PacketIn {
                port,
                reason,
                frame,
            },
            ControlEvent::IdleTimeout { table, spec } => ControlEvent::IdleTimeout { table, spec },
            ControlEvent::RegisterValues { request, values } => {
                ControlEvent::RegisterValues { request, values }
            }
            ControlEvent::EntryActivity {
                request,
                table,
                spec,
                hit,
                idle,
            } => ControlEvent::EntryActivity {
                request,
                table,
                spec,
                hit,
                idle,
            },
            ControlEvent::CounterValues {
                request,
                first,
                values,
            } => ControlEvent::CounterValues {
                request,
                first,
                values,
            },
            ControlEvent::OpFailed { request, error } => ControlEvent::OpFailed { request, error },
            ControlEvent::Timer { token } => ControlEvent::Timer { token },
            ControlEvent::PortStatus { port, up } => ControlEvent::PortStatus { port, up },
            ControlEvent::Message(m) => ControlEvent::Message(m),
            ControlEvent::Session(e) => ControlEvent::Session(e),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Profile;

    fn op(request: u64, latency: Nanos, rate_limited: bool) -> IssuedOp {
        IssuedOp {
            request,
            op: Op::Multicast {
                group: 1,
                members: vec![],
            },
            latency,
            rate_limited,
        }
    }

    /// Schedules `ops` as one handler's requests; their completion times.
    fn schedule(
        agent: &mut ControlPlaneAgent,
        now: Nanos,
        ops: Vec<IssuedOp>,
        timing: &ControlPlaneTiming,
    ) -> Vec<Nanos> {
        agent
            .schedule(now, ops, timing)
            .into_iter()
            .map(|(_, done)| done.expect("queue has room"))
            .collect()
    }

    #[test]
    fn operations_are_fifo_and_rate_limited() {
        let mut timing = Profile::tofino().control_plane;
        timing.max_ops_per_sec = 1_000; // one per ms
        let mut agent = ControlPlaneAgent::default();
        let a = schedule(&mut agent, 0, vec![op(1, 10, true)], &timing)[0];
        let b = schedule(&mut agent, 0, vec![op(2, 10, true)], &timing)[0];
        let c = schedule(&mut agent, 0, vec![op(3, 10, false)], &timing)[0];
        assert_eq!(a, 10);
        assert_eq!(b, 1_000_010, "second op waits for the rate limit");
        assert_eq!(
            c, 1_000_020,
            "unlimited op still waits its turn in the FIFO"
        );
    }

    #[test]
    fn tofino_and_server_channels_stay_serial() {
        for timing in [
            Profile::tofino().control_plane,
            Profile::server().control_plane,
        ] {
            assert_eq!((timing.max_in_flight, timing.max_batch), (1, 1));
            let mut agent = ControlPlaneAgent::default();
            let ops = (0..4).map(|i| op(i, timing.table_write, true)).collect();
            let done = schedule(&mut agent, 0, ops, &timing);
            let gap = (1_000_000_000 / timing.max_ops_per_sec).max(timing.table_write);
            let serial: Vec<Nanos> = (0..4).map(|i| timing.table_write + i * gap).collect();
            assert_eq!(done, serial);
        }
    }

    #[test]
    fn a_window_overlaps_rpcs_and_a_batch_shares_one_latency() {
        let mut timing = Profile::tofino().control_plane;
        timing.max_ops_per_sec = 0; // no rate limit: the window alone
        timing.max_in_flight = 2;
        timing.max_batch = 1;
        let mut agent = ControlPlaneAgent::default();
        let ops = (0..5).map(|i| op(i, 100, true)).collect();
        // Two at a time, each 100 ns.
        assert_eq!(
            schedule(&mut agent, 0, ops, &timing),
            [100, 100, 200, 200, 300]
        );

        timing.max_batch = 3;
        let mut agent = ControlPlaneAgent::default();
        let ops = vec![
            op(1, 100, true),
            op(2, 300, true),
            op(3, 100, true),
            op(4, 100, true),
            op(5, 50, false), // a packet-out: its own RPC, after the writes
            op(6, 100, true),
        ];
        // RPCs [1 2 3] (300 ns) and [4] (100 ns, but it takes effect in
        // order, after [1 2 3]); the packet-out [5] waits for a window slot
        // (the first RPC, 300) and [6] for the next (300, from [4]).
        assert_eq!(
            schedule(&mut agent, 0, ops, &timing),
            [300, 300, 300, 300, 350, 400]
        );
    }

    #[test]
    fn the_op_rate_counts_every_operation_of_a_batch() {
        let mut timing = Profile::smartnic().control_plane;
        timing.max_batch = 4;
        let gap = 1_000_000_000 / timing.max_ops_per_sec;
        let mut agent = ControlPlaneAgent::default();
        let ops = (0..8).map(|i| op(i, timing.table_write, true)).collect();
        let done = schedule(&mut agent, 0, ops, &timing);
        // Two RPCs of four: the second starts after four ops' worth of rate.
        let first = timing.table_write;
        let second = 4 * gap + timing.table_write;
        assert_eq!(
            done,
            [first, first, first, first, second, second, second, second]
        );
    }

    #[test]
    fn serialisation_rounds_up() {
        assert_eq!(serialisation(1500, 100_000_000_000), 120);
        assert_eq!(serialisation(1, 3), 2_666_666_667);
        assert_eq!(serialisation(1, 0), 0);
        // Beyond u64: still exact.
        assert_eq!(serialisation(1 << 40, 8_000_000_000), 1_099_511_627_776);
    }
}
