//! `inca campaign`: one scenario under many seeds, each run checked.
//!
//! Every seed builds the scenario afresh (its `[random_faults]` draw a new
//! fault schedule from the seed), runs it to its duration and then asks
//! two things:
//! - each node's report: a counter named `invariant_violations` above zero
//!   is a failed run-time assertion (the devices check their own invariants
//!   while they run and count what fails, with a note saying what);
//! - each system's run checks ([`crate::factory::RunCheck`]), which the
//!   factory collected while it built the devices: RedPlane's per-flow
//!   linearizability and snapshot bounds, for example.
//!
//! A failing seed is printed with its fault schedule and what the checks
//! said, and `inca run SCENARIO --seed N` reproduces it exactly.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use inca::factory::AppFactory;
use inca_sim::scenario::Loaded;
use inca_switch::units::format_time;

/// What one seed's run found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SeedResult {
    /// The seed.
    pub seed: u64,
    /// Faults injected, with their times.
    pub faults: Vec<(u64, String)>,
    /// Violations found (empty for a passing run).
    pub violations: Vec<String>,
    /// Simulator events processed.
    pub events: u64,
}

/// The whole campaign.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CampaignSummary {
    /// The scenario file.
    pub scenario: String,
    /// Seeds run.
    pub seeds: u64,
    /// Seeds with at least one violation.
    pub failed: u64,
    /// Faults injected over all seeds.
    pub faults: u64,
    /// Simulator events over all seeds.
    pub events: u64,
    /// Wall-clock seconds.
    pub wall_seconds: f64,
    /// The failing seeds, in seed order.
    pub failures: Vec<SeedResult>,
}

/// Runs one seed of `loaded` and checks it.
pub fn run_seed(loaded: &Loaded, seed: u64) -> anyhow::Result<SeedResult> {
    let factory = AppFactory::checked();
    let mut built = loaded.build(&factory, Some(seed), None)?;
    built.sim.run_until(built.duration, |_| {});
    let mut violations = Vec::new();
    for (name, _, report) in built.sim.node_reports() {
        if let Some(&n) = report.counters.get("invariant_violations") {
            if n > 0 {
                violations.push(format!("{name}: {n} invariant violations"));
                violations.extend(report.notes.iter().map(|note| format!("{name}: {note}")));
            }
        }
    }
    violations.extend(factory.run_checks(&built.sim));
    Ok(SeedResult {
        seed,
        faults: built.sim.fault_log.clone(),
        violations,
        events: built.sim.stats().events,
    })
}

/// Runs seeds `first..first + count` on `jobs` threads.
pub fn run(
    scenario: &Path,
    set: &[String],
    first: u64,
    count: u64,
    jobs: usize,
    quiet: bool,
) -> anyhow::Result<CampaignSummary> {
    let loaded = Loaded::from_file(scenario, set)?;
    // Fail on a scenario that does not build before starting the threads.
    drop(loaded.build(&AppFactory::checked(), Some(first), None)?);
    let wall = std::time::Instant::now();
    let bar = if quiet {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(count)
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} seeds, {elapsed}")?
            .progress_chars("=> "),
    );
    bar.set_message(loaded.scenario.name.clone());
    let next = AtomicU64::new(0);
    let results: Mutex<Vec<SeedResult>> = Mutex::new(Vec::new());
    let error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count || error.lock().unwrap().is_some() {
                    break;
                }
                match run_seed(&loaded, first + i) {
                    Ok(r) => {
                        if !r.violations.is_empty() {
                            bar.println(format!("seed {} FAILED", r.seed));
                        }
                        results.lock().unwrap().push(r);
                    }
                    Err(e) => {
                        *error.lock().unwrap() = Some(e.context(format!("seed {}", first + i)));
                        break;
                    }
                }
                bar.inc(1);
            });
        }
    });
    bar.finish_and_clear();
    if let Some(e) = error.into_inner().unwrap() {
        return Err(e);
    }
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|r| r.seed);
    let failures: Vec<SeedResult> = results
        .iter()
        .filter(|r| !r.violations.is_empty())
        .cloned()
        .collect();
    Ok(CampaignSummary {
        scenario: scenario.display().to_string(),
        seeds: results.len() as u64,
        failed: failures.len() as u64,
        faults: results.iter().map(|r| r.faults.len() as u64).sum(),
        events: results.iter().map(|r| r.events).sum(),
        wall_seconds: wall.elapsed().as_secs_f64(),
        failures,
    })
}

/// Prints a campaign's outcome: one line, then each failing seed with its
/// fault schedule, what failed, and how to reproduce it.
pub fn print(summary: &CampaignSummary, scenario: &Path) {
    println!(
        "{}: {} seeds, {} faults injected, {} events, {:.1} s wall: {}",
        summary.scenario,
        summary.seeds,
        summary.faults,
        summary.events,
        summary.wall_seconds,
        if summary.failed == 0 {
            "no violations".to_string()
        } else {
            format!("{} seeds FAILED", summary.failed)
        }
    );
    for f in &summary.failures {
        println!("seed {}:", f.seed);
        println!("  fault schedule:");
        for (t, what) in &f.faults {
            println!("    {:>10}  {what}", format_time(*t));
        }
        println!("  violations:");
        for v in &f.violations {
            for line in v.lines() {
                println!("    {line}");
            }
        }
        println!(
            "  reproduce: inca run {} --seed {}",
            scenario.display(),
            f.seed
        );
    }
}
