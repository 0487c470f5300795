//! The profiler (spec §5.9): what each quantum of an app's keys costs on
//! each device profile, computed from the program's own declarations by
//! the platform's placement model, not from tables.
//!
//! An app is declared twice, with its key parameter (`flows` for NAT, VPN,
//! firewall…; `size` for the ACL) at `Q` and `2Q` keys. The objects whose
//! sizes differ are the key-scaled ones; their entries are affine in the
//! keys, so the declarations at any number of keys follow without
//! re-declaring. Then:
//!
//! - **Switch** (a pipelined profile): the base cost `B` is the placement
//!   with the key-scaled objects empty; `U(n)` the placement at `n·Q` keys
//!   (plus the flow manager `fm_<app>` of `n·Q` entries for apps that are not
//!   HIGH, spec §5.9 merger step 3); the most quanta that fit alone by
//!   bisection. Marginal costs are the slopes of the greatest convex
//!   minorant of `U` sampled at most [`SAMPLES`] + 1 times
//!   ([`convex_minorant`]): nondecreasing, as the cost contract of
//!   [`crate::model`] requires, and following the long-run growth rather
//!   than the block rounding of the first quanta; the largest gap between
//!   `U` and the minorant at a sample is added to the base, so the model
//!   bounds `U` at every sample [our choice: the merger's compile-with-retry
//!   absorbs what rounding hides between samples]. Placements are cached by
//!   (app, keys), so a sweep over flows re-places nothing.
//! - **Device** (a run-to-completion profile): state bytes grow exactly
//!   linearly with entries (the demand formulas), so a quantum costs the
//!   bytes of `Q` more keys, whichever quantum it is; the base is the state
//!   and the stateful ALUs (compute units) of the empty objects.
//! - **Compatibility** `C_{p,i}`: the app's objects place on the profile
//!   (a feature the profile lacks, e.g. ternary matching, fails there) and
//!   the app, run on a switch of that profile against the load check's
//!   packet set, asks for no feature the profile lacks (recirculation,
//!   resubmit, mirroring: `SwitchStats::feature_drops`).

use std::collections::HashMap;

use inca_apps::catalog::{with_app, AppVisitor};
use inca_apps::params::Params;
use inca_switch::objects::Declare;
use inca_switch::placement::{place, ObjectDecl, ObjectKind};
use inca_switch::resources::{Resource, SRAM_BLOCK_BYTES};
use inca_switch::table::MatchKind;
use inca_switch::{Profile, Program};

use crate::model::{Affinity, DeviceCost};

/// Chord segments of the switch cost curve, at most [our choice].
pub const SAMPLES: usize = 64;

/// The switch resources the ILP constrains (spec §5.9: SRAM, TCAM, hash
/// bits, SALUs, map RAM).
pub const SWITCH_RESOURCES: [Resource; 5] = [
    Resource::SramBlocks,
    Resource::TcamBlocks,
    Resource::MapRamBlocks,
    Resource::StatefulAlus,
    Resource::HashBits,
];

/// Device resource names (spec §5.9: NIC compute units, SRAM and DRAM;
/// the placement model spills on-chip state to DRAM, so on-chip and DRAM
/// bytes are one pool here [our choice]).
pub const DEVICE_RESOURCES: [&str; 2] = ["state KiB", "compute units"];

/// The parameter that sets how many keys app `app` holds, if any [our
/// choice: the catalog's parameter names; apps without one have a fixed
/// size, like the UnivMon sketch].
pub fn key_param(app: &str) -> Option<&'static str> {
    match app {
        "nat" | "vpn" | "firewall" | "synproxy" | "netcache" | "lb" | "epc" | "kvstore"
        | "ratelimit" => Some("flows"),
        "acl" => Some("size"),
        _ => None,
    }
}

/// Why an app cannot be profiled.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The catalog refused the app or its parameters.
    #[error("app {app:?}: {source}")]
    Catalog {
        /// The app's instance name.
        app: String,
        /// The catalog's error.
        source: inca_apps::catalog::CatalogError,
    },
    /// The program refused its own declarations.
    #[error("app {app:?}: declaring its objects: {reason}")]
    Declare {
        /// The app.
        app: String,
        /// The program's error.
        reason: String,
    },
    /// A key-scaled object does not grow linearly with the keys.
    #[error("app {app:?}: object {object:?} does not grow linearly with {param}")]
    NotLinear {
        /// The app.
        app: String,
        /// The object.
        object: String,
        /// The key parameter.
        param: String,
    },
}

struct Decls;
impl AppVisitor for Decls {
    type Output = Result<Vec<ObjectDecl>, String>;
    fn visit<P: Program>(self, mut program: P) -> Self::Output {
        let mut d = Declare::default();
        program.declare(&mut d).map_err(|e| e.to_string())?;
        Ok(d.decls())
    }
}

/// An app's declarations as a function of its keys.
#[derive(Debug, Clone)]
pub struct Scaled {
    /// The declarations at `Q` keys (or as given, for fixed-size apps).
    pub decls: Vec<ObjectDecl>,
    /// `(index, entries at 0 keys, entries per key)` of key-scaled objects.
    pub scaled: Vec<(usize, f64, f64)>,
}

impl Scaled {
    /// Declares app `app` with `params` and finds its key-scaled objects.
    pub fn of(name: &str, app: &str, params: &Params, q: u64) -> Result<Scaled, ProfileError> {
        let err = |reason: String| ProfileError::Declare {
            app: name.to_string(),
            reason,
        };
        let declare = |p: &Params| -> Result<Vec<ObjectDecl>, ProfileError> {
            with_app(app, p, Decls)
                .map_err(|source| ProfileError::Catalog {
                    app: name.to_string(),
                    source,
                })?
                .map_err(err)
        };
        let Some(param) = key_param(app) else {
            return Ok(Scaled {
                decls: declare(params)?,
                scaled: Vec::new(),
            });
        };
        let at = |keys: u64| {
            let mut p = params.clone();
            p.set(param, keys);
            declare(&p)
        };
        let (d1, d2, d4) = (at(q)?, at(2 * q)?, at(4 * q)?);
        let mut scaled = Vec::new();
        for (i, ((a, b), c)) in d1.iter().zip(&d2).zip(&d4).enumerate() {
            let (Some(e1), Some(e2), Some(e4)) =
                (a.kind.entries(), b.kind.entries(), c.kind.entries())
            else {
                continue;
            };
            if e1 == e2 && e2 == e4 {
                continue;
            }
            let slope = (e2 as f64 - e1 as f64) / q as f64;
            let predicted = e1 as f64 + slope * 3.0 * q as f64;
            if (predicted - e4 as f64).abs() > 0.5 {
                return Err(ProfileError::NotLinear {
                    app: name.to_string(),
                    object: a.name.clone(),
                    param: param.to_string(),
                });
            }
            scaled.push((i, e1 as f64 - slope * q as f64, slope));
        }
        Ok(Scaled { decls: d1, scaled })
    }

    /// The declarations at `keys` keys.
    pub fn at(&self, keys: u64) -> Vec<ObjectDecl> {
        let mut d = self.decls.clone();
        for &(i, e0, slope) in &self.scaled {
            let n = (e0 + slope * keys as f64).round().max(0.0) as u64;
            d[i].kind = d[i].kind.with_entries(n);
        }
        d
    }

    /// Whether any object scales with the keys.
    pub fn scales(&self) -> bool {
        !self.scaled.is_empty()
    }

    /// Widest key of a key-scaled table: the union key's width, which the
    /// flow manager matches on [our choice; 104 bits, a 5-tuple, if none].
    pub fn union_key_bits(&self) -> u32 {
        self.scaled
            .iter()
            .filter_map(|&(i, _, _)| match self.decls[i].kind {
                ObjectKind::Table { key_bits, .. } => Some(key_bits),
                _ => None,
            })
            .max()
            .unwrap_or(104)
    }
}

/// The flow manager of an app (spec §5.9 merger step 3, §5.10): an exact
/// table on the union key, one entry per switch-served key, with idle
/// timeout for aging; its action data is one bit (served here) [our
/// choice].
pub fn flow_manager(app: &str, key_bits: u32, entries: u64) -> ObjectDecl {
    ObjectDecl {
        name: format!("fm_{app}"),
        kind: ObjectKind::Table {
            kind: MatchKind::Exact,
            key_bits,
            action_data_bits: 1,
            entries,
            idle_timeout: true,
        },
        gress: inca_switch::Gress::Ingress,
        after: Vec::new(),
        vliw_slots: 1,
    }
}

/// An app's costs on the switch.
#[derive(Debug, Clone, PartialEq)]
pub struct SwitchCost {
    /// Marginal cost of each quantum that fits, per [`SWITCH_RESOURCES`].
    pub per_quantum: Vec<Vec<f64>>,
    /// Base cost.
    pub base: Vec<f64>,
    /// Why the app cannot be on the switch at all, if so.
    pub incompatible: Option<String>,
}

/// The profiler, with its cache of placements.
#[derive(Default)]
pub struct Profiler {
    /// `(app instance, keys) → used resources` (`None`: does not fit).
    cache: HashMap<(String, u64), Option<Vec<f64>>>,
    /// Placements run (cache misses), for the report.
    pub placements: u64,
}

impl Profiler {
    fn switch_use(
        &mut self,
        name: &str,
        s: &Scaled,
        fm: bool,
        profile: &Profile,
        keys: u64,
    ) -> Option<Vec<f64>> {
        let key = (format!("{name}/{}/{fm}", profile.name), keys);
        if let Some(v) = self.cache.get(&key) {
            return v.clone();
        }
        self.placements += 1;
        let mut decls = s.at(keys);
        if fm {
            decls.push(flow_manager(name, s.union_key_bits(), keys));
        }
        let v = place(profile, &decls)
            .ok()
            .map(|p| SWITCH_RESOURCES.iter().map(|&r| p.used[r] as f64).collect());
        self.cache.insert(key, v.clone());
        v
    }

    /// What app `name` costs on the switch `profile`, for up to `quanta`
    /// quanta of `q` keys; `fm`: charge a flow manager.
    pub fn switch_cost(
        &mut self,
        name: &str,
        s: &Scaled,
        fm: bool,
        profile: &Profile,
        q: u64,
        quanta: usize,
    ) -> SwitchCost {
        let base = match self.switch_use(name, s, fm, profile, 0) {
            Some(b) => b,
            None => {
                let why = place(profile, &s.at(0))
                    .err()
                    .map_or("does not fit".to_string(), |e| e.to_string());
                return SwitchCost {
                    per_quantum: Vec::new(),
                    base: vec![0.0; SWITCH_RESOURCES.len()],
                    incompatible: Some(why),
                };
            }
        };
        if !s.scales() {
            // A fixed-size app: one quantum, all of it in the base.
            return SwitchCost {
                per_quantum: vec![vec![0.0; SWITCH_RESOURCES.len()]; quanta.min(1)],
                base,
                incompatible: None,
            };
        }
        // The most quanta that fit alone: bisection on [0, quanta].
        let (mut lo, mut hi) = (0usize, quanta);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if self
                .switch_use(name, s, fm, profile, mid as u64 * q)
                .is_some()
            {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        let fit = lo;
        let step = fit.div_ceil(SAMPLES).max(1);
        let mut points: Vec<(usize, Vec<f64>)> = vec![(0, vec![0.0; base.len()])];
        let mut n = 0usize;
        while n < fit {
            n = (n + step).min(fit);
            let u = self
                .switch_use(name, s, fm, profile, n as u64 * q)
                .expect("fewer quanta than a fitting size fit too");
            points.push((n, u.iter().zip(&base).map(|(u, b)| u - b).collect()));
        }
        let mut per_quantum = vec![vec![0.0; base.len()]; fit];
        let mut base = base;
        for r in 0..base.len() {
            let xy: Vec<(f64, f64)> = points.iter().map(|(n, u)| (*n as f64, u[r])).collect();
            let (slopes, gap) = convex_minorant(&xy);
            for (k, w) in points.windows(2).enumerate() {
                for c in &mut per_quantum[w[0].0..w[1].0] {
                    c[r] = slopes[k];
                }
            }
            base[r] += gap;
        }
        SwitchCost {
            per_quantum,
            base,
            incompatible: None,
        }
    }
}

/// The greatest convex minorant of the points `xy` (x increasing, the
/// first at the origin): its slope over each interval between consecutive
/// points (nondecreasing), and the largest amount by which a point lies
/// above it. Adding that gap to the base makes the model an upper bound at
/// every sample while its marginals follow the long-run slope, not the
/// rounding of the first few blocks.
pub fn convex_minorant(xy: &[(f64, f64)]) -> (Vec<f64>, f64) {
    // Lower hull, monotone chain.
    let mut hull: Vec<usize> = Vec::new();
    for i in 0..xy.len() {
        while hull.len() >= 2 {
            let (a, b) = (xy[hull[hull.len() - 2]], xy[hull[hull.len() - 1]]);
            let c = xy[i];
            let cross = (b.0 - a.0) * (c.1 - a.1) - (b.1 - a.1) * (c.0 - a.0);
            if cross <= 0.0 {
                hull.pop();
            } else {
                break;
            }
        }
        hull.push(i);
    }
    let mut slopes = Vec::with_capacity(xy.len().saturating_sub(1));
    let mut gap = 0.0f64;
    for w in hull.windows(2) {
        let (a, b) = (xy[w[0]], xy[w[1]]);
        let slope = (b.1 - a.1) / (b.0 - a.0);
        for p in &xy[w[0]..w[1]] {
            slopes.push(slope);
            gap = gap.max(p.1 - (a.1 + slope * (p.0 - a.0)));
        }
    }
    (slopes, gap)
}

/// Capacities of a switch profile for [`SWITCH_RESOURCES`].
pub fn switch_capacity(profile: &Profile) -> Vec<f64> {
    SWITCH_RESOURCES
        .iter()
        .map(|&r| (profile.stage_budget[r] * u64::from(profile.stages)) as f64)
        .collect()
}

/// Capacities of a device profile for [`DEVICE_RESOURCES`].
pub fn device_capacity(profile: &Profile) -> Vec<f64> {
    let sram = profile.stage_budget[Resource::SramBlocks] * SRAM_BLOCK_BYTES;
    vec![
        (profile.dram_bytes + sram) as f64 / 1024.0,
        profile.stage_budget[Resource::StatefulAlus] as f64,
    ]
}

/// State bytes of `decls` on `profile`.
pub fn state_bytes(decls: &[ObjectDecl], profile: &Profile) -> u64 {
    decls.iter().map(|d| d.demand(profile).bytes).sum()
}

/// What app `s` costs on the run-to-completion `profile` per quantum of
/// `q` keys, or why it cannot go there.
pub fn device_cost(s: &Scaled, profile: &Profile, q: u64) -> Result<DeviceCost, String> {
    place(profile, &s.at(q)).map_err(|e| e.to_string())?;
    let b0 = state_bytes(&s.at(0), profile) as f64;
    let b1 = state_bytes(&s.at(q), profile) as f64;
    let salus: u64 = s
        .at(0)
        .iter()
        .map(|d| d.demand(profile).per_stage[Resource::StatefulAlus])
        .sum();
    let per = if s.scales() { (b1 - b0) / 1024.0 } else { 0.0 };
    let base = if s.scales() { b0 } else { b1 };
    Ok(DeviceCost {
        per_quantum: vec![per, 0.0],
        base: vec![base / 1024.0, salus as f64],
    })
}

/// The default affinity of an app [our choice: HIGH for fixed-size apps,
/// whose state is not split by key (the UnivMon sketch; spec §7 marks it
/// HIGH), MEDIUM otherwise].
pub fn default_affinity(s: &Scaled) -> Affinity {
    if s.scales() {
        Affinity::Medium
    } else {
        Affinity::High
    }
}

/// Random packets per probe round [our choice: the load check's number].
pub const PROBE_RANDOM: usize = 64;

/// [`feature_probe`] for any program.
pub fn probe_program<P: Program>(program: P, profile: &Profile, seed: u64) -> Option<String> {
    use inca_switch::harness::Harness;
    use inca_switch::loadcheck::{packets, round_gap, MAX_REPLIES, PACKET_GAP};
    use inca_switch::Switch;

    let switch = match Switch::new(profile.clone(), program) {
        Ok(s) => s,
        Err(e) => return Some(e.to_string()),
    };
    let mut h = Harness::new(switch, seed);
    let ports = profile.data_path.ports.min(packets::PORTS);
    let gap = round_gap(profile);
    let mut t = gap;
    let mut frames = packets::systematic(ports);
    frames.extend(packets::random(seed, PROBE_RANDOM, ports));
    for _round in 0..2 {
        for (port, f) in frames.drain(..) {
            t += PACKET_GAP;
            h.send(t, port, f);
        }
        t += gap;
        h.advance_to(t);
        frames = h
            .take()
            .into_iter()
            .filter(|x| x.port < ports)
            .filter_map(|x| packets::reply(&x.frame).map(|f| (x.port, f)))
            .take(MAX_REPLIES)
            .collect();
    }
    let drops = h.device.stats().feature_drops;
    (drops > 0).then(|| {
        format!(
            "{drops} probe packets asked for a feature profile \"{}\" lacks (recirculation, resubmit or mirroring)",
            profile.name
        )
    })
}

/// Runs app `app` (at `q` keys) on a switch of `profile` against the load
/// check's packet set, twice with the replies to the first round, and
/// returns why it is incompatible if any packet asked for a feature the
/// profile lacks (`SwitchStats::feature_drops`; recirculation, resubmit or
/// mirroring on the smart NIC). Apps whose state does not fit the profile
/// at `q` keys are refused by [`device_cost`] before this runs.
pub fn feature_probe(app: &str, params: &Params, profile: &Profile, seed: u64) -> Option<String> {
    struct Probe<'a>(&'a Profile, u64);
    impl AppVisitor for Probe<'_> {
        type Output = Option<String>;
        fn visit<P: Program>(self, program: P) -> Option<String> {
            probe_program(program, self.0, self.1)
        }
    }
    match with_app(app, params, Probe(profile, seed)) {
        Ok(v) => v,
        Err(e) => Some(e.to_string()),
    }
}
