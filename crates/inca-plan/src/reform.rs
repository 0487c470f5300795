//! The reformulation: what makes the planner fast enough for 10 M flows.
//!
//! Two facts shrink the naive model ([`crate::naive`]) without changing its
//! optimum, given the cost contract of [`crate::model`]:
//!
//! - **Switch share is a prefix.** Some optimum puts the hottest `n_p`
//!   quanta of app p on the switch, so one integer `n_p` per app replaces
//!   its binaries. Its latency gain `G_p(n) = Σ_{k<n} F_{p,k}·(L_switch −
//!   L_device)` is convex in `n` (shares never rise) and its switch usage
//!   `U_{p,r}(n) = Σ_{k<n} R_{p,k,r}` is convex too (marginals never fall),
//!   so both are the maximum of their pieces' lines: an epigraph variable
//!   above every line (`t_p ≥ slope_k·n_p + c_k`) is exact at integer
//!   `n_p`. A binary `z_p ≥ n_p / M_p` pays the base cost.
//! - **Device quanta are interchangeable.** A quantum costs a device the same
//!   whichever it is, and every device-served packet of an app has the same
//!   latency, so only how many quanta of p a device holds matters: one
//!   integer `m_{p,j}` and one binary `y_{p,j}` per app per device, not one
//!   binary per quantum per device. Identical devices of a type are
//!   interchangeable too; ordering them by load (`Σ_p m_{p,j} ≥ Σ_p
//!   m_{p,j+1}`) removes the symmetric copies of every solution.
//!
//! For 4 apps of 1 M flows in quanta of 1,024 keys on 16 devices the naive
//! model has ~66,000 binaries; this one has 4 integers `n_p`, 4 binaries
//! `z_p` and 128 per-device columns, plus continuous epigraph columns.

use std::time::Instant;

use highs::{Col, HighsModelStatus};

use crate::elastic::{Builder, ColIdx};
use crate::model::{Affinity, Assignment, Counts, Instance};
use crate::solver::{int, run, structural_failures, Solution, SolveError, SolveOptions};

/// Solves `inst` with the reformulation.
pub fn solve(inst: &Instance, opts: &SolveOptions) -> Result<Solution, SolveError> {
    let failing = structural_failures(inst);
    if !failing.is_empty() {
        return Err(SolveError::Infeasible { failing });
    }
    let started = Instant::now();
    let (b, vars) = build(inst, false);
    let r = run(b.pb, opts, started);
    match r.status {
        HighsModelStatus::Optimal => {}
        // No columns at all yet quanta to place: nothing fits anywhere.
        HighsModelStatus::Infeasible | HighsModelStatus::ModelEmpty => {
            return Err(SolveError::Infeasible {
                failing: crate::elastic::diagnose(inst, opts, || build(inst, true).0),
            })
        }
        s => return Err(SolveError::Solver(format!("{s:?}"))),
    }
    let counts = Counts {
        switch: vars
            .n
            .iter()
            .map(|c| c.map_or(0, |c| int(r.columns[c.0])))
            .collect(),
        device: vars
            .m
            .iter()
            .map(|ms| {
                ms.iter()
                    .map(|c| c.map_or(0, |c| int(r.columns[c.0])))
                    .collect()
            })
            .collect(),
    };
    let assignment = Assignment::from_counts(inst, &counts);
    Ok(Solution {
        objective: inst.objective(&assignment),
        assignment,
        columns: r.ncols,
        rows: r.nrows,
        highs_seconds: r.highs_seconds,
        wall_seconds: r.wall_seconds,
    })
}

struct Vars {
    /// `n[p]` (None: nothing of p can be on the switch).
    n: Vec<Option<ColIdx>>,
    /// `m[p][j]` (None: app p cannot use device j).
    m: Vec<Vec<Option<ColIdx>>>,
}

/// Quanta of `a` one device of type `t` holds at most, alone.
fn device_limit(inst: &Instance, p: usize, t: usize) -> usize {
    let a = &inst.apps[p];
    let Some(cost) = &a.device[t] else { return 0 };
    let ty = &inst.device_types[t];
    let mut n = a.quanta() as f64;
    for r in 0..ty.cap.len() {
        let room = ty.cap[r] - cost.base[r];
        if room < 0.0 {
            return 0;
        }
        if cost.per_quantum[r] > 0.0 {
            n = n.min((room / cost.per_quantum[r] + 1e-9).floor());
        }
    }
    n.max(0.0) as usize
}

/// The lines whose maximum is the convex piecewise-linear `f` over
/// `0..=n` given its increments `d[k] = f(k+1) − f(k)` (nondecreasing) and
/// `f(0) = 0`: `(slope, intercept)`, one per run of equal increments.
fn pieces(d: impl Iterator<Item = f64>) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    let mut f = 0.0;
    for (k, s) in d.enumerate() {
        if out
            .last()
            .is_none_or(|&(last, _)| (s - last).abs() > 1e-12 * s.abs().max(1.0))
        {
            out.push((s, f - s * k as f64));
        }
        f += s;
    }
    out
}

fn build(inst: &Instance, elastic: bool) -> (Builder, Vars) {
    let mut b = Builder::new(elastic);
    let ndev = inst.devices();
    let mut vars = Vars {
        n: Vec::new(),
        m: Vec::new(),
    };
    // Switch side: n_p, z_p, the latency epigraph t_p, the usage epigraphs
    // v_{p,r}.
    let nres = inst.switch_cap.len();
    let mut sw: Vec<Option<(Col, Col, Vec<Col>)>> = Vec::new();
    for a in &inst.apps {
        let lim = a.switch_limit();
        if lim == 0 {
            sw.push(None);
            vars.n.push(None);
            continue;
        }
        let high = a.affinity == Affinity::High;
        let lo = if high { a.quanta() as f64 } else { 0.0 };
        let (n, ni) = b.int(0.0, lo, lim as f64);
        let (z, _) = b.int(0.0, if high { 1.0 } else { 0.0 }, 1.0);
        b.pb.add_row(..=0.0, [(n, 1.0), (z, -(lim as f64))]);
        let (t, _) = b.free(a.weight);
        let gain = (0..lim).map(|k| a.share[k] * (a.lat_switch - a.lat_device));
        for (slope, c) in pieces(gain) {
            b.pb.add_row(c.., [(t, 1.0), (n, -slope)]);
        }
        let mut v = Vec::with_capacity(nres);
        for r in 0..nres {
            let (vr, _) = b.cont(0.0);
            for (slope, c) in pieces(a.switch_quantum[..lim].iter().map(|q| q[r])) {
                b.pb.add_row(c.., [(vr, 1.0), (n, -slope)]);
            }
            v.push(vr);
        }
        sw.push(Some((n, z, v)));
        vars.n.push(Some(ni));
    }
    // m, y
    let mut mc: Vec<Vec<Option<(Col, Col)>>> = Vec::new();
    for (p, a) in inst.apps.iter().enumerate() {
        let mut row = Vec::new();
        let mut idx = Vec::new();
        for j in 0..ndev {
            let t = inst.type_of(j);
            // The elastic model lets capacities stretch, so only
            // compatibility limits a device there.
            let lim = if elastic && a.device[t].is_some() {
                a.quanta()
            } else {
                device_limit(inst, p, t)
            };
            if a.affinity == Affinity::High || lim == 0 {
                row.push(None);
                idx.push(None);
                continue;
            }
            let (m, mi) = b.int(0.0, 0.0, lim as f64);
            let (y, _) = b.bin(0.0);
            b.pb.add_row(..=0.0, [(m, 1.0), (y, -(lim as f64))]);
            row.push(Some((m, y)));
            idx.push(Some(mi));
        }
        mc.push(row);
        vars.m.push(idx);
    }
    // (4.1): every quantum somewhere.
    for (p, a) in inst.apps.iter().enumerate() {
        let mut f: Vec<(Col, f64)> = sw[p].iter().map(|(n, _, _)| (*n, 1.0)).collect();
        f.extend(mc[p].iter().flatten().map(|&(m, _)| (m, 1.0)));
        let n = a.quanta() as f64;
        b.pb.add_row(n..=n, &f);
    }
    for (r, cap) in inst.switch_cap.iter().enumerate() {
        let mut f = Vec::new();
        for (p, a) in inst.apps.iter().enumerate() {
            if let Some((_, z, v)) = &sw[p] {
                f.push((v[r], 1.0));
                f.push((*z, a.switch_base[r]));
            }
        }
        let name = format!("(4.3) switch {}", inst.switch_resources[r]);
        b.cap_row(name, f, *cap);
    }
    for j in 0..ndev {
        let t = inst.type_of(j);
        let ty = &inst.device_types[t];
        for (r, cap) in ty.cap.iter().enumerate() {
            let mut f = Vec::new();
            for (p, a) in inst.apps.iter().enumerate() {
                let (Some(cost), Some((m, y))) = (&a.device[t], mc[p][j]) else {
                    continue;
                };
                f.push((m, cost.per_quantum[r]));
                f.push((y, cost.base[r]));
            }
            let name = format!("(4.3) {} {}", inst.device_name(j), ty.resources[r]);
            b.cap_row(name, f, *cap);
        }
        // Symmetry: identical devices in order of load.
        if j + 1 < ndev && inst.type_of(j + 1) == t {
            let mut f = Vec::new();
            for row in &mc {
                if let Some((m, _)) = row[j] {
                    f.push((m, 1.0));
                }
                if let Some((m, _)) = row[j + 1] {
                    f.push((m, -1.0));
                }
            }
            if !f.is_empty() {
                b.pb.add_row(0.0.., &f);
            }
        }
    }
    if let Some(cap) = inst.fm_cap {
        let mut f = Vec::new();
        for (p, a) in inst.apps.iter().enumerate() {
            if let (true, Some((n, _, _))) = (a.affinity != Affinity::High, &sw[p]) {
                f.push((*n, a.quantum as f64));
            }
        }
        let name = "flow-manager cap (keys on the switch)".to_string();
        b.cap_row(name, f, cap as f64);
    }
    (b, vars)
}
