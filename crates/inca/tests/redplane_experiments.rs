//! Smoke test of the RedPlane evaluation (experiments/redplane/, spec §8):
//! every sweep descriptor there runs with `--quick`, and every plot it
//! declares leaves a CSV with a header and at least one row of numbers.
//! The experiments' trends are checked by running them in full (see
//! docs/experiments.md), not here.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// The repository root: descriptors name captures relative to it, the way
/// a user runs them (`inca sweep experiments/redplane/...`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn experiments() -> PathBuf {
    root().join("experiments/redplane")
}

/// Every sweep descriptor in experiments/redplane/ (a file with a
/// `scenario =` line; the scenario files themselves have none), sorted,
/// then the smallest and largest of the generated "at scale" variants
/// (scale/, 2 and 16 switches; the 4 and 8 are the same generator's).
fn descriptors() -> Vec<PathBuf> {
    let mut out = descriptors_in(&experiments());
    for n in [2, 16] {
        out.push(experiments().join(format!("scale/bandwidth-share-{n}.toml")));
    }
    out
}

fn descriptors_in(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the experiments folder exists")
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

/// The `name = "..."` of every `[[plot]]` in a descriptor, or its kind
/// when it has no name (the file stem `inca sweep` uses), in order.
fn plot_names(text: &str) -> Vec<String> {
    let value: toml::Value = toml::from_str(text).expect("descriptor is TOML");
    let mut names = Vec::new();
    let plots = value.get("plot").and_then(|p| p.as_array()).cloned();
    for p in plots.unwrap_or_default() {
        let name = p
            .get("name")
            .or_else(|| p.get("kind"))
            .and_then(|v| v.as_str())
            .expect("plot has a kind")
            .to_string();
        names.push(name);
    }
    names
}

#[test]
fn every_redplane_descriptor_runs_quick_and_writes_its_plots() {
    let list = descriptors();
    assert!(
        list.len() >= 4,
        "expected the RedPlane descriptors, found {list:?}"
    );
    let base = std::env::temp_dir().join(format!("inca-redplane-exp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    for d in &list {
        let stem = d.file_stem().unwrap().to_string_lossy().into_owned();
        let out = base.join(&stem);
        let result = Command::cargo_bin("inca")
            .unwrap()
            .env("INCA_FONT", "none")
            .current_dir(root())
            .args(["sweep", "--quick", "--jobs", "2", "--format", "svg"])
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
        let text = std::fs::read_to_string(d).unwrap();
        let names = plot_names(&text);
        assert!(!names.is_empty(), "{stem}: declares no plot");
        for name in names {
            let csv = out.join("plots").join(format!("{name}.csv"));
            let body = std::fs::read_to_string(&csv)
                .unwrap_or_else(|e| panic!("{stem}: {}: {e}", csv.display()));
            let rows: Vec<&str> = body.lines().filter(|l| !l.trim().is_empty()).collect();
            assert!(
                rows.len() >= 2,
                "{stem}: {} has no data row:\n{body}",
                csv.display()
            );
            assert!(
                rows[1..]
                    .iter()
                    .any(|r| r.split(',').any(|f| f.trim().parse::<f64>().is_ok())),
                "{stem}: {} has no number",
                csv.display()
            );
        }
        if stem == "per-app-latency" {
            apps_act_on_their_traffic(&out.join("plots/rtt_percentiles.csv"));
        }
    }
    let _ = std::fs::remove_dir_all(&base);
}

/// The firewall and EPC round trips exist only if the apps act on the
/// packets: the firewall lets e1's answers in only for connections whose
/// inside SYN it recorded, and the EPC tunnels e1's answers back to the
/// eNodeB only for UEs whose signalling it applied (unparsed GTP-U would be
/// dropped). So each of their configurations must have answered probes.
fn apps_act_on_their_traffic(csv: &Path) {
    let body = std::fs::read_to_string(csv).unwrap();
    for label in ["firewall", "redplane-firewall", "epc", "redplane-epc"] {
        let row = body
            .lines()
            .find(|l| l.split(',').next() == Some(label))
            .unwrap_or_else(|| panic!("{label}: no row in\n{body}"));
        // config,config,count,p50_us,...
        let count: f64 = row.split(',').nth(2).unwrap().parse().unwrap();
        assert!(count > 100.0, "{label}: only {count} round trips:\n{body}");
    }
}
