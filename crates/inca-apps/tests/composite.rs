//! The composite program: `nat`, `firewall`, `univmon` and `acl` on one
//! `tofino` switch behind the classifier, each app given the same random
//! traffic as the app alone on its own switch. Each app's outputs must be
//! byte-identical (the frames and the ports they leave on; so also how many
//! it dropped), and its control-plane state the same.
//!
//! Seeded random traffic: the seeds are printed; `INCA_SEED=<n>` runs one.

use inca_apps::acl::Acl;
use inca_apps::catalog::{check_app, with_app, AppVisitor};
use inca_apps::firewall::Firewall;
use inca_apps::fixtures::differential::{drive, frame, outputs, Rng};
use inca_apps::nat::Nat;
use inca_apps::params::Params;
use inca_apps::univmon::{UnivMon, MSG_READ};
use inca_switch::composite::addressed;
use inca_switch::device::{ControlMessage, SECONDS};
use inca_switch::{Composite, PortId, Profile, Switch};

/// One app of the scenario: its parameters (alone, and prefixed in the
/// composite) and its ports (inside/in first).
struct App {
    name: &'static str,
    params: &'static [&'static str],
    ports: [PortId; 2],
}

const APPS: [App; 4] = [
    App {
        name: "nat",
        params: &["outside_port=2", "flows=4096"],
        ports: [1, 2],
    },
    App {
        name: "firewall",
        params: &["outside_port=4", "flows=4096"],
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

fn composite_params() -> Vec<String> {
    let mut p = vec![
        "apps=nat,firewall,univmon,acl".to_string(),
        format!(
            "classify={}",
            APPS.iter()
                .flat_map(|a| a.ports.map(|p| format!("{}:port={p}", a.name)))
                .collect::<Vec<_>>()
                .join(";")
        ),
    ];
    for a in &APPS {
        p.extend(a.params.iter().map(|kv| format!("{}.{kv}", a.name)));
    }
    p
}

/// Per app: `(time, port, frame)`, from 10 ms (after the classifier's and
/// the apps' entries are in), a third toward the inside. The apps share one
/// control plane (CPU and channel), so in the composite a new flow's
/// entries take longer to install when other apps keep the CPU busy; each
/// app sends a packet every 1 ms (the apps 250 µs apart), longer than the
/// control plane needs for all four apps' new flows together, so that the
/// contention cannot change whether a packet finds its flow installed.
fn traffic(seed: u64) -> Vec<Vec<(u64, PortId, Vec<u8>)>> {
    let mut rng = Rng(seed);
    APPS.iter()
        .enumerate()
        .map(|(i, a)| {
            (0..200u64)
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

/// What an app did: the frames it sent out (sorted: the shared control
/// plane may reorder re-injected packets) and its control-plane state.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    out: Vec<(PortId, Vec<u8>)>,
    state: String,
}

fn acl_hits(objects: &inca_switch::objects::Objects, acl: &Acl) -> Vec<u64> {
    (0..=acl.rules().len() as u64)
        .map(|i| objects.counter_read(acl.hits().unwrap(), i).unwrap().0)
        .collect()
}

fn state_of(
    app: &str,
    objects: &inca_switch::objects::Objects,
    program: &dyn std::any::Any,
) -> String {
    match app {
        "nat" => {
            let n = program.downcast_ref::<Nat>().unwrap();
            format!("allocated {} refused {}", n.allocated(), n.refused)
        }
        "firewall" => {
            let f = program.downcast_ref::<Firewall>().unwrap();
            format!("connections {}", f.connections())
        }
        "univmon" => {
            let u = program.downcast_ref::<UnivMon>().unwrap();
            format!("{:?} {:?}", u.estimates(), u.candidates())
        }
        "acl" => format!(
            "hits {:?}",
            acl_hits(objects, program.downcast_ref::<Acl>().unwrap())
        ),
        _ => unreachable!(),
    }
}

struct Alone<'a> {
    app: &'a App,
    frames: &'a [(u64, PortId, Vec<u8>)],
}

impl AppVisitor for Alone<'_> {
    type Output = Outcome;
    fn visit<P: inca_switch::Program>(self, program: P) -> Outcome {
        let read = (self.app.name == "univmon").then(|| ControlMessage {
            kind: MSG_READ,
            body: vec![],
        });
        let mut h = drive(
            Switch::new(Profile::tofino(), program).unwrap(),
            self.frames,
            read,
        );
        let out = outputs(&h.take(), self.app.ports);
        let state = state_of(
            self.app.name,
            h.device.objects(),
            h.device.program() as &dyn std::any::Any,
        );
        Outcome { out, state }
    }
}

fn composite() -> Composite {
    struct Get;
    impl AppVisitor for Get {
        type Output = Composite;
        fn visit<P: inca_switch::Program>(self, program: P) -> Composite {
            let any: Box<dyn std::any::Any> = Box::new(program);
            *any.downcast::<Composite>().unwrap()
        }
    }
    let params = composite_params();
    let p = Params::parse(params.iter().map(String::as_str)).unwrap();
    with_app("composite", &p, Get).unwrap()
}

fn block_program<'a>(c: &'a Composite, app: &str) -> &'a dyn std::any::Any {
    match app {
        "nat" => c.block::<Nat>(app).unwrap(),
        "firewall" => c.block::<Firewall>(app).unwrap(),
        "univmon" => c.block::<UnivMon>(app).unwrap(),
        "acl" => c.block::<Acl>(app).unwrap(),
        _ => unreachable!(),
    }
}

fn differential(seed: u64) {
    println!("composite differential test: seed {seed} (INCA_SEED={seed} reruns it)");
    let per_app = traffic(seed);
    let mut all: Vec<_> = per_app.iter().flatten().cloned().collect();
    all.sort_by_key(|f| f.0);
    let read = addressed(
        "univmon",
        ControlMessage {
            kind: MSG_READ,
            body: vec![],
        },
    );
    let mut h = drive(
        Switch::new(Profile::tofino(), composite()).unwrap(),
        &all,
        read,
    );
    let sent = h.take();
    let together: Vec<_> = APPS.iter().map(|a| outputs(&sent, a.ports)).collect();
    assert_eq!(
        together.iter().map(Vec::len).sum::<usize>(),
        sent.len(),
        "seed {seed}: output on a port of no app"
    );
    let c = h.device.program();
    assert_eq!(c.counters().unclassified, 0, "seed {seed}");
    assert!(
        h.device.violations().is_empty(),
        "seed {seed}: {:?}",
        &h.device.violations()[..1]
    );
    for ((a, frames), out) in APPS.iter().zip(&per_app).zip(together) {
        let params = Params::parse(a.params.iter().copied()).unwrap();
        let alone = with_app(a.name, &params, Alone { app: a, frames }).unwrap();
        let state = state_of(a.name, h.device.objects(), block_program(c, a.name));
        assert_eq!(
            out.len(),
            alone.out.len(),
            "seed {seed}: {} sent a different number of frames",
            a.name
        );
        assert!(out == alone.out, "seed {seed}: {} frames differ", a.name);
        assert_eq!(state, alone.state, "seed {seed}: {} state differs", a.name);
        if a.name == "univmon" {
            assert!(
                state.contains("Estimate"),
                "seed {seed}: the read was answered: {state}"
            );
        }
        // Not vacuous: every app forwarded some traffic, and every app but
        // the monitor dropped some.
        let drops = a.name != "univmon";
        assert!(
            !out.is_empty() && (out.len() < frames.len()) == drops,
            "seed {seed}: {}: {} of {}",
            a.name,
            out.len(),
            frames.len()
        );
    }
}

#[test]
fn each_app_in_the_composite_behaves_as_alone() {
    match std::env::var("INCA_SEED").ok().and_then(|s| s.parse().ok()) {
        Some(seed) => differential(seed),
        None => (1..=6).for_each(differential),
    }
}

#[test]
fn the_composite_reports_per_app_resources_and_names_what_does_not_fit() {
    let params = composite_params();
    let p = Params::parse(params.iter().map(String::as_str)).unwrap();
    let placement = check_app("composite", &p, &Profile::tofino()).unwrap();
    let blocks: Vec<_> = placement.blocks.iter().map(|b| b.block.as_str()).collect();
    assert_eq!(blocks, ["classifier", "nat", "firewall", "univmon", "acl"]);
    assert!(placement.object("nat/nat_out").is_some());
    let text = placement.to_string();
    assert!(text.contains("univmon"), "{text}");

    let mut big = params.clone();
    big.push("nat.flows=10000000".into());
    let p = Params::parse(big.iter().map(String::as_str)).unwrap();
    let e = check_app("composite", &p, &Profile::tofino())
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"nat/nat_"), "{e}");

    // Parameters of an app not in the composite, or unknown to the app.
    for bad in ["lb.flows=4", "nat.bogus=1", "apps="] {
        let mut ps = params.clone();
        ps.push(bad.into());
        let p = Params::parse(ps.iter().map(String::as_str)).unwrap();
        assert!(
            check_app("composite", &p, &Profile::tofino()).is_err(),
            "{bad}"
        );
    }
}
