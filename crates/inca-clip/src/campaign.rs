//! The membership campaign (spec §6 properties 4 and 6, issue 19): one
//! switch with the controller, up to four servers, flows that start, stop
//! and go idle, and random membership changes — scale-out, scale-in,
//! re-transitions to the same group, back-to-back transitions — over
//! Bloom filters shrunk to force false positives. Judged per seed:
//!
//! - **Affinity** (property 4): for every flow and every server-state
//!   lifetime, all requests land on one server. A lifetime ends where the
//!   flow was idle long enough for its server to expire it; the workload
//!   keeps idle gaps clear of the expiry band, so no gap is ambiguous.
//! - **No halt** (property 6): every packet comes out of the switch (the
//!   NULL app answers every request), `no_server_drop` and `invalid_drop`
//!   stay 0, and no server saw a `ver_mismatch`.
//! - **Atomic flip** (property 12): no packet accessed `cur` (or any other
//!   object) twice in a pass; the switch model records every such access.
//!
//! Seeds whose run overflowed the pin cache or aborted a transition for
//! a full pin table are counted and not judged for affinity (the spec
//! excludes them).

use std::collections::BTreeMap;

use inca_apps::l2l3::{Entry as L3Entry, NextHop, L2L3};
use inca_server::{MultiCoreServer, PortMacs, ServerConfig};
use inca_switch::device::Nanos;
use inca_switch::fabric::{Fabric, Wire};
use inca_switch::{Profile, Switch};
use inca_verify::SeedResult;
use inca_wire::clip::shim;
use inca_wire::{build_udp_frame, Endpoints};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::apps::null::{NullHandler, NullSwitch};
use crate::flow::FlowKey;
use crate::server::{ClipServer, RuntimeConfig};
use crate::switch::controller::{ControllerConfig, Mutation};
use crate::switch::scalability::ScaleSizes;
use crate::switch::{ClipSwitch, Command, Driver, DriverConfig, ServerLink};

/// Server flow expiry in the campaign (short, so lifetimes end within a
/// run) [our choice].
pub const T_EXP: Nanos = 300_000_000;
/// Idle gaps are either below `T_EXP - GAP_MARGIN` or above `T_EXP +
/// EXPIRY_BAND`: the server expires a flow at its first sweep (every
/// 100 ms) after `T_EXP`.
const GAP_MARGIN: Nanos = 50_000_000;
const EXPIRY_BAND: Nanos = 400_000_000;
/// Where regular traffic leaves.
const NET_OUT: u16 = 1;
/// Where traffic enters.
const NET_IN: u16 = 0;

type Server = MultiCoreServer<ClipServer<NullHandler>>;
type Sw = Switch<ClipSwitch<NullSwitch>>;

/// What one seed did, for people and the judge.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Flows, packets injected and delivered.
    pub flows: usize,
    /// Packets injected.
    pub injected: u64,
    /// Packets out of the network port.
    pub delivered: u64,
    /// Transitions asked and completed.
    pub transitions: (usize, u64),
    /// Requests judged for affinity.
    pub requests: u64,
    /// Lifetimes judged.
    pub lifetimes: u64,
    /// Violations.
    pub violations: Vec<String>,
    /// Not judged for affinity (pin-cache overflow or a full pin table).
    pub excluded: bool,
    /// Bloom bits per way.
    pub bloom_bits: u32,
    /// Pins installed.
    pub pins: u64,
    /// Servers retired after draining.
    pub retired: u64,
    /// The failure injected: when, which server.
    pub failure: Option<(Nanos, u8)>,
    /// Requests selected through each path (pin table, pin cache, PREV,
    /// CUR).
    pub by_sel: [u64; 4],
}

fn l3() -> L2L3 {
    let mut l = L2L3::new(16, 16, 4);
    l.entries = vec![
        L3Entry::NextHop {
            id: 1,
            hop: NextHop {
                port: NET_OUT,
                dst_mac: [0x02, 0, 0, 0, 0, 0xEE],
                src_mac: [0x02, 0, 0, 0, 0, 0x5A],
            },
        },
        L3Entry::Route {
            prefix: [0; 4],
            len: 0,
            nexthop: 1,
        },
    ];
    l
}

fn packet(flow: u32) -> Vec<u8> {
    let ep = Endpoints::new(
        [2; 6],
        std::net::Ipv4Addr::new(10, 1, (flow >> 8) as u8, flow as u8),
        [4; 6],
        std::net::Ipv4Addr::new(192, 0, 2, 1),
    );
    build_udp_frame(&ep, 10_000 + (flow % 50_000) as u16, 53, b"clip", true).expect("fits")
}

/// A random non-empty subset of `1..=n`.
fn group(rng: &mut ChaCha8Rng, n: u8) -> Vec<u8> {
    loop {
        let g: Vec<u8> = (1..=n).filter(|_| rng.gen_bool(0.5)).collect();
        if !g.is_empty() {
            return g;
        }
    }
}

/// Runs one seed with `mutation` in the controller.
pub fn run(seed: u64, mutation: Mutation) -> Outcome {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n_servers: u8 = rng.gen_range(2..=4);
    let bloom_bits = 1u32 << rng.gen_range(6..=12);
    let servers: Vec<ServerLink> = (1..=n_servers)
        .map(|id| ServerLink {
            id,
            port: 1 + u16::from(id),
        })
        .collect();
    let first = group(&mut rng, n_servers);
    let dcfg = DriverConfig {
        servers: servers.clone(),
        initial_group: first,
        t_exp_ns: T_EXP,
    };
    let sizes = ScaleSizes {
        bloom_bits,
        ..ScaleSizes::default()
    };
    let ccfg = ControllerConfig {
        mutation,
        ..ControllerConfig::default()
    };
    let prog = ClipSwitch::with_controller(
        NullSwitch { flight: true },
        l3(),
        sizes,
        Driver::new(dcfg),
        Some(ccfg),
    );
    let mut fab: Fabric = Fabric::new(seed);
    let sw = fab.add_any(Switch::new(Profile::tofino(), prog).expect("the CLIP program fits"));
    let mut nodes = Vec::new();
    for s in &servers {
        let rt = RuntimeConfig {
            server_id: s.id,
            t_exp_ns: T_EXP,
            ..RuntimeConfig::default()
        };
        let nf = ClipServer::new(rt, 2, NullHandler::new()).expect("valid runtime");
        let macs = PortMacs {
            mac: [2, 0, 0, 0, 7, s.id],
            neighbour: [2, 0, 0, 0, 8, s.id],
        };
        let cfg = ServerConfig {
            cores: 2,
            ..ServerConfig::default()
        };
        let node = fab.add_any(MultiCoreServer::new(cfg, vec![macs], nf).expect("valid server"));
        fab.connect((sw, s.port), (node, 0), Wire::with_latency(1_000))
            .expect("fresh ports");
        fab.tap(sw, s.port).expect("a port");
        nodes.push(node);
    }
    fab.tap(sw, NET_OUT).expect("a port");
    fab.start_all();

    // The workload: flows with starts, bursts, idle gaps and stops.
    let start: Nanos = 10_000_000;
    let horizon: Nanos = 6_000_000_000;
    let flows: u32 = rng.gen_range(20..=80);
    let mut sends: Vec<(Nanos, u32)> = Vec::new();
    for f in 0..flows {
        let mut t = start + rng.gen_range(0..horizon / 2);
        let end = t + rng.gen_range(100_000_000..horizon);
        while t < end.min(start + horizon) {
            sends.push((t, f));
            t += if rng.gen_bool(0.03) {
                // An idle gap: clearly before or clearly after expiry.
                if rng.gen_bool(0.5) {
                    rng.gen_range(T_EXP / 2..T_EXP - GAP_MARGIN)
                } else {
                    rng.gen_range(T_EXP + EXPIRY_BAND..3 * T_EXP + EXPIRY_BAND)
                }
            } else {
                rng.gen_range(1_000_000..20_000_000)
            };
        }
    }
    sends.sort();
    // The membership script.
    let k = rng.gen_range(2..=6);
    let mut changes: Vec<(Nanos, Vec<u8>)> = Vec::new();
    let mut t = start + rng.gen_range(100_000_000..800_000_000);
    for _ in 0..k {
        changes.push((t, group(&mut rng, n_servers)));
        // Back to back now and then (queued behind the running one).
        t += if rng.gen_bool(0.25) {
            rng.gen_range(0..5_000_000)
        } else {
            rng.gen_range(200_000_000..1_500_000_000)
        };
    }
    // Now and then a server fails for good: its link goes down (its
    // heartbeats stop; the controller replaces it in place).
    let failure: Option<(Nanos, u8)> = rng.gen_bool(0.35).then(|| {
        (
            start + rng.gen_range(300_000_000..horizon),
            rng.gen_range(1..=n_servers),
        )
    });
    // The fabric runs up to each event's time as it is handed over, so
    // the events go in time order.
    enum Ev<'a> {
        Send(u32),
        Change(&'a Vec<u8>),
        Fail(u16),
    }
    let mut events: Vec<(Nanos, Ev)> = sends.iter().map(|(t, f)| (*t, Ev::Send(*f))).collect();
    events.extend(changes.iter().map(|(t, g)| (*t, Ev::Change(g))));
    if let Some((at, victim)) = failure {
        events.push((at, Ev::Fail(1 + u16::from(victim))));
    }
    events.sort_by_key(|e| e.0);
    for (at, ev) in events {
        match ev {
            Ev::Send(f) => fab.inject(at, sw, NET_IN, packet(f)),
            Ev::Change(g) => fab.control(at, sw, Command::Transition(g.clone()).message()),
            Ev::Fail(port) => fab.link(at, sw, port, false),
        }
    }
    let end = sends.last().map_or(start, |s| s.0).max(t) + 2_000_000_000;
    fab.run_until(end);

    // Judge.
    let mut o = Outcome {
        flows: flows as usize,
        injected: sends.len() as u64,
        transitions: (changes.len(), 0),
        bloom_bits,
        ..Outcome::default()
    };
    o.failure = failure;
    let mut lost_at_victim = 0u64;
    let mut by_flow: BTreeMap<FlowKey, Vec<(Nanos, u8)>> = BTreeMap::new();
    let mut all_reqs: Vec<(Nanos, u8, shim::Sel)> = Vec::new();
    let tapped = fab.take_tapped();
    for s in tapped {
        if s.port == NET_OUT {
            o.delivered += 1;
            continue;
        }
        let mut f = s.frame.clone();
        let Ok((repr, _)) = shim::pop(&mut f) else {
            continue; // CLIP-CTL to the server
        };
        let Ok(p) = inca_apps::headers::parse(&f) else {
            continue;
        };
        o.by_sel[usize::from((repr.sel as u8).min(3))] += 1;
        if failure.is_some_and(|(t, v)| repr.server_id == v && s.at >= t) {
            // Sent to the failed server: lost with its state.
            lost_at_victim += 1;
            continue;
        }
        by_flow
            .entry(FlowKey::of_parsed(&p, 0))
            .or_default()
            .push((s.at, repr.server_id));
        all_reqs.push((s.at, repr.server_id, repr.sel));
    }
    let sw_dev: &Sw = fab.get(sw).expect("the switch");
    let prog = sw_dev.program();
    let st = prog.stats;
    if std::env::var_os("CLIP_DEBUG").is_some() {
        eprintln!("switch {:?} driver {:?}", st, prog.driver.stats);
        if let Some(c) = &prog.controller {
            eprintln!("controller {:?}", c.counters());
        }
        for node in &nodes {
            let s: &Server = fab.get(*node).expect("a server");
            let nz: Vec<_> = s.counters().into_iter().filter(|(_, v)| *v != 0).collect();
            eprintln!("server {nz:?}");
        }
    }
    if let Some(c) = &prog.controller {
        let failed = failure.map(|f| f.1);
        drain_violations(c.history(), &all_reqs, failed, end, &mut o.violations);
        o.retired = c.stats.retired;
        o.transitions.1 = c.stats.transitions;
        o.pins = c.stats.pins;
        o.excluded = c.stats.pin_full > 0;
    }
    o.excluded |= st.pin_cache_overflow > 0;
    // Property 12 (atomic flip): the data-plane model refuses a second
    // access to an object in one pass and records it, so a packet that saw
    // two values of `cur` (or broke any other rule) shows here.
    if let Some(v) = sw_dev.violations().first() {
        let what = match &v.error {
            inca_switch::AccessError::DoubleAccess { object } if object == "cur" => "atomic flip",
            _ => "data plane",
        };
        o.violations.push(format!(
            "{what}: {} rule violations, the first at {} ns: {}",
            sw_dev.violations().len(),
            v.at,
            v.error
        ));
    }
    if st.no_server_drop != 0 || st.invalid_drop != 0 {
        o.violations.push(format!(
            "halt: no_server_drop {} invalid_drop {}",
            st.no_server_drop, st.invalid_drop
        ));
    }
    if o.delivered + lost_at_victim != o.injected {
        o.violations.push(format!(
            "halt: {} packets in, {} out, {} lost at the failed server",
            o.injected, o.delivered, lost_at_victim
        ));
    }
    for (i, node) in nodes.iter().enumerate() {
        let s: &Server = fab.get(*node).expect("a server");
        let m = s.nf().runtime().stats().ver_mismatch;
        if m != 0 && !o.excluded {
            o.violations
                .push(format!("server {}: ver_mismatch {m}", i + 1));
        }
    }
    if !o.excluded {
        for (flow, reqs) in &by_flow {
            let mut life_start = 0usize;
            for i in 0..reqs.len() {
                // A lifetime ends when the server expires the flow, or
                // when its server fails.
                let failed_before =
                    |j: usize| failure.is_some_and(|(t, v)| reqs[j].1 == v && reqs[i].0 >= t);
                let new_life =
                    i > 0 && (reqs[i].0 - reqs[i - 1].0 >= T_EXP || failed_before(life_start));
                if new_life {
                    life_start = i;
                    o.lifetimes += 1;
                }
                if i == 0 {
                    o.lifetimes += 1;
                }
                o.requests += 1;
                if reqs[i].1 != reqs[life_start].1 {
                    o.violations.push(format!(
                        "affinity: flow {flow} went to server {} at {} ns, to server {} at {} ns in the same lifetime",
                        reqs[life_start].1, reqs[life_start].0, reqs[i].1, reqs[i].0
                    ));
                    break;
                }
            }
        }
    }
    o
}

/// How long after its last pinned flow went idle a drained server must be
/// retired (property 7): T_pin_idle + 2 s.
pub const RETIRE_WITHIN: Nanos = T_EXP + 1_000_000_000 + 2_000_000_000;

/// Property 7 from the controller's history and every request: a request
/// chosen through a group (PREV, CUR) goes to a member of a slot in force
/// (the flip's commands take effect up to its barrier, so the next slots
/// count from a few ms before); a retired server gets no requests; a
/// server out of both slots is retired within [`RETIRE_WITHIN`] of its
/// last request (or of leaving).
fn drain_violations(
    history: &[(Nanos, crate::switch::controller::Event)],
    reqs: &[(Nanos, u8, shim::Sel)],
    failed: Option<u8>,
    end: Nanos,
    v: &mut Vec<String>,
) {
    use crate::switch::controller::Event;
    const SLACK: Nanos = 5_000_000;
    // Membership intervals: (from, members of both slots).
    let mut eras: Vec<(Nanos, std::collections::BTreeSet<u8>)> = Vec::new();
    let mut retired: BTreeMap<u8, Vec<Nanos>> = BTreeMap::new();
    for (t, e) in history {
        match e {
            Event::Slots(s) => {
                eras.push((*t, s.iter().flatten().copied().collect()));
            }
            Event::Replaced { new, .. } => {
                let mut m = eras.last().map(|e| e.1.clone()).unwrap_or_default();
                m.insert(*new);
                eras.push((*t, m));
            }
            Event::Retired(s) => retired.entry(*s).or_default().push(*t),
        }
    }
    let members_near = |t: Nanos| {
        let mut m = std::collections::BTreeSet::new();
        for (i, (from, set)) in eras.iter().enumerate() {
            let until = eras.get(i + 1).map_or(Nanos::MAX, |e| e.0);
            if *from <= t + SLACK && t < until.saturating_add(SLACK) {
                m.extend(set.iter().copied());
            }
        }
        m
    };
    for &(t, s, sel) in reqs {
        if Some(s) == failed {
            continue;
        }
        if matches!(sel, shim::Sel::Prev | shim::Sel::Cur) && !members_near(t).contains(&s) {
            v.push(format!(
                "drain: server {s} got a group request at {t} ns while in no slot"
            ));
            return;
        }
    }
    // A retired server gets nothing until a group takes it back.
    for (s, times) in &retired {
        for &r in times {
            let back = eras
                .iter()
                .find(|(t, m)| *t > r && m.contains(s))
                .map_or(Nanos::MAX, |e| e.0)
                // The flip that takes it back takes effect up to its
                // barrier, when the era is recorded.
                .saturating_sub(SLACK);
            if let Some(&(t, _, _)) = reqs
                .iter()
                .find(|(t, x, _)| x == s && *t > r + SLACK && *t < back)
            {
                v.push(format!(
                    "drain: server {s} retired at {r} ns got a request at {t} ns"
                ));
                return;
            }
        }
    }
    // Out of both slots for good → retired in time.
    let Some((left, last_set)) = eras.last() else {
        return;
    };
    let out_of_slots: Vec<u8> = eras
        .iter()
        .flat_map(|(_, m)| m.iter().copied())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|s| !last_set.contains(s) && Some(*s) != failed)
        .collect();
    for s in out_of_slots {
        // When it left: the first era from which it is in no slot.
        let since = eras
            .iter()
            .rev()
            .take_while(|(_, m)| !m.contains(&s))
            .last()
            .map_or(*left, |e| e.0);
        let last_req = reqs
            .iter()
            .filter(|(_, x, _)| *x == s)
            .map(|r| r.0)
            .max()
            .unwrap_or(0);
        let idle_from = since.max(last_req);
        let due = idle_from + RETIRE_WITHIN;
        let r = retired
            .get(&s)
            .and_then(|ts| ts.iter().copied().find(|&r| r >= since));
        match r {
            Some(r) if r <= due => {}
            Some(r) => v.push(format!(
                "drain: server {s} retired at {r} ns, due by {due} ns"
            )),
            None if end > due => v.push(format!(
                "drain: server {s} not retired by {end} ns (due by {due} ns)"
            )),
            None => {}
        }
    }
}

/// One seed as a campaign result.
pub fn run_seed(seed: u64) -> SeedResult {
    let o = run(seed, Mutation::None);
    let mut judged = BTreeMap::new();
    judged.insert("flows".to_string(), o.flows as u64);
    judged.insert("requests".to_string(), o.requests);
    judged.insert("lifetimes".to_string(), o.lifetimes);
    judged.insert("transitions".to_string(), o.transitions.1);
    judged.insert("excluded".to_string(), u64::from(o.excluded));
    judged.insert("retired".to_string(), o.retired);
    SeedResult {
        seed,
        faults: o
            .failure
            .map(|(t, v)| vec![(t, format!("server {v} fails (link down)"))])
            .unwrap_or_default(),
        kinds: o
            .failure
            .map(|_| [("crash".to_string(), 1u64)].into_iter().collect())
            .unwrap_or_default(),
        violations: o.violations.clone(),
        judged,
        notes: vec![format!(
            "{} flows, {} packets, {}/{} transitions, bloom {} bits/way, {} pins, sel pin/cache/prev/cur {:?}, failure {:?}",
            o.flows, o.injected, o.transitions.1, o.transitions.0, o.bloom_bits, o.pins, o.by_sel, o.failure
        )],
        events: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::switch::controller::Event;
    use inca_wire::clip::shim::Sel;

    #[test]
    fn the_drain_judge_sees_each_breach() {
        let history = vec![
            (0, Event::Slots([vec![1], vec![]])),
            (1_000_000_000, Event::Slots([vec![1], vec![2]])),
            (2_000_000_000, Event::Slots([vec![3], vec![2]])),
            (2_500_000_000, Event::Retired(1)),
        ];
        let judge = |reqs: &[(Nanos, u8, Sel)], end: Nanos| {
            let mut v = Vec::new();
            drain_violations(&history, reqs, None, end, &mut v);
            v
        };
        // Fine: group requests to members, a pinned request to a drained
        // server before it retires.
        let ok = [
            (500, 1, Sel::Cur),
            (1_500_000_000, 2, Sel::Cur),
            (2_100_000_000, 1, Sel::PinTable),
        ];
        assert!(
            judge(&ok, 3_000_000_000).is_empty(),
            "{:?}",
            judge(&ok, 3_000_000_000)
        );
        // A group request to a server in no slot.
        assert_eq!(
            judge(&[(2_200_000_000, 1, Sel::Prev)], 3_000_000_000).len(),
            1
        );
        // A request to a retired server.
        assert_eq!(
            judge(&[(2_600_000_000, 1, Sel::PinTable)], 3_000_000_000).len(),
            1
        );
        // Retired too late: its last request was long before.
        let late = vec![
            (0, Event::Slots([vec![1], vec![]])),
            (1_000_000_000, Event::Slots([vec![2], vec![3]])),
            (9_000_000_000, Event::Retired(1)),
        ];
        let mut v = Vec::new();
        drain_violations(&late, &[], None, 10_000_000_000, &mut v);
        assert_eq!(v.len(), 1, "{v:?}");
        // Never retired.
        let mut v = Vec::new();
        drain_violations(&late[..2], &[], None, 10_000_000_000, &mut v);
        assert_eq!(v.len(), 1, "{v:?}");
    }
}
