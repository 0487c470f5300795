//! A small TEA topology for tests, campaigns and benchmarks: one TEA switch
//! (tofino profile) running a TEA NF (the NAT by default), `servers` DRAM servers (H4's
//! [`DramServer`]) and two scripted probe hosts, inside and outside, in an
//! `inca_sim` [`Simulation`].
//!
//! Switch ports: 0 inside probe, 1 outside probe, 2.. the servers.

use std::any::Any;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::net::Ipv4Addr;

use inca_sim::engine::{LinkId, Node, NodeId, Simulation};
use inca_sim::link::ChannelConfig;
use inca_sim::metrics::NodeReport;
use inca_switch::device::{Device, DeviceRng, Input, Nanos, Output};
use inca_switch::{PortId, Profile, Switch};

use crate::nf::TeaNat;
use crate::server::{DramServer, DramServerConfig};

use crate::switch::{Recorder, ServerSpec, TeaConfig, TeaNf, TeaSwitch};

/// Switch port of the inside probe.
pub const INSIDE_PORT: PortId = 0;
/// Switch port of the outside probe.
pub const OUTSIDE_PORT: PortId = 1;
/// Switch port of server 0 (server i is on `FIRST_SERVER_PORT + i`).
pub const FIRST_SERVER_PORT: PortId = 2;
/// Bound on the frames a probe keeps.
pub const PROBE_KEEP: usize = 1 << 20;

/// Control message kind: a probe sends the body as a frame at once.
pub const PROBE_SEND: u32 = 0x5052_0001;

/// A host that sends scripted frames and records what it receives.
#[derive(Debug, Clone, Default)]
pub struct Probe {
    script: VecDeque<(Nanos, Vec<u8>)>,
    /// Frames received, with their arrival time (at most [`PROBE_KEEP`]).
    pub received: Vec<(Nanos, Vec<u8>)>,
    /// Frames sent.
    pub sent: u64,
}

impl Probe {
    /// Queues `frame` to be sent at `at` (times must not decrease; a frame
    /// scheduled in the past goes at once).
    pub fn push(&mut self, at: Nanos, frame: Vec<u8>) {
        self.script.push_back((at, frame));
    }
}

impl Device for Probe {
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
            Input::Frame { frame, .. } => {
                if self.received.len() < PROBE_KEEP {
                    self.received.push((now, frame));
                }
            }
            Input::Timer { .. } => {
                while let Some((at, _)) = self.script.front() {
                    if *at > now {
                        break;
                    }
                    if let Some((_, f)) = self.script.pop_front() {
                        self.sent += 1;
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
            Input::Control(m) if m.kind == PROBE_SEND => {
                self.sent += 1;
                out.push(Output::Transmit {
                    at: now,
                    port: 0,
                    frame: m.body,
                });
            }
            Input::Control(_) | Input::LinkState { .. } | Input::Session(_) => {}
        }
    }

    fn restart(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.start(now, rng, out);
    }
}

impl Node for Probe {
    fn kind(&self) -> &'static str {
        "probe"
    }
    fn report(&self, _now: Nanos) -> NodeReport {
        let mut r = NodeReport::default();
        r.counters.insert("sent".into(), self.sent);
        r.counters
            .insert("received".into(), self.received.len() as u64);
        r
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// How to build a rig.
#[derive(Debug, Clone)]
pub struct RigConfig {
    /// DRAM servers.
    pub servers: usize,
    /// Replication (1 or 2).
    pub replication: u8,
    /// log2 of the bucket count.
    pub log2_buckets: u32,
    /// Cache entries (0: off).
    pub cache_cap: usize,
    /// READ requests carry the packet.
    pub read_req_trailer: bool,
    /// Server links (both directions).
    pub server_link: ChannelConfig,
    /// Host links.
    pub host_link: ChannelConfig,
    /// DRAM each server offers.
    pub dram_offered: u64,
    /// Run seed.
    pub seed: u64,
    /// Entries installed before traffic.
    pub preload: Vec<(Vec<u8>, Vec<u8>)>,
    /// Adjusts the TEA configuration before the switch is built.
    pub tweak: fn(&mut TeaConfig),
}

impl Default for RigConfig {
    fn default() -> Self {
        RigConfig {
            servers: 2,
            replication: 2,
            log2_buckets: 10,
            cache_cap: 1024,
            read_req_trailer: true,
            server_link: ChannelConfig {
                rate_bps: 40_000_000_000,
                delay: 10,
                queue_bytes: 4 << 20,
                ..ChannelConfig::default()
            },
            host_link: ChannelConfig {
                rate_bps: 40_000_000_000,
                delay: 10,
                queue_bytes: 4 << 20,
                ..ChannelConfig::default()
            },
            dram_offered: 1 << 30,
            seed: 1,
            preload: Vec::new(),
            tweak: |_| {},
        }
    }
}

/// The switch node type of the rig.
pub type NatSwitch = Switch<TeaSwitch<TeaNat>>;

/// A built rig running NF `N`.
pub struct Rig<N: TeaNf = TeaNat> {
    /// The simulation.
    pub sim: Simulation,
    /// The switch.
    pub switch: NodeId,
    /// The servers.
    pub servers: Vec<NodeId>,
    /// Inside probe.
    pub inside: NodeId,
    /// Outside probe.
    pub outside: NodeId,
    /// Server links, in server order.
    pub server_links: Vec<LinkId>,
    /// The observer the switch reports to.
    pub observer: Recorder,
    nf: PhantomData<N>,
}

/// The MAC of server `i`.
pub fn server_mac(i: usize) -> [u8; 6] {
    [0x02, 0, 0, 0, 0x0a, 1 + i as u8]
}

/// The IP of server `i`.
pub fn server_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, 0, 1 + i as u8)
}

impl Rig<TeaNat> {
    /// Builds a NAT rig (outside port 1, inside port 0, public addresses
    /// from 198.51.100.1).
    pub fn nat(cfg: &RigConfig, inside: Probe, outside: Probe) -> Result<Rig<TeaNat>, String> {
        let nat = TeaNat::new(OUTSIDE_PORT, INSIDE_PORT, [198, 51, 100, 1], 1 << 32);
        Rig::with_nf(cfg, nat, inside, outside)
    }
}

impl<N: TeaNf> Rig<N> {
    /// Builds a rig running `nf` (port 0 inside, port 1 outside).
    pub fn with_nf(
        cfg: &RigConfig,
        nf: N,
        inside: Probe,
        outside: Probe,
    ) -> Result<Rig<N>, String> {
        let specs: Vec<ServerSpec> = (0..cfg.servers)
            .map(|i| ServerSpec {
                port: FIRST_SERVER_PORT + i as PortId,
                mac: server_mac(i),
                ip: server_ip(i),
            })
            .collect();
        let mut tc = TeaConfig::new(nf.key_len(), nf.value_len(), cfg.log2_buckets, specs);
        tc.replication = cfg.replication;
        tc.cache_cap = cfg.cache_cap;
        tc.read_req_trailer = cfg.read_req_trailer;
        tc.server_link_bps = cfg.server_link.rate_bps;
        (cfg.tweak)(&mut tc);
        let observer = Recorder::new();
        let prog = TeaSwitch::new(nf, tc.clone())?
            .with_observer(observer.clone())
            .with_preload(cfg.preload.clone());
        let sw = Switch::new(Profile::tofino(), prog).map_err(|e| e.to_string())?;
        let mut sim = Simulation::new(cfg.seed, 100_000);
        let switch = sim.add_node("tea", Box::new(sw));
        let inside = sim.add_node("inside", Box::new(inside));
        let outside = sim.add_node("outside", Box::new(outside));
        let t = |e: inca_sim::engine::TopologyError| e.to_string();
        sim.connect(
            "l-in",
            (inside, 0),
            (switch, INSIDE_PORT),
            cfg.host_link,
            cfg.host_link,
        )
        .map_err(t)?;
        sim.connect(
            "l-out",
            (outside, 0),
            (switch, OUTSIDE_PORT),
            cfg.host_link,
            cfg.host_link,
        )
        .map_err(t)?;
        let mut servers = Vec::new();
        let mut server_links = Vec::new();
        for i in 0..cfg.servers {
            let sc = DramServerConfig {
                server_id: i as u16,
                ip: server_ip(i),
                mac: server_mac(i),
                dram_offered: cfg.dram_offered,
                controller_ip: tc.switch_ip,
                controller_mac: tc.switch_mac,
                ..DramServerConfig::default()
            };
            let s = DramServer::new(sc).map_err(|e| e.to_string())?;
            let id = sim.add_node(&format!("dram{i}"), Box::new(s));
            let l = sim
                .connect(
                    &format!("l-dram{i}"),
                    (switch, FIRST_SERVER_PORT + i as PortId),
                    (id, 0),
                    cfg.server_link,
                    cfg.server_link,
                )
                .map_err(t)?;
            servers.push(id);
            server_links.push(l);
        }
        Ok(Rig {
            sim,
            switch,
            servers,
            inside,
            outside,
            server_links,
            observer,
            nf: PhantomData,
        })
    }

    /// The switch device.
    pub fn switch(&self) -> &Switch<TeaSwitch<N>> {
        self.sim
            .node::<Switch<TeaSwitch<N>>>(self.switch)
            .expect("the rig's switch")
    }

    /// The TEA program.
    pub fn tea(&self) -> &TeaSwitch<N> {
        self.switch().program()
    }

    /// A probe.
    pub fn probe(&self, id: NodeId) -> &Probe {
        self.sim.node::<Probe>(id).expect("a probe")
    }

    /// A server.
    pub fn server(&self, i: usize) -> &DramServer {
        self.sim
            .node::<DramServer>(self.servers[i])
            .expect("a server")
    }

    /// Runs until the control plane is ready (every server set up), at most
    /// until `limit`; whether it got ready.
    pub fn run_until_ready(&mut self, limit: Nanos) -> bool {
        let mut t = self.sim.now();
        while t < limit {
            t += 100_000;
            self.sim.run_until(t, |_| {});
            if self.tea().is_ready() {
                return true;
            }
        }
        false
    }

    /// Makes probe `from` send `frame` at `at`.
    pub fn send(&mut self, at: Nanos, from: NodeId, frame: Vec<u8>) {
        self.sim.schedule(
            at,
            inca_sim::engine::Fault::Message(
                from,
                inca_switch::device::ControlMessage {
                    kind: PROBE_SEND,
                    body: frame,
                },
            ),
        );
    }

    /// Asks the switch's control plane for an operation at `at`.
    pub fn control(&mut self, at: Nanos, m: inca_switch::device::ControlMessage) {
        self.sim
            .schedule(at, inca_sim::engine::Fault::Message(self.switch, m));
    }

    /// Runs until `t`.
    pub fn run_until(&mut self, t: Nanos) {
        self.sim.run_until(t, |_| {});
    }
}
