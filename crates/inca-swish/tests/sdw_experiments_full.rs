//! The full grids of spec §8.2 experiments 6 and 10 (the figures in
//! docs/experiments.md), printed as tables. Slow: run in release,
//! `cargo test --release -p inca-swish --test sdw_experiments_full --
//! --ignored --nocapture`. The quick shapes are asserted by
//! crates/inca/tests/swish_experiments.rs and the unit tests.

use inca_swish::experiments::{default_rows, sdw_full_load, sdw_recovery};
use inca_swish::sdw::recovery::T_DETECT;
use inca_swish::sdw::rig::percentile;

#[test]
#[ignore]
fn e10_recovery_full_grid() {
    let seeds = |cols: u32| if cols >= 65_536 { 3 } else { 20 };
    println!("| f | C | seeds | recovery p50 (ms) | min | max | controller (ms) | restart (us) |");
    for f in 1..=3 {
        for cols in [64u32, 4_096, 65_536] {
            let mut tot = Vec::new();
            let (mut ctl, mut rst) = (Vec::new(), Vec::new());
            for seed in 1..=seeds(cols) {
                let (_, m) =
                    sdw_recovery::measure(default_rows(cols), cols, f, T_DETECT, seed).unwrap();
                tot.push(m.total);
                ctl.push(m.controller);
                rst.push(m.restart);
            }
            tot.sort_unstable();
            ctl.sort_unstable();
            rst.sort_unstable();
            println!(
                "| {f} | {cols} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.1} |",
                tot.len(),
                percentile(&tot, 50.0) as f64 / 1e6,
                tot[0] as f64 / 1e6,
                tot[tot.len() - 1] as f64 / 1e6,
                percentile(&ctl, 50.0) as f64 / 1e6,
                percentile(&rst, 50.0) as f64 / 1e3,
            );
        }
    }
}

#[test]
#[ignore]
fn e6_full_load_grid() {
    println!("| C | load | advances | p50 (us) | p99 (us) | max (us) | frames | snake port Gb/s per direction |");
    for cols in [1u32, 65_536] {
        for load in [0u64, 100] {
            let d = 3_000_000;
            let (_, m) =
                sdw_full_load::measure(default_rows(cols), cols, load, 13, 130, d, 1).unwrap();
            let i = &m.intervals;
            println!(
                "| {cols} | {load} | {} | {:.3} | {:.3} | {:.3} | {} | {:.1} |",
                i.len(),
                percentile(i, 50.0) as f64 / 1e3,
                percentile(i, 99.0) as f64 / 1e3,
                i.last().copied().unwrap_or(0) as f64 / 1e3,
                m.frames,
                m.snake_bytes as f64 * 8.0 / 2.0 / d as f64,
            );
        }
    }
}
