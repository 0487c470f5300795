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
