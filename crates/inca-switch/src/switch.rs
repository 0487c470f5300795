//! The switch device: a program loaded onto a profile, run as a sans-IO
//! [`Device`].
//!
//! A frame arriving on a port is parsed (first `parse_depth` bytes only) and
//! runs through ingress at once; it reaches the traffic manager
//! `ingress_latency` later, waits in its port's queue, runs through egress
//! when it leaves the queue, and is transmitted `egress_latency` after that.
//! Everything that happens later than "now" — a dequeue, a control-plane
//! operation taking effect, a generator stream firing, the CPU finishing an
//! event — is an entry in the switch's own agenda; the driver sees one timer
//! (token 0) set to the earliest of them.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::control::{
    serialisation, ControlPlane, ControlPlaneAgent, Op, PacketOutDest, Requests, CPU_QUEUE_LIMIT,
};
use crate::device::{Device, DeviceRng, Input, Nanos, Output, PortId};
use crate::objects::{DataPlane, Declare, DeclareError, Objects, Violation};
use crate::pktgen::{PacketGenerator, Trigger};
use crate::placement::{place, Gress, Placement, PlacementError};
use crate::profile::Profile;
use crate::program::{ControlEvent, Destination, PacketCtx, PacketKind, Program};
use crate::tm::{PortCounters, QueuedPacket, TrafficManager, WIRE_OVERHEAD_BYTES};

/// Port number of the CPU port (packets from the control plane arrive on it).
pub const CPU_PORT: PortId = 0xfffe;
/// Port number packets from the packet generator arrive on.
pub const PKTGEN_PORT: PortId = 0xfffd;
/// Port number recirculated packets arrive on.
pub const RECIRCULATION_PORT: PortId = 0xfffc;
/// A packet may make at most this many ingress passes; more is a program
/// bug (a recirculation loop) and the packet is dropped.
pub const MAX_PASSES: u8 = 16;

/// Why a program could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The program's declarations were refused.
    #[error("program declaration failed: {0}")]
    Declare(#[from] DeclareError),
    /// The objects do not fit the profile.
    #[error("{0}")]
    Placement(#[from] PlacementError),
}

/// Declares `program`'s objects and places them on `profile`: the resource
/// report, or why it does not fit. This is what `inca check` runs.
pub fn check<P: Program>(profile: &Profile, program: &mut P) -> Result<Placement, LoadError> {
    let mut decl = Declare::default();
    program.declare(&mut decl)?;
    Ok(place(profile, &decl.decls())?)
}

/// Counters of what the switch did with packets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SwitchStats {
    /// Per-port counters.
    pub ports: Vec<PortCounters>,
    /// Frames that arrived on a port the profile does not have.
    pub bad_port_drops: u64,
    /// Frames the program's parser refused.
    pub parse_drops: u64,
    /// Packets dropped because the program broke a data-plane rule.
    pub violation_drops: u64,
    /// Packets the program dropped (no destination, or dropped in egress).
    pub program_drops: u64,
    /// Packets sent to a multicast group or mirror session that does not
    /// exist.
    pub no_group_drops: u64,
    /// Packets that asked for a feature the profile lacks (recirculation on a
    /// smart NIC, say).
    pub feature_drops: u64,
    /// Packets over the pass limit or resubmitted twice.
    pub pass_limit_drops: u64,
    /// Frames dropped because a run-to-completion device's input buffer was
    /// full.
    pub input_drops: u64,
    /// Events dropped because the CPU queue was full.
    pub cpu_queue_drops: u64,
    /// Packets punted to the CPU.
    pub punts: u64,
    /// Digests sent to the CPU.
    pub digests: u64,
    /// Recirculation passes.
    pub recirculations: u64,
    /// Generated packets.
    pub generated: u64,
    /// Mirror copies made.
    pub mirrored: u64,
    /// Control-plane operations applied.
    pub cp_ops: u64,
    /// Control-plane operations that failed.
    pub cp_op_failures: u64,
    /// Control-plane events handled by the CPU.
    pub cpu_events: u64,
}

/// A packet on its way into ingress later (recirculation, resubmit,
/// generator, packet-out, or a frame waiting for a run-to-completion core).
struct Arrival<M> {
    frame: Vec<u8>,
    meta: M,
    port: PortId,
    kind: PacketKind,
}

enum Event<M, D> {
    Dequeue(PortId),
    Ingress(Box<Arrival<M>>),
    CpOpDone,
    CpuArrive(ControlEvent<D>),
    CpuRun,
    CpuTimer(u64),
    Aging,
    GenTimer {
        stream: u8,
        epoch: u64,
    },
    GenPacket {
        stream: u8,
        epoch: u64,
        batch: u16,
        packet: u16,
    },
}

struct Scheduled<M, D> {
    at: Nanos,
    seq: u64,
    event: Event<M, D>,
}

impl<M, D> PartialEq for Scheduled<M, D> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<M, D> Eq for Scheduled<M, D> {}
impl<M, D> PartialOrd for Scheduled<M, D> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<M, D> Ord for Scheduled<M, D> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// A programmable switch (or smart NIC, or server data path) running
/// program `P`. See the module documentation.
pub struct Switch<P: Program> {
    profile: Profile,
    placement: Placement,
    loaded: P,
    program: P,
    objects: Objects,
    tm: TrafficManager<P::Meta>,
    cp: ControlPlaneAgent,
    cpu_queue: VecDeque<ControlEvent<P::Digest>>,
    cpu_busy: bool,
    pktgen: PacketGenerator,
    agenda: BinaryHeap<Reverse<Scheduled<P::Meta, P::Digest>>>,
    seq: u64,
    timer_at: Option<Nanos>,
    recirculation_free: Nanos,
    /// When a run-to-completion device's core is free for the next packet.
    core_free: Nanos,
    /// Bytes waiting for a run-to-completion core.
    input_backlog: u64,
    next_request: u64,
    requests: Requests,
    ports_up: Vec<bool>,
    stats: SwitchStats,
}

impl<P: Program> Switch<P> {
    /// Loads `program` onto a device with `profile`: declares and places its
    /// objects (failing with the resource model's explanation if they do not
    /// fit).
    pub fn new(profile: Profile, mut program: P) -> Result<Self, LoadError> {
        let mut decl = Declare::default();
        program.declare(&mut decl)?;
        let placement = place(&profile, &decl.decls())?;
        let objects = decl.into_objects();
        let dp = profile.data_path;
        Ok(Switch {
            tm: TrafficManager::new(dp.ports, dp.port_rate_bps, dp.buffer_bytes),
            pktgen: PacketGenerator::new(profile.features.pktgen_streams),
            ports_up: vec![true; usize::from(dp.ports)],
            stats: SwitchStats {
                ports: vec![PortCounters::default(); usize::from(dp.ports)],
                ..SwitchStats::default()
            },
            profile,
            placement,
            loaded: program.clone(),
            program,
            objects,
            cp: ControlPlaneAgent::default(),
            cpu_queue: VecDeque::new(),
            cpu_busy: false,
            agenda: BinaryHeap::new(),
            seq: 0,
            timer_at: None,
            recirculation_free: 0,
            core_free: 0,
            input_backlog: 0,
            next_request: 0,
            requests: Requests::default(),
        })
    }

    /// The resource report of the loaded program.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// The device profile.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// The program (its control-plane state, its handles).
    pub fn program(&self) -> &P {
        &self.program
    }

    /// The objects, for inspection by tests and experiments.
    pub fn objects(&self) -> &Objects {
        &self.objects
    }

    /// Data-plane rule violations recorded so far.
    pub fn violations(&self) -> &[Violation] {
        self.objects.violations()
    }

    /// Packet counters.
    pub fn stats(&self) -> SwitchStats {
        let mut s = self.stats.clone();
        for (out, tm) in s.ports.iter_mut().zip(&self.tm.counters) {
            out.tx_packets = tm.tx_packets;
            out.tx_bytes = tm.tx_bytes;
            out.tm_drops = tm.tm_drops;
        }
        s
    }

    /// Bytes queued for egress port `port` now.
    pub fn queue_bytes(&self, port: PortId) -> u64 {
        self.tm.queue_bytes(port)
    }

    /// Bytes of the shared packet buffer in use now.
    pub fn buffer_used(&self) -> u64 {
        self.tm.buffer_used()
    }

    fn schedule(&mut self, at: Nanos, event: Event<P::Meta, P::Digest>) {
        self.seq += 1;
        self.agenda.push(Reverse(Scheduled {
            at,
            seq: self.seq,
            event,
        }));
    }

    /// Runs every agenda entry due at or before `now`, then asks the driver
    /// for a timer at the next one.
    fn run_agenda(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        while let Some(Reverse(top)) = self.agenda.peek() {
            if top.at > now {
                break;
            }
            let Reverse(s) = self.agenda.pop().expect("peeked");
            self.run_event(now, s.event, rng, out);
        }
        if let Some(Reverse(top)) = self.agenda.peek() {
            let next = top.at;
            if self.timer_at.is_none_or(|t| next < t || t <= now) {
                self.timer_at = Some(next);
                out.push(Output::Timer { at: next, token: 0 });
            }
        }
    }

    fn run_event(
        &mut self,
        now: Nanos,
        event: Event<P::Meta, P::Digest>,
        rng: &mut DeviceRng,
        out: &mut Vec<Output>,
    ) {
        match event {
            Event::Dequeue(port) => self.egress(now, port, rng, out),
            Event::Ingress(a) => {
                if a.port < self.profile.data_path.ports {
                    self.input_backlog = self.input_backlog.saturating_sub(a.frame.len() as u64);
                }
                if matches!(a.kind, PacketKind::Recirculated { .. }) {
                    for (stream, epoch) in self.pktgen.recirculation_streams(&a.frame) {
                        self.fire_stream(now, stream, epoch);
                    }
                }
                self.ingress(now, a.frame, a.meta, a.port, a.kind, rng);
            }
            Event::CpOpDone => self.apply_op(now, rng),
            Event::CpuArrive(ev) => self.cpu_arrive(now, ev),
            Event::CpuRun => self.cpu_run(now, out),
            Event::CpuTimer(token) => self.cpu_arrive(now, ControlEvent::Timer { token }),
            Event::Aging => {
                let mut expired = Vec::new();
                self.objects.expire_idle(now, &mut expired);
                let at = now + self.profile.control_plane.digest_latency;
                for (table, spec) in expired {
                    self.schedule(
                        at,
                        Event::CpuArrive(ControlEvent::IdleTimeout { table, spec }),
                    );
                }
                self.schedule_aging(now);
            }
            Event::GenTimer { stream, epoch } => {
                if let Some(s) = self.pktgen.current(stream, epoch) {
                    if let Trigger::Timer { period } = s.config.trigger {
                        self.fire_stream(now, stream, epoch);
                        self.schedule(now + period.max(1), Event::GenTimer { stream, epoch });
                    }
                }
            }
            Event::GenPacket {
                stream,
                epoch,
                batch,
                packet,
            } => {
                let rate = self.profile.data_path.port_rate_bps;
                let Some(s) = self.pktgen.current(stream, epoch) else {
                    return;
                };
                let frame = s.config.template.clone();
                let more = packet + 1 < s.config.batch_size;
                if more {
                    let gap = serialisation(frame.len() + WIRE_OVERHEAD_BYTES, rate);
                    self.schedule(
                        now + gap,
                        Event::GenPacket {
                            stream,
                            epoch,
                            batch,
                            packet: packet + 1,
                        },
                    );
                }
                self.stats.generated += 1;
                let kind = PacketKind::Generated {
                    stream,
                    batch_id: batch,
                    packet_id: packet,
                };
                self.ingress(now, frame, P::Meta::default(), PKTGEN_PORT, kind, rng);
            }
        }
    }

    fn fire_stream(&mut self, now: Nanos, stream: u8, epoch: u64) {
        if let Some(s) = self.pktgen.current(stream, epoch) {
            let batch = s.next_batch;
            s.next_batch = s.next_batch.wrapping_add(1);
            self.schedule(
                now,
                Event::GenPacket {
                    stream,
                    epoch,
                    batch,
                    packet: 0,
                },
            );
        }
    }

    fn schedule_aging(&mut self, now: Nanos) {
        if let Some(t) = self.objects.min_idle_timeout() {
            // Sweeping every half timeout reports an idle entry between one
            // and one and a half timeouts after its last hit.
            self.schedule(now + (t / 2).max(1), Event::Aging);
        }
    }

    /// Admits a frame from a port: at once on a switch ASIC, or after the
    /// packets ahead of it on a run-to-completion device.
    fn admit(&mut self, now: Nanos, port: PortId, frame: Vec<u8>, rng: &mut DeviceRng) {
        let per_packet = self.profile.data_path.per_packet;
        if per_packet == 0 {
            self.ingress(
                now,
                frame,
                P::Meta::default(),
                port,
                PacketKind::Normal,
                rng,
            );
            return;
        }
        if self.input_backlog + frame.len() as u64 > self.profile.data_path.buffer_bytes {
            self.stats.input_drops += 1;
            return;
        }
        let start = now.max(self.core_free);
        self.core_free = start + per_packet;
        if start == now {
            self.ingress(
                now,
                frame,
                P::Meta::default(),
                port,
                PacketKind::Normal,
                rng,
            );
        } else {
            self.input_backlog += frame.len() as u64;
            let arrival = Arrival {
                frame,
                meta: P::Meta::default(),
                port,
                kind: PacketKind::Normal,
            };
            self.schedule(start, Event::Ingress(Box::new(arrival)));
        }
    }

    /// One ingress pass of a packet, at `now`.
    fn ingress(
        &mut self,
        now: Nanos,
        frame: Vec<u8>,
        mut meta: P::Meta,
        port: PortId,
        kind: PacketKind,
        rng: &mut DeviceRng,
    ) {
        let depth = self.profile.data_path.parse_depth;
        self.objects.begin_pass(Gress::Ingress);
        let window = &frame[..frame.len().min(depth)];
        if self
            .program
            .parse(Gress::Ingress, window, &mut meta)
            .is_err()
        {
            self.stats.parse_drops += 1;
            return;
        }
        let mut pkt = PacketCtx::new(frame, depth, meta, port, now, kind);
        let mut dp = DataPlane {
            objects: &mut self.objects,
            now,
            rng,
        };
        if self.program.ingress(&mut pkt, &mut dp).is_err() {
            self.stats.violation_drops += 1;
            return;
        }
        let at_tm = now + self.profile.data_path.ingress_latency;
        if let Some(d) = pkt.digest.take() {
            self.stats.digests += 1;
            let at = now + self.profile.control_plane.digest_latency;
            self.schedule(at, Event::CpuArrive(ControlEvent::Digest(d)));
        }
        if let Some(session) = pkt.mirror.take() {
            self.mirror(at_tm, session, &pkt);
        }
        let PacketCtx {
            frame,
            meta,
            kind,
            destination,
            ..
        } = pkt;
        let queued = |frame, meta, rid| QueuedPacket {
            frame,
            meta,
            kind,
            ingress_port: port,
            ingress_time: now,
            arrival: at_tm,
            dequeue: 0,
            queue_bytes_ahead: 0,
            rid,
        };
        match destination {
            Destination::Drop => self.stats.program_drops += 1,
            Destination::Port(p) => self.enqueue(p, queued(frame, meta, 0)),
            Destination::Multicast(group) => match self.tm.multicast.get(&group).cloned() {
                Some(members) if self.profile.features.multicast => {
                    for (p, rid) in members {
                        self.enqueue(p, queued(frame.clone(), meta.clone(), rid));
                    }
                }
                Some(_) => self.stats.feature_drops += 1,
                None => self.stats.no_group_drops += 1,
            },
            Destination::Cpu(reason) => self.punt(at_tm, port, reason, frame),
            Destination::Recirculate => {
                let passes = match kind {
                    PacketKind::Recirculated { passes } => passes + 1,
                    _ => 1,
                };
                if !self.profile.features.recirculation {
                    self.stats.feature_drops += 1;
                } else if passes >= MAX_PASSES {
                    self.stats.pass_limit_drops += 1;
                } else {
                    // The recirculation port serialises like any port.
                    let start = at_tm.max(self.recirculation_free);
                    let rate = self.profile.data_path.port_rate_bps;
                    self.recirculation_free =
                        start + serialisation(frame.len() + WIRE_OVERHEAD_BYTES, rate);
                    self.stats.recirculations += 1;
                    let arrival = Arrival {
                        frame,
                        meta,
                        port: RECIRCULATION_PORT,
                        kind: PacketKind::Recirculated { passes },
                    };
                    let at = start + self.profile.data_path.recirculation_latency;
                    self.schedule(at, Event::Ingress(Box::new(arrival)));
                }
            }
            Destination::Resubmit => {
                if !self.profile.features.resubmit {
                    self.stats.feature_drops += 1;
                } else if kind == PacketKind::Resubmitted {
                    self.stats.pass_limit_drops += 1;
                } else {
                    let arrival = Arrival {
                        frame,
                        meta,
                        port,
                        kind: PacketKind::Resubmitted,
                    };
                    let at = now + self.profile.data_path.recirculation_latency;
                    self.schedule(at, Event::Ingress(Box::new(arrival)));
                }
            }
        }
    }

    fn enqueue(&mut self, port: PortId, pkt: QueuedPacket<P::Meta>) {
        match self.tm.enqueue(port, pkt) {
            Ok(at) => self.schedule(at, Event::Dequeue(port)),
            Err(p) => {
                if usize::from(port) >= self.tm.port_count() {
                    let _ = p;
                    self.stats.bad_port_drops += 1;
                }
            }
        }
    }

    fn mirror(&mut self, at: Nanos, session: u16, pkt: &PacketCtx<P::Meta, P::Digest>) {
        if !self.profile.features.mirroring {
            self.stats.feature_drops += 1;
            return;
        }
        let Some(s) = self.tm.mirror.get(&session).copied() else {
            self.stats.no_group_drops += 1;
            return;
        };
        let keep = s.truncate.unwrap_or(usize::MAX).min(pkt.frame.len());
        self.stats.mirrored += 1;
        let copy = QueuedPacket {
            frame: pkt.frame[..keep].to_vec(),
            meta: pkt.meta.clone(),
            kind: PacketKind::Mirrored { session },
            ingress_port: pkt.ingress_port,
            ingress_time: pkt.ingress_time,
            arrival: at,
            dequeue: 0,
            queue_bytes_ahead: 0,
            rid: 0,
        };
        self.enqueue(s.port, copy);
    }

    /// Sends a frame up the CPU channel: serialised at the channel rate, then
    /// the punt latency.
    fn punt(&mut self, at: Nanos, port: PortId, reason: u16, frame: Vec<u8>) {
        let timing = self.profile.control_plane;
        let start = at.max(self.cp.punt_free);
        self.cp.punt_free = start + serialisation(frame.len(), timing.punt_bps);
        self.stats.punts += 1;
        let arrive = self.cp.punt_free + timing.punt_latency;
        self.schedule(
            arrive,
            Event::CpuArrive(ControlEvent::PacketIn {
                port,
                reason,
                frame,
            }),
        );
    }

    /// The head of `port`'s queue leaves it: egress, then the wire.
    fn egress(&mut self, now: Nanos, port: PortId, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        let Some(q) = self.tm.dequeue(port) else {
            return;
        };
        let depth = self.profile.data_path.parse_depth;
        let mut meta = q.meta;
        self.objects.begin_pass(Gress::Egress);
        let window = &q.frame[..q.frame.len().min(depth)];
        if self
            .program
            .parse(Gress::Egress, window, &mut meta)
            .is_err()
        {
            self.stats.parse_drops += 1;
            return;
        }
        let mut pkt = PacketCtx::new(q.frame, depth, meta, q.ingress_port, q.ingress_time, q.kind);
        pkt.destination = Destination::Port(port);
        pkt.egress.port = port;
        pkt.egress.enq_queue_bytes = q.queue_bytes_ahead;
        pkt.egress.queue_delay = now - q.arrival;
        pkt.egress.rid = q.rid;
        let mut dp = DataPlane {
            objects: &mut self.objects,
            now,
            rng,
        };
        if self.program.egress(&mut pkt, &mut dp).is_err() {
            self.stats.violation_drops += 1;
            return;
        }
        let at_wire = now + self.profile.data_path.egress_latency;
        if let Some(d) = pkt.digest.take() {
            self.stats.digests += 1;
            let at = now + self.profile.control_plane.digest_latency;
            self.schedule(at, Event::CpuArrive(ControlEvent::Digest(d)));
        }
        // A mirror copy does not mirror again (that would loop).
        if let (Some(session), false) = (
            pkt.mirror.take(),
            matches!(q.kind, PacketKind::Mirrored { .. }),
        ) {
            self.mirror(at_wire, session, &pkt);
        }
        if pkt.destination != Destination::Port(port) {
            self.stats.program_drops += 1;
            return;
        }
        let frame = pkt.into_frame();
        let c = &mut self.tm.counters[usize::from(port)];
        c.tx_packets += 1;
        c.tx_bytes += frame.len() as u64;
        out.push(Output::Transmit {
            at: at_wire,
            port,
            frame,
        });
    }

    fn cpu_arrive(&mut self, now: Nanos, ev: ControlEvent<P::Digest>) {
        if self.cpu_queue.len() >= CPU_QUEUE_LIMIT {
            self.stats.cpu_queue_drops += 1;
            return;
        }
        self.cpu_queue.push_back(ev);
        if !self.cpu_busy {
            self.cpu_busy = true;
            let at = now.max(self.cp.cpu_free);
            self.schedule(at, Event::CpuRun);
        }
    }

    /// The CPU handles its next event; what the handler asked for is issued
    /// when the handler's CPU time is over.
    fn cpu_run(&mut self, now: Nanos, out: &mut Vec<Output>) {
        let Some(ev) = self.cpu_queue.pop_front() else {
            self.cpu_busy = false;
            return;
        };
        self.stats.cpu_events += 1;
        let timing = self.profile.control_plane;
        let mut cp = ControlPlane {
            now,
            timing: &timing,
            requests: &mut self.requests,
            next_request: &mut self.next_request,
        };
        self.program.control(ev, &mut cp);
        let done = now + timing.cpu_per_event;
        self.cp.cpu_free = done;
        let requests = std::mem::take(&mut self.requests);
        for op in requests.ops {
            let request = op.request;
            match self.cp.schedule(done, op, &timing) {
                Ok(at) => self.schedule(at, Event::CpOpDone),
                Err(_) => {
                    let error = "control-plane operation queue is full".to_string();
                    self.schedule(
                        done,
                        Event::CpuArrive(ControlEvent::OpFailed { request, error }),
                    );
                }
            }
        }
        for (at, token) in requests.timers {
            self.schedule(at.max(done), Event::CpuTimer(token));
        }
        out.extend(requests.messages.into_iter().map(Output::Control));
        if self.cpu_queue.is_empty() {
            self.cpu_busy = false;
        } else {
            self.schedule(done, Event::CpuRun);
        }
    }

    /// The control operation at the head of the channel takes effect.
    fn apply_op(&mut self, now: Nanos, rng: &mut DeviceRng) {
        let Some((_, issued)) = self.cp.in_flight.pop_front() else {
            return;
        };
        self.stats.cp_ops += 1;
        let request = issued.request;
        let result: Result<(), String> = match issued.op {
            Op::Objects(f) => f(&mut self.objects, now),
            Op::RegisterRead { id, first, count } => {
                match self.objects.register_read(id, first, count) {
                    Ok(values) => {
                        self.cpu_arrive(now, ControlEvent::RegisterValues { request, values });
                        Ok(())
                    }
                    Err(e) => Err(e.to_string()),
                }
            }
            Op::PacketOut { frame, dest } => {
                match dest {
                    PacketOutDest::Ingress(port) => {
                        self.ingress(
                            now,
                            frame,
                            P::Meta::default(),
                            port,
                            PacketKind::FromCpu,
                            rng,
                        );
                    }
                    PacketOutDest::Port(p) => {
                        let q = QueuedPacket {
                            frame,
                            meta: P::Meta::default(),
                            kind: PacketKind::FromCpu,
                            ingress_port: CPU_PORT,
                            ingress_time: now,
                            arrival: now,
                            dequeue: 0,
                            queue_bytes_ahead: 0,
                            rid: 0,
                        };
                        self.enqueue(p, q);
                    }
                }
                Ok(())
            }
            Op::Multicast { group, members } => {
                if members.is_empty() {
                    self.tm.multicast.remove(&group);
                } else {
                    self.tm.multicast.insert(group, members);
                }
                Ok(())
            }
            Op::Mirror { session, config } => {
                self.tm.mirror.insert(session, config);
                Ok(())
            }
            Op::PacketGen { stream, config } => {
                let timer = match &config {
                    Some(c) => match c.trigger {
                        Trigger::Timer { period } => Some(period),
                        _ => None,
                    },
                    None => None,
                };
                match self.pktgen.configure(stream, config) {
                    Ok(epoch) => {
                        if let Some(period) = timer {
                            self.schedule(now + period.max(1), Event::GenTimer { stream, epoch });
                        }
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            }
        };
        if let Err(error) = result {
            self.stats.cp_op_failures += 1;
            self.cpu_arrive(now, ControlEvent::OpFailed { request, error });
        }
    }
}

impl<P: Program> Device for Switch<P> {
    fn start(&mut self, now: Nanos, out: &mut Vec<Output>) {
        self.cpu_arrive(now, ControlEvent::Start);
        self.schedule_aging(now);
        // Nothing in the agenda can need the RNG before the first input.
        let mut rng = crate::device::device_rng(0, 0);
        self.run_agenda(now, &mut rng, out);
    }

    fn handle(&mut self, now: Nanos, input: Input, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        match input {
            Input::Frame { port, frame } => match self.stats.ports.get_mut(usize::from(port)) {
                Some(c) => {
                    c.rx_packets += 1;
                    c.rx_bytes += frame.len() as u64;
                    self.admit(now, port, frame, rng);
                }
                None => self.stats.bad_port_drops += 1,
            },
            Input::Timer { .. } => {
                if self.timer_at.is_some_and(|t| t <= now) {
                    self.timer_at = None;
                }
            }
            Input::Control(msg) => self.cpu_arrive(now, ControlEvent::Message(msg)),
            Input::LinkState { port, up } => {
                if let Some(state) = self.ports_up.get_mut(usize::from(port)) {
                    let was = std::mem::replace(state, up);
                    if was && !up {
                        for (stream, epoch) in self.pktgen.port_down_streams(port) {
                            self.fire_stream(now, stream, epoch);
                        }
                    }
                    let at = now + self.profile.control_plane.digest_latency;
                    self.schedule(at, Event::CpuArrive(ControlEvent::PortStatus { port, up }));
                }
            }
        }
        self.run_agenda(now, rng, out);
    }

    fn restart(&mut self, now: Nanos, out: &mut Vec<Output>) {
        self.program = self.loaded.clone();
        self.objects.clear();
        self.tm.clear();
        self.cp.reset();
        self.cpu_queue.clear();
        self.cpu_busy = false;
        self.pktgen.clear();
        self.agenda.clear();
        self.timer_at = None;
        self.recirculation_free = 0;
        self.core_free = 0;
        self.input_backlog = 0;
        self.requests = Requests::default();
        self.start(now, out);
    }
}
