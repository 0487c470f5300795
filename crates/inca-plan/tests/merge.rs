//! P14 (ExoPlane spec §6): the merged program has no name collisions, its
//! sizes equal the plan, and each app in it gives the same outputs and
//! table state as the app alone, with the planned sizes, on random packets.
//!
//! Seeded random traffic (the composite test's helpers,
//! `inca_apps::fixtures::differential`); seeds are printed, `INCA_SEED=<n>`
//! runs one.

use std::collections::{BTreeMap, HashSet};

use inca_apps::catalog::{with_app, AppVisitor};
use inca_apps::fixtures::differential::{drive, frame, outputs, Rng};
use inca_apps::params::Params;
use inca_plan::merge::{build, MergeApp};
use inca_plan::plan::{plan, AppSpec, PlanInputs};
use inca_plan::Affinity;
use inca_switch::device::SECONDS;
use inca_switch::objects::Objects;
use inca_switch::{PortId, Profile, Switch};

struct App {
    name: &'static str,
    params: &'static [&'static str],
    ports: [PortId; 2],
}

const APPS: [App; 4] = [
    App {
        name: "nat",
        params: &["outside_port=2"],
        ports: [1, 2],
    },
    App {
        name: "firewall",
        params: &["outside_port=4"],
        ports: [3, 4],
    },
    App {
        name: "univmon",
        params: &["in_port=5", "out_port=6", "threshold=20"],
        ports: [5, 6],
    },
    App {
        name: "acl",
        params: &[
            "out_port=8",
            "rules=deny dst=203.0.113.0/29,proto=udp; permit proto=tcp,dport=80; deny proto=tcp,sport=7",
        ],
        ports: [7, 8],
    },
];

fn classify() -> String {
    APPS.iter()
        .flat_map(|a| a.ports.map(|p| format!("{}:port={p}", a.name)))
        .collect::<Vec<_>>()
        .join(";")
}

/// The four apps, `flows` keys each, on `devices` smart NICs.
fn inputs(flows: u64, devices: usize) -> PlanInputs {
    let specs = APPS
        .iter()
        .map(|a| AppSpec {
            name: a.name.into(),
            app: a.name.into(),
            params: Params::parse(a.params.iter().copied()).unwrap(),
            flows,
            weight: None,
            affinity: (a.name == "univmon").then_some(Affinity::High),
        })
        .collect();
    let mut i = PlanInputs::new(specs, devices);
    i.classify = classify();
    i
}

/// Table name → entries installed, for the objects of `prefix` (stripped).
fn tables(objects: &Objects, prefix: &str) -> BTreeMap<String, usize> {
    objects
        .table_occupancy()
        .filter_map(|(name, len, _)| {
            let rest = if prefix.is_empty() {
                Some(name)
            } else {
                name.strip_prefix(prefix)
            };
            rest.map(|n| (n.to_string(), len))
        })
        .collect()
}

struct Alone<'a> {
    ports: [PortId; 2],
    frames: &'a [(u64, PortId, Vec<u8>)],
}

impl AppVisitor for Alone<'_> {
    type Output = (Vec<(PortId, Vec<u8>)>, BTreeMap<String, usize>);
    fn visit<P: inca_switch::Program>(self, program: P) -> Self::Output {
        let mut h = drive(
            Switch::new(Profile::tofino(), program).unwrap(),
            self.frames,
            None,
        );
        (
            outputs(&h.take(), self.ports),
            tables(h.device.objects(), ""),
        )
    }
}

fn traffic(seed: u64) -> Vec<Vec<(u64, PortId, Vec<u8>)>> {
    let mut rng = Rng(seed);
    APPS.iter()
        .enumerate()
        .map(|(i, a)| {
            (0..150u64)
                .map(|n| {
                    let toward_inside = rng.below(3) == 0;
                    let port = a.ports[usize::from(toward_inside)];
                    let at = SECONDS / 100 + n * 1_000_000 + i as u64 * 250_000;
                    (at, port, frame(&mut rng, toward_inside))
                })
                .collect()
        })
        .collect()
}

fn differential(merged: &[MergeApp], seed: u64) {
    println!("merger differential test: seed {seed} (INCA_SEED={seed} reruns it)");
    let per_app = traffic(seed);
    let mut all: Vec<_> = per_app.iter().flatten().cloned().collect();
    all.sort_by_key(|f| f.0);
    let program = build(merged, &classify()).unwrap();
    let mut h = drive(Switch::new(Profile::tofino(), program).unwrap(), &all, None);
    let sent = h.take();
    assert!(h.device.violations().is_empty(), "seed {seed}");
    for (a, frames) in APPS.iter().zip(&per_app) {
        let m = merged.iter().find(|m| m.name == a.name).unwrap();
        let together = outputs(&sent, a.ports);
        let (alone, alone_tables) = with_app(
            &m.app,
            &m.params,
            Alone {
                ports: a.ports,
                frames,
            },
        )
        .unwrap();
        assert!(
            !alone.is_empty(),
            "seed {seed}: {} forwarded nothing",
            a.name
        );
        assert!(together == alone, "seed {seed}: {} frames differ", a.name);
        let merged_tables = tables(h.device.objects(), &format!("{}/", a.name));
        assert_eq!(
            merged_tables, alone_tables,
            "seed {seed}: {} tables differ",
            a.name
        );
    }
}

#[test]
fn each_app_of_the_merged_program_behaves_as_alone_with_the_planned_sizes() {
    // 300,000 flows per app do not all fit the switch: the plan gives each
    // MEDIUM app a share, the rest to the NICs.
    let inputs = inputs(300_000, 2);
    let report = plan(&inputs).unwrap();
    println!("{report}");
    let placement = report.placement.as_ref().expect("apps on the switch");
    // No name collisions.
    let names: HashSet<&str> = placement.objects.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names.len(), placement.objects.len());
    // Sizes equal the plan: each app's key-scaled tables and flow manager
    // hold n_p · Q_p keys.
    for a in &report.apps {
        assert!(a.switch_quanta > 0, "{} has no switch share", a.name);
        if a.affinity == Affinity::High {
            continue;
        }
        assert!(
            a.switch_keys < a.flows,
            "{}: the whole app fits, no split to test",
            a.name
        );
        let fm = placement.object(&format!("fm_{}", a.name)).unwrap();
        assert!(
            fm.kind
                .contains(&inca_switch::placement::thousands(a.switch_keys)),
            "{}",
            fm.kind
        );
        let m = report.merged.iter().find(|m| m.name == a.name).unwrap();
        let key = inca_plan::profile::key_param(&m.app).unwrap();
        assert_eq!(m.params.text(key), Some(a.switch_keys.to_string().as_str()));
    }
    // Retried merges name the object that failed.
    assert_eq!(report.retries.len(), report.attempts - 1);
    for r in &report.retries {
        assert!(r.contains('/') || r.contains("fm_"), "{r}");
    }
    let blocks: Vec<&str> = placement.blocks.iter().map(|b| b.block.as_str()).collect();
    assert!(
        blocks.contains(&"nat") && blocks.contains(&"fm_nat"),
        "{blocks:?}"
    );
    match std::env::var("INCA_SEED").ok().and_then(|s| s.parse().ok()) {
        Some(seed) => differential(&report.merged, seed),
        None => (1..=3).for_each(|s| differential(&report.merged, s)),
    }
}

#[test]
fn a_switch_that_cannot_hold_the_plan_is_shrunk_and_retried() {
    // Fewer stages than the apps' dependency chains and tables want: the
    // aggregate capacities still look ample to the ILP, the stage allocator
    // refuses, and the planner shrinks the app it names and re-solves.
    let mut inputs = inputs(300_000, 2);
    inputs.switch.stages = 6;
    match plan(&inputs) {
        Ok(r) => {
            println!("{r}");
            assert!(r.attempts > 1, "expected a retry: {r}");
            assert_eq!(r.retries.len(), r.attempts - 1);
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.contains("attempts") || msg.contains("infeasible"),
                "{msg}"
            );
        }
    }
}
