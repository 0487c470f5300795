//! `inca run`: a scenario in the simulator, with a progress bar, a printed
//! summary and a results folder.

use std::path::{Path, PathBuf};

use anyhow::Context;
use inca_sim::scenario::{default_out_dir, Loaded};
use inca_switch::units::{format_bytes, format_time};

/// Runs `scenario`; prints the summary; writes results into `out` (default
/// `out/<scenario>`).
pub fn run(
    scenario: &Path,
    seed: Option<u64>,
    out: Option<PathBuf>,
    set: &[String],
    quiet: bool,
) -> anyhow::Result<()> {
    let loaded = Loaded::from_file(scenario, set)?;
    let out = out.unwrap_or_else(|| default_out_dir(scenario));
    let built = loaded.build(&inca::factory(), seed, Some(&out))?;
    let name = loaded.scenario.name.clone();
    let duration = built.duration;
    let bar = if quiet {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(duration.max(1))
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} {msg} [{bar:40}] {percent}% simulated, {elapsed} wall",
        )
        .context("progress bar template")?
        .progress_chars("=> "),
    );
    bar.set_message(name.clone());
    let result = inca_sim::run::run(built, &name, Some(&out), |t| {
        bar.set_position(t.min(duration))
    })?;
    bar.finish_and_clear();
    let s = &result.summary;
    println!(
        "{} (seed {}): {} simulated in {:.2} s",
        s.scenario,
        s.seed,
        format_time(s.duration_ns),
        s.wall_seconds
    );
    if !loaded.scenario.description.is_empty() {
        println!("{}", loaded.scenario.description.trim());
    }
    println!(
        "{} events ({:.1} M events/s), {} frames delivered",
        s.events,
        s.events as f64 / s.wall_seconds.max(1e-9) / 1e6,
        s.frames_delivered
    );
    for line in &s.highlights {
        println!("  {line}");
    }
    let devices: Vec<String> = result
        .nodes
        .iter()
        .filter_map(|(name, kind, r)| inca_sim::run::device_line(name, kind, r))
        .collect();
    if !devices.is_empty() {
        println!("programmable devices (packets in/out per port, table entries/capacity):");
        for d in devices {
            println!("  {d}");
        }
    }
    let mut dropped = Vec::new();
    for l in &result.links {
        let st = &l.stats;
        let lost = st.lost + st.queue_drops + st.down_drops;
        if lost > 0 {
            dropped.push(format!(
                "{} → {}: {} of {} frames lost ({} queue, {} loss, {} link down)",
                l.from, l.to, lost, st.offered, st.queue_drops, st.lost, st.down_drops
            ));
        }
    }
    if !dropped.is_empty() {
        println!("links that lost frames:");
        for d in dropped {
            println!("  {d}");
        }
    }
    let delivered: u64 = result.links.iter().map(|l| l.stats.delivered_bytes).sum();
    println!("{} delivered over all links", format_bytes(delivered));
    println!("results in {}", out.display());
    Ok(())
}
