//! The hub's append-only op log: every switch-side step of a two-phase
//! insert or eviction and every write's start, per-holder application and
//! acknowledgement, each with its time. Checkers (P3, P4) read it; it is a
//! bounded ring so a long run keeps only its tail, and how many records
//! fell off is counted.

use std::collections::VecDeque;

use crate::ids::{AppId, Pdev, UnionKey, Version};
use inca_switch::device::Nanos;

/// Records kept by default [our choice: enough for a randomized test run;
/// a campaign checks incrementally].
pub const OP_LOG_CAPACITY: usize = 1 << 20;

pub use crate::ids::EntryKey;

/// What happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// The switch was told to install an object entry (phase 1).
    ObjectInstall {
        /// The entry.
        entry: EntryKey,
        /// Its switch slot.
        slot: u32,
    },
    /// The switch acknowledged an object install.
    ObjectInstallAcked {
        /// The entry.
        entry: EntryKey,
    },
    /// The switch was told to remove an object entry (eviction phase 2).
    ObjectRemove {
        /// The entry.
        entry: EntryKey,
        /// The hub's refcount when it issued the removal (must be 0).
        refcount: u32,
    },
    /// The switch was told to add `fm_p[uk]` (insert phase 2).
    FmInsert {
        /// The app.
        app: AppId,
        /// The flow.
        uk: UnionKey,
        /// The object entries the flow's packets look up.
        entries: Vec<EntryKey>,
    },
    /// The switch acknowledged an FM add.
    FmInsertAcked {
        /// The app.
        app: AppId,
        /// The flow.
        uk: UnionKey,
    },
    /// The switch was told to delete `fm_p[uk]` (eviction phase 1).
    FmDelete {
        /// The app.
        app: AppId,
        /// The flow.
        uk: UnionKey,
    },
    /// The switch acknowledged an FM delete.
    FmDeleteAcked {
        /// The app.
        app: AppId,
        /// The flow.
        uk: UnionKey,
    },
    /// The sequencer started a write: version assigned, WRITE_APPLY sent to
    /// `targets` (holders bitmap of the live holders it waits for; bit 0 =
    /// the switch).
    WriteStarted {
        /// The entry.
        entry: EntryKey,
        /// The version.
        version: Version,
        /// Whether it deletes the key.
        delete: bool,
        /// Holders waited for.
        targets: u64,
    },
    /// A holder (`None` = the switch) reported a write applied.
    WriteApplied {
        /// The holder.
        holder: Option<Pdev>,
        /// The entry.
        entry: EntryKey,
        /// The version.
        version: Version,
    },
    /// Every live holder applied; the write is complete.
    WriteDone {
        /// The entry.
        entry: EntryKey,
        /// The version.
        version: Version,
    },
    /// WRITE_ACK sent to the requester.
    WriteAcked {
        /// The requester.
        requester: Pdev,
        /// The request's id.
        req_id: u64,
    },
    /// A holder was declared dead (silent for the holder timeout, or lost).
    HolderDead {
        /// The device.
        pdev: Pdev,
    },
}

/// One record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpRecord {
    /// When.
    pub at: Nanos,
    /// What.
    pub op: Op,
}

/// The bounded ring.
#[derive(Debug)]
pub struct OpLog {
    records: VecDeque<OpRecord>,
    capacity: usize,
    evicted: u64,
}

impl OpLog {
    /// A log keeping the last `capacity` records.
    pub fn new(capacity: usize) -> Self {
        OpLog {
            records: VecDeque::new(),
            capacity: capacity.max(1),
            evicted: 0,
        }
    }

    /// Appends a record, dropping the oldest when full.
    pub fn push(&mut self, at: Nanos, op: Op) {
        if self.records.len() == self.capacity {
            self.records.pop_front();
            self.evicted += 1;
        }
        self.records.push_back(OpRecord { at, op });
    }

    /// The records kept, oldest first.
    pub fn records(&self) -> impl Iterator<Item = &OpRecord> {
        self.records.iter()
    }

    /// How many records fell off the front.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }
}
