//! Checks over a finished simulated run.
//!
//! Two sources of violations: the devices' own run-time assertions, which
//! they count in their reports as `invariant_violations` with a note saying
//! what failed, and the driver's check of the device contract (an output
//! timed before the call that made it, [`Simulation::contract_violations`])
//! — both in [`device_violations`] — and checks that need more than one
//! device's view, such as a per-key linearizability check over a history
//! recorded across several switches ([`RunCheck`]).

use std::collections::BTreeMap;

use inca_sim::engine::Simulation;

use crate::campaign_results::SeedResult;

/// What a run check found and what it judged to find it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Judgement {
    /// One message per violation, each saying what, where and when (empty:
    /// the run passed).
    pub violations: Vec<String>,
    /// What was judged, by name (`"redplane: flows judged by Checker A"`,
    /// `"exoplane: op-log entries (P3, P4)"`): a campaign sums them and
    /// fails if they are all zero, so "no violations" never means "nothing
    /// looked".
    pub judged: BTreeMap<String, u64>,
}

impl Judgement {
    /// Adds `n` to the count called `what`.
    pub fn count(&mut self, what: &str, n: u64) {
        *self.judged.entry(what.to_string()).or_default() += n;
    }

    /// Adds another judgement's violations and counts to this one.
    pub fn merge(&mut self, other: Judgement) {
        self.violations.extend(other.violations);
        for (what, n) in other.judged {
            self.count(&what, n);
        }
    }
}

/// A check over a finished run that needs more than one device's view (a
/// per-flow linearizability check over the recorded history, say).
pub trait RunCheck {
    /// Checks the run: its violations and the counts of what it judged.
    fn judge(&self, sim: &Simulation) -> Judgement;

    /// Checks the run: one message per violation, each saying what, where
    /// and when; empty means it passed.
    fn check(&self, sim: &Simulation) -> Vec<String> {
        self.judge(sim).violations
    }
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

/// The result of `seed`'s finished run `sim` judged `judgement`: the faults
/// it injected (log and tally by kind), what was found and judged, and the
/// events it processed.
pub fn seed_result(seed: u64, sim: &Simulation, judgement: Judgement) -> SeedResult {
    let Judgement { violations, judged } = judgement;
    SeedResult {
        seed,
        faults: sim.fault_log.clone(),
        kinds: sim
            .fault_tally
            .iter()
            .map(|(k, n)| (k.to_string(), *n))
            .collect(),
        violations,
        judged,
        notes: Vec::new(),
        events: sim.stats().events,
    }
}
