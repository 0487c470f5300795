//! A results folder, read back: the files `inca_sim::metrics::write_results`
//! writes (`summary.json`, `nodes.json`, `links.json`, `cdf/*.csv`), loaded
//! by [`Run::load`]; every error names the file (and the line).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use serde::Deserialize;

// ---------------------------------------------------------------------------
// Input

/// `summary.json` (`inca_sim::metrics::RunSummary`).
#[derive(Debug, Clone, Deserialize)]
pub struct Summary {
    pub scenario: String,
    #[serde(default)]
    pub seed: u64,
    pub duration_ns: u64,
    #[serde(default)]
    pub bin_ns: u64,
    #[serde(default)]
    pub events: u64,
    #[serde(default)]
    pub frames_delivered: u64,
    #[serde(default)]
    pub wall_seconds: f64,
    #[serde(default)]
    pub faults: Vec<(u64, String)>,
    #[serde(default)]
    pub highlights: Vec<String>,
}

/// A latency summary, ns.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct Latency {
    pub count: u64,
    #[serde(default)]
    pub mean: f64,
    pub p50: u64,
    #[serde(default)]
    pub p90: u64,
    pub p99: u64,
    #[serde(default)]
    pub p999: u64,
    #[serde(default)]
    pub max: u64,
    #[serde(default)]
    pub min: u64,
}

/// A time series: values per bin of `bin` ns from time 0.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SeriesIn {
    pub bin: u64,
    pub values: Vec<u64>,
}

/// One element of `nodes.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct NodeIn {
    pub name: String,
    #[serde(default)]
    pub counters: BTreeMap<String, u64>,
    #[serde(default)]
    pub histograms: BTreeMap<String, Latency>,
    #[serde(default)]
    pub series: BTreeMap<String, SeriesIn>,
}

/// `stats` of a link direction (`inca_sim::link::ChannelStats`).
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct LinkStats {
    #[serde(default)]
    pub offered: u64,
    #[serde(default)]
    pub delivered: u64,
    #[serde(default)]
    pub delivered_bytes: u64,
    #[serde(default)]
    pub queue_drops: u64,
    #[serde(default)]
    pub lost: u64,
    #[serde(default)]
    pub down_drops: u64,
}

/// One element of `links.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct LinkIn {
    pub link: String,
    pub from: String,
    pub to: String,
    #[serde(default)]
    pub stats: LinkStats,
    #[serde(default)]
    pub throughput_bytes: SeriesIn,
}

/// A latency CDF read from `cdf/*.csv`: (latency ns, fraction ≤ it).
#[derive(Debug, Clone)]
pub struct Cdf {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// One results folder, loaded.
#[derive(Debug, Clone)]
pub struct Run {
    pub dir: PathBuf,
    pub summary: Summary,
    pub nodes: Vec<NodeIn>,
    pub links: Vec<LinkIn>,
    pub cdfs: Vec<Cdf>,
}

/// The name `inca_sim::metrics::file_safe` gives a node or histogram in file
/// names.
pub fn file_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            anyhow!("{}: file not found", path.display())
        } else {
            anyhow!("{}: {e}", path.display())
        }
    })?;
    serde_json::from_str(&text).map_err(|e| anyhow!("{}: malformed JSON: {e}", path.display()))
}

pub fn read_cdf_csv(path: &Path, label: String) -> Result<Cdf> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            anyhow!("{}: file not found", path.display())
        } else {
            anyhow!("{}: {e}", path.display())
        }
    })?;
    let mut points = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || (i == 0 && line.starts_with("latency_ns")) {
            continue;
        }
        let parsed = line.split_once(',').and_then(|(a, b)| {
            Some((a.trim().parse::<f64>().ok()?, b.trim().parse::<f64>().ok()?))
        });
        match parsed {
            Some((v, p)) if v.is_finite() && p.is_finite() => points.push((v, p)),
            _ => bail!(
                "{}:{}: expected `latency_ns,fraction`, got {line:?}",
                path.display(),
                i + 1
            ),
        }
    }
    Ok(Cdf { label, points })
}

impl Run {
    /// Loads the results folder `dir`; `notes` collects what was skipped.
    pub fn load(dir: &Path, notes: &mut Vec<String>) -> Result<Run> {
        let summary: Summary = read_json(&dir.join("summary.json"))?;
        let nodes: Vec<NodeIn> = read_json(&dir.join("nodes.json"))?;
        let links: Vec<LinkIn> = read_json(&dir.join("links.json"))?;
        let cdf_dir = dir.join("cdf");
        let mut cdfs = Vec::new();
        let mut used = BTreeSet::new();
        for n in &nodes {
            for (h, lat) in &n.histograms {
                let file = format!("{}.{}.csv", file_safe(&n.name), file_safe(h));
                let label = format!("{}/{}", n.name, h);
                used.insert(file.clone());
                if lat.count == 0 {
                    notes.push(format!("histogram {label} is empty: no CDF curve"));
                    continue;
                }
                let cdf = read_cdf_csv(&cdf_dir.join(&file), label)?;
                if cdf.points.is_empty() {
                    notes.push(format!(
                        "{}: no samples: no CDF curve",
                        cdf_dir.join(&file).display()
                    ));
                } else {
                    cdfs.push(cdf);
                }
            }
        }
        // CDF files no histogram in nodes.json names (written by other tools).
        if let Ok(rd) = std::fs::read_dir(&cdf_dir) {
            let mut extra: Vec<PathBuf> = rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "csv"))
                .filter(|p| !used.contains(&*p.file_name().unwrap_or_default().to_string_lossy()))
                .collect();
            extra.sort();
            for p in extra {
                let label = p
                    .file_stem()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned();
                let cdf = read_cdf_csv(&p, label)?;
                if cdf.points.is_empty() {
                    notes.push(format!("{}: no samples: no CDF curve", p.display()));
                } else {
                    cdfs.push(cdf);
                }
            }
        }
        Ok(Run {
            dir: dir.to_path_buf(),
            summary,
            nodes,
            links,
            cdfs,
        })
    }

    /// Histograms with samples, keyed `node/histogram`.
    pub fn latencies(&self) -> BTreeMap<String, Latency> {
        let mut m = BTreeMap::new();
        for n in &self.nodes {
            for (h, l) in &n.histograms {
                if l.count > 0 {
                    m.insert(format!("{}/{}", n.name, h), *l);
                }
            }
        }
        m
    }

    pub fn name(&self) -> String {
        self.dir
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.dir.display().to_string())
    }
}
