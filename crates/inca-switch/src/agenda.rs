//! A time-ordered agenda of future events.
//!
//! Events come out in (time, insertion order) order, as from a binary heap.
//! Most events in a packet-processing model are scheduled at non-decreasing
//! times (a fixed pipeline latency after a non-decreasing "now"), so the
//! agenda keeps two lanes: events scheduled no earlier than the last one in
//! the FIFO lane are appended to it in O(1); the rest go to a heap. A pop
//! takes the earlier of the two fronts. The order is exactly that of a single
//! heap keyed by (time, sequence number).

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

use crate::device::Nanos;

struct Entry<T> {
    at: Nanos,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<T> Eq for Entry<T> {}
impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Entry<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// A time-ordered agenda. See the module documentation.
pub struct Agenda<T> {
    fifo: VecDeque<Entry<T>>,
    heap: BinaryHeap<Reverse<Entry<T>>>,
    seq: u64,
    /// Time of the last item taken out: nothing may be scheduled before it.
    popped: Nanos,
}

impl<T> Default for Agenda<T> {
    fn default() -> Self {
        Agenda {
            fifo: VecDeque::new(),
            heap: BinaryHeap::new(),
            seq: 0,
            popped: 0,
        }
    }
}

impl<T> Agenda<T> {
    /// An empty agenda.
    pub fn new() -> Self {
        Self::default()
    }

    /// Schedules `item` at `at`; among items at one time, earlier pushes
    /// come out first.
    pub fn push(&mut self, at: Nanos, item: T) {
        // An item before one already taken would come out after it: time
        // would go backwards for whoever drives the agenda.
        crate::invariant!(
            at >= self.popped,
            "agenda: item scheduled at {at} ns, after one at {} ns came out",
            self.popped
        );
        self.seq += 1;
        let e = Entry {
            at,
            seq: self.seq,
            item,
        };
        match self.fifo.back() {
            Some(last) if at < last.at => self.heap.push(Reverse(e)),
            _ => self.fifo.push_back(e),
        }
    }

    /// The time of the earliest item.
    pub fn peek_time(&self) -> Option<Nanos> {
        match (self.fifo.front(), self.heap.peek()) {
            (Some(f), Some(Reverse(h))) => Some(f.at.min(h.at)),
            (Some(f), None) => Some(f.at),
            (None, Some(Reverse(h))) => Some(h.at),
            (None, None) => None,
        }
    }

    /// Takes the earliest item if it is due at or before `now`.
    pub fn pop_due(&mut self, now: Nanos) -> Option<(Nanos, T)> {
        let from_fifo = match (self.fifo.front(), self.heap.peek()) {
            (Some(f), Some(Reverse(h))) => f < h,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return None,
        };
        let e = if from_fifo {
            if self.fifo.front()?.at > now {
                return None;
            }
            self.fifo.pop_front()?
        } else {
            if self.heap.peek()?.0.at > now {
                return None;
            }
            self.heap.pop()?.0
        };
        self.popped = self.popped.max(e.at);
        Some((e.at, e.item))
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.fifo.len() + self.heap.len()
    }

    /// True if nothing is scheduled.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every item.
    pub fn clear(&mut self) {
        self.fifo.clear();
        self.heap.clear();
        self.popped = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Same order as one heap keyed by (time, push order), whatever the
        /// interleaving of pushes and pops.
        #[test]
        fn matches_a_single_heap(ops in proptest::collection::vec((any::<bool>(), 0u64..50), 0..300)) {
            let mut agenda = Agenda::new();
            let mut reference = BinaryHeap::new();
            let mut now = 0;
            for (i, (push, t)) in ops.into_iter().enumerate() {
                if push {
                    agenda.push(now + t, i);
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
