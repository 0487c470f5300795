//! CLIP live (issue 19): experiments/live/clip-snat.toml as processes — a
//! `clip_snat` switch with its controller, two `clip_server` processes
//! (SNAT, slices 20000-29999 and 30000-39999 of 198.51.100.1) and two host
//! namespaces — with real TCP through SNAT while the server group goes
//! {1} → {1, 2} → {2} (the scenario's `transitions`, 6 s and 11 s after
//! the switch started).
//!
//! iperf3 runs from 3 s to 14 s of the switch's clock (read from its
//! `inca_runner_uptime_ns`), in 0.5 s intervals, so both group changes
//! fall inside it; at 8 s (group {1, 2}) a second iperf3 opens 16 new
//! connections, at 12.5 s (group {2}) a third opens 4. dumpcap records the
//! TCP headers at s1 (the public side). The test checks: the transfer
//! completes with no error and no reset; s1 never sees the inside address;
//! the transfer's connections keep one public port each from before the
//! first change to after the second, from server 1's slice; some of the
//! 16 connections opened during {1, 2} got server 2's ports and every one
//! opened during {2} did; the switch's controller ran both transitions
//! while the transfer ran.
//!
//! Needs root, `ip`, `iperf3`, `ethtool` and `dumpcap`; without them it
//! prints one line saying why it skips. A guard takes the testbed down
//! even when an assertion fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

mod common;
use common::testbed::{metrics_at, Testbed};

const PUBLIC: [u8; 4] = [198, 51, 100, 1];
const INSIDE: [u8; 4] = [10, 0, 0, 1];
const S1: [u8; 4] = [10, 1, 0, 1];
/// The servers' slices (the scenario's `pools`).
const SLICE_1: std::ops::RangeInclusive<u16> = 20_000..=29_999;
const SLICE_2: std::ops::RangeInclusive<u16> = 30_000..=39_999;
/// The scenario's schedule, seconds of the switch's clock.
const SCALE_OUT: f64 = 6.0;
const SCALE_IN: f64 = 11.0;
/// The transfer: from, for (seconds of the switch's clock).
const MAIN_FROM: f64 = 3.0;
const MAIN_SECONDS: u32 = 11;

fn experiment(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../experiments/live")
        .join(file)
}

/// The value of the first metric whose name ends with `suffix`.
fn metric(m: &BTreeMap<String, f64>, suffix: &str) -> Option<f64> {
    m.iter().find(|(k, _)| k.ends_with(suffix)).map(|(_, v)| *v)
}

/// A process in a host's namespace.
fn in_ns(ns: &str, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).args(args);
    c
}

fn iperf3_client(ns: &str, port: u16, extra: &[&str]) -> Child {
    let port = port.to_string();
    in_ns(
        ns,
        &["timeout", "40", "iperf3", "-c", "10.1.0.1", "-p", &port],
    )
    .args(["-J", "--connect-timeout", "3000"])
    .args(extra)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap()
}

/// iperf3's JSON report and its error, if any.
fn finish(c: Child) -> (serde_json::Value, Option<String>) {
    let out = c.wait_with_output().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let error = json["error"]
        .as_str()
        .map(str::to_string)
        .or_else(|| (!out.status.success()).then(|| common::text(&out)));
    (json, error)
}

/// One TCP packet at s1: (time, src, dst, sport, dport, flags).
type Seen = (f64, [u8; 4], [u8; 4], u16, u16, u8);

/// The TCP/IPv4 packets of a pcap (libpcap format, Ethernet), times in
/// seconds since the epoch.
fn tcp_packets(pcap: &Path) -> Vec<Seen> {
    let b = std::fs::read(pcap).unwrap_or_default();
    let mut out = Vec::new();
    if b.len() < 24 {
        return out;
    }
    let magic = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let (le, nanos) = match magic {
        0xa1b2c3d4 => (true, false),
        0xa1b23c4d => (true, true),
        0xd4c3b2a1 => (false, false),
        0x4d3cb2a1 => (false, true),
        _ => panic!("{}: not a pcap file", pcap.display()),
    };
    let u32_at = |i: usize| {
        let w = [b[i], b[i + 1], b[i + 2], b[i + 3]];
        if le {
            u32::from_le_bytes(w)
        } else {
            u32::from_be_bytes(w)
        }
    };
    let mut at = 24;
    while at + 16 <= b.len() {
        let (sec, frac, len) = (u32_at(at), u32_at(at + 4), u32_at(at + 8) as usize);
        let t = f64::from(sec) + f64::from(frac) / if nanos { 1e9 } else { 1e6 };
        let f = &b[at + 16..(at + 16 + len).min(b.len())];
        at += 16 + len;
        if f.len() < 14 + 20 || f[12..14] != [0x08, 0x00] || f[14 + 9] != 6 {
            continue;
        }
        let l4 = 14 + usize::from(f[14] & 0x0f) * 4;
        if f.len() < l4 + 14 {
            continue;
        }
        let ip = |i: usize| [f[i], f[i + 1], f[i + 2], f[i + 3]];
        let port = |i: usize| u16::from_be_bytes([f[i], f[i + 1]]);
        out.push((
            t,
            ip(14 + 12),
            ip(14 + 16),
            port(l4),
            port(l4 + 2),
            f[l4 + 13],
        ));
    }
    out
}

fn epoch(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

#[test]
fn tcp_through_clip_snat_survives_scale_out_and_in() {
    skip_unless!("ip", "iperf3", "ethtool", "dumpcap");
    let tb = Testbed::up("clipsnat", &experiment("clip-snat.toml"), false);
    let (c1, s1) = (tb.namespace("c1"), tb.namespace("s1"));
    let sw = tb.metrics_addr("clip").expect("the switch's metrics");
    // The switch's clock zero, as a wall-clock time.
    let up = metrics_at(sw).and_then(|m| metric(&m, "runner_uptime_ns"));
    let zero = SystemTime::now() - Duration::from_nanos(up.expect("uptime") as u64);
    let since_zero = |t: SystemTime| t.duration_since(zero).unwrap_or_default().as_secs_f64();
    let sleep_until = |s: f64| {
        let now = since_zero(SystemTime::now());
        if s > now {
            std::thread::sleep(Duration::from_secs_f64(s - now));
        }
    };
    assert!(
        since_zero(SystemTime::now()) < MAIN_FROM - 0.5,
        "the testbed took {:.1} s to come up: too late for the schedule",
        since_zero(SystemTime::now())
    );
    let mut servers: Vec<Child> = [5201u16, 5202, 5203]
        .iter()
        .map(|p| {
            in_ns(&s1, &["iperf3", "-s", "-1", "-p", &p.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let pcap = std::env::temp_dir().join(format!("inca-clip-s1-{}.pcap", std::process::id()));
    let pcap_s = pcap.to_string_lossy().into_owned();
    let dumpcap = in_ns(
        &s1,
        &[
            "dumpcap", "-q", "-P", "-i", "eth0", "-s", "96", "-f", "tcp", "-w", &pcap_s,
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    // The controller's progress, sampled every 100 ms.
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut changes: Vec<(SystemTime, f64)> = Vec::new();
            let mut last = 0.0;
            while !stop.load(Ordering::Relaxed) {
                let t = SystemTime::now();
                if let Some(n) = metrics_at(sw).and_then(|m| metric(&m, "ctl_transitions")) {
                    if n != last {
                        changes.push((t, n));
                        last = n;
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            changes
        })
    };
    sleep_until(MAIN_FROM);
    let main_start = SystemTime::now();
    let main = iperf3_client(&c1, 5201, &["-t", &MAIN_SECONDS.to_string(), "-i", "0.5"]);
    sleep_until(SCALE_OUT + 2.0);
    let during_out = SystemTime::now();
    let (out_json, out_err) = finish(iperf3_client(
        &c1,
        5202,
        &["-P", "16", "-t", "1", "-b", "1M"],
    ));
    sleep_until(SCALE_IN + 1.5);
    let during_in = SystemTime::now();
    let (in_json, in_err) = finish(iperf3_client(&c1, 5203, &["-P", "4", "-t", "1"]));
    let (json, main_err) = finish(main);
    let main_end = SystemTime::now();
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let changes = sampler.join().unwrap();
    let m1 = tb.metrics("clip1").unwrap_or_default();
    let m2 = tb.metrics("clip2").unwrap_or_default();
    let msw = metrics_at(sw).unwrap_or_default();
    // SAFETY: kill(2) with the pid of our own child and a signal.
    unsafe { libc::kill(dumpcap.id() as i32, libc::SIGTERM) };
    let _ = dumpcap.wait_with_output();
    for s in &mut servers {
        let _ = s.kill();
        let _ = s.wait();
    }
    let seen = tcp_packets(&pcap);
    let _ = std::fs::remove_file(&pcap);

    // What happened.
    let intervals: Vec<(f64, f64)> = json["intervals"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| {
                    Some((
                        i["sum"]["start"].as_f64()?,
                        i["sum"]["bits_per_second"].as_f64()?,
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    let t0 = since_zero(main_start);
    for (s, bps) in &intervals {
        println!(
            "{:5.1} s (switch {:5.1} s) {:7.1} Mbit/s",
            s,
            s + t0,
            bps / 1e6
        );
    }
    let mean = json["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0);
    let bytes = json["end"]["sum_received"]["bytes"].as_f64().unwrap_or(0.0);
    let at: Vec<String> = changes
        .iter()
        .map(|(t, n)| format!("#{n} at {:.2} s", since_zero(*t)))
        .collect();
    println!(
        "transfer: switch {t0:.2}-{:.2} s, {:.1} MB, {:.1} Mbit/s; transitions seen: {}",
        since_zero(main_end),
        bytes / 1e6,
        mean / 1e6,
        at.join(", ")
    );
    let counters = |m: &BTreeMap<String, f64>, keys: &[&str]| -> String {
        keys.iter()
            .map(|k| format!("{k} {}", metric(m, k).unwrap_or(-1.0)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let snat = [
        "nf_app_allocated",
        "nf_app_hits",
        "nf_app_inbound_hits",
        "nf_app_inbound_misses",
        "nf_app_freed",
    ];
    // Nothing is sent or timed in the past, however late a wake comes
    // (a late wake made the servers' NIC send at the steps' own times).
    for (name, m) in [("clip1", &m1), ("clip2", &m2), ("switch", &msw)] {
        let v = metric(m, "runner_contract_violations");
        println!("{name}: runner_contract_violations {v:?}");
        assert_eq!(v, Some(0.0), "{name}");
    }
    println!("clip1: {}", counters(&m1, &snat));
    println!("clip2: {}", counters(&m2, &snat));
    println!(
        "switch: {}",
        counters(
            &msw,
            &[
                "_flight",
                "_response",
                "_fast",
                "_status_drop",
                "_invalid_drop",
                "_no_server_drop",
                "ctl_transitions",
                "ctl_pins_live",
                "ctl_failures",
                "ctl_cur_ver",
            ]
        )
    );
    // Connections at s1: dst port → the public source ports seen.
    let mut ports: BTreeMap<u16, BTreeSet<u16>> = BTreeMap::new();
    let mut span: BTreeMap<(u16, u16), (f64, f64, u64)> = BTreeMap::new();
    let mut resets = Vec::new();
    for &(t, src, dst, sp, dp, flags) in &seen {
        assert_ne!(src, INSIDE, "s1 saw the inside address");
        assert_ne!(dst, INSIDE, "s1 sent to the inside address");
        if dst == S1 {
            assert_eq!(
                src, PUBLIC,
                "every packet at s1 comes from the public address"
            );
            ports.entry(dp).or_default().insert(sp);
            let e = span.entry((dp, sp)).or_insert((t, t, 0));
            e.1 = t;
            e.2 += 1;
        }
        if flags & 0x04 != 0 {
            resets.push((t, src, sp, dp));
        }
    }
    for ((dp, sp), (a, b, n)) in &span {
        println!(
            "s1:{dp} <- {}:{sp}: {n} packets, switch {:.2}-{:.2} s",
            std::net::Ipv4Addr::from(PUBLIC),
            a - epoch(zero),
            b - epoch(zero)
        );
    }

    // The transfer completed, with no reset before the test's end: the
    // first message on its control connection after the data started
    // (TEST_END; the iperf3 server then resets the data connections it
    // closes with data unread, as it always does).
    assert!(main_err.is_none(), "iperf3 failed: {main_err:?}");
    assert!(bytes > 0.0 && mean > 1e6, "no throughput: {mean} bit/s");
    let main_ports = ports.get(&5201).cloned().unwrap_or_default();
    assert_eq!(main_ports.len(), 2, "control and data: {main_ports:?}");
    let by_count: Vec<u16> = {
        let mut v: Vec<u16> = main_ports.iter().copied().collect();
        v.sort_by_key(|p| span[&(5201, *p)].2);
        v
    };
    let (control, data) = (by_count[0], by_count[1]);
    let data_from = span[&(5201, data)].0;
    let test_end = seen
        .iter()
        .filter(|s| s.2 == S1 && s.3 == control && s.4 == 5201 && s.0 > data_from + 1.0)
        .map(|s| s.0)
        .fold(f64::INFINITY, f64::min);
    let early: Vec<_> = resets
        .iter()
        .filter(|r| (r.2 == 5201 || r.3 == 5201) && r.0 < test_end)
        .map(|r| (r.0 - epoch(zero), r.2, r.3))
        .collect();
    println!(
        "test end (TEST_END at s1) at switch {:.2} s; resets before it: {early:?}; after it: {}",
        test_end - epoch(zero),
        resets.len() - early.len()
    );
    assert!(early.is_empty(), "resets during the transfer: {early:?}");
    // Both transitions ran while it did.
    let times: Vec<f64> = changes.iter().map(|(t, _)| since_zero(*t)).collect();
    assert_eq!(
        changes.iter().map(|(_, n)| *n).collect::<Vec<_>>(),
        vec![1.0, 2.0],
        "two transitions: {at:?}"
    );
    assert!(
        times[0] > t0 && times[1] < since_zero(main_end),
        "the transitions ({times:?}) came during the transfer ({t0:.2}-{:.2} s)",
        since_zero(main_end)
    );
    // Its connections (control and data) kept one public port each, from
    // server 1's slice, from before the scale-out to after the scale-in.
    assert!(
        main_ports.iter().all(|p| SLICE_1.contains(p)),
        "{main_ports:?}"
    );
    let (first, last, _) = span[&(5201, data)];
    assert!(
        first - epoch(zero) < times[0] && last - epoch(zero) > times[1],
        "the data connection spans both changes: {:.2}-{:.2} s",
        first - epoch(zero),
        last - epoch(zero)
    );
    // New connections during {1, 2} hash over both servers.
    assert!(out_err.is_none(), "iperf3 during {{1, 2}}: {out_err:?}");
    assert!(in_err.is_none(), "iperf3 during {{2}}: {in_err:?}");
    let during = |port: u16| ports.get(&port).cloned().unwrap_or_default();
    let (p_out, p_in) = (during(5202), during(5203));
    println!(
        "opened at switch {:.2} s (group {{1, 2}}): public ports {p_out:?}",
        since_zero(during_out)
    );
    println!(
        "opened at switch {:.2} s (group {{2}}): public ports {p_in:?}",
        since_zero(during_in)
    );
    assert_eq!(p_out.len(), 17, "16 streams and the control connection");
    assert!(
        p_out.iter().any(|p| SLICE_2.contains(p)),
        "none landed on 2"
    );
    assert!(p_out
        .iter()
        .all(|p| SLICE_1.contains(p) || SLICE_2.contains(p)));
    assert_eq!(p_in.len(), 5, "4 streams and the control connection");
    assert!(
        p_in.iter().all(|p| SLICE_2.contains(p)),
        "after the scale-in: {p_in:?}"
    );
    let _ = (out_json, in_json);
    assert_eq!(
        metric(&msw, "ctl_failures"),
        Some(0.0),
        "no server declared failed"
    );
}

/// The same file in the simulator (`inca run`, no root needed), the
/// schedule shortened to 100 ms and 200 ms: the long connection (4 MB,
/// done in 3 ms) is translated from server 1's slice, and of the four
/// opened at 150 ms (group {1, 2}) some get server 2's ports.
#[test]
fn the_clip_snat_scenario_also_simulates() {
    let out_dir = std::env::temp_dir().join(format!("inca-clip-sim-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_inca"))
        .args(["run", "-q", "--out"])
        .arg(&out_dir)
        .args(["--set", "clip.params.transitions=\"100ms:1,2;200ms:2\""])
        .arg(experiment("clip-snat.toml"))
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&out_dir);
    let t = common::text(&out);
    assert!(out.status.success(), "inca run:\n{t}");
    let sinks: Vec<&str> = t.lines().filter(|l| l.contains("tcp_sink0")).collect();
    assert_eq!(sinks.len(), 5, "five connections:\n{t}");
    assert!(sinks.iter().all(|l| l.contains("completed")), "{t}");
    assert!(
        sinks[0].contains("198.51.100.1:2"),
        "the first on server 1:\n{t}"
    );
    assert!(
        sinks[1..].iter().any(|l| l.contains("198.51.100.1:3")),
        "a new connection on server 2:\n{t}"
    );
}
