//! Experiment 9 (specs/swish.md §8.2, SwiSh Fig. 5c): the rate limiter
//! through load shifts. `users` users each offer `offered_kpps` split
//! across the two spines; the split alternates phase by phase between
//! 50/50 and `split`/(100 − `split`) (90/10 by default), starting 50/50.
//! Each user may send L = `limit_kpps` across the network. The variant
//! (`variant`) is `ewo` (§7's EWO limiter, `crate::ewo::limiter`), `sdw`
//! (`crate::sdw::limiter`) or `pull` (`crate::limiter::pull`, the
//! controller every `t_ctrl_ms`). Both spines' admitted packets reach a
//! sink that counts them per user per `bin_ms`.
//!
//! Times are given at the spec's scale (`phase_ms` 5000, `bin_ms` 200,
//! `t_ctrl_ms` 1000) and divided by `time_scale`. [our choice, scale] The
//! spec's run (40 users × 2 Mpps for 5 s phases) is 400 M packets a phase;
//! the descriptor's full run uses `time_scale = 100` (phases of 50 ms,
//! bins of 2 ms, T_ctrl 10 ms ≙ 1 s), which keeps the ratios that decide
//! the shape (T_ctrl : phase, bin : phase) and keeps the rates and the
//! 1 ms estimator period (`period_us`, not scaled: a model input, and the
//! variants' own response time, which is therefore 100 × larger relative
//! to a phase than in the spec). The pull controller's RPC costs are not
//! scaled either: a cycle costs what it costs on the tofino profile.
//!
//! The result (`result` report):
//! - series `user<k>`: packets user k got through per bin (both spines),
//!   `mean`: the per-user mean;
//! - counters `phase<k>_kpps`: the per-user mean rate over phase k;
//!   `recovery_us`: the longest time, after a phase change, until a bin's
//!   per-user mean is back within 10 % of min(L, offered);
//!   `lost_permille`: packets missing against min(L, offered) over every
//!   phase after the first, in ‰ of what L allowed.

use std::net::Ipv4Addr;

use inca_apps::params::Params;
use inca_sim::engine::{NodeId, Simulation};
use inca_sim::link::ChannelConfig;
use inca_sim::metrics::{NodeReport, Series};
use inca_sim::session::SessionConfig;
use inca_switch::device::SessionId;
use inca_switch::{Nanos, PortId, Profile, Switch};
use inca_system::{BuiltinExperiment, ExperimentRun};
use inca_wire::swish::ewo::MergeKind;

use crate::ewo::config::{Propagation, VarSpec};
use crate::ewo::limiter::LimiterConfig;
use crate::limiter::hosts::{RateSink, UserSource, SINK_PORT, SOURCE_PORT};
use crate::limiter::pull::{PullController, PullProgram, RPC_RTT};
use crate::limiter::UserLimit;
use crate::topology::Topology;

/// The parameters it takes.
pub const PARAMS: &[&str] = &[
    "variant",
    "users",
    "offered_kpps",
    "limit_kpps",
    "split",
    "phases",
    "phase_ms",
    "bin_ms",
    "t_ctrl_ms",
    "time_scale",
    "period_us",
];

/// The first user's address [our choice].
pub const FIRST_USER: Ipv4Addr = Ipv4Addr::new(10, 49, 0, 0);
/// Spines.
const SPINES: usize = 2;

/// Experiment 9.
pub fn experiments() -> Vec<BuiltinExperiment> {
    vec![BuiltinExperiment {
        name: "swish-rate-limiter",
        about: "E9: per-user throughput of the EWO, SDW and pull rate limiters \
                through 50/50 ↔ 90/10 load shifts between two spines",
        params: PARAMS,
        run,
    }]
}

/// A run's shape, from the parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Setup {
    /// `ewo`, `sdw` or `pull`.
    pub variant: String,
    /// The users and their limit (out to the sink port).
    pub limit: UserLimit,
    /// Packets per second each user offers.
    pub offered_pps: u64,
    /// Percent of a user's traffic to spine 0 in the odd phases.
    pub split: u64,
    /// Phases.
    pub phases: u64,
    /// A phase's length.
    pub phase: Nanos,
    /// The sample interval.
    pub bin: Nanos,
    /// The pull controller's period.
    pub t_ctrl: Nanos,
    /// When the traffic starts (after SDW's START; a whole bin).
    pub t0: Nanos,
}

fn bad(name: &str, reason: impl Into<String>) -> String {
    format!("swish-rate-limiter: parameter {name}: {}", reason.into())
}

impl Setup {
    /// From named parameters (defaults: the descriptor's full run, SDW).
    pub fn from_params(p: &Params) -> Result<Setup, String> {
        p.check_known("swish-rate-limiter", PARAMS)
            .map_err(|e| e.to_string())?;
        let n = |name: &str, d: u64, lo: u64, hi: u64| {
            p.number(name, d, lo, hi).map_err(|e| e.to_string())
        };
        let variant = p.text("variant").unwrap_or("sdw").to_string();
        if !["ewo", "sdw", "pull"].contains(&variant.as_str()) {
            return Err(bad(
                "variant",
                format!("`{variant}`: expected ewo, sdw or pull"),
            ));
        }
        let us = 1_000;
        let limit = UserLimit {
            users: n("users", 40, 1, 1_000)? as u32,
            first_user: FIRST_USER,
            limit_pps: n("limit_kpps", 2_000, 1, 100_000)? * 1_000,
            period: n("period_us", 1_000, 1, 1_000_000)? * us,
            out_port: SINK_PORT,
        };
        limit
            .validate()
            .map_err(|e| bad("limit_kpps/period_us", e))?;
        let scale = n("time_scale", 1, 1, 1_000_000)?;
        let ms = |name: &str, d: u64| -> Result<Nanos, String> {
            let v = n(name, d, 1, 1_000_000)? * 1_000_000 / scale;
            if v == 0 {
                return Err(bad(name, "shorter than 1 ns at this time_scale"));
            }
            Ok(v)
        };
        let phase = ms("phase_ms", 5_000)?;
        let bin = ms("bin_ms", 200)?;
        if phase % bin != 0 {
            return Err(bad("bin_ms", "must divide phase_ms (after time_scale)"));
        }
        if bin % limit.period != 0 {
            // A bin must hold whole refills, or bins alias with the
            // bucket's per-period bursts.
            return Err(bad(
                "bin_ms",
                format!(
                    "{bin} ns is not a multiple of period_us ({} ns)",
                    limit.period
                ),
            ));
        }
        Ok(Setup {
            variant,
            limit,
            offered_pps: n("offered_kpps", 2_000, 1, 100_000)? * 1_000,
            split: n("split", 90, 50, 100)?,
            phases: n("phases", 4, 1, 1_000)?,
            phase,
            bin,
            t_ctrl: ms("t_ctrl_ms", 1_000)?,
            t0: (2_000_000u64).div_ceil(bin) * bin,
        })
    }

    /// Per-user rate each spine is offered in each phase.
    pub fn rates(&self, spine: usize) -> Vec<u64> {
        (0..self.phases)
            .map(|k| {
                let pct = if k % 2 == 0 { 50 } else { self.split };
                let pct = if spine == 0 { pct } else { 100 - pct };
                self.offered_pps * pct / 100
            })
            .collect()
    }

    /// When the traffic ends.
    pub fn end(&self) -> Nanos {
        self.t0 + self.phases * self.phase
    }
}

/// The switches of one variant, built into `sim` (spine i is `ids[i]`).
fn spines(s: &Setup, seed: u64) -> Result<(Simulation, Vec<NodeId>), String> {
    let l = s.limit;
    match s.variant.as_str() {
        "ewo" => {
            let cfg = crate::ewo::rig::RigConfig {
                topology: Topology::Local2,
                vars: vec![VarSpec {
                    var_id: 1,
                    kind: MergeKind::Gcnt,
                    entries: l.users,
                    propagation: Propagation::Periodic(l.period),
                }],
                limiter: Some(LimiterConfig {
                    var_id: 1,
                    users: l.users,
                    first_user: l.first_user,
                    limit_pps: l.limit_pps,
                    period: l.period,
                    out_port: l.out_port,
                }),
                seed,
                ..Default::default()
            };
            let rig = crate::ewo::rig::Rig::with_frames(&cfg, vec![Vec::new(); SPINES])?;
            Ok((rig.sim, rig.replicas))
        }
        "sdw" => {
            let mut cfg = crate::sdw::rig::RigConfig {
                topology: Topology::Local2,
                seed,
                ..Default::default()
            };
            cfg.base.rows = 1;
            cfg.base.cols = l.users;
            cfg.base.limiter = Some(l);
            let rig = crate::sdw::rig::Rig::build(&cfg, &[])?;
            Ok((rig.sim, rig.replicas))
        }
        _ => {
            let mut sim = Simulation::new(seed, 1_000_000);
            let mut ids = Vec::new();
            for i in 0..SPINES {
                let prog = PullProgram::new(l, SPINES as u32)?;
                let sw = Switch::new(Profile::tofino(), prog).map_err(|e| e.to_string())?;
                ids.push(sim.add_node(&format!("pull{i}"), Box::new(sw)));
            }
            let ctl = PullController::new(
                (0..SPINES).map(|i| SessionId(1 + i as u32)).collect(),
                s.t_ctrl,
                &l,
            );
            let c = sim.add_node("controller", Box::new(ctl));
            // Controller host 2×40G (spec §8.1); one way = RTT / 2.
            let sc = SessionConfig {
                rate_bps: 40_000_000_000,
                latency: RPC_RTT / 2,
                ..SessionConfig::default()
            };
            for (i, &id) in ids.iter().enumerate() {
                sim.add_session(&format!("rpc{i}"), SessionId(1 + i as u32), c, id, sc)?;
            }
            Ok((sim, ids))
        }
    }
}

/// Runs once.
pub fn run(p: &Params, seed: u64) -> Result<ExperimentRun, String> {
    let s = Setup::from_params(p)?;
    println!("swish-rate-limiter {} seed {seed}", s.variant);
    let (mut sim, ids) = spines(&s, seed)?;
    let mut sinks = Vec::new();
    let link = ChannelConfig {
        delay: crate::topology::SWITCH_LINK_DELAY,
        rate_bps: crate::topology::LINK_RATE_BPS,
        queue_bytes: 16 << 20,
        ..ChannelConfig::default()
    };
    for (i, &sw) in ids.iter().enumerate() {
        let dst = Ipv4Addr::new(10, 50, 0, 1 + i as u8);
        let src = UserSource::new(FIRST_USER, s.limit.users, dst, s.t0, s.phase, s.rates(i))?;
        let src = sim.add_node(&format!("users{i}"), Box::new(src));
        let sink = RateSink::new(FIRST_USER, s.limit.users, s.bin);
        let sink = sim.add_node(&format!("sink{i}"), Box::new(sink));
        let t = |e: inca_sim::engine::TopologyError| e.to_string();
        sim.connect(
            &format!("in{i}"),
            (src, 0),
            (sw, SOURCE_PORT as PortId),
            link,
            link,
        )
        .map_err(t)?;
        sim.connect(&format!("out{i}"), (sw, SINK_PORT), (sink, 0), link, link)
            .map_err(t)?;
        sinks.push(sink);
    }
    let end = s.end() + s.bin;
    sim.run_until(end, |_| {});
    let mut per_user = vec![Series::new(s.bin); s.limit.users as usize];
    for &k in &sinks {
        let sink = sim.node::<RateSink>(k).ok_or("no sink")?;
        for (u, ser) in sink.per_user.iter().enumerate() {
            for (b, v) in ser.values.iter().enumerate() {
                per_user[u].add_at(b as u64 * s.bin, *v);
            }
        }
    }
    let report = summarize(&s, per_user);
    Ok(ExperimentRun::from_sim(&sim, end).with_result("result", report))
}

/// The result report from the per-user series (see the module doc).
pub fn summarize(s: &Setup, per_user: Vec<Series>) -> NodeReport {
    let users = per_user.len().max(1) as u64;
    let bins = (s.end() / s.bin) as usize;
    let mut mean = Series::new(s.bin);
    for b in 0..bins {
        let sum: u64 = per_user.iter().filter_map(|x| x.values.get(b)).sum();
        mean.add_at(b as u64 * s.bin, sum / users);
    }
    mean.values.resize(bins, 0);
    let target = s.limit.limit_pps.min(s.offered_pps);
    // Packets per bin per user that target allows.
    let per_bin = target as f64 * s.bin as f64 / 1e9;
    let first = (s.t0 / s.bin) as usize;
    let per_phase = (s.phase / s.bin) as usize;
    let mut r = NodeReport::default();
    let (mut recovery, mut lost, mut allowed) = (0u64, 0f64, 0f64);
    for k in 0..s.phases as usize {
        let b = &mean.values[first + k * per_phase..first + (k + 1) * per_phase];
        let rate = b.iter().sum::<u64>() as f64 / (b.len() as f64 * s.bin as f64 / 1e9);
        r.counters
            .insert(format!("phase{k}_kpps"), (rate / 1_000.0).round() as u64);
        if k == 0 {
            continue;
        }
        let back = b
            .iter()
            .position(|&v| (v as f64 - per_bin).abs() <= 0.1 * per_bin)
            .unwrap_or(b.len());
        recovery = recovery.max(back as u64 * s.bin / 1_000);
        lost += b
            .iter()
            .map(|&v| (per_bin - v as f64).max(0.0))
            .sum::<f64>();
        allowed += per_bin * b.len() as f64;
    }
    r.counters.insert("recovery_us".into(), recovery);
    let permille = if allowed > 0.0 {
        1_000.0 * lost / allowed
    } else {
        0.0
    };
    r.counters
        .insert("lost_permille".into(), permille.round() as u64);
    r.counters.insert("target_kpps".into(), target / 1_000);
    for (u, ser) in per_user.into_iter().enumerate() {
        let mut ser = ser;
        ser.values.resize(bins, 0);
        r.series.insert(format!("user{u}"), ser);
    }
    r.series.insert("mean".into(), mean);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_parameters_are_named() {
        let e = Setup::from_params(&Params::parse(["variant=push"]).unwrap()).unwrap_err();
        assert!(e.contains("variant"), "{e}");
        let e = Setup::from_params(&Params::parse(["bin_ms=300"]).unwrap()).unwrap_err();
        assert!(e.contains("bin_ms"), "{e}");
        let s = Setup::from_params(&Params::parse(["time_scale=100"]).unwrap()).unwrap();
        assert_eq!(
            (s.phase, s.bin, s.t_ctrl),
            (50_000_000, 2_000_000, 10_000_000)
        );
        let e = Setup::from_params(&Params::parse(["colour=1"]).unwrap()).unwrap_err();
        assert!(e.contains("colour"), "{e}");
        let s = Setup::from_params(&Params::parse(["split=90"]).unwrap()).unwrap();
        assert_eq!(s.rates(0), vec![1_000_000, 1_800_000, 1_000_000, 1_800_000]);
        assert_eq!(s.rates(1), vec![1_000_000, 200_000, 1_000_000, 200_000]);
    }
}
