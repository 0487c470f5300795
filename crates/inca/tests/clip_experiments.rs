//! CLIP's simulated experiments (experiments/clip/, spec §8.2): each sweep
//! descriptor runs with `--quick`, writes its plots, and shows the shape
//! the spec expects, measured from the plots' data (seed 1, as the
//! descriptors say):
//! - E1: Ideal tracks the offered rate; CLIP with one server falls below it
//!   at 64 B (its cores' packet rate) and approaches it at 1518 B; a second
//!   server raises small-packet throughput.
//! - E2: CLIP's median is Ideal's shifted by two link traversals, a
//!   pipeline pass and the server's I/O and CPU, with a narrow spread.
//! - E3: the baseline falls as the skew grows (RSS binds each hot flow to
//!   one core); sketch promotion beats it at every skew, most at high skew,
//!   and pulls away from random promotion as the skew grows.
//! - E4: before T1 only server-1 carries traffic; after T1 set-1/2 stay
//!   on server-1 and set-3/4 go to server-2; after the second transition
//!   server-1 is idle (its flows pushed into the switch); the total
//!   follows the generator's steps with no dip at either change; no
//!   affinity violation, loss or drop. The pin-only comparison keeps
//!   server-1 busy (so the idle check can fail).
//! - E5: CLIP with CMS offload has the lowest latency; CLIP without offload
//!   and software SNAT, both server-bound, are of similar magnitude and
//!   clearly above the switch path alone.
//! - E8: every injected retransmission (and reordered segment) reported,
//!   none beyond, across VXLAN and plain TCP and every retransmission
//!   rate; each indexed connection handed over; no index violation.
//! - E6: with 8 cores a server, offload raises the 64 B trace's throughput
//!   to the generator's rate and leaves the mixed trace's (already at the
//!   line) where it was; the mixed trace has the higher Gbit/s.
//! - E7: every module takes a small share of each resource; Selecting is
//!   registers (SRAM, stateful ALUs) with no TCAM; only Forwarding uses
//!   TCAM (LPM).

use std::path::{Path, PathBuf};

#[path = "common/sweep.rs"]
mod sweep_quick;

/// Runs experiments/clip/`descriptor` with `--quick`; its folder.
fn sweep(descriptor: &str) -> PathBuf {
    println!("seed 1 (the descriptors' seeds)");
    sweep_quick::quick("clip", descriptor)
}

/// The rows of a CSV as maps from column to text.
fn rows(csv: &Path) -> Vec<std::collections::BTreeMap<String, String>> {
    let body = std::fs::read_to_string(csv).unwrap();
    let mut lines = body.lines();
    let header: Vec<String> = lines
        .next()
        .unwrap()
        .split(',')
        .map(str::to_string)
        .collect();
    lines
        .map(|r| {
            header
                .iter()
                .cloned()
                .zip(r.split(',').map(str::to_string))
                .collect()
        })
        .collect()
}

/// `(config, x) → y` of a metric-vs-parameter CSV drawn with `lines =
/// "config"`.
fn at(csv: &Path, config: &str, x: f64) -> f64 {
    rows(csv)
        .iter()
        .find(|r| r["config"] == config && r["x"].parse::<f64>().unwrap() == x)
        .map(|r| r["y"].parse().unwrap())
        .unwrap_or_else(|| panic!("no {config} at {x} in {}", csv.display()))
}

/// A percentile table's `column` for `config`.
fn percentile(csv: &Path, config: &str, column: &str) -> f64 {
    rows(csv)
        .iter()
        .find(|r| r["config"] == config)
        .map(|r| r[column].parse().unwrap())
        .unwrap_or_else(|| panic!("no {config} in {}", csv.display()))
}

/// A stacked-bar CSV's total for the bar labelled `label` (the label and
/// the total are the first and the last-but-one fields; headers may hold
/// quoted commas, rows do not).
fn bar(csv: &Path, label: &str) -> f64 {
    let body = std::fs::read_to_string(csv).unwrap();
    body.lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|f| f[0] == label)
        .map(|f| f[f.len() - 2].parse().unwrap())
        .unwrap_or_else(|| panic!("no {label} in {}", csv.display()))
}

#[test]
fn e1_one_server_is_cpu_bound_at_small_frames_and_two_reach_the_generator() {
    // 18 runs of 150 us of traffic (~10 s in a debug build).
    let out = sweep("e1-forwarding.toml");
    let got = out.join("plots/throughput_mpps.csv");
    let offered = out.join("plots/offered_mpps.csv");
    for size in [64.0, 128.0, 256.0, 512.0, 1024.0, 1518.0] {
        let (ideal, off) = (at(&got, "Ideal", size), at(&offered, "Ideal", size));
        println!(
            "{size} B: offered {off:.2}, Ideal {ideal:.2}, CLIP-1 {:.2}, CLIP-2 {:.2} Mpps",
            at(&got, "CLIP-1", size),
            at(&got, "CLIP-2", size)
        );
        assert!((ideal - off).abs() <= 0.01 * off, "Ideal tracks offered");
    }
    // 64 B: the generator's 25 Mpps cap; one server's 8 cores pass
    // 8 / (400 + 50 ns) = 17.8 Mpps.
    let (ideal, one, two) = (
        at(&got, "Ideal", 64.0),
        at(&got, "CLIP-1", 64.0),
        at(&got, "CLIP-2", 64.0),
    );
    assert!((ideal - 25.0).abs() < 0.1, "generator-bound: {ideal}");
    let cores = 8.0 / 450e-9 / 1e6;
    assert!((one - cores).abs() < 0.02 * cores, "{one} vs {cores:.2}");
    assert!(one < 0.8 * ideal && two > 1.3 * one, "{ideal} {one} {two}");
    // 1518 B: link-bound, CLIP within the shim's share of Ideal.
    let (ideal, one) = (at(&got, "Ideal", 1518.0), at(&got, "CLIP-1", 1518.0));
    assert!(one > 0.97 * ideal && one <= ideal, "{ideal} {one}");
}

#[test]
fn e2_clip_is_ideal_shifted_by_the_server_round_trip_with_a_narrow_spread() {
    // 1,000 packets per configuration (~2 s in a debug build).
    let out = sweep("e2-latency.toml");
    let t = out.join("plots/latency_table.csv");
    let p = |c: &str, col: &str| percentile(&t, c, col) * 1_000.0; // ns
    let shift = p("CLIP-2", "p50_us") - p("Ideal", "p50_us");
    // What the extra path costs, from the model's inputs: a pipeline pass
    // (500 ns), the core (400 + 50 ns), the PCIe latencies of the NIC's RX
    // write (250), doorbell (250), descriptor and payload reads (500 +
    // 500), two 10 ns links; on top, each link's and PCIe's serialisation
    // of the request (a median 790 B frame: ~0.2 us a 40 Gbps link).
    let fixed = 500.0 + 450.0 + 250.0 + 250.0 + 500.0 + 500.0 + 20.0;
    println!(
        "p50 Ideal {:.0} ns, CLIP {:.0} ns: shift {shift:.0} ns (fixed part {fixed})",
        p("Ideal", "p50_us"),
        p("CLIP-2", "p50_us")
    );
    assert!(shift > fixed && shift < fixed + 1_000.0, "shift {shift} ns");
    // Narrow: no queueing at 10 kpps, so the spread is the sizes'
    // serialisation (66-1514 B: 0.29 us a 40 Gbps link or PCIe write),
    // wider than Ideal's only by the more links and DMAs crossed, and no
    // tail.
    let spread = |c: &str| p(c, "p90_us") - p(c, "p10_us");
    println!(
        "p10-p90: Ideal {:.0} ns, CLIP {:.0} ns",
        spread("Ideal"),
        spread("CLIP-2")
    );
    assert!(spread("CLIP-2") < 1_500.0, "{}", spread("CLIP-2"));
    assert!(p("CLIP-2", "p99_us") - p("CLIP-2", "p90_us") < 500.0);
}

#[test]
fn e5_offload_is_lowest_and_both_server_bound_snats_are_alike() {
    // 800 ms of 20 kpps per configuration (~6 s in a debug build).
    let out = sweep("e5-snat-latency.toml");
    let t = out.join("plots/latency_table.csv");
    let mean = |c: &str| {
        rows(&out.join("plots/mean_latency.csv"))
            .iter()
            .find(|r| r["config"] == c)
            .map(|r| r["total"].parse::<f64>().unwrap())
            .unwrap_or_else(|| panic!("no {c}"))
    };
    let p50 = |c: &str| percentile(&t, c, "p50_us");
    let (clip, off, sw, floor) = (
        mean("CLIP w/o offload"),
        mean("CLIP w/ offload"),
        mean("software SNAT"),
        mean("switch path"),
    );
    println!("mean: CLIP {clip} us, offload {off} us, software {sw} us, switch path {floor} us");
    // Each server-bound one pays a round trip through a server: over a
    // microsecond of core time alone (750 and 1,100 ns) plus the NIC's DMA.
    assert!(
        clip > floor + 2.0 && sw > floor + 2.0,
        "{clip} {sw} {floor}"
    );
    assert!(clip / sw > 0.67 && clip / sw < 1.5, "{clip} vs {sw}");
    // Offload: the promoted heavy flows' packets stay in the switch, one
    // pass like the switch path's, so the median is the floor's and the
    // mean well under the server-bound ones.
    assert!(off < 0.7 * clip.min(sw), "{off} vs {clip}, {sw}");
    assert!((p50("CLIP w/ offload") - p50("switch path")).abs() < 0.05);
}

#[test]
fn e3_sketch_promotion_beats_the_baseline_most_at_high_skew() {
    // 18 runs of 45 ms of traffic at 250 kpps, the servers slowed 100-fold
    // and the model shrunk to 1,024 flows, K = 256 (~31 s of CPU in a debug
    // build, on two jobs).
    let out = sweep("e3-flow-selection.toml");
    let got = out.join("plots/throughput_mpps.csv");
    let alphas = [0.5, 0.8, 0.9, 1.0, 1.1, 1.2];
    let y = |c: &str, a: f64| at(&got, c, a);
    for a in alphas {
        println!(
            "zipf {a}: baseline {:.4}, random {:.4}, sketch {:.4} Mpps (offered 0.25)",
            y("baseline", a),
            y("random", a),
            y("sketch", a)
        );
    }
    // The baseline falls at every step: the hot flows' cores saturate.
    for w in alphas.windows(2) {
        assert!(
            y("baseline", w[1]) < y("baseline", w[0]),
            "baseline at {} vs {}",
            w[1],
            w[0]
        );
    }
    assert!(y("baseline", 1.2) < 0.8 * y("baseline", 0.5));
    // Sketch: at or above the baseline and random everywhere, at the
    // generator's rate (within the window's drain of the rings), and far
    // above the baseline at high skew.
    for a in alphas {
        let s = y("sketch", a);
        assert!(s >= y("baseline", a) && s >= 0.98 * y("random", a), "{a}");
        assert!(s > 0.95 * 0.25, "sketch at {a}: {s}");
    }
    for a in [1.1, 1.2] {
        assert!(y("sketch", a) > 1.4 * y("baseline", a), "{a}");
    }
    // Random helps (it offloads a quarter of the flows, whatever their
    // weight) but falls behind sketch as the skew grows: it rarely picks
    // the heavy flows. (The spec also expects random's own gain to shrink
    // above 0.9: the full run shows it, 1.16x at 0.5 to 1.08x at 1.2, but
    // this shrunk, slowed run does not, so it is not asserted here;
    // docs/experiments.md, E3.)
    for a in alphas {
        assert!(y("random", a) >= y("baseline", a), "{a}");
    }
    let lead = |a: f64| y("sketch", a) - y("random", a);
    assert!(
        lead(1.2) > 3.0 * lead(0.5).max(0.001),
        "{} {}",
        lead(1.2),
        lead(0.5)
    );
    // Reordering (spec §9 item 9): only a promotion moves a flow to the
    // fast path, whose packets can overtake its slow-path ones in flight;
    // the baseline promotes nothing, and random picks mostly cold flows
    // with nothing in flight, so sketch's hot flows show it.
    let reordered = out.join("plots/reordered.csv");
    let r = |c: &str, a: f64| at(&reordered, c, a);
    for a in alphas {
        println!(
            "zipf {a}: reordered baseline {}, random {}, sketch {}",
            r("baseline", a),
            r("random", a),
            r("sketch", a)
        );
        assert_eq!(r("baseline", a), 0.0, "no promotion, no reordering");
    }
    assert!(
        alphas.iter().any(|&a| r("sketch", a) > 0.0),
        "sketch promotes hot flows with packets in flight"
    );
}

#[test]
fn e6_offload_lifts_the_64_byte_trace_and_the_mixed_trace_has_more_gbps() {
    // 4 runs of 60 ms of traffic, the servers slowed 100-fold (~7 s of CPU
    // in a debug build).
    let out = sweep("e6-snat-traces.toml");
    let mpps = out.join("plots/mpps.csv");
    let gbps = out.join("plots/gbps.csv");
    let label = |c: &str, t: &str| format!("CLIP {c} trace={t}");
    for t in ["a", "b"] {
        for c in ["w/o offload", "w/ offload"] {
            println!(
                "trace {t}, {c}: {:.4} Mpps, {:.3} Gbit/s",
                bar(&mpps, &label(c, t)),
                bar(&gbps, &label(c, t))
            );
        }
    }
    let (off_a, on_a) = (
        bar(&mpps, &label("w/o offload", "a")),
        bar(&mpps, &label("w/ offload", "a")),
    );
    // Trace a: the servers' cores bind without offload (hot flows on one
    // core each); with it the heavy translations stay on the switch and
    // the generator's rate (0.25 Mpps here) gets through.
    assert!(on_a > 1.3 * off_a, "{on_a} vs {off_a}");
    assert!(on_a > 0.95 * 0.25, "{on_a}");
    // Trace b: at the line already without offload; offload keeps it.
    let (off_b, on_b) = (
        bar(&mpps, &label("w/o offload", "b")),
        bar(&mpps, &label("w/ offload", "b")),
    );
    assert!(on_b >= 0.98 * off_b, "{on_b} vs {off_b}");
    // Reordering (spec §9 item 9) only where promotions move flows.
    let reordered = out.join("plots/reordered.csv");
    for t in ["a", "b"] {
        let (off, on) = (
            bar(&reordered, &label("w/o offload", t)),
            bar(&reordered, &label("w/ offload", t)),
        );
        println!("trace {t}: reordered w/o offload {off}, w/ offload {on}");
        assert_eq!(off, 0.0, "trace {t}: no promotion, no reordering");
    }
    // Larger packets: more bits a second in either configuration.
    for c in ["w/o offload", "w/ offload"] {
        assert!(
            bar(&gbps, &label(c, "b")) > 2.0 * bar(&gbps, &label(c, "a")),
            "{c}"
        );
    }
}

/// A timeseries CSV's points of `config`: (bin middle in ns, value).
fn series(csv: &Path, config: &str) -> Vec<(f64, f64)> {
    rows(csv)
        .iter()
        .filter(|r| r["config"] == config)
        .map(|r| (r["time_ns"].parse().unwrap(), r["value"].parse().unwrap()))
        .collect()
}

#[test]
fn e4_new_flows_go_to_server_2_and_the_second_change_empties_server_1() {
    // Quick: 50 kpps per set, 250 ms of traffic, two configurations.
    let out = sweep("e4-capacity.toml");
    let plots = out.join("plots");
    let mpps = |name: &str, config: &str| series(&plots.join(format!("{name}.csv")), config);
    // The descriptor's quick timeline (ms after time 0): traffic from 5,
    // T1 at 45, set-3/4 from 95, set-1 stops at 135, T2 at 175, end 255.
    let ms = 1e6;
    let rate = 0.05; // Mpps per set
    let mean = |pts: &[(f64, f64)], from: f64, to: f64| {
        let v: Vec<f64> = pts
            .iter()
            .filter(|(t, _)| *t >= from * ms && *t < to * ms)
            .map(|p| p.1)
            .collect();
        assert!(!v.is_empty(), "no bins in {from}..{to} ms");
        v.iter().sum::<f64>() / v.len() as f64
    };
    let near = |got: f64, want: f64, what: &str| {
        println!("{what}: {got:.4} Mpps (expected {want:.4})");
        assert!(
            (got - want).abs() <= 0.02 * want + 1e-9,
            "{what}: {got} vs {want}"
        );
    };
    for config in ["push", "pin only"] {
        println!("-- {config}");
        let (s1, s2) = (mpps("server1_mpps", config), mpps("server2_mpps", config));
        let (total, offered) = (mpps("total_mpps", config), mpps("offered_mpps", config));
        // Before T1: server-1 alone carries set-1 and set-2.
        near(mean(&s1, 10.0, 45.0), 2.0 * rate, "server-1 before T1");
        assert_eq!(mean(&s2, 0.0, 45.0), 0.0, "server-2 idle before T1");
        // After T1 and set-3/4's start: set-1/2 stay, set-3/4 go to 2.
        near(mean(&s1, 105.0, 135.0), 2.0 * rate, "server-1 after T1");
        near(mean(&s2, 105.0, 135.0), 2.0 * rate, "server-2 after T1");
        // Set-1 stopped.
        near(mean(&s1, 145.0, 175.0), rate, "server-1 after set-1 stops");
        near(mean(&s2, 105.0, 250.0), 2.0 * rate, "server-2 to the end");
        // No dip: every bin clear of a generator step delivers what was
        // offered in it, within 1 % (a bin holds 500-1,000 frames; the
        // path's few microseconds move at most one across a bin edge).
        let steps = [5.0, 95.0, 135.0, 255.0];
        let mut worst: f64 = 0.0;
        for ((t, got), (_, off)) in total.iter().zip(&offered) {
            if *off == 0.0 || steps.iter().any(|s| (t / ms - s).abs() < 7.5) {
                continue;
            }
            worst = worst.max((off - got) / off);
        }
        println!(
            "largest shortfall of delivered below offered in a bin: {:.3} %",
            100.0 * worst
        );
        assert!(worst <= 0.01, "{config}: a dip of {:.2} %", 100.0 * worst);
        // Zero affinity violations, losses and drops.
        let checks = rows(&plots.join("checks.csv"));
        let row = checks.iter().find(|r| r["config"] == config).unwrap();
        println!("checks: {row:?}");
        assert_eq!(
            row["total"].parse::<f64>().unwrap(),
            0.0,
            "{config}: {row:?}"
        );
    }
    // Pinning never reorders (spec §9 item 9); a push may (a flow's packet
    // in flight to server-1 overtaken by the next one from the switch).
    let reordered = out.join("plots/reordered.csv");
    println!(
        "reordered: push {}, pin only {}",
        bar(&reordered, "push"),
        bar(&reordered, "pin only")
    );
    assert_eq!(bar(&reordered, "pin only"), 0.0, "a pin reorders nothing");
    // After T2 (+ 20 ms: the push takes effect ~12 ms after T2): server-1
    // idle with the push, set-2 in the switch; still serving set-2
    // through pins without it.
    let after = |name: &str, config: &str| mean(&mpps(name, config), 195.0, 250.0);
    assert_eq!(after("server1_mpps", "push"), 0.0, "server-1 idle after T2");
    near(
        after("switch_mpps", "push"),
        rate,
        "switch carries set-2 after T2",
    );
    near(
        after("server1_mpps", "pin only"),
        rate,
        "pin only: server-1 keeps set-2",
    );
    assert_eq!(
        after("switch_mpps", "pin only"),
        0.0,
        "pin only: nothing in the switch"
    );
}

#[test]
fn e7_every_module_is_small_and_only_forwarding_uses_tcam() {
    // 21 placements, nothing simulated (well under a second).
    let out = sweep("e7-resources.toml");
    let csv = out.join("plots/shares.csv");
    // The axis's numbers: 1 crossbar, 2 SRAM, 3 TCAM, 4 VLIW, 5 hash bits,
    // 6 stateful ALUs, 7 stages; shares in percent of the device.
    let names = ["crossbar", "SRAM", "TCAM", "VLIW", "hash bits", "SALU"];
    for module in ["Selecting", "Scalability", "Forwarding"] {
        let row: Vec<f64> = (1..=7).map(|x| at(&csv, module, f64::from(x))).collect();
        println!("{module}: {row:?}");
        for (name, v) in names.iter().zip(&row) {
            assert!(*v < 25.0, "{module} takes {v} % of the {name}");
        }
        assert!(row[6] > 0.0, "{module} occupies a stage");
    }
    let (sel, scale, fwd) = (
        |x: u32| at(&csv, "Selecting", f64::from(x)),
        |x: u32| at(&csv, "Scalability", f64::from(x)),
        |x: u32| at(&csv, "Forwarding", f64::from(x)),
    );
    // Selecting is registers: SRAM and stateful ALUs, no TCAM, no match.
    assert_eq!(sel(3), 0.0);
    assert!(sel(2) > 0.0 && sel(6) > 0.0);
    assert_eq!(sel(1), 0.0, "the sketch matches nothing");
    // Only Forwarding's LPM uses TCAM.
    assert_eq!(scale(3), 0.0);
    assert!(fwd(3) > 0.0);
}

#[test]
fn e8_trd_reports_each_injected_retransmission_once_and_nothing_else() {
    // Quick: 2 x 5 runs of two waves of 16 connections (~3,400 packets
    // each) through switch, two servers and the controller.
    let out = sweep("e8-trd.toml");
    let plots = out.join("plots");
    let (expected, reported) = (plots.join("injected.csv"), plots.join("reported.csv"));
    let fp = plots.join("false_positives.csv");
    for config in ["VXLAN", "plain TCP"] {
        for x in [0.0, 1.0, 2.0, 5.0, 10.0] {
            let (e, r, f) = (
                at(&expected, config, x),
                at(&reported, config, x),
                at(&fp, config, x),
            );
            println!("{config} at {x} %: {e} expected, {r} reported, {f} false positives");
            assert_eq!(r, e, "{config} at {x} %");
            assert_eq!(f, 0.0, "{config} at {x} %");
        }
        // Retransmissions were injected (the comparison is not 0 = 0).
        assert!(at(&expected, config, 10.0) > at(&expected, config, 0.0) + 20.0);
    }
    // Where counted: registers mostly, some by servers alone (slices of 6
    // for ~8 connections a server and wave).
    let bars = rows(&plots.join("where_counted.csv"));
    println!("where counted: {bars:?}");
    assert!(!bars.is_empty());
    // Property 14's checks: zero false positives, misses and index
    // violations in every run.
    let checks = rows(&plots.join("checks.csv"));
    assert!(!checks.is_empty());
    for row in &checks {
        println!("checks: {row:?}");
        assert_eq!(row["total"].parse::<f64>().unwrap(), 0.0, "{row:?}");
    }
}
