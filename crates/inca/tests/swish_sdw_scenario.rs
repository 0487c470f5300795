//! SwiSh SDW as a scenario (experiments/swish/sdw-local2.toml): two
//! `swish_sdw` replicas joined by a 40 ns link, the `swish_controller`
//! server STARTing them over control sessions, and `swish_sdw_app` hosts.
//! `inca run` runs it; from the report: the controller started both
//! replicas over its sessions, the windows advanced, and the updates h1
//! made at replica 1 are what h2's queries at replica 2 read — no earlier
//! than two windows after the first update (D2: a query in window w reads
//! windows ≤ w − 2), all of them at the end.

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

#[test]
fn updates_at_one_replica_are_read_at_the_other_after_the_window_advances() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let seed = 1;
    println!("seed {seed}");
    let out = std::env::temp_dir().join(format!("inca-swish-sdw-local2-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let run = Command::new(env!("CARGO_BIN_EXE_inca"))
        .args(["run", "-q", "--seed", &seed.to_string(), "--out"])
        .arg(&out)
        .arg(root.join("experiments/swish/sdw-local2.toml"))
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "inca run failed:\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let nodes: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("nodes.json")).unwrap()).unwrap();
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
    let _ = std::fs::remove_dir_all(&out);
}
