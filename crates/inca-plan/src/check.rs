//! The independent checker: does an assignment satisfy the constraints of
//! spec §5.9? It recomputes everything from the instance (no solver
//! variables), so a solver bug cannot hide behind its own bookkeeping.

use crate::model::{Affinity, Assignment, Instance, Loc, CAP_TOLERANCE};

/// Every constraint `asg` breaks, as sentences naming the constraint
/// (empty: feasible).
pub fn violations(inst: &Instance, asg: &Assignment) -> Vec<String> {
    let mut out = Vec::new();
    if asg.loc.len() != inst.apps.len() {
        out.push(format!(
            "(4.1) {} apps assigned, the instance has {}",
            asg.loc.len(),
            inst.apps.len()
        ));
        return out;
    }
    let ndev = inst.devices();
    let mut sw_use = vec![0.0; inst.switch_cap.len()];
    let mut dev_use: Vec<Vec<f64>> = (0..ndev)
        .map(|j| vec![0.0; inst.device_types[inst.type_of(j)].cap.len()])
        .collect();
    let mut fm_keys = 0u64;
    for (p, (a, locs)) in inst.apps.iter().zip(&asg.loc).enumerate() {
        // (4.1): every quantum exactly once; the representation gives each
        // at most one location, so count them.
        if locs.len() != a.quanta() {
            out.push(format!(
                "(4.1) app {}: {} of its {} quanta placed",
                a.name,
                locs.len(),
                a.quanta()
            ));
            continue;
        }
        let mut on_switch = false;
        let mut on_dev = vec![false; ndev];
        for (q, l) in locs.iter().enumerate() {
            match *l {
                Loc::Switch => {
                    if a.affinity == Affinity::Low {
                        out.push(format!(
                            "affinity LOW: app {} quantum {q} on the switch",
                            a.name
                        ));
                    }
                    let Some(cost) = a.switch_quantum.get(q) else {
                        out.push(format!(
                            "(4.3) app {} quantum {q} on the switch, where it does not fit",
                            a.name
                        ));
                        continue;
                    };
                    for (u, c) in sw_use.iter_mut().zip(cost) {
                        *u += c;
                    }
                    on_switch = true;
                    if a.affinity != Affinity::High {
                        fm_keys += a.quantum;
                    }
                }
                Loc::Device(j) => {
                    if j >= ndev {
                        out.push(format!(
                            "(4.1) app {} quantum {q} on device {j}, which does not exist",
                            a.name
                        ));
                        continue;
                    }
                    if a.affinity == Affinity::High {
                        out.push(format!(
                            "affinity HIGH: app {} quantum {q} on {}",
                            a.name,
                            inst.device_name(j)
                        ));
                    }
                    let Some(cost) = &a.device[inst.type_of(j)] else {
                        out.push(format!(
                            "(4.2) app {} quantum {q} on {}, which it is not compatible with",
                            a.name,
                            inst.device_name(j)
                        ));
                        continue;
                    };
                    for (u, c) in dev_use[j].iter_mut().zip(&cost.per_quantum) {
                        *u += c;
                    }
                    on_dev[j] = true;
                }
            }
        }
        if on_switch {
            for (u, b) in sw_use.iter_mut().zip(&a.switch_base) {
                *u += b;
            }
        }
        for (j, used) in on_dev.iter().enumerate() {
            if *used {
                let cost = a.device[inst.type_of(j)].as_ref().expect("checked above");
                for (u, b) in dev_use[j].iter_mut().zip(&cost.base) {
                    *u += b;
                }
            }
        }
        let _ = p;
    }
    for (r, (u, cap)) in sw_use.iter().zip(&inst.switch_cap).enumerate() {
        if over(*u, *cap) {
            out.push(format!(
                "(4.3) switch {}: {u:.1} used of {cap:.1}",
                inst.switch_resources[r]
            ));
        }
    }
    for (j, used) in dev_use.iter().enumerate() {
        let ty = &inst.device_types[inst.type_of(j)];
        for (r, (u, cap)) in used.iter().zip(&ty.cap).enumerate() {
            if over(*u, *cap) {
                out.push(format!(
                    "(4.3) {} {}: {u:.1} used of {cap:.1}",
                    inst.device_name(j),
                    ty.resources[r]
                ));
            }
        }
    }
    if let Some(cap) = inst.fm_cap {
        if fm_keys > cap {
            out.push(format!(
                "flow-manager cap: {fm_keys} keys on the switch, cap {cap}"
            ));
        }
    }
    out
}

fn over(used: f64, cap: f64) -> bool {
    used > cap + CAP_TOLERANCE * cap.abs().max(1.0)
}
