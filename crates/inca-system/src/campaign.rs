//! The campaign runner: one scenario, or a system's built-in campaign,
//! under many seeds, every run checked.
//!
//! A scenario seed builds the scenario afresh (its `[random_faults]` draw a
//! new fault schedule from the seed), runs it to its duration and then asks
//! two things:
//! - each node's report: a counter named `invariant_violations` above zero
//!   is a failed run-time assertion (the devices check their own invariants
//!   while they run and count what fails, with a note saying what);
//! - each system's run checks ([`crate::RunCheck`]), which the systems
//!   collected while they built the devices: RedPlane's per-flow
//!   linearizability and snapshot bounds, for example.
//!
//! A built-in campaign ([`crate::BuiltinCampaign`]) runs its own script per
//! seed. Seeds run on `jobs` threads; results are in seed order whatever
//! the threads did, so a summary depends only on the seeds.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use inca_sim::scenario::Loaded;

pub use crate::campaign_results::{CampaignSummary, KindTally, SeedResult};
use crate::error::CampaignError;
use crate::registry::{Registry, SystemFactory};
use crate::system::BuiltinCampaign;

/// Runs one seed of `loaded`, building through `registry`, and checks it.
pub fn run_seed(
    registry: &Registry,
    loaded: &Loaded,
    seed: u64,
) -> Result<SeedResult, CampaignError> {
    let factory = SystemFactory::checked(registry.clone());
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

/// What a campaign runs: a scenario file or a built-in campaign.
enum Source {
    Scenario(Box<Loaded>),
    Builtin(BuiltinCampaign),
}

/// A campaign ready to run.
pub struct Campaign {
    registry: Registry,
    source: Source,
    /// The scenario path or built-in name as given.
    given: String,
}

impl Campaign {
    /// `scenario` as a built-in campaign of a registered system if one has
    /// that name, else as a scenario file with `set` overrides (built once
    /// with seed `first` so a scenario that does not build fails here).
    pub fn open(
        registry: Registry,
        scenario: &Path,
        set: &[String],
        first: u64,
    ) -> Result<Campaign, CampaignError> {
        let given = scenario.display().to_string();
        let builtin = registry.campaign(&given);
        let source = match builtin {
            Some(b) => Source::Builtin(b),
            None => {
                if !scenario.exists() {
                    let known: Vec<&str> = registry.campaigns().iter().map(|c| c.name).collect();
                    return Err(CampaignError::Unknown {
                        name: given,
                        known: known.join(", "),
                    });
                }
                let loaded = Loaded::from_file(scenario, set)?;
                drop(loaded.build(&SystemFactory::checked(registry.clone()), Some(first), None)?);
                Source::Scenario(Box::new(loaded))
            }
        };
        Ok(Campaign {
            registry,
            source,
            given,
        })
    }

    /// The scenario's name, or the built-in campaign's.
    pub fn name(&self) -> String {
        match &self.source {
            Source::Scenario(l) => l.scenario.name.clone(),
            Source::Builtin(b) => b.name.to_string(),
        }
    }

    /// Whether this is a built-in campaign (reproduced with `inca campaign
    /// NAME --first-seed N --seeds 1` rather than `inca run --seed N`).
    pub fn is_builtin(&self) -> bool {
        matches!(self.source, Source::Builtin(_))
    }

    /// Runs one seed.
    pub fn run_seed(&self, seed: u64) -> Result<SeedResult, CampaignError> {
        match &self.source {
            Source::Scenario(l) => run_seed(&self.registry, l, seed),
            Source::Builtin(b) => (b.run_seed)(seed),
        }
    }

    /// Runs seeds `first..first + count` on `jobs` threads; `on_seed` hears
    /// each result as it comes (in completion order). The first seed that
    /// cannot run stops the campaign with its error.
    pub fn run(
        &self,
        first: u64,
        count: u64,
        jobs: usize,
        on_seed: &(dyn Fn(&SeedResult) + Sync),
    ) -> Result<CampaignSummary, CampaignError> {
        let wall = std::time::Instant::now();
        let next = AtomicU64::new(0);
        let results: Mutex<Vec<SeedResult>> = Mutex::new(Vec::new());
        let error: Mutex<Option<CampaignError>> = Mutex::new(None);
        std::thread::scope(|s| {
            for _ in 0..jobs.max(1) {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count || error.lock().map_or(true, |e| e.is_some()) {
                        break;
                    }
                    match self.run_seed(first + i) {
                        Ok(r) => {
                            on_seed(&r);
                            if let Ok(mut v) = results.lock() {
                                v.push(r);
                            }
                        }
                        Err(e) => {
                            let e = match e {
                                CampaignError::Seed { .. } => e,
                                other => CampaignError::Seed {
                                    seed: first + i,
                                    message: other.to_string(),
                                },
                            };
                            if let Ok(mut slot) = error.lock() {
                                slot.get_or_insert(e);
                            }
                            break;
                        }
                    }
                });
            }
        });
        // A poisoned lock means a seed panicked: the panic has already been
        // propagated by the scope, so these are never poisoned here.
        if let Some(e) = error.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(e);
        }
        let mut results = results.into_inner().unwrap_or_else(|p| p.into_inner());
        results.sort_by_key(|r| r.seed);
        Ok(summarise(
            &self.given,
            results,
            wall.elapsed().as_secs_f64(),
        ))
    }
}

/// The summary of `results` (in seed order).
fn summarise(scenario: &str, results: Vec<SeedResult>, wall_seconds: f64) -> CampaignSummary {
    let mut by_kind: BTreeMap<String, KindTally> = BTreeMap::new();
    for r in &results {
        for (kind, n) in &r.kinds {
            let t = by_kind.entry(kind.clone()).or_default();
            t.faults += n;
            t.seeds += 1;
            t.failed += u64::from(!r.violations.is_empty());
        }
    }
    let failures: Vec<SeedResult> = results
        .iter()
        .filter(|r| !r.violations.is_empty())
        .cloned()
        .collect();
    CampaignSummary {
        by_kind,
        scenario: scenario.to_string(),
        seeds: results.len() as u64,
        failed: failures.len() as u64,
        faults: results.iter().flat_map(|r| r.kinds.values()).sum(),
        events: results.iter().map(|r| r.events).sum(),
        wall_seconds,
        failures,
    }
}
