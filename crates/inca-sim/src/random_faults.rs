//! Randomised faults for test campaigns: a fault schedule drawn from the
//! run seed alone, so `inca run --seed N` replays what `inca campaign`
//! found.
//!
//! From `start` to `stop`, faults arrive with exponentially distributed
//! gaps of mean `mean_interval` (a Poisson process); each picks a kind and
//! a target and is undone after its window:
//! - `link`: a candidate link goes down, then up;
//! - `crash`: a candidate node crashes (state lost), then restarts;
//! - `pause`: a candidate node stops processing for the window;
//! - `impair`: a candidate link's loss, duplication, reordering (and its
//!   delay) and jitter are set to values drawn up to the given maxima, then
//!   restored to what the link is configured with;
//! - `partition`: the partition nodes are split into two random non-empty
//!   groups, the network is cut between them ([`crate::partition`]), then
//!   healed;
//! - `session_cut`: a candidate control session is cut, then healed (a cut
//!   longer than the session's `reset_after` resets it);
//! - `session_reset`: a candidate control session is reset;
//! - `workload_shift`: a candidate host workload's Zipf ranking moves on
//!   (the hot flows change, [`crate::workload_control`]);
//! - `workload_storm`: a candidate host workload sends `storm_factor`
//!   times faster with every flow equally popular for the window, then
//!   calms down (for a system that promotes hot flows, a promotion and
//!   eviction storm).
//!
//! ```toml
//! [random_faults]
//! start = "5ms"
//! stop = "50ms"
//! mean_interval = "8ms"
//! down_for = "4ms"                  # every window (impair: or its own `for`)
//! kinds = ["crash", "link", "impair", "partition"]
//! nodes = ["agg1", "st1"]           # crash / pause targets
//! links = ["agg1-core"]             # link flap targets
//! impair = { loss = 0.05, duplicate = 0.01, reorder = 0.05, reorder_delay = "200us", jitter = "50us", links = ["agg1-tors"], for = "4ms" }
//! partition_nodes = ["agg1", "agg2", "st1", "st2", "st3"]
//! sessions = ["hub-dev1"]           # session_cut / session_reset targets (default: all)
//! workloads = ["c1/zipf"]            # workload_shift / workload_storm targets ("host/workload")
//! storm_factor = 10                  # workload_storm's rate multiple (default 10)
//! ```

use inca_switch::device::Nanos;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::Deserialize;
use toml::Spanned;

use crate::engine::{Fault, LinkId, NodeId, Simulation};
use crate::link::{Impairment, LossModel};
use crate::quantity::{de_opt_time, de_time};
use crate::session::SessionIdx;
use crate::workload_control::WorkloadChange;

/// `[random_faults]` as written. See the module documentation.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomFaults {
    /// First possible fault.
    #[serde(default, deserialize_with = "de_opt_time")]
    pub start: Option<Nanos>,
    /// No fault starts after this.
    #[serde(default, deserialize_with = "de_opt_time")]
    pub stop: Option<Nanos>,
    /// Mean time between faults.
    #[serde(deserialize_with = "de_time")]
    pub mean_interval: Nanos,
    /// How long each lasts.
    #[serde(deserialize_with = "de_time")]
    pub down_for: Nanos,
    /// Kinds to draw from (link, crash, pause, impair, partition).
    pub kinds: Spanned<Vec<Spanned<String>>>,
    /// Candidate nodes for crash and pause (default: every switch, router
    /// and server).
    #[serde(default)]
    pub nodes: Option<Vec<Spanned<String>>>,
    /// Candidate links for link flaps (default: every link).
    #[serde(default)]
    pub links: Option<Vec<Spanned<String>>>,
    /// Maxima and candidate links of impairment windows.
    #[serde(default)]
    pub impair: Option<Spanned<ImpairSpec>>,
    /// Nodes a partition splits (default: `nodes`).
    #[serde(default)]
    pub partition_nodes: Option<Spanned<Vec<Spanned<String>>>>,
    /// Candidate control sessions for session cuts and resets (default:
    /// every session).
    #[serde(default)]
    pub sessions: Option<Vec<Spanned<String>>>,
    /// Candidate workloads for shifts and storms, as `host/workload`.
    #[serde(default)]
    pub workloads: Option<Vec<Spanned<String>>>,
    /// A storm's rate multiple (default [`DEFAULT_STORM_FACTOR`]).
    #[serde(default)]
    pub storm_factor: Option<Spanned<u32>>,
}

/// A workload storm's rate multiple unless `storm_factor` says otherwise.
pub const DEFAULT_STORM_FACTOR: u32 = 10;

/// `impair = { .. }` as written: the largest value each impairment may be
/// drawn up to (an absent one is left as configured).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImpairSpec {
    /// Largest Bernoulli loss probability.
    #[serde(default)]
    pub loss: Option<Spanned<f64>>,
    /// Largest duplication probability.
    #[serde(default)]
    pub duplicate: Option<Spanned<f64>>,
    /// Largest reordering probability.
    #[serde(default)]
    pub reorder: Option<Spanned<f64>>,
    /// Longest extra delay of a reordered frame.
    #[serde(default, deserialize_with = "de_opt_time")]
    pub reorder_delay: Option<Nanos>,
    /// Largest jitter bound.
    #[serde(default, deserialize_with = "de_opt_time")]
    pub jitter: Option<Nanos>,
    /// Window length (default: `down_for`).
    #[serde(default, rename = "for", deserialize_with = "de_opt_time")]
    pub window: Option<Nanos>,
    /// Candidate links (default: `links`).
    #[serde(default)]
    pub links: Option<Vec<Spanned<String>>>,
}

/// A kind of random fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Link down, then up.
    Link,
    /// Crash, then restart.
    Crash,
    /// Pause for the window.
    Pause,
    /// Impairment window on a link.
    Impair,
    /// Partition, then heal.
    Partition,
    /// Control-session cut, then heal.
    SessionCut,
    /// Control-session reset.
    SessionReset,
    /// A workload's popularity shifts.
    WorkloadShift,
    /// A workload storms for the window.
    WorkloadStorm,
}

impl Kind {
    /// Every kind and its name in scenarios.
    pub const ALL: [(Kind, &'static str); 9] = [
        (Kind::Link, "link"),
        (Kind::Crash, "crash"),
        (Kind::Pause, "pause"),
        (Kind::Impair, "impair"),
        (Kind::Partition, "partition"),
        (Kind::SessionCut, "session_cut"),
        (Kind::SessionReset, "session_reset"),
        (Kind::WorkloadShift, "workload_shift"),
        (Kind::WorkloadStorm, "workload_storm"),
    ];

    /// The kind called `name`.
    pub fn parse(name: &str) -> Option<Kind> {
        Kind::ALL.iter().find(|k| k.1 == name).map(|k| k.0)
    }
}

/// Upper bounds of an impairment window's values. Zero: that impairment is
/// left as configured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ImpairBounds {
    /// Largest Bernoulli loss probability.
    pub loss: f64,
    /// Largest duplication probability.
    pub duplicate: f64,
    /// Largest reordering probability.
    pub reorder: f64,
    /// Longest extra delay of a reordered frame.
    pub reorder_delay: Nanos,
    /// Largest jitter bound.
    pub jitter: Nanos,
}

impl ImpairBounds {
    /// The first bound that is wrong: (field, why).
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        for (name, p) in [
            ("loss", self.loss),
            ("duplicate", self.duplicate),
            ("reorder", self.reorder),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err((name, format!("must be within 0..=1, got {p}")));
            }
        }
        if *self == ImpairBounds::default() {
            return Err((
                "impair",
                "sets nothing: give a non-zero loss, duplicate, reorder, reorder_delay or jitter"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// A random-fault plan with its targets resolved: what [`schedule`] draws
/// from. Scenarios build it from `[random_faults]`; a campaign driving its
/// own [`Simulation`] can build one directly.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// First possible fault.
    pub start: Nanos,
    /// No fault starts at or after this.
    pub stop: Nanos,
    /// Mean time between faults (above zero).
    pub mean_interval: Nanos,
    /// Window of link, crash, pause and partition faults.
    pub down_for: Nanos,
    /// Kinds to draw from (at least one).
    pub kinds: Vec<Kind>,
    /// Crash and pause targets.
    pub nodes: Vec<NodeId>,
    /// Link flap targets.
    pub links: Vec<LinkId>,
    /// Impairment maxima.
    pub impair: ImpairBounds,
    /// Impairment targets.
    pub impair_links: Vec<LinkId>,
    /// Impairment window.
    pub impair_for: Nanos,
    /// Nodes a partition splits (two or more, distinct).
    pub partition_nodes: Vec<NodeId>,
    /// Control sessions cut or reset.
    pub sessions: Vec<SessionIdx>,
    /// Workloads shifted or stormed: (host, workload name).
    pub workloads: Vec<(NodeId, String)>,
    /// A storm's rate multiple (at least 1).
    pub storm_factor: u32,
}

impl Plan {
    /// What is wrong with the plan, if anything.
    pub fn check(&self) -> Result<(), String> {
        if self.kinds.is_empty() || self.mean_interval == 0 {
            return Err("needs at least one kind and a non-zero mean_interval".into());
        }
        if self.kinds.contains(&Kind::Impair) {
            self.impair
                .check()
                .map_err(|(f, e)| format!("impair.{f}: {e}"))?;
        }
        let session_kinds = [Kind::SessionCut, Kind::SessionReset];
        if self.sessions.is_empty() && self.kinds.iter().any(|k| session_kinds.contains(k)) {
            return Err(
                "kinds: session_cut and session_reset need a control session ([[session]])".into(),
            );
        }
        let workload_kinds = [Kind::WorkloadShift, Kind::WorkloadStorm];
        if self.workloads.is_empty() && self.kinds.iter().any(|k| workload_kinds.contains(k)) {
            return Err(
                "kinds: workload_shift and workload_storm need `workloads = [\"host/workload\", ..]`"
                    .into(),
            );
        }
        if self.storm_factor == 0 {
            return Err("storm_factor: must be at least 1".into());
        }
        if self.kinds.contains(&Kind::Partition) {
            let mut p = self.partition_nodes.clone();
            p.sort();
            p.dedup();
            if p.len() < 2 || p.len() != self.partition_nodes.len() {
                return Err(
                    "partition_nodes: a partition needs two or more distinct nodes to split".into(),
                );
            }
        }
        Ok(())
    }
}

/// Schedules `plan`'s faults in `sim`, drawn from `seed` alone; returns how
/// many were drawn. The draws for link, crash and pause faults are those
/// of the first version of this generator, so schedules of scenarios that
/// use only them did not change when the other kinds came.
pub fn schedule(plan: &Plan, sim: &mut Simulation, seed: u64) -> usize {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x6661_756c_7473);
    let mut t = plan.start;
    let mut drawn = 0;
    if plan.kinds.is_empty() || plan.mean_interval == 0 {
        return 0;
    }
    loop {
        let u: f64 = rng.gen_range(f64::EPSILON..1.0);
        t = t.saturating_add((-(u.ln()) * plan.mean_interval as f64) as Nanos);
        if t >= plan.stop {
            break;
        }
        let kind = plan.kinds[rng.gen_range(0..plan.kinds.len())];
        let end = t.saturating_add(plan.down_for);
        match kind {
            Kind::Link if !plan.links.is_empty() => {
                let l = plan.links[rng.gen_range(0..plan.links.len())];
                sim.schedule(t, Fault::LinkDown(l));
                sim.schedule(end, Fault::LinkUp(l));
            }
            Kind::Crash if !plan.nodes.is_empty() => {
                let n = plan.nodes[rng.gen_range(0..plan.nodes.len())];
                sim.schedule(t, Fault::Crash(n));
                sim.schedule(end, Fault::Restart(n));
            }
            Kind::Pause if !plan.nodes.is_empty() => {
                let n = plan.nodes[rng.gen_range(0..plan.nodes.len())];
                sim.schedule(
                    t,
                    Fault::Pause {
                        node: n,
                        duration: plan.down_for,
                    },
                );
            }
            Kind::Impair if !plan.impair_links.is_empty() => {
                let link = plan.impair_links[rng.gen_range(0..plan.impair_links.len())];
                let set = draw_impairment(&plan.impair, sim, link, &mut rng);
                if set.is_empty() {
                    continue;
                }
                let window = sim.window_id();
                sim.schedule(t, Fault::Impair { link, window, set });
                sim.schedule(
                    t.saturating_add(plan.impair_for),
                    Fault::Unimpair { link, window },
                );
            }
            Kind::Partition if plan.partition_nodes.len() >= 2 => {
                let mut nodes = plan.partition_nodes.clone();
                nodes.shuffle(&mut rng);
                let k = rng.gen_range(1..nodes.len());
                let b = nodes.split_off(k);
                let sides = crate::partition::sides(sim, [nodes, b], &mut rng);
                sim.schedule(t, Fault::PartitionSides(Box::new(sides.clone())));
                sim.schedule(end, Fault::HealSides(Box::new(sides)));
            }
            Kind::SessionCut if !plan.sessions.is_empty() => {
                let x = plan.sessions[rng.gen_range(0..plan.sessions.len())];
                sim.schedule(t, Fault::SessionCut(x));
                sim.schedule(end, Fault::SessionHeal(x));
            }
            Kind::SessionReset if !plan.sessions.is_empty() => {
                let x = plan.sessions[rng.gen_range(0..plan.sessions.len())];
                sim.schedule(t, Fault::SessionReset(x));
            }
            Kind::WorkloadShift if !plan.workloads.is_empty() => {
                let (node, workload) =
                    plan.workloads[rng.gen_range(0..plan.workloads.len())].clone();
                let change = WorkloadChange::Shift;
                sim.schedule(
                    t,
                    Fault::Workload {
                        node,
                        workload,
                        change,
                    },
                );
            }
            Kind::WorkloadStorm if !plan.workloads.is_empty() => {
                let (node, workload) =
                    plan.workloads[rng.gen_range(0..plan.workloads.len())].clone();
                let storm = WorkloadChange::Storm {
                    factor: plan.storm_factor,
                };
                sim.schedule(
                    t,
                    Fault::Workload {
                        node,
                        workload: workload.clone(),
                        change: storm,
                    },
                );
                let change = WorkloadChange::Calm;
                sim.schedule(
                    end,
                    Fault::Workload {
                        node,
                        workload,
                        change,
                    },
                );
            }
            _ => continue,
        }
        drawn += 1;
    }
    drawn
}

/// Values for one window on `link`: each impairment with a bound is drawn
/// uniformly between the link's configured value and the bound.
/// [our choice] A window never makes a link better than configured: a
/// bound at or below the configured value leaves that impairment alone
/// (and a Gilbert–Elliott loss model is left alone too). Probabilities are
/// rounded to 0.01 % and times to 1 µs, so the printed schedule is exactly
/// what ran.
fn draw_impairment(
    b: &ImpairBounds,
    sim: &Simulation,
    link: LinkId,
    rng: &mut impl Rng,
) -> Impairment {
    let Some(c) = sim.channel(link, 0).map(|c| c.config) else {
        return Impairment::default();
    };
    // One draw per field whether used or not, so one field's bound does
    // not shift another's value.
    let mut u = || rng.gen::<f64>();
    let prob = |lo: f64, hi: f64, u: f64| {
        (hi > lo).then(|| (((lo + u * (hi - lo)) * 1e4).round() / 1e4).clamp(lo, hi))
    };
    let time = |lo: Nanos, hi: Nanos, u: f64| {
        (hi > lo).then(|| {
            let v = lo as f64 + u * (hi - lo) as f64;
            let v = if hi >= 1_000 {
                (v / 1_000.0).round() as Nanos * 1_000
            } else {
                v as Nanos
            };
            v.clamp(lo, hi)
        })
    };
    let lo_loss = match c.loss {
        LossModel::None => Some(0.0),
        LossModel::Bernoulli { p } => Some(p),
        LossModel::GilbertElliott { .. } => None,
    };
    let (u_loss, u_dup, u_reo, u_delay, u_jit) = (u(), u(), u(), u(), u());
    Impairment {
        loss: lo_loss
            .and_then(|lo| prob(lo, b.loss, u_loss))
            .map(|p| LossModel::Bernoulli { p }),
        duplicate: prob(c.duplicate, b.duplicate, u_dup),
        reorder: prob(c.reorder, b.reorder, u_reo),
        reorder_delay: time(c.reorder_delay, b.reorder_delay, u_delay),
        jitter: time(c.jitter, b.jitter, u_jit),
    }
}
