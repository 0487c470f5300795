//! ExoPlane's planner experiments (spec §8): E1 and E12. They run no
//! simulation, so `inca sweep` (which sweeps simulated scenarios) cannot
//! drive them; `inca plan --experiment e1|e12` writes their CSVs and plots.
//!
//! - **E1** (Thesis Fig. 4.2): the front-end apps composed on the switch
//!   alone, without ExoPlane: SRAM the whole apps need over the switch's
//!   SRAM, (a) all four apps with flows per app swept, (b) at 1 M flows with
//!   apps added one by one. SRAM need is the placement model's demand of
//!   every object at full size (what `inca check` would ask for), so it is
//!   defined past the point where placement fails.
//! - **E12** (Thesis Fig. 4.19): planner time (profile + ILP) and HiGHS's own
//!   solve time (a) for 1…32 apps on 16 devices at 1 M flows per app, (b)
//!   for 4 apps on 16 devices with flows per app up to 10 M.

use std::time::Instant;

use inca_apps::params::Params;
use inca_switch::resources::Resource;
use inca_switch::Profile;
use serde::Serialize;

use crate::model::Affinity;
use crate::plan::{front_end, profile, AppSpec, PlanError, PlanInputs};
use crate::profile::{Profiler, Scaled};
use crate::reform;

/// The front-end apps (spec §8), in the order E1(b) adds them.
pub const FRONT_END: [&str; 4] = ["vpn", "nat", "acl", "univmon"];

/// E1(a) flows per app [our choice: 10 K → 10 M, spec §8].
pub const E1_FLOWS: [u64; 7] = [
    10_000, 30_000, 100_000, 300_000, 1_000_000, 3_000_000, 10_000_000,
];

/// One E1 point.
#[derive(Debug, Clone, Serialize)]
pub struct E1Point {
    /// `a` (flows swept) or `b` (apps added).
    pub part: char,
    /// Flows per app.
    pub flows: u64,
    /// Apps composed (E1(b): the first this-many of [`FRONT_END`]).
    pub apps: usize,
    /// Per app, SRAM blocks it needs.
    pub per_app: Vec<(String, u64)>,
    /// All of them over the switch's SRAM blocks.
    pub ratio: f64,
}

/// SRAM blocks app `app` needs at `flows` keys on `profile` (demand of
/// every object, placed or not).
pub fn sram_need(app: &str, flows: u64, profile: &Profile) -> Result<u64, PlanError> {
    let s = Scaled::of(app, app, &Params::default(), 1024)?;
    Ok(s.at(flows)
        .iter()
        .map(|d| d.demand(profile).memory[Resource::SramBlocks])
        .sum())
}

/// Runs E1 on `profile` with flows `flows` for part (a).
pub fn e1(profile: &Profile, flows: &[u64]) -> Result<Vec<E1Point>, PlanError> {
    let cap = (profile.stage_budget[Resource::SramBlocks] * u64::from(profile.stages)) as f64;
    let point = |part, f: u64, n: usize| -> Result<E1Point, PlanError> {
        let per_app = FRONT_END[..n]
            .iter()
            .map(|a| Ok((a.to_string(), sram_need(a, f, profile)?)))
            .collect::<Result<Vec<_>, PlanError>>()?;
        let total: u64 = per_app.iter().map(|x| x.1).sum();
        Ok(E1Point {
            part,
            flows: f,
            apps: n,
            per_app,
            ratio: total as f64 / cap,
        })
    };
    let mut out = Vec::new();
    for &f in flows {
        out.push(point('a', f, FRONT_END.len())?);
    }
    for n in 1..=FRONT_END.len() {
        out.push(point('b', 1_000_000, n)?);
    }
    Ok(out)
}

/// One E12 point.
#[derive(Debug, Clone, Serialize)]
pub struct E12Point {
    /// `a` (apps swept) or `b` (flows swept).
    pub part: char,
    /// Apps.
    pub apps: usize,
    /// Flows per app.
    pub flows: u64,
    /// Profiling, s.
    pub profile_seconds: f64,
    /// Building and solving the ILP, s.
    pub solve_seconds: f64,
    /// HiGHS's own time, s.
    pub highs_seconds: f64,
    /// ILP columns.
    pub columns: usize,
}

/// `n` apps cycling through [`FRONT_END`] (`vpn1`, `nat1`, …), every one
/// MEDIUM [our choice: eight UnivMons cannot all be HIGH, the switch has
/// stateful ALUs for two], `flows` each, on `devices` smart NICs.
pub fn many_apps(n: usize, flows: u64, devices: usize) -> PlanInputs {
    let apps = (0..n)
        .map(|i| {
            let app = FRONT_END[i % FRONT_END.len()];
            AppSpec {
                name: format!("{app}{}", i / FRONT_END.len() + 1),
                app: app.to_string(),
                params: Params::default(),
                flows,
                weight: None,
                affinity: Some(Affinity::Medium),
            }
        })
        .collect();
    PlanInputs::new(apps, devices)
}

fn time_point(part: char, inputs: &PlanInputs) -> Result<E12Point, PlanError> {
    let t = Instant::now();
    let prof = profile(inputs, &mut Profiler::default())?;
    let profile_seconds = t.elapsed().as_secs_f64();
    let sol = reform::solve(&prof.instance, &inputs.opts)?;
    Ok(E12Point {
        part,
        apps: inputs.apps.len(),
        flows: inputs.apps.first().map_or(0, |a| a.flows),
        profile_seconds,
        solve_seconds: sol.wall_seconds,
        highs_seconds: sol.highs_seconds,
        columns: sol.columns,
    })
}

/// Runs E12: (a) `apps` counts at 1 M flows (`flows_a`), (b) `flows` per
/// app with the 4 front-end apps; 16 devices.
pub fn e12(apps: &[usize], flows_a: u64, flows: &[u64]) -> Result<Vec<E12Point>, PlanError> {
    let mut out = Vec::new();
    for &n in apps {
        out.push(time_point('a', &many_apps(n, flows_a, 16))?);
    }
    for &f in flows {
        out.push(time_point('b', &front_end(16, f))?);
    }
    Ok(out)
}

/// E1's CSV: `part,flows,apps,app,sram_blocks,ratio` (one row per app of
/// each point, then `total`).
pub fn e1_csv(points: &[E1Point], switch_sram: f64) -> String {
    let mut s = String::from("part,flows,apps,app,sram_blocks,ratio\n");
    for p in points {
        for (app, blocks) in &p.per_app {
            s += &format!(
                "{},{},{},{app},{blocks},{:.4}\n",
                p.part,
                p.flows,
                p.apps,
                *blocks as f64 / switch_sram
            );
        }
        s += &format!("{},{},{},total,,{:.4}\n", p.part, p.flows, p.apps, p.ratio);
    }
    s
}

/// E12's CSV.
pub fn e12_csv(points: &[E12Point]) -> String {
    let mut s =
        String::from("part,apps,flows,profile_seconds,solve_seconds,highs_seconds,columns\n");
    for p in points {
        s += &format!(
            "{},{},{},{:.4},{:.4},{:.4},{}\n",
            p.part, p.apps, p.flows, p.profile_seconds, p.solve_seconds, p.highs_seconds, p.columns
        );
    }
    s
}

/// E1(a) flows, E12(a) app counts and E12(b) flows, full or quick.
pub fn sweeps(quick: bool) -> (Vec<u64>, Vec<usize>, Vec<u64>) {
    if quick {
        (
            vec![10_000, 100_000, 1_000_000, 10_000_000],
            vec![1, 2, 4, 8],
            vec![100_000, 1_000_000],
        )
    } else {
        (
            E1_FLOWS.to_vec(),
            vec![1, 2, 4, 8, 12, 16, 24, 32],
            vec![100_000, 300_000, 1_000_000, 3_000_000, 10_000_000],
        )
    }
}
