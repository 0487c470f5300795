//! Checks over a finished simulated run.
//!
//! Two sources of violations: the devices' own run-time assertions, which
//! they count in their reports as `invariant_violations` with a note saying
//! what failed, and the driver's check of the device contract (an output
//! timed before the call that made it, [`Simulation::contract_violations`])
//! — both in [`device_violations`] — and checks that need more than one
//! device's view, such as a per-key linearizability check over a history
//! recorded across several switches ([`RunCheck`]).

use inca_sim::engine::Simulation;

use crate::campaign_results::SeedResult;

/// A check over a finished run that needs more than one device's view (a
/// per-flow linearizability check over the recorded history, say). Returns
/// one message per violation, each saying what, where and when.
pub trait RunCheck {
    /// Checks the run; empty means it passed.
    fn check(&self, sim: &Simulation) -> Vec<String>;
}

/// The failed run-time assertions the devices of `sim` counted: per node
/// with a non-zero `invariant_violations` counter, one line with the count
/// and one per note of that node; and one line if any device broke the
/// device contract, naming the first breach.
pub fn device_violations(sim: &Simulation) -> Vec<String> {
    let mut violations = Vec::new();
    let breaches = sim.contract_violations();
    if breaches > 0 {
        violations.push(format!(
            "contract_violation: {breaches} outputs before their call's time (first: {})",
            sim.first_contract_violation().unwrap_or("?")
        ));
    }
    for (name, _, report) in sim.node_reports() {
        if let Some(&n) = report.counters.get("invariant_violations") {
            if n > 0 {
                violations.push(format!("{name}: {n} invariant violations"));
                violations.extend(report.notes.iter().map(|note| format!("{name}: {note}")));
            }
        }
    }
    violations
}

/// The result of `seed`'s finished run `sim` with `violations`: the faults
/// it injected (log and tally by kind) and the events it processed.
pub fn seed_result(seed: u64, sim: &Simulation, violations: Vec<String>) -> SeedResult {
    SeedResult {
        seed,
        faults: sim.fault_log.clone(),
        kinds: sim
            .fault_tally
            .iter()
            .map(|(k, n)| (k.to_string(), *n))
            .collect(),
        violations,
        notes: Vec::new(),
        events: sim.stats().events,
    }
}
