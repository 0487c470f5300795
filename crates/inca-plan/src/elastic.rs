//! Naming what makes an instance infeasible: re-solve with a slack column
//! on every capacity row, each unit of slack costing far more than any
//! latency, and report the rows whose slack is used. Those rows are a
//! witness: with that much more capacity the plan would exist.

use std::time::Instant;

use highs::{Col, HighsModelStatus, RowProblem};

use crate::model::Instance;
use crate::solver::{run, SolveOptions};

/// Cost of one unit of slack [our choice: far above any objective, which
/// is a mean latency in ns].
const PENALTY: f64 = 1e9;

/// A column's index (the `highs` crate's `Col` is opaque).
#[derive(Clone, Copy)]
pub(crate) struct ColIdx(pub usize);

/// A model under construction: the HiGHS problem, a column counter (the
/// `highs` crate's columns are opaque) and the named capacity rows with
/// their slack columns when the model is the elastic one.
pub(crate) struct Builder {
    pub pb: RowProblem,
    n: usize,
    elastic: bool,
    named: Vec<(String, Option<ColIdx>, f64)>,
}

impl Builder {
    pub(crate) fn new(elastic: bool) -> Builder {
        Builder {
            pb: RowProblem::default(),
            n: 0,
            elastic,
            named: Vec::new(),
        }
    }

    /// An integer column in `lo..=hi` with objective coefficient `cost`.
    pub(crate) fn int(&mut self, cost: f64, lo: f64, hi: f64) -> (Col, ColIdx) {
        let c = self.pb.add_integer_column(cost, lo..=hi);
        self.n += 1;
        (c, ColIdx(self.n - 1))
    }

    /// A continuous column in `0..` with objective coefficient `cost`.
    pub(crate) fn cont(&mut self, cost: f64) -> (Col, ColIdx) {
        let c = self.pb.add_column(cost, 0.0..);
        self.n += 1;
        (c, ColIdx(self.n - 1))
    }

    /// A free continuous column.
    pub(crate) fn free(&mut self, cost: f64) -> (Col, ColIdx) {
        let c = self.pb.add_column::<f64, _>(cost, ..);
        self.n += 1;
        (c, ColIdx(self.n - 1))
    }

    /// A binary column.
    pub(crate) fn bin(&mut self, cost: f64) -> (Col, ColIdx) {
        self.int(cost, 0.0, 1.0)
    }

    /// Adds `Σ f ≤ cap` named `name` (with a slack if elastic).
    pub(crate) fn cap_row(&mut self, name: String, mut f: Vec<(Col, f64)>, cap: f64) {
        let slack = self.elastic.then(|| {
            let c = self.pb.add_column(PENALTY, 0.0..);
            self.n += 1;
            f.push((c, -1.0));
            ColIdx(self.n - 1)
        });
        self.pb.add_row(..=cap, &f);
        self.named.push((name, slack, cap));
    }
}

/// Builds the elastic model with `build`, solves it and names the rows
/// that need more than their capacity.
pub(crate) fn diagnose(
    _inst: &Instance,
    opts: &SolveOptions,
    build: impl FnOnce() -> Builder,
) -> Vec<String> {
    let b = build();
    let r = run(b.pb, opts, Instant::now());
    if r.status != HighsModelStatus::Optimal {
        return vec![format!(
            "the constraints conflict and the elastic re-solve ended {:?}",
            r.status
        )];
    }
    let failing: Vec<String> = b
        .named
        .iter()
        .filter_map(|(name, slack, cap)| {
            let s = r.columns[slack.as_ref()?.0];
            (s > 1e-6).then(|| format!("{name}: needs {:.1} with {cap:.1} available", cap + s))
        })
        .collect();
    if failing.is_empty() {
        vec!["the integer constraints conflict although every capacity row can hold".into()]
    } else {
        failing
    }
}
