//! P11 promotion quality (spec §6): under a stationary Zipf(0.99)
//! workload, 10 s after it starts, the switch-resident set (the hub's
//! PRESENT flows) overlaps the true top `n_p·Q_p` flows by ≥ 80 %.
//!
//! [`check_p11`] judges one snapshot. [`Scale`] is the rule that lets a
//! test run a small workload in place of the thesis-scale one: promotion
//! works on ranks, and what decides whether the `n_p·Q_p`-th flow gets
//! reported and how noisy the hub's rate estimates are is that flow's
//! packets per popularity window against θ (count-min report threshold)
//! and per counter poll. Zipf ranks scale: if the capacity-th flow keeps
//! its rate, the `k·capacity`-th does too for every `k`, so the stream of
//! reports relative to the capacity keeps its shape. [`Scale::scaled`]
//! therefore keeps the capacity-th flow's rate and shrinks flows and
//! capacity.

use std::collections::HashSet;

use inca_sim::nodes::host::Zipf;
use inca_switch::device::Nanos;

use crate::hub::check::Violation;
use crate::ids::UnionKey;

/// Least overlap of the switch-resident set with the true top `n_p·Q_p`
/// (spec §6 P11: 80 % [our choice there]).
pub const P11_THRESHOLD: f64 = 0.8;
/// When P11 is judged: 10 s after the stationary workload starts (spec §6
/// P11).
pub const P11_AFTER: Nanos = 10_000_000_000;

/// Line rate of one sender with 1,500 B frames, bits/s (spec §2.1, model
/// input from Kim, CMU-CS-21-143, §4.6.1: 98.6 Gbps).
pub const SENDER_BPS: f64 = 98.6e9;
/// Frame size of that line rate, bytes (spec §2.1).
pub const SENDER_FRAME_BYTES: f64 = 1_500.0;
/// Flows per app in the evaluation (spec §8: Zipf over 1M random IPv4
/// 5-tuples, Thesis §4.6).
pub const THESIS_FLOWS: usize = 1_000_000;
/// FM entries of the whole switch (spec §2.1: 10,240, Thesis §4.6.5).
pub const THESIS_FM_ENTRIES: usize = 10_240;
/// Apps sharing them in the front-end scenario (spec §8: VPN, NAT, ACL,
/// UnivMon; E3 gives each `W_p` = 0.25) [our choice: an equal split].
pub const FRONT_END_APPS: usize = 4;

/// Fraction of `top` that is in `resident`; 1 for an empty `top`.
pub fn overlap(resident: &[UnionKey], top: &[UnionKey]) -> f64 {
    if top.is_empty() {
        return 1.0;
    }
    let set: HashSet<&UnionKey> = resident.iter().collect();
    top.iter().filter(|k| set.contains(k)).count() as f64 / top.len() as f64
}

/// P11 at time `at` (since the workload started): `resident` is the hub's
/// PRESENT set, `top` the true top `n_p·Q_p` flows. Returns the overlap.
/// Fails if judged before [`P11_AFTER`], if the resident set is larger
/// than `top` (it would overlap by holding more than the FM can), or if
/// the overlap is below [`P11_THRESHOLD`].
pub fn check_p11(at: Nanos, resident: &[UnionKey], top: &[UnionKey]) -> Result<f64, Violation> {
    let fail = |what: String| Err(Violation { at, what });
    if at < P11_AFTER {
        return fail(format!("P11 judged at {at} ns, before {P11_AFTER} ns"));
    }
    let distinct: HashSet<&UnionKey> = resident.iter().collect();
    if distinct.len() > top.len() {
        return fail(format!(
            "P11: {} resident flows for a capacity of {}",
            distinct.len(),
            top.len()
        ));
    }
    let o = overlap(resident, top);
    if o < P11_THRESHOLD {
        return fail(format!(
            "P11: overlap with the true top {} is {o:.3} < {P11_THRESHOLD}",
            top.len()
        ));
    }
    Ok(o)
}

/// A stationary Zipf workload of one app: its packet rate, flows, FM
/// capacity and skew.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scale {
    /// Packets per second of the app (switch and devices together).
    pub pps: f64,
    /// Distinct flows.
    pub flows: usize,
    /// FM capacity `n_p·Q_p`.
    pub capacity: usize,
    /// Zipf exponent.
    pub alpha: f64,
}

impl Scale {
    /// The thesis-scale reference: one app of the front-end scenario fed
    /// by its own sender at line rate with 1,500 B frames
    /// ([`SENDER_BPS`]), [`THESIS_FLOWS`] flows of Zipf(0.99), and a
    /// [`FRONT_END_APPS`]-th of [`THESIS_FM_ENTRIES`].
    pub fn thesis_front_end() -> Scale {
        Scale {
            pps: SENDER_BPS / (SENDER_FRAME_BYTES * 8.0),
            flows: THESIS_FLOWS,
            capacity: THESIS_FM_ENTRIES / FRONT_END_APPS,
            alpha: 0.99,
        }
    }

    /// Probability of the `capacity`-th most popular flow; `None` for an
    /// invalid skew or no flows.
    pub fn share_at_capacity(&self) -> Option<f64> {
        let z = Zipf::rejection(self.flows, self.alpha)?;
        Some(z.probability(self.capacity.max(1) - 1))
    }

    /// Expected packets per second of the `capacity`-th most popular flow.
    pub fn rate_at_capacity(&self) -> Option<f64> {
        Some(self.pps * self.share_at_capacity()?)
    }

    /// The same workload shrunk to `flows` flows and an FM of `capacity`:
    /// the packet rate is set so that the capacity-th flow keeps this
    /// scale's rate (see the module overview). `None` for an invalid
    /// skew, no flows, or a capacity of 0 or over `flows`.
    pub fn scaled(&self, flows: usize, capacity: usize) -> Option<Scale> {
        if capacity == 0 || capacity > flows {
            return None;
        }
        let rate = self.rate_at_capacity()?;
        let mut s = Scale {
            pps: 0.0,
            flows,
            capacity,
            alpha: self.alpha,
        };
        s.pps = rate / s.share_at_capacity()?;
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uk(i: u32) -> UnionKey {
        UnionKey(i.to_be_bytes().to_vec())
    }

    #[test]
    fn overlap_and_threshold() {
        let top: Vec<UnionKey> = (0..10).map(uk).collect();
        let mut resident: Vec<UnionKey> = (2..10).map(uk).collect();
        resident.extend([uk(50), uk(51)]);
        assert_eq!(overlap(&resident, &top), 0.8);
        assert_eq!(check_p11(P11_AFTER, &resident, &top), Ok(0.8));
        assert!(check_p11(P11_AFTER - 1, &resident, &top).is_err());
        resident[0] = uk(52);
        assert!(check_p11(P11_AFTER, &resident, &top).is_err());
        // Holding more than the capacity cannot buy overlap.
        let all: Vec<UnionKey> = (0..20).map(uk).collect();
        assert!(check_p11(P11_AFTER, &all, &top).is_err());
    }

    #[test]
    fn scaling_keeps_the_capacity_flow_rate() {
        let reference = Scale::thesis_front_end();
        let r = reference.rate_at_capacity().unwrap();
        // 8.2 Mpps over 1M flows: the 2,560th flow sends ~220 pkt/s.
        assert!((150.0..300.0).contains(&r), "{r}");
        let s = reference.scaled(5_000, 64).unwrap();
        assert!((s.rate_at_capacity().unwrap() - r).abs() < 1e-6 * r);
        assert!(s.pps < reference.pps);
        assert_eq!(reference.scaled(10, 11), None);
        assert_eq!(reference.scaled(10, 0), None);
    }
}
