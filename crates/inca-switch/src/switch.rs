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

use std::collections::VecDeque;

use crate::agenda::Agenda;
use crate::block_report::BlockUsage;
use crate::line::LineClock;

use crate::control::{
    serialisation, ControlPlane, ControlPlaneAgent, Op, PacketOutDest, Requests, CPU_QUEUE_LIMIT,
};
use crate::device::{push_output, Device, DeviceRng, Input, Nanos, Output, PortId};
use crate::objects::{DataPlane, Declare, DeclareError, Objects, Violation};
use crate::pktgen::{PacketGenerator, Trigger};
use crate::placement::{place, Gress, Location, Placement, PlacementError};
use crate::probe::{probe_pass, Prober};
use crate::profile::Profile;
use crate::program::{ControlEvent, Destination, PacketCtx, PacketKind, Program};
use crate::tm::{
    Cell, Drop as TmDrop, PortCounters, QueuedPacket, TrafficManager, WIRE_OVERHEAD_BYTES,
};

/// Port number of the CPU port (packets from the control plane arrive on it).
pub const CPU_PORT: PortId = 0xfffe;
/// Port number packets from the packet generator arrive on.
pub const PKTGEN_PORT: PortId = 0xfffd;
/// Port number recirculated packets arrive on.
pub const RECIRCULATION_PORT: PortId = 0xfffc;
/// At most this many punted packets can be on the channel to the CPU at
/// once (a CPU port's queue); more are dropped and counted.
pub const PUNT_QUEUE_LIMIT: usize = 4096;
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
    place_declared(profile, &decl)
}

/// Places what `decl` holds, attributing the usage to its blocks.
fn place_declared(profile: &Profile, decl: &Declare) -> Result<Placement, LoadError> {
    let mut placement = place(profile, &decl.decls())?;
    placement.blocks = decl
        .blocks()
        .iter()
        .map(|b| {
            let objects = &placement.objects[b.objects.start as usize..b.objects.end as usize];
            BlockUsage::of(
                &b.name,
                objects.iter().map(|o| {
                    let dram = match o.location {
                        Location::Dram { bytes } => bytes,
                        Location::Stages { .. } => 0,
                    };
                    (
                        o.stage_use.as_slice(),
                        dram,
                        (o.first_stage(), o.last_stage()),
                    )
                }),
            )
        })
        .collect();
    Ok(placement)
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
    /// Punted packets dropped because the CPU channel was full.
    pub punt_drops: u64,
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
    /// Control-channel RPCs sent (a batch of writes is one RPC).
    pub cp_rpcs: u64,
    /// Control-plane operations refused because the channel's queue was
    /// full.
    pub cp_ops_refused: u64,
}

impl SwitchStats {
    /// Every frame's fate, summed: dropped (for any reason), punted to the
    /// CPU, or transmitted. Each frame the switch received ends in exactly
    /// one of them; frames the switch makes (multicast and mirror copies,
    /// packet-outs, generated packets) add to it.
    pub fn fates(&self) -> u64 {
        self.bad_port_drops
            + self.parse_drops
            + self.violation_drops
            + self.program_drops
            + self.no_group_drops
            + self.feature_drops
            + self.pass_limit_drops
            + self.input_drops
            + self.punts
            + self.punt_drops
            + self
                .ports
                .iter()
                .map(|p| p.tx_packets + p.tm_drops)
                .sum::<u64>()
    }
}

/// A packet on its way into ingress later (recirculation, resubmit,
/// generator, packet-out, or a frame waiting for a run-to-completion core).
struct Arrival<M> {
    frame: Vec<u8>,
    meta: M,
    port: PortId,
    kind: PacketKind,
    /// It waited in a run-to-completion device's input buffer (and frees
    /// its bytes there when it enters ingress).
    from_input: bool,
}

enum Event<M, D> {
    Dequeue(PortId),
    /// A held packet reaching the traffic manager out of the pipeline
    /// lane's order (an egress mirror copy).
    TmArrive(PortId, Cell),
    Ingress(Box<Arrival<M>>),
    CpOpDone,
    /// Boxed: control events are rare and large, dequeues are common and
    /// small, and the agenda moves entries on every push and pop.
    CpuArrive(Box<ControlEvent<D>>),
    CpuRun,
    CpuTimer(u64),
    Aging,
    GenTimer {
        stream: u8,
        epoch: u32,
    },
    /// The link-fault detection time after `port` went down.
    PortDownDetected(PortId),
    GenPacket {
        stream: u8,
        epoch: u32,
        batch: u16,
        packet: u16,
    },
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
    agenda: Agenda<Event<P::Meta, P::Digest>>,
    /// Packets between ingress and the traffic manager, in arrival order
    /// (ingress latency is constant, so this is the order they left
    /// ingress): enqueued exactly at their arrival.
    pipeline: VecDeque<(Nanos, PortId, Cell)>,
    timer_at: Option<Nanos>,
    /// The recirculation port's transmitter.
    recirculation: LineClock,
    /// When the generator port is free for its next packet: every stream
    /// and batch shares the one port, so together they never exceed its
    /// rate (a batch fired while another is emitting waits its turn).
    gen_free: Nanos,
    /// When a run-to-completion device's core is free for the next packet.
    core_free: Nanos,
    /// Bytes waiting for a run-to-completion core.
    input_backlog: u64,
    /// Punted packets on their way to the CPU.
    punts_in_flight: usize,
    next_request: u64,
    requests: Requests,
    ports_up: Vec<bool>,
    stats: SwitchStats,
    /// The load-time check's analysis of every pass (`None` normally).
    prober: Option<Box<Prober>>,
}

impl<P: Program> Switch<P> {
    /// Loads `program` onto a device with `profile`: declares and places its
    /// objects (failing with the resource model's explanation if they do not
    /// fit).
    pub fn new(profile: Profile, mut program: P) -> Result<Self, LoadError> {
        let mut decl = Declare::default();
        program.declare(&mut decl)?;
        let placement = place_declared(&profile, &decl)?;
        let objects = decl.into_objects(profile.features.cpu_data_path);
        let dp = profile.data_path;
        Ok(Switch {
            tm: TrafficManager::new(dp.ports, dp.port_rate_bps, dp.buffer_bytes),
            pktgen: PacketGenerator::new(profile.features.pktgen_streams, dp.ports),
            gen_free: 0,
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
            agenda: Agenda::new(),
            pipeline: VecDeque::new(),
            timer_at: None,
            recirculation: LineClock::new(dp.port_rate_bps),
            core_free: 0,
            input_backlog: 0,
            punts_in_flight: 0,
            next_request: 0,
            requests: Requests::default(),
            prober: None,
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

    /// Analyses every packet pass from now on for the load-time check
    /// ([`crate::probe`]): each pass is traced and re-run with perturbed
    /// results before it runs for real. Slow; for `inca check`, not runs.
    pub fn attach_prober(&mut self) {
        let prober = Prober::new(self.program.name(), &self.objects.decls());
        self.prober = Some(Box::new(prober));
    }

    /// Analyses a pass for the load-time check before it runs for real
    /// (out of line and cold, so the check costs the normal path one branch).
    #[cold]
    #[inline(never)]
    fn probe(
        &mut self,
        pkt: &PacketCtx<P::Meta, P::Digest>,
        gress: Gress,
        now: Nanos,
        rng: &mut DeviceRng,
    ) {
        if let Some(p) = self.prober.as_deref_mut() {
            probe_pass(p, &self.program, &mut self.objects, pkt, gress, now, rng);
            self.objects.begin_pass(gress);
        }
    }

    /// What the load-time check found so far (see [`Switch::attach_prober`]).
    pub fn prober(&self) -> Option<&Prober> {
        self.prober.as_deref()
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
        s.cp_rpcs = self.cp.rpcs;
        s.cp_ops_refused = self.cp.ops_dropped;
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
        self.agenda.push(at, event);
    }

    /// Runs every agenda entry due at or before `now`, then asks the driver
    /// for a timer at the next one.
    /// A frame arriving on `port`: counted, then admitted to the pipeline.
    #[inline]
    fn receive(&mut self, now: Nanos, port: PortId, frame: Vec<u8>, rng: &mut DeviceRng) {
        match self.stats.ports.get_mut(usize::from(port)) {
            Some(c) => {
                c.rx_packets += 1;
                c.rx_bytes += frame.len() as u64;
                self.admit(now, port, frame, rng);
            }
            None => self.stats.bad_port_drops += 1,
        }
    }

    fn run_agenda(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.drain(now, rng, out);
        let lane = self.pipeline.front().map(|&(at, _, _)| at);
        let next = match (self.agenda.peek_time(), lane) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(next) = next {
            if self.timer_at.is_none_or(|t| next < t || t <= now) {
                self.timer_at = Some(next);
                push_output(out, || Output::Timer { at: next, token: 0 });
            }
        }
    }

    /// Runs everything due at or before `now` in time order: agenda events,
    /// and packets reaching the traffic manager (after any dequeue due at the
    /// same instant, so a packet leaving makes room for one arriving).
    #[inline]
    fn drain(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        // Most calls find nothing due (the driver fired the timers on time):
        // that answer is kept out of the loop's call, whose frame is large
        // (egress and the traffic manager are inlined into it).
        let lane_due = self.pipeline.front().is_some_and(|&(a, _, _)| a <= now);
        if lane_due || self.agenda.peek_time().is_some_and(|t| t <= now) {
            self.drain_due(now, rng, out);
        }
    }

    /// [`Self::drain`] when something is due.
    fn drain_due(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        loop {
            // The lane goes first only if strictly earlier than the agenda
            // (a dequeue due at an instant comes before an arrival at it).
            if let Some(&(a, _, _)) = self.pipeline.front() {
                if a <= now && self.agenda.peek_time().is_none_or(|t| a < t) {
                    self.arrive_from_pipeline(now, rng, out);
                    continue;
                }
            }
            match self.agenda.pop_due(now) {
                Some((_, event)) => self.run_event(now, event, rng, out),
                None => break,
            }
        }
    }

    fn arrive_from_pipeline(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        if let Some((_, port, cell)) = self.pipeline.pop_front() {
            self.enqueue(now, port, cell, rng, out);
        }
    }

    /// Sends a packet to the traffic manager, where it arrives at
    /// `pkt.arrival`.
    fn send_to_tm(&mut self, now: Nanos, port: PortId, pkt: QueuedPacket<P::Meta>) {
        let at = pkt.arrival;
        let cell = self.tm.hold(pkt);
        if at <= now {
            // Called from inside a pipeline pass or a control operation:
            // the agenda runs it next, not this call (no nested egress).
            self.schedule(now, Event::TmArrive(port, cell));
        } else if self.pipeline.back().is_none_or(|&(b, _, _)| b <= at) {
            self.pipeline.push_back((at, port, cell));
        } else {
            self.schedule(at, Event::TmArrive(port, cell));
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
            Event::TmArrive(port, cell) => self.enqueue(now, port, cell, rng, out),
            Event::Ingress(a) => {
                if a.from_input {
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
            Event::CpuArrive(ev) => self.cpu_arrive(now, *ev),
            Event::CpuRun => self.cpu_run(now, rng, out),
            Event::CpuTimer(token) => self.cpu_arrive(now, ControlEvent::Timer { token }),
            Event::Aging => {
                let mut expired = Vec::new();
                self.objects.expire_idle(now, &mut expired);
                let at = now + self.profile.control_plane.digest_latency;
                for (table, spec) in expired {
                    self.schedule(
                        at,
                        Event::CpuArrive(Box::new(ControlEvent::IdleTimeout { table, spec })),
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
            Event::PortDownDetected(port) => {
                if self.ports_up.get(usize::from(port)) == Some(&false) {
                    for (stream, epoch) in self.pktgen.port_down_detected(port) {
                        self.fire_stream(now, stream, epoch);
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
                if now < self.gen_free {
                    let at = self.gen_free;
                    let event = Event::GenPacket {
                        stream,
                        epoch,
                        batch,
                        packet,
                    };
                    self.schedule(at, event);
                    return;
                }
                let Some(s) = self.pktgen.current(stream, epoch) else {
                    return;
                };
                let frame = s.frame(stream, packet);
                let more = packet + 1 < s.config.batch_size;
                let gap = serialisation(frame.len() + WIRE_OVERHEAD_BYTES, rate);
                self.gen_free = now + gap;
                if more {
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

    fn fire_stream(&mut self, now: Nanos, stream: u8, epoch: u32) {
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
                from_input: true,
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
        if self.prober.is_some() {
            self.probe(&pkt, Gress::Ingress, now, rng);
        }
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
            self.send_digest(now, d);
        }
        if let Some(session) = pkt.mirror.take() {
            self.mirror(now, at_tm, session, &pkt);
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
            queue_bytes_ahead: 0,
            rid,
        };
        match destination {
            Destination::Drop => self.stats.program_drops += 1,
            Destination::Port(p) => self.send_to_tm(now, p, queued(frame, meta, 0)),
            Destination::Multicast(group) => match self.tm.multicast.get(&group).cloned() {
                Some(members) if self.profile.features.multicast => {
                    for (p, rid) in members {
                        self.send_to_tm(now, p, queued(frame.clone(), meta.clone(), rid));
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
                    let (start, _) = self
                        .recirculation
                        .send(at_tm, (frame.len() + WIRE_OVERHEAD_BYTES) as u64);
                    self.stats.recirculations += 1;
                    let arrival = Arrival {
                        frame,
                        meta,
                        port: RECIRCULATION_PORT,
                        kind: PacketKind::Recirculated { passes },
                        from_input: false,
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
                        from_input: false,
                    };
                    let at = now + self.profile.data_path.recirculation_latency;
                    self.schedule(at, Event::Ingress(Box::new(arrival)));
                }
            }
        }
    }

    fn enqueue(
        &mut self,
        now: Nanos,
        port: PortId,
        cell: Cell,
        rng: &mut DeviceRng,
        out: &mut Vec<Output>,
    ) {
        match self.tm.enqueue(port, cell) {
            // An empty queue at an instant when nothing else is due: the
            // dequeue would be the agenda's next entry, so run it now.
            Ok(at) if at <= now && self.agenda.peek_time().is_none_or(|t| t > now) => {
                self.egress(now, port, rng, out)
            }
            Ok(at) => self.schedule(at, Event::Dequeue(port)),
            Err(TmDrop::NoPort) => self.stats.bad_port_drops += 1,
            // Counted per port by the traffic manager.
            Err(TmDrop::BufferFull) => {}
            Err(TmDrop::NoPacket) => debug_assert!(false, "enqueued an empty cell"),
        }
    }

    fn mirror(&mut self, now: Nanos, at: Nanos, session: u16, pkt: &PacketCtx<P::Meta, P::Digest>) {
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
        if s.port == RECIRCULATION_PORT {
            // A session on the recirculation port (Tofino: a mirror session
            // whose egress port is a loopback port) brings the copy back to
            // ingress with its bridged metadata, serialised by the
            // recirculation port (SwiSh EWO: E2E mirror, then recirculate).
            // [our choice] the copy skips the loopback port's egress pass.
            let passes = match pkt.kind {
                PacketKind::Recirculated { passes } => passes + 1,
                _ => 1,
            };
            if !self.profile.features.recirculation {
                self.stats.feature_drops += 1;
                return;
            } else if passes >= MAX_PASSES {
                self.stats.pass_limit_drops += 1;
                return;
            }
            let frame = pkt.frame[..keep].to_vec();
            let (start, _) = self
                .recirculation
                .send(at, (frame.len() + WIRE_OVERHEAD_BYTES) as u64);
            self.stats.recirculations += 1;
            let arrival = Arrival {
                frame,
                meta: pkt.meta.clone(),
                port: RECIRCULATION_PORT,
                kind: PacketKind::Recirculated { passes },
                from_input: false,
            };
            let at = start + self.profile.data_path.recirculation_latency;
            self.schedule(at, Event::Ingress(Box::new(arrival)));
            return;
        }
        let copy = QueuedPacket {
            frame: pkt.frame[..keep].to_vec(),
            meta: pkt.meta.clone(),
            kind: PacketKind::Mirrored { session },
            ingress_port: pkt.ingress_port,
            ingress_time: pkt.ingress_time,
            arrival: at,
            queue_bytes_ahead: 0,
            rid: 0,
        };
        self.send_to_tm(now, s.port, copy);
    }

    /// A digest reaches the control plane `digest_latency` after its pass.
    fn send_digest(&mut self, now: Nanos, d: P::Digest) {
        self.stats.digests += 1;
        let at = now + self.profile.control_plane.digest_latency;
        self.schedule(at, Event::CpuArrive(Box::new(ControlEvent::Digest(d))));
    }

    /// Sends a frame up the CPU channel: serialised at the channel rate, then
    /// the punt latency.
    fn punt(&mut self, at: Nanos, port: PortId, reason: u16, frame: Vec<u8>) {
        if self.punts_in_flight >= PUNT_QUEUE_LIMIT {
            self.stats.punt_drops += 1;
            return;
        }
        self.punts_in_flight += 1;
        let timing = self.profile.control_plane;
        let start = at.max(self.cp.punt_free);
        self.cp.punt_free = start + serialisation(frame.len(), timing.punt_bps);
        self.stats.punts += 1;
        let arrive = self.cp.punt_free + timing.punt_latency;
        self.schedule(
            arrive,
            Event::CpuArrive(Box::new(ControlEvent::PacketIn {
                port,
                reason,
                frame,
            })),
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
        if self.prober.is_some() {
            self.probe(&pkt, Gress::Egress, now, rng);
        }
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
            self.send_digest(now, d);
        }
        // A mirror copy does not mirror again (that would loop), unless the
        // program asked for a loop with `mirror_loop`.
        if let (Some(session), false) = (
            pkt.mirror.take(),
            matches!(q.kind, PacketKind::Mirrored { .. }) && !pkt.mirror_loop,
        ) {
            self.mirror(now, at_wire, session, &pkt);
        }
        if pkt.destination != Destination::Port(port) {
            self.stats.program_drops += 1;
            return;
        }
        let frame = pkt.into_frame();
        let c = &mut self.tm.counters[usize::from(port)];
        c.tx_packets += 1;
        c.tx_bytes += frame.len() as u64;
        push_output(out, || Output::Transmit {
            at: at_wire,
            port,
            frame,
        });
    }

    fn cpu_arrive(&mut self, now: Nanos, ev: ControlEvent<P::Digest>) {
        if matches!(ev, ControlEvent::PacketIn { .. }) {
            self.punts_in_flight -= 1;
        }
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
    fn cpu_run(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
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
            request_tag: 0,
            rng,
        };
        self.program.control(ev, &mut cp);
        let done = now + timing.cpu_per_event;
        self.cp.cpu_free = done;
        let requests = std::mem::take(&mut self.requests);
        for (request, at) in self.cp.schedule(done, requests.ops, &timing) {
            match at {
                Some(at) => self.schedule(at, Event::CpOpDone),
                None => {
                    let error = "control-plane operation queue is full".to_string();
                    self.schedule(
                        done,
                        Event::CpuArrive(Box::new(ControlEvent::OpFailed { request, error })),
                    );
                }
            }
        }
        for (at, token) in requests.timers {
            self.schedule(at.max(done), Event::CpuTimer(token));
        }
        out.extend(requests.messages.into_iter().map(Output::Control));
        out.extend(
            requests
                .sessions
                .into_iter()
                .map(|(session, body)| Output::Session {
                    at: done,
                    session,
                    body,
                }),
        );
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
            Op::Read(f) => f(&mut self.objects, now).map(|r| {
                self.cpu_arrive(now, r.into_event(request));
            }),
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
                            queue_bytes_ahead: 0,
                            rid: 0,
                        };
                        self.send_to_tm(now, p, q);
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
                    Err(e) => Err(e.to_string()),
                }
            }
            Op::PktGenClearPortDown { port } => {
                self.pktgen.clear_port_down(port).map_err(|e| e.to_string())
            }
        };
        if let Err(error) = result {
            self.stats.cp_op_failures += 1;
            self.cpu_arrive(now, ControlEvent::OpFailed { request, error });
        }
    }
}

impl<P: Program> Device for Switch<P> {
    fn start(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.cpu_arrive(now, ControlEvent::Start);
        self.schedule_aging(now);
        self.run_agenda(now, rng, out);
    }

    fn handle(&mut self, now: Nanos, input: Input, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        // Whatever was due before this input happens first (a driver that
        // fires timers on time leaves nothing here but same-instant events).
        // A timer input is nothing but that, and `run_agenda` below does it.
        if !matches!(input, Input::Timer { .. }) {
            self.drain(now, rng, out);
        }
        match input {
            Input::Frame { port, frame } => self.receive(now, port, frame, rng),
            Input::Timer { .. } => {
                if self.timer_at.is_some_and(|t| t <= now) {
                    self.timer_at = None;
                }
            }
            Input::Control(msg) => self.cpu_arrive(now, ControlEvent::Message(msg)),
            Input::Session(ev) => self.cpu_arrive(now, ControlEvent::Session(ev)),
            Input::LinkState { port, up } => {
                if let Some(state) = self.ports_up.get_mut(usize::from(port)) {
                    let was = std::mem::replace(state, up);
                    if was && !up {
                        let at = now + self.profile.data_path.port_down_detection;
                        self.schedule(at, Event::PortDownDetected(port));
                    }
                    let at = now + self.profile.control_plane.digest_latency;
                    self.schedule(
                        at,
                        Event::CpuArrive(Box::new(ControlEvent::PortStatus { port, up })),
                    );
                }
            }
        }
        self.run_agenda(now, rng, out);
    }

    fn handle_frame(
        &mut self,
        now: Nanos,
        port: PortId,
        frame: Vec<u8>,
        rng: &mut DeviceRng,
        out: &mut Vec<Output>,
    ) {
        // `handle` for a frame, without the input enum.
        self.drain(now, rng, out);
        self.receive(now, port, frame, rng);
        self.run_agenda(now, rng, out);
    }

    fn restart(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.program = self.loaded.clone();
        self.objects.clear();
        self.tm.clear();
        self.cp.reset();
        self.cpu_queue.clear();
        self.cpu_busy = false;
        self.pktgen.clear();
        self.agenda.clear();
        self.pipeline.clear();
        self.timer_at = None;
        self.recirculation.reset(0);
        self.gen_free = 0;
        self.core_free = 0;
        self.input_backlog = 0;
        self.punts_in_flight = 0;
        self.requests = Requests::default();
        self.start(now, rng, out);
    }
}

#[cfg(test)]
mod size_tests {
    use super::*;

    #[test]
    fn agenda_events_stay_small() {
        // Every packet pushes and pops one; keep the common ones inline.
        assert!(std::mem::size_of::<Event<[u8; 64], Vec<u8>>>() <= 16);
    }
}
