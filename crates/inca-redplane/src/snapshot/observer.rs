//! Verification hook of bounded mode (spec §6.2 items 10 and 11): a shared
//! recorder that switches push events into, and the checker over them.
//!
//! A [`crate::snapshot::BoundedSwitch`] with a recorder attached records:
//! - `Flip`: for each partition it sends in a burst, the ground truth of
//!   that partition at the instant the burst's packet 0 flipped `active`
//!   (kept by a plain reference model beside the registers, not read back
//!   from them, so a wrong snapshot cannot agree with itself);
//! - `Committed`: the first SNAPSHOT_ACK of a partition epoch;
//! - `Restored`: the snapshot a restore installed;
//! - `Epsilon`: the ε action fired.
//!
//! The driver (test, simulation campaign) adds `Failure` when it crashes a
//! switch. [`check_snapshots`] then says whether every restored snapshot is
//! one that existed (item 10) and is no older than ε + T_snap at the
//! failure, unless the ε action fired first (item 11).
//!
//! The recorder is `Arc<Mutex<_>>` so that it survives the switch's crash
//! (a crash restarts the program from a clone, which shares it) and can be
//! read by the driver while the simulation owns the switch.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

use inca_switch::Nanos;

use super::config::EpsilonAction;

/// One recorded event. See the module documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapEvent {
    /// Ground truth of a partition at a flip, for the partition epoch it was
    /// sent as. `values` is row-major (rows × n).
    Flip {
        /// The switch.
        switch: Ipv4Addr,
        /// Partition key (VLAN).
        partition: u16,
        /// Partition epoch.
        epoch: u16,
        /// When packet 0 flipped.
        flip_at: Nanos,
        /// The values.
        values: Vec<u32>,
    },
    /// A partition epoch committed at the store (first ack seen).
    Committed {
        /// The switch.
        switch: Ipv4Addr,
        /// Partition key.
        partition: u16,
        /// Partition epoch.
        epoch: u16,
        /// When the ack arrived.
        at: Nanos,
    },
    /// A partition restored from the store.
    Restored {
        /// The switch.
        switch: Ipv4Addr,
        /// Partition key.
        partition: u16,
        /// The committed epoch restored.
        epoch: u16,
        /// When the control plane installed it.
        at: Nanos,
        /// The values (row-major).
        values: Vec<u32>,
    },
    /// The ε action fired.
    Epsilon {
        /// The switch.
        switch: Ipv4Addr,
        /// Partition key.
        partition: u16,
        /// When.
        at: Nanos,
        /// What it did.
        action: EpsilonAction,
    },
    /// The driver crashed the switch.
    Failure {
        /// The switch.
        switch: Ipv4Addr,
        /// When.
        at: Nanos,
    },
}

/// Bound on recorded events; more are counted, not kept.
pub const MAX_EVENTS: usize = 1 << 20;

#[derive(Debug, Default)]
struct Log {
    events: Vec<SnapEvent>,
    dropped: u64,
}

/// The shared recorder. Cloning shares it.
#[derive(Debug, Clone, Default)]
pub struct SnapshotRecorder(Arc<Mutex<Log>>);

impl SnapshotRecorder {
    /// An empty recorder.
    pub fn new() -> Self {
        SnapshotRecorder::default()
    }

    /// Records an event (at most [`MAX_EVENTS`]).
    pub fn push(&self, e: SnapEvent) {
        if let Ok(mut log) = self.0.lock() {
            if log.events.len() < MAX_EVENTS {
                log.events.push(e);
            } else {
                log.dropped += 1;
            }
        }
    }

    /// Records that the driver crashed `switch` at `at`.
    pub fn failure(&self, switch: Ipv4Addr, at: Nanos) {
        self.push(SnapEvent::Failure { switch, at });
    }

    /// The events so far.
    pub fn events(&self) -> Vec<SnapEvent> {
        self.0.lock().map(|l| l.events.clone()).unwrap_or_default()
    }

    /// Events not kept because the log was full.
    pub fn dropped(&self) -> u64 {
        self.0.lock().map(|l| l.dropped).unwrap_or(0)
    }
}

/// What [`check_snapshots`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotCheck {
    /// Restores checked.
    pub restores: usize,
    /// Restores of a snapshot some switch had sent (fresh partitions
    /// restored as empty are not counted here).
    pub from_commits: usize,
    /// Violations, each a sentence.
    pub violations: Vec<String>,
}

/// A recorded flip: switch, flip time, values.
type FlipRef<'a> = (Ipv4Addr, Nanos, &'a [u32]);

/// Checks §6.2 items 10 and 11 over recorded `events` (in time order). See
/// the module documentation.
///
/// A restore of epoch e of partition q must equal the ground truth some
/// switch recorded for (q, e) at its flip (the switch may have crashed
/// before it saw the store's ack, so its own `Committed` is not required);
/// an epoch no switch sent may only be restored as all zeros (a partition
/// the store has never seen) [our choice]. If a switch that had replicated
/// q failed before the restore, the restored flip must be no earlier than
/// failure − ε − T_snap, or that switch's ε action for q must have fired by
/// the failure.
pub fn check_snapshots(events: &[SnapEvent], epsilon: Nanos, t_snap: Nanos) -> SnapshotCheck {
    let mut out = SnapshotCheck::default();
    // (partition, epoch) -> [(switch, flip_at, values)]
    let mut flips: BTreeMap<(u16, u16), Vec<FlipRef<'_>>> = BTreeMap::new();
    // partition -> switches that replicated it, with the last flip time
    let mut owners: BTreeMap<u16, BTreeMap<Ipv4Addr, Nanos>> = BTreeMap::new();
    let mut failures: Vec<(Ipv4Addr, Nanos)> = Vec::new();
    let mut fired: BTreeMap<(Ipv4Addr, u16), Nanos> = BTreeMap::new();
    for e in events {
        match e {
            SnapEvent::Flip {
                switch,
                partition,
                epoch,
                flip_at,
                values,
            } => {
                flips
                    .entry((*partition, *epoch))
                    .or_default()
                    .push((*switch, *flip_at, values));
                owners
                    .entry(*partition)
                    .or_default()
                    .insert(*switch, *flip_at);
            }
            SnapEvent::Committed { .. } => {}
            SnapEvent::Epsilon {
                switch,
                partition,
                at,
                ..
            } => {
                fired.entry((*switch, *partition)).or_insert(*at);
            }
            SnapEvent::Failure { switch, at } => failures.push((*switch, *at)),
            SnapEvent::Restored {
                switch,
                partition,
                epoch,
                at,
                values,
            } => {
                out.restores += 1;
                let key = (*partition, *epoch);
                let sent = flips.get(&key);
                let flip = sent.and_then(|fs| fs.iter().find(|(_, _, v)| *v == values.as_slice()));
                match (&flip, sent.is_none()) {
                    (Some(_), _) => out.from_commits += 1,
                    (None, true) if values.iter().all(|&v| v == 0) => {}
                    (None, true) => out.violations.push(format!(
                        "{switch} restored partition {partition} epoch {epoch} at {at} ns, which no switch sent"
                    )),
                    (None, false) => out.violations.push(format!(
                        "{switch} restored partition {partition} epoch {epoch} at {at} ns with values that differ from the ground truth at that epoch's flip"
                    )),
                }
                // Staleness against the latest failure of a switch that had
                // committed this partition.
                let (Some(ows), Some(flip)) = (owners.get(partition), flip) else {
                    continue;
                };
                let failure = failures
                    .iter()
                    .filter(|(s, t)| t <= at && ows.contains_key(s) && s != switch)
                    .max_by_key(|(_, t)| *t)
                    .or_else(|| {
                        failures
                            .iter()
                            .filter(|(s, t)| t <= at && ows.contains_key(s))
                            .max_by_key(|(_, t)| *t)
                    });
                let Some(&(failed, ft)) = failure else {
                    continue;
                };
                let flip_at = flip.1;
                let fresh_enough = flip_at + epsilon + t_snap >= ft;
                let acted = fired.get(&(failed, *partition)).is_some_and(|&t| t <= ft);
                if !fresh_enough && !acted {
                    out.violations.push(format!(
                        "{switch} restored partition {partition} epoch {epoch} (flip at {flip_at} ns) after {failed} failed at {ft} ns: older than ε + T_snap and no ε action fired"
                    ));
                }
            }
        }
    }
    out
}
