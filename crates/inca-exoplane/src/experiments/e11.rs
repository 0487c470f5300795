//! E11 (specs/exoplane.md §8, §5.10, Thesis §4.6.5): what ExoPlane's
//! runtime costs — hub memory, synchronisation bandwidth, switch resources
//! — at the evaluation's 10,240 flow-manager entries, and how each grows
//! with entries, devices and `T_c`.
//!
//! Per point a real hub and daemons ([`super::rig`]) run the scenario's
//! MEDIUM apps (the ones with a flow manager and hub state); every flow is
//! set up through the write path (MISS → WRITE_REQ → WRITE_APPLY to its
//! shard's primary and replica → WRITE_ACK) and reported popular, one
//! report per millisecond (the hub promotes at most one per
//! `PROMOTION_INTERVAL`), until each app's FM is full. Then:
//! - hub memory is [`Hub::overhead`](crate::hub::Hub::overhead), per app
//!   and per object;
//! - sync traffic is every SYNC_REQ and SYNC_RESP the hub and daemons send
//!   over a window of rounds, each encoded by the control-protocol codec,
//!   next to §5.10's formula `2 × (28 + Σ(19 + key))` per device per round
//!   over the same messages;
//! - switch resources are the `exoplane_switch` program with `fm` entries
//!   placed on `tofino` (as `inca check exoplane_switch --set fm=…`): what
//!   the runtime's objects (flow managers and their counters, classifier,
//!   shard map, `dev_map`, `pdev_alive`, port maps) take, as a share of the
//!   switch.
//!
//! Scenarios: the hub runs the MEDIUM apps whose new flows their own
//! control logic sets up — leaf: per-VM NAT and FW; front-end: per-tenant
//! NAT (VLAN id ‖ 5-tuple, 64 tenants) [our choice: the VPN's tunnels and
//! the per-tenant ACL's rules are provisioned by the operator, not set up
//! per flow, so no flow of theirs reaches the hub]. FM entries split
//! evenly over those apps. The switch programs placed are leaf
//! `um,nat,fw,sp` and front-end `um,vpn,tnat,tacl` (UnivMon HIGH, SYN
//! proxy LOW).

use std::collections::BTreeMap;

use inca_apps::params::Params;
use inca_switch::device::{DeviceRng, Nanos};
use inca_switch::resources::Resource;
use inca_switch::{check, Profile};
use rand::{Rng, SeedableRng};
use serde::Serialize;

use std::net::Ipv4Addr;

use inca_wire::{build_udp_frame, Endpoints, VlanTag};

use super::rig::{Rig, SyncTraffic};
use crate::app::{catalog, key_of, AppSpec};
use crate::hub::overhead::Overhead;
use crate::ids::{AppId, UnionKey};

const MS: Nanos = 1_000_000;
const S: Nanos = 1_000_000_000;

/// The thesis's flow-manager entries (§4.6.5).
pub const FM_ENTRIES: u64 = 10_240;

/// A scenario: its MEDIUM apps and the switch program's `apps` list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Scenario {
    /// VPN, NAT (MEDIUM), UnivMon (HIGH).
    FrontEnd,
    /// NAT, FW (MEDIUM), UnivMon (HIGH), SYN proxy (LOW).
    Leaf,
}

impl Scenario {
    /// Both.
    pub const ALL: [Scenario; 2] = [Scenario::FrontEnd, Scenario::Leaf];

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::FrontEnd => "front-end",
            Scenario::Leaf => "leaf",
        }
    }

    /// The apps the hub runs, with ids 1, 2, … and the punt reason of
    /// their new flows.
    pub fn hub_apps(self) -> Vec<(AppSpec, u16)> {
        let flows = 1 << 20;
        let nat = |id| {
            (
                catalog::nat(AppId(id), "nat", flows, 1),
                inca_apps::nat::REASON_NEW_FLOW,
            )
        };
        match self {
            Scenario::FrontEnd => vec![(
                catalog::tenant_nat(AppId(1), "tnat", flows, 1),
                inca_apps::nat::REASON_NEW_FLOW,
            )],
            Scenario::Leaf => vec![
                nat(1),
                (
                    catalog::firewall(AppId(2), "fw", flows, 1, 4096),
                    inca_apps::firewall::REASON_NEW_CONN,
                ),
            ],
        }
    }

    /// The switch program's `apps` parameter (UnivMon first: see
    /// [`crate::programs`]).
    pub fn switch_apps(self) -> &'static str {
        match self {
            Scenario::FrontEnd => "um,vpn,tnat,tacl",
            Scenario::Leaf => "um,nat,fw,sp",
        }
    }
}

/// Tenants of the front-end (spec §8: tenant = hash(5-tuple) mod 64; here
/// drawn per flow, which is the same distribution).
pub const TENANTS: u16 = 64;

/// One synthetic flow's header fields.
#[derive(Clone, Copy, Debug)]
struct Flow {
    /// Its tenant VLAN (1..=64).
    tenant: u16,
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
}

impl Flow {
    /// Flow `i`: a source in 10.0.0.0/8 (`a·i + b mod 2²⁴`, `a` odd, so
    /// distinct for distinct `i`), a random port, one destination service
    /// (192.0.2.1:5000, UDP) [our choice: as the backbone-like trace draws
    /// them].
    fn draw(i: u32, (a, b): (u32, u32), rng: &mut DeviceRng) -> Flow {
        let host = a.wrapping_mul(i).wrapping_add(b) & 0x00ff_ffff;
        Flow {
            tenant: rng.gen_range(1..=TENANTS),
            src: (0x0a00_0000 | host).to_be_bytes(),
            dst: [192, 0, 2, 1],
            sport: rng.gen_range(1024..=65535),
            dport: 5000,
        }
    }

    /// Its first packet, a UDP frame from the inside, tagged with its
    /// tenant's VLAN when `tagged`.
    fn frame(&self, tagged: bool) -> Vec<u8> {
        let mut ep = Endpoints::new(
            [2, 0, 0, 0, 0, 1],
            Ipv4Addr::from(self.src),
            [2, 0, 0, 0, 0, 2],
            Ipv4Addr::from(self.dst),
        );
        if tagged {
            ep.vlan = Some(VlanTag {
                pcp: 0,
                dei: false,
                vid: self.tenant,
            });
        }
        build_udp_frame(&ep, self.sport, self.dport, &[0; 18], true).unwrap_or_default()
    }
}

/// One measured point.
#[derive(Clone, Debug, Serialize)]
pub struct E11Point {
    /// The scenario.
    pub scenario: &'static str,
    /// FM entries, all apps.
    pub entries: u64,
    /// External devices.
    pub devices: u8,
    /// `T_c`, seconds.
    pub t_c: f64,
    /// PRESENT flows at the end (must equal `entries`).
    pub promoted: u64,
    /// The hub's memory.
    pub overhead: Overhead,
    /// Sync rounds in the measuring window.
    pub rounds: u64,
    /// The window's sync traffic.
    pub traffic: SyncTraffic,
    /// Window length, seconds.
    pub window: f64,
}

impl E11Point {
    /// Measured sync bytes per round per device (both directions).
    pub fn bytes_per_round_per_device(&self) -> f64 {
        self.traffic.bytes() as f64 / (self.rounds.max(1) * u64::from(self.devices)) as f64
    }
    /// The formula's bytes per round per device.
    pub fn formula_per_round_per_device(&self) -> f64 {
        self.traffic.formula_bytes as f64 / (self.rounds.max(1) * u64::from(self.devices)) as f64
    }
    /// Sync bandwidth, all devices, bits per second.
    pub fn bandwidth_bps(&self) -> f64 {
        self.traffic.bytes() as f64 * 8.0 / self.window
    }
}

/// Runs one point: `entries` FM entries over `devices` devices with
/// round period `t_c`; flows drawn from `seed`.
pub fn point(
    scenario: Scenario,
    entries: u64,
    devices: u8,
    t_c: Nanos,
    seed: u64,
) -> anyhow::Result<E11Point> {
    let apps = scenario.hub_apps();
    let cap = (entries / apps.len() as u64) as u32;
    let with_caps: Vec<(AppSpec, u32)> = apps.iter().map(|(s, _)| (s.clone(), cap)).collect();
    let mut rig = Rig::new(&with_caps, devices, t_c, seed)?;
    let mut rng = DeviceRng::seed_from_u64(seed);
    // Set every flow up (its first packet misses on its primary), then
    // report them popular, one per millisecond, apps interleaved.
    let mut flows: Vec<(AppId, UnionKey)> = Vec::new();
    let perm = (rng.gen::<u32>() | 1, rng.gen::<u32>());
    for i in 0..cap {
        let frame = Flow::draw(i, perm, &mut rng).frame(scenario == Scenario::FrontEnd);
        let parsed = inca_apps::headers::parse(&frame)
            .map_err(|e| anyhow::anyhow!("generated frame: {e:?}"))?;
        for (spec, reason) in &apps {
            let uk = key_of(&spec.union_fields(), &parsed, &frame);
            rig.miss(spec.id, uk.clone(), frame.clone(), *reason);
            flows.push((spec.id, uk));
        }
    }
    for (app, uk) in flows {
        let t = rig.now + MS;
        rig.run_until(t);
        rig.report(app, uk, 1_000);
    }
    let t = rig.now + 2 * S;
    rig.run_until(t);
    let promoted: u64 = apps
        .iter()
        .map(|(spec, _)| u64::from(rig.hub.fm_occupancy(spec.id)))
        .sum();
    anyhow::ensure!(
        promoted == u64::from(cap) * apps.len() as u64,
        "{}: {promoted} of {} flows promoted (hub stats {:?})",
        scenario.name(),
        u64::from(cap) * apps.len() as u64,
        rig.hub.stats()
    );
    anyhow::ensure!(rig.encode_errors == 0, "the codec refused a sync message");
    // Measure over whole rounds: from a round boundary, four rounds (at
    // least 4 s).
    let rounds0 = rig.hub.sync().stats().rounds;
    let window = (4 * t_c).max(4 * S);
    rig.take_traffic();
    let t = rig.now + window;
    rig.run_until(t);
    let rounds = rig.hub.sync().stats().rounds - rounds0;
    Ok(E11Point {
        scenario: scenario.name(),
        entries,
        devices,
        t_c: t_c as f64 / 1e9,
        promoted,
        overhead: rig.hub.overhead(),
        rounds,
        traffic: rig.take_traffic(),
        window: window as f64 / 1e9,
    })
}

/// The sweeps: entries (at 4 devices, 1 s), devices (at the top entries,
/// 1 s), `T_c` (top entries, 4 devices).
#[derive(Clone, Debug)]
pub struct Sweeps {
    /// FM entries.
    pub entries: Vec<u64>,
    /// Devices.
    pub devices: Vec<u8>,
    /// `T_c`.
    pub t_c: Vec<Nanos>,
}

impl Sweeps {
    /// The full sweeps.
    pub fn full() -> Sweeps {
        Sweeps {
            entries: vec![1_280, 2_560, 5_120, FM_ENTRIES],
            devices: vec![1, 2, 4, 8],
            t_c: vec![250 * MS, 500 * MS, S, 2 * S],
        }
    }

    /// A quick run (the test).
    pub fn quick() -> Sweeps {
        Sweeps {
            entries: vec![1_024, 2_048],
            devices: vec![1, 2, 4],
            t_c: vec![500 * MS, S],
        }
    }
}

/// Runs every sweep for both scenarios (shared points run once).
pub fn run(sw: &Sweeps, seed: u64) -> anyhow::Result<Vec<E11Point>> {
    let top = sw.entries.iter().copied().max().unwrap_or(FM_ENTRIES);
    let mut keys = Vec::new();
    for &e in &sw.entries {
        keys.push((e, 4u8, S));
    }
    for &d in &sw.devices {
        keys.push((top, d, S));
    }
    for &t in &sw.t_c {
        keys.push((top, 4, t));
    }
    keys.sort();
    keys.dedup();
    let mut out = Vec::new();
    for s in Scenario::ALL {
        for &(e, d, t) in &keys {
            out.push(point(s, e, d, t, seed)?);
        }
    }
    Ok(out)
}

/// Switch resources the runtime takes at `fm` entries.
#[derive(Clone, Debug, Serialize)]
pub struct SwitchShare {
    /// The scenario.
    pub scenario: &'static str,
    /// FM entries.
    pub fm: u64,
    /// Per resource: (name, runtime's use, FM tables' and counters' use,
    /// switch total).
    pub resources: Vec<(&'static str, u64, u64, u64)>,
}

/// FM sizes whose switch share E11 places: the sweep's, the thesis's
/// 10,240, and two and four times that.
pub fn switch_sizes(sw: &Sweeps) -> Vec<u64> {
    let mut v = sw.entries.clone();
    v.extend([FM_ENTRIES, 2 * FM_ENTRIES, 4 * FM_ENTRIES]);
    v.sort();
    v.dedup();
    v
}

/// The resources E11 reports (§5.10).
pub const RESOURCES: [Resource; 5] = [
    Resource::SramBlocks,
    Resource::HashBits,
    Resource::MapRamBlocks,
    Resource::ExactXbarBytes,
    Resource::StatefulAlus,
];

/// Places the scenario's switch program with `fm` entries on `tofino`.
pub fn switch_share(scenario: Scenario, fm: u64) -> anyhow::Result<SwitchShare> {
    let apps = format!("apps={}", scenario.switch_apps());
    let fm_s = format!("fm={fm}");
    let p = Params::parse([apps.as_str(), fm_s.as_str()])?;
    let mut sw = crate::programs::switch_from_params(&p)?;
    let placed = check(&Profile::tofino(), &mut sw)?;
    let mut runtime: BTreeMap<Resource, u64> = BTreeMap::new();
    let mut fm_use: BTreeMap<Resource, u64> = BTreeMap::new();
    for o in placed.objects.iter().filter(|o| o.name.starts_with("exo/")) {
        for (_, v) in &o.stage_use {
            for r in RESOURCES {
                *runtime.entry(r).or_default() += v[r];
                if o.name.starts_with("exo/fm_") {
                    *fm_use.entry(r).or_default() += v[r];
                }
            }
        }
    }
    Ok(SwitchShare {
        scenario: scenario.name(),
        fm,
        resources: RESOURCES
            .iter()
            .map(|&r| {
                (
                    r.name(),
                    runtime.get(&r).copied().unwrap_or(0),
                    fm_use.get(&r).copied().unwrap_or(0),
                    placed.available[r],
                )
            })
            .collect(),
    })
}

/// The points' CSV.
pub fn csv(points: &[E11Point]) -> String {
    let mut s = String::from(
        "scenario,entries,devices,t_c_s,promoted,flow_dir_bytes,entry_dir_bytes,device_map_bytes,h_bytes,s_cp_bytes,hub_total_bytes,shared_entries,holder_copies,rounds,sync_req_bytes,sync_resp_bytes,sync_bytes_per_round_per_device,formula_bytes_per_round_per_device,sync_bandwidth_bps\n",
    );
    for p in points {
        let o = &p.overhead;
        let shared: u64 = o.objects.iter().map(|x| x.shared).sum();
        let copies: u64 = o.objects.iter().map(|x| x.holder_copies).sum();
        s += &format!(
            "{},{},{},{},{},{},{},{},{},{},{},{shared},{copies},{},{},{},{:.1},{:.1},{:.0}\n",
            p.scenario,
            p.entries,
            p.devices,
            p.t_c,
            p.promoted,
            o.flow_bytes(),
            o.entry_bytes(),
            o.device_map_bytes(),
            o.h_bytes(),
            o.s_cp_bytes(),
            o.total(),
            p.rounds,
            p.traffic.req_bytes,
            p.traffic.resp_bytes,
            p.bytes_per_round_per_device(),
            p.formula_per_round_per_device(),
            p.bandwidth_bps()
        );
    }
    s
}

/// Per app and per object, one point's hub memory.
pub fn objects_csv(points: &[&E11Point], names: &dyn Fn(&str, u8, u16) -> String) -> String {
    let mut s = String::from(
        "scenario,entries,devices,app,object,register,entries_in_dir,entry_dir_bytes,device_map_bytes,shared,h_bytes,s_cp_bytes\n",
    );
    for p in points {
        for a in &p.overhead.apps {
            s += &format!(
                "{},{},{},{},flow_directory,false,{},{},,,,\n",
                p.scenario,
                p.entries,
                p.devices,
                names(p.scenario, a.app, 0),
                a.flows,
                a.flow_bytes
            );
        }
        for o in &p.overhead.objects {
            s += &format!(
                "{},{},{},{},{},{},{},{},{},{},{},{}\n",
                p.scenario,
                p.entries,
                p.devices,
                names(p.scenario, o.app, 0),
                names(p.scenario, o.app, o.obj),
                o.register,
                o.entries,
                o.entry_bytes,
                o.device_map_bytes,
                o.shared,
                o.h_bytes,
                o.s_cp_bytes
            );
        }
    }
    s
}

/// The name of app `app` (object `obj`, or the app itself for 0) of a
/// scenario, for reports.
pub fn name_of(scenario: &str, app: u8, obj: u16) -> String {
    let s = match scenario {
        "front-end" => Scenario::FrontEnd,
        _ => Scenario::Leaf,
    };
    let specs = s.hub_apps();
    let Some((a, _)) = specs.iter().find(|a| a.0.id.0 == app) else {
        return format!("app{app}");
    };
    if obj == 0 {
        return a.name.clone();
    }
    a.objects
        .iter()
        .find(|o| o.id.0 == obj)
        .map_or_else(|| format!("obj{obj}"), |o| o.name.clone())
}

/// The switch shares' CSV.
pub fn switch_csv(shares: &[SwitchShare]) -> String {
    let mut s =
        String::from("scenario,fm,resource,runtime_used,fm_used,switch_total,runtime_pct\n");
    for sh in shares {
        for (name, used, fm, total) in &sh.resources {
            s += &format!(
                "{},{},{name},{used},{fm},{total},{:.2}\n",
                sh.scenario,
                sh.fm,
                100.0 * *used as f64 / (*total).max(1) as f64
            );
        }
    }
    s
}
