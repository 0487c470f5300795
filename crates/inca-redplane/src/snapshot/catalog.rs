//! The bounded-mode programs by name, for scenarios and `inca check`:
//! `redplane_hh` ([`HeavyHitterSketch`]) and `redplane_async_counter`
//! ([`AsyncCounter`]), each composed with [`BoundedSwitch`]. Parameters are
//! the app's plus [`SnapshotConfig::PARAMS`].

use std::any::Any;

use inca_apps::params::Params;
use inca_sim::engine::Node;
use inca_sim::metrics::NodeReport;
use inca_switch::{Device, DeviceRng, Input, Nanos, Output, Profile, Switch};

use super::apps::{AsyncCounter, BoundedApp, HeavyHitterSketch};
use super::config::SnapshotConfig;
use super::program::BoundedSwitch;

/// The program names this module builds, with a description.
pub const PROGRAMS: &[(&str, &str)] = &[
    (
        "redplane_hh",
        "heavy-hitter count-min sketches per VLAN, snapshotted to a RedPlane store",
    ),
    (
        "redplane_async_counter",
        "1024 per-flow-hash counters, snapshotted to a RedPlane store",
    ),
];

/// The parameters program `name` takes (`None` for a name that is not a
/// bounded-mode program).
pub fn params_of(name: &str) -> Option<Vec<&'static str>> {
    match name {
        "redplane_hh" => Some(known(HeavyHitterSketch::PARAMS)),
        "redplane_async_counter" => Some(known(AsyncCounter::PARAMS)),
        _ => None,
    }
}

fn known(app: &[&'static str]) -> Vec<&'static str> {
    let mut k = app.to_vec();
    k.extend_from_slice(SnapshotConfig::PARAMS);
    k
}

/// The program `name` with `params`, as a `BoundedSwitch` for `profile`.
pub fn program_hh(
    params: &Params,
    profile: &Profile,
) -> Result<BoundedSwitch<HeavyHitterSketch>, String> {
    params
        .check_known("redplane_hh", &known(HeavyHitterSketch::PARAMS))
        .map_err(|e| e.to_string())?;
    let app = HeavyHitterSketch::from_params(params).map_err(|e| e.to_string())?;
    bounded(app, params, profile)
}

/// The Async-Counter program with `params` for `profile`.
pub fn program_async_counter(
    params: &Params,
    profile: &Profile,
) -> Result<BoundedSwitch<AsyncCounter>, String> {
    params
        .check_known("redplane_async_counter", &known(AsyncCounter::PARAMS))
        .map_err(|e| e.to_string())?;
    let app = AsyncCounter::from_params(params).map_err(|e| e.to_string())?;
    bounded(app, params, profile)
}

fn bounded<A: BoundedApp>(
    app: A,
    params: &Params,
    profile: &Profile,
) -> Result<BoundedSwitch<A>, String> {
    let cfg = SnapshotConfig::from_params(params).map_err(|e| e.to_string())?;
    let sw = BoundedSwitch::new(app, cfg).for_profile(profile);
    sw.plan()?;
    Ok(sw)
}

/// A bounded-mode switch as a simulator node: the switch's own report plus
/// the snapshot counters (`snap_*`).
pub struct BoundedNode<A: BoundedApp>(pub Switch<BoundedSwitch<A>>);

impl<A: BoundedApp> Device for BoundedNode<A> {
    fn start(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.0.start(now, rng, out)
    }
    fn handle(&mut self, now: Nanos, input: Input, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.0.handle(now, input, rng, out)
    }
    fn restart(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.0.restart(now, rng, out)
    }
}

impl<A: BoundedApp> Node for BoundedNode<A> {
    fn kind(&self) -> &'static str {
        "switch"
    }

    fn report(&self, now: Nanos) -> NodeReport {
        let mut r = Node::report(&self.0, now);
        let s = self.0.program().stats();
        for (k, v) in [
            ("snap_bursts", s.bursts),
            ("snap_generator_errors", s.generator_errors),
            ("snap_requests", s.requests),
            ("snap_retransmissions", s.retransmissions),
            ("snap_gave_up", s.gave_up),
            ("snap_acks", s.acks),
            ("snap_partition_commits", s.partition_commits),
            ("snap_epoch_commits", s.epoch_commits),
            ("snap_lease_requests", s.lease_requests),
            ("snap_restores", s.restores),
            ("snap_restore_ignored", s.restore_ignored),
            ("snap_short_lease_restores", s.short_lease_restores),
            ("snap_rejects", s.rejects),
            ("snap_epsilon_fired", s.epsilon_fired),
            ("snap_withdrawn_drops", s.withdrawn_drops),
            ("snap_awaiting_lease_drops", s.awaiting_lease_drops),
            ("snap_updates", s.updates),
            ("snap_malformed", s.malformed),
            ("snap_reports", s.reports),
        ] {
            r.counters.insert(k.to_string(), v);
        }
        if let Some(e) = self.0.program().config_error() {
            r.notes.push(format!("snapshot stream not started: {e}"));
        }
        r
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn node<A: BoundedApp>(p: BoundedSwitch<A>, profile: &Profile) -> Result<Box<dyn Node>, String> {
    let sw = Switch::new(profile.clone(), p).map_err(|e| e.to_string())?;
    Ok(Box::new(BoundedNode(sw)))
}

/// Builds program `program` as a simulator node ([`BoundedNode`]) on
/// `profile`.
pub fn build(program: &str, params: &Params, profile: &Profile) -> Result<Box<dyn Node>, String> {
    match program {
        "redplane_hh" => node(program_hh(params, profile)?, profile),
        "redplane_async_counter" => node(program_async_counter(params, profile)?, profile),
        _ => Err(format!(
            "unknown bounded-mode program {program:?}; known: {}",
            PROGRAMS.iter().map(|p| p.0).collect::<Vec<_>>().join(", ")
        )),
    }
}
