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

use inca_apps::params::Params;
use inca_sim::engine::Simulation;
use inca_sim::metrics::{LinkReport, NodeReport};
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
