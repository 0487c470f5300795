//! Randomized runs of a hub, several daemons and a fake switch that acks
//! after random delays, with session resets (the resend path), device
//! crashes (holder death by silence and by port-down, then rebuild),
//! daemon pauses (declared dead after three PINGs, rebuilt by DUMP),
//! concurrent writes to the same and different keys, aging and promotion
//! storms. Checks P3 and P4 over the hub's op log, P1/P4 at the fake
//! switch and devices, and convergence of every holder after quiescence.
//! Seeds are printed; `EXOHUB_SEEDS=n` runs more.

mod hub_rig;

use hub_rig::{fm_caps, test_apps, Chaos, Rig, S};
use inca_exoplane::hub::check::{check_p3, check_p4_log};
use inca_exoplane::hub::{Breakage, HubConfig, T_FLUSH};

fn seeds() -> u64 {
    std::env::var("EXOHUB_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6)
}

/// One chaos run; returns the rig for inspection.
fn chaos_run(seed: u64, config: HubConfig, secs: u64) -> Rig {
    let mut rig = Rig::new(seed, 4, config, test_apps, fm_caps());
    rig.chaos = Some(Chaos::default());
    rig.run_until(secs * S);
    // Quiesce: no more traffic or faults; let everything settle.
    rig.chaos = None;
    let end = rig.now + 12 * S;
    rig.run_until(end);
    rig
}

#[test]
fn chaos_runs_keep_p3_p4_and_converge() {
    let mut totals = (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    let mut pauses = 0;
    for seed in 0..seeds() {
        println!("seed {seed}");
        let mut rig = chaos_run(seed, HubConfig::new(4), 20);
        rig.check_converged();
        assert!(
            rig.violations.is_empty(),
            "seed {seed}: {:#?}",
            &rig.violations[..rig.violations.len().min(10)]
        );
        if let Err(v) = check_p3(rig.hub.op_log(), T_FLUSH) {
            panic!("seed {seed}: P3 {v:?}");
        }
        if let Err(v) = check_p4_log(rig.hub.op_log()) {
            panic!("seed {seed}: P4 {v:?}");
        }
        let s = rig.hub.stats().clone();
        println!(
            "  hub {s:?}\n  reinjected {} acks checked {} pauses {}",
            rig.reinjected, rig.acks_checked, rig.pauses
        );
        pauses += rig.pauses;
        totals.0 += s.promotions;
        totals.1 += s.evictions;
        totals.2 += s.applies_resent;
        totals.3 += s.holders_dead;
        totals.4 += rig.reinjected;
        totals.5 += rig.acks_checked;
    }
    // The runs exercised every path the checks are about.
    let (promotions, evictions, resent, dead, reinjected, acks) = totals;
    assert!(promotions > 100 && evictions > 50, "{totals:?}");
    assert!(
        resent > 0 && dead > 0 && pauses > 0,
        "{totals:?} pauses {pauses}"
    );
    assert!(reinjected > 1000 && acks > 1000, "{totals:?}");
}

#[test]
fn fm_insert_before_object_acks_is_caught() {
    let mut caught = 0;
    for seed in 0..3 {
        println!("seed {seed}");
        let mut config = HubConfig::new(4);
        config.breakage = Some(Breakage::FmInsertBeforeObjectAcks);
        let rig = chaos_run(seed, config, 5);
        if let Err(v) = check_p3(rig.hub.op_log(), T_FLUSH) {
            println!("  caught: {v:?}");
            caught += 1;
        }
    }
    assert_eq!(caught, 3, "the P3 checker missed the broken variant");
}

#[test]
fn ack_before_holders_applied_is_caught() {
    for seed in 0..2 {
        println!("seed {seed}");
        let mut config = HubConfig::new(4);
        config.breakage = Some(Breakage::AckBeforeHoldersApplied);
        let rig = chaos_run(seed, config, 3);
        let log = check_p4_log(rig.hub.op_log());
        println!(
            "  log checker: {log:?}\n  rig: {:?}",
            rig.violations.first()
        );
        assert!(log.is_err(), "the P4 log checker missed the broken variant");
        assert!(
            rig.violations.iter().any(|v| v.contains("WRITE_ACK")),
            "the device-side P4 check missed the broken variant"
        );
    }
}

#[test]
fn a_seed_replays_the_same_run() {
    let seed = 7;
    println!("seed {seed}");
    let a = chaos_run(seed, HubConfig::new(4), 3);
    let b = chaos_run(seed, HubConfig::new(4), 3);
    let (la, lb): (Vec<_>, Vec<_>) = (
        a.hub.op_log().records().collect(),
        b.hub.op_log().records().collect(),
    );
    assert!(la.len() > 1000, "{} records", la.len());
    assert_eq!(la, lb);
    assert_eq!(a.hub.stats(), b.hub.stats());
}
