//! `inca report DIR`: a text summary and plots (PNG and SVG) from a results
//! folder written by `inca_sim::metrics::write_results`, or from a folder of
//! such folders (one per configuration of a sweep).
//!
//! What lives where:
//! - input: [`Run::load`] reads `summary.json`, `nodes.json`, `links.json`
//!   and the `cdf/*.csv` files; every error names the file (and the line).
//! - text: [`print_run`] and [`print_comparison`].
//! - plots: [`draw_cdf`] (latency CDF), [`draw_throughput`] (throughput over
//!   time with fault markers), [`draw_bars`] (p50/p99 per run, or drop
//!   counters of one run), all drawn through one backend-generic path so the
//!   PNG and the SVG are the same picture.
//! - fonts: [`init_fonts`] registers a TTF from the system for plotters'
//!   `ab_glyph` text; without one, plots are drawn without text.
//! - sweeps: a folder with a `sweep.json` (written by `inca sweep`) gets the
//!   plots its descriptor asks for, drawn by [`sweep`].
//!
//! The folder layout and how to read each plot are in docs/experiments.md.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::plot::*;
use crate::render;
use crate::results::*;

// ---------------------------------------------------------------------------
// Entry point

/// `inca report DIR [--format png|svg ...]`.
pub fn run(dir: &Path, formats: &[String]) -> Result<()> {
    let formats = parse_formats(formats)?;
    if !dir.exists() {
        bail!("{}: no such folder", dir.display());
    }
    if !dir.is_dir() {
        bail!("{}: not a folder", dir.display());
    }
    if dir.join("sweep.json").is_file() {
        return crate::sweep::plots::redraw(dir, &formats);
    }
    let text = init_fonts();
    let mut notes = Vec::new();
    if dir.join("summary.json").exists() {
        let run = Run::load(dir, &mut notes)?;
        print_run(&run);
        let written = plot_run(&run, &formats, text, true, &mut notes)?;
        print_files(&written);
    } else {
        let runs = find_runs(dir)?;
        if runs.is_empty() {
            bail!(
                "{}: file not found (and no subfolder of {} holds a summary.json)",
                dir.join("summary.json").display(),
                dir.display()
            );
        }
        let mut loaded = Vec::new();
        for r in &runs {
            loaded.push(Run::load(r, &mut notes)?);
        }
        for r in &loaded {
            println!("== {} ==", r.name());
            print_run(r);
            println!();
        }
        print_comparison(&loaded);
        let mut written = Vec::new();
        for r in &loaded {
            written.extend(plot_run(r, &formats, text, false, &mut notes)?);
        }
        let plots = dir.join("plots");
        std::fs::create_dir_all(&plots)
            .with_context(|| format!("{}: cannot create", plots.display()))?;
        written.extend(plot_comparison(
            &loaded, &plots, &formats, text, &mut notes,
        )?);
        print_files(&written);
    }
    if !notes.is_empty() {
        println!("notes:");
        for n in &notes {
            println!("  {n}");
        }
    }
    Ok(())
}

/// Subfolders of `dir` holding a `summary.json`, in natural order.
fn find_runs(dir: &Path) -> Result<Vec<PathBuf>> {
    let rd = std::fs::read_dir(dir).map_err(|e| anyhow!("{}: {e}", dir.display()))?;
    let mut runs: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && p.join("summary.json").is_file())
        .collect();
    runs.sort_by(|a, b| natural_cmp(&a.to_string_lossy(), &b.to_string_lossy()));
    Ok(runs)
}

/// Compares strings with runs of digits compared as numbers (`r2` < `r10`).
fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn chunks(s: &str) -> Vec<(bool, &str)> {
        let mut v = Vec::new();
        let mut start = 0;
        let b = s.as_bytes();
        for i in 1..=b.len() {
            if i == b.len() || b[i].is_ascii_digit() != b[start].is_ascii_digit() {
                v.push((b[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        v
    }
    let (ca, cb) = (chunks(a), chunks(b));
    for (x, y) in ca.iter().zip(cb.iter()) {
        let o = match (x, y) {
            ((true, p), (true, q)) => {
                let (p, q) = (p.trim_start_matches('0'), q.trim_start_matches('0'));
                p.len().cmp(&q.len()).then(p.cmp(q))
            }
            ((_, p), (_, q)) => p.cmp(q),
        };
        if o != std::cmp::Ordering::Equal {
            return o;
        }
    }
    ca.len().cmp(&cb.len()).then(a.cmp(b))
}

fn print_files(written: &[PathBuf]) {
    println!("plots:");
    for p in written {
        println!("  {}", p.display());
    }
}

// ---------------------------------------------------------------------------
// Text

/// Nanoseconds in a readable unit.
fn fmt_ns(ns: u64) -> String {
    let v = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.3} µs", v / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.3} ms", v / 1e6)
    } else {
        format!("{:.3} s", v / 1e9)
    }
}

fn us(ns: f64) -> String {
    let v = ns / 1e3;
    if v >= 1000.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

fn print_run(run: &Run) {
    let s = &run.summary;
    println!(
        "scenario {} (seed {}): {} simulated (bins of {}), {} events, {} frames delivered, {:.2} s wall",
        s.scenario,
        s.seed,
        fmt_ns(s.duration_ns),
        fmt_ns(s.bin_ns),
        s.events,
        s.frames_delivered,
        s.wall_seconds
    );
    if !s.highlights.is_empty() {
        println!("highlights:");
        for h in &s.highlights {
            println!("  {h}");
        }
    }
    if s.faults.is_empty() {
        println!("faults: none");
    } else {
        println!("faults:");
        for (t, what) in &s.faults {
            println!("  {:>12}  {what}", fmt_ns(*t));
        }
    }
    let lat = run.latencies();
    if lat.is_empty() {
        println!("latency: no samples");
    } else {
        let w = lat
            .keys()
            .map(|k| k.chars().count())
            .max()
            .unwrap_or(0)
            .max(9);
        println!("latency (µs):");
        println!(
            "  {:<w$} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "histogram", "count", "mean", "p50", "p90", "p99", "p99.9", "max"
        );
        for (k, l) in &lat {
            println!(
                "  {:<w$} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
                k,
                l.count,
                us(l.mean),
                us(l.p50 as f64),
                us(l.p90 as f64),
                us(l.p99 as f64),
                us(l.p999 as f64),
                us(l.max as f64)
            );
        }
    }
    let active: Vec<&LinkReport> = run.links.iter().filter(|l| l.stats.offered > 0).collect();
    if active.is_empty() {
        println!("links: no frames offered");
    } else {
        let names: Vec<String> = active.iter().map(|l| link_label(l)).collect();
        let w = names
            .iter()
            .map(|n| n.chars().count())
            .max()
            .unwrap_or(0)
            .max(4);
        println!("links (frames):");
        println!(
            "  {:<w$} {:>11} {:>11} {:>14} {:>9} {:>11} {:>10}",
            "link", "offered", "delivered", "bytes", "lost", "queue_drops", "down_drops"
        );
        for (l, n) in active.iter().zip(&names) {
            println!(
                "  {:<w$} {:>11} {:>11} {:>14} {:>9} {:>11} {:>10}",
                n,
                l.stats.offered,
                l.stats.delivered,
                l.stats.delivered_bytes,
                l.stats.lost,
                l.stats.queue_drops,
                l.stats.down_drops
            );
        }
        let idle = run.links.len() - active.len();
        if idle > 0 {
            println!("  ({idle} link directions carried nothing)");
        }
    }
}

fn link_label(l: &LinkReport) -> String {
    format!("{} {}→{}", l.link, l.from, l.to)
}

/// Histograms with samples in every run.
fn common_latencies(runs: &[Run]) -> Vec<String> {
    let mut keys: Option<BTreeSet<String>> = None;
    for r in runs {
        let k: BTreeSet<String> = r.latencies().into_keys().collect();
        keys = Some(match keys {
            None => k,
            Some(prev) => prev.intersection(&k).cloned().collect(),
        });
    }
    keys.unwrap_or_default().into_iter().collect()
}

fn print_comparison(runs: &[Run]) {
    let keys = common_latencies(runs);
    if keys.is_empty() {
        println!("comparison: no histogram has samples in every run");
        return;
    }
    let names: Vec<String> = runs.iter().map(Run::name).collect();
    let w = names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(0)
        .max(3);
    for k in &keys {
        println!("{k} across runs (µs):");
        println!("  {:<w$} {:>9} {:>10} {:>10}", "run", "count", "p50", "p99");
        for (r, n) in runs.iter().zip(&names) {
            let l = r.latencies()[k];
            println!(
                "  {:<w$} {:>9} {:>10} {:>10}",
                n,
                l.count,
                us(l.p50 as f64),
                us(l.p99 as f64)
            );
        }
    }
    println!();
}

// ---------------------------------------------------------------------------
// The plots of one run

/// Draws a run's latency CDF, throughput and drop plots into `RUN/plots`.
fn plot_run(
    run: &Run,
    formats: &[Format],
    text: bool,
    with_drops: bool,
    notes: &mut Vec<String>,
) -> Result<Vec<PathBuf>> {
    let plots = run.dir.join("plots");
    std::fs::create_dir_all(&plots)
        .with_context(|| format!("{}: cannot create", plots.display()))?;
    let mut written = Vec::new();
    let title = &run.summary.scenario;

    if run.cdfs.is_empty() {
        notes.push(format!(
            "{}: no latency samples: no CDF plot",
            run.dir.display()
        ));
    } else {
        let mut cdfs: Vec<&Cdf> = run.cdfs.iter().collect();
        if cdfs.len() > MAX_CURVES {
            notes.push(format!(
                "latency CDF shows the first {MAX_CURVES} histograms; not drawn: {}",
                some(cdfs[MAX_CURVES..].iter().map(|c| c.label.as_str()))
            ));
            cdfs.truncate(MAX_CURVES);
        }
        written.extend(render!(
            &plots.join("latency_cdf"),
            formats,
            (W, H),
            draw_cdf(&cdfs, title, "histogram", text)
        ));
    }

    let panels = throughput_panels(run, notes);
    if panels.is_empty() {
        notes.push(format!(
            "{}: no traffic series: no throughput plot",
            run.dir.display()
        ));
    } else {
        written.extend(render!(
            &plots.join("throughput"),
            formats,
            (W, if panels.len() > 1 { 2 * H - 100 } else { H }),
            draw_throughput(&panels, &run.summary, text)
        ));
    }

    if with_drops {
        let bars = drop_bars(run);
        written.extend(render!(
            &plots.join("drops"),
            formats,
            (W, H),
            draw_bars(&bars, text)
        ));
    }
    Ok(written)
}

/// A throughput line: bytes per bin.
struct Line {
    label: String,
    bin: u64,
    values: Vec<u64>,
}

/// Throughput panels: node series named `*goodput*` or `*rx_bytes`
/// (what the endpoints saw), then link directions that carried traffic;
/// each largest total first, at most [`MAX_CURVES`]. Empty ones are left
/// out.
fn throughput_panels(run: &Run, notes: &mut Vec<String>) -> Vec<(String, Vec<Line>)> {
    let mut nodes = Vec::new();
    for n in &run.nodes {
        for (name, s) in &n.series {
            if !(name.contains("goodput") || name.ends_with("rx_bytes")) {
                continue;
            }
            let label = format!("{} {}", n.name, name);
            if s.values.iter().all(|&v| v == 0) {
                notes.push(format!("throughput: series {label} is empty, skipped"));
                continue;
            }
            nodes.push(Line {
                label,
                bin: s.bin.max(1),
                values: s.values.clone(),
            });
        }
    }
    let mut links = Vec::new();
    let mut idle = Vec::new();
    for l in &run.links {
        let s = &l.throughput_bytes;
        if s.values.iter().any(|&v| v > 0) {
            links.push(Line {
                label: link_label(l),
                bin: s.bin.max(1),
                values: s.values.clone(),
            });
        } else {
            idle.push(link_label(l));
        }
    }
    if !idle.is_empty() {
        notes.push(format!(
            "throughput: skipped {} link direction(s) with no traffic: {}",
            idle.len(),
            some(idle.iter().map(String::as_str))
        ));
    }
    let mut panels = Vec::new();
    for (title, mut lines) in [("nodes", nodes), ("links", links)] {
        if lines.is_empty() {
            continue;
        }
        // Largest first (stable, so ties keep file order).
        lines.sort_by_key(|l| std::cmp::Reverse(l.values.iter().sum::<u64>()));
        if lines.len() > MAX_CURVES {
            notes.push(format!(
                "throughput ({title}) shows the {MAX_CURVES} busiest series; not drawn: {}",
                some(lines[MAX_CURVES..].iter().map(|l| l.label.as_str()))
            ));
            lines.truncate(MAX_CURVES);
        }
        panels.push((title.to_string(), lines));
    }
    panels
}

/// (time at the middle of the bin(s), Gbit/s), with bins padded with zeros
/// up to `duration` and merged so there are at most [`MAX_POINTS`].
fn rate_points(l: &Line, duration: u64, unit: f64) -> Vec<(f64, f64)> {
    let n = l.values.len().max(duration.div_ceil(l.bin) as usize);
    let k = n.div_ceil(MAX_POINTS).max(1);
    let mut out = Vec::with_capacity(n / k + 1);
    let mut i = 0;
    while i < n {
        let j = (i + k).min(n);
        let bytes: u64 = l
            .values
            .get(i..j.min(l.values.len()))
            .map_or(0, |s| s.iter().sum());
        let (t0, t1) = (i as u64 * l.bin, j as u64 * l.bin);
        // Bytes per ns × 8 = Gbit/s.
        let gbps = bytes as f64 * 8.0 / (t1 - t0) as f64;
        out.push(((t0 + t1) as f64 / 2.0 / unit, gbps));
        i = j;
    }
    out
}

fn draw_throughput<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    panels: &[(String, Vec<Line>)],
    summary: &RunSummary,
    text: bool,
) -> Result<()> {
    // One time axis for all panels.
    let end = panels
        .iter()
        .flat_map(|(_, lines)| lines.iter().map(|l| l.values.len() as u64 * l.bin))
        .max()
        .unwrap_or(0)
        .max(summary.duration_ns)
        .max(1);
    // One legend width for all panels, so their time axes line up.
    let all: Vec<String> = panels
        .iter()
        .flat_map(|(_, lines)| lines.iter().map(|l| clip(&l.label, 44)))
        .collect();
    let (plots, legends) = with_legend(root, &all, text)?;
    let rows = panels.len().max(1);
    let areas = plots.split_evenly((rows, 1));
    let mut legends = legends.map(|l| l.split_evenly((rows, 1)).into_iter());
    for ((title, lines), area) in panels.iter().zip(areas) {
        let legend = legends.as_mut().and_then(|l| l.next());
        let caption = if panels.len() > 1 {
            format!("Throughput, {title} — {}", summary.scenario)
        } else {
            format!("Throughput — {}", summary.scenario)
        };
        draw_throughput_panel(root, &area, legend, lines, end, &caption, summary, text)?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn draw_throughput_panel<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    area: &DrawingArea<DB, Shift>,
    legend: Option<DrawingArea<DB, Shift>>,
    lines: &[Line],
    end: u64,
    caption: &str,
    summary: &RunSummary,
    text: bool,
) -> Result<()> {
    let labels: Vec<String> = lines.iter().map(|l| clip(&l.label, 44)).collect();
    let (uname, unit) = time_unit(end);
    let pts: Vec<Vec<(f64, f64)>> = lines.iter().map(|l| rate_points(l, end, unit)).collect();
    let ymax = pts.iter().flatten().map(|p| p.1).fold(0.0, f64::max);
    let ytop = if ymax > 0.0 { ymax * 1.15 } else { 1.0 };
    let xmax = end as f64 / unit;
    let mut b = ChartBuilder::on(area);
    b.margin(12);
    if text {
        b.caption(caption, font(22.0))
            .x_label_area_size(48)
            .y_label_area_size(64);
    } else {
        b.x_label_area_size(8).y_label_area_size(8);
    }
    let mut chart = b.build_cartesian_2d(0.0..xmax, 0.0..ytop).map_err(pe)?;
    let xdesc = format!("time ({uname})");
    linear_axes(root, &mut chart, text, &xdesc, "throughput (Gbit/s)")?;
    for (i, p) in pts.into_iter().enumerate() {
        let p = distinct_pixels(p, |q| chart.backend_coord(q));
        chart
            .draw_series(LineSeries::new(p, color(i).stroke_width(2)))
            .map_err(pe)?;
    }
    // Fault markers: a dashed line each, labelled at the top in staggered
    // rows so neighbours do not overlap.
    let (px, py) = chart.plotting_area().get_pixel_range();
    let fault_color = RGBColor(0x55, 0x55, 0x55);
    for (i, (t, what)) in summary.faults.iter().enumerate() {
        let x = *t as f64 / unit;
        if x > xmax {
            continue;
        }
        chart
            .draw_series(DashedLineSeries::new(
                vec![(x, 0.0), (x, ytop)],
                6,
                4,
                fault_color.stroke_width(1),
            ))
            .map_err(pe)?;
        if text {
            let (bx, _) = chart.backend_coord(&(x, 0.0));
            let y = py.start + 6 + (i % 4) as i32 * 18;
            let label = clip(what, 36);
            let style = font(13.0).color(&fault_color);
            let w = root.estimate_text_size(&label, &style).map_err(pe)?.0 as i32;
            // Right of the line, unless that runs past the plot.
            let (x0, anchor) = if bx + 4 + w <= px.end {
                (bx + 4, HPos::Left)
            } else {
                (bx - 4, HPos::Right)
            };
            let (l, r) = match anchor {
                HPos::Left => (x0 - 1, x0 + w + 1),
                _ => (x0 - w - 1, x0 + 1),
            };
            root.draw(&Rectangle::new(
                [(l, y - 8), (r, y + 8)],
                WHITE.mix(0.85).filled(),
            ))
            .map_err(pe)?;
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
        draw_legend(&l, &entries, false, "series (Gbit/s)")?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Bar charts

/// One panel of grouped bars: a group per x label, a bar per series.
struct Bars {
    title: String,
    ylabel: String,
    groups: Vec<String>,
    series: Vec<String>,
    /// `values[group][series]`.
    values: Vec<Vec<f64>>,
    /// Shown in the middle when every value is zero.
    empty_note: String,
}

/// Drop counters of one run: a group per node (and per link direction)
/// with any drop, a bar per drop counter.
fn drop_bars(run: &Run) -> Vec<Bars> {
    let mut rows: Vec<(String, BTreeMap<String, u64>)> = Vec::new();
    for n in &run.nodes {
        let d: BTreeMap<String, u64> = n
            .counters
            .iter()
            .filter(|(k, _)| k.contains("drop"))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        rows.push((n.name.clone(), d));
    }
    for l in &run.links {
        let s = l.stats;
        let d: BTreeMap<String, u64> = [
            ("link queue_drops", s.queue_drops),
            ("link lost", s.lost),
            ("link down_drops", s.down_drops),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        rows.push((format!("{} {}→{}", l.link, l.from, l.to), d));
    }
    let series: Vec<String> = {
        let mut s = BTreeSet::new();
        for (_, d) in &rows {
            s.extend(d.iter().filter(|(_, &v)| v > 0).map(|(k, _)| k.clone()));
        }
        s.into_iter().collect()
    };
    let busy: Vec<&(String, BTreeMap<String, u64>)> = rows
        .iter()
        .filter(|(_, d)| d.values().any(|&v| v > 0))
        .collect();
    let (groups, values) = if busy.is_empty() {
        (
            run.nodes.iter().map(|n| n.name.clone()).collect(),
            vec![Vec::new(); run.nodes.len()],
        )
    } else {
        (
            busy.iter().map(|(g, _)| g.clone()).collect(),
            busy.iter()
                .map(|(_, d)| {
                    series
                        .iter()
                        .map(|s| d.get(s).copied().unwrap_or(0) as f64)
                        .collect()
                })
                .collect(),
        )
    };
    vec![Bars {
        title: format!("Drops — {}", run.summary.scenario),
        ylabel: "frames dropped".into(),
        groups,
        series,
        values,
        empty_note: "no drops recorded".into(),
    }]
}

/// p50 and p99 per run for every histogram present in all runs.
fn latency_bars(runs: &[Run]) -> Vec<Bars> {
    let names: Vec<String> = runs.iter().map(Run::name).collect();
    common_latencies(runs)
        .into_iter()
        .map(|k| Bars {
            title: format!("{k}: latency per run"),
            ylabel: "latency (µs)".into(),
            groups: names.clone(),
            series: vec!["p50".into(), "p99".into()],
            values: runs
                .iter()
                .map(|r| {
                    let l = r.latencies()[&k];
                    vec![l.p50 as f64 / 1e3, l.p99 as f64 / 1e3]
                })
                .collect(),
            empty_note: String::new(),
        })
        .collect()
}

/// Most panels in one bar picture.
const MAX_PANELS: usize = 8;

fn plot_comparison(
    runs: &[Run],
    plots: &Path,
    formats: &[Format],
    text: bool,
    notes: &mut Vec<String>,
) -> Result<Vec<PathBuf>> {
    let mut panels = latency_bars(runs);
    if panels.is_empty() {
        notes.push("bars: no histogram has samples in every run: no bar plot".into());
        return Ok(Vec::new());
    }
    if panels.len() > MAX_PANELS {
        let rest: Vec<&str> = panels[MAX_PANELS..]
            .iter()
            .map(|b| b.title.as_str())
            .collect();
        notes.push(format!(
            "bars: first {MAX_PANELS} histograms drawn; not drawn: {}",
            rest.join("; ")
        ));
        panels.truncate(MAX_PANELS);
    }
    let h = 420 * panels.len() as u32;
    Ok(render!(
        &plots.join("bars"),
        formats,
        (W, h),
        draw_bars(&panels, text)
    ))
}

fn draw_bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    panels: &[Bars],
    text: bool,
) -> Result<()> {
    let areas = root.split_evenly((panels.len().max(1), 1));
    for (bars, panel) in panels.iter().zip(areas) {
        draw_bar_panel(root, &panel, bars, text)?;
    }
    Ok(())
}

fn draw_bar_panel<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    panel: &DrawingArea<DB, Shift>,
    bars: &Bars,
    text: bool,
) -> Result<()> {
    let (area, legend) = with_legend(panel, &bars.series, text)?;
    let n = bars.groups.len().max(1);
    let ymax = bars.values.iter().flatten().copied().fold(0.0, f64::max);
    let ytop = if ymax > 0.0 { ymax * 1.15 } else { 1.0 };
    let BarAxes {
        mut chart,
        slot,
        two_rows,
    } = bar_axes(
        root,
        &area,
        &bars.title,
        &bars.ylabel,
        &bars.groups,
        ytop,
        text,
    )?;
    let k = bars.series.len().max(1);
    let width = 0.8 / k as f64;
    let bar_px = (slot * width) as i32;
    for (g, vals) in bars.values.iter().enumerate() {
        for (s, &v) in vals.iter().enumerate() {
            let x0 = g as f64 - 0.4 + s as f64 * width;
            let x1 = x0 + width * 0.92;
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x0, 0.0), (x1, v)],
                    color(s).filled(),
                )))
                .map_err(pe)?;
            if text && v > 0.0 && bar_px >= 34 {
                let (bx, by) = chart.backend_coord(&((x0 + x1) / 2.0, v));
                root.draw_text(
                    &tick(v),
                    &font(11.0).pos(Pos::new(HPos::Center, VPos::Bottom)),
                    (bx, by - 2),
                )
                .map_err(pe)?;
            }
        }
    }
    if text {
        draw_group_labels(root, &chart, &bars.groups, slot, two_rows)?;
        if ymax == 0.0 && !bars.empty_note.is_empty() {
            let (bx, by) = chart.backend_coord(&((n as f64 - 1.0) / 2.0, ytop / 2.0));
            root.draw_text(
                &bars.empty_note,
                &font(18.0)
                    .color(&RGBColor(0x77, 0x77, 0x77))
                    .pos(Pos::new(HPos::Center, VPos::Center)),
                (bx, by),
            )
            .map_err(pe)?;
        }
    }
    if let Some(l) = legend {
        let entries: Vec<(String, RGBColor)> = bars
            .series
            .iter()
            .enumerate()
            .map(|(i, s)| (s.clone(), color(i)))
            .collect();
        draw_legend(&l, &entries, true, "")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::{parse_formats, Format};

    #[test]
    fn natural_order() {
        let mut v = vec!["r10", "r2", "r1", "a"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, vec!["a", "r1", "r2", "r10"]);
    }

    #[test]
    fn rates_are_gbps_and_padded() {
        let l = Line {
            label: String::new(),
            bin: 1_000,
            values: vec![125, 250],
        };
        let p = rate_points(&l, 4_000, 1.0);
        assert_eq!(
            p,
            vec![(500.0, 1.0), (1500.0, 2.0), (2500.0, 0.0), (3500.0, 0.0)]
        );
    }

    #[test]
    fn formats() {
        assert_eq!(parse_formats(&[]).unwrap(), vec![Format::Png, Format::Svg]);
        assert_eq!(parse_formats(&["svg".into()]).unwrap(), vec![Format::Svg]);
        assert!(parse_formats(&["gif".into()]).is_err());
    }
}
