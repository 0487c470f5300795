//! ExoPlane §8 E6 (Thesis Table 4.3), quick: experiments/exoplane/
//! e6-pinning.toml with `--quick`, the front-end ensembles VPN, +NAT,
//! +ACL, +UnivMon under ExoPlane (packet pinning) and under app-pinning.
//! From the measured throughput at s1 (1.2–1.6 s of each 1.6 s run):
//! - VPN alone: the two within 10 % (the VPN fits the switch whole);
//! - every ensemble: ExoPlane at least app-pinning (less 5 %);
//! - the gap at four apps wider than at two.
//!
//! And the descriptor's pins are the placement model's
//! ([`inca_exoplane::pinning::plan`]), not set by hand.

use std::path::{Path, PathBuf};
use std::process::Command;

use inca_exoplane::pinning::{pin_param, plan};
use inca_switch::Profile;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const ENSEMBLES: [&str; 4] = ["1-vpn", "2-vpn-nat", "3-vpn-nat-acl", "4-vpn-nat-acl-um"];

/// The run folder of configuration `label` in sweep folder `out`.
fn run_of(out: &Path, label: &str) -> PathBuf {
    std::fs::read_dir(out)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .contains(&format!("-{label}-"))
        })
        .unwrap_or_else(|| panic!("no run folder for {label} in {}", out.display()))
}

/// Mbit/s at s1 over `[from, to)` ns.
fn throughput(run: &Path, from: u64, to: u64) -> f64 {
    let body = std::fs::read_to_string(run.join("series/s1.rx_bytes.csv")).unwrap();
    let bytes: f64 = body
        .lines()
        .skip(1)
        .filter_map(|l| {
            let (t, v) = l.split_once(',')?;
            let t: u64 = t.parse().ok()?;
            (from..to).contains(&t).then(|| v.parse::<f64>().ok())?
        })
        .sum();
    bytes * 8.0 / ((to - from) as f64 / 1e9) / 1e6
}

#[test]
fn the_descriptors_pins_are_the_placement_models() {
    let text =
        std::fs::read_to_string(root().join("experiments/exoplane/e6-pinning.toml")).unwrap();
    let declared = ["um", "vpn", "tnat", "tacl"];
    let order = ["vpn", "tnat", "tacl", "um"];
    for n in 1..=4 {
        let places = plan(
            &Profile::tofino(),
            &declared,
            &order[..n],
            262_144,
            4,
            &vec![1.0; n],
            4.0,
        )
        .unwrap();
        let pin = pin_param(&order[..n], &places);
        println!("{n} apps: pin = {pin}");
        // The descriptor lists the pins in declared order.
        let mut items: Vec<&str> = pin.split(',').collect();
        items.sort_by_key(|i| {
            declared
                .iter()
                .position(|d| i.starts_with(&format!("{d}:")))
        });
        let want = format!("pin = \\\"{}\\\"", items.join(","));
        assert!(text.contains(&want), "e6-pinning.toml lacks {want}");
    }
}

#[test]
fn e6_exoplane_matches_pinning_alone_and_beats_it_in_ensembles() {
    let out = std::env::temp_dir().join(format!("inca-exo-e6-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    println!("seed 1 (the descriptor's), results in {}", out.display());
    let result = Command::new(env!("CARGO_BIN_EXE_inca"))
        .env("INCA_FONT", "none")
        .current_dir(root())
        .args(["sweep", "--quick", "--jobs", "2", "--format", "svg"])
        .arg(root().join("experiments/exoplane/e6-pinning.toml"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        result.status.success(),
        "inca sweep --quick failed:\n{}",
        String::from_utf8_lossy(&result.stderr)
    );
    let (from, to) = (1_200_000_000, 1_600_000_000);
    let mut gaps = Vec::new();
    for e in ENSEMBLES {
        let exo = throughput(&run_of(&out, &format!("exoplane-{e}")), from, to);
        let pin = throughput(&run_of(&out, &format!("pinning-{e}")), from, to);
        println!("{e}: ExoPlane {exo:.0} Mbit/s, app-pinning {pin:.0} Mbit/s");
        assert!(pin > 0.0 && exo > 0.0, "{e}: nothing delivered");
        assert!(
            exo >= 0.95 * pin,
            "{e}: ExoPlane {exo} below app-pinning {pin}"
        );
        gaps.push(exo - pin);
    }
    let alone = throughput(&run_of(&out, "pinning-1-vpn"), from, to);
    assert!(
        gaps[0].abs() <= 0.1 * alone,
        "VPN alone: the two differ by {}",
        gaps[0]
    );
    assert!(gaps[3] > gaps[1], "the gap did not widen: {gaps:?}");
    assert!(out.join("plots/throughput.svg").exists());
    let _ = std::fs::remove_dir_all(&out);
}
