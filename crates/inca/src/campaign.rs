//! `inca campaign`: the progress bar and the printed outcome around the
//! campaign runner of `inca_system::campaign` (which runs the seeds and
//! checks them through the registered systems).
//!
//! A failing seed is printed with its fault schedule (what link, which
//! values, which groups) and what the checks said, and how to reproduce
//! it: `inca run SCENARIO --seed N` for a scenario, `inca campaign NAME
//! --first-seed N --seeds 1` for a built-in campaign. The summary tallies
//! the faults by kind, with the seeds that had each kind and how many of
//! those failed, and what the checks judged (flows, operations, verdicts
//! by checker); a campaign that judged nothing fails.

use std::path::Path;

use inca_switch::units::format_time;
use inca_system::campaign::{Campaign, CampaignSummary};

/// Runs seeds `first..first + count` of `scenario` (a file or a built-in
/// campaign) on `jobs` threads; returns the summary and whether it was a
/// built-in campaign.
pub fn run(
    scenario: &Path,
    set: &[String],
    first: u64,
    count: u64,
    jobs: usize,
    quiet: bool,
) -> anyhow::Result<(CampaignSummary, bool)> {
    let campaign = Campaign::open(inca::registry(), scenario, set, first)?;
    let bar = if quiet {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(count)
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} seeds, {elapsed}")?
            .progress_chars("=> "),
    );
    bar.set_message(campaign.name());
    let summary = campaign.run(first, count, jobs, &|r| {
        if !r.violations.is_empty() {
            bar.println(format!("seed {} FAILED", r.seed));
        }
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    Ok((summary, campaign.is_builtin()))
}

/// Prints a campaign's outcome: one line, then each failing seed with its
/// fault schedule, what failed, and how to reproduce it.
pub fn print(summary: &CampaignSummary, scenario: &Path, builtin: bool) {
    println!(
        "{}: {} seeds, {} faults injected, {} events, {:.1} s wall: {}",
        summary.scenario,
        summary.seeds,
        summary.faults,
        summary.events,
        summary.wall_seconds,
        if summary.failed > 0 {
            format!("{} seeds FAILED", summary.failed)
        } else if !summary.judged_anything() {
            "NOTHING JUDGED (no check looked at anything: a failure)".to_string()
        } else {
            "no violations".to_string()
        }
    );
    for (what, n) in &summary.judged {
        println!("  judged: {what}: {n}");
    }
    for (kind, t) in &summary.by_kind {
        println!(
            "  {kind:>9}: {} faults in {} seeds, {} of those seeds failed",
            t.faults, t.seeds, t.failed
        );
    }
    for f in &summary.failures {
        println!("seed {}:", f.seed);
        println!("  fault schedule:");
        for (t, what) in &f.faults {
            println!("    {:>10}  {what}", format_time(*t));
        }
        println!("  violations:");
        for v in &f.violations {
            for line in v.lines() {
                println!("    {line}");
            }
        }
        if builtin {
            println!(
                "  reproduce: inca campaign {} --first-seed {} --seeds 1",
                scenario.display(),
                f.seed
            );
        } else {
            println!(
                "  reproduce: inca run {} --seed {}",
                scenario.display(),
                f.seed
            );
        }
    }
}
