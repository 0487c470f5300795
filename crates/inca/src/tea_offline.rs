//! `inca tea-offline {e10,e11,e12}`: the TEA experiments that need no
//! simulation (spec tea.md §8.2), computed by `inca_tea::table::offline` and
//! written as a CSV plus a plot into `--out` (default `out/tea-offline`).
//!
//! - E10: bounded linear probing (C = 2) vs 2-way cuckoo at equal cells,
//!   load 0.50…0.95: stash fraction and DRAM reads per lookup;
//! - E11: range rules TEA installs vs a consistent-hashing ring, N = 1…32;
//! - E12: the cost calculator over the four regimes; the per-server lookup
//!   capacity (`--capacity`, lookups/s) is an input measured in E4
//!   (experiments/tea/e4-scaling.toml), never assumed here.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use clap::ValueEnum;
use inca_tea::table::offline;

use inca_report::figures::{bar_plot, line_plot};
use inca_report::plot::{parse_formats, Format};

/// Which offline experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Experiment {
    /// BLP vs cuckoo: stash fraction and DRAM reads per lookup vs load.
    E10,
    /// Range rules vs consistent hashing, 1…32 servers.
    E11,
    /// Cost calculator (needs --capacity from E4).
    E12,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The experiment.
    pub experiment: Experiment,
    /// Per-server DRAM lookups/s (E12 only).
    pub capacity: Option<f64>,
    /// Output folder.
    pub out: Option<PathBuf>,
    /// A smaller table (E10: 2^12 buckets instead of 2^16) for smoke tests.
    pub quick: bool,
    /// `--format` values.
    pub formats: Vec<String>,
}

/// [our choice] E10 table: 2^16 buckets × 2 cells (128 Ki cells), big enough
/// that the stash fraction at high load is well above sampling noise.
const E10_LOG2_BUCKETS: u32 = 16;
const E10_QUICK_LOG2_BUCKETS: u32 = 12;
/// [our choice] E11: 100 virtual nodes per server (the sources' 100N − 1)
/// over 2^20 buckets.
const E11_VNODES: u32 = 100;
const E11_LOG2_BUCKETS: u32 = 20;
const E11_MAX_SERVERS: u32 = 32;
/// Seed of the E10 key stream.
const E10_SEED: u64 = 1;

/// Runs one experiment; returns the files written.
pub fn run(o: &Options) -> Result<Vec<PathBuf>> {
    let formats = parse_formats(&o.formats)?;
    let dir = o
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("out/tea-offline"));
    std::fs::create_dir_all(&dir).with_context(|| format!("{}", dir.display()))?;
    match o.experiment {
        Experiment::E10 => e10(&dir, &formats, o.quick),
        Experiment::E11 => e11(&dir, &formats),
        Experiment::E12 => {
            let Some(cap) = o.capacity else {
                bail!(
                    "e12 needs --capacity LOOKUPS_PER_S: the per-server DRAM lookup capacity \
                     measured in E4 (experiments/tea/e4-scaling.toml, docs/experiments.md)"
                );
            };
            if !(cap.is_finite() && cap > 0.0) {
                bail!("--capacity must be a positive number of lookups/s, not {cap}");
            }
            e12(&dir, &formats, cap)
        }
    }
}

fn write(path: &Path, text: &str) -> Result<PathBuf> {
    std::fs::write(path, text).with_context(|| format!("{}", path.display()))?;
    Ok(path.to_path_buf())
}

fn e10(dir: &Path, formats: &[Format], quick: bool) -> Result<Vec<PathBuf>> {
    let log2 = if quick {
        E10_QUICK_LOG2_BUCKETS
    } else {
        E10_LOG2_BUCKETS
    };
    let rows = offline::e10(log2, &offline::e10_loads(), E10_SEED).map_err(|e| anyhow!(e))?;
    let mut csv = String::from(
        "scheme,load,entries,cells,stash_entries,stash_fraction,mean_dram_reads,max_dram_reads,displacements_per_insert\n",
    );
    for r in &rows {
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{},{},{},{}",
            r.scheme,
            r.load,
            r.entries,
            r.cells,
            r.stash_entries,
            r.stash_fraction,
            r.mean_dram_reads,
            r.max_dram_reads,
            r.displacements_per_insert
        );
    }
    let mut out = vec![write(&dir.join("e10.csv"), &csv)?];
    let schemes = {
        let mut s: Vec<&str> = rows.iter().map(|r| r.scheme).collect();
        s.dedup();
        s
    };
    let line = |f: &dyn Fn(&offline::E10Row) -> f64, suffix: &str| {
        schemes
            .iter()
            .map(|s| {
                (
                    format!("{s}{suffix}"),
                    rows.iter()
                        .filter(|r| r.scheme == *s)
                        .map(|r| (r.load, f(r)))
                        .collect(),
                )
            })
            .collect::<Vec<_>>()
    };
    out.extend(line_plot(
        &dir.join("e10_stash"),
        formats,
        &format!("E10: stash fraction vs load (2^{log2} buckets x 2 cells)"),
        "load (entries / cells)",
        "fraction of entries in the stash",
        line(&|r| r.stash_fraction, ""),
        false,
    )?);
    let mut reads = line(&|r| r.mean_dram_reads, " mean");
    reads.extend(line(&|r| f64::from(r.max_dram_reads), " max"));
    out.extend(line_plot(
        &dir.join("e10_reads"),
        formats,
        "E10: DRAM reads per lookup vs load",
        "load (entries / cells)",
        "DRAM reads per lookup",
        reads,
        false,
    )?);
    for r in &rows {
        println!(
            "{:8} load {:.2}: stash {:.5} ({} entries), reads mean {:.3} max {}",
            r.scheme,
            r.load,
            r.stash_fraction,
            r.stash_entries,
            r.mean_dram_reads,
            r.max_dram_reads
        );
    }
    Ok(out)
}

fn e11(dir: &Path, formats: &[Format]) -> Result<Vec<PathBuf>> {
    let rows =
        offline::e11(E11_MAX_SERVERS, E11_VNODES, E11_LOG2_BUCKETS).map_err(|e| anyhow!(e))?;
    let mut csv =
        String::from("servers,tea_range_rules,ch_vnode_rules,ch_server_rules,paper_ch_rules\n");
    for r in &rows {
        let _ = writeln!(
            csv,
            "{},{},{},{},{}",
            r.servers, r.tea_range_rules, r.ch_vnode_rules, r.ch_server_rules, r.paper_ch_rules
        );
    }
    let mut out = vec![write(&dir.join("e11.csv"), &csv)?];
    let pts = |f: &dyn Fn(&offline::E11Row) -> u32| -> Vec<(f64, f64)> {
        rows.iter()
            .map(|r| (f64::from(r.servers), f64::from(f(r))))
            .collect()
    };
    out.extend(line_plot(
        &dir.join("e11"),
        formats,
        &format!("E11: range rules vs servers ({E11_VNODES} virtual nodes per server)"),
        "servers N",
        "range rules",
        vec![
            ("TEA ranges".into(), pts(&|r| r.tea_range_rules)),
            ("ring, per vnode".into(), pts(&|r| r.ch_vnode_rules)),
            (
                "ring, merged per server".into(),
                pts(&|r| r.ch_server_rules),
            ),
            ("100N - 1 (sources)".into(), pts(&|r| r.paper_ch_rules)),
        ],
        true,
    )?);
    for r in &rows {
        println!(
            "N={:2}: TEA {:3} rules, ring {:5} (vnode) {:5} (merged), 100N-1 = {}",
            r.servers, r.tea_range_rules, r.ch_vnode_rules, r.ch_server_rules, r.paper_ch_rules
        );
    }
    Ok(out)
}

fn e12(dir: &Path, formats: &[Format], capacity: f64) -> Result<Vec<PathBuf>> {
    let rows = offline::e12(&offline::E12Inputs::new(capacity));
    let mut csv = String::from(
        "regime,option,feasible,units,servers,price_usd,power_w,extra_sram_usd_low,extra_sram_usd_high,cheapest\n",
    );
    for r in &rows {
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{},{},{},{},{}",
            r.regime,
            r.option,
            r.feasible,
            r.units,
            r.servers,
            r.price_usd,
            r.power_w,
            r.extra_sram_usd_low,
            r.extra_sram_usd_high,
            r.cheapest
        );
    }
    let mut out = vec![write(&dir.join("e12.csv"), &csv)?];
    // One bar per feasible (regime, option): its price in k$. Infeasible
    // options have no bar (the CSV says why).
    let feasible: Vec<&offline::E12Row> = rows.iter().filter(|r| r.feasible).collect();
    out.extend(bar_plot(
        &dir.join("e12"),
        formats,
        &format!("E12: price per regime and option (TEA server capacity {capacity:.3e} lookups/s)"),
        "price (k$)",
        feasible
            .iter()
            .map(|r| {
                format!(
                    "{} {}{}",
                    r.regime,
                    r.option,
                    if r.cheapest { " *" } else { "" }
                )
            })
            .collect(),
        vec!["price (k$)".into()],
        feasible.iter().map(|r| vec![r.price_usd / 1e3]).collect(),
    )?);
    for r in &rows {
        println!(
            "{:28} {:22} {}",
            r.regime,
            r.option,
            if r.feasible {
                format!(
                    "{} units (+{} servers), ${:.0}, {:.0} W{}",
                    r.units,
                    r.servers,
                    r.price_usd,
                    r.power_w,
                    if r.cheapest { "  <- cheapest" } else { "" }
                )
            } else {
                "infeasible".to_string()
            }
        );
    }
    Ok(out)
}
