//! inca-bench — `inca bench`: the project's benchmarks with their baselines, side by side
//! in one command (issue 9; DESIGN.md "Performance budget").
//!
//! - [`pipeline`] — the NAT fast path in the switch model.
//! - [`sim`] — simulator events/s on experiments/two-switches-load.toml.
//! - [`live`] — live forwarding frames/s between two runner threads over
//!   UDP on loopback (baselines: the same sockets with no devices).
//! - [`plan`] — the ExoPlane planner (`exoplane-plan`), one whole run.
//! - [`table`] — the table and its JSON form.
//!
//! The systems' own rows come through the registry
//! (`inca_system::System::benches`): RedPlane's `redplane-read`, `store`
//! and `store-udp` live in `inca_redplane::bench`, TEA's `tea-lookup` and
//! `dram` in `inca_tea::bench`. The timing helpers and the row shapes
//! they all use are `inca_system::bench`'s.
//!
//! A benchmark is a plain function timing a fixed amount of work with
//! `std::time::Instant` after a warm-up, `runs` times, alternating with its
//! baseline so both see the same machine; the figure is the median. No
//! cargo or criterion is needed at run time. Absolute figures depend on the
//! machine and its load; ratios measured in the same command are what to
//! compare.

pub mod live;
pub mod pipeline;
pub mod plan;
pub mod sim;
pub mod table;

pub use inca_system::bench::{Baseline, Bench, BenchError, Budget, Ctx, Measured};

/// Every benchmark, in table order: the plain NAT (the switch model's
/// reference figure, and the baseline the systems' pipelines compare
/// with), then `systems` (the registered systems' own,
/// `Registry::benches`, in registration order), then this crate's others
/// (the simulator, the live driver).
pub fn all(systems: Vec<Bench>) -> Vec<Bench> {
    let mut benches = own();
    let rest = benches.split_off(1);
    benches.extend(systems);
    benches.extend(rest);
    benches
}

/// The benchmarks that live here (the plain NAT, the simulator and the
/// live driver; the first is the NAT).
fn own() -> Vec<Bench> {
    vec![
        Bench {
            name: "nat",
            what: "NAT fast path, switch model (1,024 flows)",
            unit: "packets/s",
            budget: Budget::AtLeast(10e6),
            budget_text: ">= 10 M packets/s per core",
            run: Some(|c| pipeline::nat(c).map_err(BenchError::new)),
            profile: Some(|n| pipeline::profile_nat(n).map_err(BenchError::new)),
        },
        Bench {
            name: "sim",
            what: "simulator, two NAT switches at line rate",
            unit: "events/s",
            budget: Budget::AtLeast(5e6),
            budget_text: ">= 5 M events/s per core",
            run: Some(|c| sim::events(c).map_err(BenchError::new)),
            profile: Some(|n| sim::profile(n).map_err(BenchError::new)),
        },
        Bench {
            name: "live",
            what: "live forwarding, 2 runners, UDP GSO/GRO",
            unit: "frames/s",
            budget: Budget::AtLeast(1e6),
            budget_text: ">= 1 M frames/s",
            run: Some(|c| live::offload(c).map_err(BenchError::new)),
            profile: None,
        },
        Bench {
            name: "live-mmsg",
            what: "live forwarding, 2 runners, mmsg only",
            unit: "frames/s",
            budget: Budget::None,
            budget_text: "",
            run: Some(|c| live::mmsg(c).map_err(BenchError::new)),
            profile: None,
        },
        Bench {
            name: "exoplane-plan",
            what: "ExoPlane planner: 4 apps, 16 devices, 1 M flows/app",
            unit: "plans/s",
            budget: Budget::AtLeast(1.0),
            budget_text: "< 1 s per plan",
            run: Some(|c| plan::exoplane_plan(c).map_err(BenchError::new)),
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
    /// The registered systems' own benchmarks, after this crate's.
    pub systems: Vec<Bench>,
}

/// The benchmarks `names` selects, in table order; an unknown name is an
/// error that lists the known ones.
pub fn select(names: &[String], systems: Vec<Bench>) -> anyhow::Result<Vec<Bench>> {
    let benches = all(systems);
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
    for b in select(&opts.names, opts.systems.clone())? {
        progress(b.name);
        let outcome = b.run.map(|f| f(&ctx));
        report.rows.push(table::Row::new(&b, outcome));
    }
    report.finish();
    Ok(report)
}

/// Runs `n` iterations of each selected benchmark's measured work once (no
/// warm-up, no timing) for a profiler; returns one line per benchmark.
pub fn profile(names: &[String], systems: Vec<Bench>, n: u64) -> anyhow::Result<Vec<String>> {
    let mut lines = Vec::new();
    for b in select(names, systems)? {
        match b.profile {
            Some(f) => lines.push(format!("{}: {}", b.name, f(n)?)),
            None => lines.push(format!("{}: no profile driver (live sockets)", b.name)),
        }
    }
    Ok(lines)
}
