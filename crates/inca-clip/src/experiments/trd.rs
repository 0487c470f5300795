//! E8, the TRD check (spec §8.2, §7.2, §6 property 14): TCP connections —
//! in VXLAN (`config = "vxlan"`, VNIs 10 and 11 sharing inner 5-tuples
//! pairwise) or plain (`config = "plain"`) — run through the switch, CLIP
//! servers and the controller on the switch CPU, with injected
//! retransmissions and reordering, and every connection handed over from
//! the slow path (server-judged) to the fast path (switch-judged) when its
//! CONN_NEW is installed. Nothing stands in for the controller: the
//! servers' indices come from POOL_ASSIGN, `conn_idx` entries from
//! CONN_NEW, deletes from CONN_RELEASE (T_release after FIN), and a
//! wave's indices are reused by the next wave only after the delete acks.
//!
//! Workload per connection (seeded; [our choice], the spec gives none):
//! a SYN (15 % of connections start mid-stream, without one), 170-250
//! segments 150-450 µs apart (10 % pure ACKs, else 1-1,399 bytes), a FIN.
//! Each segment that occupies sequence space (data, SYN, FIN) is resent
//! with probability `retx_pct` %, 0.3-3 ms after the original (TCP resends
//! after an RTO or duplicate ACKs, never within the slow path's
//! microseconds). With probability `reorder_pct` % a pair of adjacent
//! data segments 35 ms or more into the stream (after the handover) is
//! swapped, the earlier one 5 µs late: the max-end rule reports the late
//! one, by design, so each swap is one expected report.
//!
//! Figures (under `result`), summed over connections and read before any
//! index is released: `connections`, `injected_retx`, `reordered`,
//! `expected` (their sum), `reported_retx` (register `retx_cnt[idx]` plus
//! the server's software-only count per connection), `false_positives`
//! (reports beyond a connection's expected, summed), `in_register` and
//! `software_reports` (the reports split by where they were counted: the
//! connection's `retx_cnt` register, or a server alone), `missed` (expected
//! beyond reported), `handovers` (connections with data segments both
//! before and after their CONN_NEW's install), `no_handover` (indexed
//! connections without one: an install missing or too late), `software_only`
//! (connections without an index: the slice exhausted), `software_judged`
//! (retransmissions only a server reported), `conn_new`, `installed`,
//! `released`, `indices_reused`, `index_violations` (observed `conn_idx`
//! entries whose index the owning server did not hold for that connection;
//! checked every `check_us`), `packets`, `fast`, `flight`.
//!
//! Parameters: `config`, `conns` (connections per wave, 64), `waves` (2),
//! `servers` (2), `slice` (indices per server, 0 = R split evenly by the
//! controller), `r` (R, 4,096), `retx_pct` (2), `reorder_pct` (10),
//! `check_us` (100), `mutation` (`none`; `no_conn_install`,
//! `release_without_delete`: the controller's deliberate bugs).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use inca_apps::l2l3::{Entry as L3Entry, NextHop, L2L3};
use inca_apps::params::Params;
use inca_server::{MultiCoreServer, PortMacs, ServerConfig};
use inca_sim::metrics::NodeReport;
use inca_switch::device::Nanos;
use inca_switch::fabric::{Fabric, NodeIx, Wire};
use inca_switch::{MatchSpec, Profile, Switch};
use inca_system::{BuiltinExperiment, ExperimentRun};
use inca_wire::{build_tcp_frame, build_udp_frame, Endpoints, TcpFlags, TcpRepr};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::rig::counters;
use super::{number, param_err};
use crate::apps::trd::{ConnInfo, TrdHandler, TrdSwitch, T_RELEASE_NS};
use crate::flow::FlowKey;
use crate::server::{ClipServer, RuntimeConfig};
use crate::switch::controller::{Conns, ControllerConfig, Mutation};
use crate::switch::scalability::ScaleSizes;
use crate::switch::{ClipSwitch, Driver, DriverConfig, ServerLink};

/// The experiment's name.
pub const NAME: &str = "clip-trd";
const PARAMS: &[&str] = &[
    "config",
    "conns",
    "waves",
    "servers",
    "slice",
    "r",
    "retx_pct",
    "reorder_pct",
    "check_us",
    "mutation",
];

/// A TRD server node.
pub type Server = MultiCoreServer<ClipServer<TrdHandler>>;
/// The TRD switch node.
pub type TrdSw = Switch<ClipSwitch<TrdSwitch>>;

const US: Nanos = 1_000;
const MS: Nanos = 1_000_000;
/// Where traffic enters and leaves the switch; servers from port 2 on.
const NET_IN: u16 = 0;
const NET_OUT: u16 = 1;
const SRV_PORT: u16 = 2;
/// A wave's connections start within 5 ms of its start; waves are
/// T_release + 300 ms apart, so the next reuses the previous' indices.
const WAVE_GAP: Nanos = T_RELEASE_NS + 300 * MS;
/// A wave is read this long after its start (every stream is over, no
/// index released yet).
const READ_AFTER: Nanos = 200 * MS;

const SYN: u8 = 0x02;
const FIN: u8 = 0x01;
const ACK: u8 = 0x10;
const PSH: u8 = 0x08;

/// E8's set-up.
#[derive(Debug, Clone)]
pub struct Setup {
    /// VXLAN (else plain TCP).
    pub vxlan: bool,
    /// Connections per wave.
    pub conns: usize,
    /// Waves.
    pub waves: usize,
    /// CLIP servers (ids 1..).
    pub servers: u8,
    /// Fixed slices `(id, lo, hi)` (empty: the controller splits R).
    pub slices: Vec<(u8, u32, u32)>,
    /// R.
    pub r: u32,
    /// Probability a sequence-occupying segment is resent.
    pub retx: f64,
    /// Probability of a swapped pair per connection (up to three tries).
    pub reorder: f64,
    /// The controller's deliberate bug, if any.
    pub mutation: Mutation,
    /// T_exp (switch idle aging of `conn_idx`, server flow expiry; 10 s).
    pub t_exp_ns: Nanos,
    /// The seed.
    pub seed: u64,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            vxlan: true,
            conns: 64,
            waves: 2,
            servers: 2,
            slices: Vec::new(),
            r: 4096,
            retx: 0.02,
            reorder: 0.1,
            mutation: Mutation::None,
            t_exp_ns: 10_000 * MS,
            seed: 1,
        }
    }
}

/// One connection of the workload.
#[derive(Debug, Clone)]
pub struct Conn {
    /// Its key.
    pub flow: FlowKey,
    /// (time, TCP flags, seq, payload length), in time order.
    pub sends: Vec<(Nanos, u8, u32, usize)>,
    /// Retransmissions injected.
    pub retx: u64,
    /// Pairs swapped.
    pub reordered: u64,
    /// When its FIN leaves.
    pub fin_at: Nanos,
}

impl Conn {
    /// Reports expected.
    pub fn expected(&self) -> u64 {
        self.retx + self.reordered
    }
}

/// A TCP segment of `flow` (in VXLAN if its context is a VNI).
pub fn frame(flow: &FlowKey, flags: u8, seq: u32, len: usize) -> Vec<u8> {
    let ep = Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        Ipv4Addr::from(flow.src()),
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::from(flow.dst()),
    );
    let payload = vec![0x5A; len];
    let t = TcpRepr {
        src_port: flow.sport(),
        dst_port: flow.dport(),
        seq,
        ack: 1,
        flags: TcpFlags(flags),
        window: 1024,
        urgent: 0,
        options: &[],
        payload: &payload,
    };
    let inner = build_tcp_frame(&ep, &t).expect("a TCP frame");
    if flow.ctx() == 0 {
        return inner;
    }
    let v = flow.ctx().to_be_bytes();
    let mut vx = vec![0x08, 0, 0, 0, v[1], v[2], v[3], 0];
    vx.extend_from_slice(&inner);
    let outer = Endpoints::new(
        [6, 0, 0, 0, 0, 1],
        Ipv4Addr::new(192, 0, 2, 1),
        [6, 0, 0, 0, 0, 2],
        Ipv4Addr::new(192, 0, 2, 2),
    );
    build_udp_frame(&outer, 49_152 + flow.sport() % 1000, 4789, &vx, true).expect("a UDP frame")
}

/// Connection number `n` (over all waves) starting after `start`.
fn conn(rng: &mut ChaCha8Rng, s: &Setup, n: usize, start: Nanos) -> Conn {
    let flow = if s.vxlan {
        let vni = 10 + (n % 2) as u32;
        FlowKey::new(
            vni,
            6,
            [10, 1, 0, 1],
            [10, 2, 0, 1],
            20_000 + (n / 2) as u16,
            443,
        )
    } else {
        FlowKey::new(
            0,
            6,
            [10, 1, (n / 200 % 256) as u8, (n % 200) as u8],
            [10, 2, 0, 1],
            20_000 + (n % 40_000) as u16,
            80,
        )
    };
    let mut t = start + rng.gen_range(0..5 * MS);
    let isn: u32 = rng.gen();
    let mut sends = Vec::new();
    let mut seq = isn;
    if !rng.gen_bool(0.15) {
        sends.push((t, SYN, isn, 0));
        seq = isn.wrapping_add(1);
    }
    for _ in 0..rng.gen_range(170..250) {
        t += rng.gen_range(150 * US..450 * US);
        let len = if rng.gen_bool(0.1) {
            0
        } else {
            rng.gen_range(1..1400)
        };
        sends.push((t, ACK | PSH, seq, len));
        seq = seq.wrapping_add(len as u32);
    }
    t += 300 * US;
    let fin_at = t;
    sends.push((t, FIN | ACK, seq, 0));
    let mut retx = 0;
    let originals = sends.len();
    for j in 0..originals {
        let (at, flags, sq, len) = sends[j];
        if (len > 0 || flags & (SYN | FIN) != 0) && rng.gen_bool(s.retx) {
            sends.push((at + rng.gen_range(300 * US..3 * MS), flags, sq, len));
            retx += 1;
        }
    }
    let mut reordered = 0;
    if rng.gen_bool(s.reorder) {
        let from = sends[0].0 + 35 * MS;
        let pairs: Vec<usize> = (1..originals - 2)
            .filter(|&j| sends[j].0 >= from && sends[j].3 > 0 && sends[j + 1].3 > 0)
            .collect();
        let mut used: Vec<usize> = Vec::new();
        for _ in 0..rng.gen_range(1..=3) {
            let Some(&j) = pairs.get(rng.gen_range(0..pairs.len().max(1))) else {
                break;
            };
            // Not next to another swap, nor to a resent copy's original.
            if used.iter().any(|&u| u.abs_diff(j) < 2) {
                continue;
            }
            used.push(j);
            let tj = sends[j].0;
            sends[j + 1].0 = tj;
            sends[j].0 = tj + 5 * US;
            reordered += 1;
        }
    }
    sends.sort_by_key(|x| x.0);
    Conn {
        flow,
        sends,
        retx,
        reordered,
        fin_at,
    }
}

/// The workload: `waves` waves of `conns` connections.
pub fn workload(s: &Setup) -> Vec<Vec<Conn>> {
    let mut rng = ChaCha8Rng::seed_from_u64(s.seed ^ 0xE8);
    (0..s.waves)
        .map(|w| {
            let start = MS + w as Nanos * WAVE_GAP;
            (0..s.conns)
                .map(|i| conn(&mut rng, s, w * s.conns + i, start))
                .collect()
        })
        .collect()
}

fn l3() -> L2L3 {
    let mut l = L2L3::new(64, 64, 16);
    l.entries = vec![
        L3Entry::NextHop {
            id: 1,
            hop: NextHop {
                port: NET_OUT,
                dst_mac: [0xEE; 6],
                src_mac: [0x5A; 6],
            },
        },
        L3Entry::Route {
            prefix: [0, 0, 0, 0],
            len: 0,
            nexthop: 1,
        },
    ];
    l
}

/// The switch (its controller on), the servers and the fabric.
pub struct Rig {
    /// The fabric.
    pub fab: Fabric,
    /// The switch.
    pub sw: NodeIx,
    /// The servers, by id − 1.
    pub servers: Vec<NodeIx>,
}

impl Rig {
    /// Builds and starts it.
    pub fn new(s: &Setup) -> Result<Rig, String> {
        let links: Vec<ServerLink> = (1..=s.servers)
            .map(|id| ServerLink {
                id,
                port: SRV_PORT + u16::from(id) - 1,
            })
            .collect();
        let cfg = DriverConfig {
            servers: links.clone(),
            initial_group: links.iter().map(|l| l.id).collect(),
            t_exp_ns: s.t_exp_ns,
        };
        cfg.check()?;
        let ctl = ControllerConfig {
            conns: Conns {
                r: s.r,
                slices: s.slices.clone(),
                ..Conns::default()
            },
            mutation: s.mutation,
            ..ControllerConfig::default()
        };
        let prog = ClipSwitch::with_controller(
            TrdSwitch::new(s.r),
            l3(),
            ScaleSizes::default(),
            Driver::new(cfg),
            Some(ctl),
        );
        let mut fab: Fabric = Fabric::new(s.seed);
        let sw = fab.add_any(Switch::new(Profile::tofino(), prog).map_err(|e| e.to_string())?);
        let mut servers = Vec::new();
        for l in &links {
            let nf = ClipServer::new(
                RuntimeConfig {
                    server_id: l.id,
                    t_exp_ns: s.t_exp_ns,
                    ..RuntimeConfig::default()
                },
                2,
                TrdHandler::default(),
            )
            .map_err(|e| e.to_string())?;
            let macs = PortMacs {
                mac: [2, 0, 0, 0, 7, l.id],
                neighbour: [2, 0, 0, 0, 8, l.id],
            };
            let sc = ServerConfig {
                cores: 2,
                ..ServerConfig::default()
            };
            let srv = MultiCoreServer::new(sc, vec![macs], nf).map_err(|e| e.to_string())?;
            let ix = fab.add_any(srv);
            fab.connect((sw, l.port), (ix, 0), Wire::with_latency(1_000))
                .map_err(|e| e.to_string())?;
            servers.push(ix);
        }
        fab.tap(sw, NET_OUT).map_err(|e| e.to_string())?;
        fab.start_all();
        Ok(Rig { fab, sw, servers })
    }

    /// The switch.
    pub fn switch(&self) -> &TrdSw {
        self.fab.get(self.sw).expect("the switch")
    }

    /// Server `i` (0-based).
    pub fn server(&self, i: usize) -> &Server {
        self.fab.get(self.servers[i]).expect("a server")
    }

    /// The `conn_idx` entries in the switch: (flow, idx), by flow.
    pub fn conn_idx(&self) -> Vec<(FlowKey, u16)> {
        let s = self.switch();
        let Some(h) = s.program().app().conn_table() else {
            return Vec::new();
        };
        let Some(t) = s.objects().table(h) else {
            return Vec::new();
        };
        let mut v: Vec<(FlowKey, u16)> = t
            .entries()
            .filter_map(|(m, d)| match m {
                MatchSpec::Exact(k) => {
                    let k: [u8; 16] = k.as_ref().try_into().ok()?;
                    Some((FlowKey(k), u16::from_be_bytes(*d)))
                }
                _ => None,
            })
            .collect();
        v.sort_unstable();
        v
    }

    /// Every index the servers hold: idx → (server, flow); a second
    /// holder of an index is a violation (slices are disjoint).
    pub fn held(&self) -> (BTreeMap<u16, (usize, FlowKey)>, Vec<String>) {
        let mut m = BTreeMap::new();
        let mut bad = Vec::new();
        for i in 0..self.servers.len() {
            for (idx, f) in self.server(i).nf().runtime().handler().indices() {
                if let Some((j, g)) = m.insert(idx, (i, f)) {
                    bad.push(format!("index {idx} held by {g} on {j} and {f} on {i}"));
                }
            }
        }
        (m, bad)
    }

    /// The index invariant: each `conn_idx` entry's index is held, by the
    /// connection the entry names, and no two entries share one. The
    /// violations found.
    pub fn check_indices(&self) -> Vec<String> {
        let (held, mut bad) = self.held();
        let mut seen = BTreeSet::new();
        for (f, idx) in self.conn_idx() {
            if !seen.insert(idx) {
                bad.push(format!("index {idx} in two conn_idx entries"));
            }
            match held.get(&idx) {
                Some((_, g)) if *g == f => {}
                Some((_, g)) => bad.push(format!("conn_idx[{f}] = {idx}, held by {g}")),
                None => bad.push(format!("conn_idx[{f}] = {idx}, held by none")),
            }
        }
        bad
    }

    /// What is reported for `flow`: its connection on the server that
    /// tracks it and the count (register plus software-only).
    pub fn reported(&self, flow: &FlowKey) -> Option<(ConnInfo, u64)> {
        let s = self.switch();
        let info = (0..self.servers.len())
            .find_map(|i| self.server(i).nf().runtime().handler().conn(flow))?;
        let mut n = info.software;
        if let Some(idx) = info.idx {
            let (_, retx) = s.program().app().registers()?;
            n += u64::from(s.objects().register_peek(retx, u64::from(idx)).ok()?);
        }
        Some((info, n))
    }
}

/// A wave read before its indices are released.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WaveResult {
    /// Connections.
    pub connections: u64,
    /// Retransmissions injected.
    pub injected_retx: u64,
    /// Pairs swapped.
    pub reordered: u64,
    /// Reports (register + software).
    pub reported: u64,
    /// Of those, counted in the connections' `retx_cnt` registers (by
    /// the switch, or by a response of the server).
    pub in_register: u64,
    /// Of those, by a server alone (no index).
    pub software: u64,
    /// Reports beyond a connection's expected.
    pub false_positives: u64,
    /// Expected beyond reported.
    pub missed: u64,
    /// Connections with data before and after their install.
    pub handovers: u64,
    /// Connections with an index.
    pub indexed: u64,
    /// Connections without one.
    pub software_only: u64,
    /// Connections the servers do not track (never expected).
    pub untracked: u64,
    /// Per connection (flow, expected, reported), those that differ.
    pub wrong: Vec<(FlowKey, u64, u64)>,
}

fn read_wave(rig: &Rig, conns: &[Conn]) -> WaveResult {
    let installed: BTreeMap<FlowKey, Nanos> = rig
        .switch()
        .program()
        .controller
        .as_ref()
        .map(|c| {
            c.conns_live()
                .into_iter()
                .map(|(f, _, _, at)| (f, at))
                .collect()
        })
        .unwrap_or_default();
    let mut w = WaveResult::default();
    for c in conns {
        w.connections += 1;
        w.injected_retx += c.retx;
        w.reordered += c.reordered;
        let exp = c.expected();
        let Some((info, got)) = rig.reported(&c.flow) else {
            w.untracked += 1;
            w.missed += exp;
            w.wrong.push((c.flow, exp, 0));
            continue;
        };
        w.reported += got;
        w.software += info.software;
        w.in_register += got - info.software;
        w.false_positives += got.saturating_sub(exp);
        w.missed += exp.saturating_sub(got);
        if got != exp {
            w.wrong.push((c.flow, exp, got));
        }
        if info.idx.is_some() {
            w.indexed += 1;
        } else {
            w.software_only += 1;
        }
        if let Some(at) = installed.get(&c.flow) {
            let data = |before: bool| c.sends.iter().any(|s| s.3 > 0 && (s.0 < *at) == before);
            if data(true) && data(false) {
                w.handovers += 1;
            }
        }
    }
    w
}

/// What a run observed.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Each wave, read before its indices were released.
    pub waves: Vec<WaveResult>,
    /// Distinct index-invariant violations seen.
    pub violations: BTreeSet<String>,
    /// Indices a later connection held after an earlier one.
    pub reused: u64,
    /// Packets injected.
    pub packets: u64,
    /// Frames the switch delivered to the network.
    pub delivered: u64,
    /// When it ended.
    pub end: Nanos,
}

/// Runs `s`'s workload through `rig`, checking the index invariant every
/// `check` ns; each wave is read `READ_AFTER` its start; the run ends when
/// the last wave's indices are released.
pub fn drive(rig: &mut Rig, s: &Setup, check: Nanos) -> Outcome {
    let waves = workload(s);
    let mut schedule: Vec<(Nanos, FlowKey, u8, u32, usize)> = waves
        .iter()
        .flatten()
        .flat_map(|c| c.sends.iter().map(|&(t, fl, sq, l)| (t, c.flow, fl, sq, l)))
        .collect();
    schedule.sort_by_key(|x| x.0);
    let mut out = Outcome {
        packets: schedule.len() as u64,
        ..Outcome::default()
    };
    let reads: Vec<Nanos> = (0..waves.len())
        .map(|w| MS + w as Nanos * WAVE_GAP + READ_AFTER)
        .collect();
    let end = MS + waves.len() as Nanos * WAVE_GAP;
    let mut next = 0;
    let mut next_read = 0;
    let mut holder: BTreeMap<u16, FlowKey> = BTreeMap::new();
    let check = check.max(US);
    let mut t = 0;
    while t < end {
        t += check;
        while let Some(&(at, flow, fl, sq, l)) = schedule.get(next).filter(|x| x.0 < t) {
            rig.fab.inject(at, rig.sw, NET_IN, frame(&flow, fl, sq, l));
            next += 1;
        }
        rig.fab.run_until(t);
        for v in rig.check_indices() {
            out.violations.insert(v);
        }
        for (idx, (_, f)) in rig.held().0 {
            if holder.insert(idx, f).is_some_and(|g| g != f) {
                out.reused += 1;
            }
        }
        if next_read < reads.len() && t >= reads[next_read] {
            out.waves.push(read_wave(rig, &waves[next_read]));
            next_read += 1;
        }
        out.delivered += rig.fab.take_tapped().len() as u64;
    }
    out.end = t;
    out
}

/// E8, running `run`.
pub fn experiment(run: fn(&Params, u64) -> Result<ExperimentRun, String>) -> BuiltinExperiment {
    BuiltinExperiment {
        name: NAME,
        about: "CLIP §8.2 E8: TRD over switch, servers and controller; TCP connections (config=vxlan or plain) with injected retransmissions (retx_pct), reordering (reorder_pct) and the slow→fast handover, indices assigned by POOL_ASSIGN, installed on CONN_NEW and reused after CONN_RELEASE's delete; reported vs injected retransmissions, false positives, handovers (property 14)",
        params: PARAMS,
        run,
    }
}

/// The set-up `p` asks for, with `seed`.
pub fn setup(p: &Params, seed: u64) -> Result<Setup, String> {
    p.check_known(NAME, PARAMS).map_err(param_err)?;
    let vxlan = match p.text("config").unwrap_or("vxlan") {
        "vxlan" => true,
        "plain" => false,
        other => return Err(format!("config: {other:?} is not vxlan or plain")),
    };
    let mutation = match p.text("mutation").unwrap_or("none") {
        "none" => Mutation::None,
        "no_conn_install" => Mutation::NoConnInstall,
        "release_without_delete" => Mutation::ReleaseWithoutDelete,
        other => {
            return Err(format!(
                "mutation: {other:?} is not none, no_conn_install or release_without_delete"
            ))
        }
    };
    let servers = p.number("servers", 2, 1, 8).map_err(param_err)? as u8;
    let r = p.number("r", 4096, 16, 65_536).map_err(param_err)? as u32;
    let slice = p.number("slice", 0, 0, 65_535).map_err(param_err)? as u32;
    let slices = if slice == 0 {
        Vec::new()
    } else {
        (0..servers)
            .map(|i| (i + 1, u32::from(i) * slice, (u32::from(i) + 1) * slice - 1))
            .collect()
    };
    if slices.iter().any(|(_, _, hi)| *hi >= r) {
        return Err(format!(
            "slice: {servers} slices of {slice} do not fit in r = {r}"
        ));
    }
    Ok(Setup {
        vxlan,
        conns: p.number("conns", 64, 1, 20_000).map_err(param_err)? as usize,
        waves: p.number("waves", 2, 1, 10).map_err(param_err)? as usize,
        servers,
        slices,
        r,
        retx: number(p, "retx_pct", 2.0, 0.0, 100.0)? / 100.0,
        reorder: number(p, "reorder_pct", 10.0, 0.0, 100.0)? / 100.0,
        mutation,
        t_exp_ns: 10_000 * MS,
        seed,
    })
}

/// One run.
pub fn run(p: &Params, seed: u64) -> Result<ExperimentRun, String> {
    let s = setup(p, seed)?;
    let check = p.number("check_us", 100, 1, 100_000).map_err(param_err)? * US;
    let mut rig = Rig::new(&s)?;
    let o = drive(&mut rig, &s, check);
    let sum = |f: fn(&WaveResult) -> u64| o.waves.iter().map(f).sum::<u64>();
    let sw = rig.switch();
    let ctl = sw
        .program()
        .controller
        .as_ref()
        .map(|c| c.conn_stats())
        .unwrap_or_default();
    let st = sw.program().stats;
    let mut software_judged = 0;
    let mut conn_new = 0;
    let mut released = 0;
    for i in 0..rig.servers.len() {
        let srv = rig.server(i).nf();
        software_judged += srv.runtime().handler().stats().retx_software;
        conn_new += srv.stats().conn_new;
        released += srv.stats().conn_released;
    }
    let (injected, reordered) = (sum(|w| w.injected_retx), sum(|w| w.reordered));
    let result = counters(&[
        ("connections", sum(|w| w.connections)),
        ("injected_retx", injected),
        ("reordered", reordered),
        ("expected", injected + reordered),
        ("reported_retx", sum(|w| w.reported)),
        ("in_register", sum(|w| w.in_register)),
        ("software_reports", sum(|w| w.software)),
        ("false_positives", sum(|w| w.false_positives)),
        ("missed", sum(|w| w.missed)),
        ("handovers", sum(|w| w.handovers)),
        (
            "no_handover",
            sum(|w| w.indexed.saturating_sub(w.handovers)),
        ),
        ("indexed", sum(|w| w.indexed)),
        ("software_only", sum(|w| w.software_only)),
        ("untracked", sum(|w| w.untracked)),
        ("software_judged", software_judged),
        ("conn_new", conn_new),
        ("installed", ctl.installed),
        ("conn_refused", ctl.refused),
        ("deleted", ctl.deleted),
        ("released", released),
        ("indices_reused", o.reused),
        ("index_violations", o.violations.len() as u64),
        ("packets", o.packets),
        ("delivered", o.delivered),
        ("fast", st.fast),
        ("flight", st.flight),
    ]);
    let line = format!(
        "{} {} connections: {} retransmissions injected + {} reordered, {} reported ({} false positives, {} missed), {} handovers, {} index violations",
        if s.vxlan { "VXLAN" } else { "plain" },
        sum(|w| w.connections),
        injected,
        reordered,
        sum(|w| w.reported),
        sum(|w| w.false_positives),
        sum(|w| w.missed),
        sum(|w| w.handovers),
        o.violations.len(),
    );
    let mut nodes: Vec<(String, &'static str, NodeReport)> = Vec::new();
    let mut sw_report = NodeReport::default();
    for (k, v) in inca_switch::Program::report(sw.program()).counters {
        sw_report.counters.insert(k.to_string(), v);
    }
    nodes.push(("switch".into(), "switch", sw_report));
    let mut run = ExperimentRun {
        duration: o.end,
        events: 0,
        nodes,
        links: Vec::new(),
        highlights: vec![line],
    }
    .with_result("result", result);
    run.highlights.extend(o.violations.iter().take(5).cloned());
    Ok(run)
}
