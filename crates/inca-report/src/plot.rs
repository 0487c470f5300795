//! The plotting plumbing every picture shares: output formats, fonts, the
//! palette, legends, frames and ticks, the backend-generic [`render!`]
//! (one drawing, PNG and SVG), the latency CDF and bar-chart axes. The run
//! plots ([`crate::report`]), the sweep plots ([`crate::sweep::plots`]) and
//! TEA's offline experiments draw through it.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Result};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::results::Cdf;

/// An output image format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Portable Network Graphics (bitmap).
    Png,
    /// Scalable Vector Graphics.
    Svg,
}

impl Format {
    /// The file extension.
    pub fn ext(self) -> &'static str {
        match self {
            Format::Png => "png",
            Format::Svg => "svg",
        }
    }
}

/// Parses `--format` values (repeatable, or comma-separated); none means both.
pub fn parse_formats(list: &[String]) -> Result<Vec<Format>> {
    let mut out = Vec::new();
    for item in list.iter().flat_map(|s| s.split(',')) {
        let f = match item.trim().to_ascii_lowercase().as_str() {
            "png" => Format::Png,
            "svg" => Format::Svg,
            "" => continue,
            other => bail!("--format: unknown format {other:?} (expected png or svg)"),
        };
        if !out.contains(&f) {
            out.push(f);
        }
    }
    if out.is_empty() {
        out = vec![Format::Png, Format::Svg];
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// Fonts

/// Where fonts are looked for, in order (after `$INCA_FONT`).
pub const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
    "/Library/Fonts/Arial.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
];

/// The font family every text in the plots uses.
pub const FAMILY: &str = "sans-serif";

/// Registers a system TTF as plotters' `sans-serif` font. `$INCA_FONT`
/// names one explicitly (`none` draws without text). Returns whether text
/// can be drawn; warns once when it cannot.
pub fn init_fonts() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(|| {
        let mut candidates: Vec<PathBuf> = Vec::new();
        match std::env::var_os("INCA_FONT") {
            Some(v) if v == "none" => {
                eprintln!("inca report: warning: INCA_FONT=none: plots are drawn without text");
                return false;
            }
            Some(v) => candidates.push(v.into()),
            None => {}
        }
        candidates.extend(FONT_PATHS.iter().map(PathBuf::from));
        for p in &candidates {
            let Ok(bytes) = std::fs::read(p) else {
                continue;
            };
            // plotters keeps fonts for the life of the process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font(FAMILY, FontStyle::Normal, bytes).is_ok() {
                return true;
            }
        }
        eprintln!(
            "inca report: warning: no TrueType font found (install fonts-dejavu-core or set INCA_FONT=/path/to/font.ttf): plots are drawn without text"
        );
        false
    })
}

// ---------------------------------------------------------------------------
// Plot plumbing

/// Plot size, pixels.
pub const W: u32 = 1100;
pub const H: u32 = 620;

/// Tableau 10: distinct, colour-blind-friendly.
pub const PALETTE: [RGBColor; 10] = [
    RGBColor(0x4e, 0x79, 0xa7),
    RGBColor(0xf2, 0x8e, 0x2b),
    RGBColor(0xe1, 0x57, 0x59),
    RGBColor(0x76, 0xb7, 0xb2),
    RGBColor(0x59, 0xa1, 0x4f),
    RGBColor(0xed, 0xc9, 0x48),
    RGBColor(0xb0, 0x7a, 0xa1),
    RGBColor(0xff, 0x9d, 0xa7),
    RGBColor(0x9c, 0x75, 0x5f),
    RGBColor(0xba, 0xb0, 0xac),
];

pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Most curves one plot draws (the rest are named in a note).
/// (The palette's size: more curves would repeat colours.)
pub const MAX_CURVES: usize = PALETTE.len();

/// Most points a throughput line has (bins are merged beyond that).
pub const MAX_POINTS: usize = 1000;

pub fn pe<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing failed: {e}")
}

pub fn font(size: f64) -> TextStyle<'static> {
    TextStyle::from((FAMILY, size).into_font()).color(&BLACK)
}

/// Up to six names, then how many more.
pub fn some<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.into_iter().collect();
    let mut s = names.iter().take(6).copied().collect::<Vec<_>>().join(", ");
    if names.len() > 6 {
        s.push_str(&format!(" and {} more", names.len() - 6));
    }
    s
}

/// Drops points that land on the same pixel as the one before (plotters'
/// bitmap backend draws wide lines through repeated points as spikes).
pub fn distinct_pixels(
    pts: Vec<(f64, f64)>,
    at: impl Fn(&(f64, f64)) -> (i32, i32),
) -> Vec<(f64, f64)> {
    let mut last = None;
    pts.into_iter()
        .filter(|p| {
            let c = Some(at(p));
            let keep = last != c;
            last = c;
            keep
        })
        .collect()
}

/// Cuts `s` to `max` characters, with an ellipsis.
pub fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// Draws one picture to `base.png` and/or `base.svg`: `draw` is called with
/// the image's root area for each format.
#[macro_export]
macro_rules! render {
    ($base:expr, $formats:expr, $size:expr, $draw:ident ( $($arg:expr),* )) => {{
        use ::anyhow::Context as _;
        use ::plotters::prelude::{BitMapBackend, IntoDrawingArea as _, SVGBackend, WHITE};
        let base: &::std::path::Path = $base;
        let mut written: Vec<::std::path::PathBuf> = Vec::new();
        for f in $formats.iter() {
            let path = base.with_extension(f.ext());
            let r: ::anyhow::Result<()> = (|| {
                match f {
                    $crate::plot::Format::Png => {
                        let root = BitMapBackend::new(&path, $size).into_drawing_area();
                        root.fill(&WHITE).map_err($crate::plot::pe)?;
                        $draw(&root, $($arg),*)?;
                        root.present().map_err($crate::plot::pe)?;
                    }
                    $crate::plot::Format::Svg => {
                        let root = SVGBackend::new(&path, $size).into_drawing_area();
                        root.fill(&WHITE).map_err($crate::plot::pe)?;
                        $draw(&root, $($arg),*)?;
                        root.present().map_err($crate::plot::pe)?;
                    }
                }
                Ok(())
            })();
            r.with_context(|| format!("{}", path.display()))?;
            written.push(path);
        }
        written
    }};
}

/// A legend in its own area at the right of a plot: one row per entry, a
/// sample (a line, or a filled square) and the label.
pub fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[(String, RGBColor)],
    filled: bool,
    title: &str,
) -> Result<()> {
    let style = font(14.0);
    let mut y = 8;
    if !title.is_empty() {
        area.draw_text(
            title,
            &font(14.0).pos(Pos::new(HPos::Left, VPos::Top)),
            (8, y),
        )
        .map_err(pe)?;
        y += 22;
    }
    for (label, c) in entries {
        let cy = y + 8;
        if filled {
            area.draw(&Rectangle::new([(8, cy - 6), (26, cy + 6)], c.filled()))
                .map_err(pe)?;
        } else {
            area.draw(&PathElement::new(
                vec![(6, cy), (30, cy)],
                c.stroke_width(3),
            ))
            .map_err(pe)?;
        }
        area.draw_text(
            label,
            &style.pos(Pos::new(HPos::Left, VPos::Center)),
            (36, cy),
        )
        .map_err(pe)?;
        y += 22;
    }
    Ok(())
}

/// A drawing area in pixels.
type Area<DB> = DrawingArea<DB, Shift>;

/// Splits `root` into a plot area and a legend area wide enough for
/// `labels` (no legend without text).
pub fn with_legend<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    labels: &[String],
    text: bool,
) -> Result<(Area<DB>, Option<Area<DB>>)> {
    if !text || labels.is_empty() {
        return Ok((root.clone(), None));
    }
    let (w, _) = root.dim_in_pixel();
    let mut widest = 0;
    for l in labels {
        widest = widest.max(root.estimate_text_size(l, &font(14.0)).map_err(pe)?.0);
    }
    let lw = (widest + 50).clamp(120, w / 2);
    let (a, b) = root.split_horizontally(w - lw);
    Ok((a, Some(b)))
}

/// Light grid lines.
pub const GRID: RGBColor = RGBColor(235, 235, 235);

/// The axes of a linear x/y chart: with `text`, a labelled mesh (light
/// grid, `tick` labels, axis descriptions); without, a [`frame`].
pub fn linear_axes<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    text: bool,
    xdesc: &str,
    ydesc: &str,
) -> Result<()> {
    if !text {
        return frame(root, chart.plotting_area());
    }
    chart
        .configure_mesh()
        .x_desc(xdesc)
        .y_desc(ydesc)
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .label_style(font(14.0))
        .axis_desc_style(font(16.0))
        .light_line_style(GRID)
        .max_light_lines(4)
        .draw()
        .map_err(pe)?;
    Ok(())
}

/// Without text there are no axes (plotters draws tick labels with them):
/// a frame round the plotting area instead.
pub fn frame<DB: DrawingBackend, CT: CoordTranslate>(
    root: &DrawingArea<DB, Shift>,
    plot: &DrawingArea<DB, CT>,
) -> Result<()> {
    let (x, y) = plot.get_pixel_range();
    root.draw(&Rectangle::new(
        [(x.start, y.start), (x.end - 1, y.end - 1)],
        BLACK.stroke_width(1),
    ))
    .map_err(pe)?;
    Ok(())
}

/// Axis tick labels: compact numbers.
pub fn tick(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else {
        let s = if a >= 10.0 {
            format!("{v:.1}")
        } else if a >= 1.0 {
            format!("{v:.2}")
        } else if a >= 0.01 {
            format!("{v:.3}")
        } else {
            return format!("{v:.1e}");
        };
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

pub fn draw_cdf<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    cdfs: &[&Cdf],
    title: &str,
    legend_title: &str,
    text: bool,
) -> Result<()> {
    let labels: Vec<String> = cdfs.iter().map(|c| clip(&c.label, 40)).collect();
    let (area, legend) = with_legend(root, &labels, text)?;
    // Latencies in µs.
    let lo = cdfs
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.0))
        .fold(f64::INFINITY, f64::min)
        / 1e3;
    let hi = cdfs
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.0))
        .fold(0.0, f64::max)
        / 1e3;
    let pos_lo = cdfs
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.0))
        .filter(|&v| v > 0.0)
        .fold(f64::INFINITY, f64::min)
        / 1e3;
    let log = pos_lo.is_finite() && hi / pos_lo > 100.0;
    let mut b = ChartBuilder::on(&area);
    b.margin(12);
    if text {
        b.caption(format!("Latency CDF — {title}"), font(22.0))
            .x_label_area_size(48)
            .y_label_area_size(60);
    } else {
        b.x_label_area_size(8).y_label_area_size(8);
    }
    let xdesc = if log {
        "latency (µs, log scale)"
    } else {
        "latency (µs)"
    };
    macro_rules! body {
        ($chart:ident) => {{
            if text {
                $chart
                    .configure_mesh()
                    .x_desc(xdesc)
                    .y_desc("fraction of samples ≤ latency")
                    .x_label_formatter(&|v| tick(*v))
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
            for (i, c) in cdfs.iter().enumerate() {
                let pts: Vec<(f64, f64)> = c
                    .points
                    .iter()
                    .map(|&(v, p)| ((v / 1e3).max(if log { pos_lo } else { 0.0 }), p))
                    .collect();
                let pts = distinct_pixels(pts, |q| $chart.backend_coord(q));
                $chart
                    .draw_series(LineSeries::new(pts, color(i).stroke_width(2)))
                    .map_err(pe)?;
            }
        }};
    }
    if log {
        let x = (pos_lo / 1.3)..(hi * 1.3);
        let mut chart = b.build_cartesian_2d(x.log_scale(), 0.0..1.02).map_err(pe)?;
        body!(chart);
    } else {
        let span = (hi - lo).max(hi * 0.05).max(1e-3);
        let x = (lo - span * 0.05).max(0.0)..(hi + span * 0.05);
        let mut chart = b.build_cartesian_2d(x, 0.0..1.02).map_err(pe)?;
        body!(chart);
    }
    if let Some(l) = legend {
        let entries: Vec<(String, RGBColor)> = labels
            .into_iter()
            .enumerate()
            .map(|(i, s)| (s, color(i)))
            .collect();
        draw_legend(&l, &entries, false, legend_title)?;
    }
    Ok(())
}

/// A time unit for an axis spanning `ns`: (name, ns per unit).
pub fn time_unit(ns: u64) -> (&'static str, f64) {
    if ns <= 2_000 {
        ("ns", 1.0)
    } else if ns <= 2_000_000 {
        ("µs", 1e3)
    } else if ns <= 2_000_000_000 {
        ("ms", 1e6)
    } else {
        ("s", 1e9)
    }
}

/// A bar chart's axes (see [`bar_axes`]).
pub struct BarAxes<'a, DB: DrawingBackend> {
    pub chart: ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    /// One group's width, pixels.
    pub slot: f64,
    /// Whether the group labels take two staggered rows.
    pub two_rows: bool,
}

/// The axes of a bar chart on `area`: groups at x = 0, 1, … (their labels
/// drawn by [`draw_group_labels`] below the axis, in two staggered rows
/// when crowded), 0..`ytop` up; only a frame when not `text`.
pub fn bar_axes<'a, DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    area: &'a DrawingArea<DB, Shift>,
    title: &str,
    ylabel: &str,
    groups: &[String],
    ytop: f64,
    text: bool,
) -> Result<BarAxes<'a, DB>> {
    let n = groups.len().max(1);
    let plot_w = area.dim_in_pixel().0 as f64 - 100.0;
    let slot = plot_w / n as f64;
    let two_rows = text
        && groups
            .iter()
            .any(|g| g.chars().count() as f64 * 7.5 > slot - 6.0);
    let mut b = ChartBuilder::on(area);
    b.margin(12);
    if text {
        b.caption(title, font(20.0))
            .x_label_area_size(if two_rows { 52 } else { 34 })
            .y_label_area_size(72);
    } else {
        b.x_label_area_size(8).y_label_area_size(8);
    }
    let mut chart = b
        .build_cartesian_2d(-0.5..(n as f64 - 0.5), 0.0..ytop)
        .map_err(pe)?;
    if text {
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc(ylabel)
            .y_label_formatter(&|v| tick(*v))
            .label_style(font(14.0))
            .axis_desc_style(font(16.0))
            .light_line_style(GRID)
            .max_light_lines(4)
            .draw()
            .map_err(pe)?;
    } else {
        frame(root, chart.plotting_area())?;
    }
    Ok(BarAxes {
        chart,
        slot,
        two_rows,
    })
}

/// The group labels of [`bar_axes`], clipped to their slot.
pub fn draw_group_labels<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    groups: &[String],
    slot: f64,
    two_rows: bool,
) -> Result<()> {
    let (_, py) = chart.plotting_area().get_pixel_range();
    let max_chars = ((if two_rows { 2.0 } else { 1.0 }) * slot / 7.5) as usize;
    for (g, name) in groups.iter().enumerate() {
        let (bx, _) = chart.backend_coord(&(g as f64, 0.0));
        let row = if two_rows { (g % 2) as i32 } else { 0 };
        root.draw_text(
            &clip(name, max_chars.max(4)),
            &font(14.0).pos(Pos::new(HPos::Center, VPos::Top)),
            (bx, py.end + 6 + row * 18),
        )
        .map_err(pe)?;
    }
    Ok(())
}
