//! E4, capacity adjustment (spec §8.2, the paper's Fig. 7): MFWD on the
//! testbed, four flow sets of 64 flows, each set ≈ 1 Mpps of 64-byte
//! packets. Set-1 and set-2 start at 0 with G_1 = {server-1};
//! `Transition({server-2})` at T1; set-3 and set-4 start shortly after;
//! set-1 stops; `Transition({server-2})` again at T2; the run ends. The
//! periodic promotion loop is off (`promotion = "off"`): only the
//! transitions' pushes move entries into the switch table.
//!
//! What the second transition does [our reading of §5.6 and §8.2]: the
//! group is the same, but the transition still runs in full. Slot `p`
//! still holds G_1 = {server-1} (version 1) and the flows assigned to it,
//! set-1 and set-2, are still live on server-1 (idle < T_exp), so its
//! FLOW_QUERY(v_p = 1) names them; step 5 pushes them into the switch
//! table (MFWD's entries are promotable and known: this experiment
//! installs every flow's entry through the controller's MIRROR_INSERT
//! before traffic starts) while the table admits them (128 of 1,024
//! entries), pinning only what it cannot admit; then slot `p` becomes
//! {server-2} (version 3) and `cur` flips to it. Server-1 is then in
//! neither slot and no pin names it: it is retired — the scale-in of
//! server-1, with set-2 served by the switch alone. `push = 0` makes
//! step 5 pin everything instead (server-1 then keeps serving set-2
//! through its pins: a comparison, not the spec's reading).
//!
//! Timeline [our choice, scaled]: the spec's is 0 / 15.0 / 15.2 / 30.8 /
//! 31.0 / 45 s, about 157 million packets at 2-4 Mpps, too heavy to
//! simulate per packet. The phases are shortened, the gaps after T1 and
//! before T2 kept long enough for a transition (about 35 ms here: three
//! Δ_g waits of 10 ms, two flow-query rounds, pin or push writes of 20 µs
//! each, a Bloom clear of 3 ms). Parameters, all times after traffic
//! starts: `t1_us` (300,000), `start34_us` (400,000), `stop1_us`
//! (600,000), `t2_us` (700,000), `end_us` (1,000,000); `bin_us` (5,000,
//! the spec's 100 ms scaled like the phases); `pps` (1,000,000 per set),
//! `flows` (64 per set), `size` (64, with FCS; frames of 66 B to hold the
//! probe), `cores` (8), `push` (1), `setup_us` (5,000: the switch's
//! static set-up, then the 256 MIRROR_INSERTs at 1 ms, before traffic),
//! `drain_us` (1,000).
//!
//! Reports under `result`: series `offered` (frames the generator sent
//! per bin), `total` (frames the sink received), `server1`, `server2`
//! (requests each server served) and `switch` (packets that stayed in
//! the switch: MFWD hits); counters `sent`, `received`, `lost`,
//! `affinity_violations`, `affinity_flows`, `affinity_lifetimes`,
//! `ver_mismatch`, `misdelivered`, `mfwd_misses`, `reordered` (probes the
//! sink got after a later one of their flow: spec §9 item 9, a push lets
//! fast-path packets overtake slow-path ones, a pin never), `switch_drops`
//! (no-server, invalid and status drops), `server_drops` (receive ring
//! and buffer), `transitions`, `pins`, `pushed`, `retired`,
//! `server1_after_t2` (requests server-1 served from T2 + 100 ms to the
//! end), `max_dip_permille` (the largest shortfall of `total` below
//! `offered` in a bin clear of the generator's steps, ‰).
//!
//! Affinity judge (property 4, as the membership campaign judges it):
//! every bin, each server's record of each flow says whether the flow
//! sent it a request in that bin (its `last_seen`); a flow's lifetime
//! ends at an idle gap of T_exp; within one, every request must land on
//! one server. Flows whose entry is in the switch send no requests.

use std::collections::BTreeMap;
use std::sync::Arc;

use inca_apps::params::Params;
use inca_sim::engine::{Fault, NodeId};
use inca_switch::device::Nanos;
use inca_system::{BuiltinExperiment, ExperimentRun, System};

use super::param_err;
use super::rig::{counters, Testbed};
use crate::apps::mfwd::MfwdHandler;
use crate::flow::FlowKey;
use crate::scenario::ClipServerNode;
use crate::switch::Command;

/// The experiment's name.
pub const NAME: &str = "clip-capacity";
const PARAMS: &[&str] = &[
    "t1_us",
    "start34_us",
    "stop1_us",
    "t2_us",
    "end_us",
    "bin_us",
    "pps",
    "flows",
    "size",
    "cores",
    "push",
    "setup_us",
    "drain_us",
];
/// The generator's and the sink's addresses (testbed.toml), the
/// destination port.
const GEN_IP: [u8; 4] = [10, 0, 0, 1];
const SINK_IP: [u8; 4] = [10, 0, 1, 1];
const DPORT: u16 = 9;
/// Flow set `k`'s source ports start here (set `k` uses `flows` ports
/// from `BASE_PORT + 1000 k`).
const BASE_PORT: u16 = 10_000;
/// The servers' flow expiry (the runtime's default, §5.7: 10 s).
const T_EXP: Nanos = 10_000_000_000;
/// How long after T2 server-1 must be idle.
const SETTLE: Nanos = 100_000_000;

/// E4, running `run` (which hands [`run`] the CLIP system).
pub fn experiment(run: fn(&Params, u64) -> Result<ExperimentRun, String>) -> BuiltinExperiment {
    BuiltinExperiment {
        name: NAME,
        about: "CLIP §8.2 E4 (Fig. 7): MFWD, four sets of 64 flows at 1 Mpps each; G_1 = {server-1}, Transition({server-2}) at T1, sets 3-4 start, set 1 stops, Transition({server-2}) again at T2 (pushes server-1's flows into the switch); per-server and total throughput per bin, affinity judged",
        params: PARAMS,
        run,
    }
}

/// The timeline, ns after traffic starts.
#[derive(Debug, Clone, Copy)]
struct Timeline {
    t1: Nanos,
    start34: Nanos,
    stop1: Nanos,
    t2: Nanos,
    end: Nanos,
}

fn timeline(p: &Params) -> Result<Timeline, String> {
    let us = |name: &str, default: u64| -> Result<Nanos, String> {
        Ok(p.number(name, default, 1, 3_600_000_000)
            .map_err(param_err)?
            * 1_000)
    };
    let t = Timeline {
        t1: us("t1_us", 300_000)?,
        start34: us("start34_us", 400_000)?,
        stop1: us("stop1_us", 600_000)?,
        t2: us("t2_us", 700_000)?,
        end: us("end_us", 1_000_000)?,
    };
    if !(t.t1 < t.start34 && t.start34 < t.stop1 && t.stop1 < t.t2 && t.t2 < t.end) {
        return Err(format!(
            "the timeline must run t1_us < start34_us < stop1_us < t2_us < end_us, got {} < {} < {} < {} < {}",
            t.t1 / 1_000,
            t.start34 / 1_000,
            t.stop1 / 1_000,
            t.t2 / 1_000,
            t.end / 1_000
        ));
    }
    Ok(t)
}

/// Flow `i` of set `k` (0-based): the generator's 5-tuple.
fn flow(k: u16, i: u16) -> FlowKey {
    FlowKey::new(
        0,
        inca_apps::headers::PROTO_UDP,
        GEN_IP,
        SINK_IP,
        BASE_PORT + 1_000 * k + i,
        DPORT,
    )
}

/// Every flow's requests as (time, server) samples; the flows whose
/// requests in one lifetime (no idle gap of `t_exp`) reached two servers,
/// described, and the lifetimes judged.
fn affinity(seen: &BTreeMap<FlowKey, Vec<(Nanos, u8)>>, t_exp: Nanos) -> (Vec<String>, u64) {
    let mut bad = Vec::new();
    let mut lifetimes = 0;
    for (f, reqs) in seen {
        let mut first: Option<(Nanos, u8)> = None;
        let mut last = 0;
        for &(t, s) in reqs {
            match first {
                Some((_, s0)) if t.saturating_sub(last) < t_exp => {
                    if s != s0 {
                        bad.push(format!(
                            "flow {f}: server {s0}, then server {s} at {t} ns in the same lifetime"
                        ));
                        break;
                    }
                }
                _ => {
                    first = Some((t, s));
                    lifetimes += 1;
                }
            }
            last = t;
        }
    }
    (bad, lifetimes)
}

/// The servers' nodes and the switch's.
struct Nodes {
    servers: [NodeId; 2],
    switch: NodeId,
}

type MfwdSw = inca_switch::Switch<crate::switch::ClipSwitch<crate::apps::mfwd::MfwdSwitch>>;

/// The switch's named counter (its stats, driver's and controller's).
fn switch_counter(tb: &Testbed, id: NodeId, name: &str) -> u64 {
    let Some(sw) = tb.sim.node::<MfwdSw>(id) else {
        return 0;
    };
    let prog = sw.program();
    let mut all = prog.stats.counters();
    if let Some(c) = &prog.controller {
        all.extend(c.counters());
    }
    all.into_iter()
        .find(|(n, _)| n == name)
        .map_or(0, |(_, v)| v)
}

/// One run with `p` and `seed`, CLIP's devices built by `clip`.
pub fn run(p: &Params, seed: u64, clip: Arc<dyn System>) -> Result<ExperimentRun, String> {
    p.check_known(NAME, PARAMS).map_err(param_err)?;
    let tl = timeline(p)?;
    let bin = p
        .number("bin_us", 5_000, 1, 10_000_000)
        .map_err(param_err)?
        * 1_000;
    let pps = p
        .number("pps", 1_000_000, 1, 25_000_000)
        .map_err(param_err)?;
    let flows = p.number("flows", 64, 1, 1_000).map_err(param_err)? as u16;
    let size = p.number("size", 64, 64, 9_000).map_err(param_err)?;
    let cores = p.number("cores", 8, 1, 256).map_err(param_err)?;
    let push = p.number("push", 1, 0, 1).map_err(param_err)?;
    let setup = p
        .number("setup_us", 5_000, 2_000, 10_000_000)
        .map_err(param_err)?
        * 1_000;
    let drain = p
        .number("drain_us", 1_000, 0, 10_000_000)
        .map_err(param_err)?
        * 1_000;
    if (tl.end + setup + drain) / bin > 100_000 {
        return Err(format!(
            "bin_us: {} bins is too many (at most 100,000)",
            (tl.end + setup + drain) / bin
        ));
    }
    let frame = (size - 4).max(inca_sim::nodes::host::MIN_PROBE_FRAME as u64);
    let at = |t: Nanos| format!("\"{}ns\"", setup + t);
    // Set k: (start, stop).
    let sets = [
        (0, tl.stop1),
        (0, tl.end),
        (tl.start34, tl.end),
        (tl.start34, tl.end),
    ];
    let workloads: Vec<String> = sets
        .iter()
        .enumerate()
        .map(|(k, (start, stop))| {
            let lo = BASE_PORT + 1_000 * k as u16;
            format!(
                "{{ name = \"set{}\", kind = \"udp\", dst = \"10.0.1.1:{DPORT}\", pps = {pps}, size = {frame}, flows = {flows}, src_ports = [{lo}, {}], start = {}, stop = {} }}",
                k + 1,
                lo + flows - 1,
                at(*start),
                at(*stop)
            )
        })
        .collect();
    let server =
        |id: u8| format!("clip{id}.params={{ app = \"mfwd\", server_id = {id}, cores = {cores} }}");
    let end = setup + tl.end + drain;
    let set = vec![
        "clip.program=\"clip_mfwd\"".to_string(),
        format!(
            "clip.params={{ servers = \"1:2,2:3\", group = \"1\", route_port = 1, promotion = \"off\", push = {push} }}"
        ),
        server(1),
        server(2),
        format!("gen.workload=[{}]", workloads.join(", ")),
        format!("duration=\"{end}ns\""),
    ];
    let mut tb = Testbed::build(&set, seed, clip)?;
    let id = |name: &str| {
        tb.sim
            .node_id(name)
            .ok_or_else(|| format!("the testbed has no node {name:?}"))
    };
    let nodes = Nodes {
        servers: [id("clip1")?, id("clip2")?],
        switch: id("clip")?,
    };
    if tb.sim.node::<MfwdSw>(nodes.switch).is_none() {
        return Err("the testbed's switch is not clip_mfwd".into());
    }
    // Every flow's entry on both servers, known to the controller.
    let keys: Vec<FlowKey> = (0..4u16)
        .flat_map(|k| (0..flows).map(move |i| flow(k, i)))
        .collect();
    for (n, f) in keys.iter().enumerate() {
        let e = MfwdHandler::entry(*f, 100 + n as u16);
        let m = Command::Mirror(e).message();
        tb.sim.schedule(1_000_000, Fault::Message(nodes.switch, m));
    }
    for t in [tl.t1, tl.t2] {
        let m = Command::Transition(vec![2]).message();
        tb.sim.schedule(setup + t, Fault::Message(nodes.switch, m));
    }

    // Run bin by bin.
    let nbins = end.div_ceil(bin) as usize;
    let mut series: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    let mut prev = [0u64; 5];
    let mut seen: BTreeMap<FlowKey, Vec<(Nanos, u8)>> = BTreeMap::new();
    let mut server1_after_t2 = 0u64;
    for b in 0..nbins {
        let (from, to) = (b as Nanos * bin, ((b + 1) as Nanos * bin).min(end));
        tb.run_until(to);
        let snap = tb.snapshot()?;
        let mut now = [0u64; 5];
        now[0] = snap.sent;
        now[1] = snap.received;
        now[4] = switch_counter(&tb, nodes.switch, "clip_fast");
        for (i, sid) in nodes.servers.iter().enumerate() {
            let node = tb
                .sim
                .node::<ClipServerNode<MfwdHandler>>(*sid)
                .ok_or("clip1/clip2 are not MFWD CLIP servers")?;
            let rt = node.0.nf().runtime();
            now[2 + i] = rt.stats().requests;
            for f in &keys {
                if let Some((_, r)) = rt.record(f) {
                    // `run_until(to)` ran the events at `to` too.
                    if r.last_seen > from && r.last_seen <= to {
                        seen.entry(*f).or_default().push((r.last_seen, i as u8 + 1));
                    }
                }
            }
        }
        if from >= setup + tl.t2 + SETTLE {
            server1_after_t2 += now[2] - prev[2];
        }
        for (j, name) in ["offered", "total", "server1", "server2", "switch"]
            .into_iter()
            .enumerate()
        {
            series.entry(name).or_default().push(now[j] - prev[j]);
        }
        prev = now;
    }
    for v in seen.values_mut() {
        v.sort_unstable();
    }
    let (violations, lifetimes) = affinity(&seen, T_EXP);

    // The largest dip of the total below the offered load in a bin clear
    // of the generator's steps (the bins holding a step, its edge
    // included, and the next).
    let steps: Vec<Nanos> = [0, tl.start34, tl.stop1, tl.end]
        .iter()
        .map(|t| setup + t)
        .collect();
    let mut max_dip = 0u64;
    for (b, (&off, &got)) in series["offered"].iter().zip(&series["total"]).enumerate() {
        let (from, to) = (b as Nanos * bin, (b as Nanos + 1) * bin);
        let near = steps.iter().any(|&s| s + bin >= from && s <= to);
        if near || to > setup + tl.end || off == 0 {
            continue;
        }
        max_dip = max_dip.max(off.saturating_sub(got) * 1_000 / off);
    }

    let run = tb.run_report();
    let sum = |kind: &str, names: &[&str]| -> u64 {
        run.nodes
            .iter()
            .filter(|(_, k, _)| *k == kind)
            .map(|(_, _, r)| {
                names
                    .iter()
                    .map(|n| r.counters.get(*n).copied().unwrap_or(0))
                    .sum::<u64>()
            })
            .sum()
    };
    let sw = |n: &str| switch_counter(&tb, nodes.switch, n);
    let (sent, received) = (prev[0], prev[1]);
    let mut ver_mismatch = 0;
    let mut misdelivered = 0;
    let mut misses = 0;
    for sid in nodes.servers {
        if let Some(node) = tb.sim.node::<ClipServerNode<MfwdHandler>>(sid) {
            let rt = node.0.nf().runtime();
            ver_mismatch += rt.stats().ver_mismatch;
            misdelivered += rt.stats().misdelivered;
            misses += rt.handler().stats().misses;
        }
    }
    let mut result = counters(&[
        ("sent", sent),
        ("received", received),
        ("lost", sent.saturating_sub(received)),
        ("affinity_violations", violations.len() as u64),
        ("affinity_flows", seen.len() as u64),
        ("affinity_lifetimes", lifetimes),
        ("ver_mismatch", ver_mismatch),
        ("misdelivered", misdelivered),
        ("mfwd_misses", misses),
        ("reordered", sum("host", &["rx_reordered"])),
        (
            "switch_drops",
            sw("clip_no_server_drop") + sw("clip_invalid_drop") + sw("clip_status_drop"),
        ),
        (
            "server_drops",
            sum("server", &["rx_ring_drops", "rx_buffer_drops"]),
        ),
        ("transitions", sw("ctl_transitions")),
        ("pins", sw("ctl_pins")),
        ("pushed", sw("promo_pushed")),
        ("retired", sw("ctl_retired")),
        ("server1_after_t2", server1_after_t2),
        ("max_dip_permille", max_dip),
    ]);
    for (name, values) in series {
        result
            .series
            .insert(name.to_string(), inca_sim::metrics::Series { bin, values });
    }
    let mut run = run.with_result("result", result.clone());
    let c = |k: &str| result.counters[k];
    run.highlights.push(format!(
        "{} transitions, {} flows pushed into the switch, {} pinned, {} server(s) retired; server-1 served {} requests from T2 + 100 ms; {} of {} frames delivered; {} affinity violations over {} flows; largest dip {} permille",
        c("transitions"),
        c("pushed"),
        c("pins"),
        c("retired"),
        c("server1_after_t2"),
        received,
        sent,
        violations.len(),
        seen.len(),
        max_dip
    ));
    run.highlights.extend(violations.into_iter().take(5));
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_judge_sees_a_flow_move_within_a_lifetime_only() {
        let f = flow(0, 0);
        let mut seen = BTreeMap::new();
        seen.insert(f, vec![(10, 1), (20, 1), (30, 1)]);
        assert_eq!(affinity(&seen, 100), (vec![], 1));
        // Moved after an idle gap of T_exp: a new lifetime.
        seen.insert(f, vec![(10, 1), (200, 2), (210, 2)]);
        assert_eq!(affinity(&seen, 100), (vec![], 2));
        // Moved within one.
        seen.insert(f, vec![(10, 1), (50, 2)]);
        let (bad, _) = affinity(&seen, 100);
        assert_eq!(bad.len(), 1, "{bad:?}");
    }

    #[test]
    fn a_timeline_out_of_order_is_refused_by_name() {
        let p = Params::parse(["t1_us=500", "start34_us=400"]).unwrap();
        let e = timeline(&p).unwrap_err();
        assert!(e.contains("t1_us < start34_us"), "{e}");
    }
}
