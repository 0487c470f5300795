//! `inca exoplane --experiment e2|e11 --quick`: CSVs and plots written,
//! summary printed (the shapes are asserted in inca-exoplane's
//! tests/experiments.rs).

use std::process::Command;

#[test]
fn the_exoplane_experiments_write_csvs_and_plots() {
    let dir = std::env::temp_dir().join(format!("inca-exo-exp-{}", std::process::id()));
    for (e, files) in [
        (
            "e2",
            &["e2.csv", "e2_leaf_packets.png", "e2_front_end_bytes.svg"][..],
        ),
        (
            "e11",
            &[
                "e11.csv",
                "e11_objects.csv",
                "e11_switch.csv",
                "e11_hub_memory.png",
                "e11_sync_devices.svg",
                "e11_switch.png",
            ][..],
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_inca"))
            .args(["exoplane", "--experiment", e, "--quick", "--out"])
            .arg(&dir)
            .output()
            .expect("inca runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{e}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains(&format!("{} ", e.to_uppercase())),
            "{stdout}"
        );
        for f in files {
            assert!(dir.join(f).is_file(), "{e}: {f} missing");
        }
    }
    let csv = std::fs::read_to_string(dir.join("e11.csv")).unwrap();
    assert!(
        csv.lines().any(|l| l.starts_with("leaf,2048,4,1,2048,")),
        "{csv}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
