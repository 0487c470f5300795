//! Line and stacked-bar figures for commands that compute their own rows
//! (`inca tea-offline`), drawn with the sweep plots' look.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::plot::{init_fonts, Format, H, MAX_CURVES, W};
use crate::render;
use crate::sweep::plots::{draw_stacks, draw_xy, Stacks, XyLine, XyPlot};

/// Draws a line plot (one `(label, points)` per line) to `base.{png,svg}`
/// with the sweep plots' look. For commands that compute their own rows.
pub fn line_plot(
    base: &Path,
    formats: &[Format],
    title: &str,
    xlabel: &str,
    ylabel: &str,
    lines: Vec<(String, Vec<(f64, f64)>)>,
    log_y: bool,
) -> Result<Vec<PathBuf>> {
    let plot = XyPlot {
        title: title.to_string(),
        xlabel: xlabel.to_string(),
        ylabel: ylabel.to_string(),
        lines: lines
            .into_iter()
            .take(MAX_CURVES)
            .map(|(label, points)| XyLine { label, points })
            .collect(),
        categories: None,
        log_x: false,
        log_y,
        legend_title: String::new(),
    };
    let text = init_fonts();
    Ok(render!(base, formats, (W, H), draw_xy(&plot, text)))
}

/// Draws stacked bars (`values[group][segment]`) to `base.{png,svg}`.
pub fn bar_plot(
    base: &Path,
    formats: &[Format],
    title: &str,
    ylabel: &str,
    groups: Vec<String>,
    segments: Vec<String>,
    values: Vec<Vec<f64>>,
) -> Result<Vec<PathBuf>> {
    let s = Stacks {
        title: title.to_string(),
        ylabel: ylabel.to_string(),
        groups,
        segments,
        values,
    };
    let text = init_fonts();
    Ok(render!(base, formats, (W, H), draw_stacks(&s, text)))
}
