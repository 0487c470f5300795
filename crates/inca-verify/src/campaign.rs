//! The campaign loop: many seeds, each run and checked, summarised.
//!
//! What one seed does is the caller's (build a scenario from the seed and
//! run it, or a system's scripted campaign); this module runs the seeds on
//! `jobs` threads, stops at the first seed that cannot run, and summarises
//! in seed order whatever the threads did, so a summary depends only on the
//! seeds (and the wall clock it reports).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use crate::campaign_results::{CampaignSummary, KindTally, SeedResult};

/// A seed that could not run (as opposed to one that ran and failed its
/// checks, which is a [`SeedResult`] with violations).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedFailure<E> {
    /// The seed.
    pub seed: u64,
    /// Why it could not run.
    pub error: E,
}

/// Runs seeds `first..first + count` with `run_seed` on `jobs` threads and
/// summarises them under the name `scenario`; `on_seed` hears each result
/// as it comes (in completion order). The first seed that cannot run stops
/// the campaign (seeds already started finish) and is returned.
pub fn run_campaign<E: Send>(
    scenario: &str,
    first: u64,
    count: u64,
    jobs: usize,
    run_seed: &(dyn Fn(u64) -> Result<SeedResult, E> + Sync),
    on_seed: &(dyn Fn(&SeedResult) + Sync),
) -> Result<CampaignSummary, SeedFailure<E>> {
    let wall = Instant::now();
    let results = run_seeds(first, count, jobs, run_seed, on_seed)?;
    Ok(summarise(scenario, results, wall.elapsed().as_secs_f64()))
}

/// Runs seeds `first..first + count` with `run_seed` on `jobs` threads;
/// the results in seed order, or the failure of the lowest seed that could
/// not run among those that did not.
pub fn run_seeds<E: Send>(
    first: u64,
    count: u64,
    jobs: usize,
    run_seed: &(dyn Fn(u64) -> Result<SeedResult, E> + Sync),
    on_seed: &(dyn Fn(&SeedResult) + Sync),
) -> Result<Vec<SeedResult>, SeedFailure<E>> {
    let next = AtomicU64::new(0);
    let results: Mutex<Vec<SeedResult>> = Mutex::new(Vec::new());
    let failure: Mutex<Option<SeedFailure<E>>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count || failure.lock().map_or(true, |f| f.is_some()) {
                    break;
                }
                let seed = first + i;
                match run_seed(seed) {
                    Ok(r) => {
                        on_seed(&r);
                        if let Ok(mut v) = results.lock() {
                            v.push(r);
                        }
                    }
                    Err(error) => {
                        if let Ok(mut slot) = failure.lock() {
                            slot.get_or_insert(SeedFailure { seed, error });
                        }
                        break;
                    }
                }
            });
        }
    });
    // A poisoned lock means a seed panicked: the scope has already
    // propagated the panic, so these are never poisoned here.
    if let Some(f) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(f);
    }
    let mut results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    results.sort_by_key(|r| r.seed);
    Ok(results)
}

/// The summary of `results` (in seed order) of a campaign over `scenario`
/// that took `wall_seconds`.
pub fn summarise(scenario: &str, results: Vec<SeedResult>, wall_seconds: f64) -> CampaignSummary {
    let mut by_kind: BTreeMap<String, KindTally> = BTreeMap::new();
    let mut judged: BTreeMap<String, u64> = BTreeMap::new();
    for r in &results {
        for (what, n) in &r.judged {
            *judged.entry(what.clone()).or_default() += n;
        }
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
        judged,
        faults: results.iter().flat_map(|r| r.kinds.values()).sum(),
        events: results.iter().map(|r| r.events).sum(),
        wall_seconds,
        failures,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A toy seed: seeds divisible by 3 fail their check, each seed injects
    /// `seed % 2` link faults.
    fn toy(seed: u64) -> Result<SeedResult, String> {
        let mut kinds = BTreeMap::new();
        if seed % 2 == 1 {
            kinds.insert("link".to_string(), 1);
        }
        Ok(SeedResult {
            seed,
            faults: Vec::new(),
            kinds,
            violations: if seed.is_multiple_of(3) {
                vec![format!("seed {seed} is a multiple of 3")]
            } else {
                Vec::new()
            },
            judged: BTreeMap::from([("toy: seeds".to_string(), 1)]),
            notes: Vec::new(),
            events: seed,
        })
    }

    #[test]
    fn results_are_in_seed_order_and_summarised_whatever_the_threads() {
        let heard = AtomicUsize::new(0);
        let on_seed = |_: &SeedResult| {
            heard.fetch_add(1, Ordering::Relaxed);
        };
        let one = run_campaign("toy", 1, 10, 1, &toy, &on_seed).unwrap();
        let four = run_campaign("toy", 1, 10, 4, &toy, &on_seed).unwrap();
        assert_eq!(heard.load(Ordering::Relaxed), 20);
        for s in [&one, &four] {
            assert_eq!(s.scenario, "toy");
            assert_eq!(s.seeds, 10);
            assert_eq!(s.failed, 3);
            let failing: Vec<u64> = s.failures.iter().map(|r| r.seed).collect();
            assert_eq!(failing, vec![3, 6, 9]);
            assert_eq!(s.faults, 5);
            assert_eq!(s.events, (1..=10).sum::<u64>());
            let link = &s.by_kind["link"];
            assert_eq!((link.faults, link.seeds, link.failed), (5, 5, 2));
            assert_eq!(s.judged["toy: seeds"], 10);
            assert!(s.judged_anything() && !s.passed(), "3 seeds failed");
        }
    }

    #[test]
    fn a_campaign_that_judged_nothing_does_not_pass() {
        let blind = |seed: u64| {
            toy(seed + 1).map(|mut r| {
                r.violations.clear();
                r.judged.clear();
                r
            })
        };
        let s = run_campaign("blind", 1, 5, 1, &blind, &|_| {}).unwrap();
        assert_eq!(s.failed, 0);
        assert!(!s.judged_anything() && !s.passed());
        let seen = run_campaign("seen", 1, 5, 1, &|seed| toy(3 * seed + 1), &|_| {}).unwrap();
        assert!(seen.passed(), "{seen:?}");
    }

    #[test]
    fn a_seed_that_cannot_run_stops_the_campaign_with_its_error() {
        let run = |seed: u64| {
            if seed == 4 {
                Err(format!("seed {seed} has no scenario"))
            } else {
                toy(seed)
            }
        };
        let f = run_seeds(0, 100, 1, &run, &|_| {}).unwrap_err();
        assert_eq!(f.seed, 4);
        assert_eq!(f.error, "seed 4 has no scenario");
    }
}
