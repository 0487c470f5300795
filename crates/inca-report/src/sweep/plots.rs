//! The plots of a sweep (`inca sweep`, or `inca report DIR` on a folder
//! with a `sweep.json`): the descriptor's `[[plot]]`s, each drawn into
//! `DIR/plots/NAME.{png,svg}` with its data in `NAME.csv`.
//!
//! What lives where:
//! - [`Dist`]: a latency distribution read from the CDF files, merged over
//!   histograms (a glob) and summarised across seeds;
//! - [`eval`]: one [`Metric`] of one run (counter, histogram stat, link or
//!   series rate over a window);
//! - one function per plot kind: [`cdf_overlay`], [`metric_vs_param`],
//!   [`stacked_bars`], [`timeseries_overlay`], [`percentile_table`].
//!
//! Repetitions: every number a plot shows is the median over the
//! configuration's seeds (the mean of the two middle values for an even
//! count); a CDF is the median of each quantile, and a time series the
//! median of each bin. How to read each plot is in docs/experiments.md.
//!
//! It draws with the same plumbing as the run plots ([`crate::plot`]:
//! fonts, palette, legends, the backend-generic `render!`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::plot::{
    bar_axes, clip, color, distinct_pixels, draw_cdf, draw_group_labels, draw_legend, font, frame,
    init_fonts, linear_axes, pe, tick, time_unit, with_legend, BarAxes, Format, GRID, H,
    MAX_CURVES, MAX_POINTS, W,
};
use crate::render;
use crate::results::{Cdf, LinkReport, Run, Series};
use crate::sweep::descriptor::{
    percentile_stat, time_value, value_label, Metric, PlotKind, PlotSpec, CONFIG_AXIS,
};
use crate::sweep::file::{plots_for_report, read_sweep_file, SweepFile};

// ---------------------------------------------------------------------------
// Entry points

/// A configuration with its loaded runs (one per seed).
struct Loaded<'a> {
    label: &'a str,
    coords: &'a [usize],
    runs: Vec<Run>,
}

/// Draws every plot of `plots` for the sweep in `dir`; prints tables and
/// the files written.
pub fn draw(dir: &Path, file: &SweepFile, plots: &[PlotSpec], formats: &[Format]) -> Result<()> {
    let text = init_fonts();
    let mut configs = Vec::new();
    // Loading notes (empty histograms and the like) concern single runs.
    let mut ignored = Vec::new();
    for c in &file.configurations {
        let mut runs = Vec::new();
        for r in &c.runs {
            runs.push(Run::load(&dir.join(&r.dir), &mut ignored)?);
        }
        configs.push(Loaded {
            label: &c.label,
            coords: &c.coords,
            runs,
        });
    }
    let out = dir.join("plots");
    std::fs::create_dir_all(&out).with_context(|| format!("{}: cannot create", out.display()))?;
    let mut written = Vec::new();
    let mut notes = Vec::new();
    if plots.is_empty() {
        notes.push("the descriptor has no [[plot]]".to_string());
    }
    for p in plots {
        let name = p.name.clone().unwrap_or_else(|| p.kind.name().to_string());
        let selected: Vec<&Loaded> = configs
            .iter()
            .filter(|c| selected(file, c.coords, p))
            .collect();
        if selected.is_empty() {
            notes.push(format!("{name}: no configuration passes the filter"));
            continue;
        }
        let ctx = Ctx {
            file,
            spec: p,
            base: out.join(&name),
            formats,
            text,
        };
        let r = match p.kind {
            PlotKind::CdfOverlay => cdf_overlay(&ctx, &selected, &mut notes),
            PlotKind::MetricVsParam => metric_vs_param(&ctx, &selected),
            PlotKind::StackedBars => stacked_bars(&ctx, &selected),
            PlotKind::TimeseriesOverlay => timeseries_overlay(&ctx, &selected, &mut notes),
            PlotKind::PercentileTable => percentile_table(&ctx, &selected),
        };
        written.extend(r.with_context(|| format!("plot {name:?} ({})", p.kind.name()))?);
    }
    println!("plots:");
    for w in &written {
        println!("  {}", w.display());
    }
    if !notes.is_empty() {
        println!("notes:");
        for n in &notes {
            println!("  {n}");
        }
    }
    Ok(())
}

/// `inca report DIR` on a sweep folder: redraws the descriptor's plots.
pub fn redraw(dir: &Path, formats: &[Format]) -> Result<()> {
    let file = read_sweep_file(dir)?;
    let plots = plots_for_report(&file)?;
    println!(
        "sweep {}: {} configurations × {} seeds",
        file.name,
        file.configurations.len(),
        file.seeds.len()
    );
    draw(dir, &file, &plots, formats)
}

/// What every plot function gets.
struct Ctx<'a> {
    file: &'a SweepFile,
    spec: &'a PlotSpec,
    /// `DIR/plots/NAME` (extensions added).
    base: PathBuf,
    formats: &'a [Format],
    text: bool,
}

impl Ctx<'_> {
    fn title(&self, default: String) -> String {
        self.spec.title.clone().unwrap_or(default)
    }

    fn write_csv(&self, csv: &str) -> Result<PathBuf> {
        let p = self.base.with_extension("csv");
        std::fs::write(&p, csv).with_context(|| format!("{}: cannot write", p.display()))?;
        Ok(p)
    }

    fn axis_index(&self, name: &str) -> Result<usize> {
        self.file
            .axes
            .iter()
            .position(|a| a.name == name)
            .ok_or_else(|| anyhow!("no axis named {name:?}"))
    }
}

fn selected(file: &SweepFile, coords: &[usize], p: &PlotSpec) -> bool {
    p.filter.iter().all(|(k, v)| {
        file.axes
            .iter()
            .zip(coords)
            .find(|(a, _)| &a.name == k)
            .is_some_and(|(a, &i)| value_label(&a.values[i]) == value_label(v))
    })
}

/// A CSV field, quoted when it needs to be.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A number for CSV: integers without a fraction, else 6 significant digits.
fn csv_num(v: f64) -> String {
    if !v.is_finite() {
        String::new()
    } else if v == v.trunc() && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.6e}")
            .parse::<f64>()
            .map_or_else(|_| v.to_string(), |x| x.to_string())
    }
}

/// Median of the values (mean of the two middle ones for an even count).
pub(super) fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

// ---------------------------------------------------------------------------
// Matching names

/// `*` (any run of characters) and `?` (one character) glob match.
pub(super) fn glob(pattern: &str, s: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = s.chars().collect();
    // Iterative matcher with backtracking to the last `*`.
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < t.len() {
        if i < p.len() && (p[i] == '?' || p[i] == t[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some((i, j));
            i += 1;
        } else if let Some((si, sj)) = star {
            i = si + 1;
            j = sj + 1;
            star = Some((si, sj + 1));
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

/// `NODE/NAME` split at the first slash.
fn split_pattern(s: &str) -> (&str, &str) {
    s.split_once('/').unwrap_or((s, "*"))
}

// ---------------------------------------------------------------------------
// Distributions

/// A latency distribution: CDF points (ns, fraction ≤) and sample count.
#[derive(Debug, Clone)]
pub(super) struct Dist {
    pub points: Vec<(f64, f64)>,
    pub count: u64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

/// Fractions in the CDF files are rounded to 6 decimals.
const FRACTION_SLACK: f64 = 5e-7;

impl Dist {
    /// The histograms of `run` matching `pattern`, merged into one
    /// distribution (each weighted by its count); `None` when no histogram
    /// with samples matches.
    fn of(run: &Run, pattern: &str) -> Option<Dist> {
        let (np, hp) = split_pattern(pattern);
        let mut parts = Vec::new();
        for n in &run.nodes {
            if !glob(np, &n.name) {
                continue;
            }
            for (h, lat) in &n.histograms {
                if lat.count == 0 || !glob(hp, h) {
                    continue;
                }
                let label = format!("{}/{}", n.name, h);
                if let Some(c) = run.cdfs.iter().find(|c| c.label == label) {
                    parts.push((lat, c));
                }
            }
        }
        if parts.is_empty() {
            return None;
        }
        let count: u64 = parts.iter().map(|(l, _)| l.count).sum();
        let mut xs: Vec<f64> = parts
            .iter()
            .flat_map(|(_, c)| c.points.iter().map(|p| p.0))
            .collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        let points = xs
            .into_iter()
            .map(|x| {
                let f: f64 = parts
                    .iter()
                    .map(|(l, c)| {
                        let k = c.points.partition_point(|p| p.0 <= x);
                        let frac = if k == 0 { 0.0 } else { c.points[k - 1].1 };
                        frac * l.count as f64
                    })
                    .sum();
                (x, f / count as f64)
            })
            .collect();
        Some(Dist {
            points,
            count,
            mean: parts
                .iter()
                .map(|(l, _)| l.mean * l.count as f64)
                .sum::<f64>()
                / count as f64,
            min: parts
                .iter()
                .map(|(l, _)| l.min as f64)
                .fold(f64::INFINITY, f64::min),
            max: parts.iter().map(|(l, _)| l.max as f64).fold(0.0, f64::max),
        })
    }

    /// The smallest latency (ns) with at least a fraction `q` of samples at
    /// or below it.
    fn quantile(&self, q: f64) -> f64 {
        let q = q.clamp(0.0, 1.0);
        self.points
            .iter()
            .find(|p| p.1 + FRACTION_SLACK >= q)
            .or(self.points.last())
            .map_or(f64::NAN, |p| p.0)
    }

    /// A stat in the unit plots use (µs for latencies).
    fn stat(&self, stat: &str) -> Option<f64> {
        Some(match stat {
            "mean" => self.mean / 1e3,
            "min" => self.min / 1e3,
            "max" => self.max / 1e3,
            "count" => self.count as f64,
            s => self.quantile(percentile_stat(s)?) / 1e3,
        })
    }
}

/// Quantiles a cross-seed CDF is drawn at.
fn quantile_grid() -> Vec<f64> {
    let mut g: Vec<f64> = (0..=1000).map(|i| i as f64 / 1000.0).collect();
    g.extend([0.9995, 0.9999]);
    g.sort_by(f64::total_cmp);
    g
}

/// One CDF curve for a configuration: the exact merged CDF with one seed;
/// with several, the median latency at each quantile of [`quantile_grid`].
fn median_cdf(dists: &[Dist]) -> Vec<(f64, f64)> {
    match dists {
        [] => Vec::new(),
        [one] => one.points.clone(),
        many => quantile_grid()
            .into_iter()
            .filter(|&q| q > 0.0)
            .filter_map(|q| {
                let x = median(many.iter().map(|d| d.quantile(q)).collect())?;
                Some((x, q))
            })
            .collect(),
    }
}

// ---------------------------------------------------------------------------
// Metrics

/// The default stat of a metric.
fn default_stat(m: &Metric) -> &'static str {
    if m.counter.is_some() {
        "sum"
    } else if m.histogram.is_some() {
        "p50"
    } else if m.link.is_some()
        || m.series
            .as_deref()
            .is_some_and(|s| s.contains("bytes") || s.contains("goodput"))
    {
        // Links carry bytes; so do series named so (docs/experiments.md).
        "gbps"
    } else {
        "per_s"
    }
}

/// A name for a metric in legends and on axes.
fn metric_label(m: &Metric) -> String {
    if let Some(l) = &m.label {
        return l.clone();
    }
    let stat = m
        .stat
        .clone()
        .unwrap_or_else(|| default_stat(m).to_string());
    let (src, unit) = if let Some(c) = &m.counter {
        // A counter has one stat: no need to name it.
        let scaled = if m.scale.is_some() { " (scaled)" } else { "" };
        return format!("{c}{scaled}");
    } else if let Some(h) = &m.histogram {
        let unit = if stat == "count" { "" } else { ", µs" };
        (h.clone(), unit)
    } else if let Some(l) = &m.link {
        let dir = m
            .from
            .as_ref()
            .map_or(String::new(), |f| format!(" from {f}"));
        (format!("link {l}{dir}"), "")
    } else {
        (m.series.clone().unwrap_or_default(), "")
    };
    let scaled = if m.scale.is_some() { " (scaled)" } else { "" };
    format!("{src} {stat}{unit}{scaled}")
}

/// The bin range [lo, hi) fully inside the window of `m`, for series with
/// bins of `bin` ns in a run of `duration` ns.
fn window_bins(m: &Metric, bin: u64, duration: u64) -> Result<(usize, usize)> {
    let start = m.start.as_ref().and_then(time_value).unwrap_or(0);
    let end = m
        .end
        .as_ref()
        .and_then(time_value)
        .unwrap_or(duration)
        .min(duration.max(1));
    let lo = start.div_ceil(bin) as usize;
    let hi = (end / bin) as usize;
    if hi <= lo {
        bail!("the window {start}..{end} ns holds no whole bin of {bin} ns (bins start at 0)");
    }
    Ok((lo, hi))
}

/// A rate-like stat of the bins `lo..hi` (values per bin of `bin` ns).
fn rate_stat(stat: &str, values: &[u64], bin: u64, lo: usize, hi: usize) -> f64 {
    let sum: u64 = values.iter().take(hi).skip(lo).sum();
    let span = ((hi - lo) as u64 * bin) as f64;
    let sum = sum as f64;
    match stat {
        "gbps" => sum * 8.0 / span,
        "mbps" => sum * 8.0e3 / span,
        "bytes_per_s" | "per_s" => sum * 1e9 / span,
        "per_bin" => sum / (hi - lo) as f64,
        _ => sum,
    }
}

/// Adds series `b` into `a` bin by bin (same bin width).
fn add_series(a: &mut Series, b: &Series) -> Result<()> {
    if a.values.is_empty() && a.bin == 0 {
        *a = b.clone();
        return Ok(());
    }
    if a.bin != b.bin {
        bail!(
            "the matching series have different bins ({} and {} ns)",
            a.bin,
            b.bin
        );
    }
    if a.values.len() < b.values.len() {
        a.values.resize(b.values.len(), 0);
    }
    for (x, y) in a.values.iter_mut().zip(&b.values) {
        *x += y;
    }
    Ok(())
}

/// The series a metric names in `run`, summed over matches (`None` when
/// nothing matches).
fn metric_series(run: &Run, m: &Metric) -> Result<Option<Series>> {
    let mut acc = Series::default();
    let mut any = false;
    if let Some(pat) = &m.series {
        let (np, sp) = split_pattern(pat);
        for n in run.nodes.iter().filter(|n| glob(np, &n.name)) {
            for (s, v) in n.series.iter().filter(|(s, _)| glob(sp, s)) {
                add_series(&mut acc, v).with_context(|| format!("series {}/{s}", n.name))?;
                any = true;
            }
        }
    } else if let Some(pat) = &m.link {
        for l in run.links.iter().filter(|l| link_matches(l, pat, m)) {
            add_series(&mut acc, &l.throughput_bytes)
                .with_context(|| format!("link {}", l.link))?;
            any = true;
        }
    }
    Ok(any.then_some(acc))
}

fn link_matches(l: &LinkReport, pat: &str, m: &Metric) -> bool {
    glob(pat, &l.link)
        && m.from
            .as_deref()
            .is_none_or(|f| l.from.split(':').next() == Some(f) || l.from == f)
}

/// The value of `m` in `run` (`None` when nothing in the run matches).
fn eval(run: &Run, m: &Metric) -> Result<Option<f64>> {
    let stat = m.stat.as_deref().unwrap_or_else(|| default_stat(m));
    let v = if let Some(pat) = &m.counter {
        let (np, cp) = split_pattern(pat);
        let mut found = false;
        let mut sum = 0u64;
        for n in run.nodes.iter().filter(|n| glob(np, &n.name)) {
            for (_, v) in n.counters.iter().filter(|(c, _)| glob(cp, c)) {
                found = true;
                sum = sum.saturating_add(*v);
            }
        }
        found.then_some(sum as f64)
    } else if let Some(pat) = &m.histogram {
        Dist::of(run, pat).and_then(|d| d.stat(stat))
    } else if m.link.is_some() && !LINK_RATES.contains(&stat) {
        let pat = m.link.as_deref().unwrap_or("*");
        let mut found = false;
        let mut sum = 0u64;
        for l in run.links.iter().filter(|l| link_matches(l, pat, m)) {
            found = true;
            let s = &l.stats;
            sum += match stat {
                "delivered" => s.delivered,
                "delivered_bytes" => s.delivered_bytes,
                "offered" => s.offered,
                "lost" => s.lost,
                "queue_drops" => s.queue_drops,
                _ => s.down_drops,
            };
        }
        found.then_some(sum as f64)
    } else {
        match metric_series(run, m)? {
            None => None,
            Some(s) => {
                let bin = s.bin.max(1);
                let (lo, hi) = window_bins(m, bin, run.summary.duration_ns)?;
                Some(rate_stat(stat, &s.values, bin, lo, hi))
            }
        }
    };
    Ok(v.map(|v| v * m.scale.unwrap_or(1.0)))
}

const LINK_RATES: &[&str] = &["gbps", "bytes_per_s", "mbps"];

/// The median of `m` over a configuration's runs (`None`: no run has it).
fn eval_median(c: &Loaded, m: &Metric) -> Result<Option<f64>> {
    let mut vals = Vec::new();
    for r in &c.runs {
        if let Some(v) = eval(r, m).with_context(|| format!("{}", r.dir.display()))? {
            vals.push(v);
        }
    }
    Ok(median(vals))
}

/// Fails when `m` matches nothing in any run (a typo, most likely).
fn require_match(configs: &[&Loaded], m: &Metric, vals: &[Option<f64>]) -> Result<()> {
    if vals.iter().all(Option::is_none) {
        let what = m
            .counter
            .as_ref()
            .map(|c| format!("counter {c}"))
            .or_else(|| {
                m.histogram
                    .as_ref()
                    .map(|h| format!("histogram {h} (with samples)"))
            })
            .or_else(|| m.link.as_ref().map(|l| format!("link {l}")))
            .or_else(|| m.series.as_ref().map(|s| format!("series {s}")))
            .unwrap_or_default();
        bail!(
            "{what} matches nothing in any of the {} configurations' runs",
            configs.len()
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// cdf_overlay

fn cdf_overlay(ctx: &Ctx, configs: &[&Loaded], notes: &mut Vec<String>) -> Result<Vec<PathBuf>> {
    let pat = ctx.spec.histogram.as_deref().unwrap_or_default();
    let mut curves = Vec::new();
    let mut csv = String::from("config,latency_ns,fraction\n");
    for c in configs {
        let dists: Vec<Dist> = c.runs.iter().filter_map(|r| Dist::of(r, pat)).collect();
        if dists.is_empty() {
            notes.push(format!(
                "{}: {}: no histogram matching {pat} has samples",
                ctx.base.display(),
                c.label
            ));
            continue;
        }
        let points = median_cdf(&dists);
        for (x, f) in &points {
            let _ = writeln!(csv, "{},{},{f:.6}", csv_field(c.label), csv_num(*x));
        }
        curves.push(Cdf {
            label: c.label.to_string(),
            points,
        });
    }
    if curves.is_empty() {
        bail!("no configuration has samples in a histogram matching {pat}");
    }
    let mut written = vec![ctx.write_csv(&csv)?];
    if curves.len() > MAX_CURVES {
        notes.push(format!(
            "{}: first {MAX_CURVES} configurations drawn (use filter to choose); all are in the CSV",
            ctx.base.display()
        ));
        curves.truncate(MAX_CURVES);
    }
    let refs: Vec<&Cdf> = curves.iter().collect();
    let title = ctx.title(format!("{pat} — {}", ctx.file.name));
    written.extend(render!(
        &ctx.base,
        ctx.formats,
        (W, H),
        draw_cdf(&refs, &title, "configuration", ctx.text)
    ));
    Ok(written)
}

// ---------------------------------------------------------------------------
// percentile_table

fn percentile_table(ctx: &Ctx, configs: &[&Loaded]) -> Result<Vec<PathBuf>> {
    let pat = ctx.spec.histogram.as_deref().unwrap_or_default();
    let ps = ctx
        .spec
        .percentiles
        .clone()
        .unwrap_or_else(|| vec![10.0, 50.0, 90.0, 99.0]);
    let names: Vec<String> = ps.iter().map(|p| format!("p{}", tick_pct(*p))).collect();
    let axes: Vec<&str> = ctx.file.axes.iter().map(|a| a.name.as_str()).collect();
    let mut csv = String::from("config");
    for a in &axes {
        csv.push(',');
        csv.push_str(&csv_field(a));
    }
    csv.push_str(",count");
    for n in &names {
        let _ = write!(csv, ",{n}_us");
    }
    csv.push('\n');
    let w = configs
        .iter()
        .map(|c| c.label.chars().count())
        .max()
        .unwrap_or(0)
        .max(13);
    println!("{pat}, µs (median over seeds):");
    let mut head = format!("  {:<w$} {:>9}", "configuration", "count");
    for n in &names {
        let _ = write!(head, " {n:>10}");
    }
    println!("{head}");
    let mut any = false;
    for c in configs {
        let dists: Vec<Dist> = c.runs.iter().filter_map(|r| Dist::of(r, pat)).collect();
        let count = median(dists.iter().map(|d| d.count as f64).collect());
        let vals: Vec<Option<f64>> = ps
            .iter()
            .map(|p| median(dists.iter().map(|d| d.quantile(p / 100.0) / 1e3).collect()))
            .collect();
        any |= count.is_some();
        csv.push_str(&csv_field(c.label));
        for (a, &i) in ctx.file.axes.iter().zip(c.coords) {
            let _ = write!(csv, ",{}", csv_field(&value_label(&a.values[i])));
        }
        let _ = write!(csv, ",{}", count.map_or(String::new(), csv_num));
        let mut line = format!(
            "  {:<w$} {:>9}",
            c.label,
            count.map_or("-".into(), |v| format!("{v:.0}"))
        );
        for v in &vals {
            let _ = write!(csv, ",{}", v.map_or(String::new(), csv_num));
            let _ = write!(line, " {:>10}", v.map_or("-".into(), |v| format!("{v:.3}")));
        }
        csv.push('\n');
        println!("{line}");
    }
    if !any {
        bail!("no configuration has samples in a histogram matching {pat}");
    }
    Ok(vec![ctx.write_csv(&csv)?])
}

/// A percentile's name: `10` → "10", `99.9` → "99.9".
fn tick_pct(p: f64) -> String {
    let s = format!("{p}");
    s.trim_end_matches(".0").to_string()
}

// ---------------------------------------------------------------------------
// metric_vs_param

/// A line of points (x position, y), with its legend label.
pub(crate) struct XyLine {
    pub(crate) label: String,
    pub(crate) points: Vec<(f64, f64)>,
}

fn metric_vs_param(ctx: &Ctx, configs: &[&Loaded]) -> Result<Vec<PathBuf>> {
    let spec = ctx.spec;
    let m = spec.y.clone().unwrap_or_default();
    let xi = ctx.axis_index(spec.x.as_deref().unwrap_or_default())?;
    let li = match &spec.lines {
        Some(l) => Some(ctx.axis_index(l)?),
        None => None,
    };
    let xaxis = &ctx.file.axes[xi];
    let numeric = xaxis.numbers.clone();
    let xpos = |k: usize| numeric.as_ref().map_or(k as f64, |n| n[k]);

    let mut vals = Vec::new();
    for c in configs {
        vals.push(eval_median(c, &m).with_context(|| format!("configuration {:?}", c.label))?);
    }
    require_match(configs, &m, &vals)?;

    // Lines keyed by the `lines` axis value index (or one line); configs
    // that differ on other axes too get their own lines, so no two points of
    // a line share an x.
    let mut groups: BTreeMap<Vec<usize>, Vec<(usize, f64)>> = BTreeMap::new();
    let mut csv = format!(
        "config,{},{},y,seeds,x\n",
        csv_field(&xaxis.name),
        csv_field(li.map_or("line", |i| ctx.file.axes[i].name.as_str()))
    );
    for (c, v) in configs.iter().zip(&vals) {
        let mut key: Vec<usize> = Vec::new();
        if let Some(i) = li {
            key.push(c.coords[i]);
        }
        for (a, &k) in c.coords.iter().enumerate() {
            if a != xi && Some(a) != li {
                key.push(k);
            }
        }
        let line_value = li.map_or(String::new(), |i| {
            value_label(&ctx.file.axes[i].values[c.coords[i]])
        });
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{}",
            csv_field(c.label),
            csv_field(&value_label(&xaxis.values[c.coords[xi]])),
            csv_field(&line_value),
            v.map_or(String::new(), csv_num),
            c.runs.len(),
            csv_num(xpos(c.coords[xi]))
        );
        if let Some(v) = v {
            groups.entry(key).or_default().push((c.coords[xi], *v));
        }
    }
    let mut lines = Vec::new();
    for (key, mut pts) in groups {
        pts.sort_by(|a, b| xpos(a.0).total_cmp(&xpos(b.0)));
        // Label: the `lines` value, then any other differing axes.
        let mut parts = Vec::new();
        let mut k = key.iter();
        // The legend's title names the `lines` axis: its value alone.
        if let Some(i) = li {
            let a = &ctx.file.axes[i];
            parts.push(value_label(&a.values[*k.next().unwrap_or(&0)]));
        }
        for (a, axis) in ctx.file.axes.iter().enumerate() {
            if a != xi && Some(a) != li {
                let v = value_label(&axis.values[*k.next().unwrap_or(&0)]);
                parts.push(if axis.name == CONFIG_AXIS {
                    v
                } else {
                    format!("{}={v}", axis.name)
                });
            }
        }
        lines.push(XyLine {
            label: if parts.is_empty() {
                metric_label(&m)
            } else {
                parts.join(" ")
            },
            points: pts.into_iter().map(|(k, y)| (xpos(k), y)).collect(),
        });
    }
    let mut written = vec![ctx.write_csv(&csv)?];
    println!(
        "{} vs {} (median over seeds):",
        metric_label(&m),
        xaxis.name
    );
    for l in &lines {
        let row: Vec<String> = l
            .points
            .iter()
            .map(|(x, y)| format!("{}→{}", tick(*x), tick(*y)))
            .collect();
        println!("  {}: {}", l.label, row.join(", "));
    }
    if lines.len() > MAX_CURVES {
        lines.truncate(MAX_CURVES);
    }
    let categories: Option<Vec<String>> = numeric
        .is_none()
        .then(|| xaxis.values.iter().map(value_label).collect());
    let plot = XyPlot {
        title: ctx.title(format!(
            "{} vs {} — {}",
            metric_label(&m),
            xaxis.name,
            ctx.file.name
        )),
        xlabel: spec.xlabel.clone().unwrap_or_else(|| xaxis.name.clone()),
        ylabel: metric_label(&m),
        lines,
        categories,
        log_x: spec.log_x == Some(true),
        log_y: spec.log_y,
        legend_title: spec.lines.clone().unwrap_or_default(),
    };
    written.extend(render!(
        &ctx.base,
        ctx.formats,
        (W, H),
        draw_xy(&plot, ctx.text)
    ));
    Ok(written)
}

/// A line plot of y against x.
pub(crate) struct XyPlot {
    pub(crate) title: String,
    pub(crate) xlabel: String,
    pub(crate) ylabel: String,
    pub(crate) lines: Vec<XyLine>,
    /// Names of x = 0, 1, … for a non-numeric axis.
    pub(crate) categories: Option<Vec<String>>,
    pub(crate) log_x: bool,
    pub(crate) log_y: bool,
    pub(crate) legend_title: String,
}

pub(crate) fn draw_xy<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    p: &XyPlot,
    text: bool,
) -> Result<()> {
    let labels: Vec<String> = p.lines.iter().map(|l| clip(&l.label, 40)).collect();
    let (area, legend) = with_legend(root, &labels, text)?;
    let pts = p.lines.iter().flat_map(|l| l.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
    );
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if !x0.is_finite() {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    let (xr, log_x) = if let Some(c) = &p.categories {
        ((-0.5, c.len() as f64 - 0.5), false)
    } else if p.log_x && x0 > 0.0 {
        ((x0 / 1.3, x1 * 1.3), true)
    } else {
        let span = (x1 - x0).max(x1.abs() * 0.1).max(1e-9);
        ((x0 - span * 0.05, x1 + span * 0.05), false)
    };
    let (yr, log_y) = if p.log_y && y0 > 0.0 {
        ((y0 / 1.5, y1 * 1.5), true)
    } else {
        let lo = y0.min(0.0);
        let top = if y1 > lo {
            y1 + (y1 - lo) * 0.12
        } else {
            lo + 1.0
        };
        ((lo, top), false)
    };
    let mut b = ChartBuilder::on(&area);
    b.margin(12);
    if text {
        b.caption(&p.title, font(20.0))
            .x_label_area_size(48)
            .y_label_area_size(72);
    } else {
        b.x_label_area_size(8).y_label_area_size(8);
    }
    let xdesc = if log_x {
        format!("{} (log scale)", p.xlabel)
    } else {
        p.xlabel.clone()
    };
    let cats = p.categories.clone();
    let xfmt = move |v: &f64| -> String {
        match &cats {
            Some(c) => {
                let i = v.round();
                if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < c.len() {
                    clip(&c[i as usize], 14)
                } else {
                    String::new()
                }
            }
            None => tick(*v),
        }
    };
    let n_cats = p.categories.as_ref().map_or(10, |c| c.len() * 2 + 1);
    macro_rules! body {
        ($chart:ident) => {{
            if text {
                $chart
                    .configure_mesh()
                    .x_desc(xdesc.as_str())
                    .y_desc(p.ylabel.as_str())
                    .x_labels(n_cats.min(25))
                    .x_label_formatter(&xfmt)
                    .y_label_formatter(&|v| tick(*v))
                    .label_style(font(14.0))
                    .axis_desc_style(font(16.0))
                    .light_line_style(GRID)
                    .max_light_lines(4)
                    .draw()
                    .map_err(pe)?;
            } else {
                frame(root, $chart.plotting_area())?;
            }
            for (i, l) in p.lines.iter().enumerate() {
                let c = color(i);
                let pts = distinct_pixels(l.points.clone(), |q| $chart.backend_coord(q));
                $chart
                    .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                    .map_err(pe)?;
                $chart
                    .draw_series(pts.into_iter().map(|q| Circle::new(q, 4, c.filled())))
                    .map_err(pe)?;
            }
        }};
    }
    match (log_x, log_y) {
        (false, false) => {
            let mut chart = b.build_cartesian_2d(xr.0..xr.1, yr.0..yr.1).map_err(pe)?;
            body!(chart);
        }
        (true, false) => {
            let mut chart = b
                .build_cartesian_2d((xr.0..xr.1).log_scale(), yr.0..yr.1)
                .map_err(pe)?;
            body!(chart);
        }
        (false, true) => {
            let mut chart = b
                .build_cartesian_2d(xr.0..xr.1, (yr.0..yr.1).log_scale())
                .map_err(pe)?;
            body!(chart);
        }
        (true, true) => {
            let mut chart = b
                .build_cartesian_2d((xr.0..xr.1).log_scale(), (yr.0..yr.1).log_scale())
                .map_err(pe)?;
            body!(chart);
        }
    }
    if let Some(l) = legend {
        let entries: Vec<(String, RGBColor)> = labels
            .into_iter()
            .enumerate()
            .map(|(i, s)| (s, color(i)))
            .collect();
        draw_legend(&l, &entries, false, &p.legend_title)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// stacked_bars

fn stacked_bars(ctx: &Ctx, configs: &[&Loaded]) -> Result<Vec<PathBuf>> {
    let spec = ctx.spec;
    let seg_labels: Vec<String> = spec.stack.iter().map(metric_label).collect();
    // values[config][segment]
    let mut values = vec![Vec::new(); configs.len()];
    for (s, m) in spec.stack.iter().enumerate() {
        let mut col = Vec::new();
        for c in configs {
            col.push(eval_median(c, m).with_context(|| format!("configuration {:?}", c.label))?);
        }
        require_match(configs, m, &col).with_context(|| format!("stack[{s}]"))?;
        for (row, v) in values.iter_mut().zip(col) {
            row.push(v.unwrap_or(0.0));
        }
    }
    let mut csv = String::from("config");
    for l in &seg_labels {
        let _ = write!(csv, ",{}", csv_field(l));
    }
    csv.push_str(",total");
    for l in &seg_labels {
        let _ = write!(csv, ",{}", csv_field(&format!("{l} share")));
    }
    csv.push('\n');
    for (c, row) in configs.iter().zip(&values) {
        let total: f64 = row.iter().sum();
        csv.push_str(&csv_field(c.label));
        for v in row {
            let _ = write!(csv, ",{}", csv_num(*v));
        }
        let _ = write!(csv, ",{}", csv_num(total));
        for v in row {
            let share = if total > 0.0 { v / total } else { 0.0 };
            let _ = write!(csv, ",{share:.6}");
        }
        csv.push('\n');
    }
    let mut written = vec![ctx.write_csv(&csv)?];
    let shown: Vec<Vec<f64>> = if spec.shares {
        values
            .iter()
            .map(|row| {
                let t: f64 = row.iter().sum();
                row.iter()
                    .map(|v| if t > 0.0 { v / t * 100.0 } else { 0.0 })
                    .collect()
            })
            .collect()
    } else {
        values
    };
    let plot = Stacks {
        title: ctx.title(format!(
            "{} — {}",
            if spec.shares { "Shares" } else { "Totals" },
            ctx.file.name
        )),
        ylabel: if spec.shares {
            "share of total (%)".into()
        } else {
            "value".into()
        },
        groups: configs.iter().map(|c| c.label.to_string()).collect(),
        segments: seg_labels,
        values: shown,
    };
    written.extend(render!(
        &ctx.base,
        ctx.formats,
        (W, H),
        draw_stacks(&plot, ctx.text)
    ));
    Ok(written)
}

/// A bar per group, segments stacked bottom first.
pub(crate) struct Stacks {
    pub(crate) title: String,
    pub(crate) ylabel: String,
    pub(crate) groups: Vec<String>,
    pub(crate) segments: Vec<String>,
    /// `values[group][segment]`, all ≥ 0 drawn.
    pub(crate) values: Vec<Vec<f64>>,
}

pub(crate) fn draw_stacks<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    s: &Stacks,
    text: bool,
) -> Result<()> {
    let (area, legend) = with_legend(root, &s.segments, text)?;
    let ymax = s
        .values
        .iter()
        .map(|r| r.iter().map(|v| v.max(0.0)).sum::<f64>())
        .fold(0.0, f64::max);
    let ytop = if ymax > 0.0 { ymax * 1.1 } else { 1.0 };
    let BarAxes {
        mut chart,
        slot,
        two_rows,
    } = bar_axes(root, &area, &s.title, &s.ylabel, &s.groups, ytop, text)?;
    for (g, row) in s.values.iter().enumerate() {
        let mut base = 0.0;
        let (x0, x1) = (g as f64 - 0.35, g as f64 + 0.35);
        for (k, &v) in row.iter().enumerate() {
            let v = v.max(0.0);
            if v > 0.0 {
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(x0, base), (x1, base + v)],
                        color(k).filled(),
                    )))
                    .map_err(pe)?;
            }
            base += v;
        }
        if text && base > 0.0 {
            let (bx, by) = chart.backend_coord(&(g as f64, base));
            root.draw_text(
                &tick(base),
                &font(11.0).pos(Pos::new(HPos::Center, VPos::Bottom)),
                (bx, by - 2),
            )
            .map_err(pe)?;
        }
    }
    if text {
        draw_group_labels(root, &chart, &s.groups, slot, two_rows)?;
    }
    if let Some(l) = legend {
        let entries: Vec<(String, RGBColor)> = s
            .segments
            .iter()
            .enumerate()
            .map(|(i, x)| (x.clone(), color(i)))
            .collect();
        draw_legend(&l, &entries, true, "")?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// timeseries_overlay

/// One configuration's series: (time ns at the middle of a bin, value).
struct TsLine {
    label: String,
    points: Vec<(f64, f64)>,
    faults: Vec<(u64, String)>,
    /// Where its bins end, ns (the run's duration or the last bin's end).
    end: u64,
}

fn timeseries_overlay(
    ctx: &Ctx,
    configs: &[&Loaded],
    notes: &mut Vec<String>,
) -> Result<Vec<PathBuf>> {
    let spec = ctx.spec;
    // `y`, or several series in `stack`: one line per configuration and
    // series, sharing the first one's stat.
    let metrics: Vec<Metric> = if spec.stack.is_empty() {
        vec![spec.y.clone().unwrap_or_default()]
    } else {
        spec.stack.clone()
    };
    let m = metrics[0].clone();
    let stat = m
        .stat
        .clone()
        .unwrap_or_else(|| default_stat(&m).to_string());
    let mut lines = Vec::new();
    let mut csv = String::from("config,time_ns,value\n");
    let mut matched = false;
    for c in configs {
        for m in &metrics {
            let scale = m.scale.unwrap_or(1.0);
            let label = match (metrics.len(), configs.len()) {
                (1, _) => c.label.to_string(),
                (_, 1) => m.label.clone().unwrap_or_else(|| metric_label(m)),
                _ => format!(
                    "{}: {}",
                    c.label,
                    m.label.clone().unwrap_or_else(|| metric_label(m))
                ),
            };
            let mut per_seed = Vec::new();
            let mut bin = 0;
            let mut duration = 0;
            for r in &c.runs {
                if let Some(s) = metric_series(r, m)? {
                    if bin != 0 && bin != s.bin {
                        bail!("{}: series bins differ between seeds", c.label);
                    }
                    bin = s.bin.max(1);
                    duration = duration.max(r.summary.duration_ns);
                    per_seed.push(s.values);
                }
            }
            if per_seed.is_empty() {
                notes.push(format!(
                    "{}: {}: {} matches nothing",
                    ctx.base.display(),
                    c.label,
                    metric_label(m)
                ));
                continue;
            }
            matched = true;
            // Merge bins: to the requested width, then to at most
            // MAX_POINTS.
            let n = per_seed
                .iter()
                .map(Vec::len)
                .max()
                .unwrap_or(0)
                .max(duration.div_ceil(bin) as usize);
            let want = spec.bin.as_ref().and_then(time_value).unwrap_or(bin);
            let k = ((want as f64 / bin as f64).round() as usize)
                .max(1)
                .max(n.div_ceil(MAX_POINTS));
            let mut points = Vec::new();
            let mut i = 0;
            let end = (n as u64 * bin).max(duration);
            while i < n {
                let j = (i + k).min(n);
                let width = ((j - i) as u64 * bin) as f64;
                let v = median(
                    per_seed
                        .iter()
                        .map(|vals| {
                            let sum: u64 = vals.iter().take(j).skip(i).sum();
                            let sum = sum as f64;
                            match stat.as_str() {
                                "gbps" => sum * 8.0 / width,
                                "mbps" => sum * 8.0e3 / width,
                                "bytes_per_s" | "per_s" => sum * 1e9 / width,
                                _ => sum / (j - i) as f64,
                            }
                        })
                        .collect(),
                )
                .unwrap_or(0.0)
                    * scale;
                let t = (i as u64 * bin) as f64 + width / 2.0;
                let _ = writeln!(csv, "{},{},{}", csv_field(&label), t as u64, csv_num(v));
                points.push((t, v));
                i = j;
            }
            lines.push(TsLine {
                label,
                points,
                faults: c
                    .runs
                    .first()
                    .map_or(Vec::new(), |r| r.summary.faults.clone()),
                end,
            });
        }
    }
    if !matched {
        bail!("{} matches nothing in any run", metric_label(&m));
    }
    let mut written = vec![ctx.write_csv(&csv)?];
    if lines.len() > MAX_CURVES {
        notes.push(format!(
            "{}: first {MAX_CURVES} configurations drawn; all are in the CSV",
            ctx.base.display()
        ));
        lines.truncate(MAX_CURVES);
    }
    let unit = match stat.as_str() {
        "gbps" => "Gbit/s",
        "mbps" => "Mbit/s",
        "bytes_per_s" => "bytes/s",
        "per_s" => "per second",
        _ => "per bin",
    };
    let ylabel = if metrics.len() > 1 {
        // The series' labels are the legend's.
        match m.scale {
            Some(k) if k != 1.0 => format!("{unit} × {k:e}"),
            _ => unit.to_string(),
        }
    } else {
        m.label.clone().unwrap_or_else(|| {
            format!(
                "{} ({unit}{})",
                m.series
                    .clone()
                    .or_else(|| m.link.clone().map(|l| format!("link {l}")))
                    .unwrap_or_default(),
                if m.scale.is_some() { ", scaled" } else { "" }
            )
        })
    };
    let title = ctx.title(format!(
        "{} over time — {}",
        metric_label(&m),
        ctx.file.name
    ));
    written.extend(render!(
        &ctx.base,
        ctx.formats,
        (W, H),
        draw_timeseries(&lines, &title, &ylabel, ctx.text)
    ));
    Ok(written)
}

fn draw_timeseries<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lines: &[TsLine],
    title: &str,
    ylabel: &str,
    text: bool,
) -> Result<()> {
    let labels: Vec<String> = lines.iter().map(|l| clip(&l.label, 40)).collect();
    let (area, legend) = with_legend(root, &labels, text)?;
    let end = lines.iter().map(|l| l.end).max().unwrap_or(1).max(1);
    let (uname, unit) = time_unit(end);
    let ymax = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    let ymin = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .fold(0.0, f64::min);
    let ytop = if ymax > ymin {
        ymax + (ymax - ymin) * 0.15
    } else {
        ymin + 1.0
    };
    let xmax = end as f64 / unit;
    let mut b = ChartBuilder::on(&area);
    b.margin(12);
    if text {
        b.caption(title, font(20.0))
            .x_label_area_size(48)
            .y_label_area_size(72);
    } else {
        b.x_label_area_size(8).y_label_area_size(8);
    }
    let mut chart = b.build_cartesian_2d(0.0..xmax, ymin..ytop).map_err(pe)?;
    let xdesc = format!("time ({uname})");
    linear_axes(root, &mut chart, text, &xdesc, ylabel)?;
    for (i, l) in lines.iter().enumerate() {
        let pts: Vec<(f64, f64)> = l.points.iter().map(|&(t, v)| (t / unit, v)).collect();
        let pts = distinct_pixels(pts, |q| chart.backend_coord(q));
        chart
            .draw_series(LineSeries::new(pts, color(i).stroke_width(2)))
            .map_err(pe)?;
    }
    // Faults: one grey marker for a fault every configuration has (same
    // time, same description), else a marker in the configuration's colour.
    let mut faults: BTreeMap<(u64, String), Vec<usize>> = BTreeMap::new();
    for (i, l) in lines.iter().enumerate() {
        for f in &l.faults {
            faults.entry(f.clone()).or_default().push(i);
        }
    }
    let (px, py) = chart.plotting_area().get_pixel_range();
    let grey = RGBColor(0x55, 0x55, 0x55);
    for (row, ((t, what), who)) in faults.iter().enumerate() {
        let x = *t as f64 / unit;
        if x > xmax {
            continue;
        }
        let (c, label) = if who.len() == lines.len() {
            (grey, what.clone())
        } else {
            (
                color(who[0]),
                format!("{}: {what}", clip(&lines[who[0]].label, 16)),
            )
        };
        chart
            .draw_series(DashedLineSeries::new(
                vec![(x, ymin), (x, ytop)],
                6,
                4,
                c.stroke_width(1),
            ))
            .map_err(pe)?;
        if text {
            let (bx, _) = chart.backend_coord(&(x, ymin));
            let y = py.start + 6 + (row % 4) as i32 * 18;
            let label = clip(&label, 40);
            let style = font(13.0).color(&c);
            let w = root.estimate_text_size(&label, &style).map_err(pe)?.0 as i32;
            let (x0, anchor) = if bx + 4 + w <= px.end {
                (bx + 4, HPos::Left)
            } else {
                (bx - 4, HPos::Right)
            };
            root.draw_text(&label, &style.pos(Pos::new(anchor, VPos::Center)), (x0, y))
                .map_err(pe)?;
        }
    }
    if let Some(l) = legend {
        let entries: Vec<(String, RGBColor)> = labels
            .into_iter()
            .enumerate()
            .map(|(i, s)| (s, color(i)))
            .collect();
        draw_legend(&l, &entries, false, "configuration")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob("c*", "c1"));
        assert!(glob("*", ""));
        assert!(glob("rtt.*", "rtt.req0"));
        assert!(glob("a?c", "abc"));
        assert!(!glob("a?c", "ac"));
        assert!(glob("*x*y", "axbxy"));
        assert!(!glob("c*", "d1"));
        assert!(glob("tcp.*.goodput", "tcp.c1.flow0.goodput"));
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
    }

    fn dist(points: Vec<(f64, f64)>, count: u64) -> Dist {
        Dist {
            points,
            count,
            mean: 0.0,
            min: 0.0,
            max: 0.0,
        }
    }

    #[test]
    fn quantiles_and_median_cdf() {
        let a = dist(vec![(10.0, 0.25), (20.0, 0.5), (30.0, 1.0)], 4);
        assert_eq!(a.quantile(0.1), 10.0);
        assert_eq!(a.quantile(0.5), 20.0);
        assert_eq!(a.quantile(0.500_000_3), 20.0);
        assert_eq!(a.quantile(0.51), 30.0);
        let b = dist(vec![(40.0, 1.0)], 4);
        let c = dist(vec![(50.0, 1.0)], 4);
        let m = median_cdf(&[a, b, c]);
        // At q = 0.5: latencies 20, 40, 50 → 40.
        let at_half = m.iter().find(|p| p.1 == 0.5).unwrap();
        assert_eq!(at_half.0, 40.0);
        assert!(m.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1));
    }

    #[test]
    fn rates_over_windows() {
        let m = Metric {
            start: Some(toml::Value::String("1us".into())),
            end: Some(toml::Value::String("3us".into())),
            ..Metric::default()
        };
        // Bins of 1 µs: the window covers bins 1 and 2.
        let (lo, hi) = window_bins(&m, 1_000, 10_000).unwrap();
        assert_eq!((lo, hi), (1, 3));
        let v = [100u64, 250, 250, 999];
        assert_eq!(rate_stat("gbps", &v, 1_000, lo, hi), 2.0);
        assert_eq!(rate_stat("sum", &v, 1_000, lo, hi), 500.0);
        assert_eq!(rate_stat("per_s", &v, 1_000, lo, hi), 250e6);
        // A window inside one bin holds no whole bin.
        let m = Metric {
            start: Some(toml::Value::Integer(1_200)),
            end: Some(toml::Value::Integer(1_800)),
            ..Metric::default()
        };
        assert!(window_bins(&m, 1_000, 10_000).is_err());
    }
}
