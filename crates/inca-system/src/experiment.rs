//! Built-in experiments: a system's rig, driven by a script rather than
//! written as a scenario file, that `inca sweep` runs like a scenario.
//!
//! Some experiments need a harness no scenario file can state (SwiSh's
//! window-advance clock read off a replica, a controller's recovery timed
//! from the failure). A system registers each as a [`BuiltinExperiment`]:
//! a function from named parameters and a seed to an [`ExperimentRun`],
//! the same node and link reports a scenario run produces. A sweep
//! descriptor names it with `experiment = "NAME"` instead of `scenario`;
//! its `set` overrides and axes then set the experiment's parameters
//! (`cols=65536`), and its plots read the results folder as they read a
//! scenario's (`y = { counter = "result/p99_ns" }`).
//!
//! [our choice] The run is a simulation like any other: its numbers come
//! out of the devices it built; an experiment may add computed reports
//! (a percentile over a replica's advance log, say) under node names of
//! its own, kind [`RESULT_KIND`].

use std::path::Path;
use std::time::Instant;

use inca_apps::params::Params;
use inca_sim::engine::Simulation;
use inca_sim::metrics::{write_results, LinkReport, NodeReport, RunSummary};
use inca_switch::device::Nanos;

/// The kind of a report an experiment computed rather than a device made.
pub const RESULT_KIND: &str = "result";

/// An experiment a system offers to `inca sweep`.
#[derive(Debug, Clone, Copy)]
pub struct BuiltinExperiment {
    /// Its name in descriptors (`experiment = "..."`; unique over all
    /// registered systems).
    pub name: &'static str,
    /// What one run does.
    pub about: &'static str,
    /// The parameters it takes (anything else is refused, by name).
    pub params: &'static [&'static str],
    /// Runs it once with `params` and the seed.
    pub run: fn(&Params, u64) -> Result<ExperimentRun, String>,
}

/// What one run of a built-in experiment produced.
#[derive(Debug, Default)]
pub struct ExperimentRun {
    /// Simulated time covered.
    pub duration: Nanos,
    /// Events the simulator processed.
    pub events: u64,
    /// Every report: (node name, kind, report).
    pub nodes: Vec<(String, &'static str, NodeReport)>,
    /// Every link direction's report.
    pub links: Vec<LinkReport>,
    /// Lines for people (what happened), written into the summary.
    pub highlights: Vec<String>,
}

impl ExperimentRun {
    /// The reports of `sim` after it ran to `duration`.
    pub fn from_sim(sim: &Simulation, duration: Nanos) -> ExperimentRun {
        ExperimentRun {
            duration,
            events: sim.stats().events,
            nodes: sim.node_reports(),
            links: sim.link_reports(),
            highlights: Vec::new(),
        }
    }

    /// Adds a computed report under `name` (kind [`RESULT_KIND`]).
    pub fn with_result(mut self, name: &str, report: NodeReport) -> ExperimentRun {
        self.nodes.push((name.to_string(), RESULT_KIND, report));
        self
    }
}

/// Parameters from sweep overrides (`KEY=VALUE`, the value as TOML: a
/// quoted string loses its quotes, anything else is taken as written).
pub fn params_from_overrides(set: &[String]) -> Result<Params, String> {
    let mut items = Vec::with_capacity(set.len());
    for o in set {
        let (k, v) = o
            .split_once('=')
            .ok_or_else(|| format!("{o:?} is not KEY=VALUE"))?;
        let v = v.trim();
        let v = if v.starts_with('"') {
            match toml::from_str::<toml::Table>(&format!("v = {v}")) {
                Ok(t) => match t.get("v") {
                    Some(toml::Value::String(s)) => s.clone(),
                    _ => v.to_string(),
                },
                Err(e) => return Err(format!("{k}: {e}")),
            }
        } else {
            v.to_string()
        };
        items.push(format!("{}={v}", k.trim()));
    }
    Params::parse(items.iter().map(String::as_str)).map_err(|e| e.to_string())
}

impl BuiltinExperiment {
    /// Checks `params` against the parameters it takes.
    pub fn check(&self, params: &Params) -> Result<(), String> {
        params
            .check_known(self.name, self.params)
            .map_err(|e| e.to_string())
    }

    /// Runs it with `params` and `seed` and writes the results folder into
    /// `dir` (as a scenario run writes it); returns the wall seconds.
    pub fn run_into(&self, params: &Params, seed: u64, dir: &Path) -> Result<f64, String> {
        self.check(params)?;
        let wall = Instant::now();
        let run = (self.run)(params, seed)?;
        let wall_seconds = wall.elapsed().as_secs_f64();
        let summary = RunSummary {
            scenario: self.name.to_string(),
            seed,
            duration_ns: run.duration,
            bin_ns: run.links.first().map_or(0, |l| l.throughput_bytes.bin),
            events: run.events,
            frames_delivered: 0,
            wall_seconds,
            faults: Vec::new(),
            highlights: run.highlights,
        };
        write_results(dir, &summary, &run.nodes, &run.links)
            .map_err(|e| format!("cannot write results to {}: {e}", dir.display()))?;
        Ok(wall_seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_become_parameters_with_strings_unquoted() {
        let p = params_from_overrides(&["cols=64".into(), "topology=\"local-2\"".into()]).unwrap();
        assert_eq!(p.text("cols"), Some("64"));
        assert_eq!(p.text("topology"), Some("local-2"));
        assert!(params_from_overrides(&["cols".into()]).is_err());
    }
}
