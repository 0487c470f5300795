//! Top-N candidates (spec §3.2, §5.3 step 4, §5.5): per core, the highest
//! count-min estimate each flow carried in the current report period,
//! keeping only the best `capacity` flows; and the report's merge across
//! cores.
//!
//! Rank: estimate descending, then the smaller flow key first (§5.3). A
//! full map admits a flow only if it outranks the worst held one, which
//! it evicts — the min-heap of §3.2, as an ordered set so an update of a
//! held flow's estimate is a remove and an insert.

use std::cmp::Reverse;
use std::collections::BTreeSet;

use hashbrown::HashMap;

use crate::flow::FlowKey;

/// What an offer did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// The flow is held with this estimate or a higher one.
    Held,
    /// The flow is held; the worst one was evicted for it.
    Evicted,
    /// The map is full of better flows.
    Refused,
}

/// One core's candidates. See the module documentation.
#[derive(Debug, Clone)]
pub struct Candidates {
    best: HashMap<FlowKey, u32>,
    /// (estimate, reversed key): the first element is the worst-ranked.
    order: BTreeSet<(u32, Reverse<FlowKey>)>,
    capacity: usize,
}

impl Candidates {
    /// An empty map of at most `capacity` flows.
    pub fn new(capacity: usize) -> Self {
        Candidates {
            best: HashMap::new(),
            order: BTreeSet::new(),
            capacity,
        }
    }

    /// A request of `flow` carried estimate `est`.
    pub fn offer(&mut self, flow: FlowKey, est: u32) -> Offer {
        if let Some(old) = self.best.get_mut(&flow) {
            if est > *old {
                self.order.remove(&(*old, Reverse(flow)));
                self.order.insert((est, Reverse(flow)));
                *old = est;
            }
            return Offer::Held;
        }
        let mut outcome = Offer::Held;
        if self.best.len() >= self.capacity {
            match self.order.first() {
                Some(&worst) if (est, Reverse(flow)) > worst => {
                    self.order.remove(&worst);
                    self.best.remove(&worst.1 .0);
                    outcome = Offer::Evicted;
                }
                _ => return Offer::Refused,
            }
        }
        self.best.insert(flow, est);
        self.order.insert((est, Reverse(flow)));
        outcome
    }

    /// Flows held.
    pub fn len(&self) -> usize {
        self.best.len()
    }

    /// No flow held.
    pub fn is_empty(&self) -> bool {
        self.best.is_empty()
    }

    /// Takes every held flow and its estimate, emptying the map (a new
    /// report period starts).
    pub fn drain(&mut self) -> Vec<(FlowKey, u32)> {
        self.best.clear();
        std::mem::take(&mut self.order)
            .into_iter()
            .map(|(est, Reverse(k))| (k, est))
            .collect()
    }

    /// Forgets every flow.
    pub fn clear(&mut self) {
        self.best.clear();
        self.order.clear();
    }
}

/// The report of §5.3: per flow the highest estimate over `reports`, the
/// top `n` by estimate, ties by the smaller flow key.
pub fn top_n(reports: impl IntoIterator<Item = (FlowKey, u32)>, n: usize) -> Vec<(FlowKey, u32)> {
    let mut merged: std::collections::BTreeMap<FlowKey, u32> = Default::default();
    for (k, est) in reports {
        let e = merged.entry(k).or_insert(est);
        *e = (*e).max(est);
    }
    let mut v: Vec<(FlowKey, u32)> = merged.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.truncate(n);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u16) -> FlowKey {
        FlowKey::new(0, 17, [10, 0, 0, 1], [10, 0, 0, 2], n, 53)
    }

    #[test]
    fn the_map_keeps_the_best_ranked_flows() {
        let mut c = Candidates::new(3);
        assert_eq!(c.offer(key(1), 5), Offer::Held);
        assert_eq!(c.offer(key(2), 7), Offer::Held);
        assert_eq!(c.offer(key(3), 5), Offer::Held);
        // Full: 4 is below the worst (5); 5 with a larger key than the
        // worst held 5s is worse too.
        assert_eq!(c.offer(key(4), 4), Offer::Refused);
        assert_eq!(c.offer(key(9), 5), Offer::Refused);
        // Key 0 with 5 outranks key 3 with 5 (smaller key): 3 goes.
        assert_eq!(c.offer(key(0), 5), Offer::Evicted);
        // A held flow keeps its maximum.
        assert_eq!(c.offer(key(1), 2), Offer::Held);
        assert_eq!(c.offer(key(1), 9), Offer::Held);
        assert_eq!(c.len(), 3);
        let mut got = c.drain();
        got.sort();
        assert_eq!(got, vec![(key(0), 5), (key(1), 9), (key(2), 7)]);
        assert!(c.is_empty());
    }

    #[test]
    fn the_report_merges_by_max_and_breaks_ties_by_key() {
        let reports = vec![
            (key(5), 10),
            (key(3), 10),
            (key(7), 20),
            (key(3), 4),
            (key(9), 1),
            (key(1), 10),
        ];
        assert_eq!(
            top_n(reports.clone(), 3),
            vec![(key(7), 20), (key(1), 10), (key(3), 10)]
        );
        assert_eq!(top_n(reports, 10).len(), 5);
        assert!(top_n(Vec::new(), 3).is_empty());
    }
}
