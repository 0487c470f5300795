//! The control plane's view of the data-plane SRAM cache and the sketch
//! epoch's clear (spec §5.5): which keys hold which hit-counter slot, the
//! last copy of the hit counters and the reads that refresh it, and the
//! slices of the sketch and Bloom-filter clear still to issue.
//!
//! Invariant: a slot is either free or held by exactly one cached key
//! (`slots` and `free` partition `0..cap`).

use std::collections::{BTreeMap, VecDeque};

use inca_switch::Nanos;

/// Oldest cache hit counts an eviction may be judged on [our choice]: a
/// digest that would evict reads the hit counters again if the copy is
/// older than this (spec §5.5: "the entry with the fewest hits this epoch").
pub const HITS_MAX_AGE: Nanos = 1_000_000;

/// Cache slots and hit counts as the control plane knows them.
#[derive(Debug, Clone)]
pub(crate) struct CacheState {
    /// Keys installed in the data-plane cache, with their hit-counter slot.
    slots: BTreeMap<Vec<u8>, u16>,
    free: Vec<u16>,
    /// Cache hits per slot, as last read from the data plane.
    hits: Vec<u64>,
    /// When `hits` was read (`None`: never, or an install reset a slot).
    hits_at: Option<Nanos>,
    /// A pending read of the hit counters an eviction waits for.
    hits_read: Option<u64>,
    /// The epoch's read of the hit counters (before they are reset).
    epoch_read: Option<u64>,
}

impl CacheState {
    /// An empty cache of `cap` slots.
    pub(crate) fn new(cap: usize) -> Self {
        CacheState {
            slots: BTreeMap::new(),
            // Popped from the back: slot 0 is handed out first.
            free: (0..cap.min(usize::from(u16::MAX)) as u16).rev().collect(),
            hits: vec![0; cap],
            hits_at: None,
            hits_read: None,
            epoch_read: None,
        }
    }

    /// Keys installed.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        self.slots.contains_key(key)
    }

    /// The hit-counter slot of a cached key.
    pub(crate) fn slot(&self, key: &[u8]) -> Option<u16> {
        self.slots.get(key).copied()
    }

    /// A cached key's hits this epoch, as last read (0 if not cached).
    pub(crate) fn hits_of(&self, key: &[u8]) -> u64 {
        self.slot(key)
            .and_then(|s| self.hits.get(usize::from(s)).copied())
            .unwrap_or(0)
    }

    /// Gives `key` a free slot (its hit count starts at 0); `None` if every
    /// slot is taken.
    pub(crate) fn install(&mut self, key: Vec<u8>) -> Option<u16> {
        let slot = self.free.pop()?;
        self.slots.insert(key, slot);
        if let Some(x) = self.hits.get_mut(usize::from(slot)) {
            *x = 0;
        }
        // The copy no longer says how the new entry compares.
        self.hits_at = None;
        Some(slot)
    }

    /// Frees a cached key's slot.
    pub(crate) fn remove(&mut self, key: &[u8]) -> Option<u16> {
        let slot = self.slots.remove(key)?;
        self.free.push(slot);
        Some(slot)
    }

    /// Whether an eviction must wait for a hit-counter read: one is pending,
    /// or the copy is older than [`HITS_MAX_AGE`] and a new read is needed
    /// (`Fresh` otherwise).
    pub(crate) fn hits_need(&self, now: Nanos) -> HitsNeed {
        if self.hits_read.is_some() {
            HitsNeed::Pending
        } else if self
            .hits_at
            .is_some_and(|t| now.saturating_sub(t) <= HITS_MAX_AGE)
        {
            HitsNeed::Fresh
        } else {
            HitsNeed::Read
        }
    }

    /// An eviction's read of the hit counters went out as `request`.
    pub(crate) fn expect_hits(&mut self, request: u64) {
        self.hits_read = Some(request);
    }

    /// The epoch's read of the hit counters went out as `request`.
    pub(crate) fn expect_epoch(&mut self, request: u64) {
        self.epoch_read = Some(request);
    }

    /// Takes the values of register read `request` if it is one of the
    /// cache's; false otherwise.
    pub(crate) fn on_read(&mut self, request: u64, values: Vec<u64>, now: Nanos) -> bool {
        if self.hits_read == Some(request) {
            self.hits_read = None;
        } else if self.epoch_read == Some(request) {
            self.epoch_read = None;
        } else {
            return false;
        }
        for (slot, v) in values.into_iter().enumerate() {
            if let Some(h) = self.hits.get_mut(slot) {
                *h = v;
            }
        }
        self.hits_at = Some(now);
        true
    }
}

/// What an eviction decision needs from the hit counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HitsNeed {
    /// The copy is recent enough.
    Fresh,
    /// A read is in flight: wait for it.
    Pending,
    /// Issue a read and wait for it.
    Read,
}

/// One slice of the epoch's sketch clear: (array, first entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClearSlice {
    Cms(usize, u64),
    Bf(usize, u64),
}

/// The epoch's sketch and Bloom-filter clear, issued one slice at a time.
/// Invariant: at most one slice in flight (`barrier` set), so the channel
/// is never more than one slice behind.
#[derive(Debug, Clone, Default)]
pub(crate) struct SketchClear {
    /// Slices still to issue this epoch.
    slices: VecDeque<ClearSlice>,
    /// The barrier read that says the slice in flight is done.
    barrier: Option<u64>,
}

impl SketchClear {
    /// Starts a new epoch's clear of `slices`; true if the previous epoch's
    /// clear had not finished (its remaining slices are abandoned).
    pub(crate) fn restart(&mut self, slices: impl IntoIterator<Item = ClearSlice>) -> bool {
        let overrun = !self.slices.is_empty() || self.barrier.is_some();
        self.slices.clear();
        self.slices.extend(slices);
        overrun
    }

    /// Whether a slice is in flight.
    pub(crate) fn in_flight(&self) -> bool {
        self.barrier.is_some()
    }

    /// The next slice to issue, if any.
    pub(crate) fn next(&mut self) -> Option<ClearSlice> {
        self.slices.pop_front()
    }

    /// The slice just issued completes when barrier read `request` does.
    pub(crate) fn issued(&mut self, request: u64) {
        self.barrier = Some(request);
    }

    /// Whether register read `request` is the in-flight slice's barrier
    /// (it is then done).
    pub(crate) fn on_barrier(&mut self, request: u64) -> bool {
        if self.barrier == Some(request) {
            self.barrier = None;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_handed_out_once_and_come_back() {
        let mut c = CacheState::new(2);
        assert_eq!(c.install(b"a".to_vec()), Some(0));
        assert_eq!(c.install(b"b".to_vec()), Some(1));
        assert_eq!(c.install(b"c".to_vec()), None, "full");
        assert_eq!(
            (c.len(), c.slot(b"b"), c.contains(b"c")),
            (2, Some(1), false)
        );
        assert_eq!(c.remove(b"a"), Some(0));
        assert_eq!(c.remove(b"a"), None);
        assert_eq!(c.install(b"c".to_vec()), Some(0));
    }

    #[test]
    fn hit_counts_come_from_reads_and_age() {
        let mut c = CacheState::new(2);
        c.install(b"a".to_vec());
        c.install(b"b".to_vec());
        assert_eq!(c.hits_need(0), HitsNeed::Read, "never read");
        c.expect_hits(7);
        assert_eq!(c.hits_need(0), HitsNeed::Pending);
        assert!(!c.on_read(8, vec![9, 9], 10), "not the cache's read");
        assert!(c.on_read(7, vec![5, 3, 99], 10), "extra values ignored");
        assert_eq!(
            (c.hits_of(b"a"), c.hits_of(b"b"), c.hits_of(b"x")),
            (5, 3, 0)
        );
        assert_eq!(c.hits_need(10 + HITS_MAX_AGE), HitsNeed::Fresh);
        assert_eq!(c.hits_need(11 + HITS_MAX_AGE), HitsNeed::Read);
        c.expect_epoch(11);
        assert!(c.on_read(11, vec![1, 1], 20));
        // A new entry's count is 0, and the copy no longer compares it.
        c.remove(b"a");
        assert_eq!(c.install(b"c".to_vec()), Some(0));
        assert_eq!(c.hits_of(b"c"), 0);
        assert_eq!(c.hits_need(20), HitsNeed::Read);
    }

    #[test]
    fn a_new_epoch_abandons_an_unfinished_clear() {
        let mut s = SketchClear::default();
        assert!(!s.restart([ClearSlice::Cms(0, 0), ClearSlice::Bf(0, 0)]));
        assert_eq!(s.next(), Some(ClearSlice::Cms(0, 0)));
        s.issued(4);
        assert!(s.in_flight());
        assert!(!s.on_barrier(5));
        assert!(s.restart([ClearSlice::Cms(1, 0)]), "overrun");
        assert!(s.on_barrier(4));
        assert!(!s.in_flight());
        assert_eq!(s.next(), Some(ClearSlice::Cms(1, 0)), "the old slices went");
        assert_eq!(s.next(), None);
        assert!(!s.restart([]));
    }
}
