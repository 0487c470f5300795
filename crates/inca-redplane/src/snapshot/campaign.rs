//! A fault campaign for bounded mode (spec §6.2 items 10 and 11, §6.4):
//! two heavy-hitter switches, a router and a real state store in the
//! simulator; switch A serves VLAN 1 and crashes at a random time; the
//! traffic moves to switch B, which must restore the partition from A's
//! last committed snapshot. Each run draws, from its seed, the crash time
//! and the impairments of the switch ↔ router links (loss 0/0.1/1/5 %,
//! 0.1 % duplication, reordering with up to 200 µs extra delay) and checks
//! the recorded history with [`check_snapshots`].
//!
//! [`crash_restore_run`] is one run; [`crash_restore_campaign`] runs seeds
//! `0..n` (what a CLI command would call); the tests run a few.

use std::any::Any;
use std::net::Ipv4Addr;

use inca_sim::engine::{Fault, Node, NodeId, Simulation};
use inca_sim::link::{ChannelConfig, LossModel};
use inca_sim::metrics::NodeReport;
use inca_sim::nodes::router::{Router, RouterConfig};
use inca_switch::{Device, DeviceRng, Input, Nanos, Output, PortId, Profile, Switch};
use inca_wire::builder::{build_udp_frame, Endpoints};
use inca_wire::ethernet::VlanTag;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::apps::HeavyHitterSketch;
use super::config::SnapshotConfig;
use super::observer::{check_snapshots, SnapEvent, SnapshotRecorder};
use super::program::BoundedSwitch;
use crate::store::{AppConfig, StoreConfig, StoreServer, WorkerConfig};

/// What one run found.
#[derive(Debug, Clone, PartialEq)]
pub struct CampaignRun {
    /// The run seed.
    pub seed: u64,
    /// Loss probability drawn for the switch ↔ router links.
    pub loss: f64,
    /// When A crashed.
    pub crash_at: Nanos,
    /// Partition epochs A saw committed.
    pub a_commits: usize,
    /// Restores B installed.
    pub b_restores: u64,
    /// Restores that matched a recorded snapshot exactly.
    pub exact_restores: usize,
    /// Partition epochs B saw committed after its restore.
    pub b_commits: u64,
    /// ε actions that fired (either switch).
    pub epsilon_fired: usize,
    /// Data-plane rule violations on either switch.
    pub access_violations: usize,
    /// §6.2 items 10 and 11, and liveness (B restored at all).
    pub violations: Vec<String>,
}

impl CampaignRun {
    /// No violation of any kind.
    pub fn ok(&self) -> bool {
        self.violations.is_empty() && self.access_violations == 0
    }
}

/// Sends scripted frames at scripted times and ignores what it receives.
struct Script {
    frames: Vec<(Nanos, PortId, Vec<u8>)>,
    next: usize,
}

impl Device for Script {
    fn start(&mut self, _now: Nanos, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        if let Some(f) = self.frames.first() {
            out.push(Output::Timer { at: f.0, token: 1 });
        }
    }

    fn handle(&mut self, now: Nanos, input: Input, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        if let Input::Timer { .. } = input {
            while let Some((at, port, frame)) = self.frames.get(self.next).cloned() {
                if at > now {
                    out.push(Output::Timer { at, token: 1 });
                    break;
                }
                out.push(Output::Transmit {
                    at: now,
                    port,
                    frame,
                });
                self.next += 1;
            }
        }
    }

    fn restart(&mut self, now: Nanos, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.next = self.frames.partition_point(|f| f.0 < now);
        if let Some(f) = self.frames.get(self.next) {
            out.push(Output::Timer { at: f.0, token: 1 });
        }
    }
}

impl Node for Script {
    fn kind(&self) -> &'static str {
        "script"
    }
    fn report(&self, _now: Nanos) -> NodeReport {
        NodeReport::default()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

type Hh = Switch<BoundedSwitch<HeavyHitterSketch>>;

fn data_frame(sport: u16) -> Vec<u8> {
    let ep = Endpoints {
        vlan: Some(VlanTag {
            pcp: 0,
            dei: false,
            vid: 1,
        }),
        ..Endpoints::new(
            [2, 0, 0, 0, 1, 1],
            Ipv4Addr::new(10, 1, 0, 1),
            [2, 0, 0, 0, 1, 2],
            Ipv4Addr::new(10, 2, 0, 1),
        )
    };
    build_udp_frame(&ep, sport, 80, &[0u8; 18], false).unwrap_or_default()
}

/// One run of the campaign, with loss drawn from 0/0.1/1/5 % but at most
/// `max_loss`. See the module documentation.
///
/// Cost: an unacknowledged snapshot request loops through the store port's
/// egress every pass (a few hundred ns) until its RTO, as on the hardware,
/// so lossy runs make millions of events; use a release build for them.
pub fn crash_restore_run(seed: u64, max_loss: f64) -> Result<CampaignRun, String> {
    const LEASE: Nanos = 100_000_000;
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x736e_6170);
    let losses: Vec<f64> = [0.0, 0.001, 0.01, 0.05]
        .into_iter()
        .filter(|&l| l <= max_loss)
        .collect();
    let loss = match losses.len() {
        0 => 0.0,
        n => losses[rng.gen_range(0..n)],
    };
    let crash_at: Nanos = rng.gen_range(40_000_000..90_000_000);
    let end = crash_at + 3 * LEASE;
    let store_ip = Ipv4Addr::new(10, 0, 200, 1);
    let router_mac = [2, 0, 0, 0, 0xfe, 1];
    let mk = |n: u8| SnapshotConfig {
        lease_period: LEASE,
        switch_ip: Ipv4Addr::new(10, 0, 100, n),
        switch_mac: [2, 0, 0, 0, 0x64, n],
        store_ip,
        store_mac: router_mac,
        ..SnapshotConfig::default()
    };
    let (ca, cb) = (mk(1), mk(2));
    let rec = SnapshotRecorder::new();
    let app = HeavyHitterSketch::new(3, vec![1], u32::MAX);
    let a = BoundedSwitch::new(app.clone(), ca.clone()).with_recorder(rec.clone());
    let b = BoundedSwitch::new(app, cb.clone()).with_recorder(rec.clone());
    let mut store_cfg = StoreConfig::new(
        store_ip,
        vec![WorkerConfig {
            worker: ca.store_udp - 8000,
            app: AppConfig::HeavyHitter {
                rows: 3,
                entries: 64,
            },
            shard: 0,
            shards: 1,
        }],
    );
    store_cfg.lease_period = LEASE;
    store_cfg.gateway_mac = router_mac;
    let store_mac = store_cfg.mac;
    let store = StoreServer::new(store_cfg).map_err(|e| e.to_string())?;
    let mut router = Router::new(
        RouterConfig::default(),
        vec![router_mac; 3],
        vec![ca.switch_mac, cb.switch_mac, store_mac],
    );
    router.add_route(ca.switch_ip.octets(), 32, vec![0])?;
    router.add_route(cb.switch_ip.octets(), 32, vec![1])?;
    router.add_route(store_ip.octets(), 32, vec![2])?;
    // VLAN 1 traffic: to A until the crash, then to B (as a router hashing
    // on the VLAN would after withdrawing A, §9 item 12).
    let mut frames = Vec::new();
    let mut t = 1_000_000;
    while t < end - 10_000_000 {
        let port = if t < crash_at { 0 } else { 1 };
        frames.push((t, port, data_frame(1000 + rng.gen_range(0..64u16))));
        t += rng.gen_range(20_000..80_000);
    }
    let mut sim = Simulation::new(seed, 1_000_000);
    let inj = sim.add_node("inject", Box::new(Script { frames, next: 0 }));
    let prof = Profile::tofino();
    let sa = sim.add_node(
        "a",
        Box::new(Switch::new(prof.clone(), a).map_err(|e| e.to_string())?),
    );
    let sb = sim.add_node(
        "b",
        Box::new(Switch::new(prof, b).map_err(|e| e.to_string())?),
    );
    let r = sim.add_node("router", Box::new(router));
    let st = sim.add_node("store", Box::new(store));
    let clean = ChannelConfig {
        delay: 2_000,
        ..ChannelConfig::default()
    };
    let impaired = ChannelConfig {
        loss: if loss > 0.0 {
            LossModel::Bernoulli { p: loss }
        } else {
            LossModel::None
        },
        duplicate: 0.001,
        reorder: 0.01,
        reorder_delay: rng.gen_range(0..=200_000),
        ..clean
    };
    let link = |sim: &mut Simulation,
                name: &str,
                x: (NodeId, PortId),
                y: (NodeId, PortId),
                c: ChannelConfig| {
        sim.connect(name, x, y, c, c)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    link(&mut sim, "inj-a", (inj, 0), (sa, ca.in_port), clean)?;
    link(&mut sim, "inj-b", (inj, 1), (sb, cb.in_port), clean)?;
    link(&mut sim, "a-out", (inj, 2), (sa, ca.out_port), clean)?;
    link(&mut sim, "b-out", (inj, 3), (sb, cb.out_port), clean)?;
    link(&mut sim, "a-router", (sa, ca.store_port), (r, 0), impaired)?;
    link(&mut sim, "b-router", (sb, cb.store_port), (r, 1), impaired)?;
    link(&mut sim, "router-store", (r, 2), (st, 0), clean)?;
    sim.schedule(crash_at, Fault::Crash(sa));
    rec.failure(ca.switch_ip, crash_at);
    sim.run_until(end, |_| {});

    let events = rec.events();
    let check = check_snapshots(&events, cb.epsilon, cb.t_snap);
    let a_sw = sim.node::<Hh>(sa).ok_or("switch a")?;
    let b_sw = sim.node::<Hh>(sb).ok_or("switch b")?;
    let bs = b_sw.program().stats().clone();
    let mut violations = check.violations;
    let a_commits = events
        .iter()
        .filter(|e| matches!(e, SnapEvent::Committed { switch, .. } if *switch == ca.switch_ip))
        .count();
    if a_commits > 0 && check.from_commits == 0 {
        violations.push("A committed snapshots but B's restore matched none of them".into());
    }
    if bs.restores == 0 {
        violations.push(format!(
            "B never restored VLAN 1 within {} ms of the crash",
            (end - crash_at) / 1_000_000
        ));
    }
    Ok(CampaignRun {
        seed,
        loss,
        crash_at,
        a_commits,
        b_restores: bs.restores,
        exact_restores: check.from_commits,
        b_commits: bs.partition_commits,
        epsilon_fired: events
            .iter()
            .filter(|e| matches!(e, SnapEvent::Epsilon { .. }))
            .count(),
        access_violations: a_sw.violations().len() + b_sw.violations().len(),
        violations,
    })
}

/// Runs seeds `0..seeds` with every loss rate.
pub fn crash_restore_campaign(seeds: u64) -> Vec<Result<CampaignRun, String>> {
    (0..seeds).map(|s| crash_restore_run(s, 1.0)).collect()
}
