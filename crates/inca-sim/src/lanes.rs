//! The simulator's event agenda: one FIFO lane per source of events.
//!
//! Events come out in (time, insertion order) order, exactly as from one
//! binary heap. But a network's events are not scheduled in time order
//! overall — deliveries after a link's delay, timers, transmissions after a
//! pipeline latency interleave — while each source on its own mostly is: a
//! link direction delivers frames in the order it sent them, a node's timers
//! mostly move forward. So each source gets a FIFO lane, a small heap holds
//! only the head of each non-empty lane, and an event that would break its
//! lane's order goes to an overflow heap. Heap operations then cost
//! log(lanes), not log(events in flight).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use inca_switch::device::Nanos;

struct Overflow<T> {
    at: Nanos,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Overflow<T> {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl<T> Eq for Overflow<T> {}
impl<T> PartialOrd for Overflow<T> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<T> Ord for Overflow<T> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// The agenda. See the module documentation.
pub struct LaneAgenda<T> {
    lanes: Vec<VecDeque<(Nanos, u64, T)>>,
    /// (time, seq, lane) of the front of every non-empty lane.
    heads: BinaryHeap<Reverse<(Nanos, u64, usize)>>,
    overflow: BinaryHeap<Reverse<Overflow<T>>>,
    seq: u64,
}

impl<T> Default for LaneAgenda<T> {
    fn default() -> Self {
        LaneAgenda {
            lanes: Vec::new(),
            heads: BinaryHeap::new(),
            overflow: BinaryHeap::new(),
            seq: 0,
        }
    }
}

impl<T> LaneAgenda<T> {
    /// Schedules `item` at `at` from source `lane`.
    pub fn push(&mut self, lane: usize, at: Nanos, item: T) {
        self.seq += 1;
        let seq = self.seq;
        if self.lanes.len() <= lane {
            self.lanes.resize_with(lane + 1, VecDeque::new);
        }
        let q = &mut self.lanes[lane];
        match q.back() {
            None => {
                q.push_back((at, seq, item));
                self.heads.push(Reverse((at, seq, lane)));
            }
            Some(&(last, _, _)) if last <= at => q.push_back((at, seq, item)),
            Some(_) => self.overflow.push(Reverse(Overflow { at, seq, item })),
        }
    }

    /// The time of the earliest item.
    pub fn peek_time(&self) -> Option<Nanos> {
        let h = self.heads.peek().map(|Reverse((at, _, _))| *at);
        let o = self.overflow.peek().map(|Reverse(e)| e.at);
        match (h, o) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Takes the earliest item if it is due at or before `now`.
    pub fn pop_due(&mut self, now: Nanos) -> Option<(Nanos, T)> {
        let h = self
            .heads
            .peek()
            .map(|Reverse((at, seq, lane))| (*at, *seq, *lane));
        let o = self.overflow.peek().map(|Reverse(e)| (e.at, e.seq));
        let from_lane = match (h, o) {
            (Some((ha, hs, _)), Some(o)) => (ha, hs) < o,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return None,
        };
        if from_lane {
            let (at, _, lane) = h?;
            if at > now {
                return None;
            }
            self.heads.pop();
            let q = &mut self.lanes[lane];
            let (at, _, item) = q.pop_front()?;
            if let Some(&(next, seq, _)) = q.front() {
                self.heads.push(Reverse((next, seq, lane)));
            }
            Some((at, item))
        } else {
            if o?.0 > now {
                return None;
            }
            let Reverse(e) = self.overflow.pop()?;
            Some((e.at, e.item))
        }
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.lanes.iter().map(VecDeque::len).sum::<usize>() + self.overflow.len()
    }

    /// True if nothing is scheduled.
    pub fn is_empty(&self) -> bool {
        self.heads.is_empty() && self.overflow.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Same order as one heap keyed by (time, push order), whatever the
        /// lanes and the interleaving of pushes and pops.
        #[test]
        fn matches_a_single_heap(ops in proptest::collection::vec((0usize..5, any::<bool>(), 0u64..40), 0..400)) {
            let mut agenda = LaneAgenda::default();
            let mut reference = BinaryHeap::new();
            let mut now = 0;
            for (i, (lane, push, t)) in ops.into_iter().enumerate() {
                if push {
                    agenda.push(lane, now + t, i);
                    reference.push(Reverse((now + t, i)));
                } else {
                    now += t;
                    loop {
                        let expected = match reference.peek() {
                            Some(Reverse((at, _))) if *at <= now => reference.pop().map(|Reverse(x)| x),
                            _ => None,
                        };
                        let got = agenda.pop_due(now);
                        prop_assert_eq!(got, expected);
                        if got.is_none() { break; }
                    }
                }
                prop_assert_eq!(agenda.len(), reference.len());
                prop_assert_eq!(agenda.peek_time(), reference.peek().map(|Reverse((at, _))| *at));
            }
        }
    }
}
