//! Running a built scenario: simulate, collect every report, write the
//! results folder, and say what happened.

use std::path::Path;
use std::time::Instant;

use inca_switch::device::Nanos;
use inca_switch::units::format_time;

use crate::metrics::{write_results, LinkReport, NodeReport, RunSummary};
use crate::scenario::{Built, ScenarioError};

/// Everything a run produced.
pub struct RunOutput {
    /// The summary (also `summary.json`).
    pub summary: RunSummary,
    /// Every node's report.
    pub nodes: Vec<(String, &'static str, NodeReport)>,
    /// Every link direction's report.
    pub links: Vec<LinkReport>,
}

/// Runs `built` to its duration, calling `progress` with the virtual time
/// now and then, and writes the results into `out` if given.
pub fn run(
    mut built: Built,
    scenario: &str,
    out: Option<&Path>,
    progress: impl FnMut(Nanos),
) -> Result<RunOutput, ScenarioError> {
    let wall = Instant::now();
    built.sim.run_until(built.duration, progress);
    let wall_seconds = wall.elapsed().as_secs_f64();
    built
        .sim
        .finish_captures()
        .map_err(|e| ScenarioError(format!("capture: {e}")))?;
    let nodes = built.sim.node_reports();
    let links = built.sim.link_reports();
    let stats = built.sim.stats();
    let mut highlights = Vec::new();
    if stats.contract_violations > 0 {
        highlights.push(format!(
            "contract_violation: {} outputs before their call's time (first: {})",
            stats.contract_violations,
            built.sim.first_contract_violation().unwrap_or("?")
        ));
    }
    for (t, what) in &built.sim.fault_log {
        highlights.push(format!("{:>10}  fault: {what}", format_time(*t)));
    }
    for i in 0..built.sim.session_count() {
        let Some(s) = built.sim.session(crate::session::SessionIdx(i as u32)) else {
            continue;
        };
        let [a, b] = s.stats;
        highlights.push(format!(
            "session {}: {} + {} messages delivered, {} retransmits, {} resets, {} messages lost, {} refused",
            s.name,
            b.messages_received,
            a.messages_received,
            a.retransmits + b.retransmits,
            s.resets,
            a.messages_lost + b.messages_lost,
            a.refused + b.refused
        ));
    }
    for (name, kind, report) in &nodes {
        if *kind == "host" {
            for note in &report.notes {
                highlights.push(format!("{name}: {note}"));
            }
        }
    }
    let summary = RunSummary {
        scenario: scenario.to_string(),
        seed: built.sim.seed(),
        duration_ns: built.duration,
        bin_ns: links.first().map_or(0, |l| l.throughput_bytes.bin),
        events: stats.events,
        frames_delivered: stats.frames_delivered,
        wall_seconds,
        faults: built.sim.fault_log.clone(),
        highlights,
    };
    if let Some(dir) = out {
        write_results(dir, &summary, &nodes, &links).map_err(|e| {
            ScenarioError(format!("cannot write results to {}: {e}", dir.display()))
        })?;
    }
    Ok(RunOutput {
        summary,
        nodes,
        links,
    })
}
