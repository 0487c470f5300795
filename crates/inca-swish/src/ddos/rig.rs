//! Experiment 8's rig (specs/swish.md §8.2 E8, §7): a traffic source whose
//! attackers each send `pkts` packets to as many distinct destinations at
//! `pps`, alternating between two spines by destination parity; the two
//! spines run the detector — on SDW (two replicas joined by a 100 Gb/s,
//! 0.5 µs link: symmetric-2) or as pull/push baselines with a controller —
//! and forward what passes to a sink that counts per source.
//!
//! Ports on each spine: 0 from the source, [`SINK_PORT`] to the sink,
//! [`CTRL_PORT`] to the controller (push digests), the SDW replication
//! ports of [`crate::sdw::rig`] and its loopback.

use std::any::Any;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::net::Ipv4Addr;

use inca_sim::engine::{Node, NodeId, Simulation};
use inca_sim::link::ChannelConfig;
use inca_sim::metrics::{LatencyHistogram, NodeReport};
use inca_sim::session::SessionConfig;
use inca_switch::device::{ControlMessage, Device, DeviceRng, Input, Nanos, Output, SessionId};
use inca_switch::{PortId, Profile, Switch};

use super::controller::{ControllerConfig, DdosController};
use super::local::{DdosLocal, LocalConfig, Report};
use crate::addr::ReplicaAddr;
use crate::detector;
use crate::sdw::config::{Merge, SdwApp, SdwConfig};
use crate::sdw::program::{SdwProgram, MSG_START};
use crate::sdw::rig::LOOP_PORT;
use crate::topology::{LINK_RATE_BPS, SWITCH_LINK_DELAY};

/// A spine's port toward the sink.
pub const SINK_PORT: PortId = 10;
/// A spine's port toward the controller.
pub const CTRL_PORT: PortId = 11;
/// The spines.
pub const SPINES: usize = 2;
/// Distinct destinations a source's addresses are spaced by [our choice].
const DST_STRIDE: u32 = 10_007;

/// Which detector the spines run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detector {
    /// SwiSh SDW: one replicated sketch.
    Sdw,
    /// Local sketches, the controller polls a ring.
    Pull,
    /// Local sketches, digests pushed to the controller.
    Push,
}

impl Detector {
    /// Its name in parameters.
    pub fn name(self) -> &'static str {
        match self {
            Detector::Sdw => "sdw",
            Detector::Pull => "pull",
            Detector::Push => "push",
        }
    }
}

/// How to build and run the rig.
#[derive(Debug, Clone)]
pub struct DdosRigConfig {
    /// The detector.
    pub detector: Detector,
    /// Seed.
    pub seed: u64,
    /// New sources per second.
    pub rate: u64,
    /// Sources in the run (they start `1/rate` apart).
    pub sources: u32,
    /// Packets per source (each to its own destination).
    pub pkts: u32,
    /// Packets per second per source.
    pub pps: u64,
    /// Sketch columns per row.
    pub cols: u32,
    /// SDW: shortest window ([`SdwConfig::min_window`]).
    pub min_window: Nanos,
    /// SDW: the ACK-check timer period.
    pub t_chk: Nanos,
    /// Pull: the poll period.
    pub t_pull: Nanos,
    /// When the first source starts.
    pub traffic_at: Nanos,
}

impl Default for DdosRigConfig {
    fn default() -> Self {
        DdosRigConfig {
            detector: Detector::Sdw,
            seed: 1,
            rate: 1_000,
            sources: 100,
            pkts: 10_000,
            pps: 10_000,
            cols: detector::COLS,
            min_window: 1_000_000,
            t_chk: 100_000,
            t_pull: super::controller::T_PULL,
            traffic_at: 2_000_000,
        }
    }
}

/// What a run measured.
#[derive(Debug, Clone, Default)]
pub struct DdosOutcome {
    /// Per source: (sent, received at the sink).
    pub per_source: Vec<(u64, u64)>,
    /// Simulated time covered.
    pub duration: Nanos,
}

impl DdosOutcome {
    /// received/sent of each source.
    pub fn ratios(&self) -> Vec<f64> {
        self.per_source
            .iter()
            .map(|&(s, r)| if s == 0 { 0.0 } else { r as f64 / s as f64 })
            .collect()
    }

    /// The mean of [`DdosOutcome::ratios`].
    pub fn mean_ratio(&self) -> f64 {
        let r = self.ratios();
        if r.is_empty() {
            return 0.0;
        }
        r.iter().sum::<f64>() / r.len() as f64
    }

    /// The result report: counters `mean_pass_ppm`, `sources`, `sent`,
    /// `received`; histogram `pass_ppm` (each source's ratio in parts per
    /// million, recorded in the histogram's unit).
    pub fn report(&self) -> NodeReport {
        let mut r = NodeReport::default();
        let mut h = LatencyHistogram::default();
        for x in self.ratios() {
            h.record((x * 1e6).round() as u64);
        }
        let (s, v): (u64, u64) = self
            .per_source
            .iter()
            .fold((0, 0), |a, &(s, v)| (a.0 + s, a.1 + v));
        r.counters.insert(
            "mean_pass_ppm".into(),
            (self.mean_ratio() * 1e6).round() as u64,
        );
        r.counters
            .insert("sources".into(), self.per_source.len() as u64);
        r.counters.insert("sent".into(), s);
        r.counters.insert("received".into(), v);
        r.histograms.insert("pass_ppm".into(), h);
        r
    }
}

/// The attackers: source k starts at `traffic_at + k/rate` and sends
/// packet i at `+ i/pps` to destination `k·10007 + i`, out of port
/// (destination parity).
#[derive(Debug, Clone)]
pub struct TrafficSource {
    cfg: DdosRigConfig,
    /// (time, source, packet index) of each source's next packet.
    next: BinaryHeap<Reverse<(Nanos, u32, u32)>>,
    /// Packets sent per source.
    pub sent: Vec<u64>,
}

impl TrafficSource {
    fn new(cfg: &DdosRigConfig) -> Self {
        let mut next = BinaryHeap::new();
        let gap = 1_000_000_000 / cfg.rate.max(1);
        for k in 0..cfg.sources {
            next.push(Reverse((cfg.traffic_at + u64::from(k) * gap, k, 0)));
        }
        TrafficSource {
            cfg: cfg.clone(),
            next,
            sent: vec![0; cfg.sources as usize],
        }
    }

    fn arm(&self, out: &mut Vec<Output>) {
        if let Some(Reverse((at, _, _))) = self.next.peek() {
            out.push(Output::Timer { at: *at, token: 0 });
        }
    }
}

impl Device for TrafficSource {
    fn start(&mut self, _now: Nanos, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.arm(out);
    }

    fn handle(&mut self, now: Nanos, input: Input, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        if !matches!(input, Input::Timer { .. }) {
            return;
        }
        let period = 1_000_000_000 / self.cfg.pps.max(1);
        while let Some(&Reverse((at, k, i))) = self.next.peek() {
            if at > now {
                break;
            }
            self.next.pop();
            let dst = detector::dest_ip(k.wrapping_mul(DST_STRIDE).wrapping_add(i));
            let src = detector::source_ip(k);
            out.push(Output::Transmit {
                at: now,
                port: (dst & 1) as PortId,
                frame: detector::traffic_frame(src, dst),
            });
            self.sent[k as usize] += 1;
            if i + 1 < self.cfg.pkts {
                self.next.push(Reverse((at + period, k, i + 1)));
            }
        }
        self.arm(out);
    }

    fn restart(&mut self, _now: Nanos, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.arm(out);
    }
}

impl Node for TrafficSource {
    fn kind(&self) -> &'static str {
        "host"
    }
    fn report(&self, _now: Nanos) -> NodeReport {
        let mut r = NodeReport::default();
        r.counters
            .insert("sent".into(), self.sent.iter().sum::<u64>());
        r
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The sink: counts what arrives per source.
#[derive(Debug, Clone, Default)]
pub struct Sink {
    /// Packets received per source address.
    pub received: BTreeMap<u32, u64>,
    /// Frames that were not traffic.
    pub other: u64,
}

impl Device for Sink {
    fn handle(&mut self, _now: Nanos, input: Input, _rng: &mut DeviceRng, _out: &mut Vec<Output>) {
        if let Input::Frame { frame, .. } = input {
            match detector::parse_traffic(&frame) {
                Some((src, _)) => *self.received.entry(src).or_default() += 1,
                None => self.other += 1,
            }
        }
    }

    fn restart(&mut self, _now: Nanos, _rng: &mut DeviceRng, _out: &mut Vec<Output>) {}
}

impl Node for Sink {
    fn kind(&self) -> &'static str {
        "host"
    }
    fn report(&self, _now: Nanos) -> NodeReport {
        let mut r = NodeReport::default();
        r.counters
            .insert("received".into(), self.received.values().sum::<u64>());
        r.counters.insert("other".into(), self.other);
        r
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The controller's address [our choice].
pub fn controller_ip() -> Ipv4Addr {
    Ipv4Addr::new(10, 47, 255, 254)
}

/// A built rig.
pub struct DdosRig {
    /// The simulation.
    pub sim: Simulation,
    /// The configuration.
    pub cfg: DdosRigConfig,
    /// The traffic source.
    pub source: NodeId,
    /// The sink.
    pub sink: NodeId,
    /// The spines.
    pub spines: Vec<NodeId>,
    /// The controller (baselines).
    pub controller: Option<NodeId>,
}

fn lossless(delay: Nanos) -> ChannelConfig {
    ChannelConfig {
        delay,
        rate_bps: LINK_RATE_BPS,
        queue_bytes: 16 << 20,
        ..ChannelConfig::default()
    }
}

impl DdosRig {
    /// Builds the rig.
    pub fn build(cfg: &DdosRigConfig) -> Result<DdosRig, String> {
        if cfg.rate == 0 || cfg.pps == 0 || cfg.sources == 0 || cfg.pkts == 0 {
            return Err("ddos rig: rate, pps, sources and pkts must be positive".into());
        }
        let mut sim = Simulation::new(cfg.seed, 100_000);
        let source = sim.add_node("source", Box::new(TrafficSource::new(cfg)));
        let sink = sim.add_node("sink", Box::new(Sink::default()));
        let addrs: Vec<ReplicaAddr> = (1..=SPINES as u16)
            .map(|r| ReplicaAddr::conventional(r, r))
            .collect();
        let mut spines = Vec::new();
        for (i, a) in addrs.iter().enumerate() {
            let name = format!("spine{}", i + 1);
            let id = match cfg.detector {
                Detector::Sdw => {
                    let mut c = SdwConfig::new(a.rid, addrs.clone(), LOOP_PORT);
                    c.rows = detector::ROWS as u8;
                    c.cols = cfg.cols;
                    c.merge = Merge::Or;
                    c.app = SdwApp::Ddos {
                        out_port: SINK_PORT,
                    };
                    c.min_window = cfg.min_window;
                    c.t_chk = cfg.t_chk;
                    let prog = SdwProgram::new(c).map_err(|e| e.to_string())?;
                    let sw = Switch::new(Profile::tofino(), prog).map_err(|e| e.to_string())?;
                    sim.add_node(&name, Box::new(sw))
                }
                Detector::Pull | Detector::Push => {
                    let prog = DdosLocal::new(LocalConfig {
                        report: if cfg.detector == Detector::Pull {
                            Report::Pull
                        } else {
                            Report::Push
                        },
                        cols: cfg.cols,
                        rid: a.rid,
                        out_port: SINK_PORT,
                        ctrl_port: CTRL_PORT,
                        ctrl_ip: controller_ip(),
                        self_ip: a.ip,
                    })?;
                    let sw = Switch::new(Profile::tofino(), prog).map_err(|e| e.to_string())?;
                    sim.add_node(&name, Box::new(sw))
                }
            };
            let ch = lossless(SWITCH_LINK_DELAY);
            sim.connect(
                &format!("src-{name}"),
                (source, i as PortId),
                (id, 0),
                ch,
                ch,
            )
            .map_err(|e| e.to_string())?;
            sim.connect(
                &format!("{name}-sink"),
                (id, SINK_PORT),
                (sink, i as PortId),
                ch,
                ch,
            )
            .map_err(|e| e.to_string())?;
            spines.push(id);
        }
        let mut controller = None;
        match cfg.detector {
            Detector::Sdw => {
                let ch = lossless(SWITCH_LINK_DELAY);
                sim.connect("spine1-spine2", (spines[0], 2), (spines[1], 1), ch, ch)
                    .map_err(|e| e.to_string())?;
                for (i, &s) in spines.iter().enumerate() {
                    let lp = ChannelConfig {
                        delay: 0,
                        queue_bytes: 16 << 20,
                        ..ChannelConfig::default()
                    };
                    sim.connect(
                        &format!("loop{}", i + 1),
                        (s, LOOP_PORT),
                        (s, LOOP_PORT + 1),
                        lp,
                        lp,
                    )
                    .map_err(|e| e.to_string())?;
                    sim.schedule(
                        1_000_000,
                        inca_sim::engine::Fault::Message(
                            s,
                            ControlMessage {
                                kind: MSG_START,
                                body: Vec::new(),
                            },
                        ),
                    );
                }
            }
            Detector::Pull | Detector::Push => {
                let report = if cfg.detector == Detector::Pull {
                    Report::Pull
                } else {
                    Report::Push
                };
                let sessions: Vec<SessionId> =
                    (0..SPINES as u32).map(|k| SessionId(100 + k)).collect();
                let mut cc = ControllerConfig::new(report, sessions.clone());
                cc.t_pull = cfg.t_pull;
                cc.first_poll = cfg.traffic_at + cfg.t_pull;
                let c = sim.add_node("controller", Box::new(DdosController::new(cc)));
                // Controller RPC RTT 100 µs (spec §8.1, [our choice] there).
                let sc = SessionConfig {
                    latency: 50_000,
                    ..SessionConfig::default()
                };
                for (k, &s) in spines.iter().enumerate() {
                    sim.add_session(&format!("ctl-spine{}", k + 1), sessions[k], c, s, sc)?;
                    // The controller host's 40 Gb/s NIC (spec §8.1).
                    let ch = ChannelConfig {
                        rate_bps: 40_000_000_000,
                        ..lossless(SWITCH_LINK_DELAY)
                    };
                    sim.connect(
                        &format!("spine{}-ctl", k + 1),
                        (s, CTRL_PORT),
                        (c, k as PortId),
                        ch,
                        ch,
                    )
                    .map_err(|e| e.to_string())?;
                }
                controller = Some(c);
            }
        }
        Ok(DdosRig {
            sim,
            cfg: cfg.clone(),
            source,
            sink,
            spines,
            controller,
        })
    }

    /// When the last source's last packet has long arrived.
    pub fn end(&self) -> Nanos {
        let c = &self.cfg;
        let gap = 1_000_000_000 / c.rate.max(1);
        let per = 1_000_000_000 / c.pps.max(1);
        c.traffic_at + u64::from(c.sources - 1) * gap + u64::from(c.pkts) * per + 2_000_000
    }

    /// Runs to [`DdosRig::end`] and counts per source.
    pub fn run(&mut self) -> Result<DdosOutcome, String> {
        let end = self.end();
        self.sim.run_until(end, |_| {});
        let src = self
            .sim
            .node::<TrafficSource>(self.source)
            .ok_or("no source")?;
        let sink = self.sim.node::<Sink>(self.sink).ok_or("no sink")?;
        let per_source = (0..self.cfg.sources)
            .map(|k| {
                let got = sink
                    .received
                    .get(&detector::source_ip(k))
                    .copied()
                    .unwrap_or(0);
                (src.sent[k as usize], got)
            })
            .collect();
        Ok(DdosOutcome {
            per_source,
            duration: end,
        })
    }
}
