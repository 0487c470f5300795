//! Spec §8.2 experiment 6: SDW window advance under full switch load. On
//! symmetric-2 (one NF pipe per switch), each replica's app host pushes
//! 130 B update requests at a given rate into a snake through the data
//! ports ([`crate::sdw::config::Snake`]): every pass through the pipeline
//! updates the sketch, and every snake port carries the stream both
//! ways. The sync traffic keeps to the replication and loopback ports.
//! The run reports the window-advance intervals at replica 1 with and
//! without the load.
//!
//! [our choice] The load is one stream per switch at `load_gbps` (default
//! line rate, 100 Gb/s: 83.3 Mpps of 130 B frames with 20 B of preamble
//! and gap) entering on the app port, snaked through `pairs` cabled port
//! pairs (default 13: ports 3–28, every port that is not app (0),
//! replication (1, 2) or loopback (30, 31); port 29 is left without a
//! partner), for `duration_us` of simulated time (the simulator's budget:
//! at line rate and 13 pairs, 2.25 G pipeline passes per second per
//! switch).

use inca_apps::params::Params;
use inca_sim::link::ChannelConfig;
use inca_sim::metrics::{LatencyHistogram, NodeReport};
use inca_switch::Nanos;
use inca_system::{BuiltinExperiment, ExperimentRun};

use super::default_rows;
use inca_wire::builder::{build_udp_frame, Endpoints};

use crate::addr::{ReplicaAddr, Rid};
use crate::sdw::app::{AppRequest, APP_PORT, OP_UPDATE};
use crate::sdw::config::Snake;
use crate::sdw::rig::{host_addr, percentile, Rig, RigConfig, Topology};

/// The experiment's parameters.
///
/// `col_shift` divides `cols` by 2^shift (at least 1 column), so a quick
/// sweep keeps the full sweep's axis (`result/cols` says what ran).
pub const PARAMS: &[&str] = &[
    "col_shift",
    "cols",
    "rows",
    "load_gbps",
    "pairs",
    "frame",
    "duration_us",
];

/// E6's registration.
pub fn experiments() -> Vec<BuiltinExperiment> {
    vec![BuiltinExperiment {
        name: "swish-sdw-full-load",
        about: "SDW window-advance intervals on symmetric-2 with 130 B updates snaked \
                through every data port at line rate (spec §8.2 exp. 6), or without",
        params: PARAMS,
        run,
    }]
}

/// The first snake port: past the app port (0) and the replication ports
/// of symmetric-2 (1, 2).
const SNAKE_FIRST: u16 = 3;
/// Preamble, start delimiter and inter-frame gap per frame on the wire.
const WIRE_OVERHEAD: u64 = 20;
/// How often the load host releases a burst (the link serializes it).
const BURST_EVERY: Nanos = 1_000;

/// What one run measured.
#[derive(Debug, Clone, Default)]
pub struct LoadRun {
    /// Sorted advance intervals at replica 1 (ns).
    pub intervals: Vec<Nanos>,
    /// Load frames the hosts sent.
    pub frames: u64,
    /// Bytes the snake's first cable carried (replica 1), both ways.
    pub snake_bytes: u64,
}

/// A padded update request of `size` bytes from host `i` to its replica.
fn load_frame(i: usize, req_id: u32, size: usize) -> Result<Vec<u8>, String> {
    let req = AppRequest {
        op: OP_UPDATE,
        req_id,
        key: req_id % 4_096,
        value: 1,
    };
    // The rig's addressing: replica i is rid i + 1.
    let replica = &ReplicaAddr::conventional(i as Rid + 1, i as Rid + 1);
    let me = host_addr(i);
    let base = req.frame(&me, replica);
    // The payload is the frame's tail (no IP options); pad it.
    let pad = size.saturating_sub(base.len());
    let mut payload = base[base.len() - crate::sdw::app::APP_LEN..].to_vec();
    payload.resize(payload.len() + pad, 0);
    let ep = Endpoints::new(me.mac, me.ip, replica.mac, replica.ip);
    build_udp_frame(&ep, APP_PORT, APP_PORT, &payload, false).map_err(|e| e.to_string())
}

/// Runs symmetric-2 with `rows` × `cols` for `duration` after START, with
/// `load_gbps` of `frame`-byte updates per switch snaked through `pairs`
/// port pairs (0 Gb/s: no load).
pub fn measure(
    rows: u8,
    cols: u32,
    load_gbps: u64,
    pairs: u16,
    frame: usize,
    duration: Nanos,
    seed: u64,
) -> Result<(Rig, LoadRun), String> {
    let mut cfg = RigConfig {
        topology: Topology::Symmetric2,
        seed,
        ..RigConfig::default()
    };
    cfg.base.rows = rows;
    cfg.base.cols = cols;
    cfg.base.snake = Some(Snake {
        first: SNAKE_FIRST,
        pairs,
    });
    let end = cfg.start_at + duration;
    let mut frames = 0u64;
    // Frames per burst, carried as a remainder so the mean rate is exact.
    let bits_per_frame = (frame as u64 + WIRE_OVERHEAD) * 8;
    let n = cfg.topology.replicas();
    let mut load = Vec::new();
    for i in 0..n {
        let mut script = Vec::new();
        let mut owed = 0u64;
        let mut t = cfg.start_at;
        while load_gbps > 0 && t < end {
            owed += load_gbps * BURST_EVERY;
            while owed >= bits_per_frame {
                owed -= bits_per_frame;
                frames += 1;
                script.push((t, load_frame(i, frames as u32, frame)?));
            }
            t += BURST_EVERY;
        }
        load.push(script);
    }
    let mut rig = Rig::build_loaded(&cfg, &[], &load)?;
    drop(load);
    for i in 0..n {
        let node = rig.replicas[i];
        for k in 0..pairs {
            let p = SNAKE_FIRST + 2 * k;
            // A short cable [our choice: no propagation to speak of].
            let ch = ChannelConfig {
                delay: 0,
                rate_bps: 100_000_000_000,
                queue_bytes: 16 << 20,
                ..ChannelConfig::default()
            };
            rig.sim
                .connect(
                    &format!("snake{}-{p}", i + 1),
                    (node, p),
                    (node, p + 1),
                    ch,
                    ch,
                )
                .map_err(|e| e.to_string())?;
        }
    }
    rig.sim.run_until(end, |_| {});
    let s = rig.switch(0).ok_or("no replica")?;
    let times: Vec<Nanos> = s.program().advances.iter().map(|a| a.1).collect();
    let mut intervals: Vec<Nanos> = times.windows(2).map(|w| w[1] - w[0]).collect();
    intervals.sort_unstable();
    let snake_bytes = rig
        .sim
        .link_reports()
        .iter()
        .filter(|r| r.link == format!("snake1-{SNAKE_FIRST}"))
        .map(|r| r.stats.delivered_bytes)
        .sum();
    Ok((
        rig,
        LoadRun {
            intervals,
            frames,
            snake_bytes,
        },
    ))
}

fn run(p: &Params, seed: u64) -> Result<ExperimentRun, String> {
    let name = "swish-sdw-full-load";
    p.check_known(name, PARAMS).map_err(|e| e.to_string())?;
    let e = |e: inca_apps::params::ParamError| e.to_string();
    let cols = p.count("cols", 1, 1 << 20).map_err(e)? as u32;
    let shift = p.number("col_shift", 0, 0, 20).map_err(e)?;
    let cols = (cols >> shift).max(1);
    let rows = p
        .number("rows", default_rows(cols).into(), 1, 3)
        .map_err(e)? as u8;
    let load = p.number("load_gbps", 100, 0, 100).map_err(e)?;
    let pairs = p.number("pairs", 13, 1, 13).map_err(e)? as u16;
    let frame = p.number("frame", 130, 74, 1_500).map_err(e)? as usize;
    let duration = p.number("duration_us", 1_000, 1, 100_000).map_err(e)? * 1_000;
    let (rig, m) = measure(rows, cols, load, pairs, frame, duration, seed)?;
    let mut r = NodeReport::default();
    let mut h = LatencyHistogram::default();
    for &v in &m.intervals {
        h.record(v);
    }
    r.histograms.insert("advance".into(), h);
    for (k, v) in [
        ("advances", m.intervals.len() as u64),
        ("p50_ns", percentile(&m.intervals, 50.0)),
        ("p99_ns", percentile(&m.intervals, 99.0)),
        ("load_frames", m.frames),
        ("snake_port_bytes", m.snake_bytes),
        // Frame bytes per direction of the first snake cable, Mb/s.
        ("snake_port_mbps", m.snake_bytes * 8 * 1_000 / 2 / duration),
        ("cols", u64::from(cols)),
    ] {
        r.counters.insert(k.into(), v);
    }
    let now = rig.sim.now();
    Ok(ExperimentRun::from_sim(&rig.sim, now).with_result("result", r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_snake_carries_line_rate_and_bad_params_are_named() {
        let seed = 1;
        println!("seed {seed}");
        let p = Params::parse(["pairs=1", "duration_us=80", "load_gbps=100"]).unwrap();
        let r = run(&p, seed).unwrap();
        let res = &r.nodes.iter().find(|n| n.0 == "result").unwrap().2;
        // 130 B of every 150 B on the wire at 100 Gb/s: 86.7 Gb/s of
        // frames per direction, less what is still in flight at the end.
        let mbps = res.counters["snake_port_mbps"];
        assert!((80_000..=86_700).contains(&mbps), "{mbps} Mb/s");
        assert!(res.counters["advances"] > 2, "{:?}", res.counters);
        for bad in ["pairs=14", "load_gbps=101", "frame=20", "nope=1"] {
            let e = run(&Params::parse([bad]).unwrap(), 1).unwrap_err();
            let name = bad.split('=').next().unwrap();
            assert!(e.contains(name), "{bad}: {e}");
        }
    }
}
