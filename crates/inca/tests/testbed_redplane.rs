//! Live RedPlane failover (issue 7): the three-layer NAT testbed of
//! experiments/live/redplane-failover.toml run as processes, an iperf3
//! transfer through it, and the aggregation switch carrying the transfer
//! crashed mid-way (`inca testbed crash`: process killed, interfaces down,
//! the routers see the carrier drop). With RedPlane the connection survives
//! and its throughput recovers (the test prints the recovery time); with
//! the plain NAT (experiments/live/nat-failover.toml) the same crash breaks
//! it.
//!
//! Needs root, `ip`, `iperf3` and `ethtool`; without them the live tests
//! print one line saying why they skip. A guard takes the testbed down even
//! when an assertion fails.
//!
//! Timing: iperf3 runs 12 s in 0.25 s intervals; the crash comes 4 s after
//! iperf3 starts. The routers detect a dead port after 50 ms (plus the
//! runner's 5 ms link poll); RedPlane's lease is the spec's 1 s, so the
//! surviving switch gets the flow's state about 1 s after the crash, and
//! Linux's TCP retransmission backoff decides when the transfer resumes.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

mod common;
use common::testbed::Testbed;
use common::text;

const INCA: &str = env!("CARGO_BIN_EXE_inca");
/// iperf3's run time, its reporting interval, and when the crash comes.
const IPERF_SECONDS: u32 = 12;
const INTERVAL: &str = "0.25";
const CRASH_AFTER: Duration = Duration::from_secs(4);

fn experiment(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../experiments/live")
        .join(file)
}

/// What happened to the transfer.
struct Transfer {
    /// (start, end, bit/s) of each interval, seconds since iperf3 started.
    intervals: Vec<(f64, f64, f64)>,
    /// iperf3's error, if it failed.
    error: Option<String>,
    /// When the crash came, seconds since iperf3 started.
    crash_at: f64,
    /// The switch crashed.
    victim: String,
}

impl Transfer {
    fn mean(&self, from: f64, to: f64) -> f64 {
        let v: Vec<f64> = self
            .intervals
            .iter()
            .filter(|i| i.0 >= from && i.1 <= to)
            .map(|i| i.2)
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    }
}

/// iperf3 from c1 to s1 through the testbed, crashing the aggregation
/// switch that carries it after [`CRASH_AFTER`].
fn transfer_with_crash(tb: &Testbed) -> Transfer {
    let mut server = Command::new("ip")
        .args(["netns", "exec", &tb.namespace("s1"), "iperf3", "-s", "-1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let secs = IPERF_SECONDS.to_string();
    let started = Instant::now();
    let client = Command::new("timeout")
        .args(["40", "ip", "netns", "exec", &tb.namespace("c1")])
        .args([
            "iperf3", "-c", "10.1.0.1", "-t", &secs, "-i", INTERVAL, "-J",
        ])
        .args(["--connect-timeout", "3000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Which switch carries the data: the one whose interfaces move the
    // most bytes in the second before the crash (the other may carry the
    // ACKs, a few percent of the bytes).
    std::thread::sleep(CRASH_AFTER - Duration::from_secs(1));
    let before = [tb.bytes("agg1"), tb.bytes("agg2")];
    std::thread::sleep(CRASH_AFTER.saturating_sub(started.elapsed()));
    let moved = [tb.bytes("agg1") - before[0], tb.bytes("agg2") - before[1]];
    let victim = if moved[0] >= moved[1] { "agg1" } else { "agg2" };
    let crash_at = started.elapsed().as_secs_f64();
    let out = tb.inca(&["crash", victim]);
    assert!(
        out.status.success(),
        "testbed crash failed:\n{}",
        text(&out)
    );
    println!(
        "crashed {victim} at {crash_at:.2} s (bytes in the second before: agg1 {}, agg2 {})",
        moved[0], moved[1]
    );
    let out = client.wait_with_output().unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let intervals = json["intervals"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| {
                    let s = &i["sum"];
                    Some((
                        s["start"].as_f64()?,
                        s["end"].as_f64()?,
                        s["bits_per_second"].as_f64()?,
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    let error = json["error"]
        .as_str()
        .map(str::to_string)
        .or_else(|| (!out.status.success()).then(|| text(&out)));
    Transfer {
        intervals,
        error,
        crash_at,
        victim: victim.to_string(),
    }
}

fn show(t: &Transfer) -> String {
    t.intervals
        .iter()
        .map(|(s, _, b)| format!("{s:5.2}s {:7.1} Mbit/s", b / 1e6))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn with_redplane_the_transfer_survives_a_switch_crash_and_recovers() {
    skip_unless!("ip", "iperf3", "ethtool");
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tb = Testbed::up("rpfail", &experiment("redplane-failover.toml"), true);
    let t = transfer_with_crash(&tb);
    println!("{}", show(&t));
    assert!(
        t.error.is_none(),
        "the connection broke although RedPlane kept its state: {:?}\n{}",
        t.error,
        show(&t)
    );
    // Pre-crash throughput, skipping the slow-start second.
    let pre = t.mean(1.0, t.crash_at);
    assert!(pre > 1e6, "no throughput before the crash:\n{}", show(&t));
    let half = pre / 2.0;
    // The crash hit the transfer: some interval after it fell below half.
    let dip = t
        .intervals
        .iter()
        .find(|i| i.0 >= t.crash_at - 0.25 && i.2 < half)
        .unwrap_or_else(|| {
            panic!(
                "the crash of {} did not hit the transfer:\n{}",
                t.victim,
                show(&t)
            )
        });
    // Recovered: the first interval after the dip back above half.
    let back = t
        .intervals
        .iter()
        .find(|i| i.0 > dip.0 && i.2 >= half)
        .unwrap_or_else(|| panic!("throughput never recovered:\n{}", show(&t)));
    let post = t.mean(back.1, f64::INFINITY);
    println!(
        "RedPlane live failover: {} crashed at {:.2} s; throughput {:.0} Mbit/s before, back above half in the interval ending {:.2} s: recovery time {:.2} s (resolution {INTERVAL} s); {:.0} Mbit/s after",
        t.victim,
        t.crash_at,
        pre / 1e6,
        back.1,
        back.1 - t.crash_at,
        post / 1e6
    );
    assert!(
        post >= half,
        "throughput did not stay recovered ({post} vs {pre}):\n{}",
        show(&t)
    );
    // A lease period (1 s) plus detection, plus TCP's retransmission backoff.
    assert!(
        back.1 - t.crash_at < 5.0,
        "recovery took {:.2} s",
        back.1 - t.crash_at
    );
}

#[test]
fn without_redplane_the_same_crash_breaks_the_transfer() {
    skip_unless!("ip", "iperf3", "ethtool");
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tb = Testbed::up("natfail", &experiment("nat-failover.toml"), true);
    let t = transfer_with_crash(&tb);
    println!("{}", show(&t));
    let pre = t.mean(1.0, t.crash_at);
    assert!(pre > 1e6, "no throughput before the crash:\n{}", show(&t));
    // Broken: iperf3 failed (reset), or nothing got through after the
    // routers moved the flow (detection plus a second of grace).
    let after = t.mean(t.crash_at + 1.0, f64::INFINITY);
    println!(
        "plain NAT live failover: {} crashed at {:.2} s; {:.0} Mbit/s before, {:.1} Mbit/s after; iperf3 error: {:?}",
        t.victim,
        t.crash_at,
        pre / 1e6,
        after / 1e6,
        t.error
    );
    assert!(
        t.error.is_some() || after < pre / 20.0,
        "the connection survived a NAT crash without RedPlane:\n{}",
        show(&t)
    );
}

/// The same files run in the simulator (`inca run`): a short run that
/// builds everything, before the crash.
#[test]
fn the_failover_experiments_also_simulate() {
    for f in ["redplane-failover.toml", "nat-failover.toml"] {
        let out_dir =
            std::env::temp_dir().join(format!("inca-live-sim-{}-{f}", std::process::id()));
        let out = Command::new(INCA)
            .args(["run", "-q", "--set", "duration=20ms", "--out"])
            .arg(&out_dir)
            .arg(experiment(f))
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&out_dir);
        assert!(out.status.success(), "inca run {f}:\n{}", text(&out));
        let t = text(&out);
        assert!(
            t.contains("10.1.0.1:5001: open"),
            "{f}: the transfer runs:\n{t}"
        );
    }
}
