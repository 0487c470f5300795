//! Smoke test of the TEA evaluation (experiments/tea/, spec tea.md §8):
//! every sweep descriptor there runs with `--quick` and leaves, for every
//! plot it declares, a CSV with a header and at least one row of numbers;
//! `inca tea-offline` writes E10, E11 and E12 (and refuses E12 without the
//! capacity E4 measures). The trends are checked by running the experiments
//! in full (docs/experiments.md, "TEA"), not here.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn experiments() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/tea")
}

/// Every sweep descriptor in experiments/tea/ (a file with a `scenario =`
/// line; the scenario itself has none), sorted.
fn descriptors() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(experiments())
        .expect("experiments/tea exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .filter(|p| {
            std::fs::read_to_string(p)
                .unwrap_or_default()
                .lines()
                .any(|l| l.trim_start().starts_with("scenario ="))
        })
        .collect();
    out.sort();
    out
}

/// The file stem of every `[[plot]]` (its `name`, else its kind).
fn plot_names(text: &str) -> Vec<String> {
    let value: toml::Value = toml::from_str(text).expect("descriptor is TOML");
    let plots = value.get("plot").and_then(|p| p.as_array()).cloned();
    plots
        .unwrap_or_default()
        .iter()
        .map(|p| {
            p.get("name")
                .or_else(|| p.get("kind"))
                .and_then(|v| v.as_str())
                .expect("plot has a kind")
                .to_string()
        })
        .collect()
}

/// Asserts `csv` has a header and a row holding a number.
fn assert_csv_has_numbers(what: &str, csv: &Path) {
    let body =
        std::fs::read_to_string(csv).unwrap_or_else(|e| panic!("{what}: {}: {e}", csv.display()));
    let rows: Vec<&str> = body.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(
        rows.len() >= 2,
        "{what}: {} has no data row:\n{body}",
        csv.display()
    );
    assert!(
        rows[1..]
            .iter()
            .any(|r| r.split(',').any(|f| f.trim().parse::<f64>().is_ok())),
        "{what}: {} has no number",
        csv.display()
    );
}

fn inca() -> Command {
    let mut c = Command::cargo_bin("inca").unwrap();
    c.env("INCA_FONT", "none");
    c
}

#[test]
fn every_tea_descriptor_runs_quick_and_writes_its_plots() {
    let list = descriptors();
    assert!(
        list.len() >= 8,
        "expected the E1-E8 descriptors, found {list:?}"
    );
    let base = std::env::temp_dir().join(format!("inca-tea-exp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    for d in &list {
        let stem = d.file_stem().unwrap().to_string_lossy().into_owned();
        let out = base.join(&stem);
        let result = inca()
            .args(["sweep", "--quick", "--jobs", "2", "--format", "svg", "-q"])
            .arg(d)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            result.status.success(),
            "{stem}: inca sweep --quick failed:\n{}",
            String::from_utf8_lossy(&result.stderr)
        );
        let names = plot_names(&std::fs::read_to_string(d).unwrap());
        assert!(!names.is_empty(), "{stem}: declares no plot");
        for name in names {
            assert_csv_has_numbers(&stem, &out.join("plots").join(format!("{name}.csv")));
        }
    }
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn tea_offline_writes_csv_and_plots_and_e12_needs_the_measured_capacity() {
    let base = std::env::temp_dir().join(format!("inca-tea-offline-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let run = |args: &[&str]| {
        inca()
            .arg("tea-offline")
            .args(args)
            .arg("--out")
            .arg(&base)
            .args(["--format", "svg"])
            .output()
            .unwrap()
    };
    let r = run(&["e10", "--quick"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_csv_has_numbers("e10", &base.join("e10.csv"));
    let body = std::fs::read_to_string(base.join("e10.csv")).unwrap();
    assert!(body.contains("blp") || body.contains("BLP"), "{body}");
    assert!(base.join("e10_stash.svg").exists());
    assert!(base.join("e10_reads.svg").exists());

    let r = run(&["e11"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_csv_has_numbers("e11", &base.join("e11.csv"));
    // N = 1..32: a header and 32 rows.
    let rows = std::fs::read_to_string(base.join("e11.csv")).unwrap();
    assert_eq!(rows.lines().count(), 33, "{rows}");

    let r = run(&["e12"]);
    assert!(
        !r.status.success(),
        "e12 without --capacity must be refused"
    );
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("--capacity"),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let r = run(&["e12", "--capacity", "-3"]);
    assert!(!r.status.success(), "a negative capacity must be refused");
    let r = run(&["e12", "--capacity", "9.8e6"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_csv_has_numbers("e12", &base.join("e12.csv"));
    assert!(base.join("e12.svg").exists());
    let _ = std::fs::remove_dir_all(&base);
}
