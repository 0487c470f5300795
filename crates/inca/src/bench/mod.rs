//! `inca bench`: the project's benchmarks with their baselines, side by side
//! in one command (issue 9; DESIGN.md "Performance budget").
//!
//! - [`measure`] — timing helpers (rates, medians, the profiled wrapper).
//! - [`pipeline`] — switch-model pipelines in process: NAT fast path,
//!   RedPlane read path (baseline: the plain NAT), TEA lookup round trip
//!   (baseline: the plain NAT).
//! - [`sim`] — simulator events/s on experiments/two-switches-load.toml.
//! - [`store`] — RedPlane state store requests/s in process and over UDP on
//!   loopback (baseline: redis-server with redis-benchmark, see [`redis`]).
//! - [`dram`] — TEA DRAM-server READ responses/s (baseline: a copy of the
//!   same bytes).
//! - [`live`] — live forwarding frames/s between two runner threads over
//!   UDP on loopback (baselines: the same sockets with no devices).
//! - [`table`] — the table and its JSON form.
//!
//! A benchmark is a plain function timing a fixed amount of work with
//! `std::time::Instant` after a warm-up, `runs` times, alternating with its
//! baseline so both see the same machine; the figure is the median. No
//! cargo or criterion is needed at run time. Absolute figures depend on the
//! machine and its load; ratios measured in the same command are what to
//! compare.

pub mod dram;
pub mod live;
pub mod measure;
pub mod pipeline;
pub mod redis;
pub mod sim;
pub mod store;
pub mod table;

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
            Baseline::Measured { samples, .. } => Some(measure::median(samples)),
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

/// A benchmark of the table.
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
    pub run: Option<fn(&Ctx) -> anyhow::Result<Measured>>,
    /// Runs `n` iterations of the measured work inside
    /// [`measure::profiled`], for callgrind (`None`: not profiled).
    pub profile: Option<fn(u64) -> anyhow::Result<String>>,
}

/// Every benchmark, in table order.
pub fn all() -> Vec<Bench> {
    vec![
        Bench {
            name: "nat",
            what: "NAT fast path, switch model (1,024 flows)",
            unit: "packets/s",
            budget: Budget::AtLeast(10e6),
            budget_text: ">= 10 M packets/s per core",
            run: Some(pipeline::nat),
            profile: Some(pipeline::profile_nat),
        },
        Bench {
            name: "redplane-read",
            what: "RedPlane NAT read path, lease held",
            unit: "packets/s",
            budget: Budget::None,
            budget_text: "",
            run: Some(pipeline::redplane_read),
            profile: Some(pipeline::profile_redplane_read),
        },
        Bench {
            name: "tea-lookup",
            what: "TEA NAT DRAM lookup: request, server, response pass",
            unit: "packets/s",
            budget: Budget::None,
            budget_text: "",
            run: Some(pipeline::tea_lookup),
            profile: Some(pipeline::profile_tea_lookup),
        },
        Bench {
            name: "sim",
            what: "simulator, two NAT switches at line rate",
            unit: "events/s",
            budget: Budget::AtLeast(5e6),
            budget_text: ">= 5 M events/s per core",
            run: Some(sim::events),
            profile: Some(sim::profile),
        },
        Bench {
            name: "store",
            what: "RedPlane store LEASE_RENEW writes, in process",
            unit: "requests/s",
            budget: Budget::AtLeast(1e6),
            budget_text: ">= 1 M requests/s per core",
            run: Some(store::in_process),
            profile: Some(store::profile),
        },
        Bench {
            name: "store-udp",
            what: "RedPlane store writes over UDP loopback",
            unit: "requests/s",
            budget: Budget::AboveBaseline,
            budget_text: "more than redis SET",
            run: Some(store::over_udp),
            profile: None,
        },
        Bench {
            name: "dram",
            what: "TEA DRAM server: READ -> READ RESPONSE",
            unit: "responses/s",
            budget: Budget::AtLeast(5e6),
            budget_text: ">= 5 M responses/s per core",
            run: Some(dram::reads),
            profile: Some(dram::profile),
        },
        Bench {
            name: "live",
            what: "live forwarding, 2 runners, UDP GSO/GRO",
            unit: "frames/s",
            budget: Budget::AtLeast(1e6),
            budget_text: ">= 1 M frames/s",
            run: Some(live::offload),
            profile: None,
        },
        Bench {
            name: "live-mmsg",
            what: "live forwarding, 2 runners, mmsg only",
            unit: "frames/s",
            budget: Budget::None,
            budget_text: "",
            run: Some(live::mmsg),
            profile: None,
        },
        Bench {
            name: "exoplane-plan",
            what: "ExoPlane planner: 4 apps, 16 devices, 1 M flows/app",
            unit: "s",
            budget: Budget::None,
            budget_text: "< 1 s",
            run: None,
            profile: None,
        },
    ]
}

/// What `inca bench` was asked to do.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Benchmarks to run (empty: all).
    pub names: Vec<String>,
    /// Timed runs each.
    pub runs: usize,
    /// Smaller amounts of work.
    pub quick: bool,
}

/// The benchmarks `names` selects, in table order; an unknown name is an
/// error that lists the known ones.
pub fn select(names: &[String]) -> anyhow::Result<Vec<Bench>> {
    let benches = all();
    for n in names {
        if !benches.iter().any(|b| b.name == n) {
            let known: Vec<&str> = benches.iter().map(|b| b.name).collect();
            anyhow::bail!("unknown benchmark {n:?}; known: {}", known.join(", "));
        }
    }
    Ok(benches
        .into_iter()
        .filter(|b| names.is_empty() || names.iter().any(|n| n == b.name))
        .collect())
}

/// Runs the selected benchmarks; `progress` hears each one's name as it
/// starts. A benchmark that fails is a row with its error, and the others
/// still run.
pub fn run(opts: &Options, mut progress: impl FnMut(&str)) -> anyhow::Result<table::Report> {
    let ctx = Ctx {
        runs: opts.runs.max(1),
        quick: opts.quick,
    };
    let mut report = table::Report::start(&ctx);
    for b in select(&opts.names)? {
        progress(b.name);
        let outcome = b.run.map(|f| f(&ctx));
        report.rows.push(table::Row::new(&b, outcome));
    }
    report.finish();
    Ok(report)
}

/// Runs `n` iterations of each selected benchmark's measured work once (no
/// warm-up, no timing) for a profiler; returns one line per benchmark.
pub fn profile(names: &[String], n: u64) -> anyhow::Result<Vec<String>> {
    let mut lines = Vec::new();
    for b in select(names)? {
        match b.profile {
            Some(f) => lines.push(format!("{}: {}", b.name, f(n)?)),
            None => lines.push(format!("{}: no profile driver (live sockets)", b.name)),
        }
    }
    Ok(lines)
}
