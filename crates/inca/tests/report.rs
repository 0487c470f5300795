//! `inca report` as a user runs it: a results folder written by
//! `inca_sim::metrics::write_results` in, plots and a text summary out; bad
//! folders are errors that name the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use inca_sim::link::{ChannelConfig, ChannelStats};
use inca_sim::metrics::{
    write_results, LatencyHistogram, LinkReport, NodeReport, RunSummary, Series,
};

const MS: u64 = 1_000_000;
const BIN: u64 = 100_000;
const DURATION: u64 = 10 * MS;

/// A fresh, empty folder for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("report-tests")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A deterministic stream of numbers in [0, 1).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Bytes per bin of a 40 Gbit/s flow that stops while s1 is down
/// (3 ms to 5 ms).
fn traffic(scale: f64) -> Series {
    let mut s = Series::new(BIN);
    for b in 0..(DURATION / BIN) {
        let t = b * BIN;
        if !(3 * MS..5 * MS).contains(&t) {
            // 40 Gbit/s = 5 bytes/ns.
            s.add_at(t, (5.0 * BIN as f64 * scale) as u64);
        }
    }
    s
}

/// A run: client ↔ s1 ↔ server, s1 crashes at 3 ms and restarts at 5 ms.
/// `slow` scales the client's latencies (one "configuration" of a sweep).
fn write_run(dir: &Path, slow: f64) {
    let mut rng = Lcg(7);
    let mut client = NodeReport::default();
    let mut rtt = LatencyHistogram::default();
    for _ in 0..5000 {
        // Log-uniform from 5 µs to 2 ms.
        let ns = 5_000.0 * (400f64).powf(rng.next()) * slow;
        rtt.record(ns as u64);
    }
    client.histograms.insert("rtt".into(), rtt);
    client.series.insert("goodput_bytes".into(), traffic(0.95));
    client.counters.insert("requests".into(), 5000);
    client.counters.insert("timeouts".into(), 12);

    let mut s1 = NodeReport::default();
    let mut qd = LatencyHistogram::default();
    for _ in 0..3000 {
        qd.record((1_000.0 + 9_000.0 * rng.next() * rng.next()) as u64);
    }
    s1.histograms.insert("queue_delay".into(), qd);
    // Recorded nowhere: the report skips it with a note.
    s1.histograms
        .insert("unused".into(), LatencyHistogram::default());
    s1.series.insert("rx_bytes".into(), traffic(1.0));
    s1.series.insert("empty_goodput".into(), Series::new(BIN));
    for (k, v) in [
        ("rx_packets", 40_000),
        ("tm_drops", 321),
        ("parse_drops", 4),
        ("program_drops", 0),
    ] {
        s1.counters.insert(k.into(), v);
    }
    s1.notes.push("program nat on profile tofino".into());

    let server = NodeReport {
        counters: BTreeMap::from([("rx_packets".to_string(), 39_000u64)]),
        ..NodeReport::default()
    };

    let link = |name: &str, from: &str, to: &str, series: Series, stats: ChannelStats| LinkReport {
        link: name.into(),
        from: from.into(),
        to: to.into(),
        config: ChannelConfig::default(),
        stats,
        throughput_bytes: series,
        max_queue_bytes: Series::new(BIN),
    };
    let busy = ChannelStats {
        offered: 41_000,
        delivered: 40_000,
        delivered_bytes: 40_000 * 1500,
        queue_drops: 17,
        lost: 3,
        down_drops: 980,
        ..ChannelStats::default()
    };
    let links = vec![
        link("l1", "client:0", "s1:1", traffic(1.0), busy),
        link(
            "l1",
            "s1:1",
            "client:0",
            Series::new(BIN),
            ChannelStats::default(),
        ),
        link("l2", "s1:2", "server:0", traffic(0.97), busy),
        link(
            "l2",
            "server:0",
            "s1:2",
            traffic(0.05),
            ChannelStats::default(),
        ),
    ];
    let summary = RunSummary {
        scenario: "report-test".into(),
        seed: 42,
        duration_ns: DURATION,
        bin_ns: BIN,
        events: 123_456,
        frames_delivered: 80_000,
        wall_seconds: 0.25,
        faults: vec![
            (3 * MS, "s1 crashed (state lost)".into()),
            (5 * MS, "s1 restarted".into()),
        ],
        highlights: vec!["requests answered: 4988 of 5000".into()],
    };
    let nodes = vec![
        ("client".to_string(), "host", client),
        ("s1".to_string(), "switch", s1),
        ("server".to_string(), "host", server),
    ];
    write_results(dir, &summary, &nodes, &links).unwrap();
}

fn report(args: &[&str], envs: &[(&str, &str)]) -> (bool, String, String) {
    let mut cmd = Command::cargo_bin("inca").unwrap();
    cmd.arg("report").args(args);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_png(path: &Path) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is not a PNG",
        path.display()
    );
    assert!(
        bytes.len() > 5_000,
        "{} is only {} bytes",
        path.display(),
        bytes.len()
    );
}

fn assert_svg(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(text.contains("<svg"), "{} is not an SVG", path.display());
    assert!(
        text.len() > 2_000,
        "{} is only {} bytes",
        path.display(),
        text.len()
    );
}

#[test]
fn a_run_gets_plots_and_a_summary() {
    let dir = scratch("single");
    write_run(&dir, 1.0);
    let (ok, out, err) = report(&[dir.to_str().unwrap()], &[]);
    assert!(ok, "stdout:\n{out}\nstderr:\n{err}");
    for plot in ["latency_cdf", "throughput", "drops"] {
        assert_png(&dir.join("plots").join(format!("{plot}.png")));
        assert_svg(&dir.join("plots").join(format!("{plot}.svg")));
    }
    // Faults and highlights, percentiles, links.
    assert!(out.contains("s1 crashed (state lost)"), "{out}");
    assert!(out.contains("3.000 ms"), "{out}");
    assert!(out.contains("requests answered"), "{out}");
    assert!(out.contains("p99"), "{out}");
    assert!(
        out.contains("client/rtt") && out.contains("s1/queue_delay"),
        "{out}"
    );
    assert!(out.contains("queue_drops") && out.contains("980"), "{out}");
    // Text is drawn (a font was found): the SVG carries the labels.
    let svg = std::fs::read_to_string(dir.join("plots/throughput.svg")).unwrap();
    assert!(
        svg.contains("s1 crashed"),
        "fault label missing from the throughput SVG"
    );
    assert!(svg.contains("Gbit/s"));
    // Empty things are skipped with a note.
    assert!(out.contains("s1/unused is empty"), "{out}");
    assert!(out.contains("empty_goodput is empty"), "{out}");
}

#[test]
fn one_format_only() {
    let dir = scratch("svg-only");
    write_run(&dir, 1.0);
    let (ok, out, err) = report(&[dir.to_str().unwrap(), "--format", "svg"], &[]);
    assert!(ok, "{out}{err}");
    assert_svg(&dir.join("plots/latency_cdf.svg"));
    assert!(!dir.join("plots/latency_cdf.png").exists());
    let (ok, _, err) = report(&[dir.to_str().unwrap(), "--format", "gif"], &[]);
    assert!(!ok);
    assert!(err.contains("gif"), "{err}");
}

#[test]
fn without_a_font_plots_are_drawn_without_text() {
    let dir = scratch("no-font");
    write_run(&dir, 1.0);
    let (ok, out, err) = report(&[dir.to_str().unwrap()], &[("INCA_FONT", "none")]);
    assert!(ok, "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("warning"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    for plot in ["latency_cdf", "throughput", "drops"] {
        assert_png(&dir.join("plots").join(format!("{plot}.png")));
    }
}

#[test]
fn a_sweep_gets_bars_per_configuration() {
    let dir = scratch("sweep");
    for (name, slow) in [("rate-10", 1.0), ("rate-40", 1.6), ("rate-100", 2.5)] {
        write_run(&dir.join(name), slow);
    }
    let (ok, out, err) = report(&[dir.to_str().unwrap()], &[]);
    assert!(ok, "stdout:\n{out}\nstderr:\n{err}");
    assert_png(&dir.join("plots/bars.png"));
    assert_svg(&dir.join("plots/bars.svg"));
    // Runs in natural order, each with its own plots.
    let svg = std::fs::read_to_string(dir.join("plots/bars.svg")).unwrap();
    let (a, b, c) = (
        svg.find("\nrate-10\n").unwrap(),
        svg.find("\nrate-40\n").unwrap(),
        svg.find("\nrate-100\n").unwrap(),
    );
    assert!(a < b && b < c, "runs out of order in bars.svg");
    for run in ["rate-10", "rate-40", "rate-100"] {
        assert_png(&dir.join(run).join("plots/latency_cdf.png"));
    }
    assert!(out.contains("client/rtt across runs"), "{out}");
}

#[test]
fn bad_folders_are_errors_naming_the_file() {
    // Missing folder.
    let dir = scratch("bad");
    let missing = dir.join("no-such-run");
    let (ok, _, err) = report(&[missing.to_str().unwrap()], &[]);
    assert!(!ok);
    assert!(err.contains("no-such-run"), "{err}");

    // A folder with no results.
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let (ok, _, err) = report(&[empty.to_str().unwrap()], &[]);
    assert!(!ok);
    assert!(err.contains("summary.json"), "{err}");

    // Malformed JSON.
    let run = dir.join("malformed");
    write_run(&run, 1.0);
    std::fs::write(run.join("nodes.json"), "[{\"name\": \"s1\", ").unwrap();
    let (ok, _, err) = report(&[run.to_str().unwrap()], &[]);
    assert!(!ok);
    assert!(
        err.contains("nodes.json") && err.contains("malformed"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");

    // A missing file.
    let run = dir.join("no-links");
    write_run(&run, 1.0);
    std::fs::remove_file(run.join("links.json")).unwrap();
    let (ok, _, err) = report(&[run.to_str().unwrap()], &[]);
    assert!(!ok);
    assert!(err.contains("links.json"), "{err}");

    // A missing or broken CDF file.
    let run = dir.join("no-cdf");
    write_run(&run, 1.0);
    std::fs::remove_file(run.join("cdf/client.rtt.csv")).unwrap();
    let (ok, _, err) = report(&[run.to_str().unwrap()], &[]);
    assert!(!ok);
    assert!(err.contains("client.rtt.csv"), "{err}");
    std::fs::write(
        run.join("cdf/client.rtt.csv"),
        "latency_ns,fraction\n12,0.5\nabc\n",
    )
    .unwrap();
    let (ok, _, err) = report(&[run.to_str().unwrap()], &[]);
    assert!(!ok);
    assert!(err.contains("client.rtt.csv:3"), "{err}");
}
