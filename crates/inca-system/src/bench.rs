//! What a row of `inca bench` is, and the timing helpers every benchmark
//! uses, so that a system can offer its own benchmarks
//! ([`crate::System::benches`]) next to the ones `inca bench` holds
//! (crates/inca-bench). The runner and the table stay with `inca bench`.
//!
//! Every benchmark times a fixed amount of work with [`Instant`] after a
//! warm-up of the same work; a rate is units of work over elapsed seconds.

use std::time::{Duration, Instant};

use serde::Serialize;

/// How a benchmark is run.
#[derive(Debug, Clone, Copy)]
pub struct Ctx {
    /// Timed runs (of the benchmark and of its baseline each).
    pub runs: usize,
    /// Smaller amounts of work (a smoke test; figures are noisier).
    pub quick: bool,
}

impl Ctx {
    /// `full` units of work normally, `quick` with `--quick`.
    pub fn size(&self, full: u64, quick: u64) -> u64 {
        if self.quick {
            quick
        } else {
            full
        }
    }
}

/// The median of `samples` (the mean of the middle two for an even count;
/// 0 for none). NaNs sort last and so never become the median of a sample
/// that has real values in its lower half.
pub fn median(samples: &[f64]) -> f64 {
    let mut v = samples.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Units per second of `units` done in `elapsed` (0 for an empty interval).
pub fn rate(units: u64, elapsed: Duration) -> f64 {
    let s = elapsed.as_secs_f64();
    if s > 0.0 {
        units as f64 / s
    } else {
        0.0
    }
}

/// Runs `work` (which returns how many units it did) and returns its rate.
pub fn timed_rate(work: impl FnOnce() -> u64) -> f64 {
    let start = Instant::now();
    let units = work();
    rate(units, start.elapsed())
}

/// The measured work of a `--profile-iterations` run. It only calls `f`,
/// but it is never inlined, so `valgrind --tool=callgrind
/// --collect-atstart=no --toggle-collect='*bench*profiled*'` counts exactly
/// the work and none of the set-up; the instruction count divided by the
/// iterations is the cost of one packet or request.
#[inline(never)]
pub fn profiled<R>(f: impl FnOnce() -> R) -> R {
    std::hint::black_box(f())
}

/// Counts in a loop until `warmup` and then `measure` have passed; returns
/// the count difference and the exact time between the two snapshots. For
/// the live paths, whose work is "whatever arrives in this interval".
pub fn count_over(warmup: Duration, measure: Duration, mut count: impl FnMut() -> u64) -> f64 {
    let start = Instant::now();
    while start.elapsed() < warmup {
        count();
    }
    let (c0, t0) = (count(), Instant::now());
    while t0.elapsed() < measure {
        count();
    }
    let (c1, t1) = (count(), Instant::now());
    rate(c1.saturating_sub(c0), t1 - t0)
}

/// A baseline's outcome.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Baseline {
    /// The benchmark has no baseline.
    None,
    /// Measured side by side: one sample per run.
    Measured {
        /// What the baseline does.
        what: String,
        /// One rate per run.
        samples: Vec<f64>,
    },
    /// It could not be run (a tool missing, say); never silently skipped.
    Missing {
        /// What the baseline would have been.
        what: String,
        /// Why it is missing.
        why: String,
    },
}

impl Baseline {
    /// The baseline's median, when measured.
    pub fn median(&self) -> Option<f64> {
        match self {
            Baseline::Measured { samples, .. } => Some(median(samples)),
            _ => None,
        }
    }
}

/// What one benchmark function returns.
#[derive(Debug, Clone)]
pub struct Measured {
    /// One rate per run.
    pub samples: Vec<f64>,
    /// Its baseline.
    pub baseline: Baseline,
    /// Facts worth keeping next to the figure (work per run, checks).
    pub notes: Vec<String>,
}

/// The target a DESIGN.md budget line sets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Budget {
    /// No budget line for this figure.
    None,
    /// At least this many units per second.
    AtLeast(f64),
    /// More than the baseline (the store over UDP vs redis).
    AboveBaseline,
}

/// A benchmark that could not run (its row says why; the others still run).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct BenchError(Box<dyn std::error::Error + Send + Sync>);

impl BenchError {
    /// Wraps whatever stopped the benchmark.
    pub fn new(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        BenchError(e.into())
    }
}

/// A benchmark function: the samples of `ctx.runs` timed runs.
pub type BenchFn = fn(&Ctx) -> Result<Measured, BenchError>;

/// A profile driver: `n` iterations of the measured work, untimed.
pub type ProfileFn = fn(u64) -> Result<String, BenchError>;

/// A benchmark of the table.
#[derive(Debug, Clone)]
pub struct Bench {
    /// Its name on the command line and in the table.
    pub name: &'static str,
    /// What one unit of work is.
    pub what: &'static str,
    /// The unit of the figure.
    pub unit: &'static str,
    /// The DESIGN.md target, and how it reads.
    pub budget: Budget,
    /// The budget as DESIGN.md words it ("" for none).
    pub budget_text: &'static str,
    /// The benchmark (`None`: not built yet).
    pub run: Option<BenchFn>,
    /// Runs `n` iterations of the measured work once, untimed, for a
    /// profiler (`None`: not profiled); returns what it did.
    pub profile: Option<ProfileFn>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[1.0, f64::NAN, 2.0]), 2.0);
    }

    #[test]
    fn rate_of_units_over_time() {
        assert_eq!(rate(10, Duration::from_millis(500)), 20.0);
        assert_eq!(rate(10, Duration::ZERO), 0.0);
    }
}
