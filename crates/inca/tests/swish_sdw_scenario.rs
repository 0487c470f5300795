//! SwiSh SDW as a scenario (experiments/swish/sdw-local2.toml): two
//! `swish_sdw` replicas joined by a 40 ns link, the `swish_controller`
//! server STARTing them over control sessions, and `swish_sdw_app` hosts.
//! `inca run` runs it; from the report: the controller started both
//! replicas over its sessions, the windows advanced, and the updates h1
//! made at replica 1 are what h2's queries at replica 2 read — no earlier
//! than two windows after the first update (D2: a query in window w reads
//! windows ≤ w − 2), all of them at the end. With replica 1 crashed after
//! the updates, the controller's §5.6 recovery over its session restarts
//! replica 2 alone, which still reads all of them.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn counters(nodes: &serde_json::Value, node: &str) -> BTreeMap<String, u64> {
    let n = nodes
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == node)
        .unwrap_or_else(|| panic!("no node {node} in the report"));
    n["counters"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
        .collect()
}

/// Runs the scenario (with `extra` appended and each `(from, to)` of
/// `edits` replaced) with `inca run`; its nodes.json.
fn run(tag: &str, edits: &[(&str, &str)], extra: &str) -> serde_json::Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let seed = 1;
    println!("seed {seed}");
    let dir = std::env::temp_dir().join(format!("inca-swish-sdw-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let scenario = dir.join("scenario.toml");
    let mut text = std::fs::read_to_string(root.join("experiments/swish/sdw-local2.toml")).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "the scenario has no {from:?}");
        text = text.replacen(from, to, 1);
    }
    std::fs::write(&scenario, format!("{text}\n{extra}")).unwrap();
    let out = dir.join("out");
    let run = Command::new(env!("CARGO_BIN_EXE_inca"))
        .args(["run", "-q", "--seed", &seed.to_string(), "--out"])
        .arg(&out)
        .arg(&scenario)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "inca run failed:\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let nodes =
        serde_json::from_str(&std::fs::read_to_string(out.join("nodes.json")).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    nodes
}

#[test]
fn updates_at_one_replica_are_read_at_the_other_after_the_window_advances() {
    let nodes = run("local2", &[], "");
    let ctl = counters(&nodes, "ctl");
    assert_eq!(ctl["ctl_ups"], 2, "{ctl:?}");
    assert_eq!(ctl["ctl_values_in"], 2, "both replicas answered READ_REG");
    assert_eq!(ctl["ctl_starts"], 2, "{ctl:?}");
    for sw in ["sdw1", "sdw2"] {
        let c = counters(&nodes, sw);
        assert_eq!(
            c["sdw_rpc_in"], 2,
            "{sw}: READ_REG and INJECT on the session"
        );
        assert!(c["sdw_window"] > 100, "{sw}: windows advanced: {c:?}");
        assert_eq!(c["sdw_malformed"], 0);
    }
    let u = counters(&nodes, "h1");
    let q = counters(&nodes, "h2");
    println!("h1 {u:?}\nh2 {q:?}");
    assert_eq!(u["u.accepted"], 100, "every update accepted (B unbounded)");
    assert_eq!(q["q.replies"], 400);
    assert_eq!(
        q["q.read_last"], u["u.accepted"],
        "the last query at replica 2 reads every update made at replica 1"
    );
    assert!(
        q["q.first_seen_win"] >= u["u.first_win"] + 2,
        "an update of window w is visible from window w + 2 only"
    );
    assert!(q["q.read_max"] <= u["u.accepted"]);
    assert_eq!(ctl["ctl_recoveries"], 0);
}

#[test]
fn the_controller_recovers_the_survivor_over_its_session() {
    // h1's updates end at 3 ms; replica 1 crashes at 5 ms; the run and
    // h2's queries at replica 2 go on to 30 ms (the controller's serial
    // register reads and writes take milliseconds).
    let nodes = run(
        "recovery",
        &[
            ("duration = \"10ms\"", "duration = \"30ms\""),
            ("count = 400", "count = 1450"),
        ],
        "[[fault]]\nat = \"5ms\"\ncrash = \"sdw1\"\n",
    );
    let ctl = counters(&nodes, "ctl");
    println!("ctl {ctl:?}");
    assert_eq!(ctl["ctl_recoveries"], 1, "{ctl:?}");
    assert_eq!(ctl["ctl_recoveries_aborted"], 0);
    assert_eq!(ctl["ctl_failed"], 1);
    // Detection 1 ms after the reset at 5 ms.
    assert!(ctl["ctl_recovery_started_ns"] >= 6_000_000);
    let survivor = counters(&nodes, "sdw2");
    assert!(
        u64::from(survivor["sdw_window"] as u32) > ctl["ctl_recovery_wmax"] + 1,
        "replica 2 advances alone after the recovery: {survivor:?}"
    );
    let u = counters(&nodes, "h1");
    let q = counters(&nodes, "h2");
    assert!(
        q["q.last_win"] > ctl["ctl_recovery_wmax"] + 1,
        "queries answered after the recovery"
    );
    assert_eq!(
        q["q.read_last"], u["u.accepted"],
        "the recovered snapshot keeps every update made at the failed replica before it failed"
    );
}

#[test]
fn a_restarted_replica_joins_again_through_the_controller() {
    // Replica 1 crashes at 5 ms and restarts empty at 8 ms; the controller
    // recovers replica 2 alone, then joins replica 1 again once its
    // session is back (§5.6 "Join"). h1 updates at replica 1 before the
    // crash (u); h3, on another port of replica 1, updates it after the
    // join (v) and queries it from before the join ends (w); h2 queries
    // replica 2 throughout.
    let extra = r#"
[[fault]]
at = "5ms"
crash = "sdw1"

[[fault]]
at = "8ms"
restart = "sdw1"

[[host]]
name = "h3"
ip = "10.0.0.3"
[[host.workload]]
name = "v"
kind = "swish_sdw_app"
replica = 1
op = "update"
key = 7
value = 1
count = 50
gap = "20us"
start = "14ms"
[[host.workload]]
name = "w"
kind = "swish_sdw_app"
replica = 1
op = "query"
key = 7
count = 600
gap = "20us"
start = "9ms"

[[link]]
a = "h3:0"
b = "sdw1:4"
rate = "100Gbps"
delay = "500ns"
"#;
    let nodes = run(
        "join",
        &[
            ("duration = \"10ms\"", "duration = \"22ms\""),
            ("count = 400", "count = 1000"),
        ],
        extra,
    );
    let ctl = counters(&nodes, "ctl");
    println!("ctl {ctl:?}");
    assert_eq!(ctl["ctl_recoveries"], 1, "{ctl:?}");
    assert_eq!(ctl["ctl_joins"], 1, "{ctl:?}");
    assert_eq!(ctl["ctl_recoveries_aborted"], 0);
    assert_eq!(ctl["ctl_rpc_timeouts"], 0);
    assert_eq!(ctl["ctl_failed"], 0, "replica 1 is a member again");
    let (h1, h2, h3) = (
        counters(&nodes, "h1"),
        counters(&nodes, "h2"),
        counters(&nodes, "h3"),
    );
    println!("h1 {h1:?}\nh2 {h2:?}\nh3 {h3:?}");
    let (sw1, sw2) = (counters(&nodes, "sdw1"), counters(&nodes, "sdw2"));
    assert!(
        sw1["sdw_window"] > ctl["ctl_recovery_wmax"] + 2,
        "the joined replica advances windows with the other: {sw1:?}"
    );
    assert!(sw1["sdw_window"].abs_diff(sw2["sdw_window"]) <= 1);
    assert_eq!(h3["v.accepted"], 50, "the joined replica takes updates");
    assert!(
        h3["w.not_ready"] > 0,
        "queries at the joined replica are not ready until its first window completes"
    );
    let total = h1["u.accepted"] + h3["v.accepted"];
    assert_eq!(
        h2["q.read_last"], total,
        "replica 2 reads the updates made at replica 1 before the crash and after the join"
    );
    assert_eq!(
        h3["w.read_last"], total,
        "the joined replica's snapshot is replica 2's"
    );
    assert!(
        h3["w.read_max"] <= total && h3["w.first_seen_win"] > ctl["ctl_recovery_wmax"],
        "no ready query at the joined replica read anything before its join"
    );
}
