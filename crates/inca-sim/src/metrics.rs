//! What a run measures and how it is written: counters, HDR latency
//! histograms, time series, per-node and per-link reports, and the output
//! folder (JSON and CSV; the schema is in docs/experiments.md).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use inca_switch::device::Nanos;
use serde::{Deserialize, Serialize};

use crate::link::{ChannelConfig, ChannelStats};

/// Values per time bin (bytes delivered, packets, the largest queue seen).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Series {
    /// Width of a bin, ns.
    pub bin: Nanos,
    /// One value per bin from time 0.
    pub values: Vec<u64>,
}

/// Bound on the bins of one series (a long run at a fine granularity would
/// otherwise grow without limit); later samples go into the last bin.
pub const MAX_BINS: usize = 1 << 22;

impl Series {
    /// An empty series with bins of `bin` ns.
    pub fn new(bin: Nanos) -> Self {
        Series {
            bin: bin.max(1),
            values: Vec::new(),
        }
    }

    fn slot(&mut self, t: Nanos) -> &mut u64 {
        let i = ((t / self.bin) as usize).min(MAX_BINS - 1);
        if self.values.len() <= i {
            self.values.resize(i + 1, 0);
        }
        &mut self.values[i]
    }

    /// Adds `v` to the bin holding time `t`.
    pub fn add_at(&mut self, t: Nanos, v: u64) {
        *self.slot(t) += v;
    }

    /// Raises the bin holding time `t` to at least `v`.
    pub fn max_at(&mut self, t: Nanos, v: u64) {
        let s = self.slot(t);
        *s = (*s).max(v);
    }

    /// Bytes per bin as bits per second, per bin.
    pub fn as_rate_bps(&self) -> Vec<f64> {
        let secs = self.bin as f64 / 1e9;
        self.values.iter().map(|&b| b as f64 * 8.0 / secs).collect()
    }
}

/// A latency histogram (HDR, 3 significant digits, nanoseconds).
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    hist: hdrhistogram::Histogram<u64>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            hist: hdrhistogram::Histogram::new(3).expect("3 significant digits is valid"),
        }
    }
}

/// A latency histogram summarised (how `nodes.json` holds a histogram; a
/// figure an older results folder lacks reads as 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LatencySummary {
    /// Samples.
    pub count: u64,
    /// Smallest, ns.
    pub min: u64,
    /// Mean, ns.
    pub mean: f64,
    /// Median, ns.
    pub p50: u64,
    /// 90th percentile, ns.
    pub p90: u64,
    /// 99th percentile, ns.
    pub p99: u64,
    /// 99.9th percentile, ns.
    pub p999: u64,
    /// Largest, ns.
    pub max: u64,
}

impl LatencyHistogram {
    /// Records one sample of `ns` nanoseconds.
    pub fn record(&mut self, ns: u64) {
        // `record` grows the (auto-resizing) histogram as needed; only a
        // value beyond any representable range is clamped.
        if self.hist.record(ns).is_err() {
            self.hist.saturating_record(ns);
        }
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// The summary (zeros when empty).
    pub fn summary(&self) -> LatencySummary {
        if self.hist.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: self.hist.len(),
            min: self.hist.min(),
            mean: self.hist.mean(),
            p50: self.hist.value_at_quantile(0.5),
            p90: self.hist.value_at_quantile(0.9),
            p99: self.hist.value_at_quantile(0.99),
            p999: self.hist.value_at_quantile(0.999),
            max: self.hist.max(),
        }
    }

    /// The CDF as (value ns, fraction of samples ≤ value), one point per
    /// distinct recorded bucket.
    pub fn cdf(&self) -> Vec<(u64, f64)> {
        let n = self.hist.len().max(1) as f64;
        let mut seen = 0u64;
        self.hist
            .iter_recorded()
            .map(|v| {
                seen += v.count_at_value();
                (
                    self.hist.highest_equivalent(v.value_iterated_to()),
                    seen as f64 / n,
                )
            })
            .collect()
    }
}

impl Serialize for LatencyHistogram {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.summary().serialize(s)
    }
}

/// What one node reports.
#[derive(Debug, Clone, Default, Serialize)]
pub struct NodeReport {
    /// Named counters.
    pub counters: BTreeMap<String, u64>,
    /// Named latency histograms (written as summaries, and CDFs in CSV).
    pub histograms: BTreeMap<String, LatencyHistogram>,
    /// Named time series.
    pub series: BTreeMap<String, Series>,
    /// Free-form notes for people (what happened to a flow, say).
    pub notes: Vec<String>,
}

/// One element of `nodes.json`: a node's report as written (histograms
/// as their summaries) and read back (`inca report`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NodeEntry {
    /// The node's name.
    pub name: String,
    /// Its kind (`switch`, `host`, ...).
    #[serde(default)]
    pub kind: String,
    /// Named counters.
    #[serde(default)]
    pub counters: BTreeMap<String, u64>,
    /// Named latency histograms, summarised.
    #[serde(default)]
    pub histograms: BTreeMap<String, LatencySummary>,
    /// Named time series.
    #[serde(default)]
    pub series: BTreeMap<String, Series>,
    /// Notes for people.
    #[serde(default)]
    pub notes: Vec<String>,
}

impl NodeEntry {
    /// The entry of node `name` of `kind` with `report`.
    pub fn new(name: &str, kind: &str, report: &NodeReport) -> NodeEntry {
        NodeEntry {
            name: name.to_string(),
            kind: kind.to_string(),
            counters: report.counters.clone(),
            histograms: report
                .histograms
                .iter()
                .map(|(k, h)| (k.clone(), h.summary()))
                .collect(),
            series: report.series.clone(),
            notes: report.notes.clone(),
        }
    }
}

/// One direction of one link: an element of `links.json`, written and
/// read back (`inca report`) as this struct.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinkReport {
    /// The link's name.
    pub link: String,
    /// Sending end, `node:port`.
    pub from: String,
    /// Receiving end, `node:port`.
    pub to: String,
    /// Its configuration.
    #[serde(default)]
    pub config: ChannelConfig,
    /// Its counters.
    #[serde(default)]
    pub stats: ChannelStats,
    /// Bytes delivered per bin.
    #[serde(default)]
    pub throughput_bytes: Series,
    /// Largest queue occupancy per bin, bytes.
    #[serde(default)]
    pub max_queue_bytes: Series,
}

/// The run as a whole: `summary.json`, written and read back (`inca
/// report`) as this struct.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunSummary {
    /// Scenario name.
    pub scenario: String,
    /// Run seed.
    #[serde(default)]
    pub seed: u64,
    /// Virtual time simulated, ns.
    pub duration_ns: Nanos,
    /// Time-series bin, ns.
    #[serde(default)]
    pub bin_ns: Nanos,
    /// Events processed.
    #[serde(default)]
    pub events: u64,
    /// Frames delivered to nodes.
    #[serde(default)]
    pub frames_delivered: u64,
    /// Wall-clock seconds the run took.
    #[serde(default)]
    pub wall_seconds: f64,
    /// Faults, in order: (time ns, what).
    #[serde(default)]
    pub faults: Vec<(Nanos, String)>,
    /// Lines the scenario's summary prints.
    #[serde(default)]
    pub highlights: Vec<String>,
}

/// Writes a run's results into `dir` (created if needed):
/// `summary.json`, `nodes.json`, `links.json`, `series/*.csv` and
/// `cdf/*.csv`. The layout is documented in docs/experiments.md.
pub fn write_results(
    dir: &Path,
    summary: &RunSummary,
    nodes: &[(String, &'static str, NodeReport)],
    links: &[LinkReport],
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.join("series"))?;
    std::fs::create_dir_all(dir.join("cdf"))?;
    let json = |name: &str, v: &dyn erased::Json| -> std::io::Result<()> {
        let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join(name))?);
        f.write_all(v.to_json().as_bytes())?;
        f.write_all(b"\n")
    };
    json("summary.json", summary)?;
    let node_out: Vec<NodeEntry> = nodes
        .iter()
        .map(|(name, kind, report)| NodeEntry::new(name, kind, report))
        .collect();
    json("nodes.json", &node_out)?;
    json("links.json", &links.to_vec())?;
    for (name, _, report) in nodes {
        for (s, series) in &report.series {
            write_series(
                &dir.join("series")
                    .join(format!("{}.{}.csv", file_safe(name), file_safe(s))),
                series,
            )?;
        }
        for (h, hist) in &report.histograms {
            let mut f = std::io::BufWriter::new(std::fs::File::create(
                dir.join("cdf")
                    .join(format!("{}.{}.csv", file_safe(name), file_safe(h))),
            )?);
            writeln!(f, "latency_ns,fraction")?;
            for (v, p) in hist.cdf() {
                writeln!(f, "{v},{p:.6}")?;
            }
        }
    }
    for l in links {
        let base = format!(
            "link.{}.{}-{}",
            file_safe(&l.link),
            file_safe(&l.from),
            file_safe(&l.to)
        );
        write_series(
            &dir.join("series")
                .join(format!("{base}.throughput_bytes.csv")),
            &l.throughput_bytes,
        )?;
        write_series(
            &dir.join("series")
                .join(format!("{base}.max_queue_bytes.csv")),
            &l.max_queue_bytes,
        )?;
    }
    Ok(())
}

fn write_series(path: &Path, s: &Series) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(f, "time_ns,value")?;
    for (i, v) in s.values.iter().enumerate() {
        writeln!(f, "{},{}", i as u64 * s.bin, v)?;
    }
    Ok(())
}

/// A name made safe for a file name.
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

mod erased {
    /// Anything serialisable, as pretty JSON (keeps `write_results` short).
    pub trait Json {
        fn to_json(&self) -> String;
    }
    impl<T: serde::Serialize> Json for T {
        fn to_json(&self) -> String {
            serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_bins_and_rates() {
        let mut s = Series::new(1_000_000);
        s.add_at(0, 125);
        s.add_at(999_999, 125);
        s.add_at(2_500_000, 10);
        s.max_at(2_100_000, 5);
        assert_eq!(s.values, vec![250, 0, 10]);
        assert_eq!(s.as_rate_bps()[0], 2_000_000.0);
    }

    #[test]
    fn histogram_percentiles() {
        let mut h = LatencyHistogram::default();
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        let s = h.summary();
        assert_eq!(s.count, 1000);
        assert!(
            (s.p50 as f64 - 500_000.0).abs() / 500_000.0 < 0.002,
            "{s:?}"
        );
        assert!(
            (s.p99 as f64 - 990_000.0).abs() / 990_000.0 < 0.002,
            "{s:?}"
        );
        let cdf = h.cdf();
        assert!((cdf.last().unwrap().1 - 1.0).abs() < 1e-9);
        assert!(cdf.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
    }
}
