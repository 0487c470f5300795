//! `sweep.json`, the index of a sweep folder: written by the runner
//! ([`super::runner`]) and read back by `inca report` ([`crate::sweep::plots`])
//! through the same structs.

use std::path::Path;

use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};

use super::descriptor::{self, Axis, Descriptor};

/// `sweep.json`: what ran, where its results are.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepFile {
    /// The experiment's name.
    pub name: String,
    /// What it shows.
    #[serde(default)]
    pub description: String,
    /// The descriptor file (absolute when it could be resolved).
    pub descriptor: String,
    /// The descriptor's text when the sweep ran (`inca report` uses it when
    /// the file is gone).
    pub descriptor_text: String,
    /// The scenario file.
    pub scenario: String,
    /// Whether `--quick` was given.
    pub quick: bool,
    /// The seeds each configuration ran with.
    pub seeds: Vec<u64>,
    /// The axes.
    pub axes: Vec<Axis>,
    /// The configurations, in order.
    pub configurations: Vec<ConfigOut>,
}

/// One configuration in `sweep.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConfigOut {
    /// Its label.
    pub label: String,
    /// `{axis: value}` for people.
    pub params: std::collections::BTreeMap<String, String>,
    /// Index of its value on each axis.
    pub coords: Vec<usize>,
    /// Every override applied, `quick` included.
    pub set: Vec<String>,
    /// Its runs, one per seed.
    pub runs: Vec<RunOut>,
}

/// One run of a configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunOut {
    /// The seed.
    pub seed: u64,
    /// Its results folder, relative to the sweep folder.
    pub dir: String,
}

/// Reads `DIR/sweep.json`.
pub fn read_sweep_file(dir: &Path) -> Result<SweepFile> {
    let p = dir.join("sweep.json");
    let text = std::fs::read_to_string(&p).map_err(|e| anyhow!("{}: {e}", p.display()))?;
    let f: SweepFile =
        serde_json::from_str(&text).map_err(|e| anyhow!("{}: malformed: {e}", p.display()))?;
    for c in &f.configurations {
        if c.coords.len() != f.axes.len()
            || c.coords
                .iter()
                .zip(&f.axes)
                .any(|(&k, a)| k >= a.values.len())
        {
            bail!(
                "{}: configuration {:?} does not fit the axes",
                p.display(),
                c.label
            );
        }
    }
    Ok(f)
}

/// The plots to redraw for a sweep folder: from the descriptor file if it
/// is still where the sweep read it (so editing its `[[plot]]`s and running
/// `inca report` again redraws without rerunning), else from the copy in
/// `sweep.json`. [our choice]
pub fn plots_for_report(file: &SweepFile) -> Result<Vec<descriptor::PlotSpec>> {
    let path = Path::new(&file.descriptor);
    if let Ok(text) = std::fs::read_to_string(path) {
        if let Ok(d) = Descriptor::parse(path, &text) {
            if d.axes.len() == file.axes.len()
                && d.axes
                    .iter()
                    .zip(&file.axes)
                    .all(|(a, b)| a.name == b.name && a.values == b.values)
            {
                return Ok(d.plots);
            }
        }
    }
    let d = Descriptor::parse(path, &file.descriptor_text)?;
    Ok(d.plots)
}
