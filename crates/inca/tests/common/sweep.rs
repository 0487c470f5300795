//! Running a system's sweep descriptor in quick mode, for the experiment
//! tests (swish_experiments, exoplane_experiments). Included with
//! `#[path = "common/sweep.rs"] mod sweep_quick;`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `experiments/<system>/<descriptor>` with `--quick` into a fresh
/// temporary folder and returns the folder; panics with inca's error output
/// if the sweep fails.
pub fn quick(system: &str, descriptor: &str) -> PathBuf {
    let out = std::env::temp_dir().join(format!(
        "inca-{system}-{}-{}",
        descriptor.trim_end_matches(".toml"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&out);
    let result = Command::new(env!("CARGO_BIN_EXE_inca"))
        .env("INCA_FONT", "none")
        .current_dir(root())
        .args(["sweep", "--quick", "--jobs", "2", "--format", "svg"])
        .arg(root().join("experiments").join(system).join(descriptor))
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
