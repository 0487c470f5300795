//! The correctness hook (spec §6 item 3 end to end): an optional
//! [`Observer`] the TEA switch reports every lookup result and every
//! completed control-plane operation to, so a test or campaign can check
//! each lookup against a reference map of committed inserts, deletes and
//! updates. The switch knows nothing of how that check is made: an observer
//! that judges (the campaign's [`crate::campaign::HistoryCheck`]) hands its
//! verdict back through [`Observer::verdict`] for the node report.
//!
//! [`Recorder`] is the plain observer: a shared, bounded log of records.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use inca_switch::Nanos;

/// Where a lookup was served from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LookupPath {
    /// Stash or cache hit in the ingress pass.
    Sram,
    /// One DRAM round trip (the response pass).
    Dram,
}

/// One lookup's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookupRecord {
    /// When the result was known (SRAM check, or response pass).
    pub at: Nanos,
    /// When the SRAM check ran (equal to `at` for SRAM hits; reconstructed
    /// from the shim's 32-bit timestamp for DRAM lookups).
    pub checked_at: Nanos,
    /// The key.
    pub key: Vec<u8>,
    /// The value, or `None` for a miss.
    pub value: Option<Vec<u8>>,
    /// Where it came from.
    pub path: LookupPath,
    /// The QP used (DRAM lookups).
    pub qp: u16,
}

/// A table operation the control plane finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitRecord {
    /// When it completed (every step visible).
    pub at: Nanos,
    /// When it started (its first step was issued).
    pub started: Nanos,
    /// The key.
    pub key: Vec<u8>,
    /// The value after the operation (`None`: deleted or refused insert of
    /// an absent key).
    pub value: Option<Vec<u8>>,
}

/// Checked mode's verdict, as the node report shows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckVerdict {
    /// Lookups judged.
    pub lookups: u64,
    /// Of which broke the rules.
    pub violations: u64,
    /// Records dropped because the log was full (the verdict covers only
    /// what was kept).
    pub dropped: u64,
}

/// Where the switch reports lookups and completed operations. Called
/// synchronously, in simulation time; nothing it does affects the switch.
pub trait Observer: Send + Sync {
    /// A lookup's result is known.
    fn lookup(&self, r: LookupRecord);
    /// A table operation completed.
    fn commit(&self, r: CommitRecord);
    /// A verdict for the node report, if this observer judges what it saw.
    /// `in_flight` is the operation running when the report is made (it
    /// has shown its value without committing); `t_grace` the switch's
    /// `T_GRACE`. Default: not a judge.
    fn verdict(&self, _in_flight: Option<CommitRecord>, _t_grace: Nanos) -> Option<CheckVerdict> {
        None
    }
}

/// Bound on kept records of each kind; older ones are dropped and counted.
pub const OBSERVER_CAP: usize = 1 << 20;

/// What the observer has seen.
#[derive(Debug, Default)]
pub struct ObserverLog {
    /// Lookup results, oldest first.
    pub lookups: VecDeque<LookupRecord>,
    /// Completed operations, oldest first.
    pub commits: VecDeque<CommitRecord>,
    /// Records dropped because the log was full.
    pub dropped: u64,
}

/// An observer that records: a shared handle to an [`ObserverLog`] (cheap
/// to clone; clones share the log).
#[derive(Debug, Clone, Default)]
pub struct Recorder(pub Arc<Mutex<ObserverLog>>);

impl Observer for Recorder {
    fn lookup(&self, r: LookupRecord) {
        Recorder::lookup(self, r);
    }

    fn commit(&self, r: CommitRecord) {
        Recorder::commit(self, r);
    }
}

impl Recorder {
    /// An empty log.
    pub fn new() -> Self {
        Recorder::default()
    }

    fn with<R>(&self, f: impl FnOnce(&mut ObserverLog) -> R) -> R {
        // A poisoned lock only means another thread panicked mid-test; the
        // log itself is still consistent (pushes are atomic per record).
        let mut g = match self.0.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        f(&mut g)
    }

    /// Records a lookup.
    pub fn lookup(&self, r: LookupRecord) {
        self.with(|l| {
            if l.lookups.len() >= OBSERVER_CAP {
                l.lookups.pop_front();
                l.dropped += 1;
            }
            l.lookups.push_back(r);
        });
    }

    /// Records a completed operation.
    pub fn commit(&self, r: CommitRecord) {
        self.with(|l| {
            if l.commits.len() >= OBSERVER_CAP {
                l.commits.pop_front();
                l.dropped += 1;
            }
            l.commits.push_back(r);
        });
    }

    /// Takes everything recorded so far.
    pub fn drain(&self) -> (Vec<LookupRecord>, Vec<CommitRecord>) {
        self.with(|l| (l.lookups.drain(..).collect(), l.commits.drain(..).collect()))
    }

    /// A copy of everything recorded so far, and the records dropped.
    pub fn snapshot(&self) -> (Vec<LookupRecord>, Vec<CommitRecord>, u64) {
        self.with(|l| {
            (
                l.lookups.iter().cloned().collect(),
                l.commits.iter().cloned().collect(),
                l.dropped,
            )
        })
    }

    /// Number of lookups recorded and not yet drained.
    pub fn lookups_len(&self) -> usize {
        self.with(|l| l.lookups.len())
    }
}
