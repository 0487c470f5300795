//! The hub's side of synchronisation (specs/exoplane.md §5.6, Algorithm 3),
//! a sans-IO state machine.
//!
//! A round, every `T_c`:
//! 1. *Snapshotting*: per shared entry, the switch register is read (an
//!    [`HubOutput::ReadSwitch`]) once no MERGE of it is unacknowledged and
//!    no eviction read is in flight; entries the switch does not hold use
//!    `S_cp`.
//! 2. *Collecting*: one SYNC_REQ per UP holder; SYNC_RESPs of this round
//!    are folded in as they come (`δ = Snap_e ⊖ (H ⊕ I)`, `H = Snap_e ⊖ I`,
//!    `acc ⊕= δ`) until all participants answered or `T_rt` passed.
//! 3. *Merging*: per entry with news, one MERGE into the switch (pending
//!    until its MERGE_ACK), or `S_cp ⊕= acc` if the switch does not hold it.
//!
//! The switch copy's lifecycle is serialised with the rounds per entry: at
//! most one switch read is in flight per entry, an eviction waits for
//! pending merges, and a round's news for an entry being evicted is folded
//! into `S_cp` after the final read.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::merge::{Algebra, Merge};
use super::{
    sub, EntryKey, Limits, MergeCmd, Rejoin, SyncError, SyncItem, SyncReq, SyncResp, Variant, T_C,
    T_RT,
};
use crate::ids::{Pdev, Round};
use inca_switch::device::Nanos;

/// A device's status as the hub sees it (§3.2, §5.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceStatus {
    /// Serving and synchronised.
    Up,
    /// Failed: excluded from rounds; its `H` is kept.
    Down,
    /// Restarted with lost state, being rebuilt (DUMP, REJOIN); excluded
    /// from rounds until REJOIN_DONE.
    Rebuilding,
}

/// Something the hub wants done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HubOutput {
    /// Read the switch register of `entry`; answer with
    /// [`SyncHub::handle_switch_read`].
    ReadSwitch {
        /// The entry.
        entry: EntryKey,
    },
    /// Inject a MERGE into the switch pipeline; answer with
    /// [`SyncHub::handle_merge_ack`].
    Merge(MergeCmd),
    /// An eviction finished: the value is in `S_cp`, delete the switch slot.
    RemoveSwitchSlot {
        /// The entry.
        entry: EntryKey,
    },
    /// Send SYNC_REQ to `pdev`.
    SyncReq {
        /// The device.
        pdev: Pdev,
        /// The request.
        req: SyncReq,
    },
}

/// Counters of the hub's side.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HubStats {
    /// Rounds started.
    pub rounds: u64,
    /// Rounds closed by `T_rt` with some participant silent.
    pub rounds_timed_out: u64,
    /// SYNC_RESPs of another round or outside collection (discarded).
    pub resp_stale: u64,
    /// Second SYNC_RESPs from one device in a round (discarded).
    pub resp_duplicate: u64,
    /// SYNC_RESPs from a device not asked this round (discarded).
    pub resp_not_asked: u64,
    /// Messages with more than `max_items` items (discarded).
    pub resp_too_many: u64,
    /// Response items for entries not tracked or not held by the sender.
    pub items_unknown: u64,
    /// Lifecycle calls refused by a limit.
    pub refused: u64,
    /// MERGEs injected into the switch.
    pub merges: u64,
    /// Switch register reads issued.
    pub switch_reads: u64,
    /// Read results or MERGE_ACKs nobody waited for (entry deleted).
    pub late_results: u64,
}

/// Hub configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HubConfig {
    /// Round period `T_c`.
    pub t_c: Nanos,
    /// Response deadline `T_rt` (< `t_c`).
    pub t_rt: Nanos,
    /// Size limits.
    pub limits: Limits,
    #[doc(hidden)]
    pub variant: Variant,
}

impl Default for HubConfig {
    fn default() -> HubConfig {
        HubConfig {
            t_c: T_C,
            t_rt: T_RT,
            limits: Limits::default(),
            variant: Variant::Correct,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SwitchCopy {
    Absent,
    Present,
    /// The final read is in flight or waits for a pending merge.
    Evicting,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reading {
    Snapshot,
    Evict,
}

#[derive(Clone, Debug)]
struct Entry {
    merge: Merge,
    holders: BTreeSet<Pdev>,
    /// Latched when the entry first has two copies; from then on it is
    /// synchronised until DELETE (an evicted switch copy lives on in `S_cp`).
    shared: bool,
    h: BTreeMap<Pdev, u64>,
    s_cp: u64,
    switch: SwitchCopy,
    reading: Option<Reading>,
    merges_in_flight: u32,
    /// News of a round that ended while the eviction read was in flight.
    deferred: u64,
    acc: u64,
    snap: Option<u64>,
}

impl Entry {
    fn new(merge: Merge) -> Entry {
        Entry {
            merge,
            holders: BTreeSet::new(),
            shared: false,
            h: BTreeMap::new(),
            s_cp: merge.identity(),
            switch: SwitchCopy::Absent,
            reading: None,
            merges_in_flight: 0,
            deferred: merge.identity(),
            acc: merge.identity(),
            snap: None,
        }
    }

    fn copies(&self) -> usize {
        self.holders.len() + usize::from(self.switch != SwitchCopy::Absent)
    }
}

#[derive(Clone, Debug)]
enum Phase {
    Idle,
    Snapshotting {
        waiting: BTreeSet<EntryKey>,
    },
    Collecting {
        deadline: Nanos,
        /// Participant → answered.
        asked: BTreeMap<Pdev, bool>,
    },
}

/// The hub's synchronisation state machine.
#[derive(Clone, Debug)]
pub struct SyncHub {
    cfg: HubConfig,
    round: Round,
    phase: Phase,
    next_round_at: Nanos,
    entries: BTreeMap<EntryKey, Entry>,
    status: BTreeMap<Pdev, DeviceStatus>,
    /// Shared entries per device (bounded by `max_items`).
    shared_per_dev: BTreeMap<Pdev, usize>,
    last_processed: BTreeMap<Pdev, Round>,
    out: VecDeque<HubOutput>,
    stats: HubStats,
}

impl SyncHub {
    /// A hub whose first round starts at `now + t_c`.
    pub fn new(now: Nanos, cfg: HubConfig) -> SyncHub {
        SyncHub {
            cfg,
            round: 0,
            phase: Phase::Idle,
            next_round_at: now + cfg.t_c,
            entries: BTreeMap::new(),
            status: BTreeMap::new(),
            shared_per_dev: BTreeMap::new(),
            last_processed: BTreeMap::new(),
            out: VecDeque::new(),
            stats: HubStats::default(),
        }
    }

    /// The current (last started) round; HELLO_ACK carries it.
    pub fn round(&self) -> Round {
        self.round
    }

    /// Counters.
    pub fn stats(&self) -> &HubStats {
        &self.stats
    }

    /// A device's status (UP until told otherwise).
    pub fn status(&self, pdev: Pdev) -> DeviceStatus {
        self.status.get(&pdev).copied().unwrap_or(DeviceStatus::Up)
    }

    /// The last round whose SYNC_RESP from `pdev` was processed.
    pub fn last_processed_round(&self, pdev: Pdev) -> Option<Round> {
        self.last_processed.get(&pdev).copied()
    }

    /// `S_cp[k]` if the entry is tracked.
    pub fn s_cp(&self, entry: &EntryKey) -> Option<u64> {
        self.entries.get(entry).map(|e| e.s_cp)
    }

    /// `H[pdev][k]` if the entry is shared and `pdev` holds it.
    pub fn history(&self, entry: &EntryKey, pdev: Pdev) -> Option<u64> {
        self.entries.get(entry)?.h.get(&pdev).copied()
    }

    /// Whether the entry is synchronised.
    pub fn is_shared(&self, entry: &EntryKey) -> bool {
        self.entries.get(entry).is_some_and(|e| e.shared)
    }

    /// Whether the switch holds the entry (installed, not yet evicted).
    pub fn switch_holds(&self, entry: &EntryKey) -> bool {
        self.entries
            .get(entry)
            .is_some_and(|e| e.switch != SwitchCopy::Absent)
    }

    /// Entries tracked.
    pub fn entries(&self) -> usize {
        self.entries.len()
    }

    /// The next output, if any.
    pub fn poll_output(&mut self) -> Option<HubOutput> {
        self.out.pop_front()
    }

    /// When [`SyncHub::handle_timeout`] must next be called.
    pub fn poll_timeout(&self) -> Nanos {
        match &self.phase {
            Phase::Collecting { deadline, .. } => (*deadline).min(self.next_round_at),
            _ => self.next_round_at,
        }
    }

    /// Time passed: close a round at its deadline, start one every `T_c`
    /// (a round still running at its successor's tick delays it).
    pub fn handle_timeout(&mut self, now: Nanos) {
        if let Phase::Collecting { deadline, asked } = &self.phase {
            if now >= *deadline {
                if asked.values().any(|answered| !answered) {
                    self.stats.rounds_timed_out += 1;
                }
                self.finish_round(now);
            }
        }
        if now >= self.next_round_at && matches!(self.phase, Phase::Idle) {
            self.start_round(now);
        }
    }

    /// A device becomes a holder of `entry` (a WRITE_APPLY or DUMP created
    /// its slot at `0̸`). The entry becomes shared when it has two copies.
    pub fn add_holder(
        &mut self,
        entry: &EntryKey,
        merge: Merge,
        pdev: Pdev,
    ) -> Result<(), SyncError> {
        if let Some(e) = self.entries.get(entry) {
            if e.merge != merge {
                self.stats.refused += 1;
                return Err(SyncError::MergeMismatch(e.merge));
            }
            if e.holders.contains(&pdev) {
                return Ok(());
            }
        }
        let mut e = self.take_or_new(entry, merge)?;
        e.holders.insert(pdev);
        let result = self.share_if_needed(&mut e, Some(pdev));
        if result.is_err() {
            e.holders.remove(&pdev);
        }
        self.put_back(entry, e);
        result
    }

    /// The switch installs `entry` (phase 1 of a two-phase insert): returns
    /// the value to install, `S_cp[k]` or `0̸` if untracked.
    pub fn switch_install(&mut self, entry: &EntryKey, merge: Merge) -> Result<u64, SyncError> {
        if let Some(e) = self.entries.get(entry) {
            if e.merge != merge {
                self.stats.refused += 1;
                return Err(SyncError::MergeMismatch(e.merge));
            }
            match e.switch {
                SwitchCopy::Present => return Err(SyncError::AlreadyInstalled),
                SwitchCopy::Evicting => return Err(SyncError::Evicting),
                SwitchCopy::Absent => {}
            }
        }
        let mut e = self.take_or_new(entry, merge)?;
        e.switch = SwitchCopy::Present;
        let result = self.share_if_needed(&mut e, None);
        if result.is_err() {
            e.switch = SwitchCopy::Absent;
        }
        let value = e.s_cp;
        self.put_back(entry, e);
        result.map(|()| value)
    }

    /// The switch evicts `entry` (refcount 0, after `T_flush`): once no
    /// MERGE is pending the register is read, folded into `S_cp` and a
    /// [`HubOutput::RemoveSwitchSlot`] follows.
    pub fn switch_evict(&mut self, now: Nanos, entry: &EntryKey) -> Result<(), SyncError> {
        let e = self.entries.get_mut(entry).ok_or(SyncError::Unknown)?;
        match e.switch {
            SwitchCopy::Absent => return Err(SyncError::NotInstalled),
            SwitchCopy::Evicting => return Ok(()),
            SwitchCopy::Present => e.switch = SwitchCopy::Evicting,
        }
        self.pump(entry);
        self.maybe_send(now);
        Ok(())
    }

    /// The switch refused the install `switch_install` answered: it does
    /// not hold the entry after all. `S_cp` stands (the switch added
    /// nothing); a snapshot read already issued for it is answered as late.
    pub fn switch_install_failed(&mut self, now: Nanos, entry: &EntryKey) {
        let Some(e) = self.entries.get_mut(entry) else {
            return;
        };
        if e.switch != SwitchCopy::Present {
            return;
        }
        e.switch = SwitchCopy::Absent;
        if e.reading == Some(Reading::Snapshot) {
            e.reading = None;
        }
        self.pump(entry);
        self.maybe_send(now);
    }

    /// DELETE: the entry is gone everywhere; drop its sync state.
    pub fn delete(&mut self, now: Nanos, entry: &EntryKey) {
        let Some(e) = self.entries.remove(entry) else {
            return;
        };
        if e.shared {
            for pdev in &e.holders {
                if let Some(n) = self.shared_per_dev.get_mut(pdev) {
                    *n = n.saturating_sub(1);
                }
            }
        }
        if let Phase::Snapshotting { waiting } = &mut self.phase {
            waiting.remove(entry);
        }
        self.maybe_send(now);
    }

    /// The device failed (port down or PING timeout): out of every round
    /// until it rejoins; its `H` stays.
    pub fn device_down(&mut self, now: Nanos, pdev: Pdev) {
        self.status.insert(pdev, DeviceStatus::Down);
        self.forget_participant(now, pdev);
    }

    /// The device restarted with lost state (HELLO `lost_state = 1`):
    /// status REBUILDING; returns the REJOIN payload to send after its
    /// DUMP, `H[pdev][k]` per shared entry it holds (`0̸` for semilattices,
    /// whose copies are refilled by the next round's snapshot).
    pub fn begin_rejoin(&mut self, now: Nanos, pdev: Pdev) -> Rejoin {
        self.status.insert(pdev, DeviceStatus::Rebuilding);
        self.forget_participant(now, pdev);
        let items = self
            .entries
            .iter()
            .filter(|(_, e)| e.shared && e.holders.contains(&pdev))
            .map(|(k, e)| {
                let h = match e.merge.algebra() {
                    Algebra::Group => e.h.get(&pdev).copied().unwrap_or(e.merge.identity()),
                    Algebra::Semilattice => e.merge.identity(),
                };
                (k.clone(), h)
            })
            .collect();
        Rejoin { items }
    }

    /// REJOIN_DONE: the device is UP and joins the next round.
    pub fn rejoin_done(&mut self, pdev: Pdev) {
        if self.status(pdev) == DeviceStatus::Rebuilding {
            self.status.insert(pdev, DeviceStatus::Up);
        }
    }

    /// The switch answered a [`HubOutput::ReadSwitch`].
    pub fn handle_switch_read(&mut self, now: Nanos, entry: &EntryKey, value: u64) {
        let Some(e) = self.entries.get_mut(entry) else {
            self.stats.late_results += 1;
            return;
        };
        let value = e.merge.canon(value);
        match e.reading.take() {
            Some(Reading::Snapshot) => {
                if let Phase::Snapshotting { waiting } = &mut self.phase {
                    if waiting.remove(entry) {
                        e.snap = Some(value);
                    }
                }
            }
            Some(Reading::Evict) => {
                e.s_cp = e.merge.combine(value, e.deferred);
                e.deferred = e.merge.identity();
                e.switch = SwitchCopy::Absent;
                self.out.push_back(HubOutput::RemoveSwitchSlot {
                    entry: entry.clone(),
                });
            }
            None => self.stats.late_results += 1,
        }
        self.pump(entry);
        self.maybe_send(now);
    }

    /// The switch's MERGE_ACK for `entry`.
    pub fn handle_merge_ack(&mut self, now: Nanos, entry: &EntryKey) {
        let Some(e) = self.entries.get_mut(entry) else {
            self.stats.late_results += 1;
            return;
        };
        if e.merges_in_flight == 0 {
            self.stats.late_results += 1;
            return;
        }
        e.merges_in_flight -= 1;
        self.pump(entry);
        self.maybe_send(now);
    }

    /// A SYNC_RESP from `pdev`.
    pub fn handle_sync_resp(&mut self, now: Nanos, pdev: Pdev, resp: &SyncResp) {
        let Phase::Collecting { asked, .. } = &mut self.phase else {
            self.stats.resp_stale += 1;
            return;
        };
        if resp.round != self.round {
            self.stats.resp_stale += 1;
            return;
        }
        match asked.get_mut(&pdev) {
            None => {
                self.stats.resp_not_asked += 1;
                return;
            }
            Some(true) => {
                self.stats.resp_duplicate += 1;
                return;
            }
            Some(answered) => {
                if resp.items.len() > self.cfg.limits.max_items {
                    self.stats.resp_too_many += 1;
                    return;
                }
                *answered = true;
            }
        }
        let variant = self.cfg.variant;
        for item in &resp.items {
            let Some(e) = self.entries.get_mut(&item.entry) else {
                self.stats.items_unknown += 1;
                continue;
            };
            let Some(h) = e.h.get_mut(&pdev) else {
                self.stats.items_unknown += 1;
                continue;
            };
            let m = e.merge;
            let (snap, i) = (m.canon(item.snap), m.canon(item.hist));
            let delta = match (m.algebra(), variant) {
                (Algebra::Group, Variant::NoHistory) => {
                    *h = sub(m, snap, i);
                    snap
                }
                (Algebra::Group, _) => {
                    let delta = sub(m, snap, m.combine(*h, i));
                    *h = sub(m, snap, i);
                    delta
                }
                (Algebra::Semilattice, _) => snap,
            };
            e.acc = m.combine(e.acc, delta);
        }
        self.last_processed.insert(pdev, self.round);
        self.finish_if_all_answered(now);
    }

    fn take_or_new(&mut self, entry: &EntryKey, merge: Merge) -> Result<Entry, SyncError> {
        match self.entries.remove(entry) {
            Some(e) => Ok(e),
            None if self.entries.len() >= self.cfg.limits.max_entries => {
                self.stats.refused += 1;
                Err(SyncError::TableFull(self.entries.len()))
            }
            None => Ok(Entry::new(merge)),
        }
    }

    fn put_back(&mut self, entry: &EntryKey, e: Entry) {
        // An entry nobody holds and that carries no value is not kept.
        if e.copies() == 0 && !e.shared {
            return;
        }
        self.entries.insert(entry.clone(), e);
    }

    /// Start tracking when the entry reaches two copies (all `H = 0̸`), or
    /// add the new holder's `H = 0̸` if it already is; both within limits.
    fn share_if_needed(&mut self, e: &mut Entry, new: Option<Pdev>) -> Result<(), SyncError> {
        let newly: Vec<Pdev> = if e.shared {
            new.into_iter().collect()
        } else if e.copies() >= 2 {
            e.holders.iter().copied().collect()
        } else {
            return Ok(());
        };
        let max = self.cfg.limits.max_items;
        if newly
            .iter()
            .any(|p| self.shared_per_dev.get(p).copied().unwrap_or(0) >= max)
        {
            self.stats.refused += 1;
            return Err(SyncError::TooManyItems(max));
        }
        e.shared = true;
        for p in newly {
            e.h.insert(p, e.merge.identity());
            *self.shared_per_dev.entry(p).or_insert(0) += 1;
        }
        Ok(())
    }

    fn forget_participant(&mut self, now: Nanos, pdev: Pdev) {
        if let Phase::Collecting { asked, .. } = &mut self.phase {
            asked.remove(&pdev);
        }
        self.finish_if_all_answered(now);
    }

    fn finish_if_all_answered(&mut self, now: Nanos) {
        if let Phase::Collecting { asked, .. } = &self.phase {
            if asked.values().all(|answered| *answered) {
                self.finish_round(now);
            }
        }
    }

    fn start_round(&mut self, now: Nanos) {
        self.round += 1;
        self.stats.rounds += 1;
        while self.next_round_at <= now {
            self.next_round_at += self.cfg.t_c;
        }
        let mut waiting = BTreeSet::new();
        for (k, e) in self.entries.iter_mut() {
            if e.shared {
                e.snap = None;
                e.acc = e.merge.identity();
                waiting.insert(k.clone());
            }
        }
        let keys: Vec<EntryKey> = waiting.iter().cloned().collect();
        self.phase = Phase::Snapshotting { waiting };
        for k in &keys {
            self.pump(k);
        }
        self.maybe_send(now);
    }

    /// Issue the entry's next switch read if it may go now: an eviction
    /// first, then a round snapshot; never while a MERGE is unacknowledged.
    fn pump(&mut self, entry: &EntryKey) {
        let Some(e) = self.entries.get_mut(entry) else {
            return;
        };
        let wanted = match &self.phase {
            Phase::Snapshotting { waiting } => waiting.contains(entry) && e.snap.is_none(),
            _ => false,
        };
        let gate_open = e.merges_in_flight == 0 || self.cfg.variant == Variant::ReadDuringMerge;
        let read = match e.switch {
            _ if e.reading.is_some() || !gate_open => None,
            SwitchCopy::Evicting => Some(Reading::Evict),
            SwitchCopy::Present if wanted => Some(Reading::Snapshot),
            SwitchCopy::Present => None,
            SwitchCopy::Absent => {
                if wanted {
                    e.snap = Some(e.s_cp);
                    if let Phase::Snapshotting { waiting } = &mut self.phase {
                        waiting.remove(entry);
                    }
                }
                None
            }
        };
        if let Some(r) = read {
            e.reading = Some(r);
            self.stats.switch_reads += 1;
            self.out.push_back(HubOutput::ReadSwitch {
                entry: entry.clone(),
            });
        }
    }

    /// Once every snapshot is in, send each UP holder its SYNC_REQ.
    fn maybe_send(&mut self, now: Nanos) {
        match &self.phase {
            Phase::Snapshotting { waiting } if waiting.is_empty() => {}
            _ => return,
        }
        let mut reqs: BTreeMap<Pdev, Vec<SyncItem>> = BTreeMap::new();
        for (k, e) in &self.entries {
            let Some(snap) = e.snap.filter(|_| e.shared) else {
                continue;
            };
            for &pdev in &e.holders {
                if self.status(pdev) != DeviceStatus::Up {
                    continue;
                }
                let hist = match e.merge.algebra() {
                    Algebra::Group => e.h.get(&pdev).copied().unwrap_or(e.merge.identity()),
                    Algebra::Semilattice => 0,
                };
                reqs.entry(pdev).or_default().push(SyncItem {
                    entry: k.clone(),
                    snap,
                    hist,
                });
            }
        }
        let asked = reqs.keys().map(|&p| (p, false)).collect();
        for (pdev, items) in reqs {
            self.out.push_back(HubOutput::SyncReq {
                pdev,
                req: SyncReq {
                    round: self.round,
                    items,
                },
            });
        }
        self.phase = Phase::Collecting {
            deadline: now + self.cfg.t_rt,
            asked,
        };
        self.finish_if_all_answered(now);
    }

    /// Step 4: one MERGE per entry with news (or into `S_cp`).
    fn finish_round(&mut self, now: Nanos) {
        self.phase = Phase::Idle;
        for (k, e) in self.entries.iter_mut() {
            let m = e.merge;
            let acc = std::mem::replace(&mut e.acc, m.identity());
            let snap = e.snap.take();
            if acc == m.identity() {
                continue;
            }
            // A semilattice snapshot that already covers the news needs no MERGE.
            if m.algebra() == Algebra::Semilattice
                && snap.is_some_and(|s| m.combine(s, acc) == s)
                && e.switch == SwitchCopy::Present
            {
                continue;
            }
            match e.switch {
                SwitchCopy::Present => {
                    e.merges_in_flight += 1;
                    self.stats.merges += 1;
                    self.out.push_back(HubOutput::Merge(MergeCmd {
                        entry: k.clone(),
                        merge: m,
                        round: self.round,
                        delta: acc,
                    }));
                }
                SwitchCopy::Absent => e.s_cp = m.combine(e.s_cp, acc),
                SwitchCopy::Evicting => e.deferred = m.combine(e.deferred, acc),
            }
        }
        // Reads (evictions) held back by nothing now may go.
        let keys: Vec<EntryKey> = self.entries.keys().cloned().collect();
        for k in &keys {
            self.pump(k);
        }
        if now >= self.next_round_at {
            self.start_round(now);
        }
    }
}
