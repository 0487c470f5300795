//! Running a built scenario: simulate, collect every report, write the
//! results folder, and say what happened.

use std::path::Path;
use std::time::Instant;

use inca_switch::device::Nanos;
use inca_switch::units::{format_bytes, format_time};

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
    if stats.telemetry_stamps + stats.telemetry_overflows > 0 {
        highlights.push(format!(
            "telemetry: {} stamps appended to probes, {} not (stack full)",
            stats.telemetry_stamps, stats.telemetry_overflows
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

/// The device's own drop counters (a program's counters may also end in
/// `_drops` and count the same packets again).
const DEVICE_DROPS: &[&str] = &[
    "tm_drops",
    "parse_drops",
    "program_drops",
    "violation_drops",
    "bad_port_drops",
    "feature_drops",
    "input_drops",
    "pass_limit_drops",
    "no_group_drops",
    "punt_drops",
];

/// One line about a programmable device (kind `switch` or `smartnic`) from
/// its report: packets in and out per port, drops, table occupancy, DRAM
/// use and control-channel work. `None` for other kinds.
pub fn device_line(name: &str, kind: &str, r: &crate::metrics::NodeReport) -> Option<String> {
    if kind != "switch" && kind != "smartnic" {
        return None;
    }
    let c = |k: &str| r.counters.get(k).copied().unwrap_or(0);
    let mut ports = Vec::new();
    let mut tables = Vec::new();
    let mut drops = 0;
    for (k, &v) in &r.counters {
        if let Some(p) = k
            .strip_suffix(".rx_packets")
            .filter(|p| p.starts_with("port"))
        {
            ports.push(format!("{p} {v}/{}", c(&format!("{p}.tx_packets"))));
        } else if let Some(t) = k
            .strip_prefix("table.")
            .and_then(|t| t.strip_suffix(".entries"))
        {
            tables.push(format!("{t} {v}/{}", c(&format!("table.{t}.capacity"))));
        } else if DEVICE_DROPS.contains(&k.as_str()) {
            drops += v;
        }
    }
    let program = r
        .notes
        .iter()
        .find_map(|n| n.strip_prefix("program "))
        .and_then(|n| n.split_whitespace().next())
        .unwrap_or("?");
    let mut line = format!(
        "{name} ({kind}, {program}): {} in, {} out (port rx/tx: {}), {drops} dropped",
        c("rx_packets"),
        c("tx_packets"),
        ports.join(", ")
    );
    if !tables.is_empty() {
        line += &format!("; tables {}", tables.join(", "));
    }
    if c("dram_used_bytes") > 0 {
        line += &format!(
            " ({} of {} DRAM)",
            format_bytes(c("dram_used_bytes")),
            format_bytes(c("dram_bytes"))
        );
    }
    line += &format!(
        "; control plane {} ops in {} RPCs, {} punts",
        c("cp_ops"),
        c("cp_rpcs"),
        c("punts")
    );
    Some(line)
}
