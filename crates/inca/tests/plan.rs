//! `inca plan`: the ExoPlane planner on the command line (issue 17).

use std::process::Command;

fn inca(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_inca"))
        .args(args)
        .output()
        .expect("inca runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn plan_prints_each_apps_share_and_the_merged_program() {
    let (ok, out, err) = inca(&[
        "plan",
        "vpn",
        "nat",
        "acl",
        "univmon",
        "--devices",
        "4",
        "--flows",
        "300000",
    ]);
    assert!(ok, "{err}");
    for app in ["vpn", "nat", "acl", "univmon"] {
        assert!(
            out.lines().any(|l| l.starts_with(app)),
            "{app} missing:\n{out}"
        );
    }
    assert!(out.contains("HIGH"), "univmon defaults to HIGH:\n{out}");
    assert!(out.contains("HiGHS"), "{out}");
    assert!(out.contains("Merged switch program"), "{out}");
    assert!(
        out.contains("fm_nat"),
        "the flow managers are in the report:\n{out}"
    );
}

#[test]
fn plan_json_has_the_allocation_times_and_blocks() {
    let (ok, out, err) = inca(&[
        "plan",
        "nat",
        "acl",
        "--devices",
        "2",
        "--flows",
        "200000",
        "--json",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let apps = v["apps"].as_array().unwrap();
    assert_eq!(apps.len(), 2);
    for a in apps {
        let n = a["switch_quanta"].as_u64().unwrap();
        let quanta = a["quanta"].as_u64().unwrap();
        assert!(n > 0 && n < quanta, "{a}");
        let f = a["switch_traffic"].as_f64().unwrap();
        assert!(f > 0.0 && f < 1.0, "{a}");
    }
    assert!(v["highs_seconds"].as_f64().unwrap() >= 0.0);
    assert!(v["merge_seconds"].as_f64().is_some());
    let blocks = v["placement"]["blocks"].as_array().unwrap();
    assert!(blocks.iter().any(|b| b["block"] == "fm_nat"), "{blocks:?}");
}

#[test]
fn an_infeasible_plan_names_the_constraint() {
    // No devices and a NAT far larger than the switch.
    let (ok, _, err) = inca(&["plan", "nat", "--devices", "0", "--flows", "5000000"]);
    assert!(!ok);
    assert!(err.contains("(4.2)") && err.contains("nat"), "{err}");
    // A flow-manager cap of zero keys with a HIGH app that needs the switch
    // is fine, but a MEDIUM app without devices then has nowhere to go.
    let (ok, _, err) = inca(&[
        "plan",
        "nat",
        "--devices",
        "0",
        "--flows",
        "10000",
        "--fm-cap",
        "0",
    ]);
    assert!(!ok);
    assert!(err.contains("flow-manager cap"), "{err}");
}

#[test]
fn bad_arguments_are_named() {
    for (args, needle) in [
        (vec!["plan", "nosuchapp"], "unknown app"),
        (
            vec!["plan", "nat", "--set", "nat.weight=heavy"],
            "nat.weight=heavy",
        ),
        (
            vec!["plan", "nat", "--set", "vpn.flows=3"],
            "no app instance",
        ),
        (
            vec!["plan", "nat", "--set", "nat.affinity=sideways"],
            "affinity",
        ),
        (vec!["plan", "nat", "nat"], "two apps named"),
        (vec!["plan", "nat", "--quantum", "0"], "--quantum"),
    ] {
        let (ok, _, err) = inca(&args);
        assert!(!ok, "{args:?} was accepted");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn the_planner_experiments_write_csvs_and_plots() {
    let dir = std::env::temp_dir().join(format!("inca-plan-exp-{}", std::process::id()));
    let out = dir.to_str().unwrap();
    for (e, files) in [
        ("e1", ["e1.csv", "e1a.png", "e1b.svg"]),
        ("e12", ["e12.csv", "e12a.png", "e12b.svg"]),
    ] {
        let (ok, stdout, err) = inca(&["plan", "--experiment", e, "--quick", "--out", out]);
        assert!(ok, "{e}: {err}");
        assert!(
            stdout.contains(&format!("{}(", e.to_uppercase())),
            "{stdout}"
        );
        for f in files {
            assert!(dir.join(f).is_file(), "{e}: {f} missing");
        }
    }
    let csv = std::fs::read_to_string(dir.join("e1.csv")).unwrap();
    assert!(
        csv.starts_with("part,flows,apps,app,sram_blocks,ratio"),
        "{csv}"
    );
    assert!(
        csv.lines().any(|l| l.starts_with("a,10000000,4,total")),
        "{csv}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
