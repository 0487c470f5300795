//! E5, SNAT latency (spec §8.2, the paper's Table I): one server, one
//! worker core; 16,384 flows, each packet's flow drawn from Zipf(1.0),
//! 64-byte packets at 0.5 Mpps; a warm-up, then a measured window. The
//! figure: the sink's one-way latency over the window (mean, p50, p99).
//!
//! Configurations (`config`):
//! - `clip` — CLIP without offload: `clip_snat` on the switch with
//!   `promotion = "off"`, its `nat_table` never filled, so every packet is
//!   a request to server 1, which allocates a translation on a flow's
//!   first packet and looks it up after.
//! - `clip-offload` — CLIP with CMS offload: the same with `promotion =
//!   "sketch"`: the controller on the switch CPU asks the server for its
//!   top-N every 250 ms (N = 256) and installs the heaviest flows'
//!   translations (which the server reported as created) in the 1,024
//!   entries of `nat_table`, whose packets then stay in the switch (§5.5).
//! - `software` — the software SNAT baseline: the switch only steers by
//!   port (a `composite` of two ACLs: generator port → the sw_nat server's
//!   inside port, its outside port → the sink), the server translates.
//! - `switch-path` — a reference, not a SNAT: `clip_null` with
//!   `flight = 0`, every packet forwarded by the switch alone in one pass.
//!   It is the floor an offloaded flow's packets approach (a `nat_table`
//!   hit is the same single pass plus a rewrite) [our choice: an addition
//!   to the spec's three configurations, a yardstick for the others].
//!
//! Parameters: `config`, `flows` (16,384), `zipf` (1.0), `pps` (500,000),
//! `size` (64, with FCS as the spec counts it; the generator's frames are
//! at least 66 B without FCS), `cores` (1), `warmup_ms` (5,000, at least
//! 2: traffic starts at 0 and the switch's static set-up takes about the
//! first millisecond, whose packets it drops),
//! `measure_ms` (10,000), `drain_ms` (1).
//!
//! Reports under `result`: histogram `latency` (the window's samples) and
//! counters `count`, `mean_ns`, `p50_ns`, `p90_ns`, `p99_ns`, `sent`,
//! `received` (in the window).

use std::sync::Arc;

use inca_apps::params::Params;
use inca_system::{BuiltinExperiment, ExperimentRun, System};

use super::rig::{counters, window, Testbed};
use super::{number, param_err};

/// The experiment's name.
pub const NAME: &str = "clip-snat-latency";
const PARAMS: &[&str] = &[
    "config",
    "flows",
    "zipf",
    "pps",
    "size",
    "cores",
    "warmup_ms",
    "measure_ms",
    "drain_ms",
];
/// The configurations.
pub const CONFIGS: [&str; 4] = ["clip", "software", "clip-offload", "switch-path"];

/// E5, running `run` (which hands [`run`] the CLIP system).
pub fn experiment(run: fn(&Params, u64) -> Result<ExperimentRun, String>) -> BuiltinExperiment {
    BuiltinExperiment {
        name: NAME,
        about: "CLIP §8.2 E5 (Table I): SNAT on one server core, 16,384 Zipf(1.0) flows of 64 B at 0.5 Mpps; latency after a warm-up for CLIP without offload (config=clip), with CMS offload (config=clip-offload), software SNAT (config=software) and the switch path alone (config=switch-path, a reference)",
        params: PARAMS,
        run,
    }
}

/// The overrides of configuration `config` with `cores` worker cores.
/// Both CLIP servers stay configured on the switch (server 2 outside the
/// group), so server 2's heartbeats reach the controller rather than being
/// taken for traffic on a network port.
fn config_set(config: &str, cores: u64) -> Result<Vec<String>, String> {
    let snat = |promotion: &str| {
        vec![
            "clip.program=\"clip_snat\"".into(),
            format!(
                "clip.params={{ servers = \"1:2,2:3\", group = \"1\", route_port = 1, promotion = \"{promotion}\" }}"
            ),
            format!(
                "clip1.params={{ app = \"snat\", server_id = 1, cores = {cores}, pool = {{ base_ip = \"198.51.100.1\", lo = 1024, hi = 65535 }} }}"
            ),
        ]
    };
    Ok(match config {
        "clip" => snat("off"),
        "clip-offload" => snat("sketch"),
        "software" => vec![
            "clip.program=\"composite\"".into(),
            "clip.params={ apps = \"in:acl,out:acl\", classify = \"in:port=0;out:port=5\", \"in.out_port\" = 4, \"out.out_port\" = 1 }".into(),
            format!("swnat.params.cores={cores}"),
        ],
        "switch-path" => vec![
            "clip.params={ servers = \"1:2,2:3\", group = \"1\", route_port = 1, flight = 0 }".into(),
        ],
        other => {
            return Err(format!(
                "config: {other:?} is not one of {}",
                CONFIGS.join(", ")
            ))
        }
    })
}

/// One run with `p` and `seed`, CLIP's devices built by `clip`.
pub fn run(p: &Params, seed: u64, clip: Arc<dyn System>) -> Result<ExperimentRun, String> {
    p.check_known(NAME, PARAMS).map_err(param_err)?;
    let config = p.text("config").unwrap_or("clip");
    let flows = p.number("flows", 16_384, 1, 1 << 24).map_err(param_err)?;
    let zipf = number(p, "zipf", 1.0, 0.0, 10.0)?;
    let pps = p
        .number("pps", 500_000, 1, 100_000_000)
        .map_err(param_err)?;
    let size = p.number("size", 64, 64, 9_000).map_err(param_err)?;
    let cores = p.number("cores", 1, 1, 256).map_err(param_err)?;
    let warmup = p
        .number("warmup_ms", 5_000, 2, 3_600_000)
        .map_err(param_err)?
        * 1_000_000;
    let measure = p
        .number("measure_ms", 10_000, 1, 3_600_000)
        .map_err(param_err)?
        * 1_000_000;
    let drain = p.number("drain_ms", 1, 0, 60_000).map_err(param_err)? * 1_000_000;
    let frame = (size - 4).max(inca_sim::nodes::host::MIN_PROBE_FRAME as u64);
    let stop = warmup + measure;
    let end = stop + drain;
    let mut set = config_set(config, cores)?;
    set.extend([
        format!("gen.workload.load.pps={pps}"),
        format!("gen.workload.load.size={frame}"),
        format!("gen.workload.load.flows={flows}"),
        format!("gen.workload.load.zipf={zipf}"),
        "gen.workload.load.start=\"0ns\"".into(),
        format!("gen.workload.load.stop=\"{stop}ns\""),
        format!("duration=\"{end}ns\""),
    ]);
    let mut tb = Testbed::build(&set, seed, clip)?;
    tb.run_until(warmup);
    let a = tb.snapshot()?;
    tb.run_until(end);
    let b = tb.snapshot()?;
    let lat = window(&a.latency, &b.latency);
    let s = lat.summary();
    let mut result = counters(&[
        ("count", s.count),
        ("mean_ns", s.mean.round() as u64),
        ("p50_ns", s.p50),
        ("p90_ns", s.p90),
        ("p99_ns", s.p99),
        ("sent", b.sent - a.sent),
        ("received", b.received - a.received),
    ]);
    result.histograms.insert("latency".into(), lat);
    let mut run = tb.run_report().with_result("result", result);
    run.highlights.push(format!(
        "{config}: {} packets measured after {} ms; latency mean {:.0} ns, p50 {} ns, p99 {} ns",
        s.count,
        warmup / 1_000_000,
        s.mean,
        s.p50,
        s.p99
    ));
    Ok(run)
}
