//! A server's slice of a resource pool (spec §3.2, POOL_ASSIGN): the ids
//! `lo..=hi` (SNAT ports, TRD indices), handed out and taken back.
//!
//! Allocation prefers ids never handed out, in increasing order, and then
//! reuses freed ids oldest-freed first, so an id is reused as late as
//! possible (a late packet of a dead flow meets its old id less often).
//! Deterministic; every structure is bounded by the slice's size.

use std::collections::{BTreeSet, VecDeque};

/// A slice `lo..=hi` of ids. See the module documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlicePool {
    lo: u32,
    hi: u32,
    /// The next id never handed out (hi + 1 when all have been).
    fresh: u64,
    /// Freed ids, oldest first.
    freed: VecDeque<u32>,
    in_use: BTreeSet<u32>,
}

impl SlicePool {
    /// The slice `lo..=hi`; None if it is empty.
    pub fn new(lo: u32, hi: u32) -> Option<Self> {
        (lo <= hi).then(|| SlicePool {
            lo,
            hi,
            fresh: u64::from(lo),
            freed: VecDeque::new(),
            in_use: BTreeSet::new(),
        })
    }

    /// The slice's bounds.
    pub fn bounds(&self) -> (u32, u32) {
        (self.lo, self.hi)
    }

    /// Whether `id` is in the slice.
    pub fn contains(&self, id: u32) -> bool {
        (self.lo..=self.hi).contains(&id)
    }

    /// A free id; None if the slice is exhausted.
    pub fn allocate(&mut self) -> Option<u32> {
        while self.fresh <= u64::from(self.hi) {
            let id = self.fresh as u32;
            self.fresh += 1;
            // An id marked in use before it was handed out (carried over
            // from an earlier slice) is skipped.
            if self.in_use.insert(id) {
                return Some(id);
            }
        }
        let id = self.freed.pop_front()?;
        self.in_use.insert(id);
        Some(id)
    }

    /// Marks `id` in use (held by a mapping this pool did not hand out);
    /// false if it is outside the slice or already in use.
    pub fn mark_used(&mut self, id: u32) -> bool {
        if !self.contains(id) || !self.in_use.insert(id) {
            return false;
        }
        if let Some(i) = self.freed.iter().position(|&f| f == id) {
            self.freed.remove(i);
        }
        true
    }

    /// Takes `id` back; false (nothing changes) if it is not in use here.
    pub fn release(&mut self, id: u32) -> bool {
        if !self.in_use.remove(&id) {
            return false;
        }
        // An id marked in use before allocation reached it is still ahead
        // of `fresh`, and will be handed out from there: queueing it as
        // freed too would hand it out twice.
        if u64::from(id) < self.fresh {
            self.freed.push_back(id);
        }
        true
    }

    /// Ids in use.
    pub fn in_use(&self) -> usize {
        self.in_use.len()
    }

    /// Ids in the slice.
    pub fn size(&self) -> u64 {
        u64::from(self.hi - self.lo) + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_ids_first_then_the_oldest_freed() {
        assert!(SlicePool::new(5, 4).is_none());
        let mut p = SlicePool::new(10, 13).unwrap();
        assert_eq!(p.size(), 4);
        assert!(p.mark_used(11));
        assert!(!p.mark_used(11));
        assert!(!p.mark_used(14));
        assert_eq!(p.allocate(), Some(10));
        assert_eq!(p.allocate(), Some(12));
        assert_eq!(p.allocate(), Some(13));
        assert_eq!(p.allocate(), None);
        assert!(p.release(12));
        assert!(!p.release(12));
        assert!(p.release(10));
        assert!(!p.release(99));
        assert_eq!(p.in_use(), 2);
        assert_eq!(p.allocate(), Some(12));
        assert!(p.mark_used(10));
        assert_eq!(p.allocate(), None);
        assert_eq!(p.in_use(), 4);
    }

    #[test]
    fn an_id_marked_ahead_and_released_is_handed_out_once() {
        let mut p = SlicePool::new(0, 3).unwrap();
        assert!(p.mark_used(2));
        assert!(p.release(2));
        let mut got: Vec<u32> = std::iter::from_fn(|| p.allocate()).collect();
        got.sort_unstable();
        assert_eq!(got, vec![0, 1, 2, 3]);
        assert_eq!(p.allocate(), None);
    }

    #[test]
    fn a_whole_u32_slice_does_not_overflow() {
        let mut p = SlicePool::new(u32::MAX - 1, u32::MAX).unwrap();
        assert_eq!(p.allocate(), Some(u32::MAX - 1));
        assert_eq!(p.allocate(), Some(u32::MAX));
        assert_eq!(p.allocate(), None);
    }
}
