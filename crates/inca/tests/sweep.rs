//! `inca sweep` as a user runs it: a two-host UDP scenario swept over packet
//! size and rate, with every plot kind; plot numbers checked against the
//! results folders; the same results with one or two jobs; bad descriptors
//! named by field and line; `inca report` redrawing a sweep folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("inca-sweep-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `inca ARGS`; returns (success, stdout, stderr).
fn inca(args: &[&str]) -> (bool, String, String) {
    let out = Command::cargo_bin("inca")
        .unwrap()
        .env("INCA_FONT", "none")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Two hosts over one link with jitter (so seeds differ): `a` sends UDP
/// probes to `b`.
const SCENARIO: &str = r#"name = "pair"
duration = "2ms"
seed = 1
bin = "100us"

[defaults.link]
rate = "1Gbps"
delay = "2us"
jitter = "3us"

[[host]]
name = "a"
ip = "10.0.0.1"
[[host.workload]]
name = "load"
kind = "udp"
dst = "10.0.0.2:9"
rate = "100Mbps"
size = 100

[[host]]
name = "b"
ip = "10.0.0.2"

[[link]]
a = "a:0"
b = "b:0"
"#;

const DESCRIPTOR: &str = r#"description = "UDP over one link, by size and rate"
scenario = "pair.toml"
seeds = [1, 2, 3]
quick = ["duration=1ms"]

[axes]
"a.workload.load.size" = [100, 1000]
rate = { set = "a.workload.0.rate", values = ["100Mbps", "400Mbps"], numbers = [100, 400] }

[[plot]]
kind = "metric_vs_param"
name = "packets"
x = "rate"
lines = "a.workload.load.size"
y = { counter = "b/rx_packets" }

[[plot]]
kind = "metric_vs_param"
name = "p99"
x = "a.workload.load.size"
y = { histogram = "b/latency", stat = "p99" }
log_x = true

[[plot]]
kind = "metric_vs_param"
name = "goodput"
x = "rate"
lines = "a.workload.load.size"
y = { link = "a-b", from = "a", stat = "mbps", start = "500us", end = "2ms" }

[[plot]]
kind = "cdf_overlay"
histogram = "*/latency"

[[plot]]
kind = "percentile_table"
histogram = "b/latency"

[[plot]]
kind = "stacked_bars"
stack = [{ counter = "b/rx_bytes", label = "received" }, { counter = "a/tx_bytes", label = "sent" }]
shares = true

[[plot]]
kind = "timeseries_overlay"
y = { series = "b/rx_bytes", stat = "mbps" }
filter = { rate = "400Mbps" }
"#;

/// A sweep folder with the scenario and descriptor beside it.
fn setup(name: &str, descriptor: &str) -> (PathBuf, PathBuf) {
    let dir = tmp(name);
    std::fs::write(dir.join("pair.toml"), SCENARIO).unwrap();
    let d = dir.join("exp.toml");
    std::fs::write(&d, descriptor).unwrap();
    (d, dir.join("out"))
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(
        &std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap()
}

fn csv(path: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

fn node<'a>(nodes: &'a Value, name: &str) -> &'a Value {
    nodes
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == name)
        .unwrap()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Every file under `dir` except images, with `wall_seconds` blanked.
fn files(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_some_and(|x| x == "png" || x == "svg") {
                continue;
            }
            let mut text = std::fs::read_to_string(&p).unwrap();
            if p.file_name().is_some_and(|n| n == "summary.json") {
                text = text
                    .lines()
                    .filter(|l| !l.contains("wall_seconds"))
                    .collect::<Vec<_>>()
                    .join("\n");
            }
            out.insert(p.strip_prefix(dir).unwrap().display().to_string(), text);
        }
    }
    out
}

#[test]
fn a_sweep_runs_every_configuration_and_its_plots_match_the_runs() {
    let (d, out) = setup("full", DESCRIPTOR);
    let (ok, stdout, err) = inca(&[
        "sweep",
        d.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--jobs",
        "2",
    ]);
    assert!(ok, "{err}\n{stdout}");
    let sweep = json(&out.join("sweep.json"));
    let configs = sweep["configurations"].as_array().unwrap();
    assert_eq!(configs.len(), 4);
    assert_eq!(sweep["seeds"], serde_json::json!([1, 2, 3]));
    assert_eq!(configs[1]["label"], "a.workload.load.size=100 rate=400Mbps");
    // The overrides reached the runs: size and rate change what b receives.
    let run = |c: usize, s: usize| out.join(configs[c]["runs"][s]["dir"].as_str().unwrap());
    let rx = |c: usize, s: usize| {
        node(&json(&run(c, s).join("nodes.json")), "b")["counters"]["rx_packets"]
            .as_f64()
            .unwrap()
    };
    // 100 Mbps of 100-byte frames (124 B on the wire) for 2 ms ≈ 201.
    assert!((195.0..=205.0).contains(&rx(0, 0)), "{}", rx(0, 0));
    assert!(
        rx(1, 0) > 3.5 * rx(0, 0),
        "400 Mbps sends four times as many"
    );
    assert!(rx(2, 0) < rx(0, 0) / 5.0, "1000-byte frames are fewer");

    // metric_vs_param: counter per configuration = median over seeds of
    // nodes.json.
    let packets = csv(&out.join("plots/packets.csv"));
    assert_eq!(
        packets[0],
        ["config", "rate", "a.workload.load.size", "y", "seeds", "x"]
    );
    for c in 0..4 {
        let want = median((0..3).map(|s| rx(c, s)).collect());
        let row = &packets[c + 1];
        assert_eq!(row[0], configs[c]["label"].as_str().unwrap());
        assert_eq!(row[3].parse::<f64>().unwrap(), want, "config {c}");
    }
    // The p99 of a histogram: the median of the runs' p99, in µs. Jitter
    // makes the seeds differ, so the median is a real choice.
    let p99s = csv(&out.join("plots/p99.csv"));
    let p99 = |c: usize, s: usize| {
        node(&json(&run(c, s).join("nodes.json")), "b")["histograms"]["latency"]["p99"]
            .as_f64()
            .unwrap()
            / 1e3
    };
    let seeds: Vec<f64> = (0..3).map(|s| p99(0, s)).collect();
    assert!(
        seeds.iter().any(|&v| v != seeds[0]),
        "seeds should differ: {seeds:?}"
    );
    for c in 0..4 {
        let want = median((0..3).map(|s| p99(c, s)).collect());
        let got: f64 = p99s[c + 1][3].parse().unwrap();
        assert!(
            (got - want).abs() <= want * 1e-6,
            "config {c}: {got} vs {want}"
        );
    }
    // A link rate over a window: bytes delivered a→b in [0.5, 2) ms.
    let goodput = csv(&out.join("plots/goodput.csv"));
    for c in 0..4 {
        let per_seed: Vec<f64> = (0..3)
            .map(|s| {
                let links = json(&run(c, s).join("links.json"));
                let l = links
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|l| l["from"] == "a:0")
                    .unwrap();
                let bin = l["throughput_bytes"]["bin"].as_u64().unwrap();
                let bytes: u64 = l["throughput_bytes"]["values"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| {
                        *i as u64 * bin >= 500_000 && (*i as u64 + 1) * bin <= 2_000_000
                    })
                    .map(|(_, v)| v.as_u64().unwrap())
                    .sum();
                bytes as f64 * 8.0 / 1.5e-3 / 1e6
            })
            .collect();
        let got: f64 = goodput[c + 1][3].parse().unwrap();
        let want = median(per_seed);
        assert!(
            (got - want).abs() <= want * 1e-5,
            "config {c}: {got} vs {want}"
        );
    }
    // 100 Mbps offered, frame bytes only (no preamble/gap): 100 × 100/124.
    let g0: f64 = goodput[1][3].parse().unwrap();
    assert!((75.0..=86.0).contains(&g0), "{g0}");

    // Percentile table: p10 ≤ p50 ≤ p90 ≤ p99, p50 agrees with nodes.json.
    let table = csv(&out.join("plots/percentile_table.csv"));
    assert_eq!(
        table[0],
        [
            "config",
            "a.workload.load.size",
            "rate",
            "count",
            "p10_us",
            "p50_us",
            "p90_us",
            "p99_us"
        ]
    );
    for (c, row) in table[1..].iter().enumerate() {
        let v: Vec<f64> = row[4..].iter().map(|x| x.parse().unwrap()).collect();
        assert!(v.windows(2).all(|w| w[0] <= w[1]), "{row:?}");
        let p50 = median(
            (0..3)
                .map(|s| {
                    node(&json(&run(c, s).join("nodes.json")), "b")["histograms"]["latency"]["p50"]
                        .as_f64()
                        .unwrap()
                        / 1e3
                })
                .collect(),
        );
        assert!((v[1] - p50).abs() <= p50 * 1e-6, "{row:?} vs {p50}");
    }
    assert!(stdout.contains("p10"), "{stdout}");

    // Stacked shares add up to one; timeseries only the filtered configs.
    let stacks = csv(&out.join("plots/stacked_bars.csv"));
    for row in &stacks[1..] {
        let s: f64 = row[4..].iter().map(|x| x.parse::<f64>().unwrap()).sum();
        assert!((s - 1.0).abs() < 1e-5, "{row:?}");
    }
    let ts = std::fs::read_to_string(out.join("plots/timeseries_overlay.csv")).unwrap();
    assert!(
        ts.contains("rate=400Mbps") && !ts.contains("rate=100Mbps"),
        "{ts}"
    );
    // The CDF overlay: one curve per configuration, ending at 1.
    let cdf = csv(&out.join("plots/cdf_overlay.csv"));
    for c in configs {
        let label = c["label"].as_str().unwrap();
        let last = cdf.iter().rev().find(|r| r[0] == label).unwrap();
        assert_eq!(last[2], "1.000000");
    }
    for name in [
        "packets",
        "p99",
        "goodput",
        "cdf_overlay",
        "stacked_bars",
        "timeseries_overlay",
    ] {
        for ext in ["png", "svg"] {
            let p = out.join(format!("plots/{name}.{ext}"));
            assert!(p.is_file(), "{} missing", p.display());
        }
    }

    // `inca report` redraws a sweep folder's plots.
    std::fs::remove_dir_all(out.join("plots")).unwrap();
    let (ok, stdout, err) = inca(&["report", out.to_str().unwrap(), "--format", "svg"]);
    assert!(ok, "{err}");
    assert!(out.join("plots/packets.svg").is_file(), "{stdout}");
    assert_eq!(csv(&out.join("plots/packets.csv")), packets);
}

#[test]
fn results_do_not_depend_on_the_number_of_jobs() {
    let (d, out) = setup("jobs", DESCRIPTOR);
    let mut all = Vec::new();
    for jobs in ["1", "2"] {
        let o = out.join(jobs);
        let (ok, _, err) = inca(&[
            "sweep",
            d.to_str().unwrap(),
            "--out",
            o.to_str().unwrap(),
            "--jobs",
            jobs,
            "--quick",
            "--format",
            "svg",
        ]);
        assert!(ok, "{err}");
        all.push(files(&o));
    }
    // --quick: the first seed only, and the shorter duration.
    let sweep = json(&out.join("1/sweep.json"));
    assert_eq!(sweep["seeds"], serde_json::json!([1]));
    let dir = sweep["configurations"][0]["runs"][0]["dir"]
        .as_str()
        .unwrap();
    assert_eq!(
        json(&out.join("1").join(dir).join("summary.json"))["duration_ns"],
        1_000_000
    );
    assert!(all[0].len() > 20);
    assert_eq!(
        all[0].keys().collect::<Vec<_>>(),
        all[1].keys().collect::<Vec<_>>()
    );
    for (k, v) in &all[0] {
        assert!(all[1][k] == *v, "{k} differs between --jobs 1 and 2");
    }
}

#[test]
fn bad_descriptors_are_errors_naming_the_field_and_line() {
    let cases = [
        // An axis no plot can find.
        (
            DESCRIPTOR.replace("x = \"rate\"\nlines", "x = \"speed\"\nlines"),
            "speed",
            13,
        ),
        // A metric with two sources.
        (
            DESCRIPTOR.replace(
                "{ counter = \"b/rx_packets\" }",
                "{ counter = \"b/rx_packets\", series = \"b/rx_bytes\" }",
            ),
            "exactly one",
            15,
        ),
        // An unknown field.
        (
            DESCRIPTOR.replace("seeds = [1, 2, 3]", "sedes = [1]"),
            "sedes",
            3,
        ),
        // An override the scenario refuses: names the configuration.
        (
            DESCRIPTOR.replace("\"a.workload.load.size\"", "\"a.workload.nosuch.size\""),
            "nosuch",
            0,
        ),
        // A metric that matches nothing in any run.
        (
            DESCRIPTOR.replace("counter = \"b/rx_packets\"", "counter = \"b/rx_pakets\""),
            "b/rx_pakets",
            0,
        ),
    ];
    for (i, (text, needle, line)) in cases.iter().enumerate() {
        let (d, out) = setup(&format!("bad{i}"), text);
        let (ok, _, err) = inca(&[
            "sweep",
            d.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--quick",
            "-q",
        ]);
        assert!(!ok, "case {i} should fail");
        assert!(err.contains(needle), "case {i}: no {needle:?} in {err}");
        if *line > 0 {
            assert!(
                err.contains(&format!(":{line}:")) || err.contains(&format!("line {line}")),
                "case {i}: no line {line} in {err}"
            );
        }
    }
}

#[test]
fn the_example_descriptor_runs_under_quick() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = tmp("example");
    let (ok, stdout, err) = inca(&[
        "sweep",
        repo.join("experiments/examples/rate-sweep.toml")
            .to_str()
            .unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quick",
        "-q",
        "--format",
        "svg",
    ]);
    assert!(ok, "{err}\n{stdout}");
    // Delivered throughput grows with the offered load, for both sizes.
    let rows = csv(&out.join("plots/delivered.csv"));
    for size in ["66", "1500"] {
        let ys: Vec<f64> = rows[1..]
            .iter()
            .filter(|r| r[2] == size)
            .map(|r| r[3].parse().unwrap())
            .collect();
        assert_eq!(ys.len(), 4, "{rows:?}");
        assert!(ys.windows(2).all(|w| w[0] < w[1]), "{size}: {ys:?}");
    }
    for name in ["latency_p99", "latency_cdf_66B", "fate", "sink_throughput"] {
        assert!(out.join(format!("plots/{name}.svg")).is_file(), "{name}");
    }
    assert!(out.join("plots/latency_table.csv").is_file());
}
