//! E6, SNAT throughput with traces (spec §8.2, the paper's Fig. 8): SNAT
//! on the testbed's two CLIP servers, replayed at the generator's maximum.
//! The traces are the spec's synthetic substitutes (the pcaps are not at
//! hand): 16,384 flows, each packet's flow drawn from Zipf(1.0), and
//! - `trace = "a"` — every packet 64 B (the data-center trace padded);
//! - `trace = "b"` — sizes 40 % uniform in 64-100 B and 60 % uniform in
//!   1,400-1,518 B (the web trace's original sizes).
//!
//! Sizes count the FCS, as the spec does; the generator's frames carry
//! none and hold at least its probe (66 B), so a size s is a frame of
//! max(s - 4, 66) B: "64 B" is 66 B, and trace (b)'s small packets are
//! frames of 66-96 B (the 64-69 B sizes all 66 B). Trace (b) is the
//! generator's weighted size mix with every integer size listed, weights
//! 40/37 and 60/119 (exactly the two uniform parts).
//!
//! The generator's maximum: min(25 Mpps, the 40 Gbps line for the trace's
//! mean frame) packets a second, evenly spaced — 25 Mpps for (a), the line
//! rate for (b) (about 5.4 Mpps).
//!
//! Configurations (`config`): `clip` (CLIP without offload: `clip_snat`,
//! `promotion = "off"`, every packet a request) and `clip-offload` (with CMS
//! offload, `promotion = "sketch"`: each round the servers' top-N_top
//! translations go into the switch's 1,024-entry `nat_table`). Both servers
//! serve (group 1,2), each with `cores` worker cores and half of the
//! public port pool.
//!
//! Parameters: `config`, `trace`, `cores` (8), `flows` (16,384), `zipf`
//! (1.0), `max_mpps` (25), `t_report_ms` (250), `n_top` (256), `warmup_ms`
//! (1,000), `measure_ms` (250), `slowdown` (1, as E3's: the offered rate
//! divided and every server cost multiplied by it, for quick runs).
//! Traffic starts at 2 ms (after the switch's static set-up).
//!
//! Reports under `result`: `offered_pps`, `delivered_pps`,
//! `delivered_l2_mbps` (in the window), `generator_pps`, `mean_frame_bytes`,
//! `server_drops`, `switch_fast` (packets the switch translated alone, the
//! whole run), `promoted`, `rounds`, `allocated` (translations the servers
//! handed out), `reordered` (probes the sink got after a later one of
//! their flow, the whole run; spec §9 item 9).

use std::collections::BTreeMap;
use std::sync::Arc;

use inca_apps::params::Params;
use inca_system::{BuiltinExperiment, ExperimentRun, System};

use super::rig::{counters, rates, server_slowdown, sum_counter, Testbed, LINK_BPS, WIRE_OVERHEAD};
use super::{number, param_err};

/// The experiment's name.
pub const NAME: &str = "clip-snat-throughput";
const PARAMS: &[&str] = &[
    "config",
    "trace",
    "cores",
    "flows",
    "zipf",
    "max_mpps",
    "t_report_ms",
    "n_top",
    "warmup_ms",
    "measure_ms",
    "slowdown",
];
/// The configurations.
pub const CONFIGS: [&str; 2] = ["clip", "clip-offload"];
/// The traces.
pub const TRACES: [&str; 2] = ["a", "b"];
/// When traffic starts.
const START_NS: u64 = 2_000_000;

/// E6, running `run` (which hands [`run`] the CLIP system).
pub fn experiment(run: fn(&Params, u64) -> Result<ExperimentRun, String>) -> BuiltinExperiment {
    BuiltinExperiment {
        name: NAME,
        about: "CLIP §8.2 E6 (Fig. 8): SNAT on two servers of `cores` cores, 16,384 Zipf(1.0) flows replayed at the generator's max as trace a (64 B) or b (40 % 64-100 B, 60 % 1,400-1,518 B), CLIP without (config=clip) or with CMS offload (config=clip-offload); delivered Mpps and Gbit/s after a warm-up",
        params: PARAMS,
        run,
    }
}

/// Frame (without FCS) of a spec size (with FCS).
fn frame_of(size: u64) -> u64 {
    (size - 4).max(inca_sim::nodes::host::MIN_PROBE_FRAME as u64)
}

/// The trace's frame sizes and their weights.
pub fn trace_sizes(trace: &str) -> Result<BTreeMap<u64, u64>, String> {
    let mut m = BTreeMap::new();
    match trace {
        "a" => {
            m.insert(frame_of(64), 1);
        }
        "b" => {
            // 40 % over the 37 sizes 64..=100, 60 % over the 119 sizes
            // 1,400..=1,518: weights 40 × 119 and 60 × 37 a size.
            for s in 64..=100 {
                *m.entry(frame_of(s)).or_insert(0) += 40 * 119;
            }
            for s in 1_400..=1_518 {
                *m.entry(frame_of(s)).or_insert(0) += 60 * 37;
            }
        }
        other => {
            return Err(format!(
                "trace: {other:?} is not one of {}",
                TRACES.join(", ")
            ))
        }
    }
    Ok(m)
}

/// Mean frame of a size mix.
fn mean(sizes: &BTreeMap<u64, u64>) -> f64 {
    let total: u64 = sizes.values().sum();
    sizes.iter().map(|(s, w)| (*s * *w) as f64).sum::<f64>() / total.max(1) as f64
}

/// One run with `p` and `seed`, CLIP's devices built by `clip`.
pub fn run(p: &Params, seed: u64, clip: Arc<dyn System>) -> Result<ExperimentRun, String> {
    p.check_known(NAME, PARAMS).map_err(param_err)?;
    let config = p.text("config").unwrap_or("clip");
    let promotion = match config {
        "clip" => "off",
        "clip-offload" => "sketch",
        other => {
            return Err(format!(
                "config: {other:?} is not one of {}",
                CONFIGS.join(", ")
            ))
        }
    };
    let trace = p.text("trace").unwrap_or("a");
    let sizes = trace_sizes(trace)?;
    let cores = p.number("cores", 8, 1, 256).map_err(param_err)?;
    let flows = p.number("flows", 16_384, 1, 1 << 24).map_err(param_err)?;
    let zipf = number(p, "zipf", 1.0, 0.0, 10.0)?;
    let max_pps = number(p, "max_mpps", 25.0, 0.001, 1_000.0)? * 1e6;
    let t_report = p.number("t_report_ms", 250, 1, 60_000).map_err(param_err)?;
    let n_top = p.number("n_top", 256, 1, 65_535).map_err(param_err)?;
    let ms = |name: &str, default: u64| {
        p.number(name, default, 1, 3_600_000)
            .map(|v| v * 1_000_000)
            .map_err(param_err)
    };
    let warmup = ms("warmup_ms", 1_000)?;
    let measure = ms("measure_ms", 250)?;
    let slowdown = p.number("slowdown", 1, 1, 1_000).map_err(param_err)?;
    let mean_frame = mean(&sizes);
    let line = LINK_BPS as f64 / ((mean_frame + WIRE_OVERHEAD as f64) * 8.0);
    let gen_pps = line.min(max_pps).floor() as u64;
    let pps = (gen_pps / slowdown).max(1);
    let size = if sizes.len() == 1 {
        sizes.keys().next().copied().unwrap_or(0).to_string()
    } else {
        let mix: Vec<String> = sizes.iter().map(|(s, w)| format!("[{s}, {w}]")).collect();
        format!("{{ mix = [{}] }}", mix.join(", "))
    };
    let (start, stop) = (START_NS, START_NS + warmup + measure);
    let server = |id: u64, lo: u32, hi: u32| {
        format!(
            "clip{id}.params={{ app = \"snat\", server_id = {id}, cores = {cores}, pool = {{ base_ip = \"198.51.100.1\", lo = {lo}, hi = {hi} }} }}"
        )
    };
    let mut set = vec![
        "clip.program=\"clip_snat\"".to_string(),
        format!(
            "clip.params={{ servers = \"1:2,2:3\", group = \"1,2\", route_port = 1, promotion = \"{promotion}\", t_report_ms = {t_report}, n_top = {n_top} }}"
        ),
        server(1, 1_024, 33_279),
        server(2, 33_280, 65_535),
        format!("gen.workload.load.pps={pps}"),
        format!("gen.workload.load.size={size}"),
        format!("gen.workload.load.flows={flows}"),
        format!("gen.workload.load.zipf={zipf}"),
        format!("gen.workload.load.start=\"{start}ns\""),
        format!("gen.workload.load.stop=\"{stop}ns\""),
        format!("duration=\"{stop}ns\""),
    ];
    set.extend(server_slowdown(slowdown));
    let mut tb = Testbed::build(&set, seed, clip)?;
    tb.run_until(start + warmup);
    let a = tb.snapshot()?;
    tb.run_until(stop);
    let b = tb.snapshot()?;
    let r = rates(&a, &b);
    let run = tb.run_report();
    let switch = |k: &str| sum_counter(&run, "switch", k);
    let server = |k: &str| sum_counter(&run, "server", k);
    let result = counters(&[
        ("generator_pps", pps),
        ("mean_frame_bytes", mean_frame.round() as u64),
        ("offered_pps", r.offered_pps),
        ("delivered_pps", r.delivered_pps),
        ("delivered_l2_mbps", r.delivered_l2_mbps),
        (
            "server_drops",
            server("rx_ring_drops") + server("rx_buffer_drops"),
        ),
        ("switch_fast", switch("clip_fast")),
        ("promoted", switch("promo_installed")),
        ("reordered", sum_counter(&run, "host", "rx_reordered")),
        ("rounds", switch("promo_rounds")),
        ("allocated", server("nf_app_allocated")),
    ]);
    let line = format!(
        "{config}, trace {trace}, {cores} core(s) a server: offered {:.2} Mpps, delivered {:.2} Mpps, {:.2} Gbit/s L2",
        r.offered_pps as f64 / 1e6,
        r.delivered_pps as f64 / 1e6,
        r.delivered_l2_mbps as f64 / 1e3
    );
    let mut out = run.with_result("result", result);
    out.highlights.push(line);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::ClipSystem;

    #[test]
    fn trace_b_is_forty_percent_small_and_sixty_percent_large() {
        let b = trace_sizes("b").unwrap();
        let total: u64 = b.values().sum();
        let small: u64 = b.iter().filter(|(s, _)| **s < 200).map(|(_, w)| w).sum();
        assert_eq!(small * 10, total * 4);
        // Frames: 66-96 B (sizes 64-100 less the FCS, at least the probe's
        // 66) and 1,396-1,514 B.
        assert_eq!(b.keys().next(), Some(&66));
        assert_eq!(b.keys().last(), Some(&1_514));
        assert_eq!(b.len(), 31 + 119);
        assert_eq!(
            trace_sizes("a").unwrap().into_iter().collect::<Vec<_>>(),
            vec![(66, 1)]
        );
        assert!((mean(&b) - 904.3).abs() < 1.0, "{}", mean(&b));
    }

    #[test]
    fn bad_parameters_are_refused_by_name() {
        for (item, name) in [
            ("trace=c", "trace"),
            ("config=nat", "config"),
            ("cores=0", "cores"),
            ("slowdown=0", "slowdown"),
            ("bogus=1", "bogus"),
        ] {
            let p = Params::parse([item]).unwrap();
            let e = run(&p, 1, Arc::new(ClipSystem)).err().unwrap();
            assert!(e.contains(name), "{item}: {e}");
        }
    }
}
