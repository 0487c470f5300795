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
//! A failing seed is printed with its fault schedule (what link, which
//! values, which groups) and what the checks said, and `inca run SCENARIO
//! --seed N` reproduces it exactly. The summary tallies the faults by kind,
//! with the seeds that had each kind and how many of those failed.
//!
//! Some campaigns are built in rather than written as scenarios, because
//! they drive their devices with scripted operations and judge every result
//! against a reference ([`BUILTIN`]): `tea-lookup` (every TEA lookup returns
//! the value most recently installed, or a miss, across inserts, deletes,
//! displacements, stash overflow, cache changes and a server failover),
//! `tea-lookup-faults` (the same under random faults drawn from the seed) and
//! `redplane-snapshot` (a switch crashes under lossy links and another
//! restores an exact snapshot no older than ε). `inca campaign NAME --first-seed
//! N --seeds 1` reproduces a seed of those.

use std::collections::BTreeMap;
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
    /// Faults started, by kind (link, crash, pause, impair, partition, ..).
    pub kinds: BTreeMap<String, u64>,
    /// Violations found (empty for a passing run).
    pub violations: Vec<String>,
    /// What the run did, for people (built-in campaigns).
    pub notes: Vec<String>,
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
    /// Faults started over all seeds (their undoing not counted).
    pub faults: u64,
    /// Simulator events over all seeds.
    pub events: u64,
    /// Wall-clock seconds.
    pub wall_seconds: f64,
    /// The failing seeds, in seed order.
    pub failures: Vec<SeedResult>,
    /// Per fault kind: faults, seeds that had one, and failing seeds among
    /// them.
    pub by_kind: BTreeMap<String, KindTally>,
}

/// One fault kind over a campaign.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct KindTally {
    /// Faults of this kind started.
    pub faults: u64,
    /// Seeds with at least one.
    pub seeds: u64,
    /// Of those, seeds with a violation.
    pub failed: u64,
}

/// The built-in campaigns: name and what one seed does.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "tea-lookup",
        "TEA switch + 2 DRAM servers (R = 2): 300 random inserts/updates/deletes through the control plane with displacement, stash overflow and cache changes, a server crash and recovery, and a continuous lookup stream judged against a reference map",
    ),
    (
        "tea-lookup-faults",
        "tea-lookup with random faults drawn from the seed on top: link flaps, impairment windows (loss, duplication, reordering, jitter), partitions and pauses of the DRAM servers",
    ),
    (
        "redplane-snapshot",
        "RedPlane bounded mode: HH switch A crashes under 0-5 % link loss, switch B restores the partition from the store; the restored state must be an exact snapshot no older than epsilon",
    ),
];

/// Runs one seed of built-in campaign `name`.
fn run_builtin_seed(name: &str, seed: u64) -> anyhow::Result<SeedResult> {
    match name {
        "tea-lookup" | "tea-lookup-faults" => {
            let config = inca_tea::campaign::CampaignConfig {
                random_faults: name == "tea-lookup-faults",
                ..inca_tea::campaign::CampaignConfig::new(seed, 300)
            };
            let (result, injected) = inca_tea::campaign::lookup_campaign_faulted(&config);
            let (violations, notes) = match result {
                Ok(stats) => (
                    Vec::new(),
                    vec![format!(
                            "{} lookups ({} SRAM, {} DRAM, {} misses), {} operations, {} displacements, {} server recoveries",
                            stats.lookups,
                            stats.sram,
                            stats.dram,
                            stats.misses,
                            stats.commits,
                            stats.displacements,
                            stats.recoveries
                        )],
                ),
                Err(v) => (vec![v.to_string()], Vec::new()),
            };
            Ok(SeedResult {
                seed,
                faults: injected.log,
                kinds: injected
                    .tally
                    .iter()
                    .map(|(k, n)| (k.to_string(), *n))
                    .collect(),
                violations,
                notes,
                events: 0,
            })
        }
        "redplane-snapshot" => {
            let run = inca_redplane::snapshot::campaign::crash_restore_run(seed, 0.05)
                .map_err(|e| anyhow::anyhow!("seed {seed}: {e}"))?;
            let mut violations = run.violations.clone();
            if run.access_violations > 0 {
                violations.push(format!(
                    "{} data-plane access violations",
                    run.access_violations
                ));
            }
            Ok(SeedResult {
                seed,
                faults: vec![
                    (0, format!("switch links lose {:.1} %", run.loss * 100.0)),
                    (run.crash_at, "switch A crashed (state lost)".into()),
                ],
                kinds: BTreeMap::from([("loss".to_string(), 1), ("crash".to_string(), 1)]),
                violations,
                notes: vec![format!(
                    "B restored {} time(s), {} exact; {} epsilon actions",
                    run.b_restores, run.exact_restores, run.epsilon_fired
                )],
                events: 0,
            })
        }
        other => anyhow::bail!(
            "{other:?} is neither a scenario file nor a built-in campaign ({})",
            BUILTIN.iter().map(|b| b.0).collect::<Vec<_>>().join(", ")
        ),
    }
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
        kinds: built
            .sim
            .fault_tally
            .iter()
            .map(|(k, n)| (k.to_string(), *n))
            .collect(),
        violations,
        notes: Vec::new(),
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
    let builtin = BUILTIN
        .iter()
        .any(|b| Path::new(b.0) == scenario)
        .then(|| scenario.display().to_string());
    let loaded = match &builtin {
        Some(_) => None,
        None => {
            if !scenario.exists() {
                anyhow::bail!(
                    "{} is neither a scenario file nor a built-in campaign ({})",
                    scenario.display(),
                    BUILTIN.iter().map(|b| b.0).collect::<Vec<_>>().join(", ")
                );
            }
            let loaded = Loaded::from_file(scenario, set)?;
            // Fail on a scenario that does not build before starting.
            drop(loaded.build(&AppFactory::checked(), Some(first), None)?);
            Some(loaded)
        }
    };
    let name = match (&builtin, &loaded) {
        (Some(b), _) => b.clone(),
        (None, Some(l)) => l.scenario.name.clone(),
        (None, None) => unreachable!("a campaign is built in or loaded"),
    };
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
    bar.set_message(name);
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
                let result = match (&loaded, &builtin) {
                    (Some(l), _) => run_seed(l, first + i),
                    (None, Some(b)) => run_builtin_seed(b, first + i),
                    (None, None) => unreachable!("a campaign is built in or loaded"),
                };
                match result {
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
    let mut by_kind: BTreeMap<String, KindTally> = BTreeMap::new();
    for r in &results {
        for (kind, n) in &r.kinds {
            let t = by_kind.entry(kind.clone()).or_default();
            t.faults += n;
            t.seeds += 1;
            t.failed += u64::from(!r.violations.is_empty());
        }
    }
    Ok(CampaignSummary {
        by_kind,
        scenario: scenario.display().to_string(),
        seeds: results.len() as u64,
        failed: failures.len() as u64,
        faults: results.iter().flat_map(|r| r.kinds.values()).sum(),
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
    for (kind, t) in &summary.by_kind {
        println!(
            "  {kind:>9}: {} faults in {} seeds, {} of those seeds failed",
            t.faults, t.seeds, t.failed
        );
    }
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
        if BUILTIN.iter().any(|b| Path::new(b.0) == scenario) {
            println!(
                "  reproduce: inca campaign {} --first-seed {} --seeds 1",
                scenario.display(),
                f.seed
            );
        } else {
            println!(
                "  reproduce: inca run {} --seed {}",
                scenario.display(),
                f.seed
            );
        }
    }
}
