//! The simulation engine: nodes (sans-IO devices), links between their
//! ports, one agenda of events in integer nanoseconds, faults, captures.
//!
//! Every node is driven through the device contract
//! ([`inca_switch::device`]): frames, timers, control messages and link-state
//! changes in; transmissions and timers out. A transmission enters the link's
//! channel at its time; the channel decides its fate (queue, loss, delay,
//! duplication, reordering) and the frame is delivered to the node at the
//! far end when it arrives. Randomness comes from one seed: each node and
//! each link gets its own stream, so adding a node does not change what
//! another one draws.
//!
//! A link is up while nothing holds it down: it was not taken down
//! (`LinkDown`), no partition in force cuts it, and neither end is crashed.
//! Faults that overlap therefore compose: healing a partition does not
//! revive a crashed node's links, and a restart does not lift a link flap.
//! Its impairments are its configured values with the impairment windows
//! open on it laid over them, in the order they opened.
//!
//! Nodes marked as telemetry points ([`Simulation::set_telemetry`]) stamp
//! the probe frames that pass them: the engine appends (node, ingress, time)
//! to a frame's telemetry stack ([`inca_wire::telemetry`]) when it delivers
//! the frame to the node, and (node, egress, time) when the node transmits
//! it, so a device's residence and each link's time (queueing and
//! serialisation included) can be told apart at the receiver. The engine
//! does it, not the devices, so every node kind can be a telemetry point.
//!
//! Control sessions ([`crate::session`]) join pairs of nodes outside the
//! data network: a node's `Output::Session` goes to the session's model,
//! whose events (up, messages, resets, refusals) come back as
//! `Input::Session`. A session is cut and reset by its own faults; a crash
//! of either end resets it and a restart lets it reconnect.

use std::any::Any;
use std::path::Path;

use inca_switch::device::{
    device_rng, ControlMessage, Device, DeviceRng, Input, Nanos, Output, PortId, Refusal,
    SessionEvent, SessionId,
};
use inca_wire::telemetry::{push_stamp, Pushed, Stamp, StampPoint};
use inca_wire::PcapWriter;

use crate::lanes::LaneAgenda;
use crate::link::{Channel, ChannelConfig, Fate, Impairment, LossModel};
use crate::metrics::{NodeReport, Series};
use crate::session::{Effects, Session, SessionConfig, SessionIdx, Timer as SessionTimer};
use crate::workload_control::WorkloadChange;

/// A simulated device: the device contract, plus what the simulator needs
/// to report on it.
pub trait Node: Device + Any {
    /// What kind of device this is ("switch", "router", "host"), for reports.
    fn kind(&self) -> &'static str;
    /// Its counters, histograms and series, as of `now`.
    fn report(&self, now: Nanos) -> NodeReport;
    /// Itself, for tests and experiments that inspect a node's state.
    fn as_any(&self) -> &dyn Any;
}

/// A node's index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct NodeId(pub u32);

/// A link's index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct LinkId(pub u32);

/// Something that goes wrong at a scheduled time.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// The link goes down (both directions lose everything).
    LinkDown(LinkId),
    /// The link comes back up.
    LinkUp(LinkId),
    /// The node crashes: it loses its state and stops; its links go dark.
    Crash(NodeId),
    /// The node restarts (empty) and its links come back.
    Restart(NodeId),
    /// The node stops processing for a while; what reaches it meanwhile is
    /// handled, in order, when it resumes.
    Pause {
        /// The node.
        node: NodeId,
        /// For how long.
        duration: Nanos,
    },
    /// The links between the two groups go down.
    Partition(Vec<NodeId>, Vec<NodeId>),
    /// The links between the two groups come back up.
    Heal(Vec<NodeId>, Vec<NodeId>),
    /// The link's loss model changes (both directions).
    SetLoss(LinkId, LossModel),
    /// An impairment window opens on the link (both directions): `set`
    /// replaces the configured values it names until [`Fault::Unimpair`]
    /// closes window `window` (an id from [`Simulation::window_id`]).
    Impair {
        /// The link.
        link: LinkId,
        /// The window's id.
        window: u64,
        /// What it imposes.
        set: Impairment,
    },
    /// Impairment window `window` on the link closes.
    Unimpair {
        /// The link.
        link: LinkId,
        /// The window's id.
        window: u64,
    },
    /// A partition of the whole network into two sides (see
    /// [`crate::partition`]): every link between them is cut.
    PartitionSides(Box<Sides>),
    /// The partition is lifted: its cuts are taken back.
    HealSides(Box<Sides>),
    /// A control message for a node.
    Message(NodeId, ControlMessage),
    /// A control session is cut: nothing gets through until
    /// [`Fault::SessionHeal`]; a cut lasting the session's `reset_after`
    /// resets it.
    SessionCut(SessionIdx),
    /// A cut of the session ends.
    SessionHeal(SessionIdx),
    /// A control session is reset: both ends hear it, what was in flight
    /// is lost.
    SessionReset(SessionIdx),
    /// A host's workload changes ([`crate::workload_control`]): its
    /// popularity shifts, a storm starts or ends.
    Workload {
        /// The host.
        node: NodeId,
        /// The workload's name.
        workload: String,
        /// What changes.
        change: WorkloadChange,
    },
}

impl Fault {
    /// The kind of fault this one starts, for tallies: "link", "crash",
    /// "pause", "partition", "loss", "impair"; `None` for one that undoes a
    /// fault (up, restart, heal, end of a window) or a control message.
    pub fn starts(&self) -> Option<&'static str> {
        match self {
            Fault::LinkDown(_) => Some("link"),
            Fault::Crash(_) => Some("crash"),
            Fault::Pause { .. } => Some("pause"),
            Fault::Partition(..) | Fault::PartitionSides(_) => Some("partition"),
            Fault::SetLoss(..) => Some("loss"),
            Fault::Impair { .. } => Some("impair"),
            Fault::SessionCut(_) => Some("session_cut"),
            Fault::SessionReset(_) => Some("session_reset"),
            Fault::Workload { change, .. } => match change {
                WorkloadChange::Calm => None,
                c => Some(c.label()),
            },
            Fault::SessionHeal(_)
            | Fault::LinkUp(_)
            | Fault::Restart(_)
            | Fault::Heal(..)
            | Fault::HealSides(_)
            | Fault::Unimpair { .. }
            | Fault::Message(..) => None,
        }
    }
}

/// A partition drawn over some nodes (`groups`), with every other node it
/// could reach assigned to one side or the other (`sides`, each a superset
/// of its group).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sides {
    /// The nodes split apart.
    pub groups: [Vec<NodeId>; 2],
    /// Everything on each side.
    pub sides: [Vec<NodeId>; 2],
}

/// Bound on impairment windows open on one link at once; a window beyond
/// it is refused (and logged so).
pub const IMPAIR_WINDOW_LIMIT: usize = 16;

/// Why a topology could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// A port is already connected.
    #[error("port {port} of {node} is already connected")]
    PortInUse {
        /// The node's name.
        node: String,
        /// The port.
        port: PortId,
    },
    /// No such node.
    #[error("no node with index {0}")]
    NoNode(u32),
}

/// Counters of the engine itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct EngineStats {
    /// Events processed.
    pub events: u64,
    /// Frames delivered to nodes.
    pub frames_delivered: u64,
    /// Frames sent on a port with no link.
    pub unconnected_drops: u64,
    /// Frames that reached a crashed node.
    pub crashed_drops: u64,
    /// Inputs dropped because a paused node's backlog was full.
    pub paused_drops: u64,
    /// Session messages a node sent on a session it is not an end of
    /// (refused, the node told).
    pub session_unknown: u64,
    /// Outputs that broke the device contract ([`inca_switch::device`]): a
    /// transmission or a timer set before the `now` of the call that made
    /// it. Each is carried out at `now` (time cannot go back) and counted;
    /// a campaign fails a run that has any.
    pub contract_violations: u64,
    /// Telemetry stamps appended to probe frames.
    pub telemetry_stamps: u64,
    /// Telemetry stamps not appended because the frame's stack was full.
    pub telemetry_overflows: u64,
}

/// Telemetry records a probe carries at most unless the scenario says
/// otherwise: eight devices' ingress and egress [our choice].
pub const DEFAULT_TELEMETRY_DEPTH: u8 = 16;

/// Which agenda lane an event goes to: one per node's timers, one per link
/// direction for deliveries and one for delayed transmissions (each mostly
/// in time order on its own), and one for everything else.
mod lane {
    use super::{LinkId, NodeId};

    pub const MISC: usize = 0;

    pub fn timer(node: NodeId) -> usize {
        4 * node.0 as usize + 1
    }

    pub fn deliver(link: LinkId, dir: usize) -> usize {
        4 * (2 * link.0 as usize + dir) + 2
    }

    pub fn transmit(link: LinkId, dir: usize) -> usize {
        4 * (2 * link.0 as usize + dir) + 3
    }
}

/// Bound on inputs held for a paused node.
pub const PAUSE_BACKLOG_LIMIT: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NodeState {
    Up,
    Crashed,
    Paused { until: Nanos },
}

struct NodeSlot {
    name: String,
    node: Box<dyn Node>,
    rng: DeviceRng,
    ports: Vec<Option<(LinkId, usize)>>,
    /// Pending timers: (token, generation of the one that counts). A node
    /// uses a handful of tokens, so a short list beats a hash map.
    timers: Vec<(u64, u64)>,
    next_generation: u64,
    state: NodeState,
    backlog: Vec<Input>,
    /// Stamps the probe frames it receives and sends.
    telemetry: bool,
}

struct LinkSlot {
    name: String,
    ends: [(NodeId, PortId); 2],
    /// `channels[d]` carries frames sent by `ends[d]`.
    channels: [Channel; 2],
    rng: rand_chacha::ChaCha8Rng,
    capture: Option<PcapWriter<std::io::BufWriter<std::fs::File>>>,
    /// Bytes delivered per bin, per direction.
    throughput: [Series; 2],
    /// Largest queue occupancy per bin, per direction.
    queue: [Series; 2],
    /// Each direction's configuration before impairment windows.
    configured: [ChannelConfig; 2],
    /// Impairment windows open, in the order they opened.
    windows: Vec<(u64, Impairment)>,
    /// Taken down by a `LinkDown` (and not up again).
    admin_down: bool,
    /// Partitions in force that cut it.
    cuts: u32,
}

enum Event {
    /// A frame reaches the far end of `link`'s channel `dir`.
    Deliver {
        link: LinkId,
        dir: usize,
        frame: Vec<u8>,
    },
    Transmit {
        link: LinkId,
        dir: usize,
        frame: Vec<u8>,
    },
    Timer {
        node: NodeId,
        token: u64,
        generation: u64,
    },
    Fault(Box<Fault>),
    Resume(NodeId),
    /// A session's own timer.
    Session {
        session: SessionIdx,
        timer: SessionTimer,
    },
    /// A session event for a node.
    SessionInput(Box<(NodeId, SessionEvent)>),
    /// A node's session message whose time has come.
    SessionSend(Box<(NodeId, SessionId, Vec<u8>)>),
}

/// The simulation. See the module documentation.
pub struct Simulation {
    now: Nanos,
    seed: u64,
    bin: Nanos,
    nodes: Vec<NodeSlot>,
    links: Vec<LinkSlot>,
    sessions: Vec<Session<NodeId>>,
    agenda: LaneAgenda<Event>,
    out: Vec<Output>,
    started: bool,
    stats: EngineStats,
    /// Control messages nodes sent out, with their time and sender.
    pub messages: Vec<(Nanos, NodeId, ControlMessage)>,
    /// Faults that have happened, with their time, for the report.
    pub fault_log: Vec<(Nanos, String)>,
    /// Faults that have started, by kind ([`Fault::starts`]).
    pub fault_tally: std::collections::BTreeMap<&'static str, u64>,
    next_window: u64,
    /// The first contract violation, in words (the rest are counted).
    first_violation: Option<String>,
    /// Telemetry records a probe frame may carry.
    telemetry_depth: u8,
}

impl Simulation {
    /// An empty simulation with run seed `seed`, reporting throughput and
    /// queue series in bins of `bin` nanoseconds.
    pub fn new(seed: u64, bin: Nanos) -> Self {
        Simulation {
            now: 0,
            seed,
            bin: bin.max(1),
            nodes: Vec::new(),
            links: Vec::new(),
            sessions: Vec::new(),
            agenda: LaneAgenda::default(),
            out: Vec::new(),
            started: false,
            stats: EngineStats::default(),
            messages: Vec::new(),
            fault_log: Vec::new(),
            fault_tally: std::collections::BTreeMap::new(),
            next_window: 0,
            first_violation: None,
            telemetry_depth: DEFAULT_TELEMETRY_DEPTH,
        }
    }

    /// The current virtual time.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// The run seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Engine counters.
    pub fn stats(&self) -> EngineStats {
        self.stats
    }

    /// Outputs that broke the device contract so far (see
    /// [`EngineStats::contract_violations`]): a run with any is wrong, whatever
    /// else it measured.
    pub fn contract_violations(&self) -> u64 {
        self.stats.contract_violations
    }

    /// The first contract violation, in words (node, output, times).
    pub fn first_contract_violation(&self) -> Option<&str> {
        self.first_violation.as_deref()
    }

    /// Counts an output of `node` at `at`, before now.
    fn violation(&mut self, node: NodeId, what: &str, at: Nanos) {
        self.stats.contract_violations += 1;
        if self.first_violation.is_none() {
            self.first_violation = Some(format!(
                "{} ({}): {what} at {at} ns, before now ({} ns)",
                self.node_name(node),
                self.nodes[node.0 as usize].node.kind(),
                self.now
            ));
        }
    }

    /// Adds a node; its RNG stream is its index.
    pub fn add_node(&mut self, name: &str, node: Box<dyn Node>) -> NodeId {
        let id = NodeId(self.nodes.len() as u32);
        self.nodes.push(NodeSlot {
            name: name.to_string(),
            node,
            rng: device_rng(self.seed, u64::from(id.0)),
            ports: Vec::new(),
            timers: Vec::new(),
            next_generation: 0,
            state: NodeState::Up,
            backlog: Vec::new(),
            telemetry: false,
        });
        id
    }

    /// Makes `node` a telemetry point (or not): see the module
    /// documentation.
    pub fn set_telemetry(&mut self, node: NodeId, on: bool) -> Result<(), TopologyError> {
        let slot = self
            .nodes
            .get_mut(node.0 as usize)
            .ok_or(TopologyError::NoNode(node.0))?;
        slot.telemetry = on;
        Ok(())
    }

    /// Sets how many telemetry records a probe frame may carry (default
    /// [`DEFAULT_TELEMETRY_DEPTH`]); past it stamps are counted in the
    /// frame's stack and in [`EngineStats::telemetry_overflows`].
    pub fn set_telemetry_depth(&mut self, depth: u8) {
        self.telemetry_depth = depth;
    }

    /// Appends `node`'s stamp to `frame` if the node is a telemetry point
    /// and the frame a probe.
    fn stamp(&mut self, node: NodeId, point: StampPoint, at: Nanos, frame: &mut Vec<u8>) {
        if !self.nodes.get(node.0 as usize).is_some_and(|n| n.telemetry) {
            return;
        }
        let stamp = Stamp {
            device: node.0,
            point,
            time: at,
        };
        match push_stamp(frame, stamp, self.telemetry_depth) {
            Ok(Pushed::Appended(_)) => self.stats.telemetry_stamps += 1,
            Ok(Pushed::Overflow) => self.stats.telemetry_overflows += 1,
            // Not a probe (or not one a stamp fits): it passes untouched.
            Err(_) => {}
        }
    }

    /// Connects port `a.1` of node `a.0` to port `b.1` of node `b.0`;
    /// `ab` configures the direction from a to b, `ba` the other.
    pub fn connect(
        &mut self,
        name: &str,
        a: (NodeId, PortId),
        b: (NodeId, PortId),
        ab: ChannelConfig,
        ba: ChannelConfig,
    ) -> Result<LinkId, TopologyError> {
        let id = LinkId(self.links.len() as u32);
        for (dir, &(node, port)) in [a, b].iter().enumerate() {
            let slot = self
                .nodes
                .get_mut(node.0 as usize)
                .ok_or(TopologyError::NoNode(node.0))?;
            let p = usize::from(port);
            if slot.ports.len() <= p {
                slot.ports.resize(p + 1, None);
            }
            if slot.ports[p].is_some() {
                return Err(TopologyError::PortInUse {
                    node: slot.name.clone(),
                    port,
                });
            }
            slot.ports[p] = Some((id, dir));
        }
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(self.seed ^ 0x6c69_6e6b);
        rng.set_stream(u64::from(id.0));
        self.links.push(LinkSlot {
            name: name.to_string(),
            ends: [a, b],
            channels: [Channel::new(ab), Channel::new(ba)],
            rng,
            capture: None,
            throughput: [Series::new(self.bin), Series::new(self.bin)],
            queue: [Series::new(self.bin), Series::new(self.bin)],
            configured: [ab, ba],
            windows: Vec::new(),
            admin_down: false,
            cuts: 0,
        });
        Ok(id)
    }

    /// Declares control session `id` between nodes `a` and `b` (see
    /// [`crate::session`]). An id must be unique at each of its ends.
    /// Sessions are declared before the run starts.
    pub fn add_session(
        &mut self,
        name: &str,
        id: SessionId,
        a: NodeId,
        b: NodeId,
        config: SessionConfig,
    ) -> Result<SessionIdx, String> {
        for n in [a, b] {
            if n.0 as usize >= self.nodes.len() {
                return Err(format!("no node with index {}", n.0));
            }
        }
        if a == b {
            return Err("a session joins two different nodes".into());
        }
        if self.started {
            return Err("sessions are declared before the run starts".into());
        }
        config.check().map_err(|(f, e)| format!("{f}: {e}"))?;
        if let Some(other) = self
            .sessions
            .iter()
            .find(|s| s.id == id && (s.end_of(a).is_some() || s.end_of(b).is_some()))
        {
            return Err(format!(
                "{id} is already session {:?} at one of these nodes: give it another id",
                other.name
            ));
        }
        if self.sessions.iter().any(|s| s.name == name) {
            return Err(format!("two sessions are named {name:?}"));
        }
        let index = self.sessions.len() as u64;
        let idx = SessionIdx(index as u32);
        self.sessions
            .push(Session::new(id, name, [a, b], config, self.seed, index));
        Ok(idx)
    }

    /// The session named `name`.
    pub fn session_id(&self, name: &str) -> Option<SessionIdx> {
        self.sessions
            .iter()
            .position(|s| s.name == name)
            .map(|i| SessionIdx(i as u32))
    }

    /// Session `idx`, for its state and counters.
    pub fn session(&self, idx: SessionIdx) -> Option<&Session<NodeId>> {
        self.sessions.get(idx.0 as usize)
    }

    /// Number of sessions.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Carries out what a session asked for: its timers onto the agenda,
    /// its events to the nodes (through the agenda, now, so that a node
    /// answering a refusal with another send does not recurse).
    fn session_effects(&mut self, session: SessionIdx, fx: Effects<NodeId>) {
        for (at, timer) in fx.schedule {
            self.agenda
                .push(lane::MISC, at, Event::Session { session, timer });
        }
        for d in fx.deliver {
            self.agenda
                .push(lane::MISC, self.now, Event::SessionInput(Box::new(d)));
        }
    }

    /// Runs `f` on session `idx` now and carries out its effects.
    fn with_session(
        &mut self,
        idx: SessionIdx,
        f: impl FnOnce(&mut Session<NodeId>, Nanos, &mut Effects<NodeId>),
    ) {
        let now = self.now;
        let Some(s) = self.sessions.get_mut(idx.0 as usize) else {
            return;
        };
        let mut fx = Effects::default();
        f(s, now, &mut fx);
        self.session_effects(idx, fx);
    }

    /// Node `node` sends `body` on its session `id` now.
    fn session_send(&mut self, node: NodeId, id: SessionId, body: Vec<u8>) {
        let found = self
            .sessions
            .iter()
            .enumerate()
            .find_map(|(i, s)| Some((i, s.end_of(node)?)).filter(|_| s.id == id));
        match found {
            Some((i, end)) => self.with_session(SessionIdx(i as u32), |s, now, fx| {
                s.send(now, end, body, fx)
            }),
            None => {
                self.stats.session_unknown += 1;
                let refused = SessionEvent::Refused {
                    session: id,
                    len: body.len(),
                    reason: Refusal::Unknown,
                };
                self.agenda.push(
                    lane::MISC,
                    self.now,
                    Event::SessionInput(Box::new((node, refused))),
                );
            }
        }
    }

    /// Tells every session of `node` that it crashed or restarted.
    fn sessions_end_state(&mut self, node: NodeId, up: bool) {
        for i in 0..self.sessions.len() {
            if let Some(end) = self.sessions[i].end_of(node) {
                self.with_session(SessionIdx(i as u32), |s, now, fx| {
                    s.end_state(now, end, up, fx)
                });
            }
        }
    }

    /// Writes every frame delivered on `link` (both directions) to a pcap
    /// file at `path`.
    pub fn capture(&mut self, link: LinkId, path: &Path) -> Result<(), inca_wire::PcapError> {
        if let Some(l) = self.links.get_mut(link.0 as usize) {
            l.capture = Some(PcapWriter::create(path)?);
        }
        Ok(())
    }

    /// Finishes every capture file (flushes it and closes it); frames
    /// delivered after this are not captured.
    pub fn finish_captures(&mut self) -> Result<(), inca_wire::PcapError> {
        for l in &mut self.links {
            if let Some(c) = l.capture.take() {
                c.finish()?;
            }
        }
        Ok(())
    }

    /// A fresh impairment-window id, for [`Fault::Impair`].
    pub fn window_id(&mut self) -> u64 {
        self.next_window += 1;
        self.next_window
    }

    /// The two ends of `link`.
    pub fn link_ends(&self, link: LinkId) -> Option<[(NodeId, PortId); 2]> {
        self.links.get(link.0 as usize).map(|l| l.ends)
    }

    /// Whether `link` is up (see the module documentation).
    pub fn link_up(&self, link: LinkId) -> bool {
        self.links
            .get(link.0 as usize)
            .is_some_and(|l| l.channels[0].up)
    }

    /// Schedules `fault` at time `at`.
    pub fn schedule(&mut self, at: Nanos, fault: Fault) {
        self.agenda
            .push(lane::MISC, at, Event::Fault(Box::new(fault)));
    }

    /// The node named `name`.
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.nodes
            .iter()
            .position(|n| n.name == name)
            .map(|i| NodeId(i as u32))
    }

    /// The link named `name`.
    pub fn link_id(&self, name: &str) -> Option<LinkId> {
        self.links
            .iter()
            .position(|l| l.name == name)
            .map(|i| LinkId(i as u32))
    }

    /// Node `id` as its concrete type.
    pub fn node<T: 'static>(&self, id: NodeId) -> Option<&T> {
        self.nodes.get(id.0 as usize)?.node.as_any().downcast_ref()
    }

    /// The name of node `id`.
    pub fn node_name(&self, id: NodeId) -> &str {
        self.nodes
            .get(id.0 as usize)
            .map_or("?", |n| n.name.as_str())
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Number of links.
    pub fn link_count(&self) -> usize {
        self.links.len()
    }

    /// Channel `dir` (0: from the link's first end) of `link`.
    pub fn channel(&self, link: LinkId, dir: usize) -> Option<&Channel> {
        self.links.get(link.0 as usize)?.channels.get(dir)
    }

    /// Starts every node (once), at time 0.
    fn start(&mut self) {
        if self.started {
            return;
        }
        self.started = true;
        for i in 0..self.nodes.len() {
            let mut out = std::mem::take(&mut self.out);
            let slot = &mut self.nodes[i];
            slot.node.start(self.now, &mut slot.rng, &mut out);
            self.apply(NodeId(i as u32), &mut out);
            self.out = out;
        }
        for i in 0..self.sessions.len() {
            self.with_session(SessionIdx(i as u32), |s, now, fx| s.start(now, fx));
        }
    }

    /// Runs until virtual time `end` (events at `end` included), calling
    /// `progress` now and then with the current time.
    pub fn run_until(&mut self, end: Nanos, mut progress: impl FnMut(Nanos)) {
        // A broken invariant in a device stops the run, naming the seed that
        // replays it.
        inca_switch::invariant::set_strict(true);
        inca_switch::invariant::set_seed(Some(self.seed));
        self.start();
        let mut since_progress = 0u32;
        while let Some((at, event)) = self.agenda.pop_due(end) {
            self.now = at;
            self.stats.events += 1;
            self.dispatch(event);
            since_progress += 1;
            if since_progress == 65_536 {
                since_progress = 0;
                progress(self.now);
            }
        }
        self.now = self.now.max(end);
        progress(self.now);
    }

    fn dispatch(&mut self, event: Event) {
        match event {
            Event::Deliver {
                link,
                dir,
                mut frame,
            } => {
                let now = self.now;
                let Some(l) = self.links.get_mut(link.0 as usize) else {
                    return;
                };
                // Counted and captured as it leaves the link, so neither
                // holds frames still in flight when the run ends.
                l.throughput[dir].add_at(now, frame.len() as u64);
                if let Some(c) = &mut l.capture {
                    let _ = c.write(now, &frame);
                }
                let (node, port) = l.ends[1 - dir];
                self.stats.frames_delivered += 1;
                self.stamp(node, StampPoint::Ingress, now, &mut frame);
                self.frame(node, port, frame);
            }
            Event::Transmit { link, dir, frame } => self.offer(link, dir, frame),
            Event::Timer {
                node,
                token,
                generation,
            } => {
                let Some(slot) = self.nodes.get_mut(node.0 as usize) else {
                    return;
                };
                if let Some(i) = slot.timers.iter().position(|&t| t == (token, generation)) {
                    slot.timers.swap_remove(i);
                    self.input(node, Input::Timer { token });
                }
            }
            Event::Fault(f) => self.fault(*f),
            Event::Resume(node) => self.resume(node),
            Event::Session { session, timer } => {
                self.with_session(session, |s, now, fx| s.on_timer(now, timer, fx))
            }
            Event::SessionInput(d) => {
                let (node, event) = *d;
                self.input(node, Input::Session(event));
            }
            Event::SessionSend(m) => {
                let (node, session, body) = *m;
                self.session_send(node, session, body);
            }
        }
    }

    /// Hands `input` to `node` now, unless it is crashed (dropped) or paused
    /// (held until it resumes).
    fn input(&mut self, node: NodeId, input: Input) {
        let Some(slot) = self.nodes.get_mut(node.0 as usize) else {
            return;
        };
        match slot.state {
            NodeState::Crashed => {
                if matches!(input, Input::Frame { .. }) {
                    self.stats.crashed_drops += 1;
                }
                return;
            }
            NodeState::Paused { .. } => {
                if slot.backlog.len() < PAUSE_BACKLOG_LIMIT {
                    slot.backlog.push(input);
                } else {
                    self.stats.paused_drops += 1;
                }
                return;
            }
            NodeState::Up => {}
        }
        let mut out = std::mem::take(&mut self.out);
        slot.node.handle(self.now, input, &mut slot.rng, &mut out);
        self.apply(node, &mut out);
        self.out = out;
    }

    /// [`Self::input`] of a frame, handed over with
    /// [`Device::handle_frame`] (no input enum built and moved on the
    /// per-packet path; docs/performance.md).
    fn frame(&mut self, node: NodeId, port: PortId, frame: Vec<u8>) {
        let Some(slot) = self.nodes.get_mut(node.0 as usize) else {
            return;
        };
        if !matches!(slot.state, NodeState::Up) {
            return self.input(node, Input::Frame { port, frame });
        }
        let mut out = std::mem::take(&mut self.out);
        slot.node
            .handle_frame(self.now, port, frame, &mut slot.rng, &mut out);
        self.apply(node, &mut out);
        self.out = out;
    }

    /// Carries out a node's outputs.
    fn apply(&mut self, node: NodeId, out: &mut Vec<Output>) {
        for o in out.drain(..) {
            match o {
                Output::Transmit {
                    at,
                    port,
                    mut frame,
                } => {
                    let end = self.nodes[node.0 as usize]
                        .ports
                        .get(usize::from(port))
                        .copied()
                        .flatten();
                    if at < self.now {
                        self.violation(node, "transmission", at);
                    }
                    let Some((link, dir)) = end else {
                        self.stats.unconnected_drops += 1;
                        continue;
                    };
                    self.stamp(node, StampPoint::Egress, at.max(self.now), &mut frame);
                    if at <= self.now {
                        self.offer(link, dir, frame);
                    } else {
                        self.agenda.push(
                            lane::transmit(link, dir),
                            at,
                            Event::Transmit { link, dir, frame },
                        );
                    }
                }
                Output::Timer { at, token } => {
                    if at < self.now {
                        self.violation(node, "timer", at);
                    }
                    let slot = &mut self.nodes[node.0 as usize];
                    slot.next_generation += 1;
                    let generation = slot.next_generation;
                    match slot.timers.iter_mut().find(|(t, _)| *t == token) {
                        Some(entry) => entry.1 = generation,
                        None => slot.timers.push((token, generation)),
                    }
                    // A timer in the past (counted above) fires now.
                    self.agenda.push(
                        lane::timer(node),
                        at.max(self.now),
                        Event::Timer {
                            node,
                            token,
                            generation,
                        },
                    );
                }
                Output::Control(m) => self.messages.push((self.now, node, m)),
                Output::Session { at, session, body } => {
                    if at < self.now {
                        self.violation(node, "session message", at);
                    }
                    if at <= self.now {
                        self.session_send(node, session, body);
                    } else {
                        self.agenda.push(
                            lane::MISC,
                            at,
                            Event::SessionSend(Box::new((node, session, body))),
                        );
                    }
                }
            }
        }
    }

    /// A frame enters channel `dir` of `link` now.
    fn offer(&mut self, link: LinkId, dir: usize, frame: Vec<u8>) {
        let now = self.now;
        let Some(l) = self.links.get_mut(link.0 as usize) else {
            return;
        };
        let queued = l.channels[dir].queued_bytes(now);
        l.queue[dir].max_at(now, queued);
        match l.channels[dir].offer(now, frame.len(), &mut l.rng) {
            Fate::Dropped => {}
            Fate::Deliver { first, duplicate } => {
                if let Some(d) = duplicate {
                    let copy = Event::Deliver {
                        link,
                        dir,
                        frame: frame.clone(),
                    };
                    self.agenda.push(lane::deliver(link, dir), d, copy);
                }
                self.agenda.push(
                    lane::deliver(link, dir),
                    first,
                    Event::Deliver { link, dir, frame },
                );
            }
        }
    }

    /// Brings the link's state in line with what holds it down (see the
    /// module documentation); on a change, flushes its queues (going down)
    /// and tells both ends that are running.
    fn refresh_link(&mut self, link: LinkId) {
        let now = self.now;
        let Some(l) = self.links.get(link.0 as usize) else {
            return;
        };
        let crashed = |n: NodeId| self.nodes[n.0 as usize].state == NodeState::Crashed;
        let up = !l.admin_down && l.cuts == 0 && !l.ends.iter().any(|&(n, _)| crashed(n));
        if l.channels[0].up == up {
            return;
        }
        let l = &mut self.links[link.0 as usize];
        let ends = l.ends;
        for c in &mut l.channels {
            c.up = up;
            if !up {
                c.flush(now);
            }
        }
        for (node, port) in ends {
            if self.nodes[node.0 as usize].state != NodeState::Crashed {
                self.input(node, Input::LinkState { port, up });
            }
        }
    }

    fn set_admin(&mut self, link: LinkId, up: bool) {
        if let Some(l) = self.links.get_mut(link.0 as usize) {
            l.admin_down = !up;
            self.refresh_link(link);
        }
    }

    fn cut(&mut self, a: &[NodeId], b: &[NodeId], cut: bool) {
        for link in self.links_between(a, b) {
            let l = &mut self.links[link.0 as usize];
            l.cuts = if cut {
                l.cuts.saturating_add(1)
            } else {
                l.cuts.saturating_sub(1)
            };
            self.refresh_link(link);
        }
    }

    /// Lays the open impairment windows over the configured values.
    fn reconfigure(&mut self, link: LinkId) {
        if let Some(l) = self.links.get_mut(link.0 as usize) {
            for dir in 0..2 {
                let mut config = l.configured[dir];
                for (_, w) in &l.windows {
                    config = w.over(config);
                }
                l.channels[dir].config = config;
            }
        }
    }

    fn links_of(&self, node: NodeId) -> Vec<LinkId> {
        self.nodes[node.0 as usize]
            .ports
            .iter()
            .flatten()
            .map(|&(l, _)| l)
            .collect()
    }

    fn links_between(&self, a: &[NodeId], b: &[NodeId]) -> Vec<LinkId> {
        (0..self.links.len())
            .filter(|&i| {
                let [(x, _), (y, _)] = self.links[i].ends;
                (a.contains(&x) && b.contains(&y)) || (a.contains(&y) && b.contains(&x))
            })
            .map(|i| LinkId(i as u32))
            .collect()
    }

    fn fault(&mut self, fault: Fault) {
        let mut text = self.describe(&fault);
        if let Fault::Impair { link, .. } = &fault {
            let full = self
                .links
                .get(link.0 as usize)
                .is_some_and(|l| l.windows.len() >= IMPAIR_WINDOW_LIMIT);
            if full {
                text.push_str(&format!(
                    " (refused: {IMPAIR_WINDOW_LIMIT} windows already open)"
                ));
            }
        }
        self.fault_log.push((self.now, text));
        if let Some(kind) = fault.starts() {
            *self.fault_tally.entry(kind).or_default() += 1;
        }
        match fault {
            Fault::LinkDown(l) => self.set_admin(l, false),
            Fault::LinkUp(l) => self.set_admin(l, true),
            Fault::Crash(n) => {
                let Some(slot) = self.nodes.get_mut(n.0 as usize) else {
                    return;
                };
                slot.state = NodeState::Crashed;
                slot.timers.clear();
                slot.backlog.clear();
                for l in self.links_of(n) {
                    self.refresh_link(l);
                }
                self.sessions_end_state(n, false);
            }
            Fault::Restart(n) => {
                let Some(slot) = self.nodes.get_mut(n.0 as usize) else {
                    return;
                };
                if slot.state != NodeState::Crashed {
                    return;
                }
                slot.state = NodeState::Up;
                slot.timers.clear();
                let mut out = std::mem::take(&mut self.out);
                slot.node.restart(self.now, &mut slot.rng, &mut out);
                self.apply(n, &mut out);
                self.out = out;
                self.sessions_end_state(n, true);
                for l in self.links_of(n) {
                    self.refresh_link(l);
                    // A link still held down: the restarted node, which
                    // assumes its ports are up, hears that it is not.
                    if !self.links[l.0 as usize].channels[0].up {
                        for (node, port) in self.links[l.0 as usize].ends {
                            if node == n {
                                self.input(n, Input::LinkState { port, up: false });
                            }
                        }
                    }
                }
            }
            Fault::Pause { node, duration } => {
                if let Some(slot) = self.nodes.get_mut(node.0 as usize) {
                    if slot.state == NodeState::Up {
                        let until = self.now + duration;
                        slot.state = NodeState::Paused { until };
                        self.agenda.push(lane::MISC, until, Event::Resume(node));
                    }
                }
            }
            Fault::Partition(a, b) => self.cut(&a, &b, true),
            Fault::Heal(a, b) => self.cut(&a, &b, false),
            Fault::PartitionSides(s) => self.cut(&s.sides[0], &s.sides[1], true),
            Fault::HealSides(s) => self.cut(&s.sides[0], &s.sides[1], false),
            Fault::SetLoss(link, loss) => {
                if let Some(l) = self.links.get_mut(link.0 as usize) {
                    for c in &mut l.configured {
                        c.loss = loss;
                    }
                    self.reconfigure(link);
                }
            }
            Fault::Impair { link, window, set } => {
                if let Some(l) = self.links.get_mut(link.0 as usize) {
                    if l.windows.len() < IMPAIR_WINDOW_LIMIT {
                        l.windows.push((window, set));
                        self.reconfigure(link);
                    }
                }
            }
            Fault::Unimpair { link, window } => {
                if let Some(l) = self.links.get_mut(link.0 as usize) {
                    l.windows.retain(|&(w, _)| w != window);
                    self.reconfigure(link);
                }
            }
            Fault::Message(n, m) => self.input(n, Input::Control(m)),
            Fault::Workload {
                node,
                workload,
                change,
            } => self.input(node, Input::Control(change.message(&workload))),
            Fault::SessionCut(x) => self.with_session(x, |s, now, fx| s.cut(now, fx)),
            Fault::SessionHeal(x) => self.with_session(x, |s, now, fx| s.heal(now, fx)),
            Fault::SessionReset(x) => self.with_session(x, |s, now, fx| s.reset(now, fx)),
        }
    }

    fn resume(&mut self, node: NodeId) {
        let Some(slot) = self.nodes.get_mut(node.0 as usize) else {
            return;
        };
        if !matches!(slot.state, NodeState::Paused { until } if until <= self.now) {
            return;
        }
        slot.state = NodeState::Up;
        let backlog = std::mem::take(&mut slot.backlog);
        for input in backlog {
            self.input(node, input);
        }
    }

    /// A fault in words, for the log.
    pub fn describe(&self, fault: &Fault) -> String {
        let n = |id: &NodeId| self.node_name(*id).to_string();
        let l = |id: &LinkId| {
            self.links
                .get(id.0 as usize)
                .map_or("?".into(), |l| l.name.clone())
        };
        let group = |g: &[NodeId]| g.iter().map(n).collect::<Vec<_>>().join(",");
        match fault {
            Fault::LinkDown(x) => format!("link {} down", l(x)),
            Fault::LinkUp(x) => format!("link {} up", l(x)),
            Fault::Crash(x) => format!("{} crashed (state lost)", n(x)),
            Fault::Restart(x) => format!("{} restarted", n(x)),
            Fault::Pause { node, duration } => format!("{} paused for {} ns", n(node), duration),
            Fault::Partition(a, b) => format!("partition [{}] | [{}]", group(a), group(b)),
            Fault::Heal(a, b) => format!("partition [{}] | [{}] healed", group(a), group(b)),
            Fault::SetLoss(x, m) => format!("link {} loss now {:?}", l(x), m),
            Fault::Impair { link, window, set } => {
                format!("link {} impaired (window {window}): {set}", l(link))
            }
            Fault::Unimpair { link, window } => {
                let now = self.links.get(link.0 as usize).map_or(String::new(), |k| {
                    let mut config = k.configured[0];
                    for (_, w) in k.windows.iter().filter(|(w, _)| w != window) {
                        config = w.over(config);
                    }
                    format!(": back to {}", Impairment::of(&config))
                });
                format!("link {} impairment window {window} ends{now}", l(link))
            }
            Fault::PartitionSides(s) | Fault::HealSides(s) => {
                let cut = self
                    .links_between(&s.sides[0], &s.sides[1])
                    .iter()
                    .map(l)
                    .collect::<Vec<_>>()
                    .join(", ");
                let what = if matches!(fault, Fault::PartitionSides(_)) {
                    "cuts"
                } else {
                    "healed, restores"
                };
                format!(
                    "partition [{}] | [{}] {what} {}",
                    group(&s.groups[0]),
                    group(&s.groups[1]),
                    if cut.is_empty() {
                        "no link".into()
                    } else {
                        cut
                    }
                )
            }
            Fault::Message(x, m) => format!("message kind {} to {}", m.kind, n(x)),
            Fault::Workload {
                node,
                workload,
                change,
            } => match change {
                WorkloadChange::Storm { factor } => {
                    format!("workload_storm x{factor} of {}/{workload}", n(node))
                }
                c => format!("{} of {}/{workload}", c.label(), n(node)),
            },
            Fault::SessionCut(x) | Fault::SessionHeal(x) | Fault::SessionReset(x) => {
                let name = self
                    .sessions
                    .get(x.0 as usize)
                    .map_or("?", |s| s.name.as_str());
                let what = match fault {
                    Fault::SessionCut(_) => "cut",
                    Fault::SessionHeal(_) => "healed",
                    _ => "reset",
                };
                format!("session {name} {what}")
            }
        }
    }

    /// Reports of every node, as of now; a session's counters are in the
    /// report of each of its ends (`session/<name>/<counter>`, this end's).
    pub fn node_reports(&self) -> Vec<(String, &'static str, NodeReport)> {
        let mut reports: Vec<_> = self
            .nodes
            .iter()
            .map(|s| (s.name.clone(), s.node.kind(), s.node.report(self.now)))
            .collect();
        for s in &self.sessions {
            for (end, node) in s.ends.iter().enumerate() {
                let st = &s.stats[end];
                let counters = &mut reports[node.0 as usize].2.counters;
                for (k, v) in [
                    ("messages_sent", st.messages_sent),
                    ("bytes_sent", st.bytes_sent),
                    ("messages_received", st.messages_received),
                    ("refused", st.refused),
                    ("segments", st.segments),
                    ("retransmits", st.retransmits),
                    ("segments_lost", st.segments_lost),
                    ("cut_drops", st.cut_drops),
                    ("messages_lost", st.messages_lost),
                    ("ups", st.ups),
                    ("resets", st.resets),
                ] {
                    counters.insert(format!("session/{}/{k}", s.name), v);
                }
            }
        }
        reports
    }

    /// (name, ends, stats, configuration, throughput and queue series) of
    /// every link direction.
    pub fn link_reports(&self) -> Vec<crate::metrics::LinkReport> {
        let mut v = Vec::new();
        for l in &self.links {
            for dir in 0..2 {
                let (from, fp) = l.ends[dir];
                let (to, tp) = l.ends[1 - dir];
                v.push(crate::metrics::LinkReport {
                    link: l.name.clone(),
                    from: format!("{}:{}", self.node_name(from), fp),
                    to: format!("{}:{}", self.node_name(to), tp),
                    config: l.channels[dir].config,
                    stats: l.channels[dir].stats,
                    throughput_bytes: l.throughput[dir].clone(),
                    max_queue_bytes: l.queue[dir].clone(),
                });
            }
        }
        v
    }
}
