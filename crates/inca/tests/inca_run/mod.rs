//! Helpers the `inca run` tests share: the repository root, a fresh
//! scratch folder, and `inca run -q` as a user runs it.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// The repository root (scenarios are under `experiments/`).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// An empty scratch folder for this test process, named `name`.
pub fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("inca-run-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Runs `inca run -q` with `args`; returns (success, stdout, stderr).
pub fn inca_run(args: &[&str]) -> (bool, String, String) {
    let out = Command::cargo_bin("inca")
        .unwrap()
        .arg("run")
        .arg("-q")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
