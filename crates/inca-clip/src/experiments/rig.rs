//! The testbed the CLIP experiments run on: experiments/clip/testbed.toml
//! built by the simulator's scenario loader with CLIP and the plain apps
//! registered (CLIP's programs and `clip_server`, the `composite` program
//! and `sw_nat` of the software baseline), changed by `--set`-style
//! overrides, and read in windows: what the sink received and its latency
//! histogram between two times, so a warm-up stays out of the figures.
//!
//! The CLIP system is handed in by whoever registers the experiments
//! (`crate::system`), so this module does not name the system that names
//! it.

use std::sync::Arc;

use inca_sim::engine::{Node, NodeId, Simulation};
use inca_sim::metrics::{LatencyHistogram, NodeReport};
use inca_sim::nodes::host::Host;
use inca_sim::scenario::Loaded;
use inca_switch::device::Nanos;
use inca_system::apps::AppsSystem;
use inca_system::{ExperimentRun, Registry, System, SystemFactory};

/// The scenario.
pub const TESTBED: &str = include_str!("../../../../experiments/clip/testbed.toml");
/// Where it is, for messages.
pub const TESTBED_PATH: &str = "experiments/clip/testbed.toml";
/// The testbed's link rate, bits per second (§8.1: 40 Gbps).
pub const LINK_BPS: u64 = 40_000_000_000;
/// Bytes a frame occupies on a link beyond its bytes without FCS:
/// preamble and start delimiter 8, FCS 4, inter-frame gap 12 (the
/// simulator's links count the same).
pub const WIRE_OVERHEAD: u64 = 24;

/// The testbed, built and running.
pub struct Testbed {
    /// The simulation.
    pub sim: Simulation,
    gen: NodeId,
    sink: NodeId,
}

/// What the generator and the sink had done by some time.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// When.
    pub at: Nanos,
    /// Frames the generator sent.
    pub sent: u64,
    /// Frames the sink received.
    pub received: u64,
    /// Bytes (frames without FCS) the sink received.
    pub received_bytes: u64,
    /// The sink's one-way latency histogram.
    pub latency: LatencyHistogram,
}

impl Testbed {
    /// The testbed with `set` applied, for `seed`, its CLIP devices built
    /// by `clip` (the CLIP system).
    pub fn build(set: &[String], seed: u64, clip: Arc<dyn System>) -> Result<Testbed, String> {
        let registry =
            Registry::new(vec![clip, Arc::new(AppsSystem)]).map_err(|e| e.to_string())?;
        let loaded = Loaded::from_str(TESTBED, TESTBED_PATH, set).map_err(|e| e.to_string())?;
        let built = loaded
            .build(&SystemFactory::new(registry), Some(seed), None)
            .map_err(|e| e.to_string())?;
        let sim = built.sim;
        let id = |name: &str| {
            sim.node_id(name)
                .ok_or_else(|| format!("{TESTBED_PATH} has no node {name:?}"))
        };
        let (gen, sink) = (id("gen")?, id("sink")?);
        Ok(Testbed { sim, gen, sink })
    }

    /// Runs to `t`.
    pub fn run_until(&mut self, t: Nanos) {
        self.sim.run_until(t, |_| {});
    }

    fn host(&self, id: NodeId) -> Result<NodeReport, String> {
        let host = self
            .sim
            .node::<Host>(id)
            .ok_or_else(|| format!("{TESTBED_PATH}: node {id:?} is not a host"))?;
        Ok(Node::report(host, self.sim.now()))
    }

    /// What the generator and the sink have done so far.
    pub fn snapshot(&self) -> Result<Snapshot, String> {
        let (gen, sink) = (self.host(self.gen)?, self.host(self.sink)?);
        let c = |r: &NodeReport, k: &str| r.counters.get(k).copied().unwrap_or(0);
        Ok(Snapshot {
            at: self.sim.now(),
            sent: c(&gen, "tx_packets"),
            received: c(&sink, "rx_packets"),
            received_bytes: c(&sink, "rx_bytes"),
            latency: sink.histograms.get("latency").cloned().unwrap_or_default(),
        })
    }

    /// Every device's and link's report so far, as a built-in
    /// experiment's run.
    pub fn run_report(&self) -> ExperimentRun {
        ExperimentRun::from_sim(&self.sim, self.sim.now())
    }
}

/// The samples `after` holds that `before` did not: the histogram of a
/// window, from two snapshots of one growing histogram. Each bucket keeps
/// its representative value (the histogram's resolution, 3 significant
/// digits).
pub fn window(before: &LatencyHistogram, after: &LatencyHistogram) -> LatencyHistogram {
    let counts = |h: &LatencyHistogram| {
        // The CDF's fractions are cumulative counts over the total; back
        // to counts per bucket (exact: counts are far below 2^53).
        let n = h.count() as f64;
        let mut prev = 0u64;
        h.cdf()
            .into_iter()
            .map(|(v, f)| {
                let cum = (f * n).round() as u64;
                let c = cum.saturating_sub(prev);
                prev = cum;
                (v, c)
            })
            .collect::<std::collections::BTreeMap<u64, u64>>()
    };
    let old = counts(before);
    let mut out = LatencyHistogram::default();
    for (v, c) in counts(after) {
        for _ in 0..c.saturating_sub(old.get(&v).copied().unwrap_or(0)) {
            out.record(v);
        }
    }
    out
}

/// The generator's packet rate for frames of `frame` bytes (without FCS):
/// its cap, or the link's rate if lower (§8.1: max 25 Mpps and ≤ line
/// rate).
pub fn generator_pps(frame: u64, cap_pps: u64) -> u64 {
    let line = LINK_BPS / ((frame + WIRE_OVERHEAD) * 8);
    line.min(cap_pps)
}

/// Rates between two snapshots `a` and `b`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rates {
    /// Frames the generator sent, per second.
    pub offered_pps: u64,
    /// Frames the sink received, per second.
    pub delivered_pps: u64,
    /// The sink's frames with their FCS, Mbit/s (L2).
    pub delivered_l2_mbps: u64,
}

/// The rates over the window from `a` to `b` (none if it is empty).
pub fn rates(a: &Snapshot, b: &Snapshot) -> Rates {
    let window = b.at.saturating_sub(a.at).max(1);
    let per_s = |n: u64| (u128::from(n) * 1_000_000_000 / u128::from(window)) as u64;
    let delivered = b.received - a.received;
    // L2 bits: the frames as received plus their FCS.
    let l2_bits = (b.received_bytes - a.received_bytes + 4 * delivered) * 8;
    Rates {
        offered_pps: per_s(b.sent - a.sent),
        delivered_pps: per_s(delivered),
        delivered_l2_mbps: (u128::from(l2_bits) * 1_000 / u128::from(window)) as u64,
    }
}

/// Counter `key` summed over the run's nodes of kind `kind`.
pub fn sum_counter(run: &ExperimentRun, kind: &str, key: &str) -> u64 {
    run.nodes
        .iter()
        .filter(|(_, k, _)| *k == kind)
        .map(|(_, _, r)| r.counters.get(key).copied().unwrap_or(0))
        .sum()
}

/// Overrides that slow every CLIP server by `k` (each cost per packet
/// times `k`): with the offered rate divided by `k`, the cores see the
/// same load in k times fewer packets (quick mode; 1 changes nothing).
pub fn server_slowdown(k: u64) -> Vec<String> {
    if k == 1 {
        return Vec::new();
    }
    let io = crate::scenario::ClipServerParams::default().costs.fixed_ns;
    let c = crate::scenario::ClipCosts::default();
    ["clip1", "clip2"]
        .iter()
        .flat_map(|s| {
            [
                format!("{s}.params.costs={{ fixed_ns = {} }}", io * k),
                format!(
                    "{s}.params.clip_costs={{ shim_ns = {}, lookup_ns = {}, alloc_ns = {} }}",
                    c.shim_ns * k,
                    c.lookup_ns * k,
                    c.alloc_ns * k
                ),
            ]
        })
        .collect()
}

/// A report of counters, for an experiment's `result` node.
pub fn counters(pairs: &[(&str, u64)]) -> NodeReport {
    let mut r = NodeReport::default();
    for (k, v) in pairs {
        r.counters.insert((*k).to_string(), *v);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::ClipSystem;

    fn build(set: &[&str]) -> Result<Testbed, String> {
        let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
        Testbed::build(&set, 1, Arc::new(ClipSystem))
    }

    #[test]
    fn a_window_holds_the_samples_between_two_snapshots() {
        let mut h = LatencyHistogram::default();
        for v in [100, 200, 200, 300] {
            h.record(v);
        }
        let before = h.clone();
        for v in [200, 400, 400] {
            h.record(v);
        }
        let w = window(&before, &h);
        assert_eq!(w.count(), 3);
        let s = w.summary();
        assert_eq!((s.min, s.max), (200, 400));
        assert_eq!(window(&h, &h).count(), 0);
    }

    #[test]
    fn the_generator_is_capped_at_25_mpps_and_at_line_rate() {
        // 64 B with FCS: 60 B + 24 on the wire, 59.5 Mpps at 40 Gbps.
        assert_eq!(generator_pps(60, 25_000_000), 25_000_000);
        // 1518 B: 1514 + 24 = 1538 B, 3.25 Mpps.
        assert_eq!(generator_pps(1514, 25_000_000), 3_250_975);
    }

    #[test]
    fn the_testbed_builds_and_refuses_a_bad_server_field_by_name() {
        assert!(build(&[]).is_ok());
        let bad = build(&["clip1.params.app=\"nat\""]).err().unwrap();
        assert!(bad.contains("app") && bad.contains("clip1"), "{bad}");
        let bad = build(&["clip1.params.app=\"snat\""]).err().unwrap();
        assert!(bad.contains("pool"), "{bad}");
        let bad = build(&["clip2.params.cores=0"]).err().unwrap();
        assert!(bad.contains("cores"), "{bad}");
        let bad = build(&["clip2.params.bogus=1"]).err().unwrap();
        assert!(bad.contains("bogus"), "{bad}");
    }
}
