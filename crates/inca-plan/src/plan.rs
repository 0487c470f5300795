//! One planner run (what `inca plan` does): profile the apps, build the
//! instance, solve it, merge the switch program, and on a placement
//! failure shrink and re-solve (spec §5.9).
//!
//! Model inputs, each from the ExoPlane spec (Thesis figures where it
//! cites them):
//! - `Q_p` = 1,024 keys ([`DEFAULT_QUANTUM`], spec §5.9, [our choice] there);
//! - key popularity Zipf(0.99) ([`DEFAULT_ZIPF`], spec §8, Thesis §4.6);
//! - switch latency 273 ns at 64 B … 384 ns at 1,500 B, linear (spec §2.1,
//!   Thesis §4.6.1), device latency per app (spec §2.1: VPN 5.9, NAT 5.3,
//!   ACL 5.6, FW 5.8, SYN proxy 5.4 µs; others 5.6 µs, the middle of the
//!   thesis's 5.1–6.1 µs [our choice]). The spec asks for `L_{p,i}`
//!   measured by replaying packets in the simulator; that replay is not
//!   built, the spec's own measured values stand in.
//! - flow-manager cap 10,240 keys when asked (spec §2.1, Thesis §4.6.5).

use std::time::Instant;

use inca_apps::params::Params;
use inca_switch::placement::Placement;
use inca_switch::Profile;
use serde::Serialize;

use crate::merge::{merge, MergeApp, MergeError};
use crate::model::{Affinity, AppModel, DeviceType, Instance};
use crate::profile::{
    default_affinity, device_capacity, device_cost, feature_probe, key_param, switch_capacity,
    ProfileError, Profiler, Scaled, DEVICE_RESOURCES, SWITCH_RESOURCES,
};
use crate::solver::{Solution, SolveError, SolveOptions};

/// `Q_p` default: 1,024 keys (spec §5.9, [our choice] there).
pub const DEFAULT_QUANTUM: u64 = 1_024;
/// Zipf exponent of key popularity (spec §8: α ∈ {0.9, 0.95, 0.99}, Thesis
/// §4.6; 0.99 is the one its steady-state experiments use).
pub const DEFAULT_ZIPF: f64 = 0.99;
/// Packet size the latencies are taken at (spec §2.1 gives device latencies
/// at 1,500 B).
pub const DEFAULT_PKT_SIZE: u32 = 1_500;
/// Seed of the compatibility probe's random packets [our choice].
pub const PROBE_SEED: u64 = 1;
/// Merge attempts at most (spec §5.9: at most 10, [our choice] there).
pub const MAX_ATTEMPTS: usize = 10;
/// Shrink factor per failed merge (spec §5.9: 5 %).
pub const SHRINK: f64 = 0.95;

/// Switch pipeline latency of one pass at `size` bytes, ns: 273 ns at 64 B
/// to 384 ns at 1,500 B, linear (spec §2.1, Thesis §4.6.1).
pub fn switch_latency(size: u32) -> f64 {
    let s = f64::from(size.clamp(64, 1500));
    273.0 + (384.0 - 273.0) * (s - 64.0) / (1500.0 - 64.0)
}

/// Unloaded latency of a device-processed packet of app `app`, ns (spec
/// §2.1, Thesis §4.6.1).
pub fn device_latency(app: &str) -> f64 {
    match app {
        "vpn" => 5_900.0,
        "nat" => 5_300.0,
        "acl" => 5_600.0,
        "firewall" => 5_800.0,
        "synproxy" => 5_400.0,
        _ => 5_600.0,
    }
}

/// `Σ_{k=1..n} k^-α`: exact up to [`EXACT_TERMS`], then the midpoint
/// integral (Euler–Maclaurin; relative error below 1e-9 there).
pub fn harmonic(n: u64, alpha: f64) -> f64 {
    Harmonic::new(alpha).at(n)
}

/// Terms summed exactly by [`harmonic`].
pub const EXACT_TERMS: u64 = 2_000;

/// [`harmonic`] with the exact partial sums computed once.
struct Harmonic {
    alpha: f64,
    prefix: Vec<f64>,
}

impl Harmonic {
    fn new(alpha: f64) -> Harmonic {
        let mut prefix = Vec::with_capacity(EXACT_TERMS as usize + 1);
        let mut s = 0.0;
        prefix.push(0.0);
        for k in 1..=EXACT_TERMS {
            s += (k as f64).powf(-alpha);
            prefix.push(s);
        }
        Harmonic { alpha, prefix }
    }

    fn at(&self, n: u64) -> f64 {
        if n <= EXACT_TERMS {
            return self.prefix[n as usize];
        }
        let (a, b) = (EXACT_TERMS as f64 + 0.5, n as f64 + 0.5);
        let tail = if (self.alpha - 1.0).abs() < 1e-12 {
            (b / a).ln()
        } else {
            (b.powf(1.0 - self.alpha) - a.powf(1.0 - self.alpha)) / (1.0 - self.alpha)
        };
        self.prefix[EXACT_TERMS as usize] + tail
    }
}

/// `F_{p,q}` for `keys` keys of Zipf(`alpha`) popularity in quanta of `q`.
pub fn zipf_shares(keys: u64, q: u64, alpha: f64) -> Vec<f64> {
    let h = Harmonic::new(alpha);
    let total = h.at(keys);
    let n = keys.div_ceil(q);
    let mut prev = 0.0;
    (0..n)
        .map(|i| {
            let x = h.at(((i + 1) * q).min(keys));
            let f = (x - prev) / total;
            prev = x;
            f
        })
        .collect()
}

/// One app to plan.
#[derive(Debug, Clone)]
pub struct AppSpec {
    /// Instance name.
    pub name: String,
    /// Catalog app.
    pub app: String,
    /// Its parameters (the key parameter is set by the planner).
    pub params: Params,
    /// Keys (flows) it serves.
    pub flows: u64,
    /// `W_p` (`None`: equal shares).
    pub weight: Option<f64>,
    /// Affinity (`None`: [`default_affinity`]).
    pub affinity: Option<Affinity>,
}

/// The planner's inputs.
#[derive(Debug, Clone)]
pub struct PlanInputs {
    /// The apps.
    pub apps: Vec<AppSpec>,
    /// The switch.
    pub switch: Profile,
    /// The external devices' profile.
    pub device: Profile,
    /// How many devices.
    pub devices: usize,
    /// `Q_p`.
    pub quantum: u64,
    /// Zipf exponent of every app's keys.
    pub zipf: f64,
    /// Packet size for latencies.
    pub pkt_size: u32,
    /// Flow-manager cap in keys.
    pub fm_cap: Option<u64>,
    /// Classifier rules of the merged program.
    pub classify: String,
    /// Use the naive formulation instead of the reformulation.
    pub naive: bool,
    /// Solver options.
    pub opts: SolveOptions,
}

impl PlanInputs {
    /// Inputs with the defaults: `tofino` switch, `smartnic` devices.
    pub fn new(apps: Vec<AppSpec>, devices: usize) -> PlanInputs {
        PlanInputs {
            apps,
            switch: Profile::tofino(),
            device: Profile::smartnic(),
            devices,
            quantum: DEFAULT_QUANTUM,
            zipf: DEFAULT_ZIPF,
            pkt_size: DEFAULT_PKT_SIZE,
            fm_cap: None,
            classify: String::new(),
            naive: false,
            opts: SolveOptions::default(),
        }
    }
}

/// Why a plan failed.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// Profiling failed.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// A pre-check failed (spec §5.9: replicated state must fit the devices).
    #[error("pre-check: {0}")]
    PreCheck(String),
    /// The ILP has no solution.
    #[error(transparent)]
    Solve(#[from] SolveError),
    /// No merged program placed within the attempts.
    #[error("after {attempts} attempts the merged program still does not place: {last}")]
    Merge {
        /// Attempts made.
        attempts: usize,
        /// The last error.
        last: String,
    },
}

/// One app's allocation.
#[derive(Debug, Clone, Serialize)]
pub struct AppPlan {
    /// Instance name.
    pub name: String,
    /// Catalog app.
    pub app: String,
    /// Affinity used.
    pub affinity: Affinity,
    /// Keys.
    pub flows: u64,
    /// `N_p`.
    pub quanta: usize,
    /// `n_p`.
    pub switch_quanta: usize,
    /// `n_p · Q_p` (capped at the app's keys).
    pub switch_keys: u64,
    /// Devices holding some of its quanta.
    pub devices: usize,
    /// Expected fraction of its traffic served by the switch.
    pub switch_traffic: f64,
    /// Expected latency (4.4), ns.
    pub latency_ns: f64,
    /// Why it cannot use the devices (`C_{p,i} = 0`), if so.
    pub device_incompatible: Option<String>,
}

/// A planner run's result.
#[derive(Debug, Clone, Serialize)]
pub struct PlanReport {
    /// Per app.
    pub apps: Vec<AppPlan>,
    /// The objective (4.5), ns.
    pub objective_ns: f64,
    /// Formulation used.
    pub formulation: &'static str,
    /// The ILP's columns.
    pub columns: usize,
    /// The ILP's rows.
    pub rows: usize,
    /// HiGHS's own time of the last solve, s.
    pub highs_seconds: f64,
    /// Wall time of all solves, s.
    pub solve_seconds: f64,
    /// Profiling time, s.
    pub profile_seconds: f64,
    /// Placements the profiler ran.
    pub placements: u64,
    /// Merge time (all attempts), s.
    pub merge_seconds: f64,
    /// Solve-and-merge attempts.
    pub attempts: usize,
    /// Why earlier attempts failed.
    pub retries: Vec<String>,
    /// The merged program's resource report (`None` when no app has a
    /// switch share).
    pub placement: Option<Placement>,
    /// The merged apps.
    #[serde(skip)]
    pub merged: Vec<MergeApp>,
}

/// Profiled apps: the instance plus what the merger needs.
pub struct Profiled {
    /// The ILP instance.
    pub instance: Instance,
    /// Per app: its declarations by keys.
    pub scaled: Vec<Scaled>,
    /// Per app: why it cannot go on the devices, if so.
    pub device_notes: Vec<Option<String>>,
    /// Profiling time, s.
    pub seconds: f64,
}

/// Profiles `inputs` into an instance (spec §5.9's profiler).
pub fn profile(inputs: &PlanInputs, profiler: &mut Profiler) -> Result<Profiled, PlanError> {
    let started = Instant::now();
    let q = inputs.quantum.max(1);
    let n_apps = inputs.apps.len().max(1) as f64;
    let mut apps = Vec::new();
    let mut scaled = Vec::new();
    let mut notes = Vec::new();
    let dev_cap = device_capacity(&inputs.device);
    for spec in &inputs.apps {
        let s = Scaled::of(&spec.name, &spec.app, &spec.params, q)?;
        let affinity = spec.affinity.unwrap_or_else(|| default_affinity(&s));
        let share = if s.scales() {
            zipf_shares(spec.flows.max(1), q, inputs.zipf)
        } else {
            vec![1.0]
        };
        let fm = affinity != Affinity::High && s.scales();
        let sw = profiler.switch_cost(&spec.name, &s, fm, &inputs.switch, q, share.len());
        let device = match device_cost(&s, &inputs.device, q) {
            Ok(c) => {
                let mut small = spec.params.clone();
                if let (Some(k), true) = (key_param(&spec.app), s.scales()) {
                    small.set(k, q);
                }
                match feature_probe(&spec.app, &small, &inputs.device, PROBE_SEED) {
                    None => Ok(c),
                    Some(why) => Err(why),
                }
            }
            Err(why) => Err(why),
        };
        let device_note = device.as_ref().err().cloned();
        let device = device.ok();
        if let (Some(d), true) = (&device, inputs.devices > 0 && affinity != Affinity::High) {
            // Pre-check (spec §5.9): the app's full state, replicated twice,
            // spread over the devices, must fit one device.
            let full = d.base[0] + d.per_quantum[0] * share.len() as f64;
            let need = 2.0 * full / inputs.devices as f64;
            if need > dev_cap[0] {
                return Err(PlanError::PreCheck(format!(
                    "app {}: its state ×2 (replication) / {} devices is {:.0} KiB per device, over the {:.0} KiB a {} holds",
                    spec.name, inputs.devices, need, dev_cap[0], inputs.device.name
                )));
            }
        }
        apps.push(AppModel {
            name: spec.name.clone(),
            weight: spec.weight.unwrap_or(1.0 / n_apps),
            quantum: q,
            share,
            affinity,
            lat_switch: switch_latency(inputs.pkt_size),
            // End to end, switch in → device → switch out (spec §2.1).
            lat_device: device_latency(&spec.app),
            switch_quantum: sw.per_quantum,
            switch_base: sw.base,
            device: vec![device],
        });
        scaled.push(s);
        notes.push(device_note);
    }
    let instance = Instance {
        switch_resources: SWITCH_RESOURCES
            .iter()
            .map(|r| r.name().to_string())
            .collect(),
        switch_cap: switch_capacity(&inputs.switch),
        device_types: vec![DeviceType {
            name: inputs.device.name.clone(),
            count: inputs.devices,
            resources: DEVICE_RESOURCES.iter().map(|s| s.to_string()).collect(),
            cap: dev_cap,
        }],
        apps,
        fm_cap: inputs.fm_cap,
    };
    Ok(Profiled {
        instance,
        scaled,
        device_notes: notes,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Solves `inst` with the formulation `inputs` asks for.
pub fn solve(inputs: &PlanInputs, inst: &Instance) -> Result<Solution, SolveError> {
    if inputs.naive {
        crate::naive::solve(inst, &inputs.opts)
    } else {
        crate::reform::solve(inst, &inputs.opts)
    }
}

/// The apps with a switch share, HIGH ones first [our choice: the stage
/// allocator places in declaration order, and a fixed-size app such as
/// UnivMon has long dependency chains of stateful objects that need the
/// early stages; MEDIUM apps' tables can spread into what is left].
fn merge_apps(inputs: &PlanInputs, prof: &Profiled, n: &[usize]) -> Vec<MergeApp> {
    let mut out = Vec::new();
    let mut order: Vec<usize> = (0..inputs.apps.len()).collect();
    order.sort_by_key(|&p| prof.instance.apps[p].affinity != Affinity::High);
    for p in order {
        let spec = &inputs.apps[p];
        if n[p] == 0 {
            continue;
        }
        let a = &prof.instance.apps[p];
        let s = &prof.scaled[p];
        let keys = (n[p] as u64 * a.quantum).min(spec.flows.max(1));
        let mut params = spec.params.clone();
        if let (Some(k), true) = (key_param(&spec.app), s.scales()) {
            params.set(k, keys);
        }
        out.push(MergeApp {
            name: spec.name.clone(),
            app: spec.app.clone(),
            params,
            fm_entries: (a.affinity != Affinity::High && s.scales()).then_some(keys),
            fm_key_bits: s.union_key_bits(),
        });
    }
    out
}

/// The whole run: profile, solve, merge with retry.
pub fn plan(inputs: &PlanInputs) -> Result<PlanReport, PlanError> {
    let mut profiler = Profiler::default();
    let prof = profile(inputs, &mut profiler)?;
    plan_profiled(inputs, prof, profiler.placements)
}

/// Solve and merge an already profiled instance.
pub fn plan_profiled(
    inputs: &PlanInputs,
    mut prof: Profiled,
    placements: u64,
) -> Result<PlanReport, PlanError> {
    let mut solve_seconds = 0.0;
    let mut merge_seconds = 0.0;
    let mut retries = Vec::new();
    for attempt in 1..=MAX_ATTEMPTS {
        let sol = match solve(inputs, &prof.instance) {
            Ok(s) => s,
            Err(e) if attempt > 1 => {
                return Err(PlanError::Merge {
                    attempts: attempt - 1,
                    last: format!(
                        "{}; after shrinking, the ILP: {e}",
                        retries.last().map_or("", String::as_str)
                    ),
                })
            }
            Err(e) => return Err(e.into()),
        };
        solve_seconds += sol.wall_seconds;
        let counts = sol.assignment.counts(&prof.instance);
        let merged = merge_apps(inputs, &prof, &counts.switch);
        let t = Instant::now();
        let result = if merged.is_empty() {
            Ok(None)
        } else {
            merge(&merged, &inputs.classify, &inputs.switch).map(|(_, p)| Some(p))
        };
        merge_seconds += t.elapsed().as_secs_f64();
        match result {
            Ok(placement) => {
                return Ok(report(
                    inputs,
                    &prof,
                    &sol,
                    placement,
                    merged,
                    ReportTimes {
                        solve_seconds,
                        merge_seconds,
                        placements,
                        attempts: attempt,
                        retries,
                    },
                ))
            }
            Err(e) => {
                retries.push(e.to_string());
                shrink(&mut prof.instance, &e, &counts.switch);
            }
        }
    }
    Err(PlanError::Merge {
        attempts: MAX_ATTEMPTS,
        last: retries.pop().unwrap_or_default(),
    })
}

/// After a failed merge: every switch capacity shrinks by 5 % (spec §5.9),
/// and the MEDIUM app whose object the error names, if any, may hold at
/// most 95 % of its switch quanta [our choice: shrinking only the named app
/// lets the ILP hand what it freed to the next app, which then fails the
/// same way; shrinking only the capacities may take several rounds to reach
/// the app at fault].
fn shrink(inst: &mut Instance, e: &MergeError, n: &[usize]) {
    inst.switch_cap.iter_mut().for_each(|c| *c *= SHRINK);
    let named = e
        .app()
        .and_then(|name| inst.apps.iter().position(|a| a.name == name));
    if let Some(p) = named {
        if n[p] > 0 && inst.apps[p].affinity == Affinity::Medium {
            let keep = ((n[p] as f64 * SHRINK).floor() as usize).min(n[p] - 1);
            inst.apps[p].switch_quantum.truncate(keep);
        }
    }
}

struct ReportTimes {
    solve_seconds: f64,
    merge_seconds: f64,
    placements: u64,
    attempts: usize,
    retries: Vec<String>,
}

fn report(
    inputs: &PlanInputs,
    prof: &Profiled,
    sol: &Solution,
    placement: Option<Placement>,
    merged: Vec<MergeApp>,
    t: ReportTimes,
) -> PlanReport {
    let inst = &prof.instance;
    let counts = sol.assignment.counts(inst);
    let apps = inst
        .apps
        .iter()
        .enumerate()
        .map(|(p, a)| {
            let n = counts.switch[p];
            let spec = &inputs.apps[p];
            AppPlan {
                name: a.name.clone(),
                app: spec.app.clone(),
                affinity: a.affinity,
                flows: spec.flows,
                quanta: a.quanta(),
                switch_quanta: n,
                switch_keys: if prof.scaled[p].scales() {
                    (n as u64 * a.quantum).min(spec.flows)
                } else if n > 0 {
                    spec.flows
                } else {
                    0
                },
                devices: counts.device[p].iter().filter(|&&m| m > 0).count(),
                switch_traffic: sol.assignment.loc[p]
                    .iter()
                    .zip(&a.share)
                    .filter(|(l, _)| **l == crate::model::Loc::Switch)
                    .map(|(_, f)| f)
                    .sum(),
                latency_ns: inst.app_latency(a, &sol.assignment.loc[p]),
                device_incompatible: prof.device_notes[p].clone(),
            }
        })
        .collect();
    PlanReport {
        apps,
        objective_ns: sol.objective,
        formulation: if inputs.naive {
            "naive"
        } else {
            "reformulated"
        },
        columns: sol.columns,
        rows: sol.rows,
        highs_seconds: sol.highs_seconds,
        solve_seconds: t.solve_seconds,
        profile_seconds: prof.seconds,
        placements: t.placements,
        merge_seconds: t.merge_seconds,
        attempts: t.attempts,
        retries: t.retries,
        placement,
        merged,
    }
}

impl std::fmt::Display for PlanReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{:<12} {:<8} {:>12} {:>10} {:>12} {:>8} {:>10} {:>10}",
            "app", "affinity", "flows", "n_p", "switch keys", "devices", "switch %", "lat (ns)"
        )?;
        for a in &self.apps {
            let aff = match a.affinity {
                Affinity::High => "HIGH",
                Affinity::Medium => "MEDIUM",
                Affinity::Low => "LOW",
            };
            writeln!(
                f,
                "{:<12} {:<8} {:>12} {:>10} {:>12} {:>8} {:>10.2} {:>10.0}",
                a.name,
                aff,
                a.flows,
                a.switch_quanta,
                a.switch_keys,
                a.devices,
                100.0 * a.switch_traffic,
                a.latency_ns
            )?;
        }
        writeln!(
            f,
            "(devices: those the ILP's capacity accounting gives tail quanta; at run time the tail is hash-sharded over all devices, spec §5.7)"
        )?;
        for a in &self.apps {
            if let Some(why) = &a.device_incompatible {
                writeln!(f, "{}: not on the devices: {why}", a.name)?;
            }
        }
        writeln!(f)?;
        writeln!(
            f,
            "objective (mean latency, weighted): {:.1} ns; {} ILP, {} columns, {} rows",
            self.objective_ns, self.formulation, self.columns, self.rows
        )?;
        writeln!(
            f,
            "profile {:.3} s ({} placements); solve {:.3} s (HiGHS {:.3} s); merge {:.3} s; {} attempt(s)",
            self.profile_seconds,
            self.placements,
            self.solve_seconds,
            self.highs_seconds,
            self.merge_seconds,
            self.attempts
        )?;
        for r in &self.retries {
            writeln!(f, "retry after: {r}")?;
        }
        if let Some(p) = &self.placement {
            writeln!(f)?;
            write!(f, "Merged switch program:\n{p}")?;
        }
        Ok(())
    }
}

/// The front-end scenario's apps (spec §7–§8: VPN, NAT, ACL, UnivMon; UnivMon
/// HIGH), `flows` keys each, on `devices` smart NICs.
pub fn front_end(devices: usize, flows: u64) -> PlanInputs {
    let app = |name: &str, affinity| AppSpec {
        name: name.to_string(),
        app: name.to_string(),
        params: Params::default(),
        flows,
        weight: None,
        affinity,
    };
    PlanInputs::new(
        vec![
            app("vpn", None),
            app("nat", None),
            app("acl", None),
            app("univmon", Some(Affinity::High)),
        ],
        devices,
    )
}
