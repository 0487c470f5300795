//! A simulated EWO group for tests and campaigns: 2–4 replicas (each a
//! pipe, i.e. its own switch device on the tofino profile), a full mesh of
//! replication links, one application host per replica, and the
//! controller's actions (fail-stop removal, join with a copy of a live
//! replica's arrays) as timed control messages.
//!
//! Topologies (spec §8.1): **local-2** — two pipes of one switch joined by
//! an internal link of 40 ns [our choice, the correction to the
//! spec's 0.5 µs loopback]; **symmetric-4** — two switches with two pipes
//! each, 40 ns inside a switch, 0.5 µs between switches (spec §8.1),
//! every link 100 Gbps. Replica i has rid i+1, counter slot i, port 0 to
//! its host and port 1+j to replica j. Host links are clean [our choice]:
//! the properties are about replication, and a host must see every answer.

use std::any::Any;
use std::collections::VecDeque;
use std::net::Ipv4Addr;

use inca_sim::engine::{Fault, Node, NodeId, Simulation};
use inca_sim::link::ChannelConfig;
use inca_sim::metrics::NodeReport;
use inca_switch::device::{ControlMessage, Device, DeviceRng, Input, Nanos, Output};
use inca_switch::register::RegisterValue;
use inca_switch::{PortId, Profile, Switch};
use inca_wire::builder::{build_udp_frame, Endpoints};
use inca_wire::parse_udp_frame;

use crate::addr::ReplicaAddr;
use crate::ewo::app::{AppOp, APP_PORT};
use crate::ewo::config::{Broken, EwoConfig, VarSpec, T_AE};
use crate::ewo::control::{encode_peers, encode_write, SET_PEERS, SET_SERVING, WRITE_REG};
use crate::ewo::limiter::LimiterConfig;
use crate::ewo::program::EwoProgram;

/// A replica's switch device.
pub type EwoSwitch = Switch<EwoProgram>;

/// Time the controller needs to learn of a failure (spec §5.1, T_detect).
pub const T_DETECT: Nanos = 1_000_000;
/// Bound on the answers a host keeps.
pub const HOST_KEEP: usize = 1 << 20;

pub use crate::topology::{Topology, PIPE_LINK_DELAY, SWITCH_LINK_DELAY};

/// How to build a rig.
#[derive(Debug, Clone)]
pub struct RigConfig {
    /// The topology.
    pub topology: Topology,
    /// The shared variables (the same at every replica).
    pub vars: Vec<VarSpec>,
    /// Impairments of every replication link (rate and delay are set from
    /// the topology).
    pub link: ChannelConfig,
    /// Anti-entropy period.
    pub t_ae: Nanos,
    /// The last replica starts outside the group, not serving (a joiner).
    pub spare: bool,
    /// A broken variant at every replica.
    pub broken: Broken,
    /// The rate limiter at every replica, or none.
    pub limiter: Option<LimiterConfig>,
    /// Simulation seed.
    pub seed: u64,
}

impl Default for RigConfig {
    fn default() -> Self {
        RigConfig {
            topology: Topology::Local2,
            vars: Vec::new(),
            link: ChannelConfig::default(),
            t_ae: T_AE,
            spare: false,
            broken: Broken::None,
            limiter: None,
            seed: 1,
        }
    }
}

/// An application host: sends scripted operations to its replica and
/// keeps every answer with its arrival time.
#[derive(Debug, Clone, Default)]
pub struct AppHost {
    script: VecDeque<(Nanos, Vec<u8>)>,
    /// Answers, in arrival order (at most [`HOST_KEEP`]).
    pub answers: Vec<(Nanos, AppOp)>,
    /// Operations sent.
    pub sent: u64,
    /// Frames that were not answers (data the replica passed back): arrival
    /// time and IPv4 source (0.0.0.0 if none), at most [`HOST_KEEP`].
    pub data: Vec<(Nanos, Ipv4Addr)>,
}

impl AppHost {
    fn wake(&self, out: &mut Vec<Output>, now: Nanos) {
        if let Some(&(at, _)) = self.script.front() {
            out.push(Output::Timer {
                at: at.max(now),
                token: 0,
            });
        }
    }
}

impl Device for AppHost {
    fn start(&mut self, now: Nanos, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.wake(out, now);
    }

    fn handle(&mut self, now: Nanos, input: Input, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        match input {
            Input::Frame { frame, .. } => {
                let u = parse_udp_frame(&frame).ok();
                let src = u.as_ref().map_or(Ipv4Addr::UNSPECIFIED, |u| u.src_ip);
                let op = u
                    .as_ref()
                    .and_then(|u| (u.src_port == APP_PORT).then(|| AppOp::parse(u.payload))?);
                match op {
                    Some(op) if self.answers.len() < HOST_KEEP => self.answers.push((now, op)),
                    None if self.data.len() < HOST_KEEP => self.data.push((now, src)),
                    _ => {}
                }
            }
            Input::Timer { .. } => {
                while self.script.front().is_some_and(|(at, _)| *at <= now) {
                    if let Some((_, frame)) = self.script.pop_front() {
                        self.sent += 1;
                        out.push(Output::Transmit {
                            at: now,
                            port: 0,
                            frame,
                        });
                    }
                }
                self.wake(out, now);
            }
            _ => {}
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
        r.counters.insert("sent".into(), self.sent);
        r.counters
            .insert("answers".into(), self.answers.len() as u64);
        r
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The address of host `i`.
pub fn host_addr(i: usize) -> (Ipv4Addr, [u8; 6]) {
    (
        Ipv4Addr::new(10, 48, 0, 1 + i as u8),
        [0x02, 0x48, 0, 0, 0, i as u8],
    )
}

/// Replica `j` as the replica on the other end of its port from `i` sees
/// it (port 1+j).
pub fn replica_addr(j: usize) -> ReplicaAddr {
    ReplicaAddr::conventional(1 + j as u16, 1 + j as PortId)
}

/// A built rig.
pub struct Rig {
    /// The simulation.
    pub sim: Simulation,
    /// The replicas' switch nodes.
    pub replicas: Vec<NodeId>,
    /// The hosts, one per replica.
    pub hosts: Vec<NodeId>,
    /// Which replicas are in the group (serving or joining) and not failed,
    /// as the controller last set it.
    pub members: Vec<bool>,
    /// Which replicas have failed.
    pub failed: Vec<bool>,
    cfg: RigConfig,
}

impl Rig {
    /// Builds the rig; host i sends `scripts[i]` (operations with their
    /// send times, non-decreasing).
    pub fn new(cfg: &RigConfig, scripts: &[Vec<(Nanos, AppOp)>]) -> Result<Rig, String> {
        let frames = scripts
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let (ip, mac) = host_addr(i);
                let ep = Endpoints::new(mac, ip, replica_addr(i).mac, replica_addr(i).ip);
                s.iter()
                    .map(|(at, op)| {
                        build_udp_frame(&ep, 40000, APP_PORT, &op.to_bytes(), false)
                            .map(|f| (*at, f))
                            .map_err(|e| e.to_string())
                    })
                    .collect::<Result<Vec<_>, String>>()
            })
            .collect::<Result<Vec<_>, String>>()?;
        Rig::with_frames(cfg, frames)
    }

    /// Builds the rig; host i sends the frames `frames[i]` at their times
    /// (non-decreasing).
    pub fn with_frames(cfg: &RigConfig, frames: Vec<Vec<(Nanos, Vec<u8>)>>) -> Result<Rig, String> {
        let n = cfg.topology.replicas();
        if frames.len() != n {
            return Err(format!("{} scripts for {n} replicas", frames.len()));
        }
        let mut sim = Simulation::new(cfg.seed, 1_000_000);
        let members: Vec<bool> = (0..n).map(|i| !(cfg.spare && i == n - 1)).collect();
        let mut replicas = Vec::new();
        let mut hosts = Vec::new();
        for i in 0..n {
            let mut c = EwoConfig::new(replica_addr(i), i as u8);
            c.vars = cfg.vars.clone();
            c.t_ae = cfg.t_ae;
            c.broken = cfg.broken;
            c.serving = members[i];
            c.limiter = cfg.limiter;
            if members[i] {
                c.peers = (0..n)
                    .filter(|&j| j != i && members[j])
                    .map(replica_addr)
                    .collect();
            }
            let prog = EwoProgram::new(c)?;
            let sw = Switch::new(Profile::tofino(), prog).map_err(|e| e.to_string())?;
            replicas.push(sim.add_node(&format!("ewo{i}"), Box::new(sw)));
            let h = AppHost {
                script: frames[i].clone().into(),
                ..AppHost::default()
            };
            hosts.push(sim.add_node(&format!("host{i}"), Box::new(h)));
        }
        let t = |e: inca_sim::engine::TopologyError| e.to_string();
        let host_link = ChannelConfig::default();
        for i in 0..n {
            sim.connect(
                &format!("h{i}"),
                (hosts[i], 0),
                (replicas[i], 0),
                host_link,
                host_link,
            )
            .map_err(t)?;
            for j in i + 1..n {
                let mut l = cfg.link;
                l.rate_bps = crate::topology::LINK_RATE_BPS;
                l.delay = cfg.topology.delay(i, j);
                sim.connect(
                    &format!("r{i}-{j}"),
                    (replicas[i], 1 + j as PortId),
                    (replicas[j], 1 + i as PortId),
                    l,
                    l,
                )
                .map_err(t)?;
            }
        }
        Ok(Rig {
            sim,
            replicas,
            hosts,
            failed: vec![false; n],
            members,
            cfg: cfg.clone(),
        })
    }

    /// The data frames host `i` got back: arrival time, IPv4 source.
    pub fn data(&self, i: usize) -> &[(Nanos, Ipv4Addr)] {
        self.sim
            .node::<AppHost>(self.hosts[i])
            .map(|h| &h.data[..])
            .unwrap_or(&[])
    }

    /// The answers host `i` received.
    pub fn answers(&self, i: usize) -> &[(Nanos, AppOp)] {
        self.sim
            .node::<AppHost>(self.hosts[i])
            .map(|h| &h.answers[..])
            .unwrap_or(&[])
    }

    /// Replica `i`'s switch.
    pub fn replica(&self, i: usize) -> Option<&EwoSwitch> {
        self.sim.node::<EwoSwitch>(self.replicas[i])
    }

    /// Every array entry of every variable at replica `i` (LWW pairs as
    /// `hi << 32 | lo`), in declaration order: what E2 compares.
    pub fn state(&self, i: usize) -> Option<Vec<Vec<u64>>> {
        let sw = self.replica(i)?;
        let mut out = Vec::new();
        for v in &self.cfg.vars {
            let a = sw.program().arrays(v.var_id)?;
            let o = sw.objects();
            if let Some(h) = a.lww {
                out.push(
                    (0..u64::from(v.entries))
                        .map(|k| o.register_peek(h, k).map(|p| p.to_u64()).unwrap_or(0))
                        .collect(),
                );
            }
            for h in a.words {
                out.push(
                    (0..u64::from(v.entries))
                        .map(|k| o.register_peek(h, k).map(u64::from).unwrap_or(0))
                        .collect(),
                );
            }
        }
        Some(out)
    }

    /// Live members (in the group, not failed).
    pub fn live(&self) -> Vec<usize> {
        (0..self.members.len())
            .filter(|&i| self.members[i] && !self.failed[i])
            .collect()
    }

    fn message(&mut self, at: Nanos, i: usize, kind: u32, body: Vec<u8>) {
        self.sim.schedule(
            at,
            Fault::Message(self.replicas[i], ControlMessage { kind, body }),
        );
    }

    /// Tells every live member the member list, at `at`.
    fn announce(&mut self, at: Nanos) {
        let live = self.live();
        let peers: Vec<ReplicaAddr> = live.iter().map(|&j| replica_addr(j)).collect();
        for &i in &live {
            self.message(at, i, SET_PEERS, encode_peers(&peers));
        }
    }

    /// Replica `i` fails (fail-stop) at `at`; the controller learns of it
    /// T_detect later and removes it from the group.
    pub fn fail(&mut self, i: usize, at: Nanos) {
        self.sim.schedule(at, Fault::Crash(self.replicas[i]));
        self.failed[i] = true;
        self.announce(at + T_DETECT);
    }

    /// The controller joins replica `i` now (§5.3): it reads every array of
    /// live replica `from` (charged the profile's register-read cost),
    /// writes them into `i`, adds `i` to the group, then marks it serving.
    /// Returns when it will be serving.
    pub fn join(&mut self, i: usize, from: usize) -> Result<Nanos, String> {
        let now = self.sim.now();
        let cp = Profile::tofino().control_plane;
        let state = self.state(from).ok_or("the source replica is gone")?;
        let mut at = now;
        let mut writes = 0u64;
        let mut msgs = Vec::new();
        let mut arrays = Vec::new();
        for v in &self.cfg.vars {
            let per = if v.kind == inca_wire::swish::ewo::MergeKind::Lww {
                1
            } else {
                self.replica(from)
                    .and_then(|s| s.program().arrays(v.var_id))
                    .map(|a| a.words.len())
                    .unwrap_or(0)
            };
            for a in 0..per {
                arrays.push((v.var_id, a as u8));
            }
        }
        for ((var_id, a), values) in arrays.into_iter().zip(state) {
            at += cp.register_op + cp.register_per_entry * values.len() as u64;
            writes += values.len() as u64;
            msgs.push(encode_write(var_id, a, 0, &values));
        }
        for m in msgs {
            self.message(at, i, WRITE_REG, m);
        }
        // The joiner's CPU applies the writes one register write each.
        at += writes * (cp.register_op + cp.register_per_entry);
        self.members[i] = true;
        self.failed[i] = false;
        self.announce(at);
        let serve = at + cp.register_op + cp.register_per_entry;
        self.message(serve, i, SET_SERVING, vec![1]);
        Ok(serve)
    }

    /// Runs to `t`.
    pub fn run_until(&mut self, t: Nanos) {
        self.sim.run_until(t, |_| {});
    }

    /// The configuration it was built from.
    pub fn config(&self) -> &RigConfig {
        &self.cfg
    }
}
