//! SRO's §6 properties over randomized faulty runs (drop, duplication,
//! reordering, fail-stop of a head, middle or tail), and the broken
//! variants the same checks must catch.

use inca_swish::sro::checks::{plan, run_plan, run_seed};
use inca_swish::sro::Broken;

fn campaign(seeds: std::ops::Range<u64>) {
    let mut judged = std::collections::BTreeMap::new();
    let mut failures = 0;
    for seed in seeds {
        let r = run_seed(seed).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        println!("seed {seed}: {:?} {:?}", r.notes, r.faults);
        assert!(
            r.violations.is_empty(),
            "seed {seed} (rerun: run_seed({seed})): {:#?}",
            r.violations
        );
        failures += r.faults.len();
        for (k, v) in r.judged {
            *judged.entry(k).or_insert(0u64) += v;
        }
    }
    println!("judged: {judged:#?}; runs with a fail-stop: {failures}");
    for what in [
        "sro S1: operations",
        "sro S2: releases",
        "sro S3: applies",
        "sro S4: endpoint claims",
        "sro S4: table entries compared",
        "sro S5: requests",
    ] {
        assert!(
            judged.get(what).copied().unwrap_or(0) > 0,
            "{what} judged nothing"
        );
    }
    assert!(failures > 0, "no run had a fail-stop");
}

#[test]
fn sro_holds_s1_to_s6_over_random_faulty_runs() {
    campaign(0..24);
}

/// `cargo test --release -p inca-swish --test sro_campaign -- --ignored`
#[test]
#[ignore]
fn sro_holds_s1_to_s6_over_200_seeds() {
    campaign(0..200);
}

#[test]
fn a_head_that_acks_before_the_tail_is_caught() {
    let mut caught = 0;
    for seed in 0..4 {
        let mut p = plan(seed, Broken::HeadAcksEarly);
        p.failures.clear();
        let r = run_plan(seed, &p).unwrap();
        println!(
            "seed {seed}: {} violations, e.g. {:?}",
            r.violations.len(),
            r.violations.first()
        );
        if r.violations.iter().any(|v| v.starts_with("S2")) {
            caught += 1;
        }
    }
    assert_eq!(caught, 4, "S2 must catch an early ack in every run");
}

/// Non-tail replicas that serve reads from uncommitted entries: when the
/// head fails after installing an entry that never reaches the others, a
/// later write of the key commits another value, and the sinks have seen
/// both (S1). The seeds are runs whose plan fails the head mid-traffic.
#[test]
fn reads_without_the_pending_check_are_caught() {
    for seed in [7, 18, 26, 39] {
        let p = plan(seed, Broken::NoPendingCheck);
        assert_eq!(
            p.failures.first().map(|f| f.0),
            Some(1),
            "seed {seed} fails the head"
        );
        let r = run_plan(seed, &p).unwrap();
        println!("seed {seed}: {:?}", r.violations.first());
        assert!(
            r.violations.iter().any(|v| v.starts_with("S1")),
            "seed {seed}: S1 must catch a read of an uncommitted entry"
        );
        let ok = run_plan(seed, &plan(seed, Broken::None)).unwrap();
        assert!(ok.violations.is_empty(), "seed {seed}: {:?}", ok.violations);
    }
}
