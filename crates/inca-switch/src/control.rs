//! The control-plane agent: the switch CPU and its slow path to the data
//! plane.
//!
//! A program's control plane acts through a [`ControlPlane`] handle. What it
//! asks for does not happen at once: each operation (table write, register
//! read or write, configuration change, packet-out) goes through one FIFO
//! channel and takes effect after its latency from the profile's
//! [`ControlPlaneTiming`], no faster than the profile's operation rate. Events
//! for the control plane (digests, punted packets, idle timeouts, read
//! results) reach one CPU thread that handles them one at a time, each costing
//! `cpu_per_event`. This is what makes control-plane-bound behaviour (a NAT's
//! first packet, a RedPlane lease grant) show up in experiments.

use std::collections::VecDeque;

use crate::device::{ControlMessage, DeviceRng, Nanos, PortId};
use crate::meter::MeterConfig;
use crate::objects::{Handle, ObjectId, Objects, RegisterHandle, TableHandle};
use crate::pktgen::StreamConfig;
use crate::profile::ControlPlaneTiming;
use crate::register::RegisterValue;
use crate::table::MatchSpec;
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

/// One control-plane operation on its way to the data plane.
pub(crate) enum Op {
    /// Changes objects (table writes, register writes, meter configuration).
    Objects(ObjectsOp),
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
}

/// The program's handle to its control plane. See the module documentation.
pub struct ControlPlane<'a> {
    pub(crate) now: Nanos,
    pub(crate) timing: &'a ControlPlaneTiming,
    pub(crate) requests: &'a mut Requests,
    pub(crate) next_request: &'a mut u64,
    pub(crate) rng: &'a mut DeviceRng,
}

impl ControlPlane<'_> {
    /// The current time.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// The switch's device RNG (seeded by the driver from the run seed; not
    /// rewound by a restart), for the control plane's random choices.
    pub fn rng(&mut self) -> &mut DeviceRng {
        self.rng
    }

    fn issue(&mut self, op: Op, latency: Nanos, rate_limited: bool) -> u64 {
        *self.next_request += 1;
        let request = *self.next_request;
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
        let op = Op::Objects(Box::new(move |o: &mut Objects, now| {
            let t = o.table_mut(table).ok_or("not a table of this program")?;
            t.insert(spec, action, now).map_err(|e| e.to_string())
        }));
        self.issue(op, self.timing.table_write, true)
    }

    /// Changes the action data of an existing entry.
    pub fn table_modify<A: Clone + 'static>(
        &mut self,
        table: TableHandle<A>,
        spec: MatchSpec,
        action: A,
    ) -> u64 {
        let op = Op::Objects(Box::new(move |o: &mut Objects, _| {
            let t = o.table_mut(table).ok_or("not a table of this program")?;
            t.modify(&spec, action).map_err(|e| e.to_string())
        }));
        self.issue(op, self.timing.table_write, true)
    }

    /// Deletes an entry.
    pub fn table_delete<A: Clone + 'static>(
        &mut self,
        table: TableHandle<A>,
        spec: MatchSpec,
    ) -> u64 {
        let op = Op::Objects(Box::new(move |o: &mut Objects, _| {
            let t = o.table_mut(table).ok_or("not a table of this program")?;
            t.delete(&spec).map(|_| ()).map_err(|e| e.to_string())
        }));
        self.issue(op, self.timing.table_write, true)
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

    /// Writes one register entry.
    pub fn register_write<T: RegisterValue>(
        &mut self,
        reg: RegisterHandle<T>,
        index: u64,
        value: T,
    ) -> u64 {
        let v = value.to_u64();
        let op = Op::Objects(Box::new(move |o: &mut Objects, _| {
            o.register_write(reg.id(), index, v)
                .map_err(|e| e.to_string())
        }));
        self.issue(
            op,
            self.timing.register_op + self.timing.register_per_entry,
            true,
        )
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
        self.issue(op, latency, true)
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
        self.issue(op, latency, true)
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
        self.issue(op, latency, true)
    }

    /// Reconfigures one meter.
    pub fn meter_configure(&mut self, meter: Handle, index: u64, config: MeterConfig) -> u64 {
        let op = Op::Objects(Box::new(move |o: &mut Objects, now| {
            o.meter_configure(meter.id(), index, config, now)
        }));
        self.issue(op, self.timing.register_op, true)
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

    /// Asks for [`crate::ControlEvent::Timer`] with `token` at time `at`.
    pub fn set_timer(&mut self, at: Nanos, token: u64) {
        self.requests.timers.push((at.max(self.now), token));
    }

    /// Sends a message out of the switch to whoever drives it.
    pub fn send(&mut self, message: ControlMessage) {
        self.requests.messages.push(message);
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
#[derive(Debug, Default)]
pub(crate) struct ControlPlaneAgent {
    /// Operations in flight, in completion order, with their completion time.
    pub in_flight: VecDeque<(Nanos, IssuedOp)>,
    /// When the channel finishes the last queued operation.
    channel_free: Nanos,
    /// When the last rate-limited operation started.
    last_limited_start: Option<Nanos>,
    /// When the punt channel finishes serialising its last packet.
    pub punt_free: Nanos,
    /// When the CPU finishes its current event.
    pub cpu_free: Nanos,
    /// Operations refused because the queue was full.
    pub ops_dropped: u64,
}

impl std::fmt::Debug for IssuedOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IssuedOp({}, {} ns)", self.request, self.latency)
    }
}

impl ControlPlaneAgent {
    /// Queues an operation issued at `now`; returns its completion time, or
    /// gives it back if the queue is full.
    pub fn schedule(
        &mut self,
        now: Nanos,
        op: IssuedOp,
        timing: &ControlPlaneTiming,
    ) -> Result<Nanos, IssuedOp> {
        if self.in_flight.len() >= OP_QUEUE_LIMIT {
            self.ops_dropped += 1;
            return Err(op);
        }
        let mut start = now.max(self.channel_free);
        if op.rate_limited && timing.max_ops_per_sec > 0 {
            let gap = 1_000_000_000 / timing.max_ops_per_sec;
            if let Some(last) = self.last_limited_start {
                start = start.max(last + gap);
            }
            self.last_limited_start = Some(start);
        }
        let done = start + op.latency;
        self.channel_free = done;
        self.in_flight.push_back((done, op));
        Ok(done)
    }

    /// Forgets everything (crash).
    pub fn reset(&mut self) {
        *self = ControlPlaneAgent::default();
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

    #[test]
    fn operations_are_fifo_and_rate_limited() {
        let mut timing = Profile::tofino().control_plane;
        timing.max_ops_per_sec = 1_000; // one per ms
        let mut agent = ControlPlaneAgent::default();
        let a = agent.schedule(0, op(1, 10, true), &timing).unwrap();
        let b = agent.schedule(0, op(2, 10, true), &timing).unwrap();
        let c = agent.schedule(0, op(3, 10, false), &timing).unwrap();
        assert_eq!(a, 10);
        assert_eq!(b, 1_000_010, "second op waits for the rate limit");
        assert_eq!(
            c, 1_000_020,
            "unlimited op still waits its turn in the FIFO"
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
