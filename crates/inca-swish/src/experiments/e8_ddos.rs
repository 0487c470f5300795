//! Experiment 8, DDoS pass ratio (specs/swish.md §8.2 E8, Fig. 5a/5b):
//! attackers each send `pkts` packets to as many distinct destinations at
//! `pps`, spread over two spines by destination parity; the spines run the
//! §7 detector on SDW or as the pull or push baseline. One run reports each
//! source's received/sent ratio at the sink: counter `result/mean_pass_ppm`
//! and histogram `result/pass_ppm` (parts per million).
//!
//! [our choice, scale] The spec's setup (10K packets per source at 10 Kpps,
//! sources arriving at up to 5K/s, a 32K-column sketch) is tens of millions
//! of packets per second of attack traffic plus SDW's sync traffic; a run
//! here admits `sources` sources `1/rate` apart (the descriptor's scale),
//! keeps each source's rate and packet count, and paces SDW windows to
//! `min_window_us` (so a query lags by up to ~3 windows, a few packets of
//! a 10 Kpps source).

use inca_apps::params::{ParamError, Params};
use inca_system::{BuiltinExperiment, ExperimentRun};

use crate::ddos::rig::{DdosRig, DdosRigConfig, Detector};

/// The parameters.
pub const PARAMS: &[&str] = &[
    "detector",
    "rate",
    "sources",
    "pkts",
    "pps",
    "cols",
    "min_window_us",
    "t_chk_us",
    "t_pull_ms",
];

/// The experiment.
pub fn experiments() -> Vec<BuiltinExperiment> {
    vec![BuiltinExperiment {
        name: "swish-e8-ddos",
        about: "DDoS pass ratio per source: the detector on SDW vs the pull and push baselines",
        params: PARAMS,
        run,
    }]
}

/// The rig configuration named by `p`.
pub fn config(p: &Params, seed: u64) -> Result<DdosRigConfig, ParamError> {
    p.check_known("swish-e8-ddos", PARAMS)?;
    let d = DdosRigConfig::default();
    let detector = match p.text("detector").unwrap_or("sdw") {
        "sdw" => Detector::Sdw,
        "pull" => Detector::Pull,
        "push" => Detector::Push,
        _ => {
            return Err(ParamError::Value {
                name: "detector".into(),
                reason: "sdw, pull or push".into(),
            })
        }
    };
    Ok(DdosRigConfig {
        detector,
        seed,
        rate: p.count("rate", d.rate, 1_000_000)?,
        sources: p.count("sources", u64::from(d.sources), 1_000_000)? as u32,
        pkts: p.count("pkts", u64::from(d.pkts), 10_000_000)? as u32,
        pps: p.count("pps", d.pps, 100_000_000)?,
        cols: p.count("cols", u64::from(d.cols), 1 << 20)? as u32,
        min_window: p.number("min_window_us", d.min_window / 1_000, 0, 1_000_000)? * 1_000,
        t_chk: p.count("t_chk_us", d.t_chk / 1_000, 1_000_000)? * 1_000,
        t_pull: p.count("t_pull_ms", d.t_pull / 1_000_000, 100_000)? * 1_000_000,
        ..d
    })
}

fn run(p: &Params, seed: u64) -> Result<ExperimentRun, String> {
    let cfg = config(p, seed).map_err(|e| e.to_string())?;
    let mut rig = DdosRig::build(&cfg)?;
    let out = rig.run()?;
    Ok(ExperimentRun::from_sim(&rig.sim, out.duration).with_result("result", out.report()))
}
