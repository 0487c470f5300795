//! SwiSh's simulated experiments (experiments/swish/, spec §8.2): each sweep
//! descriptor runs with `--quick`, writes its plots, and shows the shape the
//! spec expects, measured from the plots' data:
//! - E1: reading a 3 x 64K sketch by a data-plane generator walk is at least
//!   two orders of magnitude faster than through the control plane; the
//!   control-plane read grows linearly in the columns, the walk is flat
//!   while one operation's overhead dominates.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `descriptor` with `--quick` into a fresh folder; the folder.
fn sweep(descriptor: &str) -> PathBuf {
    let out = std::env::temp_dir().join(format!(
        "inca-swish-{}-{}",
        descriptor.trim_end_matches(".toml"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&out);
    let result = Command::new(env!("CARGO_BIN_EXE_inca"))
        .env("INCA_FONT", "none")
        .current_dir(root())
        .args(["sweep", "--quick", "--jobs", "2", "--format", "svg"])
        .arg(root().join("experiments/swish").join(descriptor))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        result.status.success(),
        "{descriptor}: inca sweep --quick failed:\n{}",
        String::from_utf8_lossy(&result.stderr)
    );
    out
}

/// `(line, x) → y` from a metric-vs-parameter CSV (`config,...,y,seeds,x`;
/// the line is the column named `line`).
fn points(csv: &Path, line: &str) -> Vec<(String, f64, f64)> {
    let body = std::fs::read_to_string(csv).unwrap();
    let mut lines = body.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (l, x, y) = (col(line), col("x"), col("y"));
    lines
        .map(|r| {
            let f: Vec<&str> = r.split(',').collect();
            (
                f[l].to_string(),
                f[x].parse().unwrap(),
                f[y].parse().unwrap(),
            )
        })
        .collect()
}

fn at(points: &[(String, f64, f64)], line: &str, x: f64) -> f64 {
    points
        .iter()
        .find(|(l, px, _)| l == line && *px == x)
        .map(|p| p.2)
        .unwrap_or_else(|| panic!("no point {line} at {x}: {points:?}"))
}

#[test]
fn e1_the_data_plane_walk_reads_a_sketch_orders_of_magnitude_faster() {
    let out = sweep("e1-cp-vs-dp-read.toml");
    let p = points(&out.join("plots/readout.csv"), "mode");
    println!("{p:?}");
    let (cp, dp) = (at(&p, "cp", 65536.0), at(&p, "dp", 65536.0));
    assert!(dp * 100.0 < cp, "64K columns: dp {dp} us, cp {cp} us");
    // Linear in C: 16x the columns, 16x the time (within 10 %).
    let ratio = cp / at(&p, "cp", 4096.0);
    assert!((14.4..17.6).contains(&ratio), "cp 64K/4K = {ratio}");
    // The walk: flat while the operation overhead dominates.
    assert!(at(&p, "dp", 64.0) < 1.1 * at(&p, "dp", 1.0), "{p:?}");
}

// ---------------------------------------------------------------------------
// E5, E7, E11 (SDW windows; crates/inca-swish/src/experiments/sdw_windows.rs)

/// One DATA frame (98 B on the wire) at 100 Gb/s, ns: the slope E5's
/// advance time must approach for large C (the per-port packet-rate bound).
const SDW_T_PKT_NS: f64 = 7.84;

/// `(config, x) → y` of a metric-vs-param CSV whose lines are the
/// descriptor's `[[config]]`s; points a run skipped (empty y) are left out.
fn config_points(csv: &Path) -> Vec<(String, f64, f64)> {
    let body = std::fs::read_to_string(csv).unwrap();
    let mut lines = body.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (c, x, y) = (col("config"), col("x"), col("y"));
    lines
        .filter_map(|r| {
            let f: Vec<&str> = r.split(',').collect();
            let label = f[c].trim_matches('"');
            Some((
                label.rsplit_once(' ').map_or(label, |l| l.0).to_string(),
                f[x].parse().ok()?,
                f[y].parse().ok()?,
            ))
        })
        .collect()
}

#[test]
fn e5_window_advance_is_flat_then_linear_in_columns() {
    let out = sweep("e5-advance-latency.toml");
    let p = config_points(&out.join("plots/advance-p99.csv"));
    println!("E5 quick p99 (us): {p:?}");
    let us = |c: &str, x: f64| at(&p, c, x);
    // Flat for small C: a round trip and the ready exchange dominate.
    for c in ["local-2", "symmetric-4", "local-2 no-ready"] {
        assert!(us(c, 16.0) < 1.5 * us(c, 1.0), "{c}: not flat: {p:?}");
    }
    // Linear for large C, at the port's packet rate: from 1K to 4K columns
    // the time grows by 3,072 frame times: never less, and at most 30 % more
    // (an allowance: the excess over the wire time is not explained yet).
    let slope = (us("local-2", 4096.0) - us("local-2", 1024.0)) * 1_000.0 / 3_072.0;
    assert!(
        (0.95 * SDW_T_PKT_NS..1.3 * SDW_T_PKT_NS).contains(&slope),
        "local-2: {slope} ns a column, the port takes {SDW_T_PKT_NS}"
    );
    // Never faster than the bound.
    assert!(us("local-2", 4096.0) * 1_000.0 >= 4096.0 * SDW_T_PKT_NS * 0.99);
    // symmetric-4 ≈ local-2 once C dominates (peers sync in parallel):
    // the difference stays within one small-C window time.
    let d = us("symmetric-4", 4096.0) - us("local-2", 4096.0);
    assert!(
        d.abs() < us("symmetric-4", 1.0),
        "symmetric-4 vs local-2 at 4K: {d} us"
    );
    // Without the ready phase: never slower, and faster for small C (one
    // READY exchange less).
    for x in [1.0, 16.0, 256.0, 4096.0] {
        assert!(
            us("local-2 no-ready", x) <= us("local-2", x),
            "no-ready slower at C={x}"
        );
    }
    assert!(us("local-2 no-ready", 1.0) < us("local-2", 1.0));
}

#[test]
fn e7_ready_phase_removes_retransmissions() {
    let out = sweep("e7-ready-ablation.toml");
    let mean = config_points(&out.join("plots/retx-mean.csv"));
    let (lo, hi) = (
        config_points(&out.join("plots/retx-min.csv")),
        config_points(&out.join("plots/retx-max.csv")),
    );
    println!("E7 quick mean retx per run: {mean:?}\nmin {lo:?}\nmax {hi:?}");
    for j in [0.0, 500.0, 2000.0] {
        for c in ["symmetric-4 ready", "leaf-spine-4 ready"] {
            assert_eq!(at(&hi, c, j), 0.0, "{c} retransmitted at jitter {j}");
        }
    }
    // The asymmetric topology retransmits without the ready phase even with
    // no timing noise: a leaf finishes a window late (its peer leaf is
    // 1.5 us away), so the others' next DATA reaches it early.
    assert!(at(&lo, "leaf-spine-4 no-ready", 0.0) > 0.0, "{mean:?}");
    // With timing noise both do, and runs differ.
    for c in ["symmetric-4 no-ready", "leaf-spine-4 no-ready"] {
        assert!(at(&mean, c, 2000.0) > 0.0, "{c}: {mean:?}");
        assert!(at(&hi, c, 2000.0) > at(&lo, c, 2000.0), "{c}: no spread");
    }
}

#[test]
fn e11_star_of_32_holds_d1_to_d8_without_retransmissions() {
    let out = sweep("e11-scale-out.toml");
    let v = config_points(&out.join("plots/violations.csv"));
    let r = config_points(&out.join("plots/retx.csv"));
    let w = config_points(&out.join("plots/windows.csv"));
    println!("E11 quick violations {v:?} retx {r:?} windows {w:?}");
    assert_eq!(v.len(), 4, "{v:?}");
    assert!(v.iter().all(|p| p.2 == 0.0), "{v:?}");
    assert!(r.iter().all(|p| p.2 == 0.0), "{r:?}");
    assert!(w.iter().all(|p| p.2 >= 2.0), "windows did not move: {w:?}");
}

/// `inca check --profile tofino swish_sdw --set ...`: (success, output).
fn check_sdw(set: &[&str]) -> (bool, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_inca"));
    cmd.args(["check", "--profile", "tofino", "swish_sdw"]);
    for s in set {
        cmd.args(["--set", s]);
    }
    let o = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), text)
}

#[test]
fn e11_validation_caps_bitmap_at_32_and_takes_4096_counters() {
    let (ok, text) = check_sdw(&["replicas=32", "dedup=bitmap"]);
    assert!(ok, "bitmap, N = 32: {text}");
    let (ok, text) = check_sdw(&["replicas=33", "dedup=bitmap"]);
    assert!(!ok && text.contains("at most 32"), "bitmap, N = 33: {text}");
    let (ok, text) = check_sdw(&["replicas=4096", "dedup=counter"]);
    assert!(ok, "counter, N = 4,096: {text}");
    let (ok, text) = check_sdw(&["replicas=4097", "dedup=counter"]);
    assert!(!ok, "counter, N = 4,097: {text}");
}
