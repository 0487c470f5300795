//! The naive formulation of spec §5.9: one binary `d_{p,q,i}` per quantum
//! per location, `y_{p,i}` per app per location for the base costs. Exact
//! for any costs, but its size grows with quanta × devices; it is the
//! reference the reformulation ([`crate::reform`]) is tested against.

use std::time::Instant;

use highs::{Col, HighsModelStatus};

use crate::elastic::{Builder, ColIdx};
use crate::model::{Affinity, Assignment, Instance, Loc};
use crate::solver::{run, structural_failures, Solution, SolveError, SolveOptions};

/// Solves `inst` with the naive formulation.
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
        HighsModelStatus::Infeasible | HighsModelStatus::ModelEmpty => {
            return Err(SolveError::Infeasible {
                failing: crate::elastic::diagnose(inst, opts, || build(inst, true).0),
            })
        }
        s => return Err(SolveError::Solver(format!("{s:?}"))),
    }
    let loc = vars
        .iter()
        .map(|qs| {
            qs.iter()
                .map(|cands| {
                    cands
                        .iter()
                        .max_by(|a, b| r.columns[a.1 .0].total_cmp(&r.columns[b.1 .0]))
                        .map(|c| c.0)
                        .expect("structural check: every quantum has a location")
                })
                .collect()
        })
        .collect();
    let assignment = Assignment { loc };
    Ok(Solution {
        objective: inst.objective(&assignment),
        assignment,
        columns: r.ncols,
        rows: r.nrows,
        highs_seconds: r.highs_seconds,
        wall_seconds: r.wall_seconds,
    })
}

/// `vars[p][q]` = the (location, column) candidates.
type Vars = Vec<Vec<Vec<(Loc, ColIdx)>>>;

fn build(inst: &Instance, elastic: bool) -> (Builder, Vars) {
    let mut b = Builder::new(elastic);
    let ndev = inst.devices();
    let mut cols: Vec<Vec<Vec<(Loc, Col)>>> = Vec::new();
    let mut vars: Vars = Vec::new();
    for (p, a) in inst.apps.iter().enumerate() {
        let mut pc = Vec::new();
        let mut pv = Vec::new();
        for q in 0..a.quanta() {
            let mut qc = Vec::new();
            let mut qv = Vec::new();
            for l in inst.allowed(p, q) {
                let lat = match l {
                    Loc::Switch => a.lat_switch,
                    Loc::Device(_) => a.lat_device,
                };
                let (c, i) = b.bin(a.weight * a.share[q] * lat);
                qc.push((l, c));
                qv.push((l, i));
            }
            pc.push(qc);
            pv.push(qv);
        }
        cols.push(pc);
        vars.push(pv);
    }
    // y_{p,i}: index 0 the switch, 1 + j device j.
    let mut y: Vec<Vec<Option<Col>>> = Vec::new();
    for (p, a) in inst.apps.iter().enumerate() {
        let mut yp = vec![None; 1 + ndev];
        for qc in &cols[p] {
            for &(l, _) in qc {
                let k = match l {
                    Loc::Switch => 0,
                    Loc::Device(j) => 1 + j,
                };
                if yp[k].is_none() {
                    yp[k] = Some(b.bin(0.0).0);
                }
            }
        }
        let _ = a;
        y.push(yp);
    }
    // (4.1)
    for pc in &cols {
        for qc in pc {
            let f: Vec<(Col, f64)> = qc.iter().map(|&(_, c)| (c, 1.0)).collect();
            b.pb.add_row(1.0..=1.0, &f);
        }
    }
    // y ≥ d
    for (p, pc) in cols.iter().enumerate() {
        for qc in pc {
            for &(l, c) in qc {
                let k = match l {
                    Loc::Switch => 0,
                    Loc::Device(j) => 1 + j,
                };
                b.pb.add_row(..=0.0, [(c, 1.0), (y[p][k].expect("made above"), -1.0)]);
            }
        }
    }
    // (4.3) switch
    for (r, cap) in inst.switch_cap.iter().enumerate() {
        let mut f = Vec::new();
        for (p, a) in inst.apps.iter().enumerate() {
            for (q, qc) in cols[p].iter().enumerate() {
                for &(l, c) in qc {
                    if l == Loc::Switch {
                        f.push((c, a.switch_quantum[q][r]));
                    }
                }
            }
            if let Some(yc) = y[p][0] {
                f.push((yc, a.switch_base[r]));
            }
        }
        let name = format!("(4.3) switch {}", inst.switch_resources[r]);
        b.cap_row(name, f, *cap);
    }
    // (4.3) devices
    for j in 0..ndev {
        let t = inst.type_of(j);
        let ty = &inst.device_types[t];
        for (r, cap) in ty.cap.iter().enumerate() {
            let mut f = Vec::new();
            for (p, a) in inst.apps.iter().enumerate() {
                let Some(cost) = &a.device[t] else { continue };
                for qc in &cols[p] {
                    for &(l, c) in qc {
                        if l == Loc::Device(j) {
                            f.push((c, cost.per_quantum[r]));
                        }
                    }
                }
                if let Some(yc) = y[p][1 + j] {
                    f.push((yc, cost.base[r]));
                }
            }
            let name = format!("(4.3) {} {}", inst.device_name(j), ty.resources[r]);
            b.cap_row(name, f, *cap);
        }
    }
    if let Some(cap) = inst.fm_cap {
        let mut f = Vec::new();
        for (p, a) in inst.apps.iter().enumerate() {
            if a.affinity == Affinity::High {
                continue;
            }
            for qc in &cols[p] {
                for &(l, c) in qc {
                    if l == Loc::Switch {
                        f.push((c, a.quantum as f64));
                    }
                }
            }
        }
        let name = "flow-manager cap (keys on the switch)".to_string();
        b.cap_row(name, f, cap as f64);
    }
    (b, vars)
}
