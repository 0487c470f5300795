//! P13 (ExoPlane spec §6): every solution satisfies (4.1)–(4.4) and
//! affinity (checked by `check::violations`, which recomputes everything);
//! on random instances with at most 12 binaries the optimum equals brute
//! force; the reformulation's optimum equals the naive formulation's;
//! infeasible inputs are reported with the constraint that fails.
//!
//! The random instances obey the cost contract the profiler guarantees
//! (`Instance::contract_violation`). Seeds are printed; `INCA_SEED=<n>`
//! runs one.

use inca_plan::check::violations;
use inca_plan::model::{Affinity, AppModel, DeviceCost, DeviceType, Instance};
use inca_plan::{brute, naive, reform, SolveError, SolveOptions};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn exact() -> SolveOptions {
    SolveOptions {
        mip_rel_gap: 0.0,
        ..SolveOptions::default()
    }
}

/// A random instance: `apps` apps of up to `quanta` quanta, `devices`
/// identical devices, 2 switch resources and 2 device resources.
fn random_instance(rng: &mut ChaCha8Rng, apps: usize, quanta: usize, devices: usize) -> Instance {
    let sw_res = 2;
    let dev_res = 2;
    let mut list = Vec::new();
    for p in 0..apps {
        let n = rng.gen_range(1..=quanta);
        let mut share: Vec<f64> = (0..n).map(|_| rng.gen_range(0.01..1.0)).collect();
        share.sort_by(|a, b| b.total_cmp(a));
        let s: f64 = share.iter().sum();
        share.iter_mut().for_each(|f| *f /= s);
        // Nondecreasing switch marginals.
        let fit = rng.gen_range(0..=n);
        let mut cur: Vec<f64> = (0..sw_res).map(|_| rng.gen_range(0.0..3.0)).collect();
        let mut switch_quantum = Vec::new();
        for _ in 0..fit {
            switch_quantum.push(cur.clone());
            for c in cur.iter_mut() {
                *c += if rng.gen_bool(0.5) {
                    rng.gen_range(0.0..2.0)
                } else {
                    0.0
                };
            }
        }
        let affinity = match rng.gen_range(0..10) {
            0 => Affinity::High,
            1 => Affinity::Low,
            _ => Affinity::Medium,
        };
        let device = vec![rng.gen_bool(0.85).then(|| DeviceCost {
            per_quantum: (0..dev_res).map(|_| rng.gen_range(0.5..4.0)).collect(),
            base: (0..dev_res).map(|_| rng.gen_range(0.0..3.0)).collect(),
        })];
        list.push(AppModel {
            name: format!("app{p}"),
            weight: rng.gen_range(0.1..1.0),
            quantum: 1024,
            share,
            affinity,
            lat_switch: rng.gen_range(200.0..500.0),
            lat_device: rng.gen_range(4000.0..7000.0),
            switch_quantum,
            switch_base: (0..sw_res).map(|_| rng.gen_range(0.0..4.0)).collect(),
            device,
        });
    }
    let inst = Instance {
        switch_resources: vec!["SRAM".into(), "hash".into()],
        switch_cap: (0..sw_res).map(|_| rng.gen_range(4.0..20.0)).collect(),
        device_types: vec![DeviceType {
            name: "nic".into(),
            count: devices,
            resources: vec!["DRAM".into(), "SALU".into()],
            cap: (0..dev_res).map(|_| rng.gen_range(6.0..24.0)).collect(),
        }],
        apps: list,
        fm_cap: rng.gen_bool(0.3).then(|| 1024 * rng.gen_range(0..4)),
    };
    assert_eq!(inst.contract_violation(), None);
    inst
}

fn seeds(n: u64) -> Vec<u64> {
    match std::env::var("INCA_SEED") {
        Ok(s) => vec![s.parse().expect("INCA_SEED is a number")],
        Err(_) => (0..n).collect(),
    }
}

fn assert_feasible(inst: &Instance, sol: &inca_plan::Solution, what: &str, seed: u64) {
    let v = violations(inst, &sol.assignment);
    assert!(v.is_empty(), "seed {seed}: {what} solution breaks {v:?}");
    let obj = inst.objective(&sol.assignment);
    assert!((obj - sol.objective).abs() < 1e-9 * obj.max(1.0));
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn optimum_equals_brute_force_on_small_instances() {
    let mut compared = 0;
    let mut infeasible = 0;
    for seed in seeds(300) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let inst = loop {
            let apps = rng.gen_range(1..=3);
            let devices = rng.gen_range(0..=3);
            let i = random_instance(&mut rng, apps, 4, devices);
            if i.naive_binaries() <= 12 {
                break i;
            }
        };
        println!("seed {seed}: {} naive binaries", inst.naive_binaries());
        let oracle = brute::solve(&inst);
        let n = naive::solve(&inst, &exact());
        let r = reform::solve(&inst, &exact());
        match oracle {
            None => {
                infeasible += 1;
                assert!(
                    matches!(n, Err(SolveError::Infeasible { .. })),
                    "seed {seed}: naive {n:?}"
                );
                assert!(
                    matches!(r, Err(SolveError::Infeasible { .. })),
                    "seed {seed}: reform {r:?}"
                );
            }
            Some((best, _)) => {
                compared += 1;
                let n = n.unwrap_or_else(|e| panic!("seed {seed}: naive: {e}"));
                let r = r.unwrap_or_else(|e| panic!("seed {seed}: reform: {e}"));
                assert_feasible(&inst, &n, "naive", seed);
                assert_feasible(&inst, &r, "reform", seed);
                assert!(
                    close(n.objective, best),
                    "seed {seed}: naive {} brute {best}",
                    n.objective
                );
                assert!(
                    close(r.objective, best),
                    "seed {seed}: reform {} brute {best}",
                    r.objective
                );
            }
        }
    }
    println!("{compared} compared, {infeasible} infeasible");
    if std::env::var("INCA_SEED").is_err() {
        assert!(
            compared > 100 && infeasible > 5,
            "the generator must give both kinds"
        );
    }
}

#[test]
fn reformulation_matches_naive_on_larger_instances() {
    // The naive model of symmetric devices is slow to prove optimal (the
    // reason for the reformulation): keep these a few dozen binaries.
    for seed in seeds(25) {
        let mut rng = ChaCha8Rng::seed_from_u64(1000 + seed);
        let inst = random_instance(&mut rng, 3, 8, 3);
        println!("seed {seed}: {} naive binaries", inst.naive_binaries());
        let n = naive::solve(&inst, &exact());
        let r = reform::solve(&inst, &exact());
        match (n, r) {
            (Ok(n), Ok(r)) => {
                assert_feasible(&inst, &n, "naive", seed);
                assert_feasible(&inst, &r, "reform", seed);
                assert!(
                    close(n.objective, r.objective),
                    "seed {seed}: naive {} reform {}",
                    n.objective,
                    r.objective
                );
                assert!(
                    r.columns < n.columns,
                    "seed {seed}: the reformulation is smaller"
                );
            }
            (Err(SolveError::Infeasible { .. }), Err(SolveError::Infeasible { .. })) => {}
            (n, r) => panic!("seed {seed}: naive {n:?} vs reform {r:?}"),
        }
    }
}

fn tiny() -> Instance {
    Instance {
        switch_resources: vec!["SRAM blocks".into()],
        switch_cap: vec![10.0],
        device_types: vec![DeviceType {
            name: "smartnic".into(),
            count: 1,
            resources: vec!["DRAM KiB".into()],
            cap: vec![100.0],
        }],
        apps: vec![AppModel {
            name: "nat".into(),
            weight: 1.0,
            quantum: 1024,
            share: vec![0.5, 0.3, 0.2],
            affinity: Affinity::Medium,
            lat_switch: 300.0,
            lat_device: 5000.0,
            switch_quantum: vec![vec![4.0]; 3],
            switch_base: vec![1.0],
            device: vec![Some(DeviceCost {
                per_quantum: vec![20.0],
                base: vec![10.0],
            })],
        }],
        fm_cap: None,
    }
}

#[test]
fn a_plan_that_cannot_fit_names_the_failing_constraint() {
    // Devices too small for the tail: the device's DRAM row fails.
    let mut inst = tiny();
    inst.device_types[0].cap = vec![15.0];
    inst.switch_cap = vec![5.0];
    for solve in [naive::solve, reform::solve] {
        let e = solve(&inst, &exact()).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("(4.3)"), "{msg}");
        assert!(
            msg.contains("DRAM KiB") || msg.contains("SRAM blocks"),
            "{msg}"
        );
    }
    // HIGH affinity with more quanta than the switch holds.
    let mut inst = tiny();
    inst.apps[0].affinity = Affinity::High;
    inst.apps[0].switch_quantum.truncate(2);
    for solve in [naive::solve, reform::solve] {
        let msg = solve(&inst, &exact()).unwrap_err().to_string();
        assert!(msg.contains("affinity HIGH"), "{msg}");
    }
    // No compatible device and not all of it fits on the switch.
    let mut inst = tiny();
    inst.apps[0].device = vec![None];
    inst.apps[0].switch_quantum.truncate(1);
    for solve in [naive::solve, reform::solve] {
        let msg = solve(&inst, &exact()).unwrap_err().to_string();
        assert!(msg.contains("(4.2)"), "{msg}");
    }
}

#[test]
fn the_checker_catches_broken_assignments() {
    use inca_plan::model::{Assignment, Loc};
    let inst = tiny();
    let ok = reform::solve(&inst, &exact()).unwrap();
    assert!(violations(&inst, &ok.assignment).is_empty());
    // Everything on the switch: 3 × 4 + 1 = 13 > 10 SRAM blocks.
    let all = Assignment {
        loc: vec![vec![Loc::Switch; 3]],
    };
    assert!(violations(&inst, &all)
        .iter()
        .any(|v| v.contains("(4.3) switch SRAM")));
    // A quantum missing.
    let short = Assignment {
        loc: vec![vec![Loc::Switch; 2]],
    };
    assert!(violations(&inst, &short)
        .iter()
        .any(|v| v.contains("(4.1)")));
    // LOW affinity with a switch quantum.
    let mut low = inst.clone();
    low.apps[0].affinity = Affinity::Low;
    let one = Assignment {
        loc: vec![vec![Loc::Switch, Loc::Device(0), Loc::Device(0)]],
    };
    assert!(violations(&low, &one)
        .iter()
        .any(|v| v.contains("affinity LOW")));
    // The optimum here: two quanta on the switch (9 blocks), one on the NIC.
    assert_eq!(ok.assignment.counts(&inst).switch, vec![2]);
}
