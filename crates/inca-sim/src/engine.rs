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

use std::any::Any;
use std::path::Path;

use inca_switch::device::{
    device_rng, ControlMessage, Device, DeviceRng, Input, Nanos, Output, PortId,
};
use inca_wire::PcapWriter;

use crate::lanes::LaneAgenda;
use crate::link::{Channel, ChannelConfig, Fate, LossModel};
use crate::metrics::{NodeReport, Series};

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
    /// A control message for a node.
    Message(NodeId, ControlMessage),
}

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
}

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
}

/// The simulation. See the module documentation.
pub struct Simulation {
    now: Nanos,
    seed: u64,
    bin: Nanos,
    nodes: Vec<NodeSlot>,
    links: Vec<LinkSlot>,
    agenda: LaneAgenda<Event>,
    out: Vec<Output>,
    started: bool,
    stats: EngineStats,
    /// Control messages nodes sent out, with their time and sender.
    pub messages: Vec<(Nanos, NodeId, ControlMessage)>,
    /// Faults that have happened, with their time, for the report.
    pub fault_log: Vec<(Nanos, String)>,
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
            agenda: LaneAgenda::default(),
            out: Vec::new(),
            started: false,
            stats: EngineStats::default(),
            messages: Vec::new(),
            fault_log: Vec::new(),
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
        });
        id
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
        });
        Ok(id)
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
            self.nodes[i].node.start(self.now, &mut out);
            self.apply(NodeId(i as u32), &mut out);
            self.out = out;
        }
    }

    /// Runs until virtual time `end` (events at `end` included), calling
    /// `progress` now and then with the current time.
    pub fn run_until(&mut self, end: Nanos, mut progress: impl FnMut(Nanos)) {
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
            Event::Deliver { link, dir, frame } => {
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
                self.input(node, Input::Frame { port, frame });
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

    /// Carries out a node's outputs.
    fn apply(&mut self, node: NodeId, out: &mut Vec<Output>) {
        for o in out.drain(..) {
            match o {
                Output::Transmit { at, port, frame } => {
                    let end = self.nodes[node.0 as usize]
                        .ports
                        .get(usize::from(port))
                        .copied()
                        .flatten();
                    let Some((link, dir)) = end else {
                        self.stats.unconnected_drops += 1;
                        continue;
                    };
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
                    let slot = &mut self.nodes[node.0 as usize];
                    slot.next_generation += 1;
                    let generation = slot.next_generation;
                    match slot.timers.iter_mut().find(|(t, _)| *t == token) {
                        Some(entry) => entry.1 = generation,
                        None => slot.timers.push((token, generation)),
                    }
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

    fn set_link(&mut self, link: LinkId, up: bool) {
        let now = self.now;
        let Some(l) = self.links.get_mut(link.0 as usize) else {
            return;
        };
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
        let text = self.describe(&fault);
        self.fault_log.push((self.now, text));
        match fault {
            Fault::LinkDown(l) => self.set_link(l, false),
            Fault::LinkUp(l) => self.set_link(l, true),
            Fault::Crash(n) => {
                let Some(slot) = self.nodes.get_mut(n.0 as usize) else {
                    return;
                };
                slot.state = NodeState::Crashed;
                slot.timers.clear();
                slot.backlog.clear();
                for l in self.links_of(n) {
                    self.set_link(l, false);
                }
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
                slot.node.restart(self.now, &mut out);
                self.apply(n, &mut out);
                self.out = out;
                for l in self.links_of(n) {
                    self.set_link(l, true);
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
            Fault::Partition(a, b) => {
                for l in self.links_between(&a, &b) {
                    self.set_link(l, false);
                }
            }
            Fault::Heal(a, b) => {
                for l in self.links_between(&a, &b) {
                    self.set_link(l, true);
                }
            }
            Fault::SetLoss(l, loss) => {
                if let Some(l) = self.links.get_mut(l.0 as usize) {
                    for c in &mut l.channels {
                        c.config.loss = loss;
                    }
                }
            }
            Fault::Message(n, m) => self.input(n, Input::Control(m)),
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
            Fault::Message(x, m) => format!("message kind {} to {}", m.kind, n(x)),
        }
    }

    /// Reports of every node, as of now.
    pub fn node_reports(&self) -> Vec<(String, &'static str, NodeReport)> {
        self.nodes
            .iter()
            .map(|s| (s.name.clone(), s.node.kind(), s.node.report(self.now)))
            .collect()
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
