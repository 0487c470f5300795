//! Bounded-inconsistency synchronisation of shared data-plane-updatable
//! entries (specs/exoplane.md §5.6, the thesis's Algorithms 3 and 4).
//!
//! Every shared register entry has one copy per holder: the switch (or,
//! while the switch does not hold it, the hub's software copy `S_cp`) and
//! each external device. The hub is the centre of a star. Every `T_c` it
//! reads the switch snapshot of each shared entry, sends each live holder
//! the snapshot and the holder's recorded history `H[e][k]`, and folds the
//! replies' deltas into the switch with one MERGE per entry. Each daemon
//! answers with its own snapshot and its history of everything else,
//! `I_e[k]`, and merges the switch's news into its own copy. The invariant
//! kept on both sides:
//!
//! - switch snapshot = own_switch ⊕ (⊕_e `H[e][k]`),
//! - device snapshot = own_e ⊕ `I_e[k]`,
//!
//! so every delta is exact, and a lost, duplicated or reordered message
//! only delays propagation. No snapshot is read while a MERGE of the same
//! entry is unacknowledged.
//!
//! - [`merge`] — the operators (ADD/SUB, OR, MAX) and their algebra.
//! - [`hub`] — the hub's side (Algorithm 3): rounds, `H`, `S_cp`, pending
//!   merges, the switch copy's lifecycle, device status and REJOIN.
//! - [`daemon`] — a device daemon's side (Algorithm 4): `last_round`,
//!   `I_e`, pending merges, replies and REJOIN.
//!
//! Both are sans-IO state machines: a driver calls their `handle_*`
//! methods with `now`, then drains `poll_output`; register reads, MERGE
//! injections and control messages are outputs, their results inputs.

pub mod daemon;
pub mod hub;
pub mod merge;

use crate::ids::Round;
use inca_switch::device::Nanos;

pub use daemon::{Daemon, DaemonOutput, DaemonStats};
pub use hub::{DeviceStatus, HubOutput, HubStats, SyncHub};
pub use merge::{Algebra, Merge, MergeError, MergeOp, Width};

/// Sync period `T_c` (model input, Thesis §4.3.3: 1 s).
pub const T_C: Nanos = 1_000_000_000;

/// How long the hub waits for SYNC_RESPs of a round, `T_rt`
/// ([our choice], specs/exoplane.md §5.6: 500 ms).
pub const T_RT: Nanos = 500_000_000;

/// Shared entries the hub tracks at most [our choice: 2^20, ~100× the
/// 10,240 FM entries of the thesis's evaluation, §2.1].
pub const MAX_ENTRIES: usize = 1 << 20;

/// Items in one SYNC_REQ, SYNC_RESP or REJOIN at most, so also the shared
/// entries one device may hold [our choice: 2^16; the wire's `n` is 32 b,
/// but a round's request must be one message because the daemon rejects a
/// second message of the same round].
pub const MAX_ITEMS: usize = 1 << 16;

pub use crate::ids::EntryKey;

/// One item of a SYNC_REQ or SYNC_RESP (§4.6: `obj`, Key, `snap`, `hist`).
/// It carries the app as well: §4.6's item has no `app`, which only names
/// an entry if object ids are unique across the merged program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncItem {
    /// The entry.
    pub entry: EntryKey,
    /// The sender's snapshot of the entry.
    pub snap: u64,
    /// Request: `H[e][k]`; response: the *old* `I_e[k]`; 0 for semilattices.
    pub hist: u64,
}

/// SYNC_REQ (0x30, hub → daemon).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncReq {
    /// The round.
    pub round: Round,
    /// One item per shared entry the device holds.
    pub items: Vec<SyncItem>,
}

/// SYNC_RESP (0x31, daemon → hub).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncResp {
    /// The round of the request it answers.
    pub round: Round,
    /// One item per requested entry the device still holds.
    pub items: Vec<SyncItem>,
}

/// REJOIN (0x42, hub → rebuilt daemon): `H[e][k]` per shared entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rejoin {
    /// `(entry, H[e][k])`.
    pub items: Vec<(EntryKey, u64)>,
}

/// A MERGE injection (§4.3): `reg[entry] ⊕= delta`, answered by MERGE_ACK.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergeCmd {
    /// The entry (the driver maps it to its slot).
    pub entry: EntryKey,
    /// The operator and width.
    pub merge: Merge,
    /// The round that produced the delta.
    pub round: Round,
    /// The delta.
    pub delta: u64,
}

/// `a ⊖ b` for a group operator; callers have checked the algebra, so
/// the semilattice fallback (`a`) is never taken.
pub(crate) fn sub(m: Merge, a: u64, b: u64) -> u64 {
    m.inverse(a, b).unwrap_or(a)
}

/// Size limits of one side [our choice, see [`MAX_ENTRIES`], [`MAX_ITEMS`]].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Entries tracked at most.
    pub max_entries: usize,
    /// Items per message at most (and shared entries per device).
    pub max_items: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_entries: MAX_ENTRIES,
            max_items: MAX_ITEMS,
        }
    }
}

/// Deliberately broken variants, for tests that show the checkers catch
/// them. Not part of the normal API.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Variant {
    /// The algorithm as specified.
    #[default]
    Correct,
    /// Merge without history: δ = Snap_other instead of Snap ⊖ (H ⊕ I).
    NoHistory,
    /// A rebuilt device restarts its registers at 0̸ instead of `H`.
    RestartAtZero,
    /// Snapshots are read while a MERGE of the entry is unacknowledged.
    ReadDuringMerge,
}

/// Why a lifecycle call or message was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SyncError {
    /// Tracking one more entry would exceed `max_entries`.
    #[error("sync table full ({0} entries)")]
    TableFull(usize),
    /// The device would hold more shared entries than one message carries.
    #[error("device holds {0} shared entries, the most one message carries")]
    TooManyItems(usize),
    /// The entry is tracked with a different operator.
    #[error("entry already tracked with {0:?}")]
    MergeMismatch(Merge),
    /// The entry is not tracked.
    #[error("entry not tracked")]
    Unknown,
    /// The switch already holds the entry.
    #[error("switch already holds the entry")]
    AlreadyInstalled,
    /// The switch does not hold the entry.
    #[error("switch does not hold the entry")]
    NotInstalled,
    /// The entry's switch copy is being evicted; retry after the slot is removed.
    #[error("switch copy is being evicted")]
    Evicting,
}
