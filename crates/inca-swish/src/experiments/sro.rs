//! SwiSh §8.2 experiments 2, 3 and 4 on the SRO NAT (specs/swish.md):
//! the NAT on one switch (a chain of one) against SRO on a chain, both
//! built by [`crate::sro::rig`] and fed by [`crate::sro::trace`].
//!
//! - `swish-sro-nat-latency` (exp. 2): the CAIDA-like trace; per-packet
//!   latency histograms of read and update packets.
//! - `swish-sro-nat-throughput` (exp. 3): handshakes first, then 64-byte
//!   packets at line rate into one port; the rate the sinks saw.
//! - `swish-sro-update-rate` (exp. 4): every packet a new connection at an
//!   offered rate; mean and p99 latency and the commit rate.
//!
//! Each reports its computed numbers under `result` (histograms in ns).

use inca_apps::params::Params;
use inca_sim::metrics::{LatencyHistogram, NodeReport};
use inca_switch::Nanos;
use inca_system::{BuiltinExperiment, ExperimentRun};

use crate::sro::latency::{quantile, trace_latency, update_rate};
use crate::sro::rig::{Host, Rig, RigConfig};
use crate::sro::trace::{handshakes_then_blast, CaidaLike};

const LATENCY: &[&str] = &[
    "replicas",
    "packets",
    "new_permille",
    "conn_rate",
    "max_flow",
];
const THROUGHPUT: &[&str] = &["replicas", "flows", "window_us", "frame_bytes"];
const RATE: &[&str] = &["replicas", "rate", "duration_ms", "drain_ms"];
/// Bound on the connections one update-rate run offers.
const MAX_CONNECTIONS: u64 = 1_000_000;

/// Exp. 2, 3 and 4.
pub fn experiments() -> Vec<BuiltinExperiment> {
    vec![
        BuiltinExperiment {
            name: "swish-sro-nat-latency",
            about: "SwiSh §8.2 exp. 2: a CAIDA-like trace (Pareto 1.2 flows, 64-1500 B, ~21 % new connections) through the NAT on `replicas` switches (1: single); per-packet latency of read and update packets",
            params: LATENCY,
            run: run_latency,
        },
        BuiltinExperiment {
            name: "swish-sro-nat-throughput",
            about: "SwiSh §8.2 exp. 3: `flows` connections opened, then `frame_bytes` packets at 100 Gbps into one switch for `window_us`; the delivered packet rate",
            params: THROUGHPUT,
            run: run_throughput,
        },
        BuiltinExperiment {
            name: "swish-sro-update-rate",
            about: "SwiSh §8.2 exp. 4: every packet a new connection, Poisson at `rate` per second for `duration_ms`; mean and p99 latency and the commit rate",
            params: RATE,
            run: run_rate,
        },
    ]
}

fn replicas(p: &Params) -> Result<usize, String> {
    Ok(p.count("replicas", 2, 8).map_err(|e| e.to_string())? as usize)
}

fn histogram(v: &[Nanos]) -> LatencyHistogram {
    let mut h = LatencyHistogram::default();
    for &x in v {
        h.record(x);
    }
    h
}

fn run_latency(p: &Params, seed: u64) -> Result<ExperimentRun, String> {
    p.check_known("swish-sro-nat-latency", LATENCY)
        .map_err(|e| e.to_string())?;
    let e = |e: inca_apps::params::ParamError| e.to_string();
    let trace = CaidaLike {
        packets: p.count("packets", 10_000, 1_000_000).map_err(e)?,
        new_fraction: p.number("new_permille", 210, 1, 1000).map_err(e)? as f64 / 1000.0,
        conn_rate: p.count("conn_rate", 1_000, 1_000_000).map_err(e)? as f64,
        max_flow: p.count("max_flow", 1_000, 1_000_000).map_err(e)? as u32,
        ..CaidaLike::default()
    };
    let (rig, tr, s) = trace_latency(replicas(p)?, seed, &trace)?;
    let mut r = NodeReport::default();
    r.histograms.insert("read".into(), histogram(&s.read));
    r.histograms.insert("update".into(), histogram(&s.update));
    let delivered = (s.read.len() + s.update.len()) as u64;
    let c = &mut r.counters;
    c.insert("packets".into(), tr.packets);
    c.insert("flows".into(), u64::from(tr.flows));
    c.insert(
        "new_permille".into(),
        u64::from(tr.flows) * 1000 / tr.packets.max(1),
    );
    c.insert("delivered".into(), delivered);
    c.insert("read_packets".into(), s.read.len() as u64);
    c.insert("update_packets".into(), s.update.len() as u64);
    for (name, v) in [("read", &s.read), ("update", &s.update)] {
        c.insert(format!("{name}_p50_ns"), quantile(v, 0.5));
        c.insert(format!("{name}_p99_ns"), quantile(v, 0.99));
    }
    let mut run = ExperimentRun::from_sim(&rig.sim, rig.sim.now()).with_result("result", r);
    run.highlights.push(format!(
        "{} packets of {} connections; {} read, {} update; p50 read {} ns, update {} ns",
        tr.packets,
        tr.flows,
        s.read.len(),
        s.update.len(),
        quantile(&s.read, 0.5),
        quantile(&s.update, 0.5)
    ));
    Ok(run)
}

fn run_throughput(p: &Params, seed: u64) -> Result<ExperimentRun, String> {
    p.check_known("swish-sro-nat-throughput", THROUGHPUT)
        .map_err(|e| e.to_string())?;
    let e = |e: inca_apps::params::ParamError| e.to_string();
    let flows = p.count("flows", 64, 4_096).map_err(e)? as u32;
    // 10 ms at line rate is 1.5 M scripted frames.
    let window = p.count("window_us", 1_000, 10_000).map_err(e)? * 1_000;
    // 64 B on the wire: a 60-byte frame plus the FCS.
    let frame = p.number("frame_bytes", 64, 64, 1500).map_err(e)? as usize - 4;
    let cfg = RigConfig {
        replicas: replicas(p)?,
        seed,
        ..RigConfig::default()
    };
    // Handshakes 200 µs apart [our choice]: 5,000 a second, half the
    // head's write ceiling (E4), so none queues behind another; the blast
    // starts 5 ms after the last, when every write has long committed
    // (about 0.1-0.3 ms each unloaded, E2).
    let (start, gap) = (cfg.start, 200_000);
    let blast_at = start + u64::from(flows) * gap + 5_000_000;
    let tr = handshakes_then_blast(cfg.replicas, flows, start, gap, blast_at, window, frame)?;
    let blast = tr.packets - u64::from(flows);
    let mut rig = Rig::with_scripts(&cfg, tr.scripts)?;
    let end = blast_at + window + 1_000_000;
    rig.run_until(end);
    let committed = rig.observations().len() as u64;
    let sink = rig.sim.node::<Host>(rig.outside[0]).ok_or("no sink")?;
    let (n, span) = (sink.other, sink.other_span.unwrap_or((0, 0)));
    let pps = if n > 1 && span.1 > span.0 {
        (n - 1) as f64 * 1e9 / (span.1 - span.0) as f64
    } else {
        0.0
    };
    let bits = (frame as u64 + inca_sim::link::WIRE_OVERHEAD_BYTES) * 8;
    let line = crate::sro::trace::LINE_RATE_BPS as f64 / bits as f64;
    let mut r = NodeReport::default();
    let c = &mut r.counters;
    c.insert("handshakes_committed".into(), committed);
    c.insert("offered".into(), blast);
    c.insert("delivered".into(), n);
    c.insert("pps".into(), pps as u64);
    c.insert("line_rate_pps".into(), line as u64);
    c.insert("permille_of_line".into(), (pps / line * 1000.0) as u64);
    c.insert("tunnelled".into(), tunnelled(&rig));
    let mut run = ExperimentRun::from_sim(&rig.sim, end).with_result("result", r);
    run.highlights.push(format!(
        "{committed}/{flows} handshakes committed; {n}/{blast} blast packets delivered at {:.1} Mpps (line {:.1})",
        pps / 1e6,
        line / 1e6
    ));
    Ok(run)
}

/// Reads the switches sent to the tail (pending writes): none once every
/// handshake committed.
fn tunnelled(rig: &Rig) -> u64 {
    rig.sim
        .node_reports()
        .iter()
        .filter_map(|(_, _, r)| r.counters.get("sro.tunnelled").copied())
        .sum()
}

fn run_rate(p: &Params, seed: u64) -> Result<ExperimentRun, String> {
    p.check_known("swish-sro-update-rate", RATE)
        .map_err(|e| e.to_string())?;
    let e = |e: inca_apps::params::ParamError| e.to_string();
    let rate = p.count("rate", 10_000, 10_000_000).map_err(e)?;
    let duration = p.count("duration_ms", 100, 10_000).map_err(e)? * 1_000_000;
    let drain = p.number("drain_ms", 50, 0, 10_000).map_err(e)? * 1_000_000;
    // Every connection is a scripted frame and a flow key (2^24 of them).
    if rate * (duration / 1_000_000) > MAX_CONNECTIONS * 1_000 {
        return Err(format!(
            "rate x duration_ms offers more than {MAX_CONNECTIONS} connections: lower rate or duration_ms"
        ));
    }
    let (rig, u) = update_rate(replicas(p)?, seed, rate as f64, duration, drain)?;
    let mut r = NodeReport::default();
    r.histograms.insert("latency".into(), histogram(&u.latency));
    let mean = if u.latency.is_empty() {
        0
    } else {
        u.latency.iter().sum::<u64>() / u.latency.len() as u64
    };
    let per_s = |n: u64| n * 1_000_000_000 / duration;
    let c = &mut r.counters;
    c.insert("offered".into(), u.offered);
    c.insert("offered_per_s".into(), per_s(u.offered));
    c.insert("delivered".into(), u.latency.len() as u64);
    c.insert("goodput_per_s".into(), per_s(u.in_window));
    c.insert("mean_ns".into(), mean);
    c.insert("p50_ns".into(), quantile(&u.latency, 0.5));
    c.insert("p99_ns".into(), quantile(&u.latency, 0.99));
    c.insert("held_full".into(), u.held_full);
    c.insert("refused".into(), u.refused);
    c.insert("retransmits".into(), u.retransmits);
    c.insert("sequenced".into(), u.sequenced);
    c.insert("cpu_events".into(), u.cpu_events);
    c.insert("cp_ops".into(), u.cp_ops);
    c.insert("head_cp_ops".into(), u.head_cp_ops);
    c.insert("head_cpu_events".into(), u.head_cpu_events);
    let mut run = ExperimentRun::from_sim(&rig.sim, rig.sim.now()).with_result("result", r);
    run.highlights.push(format!(
        "{} offered ({rate}/s), {} delivered, {} in the window; mean {mean} ns, p99 {} ns; {} dropped (held full), {} retransmits",
        u.offered,
        u.latency.len(),
        u.in_window,
        quantile(&u.latency, 0.99),
        u.held_full,
        u.retransmits
    ));
    Ok(run)
}
