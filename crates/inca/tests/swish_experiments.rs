//! SwiSh's simulated experiments (experiments/swish/, spec §8.2): each sweep
//! descriptor runs with `--quick`, writes its plots, and shows the shape the
//! spec expects, measured from the plots' data:
//! - E1: reading a 3 x 64K sketch by a data-plane generator walk is at least
//!   two orders of magnitude faster than through the control plane; the
//!   control-plane read grows linearly in the columns, the walk is flat
//!   while one operation's overhead dominates.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "common/sweep.rs"]
mod sweep_quick;

/// Runs experiments/swish/`descriptor` with `--quick`; its folder.
fn sweep(descriptor: &str) -> PathBuf {
    sweep_quick::quick("swish", descriptor)
}

/// `(line, x) → y` from a metric-vs-parameter CSV (`config,...,y,seeds,x`;
/// the line is the column named `line`).
fn points(csv: &Path, line: &str) -> Vec<(String, f64, f64)> {
    let body = std::fs::read_to_string(csv).unwrap();
    let mut lines = body.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (l, x, y) = (col(line), col("x"), col("y"));
    lines
        .map(|r| {
            let f: Vec<&str> = r.split(',').collect();
            (
                f[l].to_string(),
                f[x].parse().unwrap(),
                f[y].parse().unwrap(),
            )
        })
        .collect()
}

fn at(points: &[(String, f64, f64)], line: &str, x: f64) -> f64 {
    points
        .iter()
        .find(|(l, px, _)| l == line && *px == x)
        .map(|p| p.2)
        .unwrap_or_else(|| panic!("no point {line} at {x}: {points:?}"))
}

#[test]
fn e1_the_data_plane_walk_reads_a_sketch_orders_of_magnitude_faster() {
    let out = sweep("e1-cp-vs-dp-read.toml");
    let p = points(&out.join("plots/readout.csv"), "mode");
    println!("{p:?}");
    let (cp, dp) = (at(&p, "cp", 65536.0), at(&p, "dp", 65536.0));
    assert!(dp * 100.0 < cp, "64K columns: dp {dp} us, cp {cp} us");
    // Linear in C: 16x the columns, 16x the time (within 10 %).
    let ratio = cp / at(&p, "cp", 4096.0);
    assert!((14.4..17.6).contains(&ratio), "cp 64K/4K = {ratio}");
    // The walk: flat while the operation overhead dominates.
    assert!(at(&p, "dp", 64.0) < 1.1 * at(&p, "dp", 1.0), "{p:?}");
}

/// A percentile-table CSV's `column` for configuration `config`
/// (`config,...,count,p50_us,...`).
fn sro_percentile(csv: &Path, config: &str, column: &str) -> f64 {
    let body = std::fs::read_to_string(csv).unwrap();
    let mut lines = body.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == column).unwrap();
    lines
        .map(|r| r.split(',').collect::<Vec<_>>())
        .find(|f| f[0] == config)
        .map(|f| f[col].parse().unwrap())
        .unwrap_or_else(|| panic!("no {config} in {}", csv.display()))
}

#[test]
fn e2_nat_reads_keep_their_latency_and_updates_pay_for_the_tail() {
    // Seed 1, 10,000 packets (quick = full: ~2 s in a debug build).
    let out = sweep("e2-nat-latency.toml");
    let read = out.join("plots/read_percentiles.csv");
    let update = out.join("plots/update_percentiles.csv");
    let (r1, r2) = (
        sro_percentile(&read, "single", "p50_us"),
        sro_percentile(&read, "sro-2", "p50_us"),
    );
    assert!((r1 - r2).abs() < 1.0, "read p50 {r1} vs {r2} us");
    // A read never waits for a CPU (20 us a punt): a lookup and a rewrite.
    for c in ["single", "sro-2"] {
        assert!(sro_percentile(&read, c, "p99_us") < 10.0, "{c}");
    }
    // One more control-plane round on the tail: its CPU (20 us a punt) and
    // two table writes (20 us each) at least, on the tofino profile.
    let (u1, u2) = (
        sro_percentile(&update, "single", "p50_us"),
        sro_percentile(&update, "sro-2", "p50_us"),
    );
    assert!(u2 > u1 + 50.0, "update p50 {u1} vs {u2} us");
}

#[test]
fn e3_nat_both_forward_at_line_rate_once_the_handshakes_are_done() {
    // Seed 1, a 100 us window of 64 B packets (under a second).
    let out = sweep("e3-nat-throughput.toml");
    let p = points(&out.join("plots/share_of_line.csv"), "line");
    println!("{p:?}");
    let (one, two) = (at(&p, "", 1.0), at(&p, "", 2.0));
    assert!(one >= 97.0 && two >= 97.0, "% of line rate: {one}, {two}");
    let p = points(&out.join("plots/throughput.csv"), "line");
    let (one, two) = (at(&p, "", 1.0), at(&p, "", 2.0));
    assert!((one - two).abs() < 0.01 * one, "Mpps {one} vs {two}");
}

#[test]
fn e4_sro_updates_saturate_the_control_plane_and_the_chain_first() {
    // Seed 1, 11 rates x 2 versions of 20 ms offered + 20 ms (~4 s).
    let out = sweep("e4-sro-update-rate.toml");
    let mean = points(&out.join("plots/mean_latency.csv"), "replicas");
    let good = points(&out.join("plots/goodput.csv"), "replicas");
    println!("{mean:?}\n{good:?}");
    for v in ["1", "2"] {
        // Latency rises with the rate and blows up past the ceiling.
        let m = |x: f64| at(&mean, v, x);
        assert!(m(1e3) < m(8e3) && m(8e3) < m(5e4), "{v}: {mean:?}");
        assert!(m(2e5) > 10.0 * m(1e3), "{v}: {mean:?}");
    }
    // The single switch's plateau is its control channel's rate: one
    // register write, two table writes and the release's packet-out per
    // connection, serially (the tofino profile's costs).
    let cp = inca_switch::Profile::tofino().control_plane;
    let per_write = cp.register_op + cp.register_per_entry + 2 * cp.table_write + cp.punt_latency;
    let ceiling = 1e9 / per_write as f64;
    let peak = |v: &str| {
        good.iter()
            .filter(|p| p.0 == v)
            .map(|p| p.2)
            .fold(0.0, f64::max)
    };
    let (single, sro) = (peak("1"), peak("2"));
    assert!(
        (0.9 * ceiling..1.03 * ceiling).contains(&single),
        "single plateau {single}/s, computed {ceiling:.0}/s"
    );
    // The replicated version saturates at a lower rate.
    assert!(sro < 0.95 * single, "SRO peak {sro}/s, single {single}/s");
}

/// E8 (DDoS pass ratio, §8.2): at the quick scale (6 attackers of 2,000
/// packets), the SDW detector passes each source about its first 1,000
/// destinations — a band from the estimate's spread (1/16 sampling: ±13 %
/// at 1σ; linear counting at 28 of 32 bits about as much again; the
/// minimum over three rows skews up) and ≤ 3 paced windows (~90 packets)
/// of lag — below 1,700, so a detector that never blocks fails; pull
/// blocks only at the poll after detection (every 100 ms), so it leaks
/// more; push's controller serves digests and block writes one at a time,
/// so a faster arrival of the same sources never blocks earlier.
#[test]
fn e8_sdw_blocks_near_the_line_and_the_baselines_leak_more() {
    let t = std::time::Instant::now();
    let out = sweep("e8-ddos.toml");
    println!("e8 quick sweep: {:?}", t.elapsed());
    let p = points(&out.join("plots/pass_ratio.csv"), "detector");
    println!("{p:?}");
    let pkts = 2000.0;
    let sdw = at(&p, "sdw", 4000.0);
    assert!(
        (600.0..1700.0).contains(&(sdw * pkts)),
        "SDW passes {} packets per source at 4K/s",
        sdw * pkts
    );
    let pull = at(&p, "pull", 4000.0);
    assert!(pull > sdw, "pull {pull} vs SDW {sdw}");
    assert!(
        at(&p, "push", 5000.0) >= at(&p, "push", 500.0),
        "push leaks less at a higher arrival rate: {p:?}"
    );
    assert!(
        out.join("plots/pass_cdf_4k.csv").exists(),
        "no CDF at 4K sources/s"
    );
}

/// E9's per-config mean per-user throughput (Mpps) over `[from, to)` ms
/// of the `mean_user` plot (`config,time_ns,value`, bin midpoints).
fn e9_mean(csv: &Path, config: &str, from: f64, to: f64) -> f64 {
    let body = std::fs::read_to_string(csv).unwrap();
    let v: Vec<f64> = body
        .lines()
        .skip(1)
        .filter_map(|r| {
            let f: Vec<&str> = r.split(',').collect();
            let t: f64 = f[1].parse().ok()?;
            (f[0] == config && t >= from * 1e6 && t < to * 1e6).then(|| f[2].parse().ok())?
        })
        .collect();
    assert!(!v.is_empty(), "{config}: no bins in {from}..{to} ms");
    v.iter().sum::<f64>() / v.len() as f64
}

/// E9 (quick: 2 users offering L = 2 Mpps each, phases of 8 ms from
/// 2.24 ms — 50/50, 90/10, 50/50 — estimator and bins 320 µs, T_ctrl 1 s
/// and 250 ms at the spec's scale = 1.6 ms and 0.4 ms). EWO and SDW
/// re-share L from the last period's deltas, so through each shift they
/// hold within 10 % of L; pull keeps the old split until a control cycle
/// has read the new one — with 50/50 limits a 90/10 load passes 0.6·L —
/// so it loses more the longer T_ctrl is.
#[test]
fn e9_ewo_and_sdw_hold_the_limit_through_shifts_pull_dips() {
    let out = sweep("e9-rate-limiter.toml");
    let csv = out.join("plots/mean_user.csv");
    let (shift, end) = (10.24, 26.24);
    for v in ["ewo", "sdw"] {
        let m = e9_mean(&csv, v, shift, end);
        println!("{v}: {m:.3} Mpps per user after the first shift");
        assert!((1.8..=2.04).contains(&m), "{v}: {m} Mpps, L = 2");
    }
    let slow = e9_mean(&csv, "pull-1s", shift, end);
    let fast = e9_mean(&csv, "pull-250ms", shift, end);
    let sdw = e9_mean(&csv, "sdw", shift, end);
    println!("pull: T_ctrl 1 s {slow:.3}, 250 ms {fast:.3} Mpps per user");
    // Each shift costs pull at least 0.4·L until the next cycle (≥ 1.6 ms
    // of 8 in the slow case): ≥ 8 % below L.
    assert!(slow < 0.95 * sdw, "pull 1 s {slow} vs sdw {sdw}");
    assert!(slow < fast, "pull 1 s {slow} vs 250 ms {fast}");
    // The first bins after the shift, before any cycle has seen it.
    let dip = e9_mean(&csv, "pull-1s", shift, shift + 1.28);
    assert!(dip < 1.6, "pull 1 s right after the shift: {dip} Mpps");
}

// ---------------------------------------------------------------------------
// E5, E7, E11 (SDW windows; crates/inca-swish/src/experiments/sdw_windows.rs)

/// One DATA frame (98 B on the wire) at 100 Gb/s, ns: the slope E5's
/// advance time must approach for large C (the per-port packet-rate bound).
const SDW_T_PKT_NS: f64 = 7.84;

/// `(config, x) → y` of a metric-vs-param CSV whose lines are the
/// descriptor's `[[config]]`s; points a run skipped (empty y) are left out.
fn config_points(csv: &Path) -> Vec<(String, f64, f64)> {
    let body = std::fs::read_to_string(csv).unwrap();
    let mut lines = body.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (c, x, y) = (col("config"), col("x"), col("y"));
    lines
        .filter_map(|r| {
            let f: Vec<&str> = r.split(',').collect();
            let label = f[c].trim_matches('"');
            Some((
                label.rsplit_once(' ').map_or(label, |l| l.0).to_string(),
                f[x].parse().ok()?,
                f[y].parse().ok()?,
            ))
        })
        .collect()
}

#[test]
fn e5_window_advance_is_flat_then_linear_in_columns() {
    let out = sweep("e5-advance-latency.toml");
    let p = config_points(&out.join("plots/advance-p99.csv"));
    println!("E5 quick p99 (us): {p:?}");
    let us = |c: &str, x: f64| at(&p, c, x);
    // Flat for small C: a round trip and the ready exchange dominate.
    for c in ["local-2", "symmetric-4", "local-2 no-ready"] {
        assert!(us(c, 16.0) < 1.5 * us(c, 1.0), "{c}: not flat: {p:?}");
    }
    // Linear for large C, at the port's packet rate: from 1K to 4K columns
    // the time grows by 3,072 frame times: never less, and at most 30 % more
    // (an allowance: the excess over the wire time is not explained yet).
    let slope = (us("local-2", 4096.0) - us("local-2", 1024.0)) * 1_000.0 / 3_072.0;
    assert!(
        (0.95 * SDW_T_PKT_NS..1.3 * SDW_T_PKT_NS).contains(&slope),
        "local-2: {slope} ns a column, the port takes {SDW_T_PKT_NS}"
    );
    // Never faster than the bound.
    assert!(us("local-2", 4096.0) * 1_000.0 >= 4096.0 * SDW_T_PKT_NS * 0.99);
    // symmetric-4 ≈ local-2 once C dominates (peers sync in parallel):
    // the difference stays within one small-C window time.
    let d = us("symmetric-4", 4096.0) - us("local-2", 4096.0);
    assert!(
        d.abs() < us("symmetric-4", 1.0),
        "symmetric-4 vs local-2 at 4K: {d} us"
    );
    // Without the ready phase: never slower, and faster for small C (one
    // READY exchange less).
    for x in [1.0, 16.0, 256.0, 4096.0] {
        assert!(
            us("local-2 no-ready", x) <= us("local-2", x),
            "no-ready slower at C={x}"
        );
    }
    assert!(us("local-2 no-ready", 1.0) < us("local-2", 1.0));
}

#[test]
fn e7_ready_phase_removes_retransmissions() {
    let out = sweep("e7-ready-ablation.toml");
    let mean = config_points(&out.join("plots/retx-mean.csv"));
    let (lo, hi) = (
        config_points(&out.join("plots/retx-min.csv")),
        config_points(&out.join("plots/retx-max.csv")),
    );
    println!("E7 quick mean retx per run: {mean:?}\nmin {lo:?}\nmax {hi:?}");
    for j in [0.0, 500.0, 2000.0] {
        for c in ["symmetric-4 ready", "leaf-spine-4 ready"] {
            assert_eq!(at(&hi, c, j), 0.0, "{c} retransmitted at jitter {j}");
        }
    }
    // The asymmetric topology retransmits without the ready phase even with
    // no timing noise: a leaf finishes a window late (its peer leaf is
    // 1.5 us away), so the others' next DATA reaches it early.
    assert!(at(&lo, "leaf-spine-4 no-ready", 0.0) > 0.0, "{mean:?}");
    // With timing noise both do, and runs differ.
    for c in ["symmetric-4 no-ready", "leaf-spine-4 no-ready"] {
        assert!(at(&mean, c, 2000.0) > 0.0, "{c}: {mean:?}");
        assert!(at(&hi, c, 2000.0) > at(&lo, c, 2000.0), "{c}: no spread");
    }
}

#[test]
fn e7_start_skew_stalls_no_run_with_or_without_the_ready_phase() {
    // START landing up to 10 us apart: before replicas were loaded paused,
    // a peer's DATA(0) taken before a replica's own START was ACKed and
    // then forgotten, and every run without the ready phase stalled in
    // window 0 (3 of 3 per topology).
    let out = sweep("e7-start-skew.toml");
    let stalled = config_points(&out.join("plots/stalled.csv"));
    println!("E7 start skew: runs stalled {stalled:?}");
    assert_eq!(stalled.len(), 4, "{stalled:?}");
    assert!(stalled.iter().all(|p| p.2 == 0.0), "{stalled:?}");
}

#[test]
fn e11_star_of_32_holds_d1_to_d8_without_retransmissions() {
    let out = sweep("e11-scale-out.toml");
    let v = config_points(&out.join("plots/violations.csv"));
    let r = config_points(&out.join("plots/retx.csv"));
    let w = config_points(&out.join("plots/windows.csv"));
    println!("E11 quick violations {v:?} retx {r:?} windows {w:?}");
    assert_eq!(v.len(), 4, "{v:?}");
    assert!(v.iter().all(|p| p.2 == 0.0), "{v:?}");
    assert!(r.iter().all(|p| p.2 == 0.0), "{r:?}");
    assert!(w.iter().all(|p| p.2 >= 2.0), "windows did not move: {w:?}");
}

/// `inca check --profile tofino swish_sdw --set ...`: (success, output).
fn check_sdw(set: &[&str]) -> (bool, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_inca"));
    cmd.args(["check", "--profile", "tofino", "swish_sdw"]);
    for s in set {
        cmd.args(["--set", s]);
    }
    let o = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), text)
}

#[test]
fn e11_validation_caps_bitmap_at_32_and_takes_4096_counters() {
    let (ok, text) = check_sdw(&["replicas=32", "dedup=bitmap"]);
    assert!(ok, "bitmap, N = 32: {text}");
    let (ok, text) = check_sdw(&["replicas=33", "dedup=bitmap"]);
    assert!(!ok && text.contains("at most 32"), "bitmap, N = 33: {text}");
    let (ok, text) = check_sdw(&["replicas=4096", "dedup=counter"]);
    assert!(ok, "counter, N = 4,096: {text}");
    let (ok, text) = check_sdw(&["replicas=4097", "dedup=counter"]);
    assert!(!ok, "counter, N = 4,097: {text}");
}
/// E10 (spec §8.2 exp. 10): SDW recovery time on symmetric-4. Quick runs C
/// = 1, 4, 64 (col_shift=10 under the axis points 64, 4K, 64K). The time
/// is the controller's §5.6 procedure, whose C-sized register operations
/// per row are one read of R_r, a read of R_s-source and of its tags at
/// each of the s = 4 − f survivors and a write of M to each: 1 + 3s
/// operations of 2.58 µs per entry (spec §8.1). So it grows with C, falls
/// with f, and its slope in C is rows × (1 + 3s) × 2.58 µs — also at f = 3,
/// where the spec expects none (docs/experiments.md, E10).
#[test]
fn e10_recovery_grows_with_c_and_falls_with_f() {
    let out = sweep("e10-recovery.toml");
    let p = points(&out.join("plots/recovery.csv"), "f");
    println!("{p:?}");
    let (x4, x64) = (4096.0, 65536.0);
    for x in [64.0, x4, x64] {
        let (a, b, c) = (at(&p, "1", x), at(&p, "2", x), at(&p, "3", x));
        assert!(a > b && b > c, "x={x}: f=1 {a} ms, f=2 {b} ms, f=3 {c} ms");
        // Detection alone is 1 ms.
        assert!(c > 1.0, "x={x}: {c} ms");
    }
    for f in ["1", "2", "3"] {
        assert!(at(&p, f, 64.0) < at(&p, f, x4) && at(&p, f, x4) < at(&p, f, x64));
        let s = 4.0 - f.parse::<f64>().unwrap();
        let want = 3.0 * (1.0 + 3.0 * s) * 2.58e-3 * 60.0; // ms for C 4 → 64
        let got = at(&p, f, x64) - at(&p, f, x4);
        assert!(
            (got / want - 1.0).abs() < 0.15,
            "f={f}: C 4 → 64 added {got} ms, the §5.6 register operations predict {want} ms"
        );
    }
}

/// E6 (spec §8.2 exp. 6): the window-advance interval on symmetric-2 with
/// 130 B updates snaked at line rate through the data ports (quick: 2
/// port pairs, 100 µs, C = 1 and 64) against no load. The sync packets
/// share no port with the snake, so at most a frame's serialization (12
/// ns of 150 B at 100 Gb/s) per hop could reach them; over the few hops
/// of a window that bounds any effect by 100 ns. The load must really be
/// there: at least 80 of the 86.7 Gb/s of 130 B frames per direction.
#[test]
fn e6_full_load_leaves_the_advance_latency_alone() {
    let out = sweep("e6-full-load.toml");
    let p = points(&out.join("plots/advance-p99.csv"), "load");
    let l = points(&out.join("plots/snake-load.csv"), "load");
    println!("{p:?}\n{l:?}");
    for x in [1.0, 65536.0] {
        let (idle, busy) = (at(&p, "0", x), at(&p, "100", x));
        assert!(idle > 0.0, "x={x}: no advances");
        assert!(
            (busy - idle).abs() <= 0.1,
            "x={x}: p99 {idle} us idle, {busy} us under load"
        );
        assert!(at(&l, "100", x) >= 80.0, "x={x}: load {l:?}");
        assert_eq!(at(&l, "0", x), 0.0);
    }
}
