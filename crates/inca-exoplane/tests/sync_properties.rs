//! P5–P8 of specs/exoplane.md §6 over many seeded runs of the model world
//! (tests/sync_world), and the three broken variants the same checker must
//! catch: merge without history, a rebuilt device restarting at 0̸, and a
//! snapshot read while a MERGE is unacknowledged.

mod sync_world;

use std::time::Instant;

use inca_exoplane::sync::Variant;
use sync_world::{run_seeds, Faults, RunStats, MS};

/// Seeds per fault set; `SYNC_SEEDS=n` runs more (a longer campaign).
fn seeds() -> u64 {
    std::env::var("SYNC_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

fn report(name: &str, faults: Faults, s: &RunStats, started: Instant) {
    println!(
        "{name}: {} seeds in {:.1} s: {} checks, {} rounds, {} crashes, {} rejoins, \
         {} evictions, {} drops, {} dups, {} pauses, lost {}; discarded {} responses and {} \
         requests, {} rounds timed out, {} answers abandoned; max lag {} ms (B = {} ms)",
        seeds(),
        started.elapsed().as_secs_f64(),
        s.checks,
        s.rounds,
        s.crashes,
        s.rejoins,
        s.evictions,
        s.drops,
        s.dups,
        s.pauses,
        s.lost,
        s.resp_discarded,
        s.req_stale,
        s.rounds_timed_out,
        s.abandoned,
        s.max_lag / MS,
        faults.bound() / MS
    );
}

fn must_hold(name: &str, faults: Faults) {
    let started = Instant::now();
    match run_seeds(0..seeds(), faults, Variant::Correct, true) {
        Ok(s) => report(name, faults, &s, started),
        Err((seed, e)) => panic!("{name}: seed {seed}: {e}"),
    }
}

/// Runs seeds until the variant is caught; fails if it never is. `p8`
/// off leaves the catch to P5/P6 alone.
fn must_catch(variant: Variant, faults: Faults, p8: bool, within: u64, expect: &str) {
    for seed in 0..within {
        if let Err((_, e)) = run_seeds(seed..seed + 1, faults, variant, p8) {
            println!("{variant:?} (P8 check {p8}) caught at seed {seed}: {e}");
            assert!(
                e.contains(expect),
                "{variant:?} caught by an unexpected check: {e}"
            );
            return;
        }
    }
    panic!("{variant:?} (P8 check {p8}) survived seeds 0..{within}");
}

const CLEAN: Faults = Faults {
    drops: false,
    pauses: false,
    crashes: true,
};

const LOSSY: Faults = Faults {
    drops: true,
    pauses: true,
    crashes: true,
};

/// P5, P6, P8 with delay, reordering, duplication, crashes, rebuilds and
/// switch eviction / re-installation.
#[test]
fn bounded_lag_and_exact_convergence() {
    must_hold("clean", CLEAN);
}

/// P7: the same with dropped requests and responses, daemon pauses and
/// devices crashing between their reply and their merge.
#[test]
fn robust_to_loss_pauses_and_failures() {
    must_hold("lossy", LOSSY);
}

#[test]
fn merge_without_history_is_caught() {
    must_catch(Variant::NoHistory, CLEAN, true, 20, "P5 over-count");
}

#[test]
fn rebuilt_device_restarting_at_zero_is_caught() {
    must_catch(Variant::RestartAtZero, CLEAN, true, 50, "P8");
    must_catch(Variant::RestartAtZero, CLEAN, false, 50, "P5");
}

#[test]
fn snapshot_during_merge_is_caught() {
    must_catch(Variant::ReadDuringMerge, LOSSY, true, 200, "P");
    must_catch(Variant::ReadDuringMerge, LOSSY, false, 200, "P");
}
