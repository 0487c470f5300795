//! A results folder, read back: the files `inca_sim::metrics::write_results`
//! writes (`summary.json`, `nodes.json`, `links.json`, `cdf/*.csv`), loaded
//! by [`Run::load`]; every error names the file (and the line). The JSON
//! files are read into the structs that wrote them ([`RunSummary`],
//! [`NodeEntry`], [`LinkReport`]), so the schema lives in one place.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};

pub use inca_sim::link::ChannelStats;
pub use inca_sim::metrics::{file_safe, LatencySummary, LinkReport, NodeEntry, RunSummary, Series};

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
    pub summary: RunSummary,
    pub nodes: Vec<NodeEntry>,
    pub links: Vec<LinkReport>,
    pub cdfs: Vec<Cdf>,
}

/// Reads `path` as JSON into `T`; errors name the file.
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
        let summary: RunSummary = read_json(&dir.join("summary.json"))?;
        let nodes: Vec<NodeEntry> = read_json(&dir.join("nodes.json"))?;
        let links: Vec<LinkReport> = read_json(&dir.join("links.json"))?;
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
    pub fn latencies(&self) -> BTreeMap<String, LatencySummary> {
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

#[cfg(test)]
mod tests {
    use inca_sim::link::ChannelConfig;
    use inca_sim::metrics::{write_results, LatencyHistogram, NodeReport};

    use super::*;

    /// What the simulator writes is what `inca report` reads, field for
    /// field, through the same structs.
    #[test]
    fn a_written_run_reads_back_as_written() {
        let dir = std::env::temp_dir().join(format!("inca-results-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let summary = RunSummary {
            scenario: "rt".into(),
            seed: 7,
            duration_ns: 2_000,
            bin_ns: 1_000,
            events: 11,
            frames_delivered: 3,
            wall_seconds: 0.5,
            faults: vec![(1_000, "link a-b down".into())],
            highlights: vec!["a line".into()],
        };
        let mut report = NodeReport::default();
        report.counters.insert("rx".into(), 3);
        let mut h = LatencyHistogram::default();
        for ns in [100, 200, 300] {
            h.record(ns);
        }
        report.histograms.insert("rtt".into(), h);
        report.series.insert(
            "rx_bytes".into(),
            Series {
                bin: 1_000,
                values: vec![1, 2],
            },
        );
        report.notes.push("a note".into());
        let link = LinkReport {
            link: "l0".into(),
            from: "a:0".into(),
            to: "b:0".into(),
            config: ChannelConfig::default(),
            stats: ChannelStats {
                offered: 4,
                delivered: 3,
                lost: 1,
                ..Default::default()
            },
            throughput_bytes: Series {
                bin: 1_000,
                values: vec![64, 128],
            },
            max_queue_bytes: Series {
                bin: 1_000,
                values: vec![0, 64],
            },
        };
        write_results(
            &dir,
            &summary,
            &[("a".into(), "host", report.clone())],
            std::slice::from_ref(&link),
        )
        .unwrap();
        let mut notes = Vec::new();
        let run = Run::load(&dir, &mut notes).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(run.summary.faults, summary.faults);
        assert_eq!(
            (
                run.summary.seed,
                run.summary.events,
                run.summary.highlights.len()
            ),
            (7, 11, 1)
        );
        assert_eq!(run.nodes.len(), 1);
        let node = &run.nodes[0];
        assert_eq!((node.name.as_str(), node.kind.as_str()), ("a", "host"));
        assert_eq!(node.counters, report.counters);
        assert_eq!(node.series, report.series);
        assert_eq!(node.notes, report.notes);
        assert_eq!(node.histograms["rtt"], report.histograms["rtt"].summary());
        assert_eq!(run.links.len(), 1);
        let l = &run.links[0];
        assert_eq!((l.stats, l.config), (link.stats, link.config));
        assert_eq!(l.throughput_bytes, link.throughput_bytes);
        assert_eq!(l.max_queue_bytes, link.max_queue_bytes);
        assert_eq!(run.cdfs.len(), 1, "{notes:?}");
    }
}
