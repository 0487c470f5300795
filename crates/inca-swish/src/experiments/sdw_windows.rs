//! SDW's window experiments (specs/swish.md §8.2 experiments 5, 7 and 11)
//! as built-in experiments for `inca sweep`:
//!
//! - `swish-sdw-advance` (E5): the inter-advance time at replica 1 over
//!   the first `advances` windows of a lossless run without app traffic,
//!   with the per-port packet-rate bound it should approach for large C;
//! - `swish-sdw-ablation` (E7): DATA retransmissions in the first
//!   `windows` windows, over `runs` runs that differ in when the
//!   controller's START lands (the only thing a lossless run's seed
//!   changes); the spread is a histogram over the runs;
//! - `swish-sdw-scale-out` (E11): the SDW campaign's workload and its
//!   D1–D8 judge on a star of N replicas around one L3 router, lossless,
//!   ready phase on.

use inca_apps::params::Params;
use inca_sim::metrics::{LatencyHistogram, NodeReport};
use inca_switch::Nanos;
use inca_system::{BuiltinExperiment, ExperimentRun};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::sdw::app::{AppRequest, OP_QUERY, OP_UPDATE};
use crate::sdw::campaign::{judge, run as run_plan, RunPlan};
use crate::sdw::config::{Dedup, BATCH_MAX, UNBOUNDED};
use crate::sdw::rig::{advance_run, percentile, Rig, RigConfig};
use crate::topology::{Topology, STAR_REPLICAS};

/// Experiments of this module.
pub fn experiments() -> Vec<BuiltinExperiment> {
    vec![
        BuiltinExperiment {
            name: "swish-sdw-advance",
            about: "SDW window-advance latency (spec §8.2 exp. 5): p99 inter-advance time at replica 1, lossless, no app traffic",
            params: ADVANCE_PARAMS,
            run: run_advance,
        },
        BuiltinExperiment {
            name: "swish-sdw-ablation",
            about: "SDW ready-phase ablation (spec §8.2 exp. 7): DATA retransmissions in the first windows, over runs",
            params: ABLATION_PARAMS,
            run: run_ablation,
        },
        BuiltinExperiment {
            name: "swish-sdw-scale-out",
            about: "SDW scale-out (spec §8.2 exp. 11): N replicas in a star around an L3 router, judged on D1-D8",
            params: SCALE_PARAMS,
            run: run_scale_out,
        },
    ]
}

const ADVANCE_PARAMS: &[&str] = &[
    "topology",
    "rows",
    "cols",
    "ready",
    "advances",
    "packet_budget",
    "min_advances",
    "fit_rows",
    "cols_cap",
];
const ABLATION_PARAMS: &[&str] = &[
    "topology",
    "rows",
    "cols",
    "ready",
    "windows",
    "runs",
    "start_skew",
    "jitter",
];
const SCALE_PARAMS: &[&str] = &[
    "replicas", "rows", "cols", "dedup", "load", "gap_min", "gap_max",
];

/// Bits one DATA frame takes on the wire: 78 B with its 12 B of cells
/// (3 rows × 4 B), plus 20 B of preamble and inter-frame gap — the frame
/// `SdwConfig::rto_data`'s t_pkt is computed from.
pub const DATA_WIRE_BITS: u64 = (78 + 20) * 8;

/// Time `packets` DATA frames take on one port of `port_rate_bps`: the
/// per-port packet-rate bound on a window (ns).
pub fn port_bound(packets: u64, port_rate_bps: u64) -> Nanos {
    (u128::from(packets) * u128::from(DATA_WIRE_BITS) * 1_000_000_000
        / u128::from(port_rate_bps.max(1))) as Nanos
}

fn topology(p: &Params, default: &str) -> Result<Topology, String> {
    let name = p.text("topology").unwrap_or(default);
    Topology::parse(name).ok_or_else(|| {
        format!("param topology: {name:?} is not local-2, symmetric-4, leaf-spine-4 or star-N")
    })
}

fn rig_config(p: &Params, seed: u64, default_topology: &str) -> Result<RigConfig, String> {
    let mut cfg = RigConfig {
        topology: topology(p, default_topology)?,
        seed,
        ..RigConfig::default()
    };
    cfg.base.rows = p.number("rows", 3, 1, 3).map_err(|e| e.to_string())? as u8;
    cfg.base.cols = p
        .count("cols", 64, 8 * u64::from(BATCH_MAX))
        .map_err(|e| e.to_string())? as u32;
    cfg.base.ready_phase = p.number("ready", 1, 0, 1).map_err(|e| e.to_string())? == 1;
    if cfg.topology.replicas() > 32 {
        cfg.base.dedup = Dedup::CounterPerSwitch;
    }
    Ok(cfg)
}

/// When a run of `windows` windows gives up: 1 ms a window plus four
/// times the window's per-port packet time — far above a lossless window
/// (a few µs plus C × 7.84 ns) — so a stuck run ends and shows as short.
fn deadline(cfg: &RigConfig, windows: usize) -> Nanos {
    let per = 1_000_000 + 4 * port_bound(u64::from(cfg.base.cols), cfg.base.port_rate_bps);
    cfg.start_at + cfg.start_skew + windows as u64 * per
}

/// Sums a counter over every replica of `rig`.
fn replica_sum(rig: &Rig, f: impl Fn(&crate::sdw::program::SdwCounters) -> u64) -> u64 {
    (0..rig.replicas.len())
        .filter_map(|i| rig.switch(i))
        .map(|s| f(&s.program().counters))
        .sum()
}

/// E5. Params: `topology` (local-2), `rows` (3), `cols` (64), `ready`
/// (1), `advances` (10,000), `packet_budget` (0: none; else the advances
/// are cut to max(`min_advances` (10), budget / cols) so large C stays
/// affordable), `fit_rows` (1: when rows × cols does not place on the
/// tofino profile, use fewer rows — one packet carries every row, so the
/// packet count and the advance time do not depend on them), `cols_cap`
/// (none: a run with more columns simulates nothing and reports
/// `skipped` instead of its times — for `--quick`, which cannot drop an
/// axis point, in a debug build).
fn run_advance(p: &Params, seed: u64) -> Result<ExperimentRun, String> {
    p.check_known("swish-sdw-advance", ADVANCE_PARAMS)
        .map_err(|e| e.to_string())?;
    let mut cfg = rig_config(p, seed, "local-2")?;
    let mut advances = p
        .count("advances", 10_000, 1_000_000)
        .map_err(|e| e.to_string())? as usize;
    let budget = p
        .number("packet_budget", 0, 0, 1 << 40)
        .map_err(|e| e.to_string())?;
    let floor = p
        .count("min_advances", 10, 1_000_000)
        .map_err(|e| e.to_string())?;
    if budget > 0 {
        advances = advances.min((budget / u64::from(cfg.base.cols)).max(floor) as usize);
    }
    let cap = p
        .count("cols_cap", u64::MAX, u64::MAX)
        .map_err(|e| e.to_string())?;
    if u64::from(cfg.base.cols) > cap {
        let mut r = NodeReport::default();
        r.counters.insert("skipped".into(), 1);
        let mut run = ExperimentRun::default().with_result("result", r);
        run.highlights
            .push(format!("C={} above cols_cap={cap}: not run", cfg.base.cols));
        return Ok(run);
    }
    let fit = p.number("fit_rows", 1, 0, 1).map_err(|e| e.to_string())? == 1;
    let (rig, gaps) = loop {
        match advance_run(&cfg, advances, deadline(&cfg, advances)) {
            // A placement error (stages, memory): one row fewer.
            Err(_) if fit && cfg.base.rows > 1 => cfg.base.rows -= 1,
            other => break other?,
        }
    };
    if gaps.is_empty() {
        return Err(format!(
            "no window advanced twice at replica 1 ({} C={})",
            cfg.topology.name(),
            cfg.base.cols
        ));
    }
    let mut sorted = gaps.clone();
    sorted.sort_unstable();
    let mut r = NodeReport::default();
    let mut h = LatencyHistogram::default();
    for &g in &gaps {
        h.record(g);
    }
    r.histograms.insert("advance".into(), h);
    let n = cfg.topology.replicas() as u64;
    // Copies of each column packet one replication port carries: one in
    // the pairwise topologies, N − 1 on a star's uplink.
    let copies = if cfg.topology.forwarded() { n - 1 } else { 1 };
    let bound = port_bound(u64::from(cfg.base.cols) * copies, cfg.base.port_rate_bps);
    for (k, v) in [
        ("advances", gaps.len() as u64),
        ("p50_ns", percentile(&sorted, 50.0)),
        ("p99_ns", percentile(&sorted, 99.0)),
        ("max_ns", sorted.last().copied().unwrap_or(0)),
        ("bound_ns", bound),
        ("rows", u64::from(cfg.base.rows)),
        ("retx", replica_sum(&rig, |c| c.retx)),
        ("early", replica_sum(&rig, |c| c.early)),
    ] {
        r.counters.insert(k.into(), v);
    }
    let mut run = ExperimentRun::from_sim(&rig.sim, rig.sim.now()).with_result("result", r);
    run.highlights.push(format!(
        "{} rows={} C={} ready={}: {} advances, p50 {} ns, p99 {} ns (per-port bound C·t_pkt = {bound} ns)",
        cfg.topology.name(),
        cfg.base.rows,
        cfg.base.cols,
        cfg.base.ready_phase,
        gaps.len(),
        percentile(&sorted, 50.0),
        percentile(&sorted, 99.0)
    ));
    Ok(run)
}

/// E7. Params: `topology` (symmetric-4), `rows` (3), `cols` (64),
/// `ready` (1), `windows` (10,000), `runs` (100), `jitter` in ns (100:
/// every frame between replicas is delayed by a uniform extra amount up
/// to it — the timing noise that makes runs differ; no loss),
/// `start_skew` in ns (0: each replica's START lands within it; see
/// [`RigConfig::start_skew`]). Run k uses seed `seed · 1,000 + k`.
fn run_ablation(p: &Params, seed: u64) -> Result<ExperimentRun, String> {
    p.check_known("swish-sdw-ablation", ABLATION_PARAMS)
        .map_err(|e| e.to_string())?;
    let mut cfg = rig_config(p, seed, "symmetric-4")?;
    let windows = p
        .count("windows", 10_000, 1_000_000)
        .map_err(|e| e.to_string())? as usize;
    let runs = p.count("runs", 100, 10_000).map_err(|e| e.to_string())?;
    cfg.start_skew = p
        .number("start_skew", 0, 0, 1_000_000_000)
        .map_err(|e| e.to_string())?;
    cfg.impair.jitter = p
        .number("jitter", 100, 0, 1_000_000_000)
        .map_err(|e| e.to_string())?;
    let mut per_run = LatencyHistogram::default();
    let (mut total, mut early, mut with_retx) = (0u64, 0u64, 0u64);
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    let mut last = None;
    let mut short = 0u64;
    let mut each = Vec::new();
    for k in 0..runs {
        cfg.seed = seed.wrapping_mul(1_000).wrapping_add(k);
        let (rig, gaps) = advance_run(&cfg, windows, deadline(&cfg, windows))?;
        if gaps.len() < windows {
            short += 1;
        }
        let retx = replica_sum(&rig, |c| c.retx);
        per_run.record(retx);
        each.push(retx as f64);
        total += retx;
        early += replica_sum(&rig, |c| c.early);
        with_retx += u64::from(retx > 0);
        lo = lo.min(retx);
        hi = hi.max(retx);
        last = Some(rig);
    }
    let rig = last.ok_or("runs must be at least 1")?;
    let mean_milli = total * 1_000 / runs;
    let mean = total as f64 / runs as f64;
    let var = each.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / runs as f64;
    let mut r = NodeReport::default();
    r.histograms.insert("retx_per_run".into(), per_run);
    for (k, v) in [
        ("runs", runs),
        ("retx_total", total),
        ("retx_mean_milli", mean_milli),
        ("retx_sd_milli", (var.sqrt() * 1_000.0).round() as u64),
        ("retx_min", lo),
        ("retx_max", hi),
        ("runs_with_retx", with_retx),
        ("early_total", early),
        ("runs_short", short),
    ] {
        r.counters.insert(k.into(), v);
    }
    let mut run = ExperimentRun::from_sim(&rig.sim, rig.sim.now()).with_result("result", r);
    run.highlights.push(format!(
        "{} C={} ready={}: {runs} runs of {windows} windows, DATA retransmissions mean {:.2}, min {lo}, max {hi}, {with_retx} runs with any; early DATA {early}",
        cfg.topology.name(),
        cfg.base.cols,
        cfg.base.ready_phase,
        mean_milli as f64 / 1_000.0
    ));
    Ok(run)
}

/// The campaign's workload on a star of `n`: every app host sends
/// updates, queries and both (5:3:2) to 24 keys, one request every
/// `gap_min..gap_max` ns, for `load` ns after START.
fn star_plan(seed: u64, n: usize, cfg: RigConfig, load: Nanos, gap: (Nanos, Nanos)) -> RunPlan {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5343_414c);
    let quiet_at = cfg.start_at + load;
    let mut scripts = vec![Vec::new(); n];
    let mut req_id = 0;
    for (i, s) in scripts.iter_mut().enumerate() {
        let mut t = cfg.start_at + rng.gen_range(0..2_000);
        while t < quiet_at {
            req_id += 1;
            let op = match rng.gen_range(0..10) {
                0..=4 => OP_UPDATE,
                5..=7 => OP_QUERY,
                _ => OP_UPDATE | OP_QUERY,
            };
            s.push((
                t,
                AppRequest {
                    op,
                    req_id: (i as u32) << 24 | req_id,
                    key: rng.gen_range(0..24),
                    value: rng.gen_range(1..1_000),
                },
            ));
            t += rng.gen_range(gap.0..=gap.1);
        }
    }
    RunPlan {
        rig: cfg,
        scripts,
        quiet_at,
        end: quiet_at + 100_000,
        sample_every: 1_000,
        lossless: true,
        failure: None,
        broken_recovery: false,
        rejoin: Vec::new(),
        broken_join: false,
    }
}

/// E11. Params: `replicas` (32), `rows` (3), `cols` (16), `dedup`
/// (`bitmap` or `counter`; bitmap refuses N > 32), `load` in ns (400,000),
/// `gap_min`/`gap_max` between one host's requests in ns (2,000/20,000).
fn run_scale_out(p: &Params, seed: u64) -> Result<ExperimentRun, String> {
    p.check_known("swish-sdw-scale-out", SCALE_PARAMS)
        .map_err(|e| e.to_string())?;
    let n = p
        .number("replicas", STAR_REPLICAS as u64, 2, 4_096)
        .map_err(|e| e.to_string())? as usize;
    let mut cfg = RigConfig {
        topology: Topology::Star(n),
        seed,
        ..RigConfig::default()
    };
    cfg.base.rows = p.number("rows", 3, 1, 3).map_err(|e| e.to_string())? as u8;
    cfg.base.cols = p
        .count("cols", 16, u64::from(BATCH_MAX))
        .map_err(|e| e.to_string())? as u32;
    cfg.base.b = UNBOUNDED;
    cfg.base.dedup = match p.text("dedup").unwrap_or("bitmap") {
        "bitmap" => Dedup::BitmapPerColumn,
        "counter" => Dedup::CounterPerSwitch,
        other => return Err(format!("param dedup: {other:?} is not bitmap or counter")),
    };
    let load = p
        .count("load", 400_000, 1_000_000_000)
        .map_err(|e| e.to_string())?;
    let gap_min = p
        .count("gap_min", 2_000, 1_000_000_000)
        .map_err(|e| e.to_string())?;
    let gap_max = p
        .number("gap_max", 20_000, gap_min, 1_000_000_000)
        .map_err(|e| e.to_string())?;
    let plan = star_plan(seed, n, cfg, load, (gap_min, gap_max));
    // The rig refuses a configuration its replicas refuse (bitmap, N > 32).
    let facts = run_plan(&plan)?;
    let j = judge(&plan, &facts);
    let mut r = NodeReport::default();
    let (early, retx) = facts
        .early_retx
        .iter()
        .fold((0, 0), |a, &(e, x)| (a.0 + e, a.1 + x));
    r.counters
        .insert("violations".into(), j.violations.len() as u64);
    r.counters.insert("retx".into(), retx);
    r.counters.insert("early".into(), early);
    r.counters.insert("replicas".into(), n as u64);
    r.counters.insert("requests".into(), facts.requests);
    r.counters.insert(
        "windows_min".into(),
        facts.final_win.iter().copied().min().unwrap_or(0).into(),
    );
    r.counters.insert(
        "windows_max".into(),
        facts.final_win.iter().copied().max().unwrap_or(0).into(),
    );
    for (k, v) in &j.judged {
        r.counters
            .insert(k.replace("sdw: ", "judged ").replace(' ', "_"), *v);
    }
    r.notes = j.violations.iter().take(10).cloned().collect();
    let end = facts.samples.last().map(|s| s.0).unwrap_or(0);
    let mut run = ExperimentRun {
        duration: end,
        ..ExperimentRun::default()
    }
    .with_result("result", r);
    run.highlights.push(format!(
        "star-{n} C={}: {} requests, windows {}..{}, {} violations of D1-D8, {retx} retransmissions, {early} early DATA",
        plan.rig.base.cols,
        facts.requests,
        facts.final_win.iter().min().unwrap_or(&0),
        facts.final_win.iter().max().unwrap_or(&0),
        j.violations.len()
    ));
    run.highlights.extend(j.violations.iter().take(5).cloned());
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(items: &[&str]) -> Params {
        Params::parse(items.iter().copied()).unwrap()
    }

    #[test]
    fn bad_params_name_the_param() {
        let e = run_advance(&params(&["topology=ring-4"]), 1).unwrap_err();
        assert!(e.contains("topology"), "{e}");
        let e = run_advance(&params(&["bogus=1"]), 1).unwrap_err();
        assert!(e.contains("bogus"), "{e}");
        let e = run_scale_out(&params(&["dedup=none"]), 1).unwrap_err();
        assert!(e.contains("dedup"), "{e}");
    }

    #[test]
    fn the_bound_is_one_frame_per_column_at_the_port_rate() {
        // 98 B on the wire at 100 Gb/s: 7.84 ns a frame.
        assert_eq!(port_bound(1, 100_000_000_000), 7);
        assert_eq!(port_bound(65_536, 100_000_000_000), 513_802);
    }
}
