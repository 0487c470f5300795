//! SDW topologies in the simulator (specs/swish.md §8.1): each replica a
//! switch device on the `tofino` profile running [`SdwProgram`], an app host
//! on its port 0 sending scripted updates and queries and recording the
//! replies, a loopback cable from port [`LOOP_PORT`] to the next port (the
//! recirculation port the self copy of DATA takes), and one link per pair
//! of replicas on port `rid` of each end.
//!
//! - **local-2**: two pipes of one switch, joined by an internal link of
//!   40 ns [our choice, the correction of the spec's 0.5 µs
//!   loopback];
//! - **symmetric-4**: two switches with two pipes each; the two pipes of a
//!   switch are joined by a 40 ns internal link, pipes on different
//!   switches by a 100 Gb/s, 0.5 µs link (§8.1);
//! - **leaf-spine-4**: the same pairwise links with the path lengths of
//!   [`Topology::LeafSpine4`] (40 ns, 0.5 µs, 1.5 µs);
//! - **star-N** (§8.2 exp. 11): no link per pair; each replica's port
//!   [`UPLINK_PORT`] is cabled (100 Gb/s, 0.5 µs) to one fixed-function
//!   L3 router (`inca_sim::nodes::router`, one /32 route per replica,
//!   forwarding in [`crate::topology::SPINE_PASS`]), so every peer is
//!   reached through that one port and a DATA multicast leaves it as N−1
//!   copies.

use std::any::Any;
use std::collections::VecDeque;

use inca_sim::engine::{LinkId, Node, NodeId, Simulation};
use inca_sim::link::ChannelConfig;
use inca_sim::metrics::NodeReport;
use inca_sim::nodes::router::{Router, RouterConfig};
use inca_switch::device::{ControlMessage, Device, DeviceRng, Input, Nanos, Output};
use inca_switch::{PortId, Profile, Switch};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::app::{AppReply, AppRequest};
use super::config::SdwConfig;
use super::program::{SdwProgram, MSG_START};
use crate::addr::{ReplicaAddr, Rid};

/// The replica's port toward its app host.
pub const APP_HOST_PORT: PortId = 0;
/// The replica's loopback port (cabled to `LOOP_PORT + 1`).
pub const LOOP_PORT: PortId = 30;
/// Replies a host keeps at most (more are counted).
pub const HOST_KEEP: usize = 1 << 20;

/// The replica's port toward the forwarding switch in a star.
pub const UPLINK_PORT: PortId = 1;

pub use crate::topology::{Topology, SWITCH_LINK_DELAY};

/// An app host: sends its script, records the replies.
#[derive(Debug, Clone, Default)]
pub struct AppHost {
    script: VecDeque<(Nanos, Vec<u8>)>,
    /// Replies received, with their arrival time.
    pub replies: Vec<(Nanos, AppReply)>,
    /// (req_id, send time) of every request sent.
    pub sent: Vec<(u32, Nanos)>,
    /// Replies not kept (over [`HOST_KEEP`]) or not parseable.
    pub dropped: u64,
}

impl AppHost {
    /// Queues `req` (to `replica`) at `at`; times must not decrease.
    pub fn push(&mut self, at: Nanos, req: &AppRequest, me: &ReplicaAddr, replica: &ReplicaAddr) {
        let f = req.frame(me, replica);
        self.script.push_back((at, f));
    }

    /// Queues a ready-made frame at `at` (load: a request padded to a
    /// frame size); times must not decrease.
    pub fn push_frame(&mut self, at: Nanos, frame: Vec<u8>) {
        self.script.push_back((at, frame));
    }
}

impl Device for AppHost {
    fn start(&mut self, now: Nanos, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        if let Some(&(at, _)) = self.script.front() {
            out.push(Output::Timer {
                at: at.max(now),
                token: 0,
            });
        }
    }

    fn handle(&mut self, now: Nanos, input: Input, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        match input {
            Input::Frame { frame, .. } => match AppReply::parse_frame(&frame) {
                Some(r) if self.replies.len() < HOST_KEEP => self.replies.push((now, r)),
                _ => self.dropped += 1,
            },
            Input::Timer { .. } => {
                while self.script.front().is_some_and(|(at, _)| *at <= now) {
                    if let Some((_, f)) = self.script.pop_front() {
                        if let Some(id) = inca_wire::parse_udp_frame(&f).ok().and_then(|u| {
                            u.payload
                                .get(4..8)
                                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
                        }) {
                            self.sent.push((id, now));
                        }
                        out.push(Output::Transmit {
                            at: now,
                            port: 0,
                            frame: f,
                        });
                    }
                }
                if let Some(&(at, _)) = self.script.front() {
                    out.push(Output::Timer { at, token: 0 });
                }
            }
            Input::Control(_) | Input::LinkState { .. } | Input::Session(_) => {}
        }
    }

    fn restart(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.start(now, rng, out);
    }
}

impl Node for AppHost {
    fn kind(&self) -> &'static str {
        "host"
    }
    fn report(&self, _now: Nanos) -> NodeReport {
        let mut r = NodeReport::default();
        r.counters.insert("sent".into(), self.sent.len() as u64);
        r.counters
            .insert("replies".into(), self.replies.len() as u64);
        r
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// How to build a rig.
#[derive(Debug, Clone)]
pub struct RigConfig {
    /// The topology.
    pub topology: Topology,
    /// The simulation seed.
    pub seed: u64,
    /// The collection's shape and protocol options every replica gets
    /// (rid, members and ports are the rig's).
    pub base: SdwConfig,
    /// Impairments on the links between replicas (delay and rate are the
    /// topology's).
    pub impair: ChannelConfig,
    /// When the controller's START reaches each replica.
    pub start_at: Nanos,
    /// Spread of START's arrival: replica i's START lands at `start_at`
    /// plus a draw from 0..=`start_skew` (from the seed; 0: all at once).
    /// The controller's RPCs to the replicas are sent one after another
    /// and do not land together (§8.1: an RPC round trip of 100 µs).
    pub start_skew: Nanos,
    /// Failure detection delay T_detect: how long after a failure the
    /// controller starts recovery (spec §9: exposed, [our choice] default
    /// [`super::recovery::T_DETECT`]).
    pub t_detect: Nanos,
}

impl Default for RigConfig {
    fn default() -> Self {
        RigConfig {
            topology: Topology::Local2,
            seed: 1,
            base: SdwConfig::new(1, vec![ReplicaAddr::conventional(1, 0)], LOOP_PORT),
            impair: ChannelConfig::default(),
            // After the control plane has installed the groups and streams
            // (a few serial operations of tens of µs each, tofino profile).
            start_at: 1_000_000,
            start_skew: 0,
            t_detect: super::recovery::T_DETECT,
        }
    }
}

/// A built rig.
pub struct Rig {
    /// The simulation.
    pub sim: Simulation,
    /// Replica nodes, in rid order (rid = index + 1).
    pub replicas: Vec<NodeId>,
    /// App hosts, one per replica.
    pub hosts: Vec<NodeId>,
    /// Links between replicas: ((a, b), link).
    pub links: Vec<((usize, usize), LinkId)>,
    /// Every replica's address as its peers see it (port = the peer's port
    /// toward it is `rid`).
    pub addrs: Vec<ReplicaAddr>,
    /// The configuration every replica was built from (rid and members
    /// aside).
    pub base: SdwConfig,
    /// The forwarding switch of a star (None in the pairwise topologies).
    pub router: Option<NodeId>,
    /// Each replica's uplink to the forwarding switch (star only; the
    /// replica is link end a).
    pub uplinks: Vec<LinkId>,
}

/// The app host's own address for replica `i` [our choice: rid 0x1000 + i].
pub fn host_addr(i: usize) -> ReplicaAddr {
    ReplicaAddr::conventional(0x1000 + i as Rid, 0)
}

impl Rig {
    /// Builds the topology with `scripts[i]` for app host i (requests
    /// and when to send them, in time order); START is scheduled at
    /// `cfg.start_at`.
    pub fn build(cfg: &RigConfig, scripts: &[Vec<(Nanos, AppRequest)>]) -> Result<Rig, String> {
        Rig::build_loaded(cfg, scripts, &[])
    }

    /// [`Rig::build`], and app host i also sends the ready-made frames
    /// `frames[i]` (load; in time order, after its script's requests at
    /// equal times).
    pub fn build_loaded(
        cfg: &RigConfig,
        scripts: &[Vec<(Nanos, AppRequest)>],
        frames: &[Vec<(Nanos, Vec<u8>)>],
    ) -> Result<Rig, String> {
        let n = cfg.topology.replicas();
        let mut sim = Simulation::new(cfg.seed, 100_000);
        let fwd = cfg.topology.forwarded();
        let addrs: Vec<ReplicaAddr> = (1..=n as Rid)
            .map(|r| ReplicaAddr::conventional(r, if fwd { UPLINK_PORT } else { r }))
            .collect();
        let (mut replicas, mut hosts, mut links) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..n {
            let rid = i as Rid + 1;
            let c = SdwConfig {
                rid,
                members: addrs.clone(),
                loop_port: LOOP_PORT,
                ..cfg.base.clone()
            };
            let prog = SdwProgram::new(c).map_err(|e| e.to_string())?;
            let sw = Switch::new(Profile::tofino(), prog).map_err(|e| e.to_string())?;
            let id = sim.add_node(&format!("sdw{rid}"), Box::new(sw));
            replicas.push(id);
            let mut h = AppHost::default();
            let mut reqs = scripts.get(i).into_iter().flatten().peekable();
            let mut load = frames.get(i).into_iter().flatten().peekable();
            // Merge the two in time order (the script is a queue).
            loop {
                match (reqs.peek(), load.peek()) {
                    (Some((a, _)), Some((b, _))) if b < a => {
                        let (at, f) = load.next().ok_or("load")?;
                        h.push_frame(*at, f.clone());
                    }
                    (Some(_), _) => {
                        let (at, req) = reqs.next().ok_or("script")?;
                        h.push(*at, req, &host_addr(i), &addrs[i]);
                    }
                    (None, Some(_)) => {
                        let (at, f) = load.next().ok_or("load")?;
                        h.push_frame(*at, f.clone());
                    }
                    (None, None) => break,
                }
            }
            let host = sim.add_node(&format!("host{rid}"), Box::new(h));
            hosts.push(host);
            let lossless = ChannelConfig {
                delay: SWITCH_LINK_DELAY,
                queue_bytes: 16 << 20,
                ..ChannelConfig::default()
            };
            sim.connect(
                &format!("app{rid}"),
                (host, 0),
                (id, APP_HOST_PORT),
                lossless,
                lossless,
            )
            .map_err(|e| e.to_string())?;
            // A port in loopback: no propagation to speak of; the pass it
            // costs is the switch's own pipeline latency.
            let lp = ChannelConfig {
                delay: 0,
                queue_bytes: 16 << 20,
                ..ChannelConfig::default()
            };
            sim.connect(
                &format!("loop{rid}"),
                (id, LOOP_PORT),
                (id, LOOP_PORT + 1),
                lp,
                lp,
            )
            .map_err(|e| e.to_string())?;
        }
        let (router, uplinks) = if fwd {
            let (r, u) = star_router(&mut sim, &replicas, &addrs, cfg.impair)?;
            (Some(r), u)
        } else {
            (None, Vec::new())
        };
        for a in (0..n).filter(|_| !fwd) {
            for b in a + 1..n {
                let ch = ChannelConfig {
                    delay: cfg.topology.delay(a, b),
                    rate_bps: 100_000_000_000,
                    queue_bytes: 16 << 20,
                    ..cfg.impair
                };
                let l = sim
                    .connect(
                        &format!("r{}-r{}", a + 1, b + 1),
                        (replicas[a], b as PortId + 1),
                        (replicas[b], a as PortId + 1),
                        ch,
                        ch,
                    )
                    .map_err(|e| e.to_string())?;
                links.push(((a, b), l));
            }
        }
        let mut skew = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x5354_4152);
        for &r in &replicas {
            let jitter = if cfg.start_skew > 0 {
                skew.gen_range(0..=cfg.start_skew)
            } else {
                0
            };
            sim.schedule(
                cfg.start_at + jitter,
                inca_sim::engine::Fault::Message(
                    r,
                    ControlMessage {
                        kind: MSG_START,
                        body: Vec::new(),
                    },
                ),
            );
        }
        Ok(Rig {
            sim,
            replicas,
            hosts,
            links,
            addrs,
            base: cfg.base.clone(),
            router,
            uplinks,
        })
    }

    /// Replica `i`'s switch.
    pub fn switch(&self, i: usize) -> Option<&Switch<SdwProgram>> {
        self.sim.node::<Switch<SdwProgram>>(self.replicas[i])
    }

    /// Replica `i`'s current window.
    pub fn window(&self, i: usize) -> Option<u32> {
        let s = self.switch(i)?;
        s.program().peek_window(s.objects())
    }

    /// App host `i`.
    pub fn host(&self, i: usize) -> Option<&AppHost> {
        self.sim.node::<AppHost>(self.hosts[i])
    }
}

/// The star's forwarding switch: a router with one port per replica
/// (port i to replica i's [`UPLINK_PORT`]) and a /32 route to each
/// replica's address; the uplinks carry `impair`. Returns it and them.
fn star_router(
    sim: &mut Simulation,
    replicas: &[NodeId],
    addrs: &[ReplicaAddr],
    impair: ChannelConfig,
) -> Result<(NodeId, Vec<LinkId>), String> {
    let n = replicas.len();
    // [our choice] The router's own MAC on port i: 02:4c:33:00:i.
    let macs: Vec<[u8; 6]> = (0..n)
        .map(|i| {
            let [hi, lo] = (i as u16).to_be_bytes();
            [0x02, 0x4c, 0x33, 0x00, hi, lo]
        })
        .collect();
    let cfg = RouterConfig {
        latency: crate::topology::SPINE_PASS,
        ..RouterConfig::default()
    };
    let mut router = Router::new(cfg, macs, addrs.iter().map(|a| a.mac).collect());
    for (i, a) in addrs.iter().enumerate() {
        router.add_route(a.ip.octets(), 32, vec![i as PortId])?;
    }
    let r = sim.add_node("l3", Box::new(router));
    let ch = ChannelConfig {
        delay: SWITCH_LINK_DELAY,
        rate_bps: crate::topology::LINK_RATE_BPS,
        queue_bytes: 16 << 20,
        ..impair
    };
    let mut uplinks = Vec::with_capacity(n);
    for (i, &rep) in replicas.iter().enumerate() {
        let l = sim
            .connect(
                &format!("r{}-l3", i + 1),
                (rep, UPLINK_PORT),
                (r, i as PortId),
                ch,
                ch,
            )
            .map_err(|e| e.to_string())?;
        uplinks.push(l);
    }
    Ok((r, uplinks))
}

/// Window-advance latency (spec §8.2 exp. 5): runs `topology` without
/// loss or app traffic with `rows` × `cols` cells and the ready phase
/// `ready`, until `advances` windows have advanced at replica 1 (or 1 s of
/// simulated time), and returns the sorted inter-advance times at replica
/// 1 (ns). Rows do not change the packet count (one packet per column).
pub fn advance_intervals(
    topology: Topology,
    rows: u8,
    cols: u32,
    ready: bool,
    advances: usize,
    seed: u64,
) -> Result<Vec<Nanos>, String> {
    let mut cfg = RigConfig {
        topology,
        seed,
        ..RigConfig::default()
    };
    cfg.base.rows = rows;
    cfg.base.cols = cols;
    cfg.base.ready_phase = ready;
    let (_, mut gaps) = advance_run(&cfg, advances, 1_000_000_000)?;
    gaps.sort_unstable();
    Ok(gaps)
}

/// Builds `cfg`'s rig without app traffic and runs it until `advances`
/// windows have advanced at replica 1 or the simulated clock reaches
/// `deadline`; returns the rig (for its reports) and the inter-advance
/// times at replica 1 (ns) in order.
pub fn advance_run(
    cfg: &RigConfig,
    advances: usize,
    deadline: Nanos,
) -> Result<(Rig, Vec<Nanos>), String> {
    let mut rig = Rig::build(cfg, &[])?;
    let mut t = cfg.start_at;
    while t < deadline {
        t += 100_000;
        rig.sim.run_until(t, |_| {});
        let s = rig.switch(0).ok_or("no replica")?;
        if s.program().advances.len() > advances {
            break;
        }
    }
    let s = rig.switch(0).ok_or("no replica")?;
    let times: Vec<Nanos> = s
        .program()
        .advances
        .iter()
        .map(|a| a.1)
        .take(advances + 1)
        .collect();
    let gaps: Vec<Nanos> = times.windows(2).map(|w| w[1] - w[0]).collect();
    Ok((rig, gaps))
}

/// The p-th percentile (0–100) of sorted values.
pub fn percentile(sorted: &[Nanos], p: f64) -> Nanos {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}
