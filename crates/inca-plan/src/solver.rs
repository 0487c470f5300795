//! What both formulations share: the HiGHS call, solver options, the
//! solution and the infeasibility report.

use std::time::Instant;

use highs::{HighsModelStatus, RowProblem, Sense};
use serde::Serialize;

use crate::model::{Assignment, Instance};

/// Solver options.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SolveOptions {
    /// HiGHS's `mip_rel_gap`: HiGHS's default 1e-4 (on a mean latency of
    /// ~1 µs, within 0.1 ns of the optimum); tests that compare optima use 0.
    pub mip_rel_gap: f64,
    /// HiGHS's `time_limit`, seconds.
    pub time_limit: f64,
    /// HiGHS's `threads` [our choice: 1, so timings do not depend on what
    /// else runs].
    pub threads: i32,
}

impl Default for SolveOptions {
    fn default() -> Self {
        SolveOptions {
            mip_rel_gap: 1e-4,
            time_limit: 600.0,
            threads: 1,
        }
    }
}

/// A solved instance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Solution {
    /// Where every quantum is.
    pub assignment: Assignment,
    /// The objective (4.5), recomputed from the assignment, ns.
    pub objective: f64,
    /// Columns and rows of the ILP.
    pub columns: usize,
    /// Rows of the ILP.
    pub rows: usize,
    /// HiGHS's own run time (`Highs_getRunTime`), seconds.
    pub highs_seconds: f64,
    /// Wall time of building and solving the model, seconds.
    pub wall_seconds: f64,
}

/// Why an instance has no solution.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize)]
pub enum SolveError {
    /// The constraints cannot all hold; `failing` names them.
    #[error("infeasible: {}", .failing.join("; "))]
    Infeasible {
        /// The constraints that fail, each a sentence naming it.
        failing: Vec<String>,
    },
    /// HiGHS stopped without an optimum (time limit, numerical trouble).
    #[error("the solver stopped without an optimum: {0}")]
    Solver(String),
}

/// Outcome of one HiGHS run.
pub(crate) struct Run {
    pub status: HighsModelStatus,
    pub columns: Vec<f64>,
    pub highs_seconds: f64,
    pub wall_seconds: f64,
    pub ncols: usize,
    pub nrows: usize,
}

/// Solves `pb` (minimising) with `opts`.
pub(crate) fn run(pb: RowProblem, opts: &SolveOptions, started: Instant) -> Run {
    let ncols = pb.num_cols();
    let nrows = pb.num_rows();
    let mut model = pb.optimise(Sense::Minimise);
    model.make_quiet();
    model.set_option("mip_rel_gap", opts.mip_rel_gap);
    model.set_option("time_limit", opts.time_limit);
    model.set_option("threads", opts.threads);
    model.set_option("random_seed", 0);
    let solved = model.solve();
    // SAFETY: `solved` owns a live Highs object; the call only reads it.
    let highs_seconds = unsafe { highs_sys::Highs_getRunTime(solved.as_ptr()) };
    let status = solved.status();
    let columns = if status == HighsModelStatus::Optimal {
        solved.get_solution().columns().to_vec()
    } else {
        Vec::new()
    };
    Run {
        status,
        columns,
        highs_seconds,
        wall_seconds: started.elapsed().as_secs_f64(),
        ncols,
        nrows,
    }
}

/// Quanta that have nowhere to go: (4.1) cannot hold, whatever the
/// capacities. Each names the app and why.
pub fn structural_failures(inst: &Instance) -> Vec<String> {
    let mut out = Vec::new();
    for (p, a) in inst.apps.iter().enumerate() {
        if a.quanta() == 0 {
            continue;
        }
        // Quanta past the switch limit can go only to devices.
        let q = a.quanta() - 1;
        if inst.allowed(p, q).is_empty() {
            let why = match a.affinity {
                crate::model::Affinity::High => format!(
                    "affinity HIGH needs all {} quanta on the switch but at most {} fit there alone",
                    a.quanta(),
                    a.switch_quantum.len()
                ),
                _ if inst.devices() == 0 || a.device.iter().all(Option::is_none) => format!(
                    "(4.2) none of the {} devices is compatible and {} of its {} quanta do not fit on the switch",
                    inst.devices(),
                    a.quanta() - a.switch_limit(),
                    a.quanta()
                ),
                _ => "no location allowed".to_string(),
            };
            out.push(format!("(4.1) app {}: {why}", a.name));
        }
    }
    out
}

/// Round a solver value to the integer it stands for.
pub(crate) fn int(v: f64) -> usize {
    v.round().max(0.0) as usize
}
