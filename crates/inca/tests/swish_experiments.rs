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

/// E8 (DDoS pass ratio, §8.2): at the quick scale (6 attackers of 2,000
/// packets), the SDW detector passes each source about its first 1,000
/// destinations — a band from the estimate's spread (1/16 sampling: ±13 %
/// at 1σ; linear counting at 28 of 32 bits about as much again; the
/// minimum over three rows skews up) and ≤ 3 paced windows (~90 packets)
/// of lag — below 1,700, so a detector that never blocks fails; pull
/// blocks only at the poll after detection (every 100 ms), so it leaks
/// more; push's controller serves digests and block writes one at a time,
/// so a faster arrival of the same sources never blocks earlier.
#[test]
fn e8_sdw_blocks_near_the_line_and_the_baselines_leak_more() {
    let t = std::time::Instant::now();
    let out = sweep("e8-ddos.toml");
    println!("e8 quick sweep: {:?}", t.elapsed());
    let p = points(&out.join("plots/pass_ratio.csv"), "detector");
    println!("{p:?}");
    let pkts = 2000.0;
    let sdw = at(&p, "sdw", 4000.0);
    assert!(
        (600.0..1700.0).contains(&(sdw * pkts)),
        "SDW passes {} packets per source at 4K/s",
        sdw * pkts
    );
    let pull = at(&p, "pull", 4000.0);
    assert!(pull > sdw, "pull {pull} vs SDW {sdw}");
    assert!(
        at(&p, "push", 5000.0) >= at(&p, "push", 500.0),
        "push leaks less at a higher arrival rate: {p:?}"
    );
    assert!(
        out.join("plots/pass_cdf_4k.csv").exists(),
        "no CDF at 4K sources/s"
    );
}
