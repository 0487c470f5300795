//! Brute force: every assignment of quanta to allowed locations, checked by
//! [`crate::check`]. Only for tiny instances (the P13 oracle).

use crate::check::violations;
use crate::model::{Assignment, Instance, Loc};

/// Assignments enumerated at most [our choice: 2^16, i.e. up to 16
/// binaries of the naive model].
pub const MAX_ASSIGNMENTS: u64 = 1 << 16;

/// The least objective over every feasible assignment, and one assignment
/// reaching it; `None` when none is feasible. Panics if the instance has
/// more than [`MAX_ASSIGNMENTS`] assignments.
pub fn solve(inst: &Instance) -> Option<(f64, Assignment)> {
    let slots: Vec<(usize, usize, Vec<Loc>)> = inst
        .apps
        .iter()
        .enumerate()
        .flat_map(|(p, a)| (0..a.quanta()).map(move |q| (p, q)))
        .map(|(p, q)| (p, q, inst.allowed(p, q)))
        .collect();
    let total: u64 = slots
        .iter()
        .map(|s| s.2.len() as u64)
        .try_fold(1u64, |acc, n| acc.checked_mul(n))
        .unwrap_or(u64::MAX);
    assert!(
        total <= MAX_ASSIGNMENTS,
        "{total} assignments: too many for brute force"
    );
    if slots.iter().any(|s| s.2.is_empty()) {
        return None;
    }
    let mut best: Option<(f64, Assignment)> = None;
    let mut digits = vec![0usize; slots.len()];
    loop {
        let mut asg = Assignment {
            loc: inst
                .apps
                .iter()
                .map(|a| Vec::with_capacity(a.quanta()))
                .collect(),
        };
        for (s, &d) in slots.iter().zip(&digits) {
            asg.loc[s.0].push(s.2[d]);
        }
        if violations(inst, &asg).is_empty() {
            let obj = inst.objective(&asg);
            if best.as_ref().is_none_or(|b| obj < b.0) {
                best = Some((obj, asg));
            }
        }
        // Next combination (odometer).
        let mut i = 0;
        loop {
            if i == digits.len() {
                return best;
            }
            digits[i] += 1;
            if digits[i] < slots[i].2.len() {
                break;
            }
            digits[i] = 0;
            i += 1;
        }
    }
}
