//! ExoPlane experiments of spec §8 that need no full-scenario simulation,
//! each writing CSVs and plots (PNG and SVG) into a folder; `inca exoplane
//! --experiment e2|e11 [--quick] --out DIR` runs them.
//!
//! - [`e2`] — union-key skew per epoch of the backbone-like trace (Thesis
//!   Fig. 4.6);
//! - [`e9`] — the distance between a synchronised counter's switch and
//!   NIC copies after each merge (Thesis Fig. 4.17), in the simulator
//!   (experiments/exoplane/sync.toml stepped round by round);
//! - [`e11`] — hub memory, sync bandwidth and switch resources at 10,240
//!   FM entries and around it (Thesis §4.6.5), on a real hub and daemons
//!   driven by [`rig`].

pub mod e11;
pub mod e2;
pub mod e9;
pub mod rig;

use std::path::Path;

use inca_report::figures::line_plot;

/// Runs E2 (`quick`: the short run) into `out`; returns the summary lines.
pub fn run_e2(out: &Path, quick: bool) -> anyhow::Result<Vec<String>> {
    std::fs::create_dir_all(out)?;
    let formats = inca_report::plot::parse_formats(&[])?;
    let cfg = if quick {
        e2::E2Config::quick()
    } else {
        e2::E2Config::full()
    };
    let cdfs = e2::run(&cfg)?;
    std::fs::write(out.join("e2.csv"), e2::csv(&cdfs))?;
    for (scenario, bytes, file) in [
        ("leaf", false, "e2_leaf_packets"),
        ("leaf", true, "e2_leaf_bytes"),
        ("front-end", false, "e2_front_end_packets"),
        ("front-end", true, "e2_front_end_bytes"),
    ] {
        let lines = cdfs
            .iter()
            .filter(|c| c.scenario == scenario)
            .map(|c| {
                let share = if bytes {
                    &c.byte_share
                } else {
                    &c.packet_share
                };
                (
                    format!("epoch {}", c.epoch),
                    e2::GRID
                        .iter()
                        .zip(share)
                        .map(|(x, y)| (x.log10(), *y))
                        .collect(),
                )
            })
            .collect();
        line_plot(
            &out.join(file),
            &formats,
            &format!(
                "E2: {scenario} union keys, share of {}",
                if bytes { "bytes" } else { "packets" }
            ),
            "log10 fraction of keys (ranked)",
            "fraction of traffic",
            lines,
            false,
        )?;
    }
    let mut lines: Vec<String> = cdfs
        .iter()
        .map(|c| {
            format!(
                "E2 {} epoch {}: {} keys, {} packets; top 1 % of keys {:.3} of packets, {:.3} of bytes",
                c.scenario,
                c.epoch,
                c.keys,
                c.packets,
                e2::share(c, 0.01, false),
                e2::share(c, 0.01, true)
            )
        })
        .collect();
    for s in e2::summarise(&cdfs) {
        lines.push(format!(
            "E2 {}: top 1 % {:.3} of packets ({:.3} of bytes), top 10 % {:.3}; largest distance between epochs {:.4}; top-1 % sets of consecutive epochs overlap ≥ {:.3}",
            s.scenario, s.top1_packets, s.top1_bytes, s.top10_packets, s.max_distance, s.min_top1_overlap
        ));
    }
    Ok(lines)
}

/// Runs E9 (`quick`: 5 s of traffic) into `out`; returns the summary lines.
pub fn run_e9(out: &Path, quick: bool) -> anyhow::Result<Vec<String>> {
    std::fs::create_dir_all(out)?;
    let formats = inca_report::plot::parse_formats(&[])?;
    let cfg = if quick {
        e9::E9Config::quick()
    } else {
        e9::E9Config::full()
    };
    let points = e9::run(&cfg)?;
    std::fs::write(out.join("e9.csv"), e9::csv(&points))?;
    let summary = e9::summarise(&points);
    let lines = summary
        .iter()
        .map(|&(tail, _, _)| {
            (
                format!("tail {tail} %"),
                points
                    .iter()
                    .filter(|p| p.tail_pct == tail)
                    .map(|p| (p.at_s, p.distance))
                    .collect(),
            )
        })
        .collect();
    line_plot(
        &out.join("e9"),
        &formats,
        "E9: |switch copy − NIC copy| 200 ms after each merge (median over the synchronised cells)",
        "time (s)",
        "packets",
        lines,
        false,
    )?;
    Ok(summary
        .iter()
        .map(|(tail, median, after)| {
            format!(
                "E9 tail {tail} %: median distance while traffic runs {median} packets; largest distance 2 s after it stops {after}"
            )
        })
        .collect())
}

/// Runs E11 into `out`; returns the summary lines.
pub fn run_e11(out: &Path, quick: bool) -> anyhow::Result<Vec<String>> {
    use e11::{Scenario, Sweeps};
    std::fs::create_dir_all(out)?;
    let formats = inca_report::plot::parse_formats(&[])?;
    let sweeps = if quick {
        Sweeps::quick()
    } else {
        Sweeps::full()
    };
    let points = e11::run(&sweeps, 11)?;
    std::fs::write(out.join("e11.csv"), e11::csv(&points))?;
    let top = sweeps
        .entries
        .iter()
        .copied()
        .max()
        .unwrap_or(e11::FM_ENTRIES);
    let at_top: Vec<&e11::E11Point> = points
        .iter()
        .filter(|p| p.entries == top && p.devices == 4 && p.t_c == 1.0)
        .collect();
    std::fs::write(
        out.join("e11_objects.csv"),
        e11::objects_csv(&at_top, &e11::name_of),
    )?;
    let mut shares = Vec::new();
    for s in Scenario::ALL {
        for fm in e11::switch_sizes(&sweeps) {
            shares.push(e11::switch_share(s, fm)?);
        }
    }
    std::fs::write(out.join("e11_switch.csv"), e11::switch_csv(&shares))?;
    // Plots: hub memory vs entries; sync bandwidth vs entries, devices,
    // T_c; switch share vs FM entries.
    let series = |f: &dyn Fn(&e11::E11Point) -> Option<(f64, f64)>| {
        Scenario::ALL
            .iter()
            .map(|s| {
                let mut pts: Vec<(f64, f64)> = points
                    .iter()
                    .filter(|p| p.scenario == s.name())
                    .filter_map(f)
                    .collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                (s.name().to_string(), pts)
            })
            .collect::<Vec<_>>()
    };
    let on_entries = |p: &e11::E11Point| p.devices == 4 && p.t_c == 1.0;
    line_plot(
        &out.join("e11_hub_memory"),
        &formats,
        "E11: hub memory (4 devices)",
        "FM entries",
        "KiB",
        series(&|p| on_entries(p).then(|| (p.entries as f64, p.overhead.total() as f64 / 1024.0))),
        false,
    )?;
    line_plot(
        &out.join("e11_sync_entries"),
        &formats,
        "E11: sync bandwidth vs FM entries (4 devices, T_c 1 s)",
        "FM entries",
        "kbit/s",
        series(&|p| on_entries(p).then(|| (p.entries as f64, p.bandwidth_bps() / 1e3))),
        false,
    )?;
    line_plot(
        &out.join("e11_sync_devices"),
        &formats,
        &format!("E11: sync bandwidth vs devices ({top} entries, T_c 1 s)"),
        "devices",
        "kbit/s",
        series(&|p| {
            (p.entries == top && p.t_c == 1.0)
                .then(|| (f64::from(p.devices), p.bandwidth_bps() / 1e3))
        }),
        false,
    )?;
    line_plot(
        &out.join("e11_sync_tc"),
        &formats,
        &format!("E11: sync bandwidth vs T_c ({top} entries, 4 devices)"),
        "T_c (s)",
        "kbit/s",
        series(&|p| (p.entries == top && p.devices == 4).then(|| (p.t_c, p.bandwidth_bps() / 1e3))),
        false,
    )?;
    let switch_lines = e11::RESOURCES
        .iter()
        .map(|r| {
            let pts = shares
                .iter()
                .filter(|s| s.scenario == "leaf")
                .filter_map(|s| {
                    let (_, used, _, total) = s.resources.iter().find(|x| x.0 == r.name())?;
                    Some((s.fm as f64, 100.0 * *used as f64 / (*total).max(1) as f64))
                })
                .collect();
            (r.name().to_string(), pts)
        })
        .collect();
    line_plot(
        &out.join("e11_switch"),
        &formats,
        "E11: runtime's share of the switch (leaf)",
        "FM entries",
        "% of switch",
        switch_lines,
        false,
    )?;
    let mut lines = Vec::new();
    for p in &points {
        lines.push(format!(
            "E11 {} entries {} devices {} T_c {} s: hub {} B (flows {}, entries {}, device map {}, H {}); sync {:.0} B/round/device (formula {:.0}), {:.1} kbit/s",
            p.scenario, p.entries, p.devices, p.t_c, p.overhead.total(), p.overhead.flow_bytes(),
            p.overhead.entry_bytes(), p.overhead.device_map_bytes(), p.overhead.h_bytes(),
            p.bytes_per_round_per_device(), p.formula_per_round_per_device(), p.bandwidth_bps() / 1e3
        ));
    }
    for s in &shares {
        let parts: Vec<String> = s
            .resources
            .iter()
            .map(|(n, u, _, t)| format!("{n} {:.1} %", 100.0 * *u as f64 / (*t).max(1) as f64))
            .collect();
        lines.push(format!(
            "E11 switch {} fm {}: {}",
            s.scenario,
            s.fm,
            parts.join(", ")
        ));
    }
    Ok(lines)
}
