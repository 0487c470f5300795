//! A device daemon's side of synchronisation (specs/exoplane.md §5.6,
//! Algorithm 4), a sans-IO state machine.
//!
//! On SYNC_REQ(r) with `r > last_round`: per requested entry it holds, once
//! no MERGE of it is unacknowledged, read the register (`Snap_e`), queue the
//! reply item with the *old* `I_e[k]`, then `δ = Snap_sw ⊖ (I_e ⊕ H_sw)`,
//! `I_e = Snap_sw ⊖ H_sw` and MERGE δ into the own register if δ ≠ 0̸.
//! When every item is done the SYNC_RESP goes out. A newer request
//! abandons an unfinished one (the hub has closed that round; items already
//! done stay consistent, the rest wait for the new round).
//!
//! On REJOIN after a rebuild: `reg = H[e][k]`, `I_e[k] = 0̸`, REJOIN_DONE.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::merge::{Algebra, Merge};
use super::{
    sub, EntryKey, Limits, MergeCmd, Rejoin, SyncError, SyncItem, SyncReq, SyncResp, Variant,
};
use crate::ids::{Pdev, Round};

/// Something the daemon wants done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DaemonOutput {
    /// Read the device register of `entry` for `round`'s reply; answer with
    /// [`Daemon::handle_register_read`].
    ReadRegister {
        /// The entry.
        entry: EntryKey,
        /// The round being answered.
        round: Round,
    },
    /// Inject a MERGE into the device pipeline; answer with
    /// [`Daemon::handle_merge_ack`].
    Merge(MergeCmd),
    /// Write the register (REJOIN) through the control plane, in order
    /// before the REJOIN_DONE that follows.
    SetRegister {
        /// The entry.
        entry: EntryKey,
        /// The value.
        value: u64,
    },
    /// Send SYNC_RESP to the hub.
    SyncResp(SyncResp),
    /// Send REJOIN_DONE to the hub.
    RejoinDone,
}

/// Counters of a daemon.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DaemonStats {
    /// SYNC_REQs with `round ≤ last_round` (stale or duplicate), ignored.
    pub req_stale: u64,
    /// Messages with more than `max_items` items, refused.
    pub too_many_items: u64,
    /// Unfinished requests abandoned for a newer one.
    pub abandoned: u64,
    /// Request items for entries this device does not hold (omitted).
    pub items_not_held: u64,
    /// Request items repeating an entry within one request (ignored).
    pub items_duplicate: u64,
    /// MERGEs injected.
    pub merges: u64,
    /// REJOIN items for entries this device does not hold.
    pub rejoin_unknown: u64,
    /// Read results or MERGE_ACKs nobody waited for.
    pub late_results: u64,
    /// Entries refused by `max_entries`.
    pub refused: u64,
}

#[derive(Clone, Debug)]
struct Held {
    merge: Merge,
    i: u64,
    merges_in_flight: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ItemState {
    /// Waits for the entry's pending MERGE.
    Waiting,
    Reading,
    Done,
}

#[derive(Clone, Debug)]
struct JobItem {
    snap_sw: u64,
    h_sw: u64,
    state: ItemState,
}

#[derive(Clone, Debug)]
struct Job {
    round: Round,
    items: BTreeMap<EntryKey, JobItem>,
    reply: Vec<SyncItem>,
    /// Items still `Waiting`, and items not yet `Done`: kept as the states
    /// change so a read result costs O(log n), not a pass over the job
    /// (a pass per result made a round quadratic in its items).
    waiting: BTreeSet<EntryKey>,
    open: usize,
}

/// A device daemon's synchronisation state machine.
#[derive(Clone, Debug)]
pub struct Daemon {
    pdev: Pdev,
    limits: Limits,
    variant: Variant,
    last_round: Round,
    held: BTreeMap<EntryKey, Held>,
    job: Option<Job>,
    out: VecDeque<DaemonOutput>,
    stats: DaemonStats,
}

impl Daemon {
    /// A daemon of `pdev` that has seen rounds up to `last_round` (the
    /// HELLO_ACK's `round`, so requests of an earlier life are stale).
    pub fn new(pdev: Pdev, last_round: Round, limits: Limits) -> Daemon {
        Daemon {
            pdev,
            limits,
            variant: Variant::Correct,
            last_round,
            held: BTreeMap::new(),
            job: None,
            out: VecDeque::new(),
            stats: DaemonStats::default(),
        }
    }

    #[doc(hidden)]
    pub fn with_variant(mut self, variant: Variant) -> Daemon {
        self.variant = variant;
        self
    }

    /// The device.
    pub fn pdev(&self) -> Pdev {
        self.pdev
    }

    /// The hub's HELLO_ACK carried `round`: requests of rounds up to it
    /// belong to an earlier session and are stale.
    pub fn seen_round(&mut self, round: Round) {
        self.last_round = self.last_round.max(round);
    }

    /// The last round accepted.
    pub fn last_round(&self) -> Round {
        self.last_round
    }

    /// Counters.
    pub fn stats(&self) -> &DaemonStats {
        &self.stats
    }

    /// `I_e[k]` of a held entry.
    pub fn history(&self, entry: &EntryKey) -> Option<u64> {
        self.held.get(entry).map(|h| h.i)
    }

    /// Whether a SYNC_REQ is being answered (reads or merges outstanding).
    pub fn answering(&self) -> bool {
        self.job.is_some()
    }

    /// MERGEs injected and not yet acknowledged.
    pub fn pending_merges(&self) -> u64 {
        self.held
            .values()
            .map(|h| u64::from(h.merges_in_flight))
            .sum()
    }

    /// The next output, if any.
    pub fn poll_output(&mut self) -> Option<DaemonOutput> {
        self.out.pop_front()
    }

    /// The device gained a synchronised entry (its slot created at `0̸`).
    pub fn add_entry(&mut self, entry: &EntryKey, merge: Merge) -> Result<(), SyncError> {
        if let Some(h) = self.held.get(entry) {
            return if h.merge == merge {
                Ok(())
            } else {
                Err(SyncError::MergeMismatch(h.merge))
            };
        }
        if self.held.len() >= self.limits.max_entries {
            self.stats.refused += 1;
            return Err(SyncError::TableFull(self.held.len()));
        }
        self.held.insert(
            entry.clone(),
            Held {
                merge,
                i: merge.identity(),
                merges_in_flight: 0,
            },
        );
        Ok(())
    }

    /// DELETE: the entry is gone; drop its history.
    pub fn remove_entry(&mut self, entry: &EntryKey) {
        self.held.remove(entry);
        self.pump();
    }

    /// A SYNC_REQ from the hub.
    pub fn handle_sync_req(&mut self, req: &SyncReq) {
        if req.round <= self.last_round {
            self.stats.req_stale += 1;
            return;
        }
        if req.items.len() > self.limits.max_items {
            self.stats.too_many_items += 1;
            return;
        }
        self.last_round = req.round;
        if self.job.take().is_some() {
            self.stats.abandoned += 1;
        }
        let mut items = BTreeMap::new();
        for item in &req.items {
            if !self.held.contains_key(&item.entry) {
                self.stats.items_not_held += 1;
                continue;
            }
            let job_item = JobItem {
                snap_sw: item.snap,
                h_sw: item.hist,
                state: ItemState::Waiting,
            };
            if items.insert(item.entry.clone(), job_item).is_some() {
                self.stats.items_duplicate += 1;
            }
        }
        self.job = Some(Job {
            round: req.round,
            waiting: items.keys().cloned().collect(),
            open: items.len(),
            items,
            reply: Vec::new(),
        });
        self.pump();
    }

    /// The device answered a [`DaemonOutput::ReadRegister`].
    pub fn handle_register_read(&mut self, entry: &EntryKey, round: Round, value: u64) {
        let Some(job) = self.job.as_mut().filter(|j| j.round == round) else {
            self.stats.late_results += 1;
            return;
        };
        let Some(item) = job
            .items
            .get_mut(entry)
            .filter(|i| i.state == ItemState::Reading)
        else {
            self.stats.late_results += 1;
            return;
        };
        item.state = ItemState::Done;
        job.open -= 1;
        if let Some(held) = self.held.get_mut(entry) {
            let m = held.merge;
            let snap_e = m.canon(value);
            let (snap_sw, h_sw) = (m.canon(item.snap_sw), m.canon(item.h_sw));
            let (hist, delta) = match m.algebra() {
                Algebra::Group => {
                    let old_i = held.i;
                    held.i = sub(m, snap_sw, h_sw);
                    let delta = match self.variant {
                        Variant::NoHistory => snap_sw,
                        _ => sub(m, snap_sw, m.combine(old_i, h_sw)),
                    };
                    (old_i, delta)
                }
                // An idempotent merge takes the other side's snapshot whole;
                // nothing to do if the own copy already covers it.
                Algebra::Semilattice if m.combine(snap_e, snap_sw) == snap_e => (0, m.identity()),
                Algebra::Semilattice => (0, snap_sw),
            };
            job.reply.push(SyncItem {
                entry: entry.clone(),
                snap: snap_e,
                hist,
            });
            if delta != m.identity() {
                held.merges_in_flight += 1;
                self.stats.merges += 1;
                self.out.push_back(DaemonOutput::Merge(MergeCmd {
                    entry: entry.clone(),
                    merge: m,
                    round,
                    delta,
                }));
            }
        }
        self.pump();
    }

    /// The device pipeline's MERGE_ACK for `entry`.
    pub fn handle_merge_ack(&mut self, entry: &EntryKey) {
        match self.held.get_mut(entry) {
            Some(h) if h.merges_in_flight > 0 => h.merges_in_flight -= 1,
            _ => self.stats.late_results += 1,
        }
        self.pump();
    }

    /// REJOIN after a rebuild (the DUMP already created the slots):
    /// `reg = H`, `I = 0̸`, then REJOIN_DONE.
    pub fn handle_rejoin(&mut self, rejoin: &Rejoin) {
        if rejoin.items.len() > self.limits.max_items {
            self.stats.too_many_items += 1;
            return;
        }
        for (entry, h) in &rejoin.items {
            let Some(held) = self.held.get_mut(entry) else {
                self.stats.rejoin_unknown += 1;
                continue;
            };
            let m = held.merge;
            held.i = m.identity();
            let value = match self.variant {
                Variant::RestartAtZero => m.identity(),
                _ => m.canon(*h),
            };
            self.out.push_back(DaemonOutput::SetRegister {
                entry: entry.clone(),
                value,
            });
        }
        self.out.push_back(DaemonOutput::RejoinDone);
    }

    /// Start the reads that may go, and answer once every item is done.
    fn pump(&mut self) {
        let Some(job) = self.job.as_mut() else {
            return;
        };
        let mut started = Vec::new();
        for entry in &job.waiting {
            let Some(item) = job.items.get_mut(entry) else {
                continue;
            };
            match self.held.get(entry) {
                // Deleted since the request: omitted from the reply.
                None => {
                    item.state = ItemState::Done;
                    job.open -= 1;
                    started.push(entry.clone());
                }
                Some(h) if h.merges_in_flight == 0 || self.variant == Variant::ReadDuringMerge => {
                    item.state = ItemState::Reading;
                    self.out.push_back(DaemonOutput::ReadRegister {
                        entry: entry.clone(),
                        round: job.round,
                    });
                    started.push(entry.clone());
                }
                Some(_) => {}
            }
        }
        for entry in &started {
            job.waiting.remove(entry);
        }
        if job.open == 0 {
            if let Some(job) = self.job.take() {
                self.out.push_back(DaemonOutput::SyncResp(SyncResp {
                    round: job.round,
                    items: job.reply,
                }));
            }
        }
    }
}
