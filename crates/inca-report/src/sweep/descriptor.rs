//! Experiment descriptors: the TOML file `inca sweep` reads, checked and
//! expanded into the list of configurations to run.
//!
//! ```toml
//! name = "rate-sweep"                  # default: the file's stem
//! description = "what it shows"
//! scenario = "../two-hosts.toml"       # relative to this file; or
//! # experiment = "swish-sdw-advance"   # a system's built-in experiment,
//! #                                    # whose parameters the overrides set
//! seeds = [1, 2, 3]                    # default: the scenario's own seed
//! set = ["duration=20ms"]              # overrides for every configuration
//! quick = ["duration=2ms"]             # added last by `--quick`
//! quick_seeds = [1]                    # seeds under `--quick` (default: the first)
//!
//! [[config]]                           # named variants (optional)
//! label = "baseline"
//! set = ["s1.program=nat"]
//!
//! [axes]                               # a cartesian product (optional)
//! "a.workload.0.size" = [64, 512, 1500]          # name = the key it sets
//! rate = { set = "a.workload.0.rate", values = ["1Gbps", "4Gbps"], numbers = [1, 4] }
//!
//! [[plot]]
//! kind = "metric_vs_param"
//! x = "a.workload.0.size"
//! lines = "rate"
//! y = { counter = "b/rx_bytes" }
//! ```
//!
//! Configurations are every `[[config]]` (or one unnamed configuration
//! when there is none) times every combination of axis values, the first
//! axis varying slowest. Overrides apply in the order: `set`, the
//! configuration's `set`, the axes' values, then `quick`.
//!
//! Every error names the field and the line it is on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};
use toml::Spanned;

/// A descriptor as written (see the module documentation).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DescriptorIn {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    scenario: Option<Spanned<String>>,
    #[serde(default)]
    experiment: Option<Spanned<String>>,
    #[serde(default)]
    seeds: Option<Spanned<Vec<u64>>>,
    #[serde(default)]
    set: Vec<String>,
    #[serde(default)]
    quick: Vec<String>,
    #[serde(default)]
    quick_seeds: Option<Spanned<Vec<u64>>>,
    #[serde(default)]
    config: Vec<ConfigIn>,
    #[serde(default)]
    axes: BTreeMap<String, Spanned<toml::Value>>,
    #[serde(default)]
    plot: Vec<Spanned<PlotSpec>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigIn {
    label: Spanned<String>,
    #[serde(default)]
    set: Vec<String>,
}

/// The kinds of sweep plot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlotKind {
    /// One latency CDF per configuration.
    CdfOverlay,
    /// A metric against an axis, one line per value of a second axis.
    MetricVsParam,
    /// A stack of metrics per configuration.
    StackedBars,
    /// A series over time, one line per configuration.
    TimeseriesOverlay,
    /// Latency percentiles per configuration, as a table.
    PercentileTable,
}

impl PlotKind {
    /// The name written in descriptors.
    pub fn name(self) -> &'static str {
        match self {
            PlotKind::CdfOverlay => "cdf_overlay",
            PlotKind::MetricVsParam => "metric_vs_param",
            PlotKind::StackedBars => "stacked_bars",
            PlotKind::TimeseriesOverlay => "timeseries_overlay",
            PlotKind::PercentileTable => "percentile_table",
        }
    }
}

/// One number read out of a run: exactly one of `counter`, `histogram`,
/// `link` and `series` says where from (docs/experiments.md, "Sweeps").
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metric {
    /// `NODE/COUNTER`, globs allowed; summed over matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter: Option<String>,
    /// `NODE/HISTOGRAM`, globs allowed; matches are merged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<String>,
    /// A link name, globs allowed; both directions unless `from` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// `NODE/SERIES`, globs allowed; summed over matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<String>,
    /// With `link`: only the direction sent by this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// What to compute (depends on the source; see `Stat`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stat: Option<String>,
    /// Window start (time, e.g. "1ms"), for rates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<toml::Value>,
    /// Window end (time), for rates; default the end of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<toml::Value>,
    /// Multiplies the value (unit changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<f64>,
    /// A name for legends and axes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// One `[[plot]]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlotSpec {
    /// Which plot.
    pub kind: PlotKind,
    /// File stem under DIR/plots (default `KIND` or `KIND-N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Title over the plot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Only configurations whose axes have these values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub filter: BTreeMap<String, toml::Value>,
    /// cdf_overlay, percentile_table: `NODE/HISTOGRAM`, globs allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<String>,
    /// percentile_table: which percentiles (default 10, 50, 90, 99).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentiles: Option<Vec<f64>>,
    /// metric_vs_param: the x axis (an axis name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x: Option<String>,
    /// metric_vs_param: the x axis's caption (default the axis name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xlabel: Option<String>,
    /// metric_vs_param: one line per value of this axis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<String>,
    /// metric_vs_param: the metric; timeseries_overlay: the series.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub y: Option<Metric>,
    /// stacked_bars: the segments, bottom first; timeseries_overlay:
    /// several series instead of `y`, one line each per configuration
    /// (drawn with the first one's stat).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stack: Vec<Metric>,
    /// stacked_bars: each bar as shares of its total.
    #[serde(default)]
    pub shares: bool,
    /// metric_vs_param: logarithmic x axis. (A CDF picks its own: log when
    /// the latencies span more than 100×.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_x: Option<bool>,
    /// metric_vs_param: logarithmic y axis.
    #[serde(default)]
    pub log_y: bool,
    /// timeseries_overlay: merge bins to this width (time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bin: Option<toml::Value>,
}

/// An axis of the sweep: a name, the overrides one value sets, the values.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Axis {
    /// Its name (plots refer to it).
    pub name: String,
    /// Override keys each value is written to.
    pub keys: Vec<String>,
    /// The values, as TOML.
    pub values: Vec<toml::Value>,
    /// Each value as a number, when the axis is numeric.
    pub numbers: Option<Vec<f64>>,
}

/// The pseudo-axis the `[[config]]` labels form.
pub const CONFIG_AXIS: &str = "config";

/// A checked, expanded descriptor.
#[derive(Debug, Clone)]
pub struct Descriptor {
    /// Its file.
    pub path: PathBuf,
    /// Its text (stored in sweep.json).
    pub text: String,
    /// Name (default the file stem).
    pub name: String,
    /// Description.
    pub description: String,
    /// What each run runs.
    pub source: Source,
    /// Seeds to run (`None`: the scenario's own).
    pub seeds: Option<Vec<u64>>,
    /// `--quick` seeds.
    pub quick_seeds: Option<Vec<u64>>,
    /// `--quick` overrides.
    pub quick: Vec<String>,
    /// Axes: `config` first when there are `[[config]]`s, then `[axes]` in
    /// file order.
    pub axes: Vec<Axis>,
    /// Configurations, in run order.
    pub configs: Vec<Config>,
    /// Plots.
    pub plots: Vec<PlotSpec>,
}

/// What a sweep runs for each configuration and seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A scenario file (resolved against the descriptor's folder); the
    /// overrides are scenario keys.
    Scenario(PathBuf),
    /// A built-in experiment of a registered system, by name; the
    /// overrides are its parameters.
    Experiment(String),
}

impl Source {
    /// The scenario file or the experiment's name, for people.
    pub fn describe(&self) -> String {
        match self {
            Source::Scenario(p) => p.display().to_string(),
            Source::Experiment(name) => format!("experiment {name}"),
        }
    }
}

/// One configuration: a label, its overrides, the value index on each axis.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    /// Label in legends and folder names.
    pub label: String,
    /// Every override, in the order applied (without `quick`).
    pub set: Vec<String>,
    /// Index of its value on each axis (same order as the axes).
    pub coords: Vec<usize>,
}

/// Line and column of byte `at` in `text`.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// A value as an override's right-hand side (TOML, so strings keep quotes).
pub fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

/// A value as people read it (strings without quotes).
pub fn value_label(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn number(v: &toml::Value) -> Option<f64> {
    match v {
        toml::Value::Integer(i) => Some(*i as f64),
        toml::Value::Float(f) => Some(*f),
        _ => None,
    }
}

/// Parses a time written as integer ns or a string with a unit.
pub fn time_value(v: &toml::Value) -> Option<u64> {
    match v {
        toml::Value::Integer(i) if *i >= 0 => Some(*i as u64),
        toml::Value::String(s) => inca_switch::units::parse_time(s),
        _ => None,
    }
}

impl Descriptor {
    /// Reads and checks the descriptor at `path`. Nothing is run; the
    /// scenario file must exist.
    pub fn load(path: &Path) -> Result<Descriptor> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow!("cannot read descriptor {}: {e}", path.display()))?;
        let d = Self::parse(path, &text)?;
        if let Source::Scenario(s) = &d.source {
            if !s.is_file() {
                bail!(
                    "{}: scenario: {} is not a file",
                    path.display(),
                    s.display()
                );
            }
        }
        Ok(d)
    }

    /// Parses and checks descriptor `text` (from `path`, for messages and
    /// to resolve the scenario).
    pub fn parse(path: &Path, text: &str) -> Result<Descriptor> {
        let origin = path.display().to_string();
        let raw: DescriptorIn = toml::from_str(text).map_err(|e| anyhow!("{origin}: {e}"))?;
        let at = |span: std::ops::Range<usize>, field: &str, msg: String| {
            let (line, col) = line_col(text, span.start);
            anyhow!("{origin}:{line}:{col}: {field}: {msg}")
        };

        let name = raw.name.clone().unwrap_or_else(|| {
            path.file_stem()
                .map_or("sweep".into(), |s| s.to_string_lossy().into_owned())
        });
        let base = path.parent().unwrap_or(Path::new("."));
        let source = match (&raw.scenario, &raw.experiment) {
            (Some(s), None) => Source::Scenario(base.join(s.get_ref())),
            (None, Some(e)) if !e.get_ref().trim().is_empty() => {
                Source::Experiment(e.get_ref().clone())
            }
            (None, Some(e)) => return Err(at(e.span(), "experiment", "is empty".into())),
            (Some(_), Some(e)) => {
                return Err(at(
                    e.span(),
                    "experiment",
                    "give `scenario` or `experiment`, not both".into(),
                ))
            }
            (None, None) => bail!(
                "{origin}: missing field `scenario` (a scenario file) or `experiment` (a built-in experiment)"
            ),
        };
        for (field, seeds) in [("seeds", &raw.seeds), ("quick_seeds", &raw.quick_seeds)] {
            if let Some(s) = seeds {
                if s.get_ref().is_empty() {
                    return Err(at(s.span(), field, "give at least one seed".into()));
                }
                let mut sorted = s.get_ref().clone();
                sorted.sort_unstable();
                sorted.dedup();
                if sorted.len() != s.get_ref().len() {
                    return Err(at(s.span(), field, "a seed is listed twice".into()));
                }
            }
        }
        for (field, list) in [("set", &raw.set), ("quick", &raw.quick)] {
            check_overrides(list).map_err(|m| anyhow!("{origin}: {field}: {m}"))?;
        }

        let mut axes = Vec::new();
        if !raw.config.is_empty() {
            let mut labels: Vec<String> = Vec::new();
            for c in &raw.config {
                let l = c.label.get_ref();
                if l.trim().is_empty() {
                    return Err(at(c.label.span(), "config.label", "is empty".into()));
                }
                if labels.contains(l) {
                    return Err(at(
                        c.label.span(),
                        "config.label",
                        format!("{l:?} is used twice"),
                    ));
                }
                check_overrides(&c.set)
                    .map_err(|m| at(c.label.span(), &format!("config {l:?}.set"), m))?;
                labels.push(l.clone());
            }
            axes.push(Axis {
                name: CONFIG_AXIS.into(),
                keys: Vec::new(),
                values: labels.into_iter().map(toml::Value::String).collect(),
                numbers: None,
            });
        }
        // `[axes]` in file order (the map is sorted by key; spans are not).
        let mut raw_axes: Vec<(&String, &Spanned<toml::Value>)> = raw.axes.iter().collect();
        raw_axes.sort_by_key(|(_, v)| v.span().start);
        for (name, v) in raw_axes {
            let field = format!("axes.{name}");
            if name == CONFIG_AXIS {
                return Err(at(
                    v.span(),
                    &field,
                    "`config` is the axis of the [[config]] labels; use [[config]]".into(),
                ));
            }
            let axis = parse_axis(name, v.get_ref()).map_err(|m| at(v.span(), &field, m))?;
            axes.push(axis);
        }

        // The cartesian product, first axis slowest.
        let mut configs = Vec::new();
        let sizes: Vec<usize> = axes.iter().map(|a| a.values.len()).collect();
        let total: usize = sizes.iter().product();
        const MAX_CONFIGS: usize = 10_000;
        if total > MAX_CONFIGS {
            bail!("{origin}: axes: {total} configurations; at most {MAX_CONFIGS}");
        }
        for n in 0..total {
            let mut coords = vec![0; axes.len()];
            let mut rest = n;
            for (i, &s) in sizes.iter().enumerate().rev() {
                coords[i] = rest % s;
                rest /= s;
            }
            let mut set = raw.set.clone();
            let mut parts = Vec::new();
            for (a, &c) in axes.iter().zip(&coords) {
                let v = &a.values[c];
                if a.name == CONFIG_AXIS {
                    set.extend(raw.config[c].set.iter().cloned());
                    parts.push(value_label(v));
                } else {
                    for k in &a.keys {
                        set.push(format!("{k}={}", value_text(v)));
                    }
                    parts.push(format!("{}={}", a.name, value_label(v)));
                }
            }
            let label = if parts.is_empty() {
                name.clone()
            } else {
                parts.join(" ")
            };
            configs.push(Config { label, set, coords });
        }

        let mut plots = Vec::new();
        for (i, p) in raw.plot.iter().enumerate() {
            let mut spec = p.get_ref().clone();
            if spec.name.is_none() {
                let same = raw
                    .plot
                    .iter()
                    .filter(|q| q.get_ref().kind == spec.kind)
                    .count();
                spec.name = Some(if same > 1 {
                    format!("{}-{}", spec.kind.name(), i + 1)
                } else {
                    spec.kind.name().to_string()
                });
            }
            check_plot(&spec, &axes).map_err(|m| {
                at(
                    field_span(text, p.span(), &m),
                    &format!("plot[{i}] ({})", spec.kind.name()),
                    m,
                )
            })?;
            plots.push(spec);
        }
        let mut names: Vec<&str> = plots.iter().filter_map(|p| p.name.as_deref()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            bail!("{origin}: plot: two plots are named {:?}", w[0]);
        }

        Ok(Descriptor {
            path: path.to_path_buf(),
            text: text.to_string(),
            name,
            description: raw.description,
            source,
            seeds: raw.seeds.map(|s| s.into_inner()),
            quick_seeds: raw.quick_seeds.map(|s| s.into_inner()),
            quick: raw.quick,
            axes,
            configs,
            plots,
        })
    }
}

/// The span of the line inside `table` that sets the field a message
/// `msg` ("y.counter: ...") is about, or `table` itself when none does.
fn field_span(text: &str, table: std::ops::Range<usize>, msg: &str) -> std::ops::Range<usize> {
    let key = msg.split(['.', '[', ':']).next().unwrap_or_default();
    if key.is_empty() || key.contains(' ') {
        return table;
    }
    let body = &text[table.start.min(text.len())..table.end.min(text.len())];
    let mut offset = table.start;
    for line in body.split_inclusive('\n') {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix(key) {
            if rest.trim_start().starts_with('=') {
                let at = offset + (line.len() - t.len());
                return at..at + key.len();
            }
        }
        offset += line.len();
    }
    table
}

fn check_overrides(list: &[String]) -> std::result::Result<(), String> {
    for o in list {
        match o.split_once('=') {
            Some((k, _)) if !k.trim().is_empty() => {}
            _ => return Err(format!("{o:?} is not KEY=VALUE")),
        }
    }
    Ok(())
}

/// An `[axes]` entry: a list of values (the name is the key they set), or
/// a table `{ set = KEY or [KEYS], values = [...], numbers = [...] }`.
fn parse_axis(name: &str, v: &toml::Value) -> std::result::Result<Axis, String> {
    let (keys, values, numbers) = match v {
        toml::Value::Array(values) => (vec![name.to_string()], values.clone(), None),
        toml::Value::Table(t) => {
            for k in t.keys() {
                if !["set", "values", "numbers"].contains(&k.as_str()) {
                    return Err(format!(
                        "unknown field `{k}`, expected `set`, `values` or `numbers`"
                    ));
                }
            }
            let keys = match t.get("set") {
                Some(toml::Value::String(s)) => vec![s.clone()],
                Some(toml::Value::Array(a)) => a
                    .iter()
                    .map(|k| k.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or("set: expected a key or a list of keys (strings)")?,
                Some(_) => return Err("set: expected a key or a list of keys (strings)".into()),
                None => return Err("missing field `set` (the key(s) the values go to)".into()),
            };
            if keys.is_empty() {
                return Err("set: name at least one key".into());
            }
            let values = match t.get("values") {
                Some(toml::Value::Array(a)) => a.clone(),
                _ => return Err("missing field `values` (a list)".into()),
            };
            let numbers = match t.get("numbers") {
                None => None,
                Some(toml::Value::Array(a)) => Some(
                    a.iter()
                        .map(number)
                        .collect::<Option<Vec<f64>>>()
                        .ok_or("numbers: expected a list of numbers")?,
                ),
                Some(_) => return Err("numbers: expected a list of numbers".into()),
            };
            (keys, values, numbers)
        }
        _ => return Err("expected a list of values or a table { set, values }".into()),
    };
    if values.is_empty() {
        return Err("give at least one value".into());
    }
    if values
        .iter()
        .any(|v| matches!(v, toml::Value::Array(_) | toml::Value::Table(_)))
    {
        return Err("values must be numbers, strings or booleans".into());
    }
    if let Some(n) = &numbers {
        if n.len() != values.len() {
            return Err(format!(
                "numbers: {} numbers for {} values",
                n.len(),
                values.len()
            ));
        }
    }
    let numbers = numbers.or_else(|| values.iter().map(number).collect());
    Ok(Axis {
        name: name.to_string(),
        keys,
        values,
        numbers,
    })
}

/// Which fields each plot kind takes, and that its axes exist.
fn check_plot(p: &PlotSpec, axes: &[Axis]) -> std::result::Result<(), String> {
    let axis = |field: &str, name: &str| -> std::result::Result<(), String> {
        if axes.iter().any(|a| a.name == name) {
            Ok(())
        } else {
            Err(format!(
                "{field}: no axis named {name:?} (axes: {})",
                axes.iter()
                    .map(|a| a.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        }
    };
    for (k, v) in &p.filter {
        axis("filter", k)?;
        let a = axes.iter().find(|a| &a.name == k).expect("checked above");
        if !a.values.iter().any(|x| value_label(x) == value_label(v)) {
            return Err(format!(
                "filter: axis {k:?} has no value {}",
                value_label(v)
            ));
        }
    }
    let unused = |fields: &[(&str, bool)]| -> std::result::Result<(), String> {
        for (f, present) in fields {
            if *present {
                return Err(format!("`{f}` does not apply to this kind of plot"));
            }
        }
        Ok(())
    };
    if p.kind != PlotKind::MetricVsParam {
        unused(&[
            ("xlabel", p.xlabel.is_some()),
            ("log_x", p.log_x.is_some()),
            ("log_y", p.log_y),
        ])?;
    }
    match p.kind {
        PlotKind::CdfOverlay | PlotKind::PercentileTable => {
            let h = p.histogram.as_deref().ok_or("missing field `histogram`")?;
            check_pattern("histogram", h)?;
            unused(&[
                ("x", p.x.is_some()),
                ("lines", p.lines.is_some()),
                ("y", p.y.is_some()),
                ("stack", !p.stack.is_empty()),
                ("bin", p.bin.is_some()),
            ])?;
            if p.kind == PlotKind::CdfOverlay {
                unused(&[("percentiles", p.percentiles.is_some())])?;
            }
            if let Some(ps) = &p.percentiles {
                if ps.is_empty() || ps.iter().any(|&q| !(0.0..=100.0).contains(&q)) {
                    return Err("percentiles: give numbers from 0 to 100".into());
                }
            }
        }
        PlotKind::MetricVsParam => {
            let x = p.x.as_deref().ok_or("missing field `x` (an axis name)")?;
            axis("x", x)?;
            if let Some(l) = &p.lines {
                axis("lines", l)?;
                if l == x {
                    return Err("lines: must differ from x".into());
                }
            }
            let y = p.y.as_ref().ok_or("missing field `y` (a metric)")?;
            check_metric("y", y, false)?;
            if p.log_x == Some(true) {
                let a = axes.iter().find(|a| a.name == x).expect("checked above");
                match &a.numbers {
                    Some(n) if n.iter().all(|&v| v > 0.0) => {}
                    _ => return Err(format!("log_x: axis {x:?} needs positive numbers")),
                }
            }
            unused(&[
                ("histogram", p.histogram.is_some()),
                ("stack", !p.stack.is_empty()),
                ("bin", p.bin.is_some()),
            ])?;
        }
        PlotKind::StackedBars => {
            if p.stack.is_empty() {
                return Err("missing field `stack` (a list of metrics)".into());
            }
            for (i, m) in p.stack.iter().enumerate() {
                check_metric(&format!("stack[{i}]"), m, false)?;
            }
            unused(&[
                ("histogram", p.histogram.is_some()),
                ("x", p.x.is_some()),
                ("lines", p.lines.is_some()),
                ("y", p.y.is_some()),
                ("bin", p.bin.is_some()),
                ("log_x", p.log_x.is_some()),
            ])?;
        }
        PlotKind::TimeseriesOverlay => {
            match (&p.y, p.stack.is_empty()) {
                (Some(y), true) => check_metric("y", y, true)?,
                (None, false) => {
                    for (i, m) in p.stack.iter().enumerate() {
                        check_metric(&format!("stack[{i}]"), m, true)?;
                    }
                }
                (Some(_), false) => {
                    return Err("give `y` (one series) or `stack` (several), not both".into())
                }
                (None, true) => return Err("missing field `y` (a series or link)".into()),
            }
            if let Some(b) = &p.bin {
                if time_value(b).is_none_or(|t| t == 0) {
                    return Err("bin: expected a time such as \"10ms\"".into());
                }
            }
            unused(&[
                ("histogram", p.histogram.is_some()),
                ("x", p.x.is_some()),
                ("lines", p.lines.is_some()),
                ("log_x", p.log_x.is_some()),
            ])?;
        }
    }
    Ok(())
}

/// A `NODE/NAME` pattern.
fn check_pattern(field: &str, s: &str) -> std::result::Result<(), String> {
    match s.split_once('/') {
        Some((n, h)) if !n.is_empty() && !h.is_empty() => Ok(()),
        _ => Err(format!(
            "{field}: expected NODE/NAME (globs allowed), got {s:?}"
        )),
    }
}

/// The stats each metric source takes (the first is the default).
pub const COUNTER_STATS: &[&str] = &["sum"];
/// Histogram stats: pN for any N, and these.
pub const HISTOGRAM_STATS: &[&str] = &["p50", "mean", "min", "max", "count", "pN"];
/// Link stats.
pub const LINK_STATS: &[&str] = &[
    "gbps",
    "bytes_per_s",
    "mbps",
    "delivered_bytes",
    "delivered",
    "offered",
    "lost",
    "queue_drops",
    "down_drops",
];
/// Series stats (`gbps`/`bytes_per_s`/`mbps` for byte series, `per_s` and
/// `per_bin` for counts, `sum` over the window).
pub const SERIES_STATS: &[&str] = &["gbps", "bytes_per_s", "mbps", "per_s", "per_bin", "sum"];
/// Stats a time series plot can draw.
pub const TIMESERIES_STATS: &[&str] = &["gbps", "bytes_per_s", "mbps", "per_s", "per_bin"];

/// A histogram stat `pN` as the quantile N/100.
pub fn percentile_stat(stat: &str) -> Option<f64> {
    let q: f64 = stat.strip_prefix('p')?.parse().ok()?;
    (0.0..=100.0).contains(&q).then_some(q / 100.0)
}

fn check_metric(field: &str, m: &Metric, timeseries: bool) -> std::result::Result<(), String> {
    let sources = [
        ("counter", &m.counter),
        ("histogram", &m.histogram),
        ("link", &m.link),
        ("series", &m.series),
    ];
    let given: Vec<&str> = sources
        .iter()
        .filter(|(_, v)| v.is_some())
        .map(|(k, _)| *k)
        .collect();
    if given.len() != 1 {
        return Err(format!(
            "{field}: give exactly one of counter, histogram, link, series (got {})",
            if given.is_empty() {
                "none".to_string()
            } else {
                given.join(", ")
            }
        ));
    }
    let stat = m.stat.as_deref();
    let allowed: &[&str] = match given[0] {
        "counter" | "histogram" | "series" if timeseries && given[0] != "series" => {
            return Err(format!(
                "{field}: a time series plot takes `series` or `link`"
            ))
        }
        "counter" => COUNTER_STATS,
        "histogram" => HISTOGRAM_STATS,
        "link" if timeseries => TIMESERIES_STATS,
        "series" if timeseries => TIMESERIES_STATS,
        "link" => LINK_STATS,
        _ => SERIES_STATS,
    };
    if let Some(s) = stat {
        let ok = allowed.contains(&s) || (given[0] == "histogram" && percentile_stat(s).is_some());
        if !ok {
            return Err(format!(
                "{field}.stat: {s:?} is not one of {} for a {}",
                allowed.join(", "),
                given[0]
            ));
        }
    }
    if let Some(c) = &m.counter {
        check_pattern(&format!("{field}.counter"), c)?;
    }
    if let Some(c) = &m.histogram {
        check_pattern(&format!("{field}.histogram"), c)?;
    }
    if let Some(c) = &m.series {
        check_pattern(&format!("{field}.series"), c)?;
    }
    if m.from.is_some() && m.link.is_none() {
        return Err(format!("{field}.from: only with `link`"));
    }
    let rate = match (m.link.is_some(), stat) {
        (true, Some(s)) => ["gbps", "bytes_per_s", "mbps"].contains(&s),
        (true, None) => true,
        (false, _) => m.series.is_some(),
    };
    for (k, v) in [("start", &m.start), ("end", &m.end)] {
        if let Some(v) = v {
            if !rate {
                return Err(format!(
                    "{field}.{k}: a window only applies to link and series rates"
                ));
            }
            if time_value(v).is_none() {
                return Err(format!("{field}.{k}: expected a time such as \"5ms\""));
            }
        }
    }
    if let (Some(s), Some(e)) = (
        m.start.as_ref().and_then(time_value),
        m.end.as_ref().and_then(time_value),
    ) {
        if e <= s {
            return Err(format!("{field}: end must be after start"));
        }
    }
    if m.scale.is_some_and(|s| !s.is_finite()) {
        return Err(format!("{field}.scale: must be a finite number"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
scenario = "s.toml"
[[config]]
label = "a"
set = ["x=1"]
[[config]]
label = "b"
[axes]
"h.workload.0.size" = [64, 128]
rate = { set = ["h.workload.0.rate", "g.workload.0.rate"], values = ["1Gbps", "2Gbps"], numbers = [1, 2] }
[[plot]]
kind = "metric_vs_param"
x = "h.workload.0.size"
lines = "rate"
y = { counter = "g/rx_bytes" }
"#;

    #[test]
    fn expands_the_product_in_order() {
        let d = Descriptor::parse(Path::new("dir/e.toml"), BASE).unwrap();
        assert_eq!(d.source, Source::Scenario(PathBuf::from("dir/s.toml")));
        assert_eq!(d.name, "e");
        let names: Vec<&str> = d.axes.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["config", "h.workload.0.size", "rate"]);
        assert_eq!(d.configs.len(), 8);
        assert_eq!(d.configs[0].label, "a h.workload.0.size=64 rate=1Gbps");
        assert_eq!(
            d.configs[0].set,
            [
                "x=1",
                "h.workload.0.size=64",
                "h.workload.0.rate=\"1Gbps\"",
                "g.workload.0.rate=\"1Gbps\""
            ]
        );
        assert_eq!(d.configs[1].coords, [0, 0, 1]);
        assert_eq!(d.configs[7].label, "b h.workload.0.size=128 rate=2Gbps");
        assert_eq!(d.axes[2].numbers, Some(vec![1.0, 2.0]));
        assert_eq!(d.plots[0].name.as_deref(), Some("metric_vs_param"));
    }

    #[test]
    fn errors_name_the_field_and_line() {
        let cases = [
            (
                BASE.replace("lines = \"rate\"", "lines = \"rte\""),
                "lines",
                14,
            ),
            (BASE.replace("[64, 128]", "[]"), "axes.h.workload.0.size", 9),
            (
                BASE.replace("label = \"b\"", "label = \"a\""),
                "config.label",
                7,
            ),
            (
                BASE.replace("counter = \"g/rx_bytes\"", "counter = \"g\""),
                "y.counter",
                15,
            ),
            (
                BASE.replace("kind = \"metric_vs_param\"", "kind = \"pie\""),
                "pie",
                12,
            ),
            (
                BASE.replace("numbers = [1, 2]", "numbers = [1]"),
                "numbers",
                10,
            ),
        ];
        for (i, (text, field, line)) in cases.iter().enumerate() {
            let e = Descriptor::parse(Path::new("e.toml"), text)
                .err()
                .unwrap_or_else(|| panic!("case {i} should fail"))
                .to_string();
            assert!(e.contains(field), "case {i}: {e}");
            assert!(
                e.contains(&format!(":{line}:")) || e.contains(&format!("line {line}")),
                "case {i}: no line {line}: {e}"
            );
        }
    }

    #[test]
    fn a_timeseries_takes_one_series_or_a_stack_of_them() {
        let ts = |plot: &str| {
            let text =
                format!("scenario = \"s.toml\"\n[[plot]]\nkind = \"timeseries_overlay\"\n{plot}\n");
            Descriptor::parse(Path::new("e.toml"), &text).map_err(|e| e.to_string())
        };
        assert!(ts("y = { series = \"r/a\", stat = \"per_s\" }").is_ok());
        let d =
            ts("stack = [{ series = \"r/a\", stat = \"per_s\" }, { series = \"r/b\" }]").unwrap();
        assert_eq!(d.plots[0].stack.len(), 2);
        let both = ts("y = { series = \"r/a\" }\nstack = [{ series = \"r/b\" }]").unwrap_err();
        assert!(both.contains("not both"), "{both}");
        let bad = ts("stack = [{ series = \"r/a\" }, { counter = \"r/b\" }]").unwrap_err();
        assert!(bad.contains("stack[1]"), "{bad}");
        assert!(ts("").unwrap_err().contains("missing field `y`"));
    }

    #[test]
    fn an_experiment_instead_of_a_scenario() {
        let text = BASE.replace(
            "scenario = \"s.toml\"",
            "experiment = \"swish-sdw-advance\"",
        );
        let d = Descriptor::parse(Path::new("dir/e.toml"), &text).unwrap();
        assert_eq!(d.source, Source::Experiment("swish-sdw-advance".into()));
        let both = BASE.replace(
            "scenario = \"s.toml\"",
            "scenario = \"s.toml\"\nexperiment = \"x\"",
        );
        let e = Descriptor::parse(Path::new("e.toml"), &both)
            .unwrap_err()
            .to_string();
        assert!(e.contains("experiment") && e.contains(":3:"), "{e}");
        let neither = BASE.replace("scenario = \"s.toml\"", "");
        let e = Descriptor::parse(Path::new("e.toml"), &neither)
            .unwrap_err()
            .to_string();
        assert!(e.contains("scenario") && e.contains("experiment"), "{e}");
    }
}
