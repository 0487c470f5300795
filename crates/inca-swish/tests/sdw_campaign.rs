//! SDW campaign seeds (specs/swish.md §6 D1–D8) and the broken variant:
//! each seed is a random faulty run (topology, filter, B, loss,
//! duplication, jitter) judged from what it recorded.

use inca_swish::sdw::campaign::{run_seed, run_seed_with};
use inca_verify::SeedResult;

fn show(r: &SeedResult) {
    println!("seed {}: {:?}", r.seed, r.notes);
    for v in r.violations.iter().take(5) {
        println!("  {v}");
    }
}

fn campaign(seeds: std::ops::Range<u64>) {
    let many = seeds.end - seeds.start >= 10;
    let mut judged = std::collections::BTreeMap::<String, u64>::new();
    let mut failed = Vec::new();
    for seed in seeds {
        let r = run_seed(seed).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        show(&r);
        for (k, n) in &r.judged {
            *judged.entry(k.clone()).or_default() += n;
        }
        if !r.violations.is_empty() {
            failed.push(seed);
        }
    }
    println!("judged: {judged:?}");
    for k in [
        "sdw: D1 window samples",
        "sdw: D2 queries",
        "sdw: D3 same-window pairs",
        "sdw: D4 queries",
        "sdw: D6 advances",
        "sdw: D7 lossless replicas",
        "sdw: D8 updates",
    ] {
        assert!(
            !many || judged.get(k).copied().unwrap_or(0) > 0,
            "nothing judged for {k}"
        );
    }
    assert!(failed.is_empty(), "seeds with violations: {failed:?}");
}

/// 24 seeds in debug (SDW_SEED=n runs one).
#[test]
fn campaign_seeds_hold_d1_to_d8() {
    match std::env::var("SDW_SEED").ok().and_then(|s| s.parse().ok()) {
        Some(s) => campaign(s..s + 1),
        None => campaign(0..24),
    }
}

/// 200 seeds: `cargo test --release -p inca-swish --test sdw_campaign -- --ignored`.
#[test]
#[ignore]
fn campaign_200_seeds() {
    campaign(0..200);
}

/// The broken variant (no duplicate filter, links that duplicate) must be
/// caught: Sum double-counts a duplicated column, which D2/D3 see.
#[test]
fn broken_duplicate_filter_is_caught() {
    let mut caught = 0;
    for seed in 0..6 {
        let r = run_seed_with(seed, true).unwrap();
        show(&r);
        if r.violations
            .iter()
            .any(|v| v.starts_with("D2") || v.starts_with("D3"))
        {
            caught += 1;
        }
    }
    assert!(
        caught >= 5,
        "the broken variant was caught in {caught} of 6 seeds"
    );
}

/// 200 recovery seeds: `cargo test --release -p inca-swish --test
/// sdw_campaign recovery_200 -- --ignored`.
#[test]
#[ignore]
fn recovery_200_seeds() {
    let failed = seeds_with_violations(0..200, inca_swish::sdw::campaign::run_recovery_seed);
    assert!(
        failed.is_empty(),
        "recovery seeds with violations: {failed:?}"
    );
}

/// Runs `run` on every seed, showing each; the seeds with violations.
fn seeds_with_violations(
    seeds: std::ops::Range<u64>,
    run: fn(u64) -> Result<SeedResult, String>,
) -> Vec<u64> {
    let mut failed = Vec::new();
    for seed in seeds {
        let r = run(seed).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        show(&r);
        if !r.violations.is_empty() {
            failed.push(seed);
        }
    }
    failed
}

/// D9: 1–3 of symmetric-4's replicas fail-stop, the controller recovers
/// the rest (§5.6), windows advance again and every query and the final
/// state hold (SDW_RSEED=n runs one).
#[test]
fn recovery_seeds_hold_d9() {
    let seeds: Vec<u64> = match std::env::var("SDW_RSEED").ok().and_then(|s| s.parse().ok()) {
        Some(s) => vec![s],
        None => (0..6).collect(),
    };
    let mut failed = Vec::new();
    let mut recoveries = 0;
    for seed in seeds {
        let r = inca_swish::sdw::campaign::run_recovery_seed(seed)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        show(&r);
        recoveries += r.judged.get("sdw: D9 recoveries").copied().unwrap_or(0);
        if !r.violations.is_empty() {
            failed.push(seed);
        }
    }
    assert!(recoveries > 0);
    assert!(
        failed.is_empty(),
        "recovery seeds with violations: {failed:?}"
    );
}

/// A recovery that leaves the survivors' last window out of M loses
/// accepted updates: D9 (the final state) or D2 (queries) catch it.
#[test]
fn broken_recovery_is_caught() {
    let mut caught = 0;
    for seed in 0..4 {
        let r = inca_swish::sdw::campaign::run_recovery_seed_with(seed, true).unwrap();
        show(&r);
        if r.violations
            .iter()
            .any(|v| v.starts_with("D9") || v.starts_with("D2"))
        {
            caught += 1;
        }
    }
    assert!(
        caught >= 3,
        "the broken recovery was caught in {caught} of 4 seeds"
    );
}

/// §5.6 "Join": after the recovery, 1 to all of the failed replicas
/// restart empty and join again, one by one, their hosts sending all
/// along; D1–D3, D6, D8, D9 hold around each join, the joiner's queries
/// carry not_ready exactly until its first window completes, and it ends
/// with the others' snapshot (SDW_JSEED=n runs one).
#[test]
fn join_seeds_hold() {
    let seeds: Vec<u64> = match std::env::var("SDW_JSEED").ok().and_then(|s| s.parse().ok()) {
        Some(s) => vec![s],
        None => (0..6).collect(),
    };
    let mut failed = Vec::new();
    let (mut joins, mut unready, mut snapshots) = (0, 0, 0);
    for seed in seeds {
        let r = inca_swish::sdw::campaign::run_join_seed(seed)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        show(&r);
        let got = |k: &str| r.judged.get(k).copied().unwrap_or(0);
        joins += got("sdw: joins");
        unready += got("sdw: join: queries not ready");
        snapshots += got("sdw: D3 final snapshots");
        if !r.violations.is_empty() {
            failed.push(seed);
        }
    }
    assert!(joins > 0 && unready > 0 && snapshots > 0);
    assert!(failed.is_empty(), "join seeds with violations: {failed:?}");
}

/// 200 join seeds: `cargo test --release -p inca-swish --test
/// sdw_campaign join_200 -- --ignored`.
#[test]
#[ignore]
fn join_200_seeds() {
    let failed = seeds_with_violations(0..200, inca_swish::sdw::campaign::run_join_seed);
    assert!(failed.is_empty(), "join seeds with violations: {failed:?}");
}

/// A join that leaves M out of the joiner (its R_r stays empty) answers
/// wrong queries once they are ready: D2 or D3 catch it.
#[test]
fn broken_join_is_caught() {
    let mut caught = 0;
    for seed in 0..4 {
        let r = inca_swish::sdw::campaign::run_join_seed_with(seed, true).unwrap();
        show(&r);
        if r.violations
            .iter()
            .any(|v| v.starts_with("D2") || v.starts_with("D3"))
        {
            caught += 1;
        }
    }
    assert!(
        caught >= 3,
        "the broken join was caught in {caught} of 4 seeds"
    );
}
