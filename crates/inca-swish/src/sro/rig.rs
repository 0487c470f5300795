//! A simulated SRO NAT chain (specs/swish.md §6, §8.1): `replicas`
//! switches (tofino profile, one pipe each, [our choice]) joined in a full
//! mesh of 100 Gbps, 0.5 µs links, each with an inside host on port 0 and
//! an outside sink on port 1; peers on ports 2, 3, … in chain order.
//!
//! Inside hosts open connections whose packets each enter at a random
//! switch (so a flow's first packets may reach two switches at once);
//! about one packet in five opens a connection (flows of 1–8 packets,
//! ≈ 21 % new, spec §8.2 exp. 2). Sinks record every translated packet:
//! the inside key (from the payload), the external endpoint seen, and the
//! send and receive times — the observations S1 and S4 are checked on.
//! Impairments (drop, duplication, reordering, jitter) apply to every link;
//! [`Rig::fail_stop`] crashes a replica and has the controller reconfigure
//! the chain ([`crate::sro::controller`]).

use std::any::Any;
use std::collections::VecDeque;
use std::net::Ipv4Addr;

use inca_sim::engine::{Node, NodeId, Simulation};
use inca_sim::link::ChannelConfig;
use inca_sim::metrics::NodeReport;
use inca_switch::device::{Device, DeviceRng, Input, Nanos, Output};
use inca_switch::{PortId, Profile, Switch};
use inca_wire::builder::{build_udp_frame, Endpoints};
use inca_wire::parse_udp_frame;
use inca_wire::swish::sro::{NatKey, NatValue};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::addr::{ReplicaAddr, Rid};
use crate::sro::facts::Facts;
use crate::sro::program::{Broken, SroConfig, SroNat};

/// Switch port of the inside host.
pub const INSIDE_PORT: PortId = 0;
/// Switch port of the outside sink.
pub const OUTSIDE_PORT: PortId = 1;
/// First switch port toward a peer.
pub const FIRST_PEER_PORT: PortId = 2;
/// Bound on the observations a sink keeps.
pub const OBSERVATIONS_LIMIT: usize = 1 << 20;
/// Magic at the start of a rig packet's payload.
const MAGIC: u32 = 0x5352_4f21;
/// The remote end every inside flow talks to.
const REMOTE: [u8; 4] = [203, 0, 113, 9];

/// One translated packet seen at a sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    /// When the inside host sent it.
    pub sent: Nanos,
    /// When the sink received it.
    pub received: Nanos,
    /// The flow.
    pub flow: u32,
    /// The packet's number in its flow.
    pub packet: u32,
    /// The inside key (from the payload).
    pub key: NatKey,
    /// The external endpoint it carried.
    pub ext: NatValue,
}

/// A host: sends a script, records the rig packets it receives.
#[derive(Debug, Clone, Default)]
pub struct Host {
    script: VecDeque<(Nanos, Vec<u8>)>,
    /// Rig packets received.
    pub observed: Vec<Observation>,
    /// Frames sent.
    pub sent: u64,
    /// Frames received that were not rig packets.
    pub other: u64,
    /// When the first and the last of those arrived (a throughput window:
    /// after the handshakes, a line-rate blast of short frames is all a
    /// sink sees).
    pub other_span: Option<(Nanos, Nanos)>,
}

impl Host {
    fn arm(&self, now: Nanos, out: &mut Vec<Output>) {
        if let Some(&(at, _)) = self.script.front() {
            out.push(Output::Timer {
                at: at.max(now),
                token: 0,
            });
        }
    }
}

impl Device for Host {
    fn start(&mut self, now: Nanos, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.arm(now, out);
    }

    fn handle(&mut self, now: Nanos, input: Input, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        match input {
            Input::Frame { frame, .. } => match observe(now, &frame) {
                Some(o) if self.observed.len() < OBSERVATIONS_LIMIT => self.observed.push(o),
                Some(_) => {}
                None => {
                    self.other += 1;
                    let first = self.other_span.map_or(now, |(f, _)| f);
                    self.other_span = Some((first, now));
                }
            },
            Input::Timer { .. } => {
                while self.script.front().is_some_and(|(at, _)| *at <= now) {
                    if let Some((_, f)) = self.script.pop_front() {
                        self.sent += 1;
                        out.push(Output::Transmit {
                            at: now,
                            port: 0,
                            frame: f,
                        });
                    }
                }
                self.arm(now, out);
            }
            _ => {}
        }
    }

    fn restart(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.start(now, rng, out);
    }
}

impl Node for Host {
    fn kind(&self) -> &'static str {
        "host"
    }
    fn report(&self, _now: Nanos) -> NodeReport {
        let mut r = NodeReport::default();
        r.counters.insert("sent".into(), self.sent);
        r.counters
            .insert("observed".into(), self.observed.len() as u64);
        r
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The inside key of flow `f` [our choice]: address 10.1.x.y (x.y = f),
/// port 5000 + f mod 4, UDP.
pub fn flow_key(f: u32) -> NatKey {
    let [_, a, b, c] = f.to_be_bytes();
    NatKey {
        ip: [10, 1 + a, b, c],
        port: 5000 + (f % 4) as u16,
        proto: 17,
    }
}

/// Rig packet `packet` of flow `f`, sent at `t`.
pub fn flow_packet(f: u32, packet: u32, t: Nanos) -> Vec<u8> {
    flow_packet_sized(f, packet, t, 0)
}

/// The shortest rig packet: its tag needs 32 bytes of UDP payload (frame
/// without FCS; 78 bytes on the wire with it).
pub const MIN_RIG_FRAME: usize = 74;

/// Rig packet `packet` of flow `f`, sent at `t`, padded to a frame of
/// `frame_len` bytes without FCS (at least [`MIN_RIG_FRAME`]).
pub fn flow_packet_sized(f: u32, packet: u32, t: Nanos, frame_len: usize) -> Vec<u8> {
    let k = flow_key(f);
    let ep = Endpoints::new(
        [0x02, 0, 0, 0, 1, 1],
        Ipv4Addr::from(k.ip),
        [0x02, 0, 0, 0, 1, 2],
        Ipv4Addr::from(REMOTE),
    );
    let mut payload = Vec::with_capacity(32);
    payload.extend_from_slice(&MAGIC.to_be_bytes());
    payload.extend_from_slice(&f.to_be_bytes());
    payload.extend_from_slice(&packet.to_be_bytes());
    payload.extend_from_slice(&t.to_be_bytes());
    payload.extend_from_slice(&k.to_bytes());
    payload.resize(frame_len.saturating_sub(42).max(32), 0);
    build_udp_frame(&ep, k.port, 80, &payload, true).unwrap_or_default()
}

/// A short frame of flow `f` with no rig tag (`frame_len` bytes without
/// FCS, at least 60: a 64-byte packet on the wire): sinks count it in
/// [`Host::other`] and its arrival in [`Host::other_span`].
pub fn flow_filler(f: u32, frame_len: usize) -> Vec<u8> {
    let k = flow_key(f);
    let ep = Endpoints::new(
        [0x02, 0, 0, 0, 1, 1],
        Ipv4Addr::from(k.ip),
        [0x02, 0, 0, 0, 1, 2],
        Ipv4Addr::from(REMOTE),
    );
    let payload = vec![0u8; frame_len.max(60) - 42];
    build_udp_frame(&ep, k.port, 80, &payload, true).unwrap_or_default()
}

/// A rig packet as a sink sees it.
fn observe(now: Nanos, frame: &[u8]) -> Option<Observation> {
    let u = parse_udp_frame(frame).ok()?;
    let p = u.payload;
    if p.len() < 27 || p[..4] != MAGIC.to_be_bytes() {
        return None;
    }
    let be32 = |i: usize| u32::from_be_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
    let mut t = [0u8; 8];
    t.copy_from_slice(&p[12..20]);
    Some(Observation {
        sent: u64::from_be_bytes(t),
        received: now,
        flow: be32(4),
        packet: be32(8),
        key: NatKey::parse(&p[20..27]).ok()?,
        ext: NatValue {
            ip: u.src_ip.octets(),
            port: u.src_port,
        },
    })
}

/// How to build a rig.
#[derive(Debug, Clone)]
pub struct RigConfig {
    /// Replicas in the chain (1: the single-switch NAT baseline).
    pub replicas: usize,
    /// Spare replicas, outside the chain until they join at the tail
    /// (their hosts' packets are tunnelled to the tail meanwhile).
    pub spares: usize,
    /// Run seed.
    pub seed: u64,
    /// Connections opened.
    pub flows: u32,
    /// Packets per connection: uniform in 1..=this.
    pub max_packets: u32,
    /// Gap between a connection's packets: uniform in this range.
    pub gap: (Nanos, Nanos),
    /// Connections start uniformly in [start, start + traffic).
    pub start: Nanos,
    /// Length of the traffic phase.
    pub traffic: Nanos,
    /// Links between replicas (100 Gbps, 0.5 µs: spec §8.1).
    pub chain_link: ChannelConfig,
    /// Host links.
    pub host_link: ChannelConfig,
    /// A broken protocol variant.
    pub broken: Broken,
    /// Adjusts each replica's configuration before it is built.
    pub tweak: fn(&mut SroConfig),
}

impl Default for RigConfig {
    fn default() -> Self {
        let link = ChannelConfig {
            // specs/swish.md §8.1: 100 Gbps links, 0.5 µs propagation.
            rate_bps: crate::topology::LINK_RATE_BPS,
            delay: crate::topology::SWITCH_LINK_DELAY,
            queue_bytes: 4 << 20,
            ..ChannelConfig::default()
        };
        RigConfig {
            replicas: 3,
            spares: 0,
            seed: 1,
            // About 1,300 connections a second: well under the write
            // ceiling the control-plane costs set (~10k/s at the head).
            flows: 40,
            max_packets: 8,
            gap: (10_000, 300_000),
            start: 1_000_000,
            traffic: 30_000_000,
            chain_link: link,
            host_link: link,
            broken: Broken::None,
            tweak: |_| {},
        }
    }
}

/// A built rig.
pub struct Rig {
    /// The simulation.
    pub sim: Simulation,
    /// The replicas' switches, in initial chain order (rid = index + 1).
    pub switches: Vec<NodeId>,
    /// Inside hosts, per switch.
    pub inside: Vec<NodeId>,
    /// Outside sinks, per switch.
    pub outside: Vec<NodeId>,
    /// The run's facts.
    pub facts: Facts,
    /// The current chain (the controller's view).
    pub chain: Vec<Rid>,
    /// Replicas crashed, with the time.
    pub failed: Vec<(Rid, Nanos)>,
    /// The chain over time, as the controller set it: (from, chain).
    pub history: Vec<(Nanos, Vec<Rid>)>,
    /// A join in progress: (joiner, the tail shadowing it).
    pub joining: Option<(Rid, Rid)>,
    /// Packets scripted.
    pub scripted: u64,
}

/// The rid of replica `i`.
pub fn rid_of(i: usize) -> Rid {
    (i + 1) as Rid
}

/// The port of replica `i` toward replica `j`.
pub fn peer_port(i: usize, j: usize) -> PortId {
    FIRST_PEER_PORT + if j < i { j } else { j - 1 } as PortId
}

impl Rig {
    /// Builds a rig.
    pub fn new(cfg: &RigConfig) -> Result<Rig, String> {
        let n = cfg.replicas + cfg.spares;
        if cfg.replicas == 0 || n > 64 {
            return Err(format!(
                "replicas = {n}: a chain has 1 to 64 replicas (1: the single-switch NAT)"
            ));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x7372_6f72);
        let mut sends: Vec<Vec<(Nanos, Vec<u8>)>> = vec![Vec::new(); n];
        for f in 0..cfg.flows {
            let mut t = cfg.start + rng.gen_range(0..cfg.traffic.max(1));
            let k = rng.gen_range(1..=cfg.max_packets.max(1));
            for p in 0..k {
                let at = rng.gen_range(0..n);
                sends[at].push((t, flow_packet(f, p, t)));
                t += rng.gen_range(cfg.gap.0..=cfg.gap.1.max(cfg.gap.0));
            }
        }
        Rig::with_scripts(cfg, sends)
    }

    /// Builds a rig whose inside hosts send `scripts` (one per switch,
    /// spares included: `replicas + spares` of them) instead of the
    /// connections `cfg` describes (`flows`, `max_packets`, `gap`, `start`
    /// and `traffic` are then unused): a trace ([`crate::sro::trace`]).
    pub fn with_scripts(
        cfg: &RigConfig,
        scripts: Vec<Vec<(Nanos, Vec<u8>)>>,
    ) -> Result<Rig, String> {
        let in_chain = cfg.replicas;
        let n = cfg.replicas + cfg.spares;
        if in_chain == 0 || n > 64 {
            return Err(format!(
                "replicas = {n}: a chain has 1 to 64 replicas (1: the single-switch NAT)"
            ));
        }
        if scripts.len() != n {
            return Err(format!("{} scripts for {n} switches", scripts.len()));
        }
        let facts = Facts::default();
        let chain: Vec<Rid> = (0..in_chain).map(rid_of).collect();
        let mut sim = Simulation::new(cfg.seed, 100_000);
        let mut switches = Vec::new();
        let (mut inside, mut outside) = (Vec::new(), Vec::new());
        let mut hosts: Vec<Host> = vec![Host::default(); n];
        let mut scripted = 0;
        for (h, mut s) in hosts.iter_mut().zip(scripts) {
            s.sort_by_key(|(t, _)| *t);
            scripted += s.len() as u64;
            h.script = s.into();
        }
        for i in 0..n {
            let me = ReplicaAddr::conventional(rid_of(i), 0);
            let peers = (0..n)
                .filter(|&j| j != i)
                .map(|j| ReplicaAddr::conventional(rid_of(j), peer_port(i, j)))
                .collect();
            let mut sc = SroConfig::new(me, peers, chain.clone());
            // Every switch, spares too, owns a share of the port space.
            sc.index = i as u16;
            sc.replicas = n as u16;
            sc.outside_port = OUTSIDE_PORT;
            sc.inside_port = INSIDE_PORT;
            sc.broken = cfg.broken;
            sc.facts = facts.clone();
            (cfg.tweak)(&mut sc);
            let sw = Switch::new(Profile::tofino(), SroNat::new(sc)).map_err(|e| e.to_string())?;
            switches.push(sim.add_node(&format!("sro{}", rid_of(i)), Box::new(sw)));
        }
        let t = |e: inca_sim::engine::TopologyError| e.to_string();
        for (i, h) in hosts.into_iter().enumerate() {
            let a = sim.add_node(&format!("inside{}", rid_of(i)), Box::new(h));
            let b = sim.add_node(&format!("outside{}", rid_of(i)), Box::new(Host::default()));
            sim.connect(
                &format!("l-in{}", rid_of(i)),
                (a, 0),
                (switches[i], INSIDE_PORT),
                cfg.host_link,
                cfg.host_link,
            )
            .map_err(t)?;
            sim.connect(
                &format!("l-out{}", rid_of(i)),
                (switches[i], OUTSIDE_PORT),
                (b, 0),
                cfg.host_link,
                cfg.host_link,
            )
            .map_err(t)?;
            inside.push(a);
            outside.push(b);
        }
        for i in 0..n {
            for j in i + 1..n {
                sim.connect(
                    &format!("l-{}-{}", rid_of(i), rid_of(j)),
                    (switches[i], peer_port(i, j)),
                    (switches[j], peer_port(j, i)),
                    cfg.chain_link,
                    cfg.chain_link,
                )
                .map_err(t)?;
            }
        }
        Ok(Rig {
            sim,
            switches,
            inside,
            outside,
            facts,
            history: vec![(0, chain.clone())],
            chain,
            failed: Vec::new(),
            joining: None,
            scripted,
        })
    }

    /// Replica `rid`'s switch.
    pub fn switch(&self, rid: Rid) -> Option<&Switch<SroNat>> {
        let i = usize::from(rid).checked_sub(1)?;
        self.sim.node::<Switch<SroNat>>(*self.switches.get(i)?)
    }

    /// Every observation of every sink.
    pub fn observations(&self) -> Vec<Observation> {
        self.outside
            .iter()
            .filter_map(|&id| self.sim.node::<Host>(id))
            .flat_map(|h| h.observed.iter().copied())
            .collect()
    }

    /// Live replicas (not crashed), in chain order.
    pub fn live(&self) -> Vec<Rid> {
        self.chain.clone()
    }

    /// Runs until `t`.
    pub fn run_until(&mut self, t: Nanos) {
        self.sim.run_until(t, |_| {});
    }
}
