//! A multi-device test fabric: the small deterministic driver that tests,
//! fixtures and benchmarks use to run several sans-IO devices together
//! without the simulator.
//!
//! Devices are nodes, numbered in the order they are added. A wire joins a
//! port of one node to a port of another, both directions, with a fixed
//! latency and optionally a loss probability (drawn from the fabric's own
//! RNG stream, so a run is reproducible from its seed). A time-ordered
//! agenda ([`crate::agenda::Agenda`]) holds the frames on wires; each node
//! keeps its pending timers (at most one per token, as the device contract
//! says) in a short list, and the fabric the earliest of them, so setting
//! and firing a timer costs no agenda traffic (the benchmarks' switch sets
//! one per packet). A frame sent on a port with no wire leaves the fabric: it is
//! counted per port and either kept ([`Fabric::keep_egress`]) or its buffer
//! recycled. A tap ([`Fabric::tap`]) copies what a node sends on a port;
//! control messages and session messages devices send are captured (the
//! fabric models no sessions: a test hands session events in with
//! [`Fabric::session`]). Frames fed from templates
//! ([`Fabric::set_stream`], [`Fabric::push`]) are cut into recycled
//! buffers, so the loop allocates nothing per event beyond the frames and a
//! benchmark measures the devices, not the allocator.
//!
//! Order: [our choice] at one instant timers fire before frames arrive,
//! timers in (node, token) order, frames in the order they were sent; a
//! frame or message injected at `t` is handed over after everything due at
//! or before `t`. An output in the past is carried out now and counted as a
//! contract violation ([`FabricStats::contract_violations`]).
//!
//! What it leaves out on purpose: link rates and queues, faults, pcap
//! capture, reports — that is the simulator (`inca-sim`). Every captured
//! list and the frames in flight are bounded; what does not fit is counted.
//! [`crate::harness::Harness`] is a one-device fabric that records
//! everything its device sends.

use std::any::Any;

use rand::Rng;

use crate::agenda::Agenda;
use crate::device::{
    device_rng, ControlMessage, Device, DeviceRng, Input, Nanos, Output, PortId, SessionEvent,
    SessionId,
};

/// A node of a fabric: its index, in the order devices were added.
pub type NodeIx = usize;

/// Most frames on wires at once; more are dropped and counted
/// ([`FabricStats::in_flight_drops`]).
pub const MAX_IN_FLIGHT: usize = 1 << 20;
/// Most frames kept by taps and by the egress capture, each; more are
/// counted ([`FabricStats::kept_drops`]).
pub const MAX_KEPT: usize = 1 << 20;
/// Most control messages kept; more are counted
/// ([`FabricStats::message_drops`]).
pub const MAX_MESSAGES: usize = 1 << 16;
/// Recycled frame buffers kept.
const POOL: usize = 256;
/// RNG stream of the wires' loss draws (devices take streams from 0 up).
const LOSS_STREAM: u64 = u64::MAX;

/// How a wire carries frames.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Wire {
    /// From transmission to delivery.
    pub latency: Nanos,
    /// Probability that a frame is lost, in [0, 1].
    pub loss: f64,
}

impl Wire {
    /// A wire with `latency` and no loss.
    pub fn with_latency(latency: Nanos) -> Wire {
        Wire { latency, loss: 0.0 }
    }
}

/// A wiring mistake.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FabricError {
    /// No node has this index.
    #[error("fabric: no node {0}")]
    UnknownNode(NodeIx),
    /// The port already has a wire.
    #[error("fabric: node {node} port {port} already has a wire")]
    PortTaken {
        /// The node.
        node: NodeIx,
        /// The port.
        port: PortId,
    },
    /// A loss probability outside [0, 1].
    #[error("fabric: wire loss {0} is not a probability")]
    BadLoss(f64),
}

/// A frame a node sent, as a tap or the egress capture keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// When transmission starts.
    pub at: Nanos,
    /// The sender.
    pub node: NodeIx,
    /// The port it was sent on.
    pub port: PortId,
    /// The frame.
    pub frame: Vec<u8>,
}

/// What the fabric did, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FabricStats {
    /// Frames handed in from outside ([`Fabric::inject`], [`Fabric::push`]).
    pub injected: u64,
    /// Frames delivered over wires.
    pub delivered: u64,
    /// Frames sent on ports without a wire (they left the fabric).
    pub left: u64,
    /// Frames lost to a wire's loss probability.
    pub lost: u64,
    /// Frames sent onto a wire that was down.
    pub link_down_drops: u64,
    /// Frames dropped because [`MAX_IN_FLIGHT`] were on wires.
    pub in_flight_drops: u64,
    /// Frames a tap or the egress capture did not keep ([`MAX_KEPT`]).
    pub kept_drops: u64,
    /// Control messages not kept ([`MAX_MESSAGES`]).
    pub message_drops: u64,
    /// Timers fired.
    pub timers_fired: u64,
    /// Outputs timed before the call that produced them.
    pub contract_violations: u64,
}

/// A device the fabric can hand back as its concrete type: any device
/// that is `'static`. A fabric of `Box<dyn AnyDevice>` holds devices of
/// different types (a switch and its servers).
pub trait AnyDevice: Device + Any {
    /// The device as `Any`.
    fn as_any(&self) -> &dyn Any;
    /// The device as `Any`, mutably.
    fn as_any_mut(&mut self) -> &mut dyn Any;
    /// The boxed device as `Any`, to take it back by value.
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

impl<T: Device + Any> AnyDevice for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// The far end of a wire, seen from one port.
#[derive(Debug, Clone, Copy)]
struct End {
    node: NodeIx,
    port: PortId,
    latency: Nanos,
    loss: f64,
    up: bool,
}

#[derive(Debug, Clone, Default)]
struct PortSlot {
    wire: Option<End>,
    tap: bool,
    left: u64,
}

struct NodeSlot {
    rng: DeviceRng,
    /// Pending timers: (token, time). A device has a handful.
    timers: Vec<(u64, Nanos)>,
    ports: Vec<PortSlot>,
}

/// A frame on a wire.
struct Event {
    node: NodeIx,
    port: PortId,
    frame: Vec<u8>,
}

/// Frames cut from templates, fed to one port at a fixed gap.
struct Stream {
    node: NodeIx,
    port: PortId,
    gap: Nanos,
    templates: Vec<Vec<u8>>,
    next: usize,
}

/// The fabric without its devices: the agenda, the wiring and what was
/// captured. Its methods take the devices as a slice, so a driver can keep
/// them where it likes (the harness keeps its one device in a public
/// field).
pub(crate) struct Core {
    now: Nanos,
    seed: u64,
    nodes: Vec<NodeSlot>,
    agenda: Agenda<Event>,
    in_flight: usize,
    /// The earliest pending timer over all nodes: (time, node, token).
    next_timer: Option<(Nanos, NodeIx, u64)>,
    out: Vec<Output>,
    pool: Vec<Vec<u8>>,
    loss_rng: DeviceRng,
    stream: Option<Stream>,
    pub(crate) keep_egress: bool,
    pub(crate) egress: Vec<Sent>,
    pub(crate) tapped: Vec<Sent>,
    pub(crate) messages: Vec<(Nanos, NodeIx, ControlMessage)>,
    pub(crate) session_sent: Vec<SessionSent>,
    pub(crate) stats: FabricStats,
}

/// A message a device sent on a control session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSent {
    /// When it leaves the device.
    pub at: Nanos,
    /// The node that sent it.
    pub node: NodeIx,
    /// The session.
    pub session: SessionId,
    /// The message.
    pub body: Vec<u8>,
}

impl Core {
    pub(crate) fn new(seed: u64) -> Core {
        Core {
            now: 0,
            seed,
            nodes: Vec::new(),
            agenda: Agenda::new(),
            in_flight: 0,
            next_timer: None,
            out: Vec::with_capacity(64),
            pool: Vec::with_capacity(POOL),
            loss_rng: device_rng(seed, LOSS_STREAM),
            stream: None,
            keep_egress: false,
            egress: Vec::new(),
            tapped: Vec::new(),
            messages: Vec::new(),
            session_sent: Vec::new(),
            stats: FabricStats::default(),
        }
    }

    pub(crate) fn now(&self) -> Nanos {
        self.now
    }

    /// A slot for the next node; its RNG is stream `index` of the seed.
    pub(crate) fn add_node(&mut self) -> NodeIx {
        let ix = self.nodes.len();
        self.nodes.push(NodeSlot {
            rng: device_rng(self.seed, ix as u64),
            timers: Vec::new(),
            ports: Vec::new(),
        });
        ix
    }

    #[inline]
    fn port_slot(&mut self, node: NodeIx, port: PortId) -> &mut PortSlot {
        let ports = &mut self.nodes[node].ports;
        let p = usize::from(port);
        if ports.len() <= p {
            ports.resize(p + 1, PortSlot::default());
        }
        &mut ports[p]
    }

    fn connect(
        &mut self,
        a: (NodeIx, PortId),
        b: (NodeIx, PortId),
        wire: Wire,
    ) -> Result<(), FabricError> {
        for (node, _) in [a, b] {
            if node >= self.nodes.len() {
                return Err(FabricError::UnknownNode(node));
            }
        }
        if !(0.0..=1.0).contains(&wire.loss) {
            return Err(FabricError::BadLoss(wire.loss));
        }
        for (node, port) in [a, b] {
            if self.port_slot(node, port).wire.is_some() || a == b {
                return Err(FabricError::PortTaken { node, port });
            }
        }
        let end = |(node, port): (NodeIx, PortId)| End {
            node,
            port,
            latency: wire.latency,
            loss: wire.loss,
            up: true,
        };
        self.port_slot(a.0, a.1).wire = Some(end(b));
        self.port_slot(b.0, b.1).wire = Some(end(a));
        Ok(())
    }

    pub(crate) fn start<D: Device>(&mut self, devs: &mut [D], node: NodeIx) {
        let mut out = std::mem::take(&mut self.out);
        devs[node].start(self.now, &mut self.nodes[node].rng, &mut out);
        self.apply(node, &mut out);
        self.out = out;
    }

    // Inlined: timers fire through it on the per-packet path.
    #[inline(always)]
    fn input<D: Device>(&mut self, devs: &mut [D], node: NodeIx, input: Input) {
        let mut out = std::mem::take(&mut self.out);
        devs[node].handle(self.now, input, &mut self.nodes[node].rng, &mut out);
        self.apply(node, &mut out);
        self.out = out;
    }

    /// [`Core::input`] of a frame, through [`Device::handle_frame`]: the
    /// per-packet path, kept free of [`Input`] moves.
    #[inline(always)]
    fn frame<D: Device>(&mut self, devs: &mut [D], node: NodeIx, port: PortId, frame: Vec<u8>) {
        let mut out = std::mem::take(&mut self.out);
        devs[node].handle_frame(self.now, port, frame, &mut self.nodes[node].rng, &mut out);
        self.apply(node, &mut out);
        self.out = out;
    }

    /// `at`, or now (counted) when `at` is in the past.
    #[inline]
    fn on_time(&mut self, at: Nanos) -> Nanos {
        if at < self.now {
            self.stats.contract_violations += 1;
            self.now
        } else {
            at
        }
    }

    #[inline]
    fn recycle(&mut self, frame: Vec<u8>) {
        if self.pool.len() < POOL {
            self.pool.push(frame);
        }
    }

    /// Carries out `node`'s outputs.
    #[inline(always)]
    fn apply(&mut self, node: NodeIx, out: &mut Vec<Output>) {
        for o in out.drain(..) {
            match o {
                Output::Transmit { at, port, frame } => {
                    let at = self.on_time(at);
                    self.transmit(node, at, port, frame);
                }
                Output::Timer { at, token } => {
                    let at = self.on_time(at);
                    self.set_timer(node, token, at);
                }
                Output::Control(m) => {
                    if self.messages.len() < MAX_MESSAGES {
                        self.messages.push((self.now, node, m));
                    } else {
                        self.stats.message_drops += 1;
                    }
                }
                Output::Session { at, session, body } => {
                    let at = self.on_time(at);
                    if self.session_sent.len() < MAX_MESSAGES {
                        self.session_sent.push(SessionSent {
                            at,
                            node,
                            session,
                            body,
                        });
                    } else {
                        self.stats.message_drops += 1;
                    }
                }
            }
        }
    }

    #[inline]
    fn transmit(&mut self, node: NodeIx, at: Nanos, port: PortId, frame: Vec<u8>) {
        let keep = self.keep_egress;
        let slot = self.port_slot(node, port);
        // The common case of the benchmarks: an open port, no tap, nothing
        // kept.
        if slot.wire.is_none() && !slot.tap && !keep {
            slot.left += 1;
            self.stats.left += 1;
            self.recycle(frame);
            return;
        }
        let (wire, tap) = (slot.wire, slot.tap);
        if wire.is_none() {
            slot.left += 1;
        }
        if tap {
            if self.tapped.len() < MAX_KEPT {
                let frame = frame.clone();
                self.tapped.push(Sent {
                    at,
                    node,
                    port,
                    frame,
                });
            } else {
                self.stats.kept_drops += 1;
            }
        }
        let Some(end) = wire else {
            self.stats.left += 1;
            if self.keep_egress && self.egress.len() < MAX_KEPT {
                self.egress.push(Sent {
                    at,
                    node,
                    port,
                    frame,
                });
            } else {
                if self.keep_egress {
                    self.stats.kept_drops += 1;
                }
                self.recycle(frame);
            }
            return;
        };
        if !end.up {
            self.stats.link_down_drops += 1;
            self.recycle(frame);
        } else if end.loss > 0.0 && self.loss_rng.gen_bool(end.loss) {
            self.stats.lost += 1;
            self.recycle(frame);
        } else if self.in_flight >= MAX_IN_FLIGHT {
            self.stats.in_flight_drops += 1;
            self.recycle(frame);
        } else {
            self.in_flight += 1;
            let event = Event {
                node: end.node,
                port: end.port,
                frame,
            };
            self.agenda.push(at + end.latency, event);
        }
    }

    /// Runs everything due at or before `t` in time order; the clock ends
    /// at `t` (or stays, if already later).
    pub(crate) fn run_until<D: Device>(&mut self, devs: &mut [D], t: Nanos) {
        loop {
            if let Some((at, node, token)) = self.next_timer.filter(|n| n.0 <= t) {
                if self.agenda.peek_time().is_none_or(|f| at <= f) {
                    self.now = self.now.max(at);
                    let timers = &mut self.nodes[node].timers;
                    if let Some(i) = timers.iter().position(|e| e.0 == token) {
                        timers.swap_remove(i);
                    }
                    self.next_timer = self.earliest_timer();
                    self.stats.timers_fired += 1;
                    self.input(devs, node, Input::Timer { token });
                    continue;
                }
            }
            let Some((at, Event { node, port, frame })) = self.agenda.pop_due(t) else {
                break;
            };
            self.now = self.now.max(at);
            self.in_flight -= 1;
            self.stats.delivered += 1;
            self.frame(devs, node, port, frame);
        }
        self.now = self.now.max(t);
    }

    /// Sets (or moves) `node`'s timer `token` to `at`.
    #[inline]
    fn set_timer(&mut self, node: NodeIx, token: u64, at: Nanos) {
        let timers = &mut self.nodes[node].timers;
        match timers.iter_mut().find(|t| t.0 == token) {
            Some(t) => t.1 = at,
            None => timers.push((token, at)),
        }
        self.next_timer = match self.next_timer {
            // The earliest one moved earlier: still the earliest.
            Some((t, n, k)) if (n, k) == (node, token) && at <= t => Some((at, node, token)),
            // The earliest one moved later: it may no longer be the earliest.
            Some((_, n, k)) if (n, k) == (node, token) => self.earliest_timer(),
            Some(e) if e <= (at, node, token) => Some(e),
            _ => Some((at, node, token)),
        };
    }

    /// The earliest pending timer, (time, node, token), by a scan: nodes
    /// are few and each has a handful.
    #[inline]
    fn earliest_timer(&self) -> Option<(Nanos, NodeIx, u64)> {
        let mut best: Option<(Nanos, NodeIx, u64)> = None;
        for (node, slot) in self.nodes.iter().enumerate() {
            for &(token, at) in &slot.timers {
                if best.is_none_or(|b| (at, node, token) < b) {
                    best = Some((at, node, token));
                }
            }
        }
        best
    }

    pub(crate) fn inject<D: Device>(
        &mut self,
        devs: &mut [D],
        at: Nanos,
        node: NodeIx,
        port: PortId,
        frame: Vec<u8>,
    ) {
        self.run_until(devs, at);
        self.stats.injected += 1;
        self.frame(devs, node, port, frame);
    }

    pub(crate) fn session<D: Device>(
        &mut self,
        devs: &mut [D],
        at: Nanos,
        node: NodeIx,
        event: SessionEvent,
    ) {
        self.run_until(devs, at);
        self.input(devs, node, Input::Session(event));
    }

    pub(crate) fn control<D: Device>(
        &mut self,
        devs: &mut [D],
        at: Nanos,
        node: NodeIx,
        message: ControlMessage,
    ) {
        self.run_until(devs, at);
        self.input(devs, node, Input::Control(message));
    }

    /// Takes the wire on `node`'s `port` down or up (frames already on it
    /// still arrive) and tells the devices at both ends; an unwired port
    /// just tells `node`.
    pub(crate) fn link<D: Device>(
        &mut self,
        devs: &mut [D],
        at: Nanos,
        node: NodeIx,
        port: PortId,
        up: bool,
    ) {
        self.run_until(devs, at);
        let far = self.port_slot(node, port).wire.map(|e| (e.node, e.port));
        self.input(devs, node, Input::LinkState { port, up });
        if let Some((n, p)) = far {
            for (a, b) in [(node, port), (n, p)] {
                if let Some(e) = &mut self.port_slot(a, b).wire {
                    e.up = up;
                }
            }
            self.input(devs, n, Input::LinkState { port: p, up });
        }
    }

    /// Crashes and restarts `node` at `at`: its pending timers are
    /// forgotten.
    pub(crate) fn restart<D: Device>(&mut self, devs: &mut [D], at: Nanos, node: NodeIx) {
        self.run_until(devs, at);
        self.nodes[node].timers.clear();
        self.next_timer = self.earliest_timer();
        let mut out = std::mem::take(&mut self.out);
        devs[node].restart(self.now, &mut self.nodes[node].rng, &mut out);
        self.apply(node, &mut out);
        self.out = out;
    }

    fn push<D: Device>(&mut self, devs: &mut [D], n: u64) -> u64 {
        for _ in 0..n {
            let Some(s) = self.stream.as_mut() else {
                return 0;
            };
            let (node, port, t) = (s.node, s.port, self.now + s.gap);
            let template = &s.templates[s.next];
            s.next = (s.next + 1) % s.templates.len();
            // A recycled buffer too small for the frame would be grown by
            // a realloc (a copy): a fresh one is cheaper (the store's acks
            // are shorter than its requests; this was 17% of the `store`
            // profile).
            let mut frame = match self.pool.pop() {
                Some(b) if b.capacity() >= template.len() => b,
                _ => Vec::with_capacity(template.len()),
            };
            frame.clear();
            frame.extend_from_slice(template);
            self.run_until(devs, t);
            self.stats.injected += 1;
            self.frame(devs, node, port, frame);
        }
        n
    }
}

/// Devices of type `D` driven together. See the module documentation.
pub struct Fabric<D: Device = Box<dyn AnyDevice>> {
    devices: Vec<D>,
    core: Core,
}

impl<D: Device> Fabric<D> {
    /// An empty fabric at time 0; device `i` gets RNG stream `i` of `seed`.
    pub fn new(seed: u64) -> Self {
        Fabric {
            devices: Vec::new(),
            core: Core::new(seed),
        }
    }

    /// Adds `device` as the next node, not started ([`Fabric::start`]): a
    /// device built and booted elsewhere (a fixture's) carries on as it is.
    pub fn add(&mut self, device: D) -> NodeIx {
        self.devices.push(device);
        self.core.add_node()
    }

    /// Boots `node` now (`Device::start`).
    pub fn start(&mut self, node: NodeIx) {
        self.core.start(&mut self.devices, node);
    }

    /// Boots every node now, in order.
    pub fn start_all(&mut self) {
        for node in 0..self.devices.len() {
            self.start(node);
        }
    }

    /// Joins port `a.1` of node `a.0` and port `b.1` of node `b.0`.
    pub fn connect(
        &mut self,
        a: (NodeIx, PortId),
        b: (NodeIx, PortId),
        wire: Wire,
    ) -> Result<(), FabricError> {
        self.core.connect(a, b, wire)
    }

    /// Keeps a copy of every frame `node` sends on `port` from now on
    /// ([`Fabric::take_tapped`]).
    pub fn tap(&mut self, node: NodeIx, port: PortId) -> Result<(), FabricError> {
        if node >= self.devices.len() {
            return Err(FabricError::UnknownNode(node));
        }
        self.core.port_slot(node, port).tap = true;
        Ok(())
    }

    /// Keeps the frames that leave the fabric ([`Fabric::take_egress`])
    /// rather than recycling their buffers.
    pub fn keep_egress(&mut self, keep: bool) {
        self.core.keep_egress = keep;
    }

    /// The current time.
    pub fn now(&self) -> Nanos {
        self.core.now()
    }

    /// Node `node`'s device.
    pub fn device(&self, node: NodeIx) -> &D {
        &self.devices[node]
    }

    /// Node `node`'s device, mutably (set-up a test does by hand).
    pub fn device_mut(&mut self, node: NodeIx) -> &mut D {
        &mut self.devices[node]
    }

    /// The devices, by node.
    pub fn into_devices(self) -> Vec<D> {
        self.devices
    }

    /// Runs every frame and timer due at or before `t`, in time order.
    pub fn run_until(&mut self, t: Nanos) {
        self.core.run_until(&mut self.devices, t);
    }

    /// Hands `frame` to `node` on `port` at `at` (after everything due by
    /// then; at once if `at` has passed).
    pub fn inject(&mut self, at: Nanos, node: NodeIx, port: PortId, frame: Vec<u8>) {
        self.core.inject(&mut self.devices, at, node, port, frame);
    }

    /// Hands a control message to `node` at `at`.
    pub fn control(&mut self, at: Nanos, node: NodeIx, message: ControlMessage) {
        self.core.control(&mut self.devices, at, node, message);
    }

    /// Hands a control-session event to `node` at `at`.
    pub fn session(&mut self, at: Nanos, node: NodeIx, event: SessionEvent) {
        self.core.session(&mut self.devices, at, node, event);
    }

    /// Takes `node`'s `port` (and its wire) down or up at `at`.
    pub fn link(&mut self, at: Nanos, node: NodeIx, port: PortId, up: bool) {
        self.core.link(&mut self.devices, at, node, port, up);
    }

    /// Crashes and restarts `node` at `at`.
    pub fn restart(&mut self, at: Nanos, node: NodeIx) {
        self.core.restart(&mut self.devices, at, node);
    }

    /// Feeds `templates`, in turn, to `node` on `port`, `gap` apart from
    /// now on ([`Fabric::push`]).
    pub fn set_stream(&mut self, node: NodeIx, port: PortId, gap: Nanos, templates: Vec<Vec<u8>>) {
        self.core.stream = (!templates.is_empty()).then_some(Stream {
            node,
            port,
            gap,
            templates,
            next: 0,
        });
    }

    /// Pushes the next `n` frames of the stream, running everything due
    /// before each; returns `n` (0 without a stream).
    pub fn push(&mut self, n: u64) -> u64 {
        self.core.push(&mut self.devices, n)
    }

    /// What the fabric counted.
    pub fn stats(&self) -> &FabricStats {
        &self.core.stats
    }

    /// Frames `node` sent on `port` while it had no wire.
    pub fn left_on(&self, node: NodeIx, port: PortId) -> u64 {
        self.core.nodes[node]
            .ports
            .get(usize::from(port))
            .map_or(0, |p| p.left)
    }

    /// Takes the frames kept as they left the fabric.
    pub fn take_egress(&mut self) -> Vec<Sent> {
        std::mem::take(&mut self.core.egress)
    }

    /// Takes the frames the taps copied.
    pub fn take_tapped(&mut self) -> Vec<Sent> {
        std::mem::take(&mut self.core.tapped)
    }

    /// Takes the control messages devices sent: (time, node, message).
    pub fn take_messages(&mut self) -> Vec<(Nanos, NodeIx, ControlMessage)> {
        std::mem::take(&mut self.core.messages)
    }

    /// Takes the messages devices sent on control sessions.
    pub fn take_session_sent(&mut self) -> Vec<SessionSent> {
        std::mem::take(&mut self.core.session_sent)
    }
}

impl Fabric<Box<dyn AnyDevice>> {
    /// Adds a device of any type (boxed); see [`Fabric::add`].
    pub fn add_any(&mut self, device: impl AnyDevice) -> NodeIx {
        self.add(Box::new(device))
    }

    /// Node `node`'s device as a `T`, if it is one.
    pub fn get<T: Any>(&self, node: NodeIx) -> Option<&T> {
        // Through the trait object: the box itself is an `AnyDevice` too.
        let d: &dyn AnyDevice = self.devices.get(node)?.as_ref();
        d.as_any().downcast_ref()
    }

    /// Node `node`'s device as a `T`, mutably.
    pub fn get_mut<T: Any>(&mut self, node: NodeIx) -> Option<&mut T> {
        let d: &mut dyn AnyDevice = self.devices.get_mut(node)?.as_mut();
        d.as_any_mut().downcast_mut()
    }

    /// Node `node`'s device as a `T`, by value (the fabric is done with;
    /// a benchmark takes a device set up with its peers to drive it alone).
    pub fn into_device<T: Any>(self, node: NodeIx) -> Option<T> {
        let d = self.devices.into_iter().nth(node)?;
        d.into_any().downcast().ok().map(|b| *b)
    }
}

#[cfg(test)]
mod tests;
