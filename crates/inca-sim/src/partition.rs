//! Network partitions drawn over a few nodes: which side every other node
//! ends up on.
//!
//! Cutting only the links that join two groups directly does nothing when
//! the groups talk through routers (three store servers behind one ToR
//! share no link). A real partition splits the network: here the nodes
//! not in either group join a side by majority of their neighbours, in
//! rounds outward from the groups (a ToR whose servers are mostly on one
//! side stays with them; a host follows its only neighbour), ties broken by
//! the caller's RNG. Cutting every link between the two sides then leaves
//! no path between the groups, whatever the topology.

use rand::Rng;

use crate::engine::{LinkId, NodeId, Sides, Simulation};

/// The sides of a partition of `sim`'s network between `groups` (disjoint;
/// a node in both counts for the first). Nodes no group can reach stay on
/// neither side.
pub fn sides(sim: &Simulation, groups: [Vec<NodeId>; 2], rng: &mut impl Rng) -> Sides {
    let n = sim.node_count();
    let mut neighbours: Vec<Vec<NodeId>> = vec![Vec::new(); n];
    for i in 0..sim.link_count() {
        if let Some([(a, _), (b, _)]) = sim.link_ends(LinkId(i as u32)) {
            if a != b && (a.0 as usize) < n && (b.0 as usize) < n {
                neighbours[a.0 as usize].push(b);
                neighbours[b.0 as usize].push(a);
            }
        }
    }
    let mut side: Vec<Option<usize>> = vec![None; n];
    for (s, g) in groups.iter().enumerate().rev() {
        for id in g {
            if let Some(x) = side.get_mut(id.0 as usize) {
                *x = Some(s);
            }
        }
    }
    // Each round decides from the previous round's sides only, so the
    // outcome does not depend on node order (except through the ties,
    // which are drawn in node order).
    loop {
        let mut joined = Vec::new();
        for (i, s) in side.iter().enumerate() {
            if s.is_some() {
                continue;
            }
            let mut votes = [0usize; 2];
            for m in &neighbours[i] {
                if let Some(x) = side[m.0 as usize] {
                    votes[x] += 1;
                }
            }
            let pick = match votes[0].cmp(&votes[1]) {
                _ if votes == [0, 0] => continue,
                std::cmp::Ordering::Greater => 0,
                std::cmp::Ordering::Less => 1,
                std::cmp::Ordering::Equal => usize::from(rng.gen_bool(0.5)),
            };
            joined.push((i, pick));
        }
        if joined.is_empty() {
            break;
        }
        for (i, pick) in joined {
            side[i] = Some(pick);
        }
    }
    let members = |s: usize| {
        (0..n)
            .filter(|&i| side[i] == Some(s))
            .map(|i| NodeId(i as u32))
            .collect::<Vec<_>>()
    };
    let mut groups = groups;
    for g in &mut groups {
        g.sort();
        g.dedup();
    }
    Sides {
        sides: [members(0), members(1)],
        groups,
    }
}
