//! App oracles over a flow's history (spec §6.3 "Oracles"): cheap checks
//! that need no reference model and name the anomaly directly.
//!
//! - [`sync_counter`]: output counts of a flow are distinct; O_x before I_y
//!   implies count_y > count_x; every count ≤ the inputs received so far.
//! - [`mapping_stable`]: for NAT, firewall and LB, once a mapping (or
//!   decision) has been released for a connection, every later output of
//!   that connection uses it and none is dropped for missing state.

use std::collections::BTreeMap;

/// An oracle violation, with the packet ids involved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OracleViolation {
    /// What went wrong.
    pub reason: String,
    /// Packet ids.
    pub ops: Vec<u64>,
}

/// One Sync-Counter output: (id, input time, output time, stamped count).
pub type CounterOutput = (u64, u64, u64, u32);

/// Checks the Sync-Counter oracle. `inputs` are all input times of the flow
/// (with or without output); `outputs` the released outputs.
pub fn sync_counter(inputs: &[u64], outputs: &[CounterOutput]) -> Result<(), OracleViolation> {
    let mut by_count: BTreeMap<u32, u64> = BTreeMap::new();
    for &(id, _, _, c) in outputs {
        if let Some(&other) = by_count.get(&c) {
            return Err(OracleViolation {
                reason: format!("count {c} released twice"),
                ops: vec![other, id],
            });
        }
        by_count.insert(c, id);
    }
    let mut t_ins: Vec<u64> = inputs.to_vec();
    t_ins.sort_unstable();
    for &(id, _, t_out, c) in outputs {
        let so_far = t_ins.partition_point(|&t| t <= t_out) as u64;
        if u64::from(c) > so_far {
            return Err(OracleViolation {
                reason: format!("count {c} released at {t_out} after only {so_far} inputs"),
                ops: vec![id],
            });
        }
    }
    // O_x before I_y ⇒ count_y > count_x: sweep inputs in time order,
    // keeping the largest count already released.
    let mut ev: Vec<(u64, u8, usize)> = Vec::new();
    for (i, &(_, t_in, t_out, _)) in outputs.iter().enumerate() {
        ev.push((t_in, 1, i));
        ev.push((t_out, 0, i));
    }
    ev.sort_by_key(|&(t, k, i)| (t, std::cmp::Reverse(k), i));
    let mut best: Option<usize> = None;
    for (_, k, i) in ev {
        if k == 0 {
            if best.is_none_or(|b| outputs[i].3 > outputs[b].3) {
                best = Some(i);
            }
        } else if let Some(b) = best {
            if outputs[i].3 <= outputs[b].3 {
                return Err(OracleViolation {
                    reason: format!(
                        "count {} released before packet {} arrived, which then got count {}",
                        outputs[b].3, outputs[i].0, outputs[i].3
                    ),
                    ops: vec![outputs[b].0, outputs[i].0],
                });
            }
        }
    }
    Ok(())
}

/// What a connection's packet got: (id, output time, the mapping or
/// decision it carried, or `None` if the switch dropped it for missing
/// state).
pub type MappingOutput<M> = (u64, u64, Option<M>);

/// Checks mapping stability for one connection: after the first released
/// mapping, every later output carries the same one and none is a drop.
pub fn mapping_stable<M: PartialEq + std::fmt::Debug>(
    outputs: &[MappingOutput<M>],
) -> Result<(), OracleViolation> {
    let mut order: Vec<&MappingOutput<M>> = outputs.iter().collect();
    order.sort_by_key(|o| (o.1, o.0));
    let mut first: Option<(u64, &M)> = None;
    for (id, _, m) in order {
        match (first, m) {
            (None, Some(m)) => first = Some((*id, m)),
            (None, None) => {}
            (Some((fid, fm)), Some(m)) if m != fm => {
                return Err(OracleViolation {
                    reason: format!("mapping changed from {fm:?} to {m:?}"),
                    ops: vec![fid, *id],
                })
            }
            (Some((fid, fm)), None) => {
                return Err(OracleViolation {
                    reason: format!("dropped for missing state after mapping {fm:?} was released"),
                    ops: vec![fid, *id],
                })
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_accepts_a_good_history() {
        let inputs = [0, 10, 20];
        let outs = [(1, 0, 5, 1), (2, 10, 15, 2), (3, 20, 25, 3)];
        assert_eq!(sync_counter(&inputs, &outs), Ok(()));
        // Concurrent inputs may get counts in either order.
        let outs = [(1, 0, 30, 2), (2, 10, 35, 1)];
        assert_eq!(sync_counter(&[0, 10], &outs), Ok(()));
    }

    #[test]
    fn counter_rejects_duplicates_regressions_and_counts_from_nowhere() {
        assert!(sync_counter(&[0, 10], &[(1, 0, 5, 1), (2, 10, 15, 1)]).is_err());
        // Released 2 before packet 2 arrived, packet 2 then got 1.
        let e = sync_counter(&[0, 1, 10], &[(1, 0, 5, 2), (2, 10, 15, 1)]).unwrap_err();
        assert_eq!(e.ops, vec![1, 2]);
        assert!(sync_counter(&[0], &[(1, 0, 5, 2)]).is_err());
    }

    #[test]
    fn mapping_must_not_change_or_vanish() {
        assert!(mapping_stable(&[(1, 5, None), (2, 6, Some(7)), (3, 9, Some(7))]).is_ok());
        assert!(mapping_stable(&[(1, 5, Some(7)), (2, 6, Some(8))]).is_err());
        assert!(mapping_stable(&[(1, 5, Some(7)), (2, 6, None)]).is_err());
    }
}
