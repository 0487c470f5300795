//! E9 (Thesis Fig. 4.17): how far apart the copies of a synchronised
//! counter are right after each merge, and that they end equal.
//!
//! experiments/exoplane/sync.toml runs in the simulator with ExoPlane alone
//! registered: the firewall's per-source and per-tenant counters, counted
//! by the switch for its flow-manager flows and by the smart NIC for the
//! rest, merged every `T_c` (§5.6). The run is stepped to 200 ms after
//! each round boundary (the round's MERGEs are in by then), and the
//! switch's and the NIC's copy of each synchronised cell read from their
//! data planes. Expected: ≈ 0 apart when switch and NIC count the same
//! share (50 % tail); small but steady at 30 and 40 % (each side keeps
//! counting its share between a round's snapshot and the sample); exactly
//! equal after the traffic stops.

use inca_sim::engine::Simulation;
use inca_sim::scenario::Loaded;
use inca_switch::device::Nanos;
use inca_switch::Switch;
use inca_system::{Registry, SystemFactory};

use crate::device::ExoDevice;
use crate::hub::entries::SwitchCopy;
use crate::switch::ExoSwitch;
use crate::system::ExoPlaneSystem;

/// The scenario.
const SCENARIO: &str = include_str!("../../../../experiments/exoplane/sync.toml");
const S: Nanos = 1_000_000_000;
/// Flows the client sends (the scenario's `flows`).
const FLOWS: u32 = 10;

/// One run's parameters.
#[derive(Debug, Clone)]
pub struct E9Config {
    /// Flow-manager sizes to run (tail fraction = (10 − fm) / 10).
    pub fm: Vec<u32>,
    /// When the traffic stops.
    pub stop: Nanos,
    /// Run length (at least 3 rounds after `stop`).
    pub duration: Nanos,
    /// The run seed.
    pub seed: u64,
}

impl E9Config {
    /// 12 s of traffic, 16 s in all, tails 50/40/30 %.
    pub fn full() -> Self {
        E9Config {
            fm: vec![5, 6, 7],
            stop: 12 * S,
            duration: 16 * S,
            seed: 1,
        }
    }

    /// 5 s of traffic, 8 s in all.
    pub fn quick() -> Self {
        E9Config {
            stop: 5 * S,
            duration: 8 * S,
            ..E9Config::full()
        }
    }
}

/// The copies' distance after one round.
#[derive(Debug, Clone, PartialEq)]
pub struct E9Point {
    /// The tail fraction, percent.
    pub tail_pct: u32,
    /// The sample's time, s.
    pub at_s: f64,
    /// Median over the synchronised cells of |switch copy − NIC copy|
    /// (packets).
    pub distance: f64,
    /// Cells compared.
    pub cells: usize,
    /// Whether traffic was still running.
    pub traffic: bool,
}

fn sample(sim: &Simulation, tail_pct: u32, traffic: bool) -> Option<E9Point> {
    let sw = sim.node::<Switch<ExoSwitch>>(sim.node_id("sw")?)?;
    let nic = sim.node::<Switch<ExoDevice>>(sim.node_id("nic0")?)?;
    let hub = sw.program().hub()?;
    let mut d: Vec<f64> = hub
        .entries()
        .filter(|(_, e)| e.switch == SwitchCopy::Installed && !e.deleting)
        .filter_map(|(k, _)| {
            let a = sw.program().cell_value(sw.objects(), k)?;
            let b = nic.program().cell_value(nic.objects(), k)?;
            Some(a.abs_diff(b) as f64)
        })
        .collect();
    d.sort_by(f64::total_cmp);
    let distance = match d.len() {
        0 => return None,
        n if n % 2 == 1 => d[n / 2],
        n => (d[n / 2 - 1] + d[n / 2]) / 2.0,
    };
    Some(E9Point {
        tail_pct,
        at_s: sim.now() as f64 / 1e9,
        distance,
        cells: d.len(),
        traffic,
    })
}

/// Runs every configuration; the samples of each, in time order.
pub fn run(cfg: &E9Config) -> anyhow::Result<Vec<E9Point>> {
    let registry = Registry::new(vec![std::sync::Arc::new(ExoPlaneSystem)])
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut points = Vec::new();
    for &fm in &cfg.fm {
        let set = vec![
            format!(
                "sw.params={{ apps = \"fw\", hub = 1, devices = 1, device_port = 2, fm = {fm}, flows = 4096 }}"
            ),
            format!("c1.workload.0.stop=\"{}ms\"", cfg.stop / 1_000_000),
            format!("duration=\"{}ms\"", cfg.duration / 1_000_000),
        ];
        let loaded = Loaded::from_str(SCENARIO, "experiments/exoplane/sync.toml", &set)?;
        let factory = SystemFactory::new(registry.clone());
        let mut built = loaded.build(&factory, Some(cfg.seed), None)?;
        let tail_pct = (FLOWS - fm.min(FLOWS)) * 100 / FLOWS;
        let mut t = S + S / 5;
        while t <= built.duration {
            built.sim.run_until(t, |_| {});
            if let Some(p) = sample(&built.sim, tail_pct, t < cfg.stop) {
                points.push(p);
            }
            t += S;
        }
    }
    Ok(points)
}

/// The samples as CSV.
pub fn csv(points: &[E9Point]) -> String {
    let mut s = String::from("tail_pct,at_s,distance_packets,cells,traffic\n");
    for p in points {
        s.push_str(&format!(
            "{},{:.1},{},{},{}\n",
            p.tail_pct, p.at_s, p.distance, p.cells, p.traffic
        ));
    }
    s
}

/// Per tail fraction: the median distance over the samples with traffic
/// (after the first two rounds, once the flow manager is full) and the
/// largest distance after the traffic stopped (≥ 3 rounds later).
pub fn summarise(points: &[E9Point]) -> Vec<(u32, f64, f64)> {
    let mut tails: Vec<u32> = points.iter().map(|p| p.tail_pct).collect();
    tails.sort_unstable();
    tails.dedup();
    tails
        .into_iter()
        .map(|tail| {
            let mut running: Vec<f64> = points
                .iter()
                .filter(|p| p.tail_pct == tail && p.traffic && p.at_s > 3.0)
                .map(|p| p.distance)
                .collect();
            running.sort_by(f64::total_cmp);
            let median = running.get(running.len() / 2).copied().unwrap_or(f64::NAN);
            let stop = points
                .iter()
                .filter(|p| p.tail_pct == tail && !p.traffic)
                .map(|p| p.at_s)
                .fold(f64::INFINITY, f64::min);
            let after = points
                .iter()
                .filter(|p| p.tail_pct == tail && !p.traffic && p.at_s >= stop + 2.0)
                .map(|p| p.distance)
                .fold(0.0, f64::max);
            (tail, median, after)
        })
        .collect()
}
