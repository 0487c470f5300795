//! The entry directory (spec §3.2): for every (app, object, key) the
//! authoritative value and version, which devices hold a copy (bit 0 = the
//! switch, bit `p + 1` = pdev `p`), how many switch-resident flows rely on
//! the switch copy, and its switch slot. Also the per-object slot
//! allocators of the switch instance.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::hub::oplog::EntryKey;
use crate::ids::{Pdev, UnionKey, Version};

/// The holders bit of the switch.
pub const SWITCH_BIT: u64 = 1;

/// The holders bit of `pdev`.
pub fn pdev_bit(pdev: Pdev) -> u64 {
    1u64 << (u32::from(pdev.0) + 1)
}

/// Where the switch copy of an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwitchCopy {
    /// Not on the switch.
    Absent,
    /// A flow needs it but the object has no free slot yet; installed when
    /// an eviction's removal frees one.
    WaitingSlot,
    /// Install issued, not acknowledged.
    Installing,
    /// On the switch.
    Installed,
    /// Removal issued, not acknowledged.
    Removing,
}

/// One directory entry.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Authoritative value (zeros for registers: the merge identity).
    pub value: Vec<u8>,
    /// Version of the last write that changed it.
    pub version: Version,
    /// Holders bitmap; dead holders stay so a later DUMP covers them.
    pub holders: u64,
    /// Switch slot while the switch holds (or is installing/removing) it.
    pub slot: Option<u32>,
    /// The switch copy's state.
    pub switch: SwitchCopy,
    /// Flows (INSERTING, PRESENT or EVICTING) relying on the switch copy;
    /// the spec's refcount is its size.
    pub users: BTreeSet<UnionKey>,
    /// A DELETE is under way: no new promotion may use the entry.
    pub deleting: bool,
}

impl Entry {
    /// A new entry with no holders.
    pub fn new(value: Vec<u8>, version: Version) -> Self {
        Entry {
            value,
            version,
            holders: 0,
            slot: None,
            switch: SwitchCopy::Absent,
            users: BTreeSet::new(),
            deleting: false,
        }
    }

    /// The switch refcount (spec §3.2).
    pub fn refcount(&self) -> u32 {
        self.users.len() as u32
    }
}

/// Slots 0..capacity of one switch object, lowest free first.
#[derive(Clone, Debug)]
pub struct SlotPool {
    capacity: u32,
    next: u32,
    free: BTreeSet<u32>,
    /// Entries waiting for a slot, first come first served.
    pub waiters: VecDeque<EntryKey>,
    /// Removals issued and not yet acknowledged: slots about to be free.
    pub removing: u32,
}

impl SlotPool {
    /// A pool of `capacity` slots.
    pub fn new(capacity: u32) -> Self {
        SlotPool {
            capacity,
            next: 0,
            free: BTreeSet::new(),
            waiters: VecDeque::new(),
            removing: 0,
        }
    }

    /// Slots still free.
    pub fn available(&self) -> u32 {
        self.capacity - self.next + self.free.len() as u32
    }

    /// Slots a new install can count on: free now, or freed by removals in
    /// flight, less those already promised to waiting entries.
    pub fn obtainable(&self) -> u32 {
        (self.available() + self.removing).saturating_sub(self.waiters.len() as u32)
    }

    /// Takes a slot, or `None` when the object is full.
    pub fn take(&mut self) -> Option<u32> {
        if let Some(slot) = self.free.pop_first() {
            return Some(slot);
        }
        if self.next < self.capacity {
            self.next += 1;
            return Some(self.next - 1);
        }
        None
    }

    /// Returns a slot.
    pub fn put(&mut self, slot: u32) {
        if slot < self.next {
            self.free.insert(slot);
        }
    }
}

/// The directory itself, bounded.
#[derive(Debug, Default)]
pub struct Directory {
    /// Entries by (app, obj, key); ordered for deterministic dumps.
    pub map: BTreeMap<EntryKey, Entry>,
}
