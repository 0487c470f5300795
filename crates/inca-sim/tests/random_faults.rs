//! Randomised impairment windows and partitions (`[random_faults]` kinds
//! "impair" and "partition"): drawn from the seed alone, windows restore
//! the configured link values, partitions stop frames between the groups
//! and heal, overlapping faults compose, and bad values are refused with
//! their field and line. Workload shifts and storms reach the workload
//! named.

use inca_sim::engine::{Fault, Node};
use inca_sim::link::{Impairment, LossModel};
use inca_sim::nodes::host::Host;
use inca_sim::scenario::{Built, FactoryError, Loaded, SwitchFactory};
use inca_switch::Profile;

struct NoSwitches;
impl SwitchFactory for NoSwitches {
    fn build(
        &self,
        program: &str,
        _: &[(String, String)],
        _: Profile,
    ) -> Result<Box<dyn Node>, FactoryError> {
        Err(format!("no switches here (asked for {program})").into())
    }
}

fn build(text: &str, seed: u64) -> Built {
    Loaded::from_str(text, "test.toml", &[])
        .unwrap()
        .build(&NoSwitches, Some(seed), None)
        .unwrap()
}

fn load_err(text: &str) -> String {
    match Loaded::from_str(text, "test.toml", &[]) {
        Ok(l) => match l.build(&NoSwitches, Some(1), None) {
            Ok(_) => panic!("loads and builds"),
            Err(e) => e.to_string(),
        },
        Err(e) => e.to_string(),
    }
}

fn rx(b: &Built, name: &str) -> u64 {
    let id = b.sim.node_id(name).unwrap();
    b.sim.node::<Host>(id).unwrap().stats().rx_packets
}

/// a — r1 — r2 — b, and c on r2; a sends b 100 packets per ms. The a-r1
/// link is configured with 1 % loss.
const LINE: &str = r#"name = "line"
duration = "40ms"
[[router]]
name = "r1"
detect_delay = "100us"
[[router]]
name = "r2"
detect_delay = "100us"
[[host]]
name = "a"
ip = "10.0.0.1"
[[host.workload]]
kind = "udp"
dst = "10.0.1.1:9"
pps = 100000
size = 200
[[host]]
name = "b"
ip = "10.0.1.1"
[[host]]
name = "c"
ip = "10.0.2.1"
[[link]]
a = "a:0"
b = "r1:0"
loss = 0.01
[[link]]
a = "r1:1"
b = "r2:0"
[[link]]
a = "r2:1"
b = "b:0"
[[link]]
a = "r2:2"
b = "c:0"
"#;

const IMPAIR: &str = r#"
[random_faults]
start = "1ms"
stop = "30ms"
mean_interval = "2ms"
down_for = "3ms"
kinds = ["impair", "partition", "crash"]
nodes = ["r1", "r2"]
partition_nodes = ["a", "b", "c"]
impair = { loss = 0.2, duplicate = 0.1, reorder = 0.3, reorder_delay = "50us", jitter = "20us", links = ["a-r1", "r1-r2"] }
"#;

#[test]
fn the_draw_follows_the_seed_and_shows_values_and_groups() {
    let text = format!("{LINE}{IMPAIR}");
    let log = |seed| {
        let mut b = build(&text, seed);
        b.sim.run_until(b.duration, |_| {});
        b.sim.fault_log.clone()
    };
    let (a1, a2, b1) = (log(3), log(3), log(4));
    assert_eq!(a1, a2, "same seed, same faults");
    assert_ne!(a1, b1, "another seed, other faults");
    let all: Vec<String> = (1..=6).flat_map(log).map(|(_, s)| s).collect();
    let impaired = all.iter().find(|s| s.contains("impaired")).unwrap();
    assert!(
        impaired.contains("loss") && impaired.contains('%') && impaired.contains("link "),
        "{impaired}"
    );
    assert!(
        all.iter()
            .any(|s| s.contains("window") && s.contains("back to loss")),
        "{all:?}"
    );
    let cut = all
        .iter()
        .find(|s| s.starts_with("partition [") && s.contains("cuts"))
        .unwrap();
    assert!(cut.contains("] | ["), "{cut}");
    assert!(all.iter().any(|s| s.contains("healed")), "{all:?}");
}

#[test]
fn impairment_windows_apply_within_bounds_and_restore_the_configured_values() {
    let text = format!("{LINE}{IMPAIR}").replace(
        "kinds = [\"impair\", \"partition\", \"crash\"]",
        "kinds = [\"impair\"]",
    );
    let mut b = build(&text, 7);
    let a_r1 = b.sim.link_id("a-r1").unwrap();
    let r1_r2 = b.sim.link_id("r1-r2").unwrap();
    let configured = [
        b.sim.channel(a_r1, 0).unwrap().config,
        b.sim.channel(r1_r2, 0).unwrap().config,
    ];
    assert_eq!(configured[0].loss, LossModel::Bernoulli { p: 0.01 });
    let mut changed = 0;
    let mut t = 0;
    while t < 40_000_000 {
        t += 100_000;
        b.sim.run_until(t, |_| {});
        for (i, l) in [a_r1, r1_r2].into_iter().enumerate() {
            for dir in 0..2 {
                let c = b.sim.channel(l, dir).unwrap().config;
                if c != configured[i] {
                    changed += 1;
                }
                // Never milder than configured, never beyond the maxima.
                let p = match c.loss {
                    LossModel::Bernoulli { p } => p,
                    LossModel::None => 0.0,
                    other => panic!("{other:?}"),
                };
                let lo = if i == 0 { 0.01 } else { 0.0 };
                assert!((lo..=0.2).contains(&p), "loss {p}");
                assert!(c.duplicate <= 0.1 && c.reorder <= 0.3, "{c:?}");
                assert!(c.jitter <= 20_000, "{c:?}");
                assert!(c.reorder_delay <= 50_000.max(configured[i].reorder_delay));
                assert_eq!(c.rate_bps, configured[i].rate_bps);
            }
        }
    }
    assert!(changed > 10, "windows were open for a while: {changed}");
    // After the last window: the configured values, exactly.
    assert_eq!(b.sim.channel(a_r1, 0).unwrap().config, configured[0]);
    assert_eq!(b.sim.channel(r1_r2, 1).unwrap().config, configured[1]);
    // And the impairments did something to the frames.
    let s = b.sim.channel(r1_r2, 0).unwrap().stats;
    assert!(
        s.lost > 0 && s.duplicated > 0 && s.reordered > 0,
        "a link configured clean lost, duplicated and reordered frames: {s:?}"
    );
}

#[test]
fn overlapping_windows_close_independently() {
    let mut b = build(LINE, 1);
    let l = b.sim.link_id("r1-r2").unwrap();
    let base = b.sim.channel(l, 0).unwrap().config;
    let w1 = b.sim.window_id();
    let w2 = b.sim.window_id();
    let one = Impairment {
        duplicate: Some(0.5),
        ..Impairment::default()
    };
    let two = Impairment {
        jitter: Some(7_000),
        duplicate: Some(0.25),
        ..Impairment::default()
    };
    b.sim.schedule(
        1_000_000,
        Fault::Impair {
            link: l,
            window: w1,
            set: one,
        },
    );
    b.sim.schedule(
        2_000_000,
        Fault::Impair {
            link: l,
            window: w2,
            set: two,
        },
    );
    b.sim.schedule(
        3_000_000,
        Fault::Unimpair {
            link: l,
            window: w1,
        },
    );
    b.sim.schedule(
        4_000_000,
        Fault::SetLoss(l, LossModel::Bernoulli { p: 0.125 }),
    );
    b.sim.schedule(
        5_000_000,
        Fault::Unimpair {
            link: l,
            window: w2,
        },
    );
    let at = |b: &mut Built, t| {
        b.sim.run_until(t, |_| {});
        b.sim.channel(l, 1).unwrap().config
    };
    assert_eq!(at(&mut b, 1_500_000).duplicate, 0.5);
    let c = at(&mut b, 2_500_000);
    assert_eq!(
        (c.duplicate, c.jitter),
        (0.25, 7_000),
        "the later window wins"
    );
    let c = at(&mut b, 3_500_000);
    assert_eq!(
        (c.duplicate, c.jitter),
        (0.25, 7_000),
        "window 2 still open"
    );
    let c = at(&mut b, 4_500_000);
    assert_eq!(
        c.loss,
        LossModel::Bernoulli { p: 0.125 },
        "a loss change under a window"
    );
    assert_eq!(c.jitter, 7_000);
    let c = at(&mut b, 5_500_000);
    assert_eq!(
        c,
        inca_sim::ChannelConfig {
            loss: LossModel::Bernoulli { p: 0.125 },
            ..base
        },
        "configured values, with the loss change kept"
    );
}

#[test]
fn a_random_partition_stops_frames_between_the_groups_and_heals() {
    // Only partitions, over a and b: r1 joins a (its only placed
    // neighbour), r2 joins b, c follows r2; the cut is r1-r2.
    let text = format!(
        "{LINE}\n[random_faults]\nstart = \"5ms\"\nstop = \"12ms\"\nmean_interval = \"1ms\"\ndown_for = \"10ms\"\nkinds = [\"partition\"]\npartition_nodes = [\"a\", \"b\"]\n"
    );
    // A seed whose first partition starts before 12 ms (most do).
    let mut b = build(&text, 1);
    let r1_r2 = b.sim.link_id("r1-r2").unwrap();
    let mut t = 0;
    let mut cut_at = None;
    while t < 40_000_000 {
        t += 50_000;
        b.sim.run_until(t, |_| {});
        if cut_at.is_none() && !b.sim.link_up(r1_r2) {
            cut_at = Some(t);
            break;
        }
    }
    let cut_at = cut_at.expect("a partition came");
    let first = b
        .sim
        .fault_log
        .iter()
        .find(|(_, s)| s.contains("cuts"))
        .unwrap();
    assert!(
        first.1.starts_with("partition [a] | [b] cuts r1-r2"),
        "{first:?}"
    );
    assert!(b.sim.link_up(b.sim.link_id("a-r1").unwrap()));
    // A few frames were in flight; then nothing crosses while it holds.
    b.sim.run_until(cut_at + 100_000, |_| {});
    let before = rx(&b, "b");
    b.sim.run_until(cut_at + 5_000_000, |_| {});
    assert_eq!(rx(&b, "b"), before, "frames crossed the partition");
    // Healed (every partition lasts 10 ms; they may overlap): frames flow.
    b.sim.run_until(b.duration, |_| {});
    assert!(b.sim.link_up(r1_r2));
    assert!(rx(&b, "b") > before + 500, "{} after {before}", rx(&b, "b"));
    assert!(b.sim.fault_log.iter().any(|(_, s)| s.contains("healed")));
}

#[test]
fn healing_a_partition_does_not_revive_a_crashed_nodes_links() {
    let mut b = build(LINE, 1);
    let (r1, r2) = (b.sim.node_id("r1").unwrap(), b.sim.node_id("r2").unwrap());
    let l = b.sim.link_id("r1-r2").unwrap();
    b.sim
        .schedule(1_000_000, Fault::Partition(vec![r1], vec![r2]));
    b.sim.schedule(2_000_000, Fault::Crash(r2));
    b.sim.schedule(3_000_000, Fault::Heal(vec![r1], vec![r2]));
    b.sim.schedule(4_000_000, Fault::LinkDown(l));
    b.sim.schedule(5_000_000, Fault::Restart(r2));
    b.sim.schedule(6_000_000, Fault::LinkUp(l));
    let up = |b: &mut Built, t| {
        b.sim.run_until(t, |_| {});
        b.sim.link_up(l)
    };
    assert!(up(&mut b, 500_000));
    assert!(!up(&mut b, 1_500_000), "partitioned");
    assert!(!up(&mut b, 3_500_000), "healed, but r2 is still down");
    assert!(!up(&mut b, 5_500_000), "r2 restarted, but the link is down");
    assert!(up(&mut b, 6_500_000), "nothing holds it down");
}

#[test]
fn a_partition_of_servers_behind_one_tor_cuts_the_minority() {
    // agg1 — tors — {st1, st2, st3}: st1 apart from st2 and st3 cuts
    // st1-tors only (the ToR stays with the majority of its neighbours).
    let text = r#"name = "rack"
duration = "1ms"
[[router]]
name = "agg1"
[[router]]
name = "tors"
[[host]]
name = "st1"
ip = "10.9.0.1"
[[host]]
name = "st2"
ip = "10.9.0.2"
[[host]]
name = "st3"
ip = "10.9.0.3"
[[link]]
a = "agg1:0"
b = "tors:0"
[[link]]
a = "st1:0"
b = "tors:1"
[[link]]
a = "st2:0"
b = "tors:2"
[[link]]
a = "st3:0"
b = "tors:3"
"#;
    let b = build(text, 1);
    let id = |n| b.sim.node_id(n).unwrap();
    let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(1);
    let s = inca_sim::partition::sides(
        &b.sim,
        [vec![id("st1")], vec![id("st2"), id("st3")]],
        &mut rng,
    );
    assert_eq!(s.sides[0], vec![id("st1")]);
    assert_eq!(
        s.sides[1],
        vec![id("agg1"), id("tors"), id("st2"), id("st3")]
    );
}

#[test]
fn bad_values_are_refused_with_field_and_line() {
    let with = |rf: &str| {
        format!("{LINE}\n[random_faults]\nmean_interval = \"2ms\"\ndown_for = \"1ms\"\n{rf}")
    };
    let line_of =
        |text: &str, needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let cases = [
        (
            "kinds = [\"impair\"]\nimpair = { loss = 1.5 }\n",
            "random_faults.impair.loss",
            "loss = 1.5",
        ),
        (
            "kinds = [\"impair\"]\nimpair = { duplicate = -0.1 }\n",
            "random_faults.impair.duplicate",
            "duplicate = -0.1",
        ),
        (
            "kinds = [\"impair\"]\nimpair = { loss = 0.0 }\n",
            "sets nothing",
            "impair = ",
        ),
        ("kinds = [\"impair\"]\n", "needs an `impair", "kinds = "),
        (
            "kinds = [\"partition\"]\npartition_nodes = [\"a\"]\n",
            "random_faults.partition_nodes",
            "partition_nodes",
        ),
        (
            "kinds = [\"partition\"]\npartition_nodes = []\n",
            "random_faults.partition_nodes",
            "partition_nodes",
        ),
        (
            "kinds = [\"partition\"]\npartition_nodes = [\"a\", \"a\"]\n",
            "names a node twice",
            "partition_nodes",
        ),
        (
            "kinds = [\"partition\"]\npartition_nodes = [\"a\", \"nobody\"]\n",
            "no node named \"nobody\"",
            "partition_nodes",
        ),
        (
            "kinds = [\"impair\"]\nimpair = { loss = 0.1, links = [\"a-zz\"] }\n",
            "random_faults.impair.links",
            "a-zz",
        ),
        ("kinds = [\"flood\"]\n", "unknown kind \"flood\"", "flood"),
        (
            "kinds = [\"workload_shift\"]\nworkloads = [\"a/nobody\"]\n",
            "no workload \"a/nobody\"; known: a/udp0",
            "a/nobody",
        ),
        (
            "kinds = [\"workload_storm\"]\nworkloads = [\"a/udp0\"]\nstorm_factor = 0\n",
            "random_faults.storm_factor",
            "storm_factor",
        ),
        (
            "kinds = [\"workload_storm\"]\n",
            "need `workloads",
            "[random_faults]",
        ),
    ];
    for (rf, field, at) in cases {
        let text = with(rf);
        let e = load_err(&text);
        assert!(e.contains(field), "{rf}: {e}");
        let line = line_of(&text, at);
        assert!(
            e.contains(&format!("test.toml:{line}:")),
            "{rf}: line {line}: {e}"
        );
    }
    // A negative time is not a time (the TOML parser says where).
    let e = load_err(&with(
        "kinds = [\"impair\"]\nimpair = { jitter = \"-5us\" }\n",
    ));
    assert!(e.contains("invalid time") && e.contains("line"), "{e}");
}

#[test]
fn workload_storms_and_shifts_reach_the_workload_named() {
    // a's udp0 over 100 Zipf flows; storms x4 for 1 ms, and shifts.
    let text = format!(
        "{LINE}\n[random_faults]\nstart = \"2ms\"\nstop = \"30ms\"\nmean_interval = \"2ms\"\ndown_for = \"1ms\"\nkinds = [\"workload_shift\", \"workload_storm\"]\nworkloads = [\"a/udp0\"]\nstorm_factor = 4\n"
    )
    .replace("size = 200\n", "size = 200\nflows = 100\nzipf = 1.1\n");
    for seed in [1, 2] {
        println!("seed {seed}");
        let mut b = build(&text, seed);
        b.sim.run_until(40_000_000, |_| {});
        let log = &b.sim.fault_log;
        let count = |what: &str| log.iter().filter(|(_, f)| f.starts_with(what)).count() as u64;
        let (shifts, storms) = (count("workload_shift"), count("workload_storm"));
        println!("{shifts} shifts, {storms} storms: {log:?}");
        assert!(shifts + storms >= 5, "about 14 drawn");
        assert_eq!(count("workload_calm"), storms, "every storm calms down");
        let id = b.sim.node_id("a").unwrap();
        let a = b.sim.node::<Host>(id).unwrap();
        assert_eq!(a.stats().workload_controls, shifts + 2 * storms);
        assert_eq!(a.stats().control_ignored, 0);
        // 100 packets per ms for 40 ms, plus 300 more per ms of storm
        // (overlapping storms nest: their union).
        let (mut depth, mut since, mut stormy) = (0, 0, 0);
        for (t, f) in log {
            if f.starts_with("workload_storm") {
                depth += 1;
                if depth == 1 {
                    since = *t;
                }
            } else if f.starts_with("workload_calm") {
                depth -= 1;
                if depth == 0 {
                    stormy += t - since;
                }
            }
        }
        let sent = a.stats().tx_packets;
        let want = 4_000 + 300 * stormy / 1_000_000;
        assert!(sent.abs_diff(want) <= 2 * storms + 1, "{sent} vs {want}");
    }
}
