//! The `inca bench` table: one row per benchmark (median, baseline, ratio,
//! budget and gap), printed as text and written as JSON.

use std::fmt::Write as _;

use serde::Serialize;

use super::{Baseline, Bench, BenchError, Budget, Ctx, Measured};
use inca_system::bench::median;

/// The machine while the benchmarks ran.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// Logical CPUs available.
    pub cpus: usize,
    /// 1-minute load average at the start and at the end (Linux; `None`
    /// elsewhere). A figure measured under load is pessimistic.
    pub load_start: Option<f64>,
    /// See `load_start`.
    pub load_end: Option<f64>,
}

/// A whole `inca bench` run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Seconds since the Unix epoch when it started.
    pub started_unix: u64,
    /// Timed runs per benchmark.
    pub runs: usize,
    /// Whether `--quick` sizes were used.
    pub quick: bool,
    /// The machine.
    pub machine: Machine,
    /// One per benchmark, in table order.
    pub rows: Vec<Row>,
}

/// One benchmark's line.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Its name.
    pub name: String,
    /// What was measured.
    pub what: String,
    /// Unit of `median` and the samples.
    pub unit: String,
    /// "measured", "not built" or "failed: <error>".
    pub status: String,
    /// One rate per run.
    pub samples: Vec<f64>,
    /// Median of the samples.
    pub median: Option<f64>,
    /// The baseline.
    pub baseline: Baseline,
    /// median / baseline median.
    pub ratio: Option<f64>,
    /// The DESIGN.md target as worded there ("" for none).
    pub budget: String,
    /// median / target (or / baseline for "more than the baseline").
    pub budget_ratio: Option<f64>,
    /// The gap, in words.
    pub gap: String,
    /// Facts measured with the figure.
    pub notes: Vec<String>,
}

fn load_average() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

impl Report {
    /// An empty report for a run starting now.
    pub fn start(ctx: &Ctx) -> Report {
        Report {
            started_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            runs: ctx.runs,
            quick: ctx.quick,
            machine: Machine {
                cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
                load_start: load_average(),
                load_end: None,
            },
            rows: Vec::new(),
        }
    }

    /// Records the end of the run.
    pub fn finish(&mut self) {
        self.machine.load_end = load_average();
    }

    /// The table as text.
    pub fn render(&self) -> String {
        let head = [
            "name", "measured", "median", "unit", "baseline", "ratio", "budget", "gap",
        ];
        let mut cells: Vec<[String; 8]> = Vec::new();
        for r in &self.rows {
            let base = match &r.baseline {
                Baseline::None => "-".to_string(),
                Baseline::Measured { samples, .. } => si(median(samples)),
                Baseline::Missing { .. } => "missing".to_string(),
            };
            cells.push([
                r.name.clone(),
                r.what.clone(),
                r.median.map_or_else(|| r.status.clone(), si),
                r.unit.clone(),
                base,
                r.ratio.map_or_else(|| "-".into(), |x| format!("{x:.2}x")),
                if r.budget.is_empty() {
                    "-".into()
                } else {
                    r.budget.clone()
                },
                r.gap.clone(),
            ]);
        }
        let mut width = head.map(str::len);
        for row in &cells {
            for (w, c) in width.iter_mut().zip(row) {
                *w = (*w).max(c.chars().count());
            }
        }
        let mut out = String::new();
        let line = |out: &mut String, row: &[&str]| {
            for (i, (c, w)) in row.iter().zip(width).enumerate() {
                // Numbers right-aligned, words left-aligned.
                if matches!(i, 2 | 4 | 5) {
                    let _ = write!(out, "{c:>w$}  ");
                } else {
                    let _ = write!(out, "{c:<w$}  ");
                }
            }
            out.truncate(out.trim_end().len());
            out.push('\n');
        };
        line(&mut out, &head);
        let rule: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
        line(
            &mut out,
            &rule.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        for row in &cells {
            line(
                &mut out,
                &row.iter().map(String::as_str).collect::<Vec<_>>(),
            );
        }
        out.push('\n');
        for r in &self.rows {
            match &r.baseline {
                Baseline::Measured { what, .. } => {
                    let _ = writeln!(out, "{}: baseline = {what}", r.name);
                }
                Baseline::Missing { what, why } => {
                    let _ = writeln!(out, "{}: baseline = {what}: missing: {why}", r.name);
                }
                Baseline::None => {}
            }
            for n in &r.notes {
                let _ = writeln!(out, "{}: {n}", r.name);
            }
        }
        let load = |l: Option<f64>| l.map_or_else(|| "?".into(), |x| format!("{x:.2}"));
        let _ = writeln!(
            out,
            "medians of {} run(s){}; {} CPUs, load average {} at the start, {} at the end",
            self.runs,
            if self.quick { ", --quick sizes" } else { "" },
            self.machine.cpus,
            load(self.machine.load_start),
            load(self.machine.load_end),
        );
        out
    }
}

impl Row {
    /// The row of `bench` from its outcome (`None`: not built).
    pub fn new(bench: &Bench, outcome: Option<Result<Measured, BenchError>>) -> Row {
        let mut row = Row {
            name: bench.name.into(),
            what: bench.what.into(),
            unit: bench.unit.into(),
            status: "not built".into(),
            samples: Vec::new(),
            median: None,
            baseline: Baseline::None,
            ratio: None,
            budget: bench.budget_text.into(),
            budget_ratio: None,
            gap: "-".into(),
            notes: Vec::new(),
        };
        match outcome {
            None => {
                row.gap = "not built".into();
            }
            Some(Err(e)) => {
                row.status = format!("failed: {e:#}");
                row.gap = "failed".into();
                row.notes.push(row.status.clone());
            }
            Some(Ok(m)) => {
                let med = median(&m.samples);
                row.status = "measured".into();
                row.median = Some(med);
                row.ratio = m.baseline.median().filter(|&b| b > 0.0).map(|b| med / b);
                let (budget_ratio, gap) = gap(bench.budget, med, &m.baseline);
                row.budget_ratio = budget_ratio;
                row.gap = gap;
                row.samples = m.samples;
                row.baseline = m.baseline;
                row.notes = m.notes;
            }
        }
        row
    }
}

/// How far `median` is from `budget`: (median / target, words).
fn gap(budget: Budget, median: f64, baseline: &Baseline) -> (Option<f64>, String) {
    let words = |r: f64| {
        if r >= 1.0 {
            format!("meets ({r:.2}x)")
        } else {
            format!("short by {:.0}%", (1.0 - r) * 100.0)
        }
    };
    match budget {
        Budget::None => (None, "-".into()),
        Budget::AtLeast(t) => {
            let r = median / t;
            (Some(r), words(r))
        }
        Budget::AboveBaseline => match baseline.median() {
            Some(b) if b > 0.0 => {
                let r = median / b;
                (Some(r), words(r))
            }
            _ => (None, "unknown: baseline missing".into()),
        },
    }
}

/// `x` with an SI prefix, three significant figures or so.
pub fn si(x: f64) -> String {
    let a = x.abs();
    if a >= 1e9 {
        format!("{:.2} G", x / 1e9)
    } else if a >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else if a >= 1e3 {
        format!("{:.1} K", x / 1e3)
    } else {
        format!("{x:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bench(budget: Budget) -> Bench {
        Bench {
            name: "x",
            what: "a thing",
            unit: "ops/s",
            budget,
            budget_text: "target",
            run: None,
            profile: None,
        }
    }

    #[test]
    fn gap_against_a_target_and_a_baseline() {
        let m = |samples: Vec<f64>, baseline| Measured {
            samples,
            baseline,
            notes: vec![],
        };
        let r = Row::new(
            &bench(Budget::AtLeast(10.0)),
            Some(Ok(m(vec![7.0, 8.0, 9.0], Baseline::None))),
        );
        assert_eq!(r.median, Some(8.0));
        assert_eq!(r.gap, "short by 20%");
        let base = Baseline::Measured {
            what: "b".into(),
            samples: vec![4.0],
        };
        let r = Row::new(&bench(Budget::AboveBaseline), Some(Ok(m(vec![8.0], base))));
        assert_eq!(r.ratio, Some(2.0));
        assert_eq!(r.gap, "meets (2.00x)");
        let missing = Baseline::Missing {
            what: "redis".into(),
            why: "not installed".into(),
        };
        let r = Row::new(
            &bench(Budget::AboveBaseline),
            Some(Ok(m(vec![8.0], missing))),
        );
        assert_eq!(r.gap, "unknown: baseline missing");
        assert_eq!(Row::new(&bench(Budget::None), None).gap, "not built");
    }

    #[test]
    fn si_prefixes() {
        assert_eq!(si(12_340_000.0), "12.34 M");
        assert_eq!(si(1_500.0), "1.5 K");
        assert_eq!(si(0.5), "0.50");
    }
}
