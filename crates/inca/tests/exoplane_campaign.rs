//! ExoPlane end to end in the simulator (experiments/exoplane/): the rack
//! runs (new flows set up through the daemons and the hub, hot flows
//! promoted to the switch, counters merged), and the fault campaign's
//! short version — a few seeds with device crashes, pauses, link flaps and
//! session resets — passes its §6 checks, while a hub broken on purpose
//! (FM insert before the object acks; a write acknowledged before its
//! holders applied it) fails them.

use std::path::{Path, PathBuf};

use inca_exoplane::device::ExoDevice;
use inca_exoplane::switch::ExoSwitch;
use inca_sim::engine::Simulation;
use inca_sim::scenario::Loaded;
use inca_switch::Switch;
use inca_system::{Judgement, SystemFactory};

fn scenario(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../experiments/exoplane")
        .join(file)
}

/// Runs `seed` of `path` checked; the violations and the finished run.
fn run(path: &Path, seed: u64, set: &[String]) -> (Vec<String>, Simulation) {
    let (j, sim) = judged(path, seed, set);
    (j.violations, sim)
}

/// Runs `seed` of `path` checked; what the checks found and judged, and
/// the finished run.
fn judged(path: &Path, seed: u64, set: &[String]) -> (Judgement, Simulation) {
    println!("seed {seed}");
    let loaded = Loaded::from_file(path, set).expect("the scenario loads");
    let factory = SystemFactory::checked(inca::registry());
    let mut built = loaded.build(&factory, Some(seed), None).expect("it builds");
    built.sim.run_until(built.duration, |_| {});
    let judgement = factory.judge(&built.sim);
    (judgement, built.sim)
}

fn counter(sim: &Simulation, node: &str, name: &str) -> u64 {
    sim.node_reports()
        .into_iter()
        .find(|(n, _, _)| n == node)
        .and_then(|(_, _, r)| r.counters.get(name).copied())
        .unwrap_or(0)
}

#[test]
fn the_rack_sets_up_serves_and_promotes_flows() {
    let set = ["duration=\"1500ms\"".to_string()];
    let (violations, sim) = run(&scenario("rack.toml"), 1, &set);
    assert!(violations.is_empty(), "{}", violations.join("\n"));
    // Both devices set flows up through the hub and served them.
    for nic in ["nic0", "nic1"] {
        assert!(counter(&sim, nic, "daemon/setups_ok") > 50, "{nic}");
        assert!(counter(&sim, nic, "exo/served") > 1000, "{nic}");
        assert_eq!(counter(&sim, nic, "daemon/setups_failed"), 0, "{nic}");
    }
    // Hot flows were promoted and then served by the switch alone.
    assert!(counter(&sim, "sw", "hub/promotions") > 10);
    assert!(counter(&sim, "sw", "exo/fm_hits") > 1000);
    assert!(counter(&sim, "sw", "exo/from_dev") > 1000);
    // Every device-served packet reached the server (none lost in setup
    // beyond the daemons' bounded buffers).
    let sw = sim.node_id("sw").unwrap();
    let hub = sim.node::<Switch<ExoSwitch>>(sw).unwrap().program().hub();
    assert!(hub.is_some_and(|h| h.stats().writes > 100));
    let d = sim.node_id("nic0").unwrap();
    assert!(sim
        .node::<Switch<ExoDevice>>(d)
        .unwrap()
        .program()
        .daemon()
        .is_some());
}

#[test]
fn short_campaign_finds_no_violation() {
    // Seeds 1-3 shift the hot flows (2, 3), seed 4 storms three times.
    let mut promotions = Vec::new();
    for seed in 1..=4 {
        let (judgement, sim) = judged(&scenario("campaign.toml"), seed, &[]);
        let violations = &judgement.violations;
        assert!(
            violations.is_empty(),
            "seed {seed}:\n{}",
            violations.join("\n")
        );
        // The checks looked: every P1 hit, the op log, and the counter
        // cells of the firewall's many sources (P6).
        let n = |what: &str| judgement.judged.get(what).copied().unwrap_or(0);
        println!("seed {seed} judged {:?}", judgement.judged);
        assert!(n("exoplane: flow-manager hits (P1)") > 1000, "seed {seed}");
        assert!(
            n("exoplane: hub op-log entries (P3, P4)") > 1000,
            "seed {seed}"
        );
        assert!(
            n("exoplane: counter cells compared (P6)") > 10,
            "seed {seed}"
        );
        assert!(counter(&sim, "sw", "hub/promotions") > 0, "seed {seed}");
        assert!(counter(&sim, "sw", "exo/merges") > 0, "seed {seed}");
        let storms = sim
            .fault_log
            .iter()
            .filter(|(_, f)| f.starts_with("workload_storm"))
            .count();
        promotions.push((storms, counter(&sim, "sw", "hub/promotions")));
        if storms > 0 {
            // A promotion storm: every flow of the stormed workload is
            // reported at once, more than the flow manager's quota, so
            // reports are refused and promoted flows evicted for hotter ones.
            assert!(
                counter(&sim, "sw", "hub/reports_dropped") > 0,
                "seed {seed}"
            );
            assert!(counter(&sim, "sw", "hub/evictions") > 0, "seed {seed}");
        }
    }
    println!("(storms, promotions) per seed: {promotions:?}");
    let calm = promotions.iter().filter(|p| p.0 == 0).map(|p| p.1).max();
    let stormy = promotions.iter().filter(|p| p.0 > 0).map(|p| p.1).min();
    assert!(stormy > calm.map(|c| 2 * c), "{promotions:?}");
}

/// The campaign's scenario with a hub fault switched on.
fn broken(breakage: &str) -> PathBuf {
    let text = std::fs::read_to_string(scenario("campaign.toml")).unwrap();
    let text = text.replace(
        "converged = 1,",
        &format!("converged = 1, breakage = \"{breakage}\","),
    );
    assert!(text.contains(breakage));
    let dir = std::env::temp_dir().join(format!("inca-exo-broken-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{breakage}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_broken_hub_is_caught_by_the_campaign() {
    for (breakage, property) in [("fm_before_acks", "P3"), ("ack_before_apply", "P4")] {
        let path = broken(breakage);
        let caught = (1..=4).any(|seed| {
            let (violations, _) = run(&path, seed, &[]);
            violations.iter().any(|v| v.contains(property))
        });
        let _ = std::fs::remove_file(&path);
        assert!(
            caught,
            "{breakage} was not caught as {property} in seeds 1-4"
        );
    }
}
