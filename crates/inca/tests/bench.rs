//! `inca bench` as a user runs it: the table, the JSON, the errors. Only
//! cheap benchmarks at `--quick` sizes, and no figure is checked against a
//! time (the machine is shared): only that the work ran and was reported.

use assert_cmd::Command;

fn inca() -> Command {
    Command::cargo_bin("inca").unwrap()
}

fn run(args: &[&str]) -> (bool, String, String) {
    let out = inca().args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn scratch(name: &str) -> std::path::PathBuf {
    // A folder per test: tests run in parallel and each removes its own.
    let dir = std::env::temp_dir().join(format!("inca-bench-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn quick_nat_prints_the_table_and_writes_valid_json() {
    let json = scratch("nat.json");
    let (ok, out, err) = run(&[
        "bench",
        "--quick",
        "--runs",
        "1",
        "--json",
        json.to_str().unwrap(),
        "nat",
    ]);
    assert!(ok, "{err}\n{out}");
    for needle in ["name", "median", "baseline", "budget", "gap", "packets/s"] {
        assert!(out.contains(needle), "table lacks {needle:?}:\n{out}");
    }
    let row = out
        .lines()
        .find(|l| l.starts_with("nat "))
        .unwrap_or_else(|| panic!("no nat row:\n{out}"));
    assert!(
        row.contains(">= 10 M packets/s per core"),
        "the row shows its budget: {row}"
    );
    assert!(
        row.contains("meets") || row.contains("short by"),
        "the row shows its gap: {row}"
    );
    // Only the named benchmark ran.
    assert!(!out.lines().any(|l| l.starts_with("sim ")), "{out}");

    let text = std::fs::read_to_string(&json).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["runs"], 1);
    assert_eq!(v["quick"], true);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!(r["name"], "nat");
    assert_eq!(r["status"], "measured");
    assert_eq!(r["unit"], "packets/s");
    assert_eq!(r["samples"].as_array().unwrap().len(), 1);
    let median = r["median"].as_f64().unwrap();
    assert!(median > 0.0, "{r}");
    // The budget ratio is the median over the 10 M target.
    let budget_ratio = r["budget_ratio"].as_f64().unwrap();
    assert!((budget_ratio - median / 10e6).abs() < 1e-9, "{r}");
    assert_eq!(r["baseline"]["status"], "none");
    let _ = std::fs::remove_dir_all(json.parent().unwrap());
}

#[test]
fn a_benchmark_with_a_baseline_reports_both_and_their_ratio() {
    let json = scratch("dram.json");
    let (ok, out, err) = run(&[
        "bench",
        "--quick",
        "--runs",
        "1",
        "--json",
        json.to_str().unwrap(),
        "dram",
    ]);
    assert!(ok, "{err}\n{out}");
    assert!(out.contains("dram: baseline = a copy"), "{out}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let r = &v["rows"][0];
    assert_eq!(r["baseline"]["status"], "measured");
    let base = r["baseline"]["samples"][0].as_f64().unwrap();
    let median = r["median"].as_f64().unwrap();
    let ratio = r["ratio"].as_f64().unwrap();
    assert!(base > 0.0 && median > 0.0);
    assert!((ratio - median / base).abs() < 1e-9 * ratio.max(1.0), "{r}");
    let _ = std::fs::remove_dir_all(json.parent().unwrap());
}

#[test]
fn list_names_every_benchmark_and_the_planner_row_runs() {
    let (ok, out, err) = run(&["bench", "--list"]);
    assert!(ok, "{err}");
    for name in [
        "nat",
        "redplane-read",
        "tea-lookup",
        "sim",
        "store",
        "store-udp",
        "dram",
        "live",
        "live-mmsg",
        "exoplane-plan",
        "exoplane-fm",
        "swish-sro-write",
    ] {
        assert!(
            out.lines()
                .any(|l| l.split_whitespace().next() == Some(name)),
            "--list lacks {name}:\n{out}"
        );
    }
    let json = scratch("plan.json");
    let (ok, out, err) = run(&[
        "bench",
        "--quick",
        "--runs",
        "1",
        "--json",
        json.to_str().unwrap(),
        "exoplane-plan",
    ]);
    assert!(ok, "{err}");
    let row = out
        .lines()
        .find(|l| l.starts_with("exoplane-plan"))
        .unwrap();
    assert!(
        !row.contains("not built") && row.contains("plans/s"),
        "{row}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let text = v.to_string();
    assert!(text.contains("HiGHS median"), "{text}");
    let _ = std::fs::remove_dir_all(json.parent().unwrap());
}

#[test]
fn an_unknown_benchmark_is_an_error_naming_the_known_ones() {
    let (ok, _, err) = run(&["bench", "--quick", "no-such-bench"]);
    assert!(!ok);
    assert!(err.contains("unknown benchmark \"no-such-bench\""), "{err}");
    assert!(err.contains("store-udp"), "{err}");
}

#[test]
fn profile_iterations_runs_the_work_untimed() {
    let (ok, out, err) = run(&["bench", "--profile-iterations", "1000", "nat"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("nat: 1000 packets through the NAT fast path"),
        "{out}"
    );
}

#[test]
fn the_exoplane_flow_manager_row_runs_against_its_baseline() {
    // --json into a scratch folder: the default would write into the
    // source tree (the test's working directory).
    let json = scratch("fm.json");
    let (ok, out, err) = run(&[
        "bench",
        "--quick",
        "--runs",
        "1",
        "--json",
        json.to_str().unwrap(),
        "exoplane-fm",
    ]);
    assert!(ok, "{err}");
    let _ = std::fs::remove_dir_all(json.parent().unwrap());
    let row = out
        .lines()
        .find(|l| l.starts_with("exoplane-fm"))
        .unwrap_or_else(|| panic!("no exoplane-fm row:\n{out}"));
    assert!(row.contains("packets/s") && row.contains('x'), "{row}");
}

#[test]
fn the_swish_sro_write_row_runs_against_its_baseline() {
    let json = scratch("sro.json");
    let (ok, out, err) = run(&[
        "bench",
        "--quick",
        "--runs",
        "1",
        "--json",
        json.to_str().unwrap(),
        "swish-sro-write",
    ]);
    assert!(ok, "{err}");
    let _ = std::fs::remove_dir_all(json.parent().unwrap());
    let row = out
        .lines()
        .find(|l| l.starts_with("swish-sro-write"))
        .unwrap_or_else(|| panic!("no swish-sro-write row:\n{out}"));
    assert!(row.contains("writes/s") && row.contains('x'), "{row}");
    assert!(
        out.contains("40 writes committed with SRO, 40 without"),
        "{out}"
    );
}
